// LockFile: the flock(2) lock files of push claims and sync job leases.
#include "bdn/registry/sqlite_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "bdn/base/private_files.h"

namespace bdn::internal {

Result<sqlite3*> OpenDatabase(const std::filesystem::path& db_path, std::string_view what,
                              const char* schema) {
  MakeDatabasePrivate(db_path, what);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(db_path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  const std::string name = std::string(what) + " " + db_path.string() + ": ";
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Err(InternalError(name + msg));
  }
  sqlite3_busy_timeout(db, 30000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", schema}) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      sqlite3_close(db);
      return Err(InternalError(name + msg));
    }
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
