// The process's spdlog logger (see log.h).
#include "bdn/base/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

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

std::shared_ptr<spdlog::logger> MakeLogger(spdlog::sink_ptr sink, Level level) {
  auto logger = std::make_shared<spdlog::logger>("bdn", std::move(sink));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(ToSpdlog(level));
  logger->flush_on(spdlog::level::trace);
  return logger;
}

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
    if (file.has_parent_path()) {
      BDN_RETURN_IF_ERROR(
          CreatePrivateDirectory(file.parent_path(), "log directory", DirOwner::kAnyone));
    }
    BDN_RETURN_IF_ERROR(CreatePrivateFile(file, "log file"));
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), false);
    } catch (const spdlog::spdlog_ex& e) {
      return InternalError("log file " + file.string() + ": " + e.what());
    }
  }
  auto logger = MakeLogger(std::move(sink), level);
  MutexLock lock(g_mu);
  Logger() = std::move(logger);
  return Status::Ok();
}

bool Enabled(Level level) { return Current()->should_log(ToSpdlog(level)); }

void Write(Level level, std::string_view message) {
  auto logger = Current();
  const auto l = ToSpdlog(level);
  if (!logger->should_log(l)) return;
  logger->log(l, "{}", EscapeName(message, Backslashes::kKeep));
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
