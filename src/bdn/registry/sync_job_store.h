// SyncJobStore: the durable state of sync jobs (docs/spec.md §6): what each job mirrors where, its
// state PENDING → SYNCING → READY | FAILED | CANCELED, its progress, and the files it has sealed so
// far, so that a job interrupted by a crash resumes without fetching them again. A sibling of
// Registry and KeyStore: the SQLite implementation shares the registry's database file, and a
// PostgreSQL one can take its place behind this interface.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/registry/secret_store.h"  // SecretUse

namespace bdn {
namespace sql {
class Database;
class Session;
}  // namespace sql

enum class SyncState { kPending, kSyncing, kReady, kFailed, kCanceled };

// "PENDING", "SYNCING", "READY", "FAILED", "CANCELED".
std::string_view SyncStateName(SyncState s);
// The inverse of SyncStateName. Errors: InvalidArgument "sync state \"x\": unknown".
Result<SyncState> ParseSyncState(std::string_view name);
// READY, FAILED and CANCELED: a job in one of them never changes again.
inline bool IsTerminal(SyncState s) {
  return s == SyncState::kReady || s == SyncState::kFailed || s == SyncState::kCanceled;
}

// What a job mirrors where; fixed when the job is created.
struct SyncJobSpec {
  std::string source_uri;  // as given (hf://org/repo@rev, file:///abs, https://host/path)
  std::string ns;
  std::string volume;
  std::string tag;                    // applied with the commit; "" = none (head always moves)
  std::vector<std::string> includes;  // globs (sync/glob.h); none = everything
  std::vector<std::string> excludes;
  std::string auth_secret_name;  // "" = anonymous
  // How long transient source errors are retried before the job fails (milliseconds).
  int64_t retry_deadline_ms = 300'000;
  // The object store's URL instead of the provider's (`sync start --endpoint`); "" = the
  // provider's. The region requests are signed for (`--region`); "" = the default.
  std::string endpoint;
  std::string region;

  bool operator==(const SyncJobSpec&) const = default;
};

struct SyncProgress {
  uint64_t objects_total = 0;  // objects selected for the version
  uint64_t objects_done = 0;   // sealed (fetched now or re-used from an earlier run)
  uint64_t bytes_total = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_fetched = 0;  // object bytes read from the source by this job, all runs
  // Entries the job's selection matched that the version does not hold (file://: symlinks and
  // special files; sync/source.h SourceListing::left_out).
  uint64_t objects_left_out = 0;
  // While some source call of the run waits to be tried again (sync/source.h RetryWatch): for how
  // long it had been, when the progress was written, and the last transient error (shown as
  // errors are: no credential); 0 and "" otherwise (from an attacking helper: a job run by an
  // origin said nothing of why it did not move while its source was retried).
  uint64_t retrying_ms = 0;
  std::string retry_error;
};

struct SyncJobRecord {
  std::string id;  // "sync_" + 16 lower-case hex
  SyncJobSpec spec;
  SyncState state = SyncState::kPending;
  bool cancel_requested = false;
  // Pinned at the first run: the source revision (an HF commit; "" for sources without one) and
  // the BLAKE3 of the selected listing (sync/listing.h); a resumed run must see the same.
  std::string source_revision;
  std::optional<Digest> listing_digest;
  SyncProgress progress;
  std::optional<Digest> version;  // READY: the sealed version
  bool unchanged = false;  // READY by the metadata check: the version existed, nothing fetched
  std::string error_code;  // FAILED/CANCELED: a stable code (docs/sync.md, "Error codes")
  std::string error_message;
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  int64_t started_unix_ms = 0;   // 0 until the first run starts
  int64_t finished_unix_ms = 0;  // 0 until terminal
  int runs = 0;                  // how many times a runner has started it
  // Which secrets the job may name (the rights of the key that started it, widened to kAny when
  // an admin key for "*" resumes it: SyncJobCreate::resume): checked again at every run, so a
  // secret removed and set again for other namespaces is not used by it.
  SecretUse secret_use = SecretUse::kJobNamespace;
};

// How SyncJobStore::Create records a job.
struct SyncJobCreate {
  // Which secrets the job may name: the rights of the key that starts it.
  SecretUse secret_use = SecretUse::kJobNamespace;
  // Resume instead of creating: when a job with exactly this spec is unfinished (the newest, if
  // several), it is returned (created = false) and none is made, so that the same `sync start`
  // again resumes it. Its secret use becomes kAny when `secret_use` is kAny (an admin key for
  // "*" may start that very job with any secret anyway); any other start leaves it as it is, so
  // a namespace's key never widens an admin's job nor narrows it.
  bool resume = false;
  // Above 0: a new job into a namespace that has this many jobs PENDING or SYNCING is refused.
  // Counted and created in one write transaction (PostgreSQL: under a transaction lock on the
  // namespace), so concurrent Creates, in threads or in servers sharing the database, never pass
  // it together.
  int64_t max_unfinished = 0;
};

struct CreatedSyncJob {
  SyncJobRecord job;
  bool created = false;  // false: an unfinished job with the same spec was resumed
};

// The most jobs SyncJobStore::List returns by default (GET /v1/sync/jobs, `sync list`).
inline constexpr size_t kMaxListedSyncJobs = 1000;

// A file a job has sealed (its chunks and chunk index are in the store), keyed by the source
// object's path, size and etag: a resumed run re-uses it only if all three still match.
struct SyncFileRecord {
  std::string path;
  uint64_t size_bytes = 0;
  std::string etag;
  Digest digest;
  int layout = 0;  // FileLayout's value
  Digest index;    // kIndexed only
  uint64_t chunks = 0;
};

// Held while one runner works on a job; released on destruction or when its holder dies.
class SyncJobLease {
 public:
  virtual ~SyncJobLease() = default;
  // Whether the lease is still this runner's: false once it was lost behind the runner's back
  // (sql::HeldLock::Held: a PostgreSQL lock whose connection ended), when another runner may
  // take the job. Errors: Unavailable when that cannot be told now. One caller at a time.
  virtual Result<bool> Held() { return true; }
};

// Implementations are thread-safe and make each call atomic.
class SyncJobStore {
 public:
  virtual ~SyncJobStore() = default;

  // Records a new PENDING job with a fresh id, or resumes one (see SyncJobCreate), in one write
  // transaction. Errors: Conflict "namespace \"a\": 100 sync jobs unfinished; wait for some or
  // cancel them" past how.max_unfinished; FailedPrecondition on a full disk; PermissionDenied for
  // a read-only store.
  virtual Result<CreatedSyncJob> Create(const SyncJobSpec& spec, const SyncJobCreate& how) = 0;
  // Records a new PENDING job with SyncJobCreate's defaults (never resumed, no bound).
  Result<SyncJobRecord> Create(const SyncJobSpec& spec);
  // Errors: NotFound "sync job <id>: not found".
  virtual Result<SyncJobRecord> Get(const std::string& id) = 0;
  // At most `limit` jobs, newest first; only those into ns/volume when `ns` is given (and
  // `volume` too), filtered by the database.
  virtual Result<std::vector<SyncJobRecord>> List(const std::string& ns = "",
                                                  const std::string& volume = "",
                                                  size_t limit = kMaxListedSyncJobs) = 0;
  // Every job that is not terminal, oldest first (a restarted server resumes them).
  virtual Result<std::vector<SyncJobRecord>> ListUnfinished() = 0;
  // Deletes the terminal jobs (READY, FAILED, CANCELED) that finished before
  // `finished_before_unix_ms`, and any files recorded for them; never an unfinished job. Returns
  // how many were deleted. Errors: the database's.
  virtual Result<int64_t> DeleteFinished(int64_t finished_before_unix_ms) = 0;

  // PENDING or SYNCING → SYNCING, counting a run and setting started_unix_ms the first time.
  // Errors: NotFound; FailedPrecondition "sync job <id>: already <STATE>" for a terminal job.
  virtual Result<SyncJobRecord> StartRun(const std::string& id) = 0;
  // Takes back the run StartRun counted, for a run that a clean server stop ended (the job stays
  // SYNCING, to be resumed): only runs that ended with their process count toward
  // RunnerDeps::max_unfinished_runs. Does nothing for a terminal job or one with no run counted.
  // Errors: the database's.
  virtual Status UncountRun(const std::string& id) = 0;
  // Pins the source revision and listing digest, and sets the totals of the progress (and
  // objects_left_out).
  virtual Status SetSource(const std::string& id, const std::string& revision,
                           const Digest& listing_digest, uint64_t objects_total,
                           uint64_t bytes_total, uint64_t objects_left_out = 0) = 0;
  // Stores the done/fetched counters (and the totals) of `progress`, and its retry note
  // (retrying_ms, retry_error). StartRun and Finish clear the note.
  virtual Status SetProgress(const std::string& id, const SyncProgress& progress) = 0;
  // Moves a job that is not terminal to READY (with `version`), FAILED or CANCELED (with
  // `error_code` and `error_message`). Errors: NotFound; FailedPrecondition "sync job <id>:
  // already <STATE>" if it is terminal (the first outcome stands).
  virtual Result<SyncJobRecord> Finish(const std::string& id, SyncState state,
                                       std::optional<Digest> version, bool unchanged,
                                       const std::string& error_code,
                                       const std::string& error_message) = 0;
  // Asks a job's runner to stop (it ends CANCELED). Returns the job as it is now.
  // Errors: NotFound; FailedPrecondition "sync job <id>: already <STATE>" for a terminal job.
  virtual Result<SyncJobRecord> RequestCancel(const std::string& id) = 0;

  // Records that the job sealed a file (replacing an earlier record of the path).
  virtual Status RecordFile(const std::string& id, const SyncFileRecord& file) = 0;
  // The files the job has recorded, by path.
  virtual Result<std::vector<SyncFileRecord>> Files(const std::string& id) = 0;

  // The right to run the job: nullptr while another runner (in any process) holds it.
  virtual Result<std::unique_ptr<SyncJobLease>> TryLease(const std::string& id) = 0;
};

// In a write transaction of the jobs' database: ends job `id` READY with `version`, as
// SqlSyncJobStore::Finish does (its file records dropped), at `now_ms`. For the transaction that
// commits the job's version (SqlRegistry::Commit with CommitRequest::sync_job_id), which has
// checked that the job is SYNCING. Errors: the database's.
Status FinishSyncJobReady(sql::Session& s, const std::string& id, const Digest& version,
                          bool unchanged, int64_t now_ms);

// Jobs in the tables sync_jobs and sync_job_files of an sql::Database (SQLite: the registry's
// file; PostgreSQL: the shared metadata database); a lease is the database's lock "sync-<id>"
// (sql::Database::TryLock: an flock(2) on <db dir>/locks/sync-<id>.lock, or a PostgreSQL session
// advisory lock), which ends when its holder dies. Thread-safe; several processes (servers) may
// share the database.
class SqlSyncJobStore : public SyncJobStore {
 public:
  // `db` must hold the tables (SqliteSyncJobStore::Open, or PostgreSQL migrated by
  // MigratePgMetadata).
  explicit SqlSyncJobStore(std::shared_ptr<sql::Database> db);
  ~SqlSyncJobStore() override;

  using SyncJobStore::Create;
  Result<CreatedSyncJob> Create(const SyncJobSpec& spec, const SyncJobCreate& how) override;
  Result<SyncJobRecord> Get(const std::string& id) override;
  Result<std::vector<SyncJobRecord>> List(const std::string& ns, const std::string& volume,
                                          size_t limit) override;
  Result<std::vector<SyncJobRecord>> ListUnfinished() override;
  Result<int64_t> DeleteFinished(int64_t finished_before_unix_ms) override;
  Result<SyncJobRecord> StartRun(const std::string& id) override;
  Status UncountRun(const std::string& id) override;
  Status SetSource(const std::string& id, const std::string& revision, const Digest& listing_digest,
                   uint64_t objects_total, uint64_t bytes_total,
                   uint64_t objects_left_out = 0) override;
  Status SetProgress(const std::string& id, const SyncProgress& progress) override;
  Result<SyncJobRecord> Finish(const std::string& id, SyncState state,
                               std::optional<Digest> version, bool unchanged,
                               const std::string& error_code,
                               const std::string& error_message) override;
  Result<SyncJobRecord> RequestCancel(const std::string& id) override;
  Status RecordFile(const std::string& id, const SyncFileRecord& file) override;
  Result<std::vector<SyncFileRecord>> Files(const std::string& id) override;
  Result<std::unique_ptr<SyncJobLease>> TryLease(const std::string& id) override;

 private:
  std::shared_ptr<sql::Database> db_;
};

// Jobs in an SQLite database file (the registry's).
class SqliteSyncJobStore : public SqlSyncJobStore {
 public:
  // Opens or creates the database and tables (the file private to its owner, 0600).
  // Errors: Internal naming the file.
  static Result<std::unique_ptr<SqliteSyncJobStore>> Open(const std::filesystem::path& db_path);

 private:
  using SqlSyncJobStore::SqlSyncJobStore;
};

}  // namespace bdn
