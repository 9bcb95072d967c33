// Private directories and files (mode 0700/0600) for stores, registries, caches and server data.
#include "bdn/base/private_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bdn/base/fd.h"

namespace bdn {
namespace fs = std::filesystem;

namespace {

std::string Octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

// "uid 1001 (mallory)", or "uid 1001" for a uid without a name.
std::string UidName(uid_t uid) {
  std::string out = "uid " + std::to_string(uid);
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_name) {
    out += " (" + std::string(found->pw_name) + ")";
  }
  return out;
}

// MakePrivate on an open descriptor: the same warning, for `display`.
void MakePrivateFd(int fd, const struct stat& st, const std::string& display,
                   std::string_view what) {
  unsigned mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return;
  unsigned tight = mode & ~077u;
  std::string line = "warning: " + std::string(what) + " " + display +
                     ": was readable by other users (mode " + Octal(mode) + ")";
  if (::fchmod(fd, tight) == 0) {
    line += "; changed to " + Octal(tight);
  } else {
    line += "; could not change it: " + std::string(std::strerror(errno));
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

Status CheckOwner(const struct stat& st, const std::string& what) {
  const uid_t me = ::geteuid();
  if (st.st_uid == me) return Status::Ok();
  return PermissionDeniedError(what + ": owned by " + UidName(st.st_uid) +
                               ", not by this user (uid " + std::to_string(me) +
                               "); use a directory of your own");
}

Result<UniqueFd> OpenPrivateDirectory(const fs::path& dir, std::string_view what) {
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(dir, what));
  const std::string shown = std::string(what) + " " + dir.string();
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Err(ErrnoError(shown, errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(shown, errno));
  BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
  return fd;
}

Result<UniqueFd> OpenPrivateSubdirectory(int parent, const std::string& name,
                                         const fs::path& display, std::string_view what) {
  const std::string shown = std::string(what) + " " + display.string();
  bool created = false;
  if (::mkdirat(parent, name.c_str(), kPrivateDirMode) == 0) {
    created = true;
  } else if (errno != EEXIST) {
    return Err(ErrnoError(shown, errno));
  }
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return Err(FailedPreconditionError(
          shown + ": not a directory (a symlink or file is in the way); move it away"));
    }
    return Err(ErrnoError(shown, errno));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(shown, errno));
  BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
  if (created) {
    if (::fchmod(fd.get(), kPrivateDirMode) != 0) return Err(ErrnoError(shown, errno));
  } else {
    MakePrivateFd(fd.get(), st, display.string(), what);
  }
  return fd;
}

Result<UniqueFd> OpenRegularFileAt(int dir, const std::string& name, int flags,
                                   const std::string& display) {
  UniqueFd fd(
      ::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, kPrivateFileMode));
  struct stat st;
  if (!fd) {
    // ELOOP: a symlink; ENXIO: a FIFO without a reader opened for writing; EISDIR: a directory.
    if (errno != ELOOP && errno != ENXIO && errno != EISDIR) return Err(ErrnoError(display, errno));
  } else if (::fstat(fd.get(), &st) != 0) {
    return Err(ErrnoError(display, errno));
  } else if (S_ISREG(st.st_mode)) {
    // Regular files never block; the flag goes so that nothing downstream sees EAGAIN.
    if ((flags & O_NONBLOCK) == 0)
      ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    return fd;
  }
  return Err(FailedPreconditionError(
      display + ": not a regular file (a symlink, FIFO, directory or device is in the way)"));
}

void MakePrivate(const fs::path& path, std::string_view what) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return;
  unsigned mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return;
  unsigned tight = mode & ~077u;
  std::string line = "warning: " + std::string(what) + " " + path.string() +
                     ": was readable by other users (mode " + Octal(mode) + ")";
  if (::chmod(path.c_str(), tight) == 0) {
    line += "; changed to " + Octal(tight);
  } else {
    line += "; could not change it: " + std::string(std::strerror(errno));
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void CreatePrivateFile(const fs::path& file, std::string_view what) {
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode));
  if (fd) {
    ::fchmod(fd.get(), kPrivateFileMode);
    return;
  }
  if (errno == EEXIST) MakePrivate(file, what);
}

void MakeDatabasePrivate(const fs::path& db, std::string_view what) {
  CreatePrivateFile(db, what);
  MakePrivate(db.string() + "-wal", what);
  MakePrivate(db.string() + "-shm", what);
}

Status CreatePrivateDirectory(const fs::path& dir, std::string_view what, DirOwner owner) {
  auto fail = [&](int err) { return ErrnoError(std::string(what) + " " + dir.string(), err); };
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return InvalidArgumentError(std::string(what) + " " + dir.string() + ": not a directory");
    }
    if (owner == DirOwner::kThisUser) {
      BDN_RETURN_IF_ERROR(CheckOwner(st, std::string(what) + " " + dir.string()));
    }
    MakePrivate(dir, what);
    return Status::Ok();
  }
  if (errno != ENOENT) return fail(errno);
  // The missing directories, deepest first; then created from the top down.
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty();) {
    if (::stat(p.c_str(), &st) == 0) break;
    if (errno != ENOENT) return fail(errno);
    missing.push_back(p);
    fs::path parent = p.parent_path();
    if (parent == p) break;
    p = parent;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), kPrivateDirMode) != 0) {
      if (errno == EEXIST && ::stat(it->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      return fail(errno);
    }
    if (::chmod(it->c_str(), kPrivateDirMode) != 0) return fail(errno);
  }
  return Status::Ok();
}

}  // namespace bdn
