// Logging of the long-running processes (bdn serve, bdn cache serve, the mount daemon) through
// spdlog: one line per event, "2026-12-01T20:00:00.123Z info <message>" (UTC, millisecond
// precision, the level as spdlog names it: debug, info, warning, error), on stderr or appended to
// a file. Commands' own output (results, "bdn: error:" lines, progress) is not logging and does
// not go through here.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"

namespace bdn::log {

enum class Level { kDebug, kInfo, kWarn, kError, kOff };

// Parses a --log-level value: "debug", "info", "warn" (or "warning"), "error", "off".
// Errors: InvalidArgument `log level "x": expected debug, info, warn, error or off`.
Result<Level> ParseLevel(std::string_view text);

// Sets the process's log: lines of `level` and above, on stderr, or appended to `file` when it is
// not empty: opened once by OpenLogFile (base/private_files.h: created 0600 if missing, its
// missing directories 0700; a FIFO, another user's file or a directory another user may change
// refused) and written only through that descriptor from then on, never through the path again.
// Every line is written as it comes, so a reader of the file sees it at once. Before Init the log
// is stderr at kInfo. Errors: OpenLogFile's, nothing changed then. Thread-safe.
Status Init(Level level, const std::filesystem::path& file = {});

// Whether stderr now ends in a line not yet ended (a progress bar drawn with "\r" on a terminal).
// While it does, a log line written to stderr first clears it ("\r" and an erase to the end of
// the line), so that the two never share a line (from an attacker: a push's "storing what is
// missing again" warning was glued to its bar); the bar is drawn again at its next tick.
// Thread-safe.
void SetStderrPartialLine(bool partial);

// Whether a line of `level` is written now (to skip building a message that would be dropped).
bool Enabled(Level level);

// Writes one line (a newline or control byte inside `message` is escaped, so a line stays one
// line). Thread-safe.
void Write(Level level, std::string_view message);
inline void Debug(std::string_view m) { Write(Level::kDebug, m); }
inline void Info(std::string_view m) { Write(Level::kInfo, m); }
inline void Warn(std::string_view m) { Write(Level::kWarn, m); }
inline void Error(std::string_view m) { Write(Level::kError, m); }

// Bounds the lines of one kind of fault that can repeat per request (a corrupt chunk read by
// every client, 5xx answers): at most `burst` lines per `interval`; the first line after a
// suppressed stretch is preceded by "(N similar lines suppressed)". Thread-safe.
class RateLimiter {
 public:
  RateLimiter(int burst, std::chrono::milliseconds interval,
              std::shared_ptr<Clock> clock = Clock::Real());
  // Writes `message` at `level` if the budget allows; returns whether it was written.
  bool Write(Level level, std::string_view message);

 private:
  const int burst_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<Clock> clock_;
  Mutex mu_;
  SteadyTime window_start_ GUARDED_BY(mu_){};
  int written_ GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ GUARDED_BY(mu_) = 0;
};

}  // namespace bdn::log
