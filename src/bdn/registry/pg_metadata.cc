// OpenPgMetadata: the PostgreSQL metadata stores and their migrations.
#include "bdn/registry/pg_metadata.h"

namespace bdn {
namespace {

const sql::Migration kMigrations[] = {
#include "registry_pg_schema.inc"
};

}  // namespace

std::span<const sql::Migration> PgMetadataMigrations() { return kMigrations; }

Status MigratePgMetadata(sql::PgPool& pool) {
  return pool.Migrate("registry", PgMetadataMigrations());
}

Result<PgMetadata> OpenPgMetadata(
    sql::PgOptions options, RegistryOptions registry_options, std::chrono::milliseconds claim_ttl,
    const std::function<void(const std::shared_ptr<sql::PgPool>&)>& opened) {
  PgMetadata m;
  BDN_ASSIGN_OR_RETURN(m.pool, sql::PgPool::Open(std::move(options)));
  if (opened) opened(m.pool);
  BDN_RETURN_IF_ERROR(MigratePgMetadata(*m.pool));
  m.registry = std::make_shared<SqlRegistry>(m.pool->Use("registry"), std::move(registry_options));
  m.keys = std::make_shared<SqlKeyStore>(m.pool->Use("key store"));
  m.jobs = std::make_shared<SqlSyncJobStore>(m.pool->Use("sync job store"));
  m.secrets = std::make_shared<SqlSecretStore>(m.pool->Use("secret store"));
  m.claims = std::make_shared<PgPushClaims>(m.pool->Use("push claims"), claim_ttl);
  return m;
}

}  // namespace bdn
