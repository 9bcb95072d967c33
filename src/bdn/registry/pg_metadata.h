// The metadata of `bdn serve --db postgresql://...` (docs/postgresql.md): the
// registry, API keys, sync jobs, secrets and push claims of any number of replicas in one
// PostgreSQL database, its schema the versioned migrations in registry/pg_schema/ (component
// "registry"), applied at start.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>

#include "bdn/registry/key_store.h"
#include "bdn/registry/push_claims.h"
#include "bdn/registry/registry.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/sql/postgres.h"

namespace bdn {

// The migrations of the "registry" component, in version order (registry/pg_schema/*.sql,
// embedded at build time).
std::span<const sql::Migration> PgMetadataMigrations();

// Applies PgMetadataMigrations to the pool's database (sql::PgPool::Migrate, "registry").
// Errors: Migrate's.
Status MigratePgMetadata(sql::PgPool& pool);

// Every metadata store of a server, over one pool.
struct PgMetadata {
  std::shared_ptr<sql::PgPool> pool;
  std::shared_ptr<SqlRegistry> registry;
  std::shared_ptr<SqlKeyStore> keys;
  std::shared_ptr<SqlSyncJobStore> jobs;
  std::shared_ptr<SqlSecretStore> secrets;
  std::shared_ptr<PgPushClaims> claims;
};

// Connects (sql::PgPool::Open), migrates (MigratePgMetadata) and makes the stores; push claims
// live for `claim_ttl` unless renewed. `opened`, if set, gets the pool before the migrations
// (which may wait for another replica's): a server stopping then shuts it down
// (PgPool::Shutdown). Errors: PgPool::Open's and Migrate's.
Result<PgMetadata> OpenPgMetadata(
    sql::PgOptions options, RegistryOptions registry_options, std::chrono::milliseconds claim_ttl,
    const std::function<void(const std::shared_ptr<sql::PgPool>&)>& opened = nullptr);

}  // namespace bdn
