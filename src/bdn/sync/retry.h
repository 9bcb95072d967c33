// WithSourceRetries: the retry loop of every source request (docs/sync.md, "Retries"): jittered
// exponential back-off, the server's Retry-After honoured, one deadline per call, and a
// cancelled job stopping at once, also in the middle of a wait.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <type_traits>

#include "bdn/base/backoff.h"
#include "bdn/base/clock.h"
#include "bdn/base/status.h"
#include "bdn/base/units.h"  // FormatDuration
#include "bdn/sync/source.h"

namespace bdn::sync {

namespace internal {
// Sleeps `d` on `clock`, in steps of at most 50 ms, returning after the step in which `cancel`
// is set.
void SleepUnlessCanceled(const Clock& clock, std::chrono::milliseconds d,
                         const std::atomic<bool>* cancel);
}  // namespace internal

// The error every source call fails with once `cancel` is set: Conflict "<what>: canceled"
// (someone cancelled the job: exit code 4), reason canceled.
Status CanceledError(const std::string& what);

// Calls `fn(Attempt&)` (returning Status or Result<T>) until it succeeds, fails with an error
// its try did not mark transient, or the deadline of `options` passes, and returns the last
// outcome. Between tries it sleeps a random time in [b/2, b], b = initial_backoff * 2^(try-1)
// capped at max_backoff, or the try's retry_after if that is longer. A transient failure that
// persists past the deadline is returned with " (retried for 5m)" appended, one whose
// Retry-After reaches past it with " (the server asked to retry after 1h, past the retry
// deadline of 5m (--retry-deadline))", and reason source_unavailable. A try that sets
// Attempt::progressed starts the deadline and the back-off over. Each wait to try again is told
// to options.watch (if set), and the call's end after one. With `cancel` set, returns
// CanceledError(what) instead of trying or waiting again. Thread-safe if `fn` is.
template <typename F>
auto WithSourceRetries(const RetryOptions& options, const std::atomic<bool>* cancel,
                       const std::string& what, F&& fn) {
  const Clock& clock = options.clock ? *options.clock : *Clock::Real();
  SteadyTime start = clock.SteadyNow();
  auto backoff = options.initial_backoff;
  // Told to options.watch: this call's stretch of retries, ended however the call ends.
  struct Watched {
    RetryWatch* watch;
    bool retrying = false;
    ~Watched() {
      if (retrying) watch->Ended();
    }
  } watched{options.watch.get()};
  for (Attempt a;; ++a.number) {
    a.transient = false;
    a.retry_after.reset();
    a.progressed = false;
    using Outcome = decltype(fn(a));
    if (cancel && cancel->load()) return backoff::Failure<Outcome>(CanceledError(what));
    Outcome out = fn(a);
    const Status* err = backoff::ErrorOf(out);
    if (err == nullptr || !a.transient) return out;
    if (a.progressed) {
      start = clock.SteadyNow();
      backoff = options.initial_backoff;
    }
    auto wait =
        std::max(backoff::Jitter(backoff), a.retry_after.value_or(std::chrono::milliseconds(0)));
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock.SteadyNow() - start);
    if (spent + wait > options.deadline) {
      // A Retry-After that alone reaches past the deadline is what ended the call: say so, or
      // "retried for 0ms" reads as if nothing was tried.
      const bool asked = a.retry_after && spent + *a.retry_after > options.deadline;
      const std::string why = asked ? " (the server asked to retry after " +
                                          FormatDuration(*a.retry_after) +
                                          ", past the retry deadline of " +
                                          FormatDuration(options.deadline) + " (--retry-deadline))"
                                    : " (retried for " + FormatDuration(spent) + ")";
      Status s =
          Status(err->code(), err->message() + why).WithReason(std::string(kSourceUnavailable));
      return backoff::Failure<Outcome>(std::move(s));
    }
    if (watched.watch != nullptr) {
      watched.watch->Retrying(*err, !watched.retrying);
      watched.retrying = true;
    }
    internal::SleepUnlessCanceled(clock, wait, cancel);
    if (cancel && cancel->load()) return backoff::Failure<Outcome>(CanceledError(what));
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

}  // namespace bdn::sync
