// Progress display for long operations: a bar on a terminal, periodic plain lines otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/remote/retry.h"
#include "bdn/volume/push.h"

namespace bdn::cli {

// What a progress line says while `budget` sees the origin failing, instead of an ETA:
// "retrying for 12s (gives up at 60s): <last error>"; "" while the origin answers.
std::string RetryNote(const remote::RetryBudget& budget);

// Whether a progress line draws a bar (on a terminal) or is a plain line (a log, a pipe).
enum class ProgressStyle { kBar, kPlain };

// One progress line for `counters` after `elapsed_s` seconds: "<label> [####----] DONE/TOTAL
// RATE/s  files F/FT" (the 24-character bar only with kBar; sizes as FormatBytes), then two
// blanks and `note` when it is not empty, else, while the operation is in a step after its
// transfer (TransferCounters::step), "  committing (12s)" (`step_s`: seconds in it), else,
// while every byte is done and some files are not, "  finishing 2 files", else
// "  ETA Ns" while the rate is known, bytes are left and some byte was done in the last 5
// seconds (`idle_s`: since the last). The rate is bytes done over `elapsed_s` (the caller passes
// the transfer's own time during a step, so the rate does not fall while it waits). Thread-safe.
std::string ProgressLine(const std::string& label, const TransferCounters& counters,
                         double elapsed_s, ProgressStyle style, const std::string& note,
                         double idle_s = 0, double step_s = 0);

// Polls `counters` on its own thread and draws to stderr until destroyed.
// On a terminal: "\r<label> [#####-----] 1.20 GiB/2.00 GiB  310 MiB/s  ETA 3s"; otherwise one
// plain line every `plain_interval`, and one at once when retrying starts or when a step after the
// transfer (TransferCounters::step) has lasted 3 s. While `note` (if given) returns text, the
// line ends with that text instead of the ETA. Thread-safe.
class ProgressReporter {
 public:
  ProgressReporter(std::string label, const TransferCounters& counters,
                   std::chrono::seconds plain_interval = std::chrono::seconds(5),
                   std::function<std::string()> note = nullptr);
  ~ProgressReporter();

 private:
  void Run();
  std::string Line(double elapsed_s) const REQUIRES(mu_);
  // Notes a change of TransferCounters::step seen at `now`, made since the look at `looked`.
  void SeeStep(SteadyTime now, SteadyTime looked) REQUIRES(mu_);

  std::string label_;
  const TransferCounters& counters_;
  std::chrono::seconds plain_interval_;
  std::function<std::string()> note_;
  bool tty_;
  SteadyTime start_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool drew_ GUARDED_BY(mu_) = false;
  // bytes_done when last seen to change, and when (for "stalled for Ns").
  uint64_t last_done_ GUARDED_BY(mu_) = 0;
  SteadyTime last_change_ GUARDED_BY(mu_);
  // The step last seen (TransferCounters::step) and when it began; when the first step began
  // (the transfer's end, for its rate).
  const char* step_ GUARDED_BY(mu_) = nullptr;
  SteadyTime step_began_ GUARDED_BY(mu_);
  bool step_told_ GUARDED_BY(mu_) = false;  // a plain line was drawn for it
  std::optional<SteadyTime> transfer_end_ GUARDED_BY(mu_);
  SteadyTime pass_start_ GUARDED_BY(mu_);  // when the bytes of this pass began to move
  std::thread thread_;
};

}  // namespace bdn::cli
