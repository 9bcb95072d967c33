// The one time seam: every component that waits, times out or expires asks a Clock, so tests
// move time instead of sleeping (testing/fake_clock.h). Two kinds of time, named so: steady time
// (monotonic, for deadlines, intervals and back-off; never stored) and wall time (calendar time,
// for what is recorded or shown: created, delete_after, claim expiry in a database).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "bdn/base/mutex.h"

namespace bdn {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

// A source of both kinds of time and the one way to wait for some of it. Implementations are
// thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for deadlines and intervals.
  virtual SteadyTime SteadyNow() const = 0;
  // Calendar time, for records.
  virtual WallTime WallNow() const = 0;
  // Returns after `d` of steady time has passed (at once for d <= 0).
  virtual void SleepFor(std::chrono::nanoseconds d) const = 0;
  // Waits on `cv` (with `lock` held, as std::condition_variable::wait_until) until `pred()` holds
  // or `deadline` (steady time) has passed; returns pred(). A fake clock wakes such waiters when
  // its time is moved, so a deadline in a test passes without waiting. `pred` may be a lambda
  // marked REQUIRES(the caller's mutex): the thread-safety analysis cannot see that `lock` holds
  // it, so it is not run on this body.
  template <typename Pred>
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 SteadyTime deadline, Pred pred) const NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) {
      if (SteadyNow() >= deadline) return pred();
      WaitSome(cv, lock, deadline);
    }
    return true;
  }

  // The process's real clock: std::chrono::steady_clock, system_clock and sleep_for. One shared
  // instance, never null.
  static const std::shared_ptr<Clock>& Real();

 protected:
  // One wait of WaitUntil: returns when notified, on a spurious wake-up, or at `deadline` (the
  // real clock), or when the fake time moves (a fake clock).
  virtual void WaitSome(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                        SteadyTime deadline) const = 0;
};

// Milliseconds since the Unix epoch of `t` (the form records and the HTTP API carry).
inline int64_t UnixMs(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
// Wall time now from `clock`, as UnixMs.
inline int64_t WallNowMs(const Clock& clock) { return UnixMs(clock.WallNow()); }

}  // namespace bdn
