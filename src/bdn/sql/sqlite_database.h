// SQLite under sql::Database: one database file in a data directory (WAL mode, synchronous=FULL,
// a 30 s busy timeout), shared safely by several processes; write transactions are BEGIN
// IMMEDIATE, so they exclude each other; locks are flock(2)s on files beside the database.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bdn/sql/database.h"

namespace bdn::sql {

struct SqliteOptions {
  // The store, as messages name it ("registry", "key store").
  std::string what;
  // Run at every open: CREATE TABLE IF NOT EXISTS ... of the store's tables.
  std::string schema;
  // Run after `schema` in a write transaction, for files older than the schema: adds the
  // columns they lack (HasColumn). May be empty.
  std::function<Status(Session&)> upgrade;
  // When the file cannot be opened for writing (read-only file system, another owner, full
  // disk) but exists: open it read-only if this statement succeeds on it (every write then
  // fails with PermissionDenied). Empty: such a file fails to open.
  std::string read_only_probe;
};

// Opens or creates the database `path` (private to its owner, 0600: MakeDatabasePrivate).
// Errors: Internal "<what> <path>: <SQLite's message>" (e.g. "file is not a database");
// PermissionDenied "<what> <path>: owned by uid 1001 (mallory), not by this user (uid 0); use a
// directory of your own" (or "...: a symlink owned by ...") when another user's file or symlink
// is at `path` or at its -wal, -shm or -journal name (MakeDatabasePrivate).
Result<std::shared_ptr<Database>> OpenSqlite(const std::filesystem::path& path,
                                             SqliteOptions options);

// The names of the tables of the SQLite database `path`, sorted, read without changing it (opened
// read-only; nothing is created). Errors: Internal "<SQLite's message>" or "<path>: <message>".
Result<std::vector<std::string>> ListSqliteTables(const std::filesystem::path& path);

// Whether `table` has a column `column` (SQLite's pragma_table_info; for SqliteOptions::upgrade).
Result<bool> HasColumn(Session& session, const std::string& table, const std::string& column);

}  // namespace bdn::sql
