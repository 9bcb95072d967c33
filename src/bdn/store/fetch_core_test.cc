// FetchCore and ReadBlobs: single-flight, batching bounds, deadlines on a fake clock, stop
// requests, withdrawal, shutdown, tickets, fetches on the caller's thread, and the batch
// failure policies.
#include "bdn/store/fetch_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/store/local_chunk_store.h"  // kSetAsideCorrupt
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"

namespace bdn {
namespace {

using End = FetchCore::End;
using testutil::FakeClock;

Digest Id(int i) { return Digest::Of("blob " + std::to_string(i)); }
std::vector<uint8_t> BytesOf(int i) {
  std::string s = "blob " + std::to_string(i);
  return {s.begin(), s.end()};
}
std::string Text(const SharedBytes& b) { return std::string(b->begin(), b->end()); }

// Waits (real time, bounded so a broken test fails instead of hanging) until `done()`.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 10000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// A BatchFetch whose calls the test sees and holds: each call is recorded, then waits until the
// gate is open; answers come from `answer` (default: the blob's bytes).
class Fetcher {
 public:
  BatchFetch fn() {
    return [this](std::span<const Digest> ids) {
      MutexLock lock(mu_);
      calls_.emplace_back(ids.begin(), ids.end());
      most_running_ = std::max(most_running_, ++running_);
      cv_.notify_all();
      cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return open_; });
      FetchResults out;
      for (const Digest& id : ids) out.push_back(answer ? answer(id) : Answer(id));
      --running_;
      ++returned_;
      return out;
    };
  }
  void Open() {
    MutexLock lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Close() {
    MutexLock lock(mu_);
    open_ = false;
  }
  // Waits until `n` calls have started.
  bool WaitCalls(size_t n) {
    MutexLock lock(mu_);
    return cv_.wait_for(lock.native(), std::chrono::seconds(10),
                        [&]() REQUIRES(mu_) { return calls_.size() >= n; });
  }
  std::vector<std::vector<Digest>> calls() {
    MutexLock lock(mu_);
    return calls_;
  }
  // Calls that have returned; the most calls running at once.
  int returned() {
    MutexLock lock(mu_);
    return returned_;
  }
  int most_running() {
    MutexLock lock(mu_);
    return most_running_;
  }
  std::function<Result<std::vector<uint8_t>>(const Digest&)> answer;

 private:
  static Result<std::vector<uint8_t>> Answer(const Digest& id) {
    for (int i = 0; i < 1000; ++i) {
      if (Id(i) == id) return BytesOf(i);
    }
    return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  }
  Mutex mu_;
  std::condition_variable cv_;
  bool open_ GUARDED_BY(mu_) = false;
  std::vector<std::vector<Digest>> calls_ GUARDED_BY(mu_);
  int running_ GUARDED_BY(mu_) = 0, most_running_ = 0, returned_ = 0;
};

// A Keeper over a map, as the mount's LRU is.
class MapKeeper : public FetchCore::Keeper {
 public:
  SharedBytes Lookup(const Digest& id, uint32_t) override {
    auto it = kept.find(id);
    return it == kept.end() ? nullptr : it->second;
  }
  bool Holds(const Digest& id) override { return kept.contains(id); }
  void Fetched(const Digest& id, const SharedBytes& bytes, uint32_t hints) override {
    kept[id] = bytes;
    last_hints[id] = hints;
  }
  std::map<Digest, SharedBytes> kept;  // under the core's lock
  std::map<Digest, uint32_t> last_hints;
};

FetchCore::Options Threads(int demand, int background = 0) {
  FetchCore::Options o;
  o.name = "test core";
  o.demand_threads = demand;
  o.background_threads = background;
  o.max_batch_chunks = 1024;
  return o;
}

TEST(FetchCore, ManyWaitersOnOneMissShareOneFetch) {
  Fetcher fetcher;
  FetchCore core(fetcher.fn(), Threads(4));
  std::vector<std::thread> readers;
  std::vector<FetchCore::Answer> answers(16, {End::kShutdown, Err(InternalError("unset"))});
  for (int i = 0; i < 16; ++i) {
    readers.emplace_back([&, i] { answers[i] = core.Fetch({Id(1), 6}); });
  }
  ASSERT_TRUE(fetcher.WaitCalls(1));
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 15; }));
  fetcher.Open();
  for (auto& t : readers) t.join();
  for (const auto& a : answers) {
    ASSERT_EQ(a.end, End::kFetched);
    ASSERT_OK(a.bytes);
    EXPECT_EQ(Text(*a.bytes), "blob 1");
    EXPECT_EQ(a.bytes->get(), answers[0].bytes->get());  // the same bytes, not copies
  }
  EXPECT_EQ(fetcher.calls().size(), 1u);
  EXPECT_EQ(core.stats().fetches, 1u);
  EXPECT_EQ(core.stats().batches, 1u);
}

TEST(FetchCore, AFailingFetchWakesEveryWaiterWithItsError) {
  Fetcher fetcher;
  fetcher.answer = [](const Digest& id) -> Result<std::vector<uint8_t>> {
    return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch (test)"));
  };
  FetchCore core(fetcher.fn(), Threads(2));
  std::vector<std::thread> readers;
  std::vector<FetchCore::Answer> answers(8, {End::kShutdown, Err(InternalError("unset"))});
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&, i] { answers[i] = core.Fetch({Id(2), 6}); });
  }
  ASSERT_TRUE(fetcher.WaitCalls(1));
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 7; }));
  fetcher.Open();
  for (auto& t : readers) t.join();
  for (const auto& a : answers) {
    EXPECT_EQ(a.end, End::kFetched);
    EXPECT_STATUS(a.bytes, kCorruption, "chunk " + Id(2).ToString() + ": digest mismatch (test)");
  }
  EXPECT_EQ(core.stats().fetch_errors, 1u);
  // Not remembered: the next reader fetches again.
  fetcher.answer = nullptr;
  auto again = core.Fetch({Id(2), 6});
  ASSERT_OK(again.bytes);
  EXPECT_EQ(fetcher.calls().size(), 2u);
}

TEST(FetchCore, AThrowingFetchIsAnInternalErrorForEveryBlobOfTheBatch) {
  FetchCore core(
      [](std::span<const Digest>) -> FetchResults { throw std::runtime_error("out of luck"); },
      Threads(1));
  auto a = core.Fetch({Id(3), 6});
  EXPECT_STATUS(a.bytes, kInternal, "chunk " + Id(3).ToString() + ": out of luck");
  // A fetch that answers the wrong number of blobs fails them all too.
  FetchCore short_answers([](std::span<const Digest>) { return FetchResults{}; }, Threads(1));
  auto b = short_answers.Fetch({Id(4), 6});
  EXPECT_STATUS(b.bytes, kInternal, "chunk " + Id(4).ToString() + ": 0 answers to 1 ids");
}

TEST(FetchCore, TheDeadlineEndsTheWaitNotTheFetch) {
  Fetcher fetcher;
  auto clock = std::make_shared<FakeClock>();
  MapKeeper keeper;
  FetchCore::Options o = Threads(1);
  o.clock = clock;
  o.keeper = &keeper;
  FetchCore core(fetcher.fn(), o);
  const SteadyTime deadline = clock->SteadyNow() + std::chrono::seconds(3);
  std::atomic<bool> done{false};
  FetchCore::Answer got{End::kFetched, Err(InternalError("unset"))};
  std::thread reader([&] {
    got = core.Fetch({Id(5), 6}, deadline);
    done = true;
  });
  ASSERT_TRUE(fetcher.WaitCalls(1));
  clock->Advance(std::chrono::milliseconds(2999));
  EXPECT_FALSE(done);  // fake time stands still: nothing can end the wait yet
  clock->Advance(std::chrono::milliseconds(1));
  reader.join();
  EXPECT_EQ(got.end, End::kDeadline);
  EXPECT_STATUS(got.bytes, kDeadlineExceeded,
                "chunk " + Id(5).ToString() + ": not fetched within the read deadline");
  EXPECT_EQ(core.stats().timeouts, 1u);
  // The fetch went on; once it returns, the keeper has the bytes and the next reader hits.
  fetcher.Open();
  ASSERT_TRUE(Eventually([&] { return core.stats().fetches == 1; }));
  auto hit = core.Fetch({Id(5), 6}, clock->SteadyNow());
  ASSERT_OK(hit.bytes);
  EXPECT_EQ(Text(*hit.bytes), "blob 5");
  EXPECT_EQ(fetcher.calls().size(), 1u);
}

TEST(FetchCore, AStopRequestEndsTheWaitAtOnceAndTheFetchGoesOn) {
  Fetcher fetcher;
  FetchCore core(fetcher.fn(), Threads(1));
  FetchCore::Item item{Id(6), 6};
  core.Request({&item, 1});
  ASSERT_TRUE(fetcher.WaitCalls(1));
  std::stop_source stop;
  FetchCore::Answer got{End::kFetched, Err(InternalError("unset"))};
  std::thread reader([&] { got = core.Fetch(item, SteadyTime::max(), stop.get_token()); });
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 1; }));
  stop.request_stop();
  reader.join();  // no deadline: only the stop request can have ended it
  EXPECT_EQ(got.end, End::kCancelled);
  EXPECT_STATUS(got.bytes, kUnavailable, "chunk " + Id(6).ToString() + ": the wait was cancelled");
  EXPECT_EQ(core.stats().timeouts, 0u);
  // An already stopped token does not wait, and queues nothing.
  FetchCore::Item other{Id(7), 6};
  auto at_once = core.Fetch(other, SteadyTime::max(), stop.get_token());
  EXPECT_EQ(at_once.end, End::kCancelled);
  fetcher.Open();
  ASSERT_TRUE(Eventually([&] { return core.stats().fetches == 1; }));
  EXPECT_EQ(fetcher.calls().size(), 1u);
  EXPECT_EQ(fetcher.calls()[0], std::vector<Digest>{Id(6)});
}

TEST(FetchCore, WithdrawDropsQueuedFetchesThatNobodyWaitsForOrHolds) {
  Fetcher fetcher;
  FetchCore core(fetcher.fn(), Threads(1));
  // The one thread is busy with blob 10; 11..14 queue behind it.
  FetchCore::Item first{Id(10), 6};
  core.Request({&first, 1});
  ASSERT_TRUE(fetcher.WaitCalls(1));
  std::vector<FetchCore::Item> items;
  for (int i = 11; i <= 14; ++i) items.push_back({Id(i), 6});
  core.Request(items);                                              // 11, 12: nobody holds them
  std::vector<FetchCore::Ticket> held = core.Hold({&items[2], 1});  // 13: a ticket holds it
  FetchCore::Answer waited{End::kShutdown, Err(InternalError("unset"))};
  std::thread reader([&] { waited = core.Fetch(items[3]); });  // 14: a reader waits for it
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 1; }));
  std::vector<Digest> ids{Id(10), Id(11), Id(12), Id(13), Id(14)};
  core.Withdraw(ids);  // 10 is running: it goes on
  fetcher.Open();
  reader.join();
  ASSERT_OK(waited.bytes);
  EXPECT_EQ(Text(*waited.bytes), "blob 14");
  auto from_ticket = core.Await(held[0]);
  ASSERT_OK(from_ticket.bytes);
  EXPECT_EQ(Text(*from_ticket.bytes), "blob 13");
  std::vector<Digest> fetched;
  for (const auto& call : fetcher.calls()) fetched.insert(fetched.end(), call.begin(), call.end());
  EXPECT_EQ(fetched, (std::vector<Digest>{Id(10), Id(13), Id(14)}));
  // A later reader queues a withdrawn blob again.
  auto again = core.Fetch(items[0]);
  ASSERT_OK(again.bytes);
  EXPECT_EQ(Text(*again.bytes), "blob 11");
}

TEST(FetchCore, ShutdownWakesEveryWaiterAtOnce) {
  Fetcher fetcher;
  auto core = std::make_unique<FetchCore>(fetcher.fn(), Threads(1));
  FetchCore::Answer got{End::kFetched, Err(InternalError("unset"))};
  std::thread reader([&] { got = core->Fetch({Id(20), 6}); });  // no deadline
  ASSERT_TRUE(fetcher.WaitCalls(1));
  core->Shutdown();
  reader.join();
  EXPECT_EQ(got.end, End::kShutdown);
  EXPECT_STATUS(got.bytes, kUnavailable, "test core: shutting down");
  EXPECT_EQ(core->Fetch({Id(21), 6}).end, End::kShutdown);
  fetcher.Open();  // the running fetch returns; the destructor joins its thread
  core.reset();
}

TEST(FetchCore, QueuedFetchesGoOutAsBatchesWithinTheBounds) {
  Fetcher fetcher;
  FetchCore::Options o = Threads(1);
  o.max_batch_bytes = 3000;
  o.max_batch_chunks = 1024;
  FetchCore core(fetcher.fn(), o);
  FetchCore::Item first{Id(30), 1000};
  core.Request({&first, 1});  // holds the only thread while the rest queue
  ASSERT_TRUE(fetcher.WaitCalls(1));
  std::vector<FetchCore::Item> items;
  for (int i = 31; i <= 37; ++i) items.push_back({Id(i), 1000});
  std::vector<FetchCore::Ticket> tickets = core.Hold(items);
  fetcher.Open();
  for (const auto& t : tickets) ASSERT_OK(core.Await(t).bytes);
  auto calls = fetcher.calls();
  ASSERT_EQ(calls.size(), 4u);  // [30], then 3 + 3 + 1 by bytes
  EXPECT_EQ(calls[1], (std::vector<Digest>{Id(31), Id(32), Id(33)}));
  EXPECT_EQ(calls[2], (std::vector<Digest>{Id(34), Id(35), Id(36)}));
  EXPECT_EQ(calls[3], (std::vector<Digest>{Id(37)}));

  // The chunk count bounds a batch too, and a blob larger than the byte bound goes alone.
  Fetcher second;
  o.max_batch_chunks = 2;
  FetchCore capped(second.fn(), o);
  capped.Request({&first, 1});
  ASSERT_TRUE(second.WaitCalls(1));
  std::vector<FetchCore::Item> mixed{{Id(40), 10}, {Id(41), 10}, {Id(42), 10}, {Id(43), 9000}};
  tickets = capped.Hold(mixed);
  second.Open();
  for (const auto& t : tickets) ASSERT_OK(capped.Await(t).bytes);
  calls = second.calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[1], (std::vector<Digest>{Id(40), Id(41)}));
  EXPECT_EQ(calls[2], (std::vector<Digest>{Id(42)}));
  EXPECT_EQ(calls[3], (std::vector<Digest>{Id(43)}));
}

TEST(FetchCore, DemandBatchesHaveTheirOwnBound) {
  Fetcher fetcher;
  FetchCore::Options o = Threads(1);
  o.max_batch_bytes = 10000;
  o.max_demand_batch_bytes = 2000;
  FetchCore core(fetcher.fn(), o);
  FetchCore::Item first{Id(50), 1000};
  core.Request({&first, 1});
  ASSERT_TRUE(fetcher.WaitCalls(1));
  std::vector<FetchCore::Item> items;
  for (int i = 51; i <= 54; ++i) items.push_back({Id(i), 1000});
  auto tickets = core.Hold(items);
  fetcher.Open();
  for (const auto& t : tickets) ASSERT_OK(core.Await(t).bytes);
  for (const auto& call : fetcher.calls()) EXPECT_LE(call.size(), 2u);
}

TEST(FetchCore, ADemandReadOvertakesQueuedBackgroundFetches) {
  Fetcher fetcher;
  FetchCore::Options o = Threads(0, 1);  // one background thread, which takes demand work too
  o.max_batch_chunks = 1;
  FetchCore core(fetcher.fn(), o);
  std::vector<FetchCore::Item> items;
  for (int i = 60; i < 70; ++i) items.push_back({Id(i), 6});
  core.Background(items);
  ASSERT_TRUE(fetcher.WaitCalls(1));  // busy with blob 60
  FetchCore::Answer got{End::kShutdown, Err(InternalError("unset"))};
  std::thread reader([&] { got = core.Fetch(items[9]); });
  ASSERT_TRUE(Eventually([&] { return core.stats().promoted == 1; }));
  fetcher.Open();
  reader.join();
  ASSERT_OK(got.bytes);
  auto calls = fetcher.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[1], std::vector<Digest>{Id(69)});  // next after the running one
  EXPECT_EQ(core.stats().background_queued, 10u);
}

TEST(FetchCore, BackgroundQueueAndBytesInFlightAreBounded) {
  Fetcher fetcher;
  FetchCore::Options o = Threads(0, 4);
  o.max_batch_bytes = 1000;
  o.background_inflight_bytes = 2000;  // two batches of one blob in flight, not four
  o.max_queued_background = 6;
  FetchCore core(fetcher.fn(), o);
  std::vector<FetchCore::Item> items;
  for (int i = 70; i < 80; ++i) items.push_back({Id(i), 1000});
  core.Background(items);
  EXPECT_EQ(core.stats().background_queued, 6u);
  EXPECT_EQ(core.stats().background_dropped, 4u);
  ASSERT_TRUE(fetcher.WaitCalls(2));  // two threads hold the byte budget
  fetcher.Open();
  ASSERT_TRUE(Eventually([&] { return core.stats().fetches == 6; }));
  EXPECT_EQ(fetcher.most_running(), 2);  // never a third while two were in flight
  // Nothing is kept without a keeper: the same items queue again once their fetches ended.
  core.Background(items);
  EXPECT_EQ(core.stats().background_queued, 12u);
}

TEST(FetchCore, AnUnclaimedErrorGoesToTheNextReaderOnceWithinItsTtl) {
  Fetcher fetcher;
  fetcher.Open();
  int calls = 0;
  fetcher.answer = [&](const Digest& id) -> Result<std::vector<uint8_t>> {
    ++calls;
    if (calls == 1) return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch"));
    return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  };
  auto clock = std::make_shared<FakeClock>();
  FetchCore::Options o = Threads(0, 1);
  o.clock = clock;
  o.unclaimed_error_ttl = std::chrono::seconds(10);
  FetchCore core(fetcher.fn(), o);
  FetchCore::Item item{Id(80), 6};
  core.Background({&item, 1});
  ASSERT_TRUE(Eventually([&] { return core.stats().fetch_errors == 1; }));
  core.Background({&item, 1});  // its error awaits a reader: not fetched again
  EXPECT_EQ(core.stats().background_queued, 1u);
  auto first = core.Fetch(item);
  EXPECT_EQ(first.bytes.error().code(), StatusCode::kCorruption);  // the cause, not what followed
  auto second = core.Fetch(item);  // once: now the store is asked again
  EXPECT_EQ(second.bytes.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(fetcher.calls().size(), 2u);
  // An error older than the TTL is not handed out.
  core.Background({&item, 1});
  ASSERT_TRUE(Eventually([&] { return core.stats().fetch_errors == 3; }));
  clock->Advance(std::chrono::seconds(10));
  auto late = core.Fetch(item);
  EXPECT_EQ(late.bytes.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(fetcher.calls().size(), 4u);
}

// Regression: the mount Requests a read's chunks, then Gets them one by one; a chunk whose
// fetch failed before its Get came must still give that Get the fetch's error (a store that set
// a corrupt copy aside answers NotFound the second time, and the reader must report Corruption).
TEST(FetchCore, TheErrorOfARequestedFetchGoesToItsReaderWhenItComesLater) {
  Fetcher fetcher;
  fetcher.Open();
  std::atomic<int> calls{0};
  fetcher.answer = [&](const Digest& id) -> Result<std::vector<uint8_t>> {
    if (++calls == 1) return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch"));
    return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  };
  FetchCore::Options o = Threads(1);
  o.unclaimed_error_ttl = std::chrono::seconds(10);
  FetchCore core(fetcher.fn(), o);
  FetchCore::Item item{Id(85), 6};
  // Many rounds: the fetch thread runs at once, so its failure lands at any moment of Request.
  for (uint64_t round = 0; round < 200; ++round) {
    calls = 0;
    core.Request({&item, 1});
    ASSERT_TRUE(Eventually([&] { return core.stats().fetches == round + 1; }));
    auto got = core.Fetch(item);
    ASSERT_EQ(got.bytes.error().code(), StatusCode::kCorruption) << "round " << round;
    ASSERT_EQ(calls, 1) << "round " << round;
  }
}

TEST(FetchCore, KeeperHitsAndHintsOfJoinedReaders) {
  Fetcher fetcher;
  MapKeeper keeper;
  FetchCore::Options o = Threads(1);
  o.keeper = &keeper;
  FetchCore core(fetcher.fn(), o);
  FetchCore::Item a{Id(90), 6, /*hints=*/1};
  core.Request({&a, 1});
  ASSERT_TRUE(fetcher.WaitCalls(1));
  FetchCore::Answer got{End::kShutdown, Err(InternalError("unset"))};
  std::thread reader([&] { got = core.Fetch({Id(90), 6, /*hints=*/2}); });
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 1; }));
  fetcher.Open();
  reader.join();
  ASSERT_OK(got.bytes);
  EXPECT_EQ(keeper.last_hints.at(Id(90)), 3u);  // ORed over the readers
  // Kept: Fetch hits, Request skips.
  auto hit = core.Fetch(a);
  EXPECT_EQ(hit.bytes->get(), got.bytes->get());
  auto tickets = core.Hold({&a, 1});
  EXPECT_FALSE(tickets[0]);
  EXPECT_EQ(fetcher.calls().size(), 1u);
}

TEST(FetchCore, ReleaseDropsQueuedTicketsAndWaitsForRunningOnes) {
  Fetcher fetcher;
  FetchCore core(fetcher.fn(), Threads(1));
  FetchCore::Item lone{Id(100), 6};
  auto running = core.Hold({&lone, 1});
  ASSERT_TRUE(fetcher.WaitCalls(1));  // the one thread is busy with 100
  std::vector<FetchCore::Item> items{{Id(101), 6}, {Id(102), 6}};
  auto queued = core.Hold(items);
  auto other = core.Hold({&items[1], 1});  // another holder of 102
  core.Release(queued);  // nothing of it runs: returns at once, 101 dropped, 102 kept for `other`
  EXPECT_TRUE(queued.empty());
  int returned_when_released = -1;
  std::thread releaser([&] {
    core.Release(running);
    returned_when_released = fetcher.returned();
  });
  fetcher.Open();
  releaser.join();
  EXPECT_GE(returned_when_released, 1);  // it waited for the running fetch of 100
  ASSERT_OK(core.Await(other[0]).bytes);
  std::vector<Digest> fetched;
  for (const auto& call : fetcher.calls()) fetched.insert(fetched.end(), call.begin(), call.end());
  EXPECT_EQ(fetched, (std::vector<Digest>{Id(100), Id(102)}));
}

TEST(FetchCore, FetchHereLeadsTheMissesAndJoinsOthersFetches) {
  FetchCore core(BatchFetch(), FetchCore::Options{.name = "here"});  // no threads
  Fetcher fetcher;
  std::vector<Digest> first{Id(110), Id(111)};
  FetchResults a;
  std::thread leader([&] { a = core.FetchHere(first, fetcher.fn()); });
  ASSERT_TRUE(fetcher.WaitCalls(1));
  // A second caller wants 111 (being fetched) and 112 (nobody's): it leads 112 alone and joins
  // 111. Its own fetch is held by the same gate, so it cannot finish before the leader's.
  std::vector<Digest> second{Id(111), Id(112), Id(112)};
  FetchResults b;
  std::thread follower([&] { b = core.FetchHere(second, fetcher.fn()); });
  ASSERT_TRUE(fetcher.WaitCalls(2));
  fetcher.Open();
  leader.join();
  follower.join();
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(*a[1], BytesOf(111));
  EXPECT_EQ(*b[0], BytesOf(111));
  EXPECT_EQ(*b[1], BytesOf(112));
  EXPECT_EQ(*b[2], BytesOf(112));
  auto calls = fetcher.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], std::vector<Digest>{Id(112)});
  EXPECT_EQ(core.stats().joined, 2u);  // 111, and the second 112
}

TEST(FetchCore, FetchHereWakesJoinersWithTheLeadersError) {
  FetchCore core(BatchFetch(), FetchCore::Options{});
  Fetcher fetcher;
  fetcher.answer = [](const Digest& id) -> Result<std::vector<uint8_t>> {
    return Err(UnavailableError("chunk " + id.ToString() + ": upstream down (test)"));
  };
  std::vector<Digest> ids{Id(120)};
  std::vector<FetchResults> results(6);
  std::vector<std::thread> callers;
  callers.emplace_back([&] { results[0] = core.FetchHere(ids, fetcher.fn()); });
  ASSERT_TRUE(fetcher.WaitCalls(1));
  for (int i = 1; i < 6; ++i) {
    callers.emplace_back([&, i] { results[i] = core.FetchHere(ids, fetcher.fn()); });
  }
  ASSERT_TRUE(Eventually([&] { return core.stats().joined == 5; }));
  fetcher.Open();
  for (auto& t : callers) t.join();
  for (const auto& r : results) {
    EXPECT_STATUS(r[0], kUnavailable, "chunk " + Id(120).ToString() + ": upstream down (test)");
  }
  EXPECT_EQ(fetcher.calls().size(), 1u);
}

// A store whose GetMany and Get the test scripts.
class ScriptedStore : public ChunkStore {
 public:
  Result<bool> Contains(const Digest&) override { return false; }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return BlobSizes(ids.size()); }
  Status Put(const Digest&, std::span<const uint8_t>) override { return Status::Ok(); }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    if (id == Id(3)) return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch"));
    if (id == Id(4)) throw std::runtime_error("boom");
    if (id == Id(9)) {
      return Err(NotFoundError("chunk " + id.ToString() + ": not in store (set aside)")
                     .WithReason(std::string(kSetAsideCorrupt)));
    }
    return BytesOf(id == Id(1) ? 1 : 2);
  }
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    ++get_manys;
    if (batch_error) return Err(*batch_error);
    BlobBatch out;
    for (const Digest& id : ids) {
      if (id == Id(9)) {
        out.emplace_back();
      } else {
        out.emplace_back(BytesOf(id == Id(1) ? 1 : 2));
      }
    }
    if (short_answer) out.pop_back();
    return out;
  }
  bool PrefersBatches() const override { return batches; }
  bool batches = true;
  bool short_answer = false;
  std::optional<Status> batch_error;
  int gets = 0, get_manys = 0;
};

// A blob the batch answer lacks is asked for alone, so that the store says why it lacks it (a
// remote origin's batch answer says only "missing"; its GET says the copy was set aside).
TEST(ReadBlobs, OneGetManyForABatchingStoreThenAGetOfEachMissingBlob) {
  ScriptedStore store;
  std::vector<Digest> ids{Id(1), Id(9)};
  uint64_t calls = 0;
  FetchResults got = ReadBlobs(store, ids, BatchFailure::kReadEachAlone, &calls);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(*got[0], BytesOf(1));
  EXPECT_STATUS(got[1], kNotFound, "chunk " + Id(9).ToString() + ": not in store (set aside)");
  EXPECT_EQ(got[1].error().reason(), kSetAsideCorrupt);
  EXPECT_EQ(store.get_manys, 1);
  EXPECT_EQ(store.gets, 1);
  EXPECT_EQ(calls, 2u);
  // A store that does not prefer batches: Get per blob.
  store.batches = false;
  got = ReadBlobs(store, std::vector<Digest>{Id(1), Id(2)}, BatchFailure::kReadEachAlone, &calls);
  EXPECT_EQ(store.gets, 3);
  EXPECT_EQ(calls, 4u);
}

TEST(ReadBlobs, AFailedBatchIsReadAgainBlobByBlob) {
  ScriptedStore store;
  store.batch_error = CorruptionError("chunk " + Id(3).ToString() + ": digest mismatch");
  std::vector<Digest> ids{Id(1), Id(3), Id(4)};
  FetchResults got = ReadBlobs(store, ids, BatchFailure::kReadEachAloneUnlessTransient);
  EXPECT_EQ(*got[0], BytesOf(1));
  EXPECT_STATUS(got[1], kCorruption, "chunk " + Id(3).ToString() + ": digest mismatch");
  EXPECT_STATUS(got[2], kInternal, "chunk " + Id(4).ToString() + ": boom");
  EXPECT_EQ(store.gets, 3);
}

TEST(ReadBlobs, ATransientBatchErrorGoesToEveryBlobUnlessReadEachAlone) {
  ScriptedStore store;
  store.batch_error = UnavailableError("origin: unreachable (test)");
  std::vector<Digest> ids{Id(1), Id(2)};
  FetchResults got = ReadBlobs(store, ids, BatchFailure::kReadEachAloneUnlessTransient);
  for (const auto& r : got) EXPECT_STATUS(r, kUnavailable, "origin: unreachable (test)");
  EXPECT_EQ(store.gets, 0);
  got = ReadBlobs(store, ids, BatchFailure::kReadEachAlone);
  EXPECT_EQ(*got[0], BytesOf(1));
  EXPECT_EQ(*got[1], BytesOf(2));
  EXPECT_EQ(store.gets, 2);
}

TEST(ReadBlobs, AnAnswerOfTheWrongLengthIsInternalAndReadAgain) {
  ScriptedStore store;
  store.short_answer = true;
  std::vector<Digest> ids{Id(1), Id(2)};
  FetchResults got = ReadBlobs(store, ids, BatchFailure::kReadEachAloneUnlessTransient);
  // Internal is not transient: each blob is read alone.
  EXPECT_EQ(*got[0], BytesOf(1));
  EXPECT_EQ(*got[1], BytesOf(2));
}

}  // namespace
}  // namespace bdn
