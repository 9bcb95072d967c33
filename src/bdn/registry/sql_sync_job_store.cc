// SqlSyncJobStore: sync jobs and the files they sealed, in the registry's SQLite file or the
// shared PostgreSQL database; leases are the database's locks.
#include <chrono>
#include <utility>

#include "bdn/base/units.h"  // RandomHex
#include "bdn/registry/sync_job_store.h"
#include "bdn/sql/database.h"
#include "bdn/sql/sqlite_database.h"

namespace bdn {
namespace {

using sql::Rows;
using sql::Session;

constexpr const char* kSqliteSchema = R"sql(
CREATE TABLE IF NOT EXISTS sync_jobs(
  id TEXT PRIMARY KEY,
  source_uri TEXT NOT NULL,
  ns TEXT NOT NULL,
  volume TEXT NOT NULL,
  tag TEXT NOT NULL,
  includes TEXT NOT NULL,
  excludes TEXT NOT NULL,
  auth_secret_name TEXT NOT NULL,
  retry_deadline_ms INTEGER NOT NULL,
  state TEXT NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  source_revision TEXT NOT NULL DEFAULT '',
  listing_digest TEXT NOT NULL DEFAULT '',
  objects_total INTEGER NOT NULL DEFAULT 0,
  objects_done INTEGER NOT NULL DEFAULT 0,
  bytes_total INTEGER NOT NULL DEFAULT 0,
  bytes_done INTEGER NOT NULL DEFAULT 0,
  bytes_fetched INTEGER NOT NULL DEFAULT 0,
  version TEXT NOT NULL DEFAULT '',
  unchanged INTEGER NOT NULL DEFAULT 0,
  error_code TEXT NOT NULL DEFAULT '',
  error_message TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL DEFAULT 0,
  finished_ms INTEGER NOT NULL DEFAULT 0,
  runs INTEGER NOT NULL DEFAULT 0,
  endpoint TEXT NOT NULL DEFAULT '',
  region TEXT NOT NULL DEFAULT '',
  secret_use TEXT NOT NULL DEFAULT 'legacy',
  objects_left_out INTEGER NOT NULL DEFAULT 0,
  retrying_ms INTEGER NOT NULL DEFAULT 0,
  retry_error TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS sync_jobs_by_dest ON sync_jobs(ns, volume);
CREATE INDEX IF NOT EXISTS sync_jobs_finished ON sync_jobs(finished_ms)
  WHERE state IN ('READY', 'FAILED', 'CANCELED');
CREATE TABLE IF NOT EXISTS sync_job_files(
  job_id TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  etag TEXT NOT NULL,
  digest TEXT NOT NULL,
  layout INTEGER NOT NULL,
  index_digest TEXT NOT NULL,
  chunks INTEGER NOT NULL,
  PRIMARY KEY(job_id, path));
)sql";

constexpr const char* kColumns =
    "id, source_uri, ns, volume, tag, includes, excludes, auth_secret_name, retry_deadline_ms, "
    "state, cancel_requested, source_revision, listing_digest, objects_total, objects_done, "
    "bytes_total, bytes_done, bytes_fetched, version, unchanged, error_code, error_message, "
    "created_ms, updated_ms, started_ms, finished_ms, runs, endpoint, region, secret_use, "
    "objects_left_out, retrying_ms, retry_error";

// The column secret_use: how a job may use its secret (SecretUse). 'legacy' is the column's
// default: every job recorded before the column, or by a server that does not know it.
std::string_view SecretUseText(SecretUse use) {
  switch (use) {
    case SecretUse::kAny:
      return "any";
    case SecretUse::kJobNamespace:
      return "namespace";
    case SecretUse::kLegacyJob:
      return "legacy";
  }
  return "namespace";
}

// Text that is none of the three (written by a newer server?) reads as the narrowest use.
SecretUse SecretUseOf(const std::string& text) {
  if (text == "any") return SecretUse::kAny;
  if (text == "legacy") return SecretUse::kLegacyJob;
  return SecretUse::kJobNamespace;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Globs never hold a newline (sync::ValidateGlob refuses them), so a list is one per line.
std::string JoinLines(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "\n" : "") + items[i];
  return out;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::optional<Digest> OptionalDigest(const std::string& hex) {
  if (hex.empty()) return std::nullopt;
  auto d = Digest::Parse(hex);
  return d ? std::optional<Digest>(*d) : std::nullopt;
}

Digest StoredDigest(const std::string& hex) {
  auto d = Digest::Parse(hex);
  return d ? *d : Digest();
}

// Row i of a query of kColumns.
SyncJobRecord RowToJob(const Rows& r, size_t i) {
  auto Text = [&](int c) { return r.Text(i, c); };
  auto Int = [&](int c) { return r.Int(i, c); };
  SyncJobRecord j;
  j.id = Text(0);
  j.spec.source_uri = Text(1);
  j.spec.ns = Text(2);
  j.spec.volume = Text(3);
  j.spec.tag = Text(4);
  j.spec.includes = SplitLines(Text(5));
  j.spec.excludes = SplitLines(Text(6));
  j.spec.auth_secret_name = Text(7);
  j.spec.retry_deadline_ms = Int(8);
  auto state = ParseSyncState(Text(9));
  j.state = state ? *state : SyncState::kFailed;
  j.cancel_requested = Int(10) != 0;
  j.source_revision = Text(11);
  j.listing_digest = OptionalDigest(Text(12));
  j.progress.objects_total = static_cast<uint64_t>(Int(13));
  j.progress.objects_done = static_cast<uint64_t>(Int(14));
  j.progress.bytes_total = static_cast<uint64_t>(Int(15));
  j.progress.bytes_done = static_cast<uint64_t>(Int(16));
  j.progress.bytes_fetched = static_cast<uint64_t>(Int(17));
  j.version = OptionalDigest(Text(18));
  j.unchanged = Int(19) != 0;
  j.error_code = Text(20);
  j.error_message = Text(21);
  j.created_unix_ms = Int(22);
  j.updated_unix_ms = Int(23);
  j.started_unix_ms = Int(24);
  j.finished_unix_ms = Int(25);
  j.runs = static_cast<int>(Int(26));
  j.spec.endpoint = Text(27);
  j.spec.region = Text(28);
  j.secret_use = SecretUseOf(Text(29));
  j.progress.objects_left_out = static_cast<uint64_t>(Int(30));
  j.progress.retrying_ms = static_cast<uint64_t>(Int(31));
  j.progress.retry_error = Text(32);
  return j;
}

Status AlreadyTerminal(const SyncJobRecord& j) {
  return FailedPreconditionError("sync job " + j.id + ": already " +
                                 std::string(SyncStateName(j.state)));
}

class LockLease : public SyncJobLease {
 public:
  explicit LockLease(std::unique_ptr<sql::HeldLock> lock) : lock_(std::move(lock)) {}
  Result<bool> Held() override { return lock_->Held(); }

 private:
  std::unique_ptr<sql::HeldLock> lock_;
};

// A job table made before object-store sources lacks their endpoint and region (empty for its
// jobs), and one made before jobs kept how they may use their secret lacks secret_use ('legacy'
// for its jobs: see SecretUse::kLegacyJob), and one made before jobs counted what they left out
// lacks objects_left_out (0), and one made before jobs said their retries lacks retrying_ms and
// retry_error (0, ""): adds what is missing.
Status AddSqliteColumns(Session& s) {
  for (const auto& [column, sql] :
       {std::pair{"endpoint", "ALTER TABLE sync_jobs ADD COLUMN endpoint TEXT NOT NULL DEFAULT ''"},
        std::pair{"region", "ALTER TABLE sync_jobs ADD COLUMN region TEXT NOT NULL DEFAULT ''"},
        std::pair{"secret_use",
                  "ALTER TABLE sync_jobs ADD COLUMN secret_use TEXT NOT NULL DEFAULT 'legacy'"},
        std::pair{"objects_left_out",
                  "ALTER TABLE sync_jobs ADD COLUMN objects_left_out INTEGER NOT NULL DEFAULT 0"},
        std::pair{"retrying_ms",
                  "ALTER TABLE sync_jobs ADD COLUMN retrying_ms INTEGER NOT NULL DEFAULT 0"},
        std::pair{"retry_error",
                  "ALTER TABLE sync_jobs ADD COLUMN retry_error TEXT NOT NULL DEFAULT ''"}}) {
    BDN_ASSIGN_OR_RETURN(bool has, sql::HasColumn(s, "sync_jobs", column));
    if (!has) BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(sql)));
  }
  return Status::Ok();
}

// A job as stored. `for_update`: in a write that decides on what it read, the row locked until
// the transaction ends (PostgreSQL writes run at READ COMMITTED: a plain read would see a job as
// it was before a commit that holds its row and ends it READY, and the write would then land on
// the READY row).
Result<SyncJobRecord> ReadJob(Session& s, const std::string& id, bool for_update = false) {
  BDN_ASSIGN_OR_RETURN(Rows r,
                       s.Query(std::string("SELECT ") + kColumns + " FROM sync_jobs WHERE id=?1" +
                                   std::string(for_update ? s.ForUpdate() : ""),
                               {id}));
  if (r.empty()) return Err(NotFoundError("sync job " + id + ": not found"));
  return RowToJob(r, 0);
}

Result<std::vector<SyncJobRecord>> QueryJobs(Session& s, const std::string& where_order,
                                             const std::vector<sql::Param>& args) {
  BDN_ASSIGN_OR_RETURN(
      Rows r, s.Query(std::string("SELECT ") + kColumns + " FROM sync_jobs " + where_order, args));
  std::vector<SyncJobRecord> out;
  for (size_t i = 0; i < r.size(); ++i) out.push_back(RowToJob(r, i));
  return out;
}

// The end of a job, in the caller's write transaction.
Status WriteFinish(Session& s, const std::string& id, SyncState state,
                   const std::optional<Digest>& version, bool unchanged,
                   const std::string& error_code, const std::string& error_message,
                   int64_t now_ms) {
  BDN_RETURN_IF_ERROR(sql::ToStatus(
      s.Exec("UPDATE sync_jobs SET state=?2, version=?3, unchanged=?4, error_code=?5, "
             "error_message=?6, updated_ms=?7, finished_ms=?7, retrying_ms=0, retry_error='' "
             "WHERE id=?1",
             {id, std::string(SyncStateName(state)), version ? version->Hex() : std::string(),
              int64_t{unchanged}, error_code, error_message, now_ms})));
  // A finished job's file records have served their purpose: its version holds them now.
  return sql::ToStatus(s.Exec("DELETE FROM sync_job_files WHERE job_id=?1", {id}));
}

}  // namespace

Status FinishSyncJobReady(sql::Session& s, const std::string& id, const Digest& version,
                          bool unchanged, int64_t now_ms) {
  return WriteFinish(s, id, SyncState::kReady, version, unchanged, "", "", now_ms);
}

std::string_view SyncStateName(SyncState s) {
  switch (s) {
    case SyncState::kPending:
      return "PENDING";
    case SyncState::kSyncing:
      return "SYNCING";
    case SyncState::kReady:
      return "READY";
    case SyncState::kFailed:
      return "FAILED";
    case SyncState::kCanceled:
      return "CANCELED";
  }
  return "FAILED";
}

Result<SyncState> ParseSyncState(std::string_view name) {
  for (SyncState s : {SyncState::kPending, SyncState::kSyncing, SyncState::kReady,
                      SyncState::kFailed, SyncState::kCanceled}) {
    if (SyncStateName(s) == name) return s;
  }
  return Err(InvalidArgumentError("sync state \"" + std::string(name) + "\": unknown"));
}

SqlSyncJobStore::SqlSyncJobStore(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
SqlSyncJobStore::~SqlSyncJobStore() = default;

Result<std::unique_ptr<SqliteSyncJobStore>> SqliteSyncJobStore::Open(
    const std::filesystem::path& db_path) {
  sql::SqliteOptions o;
  o.what = "sync job store";
  o.schema = kSqliteSchema;
  o.upgrade = AddSqliteColumns;
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<sql::Database> db, sql::OpenSqlite(db_path, std::move(o)));
  return std::unique_ptr<SqliteSyncJobStore>(new SqliteSyncJobStore(std::move(db)));
}

Result<SyncJobRecord> SyncJobStore::Create(const SyncJobSpec& spec) {
  BDN_ASSIGN_OR_RETURN(CreatedSyncJob created, Create(spec, SyncJobCreate{}));
  return std::move(created.job);
}

Result<CreatedSyncJob> SqlSyncJobStore::Create(const SyncJobSpec& spec, const SyncJobCreate& how) {
  BDN_ASSIGN_OR_RETURN(std::string hex, RandomHex(8));
  const std::string id = "sync_" + hex;
  const int64_t now = NowMs();
  return sql::WriteValue<CreatedSyncJob>(*db_, [&](Session& s) -> Result<CreatedSyncJob> {
    // Starts into one namespace take turns (SQLite: every write does), so that each counts the
    // jobs the ones before it made.
    BDN_RETURN_IF_ERROR(s.LockForTransaction("sync-jobs-" + spec.ns));
    if (how.resume) {
      BDN_ASSIGN_OR_RETURN(auto unfinished,
                           QueryJobs(s,
                                     "WHERE ns=?1 AND volume=?2 AND state IN "
                                     "('PENDING','SYNCING') ORDER BY created_ms DESC, rowid DESC",
                                     {spec.ns, spec.volume}));
      for (SyncJobRecord& j : unfinished) {
        if (j.spec != spec) continue;
        if (how.secret_use == SecretUse::kAny && j.secret_use != SecretUse::kAny) {
          BDN_RETURN_IF_ERROR(
              sql::ToStatus(s.Exec("UPDATE sync_jobs SET secret_use=?2, updated_ms=?3 WHERE id=?1",
                                   {j.id, std::string(SecretUseText(SecretUse::kAny)), now})));
          BDN_ASSIGN_OR_RETURN(j, ReadJob(s, j.id));
        }
        return CreatedSyncJob{std::move(j), false};
      }
    }
    if (how.max_unfinished > 0) {
      // Rows are kept after a job ends; only the unfinished ones are bounded, as each takes a
      // place in the queue and in every poll of it.
      BDN_ASSIGN_OR_RETURN(Rows r, s.Query("SELECT COUNT(*) FROM sync_jobs WHERE ns=?1 AND "
                                           "state IN ('PENDING','SYNCING')",
                                           {spec.ns}));
      const int64_t unfinished = r.empty() ? 0 : r.Int(0, 0);
      if (unfinished >= how.max_unfinished) {
        return Err(ConflictError("namespace \"" + spec.ns + "\": " + std::to_string(unfinished) +
                                 " sync jobs unfinished; wait for some or cancel them"));
      }
    }
    BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(
        "INSERT INTO sync_jobs(id, source_uri, ns, volume, tag, includes, excludes, "
        "auth_secret_name, retry_deadline_ms, state, created_ms, updated_ms, endpoint, region, "
        "secret_use) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,'PENDING',?10,?10,?11,?12,?13)",
        {id, spec.source_uri, spec.ns, spec.volume, spec.tag, JoinLines(spec.includes),
         JoinLines(spec.excludes), spec.auth_secret_name, spec.retry_deadline_ms, now,
         spec.endpoint, spec.region, std::string(SecretUseText(how.secret_use))})));
    BDN_ASSIGN_OR_RETURN(SyncJobRecord job, ReadJob(s, id));
    return CreatedSyncJob{std::move(job), true};
  });
}

Result<SyncJobRecord> SqlSyncJobStore::Get(const std::string& id) {
  return sql::ReadValue<SyncJobRecord>(
      *db_, [&](Session& s) { return ReadJob(s, id); }, sql::Consistency::kStatement);
}

Result<std::vector<SyncJobRecord>> SqlSyncJobStore::List(const std::string& ns,
                                                         const std::string& volume, size_t limit) {
  using Jobs = std::vector<SyncJobRecord>;
  const std::string order = " ORDER BY created_ms DESC, rowid DESC LIMIT " + std::to_string(limit);
  return sql::ReadValue<Jobs>(
      *db_,
      [&](Session& s) -> Result<Jobs> {
        if (ns.empty()) return QueryJobs(s, order, {});
        if (volume.empty()) return QueryJobs(s, "WHERE ns=?1" + order, {ns});
        return QueryJobs(s, "WHERE ns=?1 AND volume=?2" + order, {ns, volume});
      },
      sql::Consistency::kStatement);
}

Result<std::vector<SyncJobRecord>> SqlSyncJobStore::ListUnfinished() {
  return sql::ReadValue<std::vector<SyncJobRecord>>(
      *db_,
      [](Session& s) {
        return QueryJobs(s, "WHERE state IN ('PENDING','SYNCING') ORDER BY created_ms, rowid", {});
      },
      sql::Consistency::kStatement);
}

Result<int64_t> SqlSyncJobStore::DeleteFinished(int64_t finished_before_unix_ms) {
  // In batches, so that no one write transaction holds the database (SQLite: every writer) for
  // long behind a large backlog. A finished job's files went with Finish; any left are deleted
  // with it.
  constexpr int64_t kBatch = 500;
  int64_t deleted = 0;
  while (true) {
    BDN_ASSIGN_OR_RETURN(
        int64_t n, sql::WriteValue<int64_t>(*db_, [&](Session& s) -> Result<int64_t> {
          BDN_ASSIGN_OR_RETURN(
              Rows r, s.Query("SELECT id FROM sync_jobs WHERE state IN "
                              "('READY','FAILED','CANCELED') AND finished_ms < ?1 LIMIT ?2",
                              {finished_before_unix_ms, kBatch}));
          if (r.empty()) return int64_t{0};
          std::vector<sql::Param> ids;
          std::string list;
          for (size_t i = 0; i < r.size(); ++i) {
            ids.emplace_back(std::in_place_type<std::string>, r.Text(i, 0));
            list += (i ? ",?" : "?") + std::to_string(i + 1);
          }
          BDN_RETURN_IF_ERROR(sql::ToStatus(
              s.Exec("DELETE FROM sync_job_files WHERE job_id IN (" + list + ")", ids)));
          return s.Exec("DELETE FROM sync_jobs WHERE id IN (" + list +
                            ") AND state IN ('READY','FAILED','CANCELED')",
                        ids);
        }));
    deleted += n;
    if (n < kBatch) return deleted;
  }
}

Result<SyncJobRecord> SqlSyncJobStore::StartRun(const std::string& id) {
  return sql::WriteValue<SyncJobRecord>(*db_, [&](Session& s) -> Result<SyncJobRecord> {
    BDN_ASSIGN_OR_RETURN(SyncJobRecord j, ReadJob(s, id, /*for_update=*/true));
    if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
    BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(
        "UPDATE sync_jobs SET state='SYNCING', runs=runs+1, updated_ms=?2, retrying_ms=0, "
        "retry_error='', started_ms=CASE WHEN started_ms=0 THEN ?2 ELSE started_ms END WHERE id=?1",
        {id, NowMs()})));
    return ReadJob(s, id);
  });
}

Status SqlSyncJobStore::UncountRun(const std::string& id) {
  return db_->Write([&](Session& s) {
    return sql::ToStatus(
        s.Exec("UPDATE sync_jobs SET runs=runs-1, updated_ms=?2 WHERE id=?1 AND runs>0 AND "
               "state='SYNCING'",
               {id, NowMs()}));
  });
}

Status SqlSyncJobStore::SetSource(const std::string& id, const std::string& revision,
                                  const Digest& listing_digest, uint64_t objects_total,
                                  uint64_t bytes_total, uint64_t objects_left_out) {
  return db_->Write([&](Session& s) {
    return sql::ToStatus(s.Exec(
        "UPDATE sync_jobs SET source_revision=?2, listing_digest=?3, objects_total=?4, "
        "bytes_total=?5, updated_ms=?6, objects_left_out=?7 WHERE id=?1",
        {id, revision, listing_digest.Hex(), static_cast<int64_t>(objects_total),
         static_cast<int64_t>(bytes_total), NowMs(), static_cast<int64_t>(objects_left_out)}));
  });
}

Status SqlSyncJobStore::SetProgress(const std::string& id, const SyncProgress& p) {
  return db_->Write([&](Session& s) {
    return sql::ToStatus(s.Exec(
        "UPDATE sync_jobs SET objects_total=?2, objects_done=?3, bytes_total=?4, bytes_done=?5, "
        "bytes_fetched=?6, updated_ms=?7, retrying_ms=?8, retry_error=?9 WHERE id=?1",
        {id, static_cast<int64_t>(p.objects_total), static_cast<int64_t>(p.objects_done),
         static_cast<int64_t>(p.bytes_total), static_cast<int64_t>(p.bytes_done),
         static_cast<int64_t>(p.bytes_fetched), NowMs(), static_cast<int64_t>(p.retrying_ms),
         p.retry_error}));
  });
}

Result<SyncJobRecord> SqlSyncJobStore::Finish(const std::string& id, SyncState state,
                                              std::optional<Digest> version, bool unchanged,
                                              const std::string& error_code,
                                              const std::string& error_message) {
  if (!IsTerminal(state)) {
    return Err(InternalError("sync job " + id + ": Finish needs a terminal state"));
  }
  return sql::WriteValue<SyncJobRecord>(*db_, [&](Session& s) -> Result<SyncJobRecord> {
    BDN_ASSIGN_OR_RETURN(SyncJobRecord j, ReadJob(s, id, /*for_update=*/true));
    if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
    BDN_RETURN_IF_ERROR(
        WriteFinish(s, id, state, version, unchanged, error_code, error_message, NowMs()));
    return ReadJob(s, id);
  });
}

Result<SyncJobRecord> SqlSyncJobStore::RequestCancel(const std::string& id) {
  return sql::WriteValue<SyncJobRecord>(*db_, [&](Session& s) -> Result<SyncJobRecord> {
    BDN_ASSIGN_OR_RETURN(SyncJobRecord j, ReadJob(s, id, /*for_update=*/true));
    if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
    BDN_RETURN_IF_ERROR(sql::ToStatus(s.Exec(
        "UPDATE sync_jobs SET cancel_requested=1, updated_ms=?2 WHERE id=?1", {id, NowMs()})));
    return ReadJob(s, id);
  });
}

Status SqlSyncJobStore::RecordFile(const std::string& id, const SyncFileRecord& f) {
  return db_->Write([&](Session& s) {
    return sql::ToStatus(
        s.Exec("INSERT INTO sync_job_files(job_id, path, size, etag, digest, layout, index_digest, "
               "chunks) VALUES(?1,?2,?3,?4,?5,?6,?7,?8) ON CONFLICT(job_id, path) DO UPDATE SET "
               "size=excluded.size, etag=excluded.etag, digest=excluded.digest, "
               "layout=excluded.layout, index_digest=excluded.index_digest, chunks=excluded.chunks",
               {id, f.path, static_cast<int64_t>(f.size_bytes), f.etag, f.digest.Hex(),
                int64_t{f.layout}, f.index.Hex(), static_cast<int64_t>(f.chunks)}));
  });
}

Result<std::vector<SyncFileRecord>> SqlSyncJobStore::Files(const std::string& id) {
  using Files = std::vector<SyncFileRecord>;
  return sql::ReadValue<Files>(
      *db_,
      [&](Session& s) -> Result<Files> {
        BDN_ASSIGN_OR_RETURN(
            Rows r, s.Query("SELECT path, size, etag, digest, layout, index_digest, chunks FROM "
                            "sync_job_files WHERE job_id=?1 ORDER BY path",
                            {id}));
        Files out;
        for (size_t i = 0; i < r.size(); ++i) {
          SyncFileRecord f;
          f.path = r.Text(i, 0);
          f.size_bytes = static_cast<uint64_t>(r.Int(i, 1));
          f.etag = r.Text(i, 2);
          f.digest = StoredDigest(r.Text(i, 3));
          f.layout = static_cast<int>(r.Int(i, 4));
          f.index = StoredDigest(r.Text(i, 5));
          f.chunks = static_cast<uint64_t>(r.Int(i, 6));
          out.push_back(std::move(f));
        }
        return out;
      },
      sql::Consistency::kStatement);
}

Result<std::unique_ptr<SyncJobLease>> SqlSyncJobStore::TryLease(const std::string& id) {
  BDN_ASSIGN_OR_RETURN(sql::LockAttempt lock, db_->TryLock("sync-" + id));
  if (!lock.held) return std::unique_ptr<SyncJobLease>();
  return std::unique_ptr<SyncJobLease>(new LockLease(std::move(lock.held)));
}

}  // namespace bdn
