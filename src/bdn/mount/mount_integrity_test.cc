// The mount never serves bytes a version does not have, and a crafted version never makes it
// index past a buffer (issue 7: a single-chunk file declared 4 GiB overflowed the chunk list in
// ChunkCache::Request): every chunk list is checked when loaded, every chunk's real length when
// fetched.
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <functional>

#include "bdn/mount/mount_test_support.h"
#include "bdn/mount/volume_reader.h"
#include "bdn/volume/crafted_versions_test_util.h"

namespace bdn {
namespace {
using namespace mount_testing;  // NOLINT: test helpers

const Digest kHello = Digest::Of(std::string_view("hello\n"));

std::shared_ptr<VersionView> OpenCrafted(const std::shared_ptr<ChunkStore>& store,
                                         const std::string& name) {
  testing::CraftedVersion v = testing::Craft(name);
  EXPECT_TRUE(testing::StoreCrafted(*store, v).ok());
  auto view = VersionView::Open(store, v.digest);
  EXPECT_TRUE(view.has_value()) << view.error().message();
  return view ? *view : nullptr;
}

// Runs `fn` in a forked child and returns what it wrote into its buffer. The mount under test is
// served by this process's threads: if one of them dies on a sanitizer finding, this process
// must exit at once, not wait in the kernel for an answer from itself, so the reads go through a
// child. `fn` may only make system calls and snprintf into the buffer (the child of a threaded
// process must not allocate). Fails the test if the child gives no answer within 30 s.
std::string InChild(const std::function<void(char* out, size_t size)>& fn) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only the pipe stays open: a child holding the mount's /dev/fuse descriptor would keep the
    // connection alive after this process died, and wait for an answer forever.
    if (::dup2(fds[1], STDOUT_FILENO) < 0 || ::close_range(3, ~0U, 0) != 0) ::_exit(1);
    char out[512] = {};
    fn(out, sizeof out);
    (void)!::write(STDOUT_FILENO, out, ::strnlen(out, sizeof out));
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  pollfd pfd{.fd = fds[0], .events = POLLIN, .revents = 0};
  while (::poll(&pfd, 1, 30000) == 1) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the reading child failed";
  return got;
}

MountOptions Options() {
  MountOptions o;
  o.read_timeout = std::chrono::seconds(5);
  o.prefetch_indexes = false;
  return o;
}

// The mount has no chunk-index cache of its own: an index it loads (through the ChunkCache,
// with its deadline) is kept by the VersionView, where every other reader of the view finds it.
TEST(MountChunkIndexes, AnIndexTheMountLoadsIsTheViewsOne) {
  auto store = std::make_shared<FaultyStore>();
  VersionBuilder b(*store);
  b.File("big.bin", RandomBytes(300'000, 9), 0644, {65536});
  auto view = *VersionView::Open(store, b.Finish());
  const Entry& f = *view->Find("big.bin");
  ASSERT_EQ(view->KnownChunks(f), nullptr);
  VolumeReader reader(view, Options());
  const int before = store->gets;
  auto fc = reader.ChunksOf(f, reader.Deadline());
  ASSERT_TRUE(fc.has_value()) << fc.error().ToString();
  EXPECT_EQ(store->gets, before + 1);  // the index, once
  EXPECT_EQ(view->KnownChunks(f), *fc);
  auto again = view->ChunksOf(f);  // pull, cat and verify read the same list, without a fetch
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *fc);
  VolumeReader second(view, Options());
  EXPECT_EQ(second.KnownChunks(f), *fc);
  EXPECT_EQ(store->gets, before + 1);
  EXPECT_EQ((*fc)->chunks, b.chunk_lists.at("big.bin"));
}

TEST(MountIntegrity, AChunkShorterThanItsListingIsCorruptionNotAnOverflow) {
  auto store = std::make_shared<MemChunkStore>();
  auto view = OpenCrafted(store, "overlong-chunks");
  ASSERT_NE(view, nullptr);
  VolumeReader reader(view, Options());
  const Entry& f = *view->Find("f.bin");
  auto fc = reader.ChunksOf(f, reader.Deadline());
  ASSERT_TRUE(fc.has_value()) << fc.error().message();  // the lengths add up to the size
  for (auto pattern : {AccessPattern::kRandom, AccessPattern::kSequential}) {
    auto held = reader.Chunks(**fc, 12, 20, pattern, reader.Deadline());
    ASSERT_FALSE(held.has_value());
    EXPECT_EQ(held.error().code(), StatusCode::kCorruption);
    EXPECT_EQ(held.error().message(),
              "chunk " + kHello.ToString() + ": is 6 bytes, the version says 10");
    // Nothing of the wrong length is ever held for a reader.
    EXPECT_FALSE(reader.ChunksNow(**fc, 0, 20, pattern).has_value());
  }
}

TEST(MountIntegrity, SingleChunkFileLongerThanItsChunkIsCorruption) {
  auto store = std::make_shared<MemChunkStore>();
  auto view = OpenCrafted(store, "overlong-single");
  ASSERT_NE(view, nullptr);
  VolumeReader reader(view, Options());
  auto fc = reader.KnownChunks(*view->Find("f.bin"));
  ASSERT_NE(fc, nullptr);
  auto held = reader.Chunks(*fc, 900, 999, AccessPattern::kRandom, reader.Deadline());
  ASSERT_FALSE(held.has_value());
  EXPECT_EQ(held.error().message(),
            "chunk " + kHello.ToString() + ": is 6 bytes, the version says 999");
}

TEST(MountIntegrity, AChunkIndexListingChunksLongerThanTheChunkerAllowsIsRefusedAtOpen) {
  auto store = std::make_shared<MemChunkStore>();
  ASSERT_TRUE(store->Put(kHello, Bytes("hello\n")).ok());
  // Lengths that add up to the size, but one chunk is 4 GiB - 1: a list no reader can hold.
  std::string index = EncodeChunkIndex(std::vector<ChunkRef>{{kHello, 0xffffffff}, {kHello, 1}});
  ASSERT_TRUE(store->Put(Digest::Of(index), Bytes(index)).ok());
  Manifest m;
  Entry e;
  e.path = "f.bin";
  e.kind = EntryKind::kFile;
  e.mode = 0644;
  e.size_bytes = 0x100000000ull;
  e.layout = FileLayout::kIndexed;
  e.digest = kHello;
  e.index = Digest::Of(index);
  m.entries = {e};
  std::string bytes = *EncodeManifest(m);
  ASSERT_TRUE(store->Put(Digest::Of(bytes), Bytes(bytes)).ok());
  auto view = *VersionView::Open(store, Digest::Of(bytes));
  VolumeReader reader(view, Options());
  const Entry& f = *view->Find("f.bin");
  EXPECT_EQ(reader.KnownChunks(f), nullptr);
  auto fc = reader.ChunksOf(f, reader.Deadline());
  ASSERT_FALSE(fc.has_value());
  EXPECT_EQ(fc.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(fc.error().message(), "file \"f.bin\": chunk " + kHello.ToString() +
                                      " of 4294967295 bytes is longer than the chunker maximum "
                                      "262144");
}

TEST(MountIntegrity, AMountedLyingFileGivesEioAndTheRestReads) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  auto store = std::make_shared<MemChunkStore>();
  auto view = OpenCrafted(store, "overlong-chunks");
  ASSERT_NE(view, nullptr);
  MountOptions options = Options();
  options.mountpoint = dir.path() / "mnt";
  fs::create_directories(options.mountpoint);
  InProcessMount mount;
  ASSERT_TRUE(mount.Start(view, options).ok());
  const std::string lying = (options.mountpoint / "f.bin").string();
  const std::string honest = (options.mountpoint / "ok.txt").string();
  // Each read: its return value and errno; then the honest file's bytes.
  std::string got = InChild([&](char* out, size_t size) {
    char buf[64] = {};
    int fd = ::open(lying.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t a = ::pread(fd, buf, sizeof buf, 0);
    int ea = errno;
    ssize_t b = ::pread(fd, buf, 4, 16);
    int eb = errno;
    ::close(fd);
    fd = ::open(honest.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t c = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    std::snprintf(out, size, "open %d, read %zd %d, read %zd %d, ok.txt %zd %s", fd >= 0 ? 0 : -1,
                  a, ea, b, eb, c, c > 0 ? buf : "");
  });
  EXPECT_EQ(got, "open 0, read -1 " + std::to_string(EIO) + ", read -1 " + std::to_string(EIO) +
                     ", ok.txt 5 fine\n");
  EXPECT_TRUE(mount.Stop().ok());
}

// Sizes near the 2^63-1 limit reach stat and statfs as they are (st_blocks was computed as
// (size + 511) / 512, a signed overflow), and the file's open fails: its index does not cover it.
TEST(MountIntegrity, TheLargestFileSizeStatsWithoutOverflow) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  auto store = std::make_shared<MemChunkStore>();
  ASSERT_TRUE(store->Put(kHello, Bytes("hello\n")).ok());
  std::string index = EncodeChunkIndex(std::vector<ChunkRef>{{kHello, 6}});
  ASSERT_TRUE(store->Put(Digest::Of(index), Bytes(index)).ok());
  Manifest m;
  for (const char* path : {"a.bin", "b.bin"}) {
    Entry e;
    e.path = path;
    e.kind = EntryKind::kFile;
    e.mode = 0644;
    e.size_bytes = kMaxFileBytes;
    e.layout = FileLayout::kIndexed;
    e.digest = kHello;
    e.index = Digest::Of(index);
    m.entries.push_back(e);
  }
  std::string bytes = *EncodeManifest(m);
  ASSERT_TRUE(store->Put(Digest::Of(bytes), Bytes(bytes)).ok());
  auto view = *VersionView::Open(store, Digest::Of(bytes));
  MountOptions options = Options();
  options.mountpoint = dir.path() / "mnt";
  fs::create_directories(options.mountpoint);
  InProcessMount mount;
  ASSERT_TRUE(mount.Start(view, options).ok());
  const std::string root = options.mountpoint.string();
  const std::string file = (options.mountpoint / "a.bin").string();
  std::string got = InChild([&](char* out, size_t size) {
    struct stat st {};
    int rs = ::stat(file.c_str(), &st);
    struct statvfs vfs {};
    int rv = ::statvfs(root.c_str(), &vfs);
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    std::snprintf(out, size, "stat %d size %lld blocks %lld, statvfs %d blocks %llu, open %d %d",
                  rs, static_cast<long long>(st.st_size), static_cast<long long>(st.st_blocks), rv,
                  static_cast<unsigned long long>(vfs.f_blocks), fd, fd < 0 ? errno : 0);
  });
  EXPECT_EQ(got, "stat 0 size " + std::to_string(INT64_MAX) + " blocks " +
                     std::to_string(INT64_MAX / 512 + 1) + ", statvfs 0 blocks " +
                     std::to_string((2 * kMaxFileBytes) / 4096 + 1) + ", open -1 " +
                     std::to_string(EIO));
  EXPECT_TRUE(mount.Stop().ok());
}

}  // namespace
}  // namespace bdn
