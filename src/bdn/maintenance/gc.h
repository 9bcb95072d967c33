// Garbage collection over a pack store (docs/spec.md §8, docs/format.md "Garbage collection"):
// marks every blob a live or restorable version or an in-flight writer needs, deletes packs that
// hold none of them and repacks packs that are mostly garbage, without stopping readers, pushes
// or commits. The design follows restic's prune (packs classified keep / repack / delete by their
// needed bytes) and kopia's maintenance (deletion only after a grace period), but protects
// in-flight writers by claims and a doom instead of by time alone (store/gc_store.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"
#include "bdn/registry/registry.h"
#include "bdn/store/gc_store.h"

namespace bdn {

// Where a run is; GcOptions::hook is called at each, on the run's thread.
enum class GcPhase {
  kPlanned,   // packs classified (also in a dry run, before it returns)
  kDoomed,    // the doom is published: writers now store doomed blobs again
  kCopied,    // the needed blobs of repacked packs are copied and durable
  kSweeping,  // holding the sweep lock, the second mark done, just before packs are deleted
  kDeleted,   // the doomed packs deleted, the index tables naming them not yet rewritten
  kSwept,     // index rewritten, doom cleared
};

// The phase's name as tests and BDN_TEST_GC_STOP_AT spell it: "planned", "doomed", "copied",
// "sweeping", "deleted", "swept".
const char* GcPhaseName(GcPhase phase);
// The phase named `name` (as GcPhaseName spells it), or nullopt.
std::optional<GcPhase> ParseGcPhase(std::string_view name);

// Whether a run changes anything.
enum class GcMode { kRun, kDryRun };

struct GcOptions {
  GcMode mode = GcMode::kRun;
  // A pack whose needed bytes are below this fraction of its size is repacked (0: never repack,
  // only delete packs with no needed blob; 1: repack every pack holding any garbage).
  double max_repack_fraction = 0.5;
  // Between the doom and the sweep: the doomed blobs stay readable this long (readers that
  // looked a blob up finish), and what is swept is what stayed unreferenced over it.
  std::chrono::milliseconds grace{0};
  // Waits of the grace. Never null.
  std::shared_ptr<Clock> clock = Clock::Real();
  // Returns true to end a run early (a server stopping): the grace wait ends, nothing is
  // deleted, the doom is cleared.
  std::function<bool()> stopping;
  // Whether no other writer of the store runs in this process (bdn gc; not bdn serve, whose
  // pushes share the packs being written): then a run that finds the disk full deletes the copies
  // it made that no Sync covered (ChunkStore::DiscardAfterFullDisk), giving their space back,
  // instead of leaving them for a later run to collect.
  bool discard_copies_on_full_disk = false;
  // Tests: called at every phase (GcPhase), so a test drives an interleaving exactly.
  std::function<void(GcPhase)> hook;
};

// What a run (or a dry run) decided about one pack.
struct GcPackAction {
  enum class Kind { kDelete, kRepack };
  uint64_t pack = 0;
  Kind kind = Kind::kDelete;
  uint64_t bytes = 0;         // the pack file
  uint64_t needed_bytes = 0;  // records of needed blobs in it (copied by a repack)
  uint64_t needed_blobs = 0;
};

struct GcReport {
  uint64_t versions = 0;              // live and restorable versions marked
  uint64_t needed_blobs = 0;          // distinct blobs they need
  uint64_t packs = 0;                 // sealed packs looked at
  uint64_t pack_bytes = 0;            // their bytes
  uint64_t packs_skipped = 0;         // packs whose footer could not be read (kept)
  std::vector<GcPackAction> actions;  // the plan, by pack number
  uint64_t reclaimable_bytes = 0;     // the plan's gain: deleted packs' bytes minus copied bytes
  // Packs kept that hold blobs no version needs, as needed bytes are at least
  // max_repack_fraction of each (or repacking is off), and the bytes of those unneeded blobs
  // (pack size minus needed record bytes): what a higher --max-repack-fraction would reclaim.
  uint64_t packs_kept_with_garbage = 0;
  uint64_t garbage_bytes_kept = 0;
  uint64_t packs_deleted = 0;    // packs removed (with no needed blob, or repacked)
  uint64_t packs_repacked = 0;   // of which repacked
  uint64_t blobs_copied = 0;     // copied by repacks and rescues
  uint64_t bytes_copied = 0;     // their record bytes
  uint64_t blobs_rescued = 0;    // needed by the second mark: copied before the sweep
  uint64_t bytes_reclaimed = 0;  // pack bytes deleted minus bytes copied
  std::chrono::milliseconds duration{0};
  std::vector<std::string> warnings;
};

// Runs one garbage collection of `store` against `registry`'s versions:
//  1. lists the sealed packs, marks the blobs of every version ListRetainedVersions returns
//     (manifest, chunk indexes, chunks) and the store's live claims;
//  2. classifies each pack: no needed blob → delete; a blob not needed and needed bytes <
//     max_repack_fraction of it → repack; else keep (a blob stored in several packs is needed in
//     one, the densest; a pack of needed blobs only is kept however small);
//  3. (a dry run returns here) takes the store's GC lock, publishes the doom of every pack to
//     delete or repack (those to delete first), copies the needed blobs of packs to repack into
//     new packs and syncs (on a full disk: narrows the doom to the packs to delete, below);
//  4. waits `grace`;
//  5. holding the sweep lock (no commit meanwhile): reads the live claims again, marks again
//     (versions committed or restored since), copies any doomed blob now needed that has no
//     other copy, deletes the doomed packs, rewrites the index tables that named them and
//     clears the doom.
// A crash at any point loses nothing needed: copies are durable before any pack goes, and a
// doom left by a dead run is dropped. Errors: Conflict when another GC runs; Corruption
// "gc: version bdn:…: …; nothing was deleted (bdn volume verify bdn:… says what is damaged)" when
// a version's
// manifest or chunk index cannot be read (its blobs cannot be known); FailedPrecondition on a
// full disk while copying: the run then keeps the packs it was repacking (their copies deleted
// as discard_copies_on_full_disk says) and still deletes, after the grace, the packs with no
// needed blob, which were doomed first, then fails with "gc: repack <pack>: <cause>; the disk is
// full: deleted only the N packs no version needs (<bytes> freed); M packs to repack were kept
// (…): run gc again to repack" ("…: nothing was deleted (no pack is wholly unneeded) and …; free
// space and run gc again" when there is none); on a full disk while copying, in the sweep, the
// blobs of doomed packs a version committed during the run needs: every pack that needed such a
// copy is kept (its copies go as above) and the others are still deleted, then the run fails
// with "gc: keep b3:…: <cause>; the disk is full: deleted only the N packs no version needs
// [and the R packs repacked] (<bytes> freed); M packs that a version committed during the run
// needs were kept (…, counting only the copies the sweep made): run gc again" ("…: nothing was
// deleted and …" when every doomed pack is kept); Internal "gc:
// stopped" when `stopping` ended it; FailedPrecondition "gc: the registry holds no volume, but
// the store holds N packs: refusing to delete them all (is the registry this store's?); nothing
// was done" before anything is doomed; the store's and registry's errors. Thread-safe with respect
// to readers and writers of the store; one run at a time.
Result<GcReport> RunGc(Registry& registry, GcStore& store, const GcOptions& options);

}  // namespace bdn
