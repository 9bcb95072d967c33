// bdn serve and bdn cache serve (serve.h): flags to options, the data directory's lock, the
// server's signals, and the wiring of the origin or the cache node onto an http::Server.
#include "bdn/cli/serve.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/memory.h"
#include "bdn/base/mutex.h"
#include "bdn/base/private_files.h"
#include "bdn/base/signals.h"
#include "bdn/base/text.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"
#include "bdn/cache/node_cache.h"
#include "bdn/cache/upstream_breaker.h"
#include "bdn/cli/commands.h"
#include "bdn/format/ref.h"
#include "bdn/http/client.h"
#include "bdn/http/errors.h"
#include "bdn/http/server.h"
#include "bdn/maintenance/gc.h"
#include "bdn/objstore/object_pack_store.h"
#include "bdn/objstore/pg_catalog.h"
#include "bdn/origin/chunk_scope.h"
#include "bdn/origin/origin.h"
#include "bdn/origin/upstream_chain.h"
#include "bdn/registry/key_store.h"
#include "bdn/registry/pg_metadata.h"
#include "bdn/registry/push_claims.h"
#include "bdn/registry/registry.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/remote/cluster_chunk_store.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/sql/database.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/sync/secrets.h"
#include "bdn/sync/service.h"
#include "bdn/volume/version_blobs.h"
#include "bdn/volume/version_check.h"

namespace bdn::cli {
namespace {

namespace fs = std::filesystem;

// What LockDataDir holds while serving: the data directory and its serve.lock, each locked
// exclusively.
struct DataDirLock {
  UniqueFd dir;
  UniqueFd file;
};

// Takes the exclusive lock of a `bdn serve` data directory, to be kept while serving: a flock on
// the directory itself (which stays whatever becomes of the files in it) and on <data>/serve.lock
// (OpenServeLock: a regular file, never a symlink's target), which then holds this process's
// pid. Push claims live in the serving process, so two servers over one directory could both
// commit to a volume. Errors: FailedPrecondition when another server holds the locks, or an
// embedded command that writes to the directory holds them shared (HoldNotServed), or serve.lock
// is not a regular file; I/O errors.
Result<DataDirLock> LockDataDir(const fs::path& data) {
  const std::string shown = "--data " + data.string();
  DataDirLock lock;
  auto refused = [&](int fd, const std::string& pid) -> Status {
    // A shared hold is an embedded command writing to the directory (HoldNotServed): its
    // changes would bypass this server's claims, retention and keys.
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
      ::flock(fd, LOCK_UN);
      return FailedPreconditionError(
          shown +
          ": an embedded bdn command (push, rm, gc, ...) is writing to it; start the server "
          "once it has ended");
    }
    return FailedPreconditionError(shown + ": in use by another bdn serve" +
                                   (pid.empty() ? std::string() : " (pid " + pid + ")") +
                                   "; stop it or give another --data directory");
  };
  lock.dir = UniqueFd(::open(data.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!lock.dir) return Err(ErrnoError(shown, errno));
  int e = 0;
  while (::flock(lock.dir.get(), LOCK_EX | LOCK_NB) != 0) {
    e = errno;
    if (e != EINTR) break;
    e = 0;
  }
  if (e == EWOULDBLOCK) {
    // Refused without making or changing anything (serve.lock may be gone: the pid with it).
    std::string pid;
    if (auto fd = OpenServeLock(data, "--data", /*create=*/false); fd && *fd) {
      pid = ServeLockPid(fd->get());
    }
    return Err(refused(lock.dir.get(), pid));
  }
  if (e != 0) lock.dir.Reset();  // a file system without flock on directories: serve.lock alone
  // One that is not a regular file is refused before anything is written (from an attacking
  // helper: a symlink's target got the pid).
  BDN_ASSIGN_OR_RETURN(lock.file, OpenServeLock(data, "--data", /*create=*/true));
  if (!lock.file) return Err(ErrnoError(shown + ": " + (data / "serve.lock").string(), ENOENT));
  BDN_RETURN_IF_ERROR(CheckPrivateFile(data / "serve.lock", "--data"));
  if (::flock(lock.file.get(), LOCK_EX | LOCK_NB) != 0) {
    e = errno;
    if (e != EWOULDBLOCK) return Err(ErrnoError(shown + ": lock", e));
    return Err(refused(lock.file.get(), ServeLockPid(lock.file.get())));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock.file.get(), 0) != 0 ||
      ::pwrite(lock.file.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return Err(ErrnoError(shown + ": " + (data / "serve.lock").string(), errno));
  }
  return lock;
}

// The stop signals (StopSignals: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, ...)
// this process does not ignore (StopSignalsNotIgnored: nohup's SIGHUP stays ignored), blocked in
// every thread (call before any server thread starts, so all inherit the mask) for the server's
// main thread to take with sigwait; SIGPIPE ignored.
sigset_t BlockStopSignals() {
  const sigset_t stop_signals = SignalSet(StopSignalsNotIgnored());
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

// Waits for one of `stop_signals` (blocked by BlockStopSignals) and logs "SIGHUP: shutting
// down", naming it.
void WaitForStopSignal(const sigset_t& stop_signals) {
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  log::Info(SignalName(sig) + ": shutting down");
}

// Ends what a server's start-up waits on as soon as a stop signal is pending (blocked by
// BlockStopSignals, not yet taken by WaitForStopSignal): a cache node's checks of its upstream
// (each may otherwise hold a stop for its 10 s deadline on an upstream that does not answer),
// an origin's database calls (a migration lock another replica holds, a PostgreSQL that does
// not answer: for ever). Polls every 20 ms on a thread of its own until destroyed.
class StopDuringStartup {
 public:
  explicit StopDuringStartup(const sigset_t& stop_signals)
      : stop_signals_(stop_signals), thread_([this] { Loop(); }) {}
  ~StopDuringStartup() { End(); }
  StopDuringStartup(const StopDuringStartup&) = delete;
  StopDuringStartup& operator=(const StopDuringStartup&) = delete;

  // `client`'s requests end (HttpClient::Shutdown) once a stop signal is pending, or at once if
  // one is already.
  void Watch(const std::shared_ptr<http::HttpClient>& client) {
    Watch([client] { client->Shutdown(); });
  }
  // `end` is called (once, on this object's thread or this one) once a stop signal is pending,
  // or at once if one is already.
  void Watch(std::function<void()> end) {
    MutexLock l(mu_);
    if (stop_) return end();
    ends_.push_back(std::move(end));
  }
  // Whether a stop signal came during the checks.
  bool stop() const { return stop_; }
  // Stops watching (start-up is over); stop() stays as it is. Idempotent.
  void End() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  bool Pending() const {
    sigset_t pending;
    if (::sigpending(&pending) != 0) return false;
    for (int sig : StopSignals()) {
      if (sigismember(&stop_signals_, sig) == 1 && sigismember(&pending, sig) == 1) return true;
    }
    return false;
  }
  void Loop() {
    while (!done_) {
      if (Pending()) {
        MutexLock l(mu_);
        stop_ = true;
        for (auto& end : ends_) end();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const sigset_t stop_signals_;
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::vector<std::function<void()>> ends_ GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

// The directory a server works in: `given`, else `home`/`leaf`, else $BDN_HOME/`leaf`; made
// absolute, so that every message naming a file in it starts with the path that HideServerPath
// keeps out of error bodies (clients see `shown_as`/...; the server's stderr keeps the path).
// ServerDirPath is the path alone.
fs::path ServerDirPath(const std::string& given, const std::string& home, const char* leaf) {
  return fs::absolute(!given.empty()  ? fs::path(given)
                      : !home.empty() ? fs::path(home) / leaf
                                      : DefaultHome() / leaf);
}

fs::path ServerDir(const std::string& given, const std::string& home, const char* leaf,
                   const std::string& shown_as) {
  fs::path dir = ServerDirPath(given, home, leaf);
  http::HideServerPath(dir, shown_as);
  return dir;
}

// What the sync jobs of a server with data directory `data` may read: file:// sources only
// under --sync-file-root (canonical; none given: no file:// at all) and never in `data`; public
// addresses only, unless --sync-allow-private-addresses. Errors: a root that is missing, not a
// directory, or inside `data`, naming the flag.
Result<sync::SourceAccess> ServerSourceAccess(const ServeArgs& args, const fs::path& data) {
  sync::SourceAccess access;
  std::error_code ec;
  const std::string data_dir = fs::weakly_canonical(data, ec).string();
  if (ec) return Err(ErrnoError("--data " + data.string(), ec.value()));
  access.forbidden_dirs.push_back(data_dir);
  access.file_roots.emplace();
  for (const std::string& given : args.sync_file_roots) {
    const std::string what = "--sync-file-root \"" + given + "\"";
    fs::path root = fs::canonical(fs::absolute(given), ec);
    if (ec) return Err(ErrnoError(what, ec.value()));
    if (!fs::is_directory(root, ec)) return Err(InvalidArgumentError(what + ": not a directory"));
    const std::string r = root.string();
    if (r == data_dir || r.starts_with(data_dir + "/")) {
      return Err(InvalidArgumentError(what + ": inside the data directory (--data " +
                                      data.string() + "), which is never a sync source"));
    }
    access.file_roots->push_back(r);
  }
  access.public_addresses_only = !args.sync_allow_private_addresses;
  return access;
}

// A server bound to its addresses (not serving yet). Both servers bind before they create
// anything on disk, so one that cannot listen (a busy port) leaves no trace.
// Errors: Server::Bind's.
Result<std::unique_ptr<http::Server>> BindServer(const http::ServerOptions& options) {
  auto server = std::make_unique<http::Server>(options);
  BDN_RETURN_IF_ERROR(server->Bind());
  return server;
}

// The bounds of --claim-ttl.
constexpr std::chrono::milliseconds kMinClaimTtl{100};
constexpr std::chrono::milliseconds kMaxClaimTtl{24 * 3'600'000};

// The origin options the server flags set (the rest are the command's own).
Result<origin::OriginOptions> OriginOptionsFrom(const HttpServerArgs& a) {
  origin::OriginOptions o;
  auto readahead = ParseByteSize(a.batch_readahead);
  if (!readahead) return Err(readahead.error().WithPrefix("--batch-readahead"));
  o.batch_readahead_bytes = *readahead;
  return o;
}

// Raises the soft limit of open files to the hard limit, so that --max-connections fits.
void RaiseOpenFileLimit(size_t wanted) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
    (void)::getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < wanted + 64) {
    log::Warn("the open-file limit (" + std::to_string(rl.rlim_cur) +
              ") is below --max-connections (" + std::to_string(wanted) +
              ") plus what the server needs besides; connections beyond it are refused by the "
              "kernel's accept");
  }
}

// --log-level and --log-file: where the server's log goes (docs/http-api.md, "Logs").
// Errors: InvalidArgument naming the flag (CheckLogFileOutside: never inside `dir`, the server's
// directory, described as `dir_what`); the log file's open error.
Status InitLog(const HttpServerArgs& a, const fs::path& dir, const std::string& dir_what) {
  auto level = log::ParseLevel(a.log_level);
  if (!level) return level.error().WithPrefix("--log-level");
  BDN_RETURN_IF_ERROR(CheckLogFileOutside(a.log_file, dir, dir_what, /*logs_allowed=*/false));
  return log::Init(*level, a.log_file);
}

// With --metrics-listen: where /metrics is served.
void PrintMetricsAddress(const http::Server& server) {
  if (server.metrics_url().empty()) return;
  log::Info("metrics on " + server.metrics_url() + "/metrics");
}

Result<http::ServerOptions> ServerOptionsFrom(const HttpServerArgs& a) {
  using std::chrono::milliseconds;
  http::ServerOptions o;
  o.listen = a.listen;
  o.metrics_listen = a.metrics_listen;
  if (a.threads < 1 || a.threads > 4096) {
    return Err(
        InvalidArgumentError("--threads " + std::to_string(a.threads) + ": must be 1 to 4096"));
  }
  if (a.io_threads < 0 || a.io_threads > 256) {
    return Err(InvalidArgumentError("--io-threads " + std::to_string(a.io_threads) +
                                    ": must be 0 to 256"));
  }
  o.threads = a.threads;
  o.io_threads = a.io_threads;
  struct Duration {
    const char* flag;
    const std::string& text;
    milliseconds* out;
  };
  for (const Duration& d : {Duration{"--header-timeout", a.header_timeout, &o.header_timeout},
                            Duration{"--idle-timeout", a.idle_timeout, &o.idle_timeout},
                            Duration{"--write-timeout", a.write_timeout, &o.write_timeout}}) {
    auto v = ParseDuration(d.text, milliseconds(100), milliseconds(3'600'000));
    if (!v) return Err(v.error().WithPrefix(d.flag));
    *d.out = *v;
  }
  auto rate = ParseByteSize(a.min_body_rate);
  if (!rate) return Err(rate.error().WithPrefix("--min-body-rate"));
  if (*rate == 0) {
    return Err(InvalidArgumentError("--min-body-rate \"" + a.min_body_rate +
                                    "\": must be at least 1 byte per second"));
  }
  o.min_body_rate = *rate;
  if (a.max_connections < 1 || a.max_connections_per_client < 1) {
    return Err(InvalidArgumentError(
        "--max-connections and --max-connections-per-client: must be at least 1"));
  }
  o.max_connections = a.max_connections;
  o.max_connections_per_client = a.max_connections_per_client;
  auto header = ParseByteSize(a.max_header_size);
  if (!header) return Err(header.error().WithPrefix("--max-header-size"));
  if (*header < 1024 || *header > 1024 * 1024) {
    return Err(
        InvalidArgumentError("--max-header-size \"" + a.max_header_size + "\": must be 1K to 1M"));
  }
  o.max_header_bytes = *header;
  RaiseOpenFileLimit(o.max_connections);
  return o;
}

// The server's periodic garbage collection: one RunGc every interval on its own thread, its
// outcome in the bdn_gc_* metrics (docs/http-api.md, "Health and metrics"). With `cluster` (the
// metadata database replicas share), each run first takes that database's lock "gc" and is
// skipped while another replica's run holds it (bdn_gc_skipped_total), so replicas over one
// store never collect it at once.
class PeriodicGc {
 public:
  PeriodicGc(Registry& registry, GcStore& store, http::Metrics& metrics,
             std::chrono::milliseconds interval, GcOptions options,
             std::shared_ptr<sql::Database> cluster = nullptr)
      : registry_(registry),
        store_(store),
        metrics_(metrics),
        interval_(interval),
        options_(std::move(options)),
        cluster_(std::move(cluster)) {
    using T = http::Metrics::Type;
    metrics_.Declare("bdn_gc_runs_total", T::kCounter, "Garbage collection runs that completed.");
    metrics_.Declare("bdn_gc_failures_total", T::kCounter, "Garbage collection runs that failed.");
    metrics_.Declare("bdn_gc_skipped_total", T::kCounter,
                     "Garbage collection runs skipped because another replica's run held the "
                     "database lock \"gc\".");
    metrics_.Declare("bdn_gc_bytes_reclaimed_total", T::kCounter,
                     "Pack bytes deleted by garbage collection, less the bytes it copied.");
    metrics_.Declare("bdn_gc_packs_deleted_total", T::kCounter,
                     "Packs deleted by garbage collection (repacked ones included).");
    metrics_.Declare("bdn_gc_packs_repacked_total", T::kCounter,
                     "Packs whose needed blobs garbage collection copied before deleting them.");
    metrics_.Declare("bdn_gc_last_run_timestamp_seconds", T::kGauge,
                     "Unix time at which the last garbage collection run ended.");
    metrics_.Declare("bdn_gc_last_duration_seconds", T::kGauge,
                     "How long the last garbage collection run took.");
    metrics_.Declare("bdn_gc_last_bytes_reclaimed", T::kGauge,
                     "Bytes the last garbage collection run reclaimed.");
    options_.stopping = [this] { return stop_.load(); };
    if (interval_.count() > 0) thread_ = std::thread([this] { Loop(); });
  }
  ~PeriodicGc() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    for (;;) {
      {
        MutexLock l(mu_);
        if (cv_.wait_for(l.native(), interval_, [this] { return stop_.load(); })) return;
      }
      std::unique_ptr<sql::HeldLock> held;
      if (cluster_) {
        auto lock = cluster_->TryLock("gc");
        if (!lock) {
          metrics_.Add("bdn_gc_failures_total", {}, 1);
          log::Error("gc: " + lock.error().message());
          continue;
        }
        if (!lock->held) {
          metrics_.Add("bdn_gc_skipped_total", {}, 1);
          log::Info("gc: skipped; another replica is collecting (" +
                    (lock->holder.empty() ? std::string("holder unknown") : lock->holder) + ")");
          continue;
        }
        held = std::move(lock->held);
      }
      auto r = RunGc(registry_, store_, options_);
      held.reset();
      if (stop_) return;
      if (!r) {
        metrics_.Add("bdn_gc_failures_total", {}, 1);
        // Most of RunGc's messages start with "gc: " already.
        const std::string& why = r.error().message();
        log::Error(why.starts_with("gc: ") ? why : "gc: " + why);
        continue;
      }
      metrics_.Add("bdn_gc_runs_total", {}, 1);
      metrics_.Add("bdn_gc_bytes_reclaimed_total", {}, static_cast<double>(r->bytes_reclaimed));
      metrics_.Add("bdn_gc_packs_deleted_total", {}, static_cast<double>(r->packs_deleted));
      metrics_.Add("bdn_gc_packs_repacked_total", {}, static_cast<double>(r->packs_repacked));
      metrics_.Set("bdn_gc_last_run_timestamp_seconds", {},
                   static_cast<double>(WallNowMs(*Clock::Real())) / 1000.0);
      metrics_.Set("bdn_gc_last_duration_seconds", {},
                   static_cast<double>(r->duration.count()) / 1000.0);
      metrics_.Set("bdn_gc_last_bytes_reclaimed", {}, static_cast<double>(r->bytes_reclaimed));
      for (const std::string& w : r->warnings) {
        log::Warn("gc: " + w);
      }
      if (r->packs_deleted > 0) {
        log::Info("gc: reclaimed " + std::to_string(r->bytes_reclaimed) + " bytes (" +
                  std::to_string(r->packs_deleted) + " packs deleted, " +
                  std::to_string(r->packs_repacked) + " repacked)");
      }
    }
  }

  Registry& registry_;
  GcStore& store_;
  http::Metrics& metrics_;
  const std::chrono::milliseconds interval_;
  GcOptions options_;
  const std::shared_ptr<sql::Database> cluster_;
  Mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Gives back the space a failed upload took on a full disk: the server's own writers' packs
// that no Sync covered (ChunkStore::DiscardAfterFullDisk), deleted with commits held off
// (GcStore::HoldForSweep), checked once a second after a write of the store found the disk full
// (ChunkStore::FullDiskCount). Without it the partial packs of the upload that filled the disk
// stayed until the next gc and every push failed meanwhile (from a new user's run). A push whose
// uploaded blobs went with them gets its commit refused as not stored and stores them again.
class FullDiskReclaimer {
 public:
  explicit FullDiskReclaimer(GcStore& store) : store_(store) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~FullDiskReclaimer() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        MutexLock l(mu_);
        if (cv_.wait_for(l.native(), std::chrono::seconds(1), [this] { return stop_; })) return;
      }
      const uint64_t now = store_.blobs().FullDiskCount();
      if (now == seen) continue;
      seen = now;
      auto hold = store_.HoldForSweep();
      if (!hold) {
        log::Error("full disk: removing the failed uploads' partial packs: " +
                   hold.error().message());
        continue;
      }
      auto d = store_.blobs().DiscardAfterFullDisk();
      if (!d) {
        log::Error("full disk: removing the failed uploads' partial packs: " + d.error().message());
      } else if (d->packs > 0) {
        log::Warn("full disk: removed " + std::to_string(d->packs) +
                  " partial packs of uploads no commit covered (" + std::to_string(d->bytes) +
                  " bytes); a push that relied on them stores its chunks again");
      }
    }
  }

  GcStore& store_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// How far back the store's in-memory writer claims must reach (LocalChunkStore::Options::
// claims_retain_since): to the oldest live push claim, which a database of claims answers on a
// thread of its own every second, so that a writer never waits for the database (nor stalls
// when it is down: then everything is retained until it answers again).
class ClaimHorizon {
 public:
  explicit ClaimHorizon(std::shared_ptr<PushClaims> claims) : claims_(std::move(claims)) {
    Refresh();
    thread_ = std::thread([this] { Loop(); });
  }
  ~ClaimHorizon() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // The oldest live claim's acquisition; SteadyTime::min() when unknown; max() when none.
  SteadyTime Oldest() const { return SteadyTime(SteadyTime::duration(oldest_.load())); }

 private:
  void Refresh() {
    auto r = claims_->OldestLiveAcquired();
    SteadyTime t = !r ? SteadyTime::min() : *r ? **r : SteadyTime::max();
    oldest_ = t.time_since_epoch().count();
  }
  void Loop() {
    MutexLock l(mu_);
    while (!cv_.wait_for(l.native(), std::chrono::seconds(1), [this] { return stop_; })) {
      l.Unlock();
      Refresh();
      l.Lock();
    }
  }

  const std::shared_ptr<PushClaims> claims_;
  std::atomic<SteadyTime::rep> oldest_{0};
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Where `bdn serve` keeps its metadata: the data directory's SQLite file, or PostgreSQL (--db).
struct Metadata {
  std::shared_ptr<Registry> registry;
  std::shared_ptr<KeyStore> keys;
  std::shared_ptr<SyncJobStore> jobs;
  std::shared_ptr<SecretStore> secrets;
  std::shared_ptr<PushClaims> claims;  // null: the origin's memory
  // With --db: the pool (for other components' tables, e.g. an object store's pack index, which
  // migrate their own component with PgPool::Migrate) and the database replicas coordinate in
  // (its lock "gc" around each periodic GC run).
  std::shared_ptr<sql::PgPool> pool;
  std::shared_ptr<sql::Database> cluster;
};

Result<Metadata> OpenMetadata(
    const ServeArgs& args, const fs::path& data, RegistryOptions registry_options,
    std::chrono::milliseconds ttl,
    const std::function<void(const std::shared_ptr<sql::PgPool>&)>& pool_opened) {
  Metadata m;
  if (args.db.empty()) {
    const fs::path db = data / "registry.db";
    BDN_ASSIGN_OR_RETURN(m.registry, SqliteRegistry::Open(db, std::move(registry_options)));
    BDN_ASSIGN_OR_RETURN(m.keys, SqliteKeyStore::Open(db));
    BDN_ASSIGN_OR_RETURN(m.jobs, SqliteSyncJobStore::Open(db));
    BDN_ASSIGN_OR_RETURN(m.secrets, SqliteSecretStore::Open(db));
    return m;
  }
  if (args.db_connections < 1 || args.db_connections > 1000) {
    return Err(InvalidArgumentError("--db-connections " + std::to_string(args.db_connections) +
                                    ": must be 1 to 1000"));
  }
  sql::PgOptions options;
  options.url = args.db;
  options.max_connections = static_cast<size_t>(args.db_connections);
  BDN_ASSIGN_OR_RETURN(PgMetadata pg,
                       OpenPgMetadata(options, std::move(registry_options), ttl, pool_opened));
  log::Info("metadata in " + pg.pool->name());
  m.registry = pg.registry;
  m.keys = pg.keys;
  m.jobs = pg.jobs;
  m.secrets = pg.secrets;
  m.claims = pg.claims;
  m.pool = pg.pool;
  m.cluster = pg.pool->Use("cluster");
  return m;
}

// Names the versions a pack found missing from the object store held blobs of, in the log and
// in bdn_objstore_missing_pack_versions: on its own thread, since it reads every retained
// version's manifest and chunk indexes (a missing pack is rare, and the reader that found it must
// not wait for this).
class MissingPackReporter {
 public:
  MissingPackReporter() : thread_([this] { Loop(); }) {}
  ~MissingPackReporter() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Attach(std::shared_ptr<Registry> registry, std::shared_ptr<ChunkStore> store,
              std::function<std::string(uint64_t)> pack_uri) {
    MutexLock l(mu_);
    registry_ = std::move(registry);
    store_ = std::move(store);
    pack_uri_ = std::move(pack_uri);
    cv_.notify_all();
  }
  void Report(uint64_t pack, const std::vector<Digest>& blobs) {
    MutexLock l(mu_);
    queue_.emplace_back(pack, std::unordered_set<Digest>(blobs.begin(), blobs.end()));
    cv_.notify_all();
  }

 private:
  void Loop() {
    for (;;) {
      std::pair<uint64_t, std::unordered_set<Digest>> job;
      std::shared_ptr<Registry> registry;
      std::shared_ptr<ChunkStore> store;
      std::function<std::string(uint64_t)> pack_uri;
      {
        MutexLock l(mu_);
        cv_.wait(l.native(), [&] { return stop_ || (!queue_.empty() && registry_); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        registry = registry_;
        store = store_;
        pack_uri = pack_uri_;
      }
      auto versions = registry->ListRetainedVersions();
      if (!versions) {
        log::Error(
            "object store: pack " + pack_uri(job.first) +
            " is missing; the versions that need it are unknown: " + versions.error().message());
        continue;
      }
      std::vector<std::string> affected;
      for (const VersionRecord& v : *versions) {
        std::vector<Digest> blobs;
        // A version whose manifest or chunk index was in the pack cannot even be listed.
        bool hit = !CollectVersionBlobs(*store, v.digest, blobs).ok();
        for (size_t i = 0; i < blobs.size() && !hit; ++i) hit = job.second.contains(blobs[i]);
        if (hit) affected.push_back(PinnedRef{v.ns, v.volume, v.digest}.ToString());
      }
      std::string list;
      for (const std::string& a : affected) list += (list.empty() ? "" : ", ") + a;
      log::Error("object store: pack " + pack_uri(job.first) + " is missing; " +
                 (affected.empty()
                      ? std::string("no retained version needs its blobs")
                      : Counted(affected.size(), "version") + " cannot be read whole: " + list +
                            (affected.size() == 1 ? " (push it again to repair)"
                                                  : " (push them again to repair)")));
    }
  }

  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::pair<uint64_t, std::unordered_set<Digest>>> queue_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<ChunkStore> store_;
  std::function<std::string(uint64_t)> pack_uri_;
  std::thread thread_;
};

// Exports an object pack store's counters as bdn_objstore_* metrics, sampled at each scrape.
void ExportObjectStoreMetrics(http::Metrics& m,
                              std::shared_ptr<const objstore::ObjectPackStore> s) {
  using T = http::Metrics::Type;
  using Stats = objstore::ObjectPackStoreStats;
  struct Counter {
    const char* name;
    const char* help;
    std::function<uint64_t(const Stats&)> get;
  };
  static const Counter kCounters[] = {
      {"bdn_objstore_requests_total", "Requests sent to the object store (each try counts).",
       [](const Stats& x) { return x.s3.requests(); }},
      {"bdn_objstore_put_requests_total", "PutObject and UploadPart requests.",
       [](const Stats& x) { return x.s3.puts; }},
      {"bdn_objstore_get_requests_total", "GetObject requests (ranged reads).",
       [](const Stats& x) { return x.s3.gets; }},
      {"bdn_objstore_list_requests_total", "ListObjectsV2 pages.",
       [](const Stats& x) { return x.s3.lists; }},
      {"bdn_objstore_retries_total", "Requests sent again after a transient failure.",
       [](const Stats& x) { return x.s3.retries; }},
      {"bdn_objstore_sent_bytes_total", "Request body bytes sent to the object store.",
       [](const Stats& x) { return x.s3.bytes_sent; }},
      {"bdn_objstore_received_bytes_total", "Response body bytes read from the object store.",
       [](const Stats& x) { return x.s3.bytes_received; }},
      {"bdn_objstore_packs_uploaded_total", "Packs uploaded whole.",
       [](const Stats& x) { return x.packs_uploaded; }},
      {"bdn_objstore_upload_failures_total", "Pack uploads that failed after their retries.",
       [](const Stats& x) { return x.upload_failures; }},
      {"bdn_objstore_cache_hit_bytes_total", "Record bytes served from ranges read ahead.",
       [](const Stats& x) { return x.cache_hit_bytes; }},
      {"bdn_objstore_missing_packs_total", "Packs found missing from the object store.",
       [](const Stats& x) { return x.missing_packs; }},
      {"bdn_objstore_damaged_copies_total", "Records that failed verification twice.",
       [](const Stats& x) { return x.damaged_copies; }},
  };
  for (const Counter& c : kCounters) m.Declare(c.name, T::kCounter, c.help);
  m.OnScrape([s = std::move(s)](http::Metrics& out) {
    const Stats st = s->stats();
    for (const Counter& c : kCounters) out.Set(c.name, {}, static_cast<double>(c.get(st)));
  });
}

// The store `bdn serve` keeps chunks in, and its side of garbage collection.
struct ServerStore {
  std::shared_ptr<ChunkStore> chunks;
  GcStore* gc = nullptr;
  std::shared_ptr<objstore::ObjectPackStore> object;  // with --store s3://
  std::shared_ptr<objstore::S3Client> s3;             // its client, with --store s3://
  std::chrono::milliseconds commit_wait{3000};        // --commit-wait, with --store s3://
};

// The local pack store under <data>/store, or (--store s3://…) packs in an object store with
// their spool and index under <data>/objstore. Claims are kept from `retain_since()` on.
Result<ServerStore> OpenServerStore(const ServeArgs& args, const fs::path& data,
                                    std::function<SteadyTime()> retain_since,
                                    std::shared_ptr<MissingPackReporter> reporter,
                                    std::shared_ptr<sql::PgPool> pool) {
  ServerStore out;
  if (args.store.empty()) {
    for (const auto& [flag, value] :
         {std::pair{"--s3-endpoint", &args.s3_endpoint}, std::pair{"--idle-seal", &args.idle_seal},
          std::pair{"--commit-wait", &args.commit_wait}}) {
      if (!value->empty()) {
        return Err(
            InvalidArgumentError(std::string(flag) + ": needs --store s3://bucket[/prefix]"));
      }
    }
    BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options store_options, LocalStoreOptions(data));
    // This process's GC sees its writers' claims in memory: what each push or sync under a live
    // claim relied on, and what any client was told in the last --gc-grace.
    store_options.claims = ClaimMode::kMemory;
    store_options.claims_retain_since = std::move(retain_since);
    BDN_ASSIGN_OR_RETURN(std::shared_ptr<LocalChunkStore> local,
                         LocalChunkStore::Open(data / "store", store_options));
    out.gc = local.get();
    out.chunks = std::move(local);
    return out;
  }
  BDN_ASSIGN_OR_RETURN(objstore::S3Location location, objstore::ParseS3Uri(args.store));
  location.endpoint = args.s3_endpoint;
  location.region = args.s3_region;
  objstore::S3ClientOptions co;
  co.location = location;
  auto creds = objstore::AwsCredentialsFromEnvironment();
  if (!creds) return Err(creds.error().WithPrefix("--store " + args.store));
  co.credentials = std::move(*creds);
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<objstore::S3Client> client,
                       objstore::S3Client::Create(std::move(co)));
  out.s3 = client;
  objstore::ObjectPackStoreOptions o;
  o.dir = data / "objstore";
  if (!args.idle_seal.empty()) {
    auto idle =
        ParseDuration(args.idle_seal, std::chrono::milliseconds(10), std::chrono::minutes(1));
    if (!idle) return Err(idle.error().WithPrefix("--idle-seal"));
    o.idle_seal = *idle;
  }
  if (!args.commit_wait.empty()) {
    auto wait =
        ParseDuration(args.commit_wait, std::chrono::milliseconds(0), std::chrono::minutes(1));
    if (!wait) return Err(wait.error().WithPrefix("--commit-wait"));
    out.commit_wait = *wait;
  }
  if (pool) {
    // Replicas over one bucket and one database: the GC's coordination lives in the database.
    BDN_ASSIGN_OR_RETURN(o.catalog, objstore::PgCatalog::Open(client, pool, retain_since));
  }
  o.claims_retain_since = std::move(retain_since);
  o.on_missing_pack = [reporter](uint64_t pack, const std::vector<Digest>& blobs) {
    reporter->Report(pack, blobs);
  };
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<objstore::ObjectPackStore> object,
                       objstore::ObjectPackStore::Open(client, std::move(o)));
  log::Info("chunks in " + object->uri() +
            (location.endpoint.empty() ? "" : " at " + location.endpoint));
  out.gc = object.get();
  out.chunks = object;
  out.object = std::move(object);
  return out;
}

}  // namespace

// Serve, once the stop signals are blocked: runs until one of them, watched by `startup` (which
// ends the database calls of a start-up that waits on them) until it listens.
Status ServeUntilStopped(const ServeArgs& args, const std::string& home,
                         const sigset_t& stop_signals, StopDuringStartup& startup) {
  KeepFreedMemory();
  BDN_RETURN_IF_ERROR(
      InitLog(args.http, ServerDirPath(args.data, home, "server"), "the data directory"));
  auto ttl = ParseDuration(args.claim_ttl, kMinClaimTtl, kMaxClaimTtl);
  if (!ttl) return ttl.error().WithPrefix("--claim-ttl");
  RegistryOptions registry_options;
  auto retention = ParseDuration(args.retention, std::chrono::milliseconds(0),
                                 std::chrono::milliseconds(int64_t{3650} * 86'400'000));
  if (!retention) return retention.error().WithPrefix("--retention");
  registry_options.retention = *retention;
  auto gc_interval = ParseDuration(args.gc_interval, std::chrono::milliseconds(0),
                                   std::chrono::milliseconds(int64_t{365} * 86'400'000));
  if (!gc_interval) return gc_interval.error().WithPrefix("--gc-interval");
  auto gc_grace =
      ParseDuration(args.gc_grace, std::chrono::milliseconds(0), std::chrono::hours(24));
  if (!gc_grace) return gc_grace.error().WithPrefix("--gc-grace");
  auto job_retention = ParseDuration(args.sync_job_retention, std::chrono::milliseconds(0),
                                     std::chrono::milliseconds(int64_t{3650} * 86'400'000));
  if (!job_retention) return job_retention.error().WithPrefix("--sync-job-retention");
  if (job_retention->count() > 0 && *job_retention < std::chrono::minutes(1)) {
    // A job deleted as it ends would vanish under `sync start --wait`, which reads it then.
    return InvalidArgumentError("--sync-job-retention \"" + args.sync_job_retention +
                                "\": must be 0 (keep forever) or at least 1m");
  }
  auto min_source_rate = ParseByteSize(args.sync_min_source_rate);
  if (!min_source_rate) return min_source_rate.error().WithPrefix("--sync-min-source-rate");
  auto source_stall_time =
      ParseDuration(args.sync_source_stall_time, std::chrono::seconds(1), std::chrono::hours(1));
  if (!source_stall_time) return source_stall_time.error().WithPrefix("--sync-source-stall-time");
  auto gc_hook = WithGcStopFromEnvironment(nullptr);
  if (!gc_hook) return gc_hook.error();
  if (!(args.gc_max_repack_fraction >= 0 && args.gc_max_repack_fraction <= 1)) {
    return InvalidArgumentError("--gc-max-repack-fraction " +
                                FormatNumber(args.gc_max_repack_fraction) +
                                ": must be between 0 and 1");
  }
  BDN_ASSIGN_OR_RETURN(http::ServerOptions server_options, ServerOptionsFrom(args.http));
  BDN_ASSIGN_OR_RETURN(origin::OriginOptions options, OriginOptionsFrom(args.http));
  const fs::path data = ServerDir(args.data, home, "server", "<data>");
  BDN_ASSIGN_OR_RETURN(sync::SourceAccess source_access, ServerSourceAccess(args, data));
  BDN_ASSIGN_OR_RETURN(std::unique_ptr<http::Server> bound, BindServer(server_options));
  http::Server& server = *bound;
  // Without --db the registry is data/registry.db: packs without it (a server of a --db started
  // without it) or beside one that is no registry are refused (before anything there is changed),
  // as gc refuses them (from an attacking helper: the server made a new registry and its gc deleted
  // every pack).
  if (args.db.empty()) {
    if (Status s = CheckStoreExists(data, "--data"); !s.ok() && s.code() != StatusCode::kNotFound) {
      return s;
    }
  }
  // Private to the owner (0700, files 0600): it holds every chunk and the key table.
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(data, "--data"));
  // Before anything else touches the directory; held (never closed) until the process exits.
  BDN_ASSIGN_OR_RETURN(DataDirLock data_lock, LockDataDir(data));  // held until the server stops

  // Before the store: with --db, a server that cannot reach its database creates nothing more.
  BDN_ASSIGN_OR_RETURN(Metadata meta,
                       OpenMetadata(args, data, registry_options, *ttl,
                                    [&startup](const std::shared_ptr<sql::PgPool>& pool) {
                                      startup.Watch([pool] { pool->Shutdown(); });
                                    }));
  std::shared_ptr<Registry> registry = meta.registry;
  std::shared_ptr<KeyStore> keys = meta.keys;

  auto live_origin = std::make_shared<std::atomic<origin::Origin*>>(nullptr);
  const std::chrono::milliseconds claim_window = *gc_grace;
  std::shared_ptr<ClaimHorizon> horizon;
  if (meta.claims) horizon = std::make_shared<ClaimHorizon>(meta.claims);
  auto retain_since = [live_origin, claim_window, horizon] {
    SteadyTime since = Clock::Real()->SteadyNow() - claim_window;
    if (horizon) return std::min(since, horizon->Oldest());
    if (origin::Origin* o = live_origin->load()) {
      auto oldest = o->claims().OldestLiveAcquired();
      if (oldest && *oldest) since = std::min(since, **oldest);
    }
    return since;
  };
  auto missing_packs = std::make_shared<MissingPackReporter>();
  BDN_ASSIGN_OR_RETURN(ServerStore server_store,
                       OpenServerStore(args, data, retain_since, missing_packs, meta.pool));
  std::shared_ptr<ChunkStore> store = server_store.chunks;
  if (server_store.object) {
    missing_packs->Attach(registry, store, [object = server_store.object](uint64_t pack) {
      return object->PackUri(pack);
    });
    ExportObjectStoreMetrics(server.metrics(), server_store.object);
    // Replicas sharing the bucket: a push's chunks may have gone to another replica, whose idle
    // spool pack is uploaded within ObjectPackStoreOptions::idle_seal; a commit waits that out.
    options.commit_wait = server_store.commit_wait;
  }

  options.claim_ttl = *ttl;
  if (args.insecure_no_auth) options.auth = origin::AuthMode::kDisabled;

  origin::Origin origin(options, store, registry, keys, meta.claims);
  live_origin->store(&origin);
  struct Unset {  // before the origin goes, on every way out
    std::shared_ptr<std::atomic<origin::Origin*>> p;
    ~Unset() { p->store(nullptr); }
  } unset{live_origin};
  // Sync jobs run in this server (docs/spec.md §6): durable in the registry's database, resumed by
  // the next start after a crash or a stop (with --db, by any replica: each polls for them).
  sync::RunnerDeps sync_deps;
  sync_deps.store = store;
  // A sync's commit is checked and held against a sweep like a push's (CommitCheckingRegistry).
  sync_deps.registry = std::make_shared<CommitCheckingRegistry>(registry, store);
  sync_deps.jobs = meta.jobs;
  if (!args.secrets_key_file.empty()) {
    BDN_ASSIGN_OR_RETURN(sync_deps.secrets,
                         sync::SecretVault::OpenShared(meta.secrets, args.secrets_key_file));
  } else if (args.db.empty()) {
    BDN_ASSIGN_OR_RETURN(sync_deps.secrets,
                         sync::SecretVault::Open(meta.secrets, data / "secrets.key"));
  } else {
    sync_deps.secrets_unavailable =
        "bdn serve --db keeps them in the shared database, sealed with the key of "
        "--secrets-key-file, which this server was not given (every replica needs the same "
        "file)";
  }
  sync_deps.access = source_access;
  sync_deps.min_body_bytes_per_second = *min_source_rate;
  sync_deps.body_stall_timeout = *source_stall_time;
  // A job whose runs keep ending with the process (killed for memory) must not crash-loop us.
  sync_deps.max_unfinished_runs = 5;
  sync_deps.claim = [&origin](const std::string& ns, const std::string& volume,
                              const std::string& job_id, const std::atomic<bool>* stop) {
    return origin.ClaimForSync(ns, volume, job_id, stop);
  };
  sync::JobScheduler scheduler(
      sync_deps,
      {.runners = args.sync_runners,
       .runners_per_namespace = args.sync_runners_per_namespace,
       .poll = args.db.empty() ? std::chrono::milliseconds(0) : std::chrono::milliseconds(10'000),
       .job_retention = *job_retention});
  origin.EnableSync(std::make_shared<sync::LocalSyncService>(
      sync_deps, [&scheduler](const SyncJobRecord& job) { scheduler.Enqueue(job.id, job.spec.ns); },
      args.sync_max_unfinished_per_namespace));
  origin.Register(server);
  GcOptions gc_options;
  gc_options.grace = *gc_grace;
  gc_options.max_repack_fraction = args.gc_max_repack_fraction;
  gc_options.hook = std::move(*gc_hook);
  PeriodicGc gc(*registry, *server_store.gc, server.metrics(), *gc_interval, gc_options,
                meta.cluster);
  FullDiskReclaimer reclaimer(*server_store.gc);
  BDN_RETURN_IF_ERROR(server.Start());
  if (Status s = scheduler.Start(); !s.ok()) {
    server.Stop();
    return s;
  }
  // The first admin key only once the address is bound, so a server that cannot start creates
  // (and prints) none; until then every request is refused with 401, as no key exists.
  if (!args.insecure_no_auth) {
    fs::path token_file = data / "admin.token";
    auto token = origin::BootstrapAdminKey(*keys, token_file);
    if (!token) {
      server.Stop();
      return token.error();
    }
    if (*token) {
      std::fprintf(stderr,
                   "bdn serve: created the first admin key (namespace \"*\"). Its token is shown "
                   "only now and was written to %s (mode 0600):\n%s\n",
                   token_file.c_str(), (*token)->c_str());
    }
  }
  if (args.insecure_no_auth) {
    // After Start, so that the address is the bound one (port 0 picks a free port).
    log::Warn("--insecure-no-auth: authentication is OFF; anyone who can reach " + server.url() +
              " can read, push, tag and manage keys");
  }
  // A stop signal that came during start-up has ended its database calls: no "listening on" then.
  startup.End();
  if (!startup.stop()) {
    log::Info("listening on " + server.url());
    PrintMetricsAddress(server);
  }

  WaitForStopSignal(stop_signals);
  // Handlers and uploaders still waiting on an object store that does not answer end once the
  // requests had their grace (they held the stop for their retries: 119 s); open packs stay in
  // the spool, which the next start uploads. So do calls waiting on a PostgreSQL that does not
  // answer (frozen or cut off: its connections stay up, and libpq would wait for ever).
  auto end_backend_calls = [&] {
    if (server_store.s3) server_store.s3->Shutdown();
    if (meta.pool) meta.pool->Shutdown();
  };
  // Running jobs stop at their next step and stay SYNCING (the next start resumes them); one
  // whose step waits on such a backend (its progress written to a frozen PostgreSQL) is let go
  // after the same grace.
  {
    std::mutex mu;
    std::condition_variable cv;
    bool jobs_stopped = false;
    std::thread grace([&] {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(5), [&] { return jobs_stopped; })) {
        log::Info(
            "sync jobs still running 5 s after the stop signal: ending their calls to the "
            "object store and the database");
        end_backend_calls();
      }
    });
    scheduler.Stop();
    {
      std::lock_guard lock(mu);
      jobs_stopped = true;
    }
    cv.notify_all();
    grace.join();
  }
  server.Stop(end_backend_calls);
  return Status::Ok();
}

Status Serve(const ServeArgs& args, const std::string& home) {
  // Before any thread starts, so that every thread inherits the mask.
  const sigset_t stop_signals = BlockStopSignals();
  StopDuringStartup startup(stop_signals);
  Status s = ServeUntilStopped(args, home, stop_signals, startup);
  startup.End();
  if (!s.ok() && startup.stop()) {
    // A start-up step that a stop signal ended (a migration lock another replica held, a
    // database that did not answer) fails with "shutting down": a clean stop, not an error.
    log::Info("start-up ended by the stop signal: " + s.message());
    WaitForStopSignal(stop_signals);  // pending: taken at once, and logged
    return Status::Ok();
  }
  return s;
}

// ---- bdn cache serve: an in-cluster cache node ----

namespace {

// Exports the NodeCache's counters (NodeCacheStats) as bdn_cache_* metrics, sampled at each
// scrape (docs/http-api.md).
void ExportCacheMetrics(http::Metrics& m, std::shared_ptr<const NodeCache> cache) {
  using T = http::Metrics::Type;
  struct Counter {
    const char* name;
    const char* help;
    uint64_t NodeCacheStats::*field;
  };
  static constexpr Counter kCounters[] = {
      {"bdn_cache_hits_total", "Chunk reads served from the cache directory.",
       &NodeCacheStats::hits},
      {"bdn_cache_misses_total", "Chunk reads not found in the cache directory.",
       &NodeCacheStats::misses},
      {"bdn_cache_joined_total", "Misses that waited for a fetch already under way.",
       &NodeCacheStats::joined},
      {"bdn_cache_upstream_fetches_total", "Upstream Get and batch calls.",
       &NodeCacheStats::upstream_fetches},
      {"bdn_cache_upstream_errors_total",
       "Chunks the upstream failed (other than not found) or answered with bytes not matching "
       "the id.",
       &NodeCacheStats::upstream_errors},
      {"bdn_cache_hit_bytes_total", "Bytes served from the cache directory.",
       &NodeCacheStats::hit_bytes},
      {"bdn_cache_fetched_bytes_total", "Bytes of successful upstream fetches.",
       &NodeCacheStats::fetched_bytes},
      {"bdn_cache_evictions_total", "Regions evicted (whole) to make room.",
       &NodeCacheStats::evictions},
      {"bdn_cache_evicted_bytes_total", "Bytes of evicted regions.",
       &NodeCacheStats::evicted_bytes},
      {"bdn_cache_reinserted_total",
       "Chunks read since they were cached, written again when their region was evicted.",
       &NodeCacheStats::reinserted},
      {"bdn_cache_corrupt_dropped_total", "Cached copies that failed verification.",
       &NodeCacheStats::corrupt_dropped},
      {"bdn_cache_write_errors_total", "Chunks that could not be written to the cache.",
       &NodeCacheStats::write_errors},
  };
  for (const Counter& c : kCounters) m.Declare(c.name, T::kCounter, c.help);
  m.Declare("bdn_cache_bytes", T::kGauge, "Bytes of the region files in the cache directory.");
  m.Declare("bdn_cache_regions", T::kGauge, "Region files in the cache directory.");
  m.Declare("bdn_cache_capacity_bytes", T::kGauge, "Bound of the cache (--cache-size).");
  m.OnScrape([cache = std::move(cache)](http::Metrics& out) {
    NodeCacheStats s = cache->stats();
    for (const Counter& c : kCounters) out.Set(c.name, {}, static_cast<double>(s.*c.field));
    out.Set("bdn_cache_bytes", {}, static_cast<double>(s.cached_bytes));
    out.Set("bdn_cache_regions", {}, static_cast<double>(s.regions));
    out.Set("bdn_cache_capacity_bytes", {}, static_cast<double>(cache->options().capacity_bytes));
  });
}

// Whether the upstream lets this node's own key (BDN_TOKEN, in `client_options`, from which
// `probe` was made: a client of its own, closed after) read every blob. PermissionDenied
// "BDN_TOKEN: ..." naming what to give it when the upstream refuses; other errors: cannot tell.
Status CheckNodeKey(const http::ClientOptions& client_options, http::HttpClient& probe) {
  Status s = origin::CheckReadsEveryNamespace(probe);
  if (s.code() != StatusCode::kPermissionDenied) return s;
  const std::string advice =
      "a cache node fetches with a key with pull on every namespace: bdn key create "
      "--namespace '*' --scope pull";
  if (s.reason() == origin::kVersionRequired) {
    // From a new user: the upstream's words for API clients ("send Bdn-Version: ...") meant
    // nothing to whoever starts a cache node.
    return PermissionDeniedError("BDN_TOKEN: this cache node's key is for one namespace; " +
                                 advice);
  }
  return PermissionDeniedError(
      std::string(client_options.token.empty() ? "BDN_TOKEN is not set"
                                               : "BDN_TOKEN: this cache node's key") +
      ": the upstream refuses its chunk reads (" + s.message() + "); " + advice);
}

}  // namespace

// A cache node's upstream batch stall time (RemoteStoreOptions::batch_stall_timeout), and what each
// cache node between it and the origin adds to it.
constexpr std::chrono::milliseconds kNodeUpstreamStall{20000};
constexpr std::chrono::milliseconds kNodeUpstreamStallPerHop{10000};

// Serves chunk GET and batch from a NodeCache over the origin: each chunk is fetched from the
// origin once (concurrent misses share one fetch) and kept on disk within --cache-size.
Status CacheServe(const CacheServeArgs& args, const std::string& home) {
  KeepFreedMemory();
  BDN_RETURN_IF_ERROR(
      InitLog(args.http, ServerDirPath(args.cache_dir, home, "cache-node"), "the node cache"));
  if (args.upstream.empty()) return InvalidArgumentError("--upstream: the origin URL is required");
  BDN_ASSIGN_OR_RETURN(uint64_t size, ParseByteSize(args.cache_size));
  BDN_ASSIGN_OR_RETURN(http::ServerOptions server_options, ServerOptionsFrom(args.http));
  BDN_ASSIGN_OR_RETURN(origin::OriginOptions options, OriginOptionsFrom(args.http));
  // Settings are checked before anything is made (from an attacker: a bad one left a new cache
  // directory behind).
  // --peers: the cluster's nodes, each checked as a URL here, told to clients by GET /v1/peers;
  // this node reads from none of them (a read forwarded between nodes could come back to one it
  // passed, and the forwarding node's key would go to whatever answers at a listed address).
  if (!args.peers.empty()) {
    const std::vector<std::string> urls = remote::ParseNodeList(args.peers);
    if (urls.empty()) {
      return InvalidArgumentError("--peers: no URL in \"" + http::ShownUrl(args.peers) + "\"");
    }
    if (urls.size() > remote::kMaxPeers) {
      return InvalidArgumentError("--peers: " + std::to_string(urls.size()) + " URLs, at most " +
                                  std::to_string(remote::kMaxPeers));
    }
    size_t bytes = 0;
    for (const std::string& url : urls) {
      auto checked = http::HttpClient::Create({.base_url = url});
      if (!checked) return checked.error().WithPrefix("--peers");
      const std::string& u = (*checked)->base_url();
      if (std::ranges::find(options.peers, u) != options.peers.end()) {
        return InvalidArgumentError("--peers: " + u + " is listed twice");
      }
      bytes += u.size() + 4;
      options.peers.push_back(u);
    }
    // Clients pass over a larger GET /v1/peers answer (remote::DiscoverPeers).
    if (bytes > 60 * 1024) {
      return InvalidArgumentError("--peers: " + std::to_string(bytes) +
                                  " bytes of URLs, more than the 60 KiB a client reads");
    }
  }
  // For tests only: BDN_TEST_SCOPE_TTL_MS (1 to 600000) replaces the 30 s, so that a test whose
  // origin hangs for longer than a verdict lives is not timed by how busy its machine is.
  if (const char* ttl = std::getenv("BDN_TEST_SCOPE_TTL_MS"); ttl && *ttl) {
    int64_t ms = 0;
    const auto [end, ec] = std::from_chars(ttl, ttl + std::strlen(ttl), ms);
    if (ec != std::errc() || *end != '\0' || ms < 1 || ms > 600000) {
      return InvalidArgumentError("BDN_TEST_SCOPE_TTL_MS: \"" + std::string(ttl) +
                                  "\": not 1 to 600000");
    }
    options.scope_ttl = std::chrono::milliseconds(ms);
  }
  const fs::path dir = ServerDir(args.cache_dir, home, "cache-node", "<cache-dir>");
  http::ClientOptions copts;
  copts.base_url = args.upstream;
  copts.token = TokenFromEnvironment();
  if (Status s = http::CheckBearerToken(copts.token); !s.ok()) return s.WithPrefix("BDN_TOKEN");
  copts.label = "origin";
  auto created = http::HttpClient::Create(copts);
  if (!created) return created.error().WithPrefix("--upstream");
  std::shared_ptr<http::HttpClient> client = std::move(*created);
  // Callers see "origin <upstream>: connection refused", not the cluster's internal address.
  http::HideServerAddress(client->base_url(), "<upstream>");
  // Behind a breaker: an upstream that hangs costs one fetch's stall, after which the node answers
  // what it lacks missing at once, and what it holds without delay. The stall is 20 s without a
  // byte (under the patience of a mount, half its 60 s read timeout), plus 10 s for each cache node
  // between this one and the origin (set below, once the chain is known), so that an outer node
  // waits for an inner node's answer (from an attacker: with both at 30 s, the outer node gave up
  // on a healthy inner node stalled on a stopped origin, and refused what the inner node held).
  auto origin_reads = std::make_shared<remote::RemoteChunkStore>(
      client, remote::RemoteStoreOptions{.batch_stall_timeout = kNodeUpstreamStall});
  auto upstream = std::make_shared<UpstreamBreaker>(
      origin_reads,
      std::make_shared<CircuitBreaker>(CircuitBreaker::Options{.name = "the upstream"}));
  const sigset_t stop_signals = BlockStopSignals();
  BDN_ASSIGN_OR_RETURN(std::unique_ptr<http::Server> bound, BindServer(server_options));
  http::Server& server = *bound;
  NodeCacheOptions nopts;
  nopts.dir = dir;
  nopts.capacity_bytes = size;
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<NodeCache> cache, NodeCache::Open(upstream, nopts));
  // A node with no requests would keep the regions another process sharing the directory
  // evicted (and their disk space) until its next read.
  PeriodicTask release_deleted(std::chrono::seconds(1), [&cache] { cache->ReleaseDeleted(); });

  options.role = origin::Role::kCache;
  // Each caller's credentials and version are checked with the origin (once per caller and
  // version per scope_ttl, 30 s), through a client of its own that sends no token of the node's.
  http::ClientOptions check_options;
  check_options.base_url = args.upstream;
  check_options.label = "origin";
  check_options.deadline = std::chrono::milliseconds(10000);
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<http::HttpClient> check_client,
                       http::HttpClient::Create(check_options));
  options.chain_upstream = check_client;
  options.read_authority = origin::UpstreamReadAuthority(check_client, options.scope_ttl);
  BDN_ASSIGN_OR_RETURN(options.node_id, origin::NewNodeId());
  origin::Origin node(options, cache, nullptr, nullptr);
  node.Register(server);
  ExportCacheMetrics(server.metrics(), cache);
  BDN_RETURN_IF_ERROR(server.Start());
  log::Info("cache node " + options.node_id + ": upstream " + args.upstream + ", cache " +
            dir.string() + " (" + args.cache_size + ")");
  // A stop signal during the checks below ends them at once, and the node stops.
  std::optional<StopDuringStartup> startup(stop_signals);
  auto stop_now = [&] {
    startup.reset();
    WaitForStopSignal(stop_signals);  // pending: taken at once, and logged
    server.Stop();
    return Status::Ok();
  };
  // Listening first: a node further along a loop forwards the walk back here, and this node
  // must answer it to find the loop.
  // Through a client of its own, closed after: an idle connection kept from start-up would
  // count against the upstream's --max-connections-per-client.
  auto chain = [&]() -> Result<std::vector<std::string>> {
    BDN_ASSIGN_OR_RETURN(std::shared_ptr<http::HttpClient> probe,
                         http::HttpClient::Create(check_options));
    startup->Watch(probe);
    return origin::ProbeUpstreamChain(*probe, options.node_id);
  }();
  if (startup->stop()) return stop_now();
  if (!chain && chain.error().reason() == origin::kLoopDetected) {
    server.Stop();
    return FailedPreconditionError("--upstream " + args.upstream +
                                   ": does not lead to an origin: " + chain.error().message() +
                                   "; point --upstream at the origin, or at a cache node nearer "
                                   "to it");
  }
  if (!chain) {
    log::Warn("--upstream " + args.upstream +
              ": could not check that it leads to an origin: " + chain.error().message());
  }
  // The node's key is checked unless the upstream could not be reached at all (said above), and
  // within the deadline of the other start-up checks. A node whose fetches the origin refuses
  // would serve nothing it does not hold, and its callers would quietly read from the origin.
  http::ClientOptions key_check_options = copts;
  key_check_options.deadline = check_options.deadline;
  if (chain || (chain.error().code() != StatusCode::kUnavailable &&
                chain.error().code() != StatusCode::kDeadlineExceeded)) {
    auto probe = http::HttpClient::Create(key_check_options);
    if (!probe) {
      server.Stop();
      return probe.error();
    }
    std::shared_ptr<http::HttpClient> key_probe = std::move(*probe);
    startup->Watch(key_probe);
    Status own = CheckNodeKey(key_check_options, *key_probe);
    if (startup->stop()) return stop_now();
    if (own.code() == StatusCode::kPermissionDenied) {
      server.Stop();
      return own;
    }
    if (!own.ok()) {
      log::Warn("--upstream " + args.upstream +
                ": could not check this node's key: " + own.message());
    }
  }
  if (chain && !chain->empty()) {
    origin_reads->SetBatchStallTimeout(kNodeUpstreamStall +
                                       kNodeUpstreamStallPerHop * static_cast<int>(chain->size()));
    log::Info("cache node " + options.node_id + ": upstream cache nodes " + [&] {
      std::string s;
      for (const auto& id : *chain) s += (s.empty() ? "" : " -> ") + id;
      return s;
    }() + " -> origin");
  }
  startup.reset();
  // A chain not known at start (the upstream was down) is probed again every 30 s until it is,
  // for the stall time (from an attacker: a node started before its upstream kept 20 s for good,
  // and gave up on the inner node first).
  std::optional<PeriodicTask> chain_again;
  if (!chain) {
    auto known = std::make_shared<std::atomic<bool>>(false);
    chain_again.emplace(std::chrono::seconds(30), [&, known] {
      if (*known) return;
      auto again = origin::ProbeUpstreamChain(*check_client, options.node_id);
      if (!again) {
        if (again.error().reason() == origin::kLoopDetected) {
          log::Error("--upstream " + args.upstream +
                     ": does not lead to an origin: " + again.error().message());
        }
        return;
      }
      *known = true;
      origin_reads->SetBatchStallTimeout(kNodeUpstreamStall + kNodeUpstreamStallPerHop *
                                                                  static_cast<int>(again->size()));
      log::Info("cache node " + options.node_id + ": " + std::to_string(again->size()) +
                " cache nodes between it and the origin");
    });
  }
  log::Info("listening on " + server.url());
  PrintMetricsAddress(server);
  WaitForStopSignal(stop_signals);
  // Handlers still waiting on an upstream that does not answer end once the requests had their
  // grace, instead of holding the stop for the fetch's deadline (60 s).
  server.Stop([&] {
    client->Shutdown();
    check_client->Shutdown();
  });
  chain_again.reset();
  return Status::Ok();
}

}  // namespace bdn::cli
