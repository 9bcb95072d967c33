// Flag definitions of the bdn command tree, one function per command group. Each subcommand's
// callback stores what to run in the Invocation; main opens the Context and runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/cli/commands.h"

namespace bdn::app {

// What the Context of a command must hold.
enum class Needs {
  kStore,         // a store and registry: remote with --remote/BDN_REMOTE, else the embedded
                  // one, which must exist (a mistyped --home or BDN_HOME creates nothing)
  kStoreCreated,  // the same, the embedded store made when missing (push, sync start, secret set)
  kOrigin,        // an origin only: remote with --remote, else a Context without one (the command
                  // says so after checking its own arguments); nothing embedded is opened
  kNothing,       // neither: the command acts on this machine alone (umount), so that it works
                  // whatever state the store, or a mount over it, is in
};

struct Invocation {
  // Parses and checks flag values; runs before anything is opened, so a bad value creates
  // nothing (may be empty).
  std::function<Status()> check;
  // Commands that work on a Context.
  std::function<Status(cli::Context&)> run;
  // The refs a command was given (empty strings for those left out): where the embedded store
  // cannot be opened (none there yet), main reports a malformed one first, as the command would
  // before any I/O.
  std::function<std::vector<std::string>()> refs;
  Needs needs = Needs::kStore;
  // Commands that change the registry (rm, restore, tag set and delete, sync cancel, secret rm;
  // every kStoreCreated command too): on an embedded store that a `bdn serve` serves, main refuses
  // them, since the server's retention, keys and gc would not apply (cli::CheckNotServed).
  bool writes = false;
  // Commands that stream gigabytes through short-lived buffers in this process (an embedded
  // sync) set how many freed bytes each malloc arena keeps: main calls KeepFreedMemory
  // (base/memory.h) with it before anything is opened, so that freed buffers are reused instead
  // of being given back to the kernel and faulted in again. 0: glibc's defaults.
  size_t keep_freed_bytes = 0;
  // Commands that touch gigabytes of fresh memory (push, pull, cat, verify, mount, mounts apply,
  // serve, cache serve, sync start) set this: main re-executes the program once with huge pages
  // under glibc's heap (ReexecWithHugePageHeap, base/memory.h) before anything else runs.
  bool huge_page_heap = false;
  // Commands that open what they need themselves (servers).
  std::function<Status()> run_standalone;
  // Set (to "bdn gc", say) by commands that act on a local data directory only: main refuses
  // them when --remote or BDN_REMOTE names a server, rather than quietly acting on the local one.
  // Left empty when the command line names the directory (--data, --cache-dir, --home).
  std::string local_only;
};

// A check for an integer flag: its value is at least `min` and at most `max`, else "must be at
// least N" / "must be at most M" (CLI11's PositiveNumber and NonNegativeNumber name a range of
// doubles up to 1.8e308 in full, and let through what the flag's int cannot hold).
CLI::Validator IntInRange(long long min, long long max = std::numeric_limits<long long>::max());
// The most --jobs threads a command starts (each is a thread of its own).
inline constexpr long long kMaxJobs = 1024;
// A check for a path argument: not "" (which the file system calls would answer with EINVAL).
CLI::Validator NotEmpty();

// The flags that tune how a version is read through a mount, shared by volume mount and mounts
// apply (which applies them to every entry).
struct MountFlags {
  cli::MountArgs args;
  std::string memory_cache;  // "": not given (MountOptions' default)
  std::string cache_size;    // "": not given (10 GiB)
  std::string read_timeout;  // "": not given (MountOptions' default)
  std::string log_level = "info";
};
// Adds --memory-cache, --cache-dir, --cache-size, --cluster-cache, --read-timeout and
// --log-level to `c`, into `f`.
void AddMountTuningFlags(CLI::App& c, MountFlags& f);
// Parses the texts of `f` into f.args. Errors: InvalidArgument naming the flag.
Status ParseMountFlags(MountFlags& f);

// bdn volume push|ls|stat|versions|tag|pull|cat|diff|verify|mount|umount.
void AddVolumeFlags(CLI::App& app, Invocation& inv);
// bdn serve, bdn cache serve, bdn key create|ls|revoke.
void AddServerFlags(CLI::App& app, Invocation& inv);
// bdn volume sync start|describe|list|cancel, under `volume`.
void AddSyncFlags(CLI::App& volume, Invocation& inv);
// bdn secret set|ls|rm.
void AddSecretFlags(CLI::App& app, Invocation& inv);
// bdn mounts apply|lock.
void AddMountsFlags(CLI::App& app, Invocation& inv);
// bdn store migrate|rebuild-index|stats. `home` and `json` are main's --home and --json, read
// when the command runs.
void AddStoreFlags(CLI::App& app, Invocation& inv, const std::string& home, const bool& json);

}  // namespace bdn::app
