#include "bdn/base/circuit_breaker.h"

#include <algorithm>

#include "bdn/base/units.h"

namespace bdn {
namespace {

// A duration as a message shows it: whole seconds, at least 1.
std::string Seconds(std::chrono::nanoseconds d) {
  auto s = std::max(std::chrono::ceil<std::chrono::seconds>(d), std::chrono::seconds(1));
  return FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(s));
}

}  // namespace

CircuitBreaker::CircuitBreaker(Options options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = Clock::Real();
}

bool CircuitBreaker::IsOpen() const {
  MutexLock lock(mu_);
  return failed_at_ && (probing_ || options_.clock->SteadyNow() < open_until_);
}

Status CircuitBreaker::Admit(bool& probe, std::string_view what) {
  probe = false;
  MutexLock lock(mu_);
  if (!failed_at_) return Status::Ok();
  const SteadyTime now = options_.clock->SteadyNow();
  if (!probing_ && now >= open_until_) {
    probing_ = true;
    probe = true;
    return Status::Ok();
  }
  const std::string said = options_.name + " failed " + std::string(what) + " " +
                           Seconds(now - last_failed_at_) + " ago (" + last_error_.message() +
                           "); ";
  if (probing_) return UnavailableError(said + "another call is trying it again now");
  return UnavailableError(said + "not asked again for " + Seconds(open_until_ - now));
}

void CircuitBreaker::Record(bool answered, const Status& error, bool probe) {
  MutexLock lock(mu_);
  if (probe) probing_ = false;
  if (answered) {
    failed_at_.reset();
    strikes_ = 0;
    return;
  }
  if (failed_at_ && !probe) return;
  const SteadyTime now = options_.clock->SteadyNow();
  if (!failed_at_) failed_at_ = now;
  last_failed_at_ = now;
  open_until_ = now + options_.open_for * (1 << std::min(strikes_, 3));
  ++strikes_;
  last_error_ = error;
}

}  // namespace bdn
