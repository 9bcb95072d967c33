// Small helpers shared by the SQLite stores of registry/ (the registry, the key store, the sync
// job store, the secret store): the database handle, a prepared statement with typed binds, the
// one mapping of SQLite errors to Status, and the flock(2) lock files of push claims and job
// leases.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn::internal {

// An open SQLite connection, closed (sqlite3_close) when its owner goes. sqlite3_open_v2 hands
// back a handle even when it fails; it goes into one of these too.
struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

// "<store> <file of db's main database>", e.g. "registry /d/registry.db": how the stores name
// themselves in messages.
std::string DatabaseName(sqlite3* db, std::string_view store);

// The one mapping of SQLite's last error on `db` to a Status, by sqlite3_extended_errcode (never
// by the text of the message) and, for an I/O error, the system errno (sqlite3_system_errno).
// `where` names the store, its file and the operation, e.g. "key store /d/registry.db: create
// key":
//   SQLITE_BUSY, SQLITE_LOCKED (any extended code) → Unavailable
//       "<where>: database is busy (<SQLite's message>)"
//   SQLITE_READONLY (any extended code), or any other error when `read_only` (a database
//       opened read-only) → PermissionDenied "<where>: read-only (<SQLite's message>)"
//   SQLITE_FULL; SQLITE_IOERR with ENOSPC or EDQUOT → FailedPrecondition
//       "<where>: no space left on device" (HTTP 412, exit 8, as the chunk store's full disk)
//   anything else → Internal "<where>: <SQLite's message>"
Status SqliteError(sqlite3* db, std::string_view where, bool read_only = false);

// Runs `sql` (statements without results: PRAGMAs, DDL, BEGIN/COMMIT). Errors: SqliteError(db,
// where, read_only).
Status Exec(sqlite3* db, const char* sql, std::string_view where, bool read_only = false);

// A prepared statement bound and stepped with small helpers; finalized on destruction. Its
// errors name the database as DatabaseName(db, store) ("registry /d/registry.db": the job and
// secret stores live in the registry's file).
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, std::string_view store = "registry");
  Stmt(const DbHandle& db, const char* sql, std::string_view store = "registry")
      : Stmt(db.get(), sql, store) {}
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // Returns true for a row, false when done. Errors: the statement's preparation failed, or
  // SqliteError(db, DatabaseName(db, store)) of the step.
  Result<bool> Step();
  Status Run() {
    auto r = Step();
    return r ? Status::Ok() : r.error();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  }

 private:
  sqlite3* db_;
  std::string_view store_;
  sqlite3_stmt* stmt_ = nullptr;
  Status prepared_;  // the preparation's error, if it failed
};

// Whether `table` has a column named `column` (PRAGMA table_info). Errors: those of Stmt::Step.
Result<bool> HasColumn(sqlite3* db, const std::string& table, std::string_view column,
                       std::string_view store);

// Adds `column` (its SQL definition `definition`, e.g. "detail TEXT NOT NULL DEFAULT ''") to
// `table` unless it has it: the schema upgrade of a database made by an older bdn. Another
// process that adds it at the same time is no error. Errors: SqliteError named
// DatabaseName(db, store).
Status AddColumnIfMissing(sqlite3* db, const std::string& table, std::string_view column,
                          const std::string& definition, std::string_view store);

// Opens or creates the SQLite database `db_path` (private to its owner, 0600: MakeDatabasePrivate)
// in WAL mode with synchronous=FULL and a 30 s busy timeout, and runs `schema` on it. `what`
// names the store in messages.
// Errors: Internal "<what> <db_path>: <SQLite's message>" when it cannot be opened; the
// SqliteError of a statement that fails, named "<what> <db_path>".
Result<DbHandle> OpenDatabase(const std::filesystem::path& db_path, std::string_view what,
                              const char* schema);

// An exclusive flock(2) on a file (created 0600 if missing), released when this object is
// destroyed or its process dies. The holder writes its pid into the file. Move-only.
class LockFile {
 public:
  LockFile() = default;

  // Tries to take the lock without waiting: held() tells whether it was taken; if not,
  // holder_pid() is the pid the holder wrote ("" if unknown). The directory of `path` is
  // created private (0700) if missing. Errors: ErrnoError "<what> <path>".
  static Result<LockFile> TryLock(const std::filesystem::path& path, std::string_view what);

  bool held() const { return fd_.valid(); }
  const std::string& holder_pid() const { return holder_pid_; }

 private:
  UniqueFd fd_;
  std::string holder_pid_;
};

}  // namespace bdn::internal
