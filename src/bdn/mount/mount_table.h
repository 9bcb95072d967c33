// The mount table as bdn sees it (mount_table.cc): whether a mountpoint holds a live bdn mount,
// a dead one or something else, detaching dead mounts, unmounting, and whether this user may
// mount with allow_other.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"

namespace bdn {

// Unmounts the bdn mount at `mountpoint` (umount2 as root, else fusermount3 -u); its daemon
// then exits. A busy mount whose daemon does not answer a statfs within 2 s (stopped or hung:
// the processes blocked on it keep it busy, and only the daemon can release them) is detached
// lazily instead (MNT_DETACH, fusermount3 -uz): gone from the tree at once, and released by the
// kernel when its daemon ends. Errors: NotFound "mountpoint X: no such file or directory" when X
// does not exist; InvalidArgument "mountpoint X: not a bdn mount" when no
// fuse.bdn mount is there; FailedPrecondition "mountpoint X: covered by the tmpfs mount at D,
// made over it later; unmount that one first" when a mount above X hides it (mounts ls: covered);
// FailedPrecondition when files are open on a mount whose daemon
// answers, naming the processes that hold it as /proc shows them (open files, working
// directories, mapped files): "mountpoint X: busy: pid 12 (python3) has files or directories
// open on it (close them or stop the processes, then unmount again)"; PermissionDenied
// "mountpoint X: mounted by uid 0 (root), not by this user (uid 65534 (nobody)): only that user or
// root can unmount it" for a caller other than root whose mount it is not (the mount's
// user_id=); Internal otherwise.
Status Unmount(const std::filesystem::path& mountpoint);

// What a mountpoint holds: the one answer to "is this a live bdn mount of version X, a dead
// mount, or something else" for every command that mounts.
struct MountpointState {
  enum class Kind {
    kNone,     // nothing is mounted there (or the path does not exist)
    kLiveBdn,  // a bdn mount whose daemon answers
    kDead,     // a FUSE mount whose daemon is gone (ENOTCONN); CleanDeadMount detaches it
    kOther,    // another live file system
  };
  Kind kind = Kind::kNone;
  std::string type;          // of the topmost mount, e.g. "fuse.bdn"; "" for kNone
  std::string source;        // its source; for bdn the version ref (MountOptions::fsname)
  bool allow_other = false;  // it was mounted with allow_other
  // The source of the topmost bdn mount at the same mountpoint under the topmost one, when that
  // is another file system ("" if none): a bdn mount another was made over (tmpfs, a bind), which
  // an unmount of the one on top leaves covered.
  std::string bdn_source_under;
};

// How long InspectMountpoint waits for the file system at a mountpoint to answer stat/statfs.
inline constexpr std::chrono::milliseconds kMountpointAnswerDeadline{5000};

// Whether every FUSE mount above `path` answers a stat (and a bdn one a statfs) within
// kMountpointAnswerDeadline: walking a path through a mount whose daemon is stopped or hung
// never returns. The path is walked as the kernel walks it (symlinks followed, the last one
// too), each directory's FUSE mount asked (once) before a name is looked up in it. From an
// attacking helper: `volume mount REF m/h/sub` and `mounts apply` with an entry below a stopped
// daemon's mount hung for good. Errors: FailedPrecondition "mountpoint P: below D, the fuse.bdn
// mount of SRC does not answer within 5 s (its daemon is stopped or hung); unmount it first (bdn
// volume umount D)". Thread-safe.
Status CheckMountsAboveAnswer(const std::filesystem::path& path);

// Inspects the topmost mount at `mountpoint` (made absolute; /proc/self/mountinfo, then stat
// and, for a fuse.bdn mount, statfs: a dead daemon's mount fails them with ENOTCONN, and statfs
// is asked even while stat is still answered from cached attributes). Asks a live bdn daemon
// one statfs, which it answers from memory. Never waits longer than kMountpointAnswerDeadline: a
// daemon that is stopped (SIGSTOP) or hung leaves a mount whose stat never returns; the thread
// that asked is left blocked until it does (or the process exits).
// Errors: from stat, except that a path that does not exist is kNone (so is a dead mount's
// ENOTCONN, which is kDead); FailedPrecondition "mountpoint P: the fuse.bdn mount there of SRC
// does not answer within 5 s (its daemon is stopped or hung); unmount it first (bdn volume
// umount P)" when nothing answers in time; FailedPrecondition "mountpoint P: below D, the
// fuse.bdn mount of SRC whose daemon is gone (Transport endpoint is not connected); unmount it
// first (bdn volume umount D)" for a path under a dead mount; PermissionDenied "mountpoint P: the
// fuse.bdn mount there of SRC does not let this user in (...); unmount it first (...)" for
// another user's FUSE mount that stat is refused on. Thread-safe.
Result<MountpointState> InspectMountpoint(const std::filesystem::path& mountpoint);

// One bdn mount of this machine's mount table, as ListBdnMounts finds it.
struct BdnMount {
  std::string mountpoint;  // absolute, as the kernel mounted it
  std::string source;      // the version ref (MountOptions::fsname)
  bool allow_other = false;
  std::optional<uid_t> uid;  // who made it (its user_id= option)
  enum class State {
    kServing,       // its daemon answered stat and statfs
    kDead,          // its daemon is gone (ENOTCONN): bdn volume umount cleans it up
    kNotAnswering,  // no answer within the deadline: its daemon is stopped or hung
    kNoAccess,      // another user's mount without allow_other: this user cannot ask it
    kCovered,       // another mount was made at its path or above it: not reachable by its path
    kUnreachable,   // its path gives another error (a name grown past PATH_MAX, say)
  } state = State::kServing;
};
// "serving", "dead", "not answering", "no access", "covered", "unreachable".
std::string_view BdnMountStateName(BdnMount::State s);

// Every fuse.bdn mount in /proc/self/mountinfo (this process's mount namespace), in its order,
// each probed as InspectMountpoint probes (stat, statfs; the probes run at once, so the whole
// list takes at most `deadline` however many mounts do not answer). Thread-safe.
std::vector<BdnMount> ListBdnMounts(std::chrono::milliseconds deadline = kMountpointAnswerDeadline);

// If `mountpoint` is a dead FUSE mount (InspectMountpoint: kDead), detaches it lazily (umount2
// MNT_DETACH as root, else fusermount3 -uz) and returns true; the directory beneath is usable
// again. Returns false if it is not a dead mount (or does not exist).
// Errors: from InspectMountpoint, or from the detach (Internal).
Result<bool> CleanDeadMount(const std::filesystem::path& mountpoint);

// Whether the text of a fuse.conf lets users mount with allow_other, by fusermount3's rule: a
// line that is "user_allow_other" once a '#' comment and surrounding blanks are dropped; a last
// line without its newline does not count (fusermount3 skips it).
bool FuseConfAllowsOther(std::string_view fuse_conf_text);

// Ok if this process may mount with allow_other: as root, or when /etc/fuse.conf allows it
// (FuseConfAllowsOther). Else PermissionDenied "allow_other: not permitted for uid N:
// /etc/fuse.conf has no user_allow_other line (needed when not mounting as root)". Reads the
// file on every call.
Status CheckAllowOtherPermitted();

// `p` made absolute, with no "." or ".." steps and no trailing "/", its parent canonical (a ".."
// after a symlink goes up from the link's target, as the kernel resolves it) and a symlink as
// its last component followed (up to 40 hops), as mount(2) follows it; found with
// readlink only, never stat, which a stopped daemon's mount does not answer (and a dead one
// fails with ENOTCONN). How every command names a mountpoint, so that a mount made through a
// symlink is found, reported and unmounted under the path the kernel mounted on.
std::filesystem::path AbsoluteMountpoint(const std::filesystem::path& p);
// "mountpoint <mp>": the start of messages about `mp`.
std::string MountpointPrefix(const std::filesystem::path& mp);
// Whether this process runs as root (then it mounts and unmounts with the system calls, else
// through fusermount3).
bool IsRoot();

}  // namespace bdn
