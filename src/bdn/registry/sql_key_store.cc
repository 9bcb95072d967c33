// SqlKeyStore: API keys in the table api_keys (SQLite or PostgreSQL), secrets stored only as
// their BLAKE3; and the scope rules and token syntax every key store shares.
#include <algorithm>
#include <chrono>

#include "bdn/base/names.h"
#include "bdn/base/units.h"
#include "bdn/registry/key_store.h"
#include "bdn/sql/database.h"
#include "bdn/sql/sqlite_database.h"

namespace bdn {
namespace {

constexpr std::string_view kScopeNames[] = {"pull", "push", "tag", "admin"};
constexpr size_t kIdBytes = 8;       // 16 hex characters
constexpr size_t kSecretBytes = 16;  // 32 hex characters: 128 bits

constexpr const char* kSqliteSchema = R"sql(
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY,
  ns TEXT NOT NULL,
  scopes TEXT NOT NULL,
  secret_b3 TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER);
)sql";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

std::string JoinScopes(const std::vector<Scope>& scopes) {
  std::string out;
  for (Scope s : scopes) {
    if (!out.empty()) out += ',';
    out += ScopeName(s);
  }
  return out;
}

// Compares two equal-length strings without an early exit.
bool SameBytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string_view ScopeName(Scope s) { return kScopeNames[static_cast<size_t>(s)]; }

Result<Scope> ParseScope(std::string_view name) {
  for (size_t i = 0; i < std::size(kScopeNames); ++i) {
    if (kScopeNames[i] == name) return static_cast<Scope>(i);
  }
  return Err(InvalidArgumentError("scope \"" + std::string(name) +
                                  "\": must be one of pull, push, tag, admin"));
}

Result<std::vector<Scope>> ParseScopes(std::string_view list) {
  if (list.empty()) return Err(InvalidArgumentError("scopes: at least one is required"));
  std::vector<Scope> out;
  while (true) {
    size_t comma = list.find(',');
    BDN_ASSIGN_OR_RETURN(Scope s, ParseScope(list.substr(0, comma)));
    out.push_back(s);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool ApiKey::Allows(Scope needed, std::optional<std::string_view> want_ns) const {
  if (revoked) return false;
  if (want_ns && ns != kAllNamespaces && ns != *want_ns) return false;
  auto has = [&](Scope s) { return std::find(scopes.begin(), scopes.end(), s) != scopes.end(); };
  if (has(Scope::kAdmin)) return true;
  switch (needed) {
    case Scope::kPull:
      return !scopes.empty();
    case Scope::kPush:
      return has(Scope::kPush);
    case Scope::kTag:
      return has(Scope::kTag);
    case Scope::kAdmin:
      return false;
  }
  return false;
}

Result<std::pair<std::string, std::string>> SplitToken(std::string_view token) {
  auto bad = [] {
    return Err(InvalidArgumentError("token: malformed (expected bdn_<id>_<secret>)"));
  };
  if (!token.starts_with("bdn_")) return bad();
  token.remove_prefix(4);
  size_t sep = token.find('_');
  if (sep == std::string_view::npos) return bad();
  std::string_view id = token.substr(0, sep), secret = token.substr(sep + 1);
  if (!IsHex(id) || id.size() > 64 || !IsHex(secret) || secret.size() > 256) return bad();
  return std::pair<std::string, std::string>(std::string(id), std::string(secret));
}

namespace {

constexpr const char* kKeyColumns = "id, ns, scopes, secret_b3, created_ms, revoked_ms";

// A row of kKeyColumns and its stored secret digest (hex).
std::pair<ApiKey, std::string> RowToKey(const sql::Rows& r, size_t i) {
  ApiKey k;
  k.id = r.Text(i, 0);
  k.ns = r.Text(i, 1);
  auto scopes = ParseScopes(r.Text(i, 2));
  if (scopes) k.scopes = *scopes;
  k.created_unix_ms = r.Int(i, 4);
  k.revoked = !r.IsNull(i, 5);
  return {std::move(k), r.Text(i, 3)};
}

// Reads the key `id` and its stored secret digest; nullopt when there is none.
Result<std::optional<std::pair<ApiKey, std::string>>> ReadKey(sql::Session& s,
                                                              const std::string& id) {
  BDN_ASSIGN_OR_RETURN(
      sql::Rows r,
      s.Query(std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE id=?1", {id}));
  if (r.empty()) return std::optional<std::pair<ApiKey, std::string>>();
  return std::optional<std::pair<ApiKey, std::string>>(RowToKey(r, 0));
}

// A new key's fields, its token and what the table stores of it.
struct NewKey {
  CreatedKey created;
  std::string secret_b3;
};

Result<NewKey> MakeKey(const std::string& ns, std::vector<Scope> scopes) {
  if (ns != kAllNamespaces && !ValidateName("namespace", ns).ok()) {
    return Err(InvalidArgumentError("namespace \"" + ns +
                                    "\": must be \"*\" or a name of a-z 0-9 . _ - "
                                    "starting with a letter or digit"));
  }
  if (scopes.empty()) return Err(InvalidArgumentError("scopes: at least one is required"));
  std::sort(scopes.begin(), scopes.end());
  scopes.erase(std::unique(scopes.begin(), scopes.end()), scopes.end());
  BDN_ASSIGN_OR_RETURN(std::string id, RandomHex(kIdBytes));
  BDN_ASSIGN_OR_RETURN(std::string secret, RandomHex(kSecretBytes));
  NewKey out;
  out.created.key.id = id;
  out.created.key.ns = ns;
  out.created.key.scopes = std::move(scopes);
  out.created.key.created_unix_ms = NowMs();
  out.created.token = "bdn_" + id + "_" + secret;
  out.secret_b3 = Digest::Of(secret).Hex();
  return out;
}

Status InsertKey(sql::Session& s, const NewKey& k) {
  return sql::ToStatus(s.Exec(
      "INSERT INTO api_keys(id, ns, scopes, secret_b3, created_ms) VALUES(?1, ?2, ?3, ?4, ?5)",
      {k.created.key.id, k.created.key.ns, JoinScopes(k.created.key.scopes), k.secret_b3,
       k.created.key.created_unix_ms}));
}

}  // namespace

SqlKeyStore::SqlKeyStore(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
SqlKeyStore::~SqlKeyStore() = default;

Result<std::unique_ptr<SqliteKeyStore>> SqliteKeyStore::Open(const std::filesystem::path& db_path) {
  sql::SqliteOptions o;
  o.what = "key store";
  o.schema = kSqliteSchema;
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<sql::Database> db, sql::OpenSqlite(db_path, std::move(o)));
  return std::unique_ptr<SqliteKeyStore>(new SqliteKeyStore(std::move(db)));
}

Result<CreatedKey> SqlKeyStore::Create(const std::string& ns, std::vector<Scope> scopes) {
  BDN_ASSIGN_OR_RETURN(NewKey k, MakeKey(ns, std::move(scopes)));
  BDN_RETURN_IF_ERROR(db_->Write([&](sql::Session& s) { return InsertKey(s, k); }, "create key"));
  return k.created;
}

Result<std::optional<CreatedKey>> SqlKeyStore::CreateIfNone(const std::string& ns,
                                                            std::vector<Scope> scopes) {
  BDN_ASSIGN_OR_RETURN(NewKey k, MakeKey(ns, std::move(scopes)));
  return sql::WriteValue<std::optional<CreatedKey>>(
      *db_,
      [&](sql::Session& s) -> Result<std::optional<CreatedKey>> {
        // Creators take turns on this lock, so the second sees the first one's key.
        BDN_RETURN_IF_ERROR(s.LockForTransaction("first-key"));
        BDN_ASSIGN_OR_RETURN(sql::Rows r, s.Query("SELECT count(*) FROM api_keys"));
        if (r.Int(0, 0) > 0) return std::optional<CreatedKey>();
        BDN_RETURN_IF_ERROR(InsertKey(s, k));
        return std::optional<CreatedKey>(k.created);
      },
      "create key");
}

Result<std::vector<ApiKey>> SqlKeyStore::List() {
  return sql::ReadValue<std::vector<ApiKey>>(
      *db_,
      [](sql::Session& s) -> Result<std::vector<ApiKey>> {
        BDN_ASSIGN_OR_RETURN(sql::Rows r, s.Query(std::string("SELECT ") + kKeyColumns +
                                                  " FROM api_keys ORDER BY rowid"));
        std::vector<ApiKey> out;
        for (size_t i = 0; i < r.size(); ++i) out.push_back(RowToKey(r, i).first);
        return out;
      },
      sql::Consistency::kStatement, "list keys");
}

Result<ApiKey> SqlKeyStore::Get(const std::string& id) {
  using Row = std::optional<std::pair<ApiKey, std::string>>;
  BDN_ASSIGN_OR_RETURN(Row row, sql::ReadValue<Row>(
                                    *db_, [&](sql::Session& s) { return ReadKey(s, id); },
                                    sql::Consistency::kStatement, "read key"));
  if (!row) return Err(NotFoundError("key bdn_" + id + ": not found"));
  return row->first;
}

Result<ApiKey> SqlKeyStore::Revoke(const std::string& id) {
  return sql::WriteValue<ApiKey>(
      *db_,
      [&](sql::Session& s) -> Result<ApiKey> {
        BDN_ASSIGN_OR_RETURN(auto row, ReadKey(s, id));
        if (!row) return Err(NotFoundError("key bdn_" + id + ": not found"));
        if (row->first.revoked) return row->first;
        BDN_RETURN_IF_ERROR(
            sql::ToStatus(s.Exec("UPDATE api_keys SET revoked_ms=?2 WHERE id=?1", {id, NowMs()})));
        row->first.revoked = true;
        return row->first;
      },
      "revoke key");
}

Result<ApiKey> SqlKeyStore::Authenticate(std::string_view token) {
  auto parts = SplitToken(token);
  if (!parts) return Err(PermissionDeniedError(parts.error().message()));
  const auto& [id, secret] = *parts;
  using Row = std::optional<std::pair<ApiKey, std::string>>;
  BDN_ASSIGN_OR_RETURN(Row row, sql::ReadValue<Row>(
                                    *db_, [&](sql::Session& s) { return ReadKey(s, id); },
                                    sql::Consistency::kStatement, "read key"));
  std::string name = "key bdn_" + id;
  // Unknown key and wrong secret read the same, so a caller cannot probe for key ids.
  if (!row || !SameBytes(Digest::Of(secret).Hex(), row->second)) {
    return Err(PermissionDeniedError(name + ": invalid token"));
  }
  if (row->first.revoked) return Err(PermissionDeniedError(name + ": revoked"));
  return row->first;
}

}  // namespace bdn
