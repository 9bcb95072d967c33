// The FUSE adapter: serves one sealed version read-only at a mountpoint (libfuse3 low-level API),
// reading bytes lazily through a ChunkCache, in this process (ServeMount) or in a daemon
// (MountInBackground). Its parts: the FUSE operations (fuse_ops.h), the mount table: what is
// mounted where, unmounting, cleaning up after killed daemons (mount_table.h), and the session
// and daemon (fuse_mount.cc). This header includes the other two.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bdn/base/log.h"
#include "bdn/base/status.h"
#include "bdn/mount/fuse_ops.h"
#include "bdn/mount/mount_table.h"
#include "bdn/volume/version_view.h"

namespace bdn {

struct MountOptions {
  // An existing directory. Made absolute before use.
  std::filesystem::path mountpoint;
  // Source name shown in /proc/mounts, e.g. "bdn:weights/x@b3:…"; the type is "fuse.bdn".
  std::string fsname = "bdn";
  // Bound of the in-memory LRU of verified chunks.
  uint64_t memory_cache_bytes = 256ull << 20;
  // FUSE worker threads; 0 = max(4, 2 * cores).
  int threads = 0;
  // Written to /sys/class/bdi/<major>:<minor>/read_ahead_kb once the mount answers, so buffered
  // and mmap reads reach the daemon as 1 MiB requests; 0 leaves the kernel default (128 KiB).
  // Failing to write it (not root) is a warning on stderr, not an error.
  uint32_t read_ahead_kb = 4096;
  // If >= 0: the byte '1' is written to it once the mount answers (a stat of the mountpoint
  // succeeds), then it is closed; if ServeMount fails before that, it is closed unwritten.
  int ready_fd = -1;
  // The daemon's own readahead: once a file handle reads sequentially, the chunks of up to this
  // many bytes past the read are fetched in the background, in batches of at least half of it
  // (a remote tier answers a batch with one request: 64 MiB gives <= 64 requests per GiB).
  // 0 disables it.
  uint64_t prefetch_bytes = 64ull << 20;
  // Threads serving those background fetches.
  int prefetch_threads = 8;
  // Threads fetching chunks that reads are waiting for (demand fetches).
  int fetch_threads = 16;
  // Every network wait of a request has this deadline: a read (or an open that needs a file's
  // chunk index) whose bytes cannot be had by then fails with EIO; transient errors
  // (Unavailable, DeadlineExceeded) are retried with back-off until then. A fetch that failed
  // is forgotten, so a later read tries again (reads recover once the origin is back).
  // The default leaves room for the kernel's immediate retry of a failed read (which waits at
  // most another second, see ChunkCache), so EIO comes within 60 s.
  std::chrono::milliseconds read_timeout{55'000};
  // Load every file's chunk index in the background once mounted, so that files can still be
  // opened (and their cached bytes read) after the origin goes away.
  bool prefetch_indexes = true;
  // Lets users other than the mounting one in (mount option allow_other; the kernel enforces
  // the manifest's permission bits either way, via default_permissions, so a 0600 file stays
  // the mounting user's). A user other than root needs "user_allow_other" in /etc/fuse.conf
  // (CheckAllowOtherPermitted).
  bool allow_other = false;
  // The mtime (and atime, ctime) of entries whose manifest records none (a version pushed
  // without --preserve-mtime) and of the root: the version's creation time, in ns since the
  // epoch. 0 shows 1970-01-01.
  int64_t unrecorded_mtime_ns = 0;
  // MountInBackground only: the daemon's log (base/log.h: corruption reports, read errors,
  // warnings) and stderr go to this descriptor, the log file opened once by the caller
  // (OpenLogFile, base/private_files.h) and handed across the daemon's forks, so the file's path
  // is never resolved again; -1 = /dev/null. The caller keeps and closes it.
  int log_fd = -1;
  // Lines of this level and above are logged.
  log::Level log_level = log::Level::kInfo;
  // Called once the session is over (unmounted, or stopped by a signal), before the file system
  // waits for the fetches still running: ends what they wait on (the remote tiers'
  // HttpClient::Shutdown), so that a mount over an origin that stopped answering exits at once
  // instead of after the fetches' deadline (60 s). Empty: nothing to end.
  std::function<void()> session_over;
};

// Serves `view` read-only at options.mountpoint and blocks until the file system is unmounted
// (Unmount, umount, fusermount3 -u) or the process gets a stop signal (StopSignals,
// base/signals.h: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, ...; then it
// unmounts itself and logs "SIGQUIT: unmounted"), when this session owns the process's signal
// handlers (the first session of the process). A dead bdn mount at the mountpoint is detached first
// (CleanDeadMount). Mount time does no per-file work: inode numbers are entry index + 2 (root = 1),
// a hardlink shares its target's inode; bytes are fetched and verified when read.
//
// Kernel-facing behaviour: mounted "ro" with default_permissions (and allow_other if asked),
// type "fuse.bdn"; owner = the calling uid/gid; modes from the manifest; mtimes from the manifest
// when it records them, else options.unrecorded_mtime_ns (the version's creation time); entries,
// attributes and negative lookups cached for a day (the root's attributes for 1 s, so a dead
// daemon shows as ENOTCONN); page cache kept across opens; requests up to 1 MiB; every modifying
// operation fails with EROFS; a chunk that fails verification makes the read of that range fail
// with EIO (the whole kernel request, which may be up to 1 MiB around it) and is reported on
// stderr naming the chunk and the file.
//
// Faults: lookup, getattr, readdir, readlink and statfs answer from the loaded manifest and never
// touch the store. Reads and opens that need the store wait on other threads than libfuse's
// workers, each until options.read_timeout; then the request fails with EIO (reported on stderr).
// Chunks held in memory (or in a node cache behind the store) stay readable meanwhile.
//
// Interrupts: the kernel interrupts a waiting request (FUSE_INTERRUPT) whenever its calling
// thread gets any signal, but only a dying caller wants the request ended: a reader killed
// (kill -9, or a signal it has no handler for) cannot exit before the answer. So an
// interrupted request is answered EINTR at once, and the fetches only it had queued are
// dropped (fetches already running go on and fill the caches), only once its calling thread is
// dying (ThreadIsDying: SIGKILL pending). The interrupted request's caller is checked at once
// and then every few milliseconds (up to every 100 ms) until the request is answered, since the
// interrupt may come just before the kernel marks the thread, and a thread killed after a
// handled signal gets no second interrupt. A signal the caller handles (SIGCHLD, SIGALRM,
// SIGWINCH, Go's SIGURG, a SIGHUP handler) changes nothing: the read or open completes or
// times out as if no signal had come, and the program sees no EINTR (the kernel does not
// restart an interrupted FUSE read, SA_RESTART or not). So that O_DIRECT reads can be
// interrupted too, they are sent as synchronous requests (no async DIO: the kernel never
// interrupts background requests).
//
// Exit: once the session ends (unmounted, or a signal), the view's store is synced
// (ChunkStore::Sync: a node cache seals the region it was filling, so that the mounts sharing
// it read its chunks from its footer); a failure there is a warning in the log.
//
// Errors: NotFound if the mountpoint does not exist; InvalidArgument "mountpoint X: not a
// directory"; AlreadyExists "mountpoint X: already a bdn mount" if a live one is there;
// PermissionDenied "mountpoint X: allow_other: ..." (CheckAllowOtherPermitted), or "mountpoint
// X: mount failed: ..." when libfuse says "Permission denied" or "Operation not permitted"
// (/dev/fuse not open to this user); Internal "mountpoint X: mount failed" otherwise (no
// /dev/fuse, ...) or a failing session.
// Thread-safety: several ServeMount calls may run in one process; only the first one running
// installs the signal handlers.
Status ServeMount(std::shared_ptr<VersionView> view, const MountOptions& options);

// Runs ServeMount in a daemon (forked twice, setsid, cwd "/", stdin/stdout to /dev/null and
// stderr to options.log_fd or /dev/null) and returns once the mount answers. A dead mount at
// the mountpoint (CleanDeadMount) is detached first. options.ready_fd is not used. If
// `daemon_pid` is not null it receives the daemon's pid (it is not this process's child).
//
// Errors: the daemon's ServeMount error, code and message; DeadlineExceeded if the mount does
// not answer within 30 s (the daemon is then killed); Internal on fork/pipe failures.
// Fork safety: the daemon is a fork of this process, so `view` and its store must work there:
// call this while no other thread holds locks they use, and with stores that need no threads
// of their own (their file descriptors are inherited).
Status MountInBackground(std::shared_ptr<VersionView> view, const MountOptions& options,
                         pid_t* daemon_pid = nullptr);

}  // namespace bdn
