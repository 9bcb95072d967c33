// SqliteSyncJobStore: sync jobs and the files they sealed, in the registry's SQLite file.
#include <sqlite3.h>

#include <chrono>
#include <mutex>

#include "bdn/base/clock.h"
#include "bdn/base/units.h"  // RandomHex
#include "bdn/registry/sqlite_util.h"
#include "bdn/registry/sync_job_store.h"

namespace bdn {
namespace {

using internal::LockFile;
using internal::Stmt;

constexpr const char* kSchema = R"sql(
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
  region TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS sync_jobs_by_dest ON sync_jobs(ns, volume);
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
    "created_ms, updated_ms, started_ms, finished_ms, runs, endpoint, region";

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

SyncJobRecord RowToJob(Stmt& s) {
  SyncJobRecord j;
  j.id = s.Text(0);
  j.spec.source_uri = s.Text(1);
  j.spec.ns = s.Text(2);
  j.spec.volume = s.Text(3);
  j.spec.tag = s.Text(4);
  j.spec.includes = SplitLines(s.Text(5));
  j.spec.excludes = SplitLines(s.Text(6));
  j.spec.auth_secret_name = s.Text(7);
  j.spec.retry_deadline_ms = s.Int(8);
  auto state = ParseSyncState(s.Text(9));
  j.state = state ? *state : SyncState::kFailed;
  j.cancel_requested = s.Int(10) != 0;
  j.source_revision = s.Text(11);
  j.listing_digest = OptionalDigest(s.Text(12));
  j.progress.objects_total = static_cast<uint64_t>(s.Int(13));
  j.progress.objects_done = static_cast<uint64_t>(s.Int(14));
  j.progress.bytes_total = static_cast<uint64_t>(s.Int(15));
  j.progress.bytes_done = static_cast<uint64_t>(s.Int(16));
  j.progress.bytes_fetched = static_cast<uint64_t>(s.Int(17));
  j.version = OptionalDigest(s.Text(18));
  j.unchanged = s.Int(19) != 0;
  j.error_code = s.Text(20);
  j.error_message = s.Text(21);
  j.created_unix_ms = s.Int(22);
  j.updated_unix_ms = s.Int(23);
  j.started_unix_ms = s.Int(24);
  j.finished_unix_ms = s.Int(25);
  j.runs = static_cast<int>(s.Int(26));
  j.spec.endpoint = s.Text(27);
  j.spec.region = s.Text(28);
  return j;
}

Status AlreadyTerminal(const SyncJobRecord& j) {
  return FailedPreconditionError("sync job " + j.id + ": already " +
                                 std::string(SyncStateName(j.state)));
}

class FlockLease : public SyncJobLease {
 public:
  explicit FlockLease(LockFile lock) : lock_(std::move(lock)) {}

 private:
  LockFile lock_;
};

}  // namespace

std::string_view SyncStateName(SyncState s) {
  switch (s) {
    case SyncState::kPending: return "PENDING";
    case SyncState::kSyncing: return "SYNCING";
    case SyncState::kReady: return "READY";
    case SyncState::kFailed: return "FAILED";
    case SyncState::kCanceled: return "CANCELED";
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

struct SqliteSyncJobStore::Impl {
  internal::DbHandle db;
  std::filesystem::path path;
  std::mutex mu;

  // A job table made before object-store sources lacks their endpoint and region: adds them
  // (empty for its jobs).
  Status AddColumnsOfEndpoints() {
    BDN_RETURN_IF_ERROR(internal::AddColumnIfMissing(
        db.get(), "sync_jobs", "endpoint", "endpoint TEXT NOT NULL DEFAULT ''", "sync job store"));
    return internal::AddColumnIfMissing(db.get(), "sync_jobs", "region",
                                        "region TEXT NOT NULL DEFAULT ''", "sync job store");
  }

  // Requires mu.
  Result<SyncJobRecord> ReadLocked(const std::string& id) {
    Stmt s(db, (std::string("SELECT ") + kColumns + " FROM sync_jobs WHERE id=?1").c_str());
    s.Bind(1, id);
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Err(NotFoundError("sync job " + id + ": not found"));
    return RowToJob(s);
  }

  // Requires mu.
  Result<std::vector<SyncJobRecord>> Query(const std::string& where_order,
                                           const std::vector<std::string>& args) {
    Stmt s(db, (std::string("SELECT ") + kColumns + " FROM sync_jobs " + where_order).c_str());
    for (size_t i = 0; i < args.size(); ++i) s.Bind(static_cast<int>(i + 1), args[i]);
    std::vector<SyncJobRecord> out;
    while (true) {
      BDN_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(RowToJob(s));
    }
    return out;
  }
};

SqliteSyncJobStore::SqliteSyncJobStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteSyncJobStore::~SqliteSyncJobStore() = default;

Result<std::unique_ptr<SqliteSyncJobStore>> SqliteSyncJobStore::Open(
    const std::filesystem::path& db_path) {
  auto impl = std::make_unique<Impl>();
  impl->path = db_path;
  BDN_ASSIGN_OR_RETURN(impl->db, internal::OpenDatabase(db_path, "sync job store", kSchema));
  BDN_RETURN_IF_ERROR(impl->AddColumnsOfEndpoints());
  return std::unique_ptr<SqliteSyncJobStore>(new SqliteSyncJobStore(std::move(impl)));
}

Result<SyncJobRecord> SqliteSyncJobStore::Create(const SyncJobSpec& spec) {
  BDN_ASSIGN_OR_RETURN(std::string hex, RandomHex(8));
  const std::string id = "sync_" + hex;
  const int64_t now = WallNowMs(*Clock::Real());
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "INSERT INTO sync_jobs(id, source_uri, ns, volume, tag, includes, excludes, "
         "auth_secret_name, retry_deadline_ms, state, created_ms, updated_ms, endpoint, region) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,'PENDING',?10,?10,?11,?12)");
  s.Bind(1, id)
      .Bind(2, spec.source_uri)
      .Bind(3, spec.ns)
      .Bind(4, spec.volume)
      .Bind(5, spec.tag)
      .Bind(6, JoinLines(spec.includes))
      .Bind(7, JoinLines(spec.excludes))
      .Bind(8, spec.auth_secret_name)
      .Bind(9, spec.retry_deadline_ms)
      .Bind(10, now)
      .Bind(11, spec.endpoint)
      .Bind(12, spec.region);
  BDN_RETURN_IF_ERROR(s.Run());
  return impl_->ReadLocked(id);
}

Result<SyncJobRecord> SqliteSyncJobStore::Get(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  return impl_->ReadLocked(id);
}

Result<std::vector<SyncJobRecord>> SqliteSyncJobStore::List(const std::string& ns,
                                                            const std::string& volume) {
  std::lock_guard lock(impl_->mu);
  if (ns.empty()) return impl_->Query("ORDER BY created_ms DESC, rowid DESC", {});
  if (volume.empty()) return impl_->Query("WHERE ns=?1 ORDER BY created_ms DESC, rowid DESC", {ns});
  return impl_->Query("WHERE ns=?1 AND volume=?2 ORDER BY created_ms DESC, rowid DESC",
                      {ns, volume});
}

Result<std::optional<SyncJobRecord>> SqliteSyncJobStore::FindUnfinished(const SyncJobSpec& spec) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(
      auto jobs, impl_->Query("WHERE ns=?1 AND volume=?2 AND state IN ('PENDING','SYNCING') "
                              "ORDER BY created_ms DESC, rowid DESC",
                              {spec.ns, spec.volume}));
  for (auto& j : jobs) {
    if (j.spec == spec) return std::optional<SyncJobRecord>(std::move(j));
  }
  return std::optional<SyncJobRecord>();
}

Result<std::vector<SyncJobRecord>> SqliteSyncJobStore::ListUnfinished() {
  std::lock_guard lock(impl_->mu);
  return impl_->Query("WHERE state IN ('PENDING','SYNCING') ORDER BY created_ms, rowid", {});
}

Result<SyncJobRecord> SqliteSyncJobStore::StartRun(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(SyncJobRecord j, impl_->ReadLocked(id));
  if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
  const int64_t now = WallNowMs(*Clock::Real());
  Stmt s(impl_->db,
         "UPDATE sync_jobs SET state='SYNCING', runs=runs+1, updated_ms=?2, "
         "started_ms=CASE WHEN started_ms=0 THEN ?2 ELSE started_ms END WHERE id=?1");
  s.Bind(1, id).Bind(2, now);
  BDN_RETURN_IF_ERROR(s.Run());
  return impl_->ReadLocked(id);
}

Status SqliteSyncJobStore::SetSource(const std::string& id, const std::string& revision,
                                     const Digest& listing_digest, uint64_t objects_total,
                                     uint64_t bytes_total) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "UPDATE sync_jobs SET source_revision=?2, listing_digest=?3, objects_total=?4, "
         "bytes_total=?5, updated_ms=?6 WHERE id=?1");
  s.Bind(1, id)
      .Bind(2, revision)
      .Bind(3, listing_digest.Hex())
      .Bind(4, static_cast<int64_t>(objects_total))
      .Bind(5, static_cast<int64_t>(bytes_total))
      .Bind(6, WallNowMs(*Clock::Real()));
  return s.Run();
}

Status SqliteSyncJobStore::SetProgress(const std::string& id, const SyncProgress& p) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "UPDATE sync_jobs SET objects_total=?2, objects_done=?3, bytes_total=?4, bytes_done=?5, "
         "bytes_fetched=?6, updated_ms=?7 WHERE id=?1");
  s.Bind(1, id)
      .Bind(2, static_cast<int64_t>(p.objects_total))
      .Bind(3, static_cast<int64_t>(p.objects_done))
      .Bind(4, static_cast<int64_t>(p.bytes_total))
      .Bind(5, static_cast<int64_t>(p.bytes_done))
      .Bind(6, static_cast<int64_t>(p.bytes_fetched))
      .Bind(7, WallNowMs(*Clock::Real()));
  return s.Run();
}

Result<SyncJobRecord> SqliteSyncJobStore::Finish(const std::string& id, SyncState state,
                                                 std::optional<Digest> version, bool unchanged,
                                                 const std::string& error_code,
                                                 const std::string& error_message) {
  if (!IsTerminal(state)) {
    return Err(InternalError("sync job " + id + ": Finish needs a terminal state"));
  }
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(SyncJobRecord j, impl_->ReadLocked(id));
  if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
  const int64_t now = WallNowMs(*Clock::Real());
  Stmt s(impl_->db,
         "UPDATE sync_jobs SET state=?2, version=?3, unchanged=?4, error_code=?5, "
         "error_message=?6, updated_ms=?7, finished_ms=?7 WHERE id=?1");
  s.Bind(1, id)
      .Bind(2, std::string(SyncStateName(state)))
      .Bind(3, version ? version->Hex() : std::string())
      .Bind(4, int64_t{unchanged})
      .Bind(5, error_code)
      .Bind(6, error_message)
      .Bind(7, now);
  BDN_RETURN_IF_ERROR(s.Run());
  // A finished job's file records have served their purpose: its version holds them now.
  Stmt drop(impl_->db, "DELETE FROM sync_job_files WHERE job_id=?1");
  drop.Bind(1, id);
  BDN_RETURN_IF_ERROR(drop.Run());
  return impl_->ReadLocked(id);
}

Result<SyncJobRecord> SqliteSyncJobStore::RequestCancel(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(SyncJobRecord j, impl_->ReadLocked(id));
  if (IsTerminal(j.state)) return Err(AlreadyTerminal(j));
  Stmt s(impl_->db, "UPDATE sync_jobs SET cancel_requested=1, updated_ms=?2 WHERE id=?1");
  s.Bind(1, id).Bind(2, WallNowMs(*Clock::Real()));
  BDN_RETURN_IF_ERROR(s.Run());
  return impl_->ReadLocked(id);
}

Status SqliteSyncJobStore::RecordFile(const std::string& id, const SyncFileRecord& f) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "INSERT OR REPLACE INTO sync_job_files(job_id, path, size, etag, digest, layout, "
         "index_digest, chunks) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
  s.Bind(1, id)
      .Bind(2, f.path)
      .Bind(3, static_cast<int64_t>(f.size_bytes))
      .Bind(4, f.etag)
      .Bind(5, f.digest.Hex())
      .Bind(6, int64_t{f.layout})
      .Bind(7, f.index.Hex())
      .Bind(8, static_cast<int64_t>(f.chunks));
  return s.Run();
}

Result<std::vector<SyncFileRecord>> SqliteSyncJobStore::Files(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "SELECT path, size, etag, digest, layout, index_digest, chunks FROM sync_job_files "
         "WHERE job_id=?1 ORDER BY path");
  s.Bind(1, id);
  std::vector<SyncFileRecord> out;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    SyncFileRecord f;
    f.path = s.Text(0);
    f.size_bytes = static_cast<uint64_t>(s.Int(1));
    f.etag = s.Text(2);
    f.digest = StoredDigest(s.Text(3));
    f.layout = static_cast<int>(s.Int(4));
    f.index = StoredDigest(s.Text(5));
    f.chunks = static_cast<uint64_t>(s.Int(6));
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::unique_ptr<SyncJobLease>> SqliteSyncJobStore::TryLease(const std::string& id) {
  BDN_ASSIGN_OR_RETURN(LockFile lock,
                       LockFile::TryLock(impl_->path.parent_path() / "locks" / ("sync-" + id + ".lock"),
                                         "sync job lease"));
  if (!lock.held()) return std::unique_ptr<SyncJobLease>();
  return std::unique_ptr<SyncJobLease>(new FlockLease(std::move(lock)));
}

}  // namespace bdn
