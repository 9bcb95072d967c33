// RunGc (gc.h): mark, plan, doom, copy, grace, second mark and sweep.
#include "bdn/maintenance/gc.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/format/manifest.h"
#include "bdn/format/ref.h"
#include "bdn/store/pack_format.h"
#include "bdn/store/pack_index.h"
#include "bdn/volume/version_blobs.h"

namespace bdn {
namespace {

using pack::BlobLocation;

uint64_t RecordBytes(const BlobLocation& b) { return pack::kRecordHeaderBytes + b.stored_bytes; }

// A sorted, duplicate-free set of blob ids: 32 bytes per id, so a store of ten million chunks
// marks in about 320 MB.
class IdSet {
 public:
  void Add(const Digest& d) { ids_.push_back(d); }
  void AddAll(const std::vector<Digest>& ds) { ids_.insert(ids_.end(), ds.begin(), ds.end()); }
  void Seal() {
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    ids_.shrink_to_fit();
  }
  bool Contains(const Digest& d) const { return std::binary_search(ids_.begin(), ids_.end(), d); }
  size_t size() const { return ids_.size(); }

 private:
  std::vector<Digest> ids_;
};

std::string VersionName(const VersionRecord& v) {
  return PinnedRef{v.ns, v.volume, v.digest}.ToString();
}

// Adds the blobs of every version in `versions` not in `seen` to `ids`, and their digests to
// `seen`. Errors: Corruption naming the version.
Status MarkVersions(ChunkStore& store, const std::vector<VersionRecord>& versions,
                    std::unordered_set<Digest>& seen, IdSet& ids, uint64_t* count) {
  for (const VersionRecord& v : versions) {
    if (!seen.insert(v.digest).second) continue;
    if (count) ++*count;
    std::vector<Digest> blobs;
    Status s = CollectVersionBlobs(store, v.digest, blobs);
    if (!s.ok()) {
      return CorruptionError("gc: version " + VersionName(v) + ": " + s.message() +
                             "; nothing was deleted (bdn volume verify " + VersionName(v) +
                             " says what is damaged)");
    }
    ids.AddAll(blobs);
  }
  return Status::Ok();
}

void Hook(const GcOptions& o, GcPhase p) {
  if (o.hook) o.hook(p);
}

// Copies blob `id` into a new pack (Put stores it again when only doomed copies exist).
Status CopyBlob(GcStore& store, const BlobLocation& loc, GcReport& report) {
  BDN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, store.blobs().Get(loc.id));
  BDN_RETURN_IF_ERROR(store.blobs().Put(loc.id, bytes));
  ++report.blobs_copied;
  report.bytes_copied += RecordBytes(loc);
  return Status::Ok();
}

}  // namespace

const char* GcPhaseName(GcPhase phase) {
  switch (phase) {
    case GcPhase::kPlanned:
      return "planned";
    case GcPhase::kDoomed:
      return "doomed";
    case GcPhase::kCopied:
      return "copied";
    case GcPhase::kSweeping:
      return "sweeping";
    case GcPhase::kDeleted:
      return "deleted";
    case GcPhase::kSwept:
      return "swept";
  }
  return "?";
}

std::optional<GcPhase> ParseGcPhase(std::string_view name) {
  for (GcPhase p : {GcPhase::kPlanned, GcPhase::kDoomed, GcPhase::kCopied, GcPhase::kSweeping,
                    GcPhase::kDeleted, GcPhase::kSwept}) {
    if (name == GcPhaseName(p)) return p;
  }
  return std::nullopt;
}

Result<GcReport> RunGc(Registry& registry, GcStore& store, const GcOptions& options) {
  const auto& clock = options.clock ? options.clock : Clock::Real();
  const SteadyTime started = clock->SteadyNow();
  GcReport report;
  std::unique_ptr<StoreHold> running;
  if (options.mode == GcMode::kRun) {
    BDN_ASSIGN_OR_RETURN(running, store.BeginGc());
  }

  // 1. The packs first: a pack sealed after this listing is not touched by this run.
  BDN_ASSIGN_OR_RETURN(std::vector<GcPack> packs, store.ListSealedPacks(&report.packs_skipped));
  if (report.packs_skipped > 0) {
    report.warnings.push_back(std::to_string(report.packs_skipped) +
                              " packs have a footer that cannot be read; they are kept (run bdn "
                              "fsck --repair)");
  }
  report.packs = packs.size();
  for (const GcPack& p : packs) report.pack_bytes += p.bytes;
  // A registry that never held a volume (volumes are never deleted) beside packs is not this
  // store's (a `bdn serve --data` started without its --db, a registry.db lost or replaced):
  // with it every pack would go. From an attacking helper: a server restarted so deleted them.
  if (!packs.empty()) {
    BDN_ASSIGN_OR_RETURN(std::vector<std::string> namespaces, registry.ListNamespaces());
    if (namespaces.empty()) {
      return Err(FailedPreconditionError(
          "gc: the registry holds no volume, but the store holds " + std::to_string(packs.size()) +
          (packs.size() == 1 ? " pack" : " packs") +
          ": refusing to delete them all (is the registry this store's?); nothing was done"));
    }
  }

  IdSet needed;
  std::unordered_set<Digest> marked_versions;
  // Claims first, then the registry, as the sweep does: a writer that released its claims had
  // committed by then. From a user: read the other way round, a push that committed and exited
  // in between was in neither, its packs were doomed whole, and the sweep copied them all back.
  {
    BDN_ASSIGN_OR_RETURN(std::vector<Digest> claims, store.LiveClaims());
    needed.AddAll(claims);
  }
  BDN_ASSIGN_OR_RETURN(std::vector<VersionRecord> versions, registry.ListRetainedVersions());
  BDN_RETURN_IF_ERROR(
      MarkVersions(store.blobs(), versions, marked_versions, needed, &report.versions));
  needed.Seal();
  report.needed_blobs = needed.size();

  // 2. Plan. Each needed blob counts in one pack: the one where the most of its bytes are needed.
  std::vector<uint64_t> needed_all(packs.size(), 0);
  struct Copy {
    Digest id;
    uint32_t pack;
    uint32_t index;  // into packs[pack].blobs
  };
  std::vector<Copy> copies;
  for (uint32_t i = 0; i < packs.size(); ++i) {
    for (uint32_t k = 0; k < packs[i].blobs.size(); ++k) {
      const BlobLocation& b = packs[i].blobs[k];
      if (!needed.Contains(b.id) || store.IsQuarantined(packs[i].id, b.offset)) continue;
      needed_all[i] += RecordBytes(b);
      copies.push_back({b.id, i, k});
    }
  }
  auto density = [&](uint32_t i) {
    return packs[i].bytes == 0
               ? 0.0
               : static_cast<double>(needed_all[i]) / static_cast<double>(packs[i].bytes);
  };
  std::sort(copies.begin(), copies.end(), [&](const Copy& a, const Copy& b) {
    if (a.id != b.id) return a.id < b.id;
    return density(a.pack) > density(b.pack);
  });
  std::vector<uint64_t> needed_bytes(packs.size(), 0);
  std::vector<uint64_t> needed_count(packs.size(), 0);
  std::vector<std::vector<uint32_t>> keepers(packs.size());
  for (size_t j = 0; j < copies.size(); ++j) {
    if (j > 0 && copies[j].id == copies[j - 1].id) continue;  // a duplicate of the keeper
    const Copy& c = copies[j];
    needed_bytes[c.pack] += RecordBytes(packs[c.pack].blobs[c.index]);
    ++needed_count[c.pack];
    keepers[c.pack].push_back(c.index);
  }
  std::vector<uint32_t> doomed_index;
  for (uint32_t i = 0; i < packs.size(); ++i) {
    GcPackAction a;
    a.pack = packs[i].id;
    a.bytes = packs[i].bytes;
    a.needed_bytes = needed_bytes[i];
    a.needed_blobs = needed_count[i];
    if (needed_count[i] == 0) {
      a.kind = GcPackAction::Kind::kDelete;
    } else if (needed_count[i] < packs[i].blobs.size() &&
               static_cast<double>(needed_bytes[i]) <
                   options.max_repack_fraction * static_cast<double>(packs[i].bytes)) {
      // Only a pack that holds a blob no one needs: in a small pack of needed blobs the header
      // and footer alone can outweigh them, and its repack would be as small (a churn of
      // copies at every run that reclaims nothing).
      a.kind = GcPackAction::Kind::kRepack;
    } else {
      if (needed_count[i] < packs[i].blobs.size()) {
        ++report.packs_kept_with_garbage;
        report.garbage_bytes_kept += a.bytes - std::min(a.bytes, a.needed_bytes);
      }
      continue;
    }
    report.actions.push_back(a);
    report.reclaimable_bytes += a.bytes - std::min(a.bytes, a.needed_bytes);
    doomed_index.push_back(i);
  }
  Hook(options, GcPhase::kPlanned);
  auto finish = [&]() -> Result<GcReport> {
    report.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock->SteadyNow() - started);
    return report;
  };
  if (options.mode == GcMode::kDryRun || doomed_index.empty()) return finish();

  // 3. Doom, then copy what the repacked packs hold that is needed. The packs to delete come
  // first in the doom: on a full disk the run falls back to them alone (below), and a doom cut
  // back to its front needs no new space (GcStore::PublishDoom).
  std::stable_partition(doomed_index.begin(), doomed_index.end(),
                        [&](uint32_t i) { return needed_count[i] == 0; });
  const size_t deletes = static_cast<size_t>(std::count_if(
      doomed_index.begin(), doomed_index.end(), [&](uint32_t i) { return needed_count[i] == 0; }));
  std::vector<uint64_t> doomed;
  for (uint32_t i : doomed_index) doomed.push_back(packs[i].id);
  BDN_RETURN_IF_ERROR(store.PublishDoom(doomed));
  // On a full disk, when this process has no other writer: the copies no Sync covered are
  // deleted, so that a run that could not finish gives back the space it took. Best effort.
  // Returns what stays of the copies: "" when none was made or all were removed, else how
  // they stay. `since`: what this process had sealed before these copies were made
  // (SealedSoFar): packs sealed earlier (a repack's, synced before the sweep's copies) are not
  // these copies.
  auto discard_copies = [&](const ChunkStore::Sealed& since) -> std::string {
    const std::string stay = "the copies made stay until a later gc collects them";
    if (!options.discard_copies_on_full_disk) return stay;
    auto d = store.blobs().DiscardAfterFullDisk();
    if (!d || !d->disk_full) return stay;
    const uint64_t packs = d->sealed_packs_kept - std::min(d->sealed_packs_kept, since.packs);
    const uint64_t bytes = d->sealed_bytes_kept - std::min(d->sealed_bytes_kept, since.bytes);
    if (packs == 0) return "";
    // Sealed packs are never deleted here; the next gc keeps a blob in its densest pack (these
    // copies) and so drops the originals' share of it.
    return "the copies made were removed but for the " + Counted(packs, "pack") +
           " of them sealed before the disk filled (" + FormatBytes(bytes) +
           "), which the next gc keeps in place of the originals";
  };
  const ChunkStore::Sealed before_copies = store.blobs().SealedSoFar();
  // From here on every way out clears the doom (a crash leaves it to the next open).
  auto fail = [&](const Status& s) -> Result<GcReport> {
    discard_copies(before_copies);
    // Best effort on an error path: a doom left behind ends at the store's next open with no GC
    // running, as after a crash.
    store.ClearDoom().IgnoreError();
    return Err(s);
  };
  Hook(options, GcPhase::kDoomed);
  Status copied = [&]() -> Status {
    for (size_t j = deletes; j < doomed_index.size(); ++j) {
      const uint32_t i = doomed_index[j];
      for (uint32_t k : keepers[i]) {
        Status s = CopyBlob(store, packs[i].blobs[k], report);
        if (!s.ok()) return s.WithPrefix("gc: repack " + Hex16(packs[i].id));
      }
    }
    if (Status s = store.blobs().Sync(); !s.ok()) return s.WithPrefix("gc: repack");
    return Status::Ok();
  }();
  // Set when the disk filled while copying: the run then deletes only the packs no version
  // needs (their doom has stood since before any copy, so the doom and grace protect them as
  // in a whole run), keeps the packs it was repacking, and ends with an error saying so.
  Status full_disk;
  std::string kept;  // "1 pack to repack was kept (...)"
  if (!copied.ok()) {
    if (copied.code() != StatusCode::kFailedPrecondition) return fail(copied);
    full_disk = copied;
    const size_t repacks = doomed_index.size() - deletes;
    // The packs being repacked leave the doom first (their blobs are live again), then their
    // copies go.
    doomed_index.resize(deletes);
    doomed.resize(deletes);
    if (!doomed.empty()) {
      if (Status s = store.PublishDoom(doomed); !s.ok()) {
        return fail(Status(copied.code(),
                           copied.message() + "; nothing was deleted (" + s.message() + ")"));
      }
    }
    const std::string copies_left = discard_copies(before_copies);
    kept = Counted(repacks, "pack") + " to repack " + (repacks == 1 ? "was" : "were") + " kept (" +
           (copies_left.empty() ? "the copies made were removed" : copies_left) + ")";
    if (doomed.empty()) {
      return fail(Status(copied.code(), copied.message() +
                                            "; the disk is full: nothing was deleted (no pack is "
                                            "wholly unneeded) and " +
                                            kept + "; free space and run gc again"));
    }
    std::erase_if(report.actions,
                  [](const GcPackAction& a) { return a.kind == GcPackAction::Kind::kRepack; });
    report.blobs_copied = 0;  // from here on: the sweep's rescues
    report.bytes_copied = 0;
  }
  Hook(options, GcPhase::kCopied);

  // 4. Grace.
  // In steps of at most a second, so that a stopping server is not held up by it; a fake clock
  // moves on by each step at once.
  const SteadyTime grace_end = clock->SteadyNow() + options.grace;
  for (SteadyTime now = clock->SteadyNow(); now < grace_end; now = clock->SteadyNow()) {
    if (options.stopping && options.stopping()) break;
    clock->SleepFor(std::min<std::chrono::nanoseconds>(grace_end - now, std::chrono::seconds(1)));
  }
  if (options.stopping && options.stopping()) return fail(InternalError("gc: stopped"));

  // 5. Sweep: no commit from here to the deletions, so what the second mark sees is all there is.
  auto sweep_hold = store.HoldForSweep();
  if (!sweep_hold) return fail(sweep_hold.error());
  // The doom again, now that commits are kept out: in a shared database another run (whose lock
  // was lost) may have replaced or cleared it during the grace, and then writers rely on these
  // packs again and a rescue's Put below would find its blob "stored" in them. Writers that
  // relied on them meanwhile recorded claims first, which the mark below reads.
  if (Status s = store.PublishDoom(doomed); !s.ok()) return fail(s);
  IdSet later;
  {
    // Claims first, then the registry: a writer that released its claims had committed by then.
    auto claims = store.LiveClaims();
    if (!claims) return fail(claims.error());
    later.AddAll(*claims);
    auto now_versions = registry.ListRetainedVersions();
    if (!now_versions) return fail(now_versions.error());
    Status s = MarkVersions(store.blobs(), *now_versions, marked_versions, later, nullptr);
    if (!s.ok()) return fail(s);
    later.Seal();
  }
  // The blobs of each doomed pack that are needed now and have no copy outside the doom (a
  // version committed during the run), copied before the sweep. On a full disk every pack that
  // needed one is kept (and its copies, not synced, go as discard_copies says) and the others
  // are still deleted.
  // A blob in several doomed packs is copied once, from the first: that pack is kept whenever
  // its copy may not have become durable, so the blob stays.
  std::vector<std::vector<const BlobLocation*>> rescues(doomed_index.size());
  std::unordered_set<Digest> planned;
  // A copy counts as live only outside this run's own doom, whatever the store's view of the
  // doom says now (another run may have replaced the doom in a shared database).
  std::vector<uint64_t> own_doom = doomed;
  std::sort(own_doom.begin(), own_doom.end());
  for (size_t j = 0; j < doomed_index.size(); ++j) {
    const uint32_t i = doomed_index[j];
    for (const BlobLocation& b : packs[i].blobs) {
      if (!later.Contains(b.id) && !needed.Contains(b.id)) continue;
      if (store.IsQuarantined(packs[i].id, b.offset) || planned.contains(b.id)) continue;
      auto live = store.HasLiveCopy(b.id, own_doom);
      if (!live) return fail(live.error());
      if (*live) continue;
      planned.insert(b.id);
      rescues[j].push_back(&b);
    }
  }
  const GcReport before_rescues = report;
  const ChunkStore::Sealed before_rescue_copies = store.blobs().SealedSoFar();
  Status rescue_failed = [&]() -> Status {
    bool rescued = false;
    for (const auto& blobs : rescues) {
      for (const BlobLocation* b : blobs) {
        if (Status s = CopyBlob(store, *b, report); !s.ok()) {
          return s.WithPrefix("gc: keep " + b->id.ToString());
        }
        ++report.blobs_rescued;
        rescued = true;
      }
    }
    if (!rescued) return Status::Ok();
    return store.blobs().Sync().WithPrefix("gc: keep");
  }();
  std::string kept_needed;  // "1 pack a version committed during the run needs was kept (…)"
  if (!rescue_failed.ok()) {
    if (rescue_failed.code() != StatusCode::kFailedPrecondition) return fail(rescue_failed);
    std::vector<uint64_t> keep;
    for (size_t j = 0; j < doomed_index.size(); ++j) {
      if (!rescues[j].empty()) keep.push_back(packs[doomed_index[j]].id);
    }
    std::erase_if(
        doomed, [&](uint64_t id) { return std::find(keep.begin(), keep.end(), id) != keep.end(); });
    std::erase_if(report.actions, [&](const GcPackAction& a) {
      return std::find(keep.begin(), keep.end(), a.pack) != keep.end();
    });
    // The copies made here are removed or left for a later gc: none counts.
    report.blobs_copied = before_rescues.blobs_copied;
    report.bytes_copied = before_rescues.bytes_copied;
    report.blobs_rescued = before_rescues.blobs_rescued;
    const std::string copies_left = discard_copies(before_rescue_copies);
    kept_needed = Counted(keep.size(), "pack") + " that a version committed during the run needs " +
                  (keep.size() == 1 ? "was" : "were") + " kept (" +
                  (copies_left.empty() ? "the copies made were removed" : copies_left) + ")";
    if (full_disk.ok()) full_disk = rescue_failed;
    if (doomed.empty()) {
      return fail(Status(full_disk.code(), full_disk.message() +
                                               "; the disk is full: nothing was deleted and " +
                                               (kept.empty() ? "" : kept + ", ") + kept_needed +
                                               "; free space and run gc again"));
    }
  }
  Hook(options, GcPhase::kSweeping);
  // The hold is what kept commits out since the second mark: one lost behind the run's back
  // (PostgreSQL restarted) may have let one in, so nothing is deleted (the next run starts
  // over).
  if (Status s = StillHeld(**sweep_hold); !s.ok()) {
    return fail(Status(s.code(), "gc: sweep: " + s.message() + "; nothing was deleted"));
  }
  Status deleted = store.DeletePacks(doomed);
  if (!deleted.ok()) return fail(deleted);
  Hook(options, GcPhase::kDeleted);
  // A crash here leaves index entries of deleted packs, which readers skip and the next open of
  // the store drops (docs/format.md, "Garbage collection").
  if (Status s = store.CompactIndex(); !s.ok()) return fail(s.WithPrefix("gc: index"));
  BDN_RETURN_IF_ERROR(store.ClearDoom());
  sweep_hold->reset();
  uint64_t freed = 0;
  for (const GcPackAction& a : report.actions) {
    ++report.packs_deleted;
    if (a.kind == GcPackAction::Kind::kRepack) ++report.packs_repacked;
    freed += a.bytes;
  }
  report.bytes_reclaimed = freed - std::min(freed, report.bytes_copied);
  Hook(options, GcPhase::kSwept);
  if (!full_disk.ok()) {
    std::string kept_all = kept;
    if (!kept_needed.empty()) kept_all += (kept_all.empty() ? "" : ", ") + kept_needed;
    // Packs repacked before the sweep's copies filled the disk were deleted too (their needed
    // blobs live on in their copies).
    const uint64_t unneeded = report.packs_deleted - report.packs_repacked;
    std::string deleted;
    if (unneeded > 0 || report.packs_repacked == 0) {
      deleted = "the " + Counted(unneeded, "pack") + " no version needs";
    }
    if (report.packs_repacked > 0) {
      deleted += (deleted.empty() ? "the " : " and the ") + Counted(report.packs_repacked, "pack") +
                 " repacked";
    }
    return Err(Status(full_disk.code(), full_disk.message() + "; the disk is full: deleted only " +
                                            deleted + " (" + FormatBytes(report.bytes_reclaimed) +
                                            " freed); " + kept_all + ": run gc again" +
                                            (kept.empty() ? "" : " to repack")));
  }
  return finish();
}

}  // namespace bdn
