// PackCatalog: what the `bdn serve` replicas sharing one bucket must agree on, and where they
// agree on it: which packs exist (the object pack store's index is derived from it and from the
// packs' footers), and the coordination of garbage collection (the run's lock, the lock between
// sweeps and commits, the doom, writers' claims; store/gc_store.h). BucketCatalog keeps the pack
// list in the bucket itself (a listing of <prefix>/packs/) and the coordination in this process:
// right for one `bdn serve` per bucket. A catalog shared by replicas (PostgreSQL: a packs table,
// advisory locks, doom and claims rows) takes its place without changing the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/objstore/s3_client.h"
#include "bdn/store/chunk_store.h"  // StoreHold
#include "bdn/store/pack_format.h"

namespace bdn::objstore {

// A pack as the catalog lists it.
struct CatalogPack {
  uint64_t id = 0;
  uint64_t bytes = 0;  // the object's size
  bool operator==(const CatalogPack&) const = default;
};

// The object key of pack `id`: "packs/<16 hex digits>.pack" (under the store's prefix).
std::string PackKey(uint64_t id);

// Thread-safe.
class PackCatalog {
 public:
  virtual ~PackCatalog() = default;

  // Every pack recorded, any order. Errors: Unavailable (the catalog cannot be reached).
  virtual Result<std::vector<CatalogPack>> ListPacks() = 0;
  // Records a pack whose object is uploaded whole, with the blobs its footer lists; the store
  // calls it before any commit can name them. Errors: Unavailable.
  virtual Status AddPack(const CatalogPack& pack, std::span<const pack::BlobLocation> blobs) = 0;
  // Forgets packs whose objects were deleted (by this store's GC), and tells the other stores
  // of the catalog (DeletedSince). Errors: Unavailable.
  virtual Status RemovePacks(std::span<const uint64_t> packs) = 0;

  // The packs RemovePacks was given since position `after` (0: the start), by any store of the
  // catalog, and the position to ask from next time. A replica that answered from an index
  // still naming them would tell a writer that blobs are stored which no longer are.
  // `complete` is false when positions after `after` were pruned unseen (the catalog keeps 30
  // days): the caller must then look at the whole pack list again (a store that has just opened
  // does anyway, and may ignore it). The position advances past every position the catalog has
  // handed out so far, also when none is this store's, so that a store with nothing to read never
  // stays at 0. Errors: Unavailable.
  struct Deleted {
    std::vector<uint64_t> packs;
    uint64_t next = 0;
    bool complete = true;
    // How long before this answer each of `packs` was recorded, by the catalog's clock, in the
    // same order; a pack past the end (an empty list: all of them) was recorded just now.
    std::vector<std::chrono::milliseconds> ages;
  };
  virtual Result<Deleted> DeletedSince(uint64_t after) = 0;

  // GcStore::BeginGc. Errors: Conflict "<uri>: another gc is running".
  virtual Result<std::unique_ptr<StoreHold>> BeginGc() = 0;
  // ChunkStore::HoldForCommit (shared) and GcStore::HoldForSweep (exclusive).
  virtual Result<std::unique_ptr<StoreHold>> HoldForCommit() = 0;
  virtual Result<std::unique_ptr<StoreHold>> HoldForSweep() = 0;
  // GcStore::PublishDoom and ClearDoom, and the doomed packs now (writers look before they
  // answer; a doom seen late is safe, because their claims are recorded first).
  virtual Status PublishDoom(std::span<const uint64_t> packs) = 0;
  virtual Status ClearDoom() = 0;
  virtual Result<std::vector<uint64_t>> Doom() = 0;
  // Records blobs a writer was told are stored (or stored), and GcStore::LiveClaims.
  virtual Status RecordClaims(std::span<const Digest> ids) = 0;
  virtual Result<std::vector<Digest>> LiveClaims() = 0;
};

// The catalog of one `bdn serve` per bucket: packs from a listing of <prefix>/packs/ (one request
// per 1,000 packs), GC coordination in memory. Claims are kept from `retain_since()` on (bdn
// serve: the start of its oldest live push claim, or --gc-grace ago); null keeps them 10 minutes.
class BucketCatalog : public PackCatalog {
 public:
  BucketCatalog(std::shared_ptr<S3Client> client, std::function<SteadyTime()> retain_since,
                std::shared_ptr<Clock> clock = Clock::Real());

  // Keys under packs/ that are not "<16 hex>.pack" are left out (multipart leftovers, other tools'
  // files).
  Result<std::vector<CatalogPack>> ListPacks() override;
  Status AddPack(const CatalogPack&, std::span<const pack::BlobLocation>) override {
    return Status::Ok();  // the uploaded object is the record
  }
  Status RemovePacks(std::span<const uint64_t>) override { return Status::Ok(); }
  // Nothing: the one store of the bucket forgets the packs its own GC deletes.
  Result<Deleted> DeletedSince(uint64_t after) override { return Deleted{{}, after, true}; }
  Result<std::unique_ptr<StoreHold>> BeginGc() override;
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override;
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override;
  Status PublishDoom(std::span<const uint64_t> packs) override;
  Status ClearDoom() override;
  Result<std::vector<uint64_t>> Doom() override;
  Status RecordClaims(std::span<const Digest> ids) override;
  Result<std::vector<Digest>> LiveClaims() override;

 private:
  void PruneLocked(SteadyTime now, bool force) REQUIRES(mu_);

  const std::shared_ptr<S3Client> client_;
  const std::function<SteadyTime()> retain_since_;
  const std::shared_ptr<Clock> clock_;
  Mutex gc_running_;
  SharedMutex sweep_;
  Mutex mu_;
  std::vector<uint64_t> doom_ GUARDED_BY(mu_);
  std::deque<std::pair<SteadyTime, Digest>> claims_ GUARDED_BY(mu_);
  SteadyTime last_prune_ GUARDED_BY(mu_){};
};

}  // namespace bdn::objstore
