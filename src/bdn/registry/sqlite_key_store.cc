// SqliteKeyStore: API keys in one SQLite table, secrets stored only as their BLAKE3.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>

#include "bdn/base/clock.h"
#include "bdn/base/names.h"
#include "bdn/base/units.h"
#include "bdn/registry/key_store.h"
#include "bdn/registry/sqlite_util.h"

namespace bdn {
namespace {

constexpr std::string_view kScopeNames[] = {"pull", "push", "tag", "admin"};
constexpr size_t kIdBytes = 8;       // 16 hex characters
constexpr size_t kSecretBytes = 16;  // 32 hex characters: 128 bits

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY,
  ns TEXT NOT NULL,
  scopes TEXT NOT NULL,
  secret_b3 TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER);
)sql";

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

struct SqliteKeyStore::Impl {
  internal::DbHandle db;
  std::filesystem::path path;
  std::mutex mu;

  // SqliteError of the last failure, named "key store <file>: <what>" (a full disk is
  // FailedPrecondition, as the registry's and the chunk store's: HTTP 412, exit 8).
  Status Error(std::string_view what) const {
    return internal::SqliteError(db.get(), "key store " + path.string() + ": " + std::string(what));
  }

  // Steps `s` to its end. Errors: Error(what).
  Status Run(internal::Stmt& s, std::string_view what) {
    return s.Step() ? Status::Ok() : Error(what);
  }

  // Reads the key `id` and its stored secret digest (hex); nullopt when there is none.
  Result<std::optional<std::pair<ApiKey, std::string>>> Read(const std::string& id) {
    internal::Stmt s(db, "SELECT ns, scopes, secret_b3, created_ms, revoked_ms FROM api_keys "
                         "WHERE id=?1");
    s.Bind(1, id);
    auto row = s.Step();
    if (!row) return Err(Error("read"));
    if (!*row) return std::optional<std::pair<ApiKey, std::string>>();
    return std::optional(RowToKey(s, id, 0));
  }

  // Columns from `col`: ns, scopes, secret_b3, created_ms, revoked_ms.
  static std::pair<ApiKey, std::string> RowToKey(internal::Stmt& s, const std::string& id,
                                                 int col) {
    ApiKey k;
    k.id = id;
    k.ns = s.Text(col);
    auto scopes = ParseScopes(s.Text(col + 1));
    if (scopes) k.scopes = *scopes;
    k.created_unix_ms = s.Int(col + 3);
    k.revoked = !s.IsNull(col + 4);
    return {std::move(k), s.Text(col + 2)};
  }
};

SqliteKeyStore::SqliteKeyStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteKeyStore::~SqliteKeyStore() = default;

Result<std::unique_ptr<SqliteKeyStore>> SqliteKeyStore::Open(const std::filesystem::path& db_path) {
  auto impl = std::make_unique<Impl>();
  impl->path = db_path;
  BDN_ASSIGN_OR_RETURN(impl->db, internal::OpenDatabase(db_path, "key store", kSchema));
  return std::unique_ptr<SqliteKeyStore>(new SqliteKeyStore(std::move(impl)));
}

Result<CreatedKey> SqliteKeyStore::Create(const std::string& ns, std::vector<Scope> scopes) {
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
  CreatedKey out;
  out.key.id = id;
  out.key.ns = ns;
  out.key.scopes = std::move(scopes);
  out.key.created_unix_ms = WallNowMs(*Clock::Real());
  out.token = "bdn_" + id + "_" + secret;

  std::lock_guard lock(impl_->mu);
  internal::Stmt s(impl_->db,
                   "INSERT INTO api_keys(id, ns, scopes, secret_b3, created_ms) "
                   "VALUES(?1, ?2, ?3, ?4, ?5)");
  s.Bind(1, id)
      .Bind(2, ns)
      .Bind(3, JoinScopes(out.key.scopes))
      .Bind(4, Digest::Of(secret).Hex())
      .Bind(5, out.key.created_unix_ms);
  BDN_RETURN_IF_ERROR(impl_->Run(s, "create key"));
  return out;
}

Result<std::vector<ApiKey>> SqliteKeyStore::List() {
  std::lock_guard lock(impl_->mu);
  internal::Stmt s(impl_->db,
                   "SELECT id, ns, scopes, secret_b3, created_ms, revoked_ms FROM api_keys "
                   "ORDER BY rowid");
  std::vector<ApiKey> out;
  while (true) {
    auto row = s.Step();
    if (!row) return Err(impl_->Error("list keys"));
    if (!*row) break;
    out.push_back(Impl::RowToKey(s, s.Text(0), 1).first);
  }
  return out;
}

Result<ApiKey> SqliteKeyStore::Get(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(auto row, impl_->Read(id));
  if (!row) return Err(NotFoundError("key bdn_" + id + ": not found"));
  return row->first;
}

Result<ApiKey> SqliteKeyStore::Revoke(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  BDN_ASSIGN_OR_RETURN(auto row, impl_->Read(id));
  if (!row) return Err(NotFoundError("key bdn_" + id + ": not found"));
  if (row->first.revoked) return row->first;
  internal::Stmt s(impl_->db, "UPDATE api_keys SET revoked_ms=?2 WHERE id=?1");
  s.Bind(1, id).Bind(2, WallNowMs(*Clock::Real()));
  BDN_RETURN_IF_ERROR(impl_->Run(s, "revoke key"));
  row->first.revoked = true;
  return row->first;
}
Result<ApiKey> SqliteKeyStore::Authenticate(std::string_view token) {
  auto parts = SplitToken(token);
  if (!parts) return Err(PermissionDeniedError(parts.error().message()));
  const auto& [id, secret] = *parts;
  std::optional<std::pair<ApiKey, std::string>> row;
  {
    std::lock_guard lock(impl_->mu);
    BDN_ASSIGN_OR_RETURN(row, impl_->Read(id));
  }
  std::string name = "key bdn_" + id;
  // Unknown key and wrong secret read the same, so a caller cannot probe for key ids.
  if (!row || !SameBytes(Digest::Of(secret).Hex(), row->second)) {
    return Err(PermissionDeniedError(name + ": invalid token"));
  }
  if (row->first.revoked) return Err(PermissionDeniedError(name + ": revoked"));
  return row->first;
}

}  // namespace bdn
