// bdn mounts apply|lock: the deployment config's bdn.mounts (docs/spec.md §5; parsed in
// mounts_config.cc).
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bdn/base/fd.h"
#include "bdn/base/path_walk.h"
#include "bdn/base/private_files.h"
#include "bdn/base/signals.h"
#include "bdn/base/text.h"
#include "bdn/cli/commands.h"
#include "bdn/cli/mounts_config.h"
#include "bdn/cli/output.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/store/atomic_file.h"
#include "bdn/volume/resolve.h"

namespace bdn::cli {
namespace fs = std::filesystem;
namespace {

// An open config file: its descriptor, what fstat(2) said of it when opened, and its text.
struct ConfigFile {
  UniqueFd fd;
  struct stat st {};
  std::string text;
};

// Opens `path` (shown as `shown`) for reading without blocking on a FIFO, and refuses anything
// but a regular file of at most kMaxMountsConfigBytes before reading a byte of it.
Result<ConfigFile> OpenConfig(const std::string& shown, const fs::path& path) {
  ConfigFile c;
  c.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!c.fd) return Err(ErrnoError("config " + shown, errno));
  if (::fstat(c.fd.get(), &c.st) != 0) return Err(ErrnoError("config " + shown, errno));
  if (S_ISDIR(c.st.st_mode)) {
    return Err(InvalidArgumentError("config " + shown + ": is a directory, not a file"));
  }
  if (!S_ISREG(c.st.st_mode)) {
    return Err(InvalidArgumentError("config " + shown + ": not a regular file"));
  }
  if (static_cast<uint64_t>(c.st.st_size) > kMaxMountsConfigBytes) {
    return Err(InvalidArgumentError("config " + shown + ": larger than " +
                                    std::to_string(kMaxMountsConfigBytes) + " bytes"));
  }
  return c;
}

// The whole file from offset 0, at most kMaxMountsConfigBytes (it may have grown since fstat).
Result<std::string> ReadConfigText(const std::string& shown, int fd) {
  std::string text(kMaxMountsConfigBytes + 1, '\0');
  BDN_ASSIGN_OR_RETURN(
      size_t n,
      PReadFull(fd, {reinterpret_cast<uint8_t*>(text.data()), text.size()}, 0, "config " + shown));
  if (n > kMaxMountsConfigBytes) {
    return Err(InvalidArgumentError("config " + shown + ": larger than " +
                                    std::to_string(kMaxMountsConfigBytes) + " bytes"));
  }
  text.resize(n);
  return text;
}

Result<std::string> ReadFile(const std::string& path) {
  BDN_ASSIGN_OR_RETURN(ConfigFile c, OpenConfig(path, path));
  return ReadConfigText(path, c.fd.get());
}

// Opens the config `target` (shown as `shown`) and holds an exclusive flock(2) on it, so two
// `bdn mounts lock` of one file take turns (the second waits, saying so once). The file a lock
// replaced while this one waited is opened again: the lock is on the file, not its name.
Result<ConfigFile> OpenConfigLocked(const std::string& shown, const fs::path& target) {
  bool said = false;
  for (;;) {
    BDN_ASSIGN_OR_RETURN(ConfigFile c, OpenConfig(shown, target));
    if (::flock(c.fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return Err(ErrnoError("config " + shown + ": flock", errno));
      if (!said) {
        std::cerr << "config " << shown << ": another bdn mounts lock holds it; waiting\n";
        said = true;
      }
      while (::flock(c.fd.get(), LOCK_EX) != 0) {
        if (errno != EINTR) return Err(ErrnoError("config " + shown + ": flock", errno));
      }
    }
    struct stat now {};
    if (::stat(target.c_str(), &now) != 0) return Err(ErrnoError("config " + shown, errno));
    if (now.st_dev == c.st.st_dev && now.st_ino == c.st.st_ino) {
      if (::fstat(c.fd.get(), &c.st) != 0) return Err(ErrnoError("config " + shown, errno));
      BDN_ASSIGN_OR_RETURN(c.text, ReadConfigText(shown, c.fd.get()));
      return c;
    }
  }
}

// Whether `target` is still the file `c` read, with the same bytes: an edit made while lock
// resolved the sources (an editor's rename or a write in place) is not overwritten.
Status CheckUnchanged(const std::string& shown, const fs::path& target, const ConfigFile& c) {
  const Status changed = ConflictError(
      "config " + shown + ": changed while being locked; nothing written; run it again");
  struct stat now {};
  if (::stat(target.c_str(), &now) != 0) return changed;
  if (now.st_dev != c.st.st_dev || now.st_ino != c.st.st_ino) return changed;
  BDN_ASSIGN_OR_RETURN(std::string text, ReadConfigText(shown, c.fd.get()));
  return text == c.text ? Status::Ok() : changed;
}

// Writes `text` over the config `target` as one rename: a temporary file with a unique, random
// name beside it (created O_EXCL|O_NOFOLLOW by AtomicFileWriter), given the original's owner,
// group and permission bits, written, checked against an edit made meanwhile, renamed.
Status ReplaceConfig(const std::string& shown, const fs::path& target, const ConfigFile& c,
                     const std::string& text) {
  if (c.st.st_nlink > 1) {
    return FailedPreconditionError("config " + shown + ": has " + std::to_string(c.st.st_nlink) +
                                   " hard links, which replacing it would break; nothing written");
  }
  const unsigned mode = c.st.st_mode & 07777;
  const std::string what = "config " + target.string();
  BDN_ASSIGN_OR_RETURN(AtomicFileWriter writer,
                       AtomicFileWriter::Create(target, what, {.mode = mode}));
  struct stat tmp {};
  if (::fstat(writer.fd(), &tmp) != 0) return ErrnoError(what + ": fstat", errno);
  if (tmp.st_uid != c.st.st_uid || tmp.st_gid != c.st.st_gid) {
    if (::fchown(writer.fd(), c.st.st_uid, c.st.st_gid) != 0) {
      return ErrnoError("config " + shown + ": cannot keep its owner " +
                            std::to_string(c.st.st_uid) + ":" + std::to_string(c.st.st_gid) +
                            " (run as its owner or root); nothing written: fchown",
                        errno);
    }
    // chown(2) clears the set-user-ID and set-group-ID bits.
    if (::fchmod(writer.fd(), mode) != 0) return ErrnoError(what + ": fchmod", errno);
  }
  BDN_RETURN_IF_ERROR(writer.Append(AsBytes(text)));
  BDN_RETURN_IF_ERROR(CheckUnchanged(shown, target, c));
  auto written = writer.Commit();
  return written ? Status::Ok() : written.error();
}

// A mount this run made: its mountpoint, and the directories made for it (MountPinned's `made`).
struct MadeMount {
  std::string path;
  std::vector<std::string> made_dirs;
};

// Unmounts the mountpoints in `done` (this run's mounts), last first, after the error `failed`
// stopped the run, and removes the directories made for each one unmounted (last first, while
// empty), as a failed `volume mount` does; returns the error as RollbackError says.
Status RollBack(const Status& failed, const std::vector<MadeMount>& done) {
  std::vector<std::string> unmounted;
  std::vector<Status> not_unmounted;
  for (auto it = done.rbegin(); it != done.rend(); ++it) {
    Status s = Unmount(it->path);
    if (s.ok()) {
      unmounted.push_back(it->path);
      for (auto d = it->made_dirs.rbegin(); d != it->made_dirs.rend(); ++d) {
        if (::rmdir(d->c_str()) != 0) break;
      }
    } else {
      not_unmounted.push_back(std::move(s));
    }
  }
  return RollbackError(failed, unmounted, not_unmounted);
}

bool Pinned(const Ref& r) { return r.digest.has_value() && r.digest->size() == 64; }

// Where a user's `mounts apply` runs take turns: the same place for every run of the user, whatever
// its environment (from an attacking helper: with $XDG_RUNTIME_DIR, which a login session sets
// and cron does not, a deploy agent's runs and a cron job's took no turns). $BDN_RUNTIME_DIR/bdn
// when BDN_RUNTIME_DIR is set (separate deployments on one machine: containers sharing a user,
// the integration tests; a directory of its own inside it, so that nothing else there is touched:
// naming /run itself once had every directory below it made private), else /run/bdn for root,
// else ~/.local/state/bdn, ~ being the home directory the password database names (not $HOME)
// when it is the user's and writable, else /tmp/bdn-<uid>. Each is private to its user:
// CreatePrivateDirectory refuses one another user made. One place per user, not per home: two
// deploy agents with their own homes replace the same mountpoints too. Errors: InvalidArgument
// "BDN_RUNTIME_DIR \"run\": not an absolute path".
Result<fs::path> ApplyLockDir() {
  if (const char* d = std::getenv("BDN_RUNTIME_DIR"); d && *d) {
    if (*d != '/') {
      return Err(
          InvalidArgumentError("BDN_RUNTIME_DIR \"" + EscapeName(d) + "\": not an absolute path"));
    }
    return fs::path(d) / "bdn";
  }
  const uid_t uid = ::geteuid();
  if (uid == 0) return fs::path("/run/bdn");
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  struct stat st;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      pw.pw_dir != nullptr && pw.pw_dir[0] == '/' && ::stat(pw.pw_dir, &st) == 0 &&
      S_ISDIR(st.st_mode) && st.st_uid == uid && ::access(pw.pw_dir, W_OK) == 0) {
    return fs::path(pw.pw_dir) / ".local/state/bdn";
  }
  return fs::path("/tmp/bdn-" + std::to_string(uid));
}

// Held by one `mounts apply` of a user at a time (ApplyLockDir()/mounts-apply.lock): a POSIX
// record lock (fcntl F_SETLKW), which the mount daemons this process forks do not inherit,
// unlike flock(2). From attacking helpers: two runs with --replace at once (of one home, then of
// two) unmounted each other's mounts in their rollbacks, and one printed "mounted" for a
// mountpoint that held the other's version. A second run waits, saying so once.
class ApplyLock {
 public:
  static Result<ApplyLock> Take() {
    BDN_ASSIGN_OR_RETURN(const fs::path dir, ApplyLockDir());
    const std::string hint = "; set BDN_RUNTIME_DIR to a directory of this user's for the lock";
    const std::string shown = "mounts apply lock " + EscapeName(dir.string());
    if (struct stat st; ::lstat(dir.c_str(), &st) != 0) {
      if (Status made = CreatePrivateDirectory(dir, "mounts apply lock"); !made.ok()) {
        return Err(Status(made.code(), made.message() + hint));
      }
    }
    // An existing one is used as it is, never made private (CreatePrivateDirectory tightens a
    // whole tree: from attacking helpers, naming a directory holding other things, or a symlink
    // to /etc, had every directory below made 0700). Judged on its own descriptor, opened without
    // following a symlink, and the lock opened relative to it, so that nothing swapped in at its
    // name after the judgement is used (from an attacking helper: under a directory others may
    // write, a symlink swapped in between a check by path and the open was followed).
    UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir_fd) {
      const int err = errno;
      // O_DIRECTORY with O_NOFOLLOW fails a symlink ENOTDIR (or ELOOP): told apart by lstat.
      struct stat ls;
      if (err == ELOOP ||
          (err == ENOTDIR && ::lstat(dir.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode))) {
        return Err(FailedPreconditionError(shown + ": a symlink" + hint));
      }
      if (err == ENOTDIR) return Err(FailedPreconditionError(shown + ": not a directory" + hint));
      return Err(Status(ErrnoError(shown, err).code(), ErrnoError(shown, err).message() + hint));
    }
    struct stat st;
    if (::fstat(dir_fd.get(), &st) != 0) return Err(ErrnoError(shown, errno));
    if (st.st_uid != ::geteuid()) {
      return Err(PermissionDeniedError(shown + ": owned by " + UidText(st.st_uid) +
                                       ", not by this user" + hint));
    }
    if ((st.st_mode & 022) != 0) {
      return Err(FailedPreconditionError(shown + ": writable by other users" + hint));
    }
    const fs::path path = dir / "mounts-apply.lock";
    ApplyLock lock;
    lock.fd_.Reset(::openat(dir_fd.get(), "mounts-apply.lock",
                            O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
    if (!lock.fd_) {
      const int err = errno;
      if (err == ELOOP || err == EISDIR) {
        return Err(FailedPreconditionError("mounts apply lock " + EscapeName(path.string()) +
                                           (err == ELOOP ? ": a symlink" : ": not a regular file") +
                                           hint));
      }
      return Err(ErrnoError("mounts apply lock " + path.string(), err));
    }
    if (struct stat ls; ::fstat(lock.fd_.get(), &ls) != 0 || !S_ISREG(ls.st_mode)) {
      return Err(FailedPreconditionError("mounts apply lock " + EscapeName(path.string()) +
                                         ": not a regular file" + hint));
    }
    struct flock want = {};
    want.l_type = F_WRLCK;
    want.l_whence = SEEK_SET;
    if (::fcntl(lock.fd_.get(), F_SETLK, &want) == 0) return lock;
    if (errno != EAGAIN && errno != EACCES) {
      return Err(ErrnoError("mounts apply lock " + path.string(), errno));
    }
    struct flock held = want;
    const bool known = ::fcntl(lock.fd_.get(), F_GETLK, &held) == 0 && held.l_type != F_UNLCK;
    std::cerr << "another bdn mounts apply"
              << (known ? " (pid " + std::to_string(held.l_pid) + ")" : std::string())
              << " of this user is running; waiting for it\n";
    while (::fcntl(lock.fd_.get(), F_SETLKW, &want) != 0) {
      if (errno != EINTR) return Err(ErrnoError("mounts apply lock " + path.string(), errno));
    }
    return lock;
  }

 private:
  UniqueFd fd_;
};

// Blocks the stop signals this process does not ignore (Ctrl-C, kill, a closed terminal) for
// its lifetime, so that a run replacing mounts ends in a known state (all mounted, or rolled
// back) before one ends it: it is delivered when the mask is restored. From an attacking
// helper: SIGTERM between unmounting an old mount and mounting the new one left the mountpoint
// empty. The mount daemons start with an empty mask (MountInBackground).
// The mask to restore once the command's result is printed (DeliverHeldStopSignals), when a
// stop signal arrived while StopSignalsHeld held it back.
std::optional<sigset_t> g_deferred_mask;

class StopSignalsHeld {
 public:
  StopSignalsHeld() {
    sigemptyset(&held_);
    for (int sig : StopSignalsNotIgnored()) sigaddset(&held_, sig);
    ::sigprocmask(SIG_BLOCK, &held_, &old_);
  }
  // A stop signal that came meanwhile stays held until the result is printed (from an attacking
  // helper: delivered here, it ended the process before its "mounted at" lines or its error
  // were written, and a run that applied everything printed nothing).
  ~StopSignalsHeld() {
    sigset_t pending;
    if (::sigpending(&pending) == 0) {
      for (int sig : StopSignalsNotIgnored()) {
        if (sigismember(&held_, sig) && sigismember(&pending, sig)) {
          g_deferred_mask = old_;
          return;
        }
      }
    }
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t held_;
  sigset_t old_;
};

}  // namespace

void DeliverHeldStopSignals() {
  if (!g_deferred_mask) return;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::sigprocmask(SIG_SETMASK, &*g_deferred_mask, nullptr);  // the held signal is delivered now
  g_deferred_mask.reset();
}

Status CheckMountsConfig(const std::string& config_path) {
  BDN_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  auto entries = ParseMountsConfig(config_path, text);
  return entries ? Status::Ok() : entries.error();
}

Status MountsApply(Context& ctx, const std::string& config_path, const MountArgs& tuning,
                   OtherMount other) {
  BDN_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  BDN_ASSIGN_OR_RETURN(auto entries, ParseMountsConfig(config_path, text));
  auto at_line = [&](int line) { return config_path + ":" + std::to_string(line); };
  // What the config asks that this user may not do is refused before waiting for another run.
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].allow_other) continue;
    if (Status s = CheckAllowOtherPermitted(); !s.ok()) {
      return s.WithPrefix(at_line(entries[i].allow_other_line) + ": mounts[" + std::to_string(i) +
                          "].allow_other");
    }
  }
  // From before what each mountpoint holds is looked at to the last mount (or rollback).
  BDN_ASSIGN_OR_RETURN(ApplyLock lock, ApplyLock::Take());
  WarnRemoteOnlyMountFlags(ctx, tuning);
  // Before any path is walked: one below a mount whose daemon is stopped never returns.
  for (const MountEntry& e : entries) {
    BDN_RETURN_IF_ERROR(CheckMountsAboveAnswer(e.path).WithPrefix(at_line(e.line)));
  }
  // Two entries whose paths name one directory through a symlink (the config's check compares
  // the paths as written): the second would mount over the first, or replace it. One inside
  // another's the same way (from an attacking helper: the inner mount was hidden under the
  // outer one, or made inside the outer FUSE mount, and both reported mounted).
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string a = AbsoluteMountpoint(entries[i].path).string();
    for (size_t j = 0; j < i; ++j) {
      const std::string b = AbsoluteMountpoint(entries[j].path).string();
      const std::string there = "line " + std::to_string(entries[j].line) + "'s " +
                                entries[j].path + " (through a symlink)";
      std::string how;
      if (a == b) how = "the same directory as ";
      if (a.starts_with(b + "/")) how = "inside ";
      if (b.starts_with(a + "/")) how = "a directory holding ";
      if (!how.empty()) {
        return InvalidArgumentError(at_line(entries[i].line) + ": path " + entries[i].path + ": " +
                                    how + there);
      }
    }
  }
  // Resolve every source once, before mounting anything.
  std::vector<PinnedRef> pinned;
  std::vector<int64_t> created_ms;  // each version's creation time: mtimes it does not record
  for (const auto& e : entries) {
    auto p = ResolveRef(*ctx.registry, e.ref);
    if (!p) return p.error().WithPrefix(at_line(e.line));
    pinned.push_back(*p);
    created_ms.push_back(VersionCreatedUnixMs(ctx, *p));
  }
  // What each mountpoint holds, before mounting anything. Applying a config again is a no-op
  // for the entries already mounted as it says; a mountpoint holding another version (or the
  // same one with another allow_other) is refused; a dead mount is mounted again.
  std::vector<bool> mounted(entries.size(), false);
  // What each entry's mountpoint holds that this run replaces (OtherMount::kReplace): "" for none.
  std::vector<std::string> replaced(entries.size());
  std::vector<bool> replaced_allow_other(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    auto state = InspectMountpoint(e.path);
    if (!state) return state.error().WithPrefix(at_line(e.line));
    if (state->kind == MountpointState::Kind::kDead) {
      std::cerr << "warning: " << at_line(e.line) << ": mountpoint " << e.path << ": dead mount of "
                << (state->source.empty() ? state->type : state->source)
                << " (its daemon is gone); mounting again\n";
      continue;
    }
    if (state->kind != MountpointState::Kind::kLiveBdn) continue;
    if (other == OtherMount::kReplace &&
        (state->source != pinned[i].ToString() || state->allow_other != e.allow_other)) {
      replaced[i] = state->source;
      replaced_allow_other[i] = state->allow_other;
      continue;
    }
    const std::string unmount_first =
        "; unmount it first (bdn volume umount " + e.path + "), or apply with --replace";
    if (state->source != pinned[i].ToString()) {
      return FailedPreconditionError(at_line(e.line) + ": mountpoint " + e.path +
                                     ": already a bdn mount of " + state->source + unmount_first);
    }
    if (state->allow_other != e.allow_other) {
      return FailedPreconditionError(
          at_line(e.line) + ": mountpoint " + e.path + ": already a bdn mount of " + state->source +
          (state->allow_other ? " with" : " without") +
          " allow_other, the config says allow_other: " + (e.allow_other ? "true" : "false") +
          unmount_first);
    }
    mounted[i] = true;
  }
  // Tuning flags reach only the mounts this run makes (from an attacking helper: they were
  // silently not applied to entries already mounted).
  if (const auto kept = std::count(mounted.begin(), mounted.end(), true); kept > 0) {
    if (const std::string names = GivenTuningFlags(tuning, /*node_cache_only=*/false);
        !names.empty()) {
      std::cerr << "warning: " << config_path << ": " << kept << (kept == 1 ? " entry" : " entries")
                << " already mounted as the config says keep the options they were mounted "
                   "with; "
                << names
                << " apply to the mounts this run makes (unmount the others and apply again to "
                   "change theirs)\n";
    }
  }
  // Every unpinned source (SPEC §5), once what each mountpoint holds is known.
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    if (Pinned(e.ref)) continue;
    // A digest prefix names one version today, but a later version may share it.
    const std::string why = e.ref.digest ? " names its version by a " +
                                               std::to_string(e.ref.digest->size()) +
                                               "-digit digest prefix, not the whole digest"
                                         : " is not pinned to a digest";
    std::cerr << "warning: " << config_path << ":" << e.line << ": source " << e.source << why
              << (mounted[i] ? "; already mounted as " : "; mounting ") << pinned[i].ToString()
              << " (pin it with: bdn mounts lock -f " << config_path << ")\n";
  }
  // What --replace unmounts must mount again from here if the run fails: from an attacking
  // helper, a version mounted from another home was unmounted, could not be mounted again, and
  // was called lost. Checked (and its creation time asked) before anything is unmounted.
  std::vector<std::optional<PinnedRef>> replaced_pinned(entries.size());
  std::vector<int64_t> replaced_created_ms(entries.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (replaced[i].empty()) continue;
    auto ref = ParseRef(replaced[i]);
    Result<Digest> digest = Err(InternalError("not a pinned ref"));
    if (ref && ref->digest) digest = Digest::Parse(*ref->digest);
    // Asked of the registry (a pull key may ask it; from an operator: a store query needed the
    // push scope, so a fleet's pull-only key could not roll out a version).
    Result<PinnedRef> known = Err(NotFoundError("not a pinned ref"));
    if (digest) known = ResolveRef(*ctx.registry, *ref);
    if (!known && known.error().code() != StatusCode::kNotFound) {
      return known.error().WithPrefix(at_line(entries[i].line) + ": replacing " + replaced[i]);
    }
    if (!known || known->digest != *digest) {
      return FailedPreconditionError(
          at_line(entries[i].line) + ": mountpoint " + entries[i].path + ": the mount there of " +
          replaced[i] +
          " is not in this store (mounted from another home or origin?), so a failed run could "
          "not mount it again; unmount it first (bdn volume umount " +
          entries[i].path + "); nothing was changed");
    }
    replaced_pinned[i] = PinnedRef{ref->ns, ref->volume, *digest};
    replaced_created_ms[i] = VersionCreatedUnixMs(ctx, *replaced_pinned[i]);
  }
  ctx.registry.reset();  // the mount daemons are forks of this process
  auto args_for = [&](size_t i) {
    MountArgs args = tuning;
    args.ref.clear();
    args.foreground = false;
    args.log_file.clear();
    args.mountpoint = entries[i].path;
    args.allow_other = entries[i].allow_other;
    args.version_created_unix_ms = created_ms[i];
    return args;
  };
  // Mounts the replaced versions again where this run unmounted them (those of `unmounted`);
  // returns what to add to the run's error: "; mounted again what --replace had unmounted: …".
  auto mount_replaced_again = [&](const std::vector<size_t>& unmounted) -> std::string {
    std::string again, failed;
    for (size_t i : unmounted) {
      MountArgs args = args_for(i);
      args.allow_other = replaced_allow_other[i];
      args.version_created_unix_ms = replaced_created_ms[i];
      pid_t pid = -1;
      Status s = MountPinned(ctx, *replaced_pinned[i], args, &pid, nullptr);
      if (s.ok()) {
        again += (again.empty() ? "" : ", ") + replaced[i] + " at " + entries[i].path;
      } else {
        failed += (failed.empty() ? "" : "; ") + replaced[i] + " at " + entries[i].path + ": " +
                  s.message();
      }
    }
    std::string out;
    if (!again.empty()) out += "; mounted again what --replace had unmounted: " + again;
    if (!failed.empty()) out += "; could not mount again what --replace had unmounted: " + failed;
    return out;
  };
  // The replaced mounts first, every one before anything is mounted: one in use (Unmount
  // refuses it, naming who holds it) stops the run with nothing changed. From the first unmount
  // to the end, a stop signal waits (SIGKILL cannot: running the config again mounts what is
  // missing).
  std::optional<StopSignalsHeld> held;
  if (std::any_of(replaced.begin(), replaced.end(), [](const auto& r) { return !r.empty(); })) {
    held.emplace();
  }
  std::vector<size_t> unmounted;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (replaced[i].empty()) continue;
    if (Status s = Unmount(entries[i].path); !s.ok()) {
      const std::string restored = mount_replaced_again(unmounted);
      return Status(s.code(), at_line(entries[i].line) + ": replacing " + replaced[i] + ": " +
                                  s.message() + restored);
    }
    unmounted.push_back(i);
  }
  nlohmann::json results = nlohmann::json::array();
  std::vector<MadeMount> done;
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    pid_t daemon_pid = -1;
    if (!mounted[i]) {
      std::vector<std::string> made;
      Status s = MountPinned(ctx, pinned[i], args_for(i), &daemon_pid, &made);
      if (!s.ok()) {
        Status rolled = RollBack(s.WithPrefix(at_line(e.line)), done);
        return Status(rolled.code(), rolled.message() + mount_replaced_again(unmounted));
      }
      done.push_back({e.path, std::move(made)});
    }
    nlohmann::json r = {{"source", e.source},
                        {"version_ref", pinned[i].ToString()},
                        {"path", e.path},
                        {"pinned", Pinned(e.ref)},
                        {"allow_other", e.allow_other},
                        {"already_mounted", mounted[i]}};
    if (!mounted[i]) r["daemon_pid"] = daemon_pid;
    if (!replaced[i].empty()) {
      r["replaced"] = replaced[i];
      r["replaced_allow_other"] = replaced_allow_other[i];
    }
    results.push_back(std::move(r));
  }
  // Printed once every entry is mounted: a failed run rolls its mounts back (see RollBack).
  if (ctx.json) {
    std::cout << JsonText({{"mounts", results}}) << std::endl;
  } else {
    for (const auto& r : results) {
      std::cout << r["version_ref"].get<std::string>()
                << (r["already_mounted"].get<bool>() ? " already mounted at " : " mounted at ")
                << r["path"].get<std::string>();
      if (r.contains("replaced")) {
        // The same version mounted again for another allow_other says which (it said
        // "(replacing" the very ref it printed).
        const std::string old_ref = r["replaced"].get<std::string>();
        if (old_ref == r["version_ref"].get<std::string>()) {
          std::cout << " (replacing its mount "
                    << (r["replaced_allow_other"].get<bool>() ? "with" : "without")
                    << " allow_other)";
        } else {
          std::cout << " (replacing " << old_ref << ")";
        }
      }
      std::cout << "\n";
    }
  }
  return Status::Ok();
}

Status MountsLock(Context& ctx, const std::string& config_path) {
  // Replace the file a symlink points to (not the link).
  // canonical reads links without following them, so it would pass a link the kernel refuses to
  // follow (fs.protected_symlinks: another user's link in a sticky directory). Opening the path
  // as given lets the kernel judge, and the file it opens must be the one resolved. A lock
  // running beside this one replaces the file (a rename) between the two: asked again, a few
  // times (a fresh-clone CI run of 8 concurrent locks failed one "changed while being locked").
  fs::path target;
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    target = fs::canonical(config_path, ec);
    if (ec) return ErrnoError("config " + config_path, ec.value());
    UniqueFd through(::open(config_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!through.valid()) return ErrnoError("config " + config_path, errno);
    struct stat a {
    }, b{};
    if (::fstat(through.get(), &a) == 0 && ::stat(target.c_str(), &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      break;
    }
    if (attempt == 9) {
      return ConflictError("config " + config_path +
                           ": changed while being locked; nothing written; run it again");
    }
  }
  // Held from the read to the rename, so two locks of one file take turns.
  BDN_ASSIGN_OR_RETURN(ConfigFile config, OpenConfigLocked(config_path, target));
  BDN_ASSIGN_OR_RETURN(auto entries, ParseMountsConfig(config_path, config.text));
  nlohmann::json changes = nlohmann::json::array();
  std::vector<SourceRewrite> rewrites;
  for (const auto& e : entries) {
    auto p = ResolveRef(*ctx.registry, e.ref);
    if (!p) return p.error().WithPrefix(config_path + ":" + std::to_string(e.line));
    std::string pinned = p->ToString();
    if (e.source == pinned) continue;
    rewrites.push_back({&e, pinned});
    changes.push_back({{"line", e.line}, {"from", e.source}, {"to", pinned}});
  }
  if (!changes.empty()) {
    BDN_ASSIGN_OR_RETURN(std::string out,
                         RewriteMountSources(config_path, config.text, std::move(rewrites)));
    BDN_RETURN_IF_ERROR(ReplaceConfig(config_path, target, config, out));
  }
  // Printed only once the file holds them.
  if (ctx.json) {
    std::cout << JsonText({{"config", config_path}, {"changes", changes}}) << std::endl;
  } else if (changes.empty()) {
    std::cout << config_path << ": every source is already pinned\n";
  } else {
    for (const auto& c : changes) {
      std::cout << config_path << ":" << c["line"].get<int>() << ": "
                << c["from"].get<std::string>() << " -> " << c["to"].get<std::string>() << "\n";
    }
  }
  return Status::Ok();
}

}  // namespace bdn::cli
