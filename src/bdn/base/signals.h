// The signals on which bdn's long-running processes stop cleanly, and signal names for logs.
#pragma once

#include <signal.h>

#include <span>
#include <string>

namespace bdn {

// The signals that stop `bdn serve`, `bdn cache serve` and the mount daemon cleanly (a server
// finishes its shutdown, a mount daemon unmounts, and each exits 0): every signal whose default
// action ends a process and that someone sends on purpose (a terminal, kill, a supervisor):
// SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM. Left at their default action,
// each would end the process at once and leave a dead mount or an unfinished shutdown behind.
// Faults (SIGSEGV, SIGABRT, ...) and SIGKILL are not among them.
std::span<const int> StopSignals();

// StopSignals() as a set (for pthread_sigmask and sigwait).
sigset_t StopSignalSet();

// "SIGHUP" for SIGHUP (glibc's sigabbrev_np with "SIG" before it); "signal N" for a number with
// no name (a real-time signal, or one out of range).
std::string SignalName(int sig);

}  // namespace bdn
