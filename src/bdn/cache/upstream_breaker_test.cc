// UpstreamBreaker against an upstream the test makes fail, on a fake clock: it opens on a read
// the upstream did not answer, fails reads at once while open, lets one read try after the
// interval, doubles the interval on each further failure, and closes on any answer.
#include "bdn/cache/upstream_breaker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bdn/base/circuit_breaker.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"

namespace bdn {
namespace {
using std::chrono::seconds;
using testutil::FakeClock;

// A MemChunkStore whose reads fail with `fail` while it is set, counting the reads that reach it.
class FlakyStore : public MemChunkStore {
 public:
  std::optional<Status> fail;
  std::atomic<int> reads{0};
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++reads;
    if (fail) return Err(*fail);
    return MemChunkStore::Get(id);
  }
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    ++reads;
    if (fail) return Err(*fail);
    BlobBatch out;
    for (const Digest& id : ids) {
      auto got = MemChunkStore::Get(id);
      if (got)
        out.push_back(std::move(*got));
      else
        out.push_back(std::nullopt);
    }
    return out;
  }
};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FlakyStore> upstream = std::make_shared<FlakyStore>();
  UpstreamBreaker breaker{upstream, std::make_shared<CircuitBreaker>(CircuitBreaker::Options{
                                        .open_for = seconds(5), .name = "origin", .clock = clock})};
  Digest id = Digest::Of("chunk");
  Fixture() { EXPECT_OK(upstream->Put(id, std::vector<uint8_t>{'c', 'h', 'u', 'n', 'k'})); }
};

TEST(UpstreamBreakerTest, AHungUpstreamIsAskedOnceUntilItsIntervalHasPassed) {
  Fixture f;
  f.upstream->fail = DeadlineExceededError("origin: stalled: no bytes for 30000 ms");
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  EXPECT_EQ(f.upstream->reads, 1);
  EXPECT_TRUE(f.breaker.IsOpen());
  f.clock->Advance(seconds(1));
  // Neither Get nor GetMany reaches it now.
  EXPECT_STATUS(f.breaker.Get(f.id), kUnavailable,
                "origin failed a read 1s ago (origin: stalled: no bytes for 30000 ms); "
                "not asked again for 4s");
  std::vector<Digest> ids{f.id};
  EXPECT_STATUS(f.breaker.GetMany(ids), kUnavailable, "origin failed a read 1s ago");
  EXPECT_EQ(f.upstream->reads, 1);
  // After 5 s one read tries again; failing, the breaker stays open twice as long.
  f.clock->Advance(seconds(4));
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  EXPECT_EQ(f.upstream->reads, 2);
  f.clock->Advance(seconds(9));
  EXPECT_STATUS(f.breaker.Get(f.id), kUnavailable, "origin failed a read 9s ago");
  f.clock->Advance(seconds(1));
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  EXPECT_EQ(f.upstream->reads, 3);
  // 20 s, then 40 s, and no longer.
  f.clock->Advance(seconds(20));
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  f.clock->Advance(seconds(40));
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  f.clock->Advance(seconds(39));
  EXPECT_STATUS(f.breaker.Get(f.id), kUnavailable, "origin failed a read 39s ago");
  f.clock->Advance(seconds(1));
  EXPECT_STATUS(f.breaker.Get(f.id), kDeadlineExceeded, "origin: stalled");
  EXPECT_EQ(f.upstream->reads, 6);
  // Back: the try after the interval gets the bytes, and the breaker closes.
  f.upstream->fail.reset();
  f.clock->Advance(seconds(40));
  ASSERT_OK(f.breaker.Get(f.id));
  EXPECT_FALSE(f.breaker.IsOpen());
  ASSERT_OK(f.breaker.GetMany(ids));
  EXPECT_EQ(f.upstream->reads, 8);
  // A new outage starts again from 5 s.
  f.upstream->fail = UnavailableError("origin: connection refused");
  EXPECT_STATUS(f.breaker.Get(f.id), kUnavailable, "origin: connection refused");
  f.clock->Advance(seconds(5));
  EXPECT_STATUS(f.breaker.Get(f.id), kUnavailable, "origin: connection refused");
  EXPECT_EQ(f.upstream->reads, 10);
}

TEST(UpstreamBreakerTest, AnAnswerThatIsAnErrorDoesNotOpenIt) {
  Fixture f;
  Digest other = Digest::Of("other");
  EXPECT_STATUS(f.breaker.Get(other), kNotFound, "");
  for (const Status& s :
       {CorruptionError("chunk: digest mismatch"), PermissionDeniedError("key may not read it"),
        UnavailableError("origin: shutting down").WithReason(std::string(kShuttingDown))}) {
    f.upstream->fail = s;
    EXPECT_FALSE(f.breaker.Get(f.id));
    EXPECT_FALSE(f.breaker.IsOpen()) << s.message();
  }
  EXPECT_EQ(f.upstream->reads, 4);
}

TEST(UpstreamBreakerTest, WhileOneReadTriesTheOthersFailAtOnce) {
  Fixture f;
  // The try after the interval waits in the upstream (on another thread) until the test lets it
  // go; reads meanwhile fail at once.
  std::atomic<bool> in_try{false}, release{false};
  struct Waiting : FlakyStore {
    std::atomic<bool>* in_try;
    std::atomic<bool>* release;
    Result<std::vector<uint8_t>> Get(const Digest& id) override {
      *in_try = true;
      while (!*release) std::this_thread::yield();
      return FlakyStore::Get(id);
    }
  };
  auto waiting = std::make_shared<Waiting>();
  waiting->in_try = &in_try;
  waiting->release = &release;
  ASSERT_OK(waiting->Put(f.id, std::vector<uint8_t>{'c', 'h', 'u', 'n', 'k'}));
  UpstreamBreaker breaker(waiting,
                          std::make_shared<CircuitBreaker>(CircuitBreaker::Options{
                              .open_for = seconds(5), .name = "origin", .clock = f.clock}));
  waiting->fail = UnavailableError("origin: connection refused");
  EXPECT_FALSE(breaker.GetMany(std::vector<Digest>{f.id}));
  waiting->fail.reset();
  f.clock->Advance(seconds(5));
  std::thread probe([&] { EXPECT_OK(breaker.Get(f.id)); });
  while (!in_try) std::this_thread::yield();
  EXPECT_STATUS(breaker.Get(f.id), kUnavailable,
                "origin failed a read 5s ago (origin: connection refused); another "
                "call is trying it again now");
  release = true;
  probe.join();
  EXPECT_FALSE(breaker.IsOpen());
  EXPECT_OK(breaker.Get(f.id));
}

}  // namespace
}  // namespace bdn
