// Pieces shared by the retry loops (remote/retry.h for the origin, sync/retry.h for sync
// sources): a jittered wait, and the error of an outcome that is a Status or a Result.
#pragma once

#include <chrono>
#include <type_traits>

#include "bdn/base/status.h"

namespace bdn::backoff {

// A random wait in [b/2, b] (b < 0 counts as 0). Thread-safe.
std::chrono::milliseconds Jitter(std::chrono::milliseconds b);

// The error of an outcome; nullptr for a success.
inline const Status* ErrorOf(const Status& s) { return s.ok() ? nullptr : &s; }
template <typename T>
const Status* ErrorOf(const Result<T>& r) {
  return r.has_value() ? nullptr : &r.error();
}

// An outcome of type Outcome (a Status or a Result) that fails with `s`.
template <typename Outcome>
Outcome Failure(Status s) {
  if constexpr (std::is_same_v<Outcome, Status>) {
    return s;
  } else {
    return Outcome(std::unexpect, std::move(s));
  }
}

}  // namespace bdn::backoff
