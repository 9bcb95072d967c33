// SecretStore: named credentials for sync sources (docs/sync.md, "Secrets"), kept as opaque
// sealed bytes: the store never sees a plaintext value (sync::SecretVault encrypts before it
// stores). A sibling of Registry; the SQLite implementation shares the registry's file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/base/status.h"

namespace bdn {
namespace sql {
class Database;
}  // namespace sql

// The namespace list that lets jobs of every namespace use a secret.
inline constexpr std::string_view kSecretAllNamespaces = "*";

struct SecretInfo {
  std::string name;
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  // The namespaces whose jobs may use the secret on a server (docs/sync.md, "Secrets"): sorted,
  // unique; {"*"} for every namespace; empty for none (only jobs started with an admin key for
  // every namespace, and embedded jobs, may use it).
  std::vector<std::string> namespaces;
};

// How a sync job may use the secret it names (docs/sync.md, "Secrets"): decided by the key that
// starts the job, recorded with the job (SyncJobRecord::secret_use) and checked again at every
// run (sync::SecretVault::CheckUse, RevealFor).
enum class SecretUse {
  // Any secret: a job started with an admin key for every namespace ("*"), or by the embedded
  // CLI (its one user owns every secret).
  kAny,
  // Only a secret whose namespaces hold the job's namespace, or are {"*"}: a job started with
  // any other key.
  kJobNamespace,
  // A job recorded before jobs kept how they were started (a job table upgraded from before, or
  // a row an older server wrote): as kJobNamespace. Not more: any key could start such a job
  // (the release before let a namespace's key name a secret set for its namespace, and the one
  // before that any secret), so a secret set again for admins alone, with no namespaces, is not
  // for it. A job an admin started with another secret is started again by that admin (which
  // widens it to kAny).
  kLegacyJob,
};

// Checks a secret name: 1 to 128 characters of A-Z a-z 0-9 . _ -, starting with a letter or
// digit. Errors: InvalidArgument "secret name \"x\": must be 1 to 128 characters of A-Z, a-z,
// 0-9, '.', '_' and '-', starting with a letter or digit"; a name with a character it may not hold
// is shown only up to it ("secret name \"tok\" then \"=\" and 6 more characters (not shown): ..."),
// one too long not at all ("secret name of 200 characters (not shown): ..."): what follows is often
// a value pasted with it.
Status ValidateSecretName(const std::string& name);

// Checks and normalizes the namespaces that may use a secret: each a namespace name
// (ValidateName) or "*" alone; sorted, duplicates dropped; at most kMaxSecretNamespaces.
// Errors: InvalidArgument "namespace \"X\": ..." for a name; "namespaces: \"*\" (every
// namespace) stands alone"; "namespaces: more than 1000".
Status NormalizeSecretNamespaces(std::vector<std::string>& namespaces);
inline constexpr size_t kMaxSecretNamespaces = 1000;

// Implementations are thread-safe.
class SecretStore {
 public:
  virtual ~SecretStore() = default;
  // Creates or replaces the secret `name` with `sealed` (opaque bytes) and the namespaces that
  // may use it (replacing the old list too; NormalizeSecretNamespaces). Errors: InvalidArgument
  // for the name or a namespace; FailedPrecondition on a full disk; PermissionDenied for a
  // read-only store.
  virtual Status Put(const std::string& name, const std::string& sealed,
                     std::vector<std::string> namespaces) = 0;
  // Errors: NotFound "secret \"name\": not found".
  virtual Result<std::string> Get(const std::string& name) = 0;
  // The sealed bytes and the name, times and namespaces of `name`, read together (one row, one
  // statement), so that a check of the namespaces holds for the bytes returned. Errors: NotFound
  // "secret \"name\": not found".
  virtual Result<std::pair<SecretInfo, std::string>> GetWithInfo(const std::string& name) = 0;
  // The name, times and namespaces of `name` (never its value). Errors: NotFound "secret
  // \"name\": not found".
  virtual Result<SecretInfo> Info(const std::string& name) = 0;
  // Every secret's name, times and namespaces (never its value), sorted by name.
  virtual Result<std::vector<SecretInfo>> List() = 0;
  // Errors: NotFound "secret \"name\": not found".
  virtual Status Remove(const std::string& name) = 0;
};

// Secrets in the table `secrets` of an sql::Database (SQLite: the registry's file, which is 0600;
// PostgreSQL: the shared metadata database), as hex text. Errors beyond SecretStore's: the
// database's. Thread-safe.
class SqlSecretStore : public SecretStore {
 public:
  // `db` must hold the table (SqliteSecretStore::Open, or PostgreSQL migrated by
  // MigratePgMetadata).
  explicit SqlSecretStore(std::shared_ptr<sql::Database> db);
  ~SqlSecretStore() override;

  Status Put(const std::string& name, const std::string& sealed,
             std::vector<std::string> namespaces) override;
  Result<std::string> Get(const std::string& name) override;
  Result<std::pair<SecretInfo, std::string>> GetWithInfo(const std::string& name) override;
  Result<SecretInfo> Info(const std::string& name) override;
  Result<std::vector<SecretInfo>> List() override;
  Status Remove(const std::string& name) override;

 private:
  std::shared_ptr<sql::Database> db_;
};

// Secrets in an SQLite database file (the registry's).
class SqliteSecretStore : public SqlSecretStore {
 public:
  // Opens or creates the database and table (a table made before secrets had namespaces gets
  // the column, every secret with none). Errors: Internal naming the file.
  static Result<std::unique_ptr<SqliteSecretStore>> Open(const std::filesystem::path& db_path);

 private:
  using SqlSecretStore::SqlSecretStore;
};

}  // namespace bdn
