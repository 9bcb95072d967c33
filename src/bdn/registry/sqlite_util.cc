// The SQLite helpers of registry/: the error mapping, statements, opening a database, lock files.
#include "bdn/registry/sqlite_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "bdn/base/private_files.h"

namespace bdn::internal {

std::string DatabaseName(sqlite3* db, std::string_view store) {
  const char* file = sqlite3_db_filename(db, "main");
  return std::string(store) + " " + (file != nullptr ? file : "");
}

Status SqliteError(sqlite3* db, std::string_view where, bool read_only) {
  const int code = sqlite3_extended_errcode(db);
  const int primary = code & 0xff;  // the extended codes refine a primary one in the low byte
  const std::string w(where);
  const std::string message = sqlite3_errmsg(db);
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return UnavailableError(w + ": database is busy (" + message + ")");
  }
  if (primary == SQLITE_READONLY || read_only) {
    return PermissionDeniedError(w + ": read-only (" + message + ")");
  }
  const int sys = sqlite3_system_errno(db);
  if (primary == SQLITE_FULL || (primary == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT))) {
    return FailedPreconditionError(w + ": no space left on device");
  }
  return InternalError(w + ": " + message);
}

Status Exec(sqlite3* db, const char* sql, std::string_view where, bool read_only) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError(db, where, read_only);
  }
  return Status::Ok();
}

Stmt::Stmt(sqlite3* db, const char* sql, std::string_view store) : db_(db), store_(store) {
  if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
    prepared_ = SqliteError(db, DatabaseName(db, store));
  }
}

Result<bool> Stmt::Step() {
  if (!prepared_.ok()) return Err(prepared_);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Err(SqliteError(db_, DatabaseName(db_, store_)));
}

Result<bool> HasColumn(sqlite3* db, const std::string& table, std::string_view column,
                       std::string_view store) {
  Stmt s(db, ("SELECT name FROM pragma_table_info('" + table + "')").c_str(), store);
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return false;
    if (s.Text(0) == column) return true;
  }
}

Status AddColumnIfMissing(sqlite3* db, const std::string& table, std::string_view column,
                          const std::string& definition, std::string_view store) {
  BDN_ASSIGN_OR_RETURN(bool has, HasColumn(db, table, column, store));
  if (has) return Status::Ok();
  const std::string sql = "ALTER TABLE " + table + " ADD COLUMN " + definition;
  Status added = Exec(db, sql.c_str(), DatabaseName(db, store));
  if (added.ok()) return added;
  // Another process added it meanwhile: then it is there now.
  BDN_ASSIGN_OR_RETURN(has, HasColumn(db, table, column, store));
  return has ? Status::Ok() : added;
}

Result<DbHandle> OpenDatabase(const std::filesystem::path& db_path, std::string_view what,
                              const char* schema) {
  MakeDatabasePrivate(db_path, what);
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(db_path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  DbHandle db(raw);
  const std::string name = std::string(what) + " " + db_path.string();
  if (rc != SQLITE_OK) {
    return Err(InternalError(name + ": " + (db ? sqlite3_errmsg(db.get()) : "out of memory")));
  }
  sqlite3_busy_timeout(db.get(), 30000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", schema}) {
    BDN_RETURN_IF_ERROR(Exec(db.get(), sql, name));
  }
  return db;
}

Result<LockFile> LockFile::TryLock(const std::filesystem::path& path, std::string_view what) {
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(path.parent_path(), what));
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kPrivateFileMode));
  if (!fd) return Err(ErrnoError(std::string(what) + " " + path.string(), errno));
  LockFile out;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char buf[32] = {0};
    ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    if (e != EWOULDBLOCK) return Err(ErrnoError(std::string(what) + " " + path.string(), e));
    if (n > 0) out.holder_pid_.assign(buf, static_cast<size_t>(n));
    return out;
  }
  std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd.get(), 0) == 0) (void)!::pwrite(fd.get(), pid.data(), pid.size(), 0);
  out.fd_ = std::move(fd);
  return out;
}

}  // namespace bdn::internal
