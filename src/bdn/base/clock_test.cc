// Clock: the real clock's waits end at their deadline; the fake clock moves only when told and
// wakes waiters when it does.
#include "bdn/base/clock.h"

#include <gtest/gtest.h>

#include <thread>

#include "bdn/testing/fake_clock.h"

namespace bdn {
namespace {

using namespace std::chrono_literals;

TEST(Clock, RealWaitUntilReturnsThePredicateAtTheDeadline) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  const auto& clock = *Clock::Real();
  const SteadyTime deadline = clock.SteadyNow() + 20ms;
  EXPECT_FALSE(clock.WaitUntil(cv, lock, deadline, [] { return false; }));
  EXPECT_GE(clock.SteadyNow(), deadline);
  EXPECT_TRUE(clock.WaitUntil(cv, lock, deadline, [] { return true; }));
}

TEST(FakeClock, MovesOnlyWhenAdvancedOrSlept) {
  testutil::FakeClock clock;
  const SteadyTime s0 = clock.SteadyNow();
  const int64_t w0 = WallNowMs(clock);
  EXPECT_EQ(w0, 1767225600000);
  EXPECT_EQ(clock.SteadyNow(), s0);
  clock.Advance(1500ms);
  EXPECT_EQ(clock.SteadyNow() - s0, 1500ms);
  EXPECT_EQ(WallNowMs(clock) - w0, 1500);
  clock.SleepFor(7s);
  EXPECT_EQ(clock.SteadyNow() - s0, 8500ms);
  EXPECT_EQ(clock.sleeps(), 1);
}

TEST(FakeClock, AdvancePastADeadlineEndsAWaiter) {
  testutil::FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool timed_out = false;
  const SteadyTime deadline = clock.SteadyNow() + 30s;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    timed_out = !clock.WaitUntil(cv, lock, deadline, [] { return false; });
  });
  clock.Advance(10s);  // not yet
  clock.Advance(20s);  // at the deadline
  waiter.join();
  EXPECT_TRUE(timed_out);
}

TEST(FakeClock, NotifyEndsAWaiterWhosePredicateHolds) {
  testutil::FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false, got = false;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    got = clock.WaitUntil(cv, lock, SteadyTime::max(), [&] { return ready; });
  });
  {
    std::lock_guard lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace bdn
