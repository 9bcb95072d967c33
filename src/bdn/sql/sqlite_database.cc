// SqliteDatabase: sql::Database over one SQLite connection (serialized by a mutex) and flock(2)
// lock files.
#include "bdn/sql/sqlite_database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bdn/base/fd.h"
#include "bdn/base/mutex.h"
#include "bdn/base/private_files.h"
#include "bdn/base/units.h"

namespace bdn::sql {
namespace {

namespace fs = std::filesystem;

// "file:<path>" with the characters an SQLite URI gives a meaning escaped.
std::string UriPath(const fs::path& p) {
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

// Whether the file system holding `path` is writable and has no block left for this user
// (statvfs). A read-only one (a squashfs, a bdn mount) reports no block free as well, and is not
// full (from an attacking helper: its registry's writes said "no space left").
bool NoSpaceLeft(const fs::path& path) {
  struct statvfs st;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  return ::statvfs(dir.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) == 0 && st.f_bavail == 0;
}

// Opens `uri` with `flags`; on failure returns SQLite's message and closes the handle (which
// sqlite3_open_v2 hands back, holding the file open, even when it fails).
Result<sqlite3*> OpenHandle(const std::string& uri, int flags) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(uri.c_str(), &db, flags | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Err(InternalError(msg));
  }
  sqlite3_busy_timeout(db, 30000);
  return db;
}

// An exclusive flock(2) on a file (created 0600), released when this object is destroyed or
// its process dies. The holder writes its pid into the file.
class FlockLock : public HeldLock {
 public:
  explicit FlockLock(int fd) : fd_(fd) {}
  ~FlockLock() override { ::close(fd_); }

 private:
  int fd_;
};

class SqliteDatabase;

class SqliteSession : public Session {
 public:
  explicit SqliteSession(SqliteDatabase& db) : db_(db) {}
  Result<Rows> Query(std::string_view sql, const std::vector<Param>& params = {}) override;
  Result<int64_t> Exec(std::string_view sql, const std::vector<Param>& params = {}) override;
  std::string_view ForUpdate() const override { return ""; }
  Status LockForTransaction(std::string_view) override { return Status::Ok(); }

 private:
  // Prepares, binds and steps `sql`, collecting rows into `out` when given.
  Status Run(std::string_view sql, const std::vector<Param>& params, Rows* out);
  SqliteDatabase& db_;
};

class SqliteDatabase : public Database {
 public:
  SqliteDatabase(std::string what, fs::path path) : what_(std::move(what)), path_(std::move(path)) {
    name_ = path_.string();
  }
  ~SqliteDatabase() override {
    if (db_) sqlite3_close(db_);
  }

  Engine engine() const override { return Engine::kSqlite; }
  const std::string& name() const override { return name_; }
  const std::string& what() const override { return what_; }

  Status Read(const std::function<Status(Session&)>& body, Consistency consistency,
              std::string_view op) override {
    MutexLock lock(mu_);
    op_ = op;
    SqliteSession session(*this);
    if (consistency == Consistency::kStatement) return body(session);
    BDN_RETURN_IF_ERROR(ExecRaw("BEGIN"));
    Status s = body(session);
    if (s.ok()) {
      // What was read stands; but a COMMIT that failed (SQLITE_BUSY) leaves the transaction
      // open, and the next BEGIN on this connection would fail: ROLLBACK ends it instead.
      if (ExecRaw("COMMIT").ok()) return s;
      return ExecRaw("ROLLBACK");
    }
    // The body's error is what counts; a ROLLBACK that fails too leaves the transaction open,
    // and the next BEGIN on this connection reports that.
    ExecRaw("ROLLBACK").IgnoreError();
    return s;
  }

  Status Write(const std::function<Status(Session&)>& body, std::string_view op) override {
    MutexLock lock(mu_);
    op_ = op;
    BDN_RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    SqliteSession session(*this);
    Status s = body(session);
    if (s.ok()) {
      s = ExecRaw("COMMIT");
      if (s.ok()) return s;
    }
    // The body's (or COMMIT's) error is what counts; a ROLLBACK that fails too leaves the
    // transaction open, and the next BEGIN on this connection reports that.
    ExecRaw("ROLLBACK").IgnoreError();
    return s;
  }

  Result<LockAttempt> TryLock(std::string_view name) override {
    BDN_RETURN_IF_ERROR(CheckLockName(name));
    const std::string what = std::string(what_) + " lock";
    fs::path path = path_.parent_path() / "locks" / (std::string(name) + ".lock");
    BDN_RETURN_IF_ERROR(CreatePrivateDirectory(path.parent_path(), what));
    BDN_RETURN_IF_ERROR(CreatePrivateFile(path, what));
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kPrivateFileMode);
    if (fd < 0) return Err(ErrnoError(what + " " + path.string(), errno));
    LockAttempt out;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      char buf[32] = {0};
      ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      if (e != EWOULDBLOCK) return Err(ErrnoError(what + " " + path.string(), e));
      if (n > 0) out.holder = "pid " + std::string(buf, static_cast<size_t>(n));
      return out;
    }
    std::string pid = std::to_string(::getpid());
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    out.held = std::make_unique<FlockLock>(fd);
    return out;
  }

  Result<std::unique_ptr<HeldLock>> Lock(std::string_view name, LockMode mode,
                                         std::chrono::milliseconds wait) override {
    BDN_RETURN_IF_ERROR(CheckLockName(name));
    const std::string what = std::string(what_) + " lock";
    fs::path path = path_.parent_path() / "locks" / (std::string(name) + ".lock");
    BDN_RETURN_IF_ERROR(CreatePrivateDirectory(path.parent_path(), what));
    BDN_RETURN_IF_ERROR(CreatePrivateFile(path, what));
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kPrivateFileMode));
    if (!fd) return Err(ErrnoError(what + " " + path.string(), errno));
    const int op = (mode == LockMode::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (::flock(fd.get(), op) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return Err(ErrnoError(what + " " + path.string(), errno));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return Err(UnavailableError(what_ + " " + name_ + ": lock " + std::string(name) +
                                    ": not granted within " + std::to_string(wait.count()) +
                                    " ms"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::unique_ptr<HeldLock>(std::make_unique<FlockLock>(fd.Release()));
  }

  Result<std::vector<std::string>> CheckIntegrity() override {
    MutexLock lock(mu_);
    op_ = "";
    SqliteSession session(*this);
    BDN_ASSIGN_OR_RETURN(Rows rows, session.Query("PRAGMA integrity_check"));
    std::vector<std::string> out;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows.Text(i, 0) != "ok") out.push_back("database: " + rows.Text(i, 0));
    }
    return out;
  }

  // The Status of SQLite result `rc` (with the connection's message and errno).
  Status Error(int rc) const {
    mu_.AssertHeld();  // a session's (inside Read, Write or CheckIntegrity) or ExecRaw's caller
    const int sys = sqlite3_system_errno(db_);
    const std::string prefix = what_ + " " + name_ + ": " + (op_.empty() ? "" : op_ + ": ");
    const std::string msg = sqlite3_errmsg(db_);
    const int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
      return UnavailableError(prefix + "database is busy");
    }
    if (primary == SQLITE_FULL || (primary == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT)) ||
        (full_disk_ && primary == SQLITE_READONLY)) {
      return FailedPreconditionError(prefix + "no space left on device");
    }
    if (primary == SQLITE_READONLY || (read_only_ && primary != SQLITE_OK)) {
      return PermissionDeniedError(prefix + "read-only (" + msg + ")");
    }
    return InternalError(prefix + msg);
  }

  // Runs SQL without parameters (several statements allowed).
  Status ExecRaw(const char* sql) REQUIRES(mu_) {
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? Status::Ok() : Error(sqlite3_extended_errcode(db_));
  }

  Status Open(const SqliteOptions& options) {
    RemoveStaleTemporaries();
    bool made = false;  // this call's CreateWhole put the database, schema and all, in place
    if (struct stat st; ::lstat(path_.c_str(), &st) != 0 && errno == ENOENT) {
      BDN_RETURN_IF_ERROR(CreateWhole(options, &made));
    }
    BDN_RETURN_IF_ERROR(MakeDatabasePrivate(path_, what_));
    auto rw = OpenHandle(UriPath(path_), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    Status rw_error;
    if (rw) {
      db_ = *rw;
      {
        MutexLock lock(mu_);  // nothing else uses the handle yet; ExecRaw's contract (Write below
                              // takes it itself)
        rw_error = ExecRaw("PRAGMA journal_mode=WAL");
        if (rw_error.ok()) rw_error = ExecRaw("PRAGMA synchronous=FULL");
        if (rw_error.ok()) rw_error = ExecRaw("PRAGMA foreign_keys=ON");
        if (rw_error.ok() && !made) rw_error = ExecRaw(options.schema.c_str());
      }
      if (rw_error.ok() && options.upgrade) rw_error = Write(options.upgrade, "");
      if (rw_error.ok()) return Status::Ok();
      sqlite3_close(db_);
      db_ = nullptr;
    } else {
      rw_error = rw.error();
    }
    // A full disk is said as such, not taken for a read-only file (from a user: on a full disk,
    // every registry write then failed "read-only", exit 6, and they went looking at modes).
    // The database is still opened read-only for the reads (gc frees space on a full disk), and
    // its writes fail "no space left on device".
    full_disk_ = rw_error.code() == StatusCode::kFailedPrecondition || NoSpaceLeft(path_);
    std::error_code ec;
    // Changes in the write-ahead log that a read-only open cannot read (it needs the -shm file
    // beside it, or to make one) are not read past (from an attacking helper: a read-only
    // snapshot without registry.db-shm opened "immutable" showed the registry as it was before
    // them, and gc --dry-run planned to delete the packs of the versions it did not see).
    const fs::path wal = path_.string() + "-wal";
    const bool changes_in_wal = fs::file_size(wal, ec) > 0 && !ec;
    ec.clear();
    if (!options.read_only_probe.empty() && fs::exists(path_, ec)) {
      for (const char* mode : {"?mode=ro", "?immutable=1"}) {
        if (changes_in_wal && std::string_view(mode) == "?immutable=1") {
          if (full_disk_) break;
          return FailedPreconditionError(
              what_ + " " + name_ + ": cannot be read here: its write-ahead log " + wal.string() +
              " holds changes that a read-only open can read only with " + path_.string() +
              "-shm beside it (open it once where it can be written, or copy the -shm file too)");
        }
        auto ro = OpenHandle(UriPath(path_) + mode, SQLITE_OPEN_READONLY);
        if (!ro) continue;
        db_ = *ro;
        read_only_ = true;
        if (sqlite3_exec(db_, options.read_only_probe.c_str(), nullptr, nullptr, nullptr) ==
            SQLITE_OK) {
          return Status::Ok();
        }
        sqlite3_close(db_);
        db_ = nullptr;
        read_only_ = false;
      }
    }
    if (full_disk_)
      return FailedPreconditionError(what_ + " " + name_ + ": no space left on device");
    // "<what> <path>: <reason>", whichever step failed.
    std::string why = rw_error.message();
    const std::string prefix = what_ + " " + name_ + ": ";
    if (why.starts_with(prefix)) why = why.substr(prefix.size());
    return InternalError(prefix + why);
  }

  sqlite3* handle() const { return db_; }

  // Removes the temporary files of CreateWhole runs killed before they ended (from an attacking
  // helper: a `kill -9` of a first bdn serve left registry.db.new-<hex> and its journal): those
  // beside the database not changed for 10 minutes (a creation takes milliseconds). Best effort.
  void RemoveStaleTemporaries() {
    const std::string prefix = path_.filename().string() + ".new-";
    const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(prefix) || !fs::is_regular_file(it->symlink_status(ec))) continue;
      const auto changed = it->last_write_time(ec);
      if (!ec && now - changed > std::chrono::minutes(10)) fs::remove(it->path(), ec);
    }
  }

  // Makes a missing database whole before it appears at its path: its header and `options`'
  // schema written into a private file beside it, which is then renamed (or, where the file system
  // cannot rename without replacing, linked) in; where another process made it meanwhile, theirs
  // stays. From an attacking helper: a gc or a read run beside the first push into a new home found
  // registry.db empty, between its creation and its first write, and called it "a truncated
  // copy". A full disk leaves nothing at the path (a second helper: an empty registry.db was
  // left, refused by every later start once space was back). Where the file system can neither
  // rename without replacing nor link, or the temporary file cannot be made for another reason,
  // the open makes the database in place as before (and reports what fails there).
  // `*made` is set when this call put it in place. Errors: FailedPrecondition "<what> <path>: no
  // space left on device"; Internal with SQLite's message.
  Status CreateWhole(const SqliteOptions& options, bool* made) {
    auto suffix = RandomHex(8);
    if (!suffix) return Status::Ok();
    const std::string tmp = path_.string() + ".new-" + *suffix;
    auto remove_tmp = [&tmp] {
      for (const char* s : {"", "-wal", "-shm", "-journal"}) ::unlink((tmp + s).c_str());
    };
    const Status full = FailedPreconditionError(what_ + " " + name_ + ": no space left on device");
    UniqueFd file(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         kPrivateFileMode));
    if (!file) return errno == ENOSPC || errno == EDQUOT ? full : Status::Ok();
    file.Reset();
    auto handle = OpenHandle(UriPath(tmp), SQLITE_OPEN_READWRITE);
    if (!handle) {
      remove_tmp();
      return Status::Ok();
    }
    // The header and the schema: a disk that fills while the schema is written leaves nothing
    // at the path (a second attacking helper: a header without tables was left).
    Status written = Status::Ok();
    if (sqlite3_exec(*handle, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr) != SQLITE_OK ||
        sqlite3_exec(*handle, options.schema.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      const int code = sqlite3_extended_errcode(*handle);
      const int sys = sqlite3_system_errno(*handle);
      written = (code & 0xff) == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT || NoSpaceLeft(tmp)
                    ? full
                    : InternalError(what_ + " " + name_ + ": " + sqlite3_errmsg(*handle));
    }
    // The last connection's close checkpoints the write-ahead log into the file and removes it.
    if (sqlite3_close(*handle) != SQLITE_OK && written.ok()) {
      written = InternalError(what_ + " " + name_ + ": closing the new database failed");
    }
    struct stat wal;
    if (written.ok() && ::lstat((tmp + "-wal").c_str(), &wal) == 0) {
      written = InternalError(what_ + " " + name_ + ": the new database kept its write-ahead log");
    }
    if (written.ok()) {
      if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) == 0) {
        *made = true;
      } else if (errno != EEXIST && ::link(tmp.c_str(), path_.c_str()) == 0) {
        // EINVAL: a file system that cannot rename without replacing; then a link, and where
        // that cannot be made either, the open's own creation.
        *made = true;
      }
    }
    remove_tmp();
    return written;
  }

 private:
  friend class SqliteSession;
  const std::string what_;
  const fs::path path_;
  std::string name_;
  sqlite3* db_ = nullptr;
  bool read_only_ = false;
  bool full_disk_ = false;  // opened read-only because the disk was full
  Mutex mu_;
  std::string op_ GUARDED_BY(mu_);  // the operation of the call in progress (for messages)
};

Status SqliteSession::Run(std::string_view sql, const std::vector<Param>& params, Rows* out) {
  sqlite3* db = db_.handle();
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    return db_.Error(rc);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const int n = static_cast<int>(i + 1);
    if (const auto* t = std::get_if<std::string>(&params[i])) {
      sqlite3_bind_text(st, n, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
    } else if (const auto* v = std::get_if<int64_t>(&params[i])) {
      sqlite3_bind_int64(st, n, *v);
    } else {
      sqlite3_bind_null(st, n);
    }
  }
  const int columns = sqlite3_column_count(st);
  if (out) *out = Rows(columns);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!out) continue;
    for (int c = 0; c < columns; ++c) {
      if (sqlite3_column_type(st, c) == SQLITE_NULL) {
        out->Add(std::nullopt);
      } else {
        const unsigned char* t = sqlite3_column_text(st, c);
        out->Add(std::string(reinterpret_cast<const char*>(t),
                             static_cast<size_t>(sqlite3_column_bytes(st, c))));
      }
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_.Error(sqlite3_extended_errcode(db));
  return Status::Ok();
}

Result<Rows> SqliteSession::Query(std::string_view sql, const std::vector<Param>& params) {
  Rows rows;
  BDN_RETURN_IF_ERROR(Run(sql, params, &rows));
  return rows;
}

Result<int64_t> SqliteSession::Exec(std::string_view sql, const std::vector<Param>& params) {
  BDN_RETURN_IF_ERROR(Run(sql, params, nullptr));
  return static_cast<int64_t>(sqlite3_changes(db_.handle()));
}

}  // namespace

Result<std::shared_ptr<Database>> OpenSqlite(const fs::path& path, SqliteOptions options) {
  auto db = std::make_shared<SqliteDatabase>(options.what, path);
  BDN_RETURN_IF_ERROR(db->Open(options));
  return std::shared_ptr<Database>(std::move(db));
}

Result<std::vector<std::string>> ListSqliteTables(const fs::path& path) {
  BDN_ASSIGN_OR_RETURN(sqlite3 * db, OpenHandle(UriPath(path), SQLITE_OPEN_READONLY));
  std::vector<std::string> tables;
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(
      db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &stmt, nullptr);
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(stmt, 0);
    tables.emplace_back(name ? reinterpret_cast<const char*>(name) : "");
    rc = SQLITE_OK;
  }
  Status result = Status::Ok();
  if (rc != SQLITE_DONE) result = InternalError(path.string() + ": " + sqlite3_errmsg(db));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (!result.ok()) return Err(result);
  return tables;
}

Result<bool> HasColumn(Session& session, const std::string& table, const std::string& column) {
  BDN_ASSIGN_OR_RETURN(Rows rows, session.Query("SELECT name FROM pragma_table_info(?1)", {table}));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows.Text(i, 0) == column) return true;
  }
  return false;
}

}  // namespace bdn::sql
