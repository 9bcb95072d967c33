// ThreadPool (bounded queue, futures) and ParallelFor (every index once, threads bounded).
#include "bdn/base/thread_pool.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bdn
