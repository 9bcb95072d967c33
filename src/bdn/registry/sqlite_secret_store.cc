// SqliteSecretStore: sealed secret values by name in the registry's SQLite file.
#include <chrono>
#include <mutex>
#include <optional>

#include "bdn/base/clock.h"
#include "bdn/base/hex.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sqlite_util.h"

namespace bdn {
namespace {

using internal::Stmt;

// Values are sealed bytes (any byte); the table holds them as hex text.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS secrets(
  name TEXT PRIMARY KEY,
  sealed_hex TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL);
)sql";

Status NotFound(const std::string& name) {
  return NotFoundError("secret \"" + name + "\": not found");
}

}  // namespace

Status ValidateSecretName(const std::string& name) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  bool ok = !name.empty() && name.size() <= 128 && alnum(name[0]);
  for (char c : name) ok = ok && (alnum(c) || c == '.' || c == '_' || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgumentError("secret name \"" + name +
                              "\": must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and "
                              "'-', starting with a letter or digit");
}

struct SqliteSecretStore::Impl {
  internal::DbHandle db;
  std::mutex mu;
};

SqliteSecretStore::SqliteSecretStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteSecretStore::~SqliteSecretStore() = default;

Result<std::unique_ptr<SqliteSecretStore>> SqliteSecretStore::Open(
    const std::filesystem::path& db_path) {
  auto impl = std::make_unique<Impl>();
  BDN_ASSIGN_OR_RETURN(impl->db, internal::OpenDatabase(db_path, "secret store", kSchema));
  return std::unique_ptr<SqliteSecretStore>(new SqliteSecretStore(std::move(impl)));
}

Status SqliteSecretStore::Put(const std::string& name, const std::string& sealed) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  const int64_t now = WallNowMs(*Clock::Real());
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db,
         "INSERT INTO secrets(name, sealed_hex, created_ms, updated_ms) VALUES(?1,?2,?3,?3) "
         "ON CONFLICT(name) DO UPDATE SET sealed_hex=excluded.sealed_hex, "
         "updated_ms=excluded.updated_ms");
  s.Bind(1, name).Bind(2, HexEncode(sealed)).Bind(3, now);
  return s.Run();
}

Result<std::string> SqliteSecretStore::Get(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db, "SELECT sealed_hex FROM secrets WHERE name=?1");
  s.Bind(1, name);
  BDN_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Err(NotFound(name));
  std::optional<std::string> sealed = HexDecode(s.Text(0));
  if (!sealed) return Err(CorruptionError("secret \"" + name + "\": the stored value is not hex"));
  return std::move(*sealed);
}

Result<std::vector<SecretInfo>> SqliteSecretStore::List() {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db, "SELECT name, created_ms, updated_ms FROM secrets ORDER BY name");
  std::vector<SecretInfo> out;
  while (true) {
    BDN_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({s.Text(0), s.Int(1), s.Int(2)});
  }
  return out;
}

Status SqliteSecretStore::Remove(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  Stmt s(impl_->db, "DELETE FROM secrets WHERE name=?1");
  s.Bind(1, name);
  BDN_RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(impl_->db.get()) == 0) return NotFound(name);
  return Status::Ok();
}

}  // namespace bdn
