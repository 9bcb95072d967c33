#include "bdn/base/signals.h"

#include <string.h>

namespace bdn {

namespace {

// SIGRTMIN is a function call in glibc (it keeps the first real-time signals for itself).
const std::vector<int>& StopSignalList() {
  static const std::vector<int> list = [] {
    std::vector<int> out = {SIGHUP,  SIGINT,    SIGQUIT, SIGTERM, SIGUSR1,   SIGUSR2,
                            SIGALRM, SIGVTALRM, SIGXCPU, SIGPWR,  SIGSTKFLT, SIGIO};
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) out.push_back(sig);
    return out;
  }();
  return list;
}

}  // namespace

std::span<const int> StopSignals() { return StopSignalList(); }

std::vector<int> StopSignalsNotIgnored() {
  std::vector<int> out;
  for (int sig : StopSignalList()) {
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
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    // As bash's kill -l: the nearer end, so that RTMIN+3 and RTMAX-1 read as what was sent.
    const int from_min = sig - SIGRTMIN, to_max = SIGRTMAX - sig;
    if (from_min <= to_max) {
      return from_min == 0 ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(from_min);
    }
    return to_max == 0 ? "SIGRTMAX" : "SIGRTMAX-" + std::to_string(to_max);
  }
  if (sig == SIGIO) return "SIGIO";  // glibc says SIGPOLL, its other name; kill -l says SIGIO
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace bdn
