// Private directories and files (mode 0700/0600) for stores, registries, caches and server data.
#include "bdn/base/private_files.h"

#include <fcntl.h>
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

}  // namespace

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

Status CreatePrivateDirectory(const fs::path& dir, std::string_view what) {
  auto fail = [&](int err) { return ErrnoError(std::string(what) + " " + dir.string(), err); };
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return InvalidArgumentError(std::string(what) + " " + dir.string() + ": not a directory");
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
