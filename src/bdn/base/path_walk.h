// Opening a directory path a user named without letting another user decide where it leads: the
// path is walked one component at a time from "/", each looked up relative to the directory
// before it without following a symlink, so that a symlink is seen, judged and read through one
// descriptor of the link itself (it cannot be swapped between the check and the use). The
// directory returned is the one every later step works relative to.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn {

// "uid 1001 (mallory)", or "uid 1001" for a uid without a name.
std::string UidText(uid_t uid);

// The target of the symlink open as `fd` (O_PATH | O_NOFOLLOW), read from the link itself
// (readlinkat(fd, "")), so that the link judged is the link read. Errors: ErrnoError "<shown>".
Result<std::string> ReadLinkFd(int fd, const std::string& shown);

// A symlink on a walked path that is owned by a user other than this one and root.
struct ForeignSymlink {
  // The link's path, as the walk reached it (its directories resolved): "/tmp/shared/models".
  std::string link;
  // Whether `link` is the walked path itself (no trailing slash, reached without a symlink):
  // messages then say "a symlink ..." rather than repeating the path.
  bool is_the_path = false;
  uid_t uid = 0;
  // What it names: its target, made absolute from the link's directory if relative.
  std::string target;
};

// "<link> is a symlink owned by uid 1001 (mallory), not by this user or root" ("a symlink owned
// by ..." when it is the walked path itself).
std::string DescribeForeignSymlink(const ForeignSymlink& l);

// How OpenDirectoryPath walks.
struct PathWalk {
  enum class Missing {
    kRefuse,  // a missing component is NotFound
    kCreate,  // a missing component named in the path (not in a symlink's target) is created
  };
  Missing missing = Missing::kRefuse;
  enum class NewMode {
    kUmask,  // created with `new_mode` less the umask (as mkdir -p)
    kExact,  // created, then set to `new_mode` on its descriptor whatever the umask
  };
  NewMode new_mode_is = NewMode::kUmask;
  mode_t new_mode = 0777;
  enum class Symlinks {
    kOwnOrRoot,  // followed only when this user's or root's (as fs.protected_symlinks would)
    kAny,        // followed as the kernel does
  };
  Symlinks symlinks = Symlinks::kOwnOrRoot;
  // The error for a refused symlink. Empty: FailedPrecondition "<shown>: <DescribeForeignSymlink>;
  // give the directory it names (\"<target>\") if that is the one you mean".
  std::function<Status(const ForeignSymlink&)> refuse_symlink;
  // Called for each directory the walk looks a name up in (its stat and resolved path), before
  // the lookup; an error ends the walk with it. Empty: none.
  std::function<Status(const struct stat& st, const std::string& dir)> check_directory;
  // The code of the errors for a component that is not a directory.
  StatusCode not_a_directory = StatusCode::kFailedPrecondition;
  // open(2) flags of the descriptor returned (O_DIRECTORY and O_CLOEXEC are added): O_RDONLY, or
  // O_PATH for a directory that is only looked at (one this user may search but not read).
  int flags = O_RDONLY;
};

// The directory OpenDirectoryPath reached.
struct WalkedDirectory {
  UniqueFd fd;
  bool created = false;  // the walk made it (PathWalk::Missing::kCreate)
  // Every directory the walk made (kCreate), the reached one included when `created`, in the
  // order made, as walked from "/" (e.g. "/mnt/a", "/mnt/a/b"): what a caller whose work then
  // fails removes again, last first, as long as each is empty.
  std::vector<std::string> made;
};

// Opens the directory `path` (relative: to the current directory, whose physical path is walked
// from "/" too) as the kernel resolves it, component by component with openat(O_PATH |
// O_NOFOLLOW): "." is skipped, ".." goes to the parent of the directory reached so far (after a
// symlink, the parent of its target, as the kernel does), a trailing slash changes nothing, and a
// symlink is followed (its target read from the link's own descriptor, absolute ones from "/")
// only as `walk.symlinks` allows: a symlink that is not allowed, anywhere on the path or in a
// target, ends the walk with walk.refuse_symlink's error. So another user's symlink is never
// followed, even one swapped in while the walk runs. At most 40 symlinks, as the kernel.
// `shown` starts every message, e.g. "directory \"out/\"".
// Errors: the refusal above; FailedPrecondition (walk.not_a_directory) "<shown>: exists and is
// not a directory" ("<shown>: /a/f exists and is not a directory" for a component before the
// last), "<shown>: a symlink to \"t\", which is not a directory" / "..., which does not exist"
// ("<shown>: /a/l is a symlink to ..." for a link that is not the path itself; a symlink's
// target is never created); ErrnoError "<shown>" (NotFound for a missing component without
// kCreate, PermissionDenied, Internal for ELOOP past 40 symlinks); check_directory's errors.
// Thread-safe (concurrent walks that create the same directories both succeed).
Result<WalkedDirectory> OpenDirectoryPath(const std::filesystem::path& path,
                                          const std::string& shown, const PathWalk& walk = {});

}  // namespace bdn
