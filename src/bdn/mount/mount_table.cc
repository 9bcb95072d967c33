// The mount table as bdn sees it: what is mounted where (/proc/self/mountinfo and a stat that
// cannot hang), detaching dead mounts, unmounting, and whether allow_other is permitted.
#include "bdn/mount/mount_table.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/mutex.h"
#include "bdn/base/path_walk.h"
#include "bdn/base/text.h"

extern char** environ;

namespace bdn {
namespace fs = std::filesystem;

// How long umount of a busy mount waits for its daemon to answer before detaching it lazily.
constexpr std::chrono::milliseconds kUnmountProbeDeadline{2000};

std::string MountpointPrefix(const fs::path& mp) { return "mountpoint " + EscapeName(mp.string()); }

fs::path AbsoluteMountpoint(const fs::path& p) {
  // Not lexically_normal first: "jump/../real" with jump a symlink is where jump's target's
  // parent holds "real" (as the kernel resolves it), not the "real" beside jump.
  fs::path abs = fs::absolute(p);
  // A symlink as the last component is followed (as mount(2) does), by readlink alone: it never
  // asks a file system mounted there (stat of a stopped daemon's mount never returns).
  for (int hops = 0; hops < 40; ++hops) {
    while (abs.has_relative_path() && abs.filename().empty()) abs = abs.parent_path();  // "a/"
    if (abs == abs.root_path()) return abs;
    const fs::path name = abs.filename();
    std::error_code ec;
    if (name == ".") {
      abs = abs.parent_path();
      continue;
    }
    if (name == "..") {
      // Both keep a trailing "/" where ".." is resolved lexically (below a missing "sub" in
      // "m/sub/.."): the mountpoint is named without it.
      fs::path c = fs::weakly_canonical(abs, ec);
      if (ec) c = abs.lexically_normal();
      while (c.has_relative_path() && c.filename().empty()) c = c.parent_path();
      return c;
    }
    fs::path parent = fs::weakly_canonical(abs.parent_path(), ec);
    abs = (ec ? abs.parent_path().lexically_normal() : parent) / name;
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlink(abs.c_str(), target.data(), target.size());
    if (n < 0 || static_cast<size_t>(n) >= target.size()) return abs;
    target.resize(static_cast<size_t>(n));
    abs = abs.parent_path() / target;  // an absolute target replaces it
  }
  return abs.lexically_normal();
}

bool IsRoot() { return ::geteuid() == 0; }

namespace {

// Runs `argv` (searched in PATH) and waits. Returns its exit status, or -1 if it could not run.
int RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "\040" and friends in /proc/self/mountinfo back to bytes.
std::string UnescapeMountField(std::string_view s) {
  auto oct = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && oct(s[i + 1]) && oct(s[i + 2]) && oct(s[i + 3])) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// One line of /proc/self/mountinfo.
struct MountInfo {
  std::string id, parent_id;
  std::string mountpoint;
  std::string type;  // "" if nothing is mounted there
  std::string source;
  std::vector<std::string> super_options;  // e.g. "default_permissions", "allow_other"
};

// Every line of /proc/self/mountinfo, in its order (a later mount at one point is on top).
std::vector<MountInfo> ReadMountInfo() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<MountInfo> out;
  while (std::getline(in, line)) {
    // id parent maj:min root mountpoint options [optional fields...] - fstype source superopts
    std::vector<std::string_view> fields;
    std::string_view rest = line;
    while (!rest.empty()) {
      size_t sp = rest.find(' ');
      fields.push_back(rest.substr(0, sp));
      if (sp == std::string_view::npos) break;
      rest.remove_prefix(sp + 1);
    }
    if (fields.size() < 7) continue;
    auto dash = std::find(fields.begin() + 6, fields.end(), std::string_view("-"));
    if (dash == fields.end() || dash + 1 == fields.end()) continue;
    MountInfo m{std::string(fields[0]),
                std::string(fields[1]),
                UnescapeMountField(fields[4]),
                std::string(*(dash + 1)),
                dash + 2 == fields.end() ? std::string() : UnescapeMountField(*(dash + 2)),
                {}};
    if (dash + 3 < fields.end()) {
      std::string_view opts = *(dash + 3);
      for (size_t at = 0; at <= opts.size();) {
        size_t comma = std::min(opts.find(',', at), opts.size());
        m.super_options.emplace_back(opts.substr(at, comma - at));
        at = comma + 1;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The topmost mount at `mp` (type "" if none).
MountInfo MountAt(const fs::path& mp) {
  MountInfo found;
  for (MountInfo& m : ReadMountInfo()) {
    if (m.mountpoint == mp.string()) found = std::move(m);  // later lines are on top
  }
  return found;
}

// The mount points of the mounts made on top of the topmost mount at `mp` or below it (its
// subtree, which a lazy detach of it takes along), in mountinfo order.
std::vector<std::string> MountsBelow(const fs::path& mp) {
  std::vector<MountInfo> all = ReadMountInfo();
  std::vector<std::string> tree;  // ids in the subtree
  for (const MountInfo& m : all) {
    if (m.mountpoint == mp.string()) tree = {m.id};
  }
  if (tree.empty()) return {};
  std::vector<std::string> below;
  for (bool grew = true; grew;) {
    grew = false;
    for (const MountInfo& m : all) {
      if (std::find(tree.begin(), tree.end(), m.parent_id) == tree.end() ||
          std::find(tree.begin(), tree.end(), m.id) != tree.end()) {
        continue;
      }
      tree.push_back(m.id);
      below.push_back(m.mountpoint);
      grew = true;
    }
  }
  return below;
}

// "X is mounted below it" / "X and 2 more are mounted below it", X escaped.
std::string MountedBelow(const std::vector<std::string>& below) {
  return EscapeName(below.front()) +
         (below.size() == 1 ? " is" : " and " + std::to_string(below.size() - 1) + " more are") +
         " mounted below it";
}

std::string MountTypeAt(const fs::path& mp) { return MountAt(mp).type; }

// The uid a FUSE mount was made by (its super option user_id=N), if it says.
std::optional<uid_t> MountOwner(const MountInfo& m) {
  for (const std::string& o : m.super_options) {
    if (!o.starts_with("user_id=")) continue;
    uid_t uid = 0;
    const char* first = o.data() + 8;
    const char* last = o.data() + o.size();
    auto [end, ec] = std::from_chars(first, last, uid);
    if (ec == std::errc() && end == last && first != last) return uid;
  }
  return std::nullopt;
}

// What stat (and statvfs, when asked) of a path answered: 0 or the errno of each.
struct PathProbe {
  int stat_errno = 0;
  int statvfs_errno = 0;
};

// stat, then statvfs if `with_statvfs` and stat succeeded, of `path` on a helper thread, waited
// for at most `deadline`. A FUSE daemon that is stopped or hung never answers, and a thread
// blocked on it cannot be woken; it is left behind (detached) and ends when the daemon answers,
// the mount is detached, or this process exits. nullopt if it did not answer in time.
std::optional<PathProbe> ProbePath(const fs::path& path, bool with_statvfs,
                                   std::chrono::milliseconds deadline) {
  struct Shared {
    Mutex mu;
    std::condition_variable cv;
    bool done = false;
    PathProbe probe;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, path = path.string(), with_statvfs] {
    PathProbe probe;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      probe.stat_errno = errno;
    } else if (with_statvfs) {
      struct statvfs vfs;
      if (::statvfs(path.c_str(), &vfs) != 0) probe.statvfs_errno = errno;
    }
    MutexLock lock(shared->mu);
    shared->probe = probe;
    shared->done = true;
    shared->cv.notify_all();
  }).detach();
  MutexLock lock(shared->mu);
  if (!shared->cv.wait_for(lock.native(), deadline, [&] { return shared->done; }))
    return std::nullopt;
  return shared->probe;
}

}  // namespace

Status CheckMountsAboveAnswer(const fs::path& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  if (ec) return Status::Ok();  // no working directory: the walk itself will say so
  const std::vector<MountInfo> mounts = ReadMountInfo();
  // The mount a directory (canonical) is on: the topmost at the longest mount point that holds it.
  auto mount_of = [&](const std::string& dir) -> const MountInfo* {
    const MountInfo* best = nullptr;
    for (const MountInfo& m : mounts) {
      const bool holds =
          m.mountpoint == "/" || dir == m.mountpoint || dir.starts_with(m.mountpoint + "/");
      if (holds && (!best || m.mountpoint.size() >= best->mountpoint.size())) best = &m;
    }
    return best;
  };
  auto is_mount_point = [&](const std::string& p) {
    return std::ranges::any_of(mounts, [&](const MountInfo& m) { return m.mountpoint == p; });
  };
  std::set<std::string> answered;
  // Before a name is looked up in `dir`: the FUSE mount `dir` is on answers (once per mount).
  auto check_dir = [&](const std::string& dir) -> Status {
    const MountInfo* m = mount_of(dir);
    if (!m || !m->type.starts_with("fuse") || answered.contains(m->mountpoint)) {
      return Status::Ok();
    }
    if (ProbePath(m->mountpoint, m->type == "fuse.bdn", kMountpointAnswerDeadline)) {
      answered.insert(m->mountpoint);
      return Status::Ok();
    }
    return FailedPreconditionError(
        MountpointPrefix(abs.lexically_normal()) + ": below " + EscapeName(m->mountpoint) +
        ", the " + m->type + " mount" + (m->source.empty() ? "" : " of " + EscapeName(m->source)) +
        " does not answer within " + std::to_string(kMountpointAnswerDeadline.count() / 1000) +
        " s (its daemon is stopped or hung); unmount it first (bdn volume umount " +
        EscapeName(m->mountpoint) + ")");
  };
  // The path walked as the kernel walks it, symlinks followed (also the last, as mount(2) does;
  // at most 40), each directory's mount asked before a name is looked up in it. A mount point on
  // the way is not stat-ed (its root is the mount's, which may not answer): it is a directory.
  std::vector<std::string> todo;
  auto push = [&](const std::string& p) {
    std::vector<std::string> parts;
    for (size_t at = 0; at <= p.size();) {
      const size_t slash = std::min(p.find('/', at), p.size());
      parts.push_back(p.substr(at, slash - at));
      at = slash + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push(abs.string());
  std::string resolved = "/";
  for (int hops = 0; !todo.empty();) {
    std::string name = std::move(todo.back());
    todo.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      resolved = fs::path(resolved).parent_path().string();
      continue;
    }
    BDN_RETURN_IF_ERROR(check_dir(resolved));
    const std::string next = (resolved == "/" ? "" : resolved) + "/" + name;
    if (is_mount_point(next)) {
      resolved = next;
      continue;
    }
    struct stat st;
    if (::lstat(next.c_str(), &st) != 0) return Status::Ok();  // the rest is not there
    if (!S_ISLNK(st.st_mode) || ++hops > 40) {
      resolved = next;
      continue;
    }
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
    if (n <= 0) return Status::Ok();
    target.resize(static_cast<size_t>(n));
    if (target.starts_with("/")) resolved = "/";
    push(target);
  }
  return Status::Ok();
}

std::string_view BdnMountStateName(BdnMount::State s) {
  switch (s) {
    case BdnMount::State::kServing:
      return "serving";
    case BdnMount::State::kDead:
      return "dead";
    case BdnMount::State::kNotAnswering:
      return "not answering";
    case BdnMount::State::kNoAccess:
      return "no access";
    case BdnMount::State::kCovered:
      return "covered";
    case BdnMount::State::kUnreachable:
      return "unreachable";
  }
  return "?";
}

namespace {

// The mount a lookup of `path` (absolute) ends in, as the kernel resolves it: from the root
// mount, at each directory on the way down (and at `path` itself), the mount whose parent is the
// current one and whose mountpoint is that directory, again while one is stacked on it. Null if
// the table has no root.
const MountInfo* TopMountAt(const std::vector<MountInfo>& all, const std::string& path) {
  std::unordered_set<std::string> ids;
  for (const MountInfo& m : all) ids.insert(m.id);
  const MountInfo* cur = nullptr;
  for (const MountInfo& m : all) {
    if (m.mountpoint == "/" && !ids.contains(m.parent_id)) cur = &m;
  }
  if (!cur) return nullptr;
  // Descends through the mounts stacked on `cur` at `dir` (the last listed wins a tie).
  auto descend = [&](const std::string& dir) {
    for (int guard = 0; guard < 4096; ++guard) {
      const MountInfo* next = nullptr;
      for (const MountInfo& m : all) {
        if (&m != cur && m.parent_id == cur->id && m.mountpoint == dir) next = &m;
      }
      if (!next) return;
      cur = next;
    }
  };
  descend("/");
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    descend(slash == std::string::npos ? path : path.substr(0, slash));
    if (slash == std::string::npos) break;
  }
  return cur;
}

}  // namespace

std::vector<BdnMount> ListBdnMounts(std::chrono::milliseconds deadline) {
  const std::vector<MountInfo> all = ReadMountInfo();
  std::vector<BdnMount> out;
  std::vector<size_t> probe;  // indexes into `out` of the mounts on top at their path
  for (size_t i = 0; i < all.size(); ++i) {
    const MountInfo& m = all[i];
    if (m.type != "fuse.bdn") continue;
    BdnMount b;
    b.mountpoint = m.mountpoint;
    b.source = m.source;
    b.allow_other = std::ranges::find(m.super_options, "allow_other") != m.super_options.end();
    b.uid = MountOwner(m);
    // Covered unless resolving its path through the mount tree ends at it (from attackers: a
    // tmpfs on the parent hid a dead mount that was listed "serving"; so did one moved there with
    // `mount --move`, which keeps its earlier place in mountinfo, so "listed later" was not
    // enough).
    const MountInfo* top = TopMountAt(all, m.mountpoint);
    const bool covered = top != nullptr && top != &m;  // no root in the table: probed
    if (covered) {
      b.state = BdnMount::State::kCovered;
    } else {
      probe.push_back(out.size());
    }
    out.push_back(std::move(b));
  }
  // At once: a stopped daemon costs the deadline once, not once per mount.
  std::vector<std::optional<PathProbe>> answers(probe.size());
  {
    std::vector<std::thread> threads;
    for (size_t k = 0; k < probe.size(); ++k) {
      threads.emplace_back([&, k] {
        answers[k] = ProbePath(out[probe[k]].mountpoint, /*with_statvfs=*/true, deadline);
      });
    }
    for (auto& t : threads) t.join();
  }
  for (size_t k = 0; k < probe.size(); ++k) {
    BdnMount& b = out[probe[k]];
    const auto& a = answers[k];
    if (!a) {
      b.state = BdnMount::State::kNotAnswering;
    } else if (a->stat_errno == ENOTCONN || a->statvfs_errno == ENOTCONN) {
      b.state = BdnMount::State::kDead;
    } else if (a->stat_errno == EACCES || a->statvfs_errno == EACCES) {
      b.state = BdnMount::State::kNoAccess;
    } else if (a->stat_errno != 0 || a->statvfs_errno != 0) {
      b.state = BdnMount::State::kUnreachable;
    }
  }
  return out;
}

Result<MountpointState> InspectMountpoint(const fs::path& mountpoint) {
  BDN_RETURN_IF_ERROR(CheckMountsAboveAnswer(mountpoint));
  fs::path mp = AbsoluteMountpoint(mountpoint);
  MountInfo info;
  std::string bdn_under;  // the source of the latest fuse.bdn mount at mp before `info`
  for (MountInfo& m : ReadMountInfo()) {
    if (m.mountpoint != mp.string()) continue;  // later lines are on top
    if (info.type == "fuse.bdn") bdn_under = info.source;
    info = std::move(m);
  }
  MountpointState state;
  state.type = info.type;
  state.source = info.source;
  if (info.type != "fuse.bdn") state.bdn_source_under = bdn_under;
  state.allow_other =
      std::ranges::find(info.super_options, "allow_other") != info.super_options.end();
  // stat may be answered from cached attributes; statfs always asks a bdn daemon.
  auto probe = ProbePath(mp, info.type == "fuse.bdn", kMountpointAnswerDeadline);
  if (!probe) {
    return Err(FailedPreconditionError(
        MountpointPrefix(mp) + ": the " + (info.type.empty() ? "file system" : info.type) +
        " mount there" + (info.source.empty() ? "" : " of " + info.source) +
        " does not answer within " + std::to_string(kMountpointAnswerDeadline.count() / 1000) +
        " s (its daemon is stopped or hung); unmount it first (bdn volume umount " + mp.string() +
        ")"));
  }
  if (probe->stat_errno != 0) {
    if (probe->stat_errno == ENOTCONN && info.type.empty()) {
      // Not a mount here: one on a directory above it, whose daemon is gone.
      for (fs::path up = mp.parent_path(); up.has_relative_path(); up = up.parent_path()) {
        MountInfo above = MountAt(up);
        if (above.type.empty()) continue;
        return Err(FailedPreconditionError(
            MountpointPrefix(mp) + ": below " + EscapeName(up.string()) + ", the " + above.type +
            " mount" + (above.source.empty() ? "" : " of " + EscapeName(above.source)) +
            " whose daemon is gone (Transport endpoint is not connected); unmount it first (bdn "
            "volume umount " +
            EscapeName(up.string()) + ")"));
      }
    }
    if (probe->stat_errno == ENOTCONN) {
      state.kind = MountpointState::Kind::kDead;
      return state;
    }
    if (probe->stat_errno == EACCES && info.type.starts_with("fuse")) {
      // FUSE lets in only the user (and group) who mounted, unless mounted with allow_other.
      return Err(PermissionDeniedError(
          MountpointPrefix(mp) + ": the " + info.type + " mount there" +
          (info.source.empty() ? "" : " of " + EscapeName(info.source)) +
          " does not let this user in (a FUSE mount admits only the user who made it, unless "
          "made with allow_other); unmount it first (bdn volume umount " +
          EscapeName(mp.string()) + ")"));
    }
    if (probe->stat_errno == ENOENT && info.type.empty()) return state;
    if (probe->stat_errno == ENOTDIR) {
      // A directory above it is something else: name the nearest one that exists.
      for (fs::path up = mp.parent_path(); up.has_relative_path(); up = up.parent_path()) {
        struct stat st;
        if (::stat(up.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) break;
        return Err(FailedPreconditionError(MountpointPrefix(mp) + ": " + EscapeName(up.string()) +
                                           " exists and is not a directory"));
      }
    }
    return Err(ErrnoError(MountpointPrefix(mp), probe->stat_errno));
  }
  if (info.type.empty()) return state;
  if (info.type != "fuse.bdn") {
    state.kind = MountpointState::Kind::kOther;
    return state;
  }
  bool dead = probe->statvfs_errno == ENOTCONN;
  state.kind = dead ? MountpointState::Kind::kDead : MountpointState::Kind::kLiveBdn;
  return state;
}

bool FuseConfAllowsOther(std::string_view text) {
  constexpr std::string_view kBlanks = " \t\r\f\v";
  for (size_t at = 0; at < text.size();) {
    size_t newline = text.find('\n', at);
    if (newline == std::string_view::npos) break;  // fusermount3 ignores an unterminated line
    std::string_view line = text.substr(at, newline - at);
    at = newline + 1;
    line = line.substr(0, line.find('#'));
    size_t first = line.find_first_not_of(kBlanks);
    if (first == std::string_view::npos) continue;
    line = line.substr(first, line.find_last_not_of(kBlanks) - first + 1);
    if (line == "user_allow_other") return true;
  }
  return false;
}

Status CheckAllowOtherPermitted() {
  if (IsRoot()) return Status::Ok();
  std::ifstream in("/etc/fuse.conf", std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (FuseConfAllowsOther(text)) return Status::Ok();
  return PermissionDeniedError("allow_other: not permitted for uid " + std::to_string(::geteuid()) +
                               ": /etc/fuse.conf has no user_allow_other line (needed when not "
                               "mounting as root)");
}

Result<bool> CleanDeadMount(const fs::path& mountpoint) {
  fs::path mp = AbsoluteMountpoint(mountpoint);
  const std::string what = MountpointPrefix(mp);
  BDN_ASSIGN_OR_RETURN(MountpointState state, InspectMountpoint(mp));
  if (state.kind != MountpointState::Kind::kDead) return false;
  if (IsRoot()) {
    if (::umount2(mp.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return Err(ErrnoError(what + ": detach dead mount", errno));
    }
  } else {
    int rc = RunProgram({"fusermount3", "-u", "-z", "-q", mp.string()});
    if (rc != 0) {
      return Err(
          InternalError(what + ": fusermount3 -uz failed (exit " + std::to_string(rc) + ")"));
    }
  }
  return true;
}

namespace {

// The system calls that name a path, and which of their arguments hold the directory descriptor
// (-1: none, the path is absolute or relative to the working directory) and the path.
struct PathCall {
  long number;
  const char* name;
  int dirfd_arg;
  int path_arg;
};
constexpr PathCall kPathCalls[] = {
    {SYS_openat, "openat", 0, 1},
    {SYS_newfstatat, "newfstatat", 0, 1},
    {SYS_statx, "statx", 0, 1},
    {SYS_faccessat, "faccessat", 0, 1},
    {SYS_faccessat2, "faccessat2", 0, 1},
    {SYS_openat2, "openat2", 0, 1},
    {SYS_readlinkat, "readlinkat", 0, 1},
    {SYS_execveat, "execveat", 0, 1},
    {SYS_execve, "execve", -1, 0},
    {SYS_chdir, "chdir", -1, 0},
    {SYS_statfs, "statfs", -1, 0},
    {SYS_getxattr, "getxattr", -1, 0},
    {SYS_lgetxattr, "lgetxattr", -1, 0},
    {SYS_listxattr, "listxattr", -1, 0},
    {SYS_llistxattr, "llistxattr", -1, 0},
#ifdef SYS_open
    {SYS_open, "open", -1, 0},
    {SYS_stat, "stat", -1, 0},
    {SYS_lstat, "lstat", -1, 0},
    {SYS_access, "access", -1, 0},
    {SYS_readlink, "readlink", -1, 0},
#endif
};

// The NUL-terminated string at `address` in the memory of the process at `proc` (/proc/N), up to
// PATH_MAX bytes; nullopt when it cannot be read (not this user's process to inspect, or gone).
std::optional<std::string> ReadProcessString(const fs::path& proc, uint64_t address) {
  UniqueFd mem(::open((proc / "mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem) return std::nullopt;
  std::string out;
  char buf[256];
  while (out.size() < PATH_MAX) {
    ssize_t n = ::pread(mem.get(), buf, sizeof buf, static_cast<off_t>(address + out.size()));
    if (n <= 0) return std::nullopt;
    const char* end = static_cast<const char*>(std::memchr(buf, '\0', static_cast<size_t>(n)));
    if (end != nullptr) return out.append(buf, static_cast<size_t>(end - buf));
    out.append(buf, static_cast<size_t>(n));
  }
  return std::nullopt;
}

// `p` (absolute, starting with `root`) with the symbolic links among its components resolved, as
// the kernel would walk it, but only up to the first component that `under` accepts: nothing
// under the mount is looked at (its daemon might not answer). `root` is the walking process's
// root (a chroot's absolute link targets start there, and ".." stops there). Gives up (returns what
// it has, joined with the rest) on a component that cannot be read or after 40 links (ELOOP's
// bound).
template <typename Under>
fs::path ResolveOutside(const fs::path& p, const fs::path& root, const Under& under) {
  std::vector<std::string> rest;
  for (const auto& c : p.relative_path()) rest.push_back(c.string());
  std::reverse(rest.begin(), rest.end());  // next component last
  fs::path out = "/";                      // `p` starts with `root` already
  for (int links = 0; !rest.empty();) {
    const std::string c = std::move(rest.back());
    rest.pop_back();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (out != root && out != "/") out = out.parent_path();
      continue;
    }
    fs::path next = out / c;
    struct stat st;
    if (under(next.string()) || ::lstat(next.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) ||
        ++links > 40) {
      out = std::move(next);
      if (under(out.string())) break;
      continue;
    }
    std::error_code ec;
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) {
      out = std::move(next);
      continue;
    }
    std::vector<std::string> more;
    for (const auto& t : target.relative_path()) more.push_back(t.string());
    rest.insert(rest.end(), more.rbegin(), more.rend());
    if (target.is_absolute()) out = root;
  }
  for (auto it = rest.rbegin(); it != rest.rend(); ++it) out /= *it;
  return out.lexically_normal();
}

// The name of the system call the thread at `task` (/proc/N/task/T) is in, if that call names a
// path that `under` accepts once its symbolic links outside the mount are resolved (as
// /proc/N/task/T/syscall and the process's memory tell: root can read them for any process); ""
// otherwise. A thread in such a call (an open waiting for a chunk index from the origin) keeps
// the mount busy before its process has any descriptor to show.
template <typename Under>
std::string PathCallUnder(const fs::path& task, const Under& under,
                          const std::function<std::string(const fs::path&)>& link) {
  std::ifstream in(task / "syscall");
  long number = -1;
  if (!(in >> number) || number < 0) return "";  // "running", or not in a system call
  const PathCall* call = nullptr;
  for (const PathCall& c : kPathCalls) {
    if (c.number == number) call = &c;
  }
  if (call == nullptr) return "";
  uint64_t args[6] = {};
  for (uint64_t& a : args) {
    std::string word;
    if (!(in >> word)) return "";
    a = std::strtoull(word.c_str(), nullptr, 16);
  }
  std::optional<std::string> path = ReadProcessString(task, args[call->path_arg]);
  if (!path || path->empty()) return "";
  std::string root = link(task / "root");
  if (root.empty()) root = "/";
  fs::path p(*path);
  if (p.is_absolute()) {
    if (root != "/") p = fs::path(root) / p.relative_path();
  } else {
    const int dirfd = call->dirfd_arg < 0 ? AT_FDCWD : static_cast<int>(args[call->dirfd_arg]);
    const std::string base =
        link(dirfd == AT_FDCWD ? task / "cwd" : task / "fd" / std::to_string(dirfd));
    if (base.empty()) return "";
    p = fs::path(base) / p;
  }
  return under(ResolveOutside(p.lexically_normal(), root, under).string()) ? call->name : "";
}

// The processes that keep `mp` busy, as "pid N (comm)", from /proc: `holders` have something
// under it open (a file, a working or root directory, a mapped file such as an mmap'd weights
// file: /proc/*/{cwd,root,fd,maps}); `callers` are in a system call on a path under it (an open
// its daemon has not answered yet), with the call's name. None of these reads asks the file
// system mounted there. Processes this user may not inspect are left out, and so is this process.
struct MountUsers {
  std::vector<std::string> holders;
  std::vector<std::string> callers;  // "pid N (comm, in openat)"
};
MountUsers ProcessesUsing(const fs::path& mp) {
  const std::string dir = mp.string();
  auto under = [&](std::string_view p) {
    return p == dir || (p.size() > dir.size() && p.starts_with(dir) && p[dir.size()] == '/');
  };
  std::function<std::string(const fs::path&)> link = [](const fs::path& p) {
    std::error_code ec;
    fs::path t = fs::read_symlink(p, ec);
    return ec ? std::string() : t.string();
  };
  MountUsers out;
  const std::string self = std::to_string(::getpid());
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit) || pid == self) continue;
    const fs::path proc = it->path();
    bool uses = under(link(proc / "cwd")) || under(link(proc / "root"));
    std::error_code fd_ec;
    for (fs::directory_iterator fd(proc / "fd", fd_ec), fd_end; !uses && !fd_ec && fd != fd_end;
         fd.increment(fd_ec)) {
      uses = under(link(fd->path()));
    }
    if (!uses) {
      std::ifstream maps(proc / "maps");
      for (std::string line; !uses && std::getline(maps, line);) {
        const size_t slash = line.find('/');
        if (slash != std::string::npos) uses = under(std::string_view(line).substr(slash));
      }
    }
    // Any thread's call: a data loader opens its files from worker threads.
    std::string call;
    std::error_code task_ec;
    for (fs::directory_iterator task(proc / "task", task_ec), task_end;
         !uses && call.empty() && !task_ec && task != task_end; task.increment(task_ec)) {
      call = PathCallUnder(task->path(), under, link);
    }
    if (!uses && call.empty()) continue;
    std::ifstream comm_in(proc / "comm");
    std::string comm;
    std::getline(comm_in, comm);
    if (uses) {
      out.holders.push_back("pid " + pid + (comm.empty() ? "" : " (" + comm + ")"));
    } else {
      out.callers.push_back("pid " + pid + " (" + (comm.empty() ? "" : comm + ", ") + "in " + call +
                            ")");
    }
  }
  return out;
}

// "pid 1, pid 2, pid 3, pid 4, pid 5 and 2 more".
std::string ListOf(const std::vector<std::string>& pids) {
  constexpr size_t kShown = 5;
  std::string list;
  for (size_t i = 0; i < std::min(pids.size(), kShown); ++i) {
    list += (i == 0 ? "" : ", ") + pids[i];
  }
  if (pids.size() > kShown) list += " and " + std::to_string(pids.size() - kShown) + " more";
  return list;
}

// "busy (...)" for a mount that would not unmount: who holds it, where this user can see.
std::string BusyReason(const MountUsers& users) {
  if (users.holders.empty() && users.callers.empty()) {
    if (IsRoot()) {
      return "busy (no process of this mount namespace has a file or directory open on it or "
             "is in a call on a path under it: a process in another mount namespace holds it, or "
             "one that came and went during this check)";
    }
    return "busy (files or directories are open on it, by processes this user cannot see)";
  }
  std::string out = "busy: ";
  if (!users.holders.empty()) {
    out += ListOf(users.holders) + (users.holders.size() == 1 ? " has" : " have") +
           " files or directories open on it";
  }
  if (!users.callers.empty()) {
    out += std::string(users.holders.empty() ? "" : "; ") + ListOf(users.callers) +
           (users.callers.size() == 1 ? " is" : " are") +
           " in a system call on a path under it, which its daemon has not answered yet";
  }
  return out + " (close them or stop the processes, then unmount again)";
}

}  // namespace

Status Unmount(const fs::path& mountpoint) {
  fs::path mp = AbsoluteMountpoint(mountpoint);
  const std::string what = MountpointPrefix(mp);
  // Only /proc/self/mountinfo, not InspectMountpoint: a hung daemon must not hang its unmount.
  std::string type = MountTypeAt(mp);
  if (type.empty()) {
    // lstat: nothing is mounted there, so nothing can hang it.
    struct stat st;
    if (::lstat(mp.c_str(), &st) != 0 && errno == ENOENT) {
      return NotFoundError(what + ": no such file or directory");
    }
  }
  // A mount made later at its path or over a directory above it hides it: its path leads to
  // that mount, and unmounting the path failed with a bare EINVAL or "not a bdn mount" (from
  // attackers).
  const std::vector<MountInfo> all = ReadMountInfo();
  const MountInfo* top = TopMountAt(all, mp.string());
  const bool bdn_here = std::ranges::any_of(
      all, [&](const MountInfo& m) { return m.mountpoint == mp.string() && m.type == "fuse.bdn"; });
  if (type != "fuse.bdn" && !bdn_here) {
    return InvalidArgumentError(what + ": not a bdn mount" +
                                (type.empty() ? std::string() : " (it is " + type + ")"));
  }
  if (top != nullptr && (top->mountpoint != mp.string() || top->type != "fuse.bdn")) {
    return FailedPreconditionError(what + ": covered by the " + EscapeName(top->type) +
                                   " mount at " + EscapeName(top->mountpoint) +
                                   ", made over it later; unmount that one first");
  }
  int fusermount_rc = 0;
  if (!IsRoot()) {
    // fusermount3 unmounts only its caller's mounts, and says why only on stderr ("entry for P
    // not found in /etc/mtab"); the owner is in the mount's user_id= option.
    if (std::optional<uid_t> owner = MountOwner(MountAt(mp)); owner && *owner != ::getuid()) {
      return PermissionDeniedError(what + ": mounted by " + UidText(*owner) +
                                   ", not by this user (" + UidText(::getuid()) +
                                   "): only that user or root can unmount it");
    }
  }
  if (IsRoot()) {
    if (::umount2(mp.c_str(), UMOUNT_NOFOLLOW) == 0) return Status::Ok();
    if (errno != EBUSY) return ErrnoError(what + ": unmount", errno);
  } else {
    fusermount_rc = RunProgram({"fusermount3", "-u", "-q", mp.string()});
    if (fusermount_rc == 0) return Status::Ok();
  }
  // Busy. A mount below it keeps it busy, and a lazy detach would take that one along.
  if (std::vector<std::string> below = MountsBelow(mp); !below.empty()) {
    return FailedPreconditionError(what + ": busy: " + MountedBelow(below) +
                                   " (unmount that first)");
  }
  // If its daemon does not answer (stopped or hung), what keeps it busy may be only the
  // processes blocked on it, which nothing but the daemon can release: detach it lazily instead
  // of sending the user between "busy" and "does not answer; unmount it first".
  if (!ProbePath(mp, /*with_statvfs=*/true, kUnmountProbeDeadline)) {
    if (IsRoot() ? ::umount2(mp.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0
                 : RunProgram({"fusermount3", "-u", "-z", "-q", mp.string()}) == 0) {
      return Status::Ok();
    }
    return InternalError(what + ": its daemon does not answer and the lazy detach failed");
  }
  MountUsers users = ProcessesUsing(mp);
  if (IsRoot() || !users.holders.empty() || !users.callers.empty()) {
    return FailedPreconditionError(what + ": " + BusyReason(users));
  }
  return FailedPreconditionError(what + ": fusermount3 -u failed (exit " +
                                 std::to_string(fusermount_rc) + "; busy?)");
}

}  // namespace bdn
