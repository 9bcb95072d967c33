// Real FUSE mounts reading through a NodeCache: a volume larger than the cache reads correctly,
// and what the node cache holds stays readable, across remounts, while the origin is down.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bdn/cache/node_cache.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/mount/mount_test_support.h"
#include "bdn/volume/version_view.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using namespace mount_testing;  // NOLINT: test helpers
using Clock = std::chrono::steady_clock;

// Short, for the tests about failing in time; tests of correct bytes use kPatientTimeout, so
// that a loaded machine cannot turn a slow read into a failure.
constexpr auto kReadTimeout = std::chrono::seconds(3);
constexpr auto kPatientTimeout = std::chrono::seconds(60);
constexpr uint64_t kPiece = 64 << 10;

// store_ plays the origin.
class NodeCacheMountTest : public FaultyStoreMountTest {
 protected:
  void SetUp() override {
    FaultyStoreMountTest::SetUp();
    if (IsSkipped()) return;
    VersionBuilder b(*store_);
    b.File("model.bin", RandomBytes(8 << 20, 21), 0644, {kPiece});
    b.File("config.json", "{\"hidden\": 4096}\n");
    digest_ = b.Finish();
    contents_ = b.contents;
    chunks_ = b.chunk_lists.at("model.bin");
  }

  // A NodeCache on the shared directory, a view through it, and a mount of that view; with
  // `fetch_threads` > 0, the mount's demand and prefetch threads (which store into the cache
  // concurrently) are that many each.
  Status Mount(uint64_t cache_bytes, std::chrono::milliseconds read_timeout = kReadTimeout,
               int fetch_threads = 0) {
    auto cache =
        NodeCache::Open(store_, {.dir = dir_.path() / "cache", .capacity_bytes = cache_bytes});
    if (!cache) return cache.error();
    cache_ = std::shared_ptr<NodeCache>(std::move(*cache));
    auto view = VersionView::Open(cache_, digest_);
    if (!view) return view.error();
    MountOptions options;
    options.memory_cache_bytes = 256 << 10;  // small: reads reach the node cache
    options.read_timeout = read_timeout;
    if (fetch_threads > 0) {
      options.fetch_threads = fetch_threads;
      options.prefetch_threads = fetch_threads;
    }
    return StartMount(*view, options);
  }

  Status Unmount() {
    Status s = StopMount();
    cache_.reset();
    return s;
  }

  Digest digest_;
  std::map<std::string, std::string> contents_;
  std::vector<ChunkRef> chunks_;
  std::shared_ptr<NodeCache> cache_;
};

TEST_F(NodeCacheMountTest, AVolumeLargerThanTheCacheReadsCorrectly) {
  constexpr int kThreads = 2;
  ASSERT_TRUE(Mount(2 << 20, kPatientTimeout, kThreads).ok());
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [path, content] : contents_) {
      int err = 0;
      std::string got = DirectRead(mountpoint_ / path, 0, content.size(), &err);
      ASSERT_EQ(err, 0) << path;
      ASSERT_TRUE(got == content) << path << " pass " << pass;
    }
  }
  NodeCacheStats s = cache_->stats();
  // The bound holds except by the chunks being stored concurrently (NodeCache's contract): one
  // per thread that stores, but the last one to check.
  EXPECT_LE(s.cached_bytes, (2 << 20) + (2 * kThreads - 1) * kPiece);
  EXPECT_GT(s.evictions, 0u);
}

TEST_F(NodeCacheMountTest, CachedChunksStayReadableWhileTheOriginIsDown) {
  ASSERT_TRUE(Mount(2 << 20).ok());
  int err = 0;
  std::string whole = DirectRead(mountpoint_ / "model.bin", 0, 8 << 20, &err);
  ASSERT_EQ(err, 0);
  ASSERT_TRUE(whole == contents_.at("model.bin"));
  // A chunk the node cache kept, and one it evicted, at least 1 MiB before the end of the file
  // (long gone from the 256 KiB memory cache). Which ones the 2 MiB node cache keeps depends on
  // the order the reads reached it in.
  int kept = -1;
  int evicted = -1;
  for (int i = 0; i + 16 < static_cast<int>(chunks_.size()); ++i) {
    (cache_->IsCached(chunks_[i].id) ? kept : evicted) = i;
  }
  ASSERT_GE(kept, 0);
  ASSERT_GE(evicted, 0);

  store_->set_mode(FaultyStore::Mode::kUnavailable);
  const std::string& want = contents_.at("model.bin");
  std::string got = DirectRead(mountpoint_ / "model.bin", kept * kPiece, kPiece, &err);
  EXPECT_EQ(err, 0);
  EXPECT_TRUE(got == want.substr(kept * kPiece, kPiece));

  // The store stays unavailable and the read is retried until its deadline: that it comes back
  // at all, with EIO, shows the read timeout ended it.
  got = DirectRead(mountpoint_ / "model.bin", evicted * kPiece, kPiece, &err);
  EXPECT_EQ(err, EIO);

  // The origin comes back: the same read works, with no remount.
  store_->set_mode(FaultyStore::Mode::kNormal);
  got = DirectRead(mountpoint_ / "model.bin", evicted * kPiece, kPiece, &err);
  EXPECT_EQ(err, 0);
  EXPECT_TRUE(got == want.substr(evicted * kPiece, kPiece));
}

TEST_F(NodeCacheMountTest, ARemountReadsWhatTheNodeCacheKeptWithTheOriginDown) {
  ASSERT_TRUE(Mount(64 << 20).ok());
  int err = 0;
  ASSERT_EQ(DirectRead(mountpoint_ / "config.json", 0, 4096, &err), contents_.at("config.json"));
  std::string head = DirectRead(mountpoint_ / "model.bin", 0, 1 << 20, &err);
  ASSERT_EQ(err, 0);
  ASSERT_TRUE(Unmount().ok());

  // A new daemon (a new NodeCache on the same directory) while the origin is away: the
  // manifest, the chunk index and the chunks read before come from the node cache.
  store_->set_mode(FaultyStore::Mode::kUnavailable);
  Status s = Mount(64 << 20);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(DirectRead(mountpoint_ / "config.json", 0, 4096, &err), contents_.at("config.json"));
  EXPECT_EQ(err, 0);
  EXPECT_TRUE(DirectRead(mountpoint_ / "model.bin", 0, 1 << 20, &err) == head);
  EXPECT_EQ(err, 0);
}

}  // namespace
}  // namespace bdn
