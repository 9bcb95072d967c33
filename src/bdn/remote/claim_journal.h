// ClaimJournal: the Idempotency-Key of each push claim a CLI process on this machine holds, so
// that a push re-run after its process died (kill -9, a closed terminal, a crashed CI runner)
// takes the dead process's claim over at once instead of failing with "push in progress" until
// the claim's TTL (30 s by default) runs out. The takeover is the origin's own idempotent replay
// (docs/http-api.md, "Push claims": a repeated POST .../claims with the same key by the same key
// holder while its claim is live gets the same claim id and renews it), so the server needs
// nothing new and another key holder can never take a claim over.
//
// One file per (server URL, volume) under the directory (BDN_HOME/push-claims, 0700), named by
// 32 hex digits of the BLAKE3 of "<url>\n<ns>/<vol>", holding one JSON object: {"boot": the
// kernel's boot_id, "pid", "start": the process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22), "key"}. A record is taken over only when it was written on this
// boot by a process that is gone (no /proc/<pid>, or a pid reused by a process that started at
// another time); a live holder's key is never reused, so two pushes from one machine still
// conflict. From reading the record to recording the claim's holder, a push holds an flock on
// "<record>.lock", so of two pushes that find the same dead holder only the first takes over and
// the second then finds the first alive; Forget removes the lock file with the record, under the
// lock, and a push whose lock is then on a file no longer at the path locks the new one. Only
// regular files are read (opened with O_NONBLOCK and O_NOFOLLOW, at most 4 KiB): a FIFO, a device
// or a symlink in the directory is no record. The journal is an optimisation: every failure to read
// or write it falls back to a fresh key (and the TTL wait), never to an error.
#pragma once

#include <filesystem>
#include <string>

#include "bdn/base/fd.h"

namespace bdn::remote {

// The identity of a process: the boot it runs in and its start time, so a reused pid is told apart.
struct ProcessIdentity {
  std::string boot;  // /proc/sys/kernel/random/boot_id, "" when unreadable
  long pid = 0;
  unsigned long long start = 0;  // clock ticks since boot; 0 when unreadable
};

// This process's identity.
ProcessIdentity SelfIdentity();

// Whether the process `id` names still runs: same boot, /proc/<pid> exists with the same start
// time. A record of another boot, or one with an unknown boot, counts as alive (never taken over).
bool StillRunning(const ProcessIdentity& id);

class ClaimJournal {
 public:
  explicit ClaimJournal(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // A claim about to be made: the record's lock (held until destruction; none when the lock file
  // cannot be opened) and the Idempotency-Key to claim with.
  struct Attempt {
    UniqueFd lock;
    std::string key;          // "" if no key could be drawn: the caller draws its own
    bool taken_over = false;  // `key` is a dead process's
    // The record is a live process's (another push of this volume from this machine): this
    // attempt will likely be refused, and must not replace or remove that record (from an
    // attacking helper: a refused push deleted the holder's record, so a re-push after the holder
    // was killed waited for its claim to expire).
    bool live_holder = false;
  };
  // Waits for the lock of the record of `volume` ("ns/vol") on `server`, then picks the key: the
  // one recorded by a process that is gone, else a fresh one (NewIdempotencyKey). Keep the
  // Attempt until Record (or until the claim failed).
  Attempt Begin(const std::string& server, const std::string& volume) const;
  // Records that this process holds the claim made with `key` (0600 file, written whole, then
  // renamed into place). Call it while holding the Attempt, unless the Attempt found a live holder
  // (then only once the claim was made).
  void Record(const std::string& server, const std::string& volume, const std::string& key) const;
  // Removes the record if it is still this process's with `key` (a later push may have taken
  // it over meanwhile).
  void Forget(const std::string& server, const std::string& volume, const std::string& key) const;

  // The record's file (for tests).
  std::filesystem::path FileOf(const std::string& server, const std::string& volume) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace bdn::remote
