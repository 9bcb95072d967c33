#include "bdn/base/signals.h"

#include <string.h>

namespace bdn {

namespace {

constexpr int kStopSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};

}  // namespace

std::span<const int> StopSignals() { return kStopSignals; }

std::vector<int> StopSignalsNotIgnored() {
  std::vector<int> out;
  for (int sig : kStopSignals) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) &&
        now.sa_handler == SIG_IGN) {
      continue;
    }
    out.push_back(sig);
  }
  return out;
}

sigset_t SignalSet(std::span<const int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace bdn
