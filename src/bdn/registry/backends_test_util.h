// The two databases every metadata store test runs over (GoogleTest typed suites): SQLite (a file
// in a private temporary directory) and PostgreSQL (a schema of its own, migrated, on a server
// that the test binary starts once: testing/pg_server.h). Each backend opens any number of
// handles on one database, each like another process: a new SQLite connection, or a new pool of
// PostgreSQL connections. Header-only; for tests only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>

#include "bdn/registry/key_store.h"
#include "bdn/registry/pg_metadata.h"
#include "bdn/registry/registry.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/sql/pg_test_util.h"
#include "bdn/sql/postgres.h"
#include "bdn/testing/test_util.h"

namespace bdn::testutil {

class SqliteBackend {
 public:
  static constexpr const char* kName = "Sqlite";
  // Nothing to prepare; "" means ready.
  std::string Prepare() { return dir_.path().empty() ? "mkdtemp failed" : ""; }
  std::filesystem::path file() const { return dir_.path() / "registry.db"; }

  Result<std::unique_ptr<Registry>> OpenRegistry(RegistryOptions o = {}) {
    BDN_ASSIGN_OR_RETURN(auto r, SqliteRegistry::Open(file(), std::move(o)));
    return std::unique_ptr<Registry>(std::move(r));
  }
  Result<std::unique_ptr<KeyStore>> OpenKeys() {
    BDN_ASSIGN_OR_RETURN(auto k, SqliteKeyStore::Open(file()));
    return std::unique_ptr<KeyStore>(std::move(k));
  }
  Result<std::unique_ptr<SyncJobStore>> OpenJobs() {
    BDN_ASSIGN_OR_RETURN(auto j, SqliteSyncJobStore::Open(file()));
    return std::unique_ptr<SyncJobStore>(std::move(j));
  }
  Result<std::unique_ptr<SecretStore>> OpenSecrets() {
    BDN_ASSIGN_OR_RETURN(auto s, SqliteSecretStore::Open(file()));
    return std::unique_ptr<SecretStore>(std::move(s));
  }

 private:
  TempDir dir_{"bdn_registry_test"};
};

class PostgresBackend {
 public:
  static constexpr const char* kName = "Postgres";
  // A fresh database with the metadata schema; returns why not ("" when ready).
  std::string Prepare() {
    std::string why;
    url_ = SharedPgServer::Get().NewDatabase(&why);
    if (url_.empty()) return "no PostgreSQL: " + why;
    auto pool = Pool();
    if (!pool) return pool.error().message();
    Status s = MigratePgMetadata(**pool);
    return s.ok() ? "" : s.message();
  }
  const std::string& url() const { return url_; }
  // A new pool on the database (a new "process").
  Result<std::shared_ptr<sql::PgPool>> Pool() { return sql::PgPool::Open({.url = url_}); }

  Result<std::unique_ptr<Registry>> OpenRegistry(RegistryOptions o = {}) {
    BDN_ASSIGN_OR_RETURN(auto pool, Pool());
    return std::unique_ptr<Registry>(new SqlRegistry(pool->Use("registry"), std::move(o)));
  }
  Result<std::unique_ptr<KeyStore>> OpenKeys() {
    BDN_ASSIGN_OR_RETURN(auto pool, Pool());
    return std::unique_ptr<KeyStore>(new SqlKeyStore(pool->Use("key store")));
  }
  Result<std::unique_ptr<SyncJobStore>> OpenJobs() {
    BDN_ASSIGN_OR_RETURN(auto pool, Pool());
    return std::unique_ptr<SyncJobStore>(new SqlSyncJobStore(pool->Use("sync job store")));
  }
  Result<std::unique_ptr<SecretStore>> OpenSecrets() {
    BDN_ASSIGN_OR_RETURN(auto pool, Pool());
    return std::unique_ptr<SecretStore>(new SqlSecretStore(pool->Use("secret store")));
  }

 private:
  std::string url_;
};

using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;

// Names the typed tests "Sqlite" and "Postgres".
struct BackendName {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

}  // namespace bdn::testutil
