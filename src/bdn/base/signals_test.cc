#include "bdn/base/signals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace bdn {
namespace {

TEST(Signals, StopSignalsAreTheRequestsToEndAProcess) {
  const std::span<const int> stop = StopSignals();
  std::vector<int> want = {SIGHUP,  SIGINT,    SIGQUIT, SIGTERM, SIGUSR1,   SIGUSR2,
                           SIGALRM, SIGVTALRM, SIGXCPU, SIGPWR,  SIGSTKFLT, SIGIO};
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) want.push_back(sig);
  EXPECT_EQ(std::vector<int>(stop.begin(), stop.end()), want);
  // Never glibc's own real-time signals (thread cancellation, setxid), nor faults or SIGKILL.
  for (int sig : {SIGRTMIN - 1, SIGRTMIN - 2, SIGSEGV, SIGABRT, SIGBUS, SIGKILL, SIGPROF, SIGXFSZ,
                  SIGSYS, SIGCHLD, SIGPIPE}) {
    EXPECT_EQ(std::find(stop.begin(), stop.end(), sig), stop.end()) << SignalName(sig);
  }
  const sigset_t set = SignalSet(stop);
  for (int sig = 1; sig < NSIG; ++sig) {
    const bool listed = std::find(stop.begin(), stop.end(), sig) != stop.end();
    EXPECT_EQ(sigismember(&set, sig) == 1, listed) << SignalName(sig);
  }
}

// An inherited SIG_IGN (nohup's SIGHUP, a background job's SIGINT) is left out; a handled or
// default signal is not.
TEST(Signals, StopSignalsNotIgnoredLeavesOutTheIgnoredOnes) {
  struct sigaction ignore {
  }, old_hup{}, old_usr2{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &old_hup), 0);
  ASSERT_EQ(::sigaction(SIGUSR2, &ignore, &old_usr2), 0);
  const std::vector<int> left = StopSignalsNotIgnored();
  ::sigaction(SIGHUP, &old_hup, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  const std::span<const int> all = StopSignals();
  std::vector<int> want;
  for (int sig : all) {
    if (sig != SIGHUP && sig != SIGUSR2) want.push_back(sig);
  }
  EXPECT_EQ(left, want);
  EXPECT_EQ(StopSignalsNotIgnored(), std::vector<int>(all.begin(), all.end()));
}

TEST(Signals, SignalNameIsTheAbbreviationOrTheNumber) {
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(SignalName(SIGRTMIN), "SIGRTMIN");
  EXPECT_EQ(SignalName(SIGRTMIN + 3), "SIGRTMIN+3");
  EXPECT_EQ(SignalName(SIGRTMAX - 1), "SIGRTMAX-1");
  EXPECT_EQ(SignalName(SIGRTMAX), "SIGRTMAX");
  EXPECT_EQ(SignalName(SIGPWR), "SIGPWR");
  EXPECT_EQ(SignalName(SIGIO), "SIGIO");
  EXPECT_EQ(SignalName(0), "signal 0");
  EXPECT_EQ(SignalName(-3), "signal -3");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

}  // namespace
}  // namespace bdn
