// Writing a file whole or not at all: the bytes go to a temporary file that is then renamed into
// place, so a reader of the final path sees no file or the complete one, and a writer killed
// midway leaves only a temporary file behind (ccache's util/ atomic file does the same).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "bdn/base/status.h"

namespace bdn {

// What WriteFileAtomically does when the final path already exists.
enum class ExistingFile {
  // rename(2) over it. For content-addressed files both hold the same bytes.
  kReplace,
  // Never replace it: renameat2(RENAME_NOREPLACE), or link(2) on a file system without that flag.
  // The existing file stays, and the write reports WriteOutcome::kAlreadyExisted.
  kKeep,
};

enum class WriteOutcome {
  kWritten,         // final_path now holds the new file
  kAlreadyExisted,  // (ExistingFile::kKeep only) final_path was there first and is unchanged
};

struct AtomicWriteOptions {
  // Where the temporary file is made; on the final path's file system. Its name is
  // "<final file name>.<pid>.<n>", so that a cleaner can tell the temporaries of dead writers.
  std::filesystem::path tmp_dir;
  ExistingFile existing = ExistingFile::kReplace;
  // Called with the temporary file open for writing, after all of `data` is written and before
  // it is closed (to set its times, or to start writeback). A non-OK status fails the write and
  // is returned as is. May be empty.
  std::function<Status(int fd)> before_close;
  // Called once the temporary file is complete and closed, just before it is renamed into place
  // (to account for it before it can be seen). Not called when an earlier step failed. May be
  // empty.
  std::function<void()> before_rename;
};

// Writes `data` (all of it, or nothing visible) to `final_path` through a temporary file in
// `options.tmp_dir`, created with mode 0600 (private: stores and caches hold every namespace's
// data). The final path's directory is created (mode 0700) if it is missing; the directory above it must exist. `what` names the object in messages, e.g.
// "chunk b3:3fa9…". The temporary file is removed on every outcome but kWritten; nothing is
// fsynced (callers own durability).
//
// Returns kWritten, or kAlreadyExisted as described for ExistingFile::kKeep. Errors (from
// ErrnoError, so ENOENT → NotFound, EACCES/EPERM/EROFS → PermissionDenied, ENOSPC/EDQUOT →
// FailedPrecondition, others → Internal): "<what>: create <tmp>: <reason>", "<what>: write
// <tmp>: …", "<what>: close: …", "<what>: rename into <final_path>: …"; or before_close's
// status.
//
// Thread-safe; any number of threads and processes may write the same final path at once.
Result<WriteOutcome> WriteFileAtomically(const std::filesystem::path& final_path,
                                         std::span<const uint8_t> data, const std::string& what,
                                         const AtomicWriteOptions& options);

// The same write piece by piece, for data that arrives over time and should not be held whole
// (an upload): Create makes the temporary file, Append adds bytes, Commit does the rest of
// WriteFileAtomically (before_close, close, before_rename, rename). Destroying an uncommitted
// writer removes its temporary file. Errors as WriteFileAtomically. Not thread-safe (one writer,
// one thread at a time); any number of writers may target the same final path.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> Create(std::filesystem::path final_path,
                                                          std::string what,
                                                          AtomicWriteOptions options);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Append(std::span<const uint8_t> data);
  // Once only; afterwards the writer is spent.
  Result<WriteOutcome> Commit();

 private:
  AtomicFileWriter(std::filesystem::path final_path, std::filesystem::path tmp, std::string what,
                   AtomicWriteOptions options, int fd);
  // Closes and removes the temporary file (a failed or abandoned write).
  void Discard();

  std::filesystem::path final_path_;
  std::filesystem::path tmp_;
  std::string what_;
  AtomicWriteOptions options_;
  int fd_ = -1;
};

}  // namespace bdn
