// Directories and files that hold a store, a registry, a node cache or a server's data are
// private to their owner: directories 0700, files 0600, whatever the umask, because they hold
// every chunk of every namespace and the key table. Existing ones with group or other bits are
// tightened on open, with a warning naming the path; existing ones another user owns are refused
// (that user could plant symlinks in them, or read what is written there).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn {

inline constexpr unsigned kPrivateDirMode = 0700;
inline constexpr unsigned kPrivateFileMode = 0600;

// Who may own an existing directory that CreatePrivateDirectory is given.
enum class DirOwner {
  kThisUser,  // only the effective user: a store, a cache, a server's data and what is below them
  kAnyone,    // any user: the directory of a file the user named (a log file in /tmp)
};

// Creates `dir` and every missing directory above it with mode 0700 (set explicitly after mkdir,
// so the umask cannot widen or narrow it). When `dir` already exists (symlinks in `dir`, a path
// the user named, are followed), it must be owned by the effective user (DirOwner::kThisUser),
// then MakePrivate(dir, what). `what` names the object in messages, e.g. "chunk store".
// Errors (ErrnoError, "<what> <dir>: <reason>"): PermissionDenied (EACCES, EPERM, EROFS),
// FailedPrecondition (ENOSPC), NotFound, Internal; InvalidArgument "<what> <dir>: not a
// directory" when a file is in the way; PermissionDenied (CheckOwner) "<what> <dir>: owned by
// uid 1001 (mallory), not by this user (uid 0); use a directory of your own".
// Thread-safe (concurrent creators both succeed).
Status CreatePrivateDirectory(const std::filesystem::path& dir, std::string_view what,
                              DirOwner owner = DirOwner::kThisUser);

// CreatePrivateDirectory(dir, what), then the directory opened (O_DIRECTORY) and its owner
// checked again on the descriptor, so that what is opened below it is relative to the directory
// that was checked. Errors: those of CreatePrivateDirectory; ErrnoError "<what> <dir>".
Result<UniqueFd> OpenPrivateDirectory(const std::filesystem::path& dir, std::string_view what);

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
// directory of your own".
Status CheckOwner(const struct stat& st, const std::string& what);

// Creates `file` empty with mode 0600 when it does not exist, so that a library that then
// opens it (SQLite) keeps that mode; an existing one gets MakePrivate(file, what). Creation
// errors are ignored: the caller's own open reports them. Thread-safe.
void CreatePrivateFile(const std::filesystem::path& file, std::string_view what);

// For an SQLite database: CreatePrivateFile(db, what), and MakePrivate of the "<db>-wal" and
// "<db>-shm" files beside it (SQLite creates those with the database file's mode).
void MakeDatabasePrivate(const std::filesystem::path& db, std::string_view what);

// If `path` (a directory or file; symlinks are not followed) exists and has any group or other
// permission bit, removes those bits and writes "warning: <what> <path>: was readable by other
// users (mode 0755); changed to 0700" to stderr. When the change fails (a read-only file system,
// another owner) the warning says so instead ("...; could not change it: <reason>"): it is never
// an error, so a store on read-only media still serves reads. Does nothing for a missing path.
// Only `path` itself: for a directory, nothing below it is reachable by others once it is 0700.
// Thread-safe.
void MakePrivate(const std::filesystem::path& path, std::string_view what);

}  // namespace bdn
