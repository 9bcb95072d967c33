#include "bdn/sync/retry.h"

namespace bdn::sync {

namespace internal {

void SleepUnlessCanceled(const Clock& clock, std::chrono::milliseconds d,
                         const std::atomic<bool>* cancel) {
  const SteadyTime end = clock.SteadyNow() + d;
  while (!(cancel && cancel->load())) {
    const auto left = end - clock.SteadyNow();
    if (left <= SteadyTime::duration::zero()) return;
    clock.SleepFor(std::min<SteadyTime::duration>(left, std::chrono::milliseconds(50)));
  }
}

}  // namespace internal

RetryWatch::RetryWatch(std::shared_ptr<Clock> clock)
    : clock_(clock ? std::move(clock) : Clock::Real()) {}

void RetryWatch::Retrying(const Status& error, bool first) {
  MutexLock lock(mu_);
  if (first && retrying_++ == 0) since_ = clock_->SteadyNow();
  last_error_ = error.message();
}

void RetryWatch::Ended() {
  MutexLock lock(mu_);
  if (retrying_ > 0) --retrying_;
}

std::string RetryWatch::Note(std::chrono::milliseconds deadline) const {
  MutexLock lock(mu_);
  if (retrying_ == 0) return "";
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(clock_->SteadyNow() - since_);
  return "retrying for " + std::to_string(s.count()) + "s (gives up at " +
         FormatDuration(deadline) + "): " + last_error_;
}

Status CanceledError(const std::string& what) {
  return ConflictError(what + ": canceled").WithReason(std::string(kCanceled));
}

std::string ErrorCodeOf(const Status& s) {
  if (!s.reason().empty()) return s.reason();
  switch (s.code()) {
    case StatusCode::kNotFound:
      return std::string(kSourceNotFound);
    case StatusCode::kPermissionDenied:
      return std::string(kAccessDenied);
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return std::string(kSourceUnavailable);
    case StatusCode::kFailedPrecondition:
    case StatusCode::kCorruption:
      return std::string(kStoreFailed);
    default:
      return std::string(kInternal);
  }
}

}  // namespace bdn::sync
