// Retries of requests that are safe to repeat: jittered exponential back-off per call, and a
// RetryBudget that one operation (a push) shares across all of its requests, so that a dead
// origin fails the whole operation once, after one deadline, instead of each request on its own
// (docs/http-api.md, "Retries").
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>

#include "bdn/base/backoff.h"
#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/http/client.h"

namespace bdn::remote {

struct RetryPolicy {
  // Tries in all per call, >= 1. Ignored when the call runs under a RetryBudget, whose deadline
  // bounds it instead.
  int attempts = 4;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{2000};
  // Time and sleeps of the loop (base/clock.h: tests run retries without waiting). Null:
  // Clock::Real().
  std::shared_ptr<Clock> clock;
};

// Whether an error is worth another try by its code alone: only Unavailable (connection refused
// or reset, 502/503), but not a client's own shutdown (reason http::kShuttingDown). NotFound,
// Corruption, DeadlineExceeded (its time is spent) and all others are final; an HTTP 5xx answer
// is marked transient by the call itself (see Try). Under a RetryBudget a DeadlineExceeded is
// retried too (see WithRetries).
// Said of a write that got no answer within its deadline (CallWithRetries); of one outside
// /v1/volumes/, or of a push claim, only up to the colon.
inline constexpr std::string_view kOutcomeUnknown =
    "no answer came, so whether the origin applied it is unknown: bdn volume versions shows "
    "whether it did (running the command again is safe: it is applied at most once, and a rerun "
    "of one that was applied may be refused as done already or as a sequence conflict)";

inline bool IsRetryable(const Status& s) {
  return s.code() == StatusCode::kUnavailable && s.reason() != http::kShuttingDown;
}

// What one try tells the retry loop beyond its result.
struct Try {
  int number = 1;           // 1 for the first try
  bool transient = false;   // set by the try: its failure may succeed if repeated (an HTTP 5xx)
  bool final = false;       // set by the try: its failure is the call's, retried by no budget
  bool answered = false;    // set by the try: the remote answered it (CallOnce: an HTTP response)
  int answered_status = 0;  // and the answer's HTTP status
};

// A circuit breaker shared by every request of one operation. An outage starts at the first
// transient failure after the last answer (any response that is not a transient failure) and
// ends with the next answer. While it lasts, calls keep retrying with back-off; once it has lasted
// `deadline`, the budget trips: the failing call and every call after it, pending or new, fails
// at once with the last error's code and message plus " (gave up after retrying for 1m;
// --retry-deadline 1m)" (the deadline as FormatDuration writes it), or " (gave up: no answer for
// 1m; --retry-deadline 1m)" when one try that timed out spanned the whole outage.
// A single call that keeps failing while other calls get answers also gives up after
// `deadline` of its own retries. A tripped budget stays tripped (it serves one operation).
// Thread-safe.
class RetryBudget {
 public:
  struct Options {
    std::chrono::milliseconds deadline{60000};
    std::shared_ptr<Clock> clock;           // null: Clock::Real()
    std::string flag = "--retry-deadline";  // how messages name the limit
  };
  explicit RetryBudget(Options options);

  // The ongoing outage, for progress displays.
  struct Outage {
    std::chrono::milliseconds elapsed{0};  // since it started
    std::chrono::milliseconds deadline{0};
    Status last_error;
    bool tripped = false;
  };
  // nullopt while the remote answers.
  std::optional<Outage> CurrentOutage() const;

  // The error every call fails with once tripped; nullopt before.
  std::optional<Status> Tripped() const;
  // A try got an answer: ends the outage.
  void OnAnswer();
  // A try of a call whose retries began at `call_start` failed transiently with `error`: returns
  // the Status to give up with (the budget is, or just got, tripped; or this call alone has
  // retried for the deadline), else how long the caller may sleep at most before its next try.
  // `silent_since`: when the remote was last heard from, if earlier than now (a try that timed
  // out waiting for it started then): an outage that starts with this failure starts there.
  struct Verdict {
    std::optional<Status> give_up;
    std::chrono::milliseconds wait_cap{0};
  };
  Verdict OnTransientFailure(const Status& error, SteadyTime call_start,
                             std::optional<SteadyTime> silent_since = std::nullopt);

  // How long one request under this budget may wait with no byte moving: the deadline, in whole
  // seconds rounded up (http::Request::stall_timeout), or `stall` if it is shorter. A hung
  // remote (it accepts connections and never answers) thus counts against the deadline like a
  // refused connection does, instead of holding each request for its own longer timeout.
  std::chrono::milliseconds StallTimeout(std::optional<std::chrono::milliseconds> stall) const;

  const Clock& clock() const { return *clock_; }
  std::chrono::milliseconds deadline() const { return options_.deadline; }

 private:
  Status GiveUpLocked(const Status& error) const REQUIRES(mu_);

  const Options options_;
  const std::shared_ptr<Clock> clock_;
  mutable Mutex mu_;
  std::optional<SteadyTime> outage_start_ GUARDED_BY(mu_);
  Status last_error_ GUARDED_BY(mu_);
  std::optional<Status> tripped_ GUARDED_BY(mu_);
};

// Calls `fn` until it succeeds or fails for good, and returns its last outcome. `fn` returns
// Status or Result<T>, and takes either nothing or a Try& (to mark a failure transient). A
// failure is retried if IsRetryable(status) or the try marked it transient; between tries the
// loop sleeps a random time in [b/2, b], b = initial_backoff * 2^(try-1) capped at max_backoff.
// Without a budget, at most policy.attempts tries are made. With one, tries go on until the
// budget gives up (see RetryBudget), the sleeps never pass its deadline, and a tripped budget
// fails the call before its first try; a try that failed DeadlineExceeded (the remote did not
// answer in time) is retried too, and the outage it starts is counted from the try's start.
// Thread-safe if `fn` is.
template <typename F>
auto WithRetries(const RetryPolicy& policy, RetryBudget* budget, F&& fn) {
  const Clock& clock = budget ? budget->clock() : policy.clock ? *policy.clock : *Clock::Real();
  auto backoff = policy.initial_backoff;
  const SteadyTime call_start = clock.SteadyNow();
  for (Try t;; ++t.number) {
    t.transient = false;
    t.final = false;
    t.answered = false;
    t.answered_status = 0;
    const SteadyTime try_start = clock.SteadyNow();
    auto outcome = [&] {
      if constexpr (std::is_invocable_v<F&, Try&>) {
        return fn(t);
      } else {
        return fn();
      }
    };
    using Outcome = decltype(outcome());
    if (budget) {
      if (auto s = budget->Tripped()) return backoff::Failure<Outcome>(*s);
    }
    Outcome out = outcome();
    const Status* err = backoff::ErrorOf(out);
    const bool timed_out = err && err->code() == StatusCode::kDeadlineExceeded;
    const bool transient =
        err && !t.final && (t.transient || IsRetryable(*err) || (budget && timed_out));
    if (!transient) {
      if (budget) budget->OnAnswer();
      return out;
    }
    auto wait = backoff::Jitter(backoff);
    if (budget) {
      RetryBudget::Verdict v = budget->OnTransientFailure(
          *err, call_start, timed_out ? std::optional<SteadyTime>(try_start) : std::nullopt);
      if (v.give_up) return backoff::Failure<Outcome>(*v.give_up);
      wait = std::min(wait, v.wait_cap);
    } else if (t.number >= policy.attempts) {
      return out;
    }
    clock.SleepFor(wait);
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
}

// One HTTP try for WithRetries: client.Send, with a non-2xx answer mapped as client.Call maps it
// (HttpClient::ErrorOf) and a 500, 502, 503 or 504 marked transient. Only for requests that are
// safe to repeat (reads, content-addressed uploads, writes carrying an Idempotency-Key).
Result<http::Response> CallOnce(http::HttpClient& client, const http::Request& req, Try& t);

// CallOnce under WithRetries; under a budget, each try of a GET or HEAD gets the budget's
// StallTimeout (reads of many ids by POST set it themselves; writes keep their own timeouts).
// Under a budget, a write without a stall_timeout of its own (a commit, a claim, a tag) that got
// no answer within its deadline fails at once with DeadlineExceeded "…: no response within N
// ms; no answer came, so whether the origin applied it is unknown: …" (kOutcomeUnknown; of a
// write outside /v1/volumes/, or of a push claim, only up to the colon): not as the budget's ("gave
// up: no answer for 3s; --retry-deadline 3s"), which it did not wait on. Such a write whose retries
// end in Unavailable or DeadlineExceeded after a try that was sent and got no answer (an empty
// reply, a reset, a gateway's 502 or 504) has the same words appended to its error, with or without
// a budget.
Result<http::Response> CallWithRetries(http::HttpClient& client, const http::Request& req,
                                       const RetryPolicy& policy, RetryBudget* budget);

// A fresh Idempotency-Key value: 32 random lower-case hex characters. Errors: those of RandomHex.
Result<std::string> NewIdempotencyKey();

}  // namespace bdn::remote
