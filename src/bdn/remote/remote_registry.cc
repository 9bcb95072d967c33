#include "bdn/remote/remote_registry.h"

#include <cctype>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bdn/api/records_json.h"
#include "bdn/base/text.h"

namespace bdn::remote {
namespace {

using nlohmann::json;

// Percent-encodes everything but RFC 3986 unreserved characters (names and tags are already
// restricted to those; this keeps a bad one from changing the route).
std::string Escape(std::string_view s) { return PercentEncode(s); }

std::string VolumePath(const std::string& ns, const std::string& volume) {
  return "/v1/volumes/" + Escape(ns) + "/" + Escape(volume);
}

std::string VolumeName(const std::string& ns, const std::string& volume) {
  return "volume bdn:" + ns + "/" + volume;
}

}  // namespace

// The claims this process holds, by "ns/volume", so Commit can name its claim.
struct internal::ClaimTable {
  struct State {
    std::string id;
    Mutex mu;
    Status lost;  // set once the claim can no longer be trusted to be ours
  };
  Mutex mu;
  std::map<std::string, std::shared_ptr<State>> by_volume GUARDED_BY(mu);
};
using Claims = internal::ClaimTable;

namespace {

class RemotePushClaim;
// Every live RemotePushClaim of this process, for ReleaseHeldClaimsNow.
Mutex g_held_mu;
std::set<RemotePushClaim*> g_held GUARDED_BY(g_held_mu);

// The claim id of a POST .../claims answer. Errors: Internal for a malformed answer.
Result<std::string> ClaimIdOf(http::HttpClient& client, const std::string& path,
                              const http::Response& r) {
  json j = json::parse(r.text(), nullptr, false);
  if (!j.is_object() || !j.contains("claim") || !j["claim"].is_string()) {
    return Err(
        InternalError(client.Name() + ": POST " + path + ": malformed response: no \"claim\""));
  }
  return j["claim"].get<std::string>();
}

// A live server claim: renewed every TTL/3 on its own thread, released on destruction. When the
// origin no longer knows it (it restarted and dropped its claims, or the claim lapsed while the
// origin was unreachable), the volume is claimed again, and Commit sends the new id; only if
// another client holds the volume by then is the claim lost. Transport errors are retried at the
// next period: the origin checks the claim at commit anyway.
class RemotePushClaim : public PushClaim {
 public:
  // `journal` (may be null) holds `claim_key`, the Idempotency-Key the claim was made with.
  RemotePushClaim(std::shared_ptr<http::HttpClient> client, std::shared_ptr<Claims> claims,
                  std::string key, std::string claims_path, std::shared_ptr<Claims::State> state,
                  std::string volume_name, std::chrono::milliseconds ttl,
                  std::shared_ptr<const ClaimJournal> journal, std::string claim_key)
      : client_(std::move(client)),
        claims_(std::move(claims)),
        key_(std::move(key)),
        claims_path_(std::move(claims_path)),
        state_(std::move(state)),
        volume_name_(std::move(volume_name)),
        ttl_(ttl),
        journal_(std::move(journal)),
        claim_key_(std::move(claim_key)) {
    thread_ = std::thread([this] { Renew(); });
    MutexLock held(g_held_mu);
    g_held.insert(this);
  }

  ~RemotePushClaim() override {
    {
      // Waits for a ReleaseHeldClaimsNow that is releasing this claim.
      MutexLock held(g_held_mu);
      g_held.erase(this);
    }
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // Best effort: a claim that is not released lapses after its TTL anyway.
    Release(std::chrono::milliseconds(5000));
    MutexLock lock(claims_->mu);
    auto it = claims_->by_volume.find(key_);
    if (it != claims_->by_volume.end() && it->second == state_) claims_->by_volume.erase(it);
  }

  // Releases the claim at once (one DELETE, 2 s at most) and forgets it in the journal, for a
  // process a stop signal is about to end; the destructor's release, if it runs, finds it gone.
  bool ReleaseNow() { return Release(std::chrono::milliseconds(2000)); }

 private:
  // One DELETE of the claim (within `deadline`), then the journal forgets it. Whether the
  // origin released it (or no longer knew it).
  bool Release(std::chrono::milliseconds deadline) {
    auto r =
        client_->Call({.method = http::Method::kDelete, .path = IdPath(), .deadline = deadline});
    if (journal_) {
      MutexLock state_lock(state_->mu);
      journal_->Forget(client_->base_url(), key_, claim_key_);
    }
    return r.has_value() || r.error().code() == StatusCode::kNotFound;
  }

  std::string IdPath() {
    MutexLock lock(state_->mu);
    return claims_path_ + "/" + Escape(state_->id);
  }

  void Renew() {
    const auto period = std::max(ttl_ / 3, std::chrono::milliseconds(10));
    const auto deadline = std::max(period, std::chrono::milliseconds(1000));
    std::string reclaim_key;  // one Idempotency-Key for the re-claim until it gets an answer
    MutexLock lock(mu_);
    while (!cv_.wait_for(lock.native(), period, [this]() REQUIRES(mu_) { return stopping_; })) {
      lock.Unlock();
      auto r =
          client_->Call({.method = http::Method::kPut, .path = IdPath(), .deadline = deadline});
      if (!r && r.error().code() == StatusCode::kNotFound)
        Reclaim(r.error(), reclaim_key, deadline);
      lock.Lock();
    }
  }

  void Reclaim(const Status& gone, std::string& key, std::chrono::milliseconds deadline) {
    if (key.empty()) key = NewIdempotencyKey().value_or("");
    const std::string body = "{}";
    auto c = client_->Call({.method = http::Method::kPost,
                            .path = claims_path_,
                            .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                            .headers = {{"Idempotency-Key", key}},
                            .deadline = deadline});
    if (!c && c.error().code() != StatusCode::kConflict) return;  // try again next period
    const std::string reclaim_key_used = key;
    key.clear();
    Result<std::string> id = c ? ClaimIdOf(*client_, claims_path_, *c) : Err(c.error());
    MutexLock state_lock(state_->mu);
    if (id) {
      state_->id = *id;
      if (journal_) {  // the claim a successor would take over is this one now
        journal_->Forget(client_->base_url(), key_, claim_key_);
        claim_key_ = reclaim_key_used;
        journal_->Record(client_->base_url(), key_, claim_key_);
      }
    } else if (state_->lost.ok()) {
      state_->lost = ConflictError(volume_name_ + ": push claim lost (" + gone.message() + "; " +
                                   id.error().message() + ")");
    }
  }

  std::shared_ptr<http::HttpClient> client_;
  std::shared_ptr<Claims> claims_;
  std::string key_;
  std::string claims_path_;  // /v1/volumes/<ns>/<vol>/claims
  std::shared_ptr<Claims::State> state_;
  std::string volume_name_;
  std::chrono::milliseconds ttl_;
  std::shared_ptr<const ClaimJournal> journal_;
  std::string claim_key_ GUARDED_BY(state_->mu);  // the key the journal records
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

ClaimsReleased ReleaseHeldClaimsNow() {
  MutexLock held(g_held_mu);
  ClaimsReleased out;
  for (RemotePushClaim* claim : g_held) {
    ++out.held;
    out.released += claim->ReleaseNow();
  }
  return out;
}

RemoteRegistry::RemoteRegistry(std::shared_ptr<http::HttpClient> client, RetryPolicy retry,
                               std::shared_ptr<RetryBudget> budget)
    : client_(std::move(client)),
      retry_(std::move(retry)),
      budget_(std::move(budget)),
      claims_(std::make_shared<internal::ClaimTable>()) {}

RemoteRegistry::~RemoteRegistry() = default;

namespace {

// GETs `path` (retried per `retry` or under `budget`) and parses the JSON body.
Result<json> GetJson(http::HttpClient& client, const RetryPolicy& retry, RetryBudget* budget,
                     const std::string& path) {
  BDN_ASSIGN_OR_RETURN(
      http::Response r,
      CallWithRetries(client, {.method = http::Method::kGet, .path = path}, retry, budget));
  json j = json::parse(r.text(), nullptr, false);
  if (j.is_discarded()) {
    return Err(InternalError(client.Name() + ": GET " + path + ": malformed response: not JSON"));
  }
  return j;
}

Result<json> ParseBody(http::HttpClient& client, std::string_view what, const http::Response& r) {
  json j = json::parse(r.text(), nullptr, false);
  if (j.is_discarded()) {
    return Err(
        InternalError(client.Name() + ": " + std::string(what) + ": malformed response: not JSON"));
  }
  return j;
}

// Wraps a decoding error as a malformed response of `what`.
Status Malformed(http::HttpClient& client, std::string_view what, const Status& s) {
  return InternalError(client.Name() + ": " + std::string(what) +
                       ": malformed response: " + s.message());
}

template <typename T, typename F>
Result<std::vector<T>> ListOf(http::HttpClient& client, const std::string& what, const json& j,
                              const char* key, F decode) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) {
    return Err(InternalError(client.Name() + ": " + what + ": malformed response: no \"" + key +
                             "\" array"));
  }
  std::vector<T> out;
  for (const auto& item : j[key]) {
    auto v = decode(item);
    if (!v) return Err(Malformed(client, what, v.error()));
    out.push_back(std::move(*v));
  }
  return out;
}

// Sends a write with an Idempotency-Key header (`key`, or a fresh one if empty) and retries it
// like a read: the server answers a repeat of an applied write with its first result.
Result<http::Response> SendWrite(http::HttpClient& client, const RetryPolicy& retry,
                                 RetryBudget* budget, http::Method method, const std::string& path,
                                 std::string_view body, const std::string& key,
                                 std::optional<std::chrono::milliseconds> deadline = std::nullopt) {
  std::string k = key;
  if (k.empty()) {
    BDN_ASSIGN_OR_RETURN(k, NewIdempotencyKey());
  }
  http::Request req{.method = method,
                    .path = path,
                    .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                    .headers = {{"Idempotency-Key", k}}};
  req.deadline = deadline;
  return CallWithRetries(client, req, retry, budget);
}

Result<int64_t> SequenceOf(http::HttpClient& client, std::string_view what,
                           const http::Response& r) {
  BDN_ASSIGN_OR_RETURN(json j, ParseBody(client, what, r));
  if (!j.is_object() || !j.contains("sequence") || !j["sequence"].is_number_integer()) {
    return Err(InternalError(client.Name() + ": " + std::string(what) +
                             ": malformed response: no \"sequence\""));
  }
  return j["sequence"].get<int64_t>();
}

}  // namespace

Result<std::vector<std::string>> RemoteRegistry::ListNamespaces() {
  const std::string path = "/v1/namespaces";
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  return ListOf<std::string>(*client_, "GET " + path, j, "namespaces",
                             [](const json& v) -> Result<std::string> {
                               if (!v.is_string()) return Err(InvalidArgumentError("not a string"));
                               return v.get<std::string>();
                             });
}

Result<std::vector<VolumeRecord>> RemoteRegistry::ListVolumes(const std::string& ns) {
  const std::string path = "/v1/namespaces/" + Escape(ns) + "/volumes";
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  return ListOf<VolumeRecord>(*client_, "GET " + path, j, "volumes", api::VolumeFromJson);
}

Result<VolumeRecord> RemoteRegistry::GetVolume(const std::string& ns, const std::string& volume) {
  const std::string path = VolumePath(ns, volume);
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  auto v = api::VolumeFromJson(j);
  if (!v) return Err(Malformed(*client_, "GET " + path, v.error()));
  return v;
}

Result<std::vector<VersionRecord>> RemoteRegistry::ListVersions(const std::string& ns,
                                                                const std::string& volume,
                                                                bool include_deleted) {
  const std::string path =
      VolumePath(ns, volume) + "/versions?include_deleted=" + (include_deleted ? "1" : "0");
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  return ListOf<VersionRecord>(*client_, "GET " + path, j, "versions", api::VersionFromJson);
}

Result<VersionRecord> RemoteRegistry::GetVersion(const std::string& ns, const std::string& volume,
                                                 const Digest& digest) {
  const std::string path = VolumePath(ns, volume) + "/versions/" + digest.Hex();
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  auto v = api::VersionFromJson(j);
  if (!v) return Err(Malformed(*client_, "GET " + path, v.error()));
  return v;
}

Result<std::vector<Digest>> RemoteRegistry::FindVersions(const std::string& ns,
                                                         const std::string& volume,
                                                         const std::string& hex_prefix) {
  const std::string path = VolumePath(ns, volume) + "/find?prefix=" + Escape(hex_prefix);
  BDN_ASSIGN_OR_RETURN(json j, GetJson(*client_, retry_, budget_.get(), path));
  return ListOf<Digest>(*client_, "GET " + path, j, "digests", [](const json& v) -> Result<Digest> {
    if (!v.is_string()) return Err(InvalidArgumentError("digest: not a string"));
    return Digest::Parse(v.get<std::string>());
  });
}

Result<CommitResult> RemoteRegistry::Commit(const CommitRequest& req) {
  std::optional<std::string> claim;
  {
    std::shared_ptr<Claims::State> state;
    {
      MutexLock lock(claims_->mu);
      auto it = claims_->by_volume.find(req.ns + "/" + req.volume);
      if (it != claims_->by_volume.end()) state = it->second;
    }
    if (state) {
      MutexLock lock(state->mu);
      if (!state->lost.ok()) return Err(state->lost);
      claim = state->id;
    }
  }
  const std::string path = VolumePath(req.ns, req.volume) + "/commit";
  const std::string body = api::CommitRequestToJson(req, claim).dump();
  BDN_ASSIGN_OR_RETURN(http::Response r,
                       SendWrite(*client_, retry_, budget_.get(), http::Method::kPost, path, body,
                                 req.idempotency_key));
  BDN_ASSIGN_OR_RETURN(json j, ParseBody(*client_, "POST " + path, r));
  auto result = api::CommitResultFromJson(j);
  if (!result) return Err(Malformed(*client_, "POST " + path, result.error()));
  return result;
}

Result<int64_t> RemoteRegistry::SetTag(const std::string& ns, const std::string& volume,
                                       const std::string& tag, const Digest& digest,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key) {
  const std::string path = VolumePath(ns, volume) + "/tags/" + Escape(tag);
  json body = {{"digest", digest.Hex()},
               {"expected_sequence", expected_sequence ? json(*expected_sequence) : json(nullptr)}};
  BDN_ASSIGN_OR_RETURN(http::Response r,
                       SendWrite(*client_, retry_, budget_.get(), http::Method::kPut, path,
                                 body.dump(), idempotency_key));
  return SequenceOf(*client_, "PUT " + path, r);
}

Result<int64_t> RemoteRegistry::DeleteTag(const std::string& ns, const std::string& volume,
                                          const std::string& tag,
                                          std::optional<int64_t> expected_sequence,
                                          const std::string& idempotency_key) {
  std::string path = VolumePath(ns, volume) + "/tags/" + Escape(tag);
  if (expected_sequence) path += "?expected_sequence=" + std::to_string(*expected_sequence);
  BDN_ASSIGN_OR_RETURN(
      http::Response r,
      SendWrite(*client_, retry_, budget_.get(), http::Method::kDelete, path, "", idempotency_key));
  return SequenceOf(*client_, "DELETE " + path, r);
}

Result<DeleteResult> RemoteRegistry::DeleteVersions(const std::string& ns,
                                                    const std::string& volume,
                                                    const std::optional<Digest>& digest,
                                                    std::optional<int64_t> expected_sequence,
                                                    const std::string& idempotency_key) {
  std::string path = VolumePath(ns, volume) + "/versions";
  std::string query;
  if (digest) {
    path += "/" + digest->Hex();
  } else {
    query = "all=1";
  }
  if (expected_sequence) {
    query += (query.empty() ? "" : "&") + std::string("expected_sequence=") +
             std::to_string(*expected_sequence);
  }
  if (!query.empty()) path += "?" + query;
  BDN_ASSIGN_OR_RETURN(
      http::Response r,
      SendWrite(*client_, retry_, budget_.get(), http::Method::kDelete, path, "", idempotency_key));
  BDN_ASSIGN_OR_RETURN(json j, ParseBody(*client_, "DELETE " + path, r));
  auto result = api::DeleteResultFromJson(j);
  if (!result) return Err(Malformed(*client_, "DELETE " + path, result.error()));
  return result;
}

Result<RestoreResult> RemoteRegistry::RestoreVersion(const std::string& ns,
                                                     const std::string& volume,
                                                     const Digest& digest,
                                                     std::optional<int64_t> expected_sequence,
                                                     const std::string& idempotency_key,
                                                     const std::string& /*store_fence*/) {
  const std::string path = VolumePath(ns, volume) + "/versions/" + digest.Hex() + "/restore";
  json body = {{"expected_sequence", expected_sequence ? json(*expected_sequence) : json(nullptr)}};
  BDN_ASSIGN_OR_RETURN(http::Response r,
                       SendWrite(*client_, retry_, budget_.get(), http::Method::kPost, path,
                                 body.dump(), idempotency_key));
  BDN_ASSIGN_OR_RETURN(json j, ParseBody(*client_, "POST " + path, r));
  auto result = api::RestoreResultFromJson(j);
  if (!result) return Err(Malformed(*client_, "POST " + path, result.error()));
  return result;
}

Result<std::vector<VersionRecord>> RemoteRegistry::ListRetainedVersions() {
  return Err(FailedPreconditionError(
      client_->Name() + ": garbage collection runs in the server (bdn serve --gc-interval)"));
}

Result<std::unique_ptr<PushClaim>> RemoteRegistry::ClaimPush(const std::string& ns,
                                                             const std::string& volume,
                                                             const std::vector<std::string>& tags) {
  const std::string path = VolumePath(ns, volume) + "/claims";
  const std::string key = ns + "/" + volume;
  // With a journal: the key of a dead process's claim (taken over), or a fresh one to record;
  // its lock keeps another push of this machine from taking the same claim over meanwhile.
  ClaimJournal::Attempt attempt;
  if (journal_) attempt = journal_->Begin(client_->base_url(), key);
  const std::string claim_key = attempt.key;
  const std::string body = tags.empty() ? "{}" : json{{"tags", tags}}.dump();
  // Recorded before it is sent, so that a push whose claim was made but whose answers were all
  // lost (or that was killed while it waited) is taken over by the next push of this machine at
  // once: from an attacker, that rerun was refused "push in progress … expires in 30 s". A record
  // whose claim was never made costs nothing: its key claims afresh.
  // Not over a live holder's record: this claim is likely refused, and the holder's record is what
  // lets a re-push take its claim over if it is killed.
  const bool record = journal_ && !attempt.live_holder;
  if (record) journal_->Record(client_->base_url(), key, claim_key);
  // Under a push's budget, the claim waits for its answer no longer than --retry-deadline (at
  // least 1 s): it comes first, before anything was sent (from an attacker: a push with
  // --retry-deadline 3s to a stopped origin waited 60 s with no word). Its outcome is then
  // unknown, and the journal lets the next push take it over.
  std::optional<std::chrono::milliseconds> deadline;
  if (budget_) deadline = std::max(budget_->deadline(), std::chrono::milliseconds(1000));
  auto sent = SendWrite(*client_, retry_, budget_.get(), http::Method::kPost, path, body, claim_key,
                        deadline);
  if (!sent) {
    // A refusal is an answer: no claim was made with the key. Without one it may have been.
    const StatusCode code = sent.error().code();
    if (record && code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded) {
      journal_->Forget(client_->base_url(), key, claim_key);
    }
    return Err(sent.error());
  }
  // Made after all (the live holder's claim had ended): recorded now.
  if (journal_ && !record) journal_->Record(client_->base_url(), key, claim_key);
  const http::Response& r = *sent;
  BDN_ASSIGN_OR_RETURN(json j, ParseBody(*client_, "POST " + path, r));
  auto state = std::make_shared<Claims::State>();
  BDN_ASSIGN_OR_RETURN(state->id, ClaimIdOf(*client_, path, r));
  int64_t ttl_ms =
      j.contains("ttl_ms") && j["ttl_ms"].is_number_integer() ? j["ttl_ms"].get<int64_t>() : 30000;
  {
    MutexLock lock(claims_->mu);
    claims_->by_volume[key] = state;
  }
  return std::unique_ptr<PushClaim>(new RemotePushClaim(
      client_, claims_, key, path, state, VolumeName(ns, volume),
      std::chrono::milliseconds(std::max<int64_t>(ttl_ms, 30)), journal_, claim_key));
}

}  // namespace bdn::remote
