// ThreadPool (bounded queue, futures), ParallelFor (every index once, threads bounded) and
// PeriodicTask (runs again and again, never two at once, none after destruction).
#include "bdn/base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace bdn {
namespace {

TEST(ThreadPool, RunsEveryTaskAndReturnsItsValue) {
  ThreadPool pool(3, 2);
  std::vector<std::future<int>> results;
  for (int i = 0; i < 50; ++i) results.push_back(pool.Submit([i] { return i * i; }));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(results[i].get(), i * i);
}

TEST(ParallelFor, CallsEveryIndexExactlyOnce) {
  for (size_t n : {0u, 1u, 7u, 100u}) {
    std::vector<std::atomic<int>> calls(n);
    ParallelFor(n, 4, [&](size_t i) { ++calls[i]; });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i], 1) << "n=" << n << " i=" << i;
  }
}

TEST(ParallelFor, UsesAtMostMaxThreadsIncludingTheCaller) {
  std::mutex mu;
  std::set<std::thread::id> seen;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  ParallelFor(64, 3, [&](size_t) {
    int now = ++running;
    int prev = most;
    while (now > prev && !most.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
    std::lock_guard lock(mu);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_LE(most, 3);
  EXPECT_LE(seen.size(), 3u);
  EXPECT_TRUE(seen.contains(std::this_thread::get_id()));
}

TEST(PeriodicTask, RunsAgainAndAgainOneAtATimeAndNotAfterDestruction) {
  std::atomic<int> runs{0};
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  {
    PeriodicTask task(std::chrono::milliseconds(1), [&] {
      most = std::max(most.load(), ++running);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
      ++runs;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (runs < 5 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GE(runs, 5);
  }
  const int at_destruction = runs;
  EXPECT_EQ(running, 0);  // the destructor waited for the run in progress
  EXPECT_EQ(most, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(runs, at_destruction);
}

TEST(PeriodicTask, DestructionDoesNotWaitForTheNextPeriod) {
  std::atomic<int> runs{0};
  const auto start = std::chrono::steady_clock::now();
  {
    PeriodicTask task(std::chrono::hours(1), [&] { ++runs; });
  }
  EXPECT_EQ(runs, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(10));
}

}  // namespace
}  // namespace bdn
