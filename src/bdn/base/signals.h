// The signals on which bdn's long-running processes stop cleanly, and signal names for logs.
#pragma once

#include <signal.h>

#include <span>
#include <string>
#include <vector>

namespace bdn {

// The signals that stop `bdn serve`, `bdn cache serve` and the mount daemon cleanly (a server
// finishes its shutdown, a mount daemon unmounts, and each exits 0): every signal whose default
// action ends a process and that someone or something sends on purpose (a terminal, kill, a
// supervisor, init on a power failure, a CPU-time limit): SIGHUP, SIGINT, SIGQUIT, SIGTERM,
// SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGXCPU, SIGPWR, SIGSTKFLT, SIGIO, and the real-time
// signals SIGRTMIN..SIGRTMAX (glibc's own, below SIGRTMIN, excluded). Left at their default
// action, each would end the process at once and leave a dead mount or an unfinished shutdown
// behind. Faults (SIGSEGV, SIGABRT, SIGSYS, SIGXFSZ, ...), SIGKILL and SIGPROF (a profiler's
// timer, whose handler the profiler installs) are not among them.
std::span<const int> StopSignals();

// The stop signals this process does not ignore, in StopSignals' order: one inherited as SIG_IGN
// (SIGHUP under nohup; SIGINT and SIGQUIT of a command a non-interactive shell started in the
// background) stays ignored, as POSIX programs keep an ignored SIGINT.
std::vector<int> StopSignalsNotIgnored();

// Those signals as a set (for pthread_sigmask and sigwait: a blocked signal is queued and taken by
// sigwait even when ignored, so an ignored one must stay out of the set).
sigset_t SignalSet(std::span<const int> signals);

// "SIGHUP" for SIGHUP (glibc's sigabbrev_np with "SIG" before it; "SIGIO", not its other name
// SIGPOLL); a real-time signal as kill -l
// names it: "SIGRTMIN", "SIGRTMIN+N" in the lower half, "SIGRTMAX-N" and "SIGRTMAX" in the upper;
// "signal N" for a number out of range.
std::string SignalName(int sig);

}  // namespace bdn
