#include "bdn/base/path_walk.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

namespace bdn {
namespace fs = std::filesystem;

namespace {

// As the kernel's own path walk (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

// Pushes the components of `path` onto `todo`, the first one last (popped first).
void PushComponents(std::string_view path, std::vector<std::string>& todo) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < path.size();) {
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    if (end > i) parts.emplace_back(path.substr(i, end - i));
    i = end + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// fchmod on an O_PATH descriptor (through /proc: the inode it holds, never what a path names by
// now). 0 or -1 with errno.
int ChmodPathFd(int fd, mode_t mode) {
  const int rc = ::fchmod(fd, mode);
  if (rc == 0 || errno != EBADF) return rc;
  return ::chmod(("/proc/self/fd/" + std::to_string(fd)).c_str(), mode);
}

// A symlink being expanded: its target's components lie on the walk's stack above `floor`.
struct Expansion {
  size_t floor;
  std::string link;  // as ForeignSymlink::link
  bool is_the_path;
  std::string target;  // as ForeignSymlink::target
};

std::string LinkSubject(const std::string& link, bool is_the_path) {
  return is_the_path ? "a symlink" : link + " is a symlink";
}

}  // namespace

Result<std::string> ReadLinkFd(int fd, const std::string& shown) {
  std::string buf(PATH_MAX, '\0');
  while (true) {
    ssize_t n = ::readlinkat(fd, "", buf.data(), buf.size());
    if (n < 0) return Err(ErrnoError(shown, errno));
    if (static_cast<size_t>(n) < buf.size()) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

std::string UidText(uid_t uid) {
  std::string out = "uid " + std::to_string(uid);
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_name) {
    out += " (" + std::string(found->pw_name) + ")";
  }
  return out;
}

std::string DescribeForeignSymlink(const ForeignSymlink& l) {
  return LinkSubject(l.link, l.is_the_path) + " owned by " + UidText(l.uid) +
         ", not by this user or root";
}

Result<WalkedDirectory> OpenDirectoryPath(const fs::path& path, const std::string& shown,
                                          const PathWalk& walk) {
  std::string abs = path.string();
  if (abs.empty()) return Err(ErrnoError(shown, ENOENT));
  if (abs.front() != '/') {
    // The current directory's physical path (getcwd has no symlinks in it), walked like the rest
    // so that every directory on the way is judged.
    std::error_code ec;
    const fs::path cwd = fs::current_path(ec);
    if (ec) return Err(ErrnoError(shown, ec.value()));
    abs = Join(cwd.string(), abs);
  }
  // The walked path itself: a link with this path is named "a symlink" in messages.
  std::string whole = abs;
  while (whole.size() > 1 && whole.back() == '/') whole.pop_back();
  const bool trailing_slash = whole.size() != abs.size();

  auto open_root = [&]() -> Result<UniqueFd> {
    UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return Err(ErrnoError(shown, errno));
    return fd;
  };
  BDN_ASSIGN_OR_RETURN(UniqueFd cur, open_root());
  std::string at = "/";  // the path of `cur`, with no symlink in it
  struct stat cur_st;
  if (::fstat(cur.get(), &cur_st) != 0) return Err(ErrnoError(shown, errno));
  std::vector<std::string> todo;  // the components still to walk, the next one last
  PushComponents(abs, todo);
  std::vector<Expansion> expanding;
  int links = 0;
  int retries = 0;  // of a lookup after mkdirat found something there, then nothing
  const uid_t me = ::geteuid();
  bool cur_created = false;
  bool made = false;                   // mkdirat just made the component looked up again now
  std::vector<std::string> made_dirs;  // WalkedDirectory::made

  auto not_a_directory = [&](const std::string& reason) {
    return Err(Status(walk.not_a_directory, shown + ": " + reason));
  };
  while (!todo.empty()) {
    while (!expanding.empty() && todo.size() <= expanding.back().floor) expanding.pop_back();
    std::string name = std::move(todo.back());
    todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      // Up from the directory reached, which is a symlink's target after one: as the kernel.
      UniqueFd up(::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!up || ::fstat(up.get(), &cur_st) != 0) return Err(ErrnoError(shown, errno));
      cur = std::move(up);
      if (at != "/") at = fs::path(at).parent_path().string();
      cur_created = false;
      continue;
    }
    if (walk.check_directory) BDN_RETURN_IF_ERROR(walk.check_directory(cur_st, at));
    const std::string next = Join(at, name);
    const bool in_target = !expanding.empty();
    UniqueFd c(::openat(cur.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!c) {
      if (errno != ENOENT) return Err(ErrnoError(shown, errno));
      if (in_target) {
        const Expansion& e = expanding.back();
        return not_a_directory(LinkSubject(e.link, e.is_the_path) + " to \"" + e.target +
                               "\", which does not exist");
      }
      if (walk.missing == PathWalk::Missing::kRefuse) return Err(ErrnoError(shown, ENOENT));
      if (::mkdirat(cur.get(), name.c_str(), walk.new_mode) == 0) {
        made = true;
      } else if (errno != EEXIST || ++retries > kMaxSymlinks) {
        return Err(ErrnoError(shown, errno));
      }
      todo.push_back(std::move(name));  // looked up again: whatever is there now is judged
      continue;
    }
    const bool just_made = made;
    made = false;
    struct stat st;
    if (::fstat(c.get(), &st) != 0) return Err(ErrnoError(shown, errno));
    if (S_ISDIR(st.st_mode)) {
      if (just_made && walk.new_mode_is == PathWalk::NewMode::kExact) {
        if (ChmodPathFd(c.get(), walk.new_mode) != 0 || ::fstat(c.get(), &st) != 0) {
          return Err(ErrnoError(shown, errno));
        }
      }
      cur = std::move(c);
      cur_st = st;
      at = next;
      cur_created = just_made;
      if (just_made) made_dirs.push_back(next);
      continue;
    }
    const bool is_the_path = !in_target && todo.empty() && !trailing_slash && next == whole;
    if (!S_ISLNK(st.st_mode)) {
      if (in_target) {
        const Expansion& e = expanding.back();
        return not_a_directory(LinkSubject(e.link, e.is_the_path) + " to \"" + e.target +
                               "\", which is not a directory");
      }
      return not_a_directory((is_the_path ? "" : next + " ") + "exists and is not a directory");
    }
    // Read from the link's own descriptor: the link judged is the link followed.
    BDN_ASSIGN_OR_RETURN(std::string target, ReadLinkFd(c.get(), shown));
    if (target.empty()) return Err(ErrnoError(shown, ENOENT));
    Expansion e{todo.size(), next, is_the_path, target.front() == '/' ? target : Join(at, target)};
    if (walk.symlinks == PathWalk::Symlinks::kOwnOrRoot && st.st_uid != me && st.st_uid != 0) {
      ForeignSymlink l{e.link, e.is_the_path, st.st_uid, e.target};
      if (walk.refuse_symlink) return Err(walk.refuse_symlink(l));
      return Err(FailedPreconditionError(shown + ": " + DescribeForeignSymlink(l) +
                                         "; give the directory it names (\"" + l.target +
                                         "\") if that is the one you mean"));
    }
    if (++links > kMaxSymlinks) return Err(ErrnoError(shown, ELOOP));
    expanding.push_back(std::move(e));
    PushComponents(target, todo);
    if (target.front() == '/') {
      BDN_ASSIGN_OR_RETURN(cur, open_root());
      if (::fstat(cur.get(), &cur_st) != 0) return Err(ErrnoError(shown, errno));
      at = "/";
      cur_created = false;
    }
  }
  WalkedDirectory out;
  out.created = cur_created;
  out.made = std::move(made_dirs);
  if ((walk.flags & O_PATH) != 0) {
    out.fd = std::move(cur);
    return out;
  }
  out.fd = UniqueFd(::openat(cur.get(), ".", walk.flags | O_DIRECTORY | O_CLOEXEC));
  if (!out.fd) return Err(ErrnoError(shown, errno));
  return out;
}

}  // namespace bdn
