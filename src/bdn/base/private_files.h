// Directories and files that hold a store, a registry, a node cache or a server's data are
// private to their owner: directories 0700, files 0600, whatever the umask, because they hold
// every chunk of every namespace and the key table. Existing ones with group or other bits are
// tightened on open, with a warning naming the path, and then everything below them must be this
// user's (another user may have planted files and symlinks there); existing ones another user
// owns are refused (that user could plant symlinks in them, or read what is written there), and
// so are paths that another user could redirect: through another user's symlink, or below a
// directory another user may change.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn {

inline constexpr unsigned kPrivateDirMode = 0700;
inline constexpr unsigned kPrivateFileMode = 0600;

// Creates `dir` and every missing directory above it with mode 0700 (set explicitly after mkdir,
// on the new directory's descriptor, so the umask cannot widen or narrow it).
// The path is walked from the root as the kernel would, one component at a time (OpenDirectoryPath,
// base/path_walk.h: each directory and symlink judged on a descriptor of its own, the one then
// used; symlinks on it, a path the user named, are followed), and refused when another user could
// decide where it leads: a symlink on it owned by a user other than this one and root (as
// fs.protected_symlinks would, which is off on some systems), or a directory it passes through
// that is owned by such a user or writable by group or other without the sticky bit (as
// OpenSSH's StrictModes; /tmp is fine, and so is a group that is this user's own with no other
// member: none in its member list, and no other user's primary group). An existing `dir` must be
// owned by the effective user; when it has group or other bits they are removed on its descriptor
// (with MakePrivate's warning) and then every entry below it, at any depth, must be owned by the
// effective user too, and a regular file there have no other hard link (its subdirectories are
// tightened likewise); symlinks there are not followed. `what` names the object in messages, e.g.
// "chunk store". Errors (ErrnoError, "<what> <dir>: <reason>"): PermissionDenied (EACCES, EPERM,
// EROFS), FailedPrecondition (ENOSPC), NotFound, Internal (ELOOP past 40 symlinks); InvalidArgument
// "<what> <dir>: exists and is not a directory" when a file is in the way ("<what> <dir>: /a/f
// exists and ..." on the way; "…: a symlink to \"t\", which is not a directory" or "which does
// not exist": a symlink's target is never created); PermissionDenied:
//   "<what> <dir>: owned by uid 1001 (mallory), not by this user (uid 0); use a directory of
//   your own" (CheckOwner; for an entry below a directory that was open to others, "<what>
//   <dir>/registry.db: a symlink owned by ..." or "...: owned by ...", or "<what>
//   <dir>/registry.db: a file with 2 hard links, put there while the directory was open to
//   other users (it may be a link to a file elsewhere); move it away");
//   "<what> <dir>: /tmp/x is a symlink owned by uid 1001 (mallory), not by this user (uid 0) or
//   root; use a path of your own";
//   "<what> <dir>: /srv/m, a directory above it, is owned by uid 1001 (mallory), not by this
//   user (uid 0) or root, who could replace what is in it; use a directory of your own";
//   "<what> <dir>: /srv/shared, a directory above it, is writable by other users (mode 0777, no
//   sticky bit), who could replace what is in it; use a directory of your own".
// Thread-safe (concurrent creators both succeed).
Status CreatePrivateDirectory(const std::filesystem::path& dir, std::string_view what);

// Whether a user other than this one (and root) may write in the directory `st`, sticky bit or
// not: write permission for others, or for a group that is not only this user's (a group counts
// as this user's own when it is the effective group, with no other member and no other user's
// primary group). Thread-safe.
bool WritableByOthers(const struct stat& st);

// Whether a directory that a path this user named passes through (`st`, shown as `dir`) is one
// that only this user and root can change: PermissionDenied "<shown>: <dir>, a directory above
// it, is owned by uid 1001 (mallory), not by this user (uid 0) or root, who could replace what is
// in it; use a directory of your own", or "..., is writable by other users (mode 0777, no sticky
// bit), who could replace what is in it; ..." (as OpenSSH's StrictModes; a group that is this
// user's own, with no other member and no other user's primary group, does not count; /tmp,
// root's and sticky, is fine). A PathWalk::check_directory for paths whose entries must not be
// renamed under this user (private directories, log files, mountpoints). Thread-safe.
Status CheckAncestor(const struct stat& st, const std::string& dir, const std::string& shown);

// Looks at an existing directory (open as `dir_fd`) before anything in it is changed.
using ExistingCheck = std::function<Status(int dir_fd)>;

// CreatePrivateDirectory(dir, what), returning the directory open (O_DIRECTORY): the one that was
// checked, so that what is opened below it is relative to it. An existing directory (not one this
// call created) is first given to `check_existing`, if any, once it is known to be this user's
// and before its mode is tightened: its error is returned, and the directory is left as it was.
// Errors: those of CreatePrivateDirectory and check_existing.
Result<UniqueFd> OpenPrivateDirectory(const std::filesystem::path& dir, std::string_view what,
                                      const ExistingCheck& check_existing = {});

// Opens the subdirectory `name` (one path component) of the directory `parent`, creating it mode
// 0700 if missing, never through a symlink (O_NOFOLLOW): a private directory is only what is
// really below it. It must be owned by the effective user; group and other bits are removed as
// MakePrivate does (with its warning). `display` is its path in messages.
// Errors: FailedPrecondition "<what> <display>: not a directory (a symlink or file is in the
// way); move it away"; PermissionDenied (CheckOwner); ErrnoError "<what> <display>" otherwise.
Result<UniqueFd> OpenPrivateSubdirectory(int parent, const std::string& name,
                                         const std::filesystem::path& display,
                                         std::string_view what);

// Opens the file `name` (one path component) inside the directory `dir` with `flags` (open(2);
// with O_CREAT, mode 0600), never through a symlink (O_NOFOLLOW) and never blocking on a FIFO
// (O_NONBLOCK while opening): anything that is not a regular file is refused. `display` is its
// path in messages. Errors: FailedPrecondition "<display>: not a regular file (a symlink, FIFO,
// directory or device is in the way)"; ErrnoError "<display>" otherwise (NotFound without
// O_CREAT for a missing file).
Result<UniqueFd> OpenRegularFileAt(int dir, const std::string& name, int flags,
                                   const std::string& display);

// OkStatus if `st` (of the object `what` names) is owned by the effective user, else
// PermissionDenied "<what>: owned by uid 1001 (mallory), not by this user (uid 0); use a
// directory of your own" ("<what>: a symlink owned by ..." when `st` is a symlink's lstat).
Status CheckOwner(const struct stat& st, const std::string& what);

// Refuses what is at `file` when another user could have put it there for this user to open:
// PermissionDenied (CheckOwner, "<what> <file>: ...") for a symlink owned by a user other than
// this one and root (followed only as fs.protected_symlinks would), or a regular file (the
// symlink's target, for one that is followed) another user owns. A regular file of this user's
// own then gets MakePrivate(file, what). A missing file, a dangling symlink of this user's and
// anything that is not a regular file (/dev/null, a FIFO) pass untouched: the caller's own
// open decides. Thread-safe.
Status CheckPrivateFile(const std::filesystem::path& file, std::string_view what);

// Creates `file` empty with mode 0600 when it does not exist (never through a symlink), so that
// a library that then opens it (SQLite) keeps that mode; an existing one gets
// CheckPrivateFile(file, what), whose errors are returned. Creation errors are ignored: the
// caller's own open reports them. Thread-safe.
Status CreatePrivateFile(const std::filesystem::path& file, std::string_view what);

// Opens the log file `file` (a path the user named) for appending, once: every later write goes
// through the descriptor returned (O_WRONLY | O_APPEND | O_CLOEXEC), never through the path again.
// Its directory is walked as CreatePrivateDirectory walks (missing directories made 0700, another
// user's symlink never followed, no directory on the way, the file's own included, that is owned
// by a user other than this one and root or writable by others without the sticky bit: /tmp is
// fine; an existing directory is left as it is); the file is then opened relative to that
// directory's descriptor with O_CREAT (mode 0600), O_NOFOLLOW and O_NONBLOCK (a FIFO never blocks
// the open), and checked on the descriptor: a regular file must be this user's with one link,
// and its group and other bits are removed (MakePrivate's warning); a character device
// (/dev/null, a terminal) is used as it is; anything else is refused. A symlink at `file` of this
// user's or root's is followed the same way (its target's directory walked and judged, at most 40
// links); another user's is refused.
// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` name a descriptor this process
// was given (a pipe to tee, a container's log capture): a copy of it is returned, whatever it
// is, its mode left alone. Only a descriptor open when the process started counts
// (FailedPrecondition "log file /dev/fd/9: descriptor 9 was not open when bdn started (open it
// in the shell, e.g. 9>>bdn.log, or give a file)"): another number would be one of bdn's own
// files by the time the log is opened. Whatever the path, a file opened that this process
// already has open by a descriptor it opened itself (/proc/thread-self/fd/N, /proc/<pid>/fd/N, a
// symlink to /dev/fd/N) is refused: FailedPrecondition "log file <file>: it is a file bdn itself
// has open (descriptor N), not a log file; give a file of its own".
// Errors: those of CreatePrivateDirectory, "log file <file>: ..." (PermissionDenied "log file
// /tmp/m/x.log: /tmp/m, a directory above it, is owned by uid 1001 (mallory), not by this user
// (uid 0) or root, who could replace what is in it; use a directory of your own");
// PermissionDenied "log file <file>: owned by uid 1001 (mallory), ..." (CheckOwner) or "log file
// <file>: a symlink owned by uid 1001 (mallory), not by this user (uid 0) or root; use a path of
// your own", "log file <file>: a file with 2 hard links (it may be a link to a file elsewhere);
// give a file of its own"; FailedPrecondition "log file <file>: a FIFO is in the way (a log file
// is a regular file, or a character device such as /dev/null)" (also "a socket", "a directory",
// "a block device"); ErrnoError "log file <file>" otherwise. Thread-safe.
Result<UniqueFd> OpenLogFile(const std::filesystem::path& file);

// For an SQLite database: CreatePrivateFile(db, what), and CheckPrivateFile of the "<db>-wal",
// "<db>-shm" and "<db>-journal" files beside it (SQLite creates those with the database file's
// mode, and opens them through symlinks). Errors: theirs.
Status MakeDatabasePrivate(const std::filesystem::path& db, std::string_view what);

// If `path` (a directory or regular file; never a symlink's target, nor a device or FIFO)
// exists and has any group or other permission bit, removes those bits on a descriptor of it
// (so nothing else is changed if the path is swapped meanwhile) and writes "warning: <what>
// <path>: was readable by other users (mode 0755); changed to 0700" to stderr. When the change
// fails (a read-only file system, another owner) the warning says so instead ("...; could not
// change it: <reason>"): it is never an error, so a store on read-only media still serves
// reads. Does nothing for a missing path. Only `path` itself. Thread-safe.
void MakePrivate(const std::filesystem::path& path, std::string_view what);

// "a FIFO", "a symlink", "a regular file", ...: what `st` (from lstat) is, for a message that
// refuses it.
std::string KindOf(const struct stat& st);

}  // namespace bdn
