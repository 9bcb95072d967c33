// WithSourceRetries on a FakeClock: the deadline of a call, the server's Retry-After, and a
// cancel, all without waiting.
#include "bdn/sync/retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::sync {
namespace {

using namespace std::chrono_literals;

TEST(WithSourceRetries, TransientFailuresAreRetriedUntilTheDeadlineThenNamed) {
  auto clock = std::make_shared<testutil::FakeClock>();
  RetryOptions options{
      .deadline = 10s, .initial_backoff = 500ms, .max_backoff = 2s, .clock = clock};
  const SteadyTime start = clock->SteadyNow();
  int tries = 0;
  Status s = WithSourceRetries(options, nullptr, "hf://org/model", [&](Attempt& a) {
    ++tries;
    a.transient = true;
    return UnavailableError("hf://org/model: HTTP 503");
  });
  EXPECT_STATUS(s, kUnavailable, "hf://org/model: HTTP 503 (retried for ");
  EXPECT_EQ(s.reason(), "source_unavailable");
  // No wait passes the deadline: the call gives up before sleeping past it.
  EXPECT_LE(clock->SteadyNow() - start, 10s);
  EXPECT_GT(tries, 5);
}

// From an attacking helper: a sync of an unreachable Hub showed "0 B/0 B  files 0/0" for its
// whole retry deadline. The watch says a call is retrying, for how long and why, until it ends.
TEST(WithSourceRetries, TheWatchSaysWhileACallIsRetryingAndWhy) {
  auto clock = std::make_shared<testutil::FakeClock>();
  auto watch = std::make_shared<RetryWatch>(clock);
  RetryOptions options{.watch = watch,
                       .deadline = 5min,
                       .initial_backoff = 500ms,
                       .max_backoff = 2s,
                       .clock = clock};
  std::vector<std::string> notes;
  int tries = 0;
  Status s = WithSourceRetries(options, nullptr, "hf://org/model", [&](Attempt& a) {
    notes.push_back(watch->Note(options.deadline));
    if (++tries == 4) return Status::Ok();
    clock->Advance(3s);
    a.transient = true;
    return UnavailableError("hf://org/model: connection refused");
  });
  EXPECT_TRUE(s.ok());
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_EQ(notes[0], "");
  EXPECT_TRUE(
      notes[1].starts_with("retrying for 0s (gives up at 5m): hf://org/model: connection "
                           "refused"))
      << notes[1];
  EXPECT_TRUE(notes[3].starts_with("retrying for ")) << notes[3];
  EXPECT_NE(notes[3], notes[1]) << "the time in the note did not move";
  EXPECT_EQ(watch->Note(options.deadline), "") << "a call that succeeded is no longer retrying";
  // A call that fails for good ends its stretch too.
  s = WithSourceRetries(options, nullptr, "hf://org/model", [&](Attempt& a) {
    a.transient = tries++ < 6;
    return UnavailableError("hf://org/model: HTTP 403");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(watch->Note(options.deadline), "");
}

// A slow source that stalls now and then but moves forward each try: counted from the first
// try, the deadline failed a long transfer that was still progressing.
TEST(WithSourceRetries, ATryThatProgressedStartsTheDeadlineOver) {
  auto clock = std::make_shared<testutil::FakeClock>();
  RetryOptions options{
      .deadline = 10s, .initial_backoff = 500ms, .max_backoff = 2s, .clock = clock};
  int tries = 0;
  Status s = WithSourceRetries(options, nullptr, "https://h/f", [&](Attempt& a) {
    ++tries;
    clock->Advance(4s);  // each try runs 4 s before it stalls
    if (tries == 8) return Status::Ok();
    a.transient = true;
    a.progressed = true;
    return UnavailableError("https://h/f: stalled");
  });
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(tries, 8) << "8 tries of 4 s each, well past the 10 s deadline, all progressing";
  // Without progress the same tries end at the deadline.
  tries = 0;
  s = WithSourceRetries(options, nullptr, "https://h/f", [&](Attempt& a) {
    ++tries;
    clock->Advance(4s);
    a.transient = true;
    return UnavailableError("https://h/f: stalled");
  });
  EXPECT_STATUS(s, kUnavailable, "https://h/f: stalled (retried for ");
  EXPECT_LE(tries, 3);
}

TEST(WithSourceRetries, RetryAfterIsHonouredAndFinalErrorsReturnAtOnce) {
  auto clock = std::make_shared<testutil::FakeClock>();
  RetryOptions options{.deadline = 60s, .initial_backoff = 100ms, .clock = clock};
  int tries = 0;
  Result<int> r = WithSourceRetries(options, nullptr, "s3://b/k", [&](Attempt& a) -> Result<int> {
    if (++tries == 1) {
      a.transient = true;
      a.retry_after = 7s;
      return Err(UnavailableError("s3://b/k: HTTP 429"));
    }
    return 5;
  });
  ASSERT_OK(r);
  EXPECT_EQ(*r, 5);
  EXPECT_EQ(tries, 2);
  // 7 s slept in steps of at most 50 ms.
  std::chrono::nanoseconds slept{0};
  for (auto d : clock->sleep_durations()) {
    EXPECT_LE(d, 50ms);
    slept += d;
  }
  EXPECT_EQ(slept, 7s);

  tries = 0;
  Status final = WithSourceRetries(options, nullptr, "s3://b/k", [&](Attempt&) {
    ++tries;
    return NotFoundError("s3://b/k: not found");
  });
  EXPECT_STATUS(final, kNotFound, "s3://b/k: not found");
  EXPECT_EQ(tries, 1);
}

// A Retry-After past the deadline failed at once with "HTTP 429 (retried for 0ms)".
TEST(WithSourceRetries, ARetryAfterPastTheDeadlineIsNamed) {
  auto clock = std::make_shared<testutil::FakeClock>();
  RetryOptions options{.deadline = 5s, .clock = clock};
  int tries = 0;
  Status s = WithSourceRetries(options, nullptr, "hf://org/model", [&](Attempt& a) {
    ++tries;
    a.transient = true;
    a.retry_after = 3600s;
    return UnavailableError("hf://org/model: GET /api/models/org/model/revision/main: HTTP 429");
  });
  EXPECT_EQ(
      "hf://org/model: GET /api/models/org/model/revision/main: HTTP 429 (the server asked to "
      "retry after 1h, past the retry deadline of 5s (--retry-deadline))",
      s.message());
  EXPECT_EQ("source_unavailable", s.reason());
  EXPECT_EQ(1, tries);
}

TEST(WithSourceRetries, ACancelEndsTheWaitAndTheCall) {
  auto clock = std::make_shared<testutil::FakeClock>();
  RetryOptions options{
      .deadline = 600s, .initial_backoff = 30s, .max_backoff = 30s, .clock = clock};
  std::atomic<bool> cancel{false};
  int tries = 0;
  Status s = WithSourceRetries(options, &cancel, "sync job sync_1", [&](Attempt& a) {
    ++tries;
    a.transient = true;
    cancel = true;  // cancelled while the first failure is being handled
    return UnavailableError("connection reset");
  });
  EXPECT_STATUS(s, kConflict, "sync job sync_1: canceled");
  EXPECT_EQ(s.reason(), "canceled");
  EXPECT_EQ(tries, 1);
  EXPECT_LE(clock->sleep_durations().size(), 1u) << "one 50 ms step at most, not 30 s";
}

}  // namespace
}  // namespace bdn::sync
