// Directories and files that hold a store, a registry, a node cache or a server's data are
// private to their owner: directories 0700, files 0600, whatever the umask, because they hold
// every chunk of every namespace and the key table. Existing ones with group or other bits are
// tightened on open, with a warning naming the path.
#pragma once

#include <filesystem>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

inline constexpr unsigned kPrivateDirMode = 0700;
inline constexpr unsigned kPrivateFileMode = 0600;

// Creates `dir` and every missing directory above it with mode 0700 (set explicitly after mkdir,
// so the umask cannot widen or narrow it). When `dir` already exists, MakePrivate(dir, what).
// `what` names the object in messages, e.g. "chunk store".
// Errors (ErrnoError, "<what> <dir>: <reason>"): PermissionDenied (EACCES, EPERM, EROFS),
// FailedPrecondition (ENOSPC), NotFound, Internal; InvalidArgument "<what> <dir>: not a
// directory" when a file is in the way. Thread-safe (concurrent creators both succeed).
Status CreatePrivateDirectory(const std::filesystem::path& dir, std::string_view what);

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
