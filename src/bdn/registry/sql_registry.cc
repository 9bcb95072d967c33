// SqlRegistry: the Registry over an sql::Database, the same statements on SQLite (one file in a
// data directory) and PostgreSQL (shared by replicas). Every mutation is one write transaction
// that first locks the volume's row (SELECT ... FOR UPDATE on PostgreSQL; SQLite's write
// transactions exclude each other anyway), so concurrent writers of one volume take turns: each
// sees the sequence the last one left, and none loses an update.
#include <algorithm>
#include <chrono>

#include "bdn/base/names.h"
#include "bdn/base/units.h"
#include "bdn/registry/list_column.h"
#include "bdn/registry/push_claims.h"
#include "bdn/registry/registry.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/sql/database.h"
#include "bdn/sql/sqlite_database.h"

namespace bdn {

std::string_view LifecycleName(Lifecycle l) { return l == Lifecycle::kAlive ? "ALIVE" : "DELETED"; }

std::string TagNotFoundMessage(std::string_view volume_ref, std::string_view tag,
                               const std::vector<std::string>& tags) {
  constexpr size_t kShown = 8;
  std::string out =
      "tag \"" + std::string(tag) + "\" of " + std::string(volume_ref) + ": not found; ";
  if (tags.empty()) return out + "it has no tags";
  out += "its tags: ";
  for (size_t i = 0; i < tags.size() && i < kShown; ++i) out += (i ? ", " : "") + tags[i];
  if (tags.size() > kShown) out += ", and " + std::to_string(tags.size() - kShown) + " more";
  return out;
}

namespace {

using sql::Rows;
using sql::Session;

constexpr const char* kSqliteSchema = R"sql(
CREATE TABLE IF NOT EXISTS volumes(
  id INTEGER PRIMARY KEY,
  ns TEXT NOT NULL,
  name TEXT NOT NULL,
  head TEXT,
  sequence INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  UNIQUE(ns, name));
CREATE TABLE IF NOT EXISTS versions(
  volume_id INTEGER NOT NULL REFERENCES volumes(id),
  digest TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  lifecycle TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  deleted_ms INTEGER,
  delete_after_ms INTEGER,
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  chunks INTEGER NOT NULL,
  entries INTEGER NOT NULL,
  source_uri TEXT NOT NULL DEFAULT '',
  source_revision TEXT NOT NULL DEFAULT '',
  source_listing_digest TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(volume_id, digest));
CREATE TABLE IF NOT EXISTS tags(
  volume_id INTEGER NOT NULL REFERENCES volumes(id),
  name TEXT NOT NULL,
  digest TEXT NOT NULL,
  PRIMARY KEY(volume_id, name));
CREATE TABLE IF NOT EXISTS idempotency_keys(
  key TEXT PRIMARY KEY,
  request TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  unchanged INTEGER NOT NULL,
  head_updated INTEGER NOT NULL,
  tags_applied TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  detail TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS idempotency_keys_by_age ON idempotency_keys(created_ms);
)sql";

// A registry made before sync existed lacks the columns of a version's source identity, and one
// made before delete and restore the detail of a recorded write: adds them (empty).
Status AddSqliteColumns(Session& s) {
  BDN_ASSIGN_OR_RETURN(bool has_detail, sql::HasColumn(s, "idempotency_keys", "detail"));
  if (!has_detail) {
    BDN_RETURN_IF_ERROR(sql::ToStatus(
        s.Exec("ALTER TABLE idempotency_keys ADD COLUMN detail TEXT NOT NULL DEFAULT ''")));
  }
  BDN_ASSIGN_OR_RETURN(bool has_revision, sql::HasColumn(s, "versions", "source_revision"));
  if (has_revision) return Status::Ok();
  BDN_RETURN_IF_ERROR(sql::ToStatus(
      s.Exec("ALTER TABLE versions ADD COLUMN source_revision TEXT NOT NULL DEFAULT ''")));
  return sql::ToStatus(
      s.Exec("ALTER TABLE versions ADD COLUMN source_listing_digest TEXT NOT NULL DEFAULT ''"));
}

Digest ParseStored(const std::string& hex) {
  auto d = Digest::Parse(hex);
  return d ? *d : Digest();
}

std::string VolumeName(const std::string& ns, const std::string& volume) {
  return "volume bdn:" + ns + "/" + volume;
}

std::string VersionRef(const std::string& ns, const std::string& volume, const Digest& d) {
  return "bdn:" + ns + "/" + volume + "@" + d.ToString();
}

Status ValidateIdempotencyKey(const std::string& key) {
  bool ok = !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
  if (ok) return Status::Ok();
  return InvalidArgumentError("idempotency key \"" + key +
                              "\": must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_'");
}

std::string ExpectedText(std::optional<int64_t> expected) {
  return expected ? std::to_string(*expected) : std::string("none");
}

// The row key of idempotency key `key` of a write to namespace `ns`: keys are scoped by
// namespace, so one namespace's keys neither block nor reveal another's. "/" appears in neither a
// namespace name nor a key, so the pair is unambiguous. (Rows recorded before keys were scoped
// hold the bare key: a retry across that upgrade is applied as a new write.)
std::string ScopedKey(const std::string& ns, const std::string& key) { return ns + "/" + key; }

// What an idempotency key is recorded for: every field of the request that shapes its result.
std::string DescribeCommit(const CommitRequest& req) {
  std::string tags;
  for (const auto& t : req.tags) tags += (tags.empty() ? "" : ",") + t;
  std::string out = "commit bdn:" + req.ns + "/" + req.volume + "@" + req.digest.ToString() +
                    " tags=[" + tags +
                    "] expected_sequence=" + ExpectedText(req.expected_sequence) +
                    " source_uri=\"" + req.source_uri + "\"";
  if (!req.source_revision.empty()) out += " source_revision=\"" + req.source_revision + "\"";
  if (!req.source_listing_digest.empty()) {
    out += " source_listing_digest=" + req.source_listing_digest;
  }
  return out;
}

std::string JoinLines(const std::vector<std::string>& items) {
  return internal::JoinList(items, '\n');
}

std::vector<std::string> SplitLines(const std::string& text) {
  return internal::SplitList(text, '\n');
}

std::string FormatTime(int64_t unix_ms) { return FormatUtc(unix_ms); }

// A DeleteResult as the detail of its idempotency record: one line per deleted version
// ("<hex> <deleted ms> <delete_after ms> <tag,tag>"), then "head <hex or -> <moved 0|1>".
std::string EncodeDelete(const DeleteResult& r) {
  std::string out;
  for (const DeletedVersion& d : r.deleted) {
    std::string tags;
    for (const auto& t : d.tags_dropped) tags += (tags.empty() ? "" : ",") + t;
    out += d.digest.Hex() + " " + std::to_string(d.deleted_unix_ms) + " " +
           std::to_string(d.delete_after_unix_ms) + " " + tags + "\n";
  }
  out += "head " + (r.head ? r.head->Hex() : std::string("-")) + " " + (r.head_moved ? "1" : "0");
  return out;
}

DeleteResult DecodeDelete(int64_t sequence, const std::string& detail) {
  DeleteResult r;
  r.sequence = sequence;
  for (const std::string& line : SplitLines(detail)) {
    std::vector<std::string> f;
    size_t start = 0;
    while (start <= line.size()) {
      size_t sp = line.find(' ', start);
      if (sp == std::string::npos) sp = line.size();
      f.push_back(line.substr(start, sp - start));
      start = sp + 1;
    }
    if (f.size() >= 3 && f[0] == "head") {
      if (f[1] != "-") r.head = ParseStored(f[1]);
      r.head_moved = f[2] == "1";
      continue;
    }
    if (f.size() < 4) continue;
    DeletedVersion d;
    d.digest = ParseStored(f[0]);
    d.deleted_unix_ms = std::stoll(f[1]);
    d.delete_after_unix_ms = std::stoll(f[2]);
    size_t s = 0;
    while (!f[3].empty() && s <= f[3].size()) {
      size_t c = f[3].find(',', s);
      if (c == std::string::npos) c = f[3].size();
      d.tags_dropped.push_back(f[3].substr(s, c - s));
      s = c + 1;
    }
    r.deleted.push_back(std::move(d));
  }
  return r;
}

int64_t IdempotencyRetentionMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(kIdempotencyKeyRetention).count();
}

// The statements of one read or write, on the session of its transaction.
class Tx {
 public:
  Tx(Session& s, const RegistryOptions& options) : s_(s), options_(options) {}

  int64_t NowMs() const { return WallNowMs(*options_.clock); }
  Session& session() { return s_; }

  Result<Rows> Query(std::string_view sql, const std::vector<sql::Param>& params = {}) {
    return s_.Query(sql, params);
  }
  Status Exec(std::string_view sql, const std::vector<sql::Param>& params = {}) {
    return sql::ToStatus(s_.Exec(sql, params));
  }

  Result<std::optional<int64_t>> VolumeId(const std::string& ns, const std::string& volume) {
    BDN_ASSIGN_OR_RETURN(Rows r,
                         Query("SELECT id FROM volumes WHERE ns=?1 AND name=?2", {ns, volume}));
    if (r.empty()) return std::optional<int64_t>();
    return std::optional<int64_t>(r.Int(0, 0));
  }

  Result<int64_t> RequireVolume(const std::string& ns, const std::string& volume) {
    BDN_ASSIGN_OR_RETURN(auto id, VolumeId(ns, volume));
    if (!id) return Err(NotFoundError(VolumeName(ns, volume) + ": not found"));
    return *id;
  }

  // In a write: the volume's id, its row locked until the transaction ends (every write of a
  // volume takes this lock first, after the idempotency key's, so they take turns in one order).
  Result<int64_t> LockVolume(const std::string& ns, const std::string& volume) {
    BDN_ASSIGN_OR_RETURN(Rows r,
                         Query(std::string("SELECT id FROM volumes WHERE ns=?1 AND name=?2") +
                                   std::string(s_.ForUpdate()),
                               {ns, volume}));
    if (r.empty()) return Err(NotFoundError(VolumeName(ns, volume) + ": not found"));
    return r.Int(0, 0);
  }

  // In a write: runs the store's fence (CommitRequest::store_fence; "" passes), which must
  // change one row. `op` names the write ("commit", "restore") in the error.
  Status PassFence(const std::string& fence, std::string_view op) {
    if (fence.empty()) return Status::Ok();
    BDN_ASSIGN_OR_RETURN(int64_t n, s_.Exec(fence));
    if (n == 1) return Status::Ok();
    return UnavailableError(std::string(op) +
                            ": a gc sweep deleted packs since the version's blobs were checked "
                            "(the lock between them was lost: its database connection ended); "
                            "nothing was written: retry, which checks the blobs again");
  }

  Result<int64_t> Sequence(int64_t vid) {
    BDN_ASSIGN_OR_RETURN(Rows r, Query("SELECT sequence FROM volumes WHERE id=?1", {vid}));
    if (r.empty()) return Err(InternalError("registry: volume row vanished"));
    return r.Int(0, 0);
  }

  Status CheckExpected(int64_t vid, const std::string& what, std::optional<int64_t> expected) {
    if (!expected) return Status::Ok();
    BDN_ASSIGN_OR_RETURN(int64_t seq, Sequence(vid));
    if (seq != *expected) {
      return ConflictError(what + ": sequence is " + std::to_string(seq) + ", expected " +
                           std::to_string(*expected));
    }
    return Status::Ok();
  }

  Result<int64_t> Bump(int64_t vid) {
    BDN_ASSIGN_OR_RETURN(
        Rows r,
        Query("UPDATE volumes SET sequence=sequence+1 WHERE id=?1 RETURNING sequence", {vid}));
    if (r.empty()) return Err(InternalError("registry: volume row vanished"));
    return r.Int(0, 0);
  }

  // At the start of a write to namespace `ns` with idempotency key `key` ("" : none, nullopt):
  // holds the key until
  // the transaction ends, so two writes with one key (a retry sent to another replica while the
  // first try still runs) take turns, then returns the result recorded for it (Recorded).
  Result<std::optional<CommitResult>> Replay(const std::string& ns, const std::string& key,
                                             const std::string& request,
                                             std::string* detail = nullptr) {
    if (key.empty()) return std::optional<CommitResult>();
    BDN_RETURN_IF_ERROR(ValidateIdempotencyKey(key));
    BDN_RETURN_IF_ERROR(s_.LockForTransaction("idempotency-" + ScopedKey(ns, key)));
    return Recorded(ns, key, request, detail);
  }

  // LockVolume, then CheckExpected against `expected`.
  Result<int64_t> LockChecked(const std::string& ns, const std::string& volume,
                              std::optional<int64_t> expected) {
    BDN_ASSIGN_OR_RETURN(int64_t vid, LockVolume(ns, volume));
    BDN_RETURN_IF_ERROR(CheckExpected(vid, VolumeName(ns, volume), expected));
    return vid;
  }

  // The result recorded for `key`, if a request described as `request` recorded it within the
  // retention. Errors: InvalidArgument for a malformed key or one recorded for another request.
  Result<std::optional<CommitResult>> Recorded(const std::string& ns, const std::string& key,
                                               const std::string& request,
                                               std::string* detail = nullptr) {
    BDN_RETURN_IF_ERROR(ValidateIdempotencyKey(key));
    BDN_ASSIGN_OR_RETURN(
        Rows r,
        Query("SELECT request, sequence, unchanged, head_updated, tags_applied, detail FROM "
              "idempotency_keys WHERE key=?1 AND created_ms>=?2",
              {ScopedKey(ns, key), NowMs() - IdempotencyRetentionMs()}));
    if (r.empty()) return std::optional<CommitResult>();
    if (r.Text(0, 0) != request) {
      return Err(InvalidArgumentError("idempotency key \"" + key +
                                      "\": already used for another request"));
    }
    CommitResult out;
    out.sequence = r.Int(0, 1);
    out.unchanged = r.Int(0, 2) != 0;
    out.head_updated = r.Int(0, 3) != 0;
    out.tags_applied = SplitLines(r.Text(0, 4));
    if (detail) *detail = r.Text(0, 5);
    return std::optional<CommitResult>(std::move(out));
  }

  // Records `result` for `key` (inside the write's transaction; "" : nothing) and drops keys
  // past retention.
  Status Record(const std::string& ns, const std::string& key, const std::string& request,
                const CommitResult& result, const std::string& detail = "") {
    if (key.empty()) return Status::Ok();
    BDN_RETURN_IF_ERROR(Exec("DELETE FROM idempotency_keys WHERE created_ms<?1",
                             {NowMs() - IdempotencyRetentionMs()}));
    return Exec(
        "INSERT INTO idempotency_keys(key, request, sequence, unchanged, head_updated, "
        "tags_applied, created_ms, detail) VALUES(?1,?2,?3,?4,?5,?6,?7,?8) "
        "ON CONFLICT(key) DO UPDATE SET request=excluded.request, sequence=excluded.sequence, "
        "unchanged=excluded.unchanged, head_updated=excluded.head_updated, "
        "tags_applied=excluded.tags_applied, created_ms=excluded.created_ms, "
        "detail=excluded.detail",
        {ScopedKey(ns, key), request, result.sequence, int64_t{result.unchanged},
         int64_t{result.head_updated}, JoinLines(result.tags_applied), NowMs(), detail});
  }

  // Points `tag` of the volume at `digest`, creating it if missing.
  Status PointTag(int64_t vid, const std::string& tag, const Digest& digest) {
    return Exec(
        "INSERT INTO tags(volume_id, name, digest) VALUES(?1,?2,?3) "
        "ON CONFLICT(volume_id, name) DO UPDATE SET digest=excluded.digest",
        {vid, tag, digest.Hex()});
  }

  Result<std::vector<std::string>> TagsOf(int64_t vid, const Digest& digest) {
    BDN_ASSIGN_OR_RETURN(
        Rows r, Query("SELECT name FROM tags WHERE volume_id=?1 AND digest=?2 ORDER BY name",
                      {vid, digest.Hex()}));
    std::vector<std::string> out;
    for (size_t i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  }

  Result<VersionRecord> ReadVersion(int64_t vid, const std::string& ns, const std::string& volume,
                                    const Digest& digest) {
    BDN_ASSIGN_OR_RETURN(
        Rows r,
        Query("SELECT v.sequence, v.lifecycle, v.created_ms, v.deleted_ms, v.delete_after_ms, "
              "v.files, v.bytes, v.chunks, v.entries, v.source_uri, v.source_revision, "
              "v.source_listing_digest, o.head FROM versions v JOIN volumes o ON o.id=v.volume_id "
              "WHERE v.volume_id=?1 AND v.digest=?2",
              {vid, digest.Hex()}));
    if (r.empty()) {
      return Err(NotFoundError("version " + VersionRef(ns, volume, digest) + ": not found"));
    }
    VersionRecord v;
    v.ns = ns;
    v.volume = volume;
    v.digest = digest;
    v.sequence = r.Int(0, 0);
    v.lifecycle = r.Text(0, 1) == "DELETED" ? Lifecycle::kDeleted : Lifecycle::kAlive;
    v.created_unix_ms = r.Int(0, 2);
    if (!r.IsNull(0, 3)) v.deleted_unix_ms = r.Int(0, 3);
    if (!r.IsNull(0, 4)) v.delete_after_unix_ms = r.Int(0, 4);
    v.stats = {static_cast<uint64_t>(r.Int(0, 5)), static_cast<uint64_t>(r.Int(0, 6)),
               static_cast<uint64_t>(r.Int(0, 7)), static_cast<uint64_t>(r.Int(0, 8))};
    v.source_uri = r.Text(0, 9);
    v.source_revision = r.Text(0, 10);
    v.source_listing_digest = r.Text(0, 11);
    v.is_head = r.Text(0, 12) == digest.Hex();
    BDN_ASSIGN_OR_RETURN(v.tags, TagsOf(vid, digest));
    return v;
  }

  Result<VolumeRecord> ReadVolume(const std::string& ns, const std::string& volume) {
    BDN_ASSIGN_OR_RETURN(
        Rows r, Query("SELECT id, head, sequence, created_ms FROM volumes WHERE ns=?1 AND name=?2",
                      {ns, volume}));
    if (r.empty()) return Err(NotFoundError(VolumeName(ns, volume) + ": not found"));
    VolumeRecord v;
    v.ns = ns;
    v.name = volume;
    const int64_t vid = r.Int(0, 0);
    if (!r.IsNull(0, 1)) v.head = ParseStored(r.Text(0, 1));
    v.sequence = r.Int(0, 2);
    v.created_unix_ms = r.Int(0, 3);
    BDN_ASSIGN_OR_RETURN(
        Rows t, Query("SELECT name, digest FROM tags WHERE volume_id=?1 ORDER BY name", {vid}));
    for (size_t i = 0; i < t.size(); ++i) v.tags[t.Text(i, 0)] = ParseStored(t.Text(i, 1));
    BDN_ASSIGN_OR_RETURN(Rows c, Query("SELECT count(*) FILTER (WHERE lifecycle='ALIVE'), "
                                       "count(*) FILTER (WHERE lifecycle='DELETED') "
                                       "FROM versions WHERE volume_id=?1",
                                       {vid}));
    v.live_versions = static_cast<uint64_t>(c.Int(0, 0));
    v.deleted_versions = static_cast<uint64_t>(c.Int(0, 1));
    return v;
  }

 private:
  Session& s_;
  const RegistryOptions& options_;
};

// In a commit's transaction: OK while the sync job that commits is SYNCING with no cancel
// requested (CommitRequest::sync_job_id), its row locked until the transaction ends, so that a
// Finish or a cancel comes wholly before or after the commit.
Status CheckSyncRun(Tx& tx, const CommitRequest& req) {
  const std::string job = "sync job " + req.sync_job_id;
  BDN_ASSIGN_OR_RETURN(Rows r,
                       tx.Query("SELECT state, cancel_requested FROM sync_jobs WHERE id=?1" +
                                    std::string(tx.session().ForUpdate()),
                                {req.sync_job_id}));
  if (r.empty()) return NotFoundError(job + ": not found");
  if (r.Text(0, 0) != "SYNCING") {
    return FailedPreconditionError(
        job +
        (r.Text(0, 0) == "PENDING" ? ": not started (PENDING)" : ": already " + r.Text(0, 0)) +
        "; its run's version was not committed");
  }
  if (r.Int(0, 1) != 0) {
    return FailedPreconditionError(job + ": cancel requested; its run's version was not committed");
  }
  return Status::Ok();
}

}  // namespace

struct SqlRegistry::Impl {
  std::shared_ptr<sql::Database> db;
  RegistryOptions options;

  template <typename T>
  Result<T> Read(const std::function<Result<T>(Tx&)>& body) {
    return sql::ReadValue<T>(*db, [&](Session& s) -> Result<T> {
      Tx tx(s, options);
      return body(tx);
    });
  }
  template <typename T>
  Result<T> Write(const std::function<Result<T>(Tx&)>& body) {
    return sql::WriteValue<T>(*db, [&](Session& s) -> Result<T> {
      Tx tx(s, options);
      return body(tx);
    });
  }
};

SqlRegistry::SqlRegistry(std::shared_ptr<sql::Database> db, RegistryOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!options.clock) options.clock = Clock::Real();
  impl_->db = std::move(db);
  impl_->options = std::move(options);
}
SqlRegistry::~SqlRegistry() = default;

Result<std::unique_ptr<SqliteRegistry>> SqliteRegistry::Open(const std::filesystem::path& db_path,
                                                             RegistryOptions options) {
  sql::SqliteOptions o;
  o.what = "registry";
  o.schema = kSqliteSchema;
  o.upgrade = AddSqliteColumns;
  o.read_only_probe = "SELECT count(*) FROM volumes";
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<sql::Database> db, sql::OpenSqlite(db_path, std::move(o)));
  return std::unique_ptr<SqliteRegistry>(new SqliteRegistry(std::move(db), std::move(options)));
}

Result<std::vector<std::string>> SqlRegistry::ListNamespaces() {
  return impl_->Read<std::vector<std::string>>([](Tx& tx) -> Result<std::vector<std::string>> {
    BDN_ASSIGN_OR_RETURN(Rows r, tx.Query("SELECT DISTINCT ns FROM volumes ORDER BY ns"));
    std::vector<std::string> out;
    for (size_t i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  });
}

Result<std::vector<VolumeRecord>> SqlRegistry::ListVolumes(const std::string& ns) {
  return impl_->Read<std::vector<VolumeRecord>>([&](Tx& tx) -> Result<std::vector<VolumeRecord>> {
    BDN_ASSIGN_OR_RETURN(Rows r,
                         tx.Query("SELECT name FROM volumes WHERE ns=?1 ORDER BY name", {ns}));
    if (r.empty()) return Err(NotFoundError("namespace \"" + ns + "\": not found"));
    std::vector<VolumeRecord> out;
    for (size_t i = 0; i < r.size(); ++i) {
      BDN_ASSIGN_OR_RETURN(auto v, tx.ReadVolume(ns, r.Text(i, 0)));
      out.push_back(std::move(v));
    }
    return out;
  });
}

Result<VolumeRecord> SqlRegistry::GetVolume(const std::string& ns, const std::string& volume) {
  return impl_->Read<VolumeRecord>([&](Tx& tx) { return tx.ReadVolume(ns, volume); });
}

Result<std::vector<VersionRecord>> SqlRegistry::ListVersions(const std::string& ns,
                                                             const std::string& volume,
                                                             bool include_deleted) {
  return impl_->Read<std::vector<VersionRecord>>([&](Tx& tx) -> Result<std::vector<VersionRecord>> {
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.RequireVolume(ns, volume));
    BDN_ASSIGN_OR_RETURN(
        Rows r,
        tx.Query(include_deleted
                     ? "SELECT digest FROM versions WHERE volume_id=?1 ORDER BY sequence DESC"
                     : "SELECT digest FROM versions WHERE volume_id=?1 AND "
                       "lifecycle='ALIVE' ORDER BY sequence DESC",
                 {vid}));
    std::vector<VersionRecord> out;
    for (size_t i = 0; i < r.size(); ++i) {
      BDN_ASSIGN_OR_RETURN(auto v, tx.ReadVersion(vid, ns, volume, ParseStored(r.Text(i, 0))));
      out.push_back(std::move(v));
    }
    return out;
  });
}

Result<VersionRecord> SqlRegistry::GetVersion(const std::string& ns, const std::string& volume,
                                              const Digest& digest) {
  return impl_->Read<VersionRecord>([&](Tx& tx) -> Result<VersionRecord> {
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.RequireVolume(ns, volume));
    return tx.ReadVersion(vid, ns, volume, digest);
  });
}

Result<std::vector<Digest>> SqlRegistry::FindVersions(const std::string& ns,
                                                      const std::string& volume,
                                                      const std::string& hex_prefix) {
  return impl_->Read<std::vector<Digest>>([&](Tx& tx) -> Result<std::vector<Digest>> {
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.RequireVolume(ns, volume));
    BDN_ASSIGN_OR_RETURN(Rows r,
                         tx.Query("SELECT digest FROM versions WHERE volume_id=?1 AND "
                                  "substr(digest,1,?2)=?3 ORDER BY digest",
                                  {vid, static_cast<int64_t>(hex_prefix.size()), hex_prefix}));
    std::vector<Digest> out;
    for (size_t i = 0; i < r.size(); ++i) out.push_back(ParseStored(r.Text(i, 0)));
    return out;
  });
}

Result<CommitResult> SqlRegistry::Commit(const CommitRequest& req) {
  // As in SetTag: a "head" row in the tags table would be listed as an ordinary tag and could
  // never be deleted (DeleteTag refuses "head").
  for (const auto& tag : req.tags) {
    if (tag == kHeadTag) {
      return Err(
          InvalidArgumentError("tag \"head\": reserved; head moves only with a push or sync"));
    }
  }
  const std::string request = DescribeCommit(req);
  return impl_->Write<CommitResult>([&](Tx& tx) -> Result<CommitResult> {
    BDN_ASSIGN_OR_RETURN(auto recorded, tx.Replay(req.ns, req.idempotency_key, request));
    if (recorded) return std::move(*recorded);
    // Created if missing (a concurrent creator's row is waited for and then used), then locked.
    BDN_RETURN_IF_ERROR(
        tx.Exec("INSERT INTO volumes(ns, name, sequence, created_ms) VALUES(?1, ?2, 0, ?3) "
                "ON CONFLICT(ns, name) DO NOTHING",
                {req.ns, req.volume, tx.NowMs()}));
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.LockVolume(req.ns, req.volume));
    BDN_RETURN_IF_ERROR(tx.PassFence(req.store_fence, "commit"));
    if (req.check_push_claim) {
      BDN_RETURN_IF_ERROR(
          CheckPushClaimInTransaction(tx.session(), req.ns, req.volume, req.push_claim));
    }
    if (!req.sync_job_id.empty()) BDN_RETURN_IF_ERROR(CheckSyncRun(tx, req));
    const std::string what = VolumeName(req.ns, req.volume);
    BDN_RETURN_IF_ERROR(tx.CheckExpected(vid, what, req.expected_sequence));
    BDN_ASSIGN_OR_RETURN(int64_t seq, tx.Sequence(vid));
    CommitResult out;
    bool changed = false;

    BDN_ASSIGN_OR_RETURN(
        Rows found, tx.Query("SELECT lifecycle, delete_after_ms FROM versions WHERE volume_id=?1 "
                             "AND digest=?2",
                             {vid, req.digest.Hex()}));
    const bool exists = !found.empty();
    bool expired = false;  // deleted, and past its retention: committed as a new version
    if (exists && found.Text(0, 0) == "DELETED") {
      expired = found.IsNull(0, 1) || found.Int(0, 1) <= tx.NowMs();
      if (!expired) {
        const std::string ref = VersionRef(req.ns, req.volume, req.digest);
        return Err(FailedPreconditionError(
            "version " + ref + ": is deleted; restore it first (bdn volume restore " + ref + ")"));
      }
      BDN_RETURN_IF_ERROR(tx.Exec("DELETE FROM versions WHERE volume_id=?1 AND digest=?2",
                                  {vid, req.digest.Hex()}));
    }
    if (exists && !expired) {
      out.unchanged = true;
    } else {
      BDN_RETURN_IF_ERROR(
          tx.Exec("INSERT INTO versions(volume_id, digest, sequence, lifecycle, created_ms, files, "
                  "bytes, chunks, entries, source_uri, source_revision, source_listing_digest) "
                  "VALUES(?1,?2,?3,'ALIVE',?4,?5,?6,?7,?8,?9,?10,?11)",
                  {vid, req.digest.Hex(), seq + 1, tx.NowMs(),
                   static_cast<int64_t>(req.stats.files), static_cast<int64_t>(req.stats.bytes),
                   static_cast<int64_t>(req.stats.chunks), static_cast<int64_t>(req.stats.entries),
                   req.source_uri, req.source_revision, req.source_listing_digest}));
      changed = true;
    }
    BDN_ASSIGN_OR_RETURN(Rows head, tx.Query("SELECT head FROM volumes WHERE id=?1", {vid}));
    if (head.empty() || head.IsNull(0, 0) || head.Text(0, 0) != req.digest.Hex()) {
      BDN_RETURN_IF_ERROR(
          tx.Exec("UPDATE volumes SET head=?2 WHERE id=?1", {vid, req.digest.Hex()}));
      out.head_updated = true;
      changed = true;
    }
    for (const auto& tag : req.tags) {
      BDN_ASSIGN_OR_RETURN(
          Rows cur, tx.Query("SELECT digest FROM tags WHERE volume_id=?1 AND name=?2", {vid, tag}));
      if (cur.empty() || cur.Text(0, 0) != req.digest.Hex()) {
        BDN_RETURN_IF_ERROR(tx.PointTag(vid, tag, req.digest));
        changed = true;
      }
      out.tags_applied.push_back(tag);
    }
    if (changed) {
      BDN_ASSIGN_OR_RETURN(seq, tx.Bump(vid));
    }
    out.sequence = seq;
    BDN_RETURN_IF_ERROR(tx.Record(req.ns, req.idempotency_key, request, out));
    if (!req.sync_job_id.empty()) {
      BDN_RETURN_IF_ERROR(FinishSyncJobReady(tx.session(), req.sync_job_id, req.digest,
                                             req.sync_unchanged, tx.NowMs()));
    }
    return out;
  });
}

Result<std::optional<CommitResult>> SqlRegistry::FindCommit(const CommitRequest& req) {
  if (req.idempotency_key.empty()) return std::optional<CommitResult>();
  const std::string request = DescribeCommit(req);
  return impl_->Read<std::optional<CommitResult>>(
      [&](Tx& tx) { return tx.Recorded(req.ns, req.idempotency_key, request); });
}

Result<int64_t> SqlRegistry::SetTag(const std::string& ns, const std::string& volume,
                                    const std::string& tag, const Digest& digest,
                                    std::optional<int64_t> expected_sequence,
                                    const std::string& idempotency_key) {
  if (tag == kHeadTag) {
    return Err(InvalidArgumentError("tag \"head\": reserved; head moves only with a push or sync"));
  }
  const std::string request = "tag set bdn:" + ns + "/" + volume + ":" + tag + " -> " +
                              digest.ToString() +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  return impl_->Write<int64_t>([&](Tx& tx) -> Result<int64_t> {
    BDN_ASSIGN_OR_RETURN(auto recorded, tx.Replay(ns, idempotency_key, request));
    if (recorded) return recorded->sequence;
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.LockChecked(ns, volume, expected_sequence));
    BDN_ASSIGN_OR_RETURN(VersionRecord v, tx.ReadVersion(vid, ns, volume, digest));
    if (v.lifecycle != Lifecycle::kAlive) {
      return Err(
          FailedPreconditionError("version " + VersionRef(ns, volume, digest) + ": is deleted"));
    }
    CommitResult out;
    if (std::find(v.tags.begin(), v.tags.end(), tag) != v.tags.end()) {
      // Already there: nothing changes, so neither does the sequence.
      BDN_ASSIGN_OR_RETURN(out.sequence, tx.Sequence(vid));
    } else {
      BDN_RETURN_IF_ERROR(tx.PointTag(vid, tag, digest));
      BDN_ASSIGN_OR_RETURN(out.sequence, tx.Bump(vid));
    }
    BDN_RETURN_IF_ERROR(tx.Record(ns, idempotency_key, request, out));
    return out.sequence;
  });
}

Result<int64_t> SqlRegistry::DeleteTag(const std::string& ns, const std::string& volume,
                                       const std::string& tag,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key) {
  if (tag == kHeadTag) {
    return Err(InvalidArgumentError("tag \"head\": reserved; it cannot be deleted"));
  }
  const std::string request = "tag delete bdn:" + ns + "/" + volume + ":" + tag +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  return impl_->Write<int64_t>([&](Tx& tx) -> Result<int64_t> {
    BDN_ASSIGN_OR_RETURN(auto recorded, tx.Replay(ns, idempotency_key, request));
    if (recorded) return recorded->sequence;
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.LockChecked(ns, volume, expected_sequence));
    BDN_ASSIGN_OR_RETURN(
        int64_t deleted,
        tx.session().Exec("DELETE FROM tags WHERE volume_id=?1 AND name=?2", {vid, tag}));
    if (deleted == 0) {
      BDN_ASSIGN_OR_RETURN(Rows names, tx.Query("SELECT name FROM tags WHERE volume_id=?1", {vid}));
      std::vector<std::string> tags;
      for (size_t i = 0; i < names.size(); ++i) tags.push_back(names.Text(i, 0));
      std::sort(tags.begin(), tags.end());  // byte order, as std::map's, on every database
      return Err(NotFoundError(TagNotFoundMessage("bdn:" + ns + "/" + volume, tag, tags)));
    }
    CommitResult out;
    BDN_ASSIGN_OR_RETURN(out.sequence, tx.Bump(vid));
    BDN_RETURN_IF_ERROR(tx.Record(ns, idempotency_key, request, out));
    return out.sequence;
  });
}

Result<DeleteResult> SqlRegistry::DeleteVersions(const std::string& ns, const std::string& volume,
                                                 const std::optional<Digest>& digest,
                                                 std::optional<int64_t> expected_sequence,
                                                 const std::string& idempotency_key) {
  const std::string request = "delete bdn:" + ns + "/" + volume + "@" +
                              (digest ? digest->ToString() : std::string("*")) +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  const int64_t retention_ms = impl_->options.retention.count();
  return impl_->Write<DeleteResult>([&](Tx& tx) -> Result<DeleteResult> {
    std::string detail;
    BDN_ASSIGN_OR_RETURN(auto recorded, tx.Replay(ns, idempotency_key, request, &detail));
    if (recorded) return DecodeDelete(recorded->sequence, detail);
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.LockChecked(ns, volume, expected_sequence));
    std::vector<Digest> targets;
    if (digest) {
      BDN_ASSIGN_OR_RETURN(VersionRecord v, tx.ReadVersion(vid, ns, volume, *digest));
      if (v.lifecycle == Lifecycle::kDeleted) {
        // From an attacking helper: "restorable until" a time already past read as a promise.
        const int64_t after = v.delete_after_unix_ms.value_or(0);
        return Err(
            ConflictError("version " + VersionRef(ns, volume, *digest) + ": already deleted (at " +
                          FormatTime(v.deleted_unix_ms.value_or(0)) +
                          (after > tx.NowMs() ? "; restorable until " + FormatTime(after)
                                              : "; its retention ended at " + FormatTime(after) +
                                                    ", so it is no longer restorable") +
                          ")"));
      }
      targets.push_back(*digest);
    } else {
      BDN_ASSIGN_OR_RETURN(Rows r, tx.Query("SELECT digest FROM versions WHERE volume_id=?1 AND "
                                            "lifecycle='ALIVE' ORDER BY sequence DESC",
                                            {vid}));
      for (size_t i = 0; i < r.size(); ++i) targets.push_back(ParseStored(r.Text(i, 0)));
      if (targets.empty()) {
        return Err(NotFoundError(VolumeName(ns, volume) + ": has no live versions"));
      }
    }
    const int64_t now = tx.NowMs();
    const int64_t after = now + retention_ms;
    DeleteResult out;
    for (const Digest& d : targets) {
      DeletedVersion dv;
      dv.digest = d;
      dv.deleted_unix_ms = now;
      dv.delete_after_unix_ms = after;
      BDN_ASSIGN_OR_RETURN(dv.tags_dropped, tx.TagsOf(vid, d));
      BDN_RETURN_IF_ERROR(
          tx.Exec("DELETE FROM tags WHERE volume_id=?1 AND digest=?2", {vid, d.Hex()}));
      BDN_RETURN_IF_ERROR(
          tx.Exec("UPDATE versions SET lifecycle='DELETED', deleted_ms=?3, delete_after_ms=?4 "
                  "WHERE volume_id=?1 AND digest=?2",
                  {vid, d.Hex(), now, after}));
      out.deleted.push_back(std::move(dv));
    }
    BDN_ASSIGN_OR_RETURN(Rows h, tx.Query("SELECT head FROM volumes WHERE id=?1", {vid}));
    std::optional<Digest> head;
    if (!h.empty() && !h.IsNull(0, 0)) head = ParseStored(h.Text(0, 0));
    if (head && std::find(targets.begin(), targets.end(), *head) != targets.end()) {
      BDN_ASSIGN_OR_RETURN(Rows next, tx.Query("SELECT digest FROM versions WHERE volume_id=?1 AND "
                                               "lifecycle='ALIVE' ORDER BY sequence DESC LIMIT 1",
                                               {vid}));
      if (!next.empty()) {
        head = ParseStored(next.Text(0, 0));
        BDN_RETURN_IF_ERROR(tx.Exec("UPDATE volumes SET head=?2 WHERE id=?1", {vid, head->Hex()}));
      } else {
        head.reset();
        BDN_RETURN_IF_ERROR(tx.Exec("UPDATE volumes SET head=?2 WHERE id=?1", {vid, nullptr}));
      }
      out.head_moved = true;
    }
    out.head = head;
    BDN_ASSIGN_OR_RETURN(out.sequence, tx.Bump(vid));
    CommitResult rec;
    rec.sequence = out.sequence;
    BDN_RETURN_IF_ERROR(tx.Record(ns, idempotency_key, request, rec, EncodeDelete(out)));
    return out;
  });
}

Result<RestoreResult> SqlRegistry::RestoreVersion(const std::string& ns, const std::string& volume,
                                                  const Digest& digest,
                                                  std::optional<int64_t> expected_sequence,
                                                  const std::string& idempotency_key,
                                                  const std::string& store_fence) {
  const std::string request = "restore " + VersionRef(ns, volume, digest) +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  return impl_->Write<RestoreResult>([&](Tx& tx) -> Result<RestoreResult> {
    BDN_ASSIGN_OR_RETURN(auto recorded, tx.Replay(ns, idempotency_key, request));
    if (recorded) return RestoreResult{recorded->sequence, recorded->head_updated};
    BDN_ASSIGN_OR_RETURN(int64_t vid, tx.LockChecked(ns, volume, expected_sequence));
    BDN_RETURN_IF_ERROR(tx.PassFence(store_fence, "restore"));
    BDN_ASSIGN_OR_RETURN(VersionRecord v, tx.ReadVersion(vid, ns, volume, digest));
    const std::string ref = VersionRef(ns, volume, digest);
    if (v.lifecycle == Lifecycle::kAlive) {
      return Err(ConflictError("version " + ref + ": is not deleted"));
    }
    const int64_t after = v.delete_after_unix_ms.value_or(0);
    if (after <= tx.NowMs()) {
      return Err(FailedPreconditionError(
          "version " + ref + ": deleted at " + FormatTime(v.deleted_unix_ms.value_or(0)) +
          "; its retention ended at " + FormatTime(after) +
          ", so it can no longer be restored (its data may be gone; push the same tree again to "
          "make it a new version)"));
    }
    BDN_RETURN_IF_ERROR(
        tx.Exec("UPDATE versions SET lifecycle='ALIVE', deleted_ms=NULL, delete_after_ms=NULL "
                "WHERE volume_id=?1 AND digest=?2",
                {vid, digest.Hex()}));
    RestoreResult out;
    // Head moves back only to a version newer than the current head (or when there is none).
    BDN_ASSIGN_OR_RETURN(Rows h,
                         tx.Query("SELECT v.sequence FROM volumes o LEFT JOIN versions v ON "
                                  "v.volume_id=o.id AND v.digest=o.head WHERE o.id=?1",
                                  {vid}));
    if (h.empty() || h.IsNull(0, 0) || h.Int(0, 0) < v.sequence) {
      BDN_RETURN_IF_ERROR(tx.Exec("UPDATE volumes SET head=?2 WHERE id=?1", {vid, digest.Hex()}));
      out.head_updated = true;
    }
    BDN_ASSIGN_OR_RETURN(out.sequence, tx.Bump(vid));
    CommitResult rec;
    rec.sequence = out.sequence;
    rec.head_updated = out.head_updated;
    BDN_RETURN_IF_ERROR(tx.Record(ns, idempotency_key, request, rec));
    return out;
  });
}

Result<std::vector<VersionRecord>> SqlRegistry::ListRetainedVersions() {
  return impl_->Read<std::vector<VersionRecord>>([](Tx& tx) -> Result<std::vector<VersionRecord>> {
    BDN_ASSIGN_OR_RETURN(
        Rows r, tx.Query("SELECT o.ns, o.name, v.digest, v.sequence, v.lifecycle, v.created_ms, "
                         "v.deleted_ms, v.delete_after_ms FROM versions v JOIN volumes o ON "
                         "o.id=v.volume_id WHERE v.lifecycle='ALIVE' OR v.delete_after_ms>?1 "
                         "ORDER BY o.ns, o.name, v.sequence",
                         {tx.NowMs()}));
    std::vector<VersionRecord> out;
    for (size_t i = 0; i < r.size(); ++i) {
      VersionRecord v;
      v.ns = r.Text(i, 0);
      v.volume = r.Text(i, 1);
      v.digest = ParseStored(r.Text(i, 2));
      v.sequence = r.Int(i, 3);
      v.lifecycle = r.Text(i, 4) == "DELETED" ? Lifecycle::kDeleted : Lifecycle::kAlive;
      v.created_unix_ms = r.Int(i, 5);
      if (!r.IsNull(i, 6)) v.deleted_unix_ms = r.Int(i, 6);
      if (!r.IsNull(i, 7)) v.delete_after_unix_ms = r.Int(i, 7);
      out.push_back(std::move(v));
    }
    return out;
  });
}

Result<std::vector<std::string>> SqlRegistry::CheckConsistency() {
  BDN_ASSIGN_OR_RETURN(std::vector<std::string> out, impl_->db->CheckIntegrity());
  struct Rule {
    const char* sql;
    const char* what;
  };
  static constexpr Rule kRules[] = {
      {"SELECT o.ns, o.name, t.name, t.digest FROM tags t JOIN volumes o ON o.id=t.volume_id "
       "LEFT JOIN versions v ON v.volume_id=t.volume_id AND v.digest=t.digest "
       "WHERE v.digest IS NULL OR v.lifecycle<>'ALIVE'",
       "tag"},
      {"SELECT o.ns, o.name, 'head', o.head FROM volumes o LEFT JOIN versions v ON "
       "v.volume_id=o.id AND v.digest=o.head WHERE o.head IS NOT NULL AND "
       "(v.digest IS NULL OR v.lifecycle<>'ALIVE')",
       "head"},
      {"SELECT o.ns, o.name, v.lifecycle, v.digest FROM versions v JOIN volumes o ON "
       "o.id=v.volume_id WHERE (v.lifecycle='DELETED' AND v.delete_after_ms IS NULL) OR "
       "v.lifecycle NOT IN ('ALIVE','DELETED') OR v.sequence>o.sequence",
       "version"},
  };
  auto problems =
      impl_->Read<std::vector<std::string>>([](Tx& tx) -> Result<std::vector<std::string>> {
        std::vector<std::string> found;
        for (const Rule& rule : kRules) {
          BDN_ASSIGN_OR_RETURN(Rows r, tx.Query(rule.sql));
          for (size_t i = 0; i < r.size(); ++i) {
            const std::string vol = "bdn:" + r.Text(i, 0) + "/" + r.Text(i, 1);
            const std::string what = rule.what;
            if (what == "tag") {
              found.push_back("tag \"" + r.Text(i, 2) + "\" of " + vol + " names b3:" +
                              r.Text(i, 3) + ", which is not a live version of the volume");
            } else if (what == "head") {
              found.push_back("head of " + vol + " names b3:" + r.Text(i, 3) +
                              ", which is not a live version of the volume");
            } else {
              found.push_back("version " + vol + "@b3:" + r.Text(i, 3) +
                              ": lifecycle, delete_after or sequence out of order (" +
                              r.Text(i, 2) + ")");
            }
          }
        }
        return found;
      });
  if (!problems) return Err(problems.error());
  out.insert(out.end(), problems->begin(), problems->end());
  return out;
}

namespace {
class LockClaim : public PushClaim {
 public:
  explicit LockClaim(std::unique_ptr<sql::HeldLock> lock) : lock_(std::move(lock)) {}

 private:
  std::unique_ptr<sql::HeldLock> lock_;
};
}  // namespace

Result<std::unique_ptr<PushClaim>> SqlRegistry::ClaimPush(const std::string& ns,
                                                          const std::string& volume,
                                                          const std::vector<std::string>&) {
  BDN_ASSIGN_OR_RETURN(sql::LockAttempt lock, impl_->db->TryLock(ns + "~" + volume));
  if (!lock.held) {
    std::string holder = lock.holder.empty() ? "" : " by " + lock.holder;
    return Err(ConflictError(VolumeName(ns, volume) + ": push in progress" + holder +
                             "; push again once it has ended"));
  }
  return std::unique_ptr<PushClaim>(new LockClaim(std::move(lock.held)));
}

}  // namespace bdn
