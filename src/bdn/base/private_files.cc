// Private directories and files (mode 0700/0600) for stores, registries, caches and server data.
#include "bdn/base/private_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/mutex.h"
#include "bdn/base/path_walk.h"

namespace bdn {
namespace fs = std::filesystem;

namespace {

// The descriptors open when this process started, listed during static initialization (before
// main, so before anything of bdn's opens a file): the only ones `--log-file /dev/fd/N` may name.
// A number the caller never opened would by then be one of bdn's own files (the store's
// directory, a database), and the log would be written into it.
std::vector<int> ListOpenDescriptors() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) {  // no /proc: ask each of the first numbers
    for (int fd = 0; fd < 1024; ++fd) {
      if (::fcntl(fd, F_GETFD) != -1) fds.push_back(fd);
    }
    return fds;
  }
  const int own = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    int n = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (ec == std::errc() && end == name.data() + name.size() && n != own) fds.push_back(n);
  }
  ::closedir(d);
  return fds;
}

const std::vector<int> kStartDescriptors = ListOpenDescriptors();

// The descriptors OpenLogFile returned in this process, with their files' device and inode: a
// log set up again (log::Init twice) may name the file an earlier log still has open by one of
// them. (The number and the file both: a number closed since and reused for another file, or a
// log file deleted since whose inode number another file now has, matches neither.)
struct LogFd {
  int fd;
  dev_t dev;
  ino_t ino;
  bool operator==(const LogFd&) const = default;
};
Mutex g_log_fds_mu;
std::vector<LogFd> g_log_fds GUARDED_BY(g_log_fds_mu);

std::string Octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

// Guards the process-wide position of getpwent_r, which GroupIsOnlyUs moves.
Mutex g_passwd_mu;

// Whether a user other than `me` has `gid` as primary group (a member the group's own list does
// not name: group `users` holds every account made with it as their group). True also when the
// user database cannot be read to its end.
bool OtherUserHasPrimaryGroup(gid_t gid, uid_t me) {
  MutexLock lock(g_passwd_mu);
  ::setpwent();
  bool found_other = false;
  std::vector<char> buf(16384);
  struct passwd pw {};
  while (true) {
    struct passwd* entry = nullptr;
    const int rc = ::getpwent_r(&pw, buf.data(), buf.size(), &entry);
    if (rc == ENOENT || (rc == 0 && !entry)) break;
    if (rc != 0 || (entry->pw_gid == gid && entry->pw_uid != me)) {
      found_other = true;
      break;
    }
  }
  ::endpwent();
  return found_other;
}

// Whether the group `gid` is this user's own: the effective group, with no member but this user,
// neither in its member list nor as their primary group (a user private group, where a umask of
// 002 makes every directory group-writable).
bool GroupIsOnlyUs(gid_t gid) {
  if (gid != ::getegid()) return false;
  std::vector<char> buf(65536);
  struct group gr {};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) != 0 || !found) return false;
  std::string me;
  struct passwd pw {};
  struct passwd* pw_found = nullptr;
  std::vector<char> pw_buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, pw_buf.data(), pw_buf.size(), &pw_found) == 0 && pw_found &&
      pw_found->pw_name) {
    me = pw_found->pw_name;
  }
  for (char** m = found->gr_mem; m && *m; ++m) {
    if (me.empty() || me != *m) return false;
  }
  return !OtherUserHasPrimaryGroup(gid, ::geteuid());
}

// fchmod, also for an O_PATH descriptor (through /proc: the inode it holds, never what a path
// names by now). 0 or -1 with errno.
int ChmodFd(int fd, unsigned mode) {
  const int rc = ::fchmod(fd, mode);
  if (rc == 0 || errno != EBADF) return rc;
  return ::chmod(("/proc/self/fd/" + std::to_string(fd)).c_str(), mode);
}

// Removes the group and other bits of the file or directory open as `fd` (its stat `st`), with
// the warning MakePrivate writes, for `display`. `fd` may be an O_PATH descriptor.
void MakePrivateFd(int fd, const struct stat& st, const std::string& display,
                   std::string_view what) {
  unsigned mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return;
  unsigned tight = mode & ~077u;
  std::string line = "warning: " + std::string(what) + " " + display +
                     ": was readable by other users (mode " + Octal(mode) + ")";
  if (ChmodFd(fd, tight) == 0) {
    line += "; changed to " + Octal(tight);
  } else {
    line += "; could not change it: " + std::string(std::strerror(errno));
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// Refuses the first entry below the directory `fd` (shown as `display`), at any depth, that
// another user owns ("<what> <entry>: owned by ..."): run on a directory that other users could
// write to until now, where they may have planted files and symlinks for this user to open.
// Subdirectories with group or other bits are tightened as MakePrivate does. Never follows a
// symlink.
Status CheckEntriesAreOurs(int fd, const fs::path& display, std::string_view what) {
  UniqueFd copy(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!copy) return ErrnoError(std::string(what) + " " + display.string(), errno);
  DIR* d = ::fdopendir(copy.get());
  if (!d) return ErrnoError(std::string(what) + " " + display.string(), errno);
  copy.Release();
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
    errno = 0;
  }
  const int read_error = errno;
  ::closedir(d);
  if (read_error != 0) return ErrnoError(std::string(what) + " " + display.string(), read_error);
  std::sort(names.begin(), names.end());  // the same entry named first on every run
  for (const std::string& name : names) {
    const fs::path path = display / name;
    const std::string shown = std::string(what) + " " + path.string();
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return ErrnoError(shown, errno);
    }
    BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
    // A hard link to one of this user's files elsewhere (made while the directory was open) is
    // owned by this user too, and would be opened and chmodded as if it were the directory's.
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      return PermissionDeniedError(
          shown + ": a file with " + std::to_string(st.st_nlink) +
          " hard links, put there while the directory was open to other users (it may be a link "
          "to a file elsewhere); move it away");
    }
    if (!S_ISDIR(st.st_mode)) continue;
    UniqueFd sub(::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return ErrnoError(shown, errno);
    if (::fstat(sub.get(), &st) != 0) return ErrnoError(shown, errno);
    BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
    MakePrivateFd(sub.get(), st, path.string(), what);
    BDN_RETURN_IF_ERROR(CheckEntriesAreOurs(sub.get(), path, what));
  }
  return Status::Ok();
}

// How the path of a private directory, or of a log file's directory, is walked
// (CreatePrivateDirectory): missing directories made 0700, another user's symlink never followed
// (it would decide where this user's files are created and appended to), and every directory
// looked in judged by CheckAncestor. `shown` starts every message.
PathWalk PrivateWalk(const std::string& shown) {
  PathWalk walk;
  walk.missing = PathWalk::Missing::kCreate;
  walk.new_mode_is = PathWalk::NewMode::kExact;
  walk.new_mode = kPrivateDirMode;
  walk.not_a_directory = StatusCode::kInvalidArgument;
  walk.symlinks = PathWalk::Symlinks::kOwnOrRoot;
  walk.refuse_symlink = [shown](const ForeignSymlink& l) {
    return PermissionDeniedError(shown + ": " + l.link + " is a symlink owned by " +
                                 UidText(l.uid) + ", not by this user (uid " +
                                 std::to_string(::geteuid()) + ") or root; use a path of your own");
  };
  walk.check_directory = [shown](const struct stat& st, const std::string& at) {
    return CheckAncestor(st, at, shown);
  };
  return walk;
}

// The directory `dir`, created as CreatePrivateDirectory says, open (O_DIRECTORY), walked by
// OpenDirectoryPath: every directory it passes through and every symlink it follows is judged on
// a descriptor of its own, so what is checked is what is used.
Result<UniqueFd> OpenOrCreatePrivateDirectory(const fs::path& dir, std::string_view what,
                                              const ExistingCheck& check_existing) {
  const std::string shown = std::string(what) + " " + dir.string();
  BDN_ASSIGN_OR_RETURN(WalkedDirectory walked, OpenDirectoryPath(dir, shown, PrivateWalk(shown)));
  UniqueFd fd = std::move(walked.fd);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(shown, errno));
  BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
  if (!walked.created && check_existing) BDN_RETURN_IF_ERROR(check_existing(fd.get()));
  if (!walked.created && (st.st_mode & 077) != 0) {
    // Tightened first, so that nothing more is planted while what is there is checked.
    MakePrivateFd(fd.get(), st, dir.string(), what);
    BDN_RETURN_IF_ERROR(CheckEntriesAreOurs(fd.get(), dir, what));
  }
  return fd;
}

// FailedPrecondition "<shown>: a FIFO is in the way (...)" for a log file that is neither a
// regular file nor a character device.
Status NotALogFile(const struct stat& st, const std::string& shown) {
  return FailedPreconditionError(shown + ": " + KindOf(st) +
                                 " is in the way (a log file is a regular file, or a character "
                                 "device such as /dev/null)");
}

// As the kernel's own path walk (MAXSYMLINKS).
constexpr int kMaxLogSymlinks = 40;

// OpenLogFile(file), having followed `links` symlinks to get to `file`; `shown` ("log file
// <the path named>") starts every message.
Result<UniqueFd> OpenLogFileFollowing(const fs::path& file, const std::string& shown, int links) {
  const std::string name = file.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return Err(InvalidArgumentError(shown + ": names a directory, not a file"));
  }
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  PathWalk walk = PrivateWalk(shown);
  walk.flags = O_PATH;  // only opened in: it may be one this user may search but not read
  BDN_ASSIGN_OR_RETURN(WalkedDirectory walked, OpenDirectoryPath(dir, shown, walk));
  const int dir_fd = walked.fd.get();
  struct stat st;
  if (::fstat(dir_fd, &st) != 0) return Err(ErrnoError(shown, errno));
  // The file's own directory too: a user who may rename in it could swap the file.
  std::string dir_shown = fs::absolute(dir).lexically_normal().string();
  while (dir_shown.size() > 1 && dir_shown.back() == '/') dir_shown.pop_back();
  BDN_RETURN_IF_ERROR(CheckAncestor(st, dir_shown, shown));
  // Opened once, relative to the directory judged; from here on only the descriptor is used.
  UniqueFd fd(::openat(dir_fd, name.c_str(),
                       O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                       kPrivateFileMode));
  if (!fd) {
    const int open_error = errno;
    // ELOOP: a symlink; ENXIO: a FIFO without a reader, or a socket; EISDIR: a directory;
    // EACCES: another user's file in a sticky directory (fs.protected_regular).
    UniqueFd what(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!what || ::fstat(what.get(), &st) != 0) return Err(ErrnoError(shown, open_error));
    if (!S_ISLNK(st.st_mode)) {
      if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) return Err(NotALogFile(st, shown));
      BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
      return Err(ErrnoError(shown, open_error));
    }
    // Followed only as fs.protected_symlinks would: one of this user's or root's own, judged and
    // read on its own descriptor; its target is then walked and judged like the path named.
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
      return Err(PermissionDeniedError(shown + ": " + file.string() + " is a symlink owned by " +
                                       UidText(st.st_uid) + ", not by this user (uid " +
                                       std::to_string(::geteuid()) +
                                       ") or root; use a path of your own"));
    }
    if (links >= kMaxLogSymlinks) return Err(ErrnoError(shown, ELOOP));
    BDN_ASSIGN_OR_RETURN(std::string target, ReadLinkFd(what.get(), shown));
    if (target.empty()) return Err(ErrnoError(shown, ENOENT));
    return OpenLogFileFollowing(target.front() == '/' ? fs::path(target) : dir / target, shown,
                                links + 1);
  }
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(shown, errno));
  if (S_ISREG(st.st_mode)) {
    BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
    // A hard link to a file of this user's elsewhere (made in a sticky directory such as /tmp,
    // where fs.protected_hardlinks is off) would have the log appended to that file.
    if (st.st_nlink > 1) {
      return Err(PermissionDeniedError(shown + ": a file with " + std::to_string(st.st_nlink) +
                                       " hard links (it may be a link to a file elsewhere); give a "
                                       "file of its own"));
    }
    MakePrivateFd(fd.get(), st, file.string(), "log file");
  } else if (!S_ISCHR(st.st_mode)) {
    return Err(NotALogFile(st, shown));
  }
  // Only the open had to be kept from blocking; writes to a terminal may wait.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

bool WritableByOthers(const struct stat& st) {
  return (st.st_mode & S_IWOTH) != 0 || ((st.st_mode & S_IWGRP) != 0 && !GroupIsOnlyUs(st.st_gid));
}

Status CheckAncestor(const struct stat& st, const std::string& dir, const std::string& shown) {
  const uid_t me = ::geteuid();
  const std::string where = shown + ": " + dir + ", a directory above it, ";
  if (st.st_uid != me && st.st_uid != 0) {
    return PermissionDeniedError(where + "is owned by " + UidText(st.st_uid) +
                                 ", not by this user (uid " + std::to_string(me) +
                                 ") or root, who could replace what is in it; use a directory of "
                                 "your own");
  }
  if (WritableByOthers(st) && (st.st_mode & S_ISVTX) == 0) {
    return PermissionDeniedError(where + "is writable by other users (mode " + Octal(st.st_mode) +
                                 ", no sticky bit), who could replace what is in it; use a "
                                 "directory of your own");
  }
  return Status::Ok();
}

Status CheckOwner(const struct stat& st, const std::string& what) {
  const uid_t me = ::geteuid();
  if (st.st_uid == me) return Status::Ok();
  return PermissionDeniedError(
      what + (S_ISLNK(st.st_mode) ? ": a symlink owned by " : ": owned by ") + UidText(st.st_uid) +
      ", not by this user (uid " + std::to_string(me) + "); use a directory of your own");
}

Result<UniqueFd> OpenPrivateDirectory(const fs::path& dir, std::string_view what,
                                      const ExistingCheck& check_existing) {
  return OpenOrCreatePrivateDirectory(dir, what, check_existing);
}

Status CreatePrivateDirectory(const fs::path& dir, std::string_view what) {
  auto fd = OpenOrCreatePrivateDirectory(dir, what, {});
  return fd ? Status::Ok() : fd.error();
}

Result<UniqueFd> OpenLogFile(const fs::path& file) {
  // A descriptor this process was given (`--log-file /dev/stderr` under a pipe to tee, a
  // container's log capture): a copy of it, as the shell's own redirection would use it. /proc's
  // links of this process are its own, so no other user has a say in them; following one as a
  // path would read "pipe:[N]" as a file name.
  const std::string text = file.lexically_normal().string();
  std::optional<int> given;
  if (text == "/dev/stdout") given = STDOUT_FILENO;
  if (text == "/dev/stderr") given = STDERR_FILENO;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!text.starts_with(prefix)) continue;
    const std::string_view digits = std::string_view(text).substr(prefix.size());
    int n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) given = n;
  }
  if (given) {
    if (std::ranges::find(kStartDescriptors, *given) == kStartDescriptors.end()) {
      return Err(FailedPreconditionError("log file " + file.string() + ": descriptor " +
                                         std::to_string(*given) +
                                         " was not open when bdn started (open it in the shell, "
                                         "e.g. 9>>bdn.log, or give a file)"));
    }
    UniqueFd fd(::fcntl(*given, F_DUPFD_CLOEXEC, 3));
    if (!fd) return Err(ErrnoError("log file " + file.string(), errno));
    return fd;
  }
  BDN_ASSIGN_OR_RETURN(UniqueFd fd, OpenLogFileFollowing(file, "log file " + file.string(), 0));
  // From an attacking helper: another name of one of this process's links (/proc/thread-self/fd/6,
  // /proc/<pid>/fd/6, a symlink to /dev/fd/6) reaches bdn's own file just the same (the mount
  // daemon's log went into a sealed pack of the store). Whatever the path, the file opened must
  // not be one this process opened since it started.
  struct stat opened;
  if (::fstat(fd.get(), &opened) != 0) return Err(ErrnoError("log file " + file.string(), errno));
  MutexLock lock(g_log_fds_mu);
  if (!S_ISCHR(opened.st_mode)) {
    for (int own : ListOpenDescriptors()) {
      struct stat st;
      if (own == fd.get() || std::ranges::find(kStartDescriptors, own) != kStartDescriptors.end() ||
          ::fstat(own, &st) != 0 || st.st_dev != opened.st_dev || st.st_ino != opened.st_ino ||
          std::ranges::find(g_log_fds, LogFd{own, st.st_dev, st.st_ino}) != g_log_fds.end()) {
        continue;
      }
      return Err(FailedPreconditionError(
          "log file " + file.string() + ": it is a file bdn itself has open (descriptor " +
          std::to_string(own) + "), not a log file; give a file of its own"));
    }
  }
  g_log_fds.push_back({fd.get(), opened.st_dev, opened.st_ino});
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
  // O_PATH | O_NOFOLLOW: the object itself, never a symlink's target (with "dir/", the trailing
  // slash would follow one), and nothing opened for real (a device, a FIFO).
  fs::path p = path;
  while (p.has_parent_path() && !p.has_filename() && p != p.root_path()) p = p.parent_path();
  UniqueFd fd(::open(p.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0) return;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return;  // /dev/null stays 0666
  MakePrivateFd(fd.get(), st, path.string(), what);
}

Status CheckPrivateFile(const fs::path& file, std::string_view what) {
  const std::string shown = std::string(what) + " " + file.string();
  struct stat st;
  if (::lstat(file.c_str(), &st) != 0) return Status::Ok();  // missing: the caller creates it
  if (S_ISLNK(st.st_mode)) {
    // Followed only as fs.protected_symlinks would: one of this user's or root's own.
    if (st.st_uid != 0) BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
    if (::stat(file.c_str(), &st) != 0) return Status::Ok();  // dangling: the caller's open says
  }
  if (!S_ISREG(st.st_mode)) return Status::Ok();  // /dev/null, a FIFO: the caller decides
  BDN_RETURN_IF_ERROR(CheckOwner(st, shown));
  MakePrivate(file, what);
  return Status::Ok();
}

Status CreatePrivateFile(const fs::path& file, std::string_view what) {
  UniqueFd fd(
      ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode));
  if (fd) {
    ::fchmod(fd.get(), kPrivateFileMode);
    return Status::Ok();
  }
  if (errno != EEXIST) return Status::Ok();  // the caller's own open reports it
  return CheckPrivateFile(file, what);
}

Status MakeDatabasePrivate(const fs::path& db, std::string_view what) {
  BDN_RETURN_IF_ERROR(CreatePrivateFile(db, what));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    BDN_RETURN_IF_ERROR(CheckPrivateFile(db.string() + suffix, what));
  }
  return Status::Ok();
}

std::string KindOf(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISLNK(st.st_mode)) return "a symlink";
  return "a file of unknown type";
}

}  // namespace bdn
