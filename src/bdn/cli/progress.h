// Progress display for long operations: a bar on a terminal, periodic plain lines otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "bdn/remote/retry.h"
#include "bdn/volume/push.h"

namespace bdn::cli {

// What a progress line says while `budget` sees the origin failing, instead of an ETA:
// "retrying for 12s (gives up at 60s): <last error>"; "" while the origin answers.
std::string RetryNote(const remote::RetryBudget& budget);

// Polls `counters` on its own thread and draws to stderr until destroyed.
// On a terminal: "\r<label> [#####-----] 1.20 GiB/2.00 GiB  310 MiB/s  ETA 3s"; otherwise one
// plain line every `plain_interval`. While `note` (if given) returns text, the line ends with
// that text instead of the ETA. Thread-safe.
class ProgressReporter {
 public:
  ProgressReporter(std::string label, const TransferCounters& counters,
                   std::chrono::seconds plain_interval = std::chrono::seconds(5),
                   std::function<std::string()> note = nullptr);
  ~ProgressReporter();

 private:
  void Run();
  std::string Line(double elapsed_s) const;

  std::string label_;
  const TransferCounters& counters_;
  std::chrono::seconds plain_interval_;
  std::function<std::string()> note_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool drew_ = false;
  std::thread thread_;
};

}  // namespace bdn::cli
