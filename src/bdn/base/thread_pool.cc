#include "bdn/base/thread_pool.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>

namespace bdn {

ThreadPool::ThreadPool(int threads, size_t max_queued) : max_queued_(max_queued ? max_queued : 1) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  not_empty_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::DefaultThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

void ThreadPool::Enqueue(std::function<void()> fn) {
  MutexLock lock(mu_);
  not_full_.wait(lock.native(), [&]() REQUIRES(mu_) { return queue_.size() < max_queued_; });
  queue_.push_back(std::move(fn));
  lock.Unlock();
  not_empty_.notify_one();
}

void ThreadPool::Work() {
  while (true) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      not_empty_.wait(lock.native(), [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    not_full_.notify_one();
    fn();
  }
}

void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn) {
  size_t threads = std::max<size_t>(1, std::min(max_threads, n));
  auto stride = [&](size_t first) {
    for (size_t i = first; i < n; i += threads) fn(i);
  };
  std::vector<std::jthread> helpers;
  helpers.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(stride, t);
  stride(0);
}

PeriodicTask::PeriodicTask(std::chrono::milliseconds period, std::function<void()> fn)
    : period_(period), fn_(std::move(fn)), thread_([this] { Loop(); }) {}

PeriodicTask::~PeriodicTask() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void PeriodicTask::Loop() {
  // Signals go to the process's other threads: a signal this thread took would not wake the
  // thread waiting for it (FUSE's session loop waits on a semaphore, `bdn cache serve` in
  // sigwait).
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  auto next = std::chrono::steady_clock::now() + period_;
  while (true) {
    {
      MutexLock lock(mu_);
      while (!stopping_ && stop_cv_.wait_until(lock.native(), next) != std::cv_status::timeout) {
      }
      if (stopping_) return;
    }
    fn_();
    next = std::max(next + period_, std::chrono::steady_clock::now());
  }
}

}  // namespace bdn
