// SecretVault: the credentials of sync sources (docs/sync.md, "Secrets"), encrypted at rest with
// AES-256-GCM (OpenSSL) under a 256-bit key kept in a key file (0600) beside the database, and
// bound to their names (the name is the cipher's associated data, so a sealed value moved to
// another name does not open). The threat this answers is a copy of the database (a backup, a
// replica, a support bundle) without the key file; anyone who can read both the database and the
// key file (root, the server's user) can read every secret.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/registry/secret_store.h"

namespace bdn::sync {

// Which secrets a job may name (docs/sync.md, "Secrets"): registry/secret_store.h.
using SecretUse = ::bdn::SecretUse;

// Thread-safe.
class SecretVault {
 public:
  // Opens a vault over `store` with the key in `key_path`, created (32 random bytes, mode 0600,
  // written to a temporary name and renamed) when missing. Errors: Internal/PermissionDenied
  // naming the key file, also for a key file that is not 32 bytes; Internal when no random
  // bytes can be had.
  static Result<std::shared_ptr<SecretVault>> Open(std::shared_ptr<SecretStore> store,
                                                   const std::filesystem::path& key_path);

  // Opens a vault over `store` with the key in `key_path`, a file of exactly 32 bytes that must
  // exist (links followed): the key that servers sharing one secret store (bdn serve --db) all
  // use, so none may make its own. Errors: NotFound "secret key file <path>: not found (create
  // it once, e.g. head -c 32 /dev/urandom > <path>, and give every server the same file)";
  // Internal for a file that is not 32 bytes; the open's errors.
  static Result<std::shared_ptr<SecretVault>> OpenShared(std::shared_ptr<SecretStore> store,
                                                         const std::filesystem::path& key_path);

  // Encrypts and stores `value` under `name` with the namespaces whose jobs may use it
  // (SecretInfo::namespaces; empty: none), replacing an older value and its namespaces. Errors:
  // InvalidArgument for the name (ValidateSecretName), a namespace (NormalizeSecretNamespaces)
  // or an empty value; the store's.
  Status Set(const std::string& name, const std::string& value,
             std::vector<std::string> namespaces = {});
  // Checks that a job into namespace `ns` may name the secret `name`: it exists and, with
  // SecretUse::kJobNamespace or kLegacyJob, its namespaces hold `ns` or are {"*"}. Reads no
  // value, so it says
  // nothing of the value's format. Errors: NotFound "secret \"name\": not found" (reason
  // secret_not_found) for a secret that does not exist and, the same answer, for one the job may
  // not use, so that a caller learns no names of other namespaces' secrets; the store's.
  Status CheckUse(const std::string& name, const std::string& ns, SecretUse use);
  // The plaintext of `name` for a run of a job into namespace `ns` that `use` allows (the use
  // recorded with the job): CheckUse and Reveal on one read of the secret, so a secret replaced
  // meanwhile is checked as it is now. Errors: CheckUse's (the same NotFound for a secret the job
  // may not use as for one that does not exist) and Reveal's.
  Result<std::string> RevealFor(const std::string& name, const std::string& ns, SecretUse use);
  // The plaintext of `name`. Errors: NotFound "secret \"name\": not found" (reason
  // secret_not_found); Corruption "secret \"name\": cannot be decrypted (wrong key file, or
  // altered)".
  Result<std::string> Reveal(const std::string& name);
  // Names, times and namespaces only, sorted by name.
  Result<std::vector<SecretInfo>> List();
  // Errors: NotFound "secret \"name\": not found".
  Status Remove(const std::string& name);

 private:
  SecretVault(std::shared_ptr<SecretStore> store, std::string key);
  // The plaintext of the sealed value `sealed` of `name`. Errors: Reveal's Corruption.
  Result<std::string> Unseal(const std::string& name, const std::string& sealed);
  std::shared_ptr<SecretStore> store_;
  const std::string key_;  // 32 bytes
};

}  // namespace bdn::sync
