// SqliteRegistry: the Registry over one SQLite database file.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <mutex>

#include "bdn/registry/registry.h"
#include "bdn/registry/sqlite_util.h"

#include "bdn/base/names.h"
#include "bdn/base/private_files.h"
#include "bdn/base/units.h"

namespace bdn {

std::string_view LifecycleName(Lifecycle l) { return l == Lifecycle::kAlive ? "ALIVE" : "DELETED"; }

namespace {

using internal::DbHandle;
using internal::LockFile;
using internal::Stmt;

constexpr const char* kSchema = R"sql(
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

Digest ParseStored(const std::string& hex) {
  auto d = Digest::Parse(hex);
  return d ? *d : Digest();
}

std::string VolumeName(const std::string& ns, const std::string& volume) {
  return "volume bdn:" + ns + "/" + volume;
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

// What an idempotency key is recorded for: every field of the request that shapes its result.
std::string DescribeCommit(const CommitRequest& req) {
  std::string tags;
  for (const auto& t : req.tags) tags += (tags.empty() ? "" : ",") + t;
  std::string out = "commit bdn:" + req.ns + "/" + req.volume + "@" + req.digest.ToString() +
                    " tags=[" + tags + "] expected_sequence=" + ExpectedText(req.expected_sequence) +
                    " source_uri=\"" + req.source_uri + "\"";
  if (!req.source_revision.empty()) out += " source_revision=\"" + req.source_revision + "\"";
  if (!req.source_listing_digest.empty()) {
    out += " source_listing_digest=" + req.source_listing_digest;
  }
  return out;
}

std::string JoinLines(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : "\n") + i;
  return out;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

struct SqliteRegistry::Impl {
  RegistryOptions options;
  DbHandle db;
  bool read_only = false;  // opened read-only: every mutation is PermissionDenied
  std::filesystem::path path;
  std::mutex mu;

  int64_t NowMs() const { return WallNowMs(*options.clock); }

  Status Exec(const char* sql) {
    return internal::Exec(db.get(), sql, "registry " + path.string(), read_only);
  }

  // A registry made before sync existed lacks the columns of a version's source identity, and
  // one made before delete and restore the detail of a recorded write: adds them (empty).
  Status AddColumnsOfSync() {
    BDN_RETURN_IF_ERROR(internal::AddColumnIfMissing(db.get(), "idempotency_keys", "detail",
                                                     "detail TEXT NOT NULL DEFAULT ''",
                                                     "registry"));
    BDN_RETURN_IF_ERROR(internal::AddColumnIfMissing(db.get(), "versions", "source_revision",
                                                     "source_revision TEXT NOT NULL DEFAULT ''",
                                                     "registry"));
    return internal::AddColumnIfMissing(db.get(), "versions", "source_listing_digest",
                                        "source_listing_digest TEXT NOT NULL DEFAULT ''",
                                        "registry");
  }

  // Runs `body` inside BEGIN IMMEDIATE … COMMIT, rolling back on error.
  template <typename T, typename F>
  Result<T> Transaction(F body) {
    BDN_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Result<T> r = body();
    if (r) {
      Status s = Exec("COMMIT");
      if (!s.ok()) {
        Exec("ROLLBACK");
        return Err(s);
      }
    } else {
      Exec("ROLLBACK");
    }
    return r;
  }

  // The shape of the tag writes: in one transaction, a request recorded under
  // `idempotency_key` before answers its recorded sequence; else the volume must exist at
  // `expected_sequence` (if given), `change` runs on its id and returns the sequence after it,
  // which is recorded under the key. Takes mu.
  template <typename F>
  Result<int64_t> IdempotentVolumeWrite(const std::string& ns, const std::string& volume,
                                        const std::string& request,
                                        std::optional<int64_t> expected_sequence,
                                        const std::string& idempotency_key, F change) {
    std::lock_guard lock(mu);
    return Transaction<int64_t>([&]() -> Result<int64_t> {
      if (!idempotency_key.empty()) {
        BDN_ASSIGN_OR_RETURN(auto recorded, Recorded(idempotency_key, request));
        if (recorded) return recorded->sequence;
      }
      BDN_ASSIGN_OR_RETURN(int64_t vid, RequireVolume(ns, volume));
      BDN_RETURN_IF_ERROR(CheckExpected(vid, VolumeName(ns, volume), expected_sequence));
      CommitResult out;
      BDN_ASSIGN_OR_RETURN(out.sequence, change(vid));
      if (!idempotency_key.empty()) BDN_RETURN_IF_ERROR(Record(idempotency_key, request, out));
      return out.sequence;
    });
  }

  Result<std::optional<int64_t>> VolumeId(const std::string& ns, const std::string& volume) {
    Stmt s(db, "SELECT id FROM volumes WHERE ns=?1 AND name=?2");
    s.Bind(1, ns).Bind(2, volume);
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<int64_t>();
    return std::optional<int64_t>(s.Int(0));
  }

  Result<int64_t> RequireVolume(const std::string& ns, const std::string& volume) {
    BDN_ASSIGN_OR_RETURN(auto id, VolumeId(ns, volume));
    if (!id) return Err(NotFoundError(VolumeName(ns, volume) + ": not found"));
    return *id;
  }

  Result<int64_t> Sequence(int64_t vid) {
    Stmt s(db, "SELECT sequence FROM volumes WHERE id=?1");
    s.Bind(1, vid);
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Err(InternalError("registry: volume row vanished"));
    return s.Int(0);
  }

  Status CheckExpected(int64_t vid, const std::string& what, std::optional<int64_t> expected) {
    if (!expected) return Status::Ok();
    auto seq = Sequence(vid);
    if (!seq) return seq.error();
    if (*seq != *expected) {
      return ConflictError(what + ": sequence is " + std::to_string(*seq) + ", expected " +
                           std::to_string(*expected));
    }
    return Status::Ok();
  }

  Result<int64_t> Bump(int64_t vid) {
    Stmt s(db, "UPDATE volumes SET sequence=sequence+1 WHERE id=?1");
    s.Bind(1, vid);
    BDN_RETURN_IF_ERROR(s.Run());
    return Sequence(vid);
  }

  // The result recorded for `key`, if a request described as `request` recorded it within the
  // retention. Errors: InvalidArgument for a malformed key or one recorded for another request.
  Result<std::optional<CommitResult>> Recorded(const std::string& key, const std::string& request,
                                               std::string* detail = nullptr) {
    BDN_RETURN_IF_ERROR(ValidateIdempotencyKey(key));
    Stmt s(db,
           "SELECT request, sequence, unchanged, head_updated, tags_applied, detail FROM "
           "idempotency_keys WHERE key=?1 AND created_ms>=?2");
    s.Bind(1, key).Bind(2, NowMs() - RetentionMs());
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<CommitResult>();
    if (s.Text(0) != request) {
      return Err(InvalidArgumentError("idempotency key \"" + key +
                                      "\": already used for another request (" + s.Text(0) + ")"));
    }
    CommitResult r;
    r.sequence = s.Int(1);
    r.unchanged = s.Int(2) != 0;
    r.head_updated = s.Int(3) != 0;
    r.tags_applied = SplitLines(s.Text(4));
    if (detail) *detail = s.Text(5);
    return std::optional<CommitResult>(std::move(r));
  }

  // Records `result` for `key` (inside the write's transaction) and drops keys past retention.
  Status Record(const std::string& key, const std::string& request, const CommitResult& result,
                const std::string& detail = "") {
    Stmt prune(db, "DELETE FROM idempotency_keys WHERE created_ms<?1");
    prune.Bind(1, NowMs() - RetentionMs());
    BDN_RETURN_IF_ERROR(prune.Run());
    Stmt ins(db,
             "INSERT OR REPLACE INTO idempotency_keys(key, request, sequence, unchanged, "
             "head_updated, tags_applied, created_ms, detail) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
    ins.Bind(1, key)
        .Bind(2, request)
        .Bind(3, result.sequence)
        .Bind(4, int64_t{result.unchanged})
        .Bind(5, int64_t{result.head_updated})
        .Bind(6, JoinLines(result.tags_applied))
        .Bind(7, NowMs())
        .Bind(8, detail);
    return ins.Run();
  }

  static int64_t RetentionMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(kIdempotencyKeyRetention).count();
  }

  Result<VersionRecord> ReadVersion(int64_t vid, const std::string& ns, const std::string& volume,
                                    const Digest& digest) {
    Stmt s(db,
           "SELECT sequence, lifecycle, created_ms, deleted_ms, delete_after_ms, files, bytes, "
           "chunks, entries, source_uri, source_revision, source_listing_digest FROM versions "
           "WHERE volume_id=?1 AND digest=?2");
    s.Bind(1, vid).Bind(2, digest.Hex());
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) {
      return Err(NotFoundError("version bdn:" + ns + "/" + volume + "@" + digest.ToString() +
                               ": not found"));
    }
    VersionRecord v;
    v.ns = ns;
    v.volume = volume;
    v.digest = digest;
    v.sequence = s.Int(0);
    v.lifecycle = s.Text(1) == "DELETED" ? Lifecycle::kDeleted : Lifecycle::kAlive;
    v.created_unix_ms = s.Int(2);
    if (!s.IsNull(3)) v.deleted_unix_ms = s.Int(3);
    if (!s.IsNull(4)) v.delete_after_unix_ms = s.Int(4);
    v.stats = {static_cast<uint64_t>(s.Int(5)), static_cast<uint64_t>(s.Int(6)),
               static_cast<uint64_t>(s.Int(7)), static_cast<uint64_t>(s.Int(8))};
    v.source_uri = s.Text(9);
    v.source_revision = s.Text(10);
    v.source_listing_digest = s.Text(11);
    Stmt t(db, "SELECT name FROM tags WHERE volume_id=?1 AND digest=?2 ORDER BY name");
    t.Bind(1, vid).Bind(2, digest.Hex());
    while (true) {
      BDN_ASSIGN_OR_RETURN(bool more, t.Step());
      if (!more) break;
      v.tags.push_back(t.Text(0));
    }
    Stmt h(db, "SELECT head FROM volumes WHERE id=?1");
    h.Bind(1, vid);
    BDN_ASSIGN_OR_RETURN(bool hrow, h.Step());
    v.is_head = hrow && h.Text(0) == digest.Hex();
    return v;
  }
};

SqliteRegistry::SqliteRegistry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteRegistry::~SqliteRegistry() = default;

namespace {

// Opens `uri` (an SQLite URI) with `flags`. Errors: Internal with SQLite's message.
Result<DbHandle> OpenDb(const std::string& uri, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &raw, flags | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) return Err(InternalError(db ? sqlite3_errmsg(db.get()) : "out of memory"));
  sqlite3_busy_timeout(db.get(), 30000);
  return db;
}

std::string UriPath(const std::filesystem::path& p) {
  std::string out = "file:";
  for (char c : p.string()) {
    if (c == '?' || c == '#' || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<SqliteRegistry>> SqliteRegistry::Open(const std::filesystem::path& db_path,
                                                             RegistryOptions options) {
  auto impl = std::make_unique<Impl>();
  if (!options.clock) options.clock = Clock::Real();
  impl->options = std::move(options);
  impl->path = db_path;
  MakeDatabasePrivate(db_path, "registry");
  auto rw = OpenDb(UriPath(db_path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  Status rw_error;
  if (rw) {
    impl->db = std::move(*rw);
    rw_error = impl->Exec("PRAGMA journal_mode=WAL");
    if (rw_error.ok()) rw_error = impl->Exec("PRAGMA synchronous=FULL");
    if (rw_error.ok()) rw_error = impl->Exec("PRAGMA foreign_keys=ON");
    if (rw_error.ok()) rw_error = impl->Exec(kSchema);
    if (rw_error.ok()) rw_error = impl->AddColumnsOfSync();
    if (rw_error.ok()) return std::unique_ptr<SqliteRegistry>(new SqliteRegistry(std::move(impl)));
    impl->db.reset();
  } else {
    rw_error = rw.error();
  }
  // A registry on a read-only file system, owned by another user, or on a full disk can still be
  // read: reads and mounts keep working, and every write fails with PermissionDenied.
  std::error_code ec;
  if (std::filesystem::exists(db_path, ec)) {
    for (const char* mode : {"?mode=ro", "?immutable=1"}) {
      auto ro = OpenDb(UriPath(db_path) + mode, SQLITE_OPEN_READONLY);
      if (!ro) continue;
      impl->db = std::move(*ro);
      impl->read_only = true;
      if (impl->Exec("SELECT count(*) FROM volumes").ok()) {
        return std::unique_ptr<SqliteRegistry>(new SqliteRegistry(std::move(impl)));
      }
      impl->db.reset();
    }
  }
  std::string why = rw_error.message();
  const std::string name = "registry " + db_path.string();
  if (why.starts_with(name + ": ")) why = why.substr(name.size() + 2);
  return Err(InternalError(name + ": " + why));
}

Result<std::vector<std::string>> SqliteRegistry::ListNamespaces() {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db, "SELECT DISTINCT ns FROM volumes ORDER BY ns");
  std::vector<std::string> out;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(s.Text(0));
  }
  return out;
}

Result<std::vector<VolumeRecord>> SqliteRegistry::ListVolumes(const std::string& ns) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(impl_->mu);
    Stmt s(impl_->db, "SELECT name FROM volumes WHERE ns=?1 ORDER BY name");
    s.Bind(1, ns);
    while (true) {
      BDN_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      names.push_back(s.Text(0));
    }
  }
  if (names.empty()) return Err(NotFoundError("namespace \"" + ns + "\": not found"));
  std::vector<VolumeRecord> out;
  for (const auto& n : names) {
    BDN_ASSIGN_OR_RETURN(auto v, GetVolume(ns, n));
    out.push_back(std::move(v));
  }
  return out;
}

Result<VolumeRecord> SqliteRegistry::GetVolume(const std::string& ns, const std::string& volume) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db, "SELECT id, head, sequence, created_ms FROM volumes WHERE ns=?1 AND name=?2");
  s.Bind(1, ns).Bind(2, volume);
  BDN_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Err(NotFoundError(VolumeName(ns, volume) + ": not found"));
  VolumeRecord v;
  v.ns = ns;
  v.name = volume;
  int64_t vid = s.Int(0);
  if (!s.IsNull(1)) v.head = ParseStored(s.Text(1));
  v.sequence = s.Int(2);
  v.created_unix_ms = s.Int(3);
  Stmt t(impl_->db, "SELECT name, digest FROM tags WHERE volume_id=?1 ORDER BY name");
  t.Bind(1, vid);
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool more, t.Step());
    if (!more) break;
    v.tags[t.Text(0)] = ParseStored(t.Text(1));
  }
  Stmt c(impl_->db,
         "SELECT SUM(lifecycle='ALIVE'), SUM(lifecycle='DELETED') FROM versions WHERE volume_id=?1");
  c.Bind(1, vid);
  BDN_ASSIGN_OR_RETURN(bool crow, c.Step());
  if (crow) {
    v.live_versions = static_cast<uint64_t>(c.Int(0));
    v.deleted_versions = static_cast<uint64_t>(c.Int(1));
  }
  return v;
}

Result<std::vector<VersionRecord>> SqliteRegistry::ListVersions(const std::string& ns,
                                                                const std::string& volume,
                                                                bool include_deleted) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(int64_t vid, impl_->RequireVolume(ns, volume));
  Stmt s(impl_->db,
         include_deleted
             ? "SELECT digest FROM versions WHERE volume_id=?1 ORDER BY sequence DESC"
             : "SELECT digest FROM versions WHERE volume_id=?1 AND lifecycle='ALIVE' "
               "ORDER BY sequence DESC");
  s.Bind(1, vid);
  std::vector<Digest> digests;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    digests.push_back(ParseStored(s.Text(0)));
  }
  std::vector<VersionRecord> out;
  for (const auto& d : digests) {
    BDN_ASSIGN_OR_RETURN(auto v, impl_->ReadVersion(vid, ns, volume, d));
    out.push_back(std::move(v));
  }
  return out;
}

Result<VersionRecord> SqliteRegistry::GetVersion(const std::string& ns, const std::string& volume,
                                                 const Digest& digest) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(int64_t vid, impl_->RequireVolume(ns, volume));
  return impl_->ReadVersion(vid, ns, volume, digest);
}

Result<std::vector<Digest>> SqliteRegistry::FindVersions(const std::string& ns,
                                                         const std::string& volume,
                                                         const std::string& hex_prefix) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(int64_t vid, impl_->RequireVolume(ns, volume));
  Stmt s(impl_->db,
         "SELECT digest FROM versions WHERE volume_id=?1 AND substr(digest,1,?2)=?3 "
         "ORDER BY digest");
  s.Bind(1, vid).Bind(2, static_cast<int64_t>(hex_prefix.size())).Bind(3, hex_prefix);
  std::vector<Digest> out;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ParseStored(s.Text(0)));
  }
  return out;
}

Result<CommitResult> SqliteRegistry::Commit(const CommitRequest& req) {
  // As in SetTag: a "head" row in the tags table would be listed as an ordinary tag and could
  // never be deleted (DeleteTag refuses "head").
  for (const auto& tag : req.tags) {
    if (tag == kHeadTag) {
      return Err(
          InvalidArgumentError("tag \"head\": reserved; head moves only with a push or sync"));
    }
  }
  const std::string request = DescribeCommit(req);
  std::lock_guard lock(impl_->mu);
  return impl_->Transaction<CommitResult>([&]() -> Result<CommitResult> {
    Impl& im = *impl_;
    if (!req.idempotency_key.empty()) {
      BDN_ASSIGN_OR_RETURN(auto recorded, im.Recorded(req.idempotency_key, request));
      if (recorded) return std::move(*recorded);
    }
    BDN_ASSIGN_OR_RETURN(auto existing_vid, im.VolumeId(req.ns, req.volume));
    int64_t vid;
    if (existing_vid) {
      vid = *existing_vid;
    } else {
      Stmt ins(im.db, "INSERT INTO volumes(ns, name, sequence, created_ms) VALUES(?1, ?2, 0, ?3)");
      ins.Bind(1, req.ns).Bind(2, req.volume).Bind(3, im.NowMs());
      BDN_RETURN_IF_ERROR(ins.Run());
      vid = sqlite3_last_insert_rowid(im.db.get());
    }
    const std::string what = VolumeName(req.ns, req.volume);
    BDN_RETURN_IF_ERROR(im.CheckExpected(vid, what, req.expected_sequence));
    BDN_ASSIGN_OR_RETURN(int64_t seq, im.Sequence(vid));
    CommitResult out;
    bool changed = false;

    Stmt find(im.db,
              "SELECT lifecycle, delete_after_ms FROM versions WHERE volume_id=?1 AND digest=?2");
    find.Bind(1, vid).Bind(2, req.digest.Hex());
    BDN_ASSIGN_OR_RETURN(bool exists, find.Step());
    bool expired = false;  // deleted, and past its retention: committed as a new version
    if (exists && find.Text(0) == "DELETED") {
      expired = find.IsNull(1) || find.Int(1) <= im.NowMs();
      if (!expired) {
        const std::string ref = "bdn:" + req.ns + "/" + req.volume + "@" + req.digest.ToString();
        return Err(FailedPreconditionError("version " + ref +
                                           ": is deleted; restore it first (bdn volume restore " +
                                           ref + ")"));
      }
      Stmt drop(im.db, "DELETE FROM versions WHERE volume_id=?1 AND digest=?2");
      drop.Bind(1, vid).Bind(2, req.digest.Hex());
      BDN_RETURN_IF_ERROR(drop.Run());
    }
    if (exists && !expired) {
      out.unchanged = true;
    } else {
      Stmt ins(im.db,
               "INSERT INTO versions(volume_id, digest, sequence, lifecycle, created_ms, files, "
               "bytes, chunks, entries, source_uri, source_revision, source_listing_digest) "
               "VALUES(?1,?2,?3,'ALIVE',?4,?5,?6,?7,?8,?9,?10,?11)");
      ins.Bind(1, vid)
          .Bind(2, req.digest.Hex())
          .Bind(3, seq + 1)
          .Bind(4, im.NowMs())
          .Bind(5, static_cast<int64_t>(req.stats.files))
          .Bind(6, static_cast<int64_t>(req.stats.bytes))
          .Bind(7, static_cast<int64_t>(req.stats.chunks))
          .Bind(8, static_cast<int64_t>(req.stats.entries))
          .Bind(9, req.source_uri)
          .Bind(10, req.source_revision)
          .Bind(11, req.source_listing_digest);
      BDN_RETURN_IF_ERROR(ins.Run());
      changed = true;
    }
    Stmt head(im.db, "SELECT head FROM volumes WHERE id=?1");
    head.Bind(1, vid);
    BDN_ASSIGN_OR_RETURN(bool hrow, head.Step());
    if (!hrow || head.IsNull(0) || head.Text(0) != req.digest.Hex()) {
      Stmt up(im.db, "UPDATE volumes SET head=?2 WHERE id=?1");
      up.Bind(1, vid).Bind(2, req.digest.Hex());
      BDN_RETURN_IF_ERROR(up.Run());
      out.head_updated = true;
      changed = true;
    }
    for (const auto& tag : req.tags) {
      Stmt cur(im.db, "SELECT digest FROM tags WHERE volume_id=?1 AND name=?2");
      cur.Bind(1, vid).Bind(2, tag);
      BDN_ASSIGN_OR_RETURN(bool trow, cur.Step());
      if (!trow || cur.Text(0) != req.digest.Hex()) {
        Stmt up(im.db, "INSERT OR REPLACE INTO tags(volume_id, name, digest) VALUES(?1,?2,?3)");
        up.Bind(1, vid).Bind(2, tag).Bind(3, req.digest.Hex());
        BDN_RETURN_IF_ERROR(up.Run());
        changed = true;
      }
      out.tags_applied.push_back(tag);
    }
    if (changed) {
      BDN_ASSIGN_OR_RETURN(seq, im.Bump(vid));
    }
    out.sequence = seq;
    if (!req.idempotency_key.empty()) {
      BDN_RETURN_IF_ERROR(im.Record(req.idempotency_key, request, out));
    }
    return out;
  });
}

Result<std::optional<CommitResult>> SqliteRegistry::FindCommit(const CommitRequest& req) {
  if (req.idempotency_key.empty()) return std::optional<CommitResult>();
  std::lock_guard lock(impl_->mu);
  return impl_->Recorded(req.idempotency_key, DescribeCommit(req));
}

Result<int64_t> SqliteRegistry::SetTag(const std::string& ns, const std::string& volume,
                                       const std::string& tag, const Digest& digest,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key) {
  if (tag == kHeadTag) {
    return Err(InvalidArgumentError("tag \"head\": reserved; head moves only with a push or sync"));
  }
  const std::string request = "tag set bdn:" + ns + "/" + volume + ":" + tag + " -> " +
                              digest.ToString() +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  Impl& im = *impl_;
  return im.IdempotentVolumeWrite(ns, volume, request, expected_sequence, idempotency_key,
                                  [&](int64_t vid) -> Result<int64_t> {
        BDN_ASSIGN_OR_RETURN(VersionRecord v, im.ReadVersion(vid, ns, volume, digest));
        if (v.lifecycle != Lifecycle::kAlive) {
          return Err(FailedPreconditionError("version bdn:" + ns + "/" + volume + "@" +
                                             digest.ToString() + ": is deleted"));
        }
        // Already there: nothing changes, so neither does the sequence.
        if (std::find(v.tags.begin(), v.tags.end(), tag) != v.tags.end()) return im.Sequence(vid);
        Stmt up(im.db, "INSERT OR REPLACE INTO tags(volume_id, name, digest) VALUES(?1,?2,?3)");
        up.Bind(1, vid).Bind(2, tag).Bind(3, digest.Hex());
        BDN_RETURN_IF_ERROR(up.Run());
        return im.Bump(vid);
      });
}

Result<int64_t> SqliteRegistry::DeleteTag(const std::string& ns, const std::string& volume,
                                          const std::string& tag,
                                          std::optional<int64_t> expected_sequence,
                                          const std::string& idempotency_key) {
  if (tag == kHeadTag) {
    return Err(InvalidArgumentError("tag \"head\": reserved; it cannot be deleted"));
  }
  const std::string request = "tag delete bdn:" + ns + "/" + volume + ":" + tag +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  Impl& im = *impl_;
  return im.IdempotentVolumeWrite(ns, volume, request, expected_sequence, idempotency_key,
                                  [&](int64_t vid) -> Result<int64_t> {
        Stmt del(im.db, "DELETE FROM tags WHERE volume_id=?1 AND name=?2");
        del.Bind(1, vid).Bind(2, tag);
        BDN_RETURN_IF_ERROR(del.Run());
        if (sqlite3_changes(im.db.get()) == 0) {
          return Err(NotFoundError("tag \"" + tag + "\" of bdn:" + ns + "/" + volume +
                                   ": not found"));
        }
        return im.Bump(vid);
      });
}


namespace {

std::string VersionRef(const std::string& ns, const std::string& volume, const Digest& d) {
  return "bdn:" + ns + "/" + volume + "@" + d.ToString();
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
  out += "head " + (r.head ? r.head->Hex() : std::string("-")) + " " +
         (r.head_moved ? "1" : "0");
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

}  // namespace

Result<DeleteResult> SqliteRegistry::DeleteVersions(const std::string& ns,
                                                    const std::string& volume,
                                                    const std::optional<Digest>& digest,
                                                    std::optional<int64_t> expected_sequence,
                                                    const std::string& idempotency_key) {
  const std::string request = "delete bdn:" + ns + "/" + volume + "@" +
                              (digest ? digest->ToString() : std::string("*")) +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  std::lock_guard lock(impl_->mu);
  return impl_->Transaction<DeleteResult>([&]() -> Result<DeleteResult> {
    Impl& im = *impl_;
    if (!idempotency_key.empty()) {
      std::string detail;
      BDN_ASSIGN_OR_RETURN(auto recorded, im.Recorded(idempotency_key, request, &detail));
      if (recorded) return DecodeDelete(recorded->sequence, detail);
    }
    BDN_ASSIGN_OR_RETURN(int64_t vid, im.RequireVolume(ns, volume));
    BDN_RETURN_IF_ERROR(im.CheckExpected(vid, VolumeName(ns, volume), expected_sequence));
    std::vector<Digest> targets;
    if (digest) {
      BDN_ASSIGN_OR_RETURN(VersionRecord v, im.ReadVersion(vid, ns, volume, *digest));
      if (v.lifecycle == Lifecycle::kDeleted) {
        return Err(ConflictError(
            "version " + VersionRef(ns, volume, *digest) + ": already deleted (at " +
            FormatTime(v.deleted_unix_ms.value_or(0)) + "; restorable until " +
            FormatTime(v.delete_after_unix_ms.value_or(0)) + ")"));
      }
      targets.push_back(*digest);
    } else {
      Stmt s(im.db,
             "SELECT digest FROM versions WHERE volume_id=?1 AND lifecycle='ALIVE' "
             "ORDER BY sequence DESC");
      s.Bind(1, vid);
      while (true) {
        BDN_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        targets.push_back(ParseStored(s.Text(0)));
      }
      if (targets.empty()) {
        return Err(NotFoundError(VolumeName(ns, volume) + ": has no live versions"));
      }
    }
    const int64_t now = im.NowMs();
    const int64_t after = now + im.options.retention.count();
    DeleteResult out;
    for (const Digest& d : targets) {
      DeletedVersion dv;
      dv.digest = d;
      dv.deleted_unix_ms = now;
      dv.delete_after_unix_ms = after;
      Stmt t(im.db, "SELECT name FROM tags WHERE volume_id=?1 AND digest=?2 ORDER BY name");
      t.Bind(1, vid).Bind(2, d.Hex());
      while (true) {
        BDN_ASSIGN_OR_RETURN(bool row, t.Step());
        if (!row) break;
        dv.tags_dropped.push_back(t.Text(0));
      }
      Stmt del(im.db, "DELETE FROM tags WHERE volume_id=?1 AND digest=?2");
      del.Bind(1, vid).Bind(2, d.Hex());
      BDN_RETURN_IF_ERROR(del.Run());
      Stmt up(im.db,
              "UPDATE versions SET lifecycle='DELETED', deleted_ms=?3, delete_after_ms=?4 "
              "WHERE volume_id=?1 AND digest=?2");
      up.Bind(1, vid).Bind(2, d.Hex()).Bind(3, now).Bind(4, after);
      BDN_RETURN_IF_ERROR(up.Run());
      out.deleted.push_back(std::move(dv));
    }
    Stmt h(im.db, "SELECT head FROM volumes WHERE id=?1");
    h.Bind(1, vid);
    BDN_ASSIGN_OR_RETURN(bool hrow, h.Step());
    std::optional<Digest> head;
    if (hrow && !h.IsNull(0)) head = ParseStored(h.Text(0));
    if (head && std::find(targets.begin(), targets.end(), *head) != targets.end()) {
      Stmt next(im.db,
                "SELECT digest FROM versions WHERE volume_id=?1 AND lifecycle='ALIVE' "
                "ORDER BY sequence DESC LIMIT 1");
      next.Bind(1, vid);
      BDN_ASSIGN_OR_RETURN(bool nrow, next.Step());
      Stmt up(im.db, "UPDATE volumes SET head=?2 WHERE id=?1");
      up.Bind(1, vid);
      if (nrow) {
        head = ParseStored(next.Text(0));
        up.Bind(2, head->Hex());
      } else {
        head.reset();
        up.BindNull(2);
      }
      BDN_RETURN_IF_ERROR(up.Run());
      out.head_moved = true;
    }
    out.head = head;
    BDN_ASSIGN_OR_RETURN(out.sequence, im.Bump(vid));
    if (!idempotency_key.empty()) {
      CommitResult rec;
      rec.sequence = out.sequence;
      BDN_RETURN_IF_ERROR(im.Record(idempotency_key, request, rec, EncodeDelete(out)));
    }
    return out;
  });
}

Result<RestoreResult> SqliteRegistry::RestoreVersion(const std::string& ns,
                                                     const std::string& volume,
                                                     const Digest& digest,
                                                     std::optional<int64_t> expected_sequence,
                                                     const std::string& idempotency_key) {
  const std::string request = "restore " + VersionRef(ns, volume, digest) +
                              " expected_sequence=" + ExpectedText(expected_sequence);
  std::lock_guard lock(impl_->mu);
  return impl_->Transaction<RestoreResult>([&]() -> Result<RestoreResult> {
    Impl& im = *impl_;
    if (!idempotency_key.empty()) {
      BDN_ASSIGN_OR_RETURN(auto recorded, im.Recorded(idempotency_key, request));
      if (recorded) return RestoreResult{recorded->sequence, recorded->head_updated};
    }
    BDN_ASSIGN_OR_RETURN(int64_t vid, im.RequireVolume(ns, volume));
    BDN_RETURN_IF_ERROR(im.CheckExpected(vid, VolumeName(ns, volume), expected_sequence));
    BDN_ASSIGN_OR_RETURN(VersionRecord v, im.ReadVersion(vid, ns, volume, digest));
    const std::string ref = VersionRef(ns, volume, digest);
    if (v.lifecycle == Lifecycle::kAlive) {
      return Err(ConflictError("version " + ref + ": is not deleted"));
    }
    const int64_t after = v.delete_after_unix_ms.value_or(0);
    if (after <= im.NowMs()) {
      return Err(FailedPreconditionError(
          "version " + ref + ": deleted at " + FormatTime(v.deleted_unix_ms.value_or(0)) +
          "; its retention ended at " + FormatTime(after) +
          ", so it can no longer be restored (its data may be gone; push the same tree again to "
          "make it a new version)"));
    }
    Stmt up(im.db,
            "UPDATE versions SET lifecycle='ALIVE', deleted_ms=NULL, delete_after_ms=NULL "
            "WHERE volume_id=?1 AND digest=?2");
    up.Bind(1, vid).Bind(2, digest.Hex());
    BDN_RETURN_IF_ERROR(up.Run());
    RestoreResult out;
    // Head moves back only to a version newer than the current head (or when there is none).
    Stmt h(im.db,
           "SELECT v.sequence FROM volumes o LEFT JOIN versions v ON v.volume_id=o.id AND "
           "v.digest=o.head WHERE o.id=?1");
    h.Bind(1, vid);
    BDN_ASSIGN_OR_RETURN(bool hrow, h.Step());
    if (!hrow || h.IsNull(0) || h.Int(0) < v.sequence) {
      Stmt set(im.db, "UPDATE volumes SET head=?2 WHERE id=?1");
      set.Bind(1, vid).Bind(2, digest.Hex());
      BDN_RETURN_IF_ERROR(set.Run());
      out.head_updated = true;
    }
    BDN_ASSIGN_OR_RETURN(out.sequence, im.Bump(vid));
    if (!idempotency_key.empty()) {
      CommitResult rec;
      rec.sequence = out.sequence;
      rec.head_updated = out.head_updated;
      BDN_RETURN_IF_ERROR(im.Record(idempotency_key, request, rec));
    }
    return out;
  });
}

Result<std::vector<VersionRecord>> SqliteRegistry::ListRetainedVersions() {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "SELECT o.ns, o.name, v.digest, v.sequence, v.lifecycle, v.created_ms, v.deleted_ms, "
         "v.delete_after_ms FROM versions v JOIN volumes o ON o.id=v.volume_id "
         "WHERE v.lifecycle='ALIVE' OR v.delete_after_ms>?1 ORDER BY o.ns, o.name, v.sequence");
  s.Bind(1, impl_->NowMs());
  std::vector<VersionRecord> out;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    VersionRecord v;
    v.ns = s.Text(0);
    v.volume = s.Text(1);
    v.digest = ParseStored(s.Text(2));
    v.sequence = s.Int(3);
    v.lifecycle = s.Text(4) == "DELETED" ? Lifecycle::kDeleted : Lifecycle::kAlive;
    v.created_unix_ms = s.Int(5);
    if (!s.IsNull(6)) v.deleted_unix_ms = s.Int(6);
    if (!s.IsNull(7)) v.delete_after_unix_ms = s.Int(7);
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<std::string>> SqliteRegistry::CheckConsistency() {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> out;
  {
    Stmt s(impl_->db, "PRAGMA integrity_check");
    while (true) {
      BDN_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (s.Text(0) != "ok") out.push_back("database: " + s.Text(0));
    }
  }
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
  for (const Rule& r : kRules) {
    Stmt s(impl_->db, r.sql);
    while (true) {
      BDN_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      const std::string vol = "bdn:" + s.Text(0) + "/" + s.Text(1);
      const std::string what = r.what;
      if (what == "tag") {
        out.push_back("tag \"" + s.Text(2) + "\" of " + vol + " names b3:" + s.Text(3) +
                      ", which is not a live version of the volume");
      } else if (what == "head") {
        out.push_back("head of " + vol + " names b3:" + s.Text(3) +
                      ", which is not a live version of the volume");
      } else {
        out.push_back("version " + vol + "@b3:" + s.Text(3) +
                      ": lifecycle, delete_after or sequence out of order (" + s.Text(2) + ")");
      }
    }
  }
  return out;
}

}  // namespace bdn

namespace bdn {
namespace {
class FlockClaim : public PushClaim {
 public:
  explicit FlockClaim(LockFile lock) : lock_(std::move(lock)) {}

 private:
  LockFile lock_;
};
}  // namespace

Result<std::unique_ptr<PushClaim>> SqliteRegistry::ClaimPush(const std::string& ns,
                                                             const std::string& volume) {
  std::filesystem::path p = impl_->path.parent_path() / "locks" / (ns + "~" + volume + ".lock");
  BDN_ASSIGN_OR_RETURN(LockFile lock, LockFile::TryLock(p, "push claim"));
  if (!lock.held()) {
    std::string holder = lock.holder_pid().empty() ? "" : " by pid " + lock.holder_pid();
    return Err(ConflictError(VolumeName(ns, volume) + ": push in progress" + holder));
  }
  return std::unique_ptr<PushClaim>(new FlockClaim(std::move(lock)));
}

}  // namespace bdn
