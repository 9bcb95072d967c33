// The store side of garbage collection (maintenance/gc.h, docs/format.md "Garbage
// collection"): what a pack store offers one GC run, so that the local pack store and an
// object-store backend run the same algorithm. Packs are deleted whole or repacked; blobs that a
// GC is about to delete are "doomed": readers still get them, but a writer (FindMissing,
// Contains, Put) treats a blob whose only copies are doomed as missing and stores it again, and
// every blob a writer was told is stored, or stored, is "claimed" until the writer ends.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/pack_format.h"

namespace bdn {

// Where a pack store records the blobs its writers were told are stored (or stored), so that a
// GC keeps them while the writer may still commit a version naming them.
enum class ClaimMode {
  kNone,         // nothing recorded (a node cache: never collected)
  kProcessFile,  // gc/claims/<pid>-<random>.claims, flock'ed by the process while it lives
  kMemory,       // in this process, with their time (bdn serve: its GC runs in it)
};

// One sealed pack and its blobs, as its footer lists them.
struct GcPack {
  uint64_t id = 0;
  uint64_t bytes = 0;  // file size
  std::vector<pack::BlobLocation> blobs;
};

// The pack-level operations of a GC run. Thread-safe.
class GcStore {
 public:
  virtual ~GcStore() = default;
  // The run's exclusivity: held for the whole run. Errors: Conflict "chunk store …: another gc
  // is running (pid N)"; PermissionDenied on a read-only store.
  virtual Result<std::unique_ptr<StoreHold>> BeginGc() = 0;
  // Every sealed pack with its blobs. A pack whose footer cannot be read is left out (it is kept;
  // `skipped` counts it, and bdn fsck reports it). Errors: I/O errors listing the packs.
  virtual Result<std::vector<GcPack>> ListSealedPacks(uint64_t* skipped) = 0;
  // Whether the copy at (pack, record offset) was found damaged and set aside.
  virtual bool IsQuarantined(uint64_t pack, uint64_t offset) = 0;
  // Dooms `packs` (replacing any earlier doom), visible to every process using the store before
  // this returns. A doom that keeps the front of the one before (the packs dropped from its
  // end: a GC on a full disk falls back to the packs it deletes, which it dooms first), or the
  // same doom again (the sweep's), needs no new space, and is never seen as a doom of fewer
  // packs than it holds. Errors: I/O errors
  // (ENOSPC → FailedPrecondition).
  virtual Status PublishDoom(std::span<const uint64_t> packs) = 0;
  // Ends the doom (after a sweep, or a run that stopped). Errors: I/O errors.
  virtual Status ClearDoom() = 0;
  // Excludes commits (ChunkStore::HoldForCommit) while held: the sweep's decision and its
  // deletions. Errors: I/O errors.
  virtual Result<std::unique_ptr<StoreHold>> HoldForSweep() = 0;
  // The blobs claimed by writers that may still commit (any order, may repeat).
  virtual Result<std::vector<Digest>> LiveClaims() = 0;
  // Whether a good copy of `id` is stored outside the doomed packs and outside `doomed` (the
  // run's own doom, sorted: the store's view of the doom is re-read from the database by every
  // writer's refresh, and another run may have replaced it meanwhile).
  virtual Result<bool> HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) = 0;
  // Deletes `packs` (doomed ones), durably, and forgets their blobs in this process. Index
  // entries that name them stay until CompactIndex (readers skip a pack that is gone). A reader
  // that has a pack open finishes its read. Errors: I/O errors naming the pack.
  virtual Status DeletePacks(std::span<const uint64_t> packs) = 0;
  // Rewrites the index so that it names no deleted pack (after DeletePacks). Errors: I/O errors
  // (ENOSPC → FailedPrecondition); the store stays readable (the next open retries).
  virtual Status CompactIndex() = 0;
  // The blobs themselves: Get to read a copy, Put to copy it (Put stores it again when only
  // doomed copies exist), Sync to make copies durable.
  virtual ChunkStore& blobs() = 0;
};

}  // namespace bdn
