// The FUSE low-level operations of one mounted version (fuse_ops.cc), and the mapping of their
// errors and interrupts. The session that runs them is ServeMount (fuse_mount.h).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string_view>

#include "bdn/base/status.h"
#include "bdn/volume/version_view.h"

struct fuse_lowlevel_ops;

namespace bdn {

struct MountOptions;

// Maps a Status to the errno a FUSE reply carries: NotFound -> ENOENT, InvalidArgument -> EINVAL,
// everything else (Corruption, Unavailable, DeadlineExceeded, Internal, ...) -> EIO. The one
// Status->errno mapping of the mount, except that a read or open that fails to get bytes from
// the store is always EIO (a chunk missing from the store is not a missing file).
int ErrnoFromStatus(const Status& status);

// Whether the text of a /proc/<pid>/task/<tid>/status file shows SIGKILL (signal 9: bit 8,
// mask 0x100) pending in its SigPnd (the thread's own pending signals) or ShdPnd (its
// process's) line. The kernel adds SIGKILL to every thread's pending set once their process is
// dying (kill -9; a fatal signal with no handler, such as SIGTERM or SIGINT; exit_group from
// another thread), so this tells a dying thread from one that merely got a signal it handles.
// Each line is "Name:<blanks><hex mask>", the mask 16 or more hex digits, lowest signals last;
// a missing line or a value that is not hex counts as no signal pending.
bool StatusShowsSigkillPending(std::string_view proc_status_text);

// Whether thread `tid` (a FUSE request's fuse_req_ctx()->pid: the calling thread's id, in the
// daemon's pid namespace) is dying, i.e. StatusShowsSigkillPending for its
// /proc/<tid>/task/<tid>/status. False when that cannot be read: tid 0 (a caller outside the
// daemon's pid namespace), a /proc that hides other users' processes (hidepid), or a thread
// that is gone. Reads one /proc file (microseconds); thread-safe.
bool ThreadIsDying(pid_t tid);

// The file system one FUSE session serves: inode numbers are entry index + 2 (root = 1), a
// hardlink shares its target's inode; lookups, attributes, listings, readlink and statfs come
// from the loaded manifest; opens and reads go through a VolumeReader whose waits run off
// libfuse's workers; every modifying operation fails with EROFS. See ServeMount for the
// kernel-facing behaviour. Thread-safe (the callbacks run on libfuse's worker threads).
class FuseFileSystem {
 public:
  // The file system of `view` as `options` say, mounted at `mountpoint` (absolute; for
  // messages). Starts the reader's threads.
  static std::unique_ptr<FuseFileSystem> Create(std::shared_ptr<VersionView> view,
                                                const MountOptions& options,
                                                std::filesystem::path mountpoint);
  // The operations to give fuse_session_new; its userdata must be the FuseFileSystem*.
  static fuse_lowlevel_ops Ops();
  virtual ~FuseFileSystem() = default;
  // Once the session loop has ended: ends every wait and answers the requests still pending,
  // while the session can still take replies. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace bdn
