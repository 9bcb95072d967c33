// Small helpers shared by the SQLite stores of registry/ (the registry, the sync job store, the
// secret store): a prepared statement with typed binds and the one mapping of SQLite errors to
// Status, and the flock(2) lock files of push claims and job leases.
#pragma once

#include <sqlite3.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/status.h"

namespace bdn::internal {

// A prepared statement bound and stepped with small helpers; finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
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
  // Returns true for a row, false when done. Errors: Unavailable when busy; FailedPrecondition
  // "registry <file>: no space left on device" on a full disk (as Exec: HTTP 412, exit 8);
  // PermissionDenied on a read-only database; else Internal with SQLite's message.
  Result<bool> Step() {
    if (rc_ != SQLITE_OK) return Err(InternalError(std::string("registry: ") + sqlite3_errmsg(db_)));
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if (rc == SQLITE_BUSY) return Err(UnavailableError("registry: database is busy"));
    const std::string file = sqlite3_db_filename(db_, "main") ? sqlite3_db_filename(db_, "main") : "";
    const int sys = sqlite3_system_errno(db_);
    if ((rc & 0xff) == SQLITE_FULL ||
        ((rc & 0xff) == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT))) {
      return Err(FailedPreconditionError("registry " + file + ": no space left on device"));
    }
    if ((rc & 0xff) == SQLITE_READONLY) {
      return Err(PermissionDeniedError("registry " + file + ": read-only (" +
                                       sqlite3_errmsg(db_) + ")"));
    }
    return Err(InternalError(std::string("registry: ") + sqlite3_errmsg(db_)));
  }
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
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};


// Opens or creates the SQLite database `db_path` (private to its owner, 0600: MakeDatabasePrivate)
// in WAL mode with synchronous=FULL and a 30 s busy timeout, and runs `schema` on it. The caller
// owns the handle (sqlite3_close). `what` names the store in messages.
// Errors: Internal "<what> <db_path>: <SQLite's message>".
Result<sqlite3*> OpenDatabase(const std::filesystem::path& db_path, std::string_view what,
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
