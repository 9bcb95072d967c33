// SqlSecretStore: sealed secret values by name, in the registry's SQLite file or the shared
// PostgreSQL database.
#include <algorithm>
#include <chrono>

#include "bdn/base/names.h"
#include "bdn/base/text.h"
#include "bdn/registry/list_column.h"
#include "bdn/registry/secret_store.h"
#include "bdn/sql/database.h"
#include "bdn/sql/sqlite_database.h"

namespace bdn {
namespace {

// Values are sealed bytes (any byte); the table holds them as hex text. `namespaces` is the
// sorted list joined by ',' (which no namespace name holds); '' for none.
constexpr const char* kSqliteSchema = R"sql(
CREATE TABLE IF NOT EXISTS secrets(
  name TEXT PRIMARY KEY,
  sealed_hex TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  namespaces TEXT NOT NULL DEFAULT '');
)sql";

// A table made before secrets had namespaces: adds the column, so every secret stored then has
// none (only admin keys for every namespace may use it), the safe reading of its old meaning.
Status AddSqliteColumns(sql::Session& s) {
  BDN_ASSIGN_OR_RETURN(bool has, sql::HasColumn(s, "secrets", "namespaces"));
  if (has) return Status::Ok();
  return sql::ToStatus(
      s.Exec("ALTER TABLE secrets ADD COLUMN namespaces TEXT NOT NULL DEFAULT ''"));
}

constexpr const char* kInfoColumns = "name, created_ms, updated_ms, namespaces";

SecretInfo RowToInfo(const sql::Rows& r, size_t i) {
  return {r.Text(i, 0), r.Int(i, 1), r.Int(i, 2), internal::SplitList(r.Text(i, 3), ',')};
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ToHex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string FromHex(const std::string& hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

Status NotFound(const std::string& name) {
  // A name that cannot be is not quoted whole (it may be a value: "tok=hf_…").
  if (Status bad = ValidateSecretName(name); !bad.ok()) return bad;
  return NotFoundError("secret \"" + name + "\": not found");
}

}  // namespace

Status ValidateSecretName(const std::string& name) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  auto allowed = [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; };
  const std::string rule =
      ": must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter "
      "or digit";
  const size_t bad = std::ranges::find_if_not(name, allowed) - name.begin();
  if (bad < name.size()) {
    // Shown only up to the character it may not hold: what follows is often a value ("tok=hf_…"
    // pasted as one word; from attacking helper 123, it was quoted whole).
    const size_t more = name.size() - bad - 1;
    return InvalidArgumentError(
        "secret name \"" + name.substr(0, bad) + "\" then \"" + EscapeName(name.substr(bad, 1)) +
        "\"" + (more ? " and " + std::to_string(more) + " more characters (not shown)" : "") +
        rule);
  }
  if (name.size() > 128) {
    return InvalidArgumentError("secret name of " + std::to_string(name.size()) +
                                " characters (not shown)" + rule);
  }
  if (name.empty() || !alnum(name[0])) {
    // From attacking helper 124: ".hf_SECRET" was quoted whole.
    const size_t more = name.empty() ? 0 : name.size() - 1;
    return InvalidArgumentError(
        "secret name \"" + name.substr(0, 1) + "\"" +
        (more ? " and " + std::to_string(more) + " more characters (not shown)" : "") + rule);
  }
  return Status::Ok();
}

Status NormalizeSecretNamespaces(std::vector<std::string>& namespaces) {
  if (namespaces.size() > kMaxSecretNamespaces) {
    return InvalidArgumentError("namespaces: more than " + std::to_string(kMaxSecretNamespaces));
  }
  for (const auto& n : namespaces) {
    if (n != kSecretAllNamespaces) BDN_RETURN_IF_ERROR(ValidateName("namespace", n));
  }
  std::sort(namespaces.begin(), namespaces.end());
  namespaces.erase(std::unique(namespaces.begin(), namespaces.end()), namespaces.end());
  if (namespaces.size() > 1 && namespaces.front() == kSecretAllNamespaces) {
    return InvalidArgumentError(
        "namespaces: \"*\" (every namespace) stands alone; give it or a list of namespaces");
  }
  return Status::Ok();
}

SqlSecretStore::SqlSecretStore(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
SqlSecretStore::~SqlSecretStore() = default;

Result<std::unique_ptr<SqliteSecretStore>> SqliteSecretStore::Open(
    const std::filesystem::path& db_path) {
  sql::SqliteOptions o;
  o.what = "secret store";
  o.schema = kSqliteSchema;
  o.upgrade = AddSqliteColumns;
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<sql::Database> db, sql::OpenSqlite(db_path, std::move(o)));
  return std::unique_ptr<SqliteSecretStore>(new SqliteSecretStore(std::move(db)));
}

Status SqlSecretStore::Put(const std::string& name, const std::string& sealed,
                           std::vector<std::string> namespaces) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  BDN_RETURN_IF_ERROR(NormalizeSecretNamespaces(namespaces));
  const int64_t now = NowMs();
  return db_->Write([&](sql::Session& s) {
    return sql::ToStatus(s.Exec(
        "INSERT INTO secrets(name, sealed_hex, created_ms, updated_ms, namespaces) "
        "VALUES(?1,?2,?3,?3,?4) ON CONFLICT(name) DO UPDATE SET sealed_hex=excluded.sealed_hex, "
        "updated_ms=excluded.updated_ms, namespaces=excluded.namespaces",
        {name, ToHex(sealed), now, internal::JoinList(namespaces, ',')}));
  });
}

Result<std::string> SqlSecretStore::Get(const std::string& name) {
  BDN_ASSIGN_OR_RETURN(auto got, GetWithInfo(name));
  return std::move(got.second);
}

Result<std::pair<SecretInfo, std::string>> SqlSecretStore::GetWithInfo(const std::string& name) {
  using Got = std::pair<SecretInfo, std::string>;
  return sql::ReadValue<Got>(
      *db_,
      [&](sql::Session& s) -> Result<Got> {
        BDN_ASSIGN_OR_RETURN(sql::Rows r, s.Query(std::string("SELECT ") + kInfoColumns +
                                                      ", sealed_hex FROM secrets WHERE name=?1",
                                                  {name}));
        if (r.empty()) return Err(NotFound(name));
        return Got(RowToInfo(r, 0), FromHex(r.Text(0, 4)));
      },
      sql::Consistency::kStatement);
}

Result<SecretInfo> SqlSecretStore::Info(const std::string& name) {
  return sql::ReadValue<SecretInfo>(
      *db_,
      [&](sql::Session& s) -> Result<SecretInfo> {
        BDN_ASSIGN_OR_RETURN(
            sql::Rows r,
            s.Query(std::string("SELECT ") + kInfoColumns + " FROM secrets WHERE name=?1", {name}));
        if (r.empty()) return Err(NotFound(name));
        return RowToInfo(r, 0);
      },
      sql::Consistency::kStatement);
}

Result<std::vector<SecretInfo>> SqlSecretStore::List() {
  return sql::ReadValue<std::vector<SecretInfo>>(
      *db_,
      [](sql::Session& s) -> Result<std::vector<SecretInfo>> {
        BDN_ASSIGN_OR_RETURN(sql::Rows r, s.Query(std::string("SELECT ") + kInfoColumns +
                                                  " FROM secrets ORDER BY name"));
        std::vector<SecretInfo> out;
        for (size_t i = 0; i < r.size(); ++i) out.push_back(RowToInfo(r, i));
        return out;
      },
      sql::Consistency::kStatement);
}

Status SqlSecretStore::Remove(const std::string& name) {
  return db_->Write([&](sql::Session& s) -> Status {
    BDN_ASSIGN_OR_RETURN(int64_t n, s.Exec("DELETE FROM secrets WHERE name=?1", {name}));
    if (n == 0) return NotFound(name);
    return Status::Ok();
  });
}

}  // namespace bdn
