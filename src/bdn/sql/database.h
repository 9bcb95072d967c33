// sql::Database: the one seam between the metadata stores (registry/: versions, keys, sync jobs,
// secrets, push claims) and the SQL engine under them, SQLite in a data directory
// (sqlite_database.h) or PostgreSQL shared by any number of servers (postgres.h). A store writes
// its statements once, with numbered parameters (?1, ?2, ...) in the SQL both engines read the
// same, and runs them in transactions whose isolation and retries the engine supplies.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bdn/base/status.h"

namespace bdn::sql {

// A statement parameter: NULL, an integer or text.
using Param = std::variant<std::nullptr_t, int64_t, std::string>;

// The rows of one statement's result, read whole. Columns are numbered from 0.
class Rows {
 public:
  Rows() = default;
  explicit Rows(int columns) : columns_(columns) {}

  size_t size() const { return columns_ == 0 ? 0 : cells_.size() / static_cast<size_t>(columns_); }
  bool empty() const { return cells_.empty(); }
  bool IsNull(size_t row, int col) const { return !Cell(row, col).has_value(); }
  // The value as text ("" for NULL).
  std::string Text(size_t row, int col) const { return Cell(row, col).value_or(std::string()); }
  // The value as an integer (0 for NULL or text that is not a number).
  int64_t Int(size_t row, int col) const;

  // For the engines: appends one cell of the current row (rows are filled left to right).
  void Add(std::optional<std::string> cell) { cells_.push_back(std::move(cell)); }

 private:
  const std::optional<std::string>& Cell(size_t row, int col) const {
    return cells_[row * static_cast<size_t>(columns_) + static_cast<size_t>(col)];
  }
  int columns_ = 0;
  std::vector<std::optional<std::string>> cells_;
};

// One connection's statements, inside the transaction (or read) that handed it out. Statements
// use ?1, ?2, ... for their parameters (rewritten to $1, $2, ... for PostgreSQL), and only SQL
// that both engines read alike: INSERT ... ON CONFLICT (...) DO UPDATE/NOTHING, RETURNING,
// count(*) FILTER (WHERE ...), no INSERT OR REPLACE, no engine-specific functions. Errors are
// mapped once by the engine (see Database). Not thread-safe: one thread uses a session.
class Session {
 public:
  virtual ~Session() = default;
  // Runs one statement and returns its rows.
  virtual Result<Rows> Query(std::string_view sql, const std::vector<Param>& params = {}) = 0;
  // Runs one statement; returns how many rows it inserted, changed or deleted.
  virtual Result<int64_t> Exec(std::string_view sql, const std::vector<Param>& params = {}) = 0;
  // " FOR UPDATE" where the engine locks rows (PostgreSQL), "" where a write transaction already
  // excludes every other writer (SQLite): appended to the SELECT that reads the row a write
  // changes, so concurrent writers of that row take turns instead of losing an update.
  virtual std::string_view ForUpdate() const = 0;
  // Inside a write transaction: waits for the lock named `name` and holds it until the
  // transaction ends (PostgreSQL: pg_advisory_xact_lock; SQLite: nothing to do). For writes
  // that must see each other although they change no common row (the first admin key; two uses
  // of one idempotency key). Errors: as Query's.
  virtual Status LockForTransaction(std::string_view name) = 0;
};

// A lock held while this object lives, and released when its holder process (or, for
// PostgreSQL, its database connection) dies.
class HeldLock {
 public:
  virtual ~HeldLock() = default;
  // Whether the lock is still held: false once it is lost behind its holder's back (PostgreSQL:
  // the lock's connection ended, by a server restart, a terminated backend or a network
  // failure; the server then lets another holder take it). An flock(2) lasts as long as its
  // process: always true. Errors: Unavailable when the engine cannot tell now (the pool is
  // shutting down, reason kShuttingDown). Not thread-safe: one caller at a time.
  virtual Result<bool> Held() { return true; }
};

// The answer of Database::TryLock.
struct LockAttempt {
  std::unique_ptr<HeldLock> held;  // null: another holder has it
  std::string holder;              // when null: who holds it, if known ("pid 123"), else ""
};

enum class Engine { kSqlite, kPostgres };

// How a read sees the database.
enum class Consistency {
  kSnapshot,   // every statement of the read sees one snapshot (multi-statement reads)
  kStatement,  // each statement sees what is committed when it runs (one-statement reads)
};

// A database the stores share. Errors of every call carry "<what> <name>: [<op>: ]<reason>",
// where `what` names the store ("registry", "key store"), `name` the database (a file, or the
// PostgreSQL URL without its credentials), and `op` the operation when the caller gives one:
//   - Unavailable: busy or locked past the engine's wait, or the PostgreSQL server cannot be
//     reached or its connection was lost (a retry may succeed);
//   - FailedPrecondition "...: no space left on device";
//   - PermissionDenied "...: read-only (<engine's message>)" on a read-only database or one the
//     role may not write;
//   - InvalidArgument for text PostgreSQL cannot store (not UTF-8);
//   - Internal for anything else, with the engine's message.
// Thread-safe.
class Database {
 public:
  virtual ~Database() = default;
  virtual Engine engine() const = 0;
  // The database as messages show it: the SQLite file, or postgresql://host:port/dbname.
  virtual const std::string& name() const = 0;
  // The store it serves, as messages name it ("registry").
  virtual const std::string& what() const = 0;

  // Runs `body` with a session that only reads. Retried once on a new connection when the
  // PostgreSQL connection turns out lost. Returns body's Status (or the engine's error).
  virtual Status Read(const std::function<Status(Session&)>& body,
                      Consistency consistency = Consistency::kSnapshot,
                      std::string_view op = "") = 0;
  // Runs `body` in one write transaction: committed when body returns OK, rolled back when it
  // returns an error (which Write returns). Isolation: no two writes interleave on a row read
  // with ForUpdate() or a name locked with LockForTransaction (SQLite: no two writes interleave
  // at all). `body` may run more than once (PostgreSQL: after a serialization failure, a
  // deadlock, or a connection lost before COMMIT), so it must keep no state between runs but
  // what it returns. A connection lost during COMMIT leaves the outcome unknown: Unavailable
  // "...: connection lost while committing; the write may or may not have been applied".
  virtual Status Write(const std::function<Status(Session&)>& body, std::string_view op = "") = 0;
  // Takes the lock named `name` (letters, digits and "._~-", at most 200 characters) without
  // waiting. SQLite: an flock(2) on <database dir>/locks/<name>.lock; PostgreSQL: a session
  // advisory lock on a connection of its own, which the server drops when the connection ends.
  // Errors: I/O errors; Unavailable when PostgreSQL cannot be reached.
  virtual Result<LockAttempt> TryLock(std::string_view name) = 0;
  // Waits up to `wait` for the lock named `name` (as TryLock's) in `mode` and holds it while the
  // returned object lives: any number of kShared holders at once, or one kExclusive holder (the
  // two lock spaces are TryLock's). PostgreSQL: a session advisory lock (shared or not) on a
  // connection of its own, waited for under lock_timeout; SQLite: flock(2) LOCK_SH or LOCK_EX
  // on the same file TryLock uses, polled. Errors: InvalidArgument for a bad name; Unavailable
  // "<what> <name>: lock <name>: not granted within <wait> ms" when the wait ends first, or when
  // PostgreSQL cannot be reached; I/O errors.
  enum class LockMode { kShared, kExclusive };
  virtual Result<std::unique_ptr<HeldLock>> Lock(std::string_view name, LockMode mode,
                                                 std::chrono::milliseconds wait) = 0;
  // Problems the engine finds in its own files, one line each (SQLite: PRAGMA integrity_check;
  // PostgreSQL: none, it checks itself).
  virtual Result<std::vector<std::string>> CheckIntegrity() = 0;
};

// `body`'s value, read in one Database::Read (see there).
template <typename T>
Result<T> ReadValue(Database& db, const std::function<Result<T>(Session&)>& body,
                    Consistency consistency = Consistency::kSnapshot, std::string_view op = "") {
  std::optional<T> out;
  Status s = db.Read(
      [&](Session& session) -> Status {
        Result<T> r = body(session);
        if (!r) return r.error();
        out = std::move(*r);
        return Status::Ok();
      },
      consistency, op);
  if (!s.ok()) return Err(s);
  return std::move(*out);
}

// `body`'s value, written in one Database::Write (see there; body may run more than once).
template <typename T>
Result<T> WriteValue(Database& db, const std::function<Result<T>(Session&)>& body,
                     std::string_view op = "") {
  std::optional<T> out;
  Status s = db.Write(
      [&](Session& session) -> Status {
        out.reset();
        Result<T> r = body(session);
        if (!r) return r.error();
        out = std::move(*r);
        return Status::Ok();
      },
      op);
  if (!s.ok()) return Err(s);
  return std::move(*out);
}

// The Status of a Result (OK when it holds a value).
template <typename T>
Status ToStatus(const Result<T>& r) {
  return r ? Status::Ok() : r.error();
}

// Whether `name` may name a lock (TryLock): 1 to 200 characters of A-Z a-z 0-9 . _ ~ -.
bool IsValidLockName(std::string_view name);
// OK when IsValidLockName(name), else InvalidArgument "lock \"<name>\": not a valid name".
Status CheckLockName(std::string_view name);

}  // namespace bdn::sql
