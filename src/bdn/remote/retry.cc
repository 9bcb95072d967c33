// RetryBudget and the HTTP try of the retry loops.
#include "bdn/remote/retry.h"

#include "bdn/base/units.h"

namespace bdn::remote {

using namespace std::chrono_literals;

RetryBudget::RetryBudget(Options options)
    : options_(std::move(options)), clock_(options_.clock ? options_.clock : Clock::Real()) {}

std::optional<RetryBudget::Outage> RetryBudget::CurrentOutage() const {
  MutexLock lock(mu_);
  if (!outage_start_ && !tripped_) return std::nullopt;
  Outage o;
  o.deadline = options_.deadline;
  o.last_error = last_error_;
  o.tripped = tripped_.has_value();
  if (outage_start_) {
    o.elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - *outage_start_);
  }
  return o;
}

std::optional<Status> RetryBudget::Tripped() const {
  MutexLock lock(mu_);
  return tripped_;
}

void RetryBudget::OnAnswer() {
  MutexLock lock(mu_);
  outage_start_.reset();
}

Status RetryBudget::GiveUpLocked(const Status& error) const {
  return Status(error.code(), error.message() + " (gave up after retrying for " +
                                  FormatDuration(options_.deadline) + "; " + options_.flag + " " +
                                  FormatDuration(options_.deadline) + ")");
}

RetryBudget::Verdict RetryBudget::OnTransientFailure(const Status& error, SteadyTime call_start,
                                                     std::optional<SteadyTime> silent_since) {
  MutexLock lock(mu_);
  if (tripped_) return {.give_up = tripped_};
  const SteadyTime now = clock_->SteadyNow();
  const bool starts_outage = !outage_start_.has_value();
  if (!outage_start_) outage_start_ = std::min(now, silent_since.value_or(now));
  last_error_ = error;
  const auto outage = now - *outage_start_;
  if (outage >= options_.deadline) {
    // One try that waited out the deadline retried nothing (from an attacker: "gave up after
    // retrying for 2s" of a single request).
    if (starts_outage && silent_since && *silent_since < now) {
      tripped_ = Status(error.code(), error.message() + " (gave up: no answer for " +
                                          FormatDuration(options_.deadline) + "; " + options_.flag +
                                          " " + FormatDuration(options_.deadline) + ")");
    } else {
      tripped_ = GiveUpLocked(error);
    }
    return {.give_up = tripped_};
  }
  const auto own = now - call_start;
  if (own >= options_.deadline) return {.give_up = GiveUpLocked(error)};
  auto left = options_.deadline - std::max(outage, own);
  return {.wait_cap = std::chrono::ceil<std::chrono::milliseconds>(left)};
}

std::chrono::milliseconds RetryBudget::StallTimeout(
    std::optional<std::chrono::milliseconds> stall) const {
  const auto whole = std::chrono::ceil<std::chrono::seconds>(options_.deadline);
  const std::chrono::milliseconds mine = std::max<std::chrono::milliseconds>(whole, 1s);
  return stall ? std::min(*stall, mine) : mine;
}

Result<http::Response> CallOnce(http::HttpClient& client, const http::Request& req, Try& t) {
  BDN_ASSIGN_OR_RETURN(http::Response r, client.Send(req));
  if (r.status >= 200 && r.status < 300) return r;
  t.answered = true;
  t.answered_status = r.status;
  t.transient = r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504;
  return Err(client.ErrorOf(req, r));
}

Result<http::Response> CallWithRetries(http::HttpClient& client, const http::Request& req,
                                       const RetryPolicy& policy, RetryBudget* budget) {
  // Only reads: a write that waited past the deadline may have been applied, and its caller is
  // better told so by the write's own answer, however late (from an attacker: a push was told it
  // failed while its commit, slower than --retry-deadline, moved the head).
  const bool read = req.method == http::Method::kGet || req.method == http::Method::kHead;
  if (!read && !req.stall_timeout) {
    // From an attacker: a commit held past its 60 s was reported "gave up: no answer for 3s;
    // --retry-deadline 3s", and its version then appeared; a tag set, rm or restore held so
    // failed with no word that it had been applied.
    // From an attacker: a claim whose answers were all lost (an empty reply each time) failed
    // "Empty reply from server (gave up ...)" with no word that it may have been applied.
    // The advice only for a volume's writes a version shows (not a claim).
    const std::string unknown(req.path.starts_with("/v1/volumes/") && !req.path.ends_with("/claims")
                                  ? kOutcomeUnknown
                                  : kOutcomeUnknown.substr(0, kOutcomeUnknown.find(':')));
    bool unanswered = false;  // a try was sent and got no answer
    auto r = WithRetries(policy, budget, [&](Try& t) -> Result<http::Response> {
      auto sent = CallOnce(client, req, t);
      if (sent) return sent;
      if (t.answered) {
        // A gateway's 502 or 504: the origin behind it may have applied the write.
        if (t.answered_status == 502 || t.answered_status == 504) unanswered = true;
        return sent;
      }
      if (sent.error().code() == StatusCode::kDeadlineExceeded) {
        t.final = true;
        return Err(Status(StatusCode::kDeadlineExceeded, sent.error().message() + "; " + unknown));
      }
      if (sent.error().code() == StatusCode::kUnavailable &&
          sent.error().reason() != http::kShuttingDown &&
          !http::FailedBeforeSending(sent.error())) {
        unanswered = true;
      }
      return sent;
    });
    if (!r && unanswered && r.error().message().find(unknown) == std::string::npos &&
        (r.error().code() == StatusCode::kUnavailable ||
         r.error().code() == StatusCode::kDeadlineExceeded)) {
      return Err(Status(r.error().code(), r.error().message() + "; " + unknown)
                     .WithReason(r.error().reason()));
    }
    return r;
  }
  if (!budget || !read) {
    return WithRetries(policy, budget, [&](Try& t) { return CallOnce(client, req, t); });
  }
  http::Request bounded = req;
  bounded.stall_timeout = budget->StallTimeout(req.stall_timeout);
  return WithRetries(policy, budget, [&](Try& t) { return CallOnce(client, bounded, t); });
}

Result<std::string> NewIdempotencyKey() { return RandomHex(16); }

}  // namespace bdn::remote
