// Unit tests of the CLI's one-place mappings and texts: ExitCode (Status → exit code), JsonText
// (results and errors as JSON, whatever the bytes), FormatUnixMs, ParseWriteRef, the progress
// line and the retry note a progress line shows.
#include "bdn/cli/output.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bdn/cli/commands.h"
#include "bdn/cli/progress.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::cli {
namespace {

using namespace std::chrono_literals;

TEST(ExitCode, EachStatusCodeHasItsDocumentedExitCode) {
  const struct {
    Status status;
    int code;
  } cases[] = {
      {Status::Ok(), 0},
      {InvalidArgumentError("ref \"x\": bad"), 2},
      {NotFoundError("volume bdn:a/b: not found"), 3},
      {ConflictError("volume bdn:a/b: sequence is 2, expected 1"), 4},
      {AlreadyExistsError("file \"d/f\": exists with other content"), 4},
      {CorruptionError("chunk b3:00: digest mismatch"), 5},
      {PermissionDeniedError("key bdn_1: revoked"), 6},
      {UnavailableError("origin http://127.0.0.1:9: connection refused"), 7},
      {DeadlineExceededError("GET /x: no response within 200 ms"), 7},
      {FailedPreconditionError("registry x: no space left on device"), 8},
      {InternalError("boom"), 1},
      {InternalError("sync job j1: interrupted").WithReason(std::string(kInterruptedReason)), 130},
  };
  for (const auto& c : cases) EXPECT_EQ(ExitCode(c.status), c.code) << c.status.ToString();
}

TEST(JsonText, IndentsByTwoAndKeepsValidUtf8Exactly) {
  nlohmann::json j = {{"path", "a/\xc3\xa9t\xc3\xa9\n.bin"}, {"files", 3}};
  EXPECT_EQ(JsonText(j), "{\n  \"files\": 3,\n  \"path\": \"a/\xc3\xa9t\xc3\xa9\\n.bin\"\n}");
  EXPECT_EQ(JsonText(nlohmann::json::array()), "[]");
}

TEST(JsonText, ReplacesEachInvalidByteInsteadOfFailing) {
  // A local path that is not UTF-8 (Latin-1 "é", then a lone continuation byte).
  nlohmann::json j = {{"dir", std::string("/tmp/caf\xe9/\x80x")}};
  EXPECT_EQ(JsonText(j), "{\n  \"dir\": \"/tmp/caf\xef\xbf\xbd/\xef\xbf\xbdx\"\n}");
}

TEST(FormatUnixMs, IsUtcToTheSecond) {
  EXPECT_EQ(FormatUnixMs(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatUnixMs(1738324800999), "2025-01-31T12:00:00Z");
}

TEST(ParseWriteRef, TakesAVolumeOrTagAndRefusesDigestsAndPaths) {
  auto r = ParseWriteRef("bdn:weights/qwen:prod", "ref \"bdn:weights/qwen:prod\": push");
  ASSERT_OK(r);
  EXPECT_EQ(r->ns, "weights");
  EXPECT_EQ(r->volume, "qwen");
  EXPECT_EQ(r->tag, "prod");
  EXPECT_STATUS(ParseWriteRef("bdn:w/v@b3:" + std::string(64, 'a'), "ref \"R\": push"),
                kInvalidArgument, "ref \"R\": push takes a volume, not a digest");
  EXPECT_STATUS(ParseWriteRef("bdn:w/v/dir/file", "--dest \"D\":"), kInvalidArgument,
                "--dest \"D\": takes no path");
  EXPECT_STATUS(ParseWriteRef("weights/qwen", "--dest \"D\":"), kInvalidArgument,
                "ref \"weights/qwen\": must start with \"bdn:\"");
}

void SetCounters(TransferCounters& c, uint64_t bytes_total, uint64_t bytes_done,
                 uint64_t files_total, uint64_t files_done) {
  c.bytes_total = bytes_total;
  c.bytes_done = bytes_done;
  c.files_total = files_total;
  c.files_done = files_done;
}

TEST(ProgressLine, BarRateFilesAndEta) {
  TransferCounters c;
  c.bytes_total = 4 << 20;
  c.bytes_done = 1 << 20;
  c.files_total = 3;
  c.files_done = 1;
  EXPECT_EQ(ProgressLine("pull", c, 2.0, ProgressStyle::kBar, ""),
            "pull [######------------------] 1.00 MiB/4.00 MiB  512.00 KiB/s  files 1/3  ETA 6s");
  EXPECT_EQ(ProgressLine("pull", c, 2.0, ProgressStyle::kPlain, ""),
            "pull 1.00 MiB/4.00 MiB  512.00 KiB/s  files 1/3  ETA 6s");
}

TEST(ProgressLine, ANoteTakesThePlaceOfTheEtaAndNothingDoneHasNoEta) {
  TransferCounters c;
  c.bytes_total = 1000;
  EXPECT_EQ(ProgressLine("push", c, 0.0, ProgressStyle::kBar, ""),
            "push [------------------------] 0 B/1000 B  0 B/s  files 0/0");
  c.bytes_done = 500;
  EXPECT_EQ(
      ProgressLine("push", c, 1.0, ProgressStyle::kPlain, "retrying for 3s (gives up at 1m): x"),
      "push 500 B/1000 B  500 B/s  files 0/0  retrying for 3s (gives up at 1m): x");
  // Done (or more than the total, as a resumed file counts twice): a full bar, no ETA.
  c.bytes_done = 1500;
  EXPECT_EQ(ProgressLine("push", c, 1.0, ProgressStyle::kBar, ""),
            "push [########################] 1.46 KiB/1000 B  1.46 KiB/s  files 0/0");
}

// From an attacker: a push whose commit the origin held showed a full bar and a falling rate,
// with no word of what it waited for.
TEST(ProgressLine, AStepAfterTheTransferIsNamedWithItsTime) {
  TransferCounters c;
  SetCounters(c, 1000, 1000, 2, 2);
  c.step = "committing";
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain, "", 30, 12.7),
            "push 1000 B/1000 B  500 B/s  files 2/2  committing (12s)");
  // A retry note says more.
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain,
                         "retrying for 3s (gives up at 1m): x", 30, 12.7),
            "push 1000 B/1000 B  500 B/s  files 2/2  retrying for 3s (gives up at 1m): x");
  c.step = nullptr;
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain, "", 30, 12.7),
            "push 1000 B/1000 B  500 B/s  files 2/2");
}

// From an attacker: with every byte read and the last chunks still uploading, the line said
// "100%  files 3/4" and nothing else.
TEST(ProgressLine, EveryByteDoneAndFilesLeftSaysTheyAreBeingFinished) {
  TransferCounters c;
  SetCounters(c, 1000, 1000, 4, 3);
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain, "", 6),
            "push 1000 B/1000 B  500 B/s  files 3/4  finishing 1 file");
  c.files_done = 1;
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain, ""),
            "push 1000 B/1000 B  500 B/s  files 1/4  finishing 3 files");
  c.step = "committing";  // a step says more
  EXPECT_EQ(ProgressLine("push", c, 2.0, ProgressStyle::kPlain, "", 6, 3),
            "push 1000 B/1000 B  500 B/s  files 1/4  committing (3s)");
}

TEST(ProgressLine, NoByteDoneForFiveSecondsHasNoEta) {
  TransferCounters c;
  c.bytes_total = 4 << 20;
  c.bytes_done = 1 << 20;
  EXPECT_EQ(ProgressLine("pull", c, 20.0, ProgressStyle::kPlain, "", 4.9),
            "pull 1.00 MiB/4.00 MiB  51.20 KiB/s  files 0/0  ETA 60s");
  EXPECT_EQ(ProgressLine("pull", c, 20.0, ProgressStyle::kPlain, "", 17.5),
            "pull 1.00 MiB/4.00 MiB  51.20 KiB/s  files 0/0");
  // A retry note says more, and nothing is stalled once all is done.
  EXPECT_EQ(ProgressLine("pull", c, 20.0, ProgressStyle::kPlain,
                         "retrying for 3s (gives up at 1m): x", 17.5),
            "pull 1.00 MiB/4.00 MiB  51.20 KiB/s  files 0/0  retrying for 3s (gives up at 1m): x");
  c.bytes_done = 4 << 20;
  EXPECT_EQ(ProgressLine("pull", c, 20.0, ProgressStyle::kPlain, "", 17.5),
            "pull 4.00 MiB/4.00 MiB  204.80 KiB/s  files 0/0");
}

TEST(RetryNote, SaysHowLongTheOriginHasFailedUntilItAnswersOrTheBudgetTrips) {
  auto clock = std::make_shared<testutil::FakeClock>();
  remote::RetryBudget budget({.deadline = 60s, .clock = clock});
  EXPECT_EQ(RetryNote(budget), "");
  const Status refused = UnavailableError("origin http://127.0.0.1:9: connection refused");
  (void)budget.OnTransientFailure(refused, clock->SteadyNow());
  clock->Advance(12s);
  EXPECT_EQ(RetryNote(budget),
            "retrying for 12s (gives up at 1m): origin http://127.0.0.1:9: connection refused");
  budget.OnAnswer();
  EXPECT_EQ(RetryNote(budget), "");
  (void)budget.OnTransientFailure(refused, clock->SteadyNow());
  clock->Advance(60s);
  (void)budget.OnTransientFailure(refused, clock->SteadyNow());  // trips it
  EXPECT_EQ(RetryNote(budget), "") << "a tripped budget's error is the push's own";
}

}  // namespace
}  // namespace bdn::cli
