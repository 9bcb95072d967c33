// The temporary-file-and-rename write of the node cache (one file per chunk).
#include "bdn/store/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "bdn/base/private_files.h"
#include <cerrno>
#include <utility>

namespace bdn {
namespace fs = std::filesystem;

namespace {

Status WriteAll(int fd, std::span<const uint8_t> data, const std::string& what) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Moves `tmp` to `final_path` as `existing` says; 0 or -1 with errno set, as rename(2).
int MoveIntoPlace(const fs::path& tmp, const fs::path& final_path, ExistingFile existing) {
  auto move = [&] {
    if (existing == ExistingFile::kReplace) return ::rename(tmp.c_str(), final_path.c_str());
    return ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE);
  };
  int rc = move();
  if (rc != 0 && errno == ENOENT) {
    // The final directory (a fan-out directory, say) is created on first use.
    ::mkdir(final_path.parent_path().c_str(), kPrivateDirMode);
    rc = move();
  }
  if (rc != 0 && existing == ExistingFile::kKeep && (errno == EINVAL || errno == ENOSYS)) {
    // A file system without RENAME_NOREPLACE: link() never replaces either.
    rc = ::link(tmp.c_str(), final_path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
  }
  return rc;
}

}  // namespace

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(fs::path final_path,
                                                                   std::string what,
                                                                   AtomicWriteOptions options) {
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = options.tmp_dir / (final_path.filename().string() + "." +
                                    std::to_string(::getpid()) + "." + std::to_string(counter++));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Err(ErrnoError(what + ": create " + tmp.string(), errno));
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(
      std::move(final_path), std::move(tmp), std::move(what), std::move(options), fd));
}

AtomicFileWriter::AtomicFileWriter(fs::path final_path, fs::path tmp, std::string what,
                                   AtomicWriteOptions options, int fd)
    : final_path_(std::move(final_path)),
      tmp_(std::move(tmp)),
      what_(std::move(what)),
      options_(std::move(options)),
      fd_(fd) {}

AtomicFileWriter::~AtomicFileWriter() { Discard(); }

void AtomicFileWriter::Discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

Status AtomicFileWriter::Append(std::span<const uint8_t> data) {
  if (fd_ < 0) return InternalError(what_ + ": write after commit");
  Status s = WriteAll(fd_, data, what_ + ": write " + tmp_.string());
  if (!s.ok()) Discard();
  return s;
}

Result<WriteOutcome> AtomicFileWriter::Commit() {
  if (fd_ < 0) return Err(InternalError(what_ + ": commit after a failed write or commit"));
  Status s = Status::Ok();
  if (options_.before_close) s = options_.before_close(fd_);
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError(what_ + ": close", errno);
  if (!s.ok()) {
    ::unlink(tmp_.c_str());
    return Err(std::move(s));
  }
  if (options_.before_rename) options_.before_rename();
  if (MoveIntoPlace(tmp_, final_path_, options_.existing) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    if (err == EEXIST && options_.existing == ExistingFile::kKeep) {
      return WriteOutcome::kAlreadyExisted;
    }
    return Err(ErrnoError(what_ + ": rename into " + final_path_.string(), err));
  }
  return WriteOutcome::kWritten;
}

Result<WriteOutcome> WriteFileAtomically(const fs::path& final_path, std::span<const uint8_t> data,
                                         const std::string& what,
                                         const AtomicWriteOptions& options) {
  BDN_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::Create(final_path, what, options));
  BDN_RETURN_IF_ERROR(writer->Append(data));
  return writer->Commit();
}

}  // namespace bdn
