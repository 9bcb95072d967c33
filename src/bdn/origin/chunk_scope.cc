// Chunk reads scoped to versions, pushes scoped to namespaces: the authorities (registry, or the
// origin for a cache node), the per-namespace index, and the store as one namespace sees it.
#include "bdn/origin/chunk_scope.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "bdn/base/circuit_breaker.h"
#include "bdn/base/clock.h"
#include "bdn/base/log.h"
#include "bdn/digest/digest.h"
#include "bdn/format/ref.h"

namespace bdn::origin {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string KeyLabel(const ApiKey& key) { return "key " + key.Name(); }

// Whether `name` has the shape of a key's name, "bdn_" and lower-case hex (at most 64 digits):
// what an origin's Bdn-Key header may put in a cache node's log.
bool IsKeyName(std::string_view name) {
  if (!name.starts_with("bdn_") || name.size() <= 4 || name.size() > 68) return false;
  for (char c : name.substr(4)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Before `k` is added to `map` (values with an `expires` time) holding `max_entries`: drops the
// expired entries, then, if it is still full, all of them.
template <typename Map>
void MakeRoom(Map& map, size_t max_entries, const typename Map::key_type& k,
              SteadyClock::time_point now) {
  if (map.size() < max_entries || map.contains(k)) return;
  std::erase_if(map, [&](const auto& kv) { return kv.second.expires <= now; });
  if (map.size() >= max_entries) map.clear();
}

// A bounded map of verdicts with expiry; past max_entries, expired ones are dropped first, then
// everything (a burst of distinct callers costs one more check each, never unbounded memory).
template <typename V>
class ExpiringMap {
 public:
  explicit ExpiringMap(size_t max_entries) : max_entries_(max_entries) {}
  struct Entry {
    V value;
    SteadyClock::time_point expires;
  };
  std::optional<Entry> Find(const std::string& k) {
    MutexLock lock(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  void Put(const std::string& k, V v, SteadyClock::time_point expires) {
    MutexLock lock(mu_);
    MakeRoom(map_, max_entries_, k, SteadyClock::now());
    map_[k] = Entry{std::move(v), expires};
  }

 private:
  const size_t max_entries_;
  Mutex mu_;
  std::unordered_map<std::string, Entry> map_ GUARDED_BY(mu_);
};

constexpr size_t kMaxVerdicts = 65536;

}  // namespace

Result<PinnedRef> ParseVersionHeader(std::string_view value) {
  auto ref = ParseRef(value);
  if (!ref) return Err(ref.error().WithPrefix(std::string("header ") + kVersionHeader));
  if (!ref->digest || ref->digest->size() != 64 || ref->tag || !ref->path.empty()) {
    return Err(InvalidArgumentError(std::string("header ") + kVersionHeader + ": \"" +
                                    std::string(value) +
                                    "\" must name a version by its full digest "
                                    "(bdn:<ns>/<vol>@b3:<64 hex>)"));
  }
  // The ref parser folds a digest to lower case (a typed ref); from outside, the digest as
  // sent: only its one spelling is a version's name.
  auto d = Digest::Parse(value.substr(value.find('@') + 1));
  if (!d) return Err(d.error().WithPrefix(std::string("header ") + kVersionHeader));
  PinnedRef pinned{ref->ns, ref->volume, *d};
  // Likewise the names (the ref parser folds them) and the "b3:": one version, one spelling, so
  // that every cache keyed by the header (kept admissions, verdicts) sees one key per version.
  if (pinned.ToString() != value) {
    return Err(InvalidArgumentError(std::string("header ") + kVersionHeader + ": \"" +
                                    std::string(value) + "\" is not written as \"" +
                                    pinned.ToString() +
                                    "\" (names in lower case, the digest after b3:)"));
  }
  return pinned;
}

bool SeesEveryNamespace(const ApiKey& key) {
  return key.ns == kAllNamespaces && key.Allows(Scope::kPull, std::nullopt);
}

ReadAuthority RegistryReadAuthority(std::shared_ptr<Registry> registry,
                                    std::chrono::milliseconds ttl) {
  // Versions found in the registry: "bdn:ns/vol@b3:…" → when to look again. Only successes are
  // kept: a version that appears later is found at once.
  auto found = std::make_shared<ExpiringMap<bool>>(kMaxVerdicts);
  return [registry = std::move(registry), ttl, found](
             const ApiKey& key, std::string_view,
             const std::optional<PinnedRef>& version) -> AccessVerdict {
    if (!version) {
      if (SeesEveryNamespace(key)) return {};
      return {PermissionDeniedError(KeyLabel(key) + ": a key for namespace \"" + key.ns +
                                    "\" reads chunks of a version: send " + kVersionHeader +
                                    ": bdn:<ns>/<vol>@b3:<hex>")
                  .WithReason(std::string(kVersionRequired))};
    }
    if (!key.Allows(Scope::kPull, version->ns)) {
      return {PermissionDeniedError(KeyLabel(key) + ": no \"pull\" scope for namespace \"" +
                                    version->ns + "\"")};
    }
    const std::string name = version->ToString();
    auto now = SteadyClock::now();
    if (auto hit = found->Find(name); hit && hit->expires > now) return {};
    auto v = registry->GetVersion(version->ns, version->volume, version->digest);
    if (!v) return {v.error()};
    found->Put(name, true, now + ttl);
    return {};
  };
}

namespace {

// POST /v1/chunks/batch with no ids: the access check without reading a blob.
http::Request EmptyBatchRequest() {
  static constexpr std::string_view kNoIds = R"({"ids": []})";
  return http::Request{
      .method = http::Method::kPost,
      .path = "/v1/chunks/batch",
      .body = std::span(reinterpret_cast<const uint8_t*>(kNoIds.data()), kNoIds.size())};
}

// Whether `r`, the answer to EmptyBatchRequest, is a bdn origin's batch: 200 and a body that
// starts with the batch magic. Another 2xx (204, or 200 with an HTML page) came from something
// else at that address, which allows nothing.
bool IsBatchAnswer(const http::Response& r) {
  return r.status == 200 && r.body.size() >= sizeof kBatchMagic &&
         std::memcmp(r.body.data(), kBatchMagic, sizeof kBatchMagic) == 0;
}

// Unavailable "<prefix><url> answered <status> without a bdn batch (is it a bdn origin?)".
Status NotABatch(std::string_view prefix, const http::HttpClient& upstream,
                 const http::Response& r) {
  return UnavailableError(std::string(prefix) + upstream.Name() + " answered " +
                          std::to_string(r.status) +
                          " to POST /v1/chunks/batch without a bdn batch (is it a bdn origin?)");
}

}  // namespace

std::optional<std::string> AccessMaxAgeValue(const ReadGrant& grant) {
  if (grant.valid_until == std::chrono::steady_clock::time_point::max()) return std::nullopt;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(grant.valid_until - SteadyClock::now());
  return std::to_string(std::max<int64_t>(left.count(), 0));
}

std::optional<std::chrono::milliseconds> AccessMaxAge(const http::Response& r) {
  auto v = r.Header("bdn-access-max-age-ms");
  // At most 12 digits (over 31 years): no overflow, and no sign, space or other byte.
  if (!v || v->empty() || v->size() > 12) return std::nullopt;
  int64_t ms = 0;
  for (char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + (c - '0');
  }
  return std::chrono::milliseconds(ms);
}

Status CheckReadsEveryNamespace(http::HttpClient& upstream) {
  const http::Request req = EmptyBatchRequest();
  BDN_ASSIGN_OR_RETURN(http::Response r, upstream.Send(req));
  if (IsBatchAnswer(r)) return Status::Ok();
  if (r.status / 100 == 2) return NotABatch("", upstream, r);
  Status s = upstream.ErrorOf(req, r);
  if (r.status == 401 || r.status == 403) {
    return PermissionDeniedError(std::string(s.message())).WithReason(s.reason());
  }
  return s;
}

namespace {

// The origin's verdict on `authorization` and `version_text` (empty: none), asked with
// EmptyBatchRequest and kept in `verdicts` under `key` for `ttl`; `hit`, the verdict kept before,
// answers when the origin cannot (when it allowed the read). The outcome is recorded in
// `breaker` (if any; `probe` as its Admit said).
AccessVerdict AskOrigin(http::HttpClient& origin, ExpiringMap<AccessVerdict>& verdicts,
                        std::chrono::milliseconds ttl, const std::string& key,
                        const std::string& authorization, const std::string& version_text,
                        const std::optional<ExpiringMap<AccessVerdict>::Entry>& hit,
                        CircuitBreaker* breaker, bool probe) {
  http::Request req = EmptyBatchRequest();
  if (!authorization.empty()) req.headers.emplace_back("Authorization", authorization);
  if (!version_text.empty()) req.headers.emplace_back(kVersionHeader, version_text);
  const auto asked = SteadyClock::now();
  auto r = origin.Send(req);
  if (breaker) {
    // Any HTTP answer is an answer; no answer (refused, reset, out of time) opens the breaker.
    const Status s = r ? Status::Ok() : r.error();
    breaker->Record(r.has_value() || s.reason() == kShuttingDown, s, probe);
  }
  // The origin cannot be asked (no answer, a 5xx, not a bdn batch): a caller it allowed before
  // keeps reading what is cached here, for another ttl (this caller's own check failed: the
  // next ones within ttl are not held up by it).
  const bool kept = hit && hit->value.status.ok();
  auto keep = [&] {
    AccessVerdict v = hit->value;
    v.valid_until = SteadyClock::now() + ttl;
    verdicts.Put(key, v, v.valid_until);
    return v;
  };
  if (!r) {
    if (kept) return keep();
    return {UnavailableError("cache node: cannot check access with the origin: " +
                             r.error().message())};
  }
  AccessVerdict verdict;
  if (r->status >= 500) {
    if (kept) return keep();
    return {UnavailableError("cache node: cannot check access with the origin: " +
                             origin.ErrorOf(req, *r).message())};
  }
  if (r->status / 100 == 2 && !IsBatchAnswer(*r)) {
    if (kept) return keep();
    return {NotABatch("cache node: cannot check access with the origin: ", origin, *r)};
  }
  if (r->status / 100 != 2) {
    verdict.status = origin.ErrorOf(req, *r);
    verdict.unauthenticated = r->status == 401;
  } else if (auto named = r->Header("bdn-key"); named && IsKeyName(*named)) {
    verdict.key_name = std::string(*named);
  }
  // From a chain of cache nodes: each node kept its upstream's verdict another ttl, so a revoked
  // key read through two nodes for 2 x ttl. A node upstream says how long its verdict has left.
  verdict.valid_until = asked + std::min(ttl, AccessMaxAge(*r).value_or(ttl));
  verdicts.Put(key, verdict, verdict.valid_until);
  return verdict;
}

}  // namespace

ReadAuthority UpstreamReadAuthority(std::shared_ptr<http::HttpClient> origin,
                                    std::chrono::milliseconds ttl) {
  auto verdicts = std::make_shared<ExpiringMap<AccessVerdict>>(kMaxVerdicts);
  // The checks' own breaker (not the reads': from an attacker, one caller's slow check then
  // closed the node to every caller's misses).
  auto breaker = std::make_shared<CircuitBreaker>(CircuitBreaker::Options{.name = "the origin"});
  return [origin = std::move(origin), ttl, verdicts, breaker](
             const ApiKey&, std::string_view authorization,
             const std::optional<PinnedRef>& version) -> AccessVerdict {
    // Keyed by a digest of the credentials, so the map never holds a token.
    const std::string version_text = version ? version->ToString() : "";
    const std::string key = Digest::Of(std::string(authorization) + "\n" + version_text).Hex();
    auto now = SteadyClock::now();
    auto hit = verdicts->Find(key);
    if (hit) hit->value.valid_until = hit->expires;
    if (hit && hit->expires > now) return hit->value;
    // From an attacker with a stopped origin: each caller's check, once its verdict expired,
    // waited out the client's deadline (10 s). Once one check got no answer, the others do not
    // ask for a while: a caller allowed before keeps its verdict (as when the origin cannot be
    // reached), others are refused at once. But only up to ttl past its expiry: an older one is
    // asked about all the same, as this caller's own check (from a third attacker: another
    // caller's slow checks held the breaker open, and a revoked key read on). An expired verdict
    // is not served while the origin answers (from a second attacker: serving expired verdicts
    // while asking again in the background let a revoked key read at any later time).
    bool probe = false;
    if (Status open = breaker->Admit(probe, "an access check"); !open.ok()) {
      if (!hit || !hit->value.status.ok()) {
        return {
            UnavailableError("cache node: cannot check access with the origin: " + open.message())};
      }
      if (now - hit->expires < ttl) return hit->value;
    }
    return AskOrigin(*origin, *verdicts, ttl, key, std::string(authorization), version_text, hit,
                     breaker.get(), probe);
  };
}

Digest ReadAdmissions::KeyOf(std::string_view authorization, std::string_view version) {
  Blake3Hasher h;
  const uint64_t n = authorization.size();  // the split between the two is part of the key
  h.Update(&n, sizeof n);
  h.Update(authorization.data(), authorization.size());
  h.Update(version.data(), version.size());
  return h.Finalize();
}

std::optional<ReadAdmissions::Entry> ReadAdmissions::Find(std::string_view authorization,
                                                          std::string_view version) const {
  if (ttl_.count() <= 0) return std::nullopt;
  const Digest k = KeyOf(authorization, version);
  ReaderLock l(mu_);
  auto it = map_.find(k);
  if (it == map_.end() || it->second.expires <= SteadyClock::now()) return std::nullopt;
  return it->second.entry;
}

void ReadAdmissions::Put(std::string_view authorization, std::string_view version,
                         uint64_t generation, SteadyClock::time_point started, Entry entry) {
  if (ttl_.count() <= 0) return;
  const auto now = SteadyClock::now();
  const auto expires = std::min(started + ttl_, entry.grant.valid_until);
  if (expires <= now) return;
  const Digest k = KeyOf(authorization, version);
  WriterLock l(mu_);
  // Under the lock, which Clear takes too: a Clear either came first (seen here) or comes after.
  if (generation != generation_.load()) return;
  MakeRoom(map_, max_entries_, k, now);
  map_[k] = Kept{std::move(entry), expires};
}

void ReadAdmissions::Clear() {
  WriterLock l(mu_);
  ++generation_;
  map_.clear();
}

Result<ReadGrant> ReadScope::Check(const ApiKey& key, std::string_view authorization,
                                   std::string_view version_header, bool* unauthenticated) {
  *unauthenticated = false;
  std::optional<PinnedRef> version;
  if (!version_header.empty()) {
    BDN_ASSIGN_OR_RETURN(version, ParseVersionHeader(version_header));
  }
  AccessVerdict verdict = authority_(key, authorization, version);
  if (!verdict.status.ok()) {
    *unauthenticated = verdict.unauthenticated;
    return Err(verdict.status);
  }
  ReadGrant grant;
  grant.valid_until = verdict.valid_until;
  grant.key_name = std::move(verdict.key_name);
  if (!version) return grant;
  grant.version = version->ToString();
  auto set = blobs_->Get(version->digest);
  if (!set) return Err(set.error().WithPrefix("version " + grant.version));
  grant.blobs = std::move(*set);
  return grant;
}

// ---- NamespaceIndex ----

struct NamespaceIndex::Ns {
  // Guards blobs and uploaded; held only for lookups and inserts, never across I/O.
  SharedMutex mu;
  std::unordered_set<Digest> blobs GUARDED_BY(mu);
  std::unordered_set<Digest> uploaded[2] GUARDED_BY(mu);  // [0] current, [1] the older half
  // Keeps refreshes one at a time, and guards what they keep between runs (Refresh, declared in
  // the header where Ns is incomplete, asserts it).
  Mutex refresh_mu;
  bool built GUARDED_BY(refresh_mu) = false;
  // Versions whose blobs are in `blobs`, chunk indexes already read, and each volume's sequence
  // at the last refresh.
  std::unordered_set<Digest> versions GUARDED_BY(refresh_mu);
  std::unordered_set<Digest> indexes GUARDED_BY(refresh_mu);
  std::map<std::string, int64_t> sequence GUARDED_BY(refresh_mu);
  std::atomic<int64_t> refreshed_ns{0};  // steady clock, nanoseconds; 0: never
};

NamespaceIndex::NamespaceIndex(std::shared_ptr<ChunkStore> store,
                               std::shared_ptr<Registry> registry, NamespaceIndexOptions options)
    : store_(std::move(store)), registry_(std::move(registry)), options_(options) {}

NamespaceIndex::~NamespaceIndex() = default;

NamespaceIndex::Ns& NamespaceIndex::Of(const std::string& ns) {
  MutexLock lock(mu_);
  auto& slot = namespaces_[ns];
  if (!slot) slot = std::make_unique<Ns>();
  return *slot;
}

Status NamespaceIndex::Refresh(const std::string& ns, Ns& n) {
  n.refresh_mu.AssertHeld();  // every caller holds it
  const int64_t started = SteadyClock::now().time_since_epoch().count();
  auto volumes = registry_->ListVolumes(ns);
  if (!volumes && volumes.error().code() != StatusCode::kNotFound) return volumes.error();
  std::vector<Digest> found;
  if (volumes) {
    for (const VolumeRecord& vol : *volumes) {
      auto seen = n.sequence.find(vol.name);
      if (seen != n.sequence.end() && seen->second == vol.sequence) continue;
      auto versions = registry_->ListVersions(ns, vol.name, /*include_deleted=*/true);
      if (!versions) {
        if (versions.error().code() == StatusCode::kNotFound) continue;  // deleted meanwhile
        return versions.error();
      }
      bool complete = true;
      for (const VersionRecord& v : *versions) {
        if (n.versions.contains(v.digest)) continue;
        if (Status s = CollectVersionBlobs(*store_, v.digest, found, n.indexes); !s.ok()) {
          // Its blobs read as missing to this namespace (never as present): logged, and tried
          // again at the next refresh.
          static log::RateLimiter limiter(20, std::chrono::minutes(1));
          limiter.Write(log::Level::kError, "namespace \"" + ns + "\": version " +
                                                PinnedRef{ns, vol.name, v.digest}.ToString() +
                                                ": " + s.message());
          complete = false;
          continue;
        }
        n.versions.insert(v.digest);
      }
      if (complete) n.sequence[vol.name] = vol.sequence;
    }
  }
  {
    WriterLock lock(n.mu);
    n.blobs.insert(found.begin(), found.end());
  }
  n.built = true;
  n.refreshed_ns.store(started);
  return Status::Ok();
}

Result<std::vector<bool>> NamespaceIndex::Readable(const std::string& ns,
                                                   std::span<const Digest> ids,
                                                   Freshness freshness) {
  Ns& n = Of(ns);
  auto lookup = [&] {
    std::vector<bool> out(ids.size());
    ReaderLock lock(n.mu);
    for (size_t i = 0; i < ids.size(); ++i) {
      out[i] = n.blobs.contains(ids[i]) || n.uploaded[0].contains(ids[i]) ||
               n.uploaded[1].contains(ids[i]);
    }
    return out;
  };
  const int64_t now = SteadyClock::now().time_since_epoch().count();
  const int64_t interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.refresh_interval).count();
  const int64_t last = n.refreshed_ns.load();
  if (freshness == Freshness::kNow) {
    MutexLock lock(n.refresh_mu);
    // A refresh that started after this call began is fresh enough.
    if (n.refreshed_ns.load() < now) BDN_RETURN_IF_ERROR(Refresh(ns, n));
  } else if (last == 0 || now - last >= interval) {
    if (last == 0) {
      n.refresh_mu.lock();  // never built: wait for the first build
    } else if (!n.refresh_mu.try_lock()) {
      return lookup();  // another thread refreshes: answer from what is known
    }
    Status refreshed = Status::Ok();
    if (!n.built ||
        SteadyClock::now().time_since_epoch().count() - n.refreshed_ns.load() >= interval) {
      refreshed = Refresh(ns, n);
    }
    n.refresh_mu.unlock();
    BDN_RETURN_IF_ERROR(refreshed);
  }
  return lookup();
}

void NamespaceIndex::RecordUpload(const std::string& ns, const Digest& id) {
  Ns& n = Of(ns);
  WriterLock lock(n.mu);
  if (n.uploaded[0].size() >= options_.max_uploaded / 2) {
    n.uploaded[1] = std::move(n.uploaded[0]);
    n.uploaded[0].clear();
  }
  n.uploaded[0].insert(id);
}

// ---- NamespaceView ----

namespace {

// Records the blob as the namespace's upload once it is stored.
class RecordingWriter : public BlobWriter {
 public:
  RecordingWriter(std::unique_ptr<BlobWriter> inner, NamespaceIndex& index, std::string ns,
                  const Digest& id)
      : inner_(std::move(inner)), index_(index), ns_(std::move(ns)), id_(id) {}
  Status Append(std::span<const uint8_t> piece) override { return inner_->Append(piece); }
  Result<PutOutcome> Commit() override {
    BDN_ASSIGN_OR_RETURN(PutOutcome outcome, inner_->Commit());
    index_.RecordUpload(ns_, id_);
    return outcome;
  }

 private:
  std::unique_ptr<BlobWriter> inner_;
  NamespaceIndex& index_;
  const std::string ns_;
  const Digest id_;
};

// The store's batch, each writer wrapped in a RecordingWriter.
class RecordingUploads : public UploadBatch {
 public:
  RecordingUploads(std::unique_ptr<UploadBatch> inner, NamespaceIndex& index, std::string ns,
                   std::span<const Digest> ids)
      : inner_(std::move(inner)), index_(index), ns_(std::move(ns)), ids_(ids.begin(), ids.end()) {}
  Result<std::unique_ptr<BlobWriter>> StartPut(size_t i) override {
    BDN_ASSIGN_OR_RETURN(auto writer, inner_->StartPut(i));
    return std::unique_ptr<BlobWriter>(
        std::make_unique<RecordingWriter>(std::move(writer), index_, ns_, ids_.at(i)));
  }

 private:
  std::unique_ptr<UploadBatch> inner_;
  NamespaceIndex& index_;
  const std::string ns_;
  const std::vector<Digest> ids_;
};

}  // namespace

Result<std::vector<bool>> NamespaceView::Readable(std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(auto ok, index_.Readable(ns_, ids, Freshness::kRecent));
  bool refused = std::find(ok.begin(), ok.end(), false) != ok.end();
  if (refused && freshness_ == Freshness::kNow && !refreshed_.exchange(true)) {
    BDN_ASSIGN_OR_RETURN(ok, index_.Readable(ns_, ids, Freshness::kNow));
  }
  return ok;
}

Result<bool> NamespaceView::Contains(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(bool have, store_->Contains(id));
  if (!have) return false;
  BDN_ASSIGN_OR_RETURN(auto ok, Readable(std::span(&id, 1)));
  return bool(ok[0]);
}

Result<std::vector<Digest>> NamespaceView::FindMissing(std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(auto missing, store_->FindMissing(ids));
  BDN_ASSIGN_OR_RETURN(auto ok, Readable(ids));
  std::unordered_set<Digest> absent(missing.begin(), missing.end());
  std::vector<Digest> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ok[i] || absent.contains(ids[i])) out.push_back(ids[i]);
  }
  return out;
}

Result<BlobSizes> NamespaceView::Sizes(std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(BlobSizes sizes, store_->Sizes(ids));
  BDN_ASSIGN_OR_RETURN(auto ok, Readable(ids));
  for (size_t i = 0; i < ids.size() && i < sizes.size(); ++i) {
    if (!ok[i]) sizes[i].reset();
  }
  return sizes;
}

Status NamespaceView::Put(const Digest& id, std::span<const uint8_t> data) {
  BDN_RETURN_IF_ERROR(store_->Put(id, data));
  index_.RecordUpload(ns_, id);
  return Status::Ok();
}

Result<std::unique_ptr<BlobWriter>> NamespaceView::StartPut(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(auto inner, store_->StartPut(id));
  return std::unique_ptr<BlobWriter>(
      std::make_unique<RecordingWriter>(std::move(inner), index_, ns_, id));
}

Result<std::unique_ptr<UploadBatch>> NamespaceView::StartUploads(std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(auto inner, store_->StartUploads(ids));
  return std::unique_ptr<UploadBatch>(
      std::make_unique<RecordingUploads>(std::move(inner), index_, ns_, ids));
}

Result<std::vector<uint8_t>> NamespaceView::Get(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(auto ok, Readable(std::span(&id, 1)));
  if (!ok[0]) return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  return store_->Get(id);
}

Result<BlobBatch> NamespaceView::GetMany(std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(auto ok, Readable(ids));
  std::vector<Digest> want;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ok[i]) want.push_back(ids[i]);
  }
  BDN_ASSIGN_OR_RETURN(BlobBatch got, store_->GetMany(want));
  BlobBatch out(ids.size());
  for (size_t i = 0, j = 0; i < ids.size(); ++i) {
    if (ok[i]) out[i] = std::move(got[j++]);
  }
  return out;
}

}  // namespace bdn::origin
