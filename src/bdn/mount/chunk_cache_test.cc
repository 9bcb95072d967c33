#include "bdn/mount/chunk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "bdn/mount/mount_test_support.h"
#include "bdn/testing/fake_clock.h"

namespace bdn {
namespace {

// A MemChunkStore that counts Get calls and can be made slow, to observe sharing (the fault
// modes of mount_test_support.h's FaultyStore stay off).
using CountingStore = mount_testing::FaultyStore;

// A MemChunkStore that answers batches (as a remote tier does) and counts them.
class BatchingStore : public ChunkStore {
 public:
  Result<bool> Contains(const Digest& id) override { return inner.Contains(id); }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return inner.Sizes(ids); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return inner.Put(id, data);
  }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    return inner.Get(id);
  }
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    ++batches;
    largest_batch = std::max<int>(largest_batch, static_cast<int>(ids.size()));
    int now = ++concurrent;
    int seen = most_concurrent;
    while (now > seen && !most_concurrent.compare_exchange_weak(seen, now)) {
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    auto out = inner.GetMany(ids);
    --concurrent;
    return out;
  }
  bool PrefersBatches() const override { return true; }

  MemChunkStore inner;
  std::atomic<int> gets{0};
  std::atomic<int> batches{0};
  std::atomic<int> largest_batch{0};
  std::atomic<int> concurrent{0};
  std::atomic<int> most_concurrent{0};
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
  EXPECT_EQ(r.error().message(), "chunk " + a.id.ToString() + ": is 12 bytes, the version says 11");
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

using mount_testing::FaultyStore;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(ChunkCache, GetGivesUpAtItsDeadlineAndTheFetchStillFillsTheCache) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "slow chunk");
  store.set_mode(FaultyStore::Mode::kHang);
  auto clock = std::make_shared<testutil::FakeClock>();
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .clock = clock});
  const SteadyTime t0 = clock->SteadyNow();
  Result<ChunkBytes> r = Err(InternalError("unset"));
  std::thread reader([&] { r = cache.Get(a, AccessPattern::kRandom, t0 + milliseconds(300)); });
  ASSERT_TRUE(store.WaitHanging(1));
  clock->Advance(milliseconds(299));
  EXPECT_EQ(cache.stats().timeouts, 0u) << "1 ms before its deadline the read still waits";
  clock->Advance(milliseconds(1));
  reader.join();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(),
            "chunk " + a.id.ToString() + ": not fetched within the read deadline");
  EXPECT_EQ(clock->SteadyNow() - t0, milliseconds(300));
  EXPECT_EQ(cache.stats().timeouts, 1u);
  // A second reader joins the same (still hanging) fetch rather than starting another; its
  // deadline has passed already.
  r = cache.Get(a, AccessPattern::kRandom, clock->SteadyNow());
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(store.gets, 1);
  // Released, the fetch fills the cache: the next Get waits for it (no deadline) and finds it.
  store.set_mode(FaultyStore::Mode::kNormal);
  r = cache.Get(a, AccessPattern::kRandom);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(AsString(*r), "slow chunk");
  EXPECT_EQ(store.gets, 1);
}

TEST(ChunkCache, TransientErrorsAreRetriedWithinTheDeadline) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "flaky chunk");
  store.FailNext(2);
  ChunkCache cache(
      store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .retry_backoff = milliseconds(10)});
  auto r = cache.Get(a, AccessPattern::kRandom, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(store.gets, 3);
  EXPECT_EQ(cache.stats().retries, 2u);
}

TEST(ChunkCache, UnavailableUntilTheDeadlineReturnsTheStoresError) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "gone");
  store.set_mode(FaultyStore::Mode::kUnavailable);
  ChunkCache cache(
      store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .retry_backoff = milliseconds(20)});
  auto r = cache.Get(a, AccessPattern::kRandom, Clock::now() + milliseconds(500));
  // The store's own error, not "not fetched within the read deadline".
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().message(), "chunk " + a.id.ToString() + ": origin unreachable (test)");
  EXPECT_GE(store.gets, 3);
}

TEST(ChunkCache, NotFoundIsNotRetried) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "absent");
  store.set_mode(FaultyStore::Mode::kNotFound);
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto r = cache.Get(a, AccessPattern::kRandom, Clock::now() + std::chrono::seconds(5));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.gets, 1);
}

TEST(ChunkCache, DemandReadOvertakesQueuedPrefetches) {
  FaultyStore store;
  store.delay = milliseconds(50);
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(PutChunk(store, "queued " + std::to_string(i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 1, .fetch_threads = 1});
  cache.Prefetch(refs);
  auto r = cache.Get(refs[19]);
  ASSERT_TRUE(r.has_value());
  // Behind 19 prefetches it would wait for them; moved to the demand queue, it does not.
  EXPECT_EQ(cache.stats().promoted, 1u);
}

TEST(ChunkCache, RequestFetchesAReadsChunksInParallel) {
  FaultyStore store;
  store.delay = milliseconds(200);
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 8; ++i) refs.push_back(PutChunk(store, "parallel " + std::to_string(i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 8});
  store.set_mode(FaultyStore::Mode::kHang);
  cache.Request(refs);
  // All 8 fetches are in the store at once, not one after another.
  ASSERT_TRUE(store.WaitHanging(8));
  store.set_mode(FaultyStore::Mode::kNormal);
  for (const ChunkRef& ref : refs) ASSERT_TRUE(cache.Get(ref).has_value());
  EXPECT_EQ(store.gets, 8);
}

TEST(ChunkCache, ShutdownWakesWaitersAtOnce) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "never");
  store.set_mode(FaultyStore::Mode::kHang);
  auto cache = std::make_unique<ChunkCache>(store, ChunkCache::Options{.prefetch_threads = 0});
  Result<ChunkBytes> r = Err(InternalError("unset"));
  std::thread waiter([&] { r = cache->Get(a); });  // no deadline
  ASSERT_TRUE(store.WaitHanging(1));
  cache->Shutdown();
  waiter.join();  // the Get has no deadline: only the shutdown can end its wait
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  store.set_mode(FaultyStore::Mode::kNormal);  // the fetch thread returns; the cache joins it
  cache.reset();
}

TEST(ChunkCache, AStopRequestEndsTheWaitAtOnceAndWithdrawReleasesQueuedFetches) {
  FaultyStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 5; ++i) refs.push_back(PutChunk(store, "interrupted " + std::to_string(i)));
  store.set_mode(FaultyStore::Mode::kHang);
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 1});
  // The one fetch thread hangs on refs[0]; refs[1..4] stay queued for this reader.
  cache.Request(refs);
  ASSERT_TRUE(store.WaitHanging(1));
  std::stop_source stop;
  Result<ChunkBytes> r = Err(InternalError("unset"));
  std::thread reader([&] {
    r = cache.Get(refs[2], AccessPattern::kRandom, Clock::now() + std::chrono::seconds(30),
                  stop.get_token());
  });
  std::this_thread::sleep_for(milliseconds(50));  // let it wait (it ends at the stop either way)
  stop.request_stop();
  reader.join();  // a wait the 30 s deadline ended would say DeadlineExceeded, not cancelled
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().message(), "chunk " + refs[2].id.ToString() + ": the wait was cancelled");
  EXPECT_EQ(cache.stats().timeouts, 0u);

  // An already stopped token does not wait at all, and queues nothing new.
  auto r2 = cache.Get(refs[3], AccessPattern::kRandom, Clock::time_point::max(), stop.get_token());
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().message(), "chunk " + refs[3].id.ToString() + ": the wait was cancelled");

  // Withdraw drops the queued fetches nobody waits for; the running one goes on and is cached.
  cache.Withdraw(refs);
  store.set_mode(FaultyStore::Mode::kNormal);
  for (int i = 0; i < 200 && !cache.Contains(refs[0].id); ++i)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_TRUE(cache.Contains(refs[0].id));
  std::this_thread::sleep_for(milliseconds(100));  // a queued fetch would have run by now
  EXPECT_EQ(store.gets, 1);
  for (size_t i = 1; i < refs.size(); ++i) EXPECT_FALSE(cache.Contains(refs[i].id)) << i;
  // A later reader queues a withdrawn chunk again.
  auto again = cache.Get(refs[2], AccessPattern::kRandom, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(AsString(*again), "interrupted 2");
}

TEST(ChunkCache, WithdrawKeepsAFetchAnotherReaderWaitsFor) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "first");
  ChunkRef b = PutChunk(store, "shared");
  store.set_mode(FaultyStore::Mode::kHang);
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 1});
  cache.Request(std::vector<ChunkRef>{a, b});
  ASSERT_TRUE(store.WaitHanging(1));  // on a; b is queued
  Result<ChunkBytes> r = Err(InternalError("unset"));
  std::thread other(
      [&] { r = cache.Get(b, AccessPattern::kRandom, Clock::now() + std::chrono::seconds(10)); });
  for (int i = 0; i < 200 && cache.stats().joined == 0; ++i)
    std::this_thread::sleep_for(milliseconds(5));
  ASSERT_EQ(cache.stats().joined, 1u);
  cache.Withdraw(std::vector<ChunkRef>{b});
  store.set_mode(FaultyStore::Mode::kNormal);
  other.join();
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(AsString(*r), "shared");
  EXPECT_EQ(store.gets, 2);
}

TEST(ChunkCache, PeekNeverFetches) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "peeked");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  EXPECT_EQ(cache.Peek(a), nullptr);
  EXPECT_EQ(store.gets, 0);
  ASSERT_TRUE(cache.Get(a).has_value());
  ChunkBytes b = cache.Peek(a);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(AsString(b), "peeked");
  ChunkRef wrong = a;
  wrong.size_bytes = 3;
  EXPECT_EQ(cache.Peek(wrong), nullptr);
}

// A FaultyStore whose GetNow answers from memory (as a local store answers from the page cache)
// while `now` is set, and counts the calls.
class ReadNowStore : public FaultyStore {
 public:
  std::optional<std::vector<uint8_t>> GetNow(const Digest& id, uint64_t max_bytes) override {
    ++get_nows;
    if (!now) return std::nullopt;
    auto bytes = inner.Get(id);
    if (!bytes || bytes->size() > max_bytes) return std::nullopt;
    return std::move(*bytes);
  }
  std::atomic<bool> now{true};
  std::atomic<int> get_nows{0};
};

// PeekOrReadNow reads a chunk the store has at once on the caller's thread (no fetch thread),
// caches it, never reads one whose fetch is under way, and keeps nothing of the wrong length.
TEST(ChunkCache, PeekOrReadNowReadsOnTheCallersThreadWhatTheStoreHasAtOnce) {
  ReadNowStore store;
  ChunkRef a = PutChunk(store, "read at once");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  ChunkRef wrong = a;
  wrong.size_bytes = 3;
  EXPECT_EQ(cache.PeekOrReadNow(wrong), nullptr);  // the store's bytes are not 3 long
  EXPECT_EQ(cache.stats().cached_chunks, 0u);
  ChunkBytes got = cache.PeekOrReadNow(a);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(AsString(got), "read at once");
  EXPECT_EQ(store.gets, 0);  // no fetch thread, no Get
  EXPECT_EQ(cache.stats().read_now, 1u);
  EXPECT_NE(cache.Peek(a), nullptr);  // cached
  EXPECT_EQ(store.get_nows, 2);
  // A store that cannot answer at once: nothing, and no fetch is started.
  ChunkRef b = PutChunk(store, "not now");
  store.now = false;
  EXPECT_EQ(cache.PeekOrReadNow(b), nullptr);
  EXPECT_EQ(store.gets, 0);
  // A fetch under way: its readers share it; GetNow is not asked.
  store.now = true;
  store.delay = std::chrono::milliseconds(300);
  std::thread reader([&] { EXPECT_TRUE(cache.Get(b).has_value()); });
  while (store.gets == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int asked = store.get_nows;
  EXPECT_EQ(cache.PeekOrReadNow(b), nullptr);
  EXPECT_EQ(store.get_nows, asked);
  reader.join();
  EXPECT_NE(cache.PeekOrReadNow(b), nullptr);  // fetched meanwhile: a hit
  EXPECT_EQ(cache.stats().read_now, 1u);
}

TEST(ChunkCache, GetBlobDoesNotKeepTheBytes) {
  FaultyStore store;
  ChunkRef a = PutChunk(store, "an index blob");
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0});
  auto r = cache.GetBlob(a.id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(AsString(*r), "an index blob");
  EXPECT_FALSE(cache.Contains(a.id));
}

// A store like LocalChunkStore that sets a corrupt copy aside: Corruption once, then NotFound.
class MovesCorruptAside : public ChunkStore {
 public:
  Result<bool> Contains(const Digest&) override { return false; }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return BlobSizes(ids.size()); }
  Status Put(const Digest&, std::span<const uint8_t>) override { return Status::Ok(); }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    if (gets++ == 0) return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch"));
    return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  }
  std::atomic<int> gets{0};
};

TEST(ChunkCache, APrefetchsErrorGoesToTheNextReaderOnce) {
  MovesCorruptAside store;
  ChunkRef a{Digest::Of(std::string_view("bad")), 3};
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 1});
  cache.Prefetch(std::span<const ChunkRef>(&a, 1));
  for (int i = 0; i < 200 && cache.stats().fetch_errors == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  auto r = cache.Get(a);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption) << r.error().ToString();
  EXPECT_EQ(store.gets, 1);
  r = cache.Get(a);  // not remembered: the store is asked again
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.gets, 2);
}

TEST(ChunkCacheBatches, APrefetchWindowIsOneStoreCall) {
  BatchingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 40; ++i) refs.push_back(PutChunk(store, "chunk " + std::to_string(i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 1});
  cache.Prefetch(refs);
  // The one prefetch thread takes the whole queue as one batch.
  for (int i = 0; i < 1000 && cache.stats().fetches < refs.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(store.batches, 1);
  EXPECT_EQ(store.largest_batch, 40);
  EXPECT_EQ(cache.stats().store_calls, 1u);
  for (size_t i = 0; i < refs.size(); ++i) {
    auto got = cache.Get(refs[i], AccessPattern::kSequential);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_EQ(AsString(*got), "chunk " + std::to_string(i));
  }
  EXPECT_EQ(store.gets, 0);
  EXPECT_EQ(cache.stats().hits, 40u);
}

TEST(ChunkCacheBatches, BatchesStopAtMaxBatchBytes) {
  BatchingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(PutChunk(store, std::string(1000, 'a' + i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20,
                           .prefetch_threads = 0,
                           .fetch_threads = 1,
                           .max_batch_bytes = 3000});
  cache.Request(refs);
  for (const ChunkRef& ref : refs) ASSERT_TRUE(cache.Get(ref).has_value());
  EXPECT_LE(store.largest_batch, 3);
  EXPECT_GE(store.batches + store.gets, 4);
}

TEST(ChunkCacheBatches, ABadChunkInABatchFailsOnlyItsOwnReader) {
  BatchingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 8; ++i) refs.push_back(PutChunk(store, "good " + std::to_string(i)));
  store.inner.CorruptForTest(refs[3].id, {'b', 'a', 'd'});
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 1});
  cache.Request(refs);
  for (size_t i = 0; i < refs.size(); ++i) {
    auto got = cache.Get(refs[i]);
    if (i == 3) {
      ASSERT_FALSE(got.has_value());
      EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
      EXPECT_NE(got.error().message().find(refs[3].id.ToString()), std::string::npos);
    } else {
      ASSERT_TRUE(got.has_value()) << got.error().ToString();
      EXPECT_EQ(AsString(*got), "good " + std::to_string(i));
    }
  }
}

TEST(ChunkCacheBatches, AChunkMissingFromABatchIsNotFound) {
  BatchingStore store;
  ChunkRef kept = PutChunk(store, "kept");
  ChunkRef gone{Digest::Of(std::string("never stored")), 12};
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 1});
  std::vector<ChunkRef> refs{kept, gone};
  cache.Request(refs);
  EXPECT_TRUE(cache.Get(kept).has_value());
  auto got = cache.Get(gone);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.error().message(), "chunk " + gone.id.ToString() + ": not in store");
}

TEST(ChunkCacheBatches, AStoreThatPrefersSingleGetsIsNotBatched) {
  CountingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 6; ++i) refs.push_back(PutChunk(store, "single " + std::to_string(i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20, .prefetch_threads = 0, .fetch_threads = 2});
  cache.Request(refs);
  for (const ChunkRef& ref : refs) ASSERT_TRUE(cache.Get(ref).has_value());
  EXPECT_EQ(store.gets, 6);
  EXPECT_EQ(cache.stats().store_calls, 6u);
}

TEST(ChunkCacheBatches, PrefetchBatchesInFlightStayWithinTheirBudget) {
  BatchingStore store;
  store.delay = std::chrono::milliseconds(30);
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 64; ++i)
    refs.push_back(PutChunk(store, std::string(1000, 'a' + i % 26) + std::to_string(i)));
  // Batches of ~4 chunks, at most ~8 chunks' bytes in flight: two batches at a time, not eight.
  ChunkCache cache(store, {.capacity_bytes = 1 << 20,
                           .prefetch_threads = 8,
                           .max_batch_bytes = 4100,
                           .prefetch_inflight_bytes = 8000});
  cache.Prefetch(refs);
  for (int i = 0; i < 1000 && cache.stats().fetches < refs.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(cache.stats().fetches, refs.size());
  EXPECT_GE(store.batches, 16);
  EXPECT_LE(store.most_concurrent, 2);
}

TEST(ChunkCacheBatches, DemandBatchesStopAtTheirOwnBound) {
  BatchingStore store;
  std::vector<ChunkRef> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(PutChunk(store, std::string(1000, 'k' + i)));
  ChunkCache cache(store, {.capacity_bytes = 1 << 20,
                           .prefetch_threads = 0,
                           .fetch_threads = 1,
                           .max_demand_batch_bytes = 2000});
  cache.Request(refs);
  for (const ChunkRef& ref : refs) ASSERT_TRUE(cache.Get(ref).has_value());
  EXPECT_LE(store.largest_batch, 2);
}

}  // namespace
}  // namespace bdn
