// PostgreSQL under sql::Database (libpq): the metadata of any number of `bdn serve` replicas in one
// database (docs/postgresql.md). A PgPool holds a bounded set of connections that
// every store of a process shares; a lost connection (a restarted or failed-over server) is
// replaced on the next call, and a transaction that had not reached COMMIT is run again on the
// new one. Schemas are versioned migrations, applied at start under an advisory lock so that
// replicas starting together apply each exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "bdn/sql/database.h"

namespace bdn::sql {

struct PgOptions {
  // A libpq connection URI (postgresql://user@host:port/dbname?sslmode=require) or key=value
  // string. The password belongs in PGPASSWORD or ~/.pgpass (libpq reads both), not here:
  // a URL on a command line is visible to every user of the machine.
  std::string url;
  // Connections the pool keeps open at most; callers beyond them wait for one.
  size_t max_connections = 8;
  // How long a call waits for a free connection before it fails with Unavailable.
  std::chrono::milliseconds acquire_timeout{30000};
  // libpq's connect_timeout, unless the URL sets its own (whole seconds, at least 2).
  std::chrono::seconds connect_timeout{5};
  // PostgreSQL's idle_in_transaction_session_timeout for every connection of the pool (sent as
  // a startup option after the URL's own `options`): how long the server lets one of our
  // transactions wait on us between statements before it ends the session and rolls the
  // transaction back. A process that is stopped (SIGSTOP, a frozen VM) or cut off in the middle
  // of a commit would otherwise hold the rows it locked (a volume, a sync job) and keep every
  // other replica's writes to them waiting until it resumes. Our transactions are a few
  // statements with no waiting between them. 0: the server's setting.
  std::chrono::milliseconds idle_in_transaction_timeout{10000};
};

// One versioned step of a component's schema: applied once, in order of `version` (1, 2, ...),
// each in its own transaction, and recorded in the table bdn_schema_migrations (component,
// version, name, applied_at).
struct Migration {
  int version = 0;
  std::string name;  // e.g. "initial"
  std::string sql;   // any number of statements, no parameters
};

// A bounded pool of connections to one PostgreSQL database. Thread-safe.
class PgPool {
 public:
  // Parses `options.url` and opens one connection to check that the server answers.
  // Errors: InvalidArgument "--db: <libpq's complaint about the URL>" for a malformed URL;
  // Unavailable "database <name>: cannot connect: <libpq's message>".
  static Result<std::shared_ptr<PgPool>> Open(PgOptions options);
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // The database without credentials: "postgresql://host:port/dbname" (a socket directory
  // shows as "postgresql:///dbname?host=/dir").
  const std::string& name() const;

  // Brings `component`'s schema (e.g. "registry") up to the last of `migrations` (sorted by
  // version, 1, 2, ... without gaps): under a session advisory lock that every bdn process
  // takes before it migrates (replicas starting at once wait for each other), applies each
  // migration newer than the recorded version in its own transaction, and records it. Safe to
  // call at every start. Errors: FailedPrecondition "database <name>: the <component> schema is
  // at version N, newer than this bdn knows (M); run a bdn at least as new as the one that
  // migrated it"; Internal "database <name>: migration <component> <version> (<name>): <error>"
  // (that migration is rolled back; earlier ones stay); InvalidArgument for a list out of
  // order; Unavailable when the server cannot be reached.
  Status Migrate(std::string_view component, std::span<const Migration> migrations);

  // A Database over this pool for the store `what` (how its messages name it): see Database.
  // Locks are session advisory locks on pg_try_advisory_lock(hashtextextended('bdn/<name>', 0)),
  // each on a connection of its own outside the pool; whose holder is named by the
  // application_name of its connection ("bdn pid <pid> on <host>").
  std::shared_ptr<Database> Use(std::string what);

  // Ends every database call of this pool's Databases, running or later, with Unavailable
  // "<what> <name>: [<op>: ]shutting down" (reason kShuttingDown): for a server stopping while
  // the database does not answer (a frozen or partitioned server, whose TCP connection stays
  // up and whose calls would otherwise wait for ever). A call ended mid-statement leaves its
  // transaction to the server (the connection is closed, so it rolls back unless its COMMIT had
  // already been sent). Thread-safe; cannot be undone.
  void Shutdown();

  struct Impl;

 private:
  explicit PgPool(std::unique_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// The URL as messages may show it (see PgPool::name). Errors: InvalidArgument for a malformed
// URL, with libpq's reason.
Result<std::string> RedactedDatabaseName(const std::string& url);

// `sql` with its parameters ?1, ?2, ... written as PostgreSQL's $1, $2, ...; text inside
// single quotes, double quotes and comments is left alone.
std::string PostgresParameters(std::string_view sql);

}  // namespace bdn::sql
