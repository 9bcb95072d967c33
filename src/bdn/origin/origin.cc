// Origin: construction, the authentication/scope gate every endpoint passes, the key endpoints,
// and the first-start admin key.
#include "bdn/origin/origin.h"

#include <algorithm>
#include <cerrno>

#include "bdn/api/records_json.h"
#include "bdn/origin/request_json.h"
#include "bdn/origin/upstream_chain.h"
#include "bdn/store/atomic_file.h"

namespace bdn::origin {

using nlohmann::json;

Origin::Origin(OriginOptions options, std::shared_ptr<ChunkStore> store,
               std::shared_ptr<Registry> registry, std::shared_ptr<KeyStore> keys,
               std::shared_ptr<PushClaims> claims)
    : options_(options),
      store_(std::move(store)),
      registry_(std::move(registry)),
      keys_(std::move(keys)),
      claims_(claims ? std::move(claims)
                     : std::make_shared<MemoryPushClaims>(
                           options.claim_ttl,
                           [clock = options.clock ? options.clock : Clock::Real()] {
                             return clock->SteadyNow();
                           })),
      version_blobs_(std::make_shared<VersionBlobCache>(store_, options.version_blobs_max_ids)) {
  ReadAuthority authority = options_.read_authority;
  if (!authority && options_.role == Role::kOrigin) {
    authority = RegistryReadAuthority(registry_, options_.scope_ttl);
  }
  if (!authority) {
    authority = [](const ApiKey&, std::string_view, const std::optional<PinnedRef>&) {
      return AccessVerdict{InternalError("cache node: no access check configured")};
    };
  }
  read_scope_ = std::make_unique<ReadScope>(std::move(authority), version_blobs_);
  read_admissions_ = std::make_unique<ReadAdmissions>(options_.read_admission_ttl, 65536);
  if (options_.role == Role::kOrigin) {
    namespaces_ = std::make_unique<NamespaceIndex>(store_, registry_, options_.namespace_index);
  }
}

std::shared_ptr<ChunkStore> Origin::PushStore(const ApiKey& key, Freshness freshness) {
  if (SeesEveryNamespace(key) || !namespaces_) return store_;
  return std::make_shared<NamespaceView>(store_, *namespaces_, key.ns, freshness);
}

void Origin::Register(http::Server& server) {
  server_ = &server;
  auto& m = server.metrics();
  using T = http::Metrics::Type;
  m.Declare("bdn_chunks_sent_total", T::kCounter, "Chunks (blobs) sent, whole or in part.");
  m.Declare("bdn_chunk_bytes_sent_total", T::kCounter, "Chunk bytes sent.");
  m.Declare("bdn_chunks_received_total", T::kCounter, "Chunks (blobs) received and verified.");
  m.Declare("bdn_chunk_bytes_received_total", T::kCounter, "Chunk bytes received and verified.");
  m.Declare("bdn_chunks_corrupt_total", T::kCounter,
            "Stored chunks that failed verification when read (moved aside, never sent).");
  m.Declare("bdn_batch_readahead_bytes", T::kGauge,
            "Chunk bytes batch responses have read and not yet sent (bounded server-wide).");
  m.OnScrape([held = readahead_bytes_](http::Metrics& out) {
    out.Set("bdn_batch_readahead_bytes", {}, static_cast<double>(held->load()));
  });
  for (const char* name :
       {"bdn_chunks_sent_total", "bdn_chunk_bytes_sent_total", "bdn_chunks_received_total",
        "bdn_chunk_bytes_received_total", "bdn_chunks_corrupt_total"}) {
    m.Add(name, {}, 0);  // present from the start, so dashboards see 0 rather than no series
  }
  RegisterChain();
  if (options_.role == Role::kCache) {
    RegisterChunkReads();
    return;
  }
  RegisterChunks();
  RegisterChunkReads();
  RegisterRegistry();
  RegisterClaims();
  RegisterKeys();
  if (sync_) RegisterSync();
}

namespace {

// The token of an Authorization value "Bearer <token>" (RFC 7235 §2.1 and RFC 6750 §2.1: the
// scheme in any case, one or more spaces (1*SP: no tab), the token); nullopt for anything else.
std::optional<std::string_view> BearerToken(std::string_view v) {
  constexpr std::string_view kBearer = "bearer";
  const bool bearer = v.size() > kBearer.size() && v[kBearer.size()] == ' ' &&
                      std::equal(kBearer.begin(), kBearer.end(), v.begin(), [](char a, char b) {
                        return a == std::tolower(static_cast<unsigned char>(b));
                      });
  const size_t token = bearer ? v.find_first_not_of(' ', kBearer.size()) : std::string_view::npos;
  if (token == std::string_view::npos || v[token] == '\t') return std::nullopt;
  return v.substr(token);
}

}  // namespace

Result<ApiKey> Origin::Authenticate(const http::ServerRequest& req) {
  if (options_.auth == AuthMode::kDisabled || options_.role == Role::kCache) {
    return ApiKey{"anonymous", std::string(kAllNamespaces), {Scope::kAdmin}, 0, false};
  }
  if (!req.has_header("Authorization")) {
    return Err(PermissionDeniedError(
        "request: no credentials (send Authorization: Bearer bdn_<id>_<secret>)"));
  }
  const std::string value = req.get_header_value("Authorization");
  auto token = BearerToken(value);
  if (!token) {
    return Err(PermissionDeniedError("Authorization: expected \"Bearer bdn_<id>_<secret>\""));
  }
  return keys_->Authenticate(*token);
}

std::string Origin::KeyNameForLog(const ApiKey& key, const ReadGrant* grant) const {
  if (key.id != "anonymous") return key.Name();
  // A cache node's callers are checked by the origin, which names the key it verified.
  if (grant && !grant->key_name.empty()) return grant->key_name;
  return "-";
}

void Origin::Route(const std::string& method, const std::string& pattern, const std::string& route,
                   Access access, Handler handler, uint64_t max_body_bytes, SinkFactory make_sink,
                   http::InlineHandler try_inline) {
  // Authentication and the scope check come before the request body is read (POST/PUT), so an
  // unauthenticated or out-of-scope client cannot make the server receive and buffer a body.
  http::Server::RouteOptions options;
  options.max_body_bytes = max_body_bytes > 0 ? max_body_bytes : options_.max_json_body_bytes;
  options.try_inline = std::move(try_inline);
  options.admit = [this, access, make_sink = std::move(make_sink)](http::ServerRequest& req,
                                                                   http::ServerResponse& res) {
    // Read before the key is looked up: a key revoked meanwhile is not kept, and a kept
    // admission is counted from before the lookup (ReadAdmissions).
    const uint64_t generation = read_admissions_->generation();
    const auto started = std::chrono::steady_clock::now();
    auto key = Authenticate(req);
    if (!key) {
      http::SetError(res, key.error(), http::Credentials::kRejected);
      return false;
    }
    req.key_name = KeyNameForLog(*key, nullptr);
    std::optional<std::string> ns;
    if (access.where == Where::kPathNamespace) ns = req.matches[1].str();
    if (!key->Allows(access.scope, ns ? std::optional<std::string_view>(*ns) : std::nullopt)) {
      std::string where = ns ? "namespace \"" + *ns + "\"" : "any namespace";
      http::SetError(res, PermissionDeniedError("key " + key->Name() + ": no \"" +
                                                std::string(ScopeName(access.scope)) +
                                                "\" scope for " + where));
      return false;
    }
    Authorized authorized{*key, {}};
    if (access.where == Where::kChunkRead) {
      // Before the body, like the scope check: a caller without access never makes the server
      // read its request body or a version's blobs.
      bool unauthenticated = false;
      auto grant = read_scope_->Check(*key, req.get_header_value("Authorization"),
                                      req.get_header_value(kVersionHeader), &unauthenticated);
      if (!grant) {
        http::SetError(
            res, grant.error(),
            unauthenticated ? http::Credentials::kRejected : http::Credentials::kAccepted);
        return false;
      }
      authorized.grant = std::move(*grant);
      req.key_name = KeyNameForLog(*key, &authorized.grant);
      read_admissions_->Put(req.get_header_value("Authorization"),
                            req.get_header_value(kVersionHeader), generation, started,
                            {authorized.key, authorized.grant});
    }
    req.context = std::move(authorized);
    if (make_sink) {
      auto sink = make_sink(req);
      if (!sink) {
        http::SetError(res, sink.error());
        return false;
      }
      req.body_sink = std::move(*sink);
    }
    return true;
  };
  // A chunk read by a verified key names it in Bdn-Key, for the access log of a cache node that
  // asked on a caller's behalf (UpstreamReadAuthority).
  const bool name_key = access.where == Where::kChunkRead && options_.role == Role::kOrigin;
  // A cache node's chunk reads say how long the verdict they were allowed under has left, for a
  // node in front of this one (kAccessMaxAgeHeader).
  const bool verdict_age = access.where == Where::kChunkRead && options_.role != Role::kOrigin;
  auto run = [handler = std::move(handler), name_key, verdict_age](const http::ServerRequest& req,
                                                                   http::ServerResponse& res) {
    const Authorized& authorized = std::any_cast<const Authorized&>(req.context);
    const ApiKey& key = authorized.key;
    Status s = handler(req, res, key);
    if (!s.ok()) return http::SetError(res, s);
    if (name_key && key.id != "anonymous") res.set_header("Bdn-Key", key.Name());
    if (!verdict_age) return;
    if (auto age = AccessMaxAgeValue(authorized.grant)) res.set_header(kAccessMaxAgeHeader, *age);
  };
  if (method == "GET") {
    server_->Get(pattern, route, std::move(run), std::move(options));
  } else if (method == "POST") {
    server_->Post(pattern, route, std::move(run), std::move(options));
  } else if (method == "PUT") {
    server_->Put(pattern, route, std::move(run), std::move(options));
  } else {
    server_->Delete(pattern, route, std::move(run), std::move(options));
  }
}

// ---- Chain ----

void Origin::RegisterChain() {
  // Unauthenticated, like /healthz: it shows only random node ids, and a cache node's walk of
  // its chain must work before any key is configured.
  server_->Get("/v1/chain", "/v1/chain",
               [this](const http::ServerRequest& req, http::ServerResponse& res) {
                 if (options_.role == Role::kOrigin) return AnswerChainAtOrigin(res);
                 if (!options_.chain_upstream) {
                   return http::SetError(res, InternalError("cache node: no upstream configured"));
                 }
                 AnswerChainAtCacheNode(req.get_header_value(kChainHeader), options_.node_id,
                                        *options_.chain_upstream, res);
               });
  // Unauthenticated too: the list an operator gave every node, which a client given one node
  // needs before any chunk read (remote::DiscoverPeers). Cache nodes only.
  if (options_.role == Role::kOrigin) return;
  server_->Get("/v1/peers", "/v1/peers",
               [this](const http::ServerRequest&, http::ServerResponse& res) {
                 res.set_content(json{{"peers", options_.peers}}.dump() + "\n", "application/json");
               });
}

// ---- Keys ----

namespace {

// A key id from the path: "<id>" or "bdn_<id>".
std::string KeyIdOf(std::string id) {
  if (id.starts_with("bdn_")) id.erase(0, 4);
  return id;
}

}  // namespace

void Origin::RegisterKeys() {
  const Access admin{Scope::kAdmin, Where::kAnyNamespace};
  Route("POST", "/v1/keys", "/v1/keys", admin,
        [this](const http::ServerRequest& req, http::ServerResponse& res,
               const ApiKey& me) -> Status {
          if (!keys_) return FailedPreconditionError("keys: authentication is disabled");
          BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
          BDN_RETURN_IF_ERROR(KnownFields(body, {"namespace", "scopes"}));
          BDN_ASSIGN_OR_RETURN(auto ns, OptionalStringField(body, "namespace"));
          if (!ns) return InvalidArgumentError("namespace: missing (a namespace or \"*\")");
          BDN_ASSIGN_OR_RETURN(auto names, StringListField(body, "scopes"));
          std::vector<Scope> scopes;
          for (const auto& n : names) {
            BDN_ASSIGN_OR_RETURN(Scope s, ParseScope(n));
            scopes.push_back(s);
          }
          if (!me.Allows(Scope::kAdmin, *ns)) {
            return PermissionDeniedError("key " + me.Name() +
                                         ": no \"admin\" scope for namespace \"" + *ns + "\"");
          }
          BDN_ASSIGN_OR_RETURN(CreatedKey created, keys_->Create(*ns, std::move(scopes)));
          json out = api::KeyToJson(created.key);
          out["token"] = created.token;
          http::SetJson(res, out.dump(), 201);
          return Status::Ok();
        });
  Route("GET", "/v1/keys", "/v1/keys", admin,
        [this](const http::ServerRequest&, http::ServerResponse& res, const ApiKey& me) -> Status {
          if (!keys_) return FailedPreconditionError("keys: authentication is disabled");
          BDN_ASSIGN_OR_RETURN(auto all, keys_->List());
          json list = json::array();
          for (const ApiKey& k : all) {
            if (me.Allows(Scope::kAdmin, k.ns)) list.push_back(api::KeyToJson(k));
          }
          http::SetJson(res, json{{"keys", list}}.dump());
          return Status::Ok();
        });
  Route("DELETE", "/v1/keys/([^/]+)", "/v1/keys/{id}", admin,
        [this](const http::ServerRequest& req, http::ServerResponse& res,
               const ApiKey& me) -> Status {
          if (!keys_) return FailedPreconditionError("keys: authentication is disabled");
          std::string id = KeyIdOf(req.matches[1].str());
          BDN_ASSIGN_OR_RETURN(ApiKey target, keys_->Get(id));
          if (!me.Allows(Scope::kAdmin, target.ns)) {
            return PermissionDeniedError(
                "key " + me.Name() + ": no \"admin\" scope for namespace \"" + target.ns + "\"");
          }
          // Never lock every admin out: the last working "*" admin key stays (a restart would
          // not create another, since keys exist).
          if (!target.revoked && target.ns == kAllNamespaces &&
              target.Allows(Scope::kAdmin, std::nullopt)) {
            BDN_ASSIGN_OR_RETURN(auto all, keys_->List());
            bool another = std::any_of(all.begin(), all.end(), [&](const ApiKey& k) {
              return !k.revoked && k.id != target.id && k.ns == kAllNamespaces &&
                     k.Allows(Scope::kAdmin, std::nullopt);
            });
            if (!another) {
              return FailedPreconditionError(
                  "key " + target.Name() +
                  ": the last admin key for every namespace (\"*\"); create another before "
                  "revoking it");
            }
          }
          BDN_ASSIGN_OR_RETURN(ApiKey revoked, keys_->Revoke(id));
          read_admissions_->Clear();  // its reads end here at once, not after the TTL
          http::SetJson(
              res, json{{"id", revoked.id}, {"revoked", true}, {"already_revoked", target.revoked}}
                       .dump());
          return Status::Ok();
        });
}

// ---- First start ----

Result<std::optional<std::string>> BootstrapAdminKey(KeyStore& keys,
                                                     const std::filesystem::path& token_path) {
  // One transaction decides: of several servers sharing a key store and starting at once,
  // exactly one creates the key (and writes the token).
  BDN_ASSIGN_OR_RETURN(std::optional<CreatedKey> first,
                       keys.CreateIfNone(std::string(kAllNamespaces), {Scope::kAdmin}));
  if (!first) return std::optional<std::string>();
  const CreatedKey& created = *first;
  const std::string line = created.token + "\n";
  // One server holds the data directory: a fixed temporary name, reused after a crash.
  auto written = WriteFileAtomically(
      token_path, AsBytes(line), "admin token " + token_path.string(),
      {.tmp_name = token_path.filename().string() + ".tmp", .sync = FileSync::kAll});
  if (!written) {
    // A key left behind whose token nobody holds would stop CreateIfNone from ever making the
    // admin key again: the operator must hear of it.
    auto revoked = keys.Revoke(created.key.id);
    if (!revoked) {
      return Err(Status(written.error().code(),
                        written.error().message() + "; the admin key bdn_" + created.key.id +
                            " made for it could not be revoked: " + revoked.error().message()));
    }
    return Err(written.error());
  }
  return std::optional<std::string>(created.token);
}

}  // namespace bdn::origin
