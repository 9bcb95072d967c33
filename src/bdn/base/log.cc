// The process's spdlog logger (see log.h).
#include "bdn/base/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/base/text.h"

namespace bdn::log {
namespace {

spdlog::level::level_enum ToSpdlog(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

// A sink that appends each line to a descriptor opened once (OpenLogFile), so the log never
// goes through the file's path again. Thread-safe: lines are formatted under mu_ and written with
// one write(2) each, which O_APPEND keeps whole among concurrent writers.
class FdSink final : public spdlog::sinks::sink {
 public:
  explicit FdSink(UniqueFd fd)
      : fd_(std::move(fd)), formatter_(std::make_unique<spdlog::pattern_formatter>()) {}

  void log(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    {
      MutexLock lock(mu_);
      formatter_->format(msg, line);
    }
    // A line cut short (a full disk) would have the next one glued to it: that one starts on a
    // line of its own. A log line that cannot be written has nowhere else to go.
    std::string_view text(line.data(), line.size());
    std::string after_torn;
    if (torn_.exchange(false)) {
      after_torn = "\n" + std::string(text);
      text = after_torn;
    }
    if (!WriteAll(fd_.get(), AsBytes(text), "log file").ok()) torn_ = true;
  }
  void flush() override {}  // every line is written as it comes
  void set_pattern(const std::string& pattern) override {
    set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern));
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    MutexLock lock(mu_);
    formatter_ = std::move(formatter);
  }

 private:
  const UniqueFd fd_;
  std::atomic<bool> torn_{false};  // the last write failed, perhaps partway
  Mutex mu_;
  std::unique_ptr<spdlog::formatter> formatter_ GUARDED_BY(mu_);
};

std::shared_ptr<spdlog::logger> MakeLogger(spdlog::sink_ptr sink, Level level) {
  auto logger = std::make_shared<spdlog::logger>("bdn", std::move(sink));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(ToSpdlog(level));
  logger->flush_on(spdlog::level::trace);
  return logger;
}

// Whether the log goes to stderr (not to a file), and whether stderr ends in a partial line.
std::atomic<bool> g_to_stderr{true};
std::atomic<bool> g_partial_line{false};

Mutex g_mu;
// The process's logger; read and replaced under g_mu.
std::shared_ptr<spdlog::logger>& Logger() REQUIRES(g_mu) {
  static std::shared_ptr<spdlog::logger> logger =
      MakeLogger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), Level::kInfo);
  return logger;
}

std::shared_ptr<spdlog::logger> Current() {
  MutexLock lock(g_mu);
  return Logger();
}

}  // namespace

Result<Level> ParseLevel(std::string_view text) {
  if (text == "debug") return Level::kDebug;
  if (text == "info") return Level::kInfo;
  if (text == "warn" || text == "warning") return Level::kWarn;
  if (text == "error") return Level::kError;
  if (text == "off") return Level::kOff;
  return Err(InvalidArgumentError("log level \"" + std::string(text) +
                                  "\": expected debug, info, warn, error or off"));
}

Status Init(Level level, const std::filesystem::path& file) {
  spdlog::sink_ptr sink;
  if (file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    BDN_ASSIGN_OR_RETURN(UniqueFd fd, OpenLogFile(file));
    sink = std::make_shared<FdSink>(std::move(fd));
  }
  auto logger = MakeLogger(std::move(sink), level);
  MutexLock lock(g_mu);
  Logger() = std::move(logger);
  g_to_stderr = file.empty();
  return Status::Ok();
}

void SetStderrPartialLine(bool partial) { g_partial_line = partial; }

bool Enabled(Level level) { return Current()->should_log(ToSpdlog(level)); }

void Write(Level level, std::string_view message) {
  auto logger = Current();
  const auto l = ToSpdlog(level);
  if (!logger->should_log(l)) return;
  const std::string line = EscapeName(message, Backslashes::kKeep);
  if (g_partial_line && g_to_stderr) {
    // stderr's own lock (recursive: the sink's fwrite takes it again) keeps the bar from being
    // drawn between the erase and the line.
    ::flockfile(stderr);
    std::fputs("\r\033[K", stderr);
    logger->log(l, "{}", line);
    ::funlockfile(stderr);
    return;
  }
  logger->log(l, "{}", line);
}

RateLimiter::RateLimiter(int burst, std::chrono::milliseconds interval,
                         std::shared_ptr<Clock> clock)
    : burst_(burst), interval_(interval), clock_(clock ? std::move(clock) : Clock::Real()) {}

bool RateLimiter::Write(Level level, std::string_view message) {
  uint64_t suppressed = 0;
  {
    MutexLock lock(mu_);
    const SteadyTime now = clock_->SteadyNow();
    if (written_ == 0 || now - window_start_ >= interval_) {
      window_start_ = now;
      written_ = 0;
    }
    if (written_ >= burst_) {
      ++suppressed_;
      return false;
    }
    ++written_;
    suppressed = suppressed_;
    suppressed_ = 0;
  }
  if (suppressed > 0) {
    log::Write(level, "(" + std::to_string(suppressed) + " similar lines suppressed)");
  }
  log::Write(level, message);
  return true;
}

}  // namespace bdn::log
