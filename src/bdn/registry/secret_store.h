// SecretStore: named credentials for sync sources (docs/sync.md, "Secrets"), kept as opaque
// sealed bytes: the store never sees a plaintext value (sync::SecretVault encrypts before it
// stores). A sibling of Registry; the SQLite implementation shares the registry's file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bdn/base/status.h"

namespace bdn {

struct SecretInfo {
  std::string name;
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

// Checks a secret name: 1 to 128 characters of A-Z a-z 0-9 . _ -, starting with a letter or
// digit. Errors: InvalidArgument "secret name \"x\": must be 1 to 128 characters of A-Z, a-z,
// 0-9, '.', '_' and '-', starting with a letter or digit".
Status ValidateSecretName(const std::string& name);

// Implementations are thread-safe.
class SecretStore {
 public:
  virtual ~SecretStore() = default;
  // Creates or replaces the secret `name` with `sealed` (opaque bytes). Errors: InvalidArgument
  // for the name; FailedPrecondition on a full disk; PermissionDenied for a read-only store.
  virtual Status Put(const std::string& name, const std::string& sealed) = 0;
  // Errors: NotFound "secret \"name\": not found".
  virtual Result<std::string> Get(const std::string& name) = 0;
  // Every secret's name and times (never its value), sorted by name.
  virtual Result<std::vector<SecretInfo>> List() = 0;
  // Errors: NotFound "secret \"name\": not found".
  virtual Status Remove(const std::string& name) = 0;
};

// Secrets in the table `secrets` of an SQLite database (the registry's file, which is 0600).
class SqliteSecretStore : public SecretStore {
 public:
  // Opens or creates the database and table. Errors: Internal "secret store <file>: <reason>"
  // when it cannot be opened; the mapping of internal::SqliteError (sqlite_util.h) when a
  // PRAGMA or the schema fails.
  static Result<std::unique_ptr<SqliteSecretStore>> Open(const std::filesystem::path& db_path);
  ~SqliteSecretStore() override;

  Status Put(const std::string& name, const std::string& sealed) override;
  Result<std::string> Get(const std::string& name) override;
  Result<std::vector<SecretInfo>> List() override;
  Status Remove(const std::string& name) override;

 private:
  struct Impl;
  explicit SqliteSecretStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bdn
