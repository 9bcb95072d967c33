// NodeCache against an upstream the test controls: hits and misses, the size bound, verified
// reads, single-flight, restarts, and several instances and processes on one directory.
#include "bdn/cache/node_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/cache/store_stack.h"
#include "bdn/mount/mount_test_support.h"
#include "bdn/store/chunk_store_conformance_test_util.h"
#include "bdn/store/migrate.h"
#include "bdn/store/store_test_util.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/volume/version_view.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using mount_testing::FaultyStore;
using mount_testing::RandomBytes;
using mount_testing::TempDir;
using mount_testing::VersionBuilder;

std::vector<uint8_t> ToBytes(const std::string& s) { return {s.begin(), s.end()}; }

// Puts `n` random chunks of 8..60 KiB into `store`; returns their ids and contents.
struct Chunks {
  std::vector<Digest> ids;
  std::vector<std::string> contents;
};
Chunks MakeChunks(ChunkStore& store, int n, uint64_t seed) {
  Chunks c;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    std::string bytes = RandomBytes(8192 + rng() % (52 * 1024), seed * 1000 + i);
    Digest id = Digest::Of(bytes);
    EXPECT_TRUE(store.Put(id, mount_testing::Bytes(bytes)).ok());
    c.ids.push_back(id);
    c.contents.push_back(std::move(bytes));
  }
  return c;
}

// Bytes of the region files really in `dir` (sealed and being filled).
int64_t DiskUsage(const fs::path& dir) {
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir / "packs")) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".pack" || ext == ".open")) {
      total += static_cast<int64_t>(e.file_size());
    }
  }
  return total;
}

// Region files in `dir`.
size_t RegionFiles(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir / "packs")) n += e.is_regular_file();
  return n;
}

// The ChunkStore conformance suite over a node cache in front of an in-memory upstream; a damaged
// copy is the cache's own (in its region file), so the cache sets it aside and fetches it again.
struct NodeCacheEnv {
  explicit NodeCacheEnv(const fs::path& dir) {
    auto c = NodeCache::Open(upstream, {.dir = dir / "cache", .capacity_bytes = 64ull << 20});
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    if (c) cache = std::move(*c);
  }
  ChunkStore* store() { return cache.get(); }
  void FlipByte(const Digest& id, size_t offset) {
    Status s = FlipStoredByte(cache->regions(), id, offset);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::shared_ptr<MemChunkStore> upstream = std::make_shared<MemChunkStore>();
  std::unique_ptr<NodeCache> cache;
};
using namespace conformance;  // the suite's registration names, for INSTANTIATE below
INSTANTIATE_TYPED_TEST_SUITE_P(NodeCache, ChunkStoreConformance, ::testing::Types<NodeCacheEnv>);

class NodeCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<NodeCache> Open(uint64_t capacity = 64ull << 20) {
    auto cache =
        NodeCache::Open(upstream_, {.dir = dir_.path() / "cache", .capacity_bytes = capacity});
    EXPECT_TRUE(cache.has_value()) << cache.error().ToString();
    return cache ? std::move(*cache) : nullptr;
  }
  fs::path CacheDir() const { return dir_.path() / "cache"; }

  TempDir dir_;
  std::shared_ptr<FaultyStore> upstream_ = std::make_shared<FaultyStore>();
};

TEST_F(NodeCacheTest, MissFetchesOnceThenHitsFromDisk) {
  Chunks c = MakeChunks(upstream_->inner, 3, 1);
  auto cache = Open();
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < c.ids.size(); ++i) {
      auto got = cache->Get(c.ids[i]);
      ASSERT_TRUE(got.has_value()) << got.error().ToString();
      EXPECT_EQ(*got, ToBytes(c.contents[i]));
    }
  }
  EXPECT_EQ(upstream_->gets, 3);
  NodeCacheStats s = cache->stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.upstream_fetches, 3u);
  EXPECT_EQ(s.cached_bytes, DiskUsage(CacheDir()));
  EXPECT_TRUE(cache->IsCached(c.ids[0]));
  // One region file holds them all.
  EXPECT_EQ(s.regions, 1u);
  EXPECT_EQ(RegionFiles(CacheDir()), 1u);
}

TEST_F(NodeCacheTest, GetManyReadsHitsLocallyAndFetchesTheMissesInOneUpstreamCall) {
  upstream_->batches = true;
  Chunks c = MakeChunks(upstream_->inner, 12, 11);
  auto cache = Open();
  EXPECT_TRUE(cache->PrefersBatches());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cache->Get(c.ids[i]).has_value());
  std::vector<Digest> ids = c.ids;
  Digest absent = Digest::Of(std::string_view("in no tier"));
  ids.push_back(absent);
  for (int round = 0; round < 2; ++round) {
    auto got = cache->GetMany(ids);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    ASSERT_EQ(got->size(), ids.size());
    for (size_t i = 0; i < c.ids.size(); ++i) {
      ASSERT_TRUE((*got)[i].has_value()) << i;
      EXPECT_EQ(*(*got)[i], ToBytes(c.contents[i]));
    }
    EXPECT_FALSE(got->back().has_value());
  }
  // Round 1: one upstream call for the 8 uncached chunks and the absent one; round 2: one for
  // the absent one only. Each round then asks for the absent one alone, whose answer says why
  // the upstream lacks it (ReadBlobs: a request only when a blob is missing).
  EXPECT_EQ(upstream_->get_manys, 2);
  EXPECT_EQ(upstream_->gets, 4 + 9 + 1 + 2);
  NodeCacheStats s = cache->stats();
  EXPECT_EQ(s.upstream_fetches, 4u + 2u + 2u);
  EXPECT_EQ(s.hits, 4u + 12u);
  for (const Digest& id : c.ids) EXPECT_TRUE(cache->IsCached(id));
  EXPECT_EQ(s.cached_bytes, DiskUsage(CacheDir()));
}

TEST_F(NodeCacheTest, GetManyRefusesWrongBytesFromUpstreamAndCachesNothing) {
  upstream_->batches = true;
  Chunks c = MakeChunks(upstream_->inner, 3, 12);
  auto cache = Open();
  upstream_->set_mode(FaultyStore::Mode::kWrongBytes);
  auto got = cache->GetMany(c.ids);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  for (const Digest& id : c.ids) EXPECT_FALSE(cache->IsCached(id));
  upstream_->set_mode(FaultyStore::Mode::kNormal);
  got = cache->GetMany(c.ids);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*(*got)[2], ToBytes(c.contents[2]));
}

TEST_F(NodeCacheTest, QueriesAndWritesGoToTheUpstream) {
  auto cache = Open();
  std::string data = "written through";
  Digest id = Digest::Of(data);
  auto has = cache->Contains(id);
  ASSERT_TRUE(has.has_value());
  EXPECT_FALSE(*has);
  ASSERT_TRUE(cache->Put(id, mount_testing::Bytes(data)).ok());
  EXPECT_TRUE(*upstream_->inner.Contains(id));
  EXPECT_FALSE(cache->IsCached(id));  // Put does not fill the cache
  Digest absent = Digest::Of(std::string_view("absent"));
  std::vector<Digest> ids = {id, absent};
  auto missing = cache->FindMissing(ids);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(*missing, std::vector<Digest>{absent});
  EXPECT_EQ(upstream_->gets, 0);
}

TEST_F(NodeCacheTest, EvictionKeepsAccountedBytesWithinTheBound) {
  const uint64_t kCapacity = 1 << 20;
  Chunks c = MakeChunks(upstream_->inner, 200, 2);  // ~6.5 MiB
  auto cache = Open(kCapacity);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    ASSERT_EQ(*got, ToBytes(c.contents[i]));
    NodeCacheStats s = cache->stats();
    ASSERT_LE(s.cached_bytes, static_cast<int64_t>(kCapacity)) << "after chunk " << i;
    ASSERT_EQ(s.cached_bytes, DiskUsage(CacheDir())) << "after chunk " << i;
  }
  NodeCacheStats s = cache->stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.cached_bytes, static_cast<int64_t>(kCapacity / 2));
  // Evicted chunks are fetched again, correctly.
  for (size_t i = 0; i < 20; ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_LE(cache->stats().cached_bytes, static_cast<int64_t>(kCapacity));
}

TEST_F(NodeCacheTest, ChunksReadAgainSurviveAScanLargerThanTheCache) {
  const uint64_t kCapacity = 1 << 20;  // regions of 64 KiB
  Chunks hot = MakeChunks(upstream_->inner, 4, 3);
  Chunks scan = MakeChunks(upstream_->inner, 150, 4);  // ~5 MiB, read once
  auto cache = Open(kCapacity);
  for (const Digest& id : hot.ids) ASSERT_TRUE(cache->Get(id).has_value());
  // The hot chunks are read again now and then during the scan: each eviction of their region
  // writes them again (reinsertion), so they are never fetched again.
  for (size_t i = 0; i < scan.ids.size(); ++i) {
    ASSERT_TRUE(cache->Get(scan.ids[i]).has_value());
    if (i % 8 == 0) {
      for (size_t k = 0; k < hot.ids.size(); ++k) {
        auto got = cache->Get(hot.ids[k]);
        ASSERT_TRUE(got.has_value());
        ASSERT_EQ(*got, ToBytes(hot.contents[k]));
      }
    }
  }
  for (const Digest& id : hot.ids) EXPECT_TRUE(cache->IsCached(id)) << id.ToString();
  EXPECT_EQ(upstream_->gets, 4 + 150);  // the hot chunks once each
  EXPECT_GT(cache->stats().reinserted, 0u);
  EXPECT_GT(cache->stats().evictions, 0u);
  int scan_kept = 0;
  for (const Digest& id : scan.ids) scan_kept += cache->IsCached(id);
  EXPECT_LT(scan_kept, 40);
  EXPECT_LE(cache->stats().cached_bytes, static_cast<int64_t>(kCapacity));
}

TEST_F(NodeCacheTest, RegionsAreEvictedWholeOldestFirst) {
  const uint64_t kCapacity = 1 << 20;
  Chunks c = MakeChunks(upstream_->inner, 100, 5);
  auto cache = Open(kCapacity);
  for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
  // Read once each, in order: what is left is a suffix of the reading order (FIFO, whole
  // regions), and the files are few (one per 64 KiB region).
  size_t first_kept = 0;
  while (first_kept < c.ids.size() && !cache->IsCached(c.ids[first_kept])) ++first_kept;
  ASSERT_GT(first_kept, 0u);
  for (size_t i = first_kept; i < c.ids.size(); ++i) EXPECT_TRUE(cache->IsCached(c.ids[i])) << i;
  EXPECT_EQ(cache->stats().reinserted, 0u);
  EXPECT_LE(RegionFiles(CacheDir()), kCapacity / (64 << 10));
  EXPECT_EQ(cache->stats().regions, RegionFiles(CacheDir()));
}

// From an attacking helper: a process stopped (SIGSTOP, a frozen cgroup) while it held the
// directory's eviction lock stalled every other process on the directory, a new open included:
// flock waited with no bound. Now nothing waits for it; the cache goes over its bound meanwhile
// and comes back under it once the lock is free.
TEST_F(NodeCacheTest, AnEvictionLockHeldElsewhereStallsNothing) {
  const uint64_t kCapacity = 1 << 20;
  {
    auto first = Open(kCapacity);  // makes the directory and its evict.lock
    ASSERT_NE(first, nullptr);
  }
  UniqueFd other(::open((CacheDir() / "evict.lock").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(other.valid());
  ASSERT_EQ(::flock(other.get(), LOCK_EX), 0);  // another open file description: "another process"
  Chunks c = MakeChunks(upstream_->inner, 60, 7);
  auto started = std::chrono::steady_clock::now();
  auto cache = Open(kCapacity);
  ASSERT_NE(cache, nullptr);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(cache->stats().evictions, 0u);
  // Nothing evicted, and nothing more cached once at the bound (the disk does not fill).
  EXPECT_LE(DiskUsage(CacheDir()), kCapacity + (64 << 10));
  EXPECT_FALSE(cache->IsCached(c.ids.back()));
  EXPECT_GT(cache->stats().write_errors, 0u);
  ASSERT_EQ(::flock(other.get(), LOCK_UN), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the next look at the lock
  Chunks more = MakeChunks(upstream_->inner, 20, 8);
  for (const Digest& id : more.ids) ASSERT_TRUE(cache->Get(id).has_value());
  EXPECT_TRUE(cache->IsCached(more.ids.back())) << "caching again once the lock is free";
  EXPECT_GT(cache->stats().evictions, 0u);
  EXPECT_LE(DiskUsage(CacheDir()), kCapacity);
}

// From an attacking helper: a --cache-size larger than the disk's room never reached its bound,
// so once the disk filled the cache kept its first bytes and cached nothing more. Now a write
// that finds the disk full evicts the oldest regions and the cache goes on (on a real full disk:
// a small tmpfs, root only).
TEST_F(NodeCacheTest, ACacheOnAFullDiskEvictsAndGoesOnCaching) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const fs::path small = dir_.path() / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{small};
  Chunks c = MakeChunks(upstream_->inner, 200, 9);  // ~6.8 MB through a 2 MiB disk
  {
    auto opened = NodeCache::Open(
        upstream_,
        {.dir = small / "cache", .capacity_bytes = 64ull << 20, .region_bytes = 128 << 10});
    ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
    auto& cache = *opened;
    for (size_t i = 0; i < c.ids.size(); ++i) {
      auto got = cache->Get(c.ids[i]);
      ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
      EXPECT_EQ(*got, ToBytes(c.contents[i]));
    }
    EXPECT_GT(cache->stats().evictions, 0u);
    // The last chunks read are cached: read again without the upstream.
    const int before = upstream_->gets;
    for (size_t i = c.ids.size() - 5; i < c.ids.size(); ++i) {
      EXPECT_TRUE(cache->IsCached(c.ids[i])) << i;
      ASSERT_TRUE(cache->Get(c.ids[i]).has_value());
    }
    EXPECT_EQ(upstream_->gets, before);
  }
}

TEST_F(NodeCacheTest, ACorruptedCopyIsSetAsideAndFetchedAgain) {
  Chunks c = MakeChunks(upstream_->inner, 2, 6);
  auto cache = Open();
  ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
  ASSERT_EQ(upstream_->gets, 1);
  // Flip one byte of the copy in its region.
  ASSERT_TRUE(FlipStoredByte(cache->regions(), c.ids[0], 100).ok());
  auto got = cache->Get(c.ids[0]);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 2);
  EXPECT_EQ(cache->stats().corrupt_dropped, 1u);
  // The new copy is good and is served without the upstream, also after a restart.
  auto again = cache->Get(c.ids[0]);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 2);
  cache.reset();
  cache = Open();
  again = cache->Get(c.ids[0]);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 2);
  EXPECT_EQ(cache->stats().cached_bytes, DiskUsage(CacheDir()));
}

// Regression: corruption in the node cache was never logged (only a metric), so EIO with the
// origin down read as a network problem.
TEST_F(NodeCacheTest, ACorruptedCopyIsLoggedNamingTheChunkAndItsRegionAtMostTenTimesAMinute) {
  Chunks c = MakeChunks(upstream_->inner, 12, 33);
  auto cache = Open();
  for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
  auto where = cache->regions().Locate(c.ids[0]);
  ASSERT_TRUE(where.has_value() && where->has_value());
  const std::string region = (*where)->pack_path.string();
  for (const Digest& id : c.ids) ASSERT_TRUE(FlipStoredByte(cache->regions(), id, 100).ok());
  ::testing::internal::CaptureStderr();
  for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache->stats().corrupt_dropped, 12u);
  const std::string first = "node cache " + CacheDir().string() +
                            ": cached copy failed its check (chunk " + c.ids[0].ToString() + ": ";
  size_t at = err.find(first);
  ASSERT_NE(at, std::string::npos) << err;
  const std::string tail = " in pack " + region + " at offset ";
  EXPECT_NE(err.find(tail, at), std::string::npos) << err;
  EXPECT_NE(err.find("); set aside, fetched again\n", at), std::string::npos) << err;
  size_t lines = 0;
  for (size_t p = 0; (p = err.find("cached copy failed its check", p)) != std::string::npos; ++p) {
    ++lines;
  }
  EXPECT_EQ(lines, 10u) << err;
}

TEST_F(NodeCacheTest, ATruncatedRegionLosesOnlyItsTornRecords) {
  Chunks c = MakeChunks(upstream_->inner, 2, 7);
  fs::path region;
  {
    auto cache = Open();
    ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
    ASSERT_TRUE(cache->Get(c.ids[1]).has_value());
    region = (*cache->regions().Locate(c.ids[1]))->pack_path;
    ASSERT_TRUE(cache->IsCached(c.ids[1]));
  }
  // Cut into the second record (and the footer after it): a disk that lost the tail.
  region.replace_extension(".pack");
  ASSERT_TRUE(fs::exists(region));
  fs::resize_file(region, fs::file_size(region) - c.contents[1].size() / 2 - 64 * 3);
  auto cache = Open();
  for (int i = 0; i < 2; ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, 2 + 1);  // only the torn one again
}

TEST_F(NodeCacheTest, SixteenConcurrentMissesMakeOneUpstreamFetch) {
  Chunks c = MakeChunks(upstream_->inner, 1, 8);
  upstream_->delay = std::chrono::milliseconds(200);
  auto cache = Open();
  std::barrier start(16);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto got = cache->Get(c.ids[0]);
      if (got && *got == ToBytes(c.contents[0])) ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good, 16);
  EXPECT_EQ(upstream_->gets, 1);
  EXPECT_EQ(cache->stats().upstream_fetches, 1u);
}

// Issue 12 item 5: readers that miss a chunk while another reader's fetch of it ends (stored,
// no longer in flight) must not fetch it again: the leader of a batch looks in the cache again
// before it asks the upstream. Eight readers go over the same chunks, a few at a time, as
// concurrent cold mounts through one cache node do.
TEST_F(NodeCacheTest, ConcurrentReadersOfTheSameChunksFetchEachOnce) {
  Chunks c = MakeChunks(upstream_->inner, 512, 21);
  // One region for all of them (~17 MiB): no region is sealed while they are read.
  auto opened = NodeCache::Open(
      upstream_, {.dir = CacheDir(), .capacity_bytes = 256ull << 20, .region_bytes = 64ull << 20});
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  auto cache = std::move(*opened);
  constexpr int kReaders = 8;
  std::barrier start(kReaders);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (size_t k = 0; k < c.ids.size(); k += 4) {
        auto part = std::span<const Digest>(c.ids).subspan(k, 4);
        auto got = cache->GetMany(part);
        for (size_t j = 0; j < part.size(); ++j) {
          if (!got || !(*got)[j] || *(*got)[j] != ToBytes(c.contents[k + j])) ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(upstream_->gets, 512) << "chunks fetched from the upstream more than once";
}

TEST_F(NodeCacheTest, UpstreamErrorsAreReturnedAndNotRemembered) {
  Chunks c = MakeChunks(upstream_->inner, 1, 9);
  auto cache = Open();
  upstream_->set_mode(FaultyStore::Mode::kUnavailable);
  auto got = cache->Get(c.ids[0]);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(cache->IsCached(c.ids[0]));
  upstream_->set_mode(FaultyStore::Mode::kNormal);
  got = cache->Get(c.ids[0]);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 2);
  EXPECT_EQ(cache->stats().upstream_errors, 1u);
}

TEST_F(NodeCacheTest, WrongBytesFromUpstreamAreCorruptionAndNotCached) {
  Chunks c = MakeChunks(upstream_->inner, 1, 10);
  auto cache = Open();
  upstream_->set_mode(FaultyStore::Mode::kWrongBytes);
  auto got = cache->Get(c.ids[0]);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_NE(got.error().message().find("chunk " + c.ids[0].ToString() + ": digest mismatch"),
            std::string::npos)
      << got.error().message();
  EXPECT_FALSE(cache->IsCached(c.ids[0]));
  EXPECT_EQ(cache->stats().cached_bytes, 0);
}

TEST_F(NodeCacheTest, ReopeningKeepsTheChunksAndTheAccounting) {
  Chunks c = MakeChunks(upstream_->inner, 10, 11);
  {
    auto cache = Open();
    for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
    ASSERT_GT(cache->stats().cached_bytes, 0);
  }
  const int64_t cached = DiskUsage(CacheDir());  // the region, sealed at close
  auto cache = Open();
  EXPECT_EQ(cache->stats().cached_bytes, cached);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, 10);
  EXPECT_EQ(cache->stats().hits, 10u);
}

TEST_F(NodeCacheTest, ARestartInTheMiddleOfFillingARegionKeepsItsWholeRecords) {
  Chunks c = MakeChunks(upstream_->inner, 10, 12);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Fills part of a region, then dies without closing anything (as kill -9 would).
    auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 64ull << 20});
    bool ok = cache.has_value();
    for (const Digest& id : c.ids) ok = ok && (*cache)->Get(id).has_value();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The region is still being filled (.open), and a torn record follows the whole ones.
  fs::path open_region;
  for (const auto& e : fs::directory_iterator(CacheDir() / "packs")) {
    if (e.path().extension() == ".open") open_region = e.path();
  }
  ASSERT_FALSE(open_region.empty());
  std::ofstream(open_region, std::ios::app | std::ios::binary) << std::string(100, 'T');
  auto cache = Open();
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, 0);  // this process fetched nothing: all came from the region
  EXPECT_EQ(cache->stats().hits, 10u);
  EXPECT_EQ(RegionFiles(CacheDir()), 1u);  // sealed again, the torn tail dropped
  EXPECT_EQ(cache->stats().cached_bytes, DiskUsage(CacheDir()));
}

// A record that starts before a region's edge and ends past it stays whole in that region (the
// region is sealed after it), reads back after a restart without the upstream, and leaves with
// its region when that is evicted: no chunk is ever split across two region files.
TEST_F(NodeCacheTest, AChunkSpanningARegionEdgeStaysWholeInItsRegion) {
  const uint64_t kRegion = 64 << 10;
  std::vector<std::string> contents;
  std::vector<Digest> ids;
  for (int i = 0; i < 9; ++i) {  // 40 KiB each: every second one crosses a 64 KiB edge
    contents.push_back(RandomBytes(40 << 10, 700 + i));
    ids.push_back(Digest::Of(contents.back()));
    ASSERT_TRUE(upstream_->inner.Put(ids.back(), mount_testing::Bytes(contents.back())).ok());
  }
  const NodeCacheOptions options{
      .dir = CacheDir(), .capacity_bytes = 64ull << 20, .region_bytes = kRegion};
  {
    auto cache = NodeCache::Open(upstream_, options);
    ASSERT_TRUE(cache.has_value()) << cache.error().ToString();
    for (const Digest& id : ids) ASSERT_TRUE((*cache)->Get(id).has_value());
  }
  // Four regions hold two whole records each (80 KiB and a little: past their 64 KiB edge), and
  // the ninth chunk's region, sealed at close, holds one.
  std::vector<uintmax_t> sizes;
  for (const auto& e : fs::directory_iterator(CacheDir() / "packs")) {
    if (e.path().extension() == ".pack") sizes.push_back(e.file_size());
  }
  std::sort(sizes.begin(), sizes.end());
  ASSERT_EQ(sizes.size(), 5u);
  EXPECT_LT(sizes[0], kRegion);
  for (size_t i = 1; i < sizes.size(); ++i) {
    EXPECT_GT(sizes[i], kRegion) << i;
    EXPECT_LT(sizes[i], 2 * kRegion) << i;
  }
  const int gets = upstream_->gets;
  auto cache = NodeCache::Open(upstream_, options);
  ASSERT_TRUE(cache.has_value()) << cache.error().ToString();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto got = (*cache)->Get(ids[i]);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(contents[i])) << i;
  }
  EXPECT_EQ(upstream_->gets, gets);  // every chunk, the edge-crossing ones too, from the regions
  // Evicting down to a smaller bound drops whole regions: both chunks of a region go together.
  cache->reset();
  auto small = NodeCache::Open(
      upstream_, {.dir = CacheDir(), .capacity_bytes = 3 * kRegion, .region_bytes = kRegion});
  ASSERT_TRUE(small.has_value()) << small.error().ToString();
  for (size_t i = 0; i + 1 < ids.size(); i += 2) {
    EXPECT_EQ((*small)->IsCached(ids[i]), (*small)->IsCached(ids[i + 1])) << i;
  }
  EXPECT_FALSE((*small)->IsCached(ids[0]));
  for (size_t i = 0; i < ids.size(); ++i) {
    auto got = (*small)->Get(ids[i]);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(contents[i])) << i;
  }
}

TEST_F(NodeCacheTest, ReopeningWithASmallerSizeEvictsDownToIt) {
  Chunks c = MakeChunks(upstream_->inner, 60, 13);
  {
    auto cache = Open(64ull << 20);
    for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
    ASSERT_GT(cache->stats().cached_bytes, 1 << 20);
  }
  auto cache = Open(1 << 20);
  EXPECT_LE(cache->stats().cached_bytes, 1 << 20);
  EXPECT_EQ(cache->stats().cached_bytes, DiskUsage(CacheDir()));
}

// Every file below `dir` (symlinks not followed) with its size, mode and, for a regular file, the
// digest of its bytes, one a line; the first line is `dir`'s own mode.
std::string Listing(const fs::path& dir) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it) {
    struct stat st {};
    EXPECT_EQ(::lstat(it->path().c_str(), &st), 0);
    std::string line = fs::relative(it->path(), dir).string() + " " + std::to_string(st.st_size) +
                       " " + std::to_string(st.st_mode);
    if (S_ISREG(st.st_mode)) {
      std::ifstream in(it->path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      line += " " + Digest::Of(bytes).ToString();
    }
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  struct stat top {};
  EXPECT_EQ(::lstat(dir.c_str(), &top), 0);
  std::string out = std::to_string(top.st_mode) + "\n";
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Opens a node cache on `dir`, which must be refused with FailedPrecondition `message` and left
// as it was, byte for byte and mode for mode (Listing).
void ExpectRefusedAndLeftAsItWas(std::shared_ptr<ChunkStore> upstream, const fs::path& dir,
                                 const std::string& message, uint64_t capacity = 1 << 20) {
  const std::string before = Listing(dir);
  auto cache = NodeCache::Open(std::move(upstream), {.dir = dir, .capacity_bytes = capacity});
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.error().message(), message);
  EXPECT_EQ(Listing(dir), before);
}

// Opens every directory at and below `dir` to group and others (0755), as a person's files are,
// so that a tightening (0700) would show in Listing.
void OpenToOthers(const fs::path& dir) {
  fs::permissions(dir, fs::perms(0755));
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_directory() && !e.is_symlink()) fs::permissions(e.path(), fs::perms(0755));
  }
}

// "node cache <dir>: holds <name>, which is not the node cache's; ...".
std::string NotTheCaches(const fs::path& dir, const std::string& name) {
  return "node cache " + dir.string() + ": holds " + name +
         ", which is not the node cache's; give an empty directory or one the node cache made";
}

std::string ReadText(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The one-file-per-chunk layout's accounting file as that release wrote it (cache_state.cc):
// "ZBDNN001" (a little-endian u64), 1024 ghost slots (u64), the ghost table from byte 8192.
void WriteOldState(const fs::path& file) {
  std::string bytes(8192 + 1024 * 8, '\0');
  std::memcpy(bytes.data(), "ZBDNN001", 8);
  const uint64_t slots = 1024;
  std::memcpy(bytes.data() + 8, &slots, sizeof slots);
  std::ofstream(file, std::ios::binary) << bytes;
}

// A node cache directory as the one-file-per-chunk release left it: chunks/<2 hex>/<64 hex>
// (raw bytes), tmp/ holding a writer's temporary file "<64 hex>.<pid>.<n>", and state.
void WriteOldLayoutCache(const fs::path& dir, const Chunks& c) {
  for (size_t i = 0; i < c.ids.size(); ++i) {
    const std::string hex = c.ids[i].Hex();
    fs::create_directories(dir / "chunks" / hex.substr(0, 2));
    std::ofstream(dir / "chunks" / hex.substr(0, 2) / hex, std::ios::binary) << c.contents[i];
  }
  fs::create_directories(dir / "tmp");
  std::ofstream(dir / "tmp" / (c.ids[0].Hex() + ".4242.0")) << "a write that died";
  WriteOldState(dir / "state");
}

// A node cache directory as the previous release (regions, no marker) left it: evict.lock, made
// first, then its region store (packs/<16 hex>.pack, index/lock), holding `n` chunks.
Chunks WritePreviousReleaseCache(const fs::path& dir, int n, uint64_t seed) {
  fs::create_directories(dir);
  std::ofstream(dir / "evict.lock");
  auto store = LocalChunkStore::Open(dir, NodeCacheStoreOptions({.dir = dir}));
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  return MakeChunks(**store, n, seed);  // sealed when the store closes
}

TEST_F(NodeCacheTest, ACacheOfTheOldLayoutNamesTheMigrateCommandAndOpensOnceMigrated) {
  Chunks c = MakeChunks(upstream_->inner, 3, 41);
  WriteOldLayoutCache(CacheDir(), c);
  auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 1 << 20});
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.error().message(),
            "chunk store " + CacheDir().string() +
                ": in the old one-file-per-chunk layout (chunks/); convert it with: "
                "bdn store migrate --cache-dir " +
                CacheDir().string());
  // Not marked: converted, it is still judged by what that release made.
  EXPECT_FALSE(fs::exists(CacheDir() / "bdn-node-cache"));
  EXPECT_TRUE(fs::exists(CacheDir() / "state"));
  auto migrated = MigrateOldLayout(CacheDir(), NodeCacheStoreOptions({.dir = CacheDir()}), nullptr);
  ASSERT_TRUE(migrated.has_value()) << migrated.error().ToString();
  EXPECT_EQ(migrated->blobs, 3u);
  auto opened = Open();
  ASSERT_NE(opened, nullptr);
  EXPECT_FALSE(fs::exists(CacheDir() / "state"));
  EXPECT_FALSE(fs::exists(CacheDir() / "tmp"));
  EXPECT_EQ(ReadText(CacheDir() / "bdn-node-cache"), "bdn node cache, format 1\n");
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = opened->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, 0);  // every chunk from the converted cache
}

// A cache the previous release made (regions, no marker) keeps working: taken, marked, its
// chunks served from disk.
TEST_F(NodeCacheTest, ACacheOfThePreviousReleaseOpensAndIsMarked) {
  Chunks c = WritePreviousReleaseCache(CacheDir(), 5, 43);
  ASSERT_FALSE(fs::exists(CacheDir() / "bdn-node-cache"));
  auto cache = Open();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(ReadText(CacheDir() / "bdn-node-cache"), "bdn node cache, format 1\n");
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = cache->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, 0);
}

TEST_F(NodeCacheTest, ANewCacheIsMarkedFirstAndReopensAfterARestart) {
  Chunks c = MakeChunks(upstream_->inner, 4, 44);
  {
    auto cache = Open();
    ASSERT_NE(cache, nullptr);
    for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
  }
  EXPECT_EQ(ReadText(CacheDir() / "bdn-node-cache"), "bdn node cache, format 1\n");
  EXPECT_EQ(fs::status(CacheDir() / "bdn-node-cache").permissions(), fs::perms(0600));
  {
    auto cache = Open();
    ASSERT_NE(cache, nullptr);
    for (const Digest& id : c.ids) ASSERT_TRUE(cache->Get(id).has_value());
  }
  EXPECT_EQ(upstream_->gets, 4);  // the second run read every chunk from disk
  // A marked directory holds only the cache's names: a tmp/ or state put there is refused, never
  // removed (only an earlier release's are).
  fs::create_directories(CacheDir() / "tmp" / "project");
  std::ofstream(CacheDir() / "tmp" / "project" / "results.csv") << "a,b\n";
  ExpectRefusedAndLeftAsItWas(upstream_, CacheDir(), NotTheCaches(CacheDir(), "tmp"));
}

// An empty file system's lost+found is an empty directory; one holding files is not.
TEST_F(NodeCacheTest, ADirectoryHoldingOnlyAnEmptyLostAndFoundIsTaken) {
  fs::create_directories(CacheDir() / "lost+found");
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(ReadText(CacheDir() / "bdn-node-cache"), "bdn node cache, format 1\n");
  const fs::path fsck = dir_.path() / "fsck";
  fs::create_directories(fsck / "lost+found");
  std::ofstream(fsck / "lost+found" / "#1234") << "found by fsck";
  ExpectRefusedAndLeftAsItWas(upstream_, fsck, NotTheCaches(fsck, "lost+found/#1234"));
}

TEST_F(NodeCacheTest, AMarkerOfAnotherFormatIsRefused) {
  WritePreviousReleaseCache(CacheDir(), 1, 45);
  std::ofstream(CacheDir() / "bdn-node-cache") << "bdn node cache, format 2\n";
  ExpectRefusedAndLeftAsItWas(
      upstream_, CacheDir(),
      "node cache " + CacheDir().string() +
          ": bdn-node-cache does not read \"bdn node cache, format 1\" (a later bdn's cache, or "
          "not "
          "a node cache's); give an empty directory or one the node cache made");
}

// From an attacking helper: an empty marker is judged absent, and was then written in place,
// so a hard link planted at its name (to an empty file of someone else's) had the marker's text
// written into the file it named. Such a marker is refused, and nothing written.
TEST_F(NodeCacheTest, AnEmptyMarkerThatIsAHardLinkIsRefusedAndNotWritten) {
  const fs::path elsewhere = dir_.path() / "elsewhere";
  std::ofstream(elsewhere).flush();
  fs::create_directories(CacheDir());
  fs::permissions(CacheDir(), fs::perms(0700));
  fs::create_hard_link(elsewhere, CacheDir() / "bdn-node-cache");
  auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 1 << 20});
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cache.error().message(),
            "node cache " + CacheDir().string() +
                ": bdn-node-cache has 2 hard links (it may be a link to a file elsewhere); give an "
                "empty directory or one the node cache made");
  EXPECT_EQ(fs::file_size(elsewhere), 0u);
}

// From an attacking helper: --cache-dir pointed at a chunk store's directory evicted the store's
// packs as if they were cache regions (298 MB -> 63 MB, the store destroyed). A directory that
// holds anything a node cache does not make is refused before anything in it is changed.
TEST_F(NodeCacheTest, ADirectoryOfSomethingElseIsRefusedAndLeftAsItWas) {
  const fs::path store_dir = dir_.path() / "store";
  {
    auto store = LocalChunkStore::Open(store_dir, LocalChunkStore::Durability::kNone);
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    Chunks c = MakeChunks(**store, 40, 35);
    ASSERT_TRUE((*store)->Sync().ok());
  }
  OpenToOthers(store_dir);  // not tightened either
  std::ofstream(store_dir / "registry.db") << "a registry";
  ExpectRefusedAndLeftAsItWas(upstream_, store_dir, NotTheCaches(store_dir, "registry.db"),
                              1 << 16);
  // A store alone: its index tables are not a cache's (a cache keeps none).
  fs::remove(store_dir / "registry.db");
  std::ofstream(store_dir / "index" / "00000000000000aa.idx") << "an index table";
  ExpectRefusedAndLeftAsItWas(upstream_, store_dir,
                              NotTheCaches(store_dir, "index/00000000000000aa.idx"), 1 << 16);
}

// From an attacking helper: a copy of a chunk store's packs/ alone (a backup: packs alone
// describe a store) under --cache-size 40M went from 81 MB to 17 MB, two of four packs evicted as
// regions. Packs without evict.lock (or the old layout's state) are no node cache's.
TEST_F(NodeCacheTest, ACopyOfAStoresPacksAloneIsRefusedAndLeftAsItWas) {
  const fs::path store_dir = dir_.path() / "store";
  {
    LocalChunkStore::Options o;
    o.durability = LocalChunkStore::Durability::kNone;
    o.pack_target_bytes = 256 << 10;  // several packs
    auto store = LocalChunkStore::Open(store_dir, o);
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    MakeChunks(**store, 40, 36);
    ASSERT_TRUE((*store)->Sync().ok());
  }
  const fs::path backup = dir_.path() / "backup";
  fs::create_directories(backup);
  fs::copy(store_dir / "packs", backup / "packs", fs::copy_options::recursive);
  ASSERT_GT(RegionFiles(backup), 2u);
  OpenToOthers(backup);
  ExpectRefusedAndLeftAsItWas(upstream_, backup, NotTheCaches(backup, "packs"), 1 << 16);
}

// From an attacking helper: a directory holding lost+found/, tmp/project/results.csv and a state
// file was taken as the old layout's: tmp/ and state deleted, every directory chmodded 0700.
// The old layout's are recognised by what that release wrote in them.
TEST_F(NodeCacheTest, ATmpAndStateNotTheOldLayoutsAreRefusedAndLeftAsTheyWere) {
  const fs::path work = dir_.path() / "work";
  fs::create_directories(work / "lost+found");
  fs::create_directories(work / "tmp" / "project");
  std::ofstream(work / "tmp" / "project" / "results.csv") << "a,b\n1,2\n";
  std::ofstream(work / "state") << "running\n";
  OpenToOthers(work);
  ExpectRefusedAndLeftAsItWas(upstream_, work, NotTheCaches(work, "state"));
  // Even beside a state the old layout's writer could have written: tmp/ held only its flat
  // temporary files.
  WriteOldState(work / "state");
  ExpectRefusedAndLeftAsItWas(upstream_, work, NotTheCaches(work, "tmp/project"));
}

// From an attacking helper: packs/x.damaged was deleted, and a <16 hex>.pack that is no pack was
// set aside as damaged and deleted by the same open. In a directory without the marker, packs/
// must hold what the cache writes there (pack headers checked), else it is refused untouched.
TEST_F(NodeCacheTest, AnUnmarkedDirectoryWithFilesTheCacheNeverWroteInPacksIsRefused) {
  WritePreviousReleaseCache(CacheDir(), 3, 46);
  OpenToOthers(CacheDir());
  const fs::path packs = CacheDir() / "packs";
  std::ofstream(packs / "x.damaged") << "a person's file";
  ExpectRefusedAndLeftAsItWas(upstream_, CacheDir(), NotTheCaches(CacheDir(), "packs/x.damaged"));
  fs::remove(packs / "x.damaged");
  std::ofstream(packs / "00000000000000aa.pack") << "named like a region, and no pack";
  ExpectRefusedAndLeftAsItWas(upstream_, CacheDir(),
                              NotTheCaches(CacheDir(), "packs/00000000000000aa.pack"));
  fs::remove(packs / "00000000000000aa.pack");
  ASSERT_NE(Open(), nullptr);  // what the previous release made, and nothing else
}

// In the cache's own directory, a region found damaged is set aside and kept (its warning names
// it) until the next open deletes it; a name the region store never gives is left alone.
TEST_F(NodeCacheTest, ARegionSetAsideIsKeptUntilTheNextOpen) {
  ASSERT_NE(Open(), nullptr);
  const fs::path packs = CacheDir() / "packs";
  std::ofstream(packs / "00000000000000aa.pack") << "named like a region, and no pack";
  std::ofstream(packs / "x.damaged") << "a person's file";
  ::testing::internal::CaptureStderr();
  auto cache = Open();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(cache, nullptr);
  const fs::path aside = packs / "00000000000000aa.pack.damaged";
  EXPECT_NE(err.find("set aside as " + aside.string()), std::string::npos) << err;
  EXPECT_EQ(ReadText(aside), "named like a region, and no pack");
  cache.reset();
  cache = Open();
  ASSERT_NE(cache, nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(aside)));
  EXPECT_EQ(ReadText(packs / "x.damaged"), "a person's file");
}

// What the old layout left once migrated (state, tmp/ of its writer's temporary files), with the
// regions and corrupt/ of a migration and a file system's lost+found: taken; state and tmp/
// removed relative to the directory judged, the rest kept.
TEST_F(NodeCacheTest, AnEarlierReleasesStateAndTmpAreRemovedAndTheRestKept) {
  Chunks c = WritePreviousReleaseCache(CacheDir(), 2, 47);
  WriteOldState(CacheDir() / "state");
  fs::create_directories(CacheDir() / "tmp");
  std::ofstream(CacheDir() / "tmp" / (c.ids[0].Hex() + ".77.3")) << "partial";
  fs::create_directories(CacheDir() / "corrupt");
  std::ofstream(CacheDir() / "corrupt" / c.ids[1].Hex()) << "bad copy";
  fs::create_directories(CacheDir() / "lost+found");
  std::ofstream(CacheDir() / "lost+found" / "#12") << "found by fsck";
  auto cache = Open();
  ASSERT_NE(cache, nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(CacheDir() / "state")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(CacheDir() / "tmp")));
  EXPECT_EQ(ReadText(CacheDir() / "corrupt" / c.ids[1].Hex()), "bad copy");
  EXPECT_EQ(ReadText(CacheDir() / "lost+found" / "#12"), "found by fsck");
  EXPECT_EQ(ReadText(CacheDir() / "bdn-node-cache"), "bdn node cache, format 1\n");
  ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
  EXPECT_EQ(upstream_->gets, 0);
}

// A tmp/ holding a symlink is none of the old writer's: refused, and the link never followed.
TEST_F(NodeCacheTest, AnOldLayoutTmpHoldingASymlinkIsRefusedAndNotFollowed) {
  const fs::path victim = dir_.path() / "victim";
  fs::create_directories(victim / "sub");
  std::ofstream(victim / "sub" / "file") << "kept";
  WritePreviousReleaseCache(CacheDir(), 1, 48);
  WriteOldState(CacheDir() / "state");
  fs::create_directories(CacheDir() / "tmp");
  fs::create_directory_symlink(victim, CacheDir() / "tmp" / (std::string(64, 'a') + ".1.2"));
  ExpectRefusedAndLeftAsItWas(upstream_, CacheDir(),
                              NotTheCaches(CacheDir(), "tmp/" + std::string(64, 'a') + ".1.2"));
  EXPECT_EQ(ReadText(victim / "sub" / "file"), "kept");
}

// Regression (a cache dir another user made, with symlinks planted in it): root's mount created
// files where the links pointed and appended to a root-only file through `quarantine`.
TEST_F(NodeCacheTest, ADirectoryAnotherUserOwnsIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  fs::create_directories(CacheDir());
  ASSERT_EQ(::chmod(CacheDir().c_str(), 0777), 0);
  ASSERT_EQ(::chown(CacheDir().c_str(), 65534, 65534), 0);
  auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 1 << 20});
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(cache.error().message().starts_with("node cache " + CacheDir().string() +
                                                  ": owned by uid 65534"))
      << cache.error().message();
  EXPECT_TRUE(
      cache.error().message().ends_with(", not by this user (uid 0); use a directory of your own"))
      << cache.error().message();
  EXPECT_FALSE(fs::exists(CacheDir() / "packs"));
}

TEST_F(NodeCacheTest, SymlinksPlantedInTheDirectoryAreNeverFollowed) {
  const fs::path victim = dir_.path() / "victim";
  fs::create_directories(victim);
  std::ofstream(victim / "file") << "root only\n";
  ASSERT_NE(Open(), nullptr);  // a node cache's directory (marked), its regions then replaced
  fs::remove_all(CacheDir() / "packs");
  auto open = [&] {
    return NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 1 << 20});
  };
  // packs/ (and index/) leading elsewhere: refused, nothing written there.
  fs::create_directory_symlink(victim, CacheDir() / "packs");
  auto cache = open();
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().message(),
            "chunk store " + (CacheDir() / "packs").string() +
                ": not a directory (a symlink or file is in the way); move it away");
  fs::remove(CacheDir() / "packs");
  // evict.lock leading to a file it would create.
  fs::remove(CacheDir() / "evict.lock");
  fs::create_symlink(victim / "created", CacheDir() / "evict.lock");
  cache = open();
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.error().message(),
            "node cache " + (CacheDir() / "evict.lock").string() +
                ": not a regular file (a symlink, FIFO, directory or device is in the way)");
  EXPECT_FALSE(fs::exists(victim / "created"));
  fs::remove(CacheDir() / "evict.lock");
  // quarantine leading to a file it would append to: set aside, a file of its own made instead.
  fs::create_symlink(victim / "file", CacheDir() / "quarantine");
  ::testing::internal::CaptureStderr();
  cache = open();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(cache.has_value()) << cache.error().ToString();
  EXPECT_EQ(err, "warning: chunk store quarantine " + (CacheDir() / "quarantine").string() +
                     ": not a regular file (a symlink, FIFO, directory or device is in the way); "
                     "set aside as " +
                     (CacheDir() / "quarantine.damaged").string() + "\n");
  EXPECT_TRUE(fs::is_symlink(CacheDir() / "quarantine.damaged"));
  Chunks c = MakeChunks(upstream_->inner, 1, 31);
  ASSERT_TRUE((*cache)->Get(c.ids[0]).has_value());
  ASSERT_TRUE(FlipStoredByte((*cache)->regions(), c.ids[0], 100).ok());
  ASSERT_TRUE((*cache)->Get(c.ids[0]).has_value());
  EXPECT_EQ((*cache)->stats().corrupt_dropped, 1u);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(CacheDir() / "quarantine")));
  std::string text;
  std::getline(std::ifstream(victim / "file"), text);
  EXPECT_EQ(text, "root only");
  EXPECT_EQ(fs::file_size(victim / "file"), 10u);
}

// Regression: a FIFO named like a region (or `quarantine`) hung `bdn volume mount` for ever in
// open(2).
TEST_F(NodeCacheTest, AFifoInTheDirectoryIsSetAsideWithoutBlocking) {
  Chunks c = MakeChunks(upstream_->inner, 1, 32);
  {
    auto cache = Open();
    ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
  }
  const fs::path fifo = CacheDir() / "packs" / "e1283ff8e463efab.pack";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((CacheDir() / "packs" / "e1283ff8e463efac.open").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((CacheDir() / "quarantine").c_str(), 0600), 0);
  ::testing::internal::CaptureStderr();
  auto cache = Open();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(cache, nullptr);
  const std::string not_file =
      ": not a regular file (a symlink, FIFO, directory or device is in the way); set aside as ";
  EXPECT_NE(err.find("warning: pack " + fifo.string() + not_file + fifo.string() + ".damaged\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("warning: chunk store quarantine " + (CacheDir() / "quarantine").string() +
                     not_file + (CacheDir() / "quarantine.damaged").string() + "\n"),
            std::string::npos)
      << err;
  // Set aside, and kept until the next open (which deletes what an earlier one set aside).
  const fs::path fifo_aside = fifo.string() + ".damaged";
  const fs::path open_aside = CacheDir() / "packs" / "e1283ff8e463efac.open.damaged";
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo_aside)));
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(open_aside)));
  auto got = cache->Get(c.ids[0]);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 1);
  EXPECT_EQ(cache->stats().regions, 1u);
  cache.reset();
  cache = Open();
  ASSERT_NE(cache, nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(fifo_aside)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(open_aside)));
}

// Regression: regions set aside as damaged were never deleted nor counted (two 4 GiB sparse files
// stayed in a 64 MiB cache).
TEST_F(NodeCacheTest, RegionsSetAsideAsDamagedAreDeletedAtTheNextStart) {
  Chunks c = MakeChunks(upstream_->inner, 1, 34);
  {
    auto cache = Open();
    ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
  }
  const fs::path packs = CacheDir() / "packs";
  std::ofstream(packs / "e1283ff8e463efab.pack.damaged") << "left by an earlier start";
  ASSERT_EQ(::mkfifo((packs / "e1283ff8e463efac.open.damaged").c_str(), 0600), 0);
  auto cache = Open();
  ASSERT_NE(cache, nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(packs / "e1283ff8e463efab.pack.damaged")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(packs / "e1283ff8e463efac.open.damaged")));
  EXPECT_EQ(RegionFiles(CacheDir()), 1u);
  ASSERT_TRUE(cache->Get(c.ids[0]).has_value());
  EXPECT_EQ(upstream_->gets, 1);
}

TEST_F(NodeCacheTest, TwoInstancesOnOneDirectoryStayConsistent) {
  const uint64_t kCapacity = 1 << 20;
  Chunks c = MakeChunks(upstream_->inner, 120, 14);
  auto a = Open(kCapacity);
  auto b = Open(kCapacity);
  ASSERT_TRUE(a->Get(c.ids[0]).has_value());
  // b finds what a stored once a's region is sealed (here: a closes), without the upstream.
  a.reset();
  a = Open(kCapacity);
  auto got = b->Get(c.ids[0]);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, ToBytes(c.contents[0]));
  EXPECT_EQ(upstream_->gets, 1);
  EXPECT_EQ(b->stats().hits, 1u);
  // Both fill it past the bound, interleaved; both see one accounting, true to the disk.
  for (size_t i = 1; i < c.ids.size(); ++i) {
    NodeCache& cache = i % 2 ? *a : *b;
    auto r = cache.Get(c.ids[i]);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(*r, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(a->stats().cached_bytes, b->stats().cached_bytes);
  EXPECT_EQ(a->stats().cached_bytes, DiskUsage(CacheDir()));
  // Within the bound but for the region the other instance is filling (64 KiB).
  EXPECT_LE(a->stats().cached_bytes, static_cast<int64_t>(kCapacity + (64 << 10)));
  EXPECT_GT(a->stats().evictions + b->stats().evictions, 0u);
  // What one evicted, the other fetches again.
  for (size_t i = 0; i < 10; ++i) {
    auto r = b->Get(c.ids[i]);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, ToBytes(c.contents[i]));
  }
}

TEST_F(NodeCacheTest, TwoProcessesShareOneDirectory) {
  const uint64_t kCapacity = 1 << 20;
  Chunks c = MakeChunks(upstream_->inner, 150, 15);
  auto read_all = [&](NodeCache& cache, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int k = 0; k < 400; ++k) {
      size_t i = rng() % c.ids.size();
      auto r = cache.Get(c.ids[i]);
      if (!r || *r != ToBytes(c.contents[i])) return false;
    }
    return true;
  };
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = kCapacity});
    ::_exit(cache && read_all(**cache, 1) ? 0 : 1);
  }
  auto cache = Open(kCapacity);
  bool ok = read_all(*cache, 2);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Within the bound but for the region the other process was filling (64 KiB).
  int64_t disk = DiskUsage(CacheDir());
  EXPECT_LE(disk, static_cast<int64_t>(kCapacity) + (64 << 10));
  EXPECT_EQ(cache->stats().cached_bytes, disk);
}

// The region files in `dir`/packs with `ext` (".pack", ".open").
size_t RegionsNamed(const fs::path& dir, const std::string& ext) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir / "packs")) n += e.path().extension() == ext;
  return n;
}

TEST_F(NodeCacheTest, ARunningInstanceReadsARegionAnotherSealsBySync) {
  Chunks c = MakeChunks(upstream_->inner, 40, 31);
  auto a = Open();
  auto b = Open();  // running before a caches anything
  for (const Digest& id : c.ids) ASSERT_TRUE(a->Get(id).has_value());
  // Sync seals the region being filled (what a mount does as it exits).
  ASSERT_OK(a->Sync());
  EXPECT_EQ(RegionsNamed(CacheDir(), ".open"), 0u);
  EXPECT_EQ(RegionsNamed(CacheDir(), ".pack"), 1u);
  upstream_->set_mode(FaultyStore::Mode::kUnavailable);  // the origin stopped
  const int gets = upstream_->gets;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = b->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, gets);
  EXPECT_EQ(b->stats().hits, c.ids.size());
}

TEST_F(NodeCacheTest, ARunningInstanceReadsTheRegionAnotherIsStillFilling) {
  Chunks c = MakeChunks(upstream_->inner, 40, 32);
  auto a = Open();
  for (size_t i = 0; i < 20; ++i) ASSERT_TRUE(a->Get(c.ids[i]).has_value());
  auto b = Open();  // a's region is open (a's flock on it) when b starts
  upstream_->set_mode(FaultyStore::Mode::kUnavailable);
  const int gets = upstream_->gets;
  for (size_t i = 0; i < 20; ++i) {
    auto got = b->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  EXPECT_EQ(upstream_->gets, gets);
  // a goes on filling the same region; b finds the records appended since its first scan, in
  // GetMany as in Get.
  upstream_->set_mode(FaultyStore::Mode::kNormal);
  for (size_t i = 20; i < 40; ++i) ASSERT_TRUE(a->Get(c.ids[i]).has_value());
  upstream_->set_mode(FaultyStore::Mode::kUnavailable);
  const int gets_after_fill = upstream_->gets;
  EXPECT_EQ(RegionsNamed(CacheDir(), ".open"), 1u);  // still being filled
  std::vector<Digest> rest(c.ids.begin() + 20, c.ids.end());
  auto many = b->GetMany(rest);
  ASSERT_TRUE(many.has_value()) << many.error().ToString();
  for (size_t i = 0; i < rest.size(); ++i) {
    ASSERT_TRUE((*many)[i].has_value()) << i;
    EXPECT_EQ(*(*many)[i], ToBytes(c.contents[20 + i]));
  }
  EXPECT_EQ(upstream_->gets, gets_after_fill);
  EXPECT_EQ(b->stats().hits, 40u);
}

TEST_F(NodeCacheTest, ARunningInstanceReadsTheRegionOfAProcessThatExitedWithoutSealingIt) {
  // The mount daemon's case before it sealed at exit: it leaves by _exit, its region .open; a
  // mount already running then saw no change in the directory and never read that region.
  Chunks c = MakeChunks(upstream_->inner, 40, 33);
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto cache = NodeCache::Open(upstream_, {.dir = CacheDir(), .capacity_bytes = 64ull << 20});
    bool ok = cache.has_value();
    for (size_t i = 0; ok && i < 20; ++i) ok = (*cache)->Get(c.ids[i]).has_value();
    char go = ok ? '1' : '0';
    ok = ::write(to_parent[1], &go, 1) == 1 && ::read(to_child[0], &go, 1) == 1 && ok;
    for (size_t i = 20; ok && i < 40; ++i) ok = (*cache)->Get(c.ids[i]).has_value();
    ::_exit(ok ? 0 : 1);  // no destructor: the region stays .open, its flock released
  }
  char ready = 0;
  ASSERT_EQ(::read(to_parent[0], &ready, 1), 1);
  ASSERT_EQ(ready, '1');
  // The directory's last change (the child's region) is over 100 ms old when b looks: b's misses
  // do not list it again for its coarse time stamp alone.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto b = Open();  // the child's region is open, and locked
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
  upstream_->set_mode(FaultyStore::Mode::kUnavailable);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto got = b->Get(c.ids[i]);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().ToString();
    EXPECT_EQ(*got, ToBytes(c.contents[i]));
  }
  // b recovered the dead process's region: sealed, so that eviction may drop it.
  EXPECT_EQ(RegionsNamed(CacheDir(), ".open"), 0u);
  EXPECT_EQ(RegionsNamed(CacheDir(), ".pack"), 1u);
}

TEST_F(NodeCacheTest, AChunkAnotherInstanceCachedWhileTheUpstreamFailedIsReturned) {
  Chunks c = MakeChunks(upstream_->inner, 1, 36);
  auto b = Open();
  upstream_->set_mode(FaultyStore::Mode::kHang);
  Result<std::vector<uint8_t>> got = Err(InternalError("not run"));
  std::thread reader([&] { got = b->Get(c.ids[0]); });
  const bool hanging = upstream_->WaitHanging(1);
  // Meanwhile another instance (with an upstream of its own that has it) caches the chunk.
  auto other = std::make_shared<MemChunkStore>();
  Status put = other->Put(c.ids[0], mount_testing::Bytes(c.contents[0]));
  auto a = NodeCache::Open(other, {.dir = CacheDir(), .capacity_bytes = 64ull << 20});
  const bool cached = a.has_value() && (*a)->Get(c.ids[0]).has_value();
  // Then b's upstream call fails.
  upstream_->FailNext(1);
  upstream_->set_mode(FaultyStore::Mode::kNormal);
  reader.join();
  ASSERT_TRUE(hanging);
  ASSERT_OK(put);
  ASSERT_TRUE(cached);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, ToBytes(c.contents[0]));
  EXPECT_EQ(b->stats().upstream_errors, 1u);
}

TEST_F(NodeCacheTest, AMissLooksAgainCheaply) {
  // The cost of a miss's look for what other processes cached: measured on misses of chunks the
  // upstream lacks (NotFound at once), alone, and while another instance fills a region.
  Chunks c = MakeChunks(upstream_->inner, 20, 34);
  auto a = Open();
  auto time_misses = [&](NodeCache& cache, int n) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      Digest absent = Digest::Of("absent " + std::to_string(i));
      EXPECT_EQ(cache.Get(absent).error().code(), StatusCode::kNotFound);
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() /
           n;
  };
  constexpr int kMisses = 20000;
  const double alone = time_misses(*a, kMisses);
  for (const Digest& id : c.ids) ASSERT_TRUE(a->Get(id).has_value());
  auto b = Open();
  const double beside_open_region = time_misses(*b, kMisses);
  // Each miss of b after a cached one more chunk (~8-60 KiB): b scans just that record.
  Chunks more = MakeChunks(upstream_->inner, 200, 35);
  double scan_total = 0;
  for (size_t i = 0; i < more.ids.size(); ++i) {
    ASSERT_TRUE(a->Get(more.ids[i]).has_value());
    const auto start = std::chrono::steady_clock::now();
    auto got = b->Get(more.ids[i]);
    scan_total +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(got.has_value()) << i;
  }
  const double new_record = scan_total / static_cast<double>(more.ids.size());
  std::printf(
      "node cache miss: %.2f us alone, %.2f us beside another's open region, %.2f us to find "
      "a record just appended there\n",
      alone, beside_open_region, new_record);
  // Generous bounds (a loaded test machine): the point is no listing and no rescan per miss.
  EXPECT_LT(beside_open_region, alone + 50);
  EXPECT_LT(new_record, 2000);
}

TEST_F(NodeCacheTest, AVolumeLargerThanTheCacheReadsCorrectlyEndToEnd) {
  auto origin = std::make_shared<MemChunkStore>();
  VersionBuilder b(*origin);
  b.File("model.bin", RandomBytes(8 << 20, 16), 0644, {65536, 40000, 100000});
  b.File("config.json", "{\"layers\": 2}\n");
  Digest digest = b.Finish();
  auto stack =
      BuildMountStore(origin, nullptr, {.cache_dir = CacheDir(), .cache_size_bytes = 2 << 20});
  ASSERT_TRUE(stack.has_value()) << stack.error().ToString();
  auto view = VersionView::Open(*stack, digest);
  ASSERT_TRUE(view.has_value()) << view.error().ToString();
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [path, content] : b.contents) {
      std::string out(content.size(), '\0');
      auto n = (*view)->Read(*(*view)->Find(path), 0,
                             {reinterpret_cast<uint8_t*>(out.data()), out.size()});
      ASSERT_TRUE(n.has_value()) << n.error().ToString();
      ASSERT_EQ(*n, content.size());
      ASSERT_TRUE(out == content) << path << " pass " << pass;
    }
    EXPECT_LE(DiskUsage(CacheDir()), 2 << 20);
  }
}

TEST_F(NodeCacheTest, ConcurrentReadersOfAVolumeTwiceTheCacheSize) {
  const uint64_t kCapacity = 2 << 20;
  Chunks c = MakeChunks(upstream_->inner, 140, 17);  // ~4.5 MiB
  auto cache = Open(kCapacity);
  const int kReaders = 6;
  std::atomic<int> bad{0};
  std::atomic<int64_t> max_disk{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int k = 0; k < 300; ++k) {
        // Half the reads go to a small hot set, the rest anywhere.
        size_t i = k % 2 ? rng() % 8 : rng() % c.ids.size();
        auto got = cache->Get(c.ids[i]);
        if (!got || *got != ToBytes(c.contents[i])) ++bad;
      }
    });
  }
  readers.emplace_back([&] {  // watches the disk while they read
    for (int k = 0; k < 200; ++k) {
      int64_t d = cache->stats().cached_bytes;
      int64_t m = max_disk.load();
      while (d > m && !max_disk.compare_exchange_weak(m, d)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad, 0);
  NodeCacheStats s = cache->stats();
  EXPECT_GT(s.evictions, 0u);
  // Eviction starts once the regions pass the capacity less one region; until it has run, each
  // reader may have written one more chunk (MakeChunks: at most 60 KiB), so a look may find the
  // regions past that point by one chunk per reader (NodeCache's documented bound).
  const int64_t kBound = kCapacity - (128 << 10) + kReaders * ((60 << 10) + 256);
  EXPECT_LE(max_disk.load(), kBound);
  EXPECT_LE(s.cached_bytes, kBound);
  EXPECT_EQ(s.cached_bytes, DiskUsage(CacheDir()));
  // The hot set stays: nearly all of its reads were hits.
  int hot_cached = 0;
  for (size_t i = 0; i < 8; ++i) hot_cached += cache->IsCached(c.ids[i]);
  EXPECT_GE(hot_cached, 6);
}

TEST(MountStoreStack, WithoutACacheDirTheTierIsUsedDirectly) {
  auto origin = std::make_shared<MemChunkStore>();
  auto cluster = std::make_shared<MemChunkStore>();
  auto direct = BuildMountStore(origin, nullptr, {});
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(direct->get(), origin.get());
  auto via_cluster = BuildMountStore(origin, cluster, {});
  ASSERT_TRUE(via_cluster.has_value());
  EXPECT_EQ(via_cluster->get(), cluster.get());
  auto none = BuildMountStore(nullptr, cluster, {});
  EXPECT_FALSE(none.has_value());
}

TEST(MountStoreStack, NodeCacheSitsOnTheClusterTier) {
  TempDir dir;
  auto origin = std::make_shared<FaultyStore>();
  auto cluster = std::make_shared<FaultyStore>();
  std::string data = "chunk via the cluster tier";
  Digest id = Digest::Of(data);
  ASSERT_TRUE(cluster->Put(id, mount_testing::Bytes(data)).ok());
  auto stack = BuildMountStore(origin, cluster,
                               {.cache_dir = dir.path() / "c", .cache_size_bytes = 1 << 20});
  ASSERT_TRUE(stack.has_value());
  ASSERT_TRUE((*stack)->Get(id).has_value());
  ASSERT_TRUE((*stack)->Get(id).has_value());
  EXPECT_EQ(cluster->gets, 1);
  EXPECT_EQ(origin->gets, 0);
  auto zero =
      BuildMountStore(origin, nullptr, {.cache_dir = dir.path() / "z", .cache_size_bytes = 0});
  EXPECT_EQ(zero.error().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bdn
