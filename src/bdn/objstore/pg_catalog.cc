#include "bdn/objstore/pg_catalog.h"

#include <algorithm>
#include <cstring>

#include "bdn/base/hex.h"

namespace bdn::objstore {
namespace {

// The schema of the component "objstore" (PgPool::Migrate: applied once, in order).
const sql::Migration kMigrations[] = {
    {1, "gc coordination",
     "CREATE TABLE objstore_doom ("
     "  store TEXT NOT NULL,"
     "  pack BIGINT NOT NULL,"
     "  PRIMARY KEY (store, pack));"
     "CREATE TABLE objstore_claims ("
     "  store TEXT NOT NULL,"
     "  blob TEXT NOT NULL,"
     "  claimed_at TIMESTAMPTZ NOT NULL,"
     "  PRIMARY KEY (store, blob));"
     "CREATE INDEX objstore_claims_by_age ON objstore_claims (store, claimed_at);"},
    {2, "deleted packs",
     "CREATE TABLE objstore_deleted_packs ("
     "  seq BIGSERIAL PRIMARY KEY,"
     "  store TEXT NOT NULL,"
     "  pack BIGINT NOT NULL,"
     "  deleted_at TIMESTAMPTZ NOT NULL);"
     "CREATE INDEX objstore_deleted_packs_by_store ON objstore_deleted_packs (store, seq);"},
    {3, "sweep fence",
     "CREATE TABLE objstore_fence ("
     "  tag TEXT PRIMARY KEY,"
     "  sweeps BIGINT NOT NULL DEFAULT 0,"
     "  commits BIGINT NOT NULL DEFAULT 0);"},
};

// Ids per upsert statement in RecordClaims.
constexpr size_t kClaimsPerStatement = 500;

// Inserts one row (?1 = `store`, the value, clock_timestamp()) per entry of `values` into `into`
// ("table (store, column, time column)"), kClaimsPerStatement rows per statement, each statement
// ending with `suffix` (e.g. an ON CONFLICT clause).
Status InsertStampedRows(sql::Session& s, const std::string& into, const std::string& store,
                         std::vector<sql::Param> values, const std::string& suffix) {
  for (size_t at = 0; at < values.size(); at += kClaimsPerStatement) {
    const size_t n = std::min(kClaimsPerStatement, values.size() - at);
    std::string sql = "INSERT INTO " + into + " VALUES ";
    std::vector<sql::Param> params;
    params.reserve(n + 1);
    params.emplace_back(store);
    for (size_t i = 0; i < n; ++i) {
      params.push_back(std::move(values[at + i]));
      sql +=
          (i ? ", " : "") + std::string("(?1, ?") + std::to_string(i + 2) + ", clock_timestamp())";
    }
    BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(sql + suffix, params)));
  }
  return Status::Ok();
}

// A database lock held for as long as the hold lives, and the commit fence it hands out.
class DbLockHold : public StoreHold {
 public:
  explicit DbLockHold(std::unique_ptr<sql::HeldLock> lock, std::string fence = "")
      : lock_(std::move(lock)), fence_(std::move(fence)) {}
  Result<bool> Held() override { return lock_->Held(); }
  std::string CommitFence() const override { return fence_; }

 private:
  std::unique_ptr<sql::HeldLock> lock_;
  const std::string fence_;
};

// Pack ids are any 64-bit value; BIGINT holds them bit for bit.
int64_t ToBigint(uint64_t v) {
  int64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}
uint64_t FromBigint(int64_t v) {
  uint64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

}  // namespace

Result<std::shared_ptr<PgCatalog>> PgCatalog::Open(std::shared_ptr<S3Client> client,
                                                   std::shared_ptr<sql::PgPool> pool,
                                                   std::function<SteadyTime()> retain_since,
                                                   std::shared_ptr<Clock> clock) {
  BDN_RETURN_IF_ERROR(pool->Migrate("objstore", kMigrations));
  return std::shared_ptr<PgCatalog>(new PgCatalog(std::move(client), pool->Use("pack catalog"),
                                                  std::move(retain_since), std::move(clock)));
}

PgCatalog::PgCatalog(std::shared_ptr<S3Client> client, std::shared_ptr<sql::Database> db,
                     std::function<SteadyTime()> retain_since, std::shared_ptr<Clock> clock)
    : store_(client->uri()),
      tag_(Hex16([&] {
        uint64_t v;
        std::memcpy(&v, Digest::Of(client->uri()).bytes().data(), sizeof v);
        return v;
      }())),
      bucket_(client, retain_since, clock),
      db_(std::move(db)),
      retain_since_(std::move(retain_since)),
      clock_(clock ? std::move(clock) : Clock::Real()) {}

Result<std::unique_ptr<StoreHold>> PgCatalog::BeginGc() {
  BDN_ASSIGN_OR_RETURN(sql::LockAttempt a, db_->TryLock("objstore-gc." + tag_));
  if (!a.held) {
    return Err(ConflictError("chunk store " + store_ + ": another gc is running" +
                             (a.holder.empty() ? "" : " (" + a.holder + ")")));
  }
  return std::unique_ptr<StoreHold>(std::make_unique<DbLockHold>(std::move(a.held)));
}

Result<PgCatalog::Fence> PgCatalog::ReadFence() {
  // One plain read (a round trip, outside any transaction; it never waits for a sweep whose
  // transaction holds the row) on every commit's hold; the row is made once, by the first.
  auto read = [&](sql::Session& s) -> Result<sql::Rows> {
    return s.Query("SELECT sweeps, commits FROM objstore_fence WHERE tag = ?1", {tag_});
  };
  BDN_ASSIGN_OR_RETURN(sql::Rows r, sql::ReadValue<sql::Rows>(
                                        *db_, read, sql::Consistency::kStatement, "read fence"));
  if (r.empty()) {
    BDN_ASSIGN_OR_RETURN(
        r, sql::WriteValue<sql::Rows>(
               *db_,
               [&](sql::Session& s) -> Result<sql::Rows> {
                 BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(
                     "INSERT INTO objstore_fence (tag) VALUES (?1) ON CONFLICT (tag) DO NOTHING",
                     {tag_})));
                 return read(s);
               },
               "make fence"));
  }
  return Fence{r.Int(0, 0), r.Int(0, 1)};
}

Result<std::unique_ptr<StoreHold>> PgCatalog::HoldForCommit() {
  BDN_ASSIGN_OR_RETURN(
      std::unique_ptr<sql::HeldLock> l,
      db_->Lock("objstore-sweep." + tag_, sql::Database::LockMode::kShared, kSweepLockWait));
  // Read after the lock is granted, so before any check the commit makes: a sweep that records
  // deleted packs from here on moves `sweeps` past it. tag_ is hex: no quoting to get wrong.
  BDN_ASSIGN_OR_RETURN(Fence f, ReadFence());
  return std::unique_ptr<StoreHold>(std::make_unique<DbLockHold>(
      std::move(l), "UPDATE objstore_fence SET commits = commits + 1 WHERE tag = '" + tag_ +
                        "' AND sweeps = " + std::to_string(f.sweeps)));
}

Result<std::unique_ptr<StoreHold>> PgCatalog::HoldForSweep() {
  BDN_ASSIGN_OR_RETURN(
      std::unique_ptr<sql::HeldLock> l,
      db_->Lock("objstore-sweep." + tag_, sql::Database::LockMode::kExclusive, kSweepLockWait));
  // Read before the second mark (the sweep's next step): a commit or restore that lands after it
  // moves `commits` past it, and RemovePacks then deletes nothing.
  BDN_ASSIGN_OR_RETURN(Fence f, ReadFence());
  {
    MutexLock m(fence_mu_);
    sweep_fence_ = f;
  }
  return std::unique_ptr<StoreHold>(std::make_unique<DbLockHold>(std::move(l)));
}

Status PgCatalog::PublishDoom(std::span<const uint64_t> packs) {
  return db_->Write(
      [&](sql::Session& s) -> Status {
        BDN_RETURN_IF_ERROR(
            sql::ToStatus(s.Exec("DELETE FROM objstore_doom WHERE store = ?1", {store_})));
        for (uint64_t p : packs) {
          BDN_RETURN_IF_ERROR(
              sql::ToStatus(s.Exec("INSERT INTO objstore_doom (store, pack) VALUES (?1, ?2) "
                                   "ON CONFLICT (store, pack) DO NOTHING",
                                   {store_, ToBigint(p)})));
        }
        return Status::Ok();
      },
      "publish doom");
}

Status PgCatalog::RemovePacks(std::span<const uint64_t> packs) {
  if (packs.empty()) return Status::Ok();
  const int64_t kept_s =
      std::chrono::duration_cast<std::chrono::seconds>(kDeletedPacksKept).count();
  std::optional<Fence> fence;
  {
    MutexLock m(fence_mu_);
    fence = sweep_fence_;
  }
  BDN_RETURN_IF_ERROR(db_->Write(
      [&](sql::Session& s) -> Status {
        // The fence first (its row lock waits for commits under way): no commit or restore
        // since the sweep's second mark (HoldForSweep), and no other sweep. Moving `sweeps` on
        // ends every commit that checked its blobs before these packs were recorded deleted.
        BDN_ASSIGN_OR_RETURN(
            int64_t moved,
            fence ? s.Exec("UPDATE objstore_fence SET sweeps = sweeps + 1 WHERE tag = ?1 AND "
                           "sweeps = ?2 AND commits = ?3",
                           {tag_, fence->sweeps, fence->commits})
                  : s.Exec("UPDATE objstore_fence SET sweeps = sweeps + 1 WHERE tag = ?1", {tag_}));
        if (fence && moved != 1) {
          return UnavailableError(
              "gc: sweep: a commit, a restore or another gc reached the store since the second "
              "mark (the sweep's lock was lost: its database connection ended); nothing more "
              "was deleted");
        }
        // One writer at a time (SELECTs are not blocked): a row's seq is drawn under the lock
        // and committed before the next writer draws one, so rows become visible in seq order
        // and a reader's position (DeletedSince's `next`) never passes a row still uncommitted.
        BDN_RETURN_IF_ERROR(sql::ToStatus(
            s.Exec("LOCK TABLE objstore_deleted_packs IN SHARE ROW EXCLUSIVE MODE", {})));
        std::vector<sql::Param> values;
        values.reserve(packs.size());
        for (uint64_t p : packs) values.emplace_back(std::in_place_type<int64_t>, ToBigint(p));
        BDN_RETURN_IF_ERROR(InsertStampedRows(s, "objstore_deleted_packs (store, pack, deleted_at)",
                                              store_, std::move(values), ""));
        return sql::ToStatus(
            s.Exec("DELETE FROM objstore_deleted_packs WHERE store = ?1 AND "
                   "deleted_at < clock_timestamp() - make_interval(secs => ?2)",
                   {store_, kept_s}));
      },
      "record deleted packs"));
  if (fence) {
    MutexLock m(fence_mu_);
    // The next batch of the same sweep expects its own move.
    if (sweep_fence_ && sweep_fence_->sweeps == fence->sweeps) ++sweep_fence_->sweeps;
  }
  return bucket_.RemovePacks(packs);
}

Result<PackCatalog::Deleted> PgCatalog::DeletedSince(uint64_t after) {
  return sql::ReadValue<Deleted>(
      *db_,
      [&](sql::Session& s) -> Result<Deleted> {
        // The first row kept, the last position of any store, then the rows after `after`, in
        // one statement (one snapshot). Writers draw and commit their positions in turn
        // (RemovePacks' table lock), so every row at or below the last committed position is in
        // the snapshot: advancing to it skips nothing of this store's.
        BDN_ASSIGN_OR_RETURN(
            sql::Rows rows,
            s.Query("SELECT 0, COALESCE(MIN(seq), 0), 0 FROM objstore_deleted_packs "
                    "WHERE store = ?1 "
                    "UNION ALL "
                    "SELECT -1, COALESCE(MAX(seq), 0), 0 FROM objstore_deleted_packs "
                    "UNION ALL "
                    "SELECT seq, pack, age_ms FROM (SELECT seq, pack, "
                    "GREATEST(0, FLOOR(EXTRACT(EPOCH FROM clock_timestamp() - deleted_at) * 1000))"
                    "::bigint AS age_ms FROM objstore_deleted_packs "
                    "WHERE store = ?1 AND seq > ?2 ORDER BY seq) AS later",
                    {store_, ToBigint(after)}));
        Deleted out;
        out.next = after;
        uint64_t first_kept = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
          const int64_t seq = rows.Int(i, 0);
          if (seq == 0) {
            first_kept = static_cast<uint64_t>(rows.Int(i, 1));
            continue;
          }
          if (seq == -1) {
            out.next = std::max(out.next, static_cast<uint64_t>(rows.Int(i, 1)));
            continue;
          }
          out.packs.push_back(FromBigint(rows.Int(i, 1)));
          out.ages.push_back(std::chrono::milliseconds(rows.Int(i, 2)));
          out.next = std::max(out.next, static_cast<uint64_t>(seq));
        }
        // Rows between `after` and the first one kept were pruned before this store saw them.
        out.complete = first_kept == 0 || first_kept <= after + 1;
        return out;
      },
      sql::Consistency::kStatement, "deleted packs");
}

Status PgCatalog::ClearDoom() {
  return db_->Write(
      [&](sql::Session& s) {
        return sql::ToStatus(s.Exec("DELETE FROM objstore_doom WHERE store = ?1", {store_}));
      },
      "clear doom");
}

Result<std::vector<uint64_t>> PgCatalog::Doom() {
  return sql::ReadValue<std::vector<uint64_t>>(
      *db_,
      [&](sql::Session& s) -> Result<std::vector<uint64_t>> {
        BDN_ASSIGN_OR_RETURN(sql::Rows rows,
                             s.Query("SELECT pack FROM objstore_doom WHERE store = ?1", {store_}));
        std::vector<uint64_t> out;
        out.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) out.push_back(FromBigint(rows.Int(i, 0)));
        return out;
      },
      sql::Consistency::kStatement, "doom");
}

Status PgCatalog::RecordClaims(std::span<const Digest> ids) {
  if (ids.empty()) return Status::Ok();
  return db_->Write(
      [&](sql::Session& s) -> Status {
        // Each id once: one upsert statement may not touch a row twice (a caller's list may
        // repeat an id, e.g. a file whose content repeats a chunk).
        std::vector<std::string> hex;
        hex.reserve(ids.size());
        for (const Digest& id : ids) hex.push_back(id.Hex());
        std::sort(hex.begin(), hex.end());
        hex.erase(std::unique(hex.begin(), hex.end()), hex.end());
        std::vector<sql::Param> values;
        values.reserve(hex.size());
        for (std::string& h : hex) values.emplace_back(std::move(h));
        BDN_RETURN_IF_ERROR(InsertStampedRows(
            s, "objstore_claims (store, blob, claimed_at)", store_, std::move(values),
            " ON CONFLICT (store, blob) DO UPDATE SET claimed_at = excluded.claimed_at"));
        return Status::Ok();
      },
      "record claims");
}

std::optional<int64_t> PgCatalog::HorizonMs() const {
  const SteadyTime now = clock_->SteadyNow();
  const SteadyTime since = retain_since_ ? retain_since_() : now - std::chrono::minutes(10);
  if (since == SteadyTime::min()) return std::nullopt;  // unknown: every claim counts
  if (since >= now) return int64_t{0};
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
}

Result<std::vector<Digest>> PgCatalog::LiveClaims() {
  const std::optional<int64_t> horizon = HorizonMs();
  if (horizon) {
    BDN_RETURN_IF_ERROR(db_->Write(
        [&](sql::Session& s) {
          return sql::ToStatus(
              s.Exec("DELETE FROM objstore_claims WHERE store = ?1 AND "
                     "claimed_at < clock_timestamp() - ?2::bigint * interval '1 millisecond'",
                     {store_, *horizon}));
        },
        "prune claims"));
  }
  return sql::ReadValue<std::vector<Digest>>(
      *db_,
      [&](sql::Session& s) -> Result<std::vector<Digest>> {
        BDN_ASSIGN_OR_RETURN(
            sql::Rows rows, s.Query("SELECT blob FROM objstore_claims WHERE store = ?1", {store_}));
        std::vector<Digest> out;
        out.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          BDN_ASSIGN_OR_RETURN(Digest d, Digest::Parse(rows.Text(i, 0)));
          out.push_back(d);
        }
        return out;
      },
      sql::Consistency::kStatement, "live claims");
}

}  // namespace bdn::objstore
