#include "bdn/sync/retry.h"

#include "bdn/registry/sync_job_store.h"  // SyncProgress

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
  SyncProgress p;
  Fill(p);
  return RetryNote(p, deadline);
}

void RetryWatch::Fill(SyncProgress& progress) const {
  MutexLock lock(mu_);
  progress.retrying_ms = 0;
  progress.retry_error.clear();
  if (retrying_ == 0) return;
  // At least 1 ms: 0 says "not retrying".
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - since_).count();
  progress.retrying_ms = static_cast<uint64_t>(std::max<int64_t>(ms, 1));
  progress.retry_error = last_error_;
}

std::string RetryNote(const SyncProgress& progress, std::chrono::milliseconds deadline) {
  if (progress.retrying_ms == 0) return "";
  return "retrying for " + std::to_string(progress.retrying_ms / 1000) + "s (gives up at " +
         FormatDuration(deadline) + "): " + progress.retry_error;
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
