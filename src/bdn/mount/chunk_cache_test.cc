#include "bdn/mount/chunk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace bdn {
namespace {

// A MemChunkStore that counts Get calls and can be made slow, to observe sharing.
class CountingStore : public ChunkStore {
 public:
  Result<bool> Contains(const Digest& id) override { return inner.Contains(id); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return inner.Put(id, data);
  }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    return inner.Get(id);
  }

  MemChunkStore inner;
  std::atomic<int> gets{0};
  std::chrono::milliseconds delay{0};
};

ChunkRef PutChunk(ChunkStore& store, const std::string& text) {
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  Digest id = Digest::Of(bytes);
  EXPECT_TRUE(store.Put(id, bytes).ok());
  return {id, static_cast<uint32_t>(text.size())};
}

std::string AsString(const ChunkBytes& b) { return std::string(b->begin(), b->end()); }

TEST(ChunkCache, GetFetchesOnceThenHits) {
  CountingStore store;
  ChunkRef a = PutChunk(store, "alpha");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto first = cache.Get(a);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_EQ(AsString(*first), "alpha");
  auto second = cache.Get(a);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(store.gets, 1);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(ChunkCache, ConcurrentMissesShareOneFetch) {
  CountingStore store;
  store.delay = std::chrono::milliseconds(200);
  ChunkRef a = PutChunk(store, "shared chunk");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto r = cache.Get(a);
      if (r && AsString(*r) == "shared chunk") ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(store.gets, 1);
  EXPECT_EQ(cache.stats().joined + cache.stats().hits, 7u);
}

TEST(ChunkCache, EvictsLeastRecentlyUsed) {
  CountingStore store;
  ChunkRef a = PutChunk(store, std::string(1000, 'a'));
  ChunkRef b = PutChunk(store, std::string(1000, 'b'));
  ChunkRef c = PutChunk(store, std::string(1000, 'c'));
  ChunkRef d = PutChunk(store, std::string(1000, 'd'));
  ChunkCache cache(store, {.capacity_bytes = 3000, .prefetch_threads = 0});
  ASSERT_TRUE(cache.Get(a));
  ASSERT_TRUE(cache.Get(b));
  ASSERT_TRUE(cache.Get(c));
  ASSERT_TRUE(cache.Get(a));  // a is now the most recent; b the least
  ASSERT_TRUE(cache.Get(d));
  EXPECT_TRUE(cache.Contains(a.id));
  EXPECT_FALSE(cache.Contains(b.id));
  EXPECT_TRUE(cache.Contains(c.id));
  EXPECT_TRUE(cache.Contains(d.id));
  EXPECT_EQ(cache.stats().cached_bytes, 3000u);
}

TEST(ChunkCache, CorruptChunkIsAnErrorAndNotCached) {
  MemChunkStore store;
  ChunkRef a = PutChunk(store, "good bytes");
  store.CorruptForTest(a.id, std::vector<uint8_t>{'b', 'a', 'd'});
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto r = cache.Get(a);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("digest mismatch"), std::string::npos) << r.error().message();
  EXPECT_FALSE(cache.Contains(a.id));
  // Once the store has good bytes again, the next Get succeeds: errors are not remembered.
  store.CorruptForTest(a.id,
                       std::vector<uint8_t>{'g', 'o', 'o', 'd', ' ', 'b', 'y', 't', 'e', 's'});
  EXPECT_TRUE(cache.Get(a).has_value());
}

TEST(ChunkCache, SizeDifferentFromTheIndexIsCorruption) {
  MemChunkStore store;
  ChunkRef a = PutChunk(store, "twelve bytes");
  a.size_bytes = 11;
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto r = cache.Get(a);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("the index says 11"), std::string::npos);
}

TEST(ChunkCache, CachedChunkAskedForWithAnotherSizeIsCorruption) {
  MemChunkStore store;
  ChunkRef a = PutChunk(store, "twelve bytes");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  ASSERT_TRUE(cache.Get(a).has_value());
  ChunkRef wrong = a;
  wrong.size_bytes = 4096;
  auto r = cache.Get(wrong);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(cache.Get(a).has_value());
}

TEST(ChunkCache, StreamedChunksAreEvictedBeforeRandomOnes) {
  CountingStore store;
  std::vector<ChunkRef> random, streamed;
  for (int i = 0; i < 4; ++i) random.push_back(PutChunk(store, std::string(1000, 'r' + i)));
  for (int i = 0; i < 8; ++i) streamed.push_back(PutChunk(store, std::string(1000, 'A' + i)));
  ChunkCache cache(store, {.capacity_bytes = 8000, .streaming_bytes = 2000, .prefetch_threads = 0});
  for (const auto& r : random) ASSERT_TRUE(cache.Get(r, AccessPattern::kRandom));
  for (const auto& s : streamed) ASSERT_TRUE(cache.Get(s, AccessPattern::kSequential));
  // A pass of 8 streamed chunks kept only the last 2 and left every random chunk in place.
  for (const auto& r : random) EXPECT_TRUE(cache.Contains(r.id));
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(cache.Contains(streamed[i].id)) << i;
  EXPECT_TRUE(cache.Contains(streamed[6].id));
  EXPECT_TRUE(cache.Contains(streamed[7].id));
  EXPECT_EQ(cache.stats().streaming_bytes, 2000u);
  // A random-access hit moves a streamed chunk into the LRU.
  ASSERT_TRUE(cache.Get(streamed[7], AccessPattern::kRandom));
  EXPECT_EQ(cache.stats().streaming_bytes, 1000u);
  // When the whole cache is full, the streaming FIFO goes first.
  std::vector<ChunkRef> more;
  for (int i = 0; i < 4; ++i) more.push_back(PutChunk(store, std::string(1000, '0' + i)));
  for (const auto& m : more) ASSERT_TRUE(cache.Get(m, AccessPattern::kRandom));
  EXPECT_FALSE(cache.Contains(streamed[6].id));
  EXPECT_TRUE(cache.Contains(streamed[7].id));
  EXPECT_EQ(cache.stats().cached_bytes, 8000u);
}

TEST(ChunkCache, MissingChunkIsNotFound) {
  MemChunkStore store;
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto r = cache.Get({Digest::Of(std::string_view("absent")), 6});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
}

TEST(ChunkCache, PrefetchFillsTheCacheInTheBackground) {
  CountingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(PutChunk(store, "chunk " + std::to_string(i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 2});
  cache.Prefetch(refs);
  cache.Prefetch(refs);  // already queued or fetched: ignored
  for (int i = 0; i < 200 && cache.stats().cached_chunks < refs.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(cache.stats().cached_chunks, refs.size());
  EXPECT_EQ(store.gets, 20);
  auto r = cache.Get(refs[7]);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(AsString(*r), "chunk 7");
  EXPECT_EQ(store.gets, 20);
}

TEST(ChunkCache, PrefetchQueueIsBounded) {
  CountingStore store;
  store.delay = std::chrono::milliseconds(50);
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(PutChunk(store, "c" + std::to_string(i)));
  ChunkCache cache(store,
                   {.capacity_bytes = 1 << 20, .prefetch_threads = 1, .max_queued_prefetches = 3});
  cache.Prefetch(refs);
  EXPECT_GE(cache.stats().prefetch_dropped, 6u);
}

}  // namespace
}  // namespace bdn
