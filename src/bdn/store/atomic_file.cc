// The temporary-file-and-rename write of every file bdn writes into place.
#include "bdn/store/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>
#include <utility>

#include "bdn/base/hex.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

// 16 hex digits from the kernel's random source.
std::string RandomHex() {
  std::random_device random;  // getrandom(2) on Linux
  return Hex16((uint64_t{random()} << 32) | random());
}

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::Create(fs::path final_path, std::string what,
                                                  AtomicWriteOptions options) {
  static std::atomic<uint64_t> counter{0};
  const fs::path dir = options.tmp_dir.empty() ? final_path.parent_path() : options.tmp_dir;
  const bool unique = options.tmp_name.empty();
  // A unique name ends in random bits as well, so nobody can create it first (a file or symlink
  // planted there makes the O_EXCL create fail, never write elsewhere).
  fs::path tmp = dir / (unique ? final_path.filename().string() + "." + std::to_string(::getpid()) +
                                     "." + std::to_string(counter++) + "." + RandomHex()
                               : options.tmp_name);
  // O_NOFOLLOW: a symlink at a fixed temporary name is refused (ELOOP), never written through.
  UniqueFd fd(::open(tmp.c_str(),
                     O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (unique ? O_EXCL : O_TRUNC),
                     options.mode));
  if (!fd) return Err(ErrnoError(what + ": create " + tmp.string(), errno));
  if (::fchmod(fd.get(), options.mode) != 0) {
    Status s = ErrnoError(what + ": create " + tmp.string(), errno);
    ::unlink(tmp.c_str());
    return Err(std::move(s));
  }
  return AtomicFileWriter(std::move(final_path), std::move(tmp), std::move(what),
                          std::move(options), std::move(fd));
}

AtomicFileWriter::AtomicFileWriter(fs::path final_path, fs::path tmp, std::string what,
                                   AtomicWriteOptions options, UniqueFd fd)
    : final_path_(std::move(final_path)),
      tmp_(std::move(tmp)),
      what_(std::move(what)),
      options_(std::move(options)),
      fd_(std::move(fd)) {}

AtomicFileWriter::~AtomicFileWriter() { Discard(); }

void AtomicFileWriter::Discard() {
  if (!fd_) return;
  fd_.Reset();
  ::unlink(tmp_.c_str());
}

Status AtomicFileWriter::Append(std::span<const uint8_t> data) {
  if (!fd_) return InternalError(what_ + ": write after commit");
  Status s = WriteAll(fd_.get(), data, what_ + ": write " + tmp_.string());
  if (!s.ok()) Discard();
  return s;
}

Status AtomicFileWriter::Sync() {
  if (options_.sync == FileSync::kData && ::fdatasync(fd_.get()) != 0) {
    return ErrnoError(what_ + ": fdatasync", errno);
  }
  if (options_.sync == FileSync::kAll && ::fsync(fd_.get()) != 0) {
    return ErrnoError(what_ + ": fsync", errno);
  }
  return Status::Ok();
}

int AtomicFileWriter::MoveIntoPlace() {
  if (options_.existing == ExistingFile::kReplace) {
    return ::rename(tmp_.c_str(), final_path_.c_str());
  }
  int rc = ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_path_.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
    // A file system without RENAME_NOREPLACE: link() never replaces either.
    rc = ::link(tmp_.c_str(), final_path_.c_str());
    int err = errno;
    ::unlink(tmp_.c_str());
    errno = err;
  }
  return rc;
}

Result<WriteOutcome> AtomicFileWriter::Commit() {
  if (!fd_) return Err(InternalError(what_ + ": commit after a failed write or commit"));
  Status s = Sync();
  if (s.ok()) s = fd_.Close(what_ + ": close");
  if (!s.ok()) {
    fd_.Reset();
    ::unlink(tmp_.c_str());
    return Err(std::move(s));
  }
  if (MoveIntoPlace() != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    if (err == EEXIST && options_.existing == ExistingFile::kKeep) {
      return WriteOutcome::kAlreadyExisted;
    }
    return Err(ErrnoError(what_ + ": rename into " + final_path_.string(), err));
  }
  return WriteOutcome::kWritten;
}

Result<UniqueFd> AtomicFileWriter::CommitKeepingOpen() {
  if (!fd_) return Err(InternalError(what_ + ": commit after a failed write or commit"));
  if (options_.existing != ExistingFile::kReplace) {
    return Err(InternalError(what_ + ": a file kept open must replace what is there"));
  }
  Status s = Sync();
  if (s.ok() && MoveIntoPlace() != 0) {
    s = ErrnoError(what_ + ": rename into " + final_path_.string(), errno);
  }
  if (!s.ok()) {
    Discard();
    return Err(std::move(s));
  }
  return std::move(fd_);
}

Result<WriteOutcome> WriteFileAtomically(const fs::path& final_path, std::span<const uint8_t> data,
                                         const std::string& what,
                                         const AtomicWriteOptions& options) {
  BDN_ASSIGN_OR_RETURN(AtomicFileWriter writer,
                       AtomicFileWriter::Create(final_path, what, options));
  BDN_RETURN_IF_ERROR(writer.Append(data));
  return writer.Commit();
}

}  // namespace bdn
