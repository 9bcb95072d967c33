// The real clock.
#include "bdn/base/clock.h"

#include <thread>

namespace bdn {
namespace {

class RealClock final : public Clock {
 public:
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  void SleepFor(std::chrono::nanoseconds d) const override {
    if (d > std::chrono::nanoseconds::zero()) std::this_thread::sleep_for(d);
  }

 protected:
  void WaitSome(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                SteadyTime deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const std::shared_ptr<Clock>& Clock::Real() {
  static const std::shared_ptr<Clock> real = std::make_shared<RealClock>();
  return real;
}

}  // namespace bdn
