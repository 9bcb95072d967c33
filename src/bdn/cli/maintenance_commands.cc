// bdn gc and bdn fsck: maintenance of the local pack store of a data directory (the embedded
// store, or a bdn serve --data directory while no server runs on it).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "bdn/base/fd.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/cli/commands.h"
#include "bdn/cli/output.h"
#include "bdn/maintenance/fsck.h"
#include "bdn/maintenance/gc.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/pack_index.h"

namespace bdn::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Refuses the data directory of a bdn serve whose store is an object store (--store s3://…,
// alone or as a replica with --db): what it holds is a spool, not the store, and gc or fsck of it
// would report on (and create) an empty local store.
Status CheckNotObjectStoreSpool(const fs::path& data) {
  std::error_code ec;  // another user's store: said by CheckStoreExists
  if (!fs::is_directory(data / "objstore", ec)) return Status::Ok();
  return FailedPreconditionError(
      "--data " + data.string() +
      ": the spool of a bdn serve --store s3://…, whose packs are in the object store: its GC "
      "runs inside it (bdn serve --gc-interval); check its versions with bdn volume verify");
}

// The *.pack files under `data`/store/packs (0 when it cannot be listed).
uint64_t CountPacks(const fs::path& data) {
  uint64_t packs = 0;
  std::error_code ec;
  for (fs::directory_iterator it(data / "store" / "packs", ec), end; !ec && it != end;
       it.increment(ec)) {
    packs += it->path().extension() == ".pack";
  }
  return packs;
}

// FailedPrecondition when `registry` never held a volume (volumes are never deleted) while the
// store under `data` holds `packs` packs: a registry that is not this store's (a fresh one put in
// its place, or made beside a `bdn serve --db` data directory), with which GC would delete every
// pack.
// `for_gc`: said for gc (refusing to delete them), else for fsck (nothing to check them against).
Status CheckRegistryKnowsStore(const fs::path& data, uint64_t packs, Registry& registry,
                               bool for_gc = true) {
  if (packs == 0) return Status::Ok();
  BDN_ASSIGN_OR_RETURN(auto namespaces, registry.ListNamespaces());
  if (!namespaces.empty()) return Status::Ok();
  const std::string said = "--data " + data.string() +
                           ": its registry.db holds no volume, but its store holds " +
                           Counted(packs, "pack");
  // From an attacking helper: a gc beside the first push into a new store, between its packs and
  // its commit, was told to remove the store the push was writing.
  const std::string first_push =
      "; the first push into it, before it commits, leaves it so too: run this again once it has";
  if (!for_gc) {
    return FailedPreconditionError(said +
                                   ": nothing to check them against (is registry.db this "
                                   "store's?)" +
                                   first_push);
  }
  return FailedPreconditionError(
      said + ": refusing to delete them all (is registry.db this store's?); nothing was done" +
      first_push +
      ". If they are only what pushes that never committed left (none running), "
      "remove " +
      (data / "store").string() + " instead");
}

struct Opened {
  std::shared_ptr<LocalChunkStore> store;
  std::shared_ptr<Registry> registry;
};

// The registry first, checked with CheckRegistryKnowsStore before the store is opened (which
// sets aside a pack it cannot read): a refused run changes nothing.
Result<Opened> OpenData(const fs::path& data) {
  BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options options, LocalStoreOptions(data));
  Opened o;
  BDN_ASSIGN_OR_RETURN(o.registry, SqliteRegistry::Open(data / "registry.db"));
  BDN_RETURN_IF_ERROR(CheckRegistryKnowsStore(data, CountPacks(data), *o.registry));
  BDN_ASSIGN_OR_RETURN(o.store, LocalChunkStore::Open(data / "store", options));
  return o;
}

}  // namespace

Result<std::function<void(GcPhase)>> WithGcStopFromEnvironment(std::function<void(GcPhase)> hook) {
  const char* env = std::getenv("BDN_TEST_GC_STOP_AT");
  if (!env || !*env) return hook;
  std::set<GcPhase> stops;
  std::string_view rest = env;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    auto phase = ParseGcPhase(name);
    if (!phase) {
      return Err(InvalidArgumentError(
          "BDN_TEST_GC_STOP_AT \"" + std::string(env) + "\": \"" + std::string(name) +
          "\" is not a gc phase (planned, doomed, copied, sweeping, deleted, swept)"));
    }
    stops.insert(*phase);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return [hook = std::move(hook), stops = std::move(stops)](GcPhase p) {
    if (hook) hook(p);
    if (!stops.contains(p)) return;
    std::fprintf(stderr, "gc: stopped at %s (BDN_TEST_GC_STOP_AT)\n", GcPhaseName(p));
    std::fflush(stderr);
    ::raise(SIGSTOP);
  };
}

Status Gc(const fs::path& data, const GcArgs& args, bool json_output) {
  if (!(args.max_repack_fraction >= 0 && args.max_repack_fraction <= 1)) {
    return InvalidArgumentError("--max-repack-fraction " + FormatNumber(args.max_repack_fraction) +
                                ": must be between 0 and 1");
  }
  auto grace = ParseDuration(args.grace, std::chrono::milliseconds(0), std::chrono::hours(24));
  if (!grace) return grace.error().WithPrefix("--grace");
  BDN_RETURN_IF_ERROR(CheckNotObjectStoreSpool(data));
  BDN_ASSIGN_OR_RETURN(NotServedHold not_served,
                       HoldNotServed(data, "its GC runs inside it (bdn serve --gc-interval)"));
  GcOptions options;
  options.mode = args.dry_run ? GcMode::kDryRun : GcMode::kRun;
  options.max_repack_fraction = args.max_repack_fraction;
  options.grace = *grace;
  options.discard_copies_on_full_disk = true;  // the gc is this process's only writer
  if (!args.dry_run && grace->count() > 0 && !json_output) {
    options.hook = [&](GcPhase p) {
      if (p == GcPhase::kCopied) {
        std::cerr << "gc: waiting " << FormatDuration(*grace)
                  << " (--grace) before deleting, so that readers of the doomed packs finish\n";
      }
    };
  }
  BDN_ASSIGN_OR_RETURN(options.hook, WithGcStopFromEnvironment(std::move(options.hook)));
  BDN_RETURN_IF_ERROR(CheckStoreExists(data, "--data"));
  BDN_ASSIGN_OR_RETURN(Opened o, OpenData(data));
  BDN_ASSIGN_OR_RETURN(GcReport r, RunGc(*o.registry, *o.store, options));
  for (const std::string& w : r.warnings) std::cerr << "gc: warning: " << w << "\n";
  auto pack_path = [&](uint64_t id) {
    return (data / "store" / "packs" / (Hex16(id) + ".pack")).string();
  };
  if (json_output) {
    json actions = json::array();
    for (const GcPackAction& a : r.actions) {
      actions.push_back({{"pack", Hex16(a.pack)},
                         {"action", a.kind == GcPackAction::Kind::kDelete ? "delete" : "repack"},
                         {"bytes", a.bytes},
                         {"needed_bytes", a.needed_bytes},
                         {"needed_blobs", a.needed_blobs}});
    }
    PrintJson({{"dry_run", args.dry_run},
               {"versions", r.versions},
               {"needed_blobs", r.needed_blobs},
               {"packs", r.packs},
               {"pack_bytes", r.pack_bytes},
               {"packs_skipped", r.packs_skipped},
               {"actions", actions},
               {"reclaimable_bytes", r.reclaimable_bytes},
               {"packs_kept_with_garbage", r.packs_kept_with_garbage},
               {"garbage_bytes_kept", r.garbage_bytes_kept},
               {"packs_deleted", r.packs_deleted},
               {"packs_repacked", r.packs_repacked},
               {"blobs_copied", r.blobs_copied},
               {"bytes_copied", r.bytes_copied},
               {"blobs_rescued", r.blobs_rescued},
               {"bytes_reclaimed", r.bytes_reclaimed},
               {"duration_ms", r.duration.count()}});
    return Status::Ok();
  }
  uint64_t deletes = 0, repacks = 0;
  for (const GcPackAction& a : r.actions) {
    const bool del = a.kind == GcPackAction::Kind::kDelete;
    (del ? deletes : repacks)++;
    std::cout << (args.dry_run ? "would " : "") << (del ? "delete " : "repack ")
              << pack_path(a.pack) << " (" << a.bytes << " bytes"
              << (del ? ", no needed blob"
                      : ", " + std::to_string(a.needed_bytes) + " bytes needed")
              << ")\n";
  }
  // Why a run reclaims less than the versions deleted: packs mostly needed are kept whole.
  std::string kept;
  if (r.packs_kept_with_garbage > 0) {
    std::ostringstream fraction;
    fraction << args.max_repack_fraction;  // 0.5, 0.25, 1
    kept =
        "; " + Counted(r.packs_kept_with_garbage, "pack") + " kept with " +
        FormatBytes(r.garbage_bytes_kept) + " no version needs (" +
        (args.max_repack_fraction > 0
             ? "at least " + fraction.str() + " of each is needed: --max-repack-fraction sets this)"
             : "--max-repack-fraction 0 repacks nothing)");
  }
  if (args.dry_run) {
    // (From a new user: "6 packs deleted" of a run that deleted nothing.)
    std::cout << "would reclaim " << r.reclaimable_bytes << " bytes ("
              << FormatBytes(r.reclaimable_bytes) << ") by deleting " << Counted(deletes, "pack")
              << " and repacking " << repacks << ", of " << Counted(r.packs, "pack") << "; "
              << r.versions
              << " live or restorable "
              // Counted by digest (from a new user: fsck's count differed, a version pushed to
              // two volumes being one here).
              << (r.versions == 1 ? "version (by digest) needs " : "versions (by digest) need ")
              << Counted(r.needed_blobs, "blob") << kept << "\n";
  } else {
    std::cout << "reclaimed " << r.bytes_reclaimed << " bytes (" << FormatBytes(r.bytes_reclaimed)
              << "): " << Counted(r.packs_deleted, "pack") << " deleted (" << r.packs_repacked
              << " repacked, " << r.bytes_copied << " bytes copied), of "
              << Counted(r.packs, "pack") << ", in " << FormatDuration(r.duration) << kept << "\n";
  }
  return Status::Ok();
}

Status Fsck(const fs::path& data, bool repair, bool json_output) {
  BDN_RETURN_IF_ERROR(CheckNotObjectStoreSpool(data));
  BDN_ASSIGN_OR_RETURN(NotServedHold not_served, HoldNotServed(data, "stop it first"));
  BDN_RETURN_IF_ERROR(CheckStoreExists(data, "--data"));
  if (!fs::is_directory(data / "store" / "packs")) {
    return NotFoundError("--data " + data.string() + ": no store (no store/packs directory)");
  }
  BDN_ASSIGN_OR_RETURN(LocalChunkStore::Options options, LocalStoreOptions(data));
  BDN_ASSIGN_OR_RETURN(auto registry, SqliteRegistry::Open(data / "registry.db"));
  // From an attacking helper: fsck said "0 versions checked; 0 problems" of a registry that was
  // not the store's.
  BDN_RETURN_IF_ERROR(CheckRegistryKnowsStore(data, CountPacks(data), *registry, false));
  // From an attacking helper: on a read-only view, --repair failed exit 1 ("quarantine …: write
  // failed") once it had found what to set aside.
  const int writable = repair && ::access((data / "store").c_str(), W_OK) != 0 ? errno : 0;
  if (writable == EROFS || writable == EACCES) {
    return PermissionDeniedError("--data " + data.string() + ": --repair writes to " +
                                 (data / "store").string() + ", which is read-only here (" +
                                 std::strerror(writable) + "); run fsck without it to check");
  }
  BDN_ASSIGN_OR_RETURN(
      FsckReport r,
      RunFsck(data / "store", *registry, repair ? FsckMode::kRepair : FsckMode::kCheck, options));
  if (json_output) {
    json problems = json::array();
    for (const FsckProblem& p : r.problems) {
      json j = {{"kind", std::string(FsckKindName(p.kind))},
                {"object", p.object},
                {"message", p.message},
                {"affects", p.affects}};
      if (!p.repair.empty()) j["repair"] = p.repair;
      problems.push_back(std::move(j));
    }
    PrintJson({{"packs", r.packs},
               {"blobs", r.blobs},
               {"bytes", r.bytes},
               {"index_tables", r.index_tables},
               {"versions", r.versions},
               {"ok", r.problems.empty()},
               {"problems", problems}});
  } else {
    for (const FsckProblem& p : r.problems) {
      std::cout << FsckKindName(p.kind) << ": " << p.object << ": " << p.message << "\n";
      for (const std::string& a : p.affects) std::cout << "  affects " << a << "\n";
      if (!p.repair.empty()) std::cout << "  repaired: " << p.repair << "\n";
    }
    std::cout << "fsck: " << Counted(r.packs, "pack") << ", " << Counted(r.blobs, "blob") << " ("
              << r.bytes << " bytes) hashed, " << Counted(r.index_tables, "index table") << ", "
              << Counted(r.versions, "version") << " checked; "
              << Counted(r.problems.size(), "problem") << "\n";
  }
  if (!r.problems.empty()) {
    return CorruptionError("fsck: " + Counted(r.problems.size(), "problem") +
                           (repair ? " (repaired what can be; push the data again to restore "
                                     "what is missing)"
                                   : ""));
  }
  return Status::Ok();
}

}  // namespace bdn::cli
