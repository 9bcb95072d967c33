#include "bdn/cli/commands.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/dir_fd.h"
#include "bdn/base/log.h"
#include "bdn/base/path_walk.h"
#include "bdn/base/private_files.h"
#include "bdn/base/signals.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/cache/store_stack.h"
#include "bdn/cli/output.h"
#include "bdn/cli/progress.h"
#include "bdn/format/ref.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/mount/mount_table.h"
#include "bdn/remote/cluster_chunk_store.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/remote/remote_registry.h"
#include "bdn/sql/sqlite_database.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/volume/compare.h"
#include "bdn/volume/pull.h"
#include "bdn/volume/push.h"
#include "bdn/volume/resolve.h"
#include "bdn/volume/version_check.h"
#include "bdn/volume/version_view.h"

namespace bdn::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string ModeString(const Entry& e) {
  char type = e.kind == EntryKind::kDirectory ? 'd' : e.kind == EntryKind::kSymlink ? 'l' : '-';
  std::string s(1, type);
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (e.mode & (0400 >> i)) ? rwx[i] : '-';
  return s;
}

json EntryJson(const VersionView& view, const Entry& e) {
  const Entry& f = view.Resolve(e);
  json j = {{"path", e.path}, {"kind", std::string(EntryKindName(e.kind))}, {"mode", e.mode}};
  if (f.kind == EntryKind::kFile) {
    j["size"] = f.size_bytes;
    j["digest"] = f.digest.ToString();
  }
  if (e.kind == EntryKind::kSymlink || e.kind == EntryKind::kHardlink) j["target"] = e.target;
  if (e.mtime_ns) j["mtime_ns"] = *e.mtime_ns;
  return j;
}

json VersionJson(const VersionRecord& v) {
  json j = {{"version_ref", PinnedRef{v.ns, v.volume, v.digest}.ToString()},
            {"digest", v.digest.ToString()},
            {"sequence", v.sequence},
            {"lifecycle", std::string(LifecycleName(v.lifecycle))},
            {"head", v.is_head},
            {"tags", v.tags},
            {"created", FormatUnixMs(v.created_unix_ms)},
            {"files", v.stats.files},
            {"bytes", v.stats.bytes},
            {"chunks", v.stats.chunks},
            {"entries", v.stats.entries}};
  if (!v.source_uri.empty()) j["source_uri"] = v.source_uri;
  if (v.deleted_unix_ms) j["deleted"] = FormatUnixMs(*v.deleted_unix_ms);
  if (v.delete_after_unix_ms) j["delete_after"] = FormatUnixMs(*v.delete_after_unix_ms);
  return j;
}

// Parses and resolves `text` once; the pinned digest is what every later step uses.
Result<std::pair<Ref, PinnedRef>> ParseAndResolve(Context& ctx, const std::string& text) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(text));
  BDN_ASSIGN_OR_RETURN(PinnedRef pinned, ResolveRef(*ctx.registry, ref));
  return std::make_pair(std::move(ref), std::move(pinned));
}

// What a manifest the store lacks means for the version `record` describes: nullopt (corruption)
// unless it was deleted and its retention has ended; then gc may have collected it, which is
// NotFound "version …: deleted <time>, its retention ended <time> and gc collected its data: it
// can be neither read nor restored" (from a user: a version deleted on purpose read as lost data,
// exit 5).
std::optional<Status> CollectedError(const VersionRecord& record, const PinnedRef& pinned) {
  if (record.lifecycle != Lifecycle::kDeleted || !record.delete_after_unix_ms ||
      *record.delete_after_unix_ms > WallNowMs(*Clock::Real())) {
    return std::nullopt;
  }
  return NotFoundError(
      "version " + pinned.ToString() + ": deleted " +
      (record.deleted_unix_ms ? FormatUnixMs(*record.deleted_unix_ms) + ", " : std::string()) +
      "its retention ended " + FormatUnixMs(*record.delete_after_unix_ms) +
      " and gc collected its data: it can be neither read nor restored");
}

// What to say on stderr of reading `record`, the version `pinned` names, where it is deleted:
// "warning: version REF was deleted <time>; it is restorable until <time> (bdn volume restore
// REF), and then gc may collect its data", or, its retention over, that gc may collect it at any
// time; "" for a live version. For commands that read a version (mount, pull, cat), once its
// manifest is read (a collected one is CollectedError alone). From an attacking helper: a mount
// of a deleted version by its digest said nothing, and failed only once a gc had run, on a node
// far from whoever deleted it.
std::string DeletedWarning(const VersionRecord& record, const PinnedRef& pinned) {
  if (record.lifecycle != Lifecycle::kDeleted) return "";
  std::string text = "warning: version " + pinned.ToString() + " was deleted";
  if (record.deleted_unix_ms) text += " " + FormatUnixMs(*record.deleted_unix_ms);
  if (!record.delete_after_unix_ms) {
    text += "; gc may collect its data (bdn volume restore " + pinned.ToString() + " keeps it)";
  } else if (*record.delete_after_unix_ms > WallNowMs(*Clock::Real())) {
    text += "; it is restorable until " + FormatUnixMs(*record.delete_after_unix_ms) +
            " (bdn volume restore " + pinned.ToString() + "), and then gc may collect its data";
  } else {
    text += "; its retention ended " + FormatUnixMs(*record.delete_after_unix_ms) +
            ": gc may collect its data at any time";
  }
  return text + "\n";
}

// Says DeletedWarning of `pinned` as the registry has it; nothing where it cannot say.
void WarnIfDeleted(Context& ctx, const PinnedRef& pinned) {
  if (!ctx.registry) return;
  if (auto record = ctx.registry->GetVersion(pinned.ns, pinned.volume, pinned.digest)) {
    std::cerr << DeletedWarning(*record, pinned);
  }
}

// VersionView::Open of `pinned` on `store`; a manifest the store lacks as CollectedError says.
Result<std::shared_ptr<VersionView>> OpenViewOn(Context& ctx, std::shared_ptr<ChunkStore> store,
                                                const PinnedRef& pinned) {
  auto view = VersionView::Open(std::move(store), pinned.digest);
  if (view || view.error().code() != StatusCode::kCorruption || !ctx.registry) return view;
  auto record = ctx.registry->GetVersion(pinned.ns, pinned.volume, pinned.digest);
  if (!record) return view;
  if (auto collected = CollectedError(*record, pinned)) return Err(*collected);
  return view;
}

Result<std::shared_ptr<VersionView>> OpenView(Context& ctx, const PinnedRef& pinned) {
  return OpenViewOn(ctx, ReadStore(ctx, pinned), pinned);
}

// `text` as AbsoluteMountpoint gives it: what a mount is known by in its output, its log's name
// and /proc/mounts.
fs::path NormalMountpoint(const std::string& text) { return AbsoluteMountpoint(text); }

}  // namespace

fs::path DefaultHome() {
  if (const char* h = std::getenv("BDN_HOME"); h && *h) return h;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "bdn";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".local/share/bdn";
  }
  // No HOME (env -i, some service managers): the user's home from the password database.
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found &&
      found->pw_dir && *found->pw_dir) {
    return fs::path(found->pw_dir) / ".local/share/bdn";
  }
  return fs::path("/") / ".local/share/bdn";
}

namespace {

// Whether `dir` holds a store of packs (or of the old layout's chunk files): not a directory that
// merely holds something named "store", nor a store with nothing in it yet (from an attacking
// helper: a server whose first start stopped after making store/packs was refused at the next
// for a missing registry.db, though there was nothing to lose). An unreadable directory counts
// as holding packs.
bool HoldsPacks(const fs::path& dir) {
  for (const char* sub : {"packs", "chunks"}) {
    std::error_code ec;
    if (!fs::is_directory(dir / "store" / sub, ec)) continue;
    fs::directory_iterator it(dir / "store" / sub, ec);
    if (ec || it != fs::directory_iterator()) return true;
  }
  return false;
}

// `dir`/registry.db as a registry: OK for a SQLite database (its header; an empty file whose
// write-ahead log holds the database counts too), FailedPrecondition naming what it is else.
Status CheckRegistryFile(const fs::path& dir, const std::string& where) {
  const fs::path db = dir / "registry.db";
  struct stat st;
  if (::stat(db.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {  // lstat found it: a symlink that leads nowhere
      std::error_code ec;
      return FailedPreconditionError(where + ": registry.db is a symlink to \"" +
                                     fs::read_symlink(db, ec).string() +
                                     "\", which does not exist; nothing was done");
    }
    return ErrnoError(where + ": registry.db", err);
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(where + ": registry.db is not a regular file; nothing was done");
  }
  if (st.st_size == 0) {
    // A database SQLite made in WAL mode and has not checkpointed yet: its write-ahead log holds
    // it, and starts with the WAL magic (sqlite.org/fileformat2.html, "WAL File Format") and a
    // header and frame of at least one 512-byte page. Anything else beside an empty file (from
    // an attacking helper: one byte) opened as a new database.
    std::ifstream wal(dir / "registry.db-wal", std::ios::binary);
    unsigned char magic[4] = {};
    std::error_code ec;
    const auto wal_size = fs::file_size(dir / "registry.db-wal", ec);
    if (wal.read(reinterpret_cast<char*>(magic), 4) && !ec && wal_size >= 32 + 24 + 512 &&
        magic[0] == 0x37 && magic[1] == 0x7f && magic[2] == 0x06 &&
        (magic[3] == 0x82 || magic[3] == 0x83)) {
      return Status::Ok();
    }
    return FailedPreconditionError(where +
                                   ": registry.db is empty (a truncated copy?), not a registry; "
                                   "nothing was done");
  }
  std::ifstream in(db, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  if (!in && !in.eof()) return ErrnoError(where + ": registry.db", errno);
  if (std::string_view(header, sizeof header) != std::string_view("SQLite format 3\0", 16)) {
    return FailedPreconditionError(where +
                                   ": registry.db is not a SQLite database, not a "
                                   "registry; nothing was done");
  }
  // Another program's SQLite database: opened as a registry it would be given the registry's
  // tables (from an attacking helper: gc --dry-run did that to one). A registry has its volumes
  // table from its first open; a database with no table yet is a registry being made.
  auto tables = sql::ListSqliteTables(db);
  if (tables && !tables->empty() &&
      std::find(tables->begin(), tables->end(), "volumes") == tables->end()) {
    std::string names;
    for (size_t i = 0; i < tables->size() && i < 5; ++i) {
      names += (i ? ", " : "") + EscapeName((*tables)[i]);
    }
    if (tables->size() > 5) names += ", ...";
    return FailedPreconditionError(
        where + ": registry.db is a SQLite database of something else (its tables: " + names +
        "), not a registry; nothing was done");
  }
  return Status::Ok();
}

}  // namespace

Status CheckStoreExists(const fs::path& dir, std::string_view what, StoreNeeds needs) {
  const std::string where = std::string(what) + " " + dir.string();
  struct stat st;
  // From a new user: a push to a BDN_HOME that names a file said "no store there (nothing was
  // pushed to it)".
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(where + ": not a directory");
  }
  if (::lstat((dir / "registry.db").c_str(), &st) != 0 && errno == EACCES) {
    // Another user's store (its home is 0700): said as such, not as "no store there".
    struct stat owner;
    std::string whose;
    if (::stat(dir.c_str(), &owner) == 0) whose = " (owned by " + UidText(owner.st_uid) + ")";
    return PermissionDeniedError(where + ": permission denied" + whose +
                                 "; a store is private to the user who made it");
  }
  std::error_code ec;
  const bool registry = fs::exists(fs::symlink_status(dir / "registry.db", ec));
  const bool store = fs::is_directory(dir / "store", ec);
  if (registry) return needs == StoreNeeds::kPacks ? Status::Ok() : CheckRegistryFile(dir, where);
  if (store && needs == StoreNeeds::kPacks) return Status::Ok();
  if (store && HoldsPacks(dir)) {
    return FailedPreconditionError(
        where +
        ": its store has no registry.db beside it (a bdn serve --db keeps its registry in "
        "PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done");
  }
  return NotFoundError(where + ": no store there (nothing was pushed to it)");
}

Status CheckRefSyntax(const std::vector<std::string>& refs) {
  for (const std::string& r : refs) {
    if (r.empty()) continue;
    if (auto parsed = ParseRef(r, RefForm::kNamespace); !parsed) return parsed.error();
  }
  return Status::Ok();
}

Status CheckPushDirectory(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError("directory \"" + dir + "\"", errno);
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgumentError("directory \"" + dir + "\": not a directory");
  }
  return Status::Ok();
}

Result<Context> OpenEmbedded(const fs::path& home, bool json_output, EmbeddedOpen mode) {
  if (mode == EmbeddedOpen::kExisting) {
    if (Status s = CheckStoreExists(home, "embedded store"); !s.ok()) {
      return Err(Status(s.code(), s.message() + "; --home or BDN_HOME names another"));
    }
  } else if (HoldsPacks(home) || (::access(home.c_str(), X_OK) != 0 && errno == EACCES)) {
    // Also another user's home (0700): said as `ls` says it, with its owner (from a user: push
    // said only "Permission denied").
    // From an attacking helper: a push with --home at a `bdn serve --db` data directory made an
    // empty registry.db beside its packs, and gc then deleted every one of them. A store that
    // holds packs is opened only with its registry.
    if (Status s = CheckStoreExists(home, "embedded store"); !s.ok()) {
      return Err(Status(s.code(), s.message() + "; --home or BDN_HOME names another"));
    }
  }
  // Private to its owner (0700): it holds every chunk and the registry.
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(home, "embedded store"));
  Context ctx;
  ctx.home = home;
  ctx.json = json_output;
  BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options store_options, LocalStoreOptions(home));
  BDN_ASSIGN_OR_RETURN(auto store, LocalChunkStore::Open(home / "store", store_options));
  ctx.store = std::move(store);
  RegistryOptions registry_options;
  BDN_ASSIGN_OR_RETURN(registry_options.retention, EmbeddedRetention());
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<Registry> registry,
                       SqliteRegistry::Open(home / "registry.db", registry_options));
  // Commits are checked as bdn serve checks them: every blob stored, every length as the
  // version says.
  ctx.registry = std::make_shared<CommitCheckingRegistry>(std::move(registry), ctx.store);
  return ctx;
}

Result<std::chrono::milliseconds> EmbeddedRetention() {
  const char* env = std::getenv("BDN_RETENTION");
  if (!env || !*env) return std::chrono::milliseconds(kDefaultRetention);
  auto d = ParseDuration(env, std::chrono::milliseconds(0),
                         std::chrono::milliseconds(int64_t{3650} * 86'400'000));
  if (!d) return Err(d.error().WithPrefix("BDN_RETENTION"));
  return *d;
}

Status AsReported(const Status& s) {
  if (s.code() == StatusCode::kNotFound && s.reason() == kSetAsideCorrupt) {
    return CorruptionError(s.message()).WithReason(s.reason());
  }
  return s;
}

int ExitCode(const Status& given) {
  const Status s = AsReported(given);
  // A command a stop signal ended cleanly (sync's Ctrl-C) exits as a shell reports Ctrl-C, like
  // push and pull, which the signal ends.
  if (s.reason() == kInterruptedReason) return 130;
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return 2;
    case StatusCode::kNotFound:
      return 3;
    case StatusCode::kConflict:
    case StatusCode::kAlreadyExists:
      return 4;
    case StatusCode::kCorruption:
      return 5;
    case StatusCode::kPermissionDenied:
      return 6;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return 7;
    case StatusCode::kFailedPrecondition:
      return 8;
    default:
      return 1;
  }
}

Result<Ref> ParseWriteRef(const std::string& text, const std::string& what) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(text));
  if (ref.digest) return Err(InvalidArgumentError(what + " takes a volume, not a digest"));
  if (!ref.path.empty()) return Err(InvalidArgumentError(what + " takes no path"));
  return ref;
}

namespace {

// A push that failed on a full disk gives back the space of what it wrote and nothing else can
// rely on (ChunkStore::DiscardAfterFullDisk), and its error says so and what to do; any other
// failure keeps what the push stored, for the next push to reuse.
Status AfterFailedPush(ChunkStore& store, const Status& failed) {
  auto discarded = store.DiscardAfterFullDisk();
  if (!discarded) {
    return Status(failed.code(), failed.message() + "; removing the push's partial packs failed: " +
                                     discarded.error().message());
  }
  if (!discarded->disk_full) return failed;
  std::string note;
  if (discarded->packs == 1) {
    note = "; the push's partial pack was removed";
  } else if (discarded->packs > 1) {
    note = "; the push's " + std::to_string(discarded->packs) + " partial packs were removed";
  }
  return Status(failed.code(), failed.message() + note +
                                   "; free space (bdn gc reclaims unreferenced packs) and push "
                                   "again");
}

}  // namespace

namespace {

// What a push names, checked without I/O: the ref (a volume, no digest or path), its tags (the
// ref's and --tag's, sorted, without head) and --source-uri. Errors: Push's InvalidArgument.
struct PushTarget {
  Ref ref;
  std::vector<std::string> tags;
};
Result<PushTarget> PushTargetOf(const PushArgs& args) {
  PushTarget t;
  // From a new user: `push REF DIR` said only that DIR does not start with "bdn:".
  if (args.dir.starts_with("bdn:") && !args.ref.starts_with("bdn:")) {
    return Err(InvalidArgumentError("push takes DIR then REF: \"" + EscapeName(args.dir) +
                                    "\" is a ref (bdn volume push " + EscapeName(args.ref) + " " +
                                    EscapeName(args.dir) + ")"));
  }
  BDN_ASSIGN_OR_RETURN(t.ref, ParseWriteRef(args.ref, "ref \"" + args.ref + "\": push"));
  if (t.ref.tag && *t.ref.tag != kHeadTag) t.tags.push_back(*t.ref.tag);
  for (const auto& tag : args.tags) {
    BDN_RETURN_IF_ERROR(ValidateTag(tag));
    if (tag == kHeadTag) {
      return Err(InvalidArgumentError("tag \"head\": reserved; push always moves head"));
    }
    t.tags.push_back(tag);
  }
  std::sort(t.tags.begin(), t.tags.end());
  t.tags.erase(std::unique(t.tags.begin(), t.tags.end()), t.tags.end());
  if (!IsValidUtf8(args.source_uri)) {
    return Err(InvalidArgumentError("--source-uri \"" +
                                    EscapeName(args.source_uri, Backslashes::kKeep) +
                                    "\": not valid UTF-8"));
  }
  return t;
}

}  // namespace

namespace {

// For the lifetime of a push: the first stop signal (Ctrl-C, kill, a closed terminal; those not
// ignored) releases the push claims this process holds on an origin
// (remote::ReleaseHeldClaimsNow), says what the push left, and then ends the process by that
// signal, as it would have without this. The handler only writes the signal to a pipe; a thread
// does the rest. From a new user: a Ctrl-C'd push left its claim live for its TTL, so a push from
// another home was refused "push in progress" for 30 s; and an embedded push ended by Ctrl-C
// said nothing at all.
class ClaimReleaseOnInterrupt {
 public:
  explicit ClaimReleaseOnInterrupt(bool remote) : remote_(remote) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
    g_pipe_write = fds[1];
    read_.Reset(fds[0]);
    write_.Reset(fds[1]);
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    for (int sig : StopSignalsNotIgnored()) {
      struct sigaction old = {};
      if (::sigaction(sig, &sa, &old) == 0) old_.emplace_back(sig, old);
    }
    thread_ = std::thread([this] { Watch(); });
  }
  ~ClaimReleaseOnInterrupt() {
    if (!thread_.joinable()) return;
    for (const auto& [sig, old] : old_) ::sigaction(sig, &old, nullptr);
    const uint8_t stop = 0;
    (void)!::write(write_.get(), &stop, 1);
    thread_.join();
    g_pipe_write = -1;
  }
  ClaimReleaseOnInterrupt(const ClaimReleaseOnInterrupt&) = delete;
  ClaimReleaseOnInterrupt& operator=(const ClaimReleaseOnInterrupt&) = delete;

 private:
  static inline std::atomic<int> g_pipe_write{-1};
  static void OnSignal(int sig) {
    const int saved = errno;
    const uint8_t b = static_cast<uint8_t>(sig);
    if (int fd = g_pipe_write.load(); fd >= 0) (void)!::write(fd, &b, 1);
    errno = saved;
  }
  void Watch() {
    for (;;) {
      struct pollfd p = {read_.get(), POLLIN, 0};
      if (::poll(&p, 1, -1) < 0 && errno != EINTR) return;
      uint8_t sig = 0;
      const ssize_t n = ::read(read_.get(), &sig, 1);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n != 1 || sig == 0) return;  // the push ended
      const remote::ClaimsReleased claims =
          remote_ ? remote::ReleaseHeldClaimsNow() : remote::ClaimsReleased{};
      if (!remote_) {
        std::cerr << "bdn: push interrupted; run it again to finish: it reuses the chunks this "
                     "one stored (bdn gc reclaims them otherwise)\n";
      } else if (claims.held > 0 && claims.released == claims.held) {
        std::cerr << "bdn: push interrupted; its claim on the volume was released, so the next "
                     "push need not wait for it\n";
      } else if (claims.held > 0) {
        // From an attacking helper: it said "released" with the origin stopped.
        std::cerr << "bdn: push interrupted; the origin did not release its claim on the volume, "
                     "which lapses within the server's --claim-ttl (default 30 s)\n";
      }
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      ::sigaction(sig, &dfl, nullptr);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(sig);
      ::_exit(128 + sig);  // a signal whose default is not to end the process
    }
  }
  const bool remote_;
  UniqueFd read_, write_;
  std::vector<std::pair<int, struct sigaction>> old_;
  std::thread thread_;
};

}  // namespace

Status CheckPushArgs(const PushArgs& args) {
  if (auto target = PushTargetOf(args); !target) return target.error();
  return CheckPushDirectory(args.dir);
}

Status Push(Context& ctx, const PushArgs& args) {
  BDN_ASSIGN_OR_RETURN(PushTarget target, PushTargetOf(args));
  ClaimReleaseOnInterrupt on_interrupt(ctx.origin != nullptr);
  const Ref& ref = target.ref;
  PushOptions opts;
  if (!ctx.origin) {
    // The embedded store at, above or below the pushed directory: the version would hold the
    // store's own packs and registry, changing while they are read (and each push would seal
    // the last one's). Known by inode, so a bind mount or another path to it is refused too.
    for (const fs::path& d : {ctx.home, ctx.home / "store"}) {
      struct stat st;
      if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      std::error_code ec;
      const fs::path shown = fs::weakly_canonical(ctx.home, ec);
      opts.seal.refused_dirs.push_back(
          {st.st_dev, st.st_ino,
           (d == ctx.home ? "" : "the store/ directory of ") + std::string("the embedded store ") +
               EscapeName((ec ? ctx.home : shown).string()),
           " (push a directory outside it, or give --home elsewhere)"});
    }
  }
  opts.dir = args.dir;
  opts.ns = ref.ns;
  opts.volume = ref.volume;
  opts.tags = std::move(target.tags);
  opts.source_uri = args.source_uri;
  opts.expected_sequence = args.expected_sequence;
  opts.seal.jobs = args.jobs;
  if (args.preserve_mtime) opts.seal.mtimes = SealOptions::Mtimes::kPreserve;
  // Where the tags pointed before, to say which the push moves (from a new user: `push DIR
  // bdn:ns/vol:prod`, the ref a mount uses, moved prod back to an older version without a word).
  // Asked under the push's retry budget: a dead origin costs the push no more time.
  struct MovedTag {
    std::string tag;
    Digest from;
    std::optional<int64_t> from_sequence, to_sequence;  // the versions' own, where known
  };
  std::vector<MovedTag> moved;
  TransferCounters counters;
  Result<PushResult> r;
  {
    // All of the push's requests share one retry budget: a dead origin fails it once.
    Context push_ctx = UnderRetryBudget(ctx, args.retry_deadline, args.retry_deadline_name);
    std::map<std::string, Digest> tags_before;
    if (!opts.tags.empty()) {
      if (auto v = push_ctx.registry->GetVolume(ref.ns, ref.volume)) tags_before = v->tags;
    }
    std::function<std::string()> note;
    if (push_ctx.retry_budget) note = [b = push_ctx.retry_budget] { return RetryNote(*b); };
    ProgressReporter progress("push", counters, std::chrono::seconds(5), std::move(note));
    r = bdn::Push(opts, *push_ctx.store, *push_ctx.registry, &counters);
    for (const std::string& tag : r ? r->tags_applied : std::vector<std::string>()) {
      auto it = tags_before.find(tag);
      if (it == tags_before.end() || it->second == r->ref.digest) continue;
      MovedTag m{tag, it->second, std::nullopt, std::nullopt};
      if (auto v = push_ctx.registry->GetVersion(ref.ns, ref.volume, it->second)) {
        m.from_sequence = v->sequence;
      }
      if (auto v = push_ctx.registry->GetVersion(ref.ns, ref.volume, r->ref.digest)) {
        m.to_sequence = v->sequence;
      }
      moved.push_back(std::move(m));
    }
  }
  if (!r) return AfterFailedPush(*ctx.store, r.error());
  if (ctx.json) {
    nlohmann::json tags_moved = nlohmann::json::array();
    for (const MovedTag& m : moved) {
      tags_moved.push_back({{"tag", m.tag}, {"from", m.from.ToString()}});
    }
    PrintJson({{"version_ref", r->ref.ToString()},
               {"digest", r->ref.digest.ToString()},
               {"sequence", r->sequence},
               {"head_updated", r->head_updated},
               {"tags_applied", r->tags_applied},
               {"files", r->stats.files},
               {"bytes", r->stats.bytes},
               {"chunks", r->stats.chunks},
               {"chunks_uploaded", r->chunks_uploaded},
               {"bytes_uploaded", r->bytes_uploaded},
               {"chunks_reused", r->chunks_reused},
               {"metadata_bytes_uploaded", r->metadata_bytes_uploaded},
               {"chunks_uploaded_again", r->chunks_uploaded_again},
               {"unchanged", r->unchanged},
               {"symlinks_outside", r->symlinks_outside.size()},
               {"tags_moved", tags_moved}});
  } else {
    // A version pushed before whose push still stored chunks: the store lacked them (lost or
    // found damaged), and this push put them back.
    const char* said = !r->unchanged            ? "sealed: "
                       : r->chunks_uploaded > 0 ? "unchanged, repaired: "
                                                : "unchanged: ";
    std::cerr << said << Counted(r->stats.files, "file") << ", " << FormatBytes(r->stats.bytes)
              << ", " << Counted(r->stats.chunks, "chunk") << " ("
              << r->chunks_uploaded - r->chunks_uploaded_again << " new, "
              << FormatBytes(r->bytes_uploaded) << " stored";
    // From a new user: "0 new, 167 B stored" read as a contradiction.
    if (r->metadata_bytes_uploaded > 0) {
      std::cerr << ", " << FormatBytes(r->metadata_bytes_uploaded)
                << " of it the manifest and indexes";
    }
    if (r->chunks_uploaded_again > 0) {
      std::cerr << "; " << r->chunks_uploaded_again << " stored again after the store lost them";
    }
    std::cerr << ")";
    // From a new user: a push of an older version's tree said only "unchanged", and head had
    // moved back to it.
    if (r->unchanged && r->head_updated) std::cerr << "; head moved to it";
    std::cerr << "\n";
    auto short_ref = [](const Digest& d) { return "b3:" + d.Hex().substr(0, 12); };
    for (const MovedTag& m : moved) {
      const bool older = m.from_sequence && m.to_sequence && *m.to_sequence < *m.from_sequence;
      std::cerr << "tag " << m.tag << " moved from " << short_ref(m.from)
                << (m.from_sequence ? " (seq " + std::to_string(*m.from_sequence) + ")" : "")
                << " to " << short_ref(r->ref.digest)
                << (m.to_sequence ? " (seq " + std::to_string(*m.to_sequence) + ")" : "")
                << (older ? ", an older version" : "") << "\n";
    }
    std::cout << r->ref.ToString() << std::endl;
  }
  if (!r->symlinks_outside.empty()) {
    // Said after the ref is printed: the version is committed, as the contract has it (links
    // are recorded as they are), but a snapshot of links into a cache is most likely a mistake.
    const size_t n = r->symlinks_outside.size();
    const Entry& first = r->symlinks_outside.front();
    std::cerr << "warning: "
              << (n == 1 ? "1 symlink points" : std::to_string(n) + " symlinks point")
              << " outside " << EscapeName(args.dir) << " (\"" << EscapeName(first.path)
              << "\" -> \"" << EscapeName(first.target) << "\"" << (n == 1 ? "" : ", …")
              << "): the version holds "
              << (n == 1 ? "the link, not what it points to" : "the links, not what they point to")
              << "; to hold the files, push a copy with the links resolved (cp -rL)\n";
  }
  return Status::Ok();
}

Status Ls(Context& ctx, const LsArgs& args) {
  if (args.ref.empty()) {
    BDN_ASSIGN_OR_RETURN(auto names, ctx.registry->ListNamespaces());
    if (ctx.json) {
      PrintJson({{"namespaces", names}});
    } else {
      for (const auto& n : names) std::cout << n << "\n";
    }
    return Status::Ok();
  }
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(args.ref, RefForm::kNamespace));
  if (!ref.HasVolume()) {
    BDN_ASSIGN_OR_RETURN(auto vols, ctx.registry->ListVolumes(ref.ns));
    json arr = json::array();
    for (const auto& v : vols) {
      if (ctx.json) {
        arr.push_back({{"volume", "bdn:" + v.ns + "/" + v.name},
                       {"head", v.head ? v.head->ToString() : ""},
                       {"versions", v.live_versions}});
      } else {
        std::cout << "bdn:" << v.ns << "/" << v.name << "\n";
      }
    }
    if (ctx.json) PrintJson({{"volumes", arr}});
    return Status::Ok();
  }
  BDN_ASSIGN_OR_RETURN(PinnedRef pinned, ResolveRef(*ctx.registry, ref));
  BDN_ASSIGN_OR_RETURN(auto view, OpenView(ctx, pinned));
  const Entry* top = view->Find(ref.path);
  if (!top) return NotFoundError("path \"" + ref.path + "\": not in " + pinned.ToString());
  std::vector<const Entry*> list;
  if (top->kind != EntryKind::kDirectory) {
    list.push_back(top);
  } else if (args.recursive) {
    for (const auto& e : view->manifest().entries) {
      if (ref.path.empty() || e.path.starts_with(ref.path + "/")) list.push_back(&e);
    }
  } else {
    for (size_t i : view->Children(ref.path)) list.push_back(&view->manifest().entries[i]);
  }
  if (ctx.json) {
    json arr = json::array();
    for (const Entry* e : list) arr.push_back(EntryJson(*view, *e));
    PrintJson({{"version_ref", pinned.ToString()}, {"entries", arr}});
    return Status::Ok();
  }
  std::cerr << pinned.ToString() << "\n";
  for (const Entry* e : list) {
    const Entry& f = view->Resolve(*e);
    // A symlink's size is its target's length, as ls -l and the mount's stat give it.
    const uint64_t bytes = f.kind == EntryKind::kFile       ? f.size_bytes
                           : e->kind == EntryKind::kSymlink ? e->target.size()
                                                            : 0;
    char size[32];
    std::snprintf(size, sizeof size, "%12llu", static_cast<unsigned long long>(bytes));
    std::cout << ModeString(f.kind == EntryKind::kFile ? f : *e) << " " << size << " "
              << EscapeName(e->path);
    if (e->kind == EntryKind::kDirectory) std::cout << "/";
    if (e->kind == EntryKind::kSymlink) std::cout << " -> " << EscapeName(e->target);
    if (e->kind == EntryKind::kHardlink) std::cout << " => " << EscapeName(e->target);
    std::cout << "\n";
  }
  return Status::Ok();
}

Status Stat(Context& ctx, const std::string& text) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(text));
  if (!ref.tag && !ref.digest && ref.path.empty()) {
    BDN_ASSIGN_OR_RETURN(VolumeRecord v, ctx.registry->GetVolume(ref.ns, ref.volume));
    json tags = json::object();
    for (const auto& [name, d] : v.tags) tags[name] = d.ToString();
    if (ctx.json) {
      PrintJson({{"volume", ref.VolumeString()},
                 {"head", v.head ? v.head->ToString() : ""},
                 {"head_ref", v.head ? PinnedRef{v.ns, v.name, *v.head}.ToString() : ""},
                 {"sequence", v.sequence},
                 {"tags", tags},
                 {"versions", v.live_versions},
                 {"deleted_versions", v.deleted_versions},
                 {"created", FormatUnixMs(v.created_unix_ms)}});
    } else {
      std::cout << "volume:    " << ref.VolumeString() << "\n"
                << "head:      " << (v.head ? PinnedRef{v.ns, v.name, *v.head}.ToString() : "-")
                << "\n"
                << "sequence:  " << v.sequence << "\n"
                << "versions:  " << v.live_versions << " alive, " << v.deleted_versions
                << " deleted\n";
      for (const auto& [name, d] : v.tags)
        std::cout << "tag:       " << name << " -> " << d.ToString() << "\n";
    }
    return Status::Ok();
  }
  BDN_ASSIGN_OR_RETURN(PinnedRef pinned, ResolveRef(*ctx.registry, ref));
  if (ref.path.empty()) {
    BDN_ASSIGN_OR_RETURN(VersionRecord v,
                         ctx.registry->GetVersion(ref.ns, ref.volume, pinned.digest));
    BDN_ASSIGN_OR_RETURN(auto view, OpenView(ctx, pinned));
    json j = VersionJson(v);
    j["chunker"] = view->manifest().chunker.ToString();
    if (ctx.json) {
      PrintJson(j);
    } else {
      std::cout << "version:   " << pinned.ToString() << "\n"
                << "digest:    " << v.digest.ToString() << "\n"
                << "sequence:  " << v.sequence << "\n"
                << "lifecycle: " << LifecycleName(v.lifecycle) << "\n"
                << "head:      " << (v.is_head ? "yes" : "no") << "\n"
                << "tags:      ";
      for (size_t i = 0; i < v.tags.size(); ++i) std::cout << (i ? ", " : "") << v.tags[i];
      std::cout << "\n"
                << "files:     " << v.stats.files << "\n"
                << "size:      " << FormatBytes(v.stats.bytes) << " (" << v.stats.bytes
                << " bytes)\n"
                << "chunks:    " << v.stats.chunks << "\n"
                << "chunker:   " << view->manifest().chunker.ToString() << "\n"
                << "created:   " << FormatUnixMs(v.created_unix_ms) << "\n";
      // As --json's "deleted" and "delete_after" (from an attacking helper: the text had neither).
      if (v.deleted_unix_ms) std::cout << "deleted:   " << FormatUnixMs(*v.deleted_unix_ms) << "\n";
      if (v.delete_after_unix_ms) {
        std::cout << "delete_after: " << FormatUnixMs(*v.delete_after_unix_ms)
                  << (*v.delete_after_unix_ms > WallNowMs(*Clock::Real())
                          ? " (restorable until then)"
                          : " (no longer restorable)")
                  << "\n";
      }
    }
    return Status::Ok();
  }
  BDN_ASSIGN_OR_RETURN(auto view, OpenView(ctx, pinned));
  const Entry* e = view->Find(ref.path);
  if (!e) return NotFoundError("path \"" + ref.path + "\": not in " + pinned.ToString());
  json j = EntryJson(*view, *e);
  j["version_ref"] = pinned.ToString();
  if (view->Resolve(*e).kind == EntryKind::kFile) {
    BDN_ASSIGN_OR_RETURN(auto fc, view->ChunksOf(*e));
    j["chunks"] = fc->chunks.size();
    // The blob listing the chunks (docs/format.md, "Chunk index"), for tools that fetch them.
    if (const Entry& f = view->Resolve(*e); f.layout == FileLayout::kIndexed) {
      j["chunk_index"] = f.index.ToString();
    }
  }
  if (ctx.json) {
    PrintJson(j);
  } else {
    for (auto& [k, v] : j.items()) {
      if (k == "mode" && v.is_number_unsigned()) {  // permission bits read as octal, e.g. 0644
        char octal[8];
        std::snprintf(octal, sizeof octal, "%04o", v.get<unsigned>());
        std::cout << k << ": " << octal << "\n";
        continue;
      }
      std::cout << k << ": " << (v.is_string() ? EscapeName(v.get<std::string>()) : v.dump())
                << "\n";
    }
  }
  return Status::Ok();
}

Status Versions(Context& ctx, const VersionsArgs& args) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(args.ref));
  // From a new user: a tag, digest or path was ignored, and every version listed.
  if (ref.tag || ref.digest || !ref.path.empty()) {
    return InvalidArgumentError("ref \"" + args.ref +
                                "\": versions takes bdn:<ns>/<vol> (it lists every version of " +
                                ref.VolumeString() + ")");
  }
  BDN_ASSIGN_OR_RETURN(auto list,
                       ctx.registry->ListVersions(ref.ns, ref.volume, args.include_deleted));
  if (ctx.json) {
    json arr = json::array();
    for (const auto& v : list) arr.push_back(VersionJson(v));
    PrintJson({{"volume", ref.VolumeString()}, {"versions", arr}});
    return Status::Ok();
  }
  if (args.include_deleted) {
    std::printf("%-8s %-71s %12s %-9s %-4s %-20s %-20s %s\n", "SEQUENCE", "DIGEST", "SIZE",
                "LIFECYCLE", "HEAD", "CREATED", "DELETE_AFTER", "TAGS");
  } else {
    std::printf("%-8s %-71s %12s %-9s %-4s %-20s %s\n", "SEQUENCE", "DIGEST", "SIZE", "LIFECYCLE",
                "HEAD", "CREATED", "TAGS");
  }
  for (const auto& v : list) {
    std::string tags;
    for (const auto& t : v.tags) tags += (tags.empty() ? "" : ",") + t;
    std::string after =
        v.delete_after_unix_ms ? FormatUnixMs(*v.delete_after_unix_ms) : std::string("-");
    if (args.include_deleted) {
      std::printf("%-8lld %-71s %12s %-9s %-4s %-20s %-20s %s\n",
                  static_cast<long long>(v.sequence), v.digest.ToString().c_str(),
                  FormatBytes(v.stats.bytes).c_str(),
                  std::string(LifecycleName(v.lifecycle)).c_str(), v.is_head ? "yes" : "",
                  FormatUnixMs(v.created_unix_ms).c_str(), after.c_str(), tags.c_str());
    } else {
      std::printf("%-8lld %-71s %12s %-9s %-4s %-20s %s\n", static_cast<long long>(v.sequence),
                  v.digest.ToString().c_str(), FormatBytes(v.stats.bytes).c_str(),
                  std::string(LifecycleName(v.lifecycle)).c_str(), v.is_head ? "yes" : "",
                  FormatUnixMs(v.created_unix_ms).c_str(), tags.c_str());
    }
  }
  return Status::Ok();
}

Status TagSet(Context& ctx, const TagArgs& args) {
  BDN_RETURN_IF_ERROR(ValidateTag(args.tag));
  BDN_ASSIGN_OR_RETURN(Ref given, ParseRef(args.volume_ref));
  if (!given.path.empty()) {
    return InvalidArgumentError("ref \"" + args.volume_ref +
                                "\": tag set takes a version, not a path in it");
  }
  BDN_ASSIGN_OR_RETURN(auto resolved, ParseAndResolve(ctx, args.volume_ref));
  const PinnedRef& pinned = resolved.second;
  BDN_ASSIGN_OR_RETURN(int64_t seq, ctx.registry->SetTag(pinned.ns, pinned.volume, args.tag,
                                                         pinned.digest, args.expected_sequence));
  if (ctx.json) {
    PrintJson({{"tag", args.tag}, {"version_ref", pinned.ToString()}, {"sequence", seq}});
  } else {
    std::cout << "bdn:" << pinned.ns << "/" << pinned.volume << ":" << args.tag << " -> "
              << pinned.ToString() << "\n";
  }
  return Status::Ok();
}

Status TagDelete(Context& ctx, const TagArgs& args) {
  BDN_RETURN_IF_ERROR(ValidateTag(args.tag));
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(args.volume_ref));
  // The tag is --tag: a version, tag or path in the ref would be ignored, so it is refused.
  if (ref.digest || ref.tag || !ref.path.empty()) {
    return InvalidArgumentError("ref \"" + args.volume_ref +
                                "\": tag delete takes bdn:<ns>/<vol> (the tag is --tag)");
  }
  BDN_ASSIGN_OR_RETURN(
      int64_t seq, ctx.registry->DeleteTag(ref.ns, ref.volume, args.tag, args.expected_sequence));
  if (ctx.json) {
    PrintJson({{"tag", args.tag}, {"volume", ref.VolumeString()}, {"sequence", seq}});
  } else {
    std::cout << "deleted tag " << args.tag << " of " << ref.VolumeString() << "\n";
  }
  return Status::Ok();
}

namespace {

// The one digest a lifecycle command names: REF must carry "@digest" (a prefix of 12 or more
// characters, resolved among alive and deleted versions), no tag and no path.
Result<PinnedRef> ResolveDigestRef(Context& ctx, const std::string& text, const char* command) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(text));
  if (!ref.digest || ref.tag || !ref.path.empty()) {
    return Err(InvalidArgumentError("ref \"" + text + "\": " + command + " takes REF@digest" +
                                    (std::string(command) == "rm" ? " (or --recursive REF)" : "")));
  }
  return ResolveRef(*ctx.registry, ref);
}

// Asks "question [y/N]" on the terminal. Errors: InvalidArgument when stdin is not a terminal;
// FailedPrecondition when the answer is not yes.
Status Confirm(const std::string& question) {
  if (!::isatty(STDIN_FILENO)) {
    return InvalidArgumentError(
        "bdn volume rm: stdin is not a terminal; give --yes to delete without asking");
  }
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  if (answer != "y" && answer != "Y" && answer != "yes") {
    return FailedPreconditionError("bdn volume rm: not confirmed; nothing was deleted");
  }
  return Status::Ok();
}

// Adds the device and inode of the directory `dir` (shown as `display`) and of every directory
// below it, never through a symlink, to `ids`.
Status AddDirectoryIdentities(const DirFd& dir, const std::string& display,
                              std::set<std::pair<dev_t, ino_t>>& ids, bool follow_own_symlinks) {
  struct stat st;
  if (::fstat(dir.get(), &st) != 0) return ErrnoError("directory \"" + display + "\"", errno);
  if (!ids.insert({st.st_dev, st.st_ino}).second) return Status::Ok();
  BDN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir.get(), display));
  for (const std::string& name : names) {
    const std::string path = display + "/" + name;
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return ErrnoError("path \"" + path + "\"", errno);
    }
    if (S_ISLNK(st.st_mode) && follow_own_symlinks &&
        (st.st_uid == ::geteuid() || st.st_uid == 0)) {
      // The store opens <home>/store through this user's or root's symlink (a store on another
      // disk): what it names is the store's as well.
      struct stat target;
      if (::fstatat(dir.get(), name.c_str(), &target, 0) != 0 || !S_ISDIR(target.st_mode)) continue;
      UniqueFd fd(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!fd) continue;  // gone, or not for this user: nothing of the store's there
      BDN_RETURN_IF_ERROR(AddDirectoryIdentities(DirFd(fd.Release()), path, ids, false));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    BDN_ASSIGN_OR_RETURN(DirFd sub, DirFd::OpenAt(dir.get(), name, path));
    BDN_RETURN_IF_ERROR(AddDirectoryIdentities(sub, path, ids, false));
  }
  return Status::Ok();
}

// The identities (device, inode) of the directory `home` and of every directory below it, and
// below each of home's entries that is a symlink of this user's or root's to a directory (a
// store or node cache kept on another disk): what no pull may write into, by whatever path it is
// reached. Empty when `home` is missing. Errors: those of DirFd::Open and ListNames, naming the
// directory.
Result<std::set<std::pair<dev_t, ino_t>>> DirectoryIdentities(const fs::path& home) {
  std::set<std::pair<dev_t, ino_t>> ids;
  auto dir = DirFd::Open(home);
  if (!dir && dir.error().code() == StatusCode::kNotFound) return ids;
  if (!dir) return Err(dir.error());
  BDN_RETURN_IF_ERROR(AddDirectoryIdentities(*dir, home.string(), ids, true));
  return ids;
}

}  // namespace

Status Rm(Context& ctx, const RmArgs& args) {
  std::string ns, volume;
  std::optional<Digest> digest;
  if (args.recursive) {
    BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(args.ref));
    if (ref.digest || ref.tag || !ref.path.empty()) {
      return InvalidArgumentError("ref \"" + args.ref +
                                  "\": rm --recursive takes a volume (bdn:ns/vol)");
    }
    ns = ref.ns;
    volume = ref.volume;
  } else {
    BDN_ASSIGN_OR_RETURN(PinnedRef pinned, ResolveDigestRef(ctx, args.ref, "rm"));
    ns = pinned.ns;
    volume = pinned.volume;
    digest = pinned.digest;
  }
  if (!args.yes) {
    BDN_RETURN_IF_ERROR(Confirm(digest ? "delete " + PinnedRef{ns, volume, *digest}.ToString() +
                                             " (its tags are dropped)?"
                                       : "delete every live version of bdn:" + ns + "/" + volume +
                                             " (their tags are dropped)?"));
  }
  BDN_ASSIGN_OR_RETURN(DeleteResult r,
                       ctx.registry->DeleteVersions(ns, volume, digest, args.expected_sequence));
  // Where this machine mounts a deleted version (from a new user: rm said nothing of the mount,
  // which reads on until gc collects the version, and then fails). By the version ref each
  // mount carries as its source, which does not name its store: the same tree pushed to another
  // store is the same ref (from attacking helper 129), so the warning says "if". A dead mount
  // (its daemon gone) reads nothing: not listed. The mounts are looked up without waiting on one
  // that hangs.
  std::map<std::string, std::vector<std::string>> mounted_at;  // version ref -> mountpoints
  for (const BdnMount& m : ListBdnMounts(std::chrono::milliseconds(500))) {
    if (m.state != BdnMount::State::kDead) mounted_at[m.source].push_back(m.mountpoint);
  }
  auto mounts_of = [&](const Digest& d) {
    auto it = mounted_at.find(PinnedRef{ns, volume, d}.ToString());
    return it == mounted_at.end() ? std::vector<std::string>() : it->second;
  };
  if (ctx.json) {
    json list = json::array();
    for (const DeletedVersion& d : r.deleted) {
      json one = {{"version_ref", PinnedRef{ns, volume, d.digest}.ToString()},
                  {"digest", d.digest.ToString()},
                  {"tags_dropped", d.tags_dropped},
                  {"deleted", FormatUnixMs(d.deleted_unix_ms)},
                  {"delete_after", FormatUnixMs(d.delete_after_unix_ms)},
                  {"delete_after_unix_ms", d.delete_after_unix_ms}};
      // With mounted_at_hex where a mountpoint is not UTF-8 (as mounts ls --json's mountpoint).
      PutLocalPaths(one, "mounted_at", mounts_of(d.digest));
      list.push_back(std::move(one));
    }
    PrintJson({{"volume", "bdn:" + ns + "/" + volume},
               {"sequence", r.sequence},
               {"deleted", list},
               {"head", r.head ? PinnedRef{ns, volume, *r.head}.ToString() : ""},
               {"head_moved", r.head_moved}});
    return Status::Ok();
  }
  for (const DeletedVersion& d : r.deleted) {
    std::cout << "deleted " << PinnedRef{ns, volume, d.digest}.ToString();
    if (!d.tags_dropped.empty()) {
      std::cout << " (tags dropped:";
      for (const auto& t : d.tags_dropped) std::cout << " " << t;
      std::cout << ")";
    }
    // A retention of 0s: the version may be collected at once (a new user read "restorable").
    std::cout << "; delete_after " << FormatUnixMs(d.delete_after_unix_ms)
              << (d.delete_after_unix_ms > d.deleted_unix_ms ? " (restorable until then)"
                                                             : " (not restorable: retention 0s)")
              << "\n";
    for (const std::string& mp : mounts_of(d.digest)) {
      std::cerr << "warning: it is mounted at " << EscapeName(mp)
                << ": if that mount reads from this store, it reads on until gc collects the "
                   "version"
                << (d.delete_after_unix_ms > d.deleted_unix_ms ? " (after delete_after)" : "")
                << " and then fails (bdn volume umount unmounts it)\n";
    }
  }
  if (r.head_moved) {
    std::cerr << "head of bdn:" << ns << "/" << volume << " is now "
              << (r.head ? PinnedRef{ns, volume, *r.head}.ToString() : std::string("none")) << "\n";
  }
  return Status::Ok();
}

Status Restore(Context& ctx, const RestoreArgs& args) {
  BDN_ASSIGN_OR_RETURN(PinnedRef pinned, ResolveDigestRef(ctx, args.ref, "restore"));
  BDN_ASSIGN_OR_RETURN(RestoreResult r,
                       ctx.registry->RestoreVersion(pinned.ns, pinned.volume, pinned.digest,
                                                    args.expected_sequence));
  if (ctx.json) {
    PrintJson({{"version_ref", pinned.ToString()},
               {"sequence", r.sequence},
               {"head_updated", r.head_updated}});
    return Status::Ok();
  }
  std::cout << "restored " << pinned.ToString() << "\n";
  std::cerr << (r.head_updated ? "head moved back to it" : "head stays where it is")
            << "; tags are not restored (bdn volume tag set)\n";
  return Status::Ok();
}

Status CheckPullArgs(const PullArgs& args) {
  if (args.dir.starts_with("bdn:") && !args.ref.starts_with("bdn:")) {
    return InvalidArgumentError("pull takes REF then DIR: \"" + EscapeName(args.dir) +
                                "\" is a ref (bdn volume pull " + EscapeName(args.dir) + " " +
                                EscapeName(args.ref) + ")");
  }
  return Status::Ok();
}

Status Pull(Context& ctx, const PullArgs& args) {
  BDN_RETURN_IF_ERROR(CheckPullArgs(args));
  PullOptions opts;
  if (!args.writer_stall_time.empty()) {
    auto stall = ParseDuration(args.writer_stall_time, std::chrono::milliseconds(100),
                               std::chrono::hours(24));
    if (!stall) return stall.error().WithPrefix("--writer-stall-time");
    opts.writer_stall_time = *stall;
  }
  std::set<std::pair<dev_t, ino_t>> home_dirs;
  if (!ctx.origin) {
    // Into the embedded store's home (the store itself, say): the pull would write among its
    // packs and registry while they are in use, as push refuses to read them. Told by identity,
    // so that no path to them passes (a symlink, a bind mount of the store elsewhere, a
    // directory of the pulled tree that is the home's: pulling a version holding
    // "home/store/packs/x" into the home's parent wrote among the packs and chmod-ed them).
    BDN_ASSIGN_OR_RETURN(home_dirs, DirectoryIdentities(ctx.home));
    opts.check_directory = [&](const struct stat& st, const std::string& dir) {
      if (!home_dirs.contains({st.st_dev, st.st_ino})) return Status::Ok();
      return InvalidArgumentError("directory \"" + EscapeName(dir) +
                                  "\": inside the embedded store " + EscapeName(ctx.home.string()) +
                                  " (pull into a directory outside it, or give --home elsewhere)");
    };
  }
  // From a user: with the origin down, a pull without a budget asked each chunk of a failed batch
  // again alone, 4 tries each, froze for minutes and then failed just as the origin came back.
  // Under a budget it rides out an outage up to --retry-deadline, saying so, then fails once.
  Context read_ctx = UnderRetryBudget(ctx, args.retry_deadline, args.retry_deadline_name);
  BDN_ASSIGN_OR_RETURN(auto resolved, ParseAndResolve(read_ctx, args.ref));
  const auto& [ref, pinned] = resolved;
  BDN_ASSIGN_OR_RETURN(auto view, OpenView(read_ctx, pinned));
  WarnIfDeleted(read_ctx, pinned);
  opts.path = ref.path;
  for (const auto& inc : args.includes) {
    std::string p = inc;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    BDN_RETURN_IF_ERROR(ValidateEntryPath(p));
    opts.includes.push_back(p);
  }
  if (args.strip_prefix) opts.layout = PullOptions::Layout::kStripPrefix;
  if (args.overwrite) opts.existing = PullOptions::Existing::kOverwrite;
  opts.jobs = args.jobs;
  TransferCounters counters;
  Result<PullResult> r;
  {
    std::function<std::string()> note;
    if (read_ctx.retry_budget) note = [b = read_ctx.retry_budget] { return RetryNote(*b); };
    ProgressReporter progress("pull", counters, std::chrono::seconds(5), std::move(note));
    r = bdn::Pull(*view, args.dir, opts, &counters);
  }
  if (!r) return r.error();
  if (ctx.json) {
    PrintJson({{"version_ref", pinned.ToString()},
               {"files_written", r->files_written},
               {"files_skipped", r->files_skipped},
               {"bytes_written", r->bytes_written},
               {"symlinks", r->symlinks}});
  } else {
    // Symlinks are named only where there are some: a pull of one link says it made it.
    std::cerr << "pulled " << Counted(r->files_written, "file") << " ("
              << FormatBytes(r->bytes_written) << ")"
              << (r->symlinks ? " and " + Counted(r->symlinks, "symlink") : "") << ", "
              << r->files_skipped << " already present\n";
    std::cout << pinned.ToString() << std::endl;
  }
  return Status::Ok();
}

namespace {
// BDN_RETRY_DEADLINE (1s to 24h) if set, else 60 s. Errors: InvalidArgument
// "BDN_RETRY_DEADLINE: duration ..." for one that is not a duration in range (it was taken for
// 60 s without a word).
Result<std::chrono::milliseconds> CatRetryDeadline() {
  const char* env = std::getenv("BDN_RETRY_DEADLINE");
  if (!env || !*env) return std::chrono::milliseconds(std::chrono::seconds(60));
  auto d = ParseDuration(env, std::chrono::seconds(1), std::chrono::hours(24));
  if (!d) return Err(d.error().WithPrefix("BDN_RETRY_DEADLINE"));
  return *d;
}
}  // namespace

Status Cat(Context& ctx, const std::string& text) {
  // As pull: an outage of the origin is ridden out for 60 s (BDN_RETRY_DEADLINE), then fails once.
  BDN_ASSIGN_OR_RETURN(std::chrono::milliseconds deadline, CatRetryDeadline());
  Context read_ctx = UnderRetryBudget(ctx, deadline, "BDN_RETRY_DEADLINE");
  BDN_ASSIGN_OR_RETURN(auto resolved, ParseAndResolve(read_ctx, text));
  const auto& [ref, pinned] = resolved;
  if (ref.path.empty()) return InvalidArgumentError("ref \"" + text + "\": cat needs a file path");
  BDN_ASSIGN_OR_RETURN(auto view, OpenView(read_ctx, pinned));
  WarnIfDeleted(read_ctx, pinned);
  std::cout.flush();
  // From a user: with --json, a read that failed midway put the error's JSON after the bytes.
  // (The command line marked it already; a caller that did not is covered too.)
  MarkStdoutAsData();
  return CatFile(*view, ref.path, STDOUT_FILENO);
}

Status Diff(Context& ctx, const std::string& text_a, const std::string& text_b) {
  // Both refs are checked before either is resolved. From a new user: a path was ignored, and
  // the whole versions compared.
  for (const std::string* text : {&text_a, &text_b}) {
    BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(*text));
    if (!ref.path.empty()) {
      return InvalidArgumentError("ref \"" + *text +
                                  "\": diff compares whole versions and takes no path");
    }
  }
  BDN_ASSIGN_OR_RETURN(auto ra, ParseAndResolve(ctx, text_a));
  BDN_ASSIGN_OR_RETURN(auto rb, ParseAndResolve(ctx, text_b));
  BDN_ASSIGN_OR_RETURN(auto va, OpenView(ctx, ra.second));
  BDN_ASSIGN_OR_RETURN(auto vb, OpenView(ctx, rb.second));
  BDN_ASSIGN_OR_RETURN(DiffResult d, DiffVersions(*va, *vb));
  if (ctx.json) {
    PrintJson({{"from", ra.second.ToString()},
               {"to", rb.second.ToString()},
               {"added", d.added},
               {"removed", d.removed},
               {"changed", d.changed},
               {"fetch_bytes", d.fetch_bytes},
               {"fetch_chunks", d.fetch_chunks}});
    return Status::Ok();
  }
  std::cout << "--- " << ra.second.ToString() << "\n+++ " << rb.second.ToString() << "\n";
  for (const auto& p : d.added) std::cout << "A " << EscapeName(p) << "\n";
  for (const auto& p : d.removed) std::cout << "D " << EscapeName(p) << "\n";
  for (const auto& p : d.changed) std::cout << "M " << EscapeName(p) << "\n";
  std::cout << d.added.size() << " added, " << d.removed.size() << " removed, " << d.changed.size()
            << " changed; moving A->B fetches " << FormatBytes(d.fetch_bytes) << " ("
            << Counted(d.fetch_bytes, "byte") << " in " << Counted(d.fetch_chunks, "chunk")
            << ")\n";
  return Status::Ok();
}

Status Verify(Context& ctx, const std::string& text, int jobs) {
  BDN_ASSIGN_OR_RETURN(auto resolved, ParseAndResolve(ctx, text));
  const auto& [ref, pinned] = resolved;
  BDN_ASSIGN_OR_RETURN(auto view, OpenView(ctx, pinned));
  // A path checks that file, or the files below that directory; symlinks on the way are followed
  // inside the version, as cat follows them (a link to a directory checked nothing).
  std::string under;
  if (!ref.path.empty()) {
    BDN_ASSIGN_OR_RETURN(const Entry* at, view->FindFollowing(ref.path));
    under = at->path;
  }
  BDN_ASSIGN_OR_RETURN(VerifyResult r, VerifyVersion(*view, jobs, {}, under));
  if (ctx.json) {
    json probs = json::array();
    for (const auto& p : r.problems) {
      probs.push_back({{"path", p.path},
                       {"chunk", p.chunk.ToString()},
                       {"error", std::string(StatusCodeName(p.status.code()))},
                       {"message", p.status.message()}});
    }
    json out = {{"version_ref", pinned.ToString()},
                {"files", r.files},
                {"chunks", r.chunks},
                {"bytes", r.bytes},
                {"ok", r.problems.empty()},
                {"problems", probs}};
    if (!ref.path.empty()) out["path"] = ref.path;
    PrintJson(out);
  } else {
    for (const auto& p : r.problems) {
      std::cout << StatusCodeName(p.status.code()) << ": file \"" << EscapeName(p.path)
                << "\": " << EscapeName(p.status.message(), Backslashes::kKeep) << "\n";
    }
    std::cout << pinned.ToString()
              << (ref.path.empty() ? "" : " path \"" + EscapeName(ref.path) + "\"") << ": "
              << Counted(r.files, "file") << ", " << Counted(r.chunks, "chunk") << ", "
              << FormatBytes(r.bytes) << " checked, " << Counted(r.problems.size(), "problem")
              << "\n";
  }
  if (!r.problems.empty()) {
    return CorruptionError("version " + pinned.ToString() + ": " +
                           Counted(r.problems.size(), "problem"));
  }
  return Status::Ok();
}

std::string GivenTuningFlags(const MountArgs& args, bool node_cache_only) {
  std::vector<std::string> given;
  if (!args.cache_dir.empty()) given.push_back("--cache-dir");
  if (args.cache_size_bytes > 0) given.push_back("--cache-size");
  if (!args.cluster_cache.empty()) given.push_back("--cluster-cache");
  if (!node_cache_only) {
    if (args.memory_cache_bytes > 0) given.push_back("--memory-cache");
    if (args.read_timeout_ms > 0) given.push_back("--read-timeout");
    if (args.log_level != log::Level::kInfo) given.push_back("--log-level");
  }
  std::string names;
  for (size_t i = 0; i < given.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == given.size() ? " and " : ", ") + given[i];
  }
  return names;
}

void WarnRemoteOnlyMountFlags(const Context& ctx, const MountArgs& args) {
  if (ctx.origin) return;
  const std::string names = GivenTuningFlags(args, /*node_cache_only=*/true);
  if (names.empty()) return;
  std::cerr << "warning: " << names
            << (names.find(' ') == std::string::npos ? " applies" : " apply")
            << " to a mount from an origin (--remote or BDN_REMOTE) only: this one reads the "
               "embedded store's packs on this disk, with no node cache\n";
}

Status Mount(Context& ctx, const MountArgs& args) {
  WarnRemoteOnlyMountFlags(ctx, args);
  if (args.allow_other) {
    if (Status s = CheckAllowOtherPermitted(); !s.ok()) return s.WithPrefix("--allow-other");
  }
  auto resolved = ParseAndResolve(ctx, args.ref);
  bool registry_unreachable = false;
  // A node that restarts during an origin outage must still bring back its pinned mounts: a
  // full digest names the version's bytes by itself, and the node cache may hold them all.
  // An origin that does not answer (DeadlineExceeded) is as unreachable as one that is gone.
  if (!resolved && (resolved.error().code() == StatusCode::kUnavailable ||
                    resolved.error().code() == StatusCode::kDeadlineExceeded)) {
    auto ref = ParseRef(args.ref);
    if (ref && ref->digest && ref->digest->size() == 64) {
      if (auto digest = Digest::Parse(*ref->digest)) {
        std::cerr << "warning: " << resolved.error().message() << "; mounting "
                  << PinnedRef{ref->ns, ref->volume, *digest}.ToString()
                  << " from the node cache without checking the registry\n";
        resolved = std::make_pair(*ref, PinnedRef{ref->ns, ref->volume, *digest});
        registry_unreachable = true;
      }
    }
  }
  if (!resolved) return resolved.error();
  const auto& [ref, pinned] = *resolved;
  if (!ref.path.empty())
    return InvalidArgumentError("ref \"" + args.ref + "\": mount takes no path");
  MountArgs with_time = args;
  // Not asked again when it did not answer (a second wait of the request deadline).
  std::optional<VersionRecord> record;
  if (!registry_unreachable) {
    if (auto got = ctx.registry->GetVersion(pinned.ns, pinned.volume, pinned.digest)) {
      record = std::move(*got);
    }
  }
  with_time.version_created_unix_ms = record ? record->created_unix_ms : 0;
  if (record) with_time.warn_on_open = DeletedWarning(*record, pinned);
  // The daemon is a fork of this process: close the registry first so no SQLite connection is
  // carried across fork (the mount needs only the store and the loaded manifest).
  ctx.registry.reset();
  // The same version already mounted there as asked (a retry, a boot script run twice): nothing
  // to do, as for `mounts apply`. Another version, or other options, is refused by the daemon.
  BDN_RETURN_IF_ERROR(CheckMountsAboveAnswer(args.mountpoint));
  const fs::path mountpoint = NormalMountpoint(args.mountpoint);
  bool already = false;
  {
    // Its errors are the daemon's own for this mountpoint (a mount there that does not answer):
    // said now, not after a second wait of kMountpointAnswerDeadline in the daemon.
    BDN_ASSIGN_OR_RETURN(MountpointState state, InspectMountpoint(mountpoint));
    if (state.kind == MountpointState::Kind::kLiveBdn) {
      const std::string unmount_first =
          "; unmount it first (bdn volume umount " + EscapeName(mountpoint.string()) + ")";
      const bool same = state.source == pinned.ToString();
      // From an attacking helper: the same version with the other allow_other was refused
      // without saying why, and --foreground said "mounting" before it was refused.
      if (same && state.allow_other != args.allow_other) {
        return AlreadyExistsError(MountpointPrefix(mountpoint) + ": already a bdn mount of " +
                                  state.source + (state.allow_other ? " with" : " without") +
                                  " --allow-other, this mount asks it " +
                                  (args.allow_other ? "with" : "without") + unmount_first);
      }
      if (!same || args.foreground) {
        return AlreadyExistsError(MountpointPrefix(mountpoint) + ": already a bdn mount of " +
                                  state.source + unmount_first);
      }
      already = true;
    }
  }
  pid_t daemon_pid = -1;
  if (!already) {
    Status mounted = MountPinned(ctx, pinned, with_time, &daemon_pid);
    if (mounted.code() == StatusCode::kCorruption && record) {
      if (auto collected = CollectedError(*record, pinned)) return *collected;
    }
    BDN_RETURN_IF_ERROR(mounted);
  }
  if (!args.foreground) {
    if (ctx.json) {
      json out = {{"version_ref", pinned.ToString()},
                  {"allow_other", args.allow_other},
                  {"already_mounted", already}};
      PutLocalPath(out, "mountpoint", mountpoint.string());
      if (!already) out["daemon_pid"] = daemon_pid;
      PrintJson(out);
    } else {
      std::cout << pinned.ToString() << (already ? " already mounted at " : " mounted at ")
                << EscapeName(mountpoint.string()) << std::endl;
    }
  }
  return Status::Ok();
}

namespace {
// What a mount reads through: for a remote origin, the node cache over the cluster tier (if any
// nodes are given) over the origin (docs/spec.md §5); the embedded store as it is. For a remote
// origin, `*end_requests` is set to what ends every request to the origin and the nodes
// (MountOptions::session_over).
Result<std::shared_ptr<ChunkStore>> MountStore(const Context& ctx, const PinnedRef& pinned,
                                               const MountArgs& args,
                                               std::function<void()>* end_requests) {
  if (!ctx.origin) return ctx.store;
  std::shared_ptr<http::HttpClient> origin_client = ctx.origin;
  *end_requests = [origin_client] { origin_client->Shutdown(); };
  std::shared_ptr<ChunkStore> origin = ReadStore(ctx, pinned);
  std::vector<std::string> lists = args.cluster_cache;
  // Errors name where the list came from (from an attacking helper: BDN_CLUSTER_CACHE's were
  // blamed on --cluster-cache, which was not given).
  std::string source = "--cluster-cache";
  if (const char* env = std::getenv("BDN_CLUSTER_CACHE"); lists.empty() && env && *env) {
    lists.push_back(env);
    source = "BDN_CLUSTER_CACHE";
  }
  std::vector<std::string> urls;
  for (const std::string& list : lists) {
    std::vector<std::string> listed = remote::ParseNodeList(list);
    // A list of commas and blanks names no node (from an attacking helper: ",,," mounted
    // without a cache node and without a word); an empty one is no list.
    if (listed.empty() && list.find_first_not_of(" \t") != std::string::npos) {
      return Err(InvalidArgumentError(source + " \"" + EscapeName(list) +
                                      "\": names no cache node (URLs separated by commas)"));
    }
    for (std::string& url : listed) urls.push_back(std::move(url));
  }
  std::shared_ptr<ChunkStore> cluster;
  // Nodes started with --peers name the whole cluster: reading from all of them by rendezvous
  // hashing, as every other client does, fetches each chunk from the origin once (a client given
  // one node would otherwise make that node fetch every chunk).
  if (!urls.empty()) {
    std::string note;
    urls = remote::DiscoverPeers(urls, std::chrono::milliseconds(1000), &note);
    // Said, so that a list the operator never gave is not a surprise in the mount's warnings.
    if (!note.empty()) std::cerr << note << "\n";
  }
  if (!urls.empty()) {
    using std::chrono::milliseconds;
    const milliseconds read_timeout(args.read_timeout_ms > 0 ? milliseconds(args.read_timeout_ms)
                                                             : MountOptions{}.read_timeout);
    remote::ClusterOptions co = remote::ClusterOptions::ForReadTimeout(read_timeout);
    co.token = ctx.token;
    co.read_version = pinned.ToString();
    auto c = remote::ClusterChunkStore::Create(urls, origin, co);
    if (!c) return Err(c.error().WithPrefix(source));
    std::shared_ptr<remote::ClusterChunkStore> nodes = std::move(*c);
    *end_requests = [origin_client, nodes] {
      nodes->ShutdownNodeClients();
      origin_client->Shutdown();
    };
    cluster = std::move(nodes);
  }
  MountStoreOptions options;
  options.cache_dir =
      args.cache_dir.empty() ? DefaultNodeCacheDir(ctx.home) : fs::path(args.cache_dir);
  if (args.cache_size_bytes) options.cache_size_bytes = args.cache_size_bytes;
  auto built = BuildMountStore(origin, cluster, options);
  // A node cache that cannot be written (a read-only file system, no permission, a full disk)
  // costs speed, not the mount: read straight from the cluster or origin instead.
  if (!built && (built.error().code() == StatusCode::kPermissionDenied ||
                 built.error().code() == StatusCode::kFailedPrecondition)) {
    std::cerr << "warning: " << built.error().message()
              << "; mounting without the node cache (every read goes to the "
              << (cluster ? "cache nodes and the origin" : "origin") << ")\n";
    options.cache_dir.clear();
    built = BuildMountStore(origin, std::move(cluster), options);
  }
  return built;
}
}  // namespace

int64_t VersionCreatedUnixMs(Context& ctx, const PinnedRef& pinned) {
  if (!ctx.registry) return 0;
  auto v = ctx.registry->GetVersion(pinned.ns, pinned.volume, pinned.digest);
  return v ? v->created_unix_ms : 0;
}

Status CheckLogFileOutside(const std::string& log_file, const fs::path& dir,
                           const std::string& what, bool logs_allowed) {
  if (log_file.empty()) return Status::Ok();
  // /dev/stderr, /dev/fd/N, /proc/self/fd/N: descriptors, which OpenLogFile judges (resolved
  // here they would name whatever bdn itself has open by that number, the store's included).
  const std::string given = fs::absolute(log_file).lexically_normal().string();
  if (given.starts_with("/dev/") || given.starts_with("/proc/")) return Status::Ok();
  std::error_code ec;
  const fs::path d = fs::canonical(dir, ec);
  if (ec) return Status::Ok();
  const fs::path f = fs::weakly_canonical(fs::absolute(log_file), ec);
  if (ec) return Status::Ok();  // the open says what is wrong with it
  auto below = [](const fs::path& p, const fs::path& top) {
    auto [t, q] = std::mismatch(top.begin(), top.end(), p.begin(), p.end());
    return t == top.end();
  };
  if (!below(f, d) || (logs_allowed && below(f, d / "logs") && f != d / "logs")) {
    return Status::Ok();
  }
  return InvalidArgumentError("--log-file " + EscapeName(log_file) + ": inside " + what + " " +
                              EscapeName(dir.string()) +
                              ", among its own files (give a path outside it" +
                              (logs_allowed ? ", or in its logs/" : "") + ")");
}

fs::path MountLogFile(const fs::path& home, const fs::path& mountpoint) {
  std::string name;
  for (char c : mountpoint.filename().string().substr(0, 64)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    name += plain ? c : '_';
  }
  return home / "logs" /
         ("mount-" + name + "-" + Digest::Of(mountpoint.string()).Hex().substr(0, 12) + ".log");
}

namespace {

// PermissionDenied "<shown>: owned by uid 1001 (mallory), not by this user (uid 0) or root, ..."
// unless the mountpoint directory `st` is this user's or root's.
Status CheckMountpointOwner(const struct stat& st, const std::string& shown) {
  if (st.st_uid == ::geteuid() || st.st_uid == 0) return Status::Ok();
  return PermissionDeniedError(shown + ": owned by " + UidText(st.st_uid) +
                               ", not by this user (uid " + std::to_string(::geteuid()) +
                               ") or root, who could replace it meanwhile; use a directory of "
                               "your own");
}

// For a mountpoint `path` (absolute) with a mount on it already: its directory's path walked as
// `walk` says, that directory writable by no other user even with the sticky bit (one of theirs
// there could be renamed once the old mount is gone), and a symlink at `path` this user's or
// root's. Errors: the walk's; InvalidArgument "<shown>: ends in \"..\", and something is mounted
// there; give the mountpoint's own path"; PermissionDenied "<shown>: <dir>, the directory holding
// it, may be written by other users (mode 1777); with a mount there its own owner cannot be
// checked: unmount it first, or use a directory of your own"; FailedPrecondition for another user's
// symlink.
Status CheckMountedOverPath(fs::path path, const std::string& shown, const PathWalk& walk) {
  // "m/" and "m/." are the directory "m" (a symlink at m followed, as mount(2) follows it).
  while (path.has_relative_path() && (path.filename().empty() || path.filename() == ".")) {
    path = path.parent_path();
  }
  const std::string last = path.filename().string();
  if (!path.has_relative_path()) return Status::Ok();
  if (last == "..") {
    // Which directory holds the mountpoint depends on the symlinks before it: not judged.
    return InvalidArgumentError(shown +
                                ": ends in \"..\", and something is mounted there; give the "
                                "mountpoint's own path");
  }
  const fs::path dir = path.parent_path();
  BDN_ASSIGN_OR_RETURN(WalkedDirectory walked, OpenDirectoryPath(dir, shown, walk));
  struct stat st;
  if (::fstat(walked.fd.get(), &st) != 0) return ErrnoError(shown, errno);
  BDN_RETURN_IF_ERROR(CheckAncestor(st, dir.string(), shown));
  if (WritableByOthers(st)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDeniedError(
        shown + ": " + dir.string() +
        ", the directory holding it, may be written by other users (mode " + mode +
        "); with a mount there its own owner cannot be checked: unmount "
        "it first, or use a directory of your own");
  }
  struct stat link;
  if (::fstatat(walked.fd.get(), last.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(link.st_mode) && link.st_uid != ::geteuid() && link.st_uid != 0) {
    return FailedPreconditionError(shown + ": a symlink owned by " + UidText(link.st_uid) +
                                   ", not by this user or root");
  }
  return Status::Ok();
}

// InvalidArgument "<shown>: would hide the embedded store <home> (...)" when the mountpoint
// directory `mp` is the embedded store's home, a directory in it, or one holding it: every later
// command (a pull, the next mount) would find the mounted version where the store was.
Status CheckNotOverHome(const fs::path& home, const struct stat& mp, const std::string& shown) {
  BDN_ASSIGN_OR_RETURN(auto below, DirectoryIdentities(home));
  bool hides = below.contains({mp.st_dev, mp.st_ino});
  std::error_code ec;
  for (fs::path p = fs::weakly_canonical(home, ec); !hides && !ec && p.has_relative_path();
       p = p.parent_path()) {
    struct stat st;
    hides = ::stat(p.c_str(), &st) == 0 && st.st_dev == mp.st_dev && st.st_ino == mp.st_ino;
  }
  if (!hides) return Status::Ok();
  return InvalidArgumentError(shown + ": would hide the embedded store " +
                              EscapeName(home.string()) +
                              " (mount elsewhere, or give --home elsewhere)");
}

// CheckNotOverHome for a mountpoint not made yet: the nearest directory of `mountpoint` (absolute)
// that exists is judged, so that a mount refused inside the home makes no directory there first.
Status CheckNotToBeMadeInHome(const fs::path& home, const fs::path& mountpoint,
                              const std::string& shown) {
  for (fs::path p = mountpoint; p.has_relative_path(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) continue;
    if (p == mountpoint || !S_ISDIR(st.st_mode)) return Status::Ok();  // judged once walked
    BDN_ASSIGN_OR_RETURN(auto below, DirectoryIdentities(home));
    if (!below.contains({st.st_dev, st.st_ino})) return Status::Ok();
    return InvalidArgumentError(shown + ": would hide the embedded store " +
                                EscapeName(home.string()) +
                                " (mount elsewhere, or give --home elsewhere)");
  }
  return Status::Ok();
}

}  // namespace

namespace {
// A remote mount whose version is larger than its node cache: each read of all of it fetches
// again from the cluster what the previous one evicted (from an operator: the egress of a fleet
// multiplied with no word of why). Said once, at mount time, with the size that would hold it.
void WarnIfNodeCacheSmall(const Context& ctx, const VersionView& view, const MountArgs& args) {
  if (!ctx.origin) return;
  uint64_t total = 0;
  for (const Entry& e : view.manifest().entries) {
    if (e.kind == EntryKind::kFile) total += e.size_bytes;
  }
  const uint64_t cache = args.cache_size_bytes ? args.cache_size_bytes : kDefaultNodeCacheBytes;
  if (total <= cache) return;
  const uint64_t mib = (total + (1 << 20) - 1) >> 20;
  std::cerr << "warning: this version's files hold " << FormatBytes(total)
            << ", more than the node cache (--cache-size " << FormatBytes(cache)
            << "): reading all of it evicts what was read first, and the next read of that "
               "fetches it again from the cache nodes or the origin; --cache-size "
            << mib << "M or more holds it\n";
}
}  // namespace

Status MountPinned(Context& ctx, const PinnedRef& pinned, const MountArgs& args, pid_t* daemon_pid,
                   std::vector<std::string>* made) {
  Context mount_ctx = ctx;
  MountOptions opts;
  BDN_ASSIGN_OR_RETURN(mount_ctx.store, MountStore(ctx, pinned, args, &opts.session_over));
  // Not OpenView: the mount's store already names the version in its reads.
  BDN_ASSIGN_OR_RETURN(auto view, VersionView::Open(mount_ctx.store, pinned.digest));
  std::cerr << args.warn_on_open;
  WarnIfNodeCacheSmall(ctx, *view, args);
  opts.mountpoint = NormalMountpoint(args.mountpoint);
  if (opts.mountpoint == opts.mountpoint.root_path()) {
    return InvalidArgumentError("mountpoint " + EscapeName(opts.mountpoint.string()) +
                                ": not over the root directory");
  }
  // The flags first: a refused --log-file leaves nothing made.
  BDN_RETURN_IF_ERROR(CheckLogFileOutside(args.log_file, ctx.home, "the embedded store's home",
                                          /*logs_allowed=*/true));
  if (!args.cache_dir.empty()) {
    BDN_RETURN_IF_ERROR(CheckLogFileOutside(args.log_file, args.cache_dir, "the node cache",
                                            /*logs_allowed=*/false));
  }
  // Asked before anything stats the path: stat of a mount whose daemon is stopped or hung never
  // returns, and InspectMountpoint gives up on it with an error that says so.
  BDN_ASSIGN_OR_RETURN(MountpointState state, InspectMountpoint(opts.mountpoint));
  // Walked as pull walks its destination, missing directories made: another user's symlink on
  // the path (in /tmp, say) never decides where this user's mount goes. And the mount is made by
  // path after this walk (mount(2), fusermount3), so no other user may be able to change the
  // path meanwhile either: every directory on it, the mountpoint included, must be this user's
  // or root's, and those it passes through writable by no one else but with the sticky bit (a
  // directory of another user's, or one that user could swap for a symlink between this walk
  // and the mount, would take the mount wherever they chose).
  const std::string shown = "mountpoint " + EscapeName(args.mountpoint);
  // The directories this call made for the mountpoint (it and its parents, as mkdir -p) are
  // removed again, last first and only while empty, when the mount fails: a failed mount leaves
  // the tree as it found it.
  std::vector<std::string> made_dirs;
  struct RemoveMadeMountpoint {
    const std::vector<std::string>& dirs;
    bool mounted = false;
    ~RemoveMadeMountpoint() {
      if (mounted) return;
      for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
        if (::rmdir(it->c_str()) != 0) break;
      }
    }
  } remove_made{made_dirs};
  PathWalk walk;
  walk.missing = PathWalk::Missing::kCreate;
  walk.flags = O_PATH;
  walk.refuse_symlink = [&shown](const ForeignSymlink& l) {
    return FailedPreconditionError(shown + ": " + DescribeForeignSymlink(l) +
                                   "; give the directory it names (\"" + l.target +
                                   "\") if that is where to mount");
  };
  walk.check_directory = [&shown](const struct stat& st, const std::string& dir) {
    return CheckAncestor(st, dir, shown);
  };
  if (state.kind == MountpointState::Kind::kNone) {
    BDN_RETURN_IF_ERROR(
        CheckNotToBeMadeInHome(ctx.home, fs::absolute(args.mountpoint).lexically_normal(), shown));
    // The path as given, not opts.mountpoint: that has its symlinks resolved already.
    BDN_ASSIGN_OR_RETURN(WalkedDirectory walked,
                         OpenDirectoryPath(fs::absolute(args.mountpoint), shown, walk));
    made_dirs = walked.made;
    struct stat st;
    if (::fstat(walked.fd.get(), &st) != 0) return ErrnoError(shown, errno);
    BDN_RETURN_IF_ERROR(CheckMountpointOwner(st, shown));
    BDN_RETURN_IF_ERROR(CheckNotOverHome(ctx.home, st, shown));
    std::error_code ec;
    if (!walked.created && !fs::is_empty(opts.mountpoint, ec) && !ec) {
      // Allowed, as mount(8) allows it, but what is there is out of sight until the umount.
      std::cerr << "warning: " << shown
                << " is not empty: what it holds is hidden while the version is mounted there\n";
    }
  } else {
    // Something is mounted there already (a dead mount the daemon detaches first, another file
    // system): the directory under it cannot be looked at, so the directories holding it, as
    // given and as resolved, must be ones no other user can change at all.
    walk.missing = PathWalk::Missing::kRefuse;
    BDN_RETURN_IF_ERROR(CheckMountedOverPath(fs::absolute(args.mountpoint), shown, walk));
    BDN_RETURN_IF_ERROR(CheckMountedOverPath(opts.mountpoint, shown, walk));
  }
  opts.fsname = pinned.ToString();
  if (args.memory_cache_bytes) opts.memory_cache_bytes = args.memory_cache_bytes;
  if (args.read_timeout_ms > 0) opts.read_timeout = std::chrono::milliseconds(args.read_timeout_ms);
  opts.allow_other = args.allow_other;
  const int64_t created_ms =
      args.version_created_unix_ms > 0 ? args.version_created_unix_ms : WallNowMs(*Clock::Real());
  opts.unrecorded_mtime_ns = created_ms * 1'000'000;
  opts.log_level = args.log_level;
  if (args.foreground) {
    BDN_RETURN_IF_ERROR(log::Init(args.log_level, args.log_file));
    std::cerr << pinned.ToString() << " mounting at " << EscapeName(opts.mountpoint.string())
              << " (foreground)\n";
    Status served = ServeMount(view, opts);
    remove_made.mounted = served.ok();
    return served;
  }
  // The daemon appends to it, through this descriptor: opened once here, private (it names
  // files and chunks of the version), and never by its path again.
  auto log_fd = OpenLogFile(args.log_file.empty() ? MountLogFile(ctx.home, opts.mountpoint)
                                                  : fs::path(args.log_file));
  if (log_fd) {
    opts.log_fd = log_fd->get();
  } else {
    std::cerr << "warning: " << log_fd.error().message() << "; the mount daemon logs nowhere\n";
  }
  Status mounted = MountInBackground(view, opts, daemon_pid);
  remove_made.mounted = mounted.ok();
  if (mounted.ok() && made != nullptr) *made = made_dirs;
  return mounted;
}

Status MountsList(Context& ctx) {
  const std::vector<BdnMount> mounts = ListBdnMounts();
  if (ctx.json) {
    json list = json::array();
    for (const BdnMount& m : mounts) {
      json j = {{"version_ref", m.source},
                {"state", std::string(BdnMountStateName(m.state))},
                {"allow_other", m.allow_other}};
      PutLocalPath(j, "mountpoint", m.mountpoint);
      if (m.uid) j["uid"] = *m.uid;
      list.push_back(std::move(j));
    }
    PrintJson({{"mounts", list}});
    return Status::Ok();
  }
  if (mounts.empty()) {
    std::cerr << "no bdn mounts on this machine\n";
    return Status::Ok();
  }
  size_t width = std::string_view("MOUNTPOINT").size();
  for (const BdnMount& m : mounts) width = std::max(width, EscapeName(m.mountpoint).size());
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s.append(n - s.size(), ' ');
    return s;
  };
  std::cout << pad("MOUNTPOINT", width) << "  " << pad("STATE", 13) << "  VERSION\n";
  for (const BdnMount& m : mounts) {
    std::cout << pad(EscapeName(m.mountpoint), width) << "  "
              << pad(std::string(BdnMountStateName(m.state)), 13) << "  " << EscapeName(m.source)
              << (m.allow_other ? "  (allow_other)" : "") << "\n";
  }
  return Status::Ok();
}

Status Umount(Context& ctx, const std::string& mountpoint) {
  // Resolved once, before the unmount: a path through the mount ("link-into-it/..") resolves
  // elsewhere once it is gone.
  BDN_RETURN_IF_ERROR(CheckMountsAboveAnswer(mountpoint));
  const fs::path mp = NormalMountpoint(mountpoint);
  BDN_RETURN_IF_ERROR(Unmount(mp));
  // A bdn mount still there (one bound over itself, or two made at one path) is said, not hidden
  // behind "unmounted" (from an attacker: `mount --bind m m`, then umount said "unmounted" and
  // mounts ls still showed m serving).
  std::string still, over;
  if (auto after = InspectMountpoint(mp); after && after->kind != MountpointState::Kind::kNone) {
    if (after->type == "fuse.bdn") {
      still = after->source;
    } else if (!after->bdn_source_under.empty()) {
      // From attacking helper 121: a bdn mount, a tmpfs over it and a bdn mount over that; the
      // umount of the top one said only "unmounted", and the first stayed, covered.
      still = after->bdn_source_under;
      over = after->type;
    }
  }
  if (ctx.json) {
    json out = {{"unmounted", true}};
    PutLocalPath(out, "mountpoint", mp.string());
    if (!still.empty()) out["still_mounted"] = still;
    if (!over.empty()) out["still_mounted_under"] = over;
    PrintJson(out);
  } else {
    std::cout << "unmounted " << EscapeName(mp.string());
    if (!still.empty() && over.empty()) {
      std::cout << "; the bdn mount of " << EscapeName(still)
                << " made there before it is still mounted (bdn volume umount "
                << EscapeName(mp.string()) << " again)";
    } else if (!still.empty()) {
      std::cout << "; the bdn mount of " << EscapeName(still)
                << " made there before it is still mounted, under the " << EscapeName(over)
                << " mount made there since (unmount that one first, then bdn volume umount "
                << EscapeName(mp.string()) << " again)";
    }
    std::cout << "\n";
  }
  return Status::Ok();
}

}  // namespace bdn::cli
