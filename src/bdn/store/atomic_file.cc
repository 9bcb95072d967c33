// The temporary-file-and-rename write shared by LocalChunkStore and the node cache.
#include "bdn/store/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "bdn/base/private_files.h"
#include <cerrno>

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

Result<WriteOutcome> WriteFileAtomically(const fs::path& final_path, std::span<const uint8_t> data,
                                         const std::string& what,
                                         const AtomicWriteOptions& options) {
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = options.tmp_dir / (final_path.filename().string() + "." +
                                    std::to_string(::getpid()) + "." + std::to_string(counter++));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Err(ErrnoError(what + ": create " + tmp.string(), errno));
  Status s = WriteAll(fd, data, what + ": write " + tmp.string());
  if (s.ok() && options.before_close) s = options.before_close(fd);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError(what + ": close", errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return Err(std::move(s));
  }
  if (options.before_rename) options.before_rename();
  if (MoveIntoPlace(tmp, final_path, options.existing) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    if (err == EEXIST && options.existing == ExistingFile::kKeep) {
      return WriteOutcome::kAlreadyExisted;
    }
    return Err(ErrnoError(what + ": rename into " + final_path.string(), err));
  }
  return WriteOutcome::kWritten;
}

}  // namespace bdn
