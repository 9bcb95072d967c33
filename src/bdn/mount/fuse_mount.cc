// The mount daemon: a FUSE session serving one version (ServeMount: the session, its signal
// handlers, readiness and the libfuse log) and the daemon that runs it in the background
// (MountInBackground: double fork, the ready pipe). The operations are in fuse_ops.cc, the
// mount table in mount_table.cc.
#define FUSE_USE_VERSION 314
#include "bdn/mount/fuse_mount.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/memory.h"
#include "bdn/base/signals.h"
#include "bdn/base/text.h"
#include "bdn/base/thread_pool.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

// fuse_opt splits -o values at commas; a backslash escapes the next character.
std::string EscapeOptionValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Raises the mount's readahead window so buffered and mmap reads reach the daemon in 1 MiB
// requests (at INIT the kernel caps the window to max_readahead, at most 128 KiB:
// process_init_reply in the kernel's fs/fuse/inode.c).
void SetBdiReadAhead(dev_t dev, uint32_t read_ahead_kb, const fs::path& mp) {
  std::string path = "/sys/class/bdi/" + std::to_string(major(dev)) + ":" +
                     std::to_string(minor(dev)) + "/read_ahead_kb";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  std::string value = std::to_string(read_ahead_kb);
  if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    log::Warn("mount " + mp.string() + ": cannot set " + path + ": " + std::strerror(errno));
  }
}

// The ready_fd handshake: written at most once, closed exactly once.
class ReadySignal {
 public:
  explicit ReadySignal(int fd) : fd_(fd) {}
  ~ReadySignal() { Finish(false); }
  void Finish(bool ready) {
    UniqueFd fd(fd_.exchange(-1));
    if (!fd) return;
    if (ready) {
      const uint8_t one = '1';
      // Nothing to do if the reader is gone; one still waiting sees EOF without '1', a failure.
      WriteAll(fd.get(), std::span(&one, 1), "ready fd").IgnoreError();
    }
  }

 private:
  std::atomic<int> fd_;
};

// Only one session per process may own libfuse's signal handlers.
std::atomic<bool> g_signal_handlers_taken{false};

// The session the stop signals below end, and the last of them that came (0: none).
std::atomic<fuse_session*> g_stop_session{nullptr};
std::atomic<int> g_stop_signal{0};

// As libfuse's exit handler: ends the session loop (fuse_session_exit only sets a flag; the signal
// itself interrupts the loop's waits, as no SA_RESTART is set) and records the signal.
void StopSession(int sig) {
  g_stop_signal.store(sig, std::memory_order_relaxed);
  if (fuse_session* se = g_stop_session.load()) fuse_session_exit(se);
}

// The stop signals (StopSignals: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, ...)
// that libfuse's handlers (fuse_set_signal_handlers: SIGHUP, SIGINT, SIGTERM) left at their
// default action end the session loop too (StopSession), so that the mount is unmounted; at
// their default action they would end the daemon and leave a dead mount (ENOTCONN) in place.
// As libfuse does, a signal the process ignores (nohup's SIGHUP) or handles is left as it is.
// Made after fuse_set_signal_handlers; destroyed before fuse_remove_signal_handlers, it puts back
// the default action of each signal it took whose handler is still StopSession.
class MoreStopSignals {
 public:
  explicit MoreStopSignals(fuse_session* se) {
    g_stop_signal = 0;
    g_stop_session = se;
    struct sigaction stop {};
    stop.sa_handler = StopSession;
    sigemptyset(&stop.sa_mask);
    for (int sig : StopSignals()) {
      struct sigaction now {};
      if (::sigaction(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) ||
          now.sa_handler != SIG_DFL) {
        continue;
      }
      if (::sigaction(sig, &stop, nullptr) == 0) taken_.push_back(sig);
    }
  }
  ~MoreStopSignals() {
    for (int sig : taken_) {
      struct sigaction now {};
      if (::sigaction(sig, nullptr, &now) != 0 || now.sa_handler != StopSession) continue;
      struct sigaction default_action {};
      default_action.sa_handler = SIG_DFL;
      sigemptyset(&default_action.sa_mask);
      ::sigaction(sig, &default_action, nullptr);
    }
    g_stop_session = nullptr;
  }
  MoreStopSignals(const MoreStopSignals&) = delete;
  MoreStopSignals& operator=(const MoreStopSignals&) = delete;

  // The signal among those taken that ended the loop, or 0.
  static int Signal() { return g_stop_signal.load(std::memory_order_relaxed); }

 private:
  std::vector<int> taken_;
};

// libfuse's log messages go to stderr as before, and the last one is kept: a daemon's stderr
// may be /dev/null, so a failed mount reports libfuse's reason ("fuse: failed to open
// /dev/fuse: Permission denied") in its Status.
Mutex g_fuse_log_mu;
std::string g_fuse_last_log;

void FuseLog(enum fuse_log_level, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::fputs(buf, stderr);
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  MutexLock lock(g_fuse_log_mu);
  g_fuse_last_log = std::move(line);
}

// Starts keeping libfuse's messages (once per process) and forgets the last one.
void StartFuseLogCapture() {
  static std::once_flag installed;
  std::call_once(installed, [] { fuse_set_log_func(FuseLog); });
  MutexLock lock(g_fuse_log_mu);
  g_fuse_last_log.clear();
}

// ": <libfuse's last message>" if it logged one since StartFuseLogCapture, else "".
std::string FuseLogReason() {
  MutexLock lock(g_fuse_log_mu);
  return g_fuse_last_log.empty() ? std::string() : ": " + g_fuse_last_log;
}

}  // namespace

Status ServeMount(std::shared_ptr<VersionView> view, const MountOptions& options) {
  KeepFreedMemory();
  ReadySignal ready(options.ready_fd);
  fs::path mp = AbsoluteMountpoint(options.mountpoint);
  const std::string what = MountpointPrefix(mp);
  if (options.allow_other) {
    if (Status s = CheckAllowOtherPermitted(); !s.ok()) return s.WithPrefix(what);
  }
  BDN_ASSIGN_OR_RETURN(bool cleaned, CleanDeadMount(mp));
  if (!cleaned) {
    BDN_ASSIGN_OR_RETURN(MountpointState state, InspectMountpoint(mp));
    if (state.kind == MountpointState::Kind::kLiveBdn) {
      return AlreadyExistsError(what + ": already a bdn mount of " + state.source +
                                "; unmount it first (bdn volume umount " + EscapeName(mp.string()) +
                                ")");
    }
  }
  struct stat st;
  if (::stat(mp.c_str(), &st) != 0) return ErrnoError(what, errno);
  if (!S_ISDIR(st.st_mode)) return InvalidArgumentError(what + ": not a directory");

  // The daemon streams batches of tens of MiB through short-lived chunk buffers. glibc would
  // give the freed heap back to the kernel after each batch and fault it in again for the
  // next (measured: ~15% of a cold read's CPU); keep up to the memory cache's size instead.
  // Setting these turns off glibc's adaptive mmap threshold, which would otherwise have risen
  // above the chunk size: without M_MMAP_THRESHOLD every chunk buffer over 128 KiB would be a
  // fresh mmap, faulted in and zeroed page by page.
  ::mallopt(M_TRIM_THRESHOLD,
            static_cast<int>(std::min<uint64_t>(options.memory_cache_bytes, 1ull << 30)));
  ::mallopt(M_TOP_PAD, 16 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);

  // Synced once the session is over (below): the daemon leaves by _exit, and no destructor of
  // the store stack would run.
  ChunkStore& store = view->store();
  std::unique_ptr<FuseFileSystem> fsys = FuseFileSystem::Create(std::move(view), options, mp);
  fuse_lowlevel_ops ops = FuseFileSystem::Ops();

  std::string opts =
      "ro,default_permissions,subtype=bdn,fsname=" + EscapeOptionValue(options.fsname);
  if (options.allow_other) opts += ",allow_other";
  std::vector<std::string> argv_s = {"bdn", "-o", opts};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  StartFuseLogCapture();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, fsys.get());
  fuse_opt_free_args(&args);  // frees only what libfuse allocated while parsing
  if (se == nullptr)
    return InternalError(what + ": cannot create the FUSE session" + FuseLogReason());

  bool own_signals = !g_signal_handlers_taken.exchange(true);
  if (own_signals && fuse_set_signal_handlers(se) != 0) {
    own_signals = false;
    g_signal_handlers_taken = false;
  }
  std::optional<MoreStopSignals> more_stop_signals;
  if (own_signals) more_stop_signals.emplace(se);
  auto release_session = [&] {
    if (own_signals) {
      more_stop_signals.reset();
      fuse_remove_signal_handlers(se);
      g_signal_handlers_taken = false;
    }
    fuse_session_destroy(se);
  };
  if (fuse_session_mount(se, mp.c_str()) != 0) {
    release_session();
    std::string reason = FuseLogReason();
    std::string message =
        what + ": mount failed" + (reason.empty() ? " (fusermount3 says why on stderr)" : reason);
    // /dev/fuse or the mountpoint not open to this user: exit 6 like every other permission
    // error, not 1.
    if (reason.find("Permission denied") != std::string::npos ||
        reason.find("Operation not permitted") != std::string::npos) {
      return PermissionDeniedError(std::move(message));
    }
    return InternalError(std::move(message));
  }

  // stat on the mountpoint needs the session loop to answer INIT and GETATTR, so readiness is
  // checked from a helper thread; if the session dies first, the stat fails with ENOTCONN.
  std::thread helper([&] {
    struct stat root;
    int rc;
    do {
      rc = ::stat(mp.c_str(), &root);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return ready.Finish(false);
    if (options.read_ahead_kb > 0) SetBdiReadAhead(root.st_dev, options.read_ahead_kb, mp);
    ready.Finish(true);
  });

  fuse_loop_config* config = fuse_loop_cfg_create();
  int threads = options.threads > 0
                    ? options.threads
                    : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  fuse_loop_cfg_set_max_threads(config, static_cast<unsigned>(threads));
  // Keep the workers instead of creating and destroying threads under load.
  fuse_loop_cfg_set_idle_threads(config, static_cast<unsigned>(threads));
  fuse_loop_cfg_set_clone_fd(config, 0);
  int rc;
  {
    // An idle mount reads nothing, and would keep the node cache regions other processes evict
    // (and their disk space) until its next read.
    PeriodicTask release_deleted(std::chrono::seconds(1), [&store] { store.ReleaseDeleted(); });
    rc = fuse_session_loop_mt(se, config);
  }
  fuse_loop_cfg_destroy(config);
  if (options.session_over) options.session_over();
  // Requests still waiting for the store are answered while the session can still take replies.
  fsys->Stop();
  fuse_session_unmount(se);
  release_session();
  helper.join();
  // What the store stack kept and has not finished (a node cache's region being filled) is made
  // whole for the processes that share it; the mount is over either way.
  if (Status synced = store.Sync(); !synced.ok()) {
    log::Warn(what + ": at exit: " + synced.message());
  }
  // rc > 0 is the number of the signal that stopped the loop through libfuse's handlers (SIGHUP,
  // SIGINT, SIGTERM); the other stop signals are MoreStopSignals'. Either is a clean stop.
  const int stop_signal = rc > 0 ? rc : own_signals ? MoreStopSignals::Signal() : 0;
  if (stop_signal > 0) log::Info(what + ": " + SignalName(stop_signal) + ": unmounted");
  if (rc < 0) return ErrnoError(what + ": session loop", -rc);
  return Status::Ok();
}

Status MountInBackground(std::shared_ptr<VersionView> view, const MountOptions& options,
                         pid_t* daemon_pid) {
  fs::path mp = AbsoluteMountpoint(options.mountpoint);
  const std::string what = MountpointPrefix(mp);
  auto cleaned = CleanDeadMount(mp);
  if (!cleaned) return cleaned.error();

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError(what + ": pipe", errno);
  UniqueFd from_daemon(fds[0]);
  UniqueFd to_parent(fds[1]);
  pid_t middle = ::fork();
  if (middle < 0) return ErrnoError(what + ": fork", errno);
  if (middle == 0) {
    // The intermediate child: a new session, then a grandchild that init adopts.
    ::setsid();
    pid_t daemon = ::fork();
    if (daemon != 0) ::_exit(daemon < 0 ? 1 : 0);
    from_daemon.Reset();
    pid_t me = ::getpid();
    // A parent that reads no pid reports "the mount daemon did not start".
    WriteAll(to_parent.get(), AsBytes(me), "pipe").IgnoreError();
    if (::chdir("/") != 0) {
      // Not fatal: the mountpoint is absolute.
    }
    int null_fd = ::open("/dev/null", O_RDWR);
    // The descriptor the caller opened, never the path again (which may lead elsewhere by now).
    const int err_fd = options.log_fd >= 0 ? options.log_fd : null_fd;
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(err_fd, STDERR_FILENO);
    }
    ::signal(SIGPIPE, SIG_IGN);
    // A daemon starts with no signal blocked, whatever its starter held back (mounts apply
    // holds the stop signals while it replaces mounts).
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // The log's stderr is now the log file. With no file, Init cannot fail (log.h).
    log::Init(options.log_level).IgnoreError();
    MountOptions daemon_options = options;
    daemon_options.mountpoint = mp;
    daemon_options.ready_fd = ::fcntl(to_parent.get(), F_DUPFD_CLOEXEC, 0);
    Status s = ServeMount(std::move(view), daemon_options);
    if (!s.ok()) {
      log::Error("mount " + mp.string() + ": " + s.ToString());
      std::string msg = "E";
      msg.push_back(static_cast<char>(s.code()));
      msg += s.message();
      // Already logged; a parent that reads no reply reports the daemon's early exit.
      WriteAll(to_parent.get(), AsBytes(msg), "pipe").IgnoreError();
      ::_exit(1);
    }
    ::_exit(0);
  }

  to_parent.Reset();
  int wstatus;
  while (::waitpid(middle, &wstatus, 0) < 0 && errno == EINTR) {
  }
  const Clock& clock = *Clock::Real();
  const SteadyTime deadline = clock.SteadyNow() + std::chrono::seconds(30);
  bool timed_out = false;
  // Reads `n` bytes into `into` from the daemon before the deadline; false (and timed_out set
  // when it passed) if they did not come.
  auto read = [&](void* into, size_t n) {
    Status got =
        ReadFullBefore(from_daemon.get(), {static_cast<uint8_t*>(into), n}, deadline, clock, what);
    timed_out = timed_out || got.code() == StatusCode::kDeadlineExceeded;
    return got.ok();
  };
  pid_t pid = -1;
  Status result;
  char tag = 0;
  if (!read(&pid, sizeof pid)) {
    result = InternalError(what + ": the mount daemon did not start");
  } else if (!read(&tag, 1)) {
    if (timed_out) {
      ::kill(pid, SIGKILL);
      result = DeadlineExceededError(what + ": the mount did not answer within 30 s");
    } else {
      result = InternalError(what + ": the mount daemon exited before the mount was ready");
    }
  } else if (tag == 'E') {
    char code = 0;
    std::string message;
    if (read(&code, 1)) {
      // The rest, up to the daemon's exit (which closes the pipe).
      uint8_t buf[4096];
      while (auto k = ReadFull(from_daemon.get(), buf, what)) {
        message.append(reinterpret_cast<const char*>(buf), *k);
        if (*k < sizeof buf) break;
      }
    }
    result = Status(code > 0 && code <= static_cast<char>(StatusCode::kInternal)
                        ? static_cast<StatusCode>(code)
                        : StatusCode::kInternal,
                    message.empty() ? what + ": mount failed" : message);
  } else if (tag != '1') {
    result = InternalError(what + ": unexpected reply from the mount daemon");
  }
  from_daemon.Reset();
  // Best effort on an error path: the timeout is what counts; a mount left behind is cleaned by
  // the next mount of this mountpoint (a dead mount is mounted again).
  if (timed_out) CleanDeadMount(mp).IgnoreError();
  if (result.ok() && daemon_pid != nullptr) *daemon_pid = pid;
  return result;
}

}  // namespace bdn
