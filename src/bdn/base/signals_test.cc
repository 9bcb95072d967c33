#include "bdn/base/signals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace bdn {
namespace {

TEST(Signals, StopSignalsAreTheRequestsToEndAProcess) {
  const std::span<const int> stop = StopSignals();
  EXPECT_EQ(std::vector<int>(stop.begin(), stop.end()),
            (std::vector<int>{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM}));
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
  EXPECT_EQ(left, (std::vector<int>{SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGALRM}));
  EXPECT_EQ(StopSignalsNotIgnored(),
            (std::vector<int>{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM}));
}

TEST(Signals, SignalNameIsTheAbbreviationOrTheNumber) {
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(SignalName(SIGRTMIN + 1), "signal " + std::to_string(SIGRTMIN + 1));
  EXPECT_EQ(SignalName(0), "signal 0");
  EXPECT_EQ(SignalName(-3), "signal -3");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

}  // namespace
}  // namespace bdn
