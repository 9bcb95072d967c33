// ChunkStore: content-addressed storage of chunks and other blobs (manifests, chunk indexes),
// each keyed by the BLAKE3 of its bytes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/atomic_file.h"

namespace bdn {

// Blobs of a batch read (ChunkStore::GetMany), in request order: the verified bytes, or nullopt
// where the store lacks the blob.
using BlobBatch = std::vector<std::optional<std::vector<uint8_t>>>;

// Lengths of stored blobs (ChunkStore::Sizes), in request order: bytes, or nullopt where the
// store lacks the blob.
using BlobSizes = std::vector<std::optional<uint64_t>>;

// Held for as long as it lives, released on destruction (a lock or a lease of a store).
class StoreHold {
 public:
  virtual ~StoreHold() = default;
  // Whether it still holds: false once lost behind its holder's back (a PostgreSQL advisory
  // lock whose connection ended: sql::HeldLock::Held); a lock file's hold lasts as long as its
  // process. Errors: Unavailable when that cannot be told now. One caller at a time.
  virtual Result<bool> Held() { return true; }
  // A hold that can be lost (Held) fences what it guards in the database instead of relying on
  // it alone: one statement (SQL without parameters) that the registry runs inside the
  // transaction that commits or restores a version, checked while this hold (HoldForCommit)
  // lives. It changes exactly one row while no sweep has deleted packs since the hold was
  // taken, and none after one has (the registry then writes nothing: Registry's
  // CommitRequest::store_fence). "" when there is nothing to check (a lock file cannot be lost).
  virtual std::string CommitFence() const { return ""; }
};

// OK while `hold` still holds; else Unavailable "the chunk store's GC lock was lost (its
// database connection ended)", or Held's error: for a step that relies on the hold to end
// without acting (a commit answered 503, which its client retries; a sweep that deletes
// nothing).
Status StillHeld(StoreHold& hold);

// What storing a blob found (BlobWriter::Commit).
enum class PutOutcome { kStored, kAlreadyStored };

// A blob written piece by piece (ChunkStore::StartPut), for bytes that arrive over time (an
// upload): hashed as they arrive, and stored only by Commit once they hash to the blob's id.
// Destroying a writer before Commit stores nothing. Not thread-safe: one thread at a time.
class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // Adds the next bytes. Errors: FailedPrecondition on a full disk; Internal on I/O errors (the
  // writer is then spent).
  virtual Status Append(std::span<const uint8_t> piece) = 0;
  // Stores the blob (atomically: a reader sees all of it or nothing) if the bytes hash to its id.
  // Returns whether it was stored now or already was. Errors: Corruption "chunk b3:…: received
  // bytes hash to b3:…" (nothing is stored); as Append for I/O.
  virtual Result<PutOutcome> Commit() = 0;
};

// One blob of ChunkStore::PutMany: its id and its bytes (held by the caller for the call).
struct BlobPut {
  Digest id;
  std::span<const uint8_t> data;
};

// Uploads announced together (ChunkStore::StartUploads): the writer of each, started in any
// order, each at most once, at any time (a slow body may take minutes; what the announcement did
// for a blob is judged again when it is stored). Not thread-safe: one thread.
class UploadBatch {
 public:
  virtual ~UploadBatch() = default;
  // The writer of the i-th id the batch was started with (see ChunkStore::StartPut).
  virtual Result<std::unique_ptr<BlobWriter>> StartPut(size_t i) = 0;
};

// An UploadBatch whose i-th writer is start(ids[i]). For ChunkStore implementations.
class UploadsVia : public UploadBatch {
 public:
  using Start = std::function<Result<std::unique_ptr<BlobWriter>>(const Digest&)>;
  UploadsVia(Start start, std::span<const Digest> ids)
      : start_(std::move(start)), ids_(ids.begin(), ids.end()) {}
  Result<std::unique_ptr<BlobWriter>> StartPut(size_t i) override { return start_(ids_.at(i)); }

 private:
  Start start_;
  std::vector<Digest> ids_;
};

// Implementations must be thread-safe.
class ChunkStore {
 public:
  virtual ~ChunkStore() = default;

  // Whether a blob with this id is stored (not verified). Errors: Unavailable/Internal on I/O.
  virtual Result<bool> Contains(const Digest& id) = 0;

  // The ids of `ids` that are not stored, in input order (REAPI FindMissingBlobs style: one call
  // per batch, so a remote store answers up to 4096 ids per request). Default: Contains per id.
  virtual Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids);

  // The stored length in bytes of each of `ids`, in input order; nullopt where the blob is not
  // stored. Cheap: reads no blob (a stat per id on disk; one request per 4096 ids to a remote
  // store), so the length is not verified (a damaged blob reports what is stored; Get would
  // refuse its bytes). The commit check compares it with what a version says of each chunk.
  // Errors: Unavailable/Internal on I/O or transport errors.
  virtual Result<BlobSizes> Sizes(std::span<const Digest> ids) = 0;

  // Stores `data` under `id`, atomically: a reader sees all of it or nothing.
  // Idempotent. Errors: InvalidArgument if Digest::Of(data) != id (never stored);
  // FailedPrecondition on a full disk; Internal on other I/O errors.
  virtual Status Put(const Digest& id, std::span<const uint8_t> data) = 0;

  // Starts storing blob `id` from bytes that arrive piece by piece (see BlobWriter). Default:
  // the bytes are collected in memory and Put at Commit; LocalChunkStore writes them to a
  // temporary file as they come, so an upload is never held whole. Errors: as Put.
  virtual Result<std::unique_ptr<BlobWriter>> StartPut(const Digest& id);

  // Stores several blobs, each as Put would (verified against its id), letting the store do once
  // for all of them what each Put would do on its own: a remote store sends them in requests of
  // up to PutBatchBytes (POST /v1/chunks/upload) instead of one request each. Errors: the first
  // failing blob's, naming it (the blobs before it may be stored). Default: Put per blob.
  virtual Status PutMany(std::span<const BlobPut> blobs);

  // How many bytes of blobs a caller should hand one PutMany call: a remote store answers a
  // batch in one round trip. 0 (the default): PutMany saves nothing; call Put per blob, in
  // parallel.
  virtual size_t PutBatchBytes() const { return 0; }

  // Announces uploads of `ids` that the caller then streams in (POST /v1/chunks/upload lists its
  // ids before their bytes), so that the store does once what each StartPut's Commit would do:
  // ObjectPackStore records the push claims and looks at the doom in one transaction for the whole
  // batch. Errors: as StartPut, and those of that transaction. Default: StartPut per blob.
  virtual Result<std::unique_ptr<UploadBatch>> StartUploads(std::span<const Digest> ids);

  // Returns the blob's bytes after checking they hash to `id`.
  // Errors: NotFound "chunk b3:…: not in store"; Corruption "chunk b3:…: digest mismatch …"
  // (the bytes are never returned); Internal on I/O errors.
  virtual Result<std::vector<uint8_t>> Get(const Digest& id) = 0;

  // Get, but only when it can answer at once: from memory or the page cache, without waiting on
  // a disk, the network, or a lock held across either. Returns the verified bytes, or nullopt
  // when it cannot answer that way or the blob is larger than `max_bytes` (the caller then
  // calls Get on a thread that may wait), and also on any error: Get reports errors, with their
  // side effects (a corrupt copy set aside). For a server's I/O thread (docs/http-api.md,
  // "Chunks"). Thread-safe. Default: nullopt.
  virtual std::optional<std::vector<uint8_t>> GetNow(const Digest& id, uint64_t max_bytes);

  // Many blobs at once, verified, in request order (nullopt where the store lacks one), so that
  // a remote tier answers a whole read window in one request (POST /v1/chunks/batch) rather than
  // one per chunk. Memory: every blob of the answer at once; callers bound `ids` (the mount asks
  // for at most 16 MiB). Errors: as Get, except NotFound, which is a nullopt; one blob that
  // fails verification fails the call (Corruption naming it). Default: Get per id.
  virtual Result<BlobBatch> GetMany(std::span<const Digest> ids);

  // Whether one GetMany of many blobs is much cheaper than as many Gets (a remote tier: one
  // request instead of one per blob). Readers batch their fetches only for such stores; for a
  // local disk, parallel Gets are faster. Default: false.
  virtual bool PrefersBatches() const { return false; }

  // Makes every Put so far durable, and visible to other processes sharing the store (a local
  // pack store seals its open packs with one fdatasync each). Called before a commit.
  // Default: nothing to do.
  virtual Status Sync() { return Status::Ok(); }

  // Closes what this process holds open that another process deleted (a node cache's regions
  // another process evicted), so that its disk space returns. For a long-running process that
  // may sit idle (the mount daemon, `bdn cache serve`), about once a second: reads do it too, but
  // an idle process reads nothing. Cheap (an fstat per held file), no network and no wait for
  // other threads' I/O. Default: nothing held.
  virtual void ReleaseDeleted() {}

  // Held by a commit (or restore) from the check that the version's blobs are stored until the
  // registry has recorded it: a garbage collection does not sweep meanwhile, so a blob the check
  // saw is still there when the version becomes visible (store/gc_store.h). Default: a hold that
  // holds nothing (a store no GC collects). Errors: I/O errors taking the lock.
  virtual Result<std::unique_ptr<StoreHold>> HoldForCommit();

  // What DiscardAfterFullDisk removed.
  struct Discarded {
    uint64_t packs = 0;      // pack files deleted
    uint64_t bytes = 0;      // their size
    bool disk_full = false;  // a write of this store found the disk full
    // Packs this process sealed since the store was opened, which stay (sealed packs are never
    // deleted here), and their size.
    uint64_t sealed_packs_kept = 0;
    uint64_t sealed_bytes_kept = 0;
  };
  // For a writer that failed and will commit nothing, in a process where no other writer may
  // still commit (a failed `bdn volume push` of the embedded store), or where commits are held
  // off meanwhile (`bdn serve` after an upload filled its disk, under GcStore::HoldForSweep: a
  // later commit naming a discarded blob is refused as not stored, and the pushing client stores
  // it again, PushOptions::max_commit_rounds): when a write of this store
  // found the disk full (ENOSPC, EDQUOT) since it was opened, deletes what this process wrote
  // that is not durable yet and that no other process can see, so that the failed push gives its
  // space back; otherwise (any other failure) keeps it, for the next push to reuse. The pack
  // store deletes the packs this process is writing that no Sync has covered (never a sealed
  // pack: another process may rely on its blobs, and a GC reclaims it) and forgets their blobs.
  // Default: nothing to discard. Errors: I/O errors deleting a pack, naming it.
  virtual Result<Discarded> DiscardAfterFullDisk() { return Discarded{}; }
  // How many writes of this store found the disk full (ENOSPC, EDQUOT) since it was opened: a
  // server that saw it grow discards (DiscardAfterFullDisk, commits held off) what the failed
  // uploads left. Default: 0 (a store that never fills a disk of its own).
  virtual uint64_t FullDiskCount() const { return 0; }
  // The packs this process has sealed since the store was opened, and their bytes: what
  // DiscardAfterFullDisk reports as kept (Discarded::sealed_packs_kept, sealed_bytes_kept), taken
  // before a step so that the step's own are told apart. Default: none.
  struct Sealed {
    uint64_t packs = 0;
    uint64_t bytes = 0;
  };
  virtual Sealed SealedSoFar() const { return {}; }
};

// One GetMany answer from per-blob Get results, in order: NotFound becomes nullopt, the first
// other error fails the whole batch. For ChunkStore implementations.
Result<BlobBatch> CollectBatch(std::vector<Result<std::vector<uint8_t>>> got);

// Checks `data` against `id`. Errors: Corruption naming the chunk and the digest found.
Status VerifyChunk(const Digest& id, std::span<const uint8_t> data);

// A BlobWriter that hashes the pieces as they come and checks them at Commit; subclasses keep
// the bytes (Keep), forget them (Drop: the bytes did not match) and store them (Store). For
// ChunkStore implementations. Not thread-safe, as BlobWriter.
class HashingBlobWriter : public BlobWriter {
 public:
  explicit HashingBlobWriter(const Digest& id) : id_(id) {}
  Status Append(std::span<const uint8_t> piece) override {
    hasher_.Update(piece);
    return Keep(piece);
  }
  Result<PutOutcome> Commit() override {
    Digest got = hasher_.Finalize();
    if (got != id_) {
      Drop();
      return Err(CorruptionError("chunk " + id_.ToString() + ": received bytes hash to " +
                                 got.ToString()));
    }
    return Store();
  }

 protected:
  virtual Status Keep(std::span<const uint8_t> piece) = 0;
  virtual void Drop() = 0;
  virtual Result<PutOutcome> Store() = 0;
  const Digest id_;

 private:
  Blake3Hasher hasher_;
};

// The blobs some writer of a store is storing now, so that concurrent Puts of one blob write it
// once: the first takes the turn and stores it; the others wait until its turn ends, then find it
// stored. Guarded by the store's own mutex, under which the store also looks blobs up. For
// ChunkStore implementations.
class PendingPuts {
 public:
  // Marks one id pending for as long as it lives; its end (under the store's mutex) wakes the
  // writers waiting for that id.
  class Turn {
   public:
    Turn(PendingPuts* pending, std::shared_mutex* mu, const Digest& id)
        : pending_(pending), mu_(mu), id_(id) {}
    Turn(Turn&& o) noexcept : pending_(o.pending_), mu_(o.mu_), id_(o.id_) { o.pending_ = nullptr; }
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (!pending_) return;
      std::unique_lock l(*mu_);
      pending_->ids_.erase(id_);
      pending_->cv_.notify_all();
    }

   private:
    PendingPuts* pending_;
    std::shared_mutex* mu_;
    Digest id_;
  };
  // With `lock` held on the store's mutex: waits while another writer stores `id`; returns
  // nullopt once `stored()` (asked under the lock) holds, else the caller's turn to store it.
  // `stored` may be marked REQUIRES(the store's mutex), which the analysis cannot see `lock` hold.
  template <typename Stored>
  std::optional<Turn> WaitOrBegin(std::unique_lock<std::shared_mutex>& lock, const Digest& id,
                                  Stored stored) NO_THREAD_SAFETY_ANALYSIS {
    for (;;) {
      if (stored()) return std::nullopt;
      if (!ids_.contains(id)) break;
      cv_.wait(lock);
    }
    ids_.insert(id);
    return std::optional<Turn>(std::in_place, this, lock.mutex(), id);
  }

 private:
  std::unordered_set<Digest> ids_;
  std::condition_variable_any cv_;
};

// A ChunkStore that sends every call it overrides here to `upstream`: the base of a tier that
// changes how some calls go (ClusterChunkStore's and UpstreamBreaker's reads) and passes the rest
// down unchanged. Calls not listed (StartPut, StartUploads, GetNow, ReleaseDeleted,
// HoldForCommit, ...) keep ChunkStore's defaults, which go through the ones listed.
class ForwardingChunkStore : public ChunkStore {
 public:
  explicit ForwardingChunkStore(std::shared_ptr<ChunkStore> upstream)
      : upstream_(std::move(upstream)) {}

  Result<bool> Contains(const Digest& id) override { return upstream_->Contains(id); }
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override {
    return upstream_->FindMissing(ids);
  }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return upstream_->Sizes(ids); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return upstream_->Put(id, data);
  }
  Status PutMany(std::span<const BlobPut> blobs) override { return upstream_->PutMany(blobs); }
  size_t PutBatchBytes() const override { return upstream_->PutBatchBytes(); }
  Status Sync() override { return upstream_->Sync(); }
  Result<std::vector<uint8_t>> Get(const Digest& id) override { return upstream_->Get(id); }
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    return upstream_->GetMany(ids);
  }
  bool PrefersBatches() const override { return upstream_->PrefersBatches(); }

 protected:
  std::shared_ptr<ChunkStore> upstream_;
};

// In-memory reference implementation for tests. Thread-safe.
class MemChunkStore : public ChunkStore {
 public:
  Result<bool> Contains(const Digest& id) override;
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  // Test hook: replaces the stored bytes of `id` without verification.
  void CorruptForTest(const Digest& id, std::vector<uint8_t> bytes);
  size_t size() const;

 private:
  mutable Mutex mu_;
  std::unordered_map<Digest, std::vector<uint8_t>> blobs_ GUARDED_BY(mu_);
};

}  // namespace bdn
