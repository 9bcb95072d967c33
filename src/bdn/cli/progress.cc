#include "bdn/cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "bdn/base/units.h"

namespace bdn::cli {

ProgressReporter::ProgressReporter(std::string label, const TransferCounters& counters,
                                   std::chrono::seconds plain_interval)
    : label_(std::move(label)),
      counters_(counters),
      plain_interval_(plain_interval),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { Run(); }) {}

ProgressReporter::~ProgressReporter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (tty_ && drew_) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s\033[K\n", Line(s).c_str());
  }
}

std::string ProgressReporter::Line(double elapsed_s) const {
  uint64_t done = counters_.bytes_done.load();
  uint64_t total = counters_.bytes_total.load();
  double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  std::string out = label_ + " ";
  if (tty_) {
    constexpr int kWidth = 24;
    int fill = total ? static_cast<int>(kWidth * static_cast<double>(done) / static_cast<double>(total)) : 0;
    if (fill > kWidth) fill = kWidth;
    out += "[" + std::string(static_cast<size_t>(fill), '#') +
           std::string(static_cast<size_t>(kWidth - fill), '-') + "] ";
  }
  out += FormatBytes(done) + "/" + FormatBytes(total) + "  " +
         FormatBytes(static_cast<uint64_t>(rate)) + "/s  files " +
         std::to_string(counters_.files_done.load()) + "/" +
         std::to_string(counters_.files_total.load());
  if (rate > 0 && total > done) {
    out += "  ETA " + std::to_string(static_cast<int>(static_cast<double>(total - done) / rate)) + "s";
  }
  return out;
}

void ProgressReporter::Run() {
  auto interval = tty_ ? std::chrono::milliseconds(200)
                       : std::chrono::duration_cast<std::chrono::milliseconds>(plain_interval_);
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval, [&] { return stop_; })) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (tty_) {
      std::fprintf(stderr, "\r%s\033[K", Line(s).c_str());
    } else {
      std::fprintf(stderr, "%s\n", Line(s).c_str());
    }
    std::fflush(stderr);
    drew_ = true;
  }
}

}  // namespace bdn::cli
