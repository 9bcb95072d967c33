// Bounded retries with jittered exponential back-off for idempotent remote calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <type_traits>

#include "bdn/base/status.h"

namespace bdn::remote {

struct RetryPolicy {
  int attempts = 4;  // tries in all, >= 1
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{2000};
};

// Whether an error is worth another try: only Unavailable (connection refused or reset, 503).
// NotFound, Corruption, DeadlineExceeded (its time is spent) and all others are final.
inline bool IsRetryable(const Status& s) { return s.code() == StatusCode::kUnavailable; }

namespace internal {
inline const Status* ErrorOf(const Status& s) { return s.ok() ? nullptr : &s; }
template <typename T>
const Status* ErrorOf(const Result<T>& r) {
  return r.has_value() ? nullptr : &r.error();
}
}  // namespace internal

// Calls `fn` (returning Status or Result<T>) until it succeeds, fails with a non-retryable
// error, or policy.attempts tries are spent; returns the last outcome. Between tries it sleeps
// a random time in [b/2, b], b = initial_backoff * 2^(try-1) capped at max_backoff.
// Thread-safe if `fn` is.
template <typename F>
auto WithRetries(const RetryPolicy& policy, F&& fn) -> std::invoke_result_t<F&> {
  auto backoff = policy.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    auto outcome = fn();
    const Status* err = internal::ErrorOf(outcome);
    if (!err || !IsRetryable(*err) || attempt >= policy.attempts) return outcome;
    thread_local std::minstd_rand rng{std::random_device{}()};
    auto half = std::max<int64_t>(backoff.count() / 2, 0);
    std::uniform_int_distribution<int64_t> jitter(half, std::max<int64_t>(backoff.count(), half));
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
}

}  // namespace bdn::remote
