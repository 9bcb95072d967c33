// Origin: the handlers of `bdn serve` (docs/http-api.md) over a ChunkStore, a Registry and a
// KeyStore: chunk upload/download/batch/missing- and sizes-query, registry reads, commit, tags,
// push claims and keys, each behind its authentication and scope check.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bdn/http/client.h"
#include "bdn/http/server.h"
#include "bdn/origin/chunk_scope.h"
#include "bdn/registry/key_store.h"
#include "bdn/registry/push_claims.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"
#include "bdn/sync/service.h"

namespace bdn::origin {

enum class AuthMode {
  kRequired,  // every endpoint but /healthz and /metrics needs a key with the right scope
  kDisabled,  // --insecure-no-auth: every request acts as an admin key for "*"
};

// What a server built on Origin serves.
enum class Role {
  kOrigin,  // everything in docs/http-api.md
  kCache,   // an in-cluster cache node: chunk GET and batch only (`bdn cache serve`); the
            // caller's access is checked by OriginOptions::read_authority
};

struct OriginOptions {
  Role role = Role::kOrigin;
  AuthMode auth = AuthMode::kRequired;
  std::chrono::milliseconds claim_ttl{30000};
  // The time push claims expire on (tests move a FakeClock); null: Clock::Real().
  std::shared_ptr<Clock> clock;
  size_t max_missing_ids = 4096;
  size_t max_batch_ids = 1024;
  size_t max_upload_ids = 1024;  // blobs per POST /v1/chunks/upload
  // Largest blob accepted by PUT /v1/chunks (chunks are at most 16 MiB; manifests and chunk
  // indexes of very large versions may be bigger).
  uint64_t max_blob_bytes = 64ull * 1024 * 1024;
  // Body limit of the JSON endpoints other than the id lists (commit, tags, keys, claims).
  uint64_t max_json_body_bytes = 64 * 1024;
  // Batch responses read chunks ahead of the socket a group of 64 at a time; all groups held
  // at once, server-wide, stay within this (past it, each response reads one chunk at a time),
  // so slow readers cannot make the server hold connections x 64 chunks.
  uint64_t batch_readahead_bytes = 256ull * 1024 * 1024;
  // Who decides whether a chunk read may go ahead (chunk_scope.h). Null: the origin's own
  // (RegistryReadAuthority over the registry, with scope_ttl); a cache node must be given one
  // (UpstreamReadAuthority), else it refuses every read with Internal "cache node: no access
  // check configured".
  ReadAuthority read_authority;
  // A cache node's id and the client of its upstream, for GET /v1/chain (upstream_chain.h); a
  // cache node without them answers that route 500.
  std::string node_id;
  std::shared_ptr<http::HttpClient> chain_upstream;
  // A cache node's --peers (every node of its cluster, itself included), answered to GET
  // /v1/peers so that a client given one node reads from all of them by rendezvous hashing.
  std::vector<std::string> peers;
  // How long the origin trusts that a version named by a read exists (one registry lookup per
  // version per this).
  std::chrono::milliseconds scope_ttl{30000};
  // How long a chunk-read admission (the key and its read grant) is reused for later reads
  // with the same Authorization and Bdn-Version, which a chunk in the page cache is then
  // answered on the I/O thread without (ReadAdmissions): a key revoked on another replica reads
  // for at most this long; 0 turns it off.
  std::chrono::milliseconds read_admission_ttl{1000};
  // Bound of the version blob sets kept for scoped reads, in ids (32 bytes each): 256 MiB.
  size_t version_blobs_max_ids = 8u << 20;
  NamespaceIndexOptions namespace_index;
  // A commit whose blobs are not all stored checks again, every commit_recheck_pause, for this
  // long before it answers 412 "… is not stored": with replicas sharing an object store, the
  // chunks of one push may have been accepted by another replica that is still uploading the
  // pack holding them (each check looks at the store's pack catalog again). 0: answer at once
  // (one server: nothing it has not stored will appear by itself).
  std::chrono::milliseconds commit_wait{0};
  std::chrono::milliseconds commit_recheck_pause{250};
};

// The body limit of an endpoint taking {"ids": [...]} of at most `max_ids` ids: 128 bytes per
// id (an id is 64 to 69 characters with its quotes, b3: prefix and comma, so room for
// whitespace) plus 4 KiB.
constexpr uint64_t IdsBodyLimit(size_t max_ids) { return 4096 + 128 * uint64_t{max_ids}; }
// The body limit of POST /v1/chunks/upload: its table of ids and lengths, and blob bytes up to
// one largest blob (a batch of smaller blobs may hold any number of them up to that size).
constexpr uint64_t UploadBodyLimit(size_t max_ids, uint64_t max_blob_bytes) {
  return 8 + 36 * uint64_t{max_ids} + max_blob_bytes;
}

// The origin's endpoints. Register them on a Server, which must be stopped before the Origin is
// destroyed. Thread-safe: handlers run concurrently; the store, registry and key store must be
// thread-safe.
class Origin {
 public:
  // `keys` may be null only with AuthMode::kDisabled. `claims`: where push claims live
  // (PgPushClaims for replicas sharing a database); null: this process's memory
  // (MemoryPushClaims with options.claim_ttl).
  Origin(OriginOptions options, std::shared_ptr<ChunkStore> store,
         std::shared_ptr<Registry> registry, std::shared_ptr<KeyStore> keys,
         std::shared_ptr<PushClaims> claims = nullptr);

  // Adds every endpoint of docs/http-api.md to `server` and declares the origin's metrics
  // (bdn_chunks_{sent,received}_total, bdn_chunk_bytes_{sent,received}_total) on it.
  void Register(http::Server& server);

  PushClaims& claims() { return *claims_; }

  // Serves the sync job and secret endpoints (docs/http-api.md, "Sync jobs", "Secrets") over
  // `sync`; call before Register. Without it those endpoints are not registered (404).
  void EnableSync(std::shared_ptr<sync::SyncService> sync) { sync_ = std::move(sync); }

  // A push claim on ns/volume for a run of sync job `job_id` in this server: taken in the claim
  // table (so pushes and syncs exclude each other) for holder "sync job <job_id>", renewed in
  // the background, released on destruction. A claim of the same holder that is live (left by
  // an earlier run of the job whose server was killed, or stopped while the database did not
  // answer, so that it could not release it) is waited out, up to the claim TTL and 5 s, instead
  // of failing the resumed job with volume_busy; never taken over, so two runs never hold it at
  // once (a claim still renewed after that wait is a run still going). Gives up when `stop` (if
  // not null) is set. Errors: Conflict "volume bdn:ns/vol: push in progress (claimed by ...)";
  // the claim table's.
  Result<std::unique_ptr<PushClaim>> ClaimForSync(const std::string& ns, const std::string& volume,
                                                  const std::string& job_id,
                                                  const std::atomic<bool>* stop = nullptr);

 private:
  // What an endpoint needs: a scope, for the namespace in the path (req.matches[1]) or for any;
  // kChunkRead also runs the read scope (the request's Bdn-Version) before the body is read.
  enum class Where { kAnyNamespace, kPathNamespace, kChunkRead };
  struct Access {
    Scope scope;
    Where where;
  };
  // A handler after authentication; a non-ok Status becomes the JSON error response.
  using Handler =
      std::function<Status(const http::ServerRequest&, http::ServerResponse&, const ApiKey& key)>;

  // Makes the sink a request's body is streamed into (instead of req.body); runs after the
  // authentication and scope check, before the body is read. A non-ok Status is the answer.
  using SinkFactory =
      std::function<Result<std::unique_ptr<http::BodySink>>(const http::ServerRequest&)>;

  // Registers `handler` behind the authentication and scope check of `access` (which run
  // before the body is read); a body over `max_body_bytes` (0: max_json_body_bytes) gets 413.
  // A kChunkRead route's admissions are kept in read_admissions_, for its `try_inline`.
  void Route(const std::string& method, const std::string& pattern, const std::string& route,
             Access access, Handler handler, uint64_t max_body_bytes = 0,
             SinkFactory make_sink = nullptr, http::InlineHandler try_inline = nullptr);
  // The key of the request's bearer token (or the anonymous admin with auth disabled):
  // "Authorization: Bearer <token>", the scheme in any case, then one or more spaces (1*SP; a
  // tab is not one) before the token (RFC 7235 §2.1, RFC 6750 §2.1). Errors: PermissionDenied,
  // to be answered with 401: "request: no credentials (…)", "Authorization: expected \"Bearer
  // bdn_<id>_<secret>\"", the key store's for the token.
  Result<ApiKey> Authenticate(const http::ServerRequest& req);
  // What a request holds after the admission step (ServerRequest::context).
  struct Authorized {
    ApiKey key;
    ReadGrant grant;  // of a kChunkRead endpoint
  };
  static const ReadGrant& GrantOf(const http::ServerRequest& req) {
    return std::any_cast<const Authorized&>(req.context).grant;
  }
  // The store as `key` sees it for the push side (missing- and sizes-queries, uploads, the
  // commit check): the store itself for a key of every namespace, else a NamespaceView.
  std::shared_ptr<ChunkStore> PushStore(const ApiKey& key, Freshness freshness);

  void RegisterChunks();      // missing- and sizes-query, upload
  void RegisterChunkReads();  // download and batch
  // The key an access-log line names (ServerRequest::key_name): `key`'s name, or for a cache
  // node (whose callers Authenticate names "anonymous") the key the origin verified for the
  // caller (`grant`'s key_name, from its Bdn-Key); "-" when there is none (no valid key, or an
  // origin without authentication).
  std::string KeyNameForLog(const ApiKey& key, const ReadGrant* grant) const;
  void RegisterChain();  // GET /v1/chain (upstream_chain.h), for both roles
  void RegisterRegistry();
  void RegisterClaims();
  void RegisterKeys();
  void RegisterSync();  // sync jobs and secrets

  Status PutChunk(const http::ServerRequest& req, http::ServerResponse& res, const ApiKey& key);
  Status UploadChunks(const http::ServerRequest& req, http::ServerResponse& res);
  Status GetChunk(const http::ServerRequest& req, http::ServerResponse& res);
  // GetChunk on the I/O thread (http::InlineHandler): answers only a read admitted recently
  // (read_admissions_) of a chunk its grant allows that the store has in the page cache, with
  // no If-None-Match; false for anything else, which GetChunk then answers.
  bool GetChunkNow(http::ServerRequest& req, http::ServerResponse& res);
  // The answer to a GET of chunk `id` whose verified bytes are `bytes`: 200, or 206/416 for a
  // Range; the ETag and cache headers; the sent-chunk metrics.
  void AnswerChunk(const http::ServerRequest& req, http::ServerResponse& res, const Digest& id,
                   const std::vector<uint8_t>& bytes);
  // The Cache-Control of a chunk answer.
  const char* ChunkCacheControl() const;
  Status BatchChunks(const http::ServerRequest& req, http::ServerResponse& res);
  // A stored chunk failed verification (the store moved it aside): says so on stderr and counts
  // it in bdn_chunks_corrupt_total, so an operator sees it even when the client only sees a
  // missing chunk.
  void ReportCorruption(const Status& s);
  Status Commit(const http::ServerRequest& req, http::ServerResponse& res, const ApiKey& key);
  // RestoreVersion after the commit check of the version (CommitCheckingRegistry): a version
  // comes back only with every blob it needs stored.
  Result<RestoreResult> RestoreChecked(const ApiKey& key, const std::string& ns,
                                       const std::string& volume, const Digest& digest,
                                       std::optional<int64_t> expected,
                                       const std::string& idempotency_key);

  OriginOptions options_;
  std::shared_ptr<ChunkStore> store_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<KeyStore> keys_;
  std::shared_ptr<PushClaims> claims_;
  std::shared_ptr<VersionBlobCache> version_blobs_;  // over store_
  std::unique_ptr<ReadScope> read_scope_;
  std::unique_ptr<ReadAdmissions> read_admissions_;
  std::unique_ptr<NamespaceIndex> namespaces_;  // the origin role's push side
  std::shared_ptr<sync::SyncService> sync_;
  http::Server* server_ = nullptr;
  // Bytes of chunks read ahead by batch responses, not yet sent (batch_readahead_bytes).
  std::shared_ptr<std::atomic<int64_t>> readahead_bytes_ =
      std::make_shared<std::atomic<int64_t>>(0);
};

// On a server whose key store holds no key at all (first start), creates an admin key for "*",
// writes its token to `token_path` (mode 0600, written to a temporary name and renamed) and
// returns it; returns nullopt when keys already exist. The check and the creation are one
// transaction (KeyStore::CreateIfNone): of replicas sharing a key store and starting at once,
// exactly one creates a key. Errors: from the key store, or I/O errors writing the file (the
// key is then revoked).
Result<std::optional<std::string>> BootstrapAdminKey(KeyStore& keys,
                                                     const std::filesystem::path& token_path);

}  // namespace bdn::origin
