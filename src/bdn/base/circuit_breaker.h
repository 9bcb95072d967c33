// A circuit breaker for the calls of one client to one remote that may stop answering (Nygard,
// "Release It!", 2nd ed., ch. 5 "Circuit Breaker"): after a call the remote did not answer, calls
// fail at once for a while instead of each waiting out its own deadline; then one call tries
// again ("half-open") while the others still fail at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"

namespace bdn {

// Thread-safe; starts no threads.
class CircuitBreaker {
 public:
  struct Options {
    // How long calls fail at once after one the remote did not answer; twice as long after each
    // further such call without an answer in between, up to 8x.
    std::chrono::milliseconds open_for{5000};
    // How messages name the remote ("the upstream").
    std::string name = "the remote";
    // Null: Clock::Real().
    std::shared_ptr<Clock> clock;
  };
  explicit CircuitBreaker(Options options);

  // Whether a call may go to the remote now. Ok when closed, and for the one call that tries
  // again once the open time has passed (then `probe` is set; pass it to Record). Otherwise
  // Unavailable "<name> failed <what> <N>s ago (<the last failed call's error>); not asked again
  // for <M>s", or "...; another call is trying it again now" while the probe runs. `what` names
  // the calls in the message ("a read").
  Status Admit(bool& probe, std::string_view what);
  // A call's outcome. An answer (a result, or an error its caller does not count as a failure)
  // closes the breaker. A failed call (one the remote did not answer, or answered "unavailable")
  // opens it: the first such after an answer, or the probe
  // (which doubles the open time); other calls that were under way when it opened count no
  // further.
  void Record(bool answered, const Status& error, bool probe);
  // Whether calls fail at once now (open and not yet time to try again, or a probe under way).
  bool IsOpen() const;

 private:
  Options options_;
  mutable Mutex mu_;
  std::optional<SteadyTime> failed_at_ GUARDED_BY(mu_);  // set while open
  SteadyTime last_failed_at_ GUARDED_BY(mu_){};          // of the failure last_error_ is
  SteadyTime open_until_ GUARDED_BY(mu_){};
  int strikes_ GUARDED_BY(mu_) = 0;
  Status last_error_ GUARDED_BY(mu_);
  bool probing_ GUARDED_BY(mu_) = false;
};

}  // namespace bdn
