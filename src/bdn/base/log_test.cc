// The log: level names, the line format in a file, escaping, and the rate limiter.
#include "bdn/base/log.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "bdn/testing/fake_clock.h"
#include "bdn/testing/test_util.h"

namespace bdn::log {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LogLevel, ParsesEveryNameAndRefusesOthers) {
  EXPECT_EQ(*ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("info"), Level::kInfo);
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("warning"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("error"), Level::kError);
  EXPECT_EQ(*ParseLevel("off"), Level::kOff);
  for (const char* bad : {"", "INFO", "trace", "verbose"}) {
    auto l = ParseLevel(bad);
    ASSERT_FALSE(l) << bad;
    EXPECT_EQ(l.error().message(),
              "log level \"" + std::string(bad) + "\": expected debug, info, warn, error or off");
  }
}

TEST(Log, LinesInAFileHaveATimestampALevelAndOneLineEach) {
  testutil::TempDir dir;
  const auto file = dir.path() / "logs" / "x.log";
  ASSERT_TRUE(Init(Level::kInfo, file).ok());
  Debug("not written");
  Info("listening on http://127.0.0.1:1");
  Warn("two\nlines");
  Error("bad");
  ASSERT_TRUE(Init(Level::kInfo).ok());  // back to stderr for the other tests
  const std::string text = ReadAll(file);
  const std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (info|warning|error) [^\n]*\n)");
  std::string rest = text;
  int lines = 0;
  for (std::smatch m; std::regex_search(rest, m, line) && m.position() == 0; rest = m.suffix()) {
    ++lines;
  }
  EXPECT_EQ(lines, 3) << text;
  EXPECT_EQ(rest, "") << text;
  EXPECT_NE(text.find(" info listening on http://127.0.0.1:1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" warning two\\nlines\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("not written"), std::string::npos) << text;
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// From an attacking helper: `bdn serve --log-file` checked the file's directory, then the file
// was created, checked and opened again by its path (spdlog's fopen), each resolving the whole
// path anew, so a directory swapped for a symlink meanwhile had root's log appended elsewhere.
// The file is opened once; every line goes through that descriptor, wherever the path leads now.
TEST(Log, LinesGoToTheFileOpenedAtInitWhateverThePathNamesLater) {
  testutil::TempDir dir;
  const auto logs = dir.path() / "logs";
  const auto elsewhere = dir.path() / "elsewhere";
  std::filesystem::create_directory(elsewhere);
  ASSERT_TRUE(Init(Level::kInfo, logs / "x.log").ok());
  Info("first");
  std::filesystem::rename(logs, dir.path() / "moved");
  std::filesystem::create_directory_symlink(elsewhere, logs);
  Info("second");
  ASSERT_TRUE(Init(Level::kInfo).ok());
  const std::string text = ReadAll(dir.path() / "moved" / "x.log");
  EXPECT_NE(text.find(" info first\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" info second\n"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(elsewhere / "x.log"));
}

// From an attacking helper: on a full file system a line was cut short and the next one glued
// to it ("... 404 4042026-12-05T02:20:50.225Z info access ..."). The line after a failed write
// starts on a line of its own. (The file size limit stands in for a full disk.)
TEST(Log, TheLineAfterOneCutShortStartsOnItsOwnLine) {
  testutil::TempDir dir;
  const auto file = dir.path() / "x.log";
  ASSERT_TRUE(Init(Level::kInfo, file).ok());
  Info("first");
  const auto size = std::filesystem::file_size(file);
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = size + 40;  // the timestamp, the level and a few bytes of the message
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Info("second, which does not fit in the room that is left");
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ::signal(SIGXFSZ, old_handler);
  Info("third");
  ASSERT_TRUE(Init(Level::kInfo).ok());
  const std::string text = ReadAll(file);
  EXPECT_EQ(std::filesystem::file_size(file) > size + 40, true) << text;
  const size_t third = text.find(" info third\n");
  ASSERT_NE(third, std::string::npos) << text;
  // "…\n2026-12-05T02:20:50.225Z info third": its time (24 characters) starts a line.
  ASSERT_GT(third, 25u) << text;
  EXPECT_EQ(text[third - 25], '\n') << text;
  EXPECT_EQ(text.find("second, which does not fit"), std::string::npos) << text;
}

// A FIFO at the path is refused with a message, never opened to block or to feed a reader.
// From an attacker: a push's warning was written after its progress bar, on the bar's line.
TEST(Log, ALineToStderrFirstClearsAPartialLineThere) {
  testutil::TempDir dir;
  const auto file = dir.path() / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_NE(std::freopen(file.c_str(), "w", stderr), nullptr);
  ASSERT_TRUE(Init(Level::kInfo).ok());
  std::fputs("\rpush [###---] 1 B/2 B", stderr);
  SetStderrPartialLine(true);
  Warn("storing what is missing again");
  SetStderrPartialLine(false);
  Warn("after the bar");
  std::fflush(stderr);
  ASSERT_EQ(::dup2(saved, STDERR_FILENO), STDERR_FILENO);
  ::close(saved);
  const std::string text = ReadAll(file);
  const std::regex want(
      "\rpush \\[###---\\] 1 B/2 B\r\x1b\\[K[-0-9T:.Z]+ warning storing what is missing again\n"
      "[-0-9T:.Z]+ warning after the bar\n");
  EXPECT_TRUE(std::regex_match(text, want)) << text;
}

TEST(Log, InitRefusesAFifo) {
  testutil::TempDir dir;
  const auto fifo = dir.path() / "f.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Status s = Init(Level::kInfo, fifo);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "log file " + fifo.string() +
                             ": a FIFO is in the way (a log file is a regular file, or a "
                             "character device such as /dev/null)");
}

TEST(Log, OffWritesNothingAndEnabledSaysSo) {
  testutil::TempDir dir;
  const auto file = dir.path() / "off.log";
  ASSERT_TRUE(Init(Level::kOff, file).ok());
  EXPECT_FALSE(Enabled(Level::kError));
  Error("nothing");
  ASSERT_TRUE(Init(Level::kWarn, file).ok());
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  ASSERT_TRUE(Init(Level::kInfo).ok());
  EXPECT_EQ(ReadAll(file), "");
}

TEST(LogRateLimiter, WritesABurstPerIntervalAndCountsWhatItSuppressed) {
  testutil::TempDir dir;
  const auto file = dir.path() / "rl.log";
  ASSERT_TRUE(Init(Level::kInfo, file).ok());
  auto clock = std::make_shared<testutil::FakeClock>();
  RateLimiter limiter(2, 1s, clock);
  int written = 0;
  for (int i = 0; i < 10; ++i) written += limiter.Write(Level::kWarn, "fault " + std::to_string(i));
  EXPECT_EQ(written, 2);
  clock->Advance(999ms);
  EXPECT_FALSE(limiter.Write(Level::kWarn, "fault 10"));
  clock->Advance(1ms);
  EXPECT_TRUE(limiter.Write(Level::kWarn, "fault 11"));
  ASSERT_TRUE(Init(Level::kInfo).ok());
  const std::string text = ReadAll(file);
  EXPECT_NE(text.find("fault 0\n"), std::string::npos);
  EXPECT_NE(text.find("fault 1\n"), std::string::npos);
  EXPECT_EQ(text.find("fault 2\n"), std::string::npos);
  EXPECT_NE(text.find("warning (9 similar lines suppressed)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fault 11\n"), std::string::npos);
  EXPECT_LT(text.find("suppressed"), text.find("fault 11"));
}

}  // namespace
}  // namespace bdn::log
