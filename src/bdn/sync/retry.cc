#include "bdn/sync/retry.h"

#include <random>
#include <thread>

namespace bdn::sync {

namespace internal {

void SleepUnlessCanceled(std::chrono::milliseconds d, const std::atomic<bool>* cancel) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (!(cancel && cancel->load())) {
    auto left = end - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        left, std::chrono::milliseconds(50)));
  }
}

}  // namespace internal

Status CanceledError(const std::string& what) {
  return ConflictError(what + ": canceled").WithReason(std::string(kCanceled));
}

std::string ErrorCodeOf(const Status& s) {
  if (!s.reason().empty()) return s.reason();
  switch (s.code()) {
    case StatusCode::kNotFound: return std::string(kSourceNotFound);
    case StatusCode::kPermissionDenied: return std::string(kAccessDenied);
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: return std::string(kSourceUnavailable);
    case StatusCode::kFailedPrecondition:
    case StatusCode::kCorruption: return std::string(kStoreFailed);
    default: return std::string(kInternal);
  }
}

}  // namespace bdn::sync
