// A fixed-size thread pool with a bounded queue (Submit blocks when it is full: back-pressure),
// ParallelFor, and PeriodicTask (a function run every period on a thread of its own).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "bdn/base/mutex.h"

namespace bdn {

// Runs submitted tasks on `threads` workers. Thread-safe. The destructor finishes queued tasks.
class ThreadPool {
 public:
  ThreadPool(int threads, size_t max_queued);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `fn`; blocks while max_queued tasks are waiting. Returns its future.
  template <typename F>
  auto Submit(F fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto fut = task->get_future();
    Enqueue([task] { (*task)(); });
    return fut;
  }

  // Cores to use when the user gives no --jobs: std::thread::hardware_concurrency(), at least 1.
  static int DefaultThreads();

 private:
  void Enqueue(std::function<void()> fn) EXCLUDES(mu_);
  void Work() EXCLUDES(mu_);

  Mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  size_t max_queued_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Calls fn(i) for every i in [0, n) on up to `max_threads` threads (the caller's included),
// each taking every max_threads-th index, and returns when all calls have. The threads live for
// this call only, so a process that must not hold threads (before a fork) may use it. `fn` must
// be thread-safe and must not throw.
void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn);

// Runs `fn` on a thread of its own every `period` (steady time; the first run one period after
// construction) until destroyed: for the upkeep of a long-running process that may sit idle (a
// mount daemon closing the node cache regions other processes evicted). A run that takes longer
// than the period delays the next; runs never overlap. `fn` must not throw. The thread blocks every
// signal. The destructor stops the next run from starting, waits for one in progress, and joins.
class PeriodicTask {
 public:
  PeriodicTask(std::chrono::milliseconds period, std::function<void()> fn);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  void Loop() EXCLUDES(mu_);

  const std::chrono::milliseconds period_;
  const std::function<void()> fn_;
  Mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the members above are
};

}  // namespace bdn
