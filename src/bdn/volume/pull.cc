#include "bdn/volume/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "bdn/base/dir_fd.h"
#include "bdn/base/fd.h"
#include "bdn/base/path_walk.h"
#include "bdn/base/text.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

bool Under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  return path == prefix ||
         (path.size() > prefix.size() && path.starts_with(prefix) && path[prefix.size()] == '/');
}

// The times to set for entry `e` (utimensat/futimens): its recorded mtime, atime left alone;
// nullopt when the manifest records no mtimes.
std::optional<std::array<timespec, 2>> TimesOf(const Entry& e) {
  if (!e.mtime_ns) return std::nullopt;
  return std::array<timespec, 2>{timespec{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                                 ToTimespec(*e.mtime_ns)};
}

// Whether `st` already has the mtime of `times` (TimesOf).
bool SameMtime(const struct stat& st, const std::array<timespec, 2>& times) {
  return st.st_mtim.tv_sec == times[1].tv_sec && st.st_mtim.tv_nsec == times[1].tv_nsec;
}

// Sets `name`'s (in `dir`; a symlink itself, not its target) recorded mtime, if there is one and
// `now` (its lstat, if known) does not have it already. Errors: ErrnoError "<kind> \"shown\"".
Status RestoreMtime(const Entry& e, int dir, const std::string& name, const std::string& kind,
                    const std::string& shown, const struct stat* now = nullptr) {
  auto times = TimesOf(e);
  if (times && !(now && SameMtime(*now, *times)) &&
      ::utimensat(dir, name.c_str(), times->data(), AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(kind + " \"" + shown + "\"", errno);
  }
  return Status::Ok();
}

bool AllZero(std::span<const uint8_t> b) {
  static const uint8_t zeros[4096] = {};
  for (size_t off = 0; off < b.size(); off += sizeof zeros) {
    size_t n = std::min(sizeof zeros, b.size() - off);
    if (std::memcmp(b.data() + off, zeros, n) != 0) return false;
  }
  return true;
}

// Why what stands where an entry goes (`st`, its lstat) is in the way, without --overwrite: another
// kind of thing is named ("a FIFO is in the way (use --overwrite)"; a socket, a character or
// block device, a directory; a symlink where a file goes, a file where a symlink goes),
// the same kind "exists with other content (use --overwrite)". `goes`: what goes there (a
// hardlink is a file).
std::string InTheWay(const struct stat& st, EntryKind goes) {
  const bool symlink = goes == EntryKind::kSymlink;
  std::string what;
  if (S_ISFIFO(st.st_mode)) {
    what = "a FIFO";
  } else if (S_ISSOCK(st.st_mode)) {
    what = "a socket";
  } else if (S_ISCHR(st.st_mode)) {
    what = "a character device";
  } else if (S_ISBLK(st.st_mode)) {
    what = "a block device";
  } else if (S_ISDIR(st.st_mode)) {
    what = "a directory";  // (CheckConflicts reports one that holds anything as such first)
  } else if (S_ISLNK(st.st_mode) && !symlink) {
    what = "a symlink";
  } else if (S_ISREG(st.st_mode) && symlink) {
    what = "a file";
  }
  return what.empty() ? "exists with other content (use --overwrite)"
                      : what + " is in the way (use --overwrite)";
}

// What stands at an entry's place (`name` in a directory), looked at without following a
// symlink. A regular file is opened (O_NOFOLLOW; O_NONBLOCK, so a FIFO swapped in meanwhile does
// not hang the open) and every later check of it (type, owner, links, size, content) and every
// change (mode, mtime) goes through that one descriptor: a name swapped for a symlink between a
// check and a change (by a user who can write the directory) is never followed.
struct InPlace {
  bool exists = false;
  struct stat st = {};  // of the descriptor when it is open, else the name's lstat
  UniqueFd fd;          // open when a regular file could be opened for reading
  int open_errno = 0;   // why a regular file could not be opened

  bool Regular() const { return fd.valid(); }
};

// Looks at `name` in `dir` (`shown` names it in messages). Errors: ErrnoError "path \"shown\""
// when it cannot be looked at (the directory cannot be searched).
Result<InPlace> LookInPlace(int dir, const std::string& name, const std::string& shown) {
  InPlace in;
  if (::fstatat(dir, name.c_str(), &in.st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return in;
    return Err(ErrnoError("path \"" + shown + "\"", errno));
  }
  in.exists = true;
  if (!S_ISREG(in.st.st_mode)) return in;
  in.fd.Reset(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in.fd) {
    in.open_errno = errno;
    // Replaced by something else meanwhile (ELOOP, ENXIO...): what is there now.
    if (::fstatat(dir, name.c_str(), &in.st, AT_SYMLINK_NOFOLLOW) != 0) in.exists = false;
    return in;
  }
  if (::fstat(in.fd.get(), &in.st) != 0) return Err(ErrnoError("path \"" + shown + "\"", errno));
  if (!S_ISREG(in.st.st_mode)) in.fd.Reset();  // replaced between the look and the open
  return in;
}

// BLAKE3 of the file open at `fd` (from its start), or nullopt if it cannot be read.
std::optional<Digest> HashFd(int fd) {
  Blake3Hasher h;
  std::vector<uint8_t> buf(1 << 20);
  for (uint64_t off = 0;;) {
    auto n = PReadFull(fd, buf, off, "file");
    if (!n) return std::nullopt;
    h.Update(buf.data(), *n);
    off += *n;
    if (*n < buf.size()) break;
  }
  return h.Finalize();
}

// Gives the file kept in place (`in`, through its descriptor) entry `e`'s mode and recorded
// mtime, each only where it differs, so that a file already right on a read-only file system
// needs no change. Errors: ErrnoError "file \"shown\"".
Status KeepInPlace(const Entry& e, const InPlace& in, const std::string& shown) {
  if ((in.st.st_mode & 07777) != e.mode && ::fchmod(in.fd.get(), e.mode) != 0) {
    return ErrnoError("file \"" + shown + "\"", errno);
  }
  auto times = TimesOf(e);
  if (times && !SameMtime(in.st, *times) && ::futimens(in.fd.get(), times->data()) != 0) {
    return ErrnoError("file \"" + shown + "\"", errno);
  }
  return Status::Ok();
}

// A file found identical by CheckConflicts: the inode that was hashed.
struct Hashed {
  dev_t dev;
  ino_t ino;
};
using HashedFiles = std::unordered_map<const Entry*, Hashed>;

// PullOptions::check_directory: a directory's stat and how messages name it.
using DirectoryCheck = std::function<Status(const struct stat& st, const std::string& dir)>;

// Where an entry lands: the name `name` in the directory `parent` (both relative to dest).
struct Place {
  std::string parent;
  std::string name;
};

Place PlaceOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

// What a pull writes, decided before anything is written: the selected entries in path order
// (parents before children) and where each lands, relative to dest.
struct PullPlan {
  // Directories, symlinks, files and hardlinks to write, in path order.
  std::vector<const Entry*> entries;
  // The regular files to write, in path order: files, and hardlinks whose target is not pulled
  // (made plain files; they point into `detached`).
  std::vector<const Entry*> files;
  std::deque<Entry> detached;  // a deque: pointers to its elements stay valid
  // The hardlinks whose target is pulled too (linked once the files exist).
  std::vector<const Entry*> links;
  // Where entry path `p` lands, relative to dest.
  std::function<std::string(const std::string&)> local;
  // The name of each file's partial file (of plan.files; in the file's directory).
  std::unordered_map<const Entry*, std::string> partials;
};

bool Selected(const Entry& e, const std::string& path, const std::vector<std::string>& includes) {
  if (!Under(e.path, path)) return false;
  if (includes.empty()) return true;
  for (const auto& inc : includes) {
    if (Under(e.path, inc) || Under(inc, e.path)) return true;  // ancestors of includes too
  }
  return false;
}

// The plan of Pull(view, …, options). Errors: NotFound for options.path or an --include that
// names no entry.
Result<PullPlan> PlanPull(const VersionView& view, const PullOptions& options) {
  const Entry* top = view.Find(options.path);
  if (!top) {
    return Err(
        NotFoundError("path \"" + options.path + "\": not in version " + view.digest().ToString()));
  }
  // --include paths are relative to the pulled path; each must name an entry.
  std::vector<std::string> includes;
  for (const auto& inc : options.includes) {
    std::string full = options.path.empty() ? inc : options.path + "/" + inc;
    if (!view.Find(full)) {
      // sync start's --include is a glob; pull's names a file or directory.
      const bool glob = inc.find_first_of("*?[") != std::string::npos;
      return Err(NotFoundError("--include \"" + inc + "\": no such path under \"" +
                               (options.path.empty() ? "/" : options.path) + "\" in version " +
                               view.digest().ToString() +
                               (glob ? " (pull's --include names a file or directory, not a "
                                       "pattern: list them with bdn volume ls -R)"
                                     : "")));
    }
    includes.push_back(std::move(full));
  }
  auto selected = [&](const Entry& e) { return Selected(e, options.path, includes); };
  PullPlan plan;
  plan.local = [path = options.path, layout = options.layout](const std::string& p) {
    if (layout == PullOptions::Layout::kFullPaths || path.empty()) return p;
    if (p == path) {
      size_t slash = p.rfind('/');
      return slash == std::string::npos ? p : p.substr(slash + 1);
    }
    return p.substr(path.size() + 1);
  };
  // Parent directories of a stripped single path are not created; the top entry itself is.
  if (top->kind != EntryKind::kDirectory || !options.path.empty()) {
    if (options.layout == PullOptions::Layout::kFullPaths) {
      for (const auto& e : view.manifest().entries) {
        if (Under(options.path, e.path) && e.path != options.path) plan.entries.push_back(&e);
      }
    }
  }
  for (const auto& e : view.manifest().entries) {
    if (!selected(e)) continue;
    if (options.layout == PullOptions::Layout::kStripPrefix && e.path == options.path &&
        e.kind == EntryKind::kDirectory) {
      continue;  // its contents go straight into dest
    }
    plan.entries.push_back(&e);
  }
  for (const Entry* e : plan.entries) {
    if (e->kind == EntryKind::kFile) {
      plan.files.push_back(e);
    } else if (e->kind == EntryKind::kHardlink) {
      if (selected(view.Resolve(*e))) {
        plan.links.push_back(e);
        continue;
      }
      Entry copy = view.Resolve(*e);
      copy.path = e->path;
      plan.detached.push_back(std::move(copy));
      plan.files.push_back(&plan.detached.back());
    }
  }
  // A version may hold any name, ".bdn-partial-…" too: a file's partial file is the first
  // candidate (PartialFileName) that is the name of no entry of the version in the file's
  // directory, pulled or not (an --include pull knows of more than it writes: an earlier pull
  // may have put any of them there, and a partial file at one would be resumed from and renamed
  // over the file, or removed as a stranger), and no other file's partial file there. The
  // choice depends only on the version's names, never on what this pull selects, so a pull of
  // the same file with or without --include resumes from it. A version directory lands in one
  // local directory, so the names are kept per directory of the version.
  std::unordered_map<std::string, std::unordered_set<std::string>> taken;  // parent -> names
  for (const Entry* f : plan.files) taken.try_emplace(PlaceOf(f->path).parent);
  for (const auto& e : view.manifest().entries) {
    Place at = PlaceOf(e.path);
    if (auto it = taken.find(at.parent); it != taken.end()) it->second.insert(std::move(at.name));
  }
  for (const Entry* f : plan.files) {
    const Place at = PlaceOf(f->path);
    auto& names = taken.at(at.parent);
    std::string partial = PartialFileName(at.name);
    for (int attempt = 1; names.contains(partial); ++attempt) {
      partial = PartialFileName(at.name, attempt);
    }
    names.insert(partial);
    plan.partials[f] = std::move(partial);
  }
  return plan;
}

// Who holds a flock(2) lock on the inode `st`, as /proc/locks tells: "pid N, \"comm\"" (comm:
// /proc/N/comm, left out when it cannot be read), or "" when no holder is listed (the lock was
// released meanwhile, or the holder is not visible from here).
std::string FlockHolder(const struct stat& st) {
  std::ifstream locks("/proc/locks");
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%llu", ::major(st.st_dev), ::minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  for (std::string line; std::getline(locks, line);) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after "1:".
    std::istringstream in(line);
    std::string id, type, mode, access, pid, where;
    if (!(in >> id >> type >> mode >> access >> pid >> where) || type != "FLOCK" || where != want) {
      continue;
    }
    std::string holder = "pid " + pid;
    std::ifstream comm_file("/proc/" + pid + "/comm");
    if (std::string comm; std::getline(comm_file, comm) && !comm.empty()) {
      holder += ", \"" + EscapeName(comm) + "\"";
    }
    return holder;
  }
  return "";
}

// How messages name the process holding the lock of a partial file owned by `owner`: "another
// pull", or "another process" when the holder as FlockHolder names it (`holder`) is not a bdn
// process (a lock taken by `flock`, say); for another user's file "another user's pull (uid U)"
// (or process).
std::string HolderName(uid_t owner, const std::string& holder) {
  const bool pull = holder.empty() || holder.find(", \"bdn") != std::string::npos;
  if (owner == ::geteuid()) return pull ? "another pull" : "another process";
  return std::string("another user's ") + (pull ? "pull" : "process") + " (uid " +
         std::to_string(owner) + ")";
}

// A file's partial file (PartialFileName, beside the file): opened (created if missing) and
// locked, written, and either renamed into place by Commit or left for a later pull to resume
// from (the default when the writer goes: its chunks are verified again then), or removed by
// Discard (a file not worth resuming from). Its lock (flock) is held from the open until it is
// renamed into place or left: another pull that finds it held waits (WaitForHolder). Owns the
// descriptor: every path closes it once.
class PartialFile {
 public:
  // Opens and locks the partial file `tmp` of `name` in directory `dir`; `shown` names the file
  // in messages. Only a regular file of this user's with one link and mode 0600 or less is resumed
  // from: anything else at
  // the partial file's name (a hard link to a file elsewhere, another user's file in a shared
  // directory, a symlink, a FIFO, an empty directory) is removed first, so that nothing is ever
  // written, chmod-ed or renamed into place through it. While another process holds its lock
  // (another pull writing the file), waits for that lock, or for the partial file to leave its
  // name (renamed into place), as long as it keeps changing (WaitForHolder); the caller then
  // looks at the file in place again. Errors: ErrnoError "file \"shown\" (its partial file
  // .bdn-partial-…)"; FailedPrecondition when what is in the way cannot be removed (a non-empty
  // directory; another user's file in a sticky directory; a file with other names that a
  // process holds locked) or keeps coming back; Conflict "file \"shown\": another pull (or
  // "another user's pull (uid U)") is writing it (…) and its partial file has not changed for
  // <stall> (…)" when the holder stalls (WaitForHolder), and "…: another user's pull (uid U) is
  // writing it (pid N, \"bdn\") through its partial file .bdn-partial-…; pull again once it has
  // ended" for a locked file this process cannot open (RemoveStranger).
  static Result<PartialFile> Open(int dir, const std::string& name, const std::string& tmp,
                                  const std::string& shown, const Clock& clock,
                                  std::chrono::milliseconds stall) {
    PartialFile p(dir, name, tmp, shown);
    // Counts the turns where something other than another pull took the name; one that waited
    // for another pull's lock or saw its partial file renamed into place is not counted.
    for (int strangers = 0;;) {
      if (strangers == 8) {
        return Err(FailedPreconditionError(p.what() + ": something else keeps taking its name"));
      }
      struct stat named;
      if (::fstatat(dir, p.tmp_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!Lockable(named)) {
          BDN_RETURN_IF_ERROR(p.RemoveStranger(named, clock, stall));
          ++strangers;
          continue;
        }
      } else if (errno != ENOENT) {  // only a failed fstatat's errno: a stale one was an error
        return Err(p.Error(errno));
      }
      // O_NONBLOCK: a FIFO put here after the check does not hang the open (it is removed below).
      p.fd_.Reset(::openat(dir, p.tmp_.c_str(),
                           O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
      if (!p.fd_) {
        if (errno == ELOOP || errno == EISDIR || errno == ENXIO) {  // replaced meanwhile
          ++strangers;
          continue;
        }
        return Err(p.Error(errno));
      }
      struct stat opened;
      if (::fstat(p.fd_.get(), &opened) != 0) return Err(p.Error(errno));
      if (!Lockable(opened)) {
        p.fd_.Reset();
        ++strangers;
        continue;  // replaced between the check and the open: checked (and removed) again
      }
      if (::flock(p.fd_.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) return Err(p.Error(errno));
        BDN_ASSIGN_OR_RETURN(bool locked, p.WaitForHolder(p.fd_.get(), opened, clock, stall));
        if (!locked) {
          p.fd_.Reset();
          continue;  // the other pull renamed it into place (or dropped it): a new one
        }
      }
      // Another pull may have renamed this partial file into place between our open and our
      // lock; then it is that file now, and we start a partial file of our own.
      const bool still_named = ::fstatat(dir, p.tmp_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0;
      if (!still_named && errno != ENOENT) return Err(p.Error(errno));
      if (still_named && named.st_dev == opened.st_dev && named.st_ino == opened.st_ino) {
        // Judged again now that it is ours: while another pull held it, that pull may have given
        // it its entry's mode (0644) before failing, and another user may have opened it then
        // (from an attacking helper). Removed while still locked: no other pull resumes from it.
        struct stat held;
        if (::fstat(p.fd_.get(), &held) != 0) return Err(p.Error(errno));
        if (Resumable(held)) break;
        ::unlinkat(dir, p.tmp_.c_str(), 0);
        p.fd_.Reset();
        ++strangers;
        continue;
      }
      p.fd_.Reset();
    }
    const int flags = ::fcntl(p.fd_.get(), F_GETFL);
    if (flags < 0 || ::fcntl(p.fd_.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return Err(p.Error(errno));
    }
    struct stat st;
    p.bytes_ = ::fstat(p.fd_.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    return p;
  }

  PartialFile(PartialFile&&) noexcept = default;

  int fd() const { return fd_.get(); }
  // Its size when opened: the bytes a previous pull left.
  uint64_t bytes() const { return bytes_; }
  // How messages name the partial file: "file \"<dest>/…/x\" (its partial file .bdn-partial-…)".
  std::string what() const { return "file \"" + shown_ + "\" (its partial file " + tmp_ + ")"; }
  // ErrnoError naming the partial file.
  Status Error(int err) const { return ErrnoError(what(), err); }

  // Removes it: its content is not worth resuming from.
  void Discard() {
    fd_.Reset();
    ::unlinkat(dir_, tmp_.c_str(), 0);
  }

  // Gives it `size_bytes`, entry `e`'s mode and recorded times, closes it and renames it into
  // place as the file, once its name still holds the inode written (checked while it is open
  // and locked). Errors: Error(errno) (the partial file is kept, but for a failed close or
  // rename, which remove it); FailedPrecondition "…: replaced while it was written" (nothing
  // is put in place); ErrnoError "file \"shown\"" for the rename.
  Status Commit(const Entry& e) {
    auto times = TimesOf(e);
    if (::ftruncate(fd_.get(), static_cast<off_t>(e.size_bytes)) != 0 ||
        ::fchmod(fd_.get(), e.mode) != 0 || (times && ::futimens(fd_.get(), times->data()) != 0)) {
      return Error(errno);
    }
    struct stat held, named;
    if (::fstat(fd_.get(), &held) != 0) return Error(errno);
    if (::fstatat(dir_, tmp_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        named.st_dev != held.st_dev || named.st_ino != held.st_ino) {
      return FailedPreconditionError(what() +
                                     ": replaced while it was written; nothing was put in place");
    }
    // The lock is held until the file is in place (by a second descriptor of the same open
    // file, which shares its flock): a pull waiting for it then finds the file, not the partial
    // file at its name with no one writing it, and never resumes from what is being renamed.
    UniqueFd lock(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!lock) return Error(errno);
    if (Status closed = fd_.Close(what()); !closed.ok()) {
      ::unlinkat(dir_, tmp_.c_str(), 0);
      return closed;
    }
    if (::renameat(dir_, tmp_.c_str(), dir_, name_.c_str()) != 0) {
      int err = errno;
      ::unlinkat(dir_, tmp_.c_str(), 0);
      return ErrnoError("file \"" + shown_ + "\"", err);
    }
    return Status::Ok();
  }

 private:
  PartialFile(int dir, const std::string& name, const std::string& tmp, const std::string& shown)
      : dir_(dir), name_(name), shown_(shown), tmp_(tmp) {}

  // A partial file a pull may resume from and write: a regular file of this user's, with no
  // other name (writing or chmod-ing a hard link would change a file outside the destination),
  // and with no permission bit for group or others, nor set-id or sticky bit (a pull makes it
  // 0600): another user who could open a file of ours (say, a 0644 file of an earlier pull,
  // renamed to this name in a directory of theirs) would read what is written into it, or hold
  // its lock to keep this pull waiting.
  static bool Resumable(const struct stat& st) { return Lockable(st) && (st.st_mode & 07077) == 0; }
  // A partial file whose lock is asked for before it is judged Resumable: a regular file of
  // this user's with one link, whatever its mode, as another pull gives the file its entry's
  // mode (0644, say) just before renaming it into place. Removed at once it would fail that pull
  // ("replaced while it was written"); so it is locked first (waited for while another pull
  // holds it), then judged, and removed only if it is not Resumable.
  static bool Lockable(const struct stat& st) {
    return S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == ::geteuid();
  }

  // Waits while another process holds the lock of the partial file open here as `fd` (`opened`:
  // its fstat), polling (every 5 ms at first, then less often, up to every 100 ms) on `clock`.
  // Returns true once `fd` holds the lock, false once the partial file's name no longer names it
  // (the holder renamed it into place, or removed it). The wait goes on as long as the file
  // changes (its size, blocks or mtime): a pull writing a large file is waited for however long
  // it takes. Errors: Conflict "file \"shown\": another pull is writing it (pid N, \"bdn\") and
  // its partial file .bdn-partial-… has not changed for 1m (stopped? pull again once it has
  // ended)" after `stall` without a change (the holder as /proc/locks names it, left out when it
  // cannot be told; named as HolderName says); ErrnoError naming the partial file.
  Result<bool> WaitForHolder(int fd, const struct stat& opened, const Clock& clock,
                             std::chrono::milliseconds stall) const {
    struct stat last = opened;
    SteadyTime deadline = clock.SteadyNow() + stall;
    // From 5 ms, doubling up to 100 ms: a small file another pull is writing is done soon.
    std::chrono::milliseconds poll(5);
    while (true) {
      clock.SleepFor(poll);
      poll = std::min(poll * 2, std::chrono::milliseconds(100));
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
      if (errno != EWOULDBLOCK && errno != EINTR) return Err(Error(errno));
      struct stat named, now;
      if (::fstatat(dir_, tmp_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return false;
        return Err(Error(errno));
      }
      if (named.st_dev != opened.st_dev || named.st_ino != opened.st_ino) return false;
      if (::fstat(fd, &now) != 0) return Err(Error(errno));
      // Not the ctime: a rename of the file away and back changes it, and is no sign of a writer.
      if (now.st_size != last.st_size || now.st_blocks != last.st_blocks ||
          now.st_mtim.tv_sec != last.st_mtim.tv_sec ||
          now.st_mtim.tv_nsec != last.st_mtim.tv_nsec) {
        last = now;
        deadline = clock.SteadyNow() + stall;
      } else if (clock.SteadyNow() >= deadline) {
        const std::string holder = FlockHolder(opened);
        return Err(ConflictError("file \"" + shown_ + "\": " + HolderName(opened.st_uid, holder) +
                                 " is writing it" + (holder.empty() ? "" : " (" + holder + ")") +
                                 " and its partial file " + tmp_ + " has not changed for " +
                                 FormatDuration(stall) +
                                 " (stopped? pull again once it has ended)"));
      }
    }
  }

  // Removes what is at the partial file's name but is not Lockable (`st`: its lstat). A regular
  // file is removed only while this process holds its lock (flock, through a descriptor of its
  // own, the name checked to be that file still), so that no pull is writing it: one that is
  // (another user's, in a shared directory; or one of ours hard-linked elsewhere) is waited for
  // as WaitForHolder waits, and a file with other names that a process holds is left alone. A
  // file this process cannot open (another user's 0600 file) is looked up in /proc/locks. Returns
  // OK once it is gone or something else is at the name (the caller looks again). Errors:
  // Conflict "file \"shown\": another user's pull (uid U) is writing it (pid N, \"bdn\") and its
  // partial file .bdn-partial-… has not changed for 1m (stopped? …)" (WaitForHolder's), or
  // "…: another user's pull (uid U) is writing it (pid N, \"bdn\") through its partial file
  // .bdn-partial-…; pull again once it has ended" when the file cannot be opened;
  // FailedPrecondition "file \"shown\" (its partial file …): a file with N names is in the way,
  // locked by another process (pid N, \"x\"); remove it, or pull elsewhere"; FailedPrecondition
  // for what cannot be removed (below); ErrnoError naming the partial file.
  Status RemoveStranger(const struct stat& st, const Clock& clock,
                        std::chrono::milliseconds stall) const {
    UniqueFd probe;  // held, with its lock, until the name is gone
    if (S_ISREG(st.st_mode)) {
      probe.Reset(
          ::openat(dir_, tmp_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
      if (probe) {
        struct stat opened;
        if (::fstat(probe.get(), &opened) != 0) return Error(errno);
        if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) return Status::Ok();
        if (::flock(probe.get(), LOCK_EX | LOCK_NB) != 0) {
          if (errno != EWOULDBLOCK) return Error(errno);
          if (opened.st_nlink != 1) {
            const std::string holder = FlockHolder(opened);
            return FailedPreconditionError(
                what() + ": a file with " + std::to_string(opened.st_nlink) +
                " names is in the way, locked by another process" +
                (holder.empty() ? "" : " (" + holder + ")") + "; remove it, or pull elsewhere");
          }
          BDN_ASSIGN_OR_RETURN(bool locked, WaitForHolder(probe.get(), opened, clock, stall));
          if (!locked) return Status::Ok();  // renamed into place, or gone
        }
        struct stat now;
        if (::fstatat(dir_, tmp_.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) {
          return errno == ENOENT ? Status::Ok() : Error(errno);
        }
        if (now.st_dev != opened.st_dev || now.st_ino != opened.st_ino) return Status::Ok();
      } else if (const std::string holder = FlockHolder(st); !holder.empty()) {
        return ConflictError("file \"" + shown_ + "\": " + HolderName(st.st_uid, holder) +
                             " is writing it (" + holder + ") through its partial file " + tmp_ +
                             "; pull again once it has ended");
      }
    }
    if (::unlinkat(dir_, tmp_.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0 ||
        errno == ENOENT) {
      return Status::Ok();
    }
    const int err = errno;
    if (err == ENOTEMPTY || err == EEXIST) {
      return FailedPreconditionError(what() + ": a directory is in the way; remove it");
    }
    if (err == EPERM || err == EACCES) {
      return FailedPreconditionError(
          what() + ": " +
          (st.st_uid != ::geteuid() ? "another user's file" : "a file that is not ours to use") +
          " is in the way and cannot be removed (" + std::strerror(err) + ")");
    }
    return ErrnoError(what(), err);
  }

  int dir_;
  std::string name_, shown_, tmp_;
  UniqueFd fd_;
  uint64_t bytes_ = 0;
};

// An inode (device, inode number).
using Inode = std::pair<dev_t, ino_t>;

// What FileWriter::WriteFile did with a file.
struct FileDone {
  bool written = false;           // false: the file in place already had the entry's content
  std::optional<Inode> replaced;  // the regular file that stood there and was replaced by a copy
};

// How many of the names the version gives a file in this pull (itself and its hardlinks pulled
// too) name the inode `st`: 1 and its hardlinks that do.
using OwnNamesOf = std::function<Result<nlink_t>(const struct stat& st)>;

// Whether this user can neither remove nor rename over `st` (an lstat) in a directory `parent`
// (its fstat): another user's, in a sticky directory that is not this user's (root can).
bool StuckInStickyDirectory(const struct stat& st, const struct stat& parent) {
  const uid_t me = ::geteuid();
  return me != 0 && st.st_uid != me && (parent.st_mode & S_ISVTX) != 0 && parent.st_uid != me;
}

// Writes the regular files of a pull (WriteFile), several at once.
class FileWriter {
 public:
  FileWriter(const VersionView& view, const PullOptions& options, TransferCounters* counters)
      : view_(view),
        overwrite_(options.existing == PullOptions::Existing::kOverwrite),
        reader_(view.store(), options.reads),
        counters_(counters),
        clock_(options.clock ? options.clock : Clock::Real()),
        stall_(options.writer_stall_time) {}

  // Writes entry `e` as `name` in the directory `dir`, assembled in its partial file
  // `partial_name` there; `shown` names it in messages; `in`: what
  // stands there (LookInPlace); `own_names`: how many of the names the version gives it in this
  // pull (itself and its hardlinks) are names of the file in place, and `own_names_of` counts
  // them for another inode; `hashed`: the inode CheckConflicts found with the entry's content, if
  // any. Nothing is renamed into place before its size and whole-file BLAKE3 are the entry's.
  // Once it holds the partial file's lock (having waited for another pull's, PartialFile::Open),
  // it looks at the file's place again: what another pull put there meanwhile is kept when it
  // has the entry's content (and replaced by a copy where a file with it would be), and is a
  // Conflict "file \"shown\": another pull put other content there while this one ran (…)"
  // otherwise, --overwrite or not (replacing it would mix two versions without a word). Errors:
  // those of Pull.
  Result<FileDone> WriteFile(const Entry& e, int dir, const std::string& name,
                             const std::string& partial_name, const std::string& shown,
                             const InPlace& in, nlink_t own_names, const OwnNamesOf& own_names_of,
                             std::optional<Hashed> hashed) {
    FileDone done;
    if (in.exists) {
      BDN_ASSIGN_OR_RETURN(bool kept, KeepOrRefuse(e, in, own_names, hashed, shown, overwrite_));
      if (kept) return done;
      if (in.Regular()) done.replaced = Inode(in.st.st_dev, in.st.st_ino);
    }
    // The chunk list first: a file whose list is missing, corrupt or unreachable gets no partial
    // file (an empty one would be no help to a later pull).
    BDN_ASSIGN_OR_RETURN(auto fc, view_.ChunksOf(e));
    BDN_ASSIGN_OR_RETURN(PartialFile partial,
                         PartialFile::Open(dir, name, partial_name, shown, *clock_, stall_));
    // Another pull renames a partial file into place only while it holds its lock, which is now
    // ours: what stands there now stays there until this pull's rename.
    struct stat now_st;
    const bool now_exists = ::fstatat(dir, name.c_str(), &now_st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!now_exists && errno != ENOENT) return Err(ErrnoError("path \"" + shown + "\"", errno));
    if (now_exists != in.exists ||
        (now_exists && (now_st.st_dev != in.st.st_dev || now_st.st_ino != in.st.st_ino))) {
      BDN_ASSIGN_OR_RETURN(InPlace now, LookInPlace(dir, name, shown));
      done.replaced.reset();
      if (now.exists) {
        nlink_t now_names = 1;
        if (now.Regular()) {
          BDN_ASSIGN_OR_RETURN(now_names, own_names_of(now.st));
        }
        auto kept = KeepOrRefuse(e, now, now_names, std::nullopt, shown, false);
        if (!kept) {
          if (kept.error().code() != StatusCode::kAlreadyExists) return Err(kept.error());
          if (partial.bytes() == 0) partial.Discard();  // this pull's own, empty
          return Err(ConflictError("file \"" + shown +
                                   "\": another pull put other content there while this one ran "
                                   "(a pull of another version into the same directory?)"));
        }
        if (*kept) {
          partial.Discard();  // the file is in place: nothing to resume
          return done;
        }
        // Another user's pull put it there (in a sticky directory): found before the download,
        // as CheckConflicts finds it up front, not by the rename that cannot replace it.
        struct stat parent;
        if (::fstat(dir, &parent) == 0 && StuckInStickyDirectory(now.st, parent)) {
          if (partial.bytes() == 0) partial.Discard();  // this pull's own, empty
          return Err(FailedPreconditionError(
              "file \"" + shown +
              "\": another user's file in a sticky directory is in the way and cannot be "
              "replaced (remove it, or pull elsewhere)"));
        }
        if (now.Regular()) done.replaced = Inode(now.st.st_dev, now.st.st_ino);
      }
    }
    BDN_ASSIGN_OR_RETURN(uint64_t written, Fill(e, fc->chunks, partial));
    if (written != e.size_bytes) {
      partial.Discard();  // a file whose size or digest is wrong is not worth resuming from
      return Err(CorruptionError("file \"" + e.path + "\": its chunks hold " +
                                 std::to_string(written) + " bytes, not its size " +
                                 std::to_string(e.size_bytes)));
    }
    BDN_RETURN_IF_ERROR(partial.Commit(e));
    if (counters_) ++counters_->files_done;
    done.written = true;
    return done;
  }

 private:
  // Judges what stands at entry `e`'s place (`in`, which exists; `own_names`, `hashed` and
  // `shown` as WriteFile's): true when it is kept (this user's, its only names the version's,
  // with the entry's content: given the entry's mode and mtime); false when it is to be replaced
  // (with `overwrite`, or a file with the entry's content that is a hard link or another user's).
  // Errors: AlreadyExists "file \"shown\": exists with other content (use --overwrite)" (or
  // another kind of thing in the way, or a file that cannot be read to compare) without
  // `overwrite`; those of KeepInPlace.
  Result<bool> KeepOrRefuse(const Entry& e, const InPlace& in, nlink_t own_names,
                            std::optional<Hashed> hashed, const std::string& shown,
                            bool overwrite) {
    const struct stat& st = in.st;
    // Kept only when it is this user's and its only names are those the version gives it (its
    // own hardlinks, linked by an earlier pull): setting the mode and time of a hard link from
    // elsewhere or of another user's file would change a file outside the destination (or
    // hand it to that user); such a file is replaced by a fresh copy instead.
    if (in.Regular() && static_cast<uint64_t>(st.st_size) == e.size_bytes &&
        st.st_nlink == own_names && st.st_uid == ::geteuid()) {
      const bool same = hashed && hashed->dev == st.st_dev && hashed->ino == st.st_ino;
      auto d = same ? std::optional<Digest>(e.digest) : HashFd(in.fd.get());
      if (d && *d == e.digest) {
        BDN_RETURN_IF_ERROR(KeepInPlace(e, in, shown));
        if (counters_) {
          counters_->bytes_done += e.size_bytes;
          ++counters_->files_done;
        }
        return true;
      }
    }
    if (!overwrite && !SameContentElsewhere(in, e, own_names)) {
      if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == e.size_bytes &&
          !in.Regular() && in.open_errno != 0) {
        return Err(AlreadyExistsError("file \"" + shown +
                                      "\": exists and cannot be read to compare with the "
                                      "version (" +
                                      std::strerror(in.open_errno) + "; use --overwrite)"));
      }
      return Err(AlreadyExistsError("file \"" + shown + "\": " + InTheWay(st, EntryKind::kFile)));
    }
    return false;
  }

  // Whether the file in place (`in`) has entry `e`'s content but is a hard link or another
  // user's file: it is then replaced without --overwrite (nothing of it is lost).
  static bool SameContentElsewhere(const InPlace& in, const Entry& e, nlink_t own_names) {
    const struct stat& st = in.st;
    if (!in.Regular() || static_cast<uint64_t>(st.st_size) != e.size_bytes) return false;
    if (st.st_nlink == own_names && st.st_uid == ::geteuid()) return false;  // the caller's
    auto d = HashFd(in.fd.get());
    return d && *d == e.digest;
  }

  // Brings `partial` to the content of `chunks` (entry `e`'s): keeps its leading chunks that
  // hash to their ids, fetches the rest, and checks the whole-file BLAKE3 over exactly the
  // bytes it holds. Returns the bytes it holds. On a failed read the partial file stays for a
  // later pull (unless it holds nothing); on a digest mismatch it is discarded.
  Result<uint64_t> Fill(const Entry& e, const std::vector<ChunkRef>& chunks, PartialFile& partial) {
    const int fd = partial.fd();
    const uint64_t partial_bytes = partial.bytes();
    Blake3Hasher h;
    uint64_t off = 0;
    // The leading chunks already in the partial file are kept if they hash to their ids; from
    // the first that does not, everything is fetched and rewritten.
    size_t first_fetch = 0;
    std::vector<uint8_t> have;
    bool full = false;  // a write found the file system full (ENOSPC, EDQUOT)
    for (; first_fetch < chunks.size(); ++first_fetch) {
      const ChunkRef& c = chunks[first_fetch];
      if (off + c.size_bytes > partial_bytes || off + c.size_bytes > e.size_bytes) break;
      have.resize(c.size_bytes);
      if (::pread(fd, have.data(), have.size(), static_cast<off_t>(off)) !=
              static_cast<ssize_t>(have.size()) ||
          Digest::Of(have) != c.id) {
        break;
      }
      h.Update(have);
      off += c.size_bytes;
      if (counters_) counters_->bytes_done += c.size_bytes;
    }
    Status read = reader_.Read(
        std::span(chunks).subspan(first_fetch),
        [&](size_t, Result<std::span<const uint8_t>> bytes) -> Status {
          if (!bytes) return bytes.error().WithPrefix("file \"" + e.path + "\"");
          if (bytes->size() > e.size_bytes - off) {
            return CorruptionError("file \"" + e.path + "\": its chunks hold more than its size " +
                                   std::to_string(e.size_bytes) + " bytes");
          }
          h.Update(*bytes);
          // An all-zero chunk is left a hole; over old partial bytes (kept or not: those after
          // the first mismatch may hold anything) it is punched out, or written where the file
          // system cannot punch.
          const bool write =
              !AllZero(*bytes) ||
              (off < partial_bytes &&
               ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                           static_cast<off_t>(bytes->size())) != 0);
          if (write) {
            Status written = PWriteAll(fd, *bytes, off, partial.what());
            full = written.code() == StatusCode::kFailedPrecondition;  // ErrnoError's for those
            BDN_RETURN_IF_ERROR(written);
          }
          off += bytes->size();
          if (counters_) counters_->bytes_done += bytes->size();
          return Status::Ok();
        });
    if (!read.ok()) {
      // A partial file that holds nothing (the first chunk failed, e.g. shorter than the version
      // says) is no help to a later pull.
      if (off == 0 && partial_bytes == 0) {
        partial.Discard();
      } else if (full) {
        return Err(FailedPreconditionError(read.message() +
                                           " (the partial file is kept, so that the next pull "
                                           "resumes from it; remove it to free the space)"));
      }
      return Err(read);
    }
    if (off == e.size_bytes && h.Finalize() != e.digest) {
      partial.Discard();
      return Err(CorruptionError("file \"" + e.path + "\": content does not match its digest " +
                                 e.digest.ToString()));
    }
    return off;
  }

  const VersionView& view_;
  const bool overwrite_;
  ChunkReader reader_;
  TransferCounters* counters_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds stall_;
};

// --overwrite's removal of what stands where an entry goes, in the cursor's directory: a file or
// symlink is unlinked, a directory only when it is empty, so that a pull never deletes files the
// version does not name. A missing `name` is not an error. Errors: FailedPrecondition "path
// \"dest/x\": a directory that is not empty is in the way (--overwrite replaces files and
// symlinks, not a directory's contents)"; ErrnoError naming the path.
Status RemoveInTheWay(DirCursor& cursor, const std::string& name) {
  struct stat st;
  if (::fstatat(cursor.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok()
                           : ErrnoError("path \"" + cursor.Display(name) + "\"", errno);
  }
  if (::unlinkat(cursor.fd(), name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0 ||
      errno == ENOENT) {
    return Status::Ok();
  }
  if (errno == ENOTEMPTY || errno == EEXIST) {
    return FailedPreconditionError("path \"" + cursor.Display(name) +
                                   "\": a directory that is not empty is in the way "
                                   "(--overwrite replaces files and symlinks, not a directory's "
                                   "contents)");
  }
  return ErrnoError("path \"" + cursor.Display(name) + "\"", errno);
}

// Whether the directory `name` in `dir` holds anything; looked at without following a symlink.
// Errors: ErrnoError "path \"shown\"".
Result<bool> HoldsAnything(int dir, const std::string& name, const std::string& shown) {
  BDN_ASSIGN_OR_RETURN(DirFd d, DirFd::OpenAt(dir, name, shown));
  BDN_ASSIGN_OR_RETURN(auto names, ListNames(d.get(), shown));
  return !names.empty();
}

// A directory below DIR that a pull writes into must be this user's or root's: another user's
// (made there before the pull, e.g. in a sticky directory all may write) could have its entries
// swapped for symlinks or links while the pull writes, and the pull would hand that user what it
// writes. Errors: FailedPrecondition "directory \"shown\": another user's (uid N); a pull writes
// into no other user's directory below DIR (remove it, or pull into it as DIR)".
Status CheckOwnDirectory(const struct stat& st, const std::string& shown) {
  if (st.st_uid == 0 || st.st_uid == ::geteuid()) return Status::Ok();
  return FailedPreconditionError("directory \"" + shown + "\": another user's (uid " +
                                 std::to_string(st.st_uid) +
                                 "); a pull writes into no other user's directory below DIR "
                                 "(remove it, or pull into it as DIR)");
}

// What already stands where `plan` writes and is in the way, found before anything is written,
// so that a refused pull changes nothing (it wrote the files before the first conflict, or with
// --overwrite removed and wrote entries before a directory that is not empty). Without
// `overwrite`: whatever differs from the version. Either way: what --overwrite cannot replace
// either: a directory that is not empty where a file, symlink or hardlink goes, another user's
// directory where a directory goes (CheckOwnDirectory), and (not as root)
// another user's file or symlink in a sticky directory that is not this user's, which would
// have to be removed or replaced (an identical one too: it is not kept, being another user's).
// Without `overwrite`, adds the files found identical to `identical` with the inode hashed (its
// hash is not taken again). Errors: those that --overwrite cannot help first (FailedPrecondition
// "path \"dest/x\": a directory that is not empty is in the way (…)", "file \"dest/x\": another
// user's file in a sticky directory is in the way and cannot be replaced (…)"), then the
// conflicts (AlreadyExists, as Pull gives them); the first one's message, followed by the next
// few paths when there are more ("…; also in the way: \"p\", … (N in all)"); those of the
// cursor; `check`'s (PullOptions::check_directory, when not empty), at once, on every directory
// already there that the pull would enter (the parent of any entry) or where a directory of the
// version goes (its mode and times would be set on it).
Status CheckConflicts(const PullPlan& plan, DirCursor& cursor, bool overwrite,
                      const DirectoryCheck& check, HashedFiles& identical) {
  std::vector<std::pair<Status, std::string>> stuck, conflicts;  // the error, the path
  auto conflict = [&](const char* kind, const std::string& path, const std::string& why) {
    if (overwrite) return;
    conflicts.emplace_back(AlreadyExistsError(std::string(kind) + " \"" + path + "\": " + why),
                           path);
  };
  auto not_empty = [&](const std::string& path) {
    stuck.emplace_back(FailedPreconditionError(
                           "path \"" + path +
                           "\": a directory that is not empty is in the way (--overwrite replaces "
                           "files and symlinks, not a directory's contents)"),
                       path);
  };
  struct stat parent;
  // Whether something stands where `rel` goes; leaves the cursor in its parent, `parent` and
  // `st` filled. Nothing is there below a path where a file or symlink stands in a directory's
  // way (reported as such): the cursor does not go through it.
  auto look = [&](const std::string& rel, Place& at, struct stat& st) -> Result<bool> {
    at = PlaceOf(plan.local(rel));
    Status moved = cursor.MoveTo(at.parent);
    if (moved.code() == StatusCode::kNotFound || moved.code() == StatusCode::kFailedPrecondition) {
      return false;
    }
    BDN_RETURN_IF_ERROR(moved);
    if (::fstat(cursor.fd(), &parent) != 0) {
      return Err(ErrnoError("directory \"" + cursor.Display() + "\"", errno));
    }
    if (check) BDN_RETURN_IF_ERROR(check(parent, cursor.Display()));
    return ::fstatat(cursor.fd(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  };
  // What stands at `at` (`st`) and must go: refused when it cannot (a directory that holds
  // anything; another user's in a sticky directory); `kind` names it in messages.
  auto must_go = [&](const char* kind, const Place& at, const struct stat& st) -> Status {
    const std::string path = cursor.Display(at.name);
    if (S_ISDIR(st.st_mode)) {
      BDN_ASSIGN_OR_RETURN(bool full, HoldsAnything(cursor.fd(), at.name, path));
      if (full) {
        not_empty(path);
        return Status::Ok();
      }
    }
    if (StuckInStickyDirectory(st, parent)) {
      stuck.emplace_back(
          FailedPreconditionError(std::string(kind) + " \"" + path + "\": another user's " +
                                  (S_ISDIR(st.st_mode)   ? "directory"
                                   : S_ISLNK(st.st_mode) ? "symlink"
                                                         : "file") +
                                  " in a sticky directory is in the way and "
                                  "cannot be replaced (remove it, or pull "
                                  "elsewhere)"),
          path);
    }
    return Status::Ok();
  };
  // A conflict unless what is there cannot go anyway (then it is reported as such).
  auto refuse = [&](const char* kind, const Place& at, const struct stat& st,
                    const std::string& why) -> Status {
    const size_t before = stuck.size();
    BDN_RETURN_IF_ERROR(must_go(kind, at, st));
    if (stuck.size() == before) conflict(kind, cursor.Display(at.name), why);
    return Status::Ok();
  };
  Place at;
  struct stat st;
  for (const Entry* e : plan.entries) {
    if (e->kind != EntryKind::kDirectory && e->kind != EntryKind::kSymlink) continue;
    BDN_ASSIGN_OR_RETURN(bool exists, look(e->path, at, st));
    if (!exists) continue;
    if (e->kind == EntryKind::kDirectory) {
      if (!S_ISDIR(st.st_mode)) {
        BDN_RETURN_IF_ERROR(
            refuse("path", at, st, "exists and is not a directory (use --overwrite)"));
        continue;
      }
      if (check) BDN_RETURN_IF_ERROR(check(st, cursor.Display(at.name)));
      if (Status s = CheckOwnDirectory(st, cursor.Display(at.name)); !s.ok()) {
        stuck.emplace_back(s, cursor.Display(at.name));
      }
      continue;
    }
    std::string cur(static_cast<size_t>(st.st_size) + 1, '\0');
    const ssize_t n = S_ISLNK(st.st_mode)
                          ? ::readlinkat(cursor.fd(), at.name.c_str(), cur.data(), cur.size())
                          : -1;
    if (n < 0 || std::string(cur.data(), static_cast<size_t>(n)) != e->target) {
      BDN_RETURN_IF_ERROR(refuse("path", at, st, InTheWay(st, EntryKind::kSymlink)));
    }
  }
  for (const Entry* f : plan.files) {
    BDN_ASSIGN_OR_RETURN(bool exists, look(f->path, at, st));
    if (!exists) continue;
    const std::string path = cursor.Display(at.name);
    if (st.st_uid != ::geteuid() || overwrite || S_ISDIR(st.st_mode)) {
      // Another user's file is replaced even when identical; with --overwrite anything else.
      const size_t before = stuck.size();
      BDN_RETURN_IF_ERROR(must_go("file", at, st));
      if (stuck.size() > before || overwrite) continue;
    }
    BDN_ASSIGN_OR_RETURN(InPlace in, LookInPlace(cursor.fd(), at.name, path));
    if (S_ISREG(in.st.st_mode) && static_cast<uint64_t>(in.st.st_size) == f->size_bytes) {
      auto d = in.Regular() ? HashFd(in.fd.get()) : std::nullopt;
      if (d && *d == f->digest) {
        identical[f] = Hashed{in.st.st_dev, in.st.st_ino};
        continue;
      }
      if (!in.Regular() && in.open_errno != 0) {
        conflict("file", path,
                 std::string("exists and cannot be read to compare with the "
                             "version (") +
                     std::strerror(in.open_errno) + "; use --overwrite)");
        continue;
      }
    }
    conflict("file", path, InTheWay(in.st, EntryKind::kFile));
  }
  for (const Entry* l : plan.links) {
    BDN_ASSIGN_OR_RETURN(bool exists, look(l->path, at, st));
    if (!exists) continue;
    const struct stat link = st;
    Place target;
    BDN_ASSIGN_OR_RETURN(bool target_exists, look(l->target, target, st));
    if (target_exists && st.st_dev == link.st_dev && st.st_ino == link.st_ino) continue;
    BDN_ASSIGN_OR_RETURN(bool still, look(l->path, at, st));  // back in its directory
    if (still) BDN_RETURN_IF_ERROR(refuse("file", at, st, InTheWay(st, EntryKind::kFile)));
  }
  stuck.insert(stuck.end(), conflicts.begin(), conflicts.end());
  if (stuck.empty()) return Status::Ok();
  if (stuck.size() == 1) return stuck.front().first;
  std::string more;
  for (size_t i = 1; i < stuck.size() && i <= 5; ++i) {
    more += std::string(i > 1 ? ", " : "") + "\"" + stuck[i].second + "\"";
  }
  if (stuck.size() > 6) more += ", …";
  return Status(stuck.front().first.code(), stuck.front().first.message() +
                                                "; also in the way: " + more + " (" +
                                                std::to_string(stuck.size()) + " in all)");
}

// Whether `name` in `dir` (`st`: its lstat) is a symlink to `target`.
bool IsSymlinkTo(int dir, const std::string& name, const struct stat& st,
                 const std::string& target) {
  if (!S_ISLNK(st.st_mode)) return false;
  std::string cur(static_cast<size_t>(st.st_size) + 1, '\0');
  const ssize_t n = ::readlinkat(dir, name.c_str(), cur.data(), cur.size());
  return n >= 0 && std::string_view(cur.data(), static_cast<size_t>(n)) == target;
}

// Creates the directories and symlinks of `plan` under the cursor's root, in path order (parents
// before children). A symlink or file where a directory is needed stops the cursor (it never
// goes through a symlink); a directory made meanwhile where one goes is checked again (`check`,
// CheckOwnDirectory). `symlinks_made` counts the symlinks it made. Errors: those of Pull.
Status MakeDirectoriesAndSymlinks(const PullPlan& plan, DirCursor& cursor, bool overwrite,
                                  const DirectoryCheck& check, uint64_t& symlinks_made) {
  for (const Entry* e : plan.entries) {
    if (e->kind != EntryKind::kDirectory && e->kind != EntryKind::kSymlink) continue;
    const Place at = PlaceOf(plan.local(e->path));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    const int dir = cursor.fd();
    struct stat st;
    bool exists = ::fstatat(dir, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (e->kind == EntryKind::kDirectory) {
      if (exists && S_ISDIR(st.st_mode)) {  // checked by CheckConflicts, or made meanwhile
        if (check) BDN_RETURN_IF_ERROR(check(st, cursor.Display(at.name)));
        BDN_RETURN_IF_ERROR(CheckOwnDirectory(st, cursor.Display(at.name)));
      }
      if (exists && !S_ISDIR(st.st_mode)) {
        if (!overwrite) {
          return AlreadyExistsError("path \"" + cursor.Display(at.name) +
                                    "\": exists and is not a directory (use --overwrite)");
        }
        BDN_RETURN_IF_ERROR(RemoveInTheWay(cursor, at.name));
        exists = false;
      }
      if (!exists && ::mkdirat(cursor.fd(), at.name.c_str(), e->mode | 0700) != 0) {
        // Made meanwhile by another pull into this directory: checked as one already there.
        const int err = errno;
        if (err != EEXIST || ::fstatat(dir, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode)) {
          return ErrnoError("directory \"" + cursor.Display(at.name) + "\"", err);
        }
        if (check) BDN_RETURN_IF_ERROR(check(st, cursor.Display(at.name)));
        BDN_RETURN_IF_ERROR(CheckOwnDirectory(st, cursor.Display(at.name)));
      }
      continue;
    }
    if (exists) {
      if (IsSymlinkTo(dir, at.name, st, e->target)) {
        BDN_RETURN_IF_ERROR(
            RestoreMtime(*e, dir, at.name, "symlink", cursor.Display(at.name), &st));
        continue;
      }
      if (!overwrite) {
        return AlreadyExistsError("path \"" + cursor.Display(at.name) +
                                  "\": " + InTheWay(st, EntryKind::kSymlink));
      }
      BDN_RETURN_IF_ERROR(RemoveInTheWay(cursor, at.name));
    }
    if (::symlinkat(e->target.c_str(), cursor.fd(), at.name.c_str()) != 0) {
      // Made meanwhile by another pull of the same symlink: kept as one already there.
      const int err = errno;
      if (err != EEXIST || ::fstatat(dir, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !IsSymlinkTo(dir, at.name, st, e->target)) {
        return ErrnoError("symlink \"" + cursor.Display(at.name) + "\"", err);
      }
    } else {
      ++symlinks_made;
    }
    BDN_RETURN_IF_ERROR(RestoreMtime(*e, dir, at.name, "symlink", cursor.Display(at.name)));
  }
  return Status::Ok();
}

// Inodes.
using InodeSet = std::set<Inode>;

// How many of `links` (the version's hardlinks to a file, pulled too) already name the inode
// `st` in the destination, each looked at without following a symlink (the `others` cursor, opened
// at `cursor`'s root when first needed, visits their directories). Errors: those of the cursor.
Result<nlink_t> OwnLinksTo(const struct stat& st, const std::vector<const Entry*>& links,
                           const PullPlan& plan, const DirCursor& cursor,
                           std::optional<DirCursor>& others) {
  nlink_t n = 0;
  for (const Entry* l : links) {
    if (!others) {
      BDN_ASSIGN_OR_RETURN(auto c, cursor.OpenAnother());
      others.emplace(std::move(c));
    }
    const Place at = PlaceOf(plan.local(l->path));
    Status moved = others->MoveTo(at.parent);
    if (moved.code() == StatusCode::kNotFound || moved.code() == StatusCode::kFailedPrecondition) {
      continue;  // its directory is not there (yet): not a name of this file
    }
    BDN_RETURN_IF_ERROR(moved);
    struct stat ls;
    if (::fstatat(others->fd(), at.name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
        ls.st_dev == st.st_dev && ls.st_ino == st.st_ino) {
      ++n;
    }
  }
  return n;
}

// Writes the files of `plan`, up to `jobs` at once, in path order; the files of one directory
// share one descriptor of it, and this thread owns the cursor. Adds to `result`, and to
// `replaced` the inodes of regular files that stood in place and were replaced by a copy.
// Errors: the first of the files' (the others still finish).
Status WriteFiles(const PullPlan& plan, DirCursor& cursor, FileWriter& writer, int jobs,
                  bool overwrite, const HashedFiles& identical, PullResult& result,
                  InodeSet& replaced) {
  ThreadPool pool(jobs, static_cast<size_t>(jobs) * 2);
  // Target path -> its hardlinks pulled too.
  std::unordered_map<std::string, std::vector<const Entry*>> hardlinks;
  for (const Entry* l : plan.links) hardlinks[l->target].push_back(l);
  std::optional<DirCursor> others;
  // The root of the cursors with which the file tasks count a file's names (OwnLinksTo), on a
  // file another pull put in place meanwhile: only its (const) OpenAnother is called, from any
  // thread.
  BDN_ASSIGN_OR_RETURN(const DirCursor links_root, cursor.OpenAnother());
  std::vector<std::future<Result<FileDone>>> futures;
  Status first;
  for (const Entry* f : plan.files) {
    Place at = PlaceOf(plan.local(f->path));
    auto here = cursor.Share(at.parent);
    if (!here) {
      first = here.error();
      break;
    }
    std::string shown = cursor.Display(at.name);
    // What stands there is looked at (and a regular file opened) here, by the cursor's owner; a
    // directory in the way is removed before the file task.
    auto in = LookInPlace(cursor.fd(), at.name, shown);
    if (!in) {
      first = in.error();
      break;
    }
    if (in->exists && S_ISDIR(in->st.st_mode)) {
      first =
          overwrite
              ? RemoveInTheWay(cursor, at.name)
              : AlreadyExistsError("file \"" + shown + "\": " + InTheWay(in->st, EntryKind::kFile));
      if (!first.ok()) break;
      in->exists = false;
    }
    // The names of the file in place that the version gives it: a link is told by its inode,
    // not counted (a name from outside must not pass for one of the version's hardlinks).
    nlink_t own_names = 1;
    const auto linked = hardlinks.find(f->path);
    if (in->Regular() && linked != hardlinks.end()) {
      auto n = OwnLinksTo(in->st, linked->second, plan, cursor, others);
      if (!n) {
        first = n.error();
        break;
      }
      own_names += *n;
    }
    OwnNamesOf own_names_of = [&plan, &links_root,
                               links = linked == hardlinks.end() ? nullptr : &linked->second](
                                  const struct stat& st) -> Result<nlink_t> {
      if (!links) return nlink_t{1};
      std::optional<DirCursor> walker;
      BDN_ASSIGN_OR_RETURN(nlink_t n, OwnLinksTo(st, *links, plan, links_root, walker));
      return n + 1;
    };
    const auto hashed = identical.find(f);
    futures.push_back(pool.Submit(
        [&writer, f, here = *here, name = std::move(at.name), &partial = plan.partials.at(f),
         shown = std::move(shown), in = std::move(*in), own_names,
         own_names_of = std::move(own_names_of),
         hashed = hashed == identical.end() ? std::nullopt : std::optional(hashed->second)] {
          return writer.WriteFile(*f, here->get(), name, partial, shown, in, own_names,
                                  own_names_of, hashed);
        }));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    auto r = futures[i].get();
    if (!r) {
      if (first.ok()) first = r.error();
    } else if (r->written) {
      ++result.files_written;
      result.bytes_written += plan.files[i]->size_bytes;
      if (r->replaced) replaced.insert(*r->replaced);
    } else {
      ++result.files_skipped;
    }
  }
  return first;
}

// Links the hardlinks of `plan` to their targets (a second cursor goes to each target's
// directory). A name of an inode in `replaced` (a file this pull replaced by a copy of its own,
// e.g. one with a name outside the destination) is linked to the copy without --overwrite.
// Errors: those of Pull.
Status LinkHardlinks(const PullPlan& plan, DirCursor& cursor, bool overwrite,
                     const InodeSet& replaced) {
  std::optional<DirCursor> targets;
  for (const Entry* e : plan.links) {
    if (!targets) {
      BDN_ASSIGN_OR_RETURN(auto t, cursor.OpenAnother());
      targets.emplace(std::move(t));
    }
    const Place at = PlaceOf(plan.local(e->path));
    const Place target = PlaceOf(plan.local(e->target));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    BDN_RETURN_IF_ERROR(targets->MoveTo(target.parent));
    struct stat a, b;
    const bool exists = ::fstatat(cursor.fd(), at.name.c_str(), &a, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && ::fstatat(targets->fd(), target.name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      continue;
    }
    if (exists) {
      if (!overwrite && !(S_ISREG(a.st_mode) && replaced.contains({a.st_dev, a.st_ino}))) {
        return AlreadyExistsError("file \"" + cursor.Display(at.name) +
                                  "\": " + InTheWay(a, EntryKind::kFile));
      }
      BDN_RETURN_IF_ERROR(RemoveInTheWay(cursor, at.name));
    }
    if (::linkat(targets->fd(), target.name.c_str(), cursor.fd(), at.name.c_str(), 0) != 0) {
      // Linked meanwhile by another pull of the same version: kept.
      const int err = errno;
      if (err != EEXIST || ::fstatat(cursor.fd(), at.name.c_str(), &a, AT_SYMLINK_NOFOLLOW) != 0 ||
          ::fstatat(targets->fd(), target.name.c_str(), &b, AT_SYMLINK_NOFOLLOW) != 0 ||
          a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        return ErrnoError("hardlink \"" + cursor.Display(at.name) + "\"", err);
      }
    }
  }
  return Status::Ok();
}

// Directory modes and recorded mtimes, deepest first, so read-only directories do not block
// their children and no later write inside moves a directory's mtime; each only where it
// differs, so that a pull with nothing to do changes nothing (and works on a read-only file
// system, or in a directory of root's that is already right). Each is checked (`check`, on its
// descriptor) before anything is changed on it. Errors: ErrnoError "directory \"dest/x\"";
// `check`'s.
Status SetDirectoryModesAndTimes(const PullPlan& plan, DirCursor& cursor,
                                 const DirectoryCheck& check) {
  for (auto it = plan.entries.rbegin(); it != plan.entries.rend(); ++it) {
    if ((*it)->kind != EntryKind::kDirectory) continue;
    const Place at = PlaceOf(plan.local((*it)->path));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    BDN_ASSIGN_OR_RETURN(DirFd d, DirFd::OpenAt(cursor.fd(), at.name, cursor.Display(at.name)));
    auto times = TimesOf(**it);
    struct stat st;
    if (::fstat(d.get(), &st) != 0) {
      return ErrnoError("directory \"" + cursor.Display(at.name) + "\"", errno);
    }
    if (check) BDN_RETURN_IF_ERROR(check(st, cursor.Display(at.name)));
    if (((st.st_mode & 07777) != (*it)->mode && ::fchmod(d.get(), (*it)->mode) != 0) ||
        (times && !SameMtime(st, *times) && ::futimens(d.get(), times->data()) != 0)) {
      return ErrnoError("directory \"" + cursor.Display(at.name) + "\"", errno);
    }
  }
  return Status::Ok();
}

// The directory `dest`, opened by walking it (base/path_walk.h), made with its missing
// directories if need be: a symlink on it is followed only when this user's or root's, so
// another user's link (in a shared directory, say) never decides where the files go, even one
// swapped in meanwhile. Errors: those of OpenDirectoryPath, with FailedPrecondition "directory
// \"dest\": /tmp/shared/d is a symlink owned by uid 1001 (mallory), not by this user or root; give
// the directory it names (\"/root/x\") if that is where the files go"; `check`'s (PullOptions::
// check_directory), on the directories walked and then on `dest` and each directory above it.
Result<DirFd> OpenDestination(const fs::path& dest, const DirectoryCheck& check) {
  const std::string shown = "directory \"" + dest.string() + "\"";
  PathWalk walk;
  walk.missing = PathWalk::Missing::kCreate;
  walk.refuse_symlink = [&shown](const ForeignSymlink& l) {
    return FailedPreconditionError(shown + ": " + DescribeForeignSymlink(l) +
                                   "; give the directory it names (\"" + l.target +
                                   "\") if that is where the files go");
  };
  if (check)
    walk.check_directory = [&check, &dest](const struct stat& st, const std::string&) {
      return check(st, dest.string());
    };
  BDN_ASSIGN_OR_RETURN(WalkedDirectory d, OpenDirectoryPath(dest, shown, walk));
  if (check) {
    // Up from the destination as the kernel sees it (out of a bind mount to where it is mounted),
    // so that every path to a refused directory is refused.
    UniqueFd at(::openat(d.fd.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat st, up_st;
    if (!at || ::fstat(at.get(), &st) != 0) return Err(ErrnoError(shown, errno));
    while (true) {
      BDN_RETURN_IF_ERROR(check(st, dest.string()));
      UniqueFd up(::openat(at.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!up || ::fstat(up.get(), &up_st) != 0) return Err(ErrnoError(shown, errno));
      if (up_st.st_dev == st.st_dev && up_st.st_ino == st.st_ino) break;  // "/"
      at = std::move(up);
      st = up_st;
    }
  }
  return DirFd(d.fd.Release());
}

}  // namespace

std::string PartialFileName(std::string_view name, int attempt) {
  if (attempt == 0) return ".bdn-partial-" + Digest::Of(name).Hex().substr(0, 32);
  // A name holds no NUL, so no name and attempt give the bytes of another's.
  std::string salted(name);
  salted += '\0';
  salted += std::to_string(attempt);
  return ".bdn-partial-" + Digest::Of(salted).Hex().substr(0, 32);
}

Status CatFile(const VersionView& view, const std::string& path, int fd,
               const ChunkReaderOptions& reads) {
  BDN_ASSIGN_OR_RETURN(const Entry* e, view.FindFollowing(path));
  const Entry& f = view.Resolve(*e);
  if (f.kind != EntryKind::kFile) {
    return InvalidArgumentError("path \"" + path + "\": is a " +
                                std::string(EntryKindName(f.kind)) + ", not a file");
  }
  BDN_ASSIGN_OR_RETURN(auto fc, view.ChunksOf(f));
  ChunkReader reader(view.store(), reads);
  Blake3Hasher whole;
  BDN_RETURN_IF_ERROR(
      reader.Read(fc->chunks, [&](size_t, Result<std::span<const uint8_t>> bytes) -> Status {
        if (!bytes) return bytes.error().WithPrefix("file \"" + path + "\"");
        whole.Update(*bytes);
        return WriteAll(fd, *bytes, "stdout");
      }));
  // Every chunk matched its id and length, so only a manifest that lies about the file's digest
  // gets here with other bytes; they are already written, and the error says so.
  Status s = CheckFileDigest(path, f.digest, whole.Finalize());
  if (!s.ok()) return CorruptionError(s.message() + " (the bytes written are not the file's)");
  return Status::Ok();
}

Result<PullResult> Pull(const VersionView& view, const fs::path& dest, const PullOptions& options,
                        TransferCounters* counters) {
  BDN_ASSIGN_OR_RETURN(PullPlan plan, PlanPull(view, options));
  const bool overwrite = options.existing == PullOptions::Existing::kOverwrite;
  BDN_ASSIGN_OR_RETURN(DirFd root, OpenDestination(dest, options.check_directory));
  // Every step below is relative to a directory handle: paths of any length work, and walking
  // the entries in path order (each subtree one run) costs time linear in the tree.
  BDN_ASSIGN_OR_RETURN(DirCursor cursor, DirCursor::Open(std::move(root), dest));
  if (counters) {
    for (const Entry* e : plan.entries) {
      if (e->kind == EntryKind::kFile) {
        counters->bytes_total += e->size_bytes;
        ++counters->files_total;
      }
    }
  }
  PullResult result;
  HashedFiles identical;
  InodeSet replaced;
  BDN_RETURN_IF_ERROR(CheckConflicts(plan, cursor, overwrite, options.check_directory, identical));
  BDN_RETURN_IF_ERROR(MakeDirectoriesAndSymlinks(plan, cursor, overwrite, options.check_directory,
                                                 result.symlinks));
  {
    // The writer (and its ChunkReader) outlives the pool inside WriteFiles.
    FileWriter writer(view, options, counters);
    const int jobs = options.jobs > 0 ? options.jobs : ThreadPool::DefaultThreads();
    BDN_RETURN_IF_ERROR(
        WriteFiles(plan, cursor, writer, jobs, overwrite, identical, result, replaced));
  }
  BDN_RETURN_IF_ERROR(LinkHardlinks(plan, cursor, overwrite, replaced));
  BDN_RETURN_IF_ERROR(SetDirectoryModesAndTimes(plan, cursor, options.check_directory));
  return result;
}

}  // namespace bdn
