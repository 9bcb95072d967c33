// bdn store migrate|rebuild-index|stats, and the options every opener of a local pack store uses.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/cache/cache_dir.h"
#include "bdn/cache/node_cache.h"
#include "bdn/cli/commands.h"
#include "bdn/cli/output.h"
#include "bdn/cli/progress.h"
#include "bdn/format/ref.h"
#include "bdn/registry/registry.h"
#include "bdn/store/migrate.h"
#include "bdn/volume/version_check.h"

namespace bdn::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Result<std::unique_ptr<LocalChunkStore>> OpenStore(const fs::path& data) {
  BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options options, LocalStoreOptions(data));
  return LocalChunkStore::Open(data / "store", options);
}

}  // namespace

std::string ServeLockPid(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pid += buf[i];
  // No pid has more than 10 digits (pid_max is at most 2^22): anything longer is not one.
  return pid.size() <= 10 ? pid : "";
}

Result<UniqueFd> OpenServeLock(const fs::path& data, std::string_view flag, bool create) {
  const fs::path lock = data / "serve.lock";
  const std::string shown = std::string(flag) + " " + data.string();
  auto not_a_file = [&](const struct stat& st) {
    // A second name of another file, too (from an attacking helper: the server wrote its pid
    // into the file a hard link named).
    const std::string what =
        S_ISREG(st.st_mode) ? "a hard link (the file has " + std::to_string(st.st_nlink) + " names)"
                            : KindOf(st);
    return FailedPreconditionError(shown + ": " + lock.string() + " is " + what +
                                   ", not the regular file bdn serve locks; remove it");
  };
  auto odd = [](const struct stat& st) { return !S_ISREG(st.st_mode) || st.st_nlink != 1; };
  struct stat st;
  // Looked at before it is opened: a FIFO's open would wait for a writer, a device's do more.
  if (::lstat(lock.c_str(), &st) == 0 && odd(st)) return Err(not_a_file(st));
  const int how = create ? O_RDWR | O_CREAT : O_RDONLY;
  UniqueFd fd(::open(lock.c_str(), how | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, kPrivateFileMode));
  if (!fd) {
    const int e = errno;
    if (e == ENOENT) return UniqueFd();
    if (::lstat(lock.c_str(), &st) == 0 && odd(st)) return Err(not_a_file(st));
    return Err(ErrnoError(shown + ": " + lock.string(), e));
  }
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(shown + ": " + lock.string(), errno));
  if (odd(st)) return Err(not_a_file(st));
  return fd;
}

Result<NotServedHold> HoldNotServed(const fs::path& data, const char* command,
                                    std::string_view flag, bool create) {
  NotServedHold hold;
  auto served = [&](const std::string& pid) {
    return FailedPreconditionError(
        std::string(flag) + " " + data.string() + ": in use by bdn serve" +
        (pid.empty() ? std::string() : " (pid " + pid + ")") + "; " + command);
  };
  // Where the directory is missing there is nothing to hold, as before any server ran there.
  hold.dir = UniqueFd(::open(data.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!hold.dir) return NotServedHold();
  // The directory itself first: a server holds it exclusively for as long as it runs, whatever
  // becomes of serve.lock (from an attacking helper: with serve.lock deleted, or a symlink, an
  // embedded push committed under a running server). A file system without flock holds nothing.
  while (::flock(hold.dir.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      std::string pid;
      if (auto fd = OpenServeLock(data, flag, false); fd && *fd) pid = ServeLockPid(fd->get());
      return Err(served(pid));
    }
    hold.dir.Reset();
    break;
  }
  // serve.lock too, which a bdn serve of an earlier release locks alone: opened read-only (a
  // read-only file system's fsck and gc --dry-run need nothing written: from an attacking
  // helper), and made where missing (once the directory is known to be this user's own:
  // `create`) so that a server started later finds this command's hold; where it cannot be made
  // (a read-only file system, a full disk), the directory's lock holds alone. Before `create`,
  // anything odd about it is left for the checks to come.
  auto fd = OpenServeLock(data, flag, /*create=*/false);
  if (!fd) {
    if (!create) return hold;
    return Err(fd.error());
  }
  hold.file = std::move(*fd);
  if (!hold.file && create) {
    if (auto made = OpenServeLock(data, flag, /*create=*/true); made) hold.file = std::move(*made);
  }
  if (!hold.file) return hold;
  while (::flock(hold.file.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      hold.file.Reset();
      break;
    }
    return Err(served(ServeLockPid(hold.file.get())));
  }
  return hold;
}

Result<LocalChunkStore::Options> LocalStoreOptions(const fs::path& data) {
  LocalChunkStore::Options o;
  if (const char* sync = std::getenv("BDN_SYNC"); sync && std::string(sync) == "0") {
    o.durability = LocalChunkStore::Durability::kNone;
  }
  if (const char* v = std::getenv("BDN_ZSTD_MIN_SAVING"); v && *v) {
    char* end = nullptr;
    double f = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(f >= 0.0 && f <= 1.0)) {
      return Err(InvalidArgumentError(std::string("BDN_ZSTD_MIN_SAVING \"") + v +
                                      "\": not a fraction between 0 and 1"));
    }
    o.codec.min_saving = f;
  }
  o.migrate_command = "bdn store migrate --data " + data.string();
  // Writers record what they rely on, so that a GC (bdn gc, or bdn serve's) keeps it.
  o.claims = ClaimMode::kProcessFile;
  return o;
}

namespace {

// How many files `dir` holds (0 when it does not exist).
uint64_t CountFiles(const fs::path& dir) {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

// "bdn:ns/vol@b3:…: <why>" for each version the registry of `data` retains that misses a blob
// (CheckVersionStored's first complaint), in the registry's order.
Result<std::vector<std::string>> DamagedVersions(const fs::path& data,
                                                 const LocalChunkStore::Options& options) {
  BDN_ASSIGN_OR_RETURN(auto store, LocalChunkStore::Open(data / "store", options));
  BDN_ASSIGN_OR_RETURN(auto registry, SqliteRegistry::Open(data / "registry.db"));
  BDN_ASSIGN_OR_RETURN(std::vector<VersionRecord> versions, registry->ListRetainedVersions());
  std::vector<std::string> out;
  for (const VersionRecord& v : versions) {
    auto checked = CheckVersionStored(*store, v.digest);
    if (checked) continue;
    // The check names the version by digest alone: "version b3:…: chunk … is not stored".
    std::string why = checked.error().message();
    const std::string prefix = "version " + v.digest.ToString() + ": ";
    if (why.starts_with(prefix)) why.erase(0, prefix.size());
    out.push_back(PinnedRef{v.ns, v.volume, v.digest}.ToString() +
                  (v.lifecycle == Lifecycle::kDeleted ? " (deleted)" : "") + ": " + why);
  }
  return out;
}

// Converts the old layout under `root` (a store, or a node cache directory) and reports it.
// `data`: the store's data directory (its registry is checked when chunk files were set aside as
// corrupt, now or by an earlier run); empty for a node cache, which a later read repairs.
Status MigrateAt(const fs::path& root, const LocalChunkStore::Options& options, bool json_output,
                 const fs::path& data = {}) {
  TransferCounters counters;
  Result<MigrationReport> r;
  {
    ProgressReporter progress("migrate", counters);
    r = MigrateOldLayout(root, options, &counters);
  }
  if (!r) return r.error();
  // From an attacking helper: a migration that set damaged chunk files aside exited 0, and a
  // second run said "nothing to migrate", while versions that need those chunks could not be
  // read. They are named, and the exit is 5, on every run until they are repaired.
  const uint64_t aside = CountFiles(root / "corrupt");
  std::vector<std::string> damaged;
  // Also after a migration that set nothing aside: a chunk file the old store had lost already
  // (from an attacking helper: exit 0 while fsck found three versions missing a chunk).
  if (!data.empty() && (aside > 0 || r->was_old_layout)) {
    BDN_ASSIGN_OR_RETURN(damaged, DamagedVersions(data, options));
  }
  Status out;
  if (!damaged.empty()) {
    constexpr size_t kNamed = 5;
    std::string named;
    for (size_t i = 0; i < damaged.size() && i < kNamed; ++i) {
      named += (i ? "; " : "") + damaged[i];
    }
    if (damaged.size() > kNamed)
      named += "; and " + std::to_string(damaged.size() - kNamed) + " more";
    out = CorruptionError(
        "store migrate: " + Counted(damaged.size(), "version") + " cannot be read: " + named +
        (aside > 0 ? "; " + Counted(aside, "chunk file") + " in " + (root / "corrupt").string() +
                         " did not match " + (aside == 1 ? "its" : "their") + " digest"
                   : std::string()) +
        "; push those trees again to repair them (a deleted version's into another volume: its "
        "own refuses it until it is restored, which needs it whole) (bdn fsck lists every "
        "problem)");
  }
  if (json_output) {
    PrintJson({{"store", root.string()},
               {"migrated", r->was_old_layout},
               {"blobs", r->blobs},
               {"bytes", r->bytes},
               {"corrupt", r->corrupt},
               {"corrupt_set_aside", aside},
               {"damaged_versions", damaged},
               {"ignored", r->ignored}});
    return out;
  }
  if (!r->was_old_layout) {
    std::printf("store %s: already in the pack layout, nothing to migrate\n", root.c_str());
    return out;
  }
  std::printf("store %s: %llu chunk files (%s) moved into packs\n", root.c_str(),
              static_cast<unsigned long long>(r->blobs), FormatBytes(r->bytes).c_str());
  if (r->corrupt > 0) {
    std::printf("%llu chunk files did not match their digest and were moved to %s\n",
                static_cast<unsigned long long>(r->corrupt), (root / "corrupt").c_str());
  }
  if (r->ignored > 0) {
    std::printf("%llu files that are not chunks were kept in %s\n",
                static_cast<unsigned long long>(r->ignored),
                (root / "chunks.not-migrated").c_str());
  }
  return out;
}

}  // namespace

Status StoreMigrate(const fs::path& data, bool json_output) {
  BDN_RETURN_IF_ERROR(CheckStoreExists(data, "--data", StoreNeeds::kPacks));
  BDN_ASSIGN_OR_RETURN(NotServedHold not_served, HoldNotServed(data, "stop it first"));
  BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options options, LocalStoreOptions(data));
  return MigrateAt(data / "store", options, json_output, data);
}

Status StoreMigrateCache(const fs::path& cache_dir, bool json_output) {
  // Only a node cache's directory, judged as the node cache judges it before anything in it is
  // changed: the migration moves what it finds under chunks/ and deletes the files.
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(cache_dir, ec))) {
    return NotFoundError("node cache " + cache_dir.string() + ": no such directory");
  }
  CacheDirKind kind = CacheDirKind::kEmpty;
  BDN_ASSIGN_OR_RETURN(UniqueFd dir,
                       OpenPrivateDirectory(cache_dir, "node cache", [&](int fd) -> Status {
                         BDN_ASSIGN_OR_RETURN(kind, JudgeCacheDir(fd, cache_dir));
                         return Status::Ok();
                       }));
  // An empty directory is the cache's from its first file on, as NodeCache::Open makes it.
  if (kind == CacheDirKind::kEmpty) BDN_RETURN_IF_ERROR(MarkCacheDir(dir.get(), cache_dir));
  return MigrateAt(cache_dir, NodeCacheStoreOptions({.dir = cache_dir}), json_output);
}

Status StoreRebuildIndex(const fs::path& data, bool json_output) {
  BDN_RETURN_IF_ERROR(CheckStoreExists(data, "--data", StoreNeeds::kPacks));
  BDN_ASSIGN_OR_RETURN(
      NotServedHold not_served,
      HoldNotServed(data, "stop it first (it rebuilds its index itself when it is missing)"));
  BDN_ASSIGN_OR_RETURN(auto store, OpenStore(data));
  BDN_ASSIGN_OR_RETURN(IndexRebuildReport r, store->RebuildIndex());
  if (json_output) {
    PrintJson({{"store", store->root().string()},
               {"packs", r.packs},
               {"blobs", r.blobs},
               {"packs_repaired", r.packs_repaired},
               {"tables_replaced", r.tables_replaced}});
    return Status::Ok();
  }
  std::printf("store %s: index rebuilt from %llu packs (%llu blobs)", store->root().c_str(),
              static_cast<unsigned long long>(r.packs), static_cast<unsigned long long>(r.blobs));
  if (r.packs_repaired > 0) {
    std::printf("; %llu packs without a valid footer sealed again",
                static_cast<unsigned long long>(r.packs_repaired));
  }
  std::printf("\n");
  return Status::Ok();
}

Status StoreStats(const fs::path& data, bool json_output) {
  BDN_RETURN_IF_ERROR(CheckStoreExists(data, "--data", StoreNeeds::kPacks));
  BDN_ASSIGN_OR_RETURN(auto store, OpenStore(data));
  BDN_ASSIGN_OR_RETURN(::bdn::StoreStats s, store->Stats());
  if (json_output) {
    PrintJson({{"store", store->root().string()},
               {"packs", s.packs},
               {"pack_bytes", s.pack_bytes},
               {"blobs", s.blobs},
               {"raw_bytes", s.raw_bytes},
               {"stored_bytes", s.stored_bytes},
               {"zstd_blobs", s.zstd_blobs},
               {"index_tables", s.index_tables}});
    return Status::Ok();
  }
  std::printf("store %s\n", store->root().c_str());
  std::printf("packs:        %llu (%s)\n", static_cast<unsigned long long>(s.packs),
              FormatBytes(s.pack_bytes).c_str());
  std::printf("blobs:        %llu (%s raw, %s stored; %llu with zstd)\n",
              static_cast<unsigned long long>(s.blobs), FormatBytes(s.raw_bytes).c_str(),
              FormatBytes(s.stored_bytes).c_str(), static_cast<unsigned long long>(s.zstd_blobs));
  std::printf("index tables: %llu\n", static_cast<unsigned long long>(s.index_tables));
  return Status::Ok();
}

}  // namespace bdn::cli
