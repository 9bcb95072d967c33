// Origin registry endpoints: namespaces, volumes, versions, find, commit (the visibility point),
// tags, and push claims (docs/http-api.md, "Registry" and "Push claims").
#include <algorithm>

#include "bdn/api/records_json.h"
#include "bdn/format/ref.h"
#include "bdn/origin/origin.h"
#include "bdn/origin/request_json.h"
#include "bdn/volume/version_check.h"

namespace bdn::origin {
namespace {

using nlohmann::json;

struct VolumePath {
  std::string ns;
  std::string volume;
};

// The namespace and volume of /v1/volumes/<ns>/<vol>/... (req.matches[1] and [2]).
Result<VolumePath> VolumeOf(const http::ServerRequest& req) {
  VolumePath p{req.matches[1].str(), req.matches[2].str()};
  BDN_RETURN_IF_ERROR(ValidateName("namespace", p.ns));
  BDN_RETURN_IF_ERROR(ValidateName("volume", p.volume));
  return p;
}

Result<Digest> FullDigestOf(std::string_view hex) {
  if (hex.size() != 64) {
    return Err(InvalidArgumentError("digest \"" + std::string(hex) +
                                    "\": must be the full 64 hex characters"));
  }
  return Digest::Parse(hex);
}

Result<std::optional<int64_t>> ExpectedSequenceParam(const http::ServerRequest& req) {
  if (!req.has_param("expected_sequence")) return std::optional<int64_t>();
  std::string v = req.get_param_value("expected_sequence");
  try {
    size_t used = 0;
    int64_t n = std::stoll(v, &used);
    if (used == v.size()) return std::optional<int64_t>(n);
  } catch (const std::exception&) {
  }
  return Err(InvalidArgumentError("expected_sequence \"" + v + "\": must be an integer"));
}

void Reply(http::ServerResponse& res, const json& j, int status = 200) {
  http::SetJson(res, j.dump(), status);
}

// The Idempotency-Key header of a write (docs/http-api.md, "Retries"); "" when absent.
std::string IdempotencyKeyOf(const http::ServerRequest& req) {
  return req.get_header_value("Idempotency-Key");
}

std::string HolderOf(const ApiKey& key) {
  // Authenticate names the caller "anonymous" with auth disabled; real key ids are hex.
  return key.id == "anonymous" ? std::string("an unauthenticated client") : "key " + key.Name();
}

// "key bdn_<id>: no \"tag\" scope for namespace \"ns\"": a commit's or claim's tags refused.
std::string NoTagScope(const ApiKey& key, const std::string& ns) {
  return "key " + key.Name() + ": no \"tag\" scope for namespace \"" + ns + "\"";
}

}  // namespace

void Origin::RegisterRegistry() {
  const Access pull_any{Scope::kPull, Where::kAnyNamespace};
  const Access pull{Scope::kPull, Where::kPathNamespace};
  const Access push{Scope::kPush, Where::kPathNamespace};
  const Access tag{Scope::kTag, Where::kPathNamespace};
  const Access admin{Scope::kAdmin, Where::kPathNamespace};
  using Req = const http::ServerRequest&;
  using Res = http::ServerResponse&;
  const std::string vol = "/v1/volumes/([^/]+)/([^/]+)";

  Route("GET", "/v1/namespaces", "/v1/namespaces", pull_any,
        [this](Req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(auto all, registry_->ListNamespaces());
          json list = json::array();
          for (const auto& ns : all) {
            if (key.Allows(Scope::kPull, ns)) list.push_back(ns);
          }
          Reply(res, {{"namespaces", list}});
          return Status::Ok();
        });
  Route("GET", "/v1/namespaces/([^/]+)/volumes", "/v1/namespaces/{ns}/volumes", pull,
        [this](Req req, Res res, const ApiKey&) -> Status {
          std::string ns = req.matches[1].str();
          BDN_RETURN_IF_ERROR(ValidateName("namespace", ns));
          BDN_ASSIGN_OR_RETURN(auto volumes, registry_->ListVolumes(ns));
          json list = json::array();
          for (const auto& v : volumes) list.push_back(api::VolumeToJson(v));
          Reply(res, {{"volumes", list}});
          return Status::Ok();
        });
  Route("GET", vol, "/v1/volumes/{ns}/{vol}", pull,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          BDN_ASSIGN_OR_RETURN(auto v, registry_->GetVolume(p.ns, p.volume));
          Reply(res, api::VolumeToJson(v));
          return Status::Ok();
        });
  Route("GET", vol + "/versions", "/v1/volumes/{ns}/{vol}/versions", pull,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string flag =
              req.has_param("include_deleted") ? req.get_param_value("include_deleted") : "0";
          if (flag != "0" && flag != "1" && flag != "true" && flag != "false") {
            return InvalidArgumentError("include_deleted \"" + flag + "\": must be 0 or 1");
          }
          bool include = flag == "1" || flag == "true";
          BDN_ASSIGN_OR_RETURN(auto versions, registry_->ListVersions(p.ns, p.volume, include));
          json list = json::array();
          for (const auto& v : versions) list.push_back(api::VersionToJson(v));
          Reply(res, {{"versions", list}});
          return Status::Ok();
        });
  Route("GET", vol + "/versions/([^/]+)", "/v1/volumes/{ns}/{vol}/versions/{digest}", pull,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          BDN_ASSIGN_OR_RETURN(Digest d, FullDigestOf(req.matches[3].str()));
          BDN_ASSIGN_OR_RETURN(auto v, registry_->GetVersion(p.ns, p.volume, d));
          Reply(res, api::VersionToJson(v));
          return Status::Ok();
        });
  // Lifecycle (docs/spec.md §8): soft delete needs admin (it drops tags, and the data goes once
  // the retention ends); restore needs push (it only brings a version back, without tags).
  Route("DELETE", vol + "/versions/([^/]+)", "/v1/volumes/{ns}/{vol}/versions/{digest}", admin,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          BDN_ASSIGN_OR_RETURN(Digest d, FullDigestOf(req.matches[3].str()));
          BDN_ASSIGN_OR_RETURN(auto expected, ExpectedSequenceParam(req));
          BDN_ASSIGN_OR_RETURN(
              DeleteResult r,
              registry_->DeleteVersions(p.ns, p.volume, d, expected, IdempotencyKeyOf(req)));
          Reply(res, api::DeleteResultToJson(r));
          return Status::Ok();
        });
  Route("DELETE", vol + "/versions", "/v1/volumes/{ns}/{vol}/versions", admin,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          if (!req.has_param("all") || req.get_param_value("all") != "1") {
            return InvalidArgumentError("DELETE /v1/volumes/" + p.ns + "/" + p.volume +
                                        "/versions: deleting every live version needs ?all=1");
          }
          BDN_ASSIGN_OR_RETURN(auto expected, ExpectedSequenceParam(req));
          BDN_ASSIGN_OR_RETURN(DeleteResult r,
                               registry_->DeleteVersions(p.ns, p.volume, std::nullopt, expected,
                                                         IdempotencyKeyOf(req)));
          Reply(res, api::DeleteResultToJson(r));
          return Status::Ok();
        });
  Route("POST", vol + "/versions/([^/]+)/restore",
        "/v1/volumes/{ns}/{vol}/versions/{digest}/restore", push,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          BDN_ASSIGN_OR_RETURN(Digest d, FullDigestOf(req.matches[3].str()));
          std::optional<int64_t> expected;
          if (!req.body.empty()) {
            BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
            BDN_RETURN_IF_ERROR(KnownFields(body, {"expected_sequence"}));
            BDN_ASSIGN_OR_RETURN(expected, OptionalIntField(body, "expected_sequence"));
          }
          BDN_ASSIGN_OR_RETURN(RestoreResult r, RestoreChecked(key, p.ns, p.volume, d, expected,
                                                               IdempotencyKeyOf(req)));
          Reply(res, api::RestoreResultToJson(r));
          return Status::Ok();
        });
  Route("GET", vol + "/find", "/v1/volumes/{ns}/{vol}/find", pull,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string prefix = req.get_param_value("prefix");
          if (prefix.starts_with("b3:")) prefix.erase(0, 3);
          bool hex = std::all_of(prefix.begin(), prefix.end(), [](char c) {
            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
          });
          if (prefix.empty() || prefix.size() > 64 || !hex) {
            return InvalidArgumentError("prefix \"" + prefix +
                                        "\": must be 1 to 64 lower-case hex characters");
          }
          BDN_ASSIGN_OR_RETURN(auto found, registry_->FindVersions(p.ns, p.volume, prefix));
          json list = json::array();
          for (const auto& d : found) list.push_back(d.Hex());
          Reply(res, {{"digests", list}});
          return Status::Ok();
        });
  Route("POST", vol + "/commit", "/v1/volumes/{ns}/{vol}/commit", push,
        [this](Req req, Res res, const ApiKey& key) { return Commit(req, res, key); });
  Route("PUT", vol + "/tags/([^/]+)", "/v1/volumes/{ns}/{vol}/tags/{tag}", tag,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string t = req.matches[3].str();
          BDN_RETURN_IF_ERROR(ValidateTag(t));
          BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
          BDN_RETURN_IF_ERROR(KnownFields(body, {"digest", "expected_sequence"}));
          BDN_ASSIGN_OR_RETURN(Digest d, DigestField(body, "digest"));
          BDN_ASSIGN_OR_RETURN(auto expected, OptionalIntField(body, "expected_sequence"));
          BDN_ASSIGN_OR_RETURN(int64_t seq, registry_->SetTag(p.ns, p.volume, t, d, expected,
                                                              IdempotencyKeyOf(req)));
          Reply(res, {{"sequence", seq}});
          return Status::Ok();
        });
  Route("DELETE", vol + "/tags/([^/]+)", "/v1/volumes/{ns}/{vol}/tags/{tag}", tag,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string t = req.matches[3].str();
          BDN_RETURN_IF_ERROR(ValidateTag(t));
          BDN_ASSIGN_OR_RETURN(auto expected, ExpectedSequenceParam(req));
          BDN_ASSIGN_OR_RETURN(int64_t seq, registry_->DeleteTag(p.ns, p.volume, t, expected,
                                                                 IdempotencyKeyOf(req)));
          Reply(res, {{"sequence", seq}});
          return Status::Ok();
        });
}

Status Origin::Commit(const http::ServerRequest& req, http::ServerResponse& res,
                      const ApiKey& key) {
  BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
  BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
  // "stats" is read from the manifest instead (the client's copy is ignored).
  BDN_RETURN_IF_ERROR(
      KnownFields(body, {"digest", "stats", "source_uri", "tags", "expected_sequence", "claim"}));
  CommitRequest c;
  c.ns = p.ns;
  c.volume = p.volume;
  BDN_ASSIGN_OR_RETURN(c.digest, DigestField(body, "digest"));
  BDN_ASSIGN_OR_RETURN(auto source_uri, OptionalStringField(body, "source_uri"));
  c.source_uri = source_uri.value_or("");
  BDN_ASSIGN_OR_RETURN(c.tags, StringListField(body, "tags"));
  for (const auto& t : c.tags) BDN_RETURN_IF_ERROR(ValidateTag(t));
  // Tags applied by a commit move like PUT .../tags/{tag}: they need the "tag" scope as well as
  // "push" (checked before anything is stored or committed).
  if (!c.tags.empty() && !key.Allows(Scope::kTag, p.ns)) {
    return PermissionDeniedError(NoTagScope(key, p.ns));
  }
  BDN_ASSIGN_OR_RETURN(c.expected_sequence, OptionalIntField(body, "expected_sequence"));
  BDN_ASSIGN_OR_RETURN(auto claim, OptionalStringField(body, "claim"));
  c.idempotency_key = IdempotencyKeyOf(req);
  // A retry of a commit that was applied gets the first answer, even once its claim is gone.
  BDN_ASSIGN_OR_RETURN(auto applied, registry_->FindCommit(c));
  if (applied) {
    Reply(res, api::CommitResultToJson(*applied));
    return Status::Ok();
  }
  BDN_RETURN_IF_ERROR(claims_->CheckCommit(p.ns, p.volume, claim));
  // The visibility rule: nothing is committed unless every blob it needs is stored and durable,
  // and no GC sweeps between the check and the commit (store/gc_store.h).
  // The stats come from the manifest, not from the request.
  // A key of one namespace commits only blobs that namespace may read or has uploaded: knowing a
  // blob's digest is not enough to make another namespace's blob one's own (NamespaceView).
  std::shared_ptr<ChunkStore> seen = PushStore(key, Freshness::kNow);
  BDN_ASSIGN_OR_RETURN(auto hold, store_->HoldForCommit());
  // Blobs another replica accepted may still be on their way into the shared store: asked again
  // for up to commit_wait (the store looks at its catalog again on each miss).
  const std::shared_ptr<Clock>& clock = options_.clock ? options_.clock : Clock::Real();
  const SteadyTime deadline = clock->SteadyNow() + options_.commit_wait;
  Result<VersionStats> stats = CheckVersionStored(*seen, c.digest);
  while (!stats && IsNotStoredError(stats.error())) {
    const SteadyTime now = clock->SteadyNow();
    if (now >= deadline) break;
    clock->SleepFor(std::min<SteadyTime::duration>(options_.commit_recheck_pause, deadline - now));
    stats = CheckVersionStored(*seen, c.digest);
  }
  if (!stats) return stats.error();
  c.stats = *stats;
  BDN_RETURN_IF_ERROR(store_->Sync());
  // A hold lost since the check (PostgreSQL restarted) may have let a sweep in: checked again.
  BDN_RETURN_IF_ERROR(StillHeld(*hold).WithPrefix("commit"));
  // The claim again: the wait for blobs above can be long, and meanwhile the claim may have
  // moved on (a push from the same machine took over the claim of a process that died with this
  // commit on its way: PushClaims::Acquire gave it a new id). Landing now would put this version
  // over the new holder's.
  BDN_RETURN_IF_ERROR(claims_->CheckCommit(p.ns, p.volume, claim));
  // Claims in the registry's database are checked again inside the commit's transaction: a
  // commit that waited there (a lock, a replica stopped mid-transaction and run again) must not
  // land after the claim moved on either.
  if (claims_->InRegistryDatabase()) {
    c.check_push_claim = true;
    c.push_claim = claim;
  }
  // The check above and the write below are not one step: the registry's transaction passes
  // the store's fence, so a sweep that got in anyway (its lock lost) leaves nothing committed.
  c.store_fence = hold->CommitFence();
  BDN_ASSIGN_OR_RETURN(CommitResult r, registry_->Commit(c));
  Reply(res, api::CommitResultToJson(r));
  return Status::Ok();
}

Result<RestoreResult> Origin::RestoreChecked(const ApiKey& key, const std::string& ns,
                                             const std::string& volume, const Digest& digest,
                                             std::optional<int64_t> expected,
                                             const std::string& idempotency_key) {
  CommitCheckingRegistry checked(registry_, PushStore(key, Freshness::kNow));
  return checked.RestoreVersion(ns, volume, digest, expected, idempotency_key);
}

void Origin::RegisterClaims() {
  const Access push{Scope::kPush, Where::kPathNamespace};
  using Req = const http::ServerRequest&;
  using Res = http::ServerResponse&;
  const std::string claims = "/v1/volumes/([^/]+)/([^/]+)/claims";
  auto ttl_ms = static_cast<int64_t>(claims_->ttl().count());

  Route("POST", claims, "/v1/volumes/{ns}/{vol}/claims", push,
        [this, ttl_ms](Req req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          // The tags the push's commit will apply (optional): a key that could not apply them is
          // refused now, before the push uploads anything (a new user's push uploaded all its
          // data and was refused at the commit).
          if (!req.body.empty()) {
            BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
            BDN_ASSIGN_OR_RETURN(auto tags, StringListField(body, "tags"));
            if (!tags.empty() && !key.Allows(Scope::kTag, p.ns)) {
              return PermissionDeniedError(
                  NoTagScope(key, p.ns) +
                  " (the push names tags: push without them, or with a key that has the tag "
                  "scope); nothing was uploaded");
            }
          }
          BDN_ASSIGN_OR_RETURN(std::string id, claims_->Acquire(p.ns, p.volume, HolderOf(key),
                                                                IdempotencyKeyOf(req)));
          Reply(res, {{"claim", id}, {"ttl_ms", ttl_ms}}, 201);
          return Status::Ok();
        });
  Route("PUT", claims + "/([^/]+)", "/v1/volumes/{ns}/{vol}/claims/{id}", push,
        [this, ttl_ms](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string id = req.matches[3].str();
          BDN_RETURN_IF_ERROR(claims_->Renew(p.ns, p.volume, id));
          Reply(res, {{"claim", id}, {"ttl_ms", ttl_ms}});
          return Status::Ok();
        });
  Route("DELETE", claims + "/([^/]+)", "/v1/volumes/{ns}/{vol}/claims/{id}", push,
        [this](Req req, Res res, const ApiKey&) -> Status {
          BDN_ASSIGN_OR_RETURN(VolumePath p, VolumeOf(req));
          std::string id = req.matches[3].str();
          BDN_RETURN_IF_ERROR(claims_->Release(p.ns, p.volume, id));
          Reply(res, {{"claim", id}, {"released", true}});
          return Status::Ok();
        });
}

}  // namespace bdn::origin
