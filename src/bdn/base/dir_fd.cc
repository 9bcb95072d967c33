#include "bdn/base/dir_fd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bdn/base/path_walk.h"

namespace bdn {
namespace fs = std::filesystem;

Result<DirFd> DirFd::Open(const fs::path& path) {
  BDN_ASSIGN_OR_RETURN(WalkedDirectory d,
                       OpenDirectoryPath(path, "directory \"" + path.string() + "\""));
  return DirFd(d.fd.Release());
}

Result<DirFd> DirFd::OpenAt(int parent, const std::string& name, const std::string& display) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return DirFd(fd);
  if (errno == ENOTDIR || errno == ELOOP) {
    return Err(FailedPreconditionError("path \"" + display +
                                       "\": not a directory (a symlink or file is in the way)"));
  }
  return Err(ErrnoError("directory \"" + display + "\"", errno));
}

Result<std::vector<std::string>> ListNames(int dir, const std::string& display) {
  UniqueFd fd(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Err(ErrnoError("directory \"" + display + "\"", errno));
  DIR* d = ::fdopendir(fd.get());
  if (!d) return Err(ErrnoError("directory \"" + display + "\"", errno));
  fd.Release();  // the DIR owns it now
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    dirent* de = ::readdir(d);
    if (!de) break;
    if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
    names.emplace_back(de->d_name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return Err(ErrnoError("directory \"" + display + "\"", err));
  std::sort(names.begin(), names.end());
  return names;
}

Result<DirCursor> DirCursor::Open(const fs::path& root) {
  BDN_ASSIGN_OR_RETURN(DirFd fd, DirFd::Open(root));
  return Open(std::move(fd), root);
}

Result<DirCursor> DirCursor::Open(DirFd root, fs::path display) {
  DirCursor c;
  c.root_ = std::move(display);
  const std::string shown = "directory \"" + c.root_.string() + "\"";
  UniqueFd own(::openat(root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!own) return Err(ErrnoError(shown, errno));
  c.fd_ = DirFd(own.Release());
  c.root_fd_ = std::make_shared<const DirFd>(std::move(root));
  struct stat st;
  if (::fstat(c.fd_.get(), &st) != 0) return Err(ErrnoError(shown, errno));
  c.dev_ = st.st_dev;
  c.ino_ = st.st_ino;
  return c;
}

Result<DirCursor> DirCursor::OpenAnother() const {
  UniqueFd fd(::openat(root_fd_->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Err(ErrnoError("directory \"" + root_.string() + "\"", errno));
  return Open(DirFd(fd.Release()), root_);
}

std::string DirCursor::Display(std::string_view name) const {
  // Plain concatenation (as fs::path's operator/ joins relative parts): fs::path would split
  // the whole path into components on every call, which costs time in the depth.
  std::string out = root_.string();
  for (std::string_view part : {std::string_view(rel_), name}) {
    if (part.empty()) continue;
    if (!out.empty() && out.back() != '/') out += '/';
    out += part;
  }
  return out;
}

Status DirCursor::Down(const std::string& name) {
  BDN_ASSIGN_OR_RETURN(DirFd child, DirFd::OpenAt(fd_.get(), name, Display(name)));
  struct stat st;
  if (::fstat(child.get(), &st) != 0)
    return ErrnoError("directory \"" + Display(name) + "\"", errno);
  levels_.push_back({dev_, ino_, rel_.size()});
  shared_.reset();
  if (!rel_.empty()) rel_ += '/';
  rel_ += name;
  fd_ = std::move(child);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return Status::Ok();
}

Status DirCursor::Up() {
  if (levels_.empty()) return InternalError("directory \"" + Display() + "\": already at the top");
  const Level& parent = levels_.back();
  int fd = ::openat(fd_.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("directory \"" + Display() + "/..\"", errno);
  DirFd up(fd);
  struct stat st;
  if (::fstat(up.get(), &st) != 0) return ErrnoError("directory \"" + Display() + "/..\"", errno);
  if (st.st_dev != parent.dev || st.st_ino != parent.ino) {
    return FailedPreconditionError("directory \"" + Display() + "\": moved during the operation");
  }
  fd_ = std::move(up);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  rel_.resize(parent.rel_size);
  levels_.pop_back();
  shared_.reset();
  return Status::Ok();
}

Status DirCursor::MoveTo(std::string_view rel) {
  if (rel == rel_) return Status::Ok();
  // Bytes of rel_ that are whole components shared with `rel`.
  size_t common = 0;
  for (size_t i = 0; i < rel_.size() && i < rel.size();) {
    size_t a = std::min(rel_.find('/', i), rel_.size());
    size_t b = std::min(rel.find('/', i), rel.size());
    if (a != b || rel_.compare(i, a - i, rel.substr(i, b - i)) != 0) break;
    common = a;
    i = a + 1;
  }
  while (rel_.size() > common) BDN_RETURN_IF_ERROR(Up());
  for (size_t i = common == 0 ? 0 : common + 1; i < rel.size();) {
    size_t end = std::min(rel.find('/', i), rel.size());
    BDN_RETURN_IF_ERROR(Down(std::string(rel.substr(i, end - i))));
    i = end + 1;
  }
  return Status::Ok();
}

Result<std::shared_ptr<const DirFd>> DirCursor::Share(std::string_view rel) {
  if (shared_ && rel == rel_) return shared_;
  BDN_RETURN_IF_ERROR(MoveTo(rel));
  BDN_ASSIGN_OR_RETURN(DirFd fd, DirFd::OpenAt(fd_.get(), ".", Display()));
  shared_ = std::make_shared<const DirFd>(std::move(fd));
  return shared_;
}

Status RemoveTree(DirCursor& cursor, const std::string& name) {
  struct stat st;
  if (::fstatat(cursor.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok()
                           : ErrnoError("path \"" + cursor.Display(name) + "\"", errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(cursor.fd(), name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError("path \"" + cursor.Display(name) + "\"", errno);
    }
    return Status::Ok();
  }
  const std::string start = cursor.rel();
  // Enters `dir`, unlinks what is not a directory and returns the subdirectories left to remove.
  auto enter = [&](const std::string& dir) -> Result<std::vector<std::string>> {
    BDN_RETURN_IF_ERROR(cursor.Down(dir));
    BDN_ASSIGN_OR_RETURN(auto names, ListNames(cursor.fd(), cursor.Display()));
    std::vector<std::string> subdirs;
    for (auto& n : names) {
      struct stat s;
      if (::fstatat(cursor.fd(), n.c_str(), &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s.st_mode)) {
        subdirs.push_back(std::move(n));
      } else if (::unlinkat(cursor.fd(), n.c_str(), 0) != 0 && errno != ENOENT) {
        return Err(ErrnoError("path \"" + cursor.Display(n) + "\"", errno));
      }
    }
    return subdirs;
  };
  auto remove = [&]() -> Status {
    std::vector<std::vector<std::string>> pending;  // per level: subdirectories still to remove
    BDN_ASSIGN_OR_RETURN(auto first, enter(name));
    pending.push_back(std::move(first));
    while (!pending.empty()) {
      if (!pending.back().empty()) {
        std::string sub = std::move(pending.back().back());
        pending.back().pop_back();
        BDN_ASSIGN_OR_RETURN(auto next, enter(sub));
        pending.push_back(std::move(next));
        continue;
      }
      pending.pop_back();
      const std::string& rel = cursor.rel();
      std::string self = rel.substr(rel.rfind('/') + 1);  // npos + 1 == 0
      BDN_RETURN_IF_ERROR(cursor.Up());
      if (::unlinkat(cursor.fd(), self.c_str(), AT_REMOVEDIR) != 0) {
        return ErrnoError("directory \"" + cursor.Display(self) + "\"", errno);
      }
    }
    return Status::Ok();
  };
  Status s = remove();
  // Best effort on an error path: the first error is what counts.
  if (!s.ok()) cursor.MoveTo(start).IgnoreError();
  return s;
}

}  // namespace bdn
