// The mount never serves bytes a version does not have, and a crafted version never makes it
// index past a buffer (issue 7: a single-chunk file declared 4 GiB overflowed the chunk list in
// ChunkCache::Request): every chunk list is checked when loaded, every chunk's real length when
// fetched.
#include <gtest/gtest.h>

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

MountOptions Options() {
  MountOptions o;
  o.read_timeout = std::chrono::seconds(5);
  o.prefetch_indexes = false;
  return o;
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
    EXPECT_FALSE(reader.CachedChunks(**fc, 0, 20, pattern).has_value());
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
  {
    int fd = ::open((options.mountpoint / "f.bin").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char buf[64];
    errno = 0;
    EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), -1);
    EXPECT_EQ(errno, EIO);
    EXPECT_EQ(::pread(fd, buf, 4, 16), -1);
    EXPECT_EQ(errno, EIO);
    ::close(fd);
  }
  std::string line;
  {
    std::ifstream ok(options.mountpoint / "ok.txt");  // closed before the unmount
    std::getline(ok, line);
  }
  EXPECT_EQ(line, "fine");
  EXPECT_TRUE(mount.Stop().ok());
}

}  // namespace
}  // namespace bdn
