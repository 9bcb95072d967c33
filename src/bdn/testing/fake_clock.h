// A Clock for tests: time moves only when the test moves it (Advance) or when a component
// sleeps (SleepFor advances the fake time by the sleep and returns at once), so deadlines,
// expiries and back-off are tested without waiting and without wall-clock bounds.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"

namespace bdn::testutil {

// Starts at an arbitrary fixed steady time and at 2026-01-01T00:00:00Z wall time; both move
// together. Thread-safe.
class FakeClock final : public Clock {
 public:
  FakeClock() = default;

  SteadyTime SteadyNow() const override {
    return SteadyTime(std::chrono::nanoseconds(elapsed_ns_.load()) + std::chrono::hours(1000));
  }
  WallTime WallNow() const override {
    return WallTime(std::chrono::seconds(1767225600)) +
           std::chrono::duration_cast<WallTime::duration>(
               std::chrono::nanoseconds(elapsed_ns_.load()));
  }
  void SleepFor(std::chrono::nanoseconds d) const override {
    sleeps_.fetch_add(1);
    {
      MutexLock lock(mu_);
      slept_.push_back(d);
    }
    if (d > std::chrono::nanoseconds::zero()) const_cast<FakeClock*>(this)->Advance(d);
  }

  // Moves both times forward by `d` and wakes every component waiting in WaitUntil, which then
  // sees the new time.
  void Advance(std::chrono::nanoseconds d) {
    elapsed_ns_.fetch_add(d.count());
    MutexLock lock(mu_);
    for (auto* cv : waiting_) cv->notify_all();
  }
  // How many times SleepFor was called.
  int sleeps() const { return sleeps_.load(); }
  // The durations SleepFor was called with, in order.
  std::vector<std::chrono::nanoseconds> sleep_durations() const {
    MutexLock lock(mu_);
    return slept_;
  }

 protected:
  void WaitSome(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                SteadyTime) const override {
    {
      MutexLock g(mu_);
      waiting_.insert(&cv);
    }
    // A short real wait: an Advance that lands between the caller's time check and this wait
    // is seen at the next turn instead of being lost.
    cv.wait_for(lock, std::chrono::milliseconds(2));
    MutexLock g(mu_);
    waiting_.erase(&cv);
  }

 private:
  std::atomic<int64_t> elapsed_ns_{0};
  mutable std::atomic<int> sleeps_{0};
  mutable Mutex mu_;
  mutable std::multiset<std::condition_variable*> waiting_ GUARDED_BY(mu_);
  mutable std::vector<std::chrono::nanoseconds> slept_ GUARDED_BY(mu_);
};

}  // namespace bdn::testutil
