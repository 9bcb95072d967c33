// KeyStore: the origin's API keys (docs/http-api.md, "Authentication"). A token is
// "bdn_<id>_<secret>"; only BLAKE3(secret) is stored, so the store never holds a usable token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn {
namespace sql {
class Database;
}  // namespace sql

// What a key may do. kPush and kTag include kPull; kAdmin includes everything.
enum class Scope : uint8_t { kPull, kPush, kTag, kAdmin };

// "pull", "push", "tag", "admin".
std::string_view ScopeName(Scope s);
// Parses one scope name. Errors: InvalidArgument "scope \"x\": must be one of pull, push, tag,
// admin".
Result<Scope> ParseScope(std::string_view name);
// Parses a comma-separated list ("pull,push"); the result is sorted and without duplicates.
// Errors: InvalidArgument for an unknown or empty list.
Result<std::vector<Scope>> ParseScopes(std::string_view list);

// The namespace value of a key valid for every namespace.
inline constexpr std::string_view kAllNamespaces = "*";

struct ApiKey {
  std::string id;             // lower-case hex; the token and messages show it as "bdn_<id>"
  std::string ns;             // one namespace, or "*" for all
  std::vector<Scope> scopes;  // sorted, unique
  int64_t created_unix_ms = 0;
  bool revoked = false;

  // "bdn_<id>", how messages and listings name the key.
  std::string Name() const { return "bdn_" + id; }
  // Whether the key grants `needed` (scope implication as above) for namespace `ns`; with no
  // namespace, for any namespace at all (chunks are shared by every namespace).
  bool Allows(Scope needed, std::optional<std::string_view> ns) const;
};

// A freshly created key and its token, which is shown only once.
struct CreatedKey {
  ApiKey key;
  std::string token;  // "bdn_<id>_<secret>"
};

// Splits a token into key id and secret. Errors: InvalidArgument "token: malformed (expected
// bdn_<id>_<secret>)"; the message never contains the token.
Result<std::pair<std::string, std::string>> SplitToken(std::string_view token);

// The key store. Implementations are thread-safe.
class KeyStore {
 public:
  virtual ~KeyStore() = default;

  // Creates a key with a fresh random id and secret.
  // Errors: InvalidArgument for a namespace that is neither "*" nor a valid name, or no scopes;
  // FailedPrecondition "key store <file>: create key: no space left on device" on a full disk;
  // PermissionDenied for a read-only store; Unavailable when the database stays locked.
  virtual Result<CreatedKey> Create(const std::string& ns, std::vector<Scope> scopes) = 0;
  // Creates a key as Create does, but only while the store holds no key at all (revoked ones
  // count), in one transaction: of any number of callers at once, in any number of processes
  // sharing the store (replicas starting together), exactly one gets the key and the others
  // nullopt. Errors: as Create's.
  virtual Result<std::optional<CreatedKey>> CreateIfNone(const std::string& ns,
                                                         std::vector<Scope> scopes) = 0;
  // Every key, revoked ones included, oldest first.
  virtual Result<std::vector<ApiKey>> List() = 0;
  // Errors: NotFound "key bdn_<id>: not found".
  virtual Result<ApiKey> Get(const std::string& id) = 0;
  // Revokes a key (idempotent) and returns it. Errors: NotFound "key bdn_<id>: not found".
  virtual Result<ApiKey> Revoke(const std::string& id) = 0;
  // The key a token belongs to. Errors: PermissionDenied for a malformed token, an unknown key
  // or wrong secret ("key bdn_<id>: invalid token"), or a revoked key ("key bdn_<id>: revoked").
  virtual Result<ApiKey> Authenticate(std::string_view token) = 0;
};

// Keys in the table api_keys of an sql::Database (SQLite: the registry's file; PostgreSQL: the
// shared metadata database): id, namespace, scopes, BLAKE3 of the secret, created and revoked
// times. Errors beyond KeyStore's: the database's ("key store <db>: <op>: ..."). Thread-safe.
class SqlKeyStore : public KeyStore {
 public:
  // `db` must hold the table (SqliteKeyStore::Open, or PostgreSQL migrated by
  // MigratePgMetadata).
  explicit SqlKeyStore(std::shared_ptr<sql::Database> db);
  ~SqlKeyStore() override;

  Result<CreatedKey> Create(const std::string& ns, std::vector<Scope> scopes) override;
  Result<std::optional<CreatedKey>> CreateIfNone(const std::string& ns,
                                                 std::vector<Scope> scopes) override;
  Result<std::vector<ApiKey>> List() override;
  Result<ApiKey> Get(const std::string& id) override;
  Result<ApiKey> Revoke(const std::string& id) override;
  Result<ApiKey> Authenticate(std::string_view token) override;

 private:
  std::shared_ptr<sql::Database> db_;
};

// Keys in an SQLite database file (which may be the registry's).
class SqliteKeyStore : public SqlKeyStore {
 public:
  // Opens or creates the database and table (the file private to its owner, 0600:
  // MakeDatabasePrivate). Errors: Internal naming the file; PermissionDenied when another
  // user's file or symlink is in its place (OpenSqlite).
  static Result<std::unique_ptr<SqliteKeyStore>> Open(const std::filesystem::path& db_path);

 private:
  using SqlKeyStore::SqlKeyStore;
};

}  // namespace bdn
