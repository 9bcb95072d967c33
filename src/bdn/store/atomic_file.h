// Writing a file whole or not at all: the bytes go to a temporary file that is then renamed into
// place, so a reader of the final path sees no file or the complete one, and a writer killed
// midway leaves only a temporary file behind (ccache's util/ atomic file does the same), which the
// next write of the same file removes. Every
// file bdn writes into place goes through here: the origin's admin token, `bdn mounts lock`'s
// config, the secret key file, the store's index tables, doom and GC claims files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/base/status.h"

namespace bdn {

// What the write does when the final path already exists.
enum class ExistingFile {
  // rename(2) over it.
  kReplace,
  // Never replace it: renameat2(RENAME_NOREPLACE), or link(2) on a file system without that flag.
  // The existing file stays, and the write reports WriteOutcome::kAlreadyExisted.
  kKeep,
};

enum class WriteOutcome {
  kWritten,         // the final path now holds the new file
  kAlreadyExisted,  // (ExistingFile::kKeep only) the final path was there first and is unchanged
};

// How durable the file is once it has its final name.
enum class FileSync {
  kNone,  // nothing is synced: derived data, or a file whose loss a crash may take
  kData,  // fdatasync(2) of the temporary file before the rename (its bytes and size)
  kAll,   // fsync(2) of the temporary file before the rename (its metadata too)
};

struct AtomicWriteOptions {
  // Where the temporary file is made; on the final path's file system. Empty: the final path's
  // directory. The directory must exist.
  std::filesystem::path tmp_dir;
  // The temporary file's name. Empty: "<final file name>.<pid>.<n>.<16 random hex digits>", new
  // for every write (created O_EXCL), so any number of threads and processes may write the same
  // final path at once, and nobody can plant a file or symlink there first. A fixed name is for one
  // writer at a time (the caller holds a lock or is the only writer, or the name is itself random):
  // a stale one a killed writer left is truncated and reused, so temporaries do not pile up; a
  // cleaner can also look for it by name. Either way a symlink at the temporary name is refused
  // (O_NOFOLLOW: "create <tmp>: ...", ELOOP), not followed.
  std::string tmp_name;
  // The file's permission bits, set with fchmod(2), so the umask changes nothing.
  unsigned mode = kPrivateFileMode;
  ExistingFile existing = ExistingFile::kReplace;
  FileSync sync = FileSync::kNone;
};

// Writes `data` (all of it, or nothing visible) to `final_path` through a temporary file as
// `options` say. `what` names the object in messages, e.g. "admin token /d/admin.token". The
// temporary file is removed on every outcome but kWritten; the directory is not synced.
//
// Returns kWritten, or kAlreadyExisted as described for ExistingFile::kKeep. Errors (from
// ErrnoError, so ENOENT → NotFound, EACCES/EPERM/EROFS → PermissionDenied, ENOSPC/EDQUOT →
// FailedPrecondition, others → Internal): "<what>: create <tmp>: <reason>", "<what>: write
// <tmp>: …", "<what>: fsync: …" (or fdatasync), "<what>: close: …", "<what>: rename into
// <final_path>: …".
//
// Thread-safe as the tmp_name option says.
Result<WriteOutcome> WriteFileAtomically(const std::filesystem::path& final_path,
                                         std::span<const uint8_t> data, const std::string& what,
                                         const AtomicWriteOptions& options);

// How long ago a temporary file whose writer is gone must have been last written for
// RemoveDeadWritersTemporaries to remove it: a writer in another PID namespace, whose pid this
// process cannot see, has long finished by then.
inline constexpr long kDeadWriterAgeSeconds = 30;

// Removes from `tmp_dir` (empty: `final_path`'s directory) the temporary files with unique names
// ("<final file name>.<pid>.<n>.<16 hex digits>") that writers killed before their rename left:
// regular files of this user whose pid is gone (kill(2) says ESRCH) and that were last written
// over kDeadWriterAgeSeconds ago. A committed write with a unique name calls it. Best effort:
// returns how many it removed; errors (an unreadable directory) remove nothing.
size_t RemoveDeadWritersTemporaries(const std::filesystem::path& final_path,
                                    const std::filesystem::path& tmp_dir = {});

// The same write piece by piece, for data that is produced as it is written and should not be
// held whole (an index table): Create makes the temporary file, Append adds bytes, Commit does
// the rest of WriteFileAtomically (sync, close, rename). Destroying an uncommitted writer, or
// any failed step, removes the temporary file. Errors as WriteFileAtomically. Move-only; not
// thread-safe (one writer, one thread at a time); any number of writers may target one final
// path as the tmp_name option says.
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> Create(std::filesystem::path final_path, std::string what,
                                         AtomicWriteOptions options);
  ~AtomicFileWriter();
  AtomicFileWriter(AtomicFileWriter&&) noexcept = default;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;

  // The temporary file, open for reading and writing (to lock it before it is named); -1 once
  // committed or failed.
  int fd() const { return fd_.get(); }
  // The temporary file's path.
  const std::filesystem::path& tmp_path() const { return tmp_; }

  Status Append(std::span<const uint8_t> data);
  // Once only; afterwards the writer is spent.
  Result<WriteOutcome> Commit();
  // Commit for a file that is named at once and written on afterwards (a claims log): the
  // options' `existing` must be kReplace; the file is synced as the options say and renamed, and
  // stays open: its descriptor is returned, its offset at the end of what was appended. Once
  // only.
  Result<UniqueFd> CommitKeepingOpen();

 private:
  AtomicFileWriter(std::filesystem::path final_path, std::filesystem::path tmp, std::string what,
                   AtomicWriteOptions options, UniqueFd fd);
  // Closes and removes the temporary file (a failed or abandoned write).
  void Discard();
  // The sync the options ask for. Errors: "<what>: fsync: …" / "fdatasync".
  Status Sync();
  // Renames the temporary file into place as the options say; 0 or -1 with errno, as rename(2).
  int MoveIntoPlace();

  std::filesystem::path final_path_;
  std::filesystem::path tmp_;
  std::string what_;
  AtomicWriteOptions options_;
  UniqueFd fd_;
};

}  // namespace bdn
