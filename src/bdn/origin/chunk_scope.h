// Which chunks a key may read (docs/http-api.md, "Chunks: scoped to namespaces"): a read names
// the version it belongs to (header Bdn-Version), the key must have pull on that version's
// namespace, and the chunk must be one of that version's blobs. Pushes by a key of one namespace
// see only what that namespace may read: a blob stored for another namespace reads as missing,
// so neither reads nor missing-queries tell one namespace what another holds.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/format/ref.h"
#include "bdn/http/client.h"
#include "bdn/http/message.h"
#include "bdn/registry/key_store.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"
#include "bdn/volume/version_blobs.h"

namespace bdn::origin {

// The request header naming the version a chunk read belongs to.
inline constexpr const char* kVersionHeader = "Bdn-Version";
// The reason (error.reason) of the 403 a chunk read without kVersionHeader gets with a key for
// one namespace: such a key reads only chunks of a version it names.
inline constexpr std::string_view kVersionRequired = "version_required";
// A cache node's answer to a chunk read carries how many more milliseconds the access verdict
// it served under may be kept (a decimal integer), so that a node whose upstream is another
// cache node keeps it no longer than that one does (UpstreamReadAuthority): a chain of nodes
// adds no time to a revoked key's reads. Origins send none (they check keys themselves).
inline constexpr const char* kAccessMaxAgeHeader = "Bdn-Access-Max-Age-Ms";

// Parses a Bdn-Version value: a pinned ref written exactly as PinnedRef::ToString writes it,
// "bdn:<ns>/<vol>@b3:<64 hex>", with no tag and no path (one spelling per version).
// Errors: InvalidArgument "header Bdn-Version: …" naming what is wrong (the ref parser's
// message, "must name a version by its full digest (bdn:<ns>/<vol>@b3:<64 hex>)", the digest
// parser's: "digest \"…\": 'A' is upper case (a digest is lower-case hex)", "\"bdn:A/m@…\" is
// not written as \"bdn:a/m@b3:…\" (names in lower case, the digest after b3:)").
Result<PinnedRef> ParseVersionHeader(std::string_view value);

// The answer of an access check: ok, or the error to send. `unauthenticated`: the credentials
// themselves were refused (401 rather than 403).
struct AccessVerdict {
  Status status;
  bool unauthenticated = false;
  // Until when the authority would give this verdict again without asking anew (a cache node's
  // kept answer from the origin); max when it asks nothing that can change (the origin's own).
  std::chrono::steady_clock::time_point valid_until = std::chrono::steady_clock::time_point::max();
  // The key whose credentials were verified ("bdn_<id>"), for the access log; empty when none
  // was (a server without authentication).
  std::string key_name;
};

// Decides whether a chunk read may go ahead: `version` is the request's Bdn-Version, if any;
// `authorization` its Authorization header ("" when absent); `key` the key the server
// authenticated (the anonymous admin where the server checks no credentials itself).
using ReadAuthority = std::function<AccessVerdict(const ApiKey& key, std::string_view authorization,
                                                  const std::optional<PinnedRef>& version)>;

// The origin's authority: a read without a version needs a key with pull on every namespace
// ("*"; auth off counts as such); with a version, the key needs pull on its namespace and the
// registry must hold the version (live or deleted and still restorable), which is looked up
// once per `ttl` per version (not per chunk, not per request).
// Errors in the verdict: PermissionDenied "key bdn_<id>: no \"pull\" scope for namespace
// \"<ns>\"" / "key bdn_<id>: a key for namespace \"<ns>\" reads chunks of a version: send
// Bdn-Version: bdn:<ns>/<vol>@b3:<hex>"; the registry's NotFound for an unknown version or volume;
// its other errors. Thread-safe.
ReadAuthority RegistryReadAuthority(std::shared_ptr<Registry> registry,
                                    std::chrono::milliseconds ttl);

// For a cache node as it starts: whether `upstream` (a client with the node's own token,
// BDN_TOKEN) lets it read every blob, as its fetches need (a key with pull on "*", or auth off):
// POST /v1/chunks/batch with no ids and no Bdn-Version. Ok when it does; PermissionDenied with
// the upstream's message when it refuses (401: no key, a malformed, unknown or revoked one; 403:
// a key without pull on "*"); otherwise the transport or HTTP error (Unavailable when the
// upstream is down), which a caller may take as "cannot tell". Thread-safe as `upstream`.
Status CheckReadsEveryNamespace(http::HttpClient& upstream);

// The kAccessMaxAgeHeader of `r`: nullopt when absent or not 1 to 12 decimal digits.
std::optional<std::chrono::milliseconds> AccessMaxAge(const http::Response& r);

// The first bytes of every POST /v1/chunks/batch answer (docs/http-api.md).
inline constexpr char kBatchMagic[4] = {'B', 'D', 'N', 'B'};

// A cache node's authority (`bdn cache serve`): asks the origin whether the caller may read,
// sending POST /v1/chunks/batch with no ids and the caller's Authorization and Bdn-Version
// through `origin` (a client without a token of its own), and keeps each answer for `ttl` per
// (credentials, version), so a node asks once per caller and version per ttl, not per chunk.
// While the origin cannot be reached, an answer that allowed the read is kept; with none, the
// verdict is Unavailable "cache node: cannot check access with the origin: …". The origin's
// refusals are passed on with its message (401 stays 401). Only 200 with a batch body
// (kBatchMagic) allows: another 2xx means something other than a bdn origin answered, which is
// Unavailable like a 5xx. The key an allowing answer names in
// its Bdn-Key header (the origin's, for a key it verified) becomes the verdict's key_name. An
// answer (allowing or refusing) is kept for `ttl`, or for its kAccessMaxAgeHeader if that is
// shorter (the upstream is a cache node; a malformed value is ignored).
// After a check the origin did not answer (refused, reset, past the client's deadline), the
// origin is not asked again for 5 s (10, 20, 40 s while it still does not answer; one check tries
// meanwhile): a caller with a kept allowing answer is served with it, others are refused at once
// with Unavailable "cache node: cannot check access with the origin: the origin failed an access
// check 2s ago (…); not asked again for 3s"; a kept answer that expired more than ttl ago is
// asked about all the same (by this caller's own check). A caller whose own check found the origin
// unreachable (no answer, a 5xx) keeps its allowing answer for another ttl. So while the origin
// answers, a revoked key reads through a node for at most ttl (2 x ttl while other callers'
// checks hold the breaker open); while the origin cannot be reached, a caller allowed before
// reads on.
// Thread-safe.
ReadAuthority UpstreamReadAuthority(std::shared_ptr<http::HttpClient> origin,
                                    std::chrono::milliseconds ttl);

// What one chunk read request may return: every blob (`blobs` null), or only those of `version`.
struct ReadGrant {
  std::shared_ptr<const BlobSet> blobs;
  std::string version;   // "bdn:ns/vol@b3:…", for messages; empty with blobs null
  std::string key_name;  // AccessVerdict::key_name
  // The verdict's AccessVerdict::valid_until: a kept admission must not outlive it.
  std::chrono::steady_clock::time_point valid_until = std::chrono::steady_clock::time_point::max();

  bool Allows(const Digest& id) const { return !blobs || blobs->Contains(id); }
};

// The kAccessMaxAgeHeader value for an answer under `grant`: the milliseconds from now to its
// valid_until (0 once past), or nullopt when it has none (an origin's own verdict).
std::optional<std::string> AccessMaxAgeValue(const ReadGrant& grant);

// The check of every chunk read: the authority's verdict, then the version's blob set from
// `blobs` (loaded once per version, kept in memory). Thread-safe.
class ReadScope {
 public:
  ReadScope(ReadAuthority authority, std::shared_ptr<VersionBlobCache> blobs)
      : authority_(std::move(authority)), blobs_(std::move(blobs)) {}

  // The grant of a request carrying `version_header` (empty: none) and `authorization`.
  // Errors: InvalidArgument for a malformed Bdn-Version; the authority's verdict (with
  // `unauthenticated` set for a 401); Corruption/NotFound naming the version's manifest or chunk
  // index when its blobs cannot be read ("version bdn:…: …").
  Result<ReadGrant> Check(const ApiKey& key, std::string_view authorization,
                          std::string_view version_header, bool* unauthenticated);

  VersionBlobCache& blobs() { return *blobs_; }

 private:
  ReadAuthority authority_;
  std::shared_ptr<VersionBlobCache> blobs_;
};

// Chunk-read admissions granted recently (the key and its ReadGrant), so that a chunk read can
// be admitted on a server's I/O thread without the key store or the registry
// (http::RouteOptions::try_inline). Keyed by a digest of the request's Authorization and
// Bdn-Version headers, so no token is held. An entry serves for `ttl` from the start of the
// admission that made it (before its key was looked up), and never past its grant's
// valid_until; Clear() (a key revoked through this server) drops every entry, and an admission
// that began before a Clear is not kept (the generation it read is stale). Past `max_entries`,
// expired entries are dropped, then all. Thread-safe.
class ReadAdmissions {
 public:
  ReadAdmissions(std::chrono::milliseconds ttl, size_t max_entries)
      : ttl_(ttl), max_entries_(max_entries) {}

  struct Entry {
    ApiKey key;
    ReadGrant grant;
  };
  // The generation an admission reads before it authenticates, to pass to Put.
  uint64_t generation() const { return generation_.load(); }
  // The unexpired admission of these headers ("" for one not sent), or nullopt.
  std::optional<Entry> Find(std::string_view authorization, std::string_view version) const;
  // Keeps an admission that began at `started`, when the generation was `generation`; a no-op
  // with ttl 0, after a Clear since, or when it would expire at once.
  void Put(std::string_view authorization, std::string_view version, uint64_t generation,
           std::chrono::steady_clock::time_point started, Entry entry);
  void Clear();

 private:
  static Digest KeyOf(std::string_view authorization, std::string_view version);

  const std::chrono::milliseconds ttl_;
  const size_t max_entries_;
  std::atomic<uint64_t> generation_{0};
  mutable SharedMutex mu_;
  struct Kept {
    Entry entry;
    std::chrono::steady_clock::time_point expires;
  };
  std::unordered_map<Digest, Kept> map_ GUARDED_BY(mu_);
};

struct NamespaceIndexOptions {
  // A namespace's view is brought up to date (one ListVolumes, then ListVersions of the volumes
  // whose sequence moved) when it is older than this at a missing- or sizes-query.
  std::chrono::milliseconds refresh_interval{1000};
  // Blobs uploaded by keys of a namespace, remembered (per namespace) so that a push's
  // missing-queries and commit see what it sent before it commits; past this many, the oldest
  // half is forgotten (a push then sends those again).
  size_t max_uploaded = 4u << 20;
};

// How fresh a namespace's view must be for a question.
enum class Freshness {
  kRecent,  // refreshed at most refresh_interval ago (or being refreshed by another thread)
  kNow,     // refreshed now if anything would be refused (once per NamespaceView)
};

// The blobs each namespace may read, for the push side of keys scoped to one namespace: the
// blobs of its versions (live, or deleted and restorable; from the registry and the manifests
// and chunk indexes in `store`), plus the blobs its keys uploaded since this process started.
// Built on first use per namespace, then refreshed from the registry's volume sequences, so a
// check is a hash lookup and a refresh costs one registry query plus the manifests and chunk
// indexes of the new versions. Memory: ~64 bytes per distinct blob of each namespace used.
// Thread-safe; no lock is held while the registry or the store is read, except the one that
// keeps a namespace's refreshes one at a time.
class NamespaceIndex {
 public:
  NamespaceIndex(std::shared_ptr<ChunkStore> store, std::shared_ptr<Registry> registry,
                 NamespaceIndexOptions options);
  ~NamespaceIndex();

  // For each of `ids`, whether namespace `ns` may read it. Errors: the registry's.
  Result<std::vector<bool>> Readable(const std::string& ns, std::span<const Digest> ids,
                                     Freshness freshness);
  // A key of `ns` uploaded `id`.
  void RecordUpload(const std::string& ns, const Digest& id);

 private:
  struct Ns;
  Ns& Of(const std::string& ns);
  // Brings `n` up to date. Errors: the registry's.
  Status Refresh(const std::string& ns, Ns& n);

  std::shared_ptr<ChunkStore> store_;
  std::shared_ptr<Registry> registry_;
  NamespaceIndexOptions options_;
  Mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Ns>> namespaces_ GUARDED_BY(mu_);
};

// `store` as a key of namespace `ns` sees it: blobs the namespace may not read (NamespaceIndex)
// are missing (Contains false, FindMissing lists them, Sizes null, Get NotFound "chunk b3:…: not
// in store", GetMany nullopt); writes go to `store` and are recorded as the namespace's uploads.
// The first question that finds a blob refused refreshes the namespace's view when `freshness`
// is kNow (a commit check), so a version committed a moment ago through another origin counts.
// Thread-safe.
class NamespaceView : public ChunkStore {
 public:
  NamespaceView(std::shared_ptr<ChunkStore> store, NamespaceIndex& index, std::string ns,
                Freshness freshness)
      : store_(std::move(store)), index_(index), ns_(std::move(ns)), freshness_(freshness) {}

  Result<bool> Contains(const Digest& id) override;
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  Result<std::unique_ptr<BlobWriter>> StartPut(const Digest& id) override;
  // The store's own batch (one claim transaction on an object store); each upload is recorded.
  Result<std::unique_ptr<UploadBatch>> StartUploads(std::span<const Digest> ids) override;
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  Status Sync() override { return store_->Sync(); }
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override { return store_->HoldForCommit(); }

 private:
  Result<std::vector<bool>> Readable(std::span<const Digest> ids);

  std::shared_ptr<ChunkStore> store_;
  NamespaceIndex& index_;
  const std::string ns_;
  const Freshness freshness_;
  std::atomic<bool> refreshed_{false};
};

// Whether `key` reads and pushes unscoped: a key for every namespace ("*"), or the anonymous
// admin of a server without auth.
bool SeesEveryNamespace(const ApiKey& key);

}  // namespace bdn::origin
