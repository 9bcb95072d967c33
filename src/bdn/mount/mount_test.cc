// Mounts hand-built versions for real (through the kernel) and checks what processes see.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/mount/mount_test_support.h"
#include "bdn/mount/volume_reader.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/store_test_util.h"
#include "bdn/volume/version_view.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

using namespace mount_testing;  // NOLINT: test helpers

enum class StoreKind { kMemory, kLocal };

// The standard tree, mounted fresh for each test.
class MountedTreeTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
    mountpoint_ = dir_.path() / "mnt";
    fs::create_directories(mountpoint_);
    if (GetParam() == StoreKind::kMemory) {
      mem_ = std::make_shared<MemChunkStore>();
      store_ = mem_;
    } else {
      auto local = LocalChunkStore::Open(dir_.path() / "store");
      ASSERT_TRUE(local.has_value());
      local_ = std::shared_ptr<LocalChunkStore>(std::move(*local));
      store_ = local_;
    }
    VersionBuilder b(*store_);
    b.Dir("bin");
    b.File("bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
    b.Dir("data", 0750);
    b.File("data/big.bin", RandomBytes(3'000'000, 1), 0644,
           {1000, 4096, 7, 65536, 12345, 300000, 1, 131072});
    b.File("data/medium.bin", RandomBytes(200'000, 2), 0600, {65536});
    // 2,500 chunks: a version-2 chunk index (pieces).
    b.File("data/pieces.bin", RandomBytes(2'500'000, 3), 0644, {1000});
    b.File("data/dup.bin", b.contents.at("data/medium.bin"), 0644, {65536});
    b.File("data/empty.txt", "", 0644);
    b.Dir("data/empty_dir", 0700);
    b.Hardlink("data/link_to_big", "data/big.bin");
    b.File("data/\xc3\xbcn\xc3\xaf.txt", "unicode name\n", 0644);
    b.Dir("models");
    b.Symlink("models/latest", "../data/big.bin");
    b.Symlink("models/abs", "/absolute/target with space");
    b.File("readme.md", "read me\n", 0444);
    digest_ = b.Finish();
    contents_ = b.contents;
    chunk_lists_ = b.chunk_lists;
    auto view = VersionView::Open(store_, digest_);
    ASSERT_TRUE(view.has_value()) << view.error().ToString();
    view_ = *view;
    MountOptions options;
    options.mountpoint = mountpoint_;
    options.fsname = "bdn:test/tree@" + digest_.ToString().substr(0, 15);
    Status s = mount_.Start(view_, options);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    Status s = mount_.Stop();
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(IsFuseMounted(mountpoint_));
  }

  fs::path P(const std::string& rel) const { return mountpoint_ / rel; }

  TempDir dir_;
  fs::path mountpoint_;
  std::shared_ptr<MemChunkStore> mem_;
  std::shared_ptr<LocalChunkStore> local_;
  std::shared_ptr<ChunkStore> store_;
  Digest digest_;
  std::map<std::string, std::string> contents_;
  std::map<std::string, std::vector<ChunkRef>> chunk_lists_;
  std::shared_ptr<VersionView> view_;
  InProcessMount mount_;
};

INSTANTIATE_TEST_SUITE_P(Stores, MountedTreeTest,
                         ::testing::Values(StoreKind::kMemory, StoreKind::kLocal),
                         [](const auto& info) {
                           return info.param == StoreKind::kMemory ? "Memory" : "Local";
                         });

TEST_P(MountedTreeTest, ReaddirListsEachDirectory) {
  EXPECT_EQ(ListDir(mountpoint_),
            (std::set<std::string>{".", "..", "bin", "data", "models", "readme.md"}));
  EXPECT_EQ(ListDir(P("data")), (std::set<std::string>{".", "..", "big.bin", "dup.bin", "empty.txt",
                                                       "empty_dir", "link_to_big", "medium.bin",
                                                       "pieces.bin", "\xc3\xbcn\xc3\xaf.txt"}));
  EXPECT_EQ(ListDir(P("data/empty_dir")), (std::set<std::string>{".", ".."}));
  EXPECT_EQ(ListDir(P("models")), (std::set<std::string>{".", "..", "abs", "latest"}));
}

TEST_P(MountedTreeTest, StatReportsSizesModesOwnerAndLinks) {
  struct stat st;
  ASSERT_EQ(::stat(mountpoint_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_ino, 1u);
  EXPECT_EQ(st.st_nlink, 5u);  // ".", "..", bin, data, models

  ASSERT_EQ(::stat(P("bin/run.sh").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_size, 18);
  EXPECT_EQ(::access(P("bin/run.sh").c_str(), X_OK), 0);

  ASSERT_EQ(::stat(P("data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_nlink, 3u);  // ".", "..", empty_dir

  ASSERT_EQ(::stat(P("data/big.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 3'000'000);
  EXPECT_EQ(st.st_blocks, (3'000'000 + 511) / 512);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_gid, ::getgid());
  EXPECT_EQ(st.st_mtim.tv_sec, 0);

  ASSERT_EQ(::stat(P("data/medium.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  ASSERT_EQ(::stat(P("data/empty.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(ReadWholeFile(P("data/empty.txt")), "");

  ASSERT_EQ(::stat(P("data/empty_dir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_nlink, 2u);

  ASSERT_EQ(::stat(P("readme.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);

  ASSERT_EQ(::lstat(P("models/latest").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, static_cast<off_t>(std::strlen("../data/big.bin")));

  errno = 0;
  EXPECT_NE(::stat(P("data/absent").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_NE(::stat(P("readme.md/x").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOTDIR);
}

TEST_P(MountedTreeTest, SymlinksReadTheirTargetVerbatim) {
  char buf[256];
  ssize_t n = ::readlink(P("models/latest").c_str(), buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n), "../data/big.bin");
  n = ::readlink(P("models/abs").c_str(), buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n), "/absolute/target with space");
  // Following the relative link reaches the file.
  EXPECT_EQ(ReadWholeFile(P("models/latest")), contents_.at("data/big.bin"));
}

TEST_P(MountedTreeTest, HardlinkSharesTheInodeOfItsTarget) {
  struct stat a, b, c;
  ASSERT_EQ(::stat(P("data/big.bin").c_str(), &a), 0);
  ASSERT_EQ(::stat(P("data/link_to_big").c_str(), &b), 0);
  ASSERT_EQ(::stat(P("data/medium.bin").c_str(), &c), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_NE(a.st_ino, c.st_ino);
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(b.st_nlink, 2u);
  EXPECT_EQ(c.st_nlink, 1u);
  EXPECT_EQ(ReadWholeFile(P("data/link_to_big")), contents_.at("data/big.bin"));
}

TEST_P(MountedTreeTest, WholeFilesReadBackExactly) {
  for (const auto& [path, content] : contents_) {
    EXPECT_EQ(ReadWholeFile(P(path)), content) << path;
  }
}

TEST_P(MountedTreeTest, AFileIndexedInPiecesReadsAtEveryOffset) {
  // The tree's data/pieces.bin has a version-2 chunk index.
  auto root = store_->Get(view_->Find("data/pieces.bin")->index);
  ASSERT_TRUE(root.has_value());
  auto decoded = DecodeChunkIndexObject(*root);
  ASSERT_TRUE(decoded.has_value());
  ASSERT_EQ(decoded->version, 2u);
  ASSERT_GT(decoded->pieces.size(), 5u);
  const std::string& want = contents_.at("data/pieces.bin");
  int fd = ::open(P("data/pieces.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // Reads that start in each piece and cross into the next.
  uint64_t offset = 0;
  for (const ChunkIndexPiece& p : decoded->pieces) {
    std::string buf(3000, '\0');
    const uint64_t at = offset + p.size_bytes - 1500;
    ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(at));
    const size_t expect = std::min<uint64_t>(buf.size(), want.size() - at);
    ASSERT_EQ(n, static_cast<ssize_t>(expect)) << at;
    EXPECT_EQ(buf.substr(0, expect), want.substr(at, expect)) << at;
    offset += p.size_bytes;
  }
  ::close(fd);
}

TEST_P(MountedTreeTest, PreadAtOddOffsetsAcrossChunkEdgesAndPastEof) {
  const std::string& want = contents_.at("data/big.bin");
  int fd = ::open(P("data/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint64_t> offsets = {0, 1, 999, 1000, 1001, 5095, 5096, 5103, 70000, 2'999'999};
  uint64_t edge = 0;
  for (const ChunkRef& c : chunk_lists_.at("data/big.bin")) {
    edge += c.size_bytes;
    if (edge < want.size()) {
      offsets.push_back(edge - 1);
      offsets.push_back(edge);
    }
  }
  std::vector<size_t> lengths = {1, 2, 7, 4096, 4097, 65537, 300001, 1 << 20};
  std::string buf(1 << 20, '\0');
  for (uint64_t off : offsets) {
    for (size_t len : lengths) {
      ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
      size_t expect = std::min<uint64_t>(len, want.size() - off);
      ASSERT_EQ(n, static_cast<ssize_t>(expect)) << "offset " << off << " length " << len;
      ASSERT_EQ(std::memcmp(buf.data(), want.data() + off, expect), 0)
          << "offset " << off << " length " << len;
    }
  }
  EXPECT_EQ(::pread(fd, buf.data(), 10, 3'000'000), 0);
  EXPECT_EQ(::pread(fd, buf.data(), 10, 5'000'000), 0);
  ::close(fd);
}

TEST_P(MountedTreeTest, ConcurrentRandomReadersGetCorrectBytes) {
  const std::string& big = contents_.at("data/big.bin");
  const std::string& medium = contents_.at("data/medium.bin");
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      bool use_big = t % 4 != 3;
      const std::string& want = use_big ? big : medium;
      int fd = ::open(P(use_big ? "data/big.bin" : "data/medium.bin").c_str(), O_RDONLY);
      if (fd < 0) {
        ++bad;
        return;
      }
      std::mt19937_64 rng(100 + t);
      std::string buf(400'000, '\0');
      for (int i = 0; i < 200; ++i) {
        uint64_t off = rng() % (want.size() + 1000);
        size_t len = 1 + rng() % buf.size();
        ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        size_t expect = off >= want.size() ? 0 : std::min<uint64_t>(len, want.size() - off);
        if (n != static_cast<ssize_t>(expect) ||
            (expect > 0 && std::memcmp(buf.data(), want.data() + off, expect) != 0)) {
          ++bad;
        }
        ++reads;
      }
      ::close(fd);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(reads, 1600);
}

TEST_P(MountedTreeTest, MmapReadsTheWholeFile) {
  const std::string& want = contents_.at("data/big.bin");
  int fd = ::open(P("data/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, want.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, want.data(), want.size()), 0);
  ::munmap(map, want.size());
  map = ::mmap(nullptr, want.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  // Touch pages backwards, the opposite of the readahead direction.
  const auto* p = static_cast<const uint8_t*>(map);
  for (size_t off = (want.size() - 1) / 4096 * 4096 + 1; off-- > 0;) {
    if (off % 4096 == 0 && p[off] != static_cast<uint8_t>(want[off])) {
      ADD_FAILURE() << "mismatch at " << off;
      break;
    }
  }
  ::munmap(map, want.size());
  ::close(fd);
}

TEST_P(MountedTreeTest, ModificationsFailWithEROFS) {
  auto expect_erofs = [](int rc, const char* what) {
    int err = errno;
    EXPECT_EQ(rc, -1) << what;
    EXPECT_EQ(err, EROFS) << what << ": " << std::strerror(err);
  };
  errno = 0;
  expect_erofs(::open(P("readme.md").c_str(), O_WRONLY), "open O_WRONLY");
  expect_erofs(::open(P("readme.md").c_str(), O_RDWR), "open O_RDWR");
  expect_erofs(::open(P("new.txt").c_str(), O_CREAT | O_WRONLY, 0644), "creat");
  expect_erofs(::mkdir(P("newdir").c_str(), 0755), "mkdir");
  expect_erofs(::unlink(P("readme.md").c_str()), "unlink");
  expect_erofs(::rmdir(P("data/empty_dir").c_str()), "rmdir");
  expect_erofs(::chmod(P("readme.md").c_str(), 0777), "chmod");
  expect_erofs(::chown(P("readme.md").c_str(), 1, 1), "chown");
  expect_erofs(::truncate(P("readme.md").c_str(), 0), "truncate");
  expect_erofs(::rename(P("readme.md").c_str(), P("other.md").c_str()), "rename");
  expect_erofs(::symlink("x", P("newlink").c_str()), "symlink");
  expect_erofs(::link(P("readme.md").c_str(), P("hard").c_str()), "link");
  expect_erofs(::setxattr(P("readme.md").c_str(), "user.x", "1", 1, 0), "setxattr");
  expect_erofs(::utimensat(AT_FDCWD, P("readme.md").c_str(), nullptr, 0), "utimensat");
  EXPECT_EQ(ReadWholeFile(P("readme.md")), "read me\n");
}

TEST_P(MountedTreeTest, CorruptChunkGivesEioAndOtherFilesStillRead) {
  // A large chunk in the middle of big.bin (1-byte chunks may be shared with other files).
  const auto& chunks = chunk_lists_.at("data/big.bin");
  uint64_t lo = 0;
  size_t k = 0;
  for (uint64_t off = 0; k < chunks.size(); off += chunks[k].size_bytes, ++k) {
    if (off > 1'500'000 && chunks[k].size_bytes >= 65536) {
      lo = off;
      break;
    }
  }
  ASSERT_LT(k, chunks.size());
  const ChunkRef bad = chunks[k];
  std::vector<uint8_t> garbage(bad.size_bytes, 0x5a);
  if (mem_) {
    mem_->CorruptForTest(bad.id, garbage);
  } else {
    ASSERT_TRUE(OverwriteStoredBlob(*local_, bad.id).ok());
  }

  testing::internal::CaptureStderr();
  int fd = ::open(P("data/big.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string buf(4096, '\0');
  errno = 0;
  EXPECT_EQ(::pread(fd, buf.data(), 100, static_cast<off_t>(lo + 10)), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("chunk " + bad.id.ToString() + ": digest mismatch"), std::string::npos) << log;
  EXPECT_NE(log.find("file \"data/big.bin\""), std::string::npos) << log;

  // The start of the same file, read without kernel readahead (which could reach the bad
  // chunk), still works, as do other files.
  fd = ::open(P("data/big.bin").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, buf.data(), 4096, 0), 4096);
  EXPECT_EQ(buf, contents_.at("data/big.bin").substr(0, 4096));
  ::close(fd);
  EXPECT_EQ(ReadWholeFile(P("data/medium.bin")), contents_.at("data/medium.bin"));
  EXPECT_EQ(ReadWholeFile(P("readme.md")), "read me\n");
}

TEST_P(MountedTreeTest, MountShowsInProcAndRaisesReadahead) {
  std::string mounts = ReadWholeFile("/proc/self/mounts");
  std::string want = "bdn:test/tree@" + digest_.ToString().substr(0, 15) + " " +
                     mountpoint_.string() + " fuse.bdn ro,";
  EXPECT_NE(mounts.find(want), std::string::npos) << mounts;
  struct stat st;
  ASSERT_EQ(::stat(mountpoint_.c_str(), &st), 0);
  std::string ra = ReadWholeFile("/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                                 std::to_string(minor(st.st_dev)) + "/read_ahead_kb");
  EXPECT_EQ(ra, "4096\n");
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(mountpoint_.c_str(), &vfs), 0);
  EXPECT_TRUE(vfs.f_flag & ST_RDONLY);
  EXPECT_EQ(vfs.f_files, view_->manifest().entries.size() + 1);
  EXPECT_GE(vfs.f_blocks * vfs.f_frsize, 3'000'000u + 400'000u);
  EXPECT_EQ(vfs.f_bavail, 0u);
}

TEST_P(MountedTreeTest, UnmountLeavesAnEmptyPlainDirectory) {
  int fd = ::open(P("readme.md").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  Status busy = Unmount(mountpoint_);
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();
  EXPECT_NE(busy.message().find("busy"), std::string::npos) << busy.ToString();
  ::close(fd);

  Status s = Unmount(mountpoint_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(mount_.Join().ok());
  EXPECT_FALSE(IsFuseMounted(mountpoint_));
  struct stat st;
  ASSERT_EQ(::stat(mountpoint_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(ListDir(mountpoint_), (std::set<std::string>{".", ".."}));

  Status again = Unmount(mountpoint_);
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(again.message(), "mountpoint " + mountpoint_.string() + ": not a bdn mount");
}

// A version-2 chunk index's pieces are asked for all at once: from a store that prefers batches
// they come in one request, not one each.
TEST(VolumeReaderPieces, APiecedIndexIsFetchedInFewBatches) {
  // Records the size of each batch asked for.
  struct BatchSizes : FaultyStore {
    Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
      {
        std::lock_guard lock(mu);
        sizes.push_back(ids.size());
      }
      return FaultyStore::GetMany(ids);
    }
    std::mutex mu;
    std::vector<size_t> sizes;
  };
  auto store = std::make_shared<BatchSizes>();
  store->batches = true;
  VersionBuilder b(*store);
  b.File("p.bin", RandomBytes(2'500'000, 4), 0644, {1000});
  const Digest digest = b.Finish();
  auto view = VersionView::Open(store, digest);
  ASSERT_TRUE(view.has_value()) << view.error().ToString();
  const Entry& e = *(*view)->Find("p.bin");
  auto root = store->inner.Get(e.index);
  ASSERT_TRUE(root.has_value());
  auto decoded = DecodeChunkIndexObject(*root);
  ASSERT_TRUE(decoded.has_value());
  ASSERT_EQ(decoded->version, 2u);
  ASSERT_GE(decoded->pieces.size(), 20u);
  MountOptions options;
  options.prefetch_indexes = false;
  VolumeReader reader(*view, options);
  const int before = store->get_manys;
  auto fc = reader.ChunksOf(e, reader.Deadline());
  ASSERT_TRUE(fc.has_value()) << fc.error().ToString();
  EXPECT_EQ((*fc)->chunks, b.chunk_lists.at("p.bin"));
  // The root, then every piece in one batch (each held until it is taken, none fetched twice).
  EXPECT_EQ(store->get_manys - before, 2);
  EXPECT_EQ(store->sizes, (std::vector<size_t>{1, decoded->pieces.size()}));
  reader.Stop();
}

TEST(Mount, RecordedMtimesAreReported) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  auto store = std::make_shared<MemChunkStore>();
  VersionBuilder b(*store);
  b.Dir("d");
  b.File("d/f", "x");
  Digest digest = b.Finish(int64_t{1'700'000'000'123'456'789});
  auto view = VersionView::Open(store, digest);
  ASSERT_TRUE(view.has_value());
  fs::create_directories(dir.path() / "mnt");
  InProcessMount mount;
  ASSERT_TRUE(mount.Start(*view, {.mountpoint = dir.path() / "mnt"}).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir.path() / "mnt/d/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1'700'000'000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 123'456'789);
  EXPECT_TRUE(mount.Stop().ok());
}

TEST(Mount, TenThousandFilesAreReadyInUnderOneSecond) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  auto store = std::make_shared<MemChunkStore>();
  VersionBuilder b(*store);
  // 90 directories of 100 files and one of 1,000 (its listing takes many readdir calls).
  for (int d = 0; d < 91; ++d) {
    std::string dn = "dir" + std::to_string(d);
    b.Dir(dn);
    for (int f = 0; f < (d == 90 ? 1000 : 100); ++f) {
      b.File(dn + "/file" + std::to_string(f), "content " + std::to_string(d * 100 + f));
    }
  }
  Digest digest = b.Finish();
  fs::path mp = dir.path() / "mnt";
  fs::create_directories(mp);

  auto t0 = std::chrono::steady_clock::now();
  auto view = VersionView::Open(store, digest);
  ASSERT_TRUE(view.has_value());
  ASSERT_EQ((*view)->manifest().entries.size(), 10'091u);
  InProcessMount mount;
  Status s = mount.Start(*view, {.mountpoint = mp});
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(::stat(mp.c_str(), &st), 0);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] 10,000-file volume: open + mount + first stat in %.1f ms\n",
              seconds * 1000);
  EXPECT_LT(seconds, 1.0);

  EXPECT_EQ(ListDir(mp / "dir42").size(), 102u);
  std::set<std::string> big = ListDir(mp / "dir90");
  EXPECT_EQ(big.size(), 1002u);
  EXPECT_TRUE(big.contains("file999"));
  EXPECT_EQ(ReadWholeFile(mp / "dir42/file7"), "content 4207");
  EXPECT_TRUE(mount.Stop().ok());
}

// The standard small tree for the daemon tests.
std::shared_ptr<VersionView> SmallView() {
  auto store = std::make_shared<MemChunkStore>();
  VersionBuilder b(*store);
  b.Dir("d");
  b.File("d/hello.txt", "hello from the daemon\n");
  b.File("weights.bin", RandomBytes(500'000, 3), 0644, {100'000});
  auto view = VersionView::Open(store, b.Finish());
  EXPECT_TRUE(view.has_value());
  return *view;
}

// Waits until `pid` has exited (it may linger as a zombie, since init reaps it).
bool WaitGone(pid_t pid, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (stat.empty()) return true;
    // A zombie leader is not enough: its other threads may still be exiting, and the process's
    // files (the /dev/fuse descriptor, whose close ends the mount's connection) are released
    // only when the last one has gone, i.e. when /proc/<pid>/task lists the leader alone.
    bool zombie = paren != std::string::npos && paren + 2 < stat.size() &&
                  (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
    if (zombie) {
      std::error_code ec;
      auto tasks =
          std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec);
      if (ec || std::distance(tasks, std::filesystem::directory_iterator()) <= 1) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(Mount, MountInBackgroundServesUntilUnmounted) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  fs::path mp = dir.path() / "mnt";
  fs::create_directories(mp);
  pid_t pid = -1;
  Status s = MountInBackground(SmallView(), {.mountpoint = mp, .fsname = "bdn:bg"}, &pid);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_GT(pid, 0);
  EXPECT_NE(pid, ::getpid());
  EXPECT_EQ(ReadWholeFile(mp / "d/hello.txt"), "hello from the daemon\n");
  ASSERT_TRUE(Unmount(mp).ok());
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(10)));
  EXPECT_EQ(ListDir(mp), (std::set<std::string>{".", ".."}));
}

TEST(Mount, MountInBackgroundReportsTheDaemonsError) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  fs::path file = dir.path() / "plain_file";
  std::ofstream(file) << "x";
  Status s = MountInBackground(SmallView(), {.mountpoint = file});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "mountpoint " + file.string() + ": not a directory");

  s = MountInBackground(SmallView(), {.mountpoint = dir.path() / "absent"});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
}

// A mountpoint below something that is not a directory names that thing (FailedPrecondition,
// exit 8, as a mountpoint that is itself a file), not a bare "Not a directory".
TEST(Mount, AMountpointBelowAFileNamesTheFile) {
  TempDir dir;
  const fs::path file = dir.path() / "plain_file";
  std::ofstream(file) << "x";
  auto state = InspectMountpoint(file / "sub" / "deeper");
  ASSERT_FALSE(state.has_value());
  EXPECT_EQ(state.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(state.error().message(), "mountpoint " + (file / "sub" / "deeper").string() + ": " +
                                         file.string() + " exists and is not a directory");
}

TEST(Mount, CleanDeadMountDetachesTheMountOfAKilledDaemon) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  TempDir dir;
  fs::path mp = dir.path() / "mnt";
  fs::create_directories(mp);
  auto no_dead_mount = CleanDeadMount(mp);
  ASSERT_TRUE(no_dead_mount.has_value());
  EXPECT_FALSE(*no_dead_mount);
  using Kind = MountpointState::Kind;
  auto state = InspectMountpoint(mp);
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, Kind::kNone);
  EXPECT_EQ(state->type, "");
  state = InspectMountpoint(dir.path() / "absent");
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, Kind::kNone);

  pid_t pid = -1;
  ASSERT_TRUE(
      MountInBackground(SmallView(), {.mountpoint = mp, .fsname = "bdn:t/v@b3:1"}, &pid).ok());
  EXPECT_EQ(ReadWholeFile(mp / "d/hello.txt"), "hello from the daemon\n");
  state = InspectMountpoint(mp);
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, Kind::kLiveBdn);
  EXPECT_EQ(state->type, "fuse.bdn");
  EXPECT_EQ(state->source, "bdn:t/v@b3:1");
  EXPECT_FALSE(state->allow_other);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WaitGone(pid, std::chrono::seconds(10)));
  // Dead at once, even while stat may still answer from the root's cached attributes.
  state = InspectMountpoint(mp);
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, Kind::kDead);
  EXPECT_EQ(state->source, "bdn:t/v@b3:1");
  // The root's attributes are cached for at most a second.
  struct stat st;
  int err = 0;
  for (int i = 0; i < 50 && err != ENOTCONN; ++i) {
    err = ::stat(mp.c_str(), &st) == 0 ? 0 : errno;
    if (err != ENOTCONN) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(err, ENOTCONN);
  state = InspectMountpoint(mp);
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, Kind::kDead);

  auto cleaned = CleanDeadMount(mp);
  ASSERT_TRUE(cleaned.has_value()) << cleaned.error().ToString();
  EXPECT_TRUE(*cleaned);
  ASSERT_EQ(::stat(mp.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_FALSE(IsFuseMounted(mp));
  EXPECT_EQ(ListDir(mp), (std::set<std::string>{".", ".."}));
  std::ofstream(mp / "usable") << "yes";
  EXPECT_EQ(ReadWholeFile(mp / "usable"), "yes");
  fs::remove(mp / "usable");

  // MountInBackground over a dead mount cleans it first, even right after the kill, while
  // stat still answers from cached attributes.
  ASSERT_TRUE(MountInBackground(SmallView(), {.mountpoint = mp}, &pid).ok());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WaitGone(pid, std::chrono::seconds(10)));
  pid_t pid2 = -1;
  Status s = MountInBackground(SmallView(), {.mountpoint = mp}, &pid2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadWholeFile(mp / "weights.bin").size(), 500'000u);

  // A live mount is not dead, and is not mounted over.
  auto live = CleanDeadMount(mp);
  ASSERT_TRUE(live.has_value());
  EXPECT_FALSE(*live);
  s = MountInBackground(SmallView(), {.mountpoint = mp});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  auto live_state = InspectMountpoint(mp);
  ASSERT_TRUE(live_state.has_value());
  EXPECT_EQ(s.message(), "mountpoint " + mp.string() + ": already a bdn mount of " +
                             live_state->source + "; unmount it first (bdn volume umount " +
                             mp.string() + ")");

  ASSERT_TRUE(Unmount(mp).ok());
  EXPECT_TRUE(WaitGone(pid2, std::chrono::seconds(10)));
}

TEST(Mount, FuseConfAllowsOtherFollowsFusermount3) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"user_allow_other\n", true},
      {"# comment\n  user_allow_other \t# yes\nmount_max = 10\n", true},
      {"#user_allow_other\n", false},
      {"user_allow_other_x\n", false},
      {"allow user_allow_other\n", false},
      {"mount_max = 10\nuser_allow_other", false},  // no newline: fusermount3 skips the line
      {"", false},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(FuseConfAllowsOther(text), want) << text;
}

// The lines of a real /proc/<pid>/task/<tid>/status around the signal masks, with SigPnd and
// ShdPnd set to `sig_pnd` and `shd_pnd`.
std::string ProcStatus(const std::string& sig_pnd, const std::string& shd_pnd) {
  return "Name:\treader\nState:\tD (disk sleep)\nTgid:\t4242\nPid:\t4243\nThreads:\t2\n"
         "SigQ:\t1/96365\nSigPnd:\t" +
         sig_pnd + "\nShdPnd:\t" + shd_pnd +
         "\nSigBlk:\t0000000000000100\nSigIgn:\t0000000000000100\n"
         "SigCgt:\t0000000000000100\nCapInh:\t0000000000000000\n";
}

TEST(Mount, StatusShowsSigkillPendingOnlyForSigkillInSigPndOrShdPnd) {
  const std::string zero = "0000000000000000";
  const std::vector<std::tuple<std::string, std::string, std::string, bool>> cases = {
      {"nothing pending", zero, zero, false},
      {"SIGKILL marked on the thread (a fatal signal)", "0000000000000100", zero, true},
      {"SIGKILL pending for the process", zero, "0000000000000100", true},
      {"SIGKILL on both", "0000000000000100", "0000000000000100", true},
      {"every signal but SIGKILL", "fffffffffffffeff", "fffffffffffffeff", false},
      {"every signal", "ffffffffffffffff", zero, true},
      {"SIGKILL with SIGTERM (a SIGTERM with no handler)", "0000000000004100", zero, true},
      {"SIGUSR1 (10: 0x200)", "0000000000000200", zero, false},
      {"SIGTERM (15: 0x4000)", zero, "0000000000004000", false},
      {"SIGSTOP (19) and SIGCHLD (17)", "0000000000050000", zero, false},
      {"SIGURG (23) and SIGWINCH (28)", zero, "0000000008400000", false},
      {"SIGALRM (14) and SIGHUP (1)", "0000000000002001", "0000000000002001", false},
      {"upper-case hex", "0000000000000F00", zero, true},
      {"a 128-signal mask (32 digits, lowest last)", "00000000000000000000000000000100", zero,
       true},
      {"a 128-signal mask with a high signal only", "00000000000001000000000000000000", zero,
       false},
      {"trailing blanks", "0000000000000100 \r", zero, true},
      {"not hex", "000000000000010g", zero, false},
      {"too short to hold signal 9", "00", zero, false},
      {"empty", "", "", false},
  };
  for (const auto& [what, sig_pnd, shd_pnd, want] : cases) {
    EXPECT_EQ(StatusShowsSigkillPending(ProcStatus(sig_pnd, shd_pnd)), want) << what;
  }
  // Only the SigPnd and ShdPnd lines count: SIGKILL in SigBlk, SigIgn or SigCgt (above) does
  // not, nor a line that only contains the name.
  EXPECT_FALSE(StatusShowsSigkillPending("SigBlk:\t0000000000000100\n"));
  EXPECT_FALSE(StatusShowsSigkillPending("XSigPnd:\t0000000000000100\n"));
  EXPECT_FALSE(StatusShowsSigkillPending("Name:\tSigPnd: 0000000000000100\n"));
  // The last line need not end with a newline; blanks after the colon are spaces or tabs.
  EXPECT_TRUE(StatusShowsSigkillPending("Pid:\t1\nShdPnd:  0000000000000100"));
  EXPECT_FALSE(StatusShowsSigkillPending(""));
}

TEST(Mount, ThreadIsDyingIsFalseForALiveThreadAndWhatCannotBeRead) {
  EXPECT_FALSE(ThreadIsDying(static_cast<pid_t>(::gettid())));
  EXPECT_FALSE(ThreadIsDying(::getpid()));
  EXPECT_FALSE(ThreadIsDying(0));  // a caller outside the daemon's pid namespace
  EXPECT_FALSE(ThreadIsDying(-1));
}

TEST(Mount, AllowOtherShowsInTheMountpointState) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  if (!CheckAllowOtherPermitted().ok()) GTEST_SKIP() << "allow_other is not permitted here";
  TempDir dir;
  fs::path mp = dir.path() / "mnt";
  fs::create_directories(mp);
  pid_t pid = -1;
  ASSERT_TRUE(MountInBackground(SmallView(), {.mountpoint = mp, .allow_other = true}, &pid).ok());
  auto state = InspectMountpoint(mp);
  ASSERT_TRUE(state.has_value()) << state.error().ToString();
  EXPECT_EQ(state->kind, MountpointState::Kind::kLiveBdn);
  EXPECT_TRUE(state->allow_other);
  ASSERT_TRUE(Unmount(mp).ok());
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(10)));
}

// Informative: sequential read of a 256 MiB file through the mount vs. from memory.
TEST(Mount, SequentialThroughput) {
  if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  // BDN_MOUNT_TEST_THROUGHPUT_MIB=1024 measures a larger file.
  const char* mib = std::getenv("BDN_MOUNT_TEST_THROUGHPUT_MIB");
  const size_t kSize = (mib ? std::strtoull(mib, nullptr, 10) : 256) << 20;
  TempDir dir;
  auto store = std::make_shared<MemChunkStore>();
  VersionBuilder b(*store);
  b.File("model.bin", RandomBytes(kSize, 7), 0644, {65536, 131072, 262144, 98304, 200000});
  auto view = VersionView::Open(store, b.Finish());
  ASSERT_TRUE(view.has_value());
  const std::string& content = b.contents.at("model.bin");
  fs::path mp = dir.path() / "mnt";
  fs::create_directories(mp);
  InProcessMount mount;
  ASSERT_TRUE(mount.Start(*view, {.mountpoint = mp}).ok());

  std::vector<uint8_t> buf(1 << 20);
  auto rate = [&](auto&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return kSize / s / (1 << 20);
  };
  double memcpy_rate = rate([&] {
    for (size_t off = 0; off < kSize; off += buf.size()) {
      std::memcpy(buf.data(), content.data() + off, buf.size());
    }
  });
  double view_rate = rate([&] {
    for (size_t off = 0; off < kSize; off += buf.size()) {
      ASSERT_TRUE((*view)->Read((*view)->manifest().entries[0], off, buf).has_value());
    }
  });
  bool same = false;
  auto read_mount = [&] {
    int fd = ::open((mp / "model.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ssize_t n;
    size_t total = 0;
    same = true;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
      same = same && total + n <= kSize &&
             std::memcmp(buf.data(), content.data() + total, static_cast<size_t>(n)) == 0;
      total += static_cast<size_t>(n);
    }
    ::close(fd);
    same = same && total == kSize;
  };
  double cold_rate = rate(read_mount);
  EXPECT_TRUE(same);
  double warm_rate = rate(read_mount);
  EXPECT_TRUE(same);
  double hash_rate = rate([&] { (void)Digest::Of(content); });
  std::printf(
      "[ timing   ] %zu MiB sequential, MiB/s: memcpy %.0f | VersionView::Read (store get + "
      "verify + copy) %.0f | mount cold %.0f | mount warm (page cache) %.0f | BLAKE3 alone "
      "%.0f\n",
      kSize >> 20, memcpy_rate, view_rate, cold_rate, warm_rate, hash_rate);
  EXPECT_TRUE(mount.Stop().ok());
}

}  // namespace
}  // namespace bdn
