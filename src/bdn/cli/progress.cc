#include "bdn/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "bdn/base/clock.h"
#include "bdn/base/log.h"
#include "bdn/base/units.h"

namespace bdn::cli {

std::string RetryNote(const remote::RetryBudget& budget) {
  auto outage = budget.CurrentOutage();
  if (!outage || outage->tripped) return "";
  auto elapsed_s = std::chrono::duration_cast<std::chrono::seconds>(outage->elapsed).count();
  return "retrying for " + std::to_string(elapsed_s) + "s (gives up at " +
         FormatDuration(outage->deadline) + "): " + outage->last_error.message();
}

ProgressReporter::ProgressReporter(std::string label, const TransferCounters& counters,
                                   std::chrono::seconds plain_interval,
                                   std::function<std::string()> note)
    : label_(std::move(label)),
      counters_(counters),
      plain_interval_(plain_interval),
      note_(std::move(note)),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(Clock::Real()->SteadyNow()),
      last_change_(start_),
      pass_start_(start_),
      thread_([this] { Run(); }) {}

ProgressReporter::~ProgressReporter() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  MutexLock lock(mu_);
  if (tty_ && drew_) {
    // The last line: with the transfer's own rate where a step followed it (step_ is not looked
    // at again).
    double s = std::chrono::duration<double>(Clock::Real()->SteadyNow() - start_).count();
    std::fprintf(stderr, "\r%s\033[K\n", Line(s).c_str());
  }
  if (tty_) log::SetStderrPartialLine(false);
}

namespace {

// `line` cut to one row of the terminal on stderr (one column short, so the cursor stays on the
// row), at a UTF-8 character's start: a longer line wraps, and "\r" then erases only its last
// row, so each redraw added rows (from an attacking helper: a sync's retry note on 80 columns).
std::string FitToTerminal(std::string line) {
  struct winsize ws {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 2) return line;
  size_t max = ws.ws_col - 1u;
  if (line.size() <= max) return line;
  while (max > 0 && (static_cast<unsigned char>(line[max]) & 0xC0) == 0x80) --max;
  line.resize(max);
  return line;
}

}  // namespace

std::string ProgressReporter::Line(double elapsed_s) const {
  const SteadyTime now = Clock::Real()->SteadyNow();
  const double idle_s = std::chrono::duration<double>(now - last_change_).count();
  double step_s = 0;
  if (step_ != nullptr) step_s = std::chrono::duration<double>(now - step_began_).count();
  // The rate of this pass of bytes (a push storing what went missing makes a second one, from
  // zero: from an attacker, its rate and ETA were spread over the whole push), up to its end.
  if (transfer_end_ || pass_start_ != start_) {
    elapsed_s = std::chrono::duration<double>(transfer_end_.value_or(now) - pass_start_).count();
  }
  return ProgressLine(label_, counters_, elapsed_s,
                      tty_ ? ProgressStyle::kBar : ProgressStyle::kPlain,
                      note_ ? note_() : std::string(), idle_s, step_s);
}

void ProgressReporter::SeeStep(SteadyTime now, SteadyTime looked) {
  const char* step = counters_.step.load();
  if (step == step_) return;
  step_ = step;
  step_began_ = now;
  step_told_ = false;
  if (step == nullptr) {
    // Bytes move again (a push storing what went missing), since some time after the last look:
    // from then (from an attacker: counted from now, a pass that had moved 16 MiB since showed
    // 23.40 TiB/s).
    transfer_end_.reset();
    pass_start_ = looked;
  } else if (!transfer_end_) {
    transfer_end_ = now;
  }
}

std::string ProgressLine(const std::string& label, const TransferCounters& counters,
                         double elapsed_s, ProgressStyle style, const std::string& note,
                         double idle_s, double step_s) {
  uint64_t done = counters.bytes_done.load();
  uint64_t total = counters.bytes_total.load();
  double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  std::string out = label + " ";
  if (style == ProgressStyle::kBar) {
    constexpr int kWidth = 24;
    int fill =
        total ? static_cast<int>(kWidth * static_cast<double>(done) / static_cast<double>(total))
              : 0;
    if (fill > kWidth) fill = kWidth;
    out += "[" + std::string(static_cast<size_t>(fill), '#') +
           std::string(static_cast<size_t>(kWidth - fill), '-') + "] ";
  }
  const uint64_t files_done = counters.files_done.load();
  const uint64_t files_total = counters.files_total.load();
  out += FormatBytes(done) + "/" + FormatBytes(total) + "  " +
         FormatBytes(static_cast<uint64_t>(rate)) + "/s  files " + std::to_string(files_done) +
         "/" + std::to_string(files_total);
  if (!note.empty()) {
    out += "  " + note;
  } else if (const char* step = counters.step.load(); step != nullptr) {
    out += std::string("  ") + step + " (" + std::to_string(static_cast<int64_t>(step_s)) + "s)";
  } else if (total > 0 && done >= total && files_done < files_total) {
    // Every byte read, some files not yet stored (a push's last chunks still uploading, a pull's
    // last files being written): from an attacker, "100%  files 3/4" said nothing of what went
    // on.
    const uint64_t left = files_total - files_done;
    out += "  finishing " + std::to_string(left) + (left == 1 ? " file" : " files");
  } else if (total > done && idle_s >= 5) {
    // From a user: an ETA from the average rate went on counting down while nothing moved. Not
    // "stalled" either: a pull counts a batch's bytes once all of it is in (from an attacker: a
    // 1 MB/s link showed "stalled for 14s" while bytes flowed).
  } else if (rate > 0 && total > done) {
    // No ETA once the rate has all but stopped (from a user: "ETA -2147483648s", an int overflow,
    // while the origin was down).
    const double eta = static_cast<double>(total - done) / rate;
    if (eta < 100.0 * 24 * 3600) out += "  ETA " + std::to_string(static_cast<int64_t>(eta)) + "s";
  }
  return out;
}

void ProgressReporter::Run() {
  // Plain output also gets a line as soon as retrying starts, not only every plain_interval_.
  constexpr auto kTick = std::chrono::milliseconds(200);
  constexpr auto kStepTold = std::chrono::seconds(3);
  auto last_plain = Clock::Real()->SteadyNow();
  auto last_look = last_plain;
  bool was_retrying = false;
  MutexLock lock(mu_);
  while (!cv_.wait_for(lock.native(), kTick, [&]() REQUIRES(mu_) { return stop_; })) {
    auto now = Clock::Real()->SteadyNow();
    const SteadyTime looked = std::exchange(last_look, now);
    double s = std::chrono::duration<double>(now - start_).count();
    if (const uint64_t done = counters_.bytes_done.load(); done != last_done_) {
      last_done_ = done;
      last_change_ = now;
    }
    SeeStep(now, looked);
    // A step after the transfer that lasts 3 s gets a line of its own at once.
    const bool stepped = step_ != nullptr && !step_told_ && now - step_began_ >= kStepTold;
    if (stepped) step_told_ = true;
    if (tty_) {
      std::fprintf(stderr, "\r%s\033[K", FitToTerminal(Line(s)).c_str());
      log::SetStderrPartialLine(true);
    } else {
      bool retrying = note_ && !note_().empty();
      if (now - last_plain < plain_interval_ && !stepped &&
          (retrying == was_retrying || !retrying)) {
        was_retrying = retrying;
        continue;
      }
      was_retrying = retrying;
      last_plain = now;
      std::fprintf(stderr, "%s\n", Line(s).c_str());
    }
    std::fflush(stderr);
    drew_ = true;
  }
}

}  // namespace bdn::cli
