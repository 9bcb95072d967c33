// PgCatalog: the PackCatalog of `bdn serve` replicas that share one bucket and one PostgreSQL
// (--store s3://… --db postgresql://…). Which packs exist stays the bucket's listing (as in
// BucketCatalog: the uploaded objects are the record); the garbage collector's coordination,
// which BucketCatalog keeps in one process, lives in the database, so that a collection on one
// replica sees what writers on every replica rely on:
//   - the run's lock (BeginGc): a session advisory lock, "objstore-gc.<store tag>";
//   - the lock between sweeps and commits: one advisory lock, taken shared by every commit's
//     check-to-write (HoldForCommit) and exclusive by a sweep (HoldForSweep), on any replica;
//   - the doom: rows of objstore_doom;
//   - the packs a collection deleted: rows of objstore_deleted_packs, which every replica reads
//     before it tells a writer what is stored (DeletedSince), so that none answers from an index
//     that still names them;
//   - writers' claims: rows of objstore_claims stamped with the database's clock (so replicas'
//     clocks never disagree about a claim's age), kept from the caller's retain_since() on.
// Rows carry the store's URI, so stores of several buckets may share one database. The schema is
// the component "objstore" of PgPool::Migrate (pg_catalog.cc).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bdn/base/mutex.h"
#include "bdn/objstore/pack_catalog.h"
#include "bdn/sql/postgres.h"

namespace bdn::objstore {

class PgCatalog : public PackCatalog {
 public:
  // Applies the objstore schema to `pool`'s database (once across replicas) and returns the
  // catalog of `client`'s bucket and prefix. `retain_since` as BucketCatalog's (null: claims are
  // kept 10 minutes). Errors: Unavailable when the database cannot be reached; the migration's.
  static Result<std::shared_ptr<PgCatalog>> Open(std::shared_ptr<S3Client> client,
                                                 std::shared_ptr<sql::PgPool> pool,
                                                 std::function<SteadyTime()> retain_since,
                                                 std::shared_ptr<Clock> clock = Clock::Real());

  // How long a commit waits for a sweep to end (and a sweep for commits), before Unavailable:
  // half the client's per-request deadline (60 s), so that the client gets this answer (503,
  // retried) rather than a timeout of its own.
  static constexpr std::chrono::milliseconds kSweepLockWait{30000};

  Result<std::vector<CatalogPack>> ListPacks() override { return bucket_.ListPacks(); }
  Status AddPack(const CatalogPack& pack, std::span<const pack::BlobLocation> blobs) override {
    return bucket_.AddPack(pack, blobs);
  }
  // Records the packs in objstore_deleted_packs (rows older than kDeletedPacksKept go), in the
  // transaction that moves the sweep fence on (objstore_fence): only while no commit, restore or
  // other sweep has passed the fence since this process's last HoldForSweep. Errors:
  // Unavailable "gc: sweep: a commit, a restore or another gc reached the store since the
  // second mark (…); nothing more was deleted"; Unavailable from the database.
  Status RemovePacks(std::span<const uint64_t> packs) override;
  // From objstore_deleted_packs: one query. Errors: Unavailable.
  Result<Deleted> DeletedSince(uint64_t after) override;
  // How long a deleted pack's row is kept for replicas that have not seen it yet.
  static constexpr std::chrono::hours kDeletedPacksKept{24 * 30};
  // Errors: Conflict "chunk store <uri>: another gc is running (<holder>)"; Unavailable.
  Result<std::unique_ptr<StoreHold>> BeginGc() override;
  // Errors: Unavailable (the database, or "not granted within 30000 ms"). The lock alone can
  // be lost with its connection (a database restart), so each also reads the fence, the row of
  // objstore_fence for this store: a commit's hold hands the registry a CommitFence that counts
  // the commit only while no sweep has moved `sweeps` since; a sweep's remembers (sweeps,
  // commits) for RemovePacks. Together they keep a sweep whose lock was lost from deleting a
  // pack that a commit which got in meanwhile relies on.
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override;
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override;
  Status PublishDoom(std::span<const uint64_t> packs) override;
  Status ClearDoom() override;
  Result<std::vector<uint64_t>> Doom() override;
  // One upsert per 500 ids, stamped clock_timestamp(). Errors: Unavailable.
  Status RecordClaims(std::span<const Digest> ids) override;
  // Also deletes the claims older than the horizon. Errors: Unavailable.
  Result<std::vector<Digest>> LiveClaims() override;

 private:
  PgCatalog(std::shared_ptr<S3Client> client, std::shared_ptr<sql::Database> db,
            std::function<SteadyTime()> retain_since, std::shared_ptr<Clock> clock);
  // How old a claim may be and still count, in milliseconds (none: every claim counts).
  std::optional<int64_t> HorizonMs() const;
  // The store's row of objstore_fence, made if missing.
  struct Fence {
    int64_t sweeps = 0;   // moved on by every RemovePacks
    int64_t commits = 0;  // moved on by every commit or restore (CommitFence)
  };
  Result<Fence> ReadFence();

  const std::string store_;  // the bucket and prefix, as rows name it
  const std::string tag_;    // 16 hex digits of the store's digest, for lock names
  BucketCatalog bucket_;
  const std::shared_ptr<sql::Database> db_;
  const std::function<SteadyTime()> retain_since_;
  const std::shared_ptr<Clock> clock_;
  Mutex fence_mu_;
  // The fence the last HoldForSweep read, moved on by each RemovePacks of that sweep.
  std::optional<Fence> sweep_fence_ GUARDED_BY(fence_mu_);
};

}  // namespace bdn::objstore
