// The temporary-file-and-rename write of every file bdn writes into place.
#include "bdn/store/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <limits>
#include <random>
#include <string_view>
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

// Whether `name` is "<final>.<pid>.<n>.<16 hex digits>", a unique temporary name for `final`;
// its pid in `pid`.
bool IsUniqueTemporaryOf(std::string_view name, std::string_view final, pid_t& pid) {
  if (name.size() <= final.size() + 1 || !name.starts_with(final) || name[final.size()] != '.') {
    return false;
  }
  std::string_view rest = name.substr(final.size() + 1);
  auto digits = [&rest](std::string_view allowed, size_t min, size_t max) -> std::string_view {
    size_t n = 0;
    while (n < rest.size() && allowed.find(rest[n]) != std::string_view::npos) ++n;
    if (n < min || n > max) return {};
    std::string_view taken = rest.substr(0, n);
    rest.remove_prefix(n);
    return taken;
  };
  const std::string_view pid_text = digits("0123456789", 1, 10);
  // As bdn writes a pid: no leading zero.
  if (pid_text.empty() || pid_text.front() == '0' || !rest.starts_with('.')) return false;
  rest.remove_prefix(1);
  if (digits("0123456789", 1, 20).empty() || !rest.starts_with('.')) return false;
  rest.remove_prefix(1);
  if (digits("0123456789abcdef", 16, 16).empty() || !rest.empty()) return false;
  const long long p = std::stoll(std::string(pid_text));
  if (p <= 0 || p > std::numeric_limits<pid_t>::max()) return false;
  pid = static_cast<pid_t>(p);
  return true;
}

}  // namespace

size_t RemoveDeadWritersTemporaries(const fs::path& final_path, const fs::path& tmp_dir) {
  fs::path dir = tmp_dir.empty() ? final_path.parent_path() : tmp_dir;
  if (dir.empty()) dir = ".";
  const std::string final = final_path.filename().string();
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return 0;
  const time_t now = ::time(nullptr);
  size_t removed = 0;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    pid_t pid = 0;
    if (!IsUniqueTemporaryOf(name, final, pid)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
        now - st.st_mtime < kDeadWriterAgeSeconds) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or another user's
    if (::unlink(it->path().c_str()) == 0) ++removed;
  }
  return removed;
}

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
  // From an attacking helper: each `bdn mounts lock` killed mid-write left a temporary beside
  // the user's config, and they piled up.
  if (options_.tmp_name.empty()) RemoveDeadWritersTemporaries(final_path_, options_.tmp_dir);
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
