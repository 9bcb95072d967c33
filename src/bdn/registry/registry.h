// Registry: namespaces, volumes, versions, tags, head and the per-volume sequence.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn {
namespace sql {
class Database;
}  // namespace sql

enum class Lifecycle { kAlive, kDeleted };
std::string_view LifecycleName(Lifecycle l);  // "ALIVE" / "DELETED"

// The message of a tag that a volume does not have, naming the tags it has (sorted; at most 8,
// then how many more) so that a mistyped or mis-cased one is seen at once:
// `tag "prod" of bdn:ns/vol: not found; its tags: Prod, staging` or `...: not found; it has no
// tags`. `volume_ref` is "bdn:<ns>/<vol>"; `tags` excludes head.
std::string TagNotFoundMessage(std::string_view volume_ref, std::string_view tag,
                               const std::vector<std::string>& tags);

// Totals of a version's tree, stored with it.
struct VersionStats {
  uint64_t files = 0;    // regular files (hardlinks not counted)
  uint64_t bytes = 0;    // sum of regular file sizes
  uint64_t chunks = 0;   // chunk references over all files
  uint64_t entries = 0;  // all manifest entries
};

struct VersionRecord {
  std::string ns;
  std::string volume;
  Digest digest;
  int64_t sequence = 0;  // the volume sequence at which the version was committed
  Lifecycle lifecycle = Lifecycle::kAlive;
  int64_t created_unix_ms = 0;
  std::optional<int64_t> deleted_unix_ms;
  std::optional<int64_t> delete_after_unix_ms;
  VersionStats stats;
  std::string source_uri;
  std::vector<std::string> tags;  // sorted; "head" is not listed here
  bool is_head = false;
  // A sync's source identity (docs/sync.md, "Source identity"): the revision it mirrored (an HF
  // commit) and its listing digest ("b3:<hex>"); empty for pushes.
  std::string source_revision;
  std::string source_listing_digest;
};

struct VolumeRecord {
  std::string ns;
  std::string name;
  std::optional<Digest> head;
  int64_t sequence = 0;
  std::map<std::string, Digest> tags;  // excluding head
  uint64_t live_versions = 0;
  uint64_t deleted_versions = 0;
  int64_t created_unix_ms = 0;
};

struct CommitRequest {
  std::string ns;
  std::string volume;
  Digest digest;
  VersionStats stats;
  std::string source_uri;
  std::vector<std::string> tags;  // applied atomically with the commit
  std::optional<int64_t> expected_sequence;
  // Names this write across retries (see Registry, "Idempotency keys"); empty: none.
  std::string idempotency_key;
  std::string source_revision;        // as VersionRecord's; recorded only for a new version
  std::string source_listing_digest;  // as VersionRecord's; recorded only for a new version
  // Set by a sync run (sync::RunJob): the commit is made only while sync job `sync_job_id` is
  // SYNCING with no cancel requested, looked at in the commit's own transaction with the job's
  // row locked (SqlRegistry, whose database holds the jobs), so that a run that lost its job
  // (ended elsewhere, cancelled) while it stalled commits nothing; and the same transaction
  // ends the job READY with this version (its `unchanged` flag from `sync_unchanged`), so that
  // no cancel or other outcome lands between the commit and the job's end. Empty: a commit
  // with no job.
  std::string sync_job_id;
  bool sync_unchanged = false;
  // The store's fence (StoreHold::CommitFence of the hold under which the blobs were checked):
  // one SQL statement run in the commit's transaction, which must change exactly one row, else
  // a GC sweep deleted packs since the check and nothing is committed (Unavailable, retried).
  // Only for a registry in the store's database (SqlRegistry on PostgreSQL); never sent over
  // HTTP. Empty: none.
  std::string store_fence;
  // Set by an origin whose push claims live in the registry's database (PushClaims::
  // InRegistryDatabase): the commit's transaction checks, the claim row read FOR SHARE, that no
  // live claim but `push_claim` (none: any live claim) holds the volume
  // (CheckPushClaimInTransaction), also when the transaction runs again after a stall, so a
  // commit whose claim moved on while it waited writes nothing (Conflict "… push in progress
  // …"). Never sent over HTTP.
  bool check_push_claim = false;
  std::optional<std::string> push_claim;
};

// How long a registry keeps the idempotency key of a write (and so recognizes its retries).
inline constexpr std::chrono::hours kIdempotencyKeyRetention{24};

struct CommitResult {
  int64_t sequence = 0;    // the volume's sequence after the commit
  bool unchanged = false;  // the version already existed (alive); no new version was created
  bool head_updated = false;
  std::vector<std::string> tags_applied;
};

// One version a delete made DELETED (DeleteResult).
struct DeletedVersion {
  Digest digest;
  int64_t deleted_unix_ms = 0;
  int64_t delete_after_unix_ms = 0;       // restorable until then (deleted + the retention)
  std::vector<std::string> tags_dropped;  // sorted
};

// What Registry::DeleteVersions did.
struct DeleteResult {
  int64_t sequence = 0;                 // the volume's sequence after the delete (bumped once)
  std::vector<DeletedVersion> deleted;  // newest first
  // Head after the delete: when a deleted version was head, head moved to the newest version
  // still alive (nullopt when none is left).
  std::optional<Digest> head;
  bool head_moved = false;
};

// What Registry::RestoreVersion did.
struct RestoreResult {
  int64_t sequence = 0;       // the volume's sequence after the restore (bumped)
  bool head_updated = false;  // head moved back to the restored version (it is newer than head)
};

// The default retention of a deleted version (docs/spec.md §1): restorable this long.
inline constexpr std::chrono::hours kDefaultRetention{7 * 24};

// Held while a push to one volume is in flight; released on destruction or when the holder dies.
class PushClaim {
 public:
  virtual ~PushClaim() = default;
};

// The metadata store. Implementations are thread-safe and make each mutation atomic.
//
// Idempotency keys: a write (Commit, SetTag, DeleteTag) may carry a client-chosen key, 1 to 64
// characters of [A-Za-z0-9_-], scoped by the write's namespace (namespaces never see or block
// each other's keys). The registry records the key with the write's result in the same
// transaction, and keeps it for kIdempotencyKeyRetention. A write whose key is recorded for the
// same request (same operation, volume, digest, tags, tag name, expected_sequence, source_uri)
// is not applied again: it returns the recorded result, whatever the volume's state now (so the
// retry of a write whose answer was lost reports exactly what the first try did, even with a
// now-stale expected_sequence). Errors of any keyed write: InvalidArgument "idempotency key
// \"k\": must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_'", and InvalidArgument
// "idempotency key \"k\": already used for another request" (of the same namespace).
class Registry {
 public:
  virtual ~Registry() = default;

  virtual Result<std::vector<std::string>> ListNamespaces() = 0;
  // Errors: NotFound "namespace \"ns\": not found".
  virtual Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) = 0;
  // Errors: NotFound "volume bdn:ns/vol: not found".
  virtual Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) = 0;
  // Newest first (by sequence). Errors: NotFound for an unknown volume.
  virtual Result<std::vector<VersionRecord>> ListVersions(const std::string& ns,
                                                          const std::string& volume,
                                                          bool include_deleted) = 0;
  // Errors: NotFound "version bdn:ns/vol@b3:…: not found".
  virtual Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                           const Digest& digest) = 0;
  // Digests of the volume's versions (alive and deleted) whose hex starts with `hex_prefix`.
  virtual Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                                   const std::string& hex_prefix) = 0;

  // Records a sealed version (creating the namespace and volume if missing), moves head to it and
  // applies the tags, all in one transaction. Re-committing an existing alive version creates no
  // new version (unchanged = true) but still moves head and tags. The sequence is bumped only if
  // something changed. A req.idempotency_key already recorded for this request returns the
  // recorded result (see the class comment). Errors: Conflict on a stale expected_sequence;
  // FailedPrecondition if the version exists but is DELETED within its retention ("restore it
  // first");
  // InvalidArgument if `tags` holds "head", and for idempotency keys. With req.sync_job_id:
  // FailedPrecondition "sync job <id>: already <STATE>; its run's version was not committed"
  // (or "…: not started (PENDING); …", or "…: cancel requested; …"); NotFound "sync job <id>: not
  // found". A commit made ends that job READY in the same transaction.
  virtual Result<CommitResult> Commit(const CommitRequest& req) = 0;
  // The result recorded for req.idempotency_key if a Commit of this same request already applied
  // it; nullopt if the key is empty or not recorded. Lets a server answer a retried commit before
  // it checks claims and stored blobs again. Errors: InvalidArgument for idempotency keys.
  virtual Result<std::optional<CommitResult>> FindCommit(const CommitRequest& req) = 0;

  // Points `tag` at an alive version. Returns the sequence after it: bumped if the tag moved,
  // unchanged if it already pointed there (a no-op changes nothing).
  // Errors: NotFound (volume/version), InvalidArgument for "head", Conflict on a stale
  // expected_sequence, FailedPrecondition for a deleted version; InvalidArgument for
  // idempotency keys (a recorded key returns the recorded sequence).
  virtual Result<int64_t> SetTag(const std::string& ns, const std::string& volume,
                                 const std::string& tag, const Digest& digest,
                                 std::optional<int64_t> expected_sequence,
                                 const std::string& idempotency_key = "") = 0;
  // Removes a tag. Errors: NotFound "tag \"t\" of bdn:ns/vol: not found", InvalidArgument for
  // "head", Conflict on a stale expected_sequence; InvalidArgument for idempotency keys (a
  // recorded key returns the recorded sequence).
  virtual Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                                    const std::string& tag,
                                    std::optional<int64_t> expected_sequence,
                                    const std::string& idempotency_key = "") = 0;

  // Soft-deletes versions of a volume in one transaction: `digest` alone, or with nullopt every
  // ALIVE version (bdn volume rm --recursive). Each becomes DELETED with delete_after = now +
  // the registry's retention, and loses its tags (they are not restored with it); if head was
  // deleted it moves to the newest version still alive (or none). The sequence is bumped once.
  // A recorded idempotency key returns the recorded result (see the class comment).
  // Errors: NotFound for the volume or version, or "volume bdn:ns/vol: has no live versions"
  // (nullopt, none alive); Conflict "version bdn:ns/vol@b3:…: already deleted (at T; restorable
  // until U)" (exit 4); Conflict on a stale expected_sequence; InvalidArgument for idempotency
  // keys.
  virtual Result<DeleteResult> DeleteVersions(const std::string& ns, const std::string& volume,
                                              const std::optional<Digest>& digest,
                                              std::optional<int64_t> expected_sequence,
                                              const std::string& idempotency_key = "") = 0;
  // Makes a DELETED version ALIVE again within its retention window, without its tags; head
  // moves back to it only if it is newer (a higher version sequence) than the current head, or
  // there is none. The sequence is bumped. Errors: NotFound; Conflict "version …: is not
  // deleted"; FailedPrecondition "version …: deleted at T; its retention ended at U, so it can
  // no longer be restored (…)"; Conflict on a stale expected_sequence; InvalidArgument for
  // idempotency keys.
  // `store_fence` as CommitRequest::store_fence.
  virtual Result<RestoreResult> RestoreVersion(const std::string& ns, const std::string& volume,
                                               const Digest& digest,
                                               std::optional<int64_t> expected_sequence,
                                               const std::string& idempotency_key = "",
                                               const std::string& store_fence = "") = 0;
  // Every version whose blobs must be kept (garbage collection's roots), in every volume:
  // ALIVE ones and DELETED ones still within their retention (delete_after later than now, by
  // the registry's clock). Records carry ns, volume, digest, lifecycle and times; tags and head
  // are not filled in. Errors: Internal on database errors; FailedPrecondition for a registry
  // that cannot list them (a remote one: GC runs where the data is).
  virtual Result<std::vector<VersionRecord>> ListRetainedVersions() = 0;

  // What is inconsistent in the registry itself, one line each (empty: nothing): a tag or head
  // naming a version that does not exist or is deleted, a deleted version without
  // delete_after, a version sequence past its volume's, damage the database reports. Default:
  // nothing is checked (a registry that cannot look at itself, e.g. a remote one).
  virtual Result<std::vector<std::string>> CheckConsistency() { return std::vector<std::string>(); }

  // Claims the right to push to a volume (which need not exist yet). A claim whose holder dies is
  // released. `tags`: those the push's commit will apply, so that a registry that checks its
  // caller's scopes (a remote one: the origin) refuses the claim, before anything is uploaded,
  // when the caller may not move them. Errors: Conflict "volume bdn:ns/vol: push in progress
  // (...)"; PermissionDenied for tags the caller may not move.
  virtual Result<std::unique_ptr<PushClaim>> ClaimPush(
      const std::string& ns, const std::string& volume,
      const std::vector<std::string>& tags = {}) = 0;
};

// How a SqlRegistry keeps time and lifecycle.
struct RegistryOptions {
  // How long a deleted version stays restorable (0: not at all; GC may reclaim it at once).
  std::chrono::milliseconds retention = kDefaultRetention;
  // Wall time of every record (created, deleted, delete_after, idempotency keys). Never null.
  std::shared_ptr<Clock> clock = Clock::Real();
};

// The Registry over an sql::Database: the same statements on SQLite (SqliteRegistry: one file,
// safe for several processes) and PostgreSQL (OpenPgRegistry: any number of servers). Each
// mutation is one write transaction that locks the volume's row first (after the idempotency
// key's lock, when it has a key), so two servers committing to one volume take turns: both
// succeed with distinct sequences, or one gets Conflict on its expected_sequence; no update is
// lost. Errors beyond Registry's: the database's (sql::Database): Unavailable while the database
// is busy or unreachable, FailedPrecondition "<what> <db>: no space left on device",
// PermissionDenied "registry <db>: read-only (...)" for every mutation of a read-only database.
class SqlRegistry : public Registry {
 public:
  // `db` must hold the registry's tables (SqliteRegistry::Open, or PostgreSQL migrated by
  // MigratePgMetadata).
  SqlRegistry(std::shared_ptr<sql::Database> db, RegistryOptions options);
  ~SqlRegistry() override;

  Result<std::vector<std::string>> ListNamespaces() override;
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) override;
  Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) override;
  Result<std::vector<VersionRecord>> ListVersions(const std::string& ns, const std::string& volume,
                                                  bool include_deleted) override;
  Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                   const Digest& digest) override;
  Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                           const std::string& hex_prefix) override;
  Result<CommitResult> Commit(const CommitRequest& req) override;
  Result<std::optional<CommitResult>> FindCommit(const CommitRequest& req) override;
  Result<int64_t> SetTag(const std::string& ns, const std::string& volume, const std::string& tag,
                         const Digest& digest, std::optional<int64_t> expected_sequence,
                         const std::string& idempotency_key = "") override;
  Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                            const std::string& tag, std::optional<int64_t> expected_sequence,
                            const std::string& idempotency_key = "") override;
  Result<DeleteResult> DeleteVersions(const std::string& ns, const std::string& volume,
                                      const std::optional<Digest>& digest,
                                      std::optional<int64_t> expected_sequence,
                                      const std::string& idempotency_key = "") override;
  Result<RestoreResult> RestoreVersion(const std::string& ns, const std::string& volume,
                                       const Digest& digest,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key = "",
                                       const std::string& store_fence = "") override;
  Result<std::vector<VersionRecord>> ListRetainedVersions() override;
  // The database's own check (SQLite: PRAGMA integrity_check), then the rules of
  // Registry::CheckConsistency.
  Result<std::vector<std::string>> CheckConsistency() override;
  // The database's lock "<ns>~<volume>" (sql::Database::TryLock): SQLite, an flock(2) on
  // <db dir>/locks/<ns>~<volume>.lock; PostgreSQL, a session advisory lock. Either is dropped
  // when the holder dies. The Conflict names the holder when known ("... by pid 123").
  Result<std::unique_ptr<PushClaim>> ClaimPush(const std::string& ns, const std::string& volume,
                                               const std::vector<std::string>& tags = {}) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The registry in one SQLite database file (WAL mode, busy timeout), safe for several processes.
class SqliteRegistry : public SqlRegistry {
 public:
  // Opens or creates the database (the file private to its owner, 0600: MakeDatabasePrivate).
  // A file that cannot be written but exists opens read-only (every mutation PermissionDenied).
  // Errors: Internal naming the file; PermissionDenied when another user's file or symlink is
  // in its place (OpenSqlite).
  static Result<std::unique_ptr<SqliteRegistry>> Open(const std::filesystem::path& db_path,
                                                      RegistryOptions options = {});

 private:
  using SqlRegistry::SqlRegistry;
};

}  // namespace bdn
