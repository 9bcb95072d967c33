// Directory handles: every file-system step of push and pull is taken relative to an open
// directory (openat, fstatat, mkdirat, renameat, ...), one path component at a time, so that
// paths of any length work (beyond PATH_MAX) and walking a tree costs time linear in its size
// (the kernel never resolves a long path from the root again and again).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn {

// An open directory descriptor (O_DIRECTORY, O_CLOEXEC), closed on destruction. Move-only;
// thread-compatible (the descriptor itself may be used by several threads at once).
class DirFd {
 public:
  DirFd() = default;
  explicit DirFd(int fd) : fd_(fd) {}

  int get() const { return fd_.get(); }

  // Opens the directory at `path`, a path a user named, walked by OpenDirectoryPath
  // (base/path_walk.h): symlinks on it are followed only when this user's or root's, so another
  // user's (in a shared directory, say) never decides which directory this is.
  // Errors: those of OpenDirectoryPath with `shown` "directory \"path\"": FailedPrecondition
  // "directory \"path\": /tmp/shared/d is a symlink owned by uid 1001 (mallory), not by this user
  // or root; give the directory it names (\"/root/x\") if that is the one you mean" ("…: a
  // symlink owned by …" when it is `path` itself), "…: exists and is not a directory", "…: a
  // symlink to \"t\", which does not exist"; ErrnoError (NotFound, PermissionDenied, Internal).
  static Result<DirFd> Open(const std::filesystem::path& path);

  // Opens the directory `name` (one path component) inside `parent`, never through a symlink.
  // `display` names it in messages. Errors: FailedPrecondition "path \"display\": not a
  // directory (a symlink or file is in the way)"; ErrnoError "directory \"display\"" otherwise.
  static Result<DirFd> OpenAt(int parent, const std::string& name, const std::string& display);

 private:
  UniqueFd fd_;
};

// The names in directory `dir` except "." and "..", sorted bytewise.
// Errors: ErrnoError "directory \"display\"".
Result<std::vector<std::string>> ListNames(int dir, const std::string& display);

// A position in the directory tree below a root that holds one descriptor whatever the depth.
// Down opens a child of the current directory (never through a symlink); Up goes back through
// ".." and checks that it reached the directory Down came from (same device and inode), so a
// directory moved meanwhile is an error rather than a silent jump elsewhere. Each step is one
// lookup, so visiting the directories of a tree in path order (where every subtree is one
// contiguous run) costs two steps per directory. Not thread-safe: other threads get descriptors
// of their own from Share.
class DirCursor {
 public:
  // Starts at the directory `root` (opened with DirFd::Open). Errors: those of DirFd::Open.
  static Result<DirCursor> Open(const std::filesystem::path& root);
  // Starts at the open directory `root` (e.g. from OpenDirectoryPath), which `display` names in
  // messages. Errors: ErrnoError "directory \"display\"" when it cannot be looked at.
  static Result<DirCursor> Open(DirFd root, std::filesystem::path display);

  // Another cursor at this one's root directory: the same directory (a descriptor of its own of
  // it), never the path looked up again. Errors: ErrnoError "directory \"root\"".
  Result<DirCursor> OpenAnother() const;

  // The current directory's descriptor; valid until the next Down, Up or MoveTo.
  int fd() const { return fd_.get(); }
  // The current directory relative to the root: "" at the root, else "a/b".
  const std::string& rel() const { return rel_; }
  // `name` inside the current directory as messages show it: root/rel/name ("" = the directory).
  std::string Display(std::string_view name = {}) const;

  // Enters the child directory `name`. Errors: those of DirFd::OpenAt.
  Status Down(const std::string& name);
  // Returns to the parent. Errors: FailedPrecondition "directory \"…\": moved during the
  // operation" when ".." is not the directory Down came from; errno errors; Internal at the root.
  Status Up();
  // Moves to directory `rel` ("" = the root; '/'-separated, no "." or ".." segments) by going
  // up to the deepest common ancestor and down from there. Errors: those of Down and Up.
  Status MoveTo(std::string_view rel);
  // MoveTo(rel), then a descriptor of that directory of its own, for tasks on other threads
  // (the cursor's own one changes with every move). Calls in a row for the same `rel` share one
  // descriptor. Errors: those of MoveTo and DirFd::OpenAt.
  Result<std::shared_ptr<const DirFd>> Share(std::string_view rel);

 private:
  DirCursor() = default;
  std::filesystem::path root_;
  std::shared_ptr<const DirFd> root_fd_;  // for OpenAnother
  DirFd fd_;
  std::string rel_;
  dev_t dev_ = 0;  // the current directory's identity
  ino_t ino_ = 0;
  struct Level {
    dev_t dev;  // the parent's identity, checked by Up
    ino_t ino;
    size_t rel_size;  // rel_.size() in the parent
  };
  std::vector<Level> levels_;
  std::shared_ptr<const DirFd> shared_;  // of the current directory, once Share made it
};

// Removes `name` inside the cursor's current directory: a file or symlink is unlinked, a
// directory is removed with everything below it (walked with the cursor, so depth costs no
// descriptors). The cursor is back in its directory afterwards, also on error. A missing `name`
// is not an error. Errors: ErrnoError naming the path that could not be removed.
Status RemoveTree(DirCursor& cursor, const std::string& name);

}  // namespace bdn
