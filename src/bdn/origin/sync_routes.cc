// Origin endpoints of sync jobs and secrets (docs/http-api.md, "Sync jobs" and "Secrets"): jobs
// are created here and run by the server's JobScheduler; secrets are write-only.
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "bdn/api/sync_json.h"
#include "bdn/format/ref.h"
#include "bdn/origin/origin.h"
#include "bdn/origin/request_json.h"
#include "bdn/sync/service.h"  // AsShown
#include "bdn/sync/source.h"

namespace bdn::origin {
namespace {

using nlohmann::json;

void Reply(http::ServerResponse& res, const json& j, int status = 200) {
  // Names and messages may hold bytes that are not UTF-8: replaced, never a throw.
  http::SetJson(res, j.dump(-1, ' ', false, json::error_handler_t::replace), status);
}

Status NeedScope(const ApiKey& key, Scope scope, const std::string& ns) {
  if (key.Allows(scope, ns)) return Status::Ok();
  return PermissionDeniedError("key " + key.Name() + ": no \"" + std::string(ScopeName(scope)) +
                               "\" scope for namespace \"" + ns + "\"");
}

bool IsSecretAdmin(const ApiKey& key) {
  return key.ns == kAllNamespaces && key.Allows(Scope::kAdmin, std::nullopt);
}

// Secrets serve every namespace's jobs: managing them takes an admin key for all namespaces.
Status NeedSecretAdmin(const ApiKey& key) {
  if (IsSecretAdmin(key)) return Status::Ok();
  return PermissionDeniedError("key " + key.Name() +
                               ": secrets need the \"admin\" scope for every namespace (\"*\")");
}

// A job that would send its secret to a host its caller names hands the secret to whoever runs
// that host: only a key that may manage the secrets anyway starts one (docs/sync.md, "Sources on
// a server"). Errors: PermissionDenied, reason secret_not_allowed.
Status NeedSecretForCallerHost(const ApiKey& key, const SyncJobSpec& spec) {
  if (spec.auth_secret_name.empty() || IsSecretAdmin(key)) return Status::Ok();
  auto why = sync::SecretHostChosenByCaller(spec.source_uri, spec.endpoint);
  if (!why) return Status::Ok();
  return PermissionDeniedError(
             "key " + key.Name() + ": secret \"" + spec.auth_secret_name +
             "\" would be sent to a host the job chooses (" + *why +
             "); such a job needs the \"admin\" scope for every namespace (\"*\"), as secrets do")
      .WithReason(std::string(sync::kSecretNotAllowed));
}

// A claim in the table, renewed every third of the TTL until destroyed.
class TableClaim : public PushClaim {
 public:
  TableClaim(PushClaims& table, std::string ns, std::string volume, std::string id)
      : table_(table),
        ns_(std::move(ns)),
        volume_(std::move(volume)),
        id_(std::move(id)),
        thread_([this] { Renew(); }) {}
  ~TableClaim() override {
    {
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // Best effort in a destructor: a claim that is not released lapses after its TTL.
    table_.Release(ns_, volume_, id_).IgnoreError();
  }

 private:
  void Renew() {
    MutexLock lock(mu_);
    while (!cv_.wait_for(lock.native(), table_.ttl() / 3, [&]() REQUIRES(mu_) { return done_; })) {
      // A failed renewal is retried at the next third of the TTL; the claim lapses only if
      // every renewal within the TTL fails, and then another runner may take the job.
      table_.Renew(ns_, volume_, id_).IgnoreError();
    }
  }

  PushClaims& table_;
  const std::string ns_, volume_, id_;
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<PushClaim>> Origin::ClaimForSync(const std::string& ns,
                                                        const std::string& volume,
                                                        const std::string& job_id,
                                                        const std::atomic<bool>* stop) {
  // Named so that a conflict, seen through any replica (claims shared in a database), names the
  // job (`bdn volume sync describe` says where it stands).
  const std::string holder = "sync job " + job_id;
  const auto give_up = std::chrono::steady_clock::now() + claims_->ttl() + std::chrono::seconds(5);
  Result<std::string> taken = claims_->Acquire(ns, volume, holder);
  while (!taken && IsClaimConflictOf(taken.error(), holder) &&
         std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 10; ++i) {
      if (stop != nullptr && stop->load()) return Err(taken.error());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    taken = claims_->Acquire(ns, volume, holder);
  }
  BDN_ASSIGN_OR_RETURN(std::string id, std::move(taken));
  return std::unique_ptr<PushClaim>(std::make_unique<TableClaim>(*claims_, ns, volume, id));
}

void Origin::RegisterSync() {
  using Req = const http::ServerRequest&;
  using Res = http::ServerResponse&;
  // The namespace is in the body or the job: each handler checks its scope itself.
  const Access any{Scope::kPull, Where::kAnyNamespace};
  const Access admin{Scope::kAdmin, Where::kAnyNamespace};

  Route("POST", "/v1/sync/jobs", "/v1/sync/jobs", any,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
          BDN_RETURN_IF_ERROR(
              KnownFields(body, {"source", "namespace", "volume", "tag", "includes", "excludes",
                                 "auth_secret_name", "retry_deadline_ms", "endpoint", "region"}));
          BDN_ASSIGN_OR_RETURN(SyncJobSpec spec, api::SyncJobSpecFromJson(body));
          BDN_RETURN_IF_ERROR(ValidateName("namespace", spec.ns));
          BDN_RETURN_IF_ERROR(NeedScope(key, Scope::kPush, spec.ns));
          if (!spec.tag.empty()) BDN_RETURN_IF_ERROR(NeedScope(key, Scope::kTag, spec.ns));
          BDN_RETURN_IF_ERROR(sync::ValidateSourceUri(spec.source_uri));
          BDN_RETURN_IF_ERROR(NeedSecretForCallerHost(key, spec));
          // Any other key may name only a secret set for the job's namespace; one it may not
          // use reads as missing (SecretVault::CheckUse), so no other team's names leak.
          BDN_ASSIGN_OR_RETURN(
              sync::StartedJob started,
              sync_->Start(spec, IsSecretAdmin(key) ? sync::SecretUse::kAny
                                                    : sync::SecretUse::kJobNamespace));
          json j = api::SyncJobToJson(sync::AsShown(started.job));
          j["created"] = started.created;
          Reply(res, j, started.created ? 201 : 200);
          return Status::Ok();
        });
  Route("GET", "/v1/sync/jobs", "/v1/sync/jobs", any,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          std::string ns = req.has_param("namespace") ? req.get_param_value("namespace") : "";
          std::string volume = req.has_param("volume") ? req.get_param_value("volume") : "";
          if (!ns.empty()) BDN_RETURN_IF_ERROR(ValidateName("namespace", ns));
          if (!volume.empty()) {
            if (ns.empty()) return InvalidArgumentError("volume: needs namespace");
            BDN_RETURN_IF_ERROR(ValidateName("volume", volume));
          }
          if (!ns.empty()) BDN_RETURN_IF_ERROR(NeedScope(key, Scope::kPull, ns));
          // A key of one namespace lists that namespace's jobs: the database selects them (and
          // the newest kMaxListedSyncJobs), never every job to be filtered here.
          if (ns.empty() && key.ns != kAllNamespaces) ns = key.ns;
          BDN_ASSIGN_OR_RETURN(sync::SyncJobList listed, sync_->List(ns, volume));
          json list = json::array();
          for (const auto& job : listed.jobs) {
            if (key.Allows(Scope::kPull, job.spec.ns))
              list.push_back(api::SyncJobToJson(sync::AsShown(job)));
          }
          Reply(res, {{"jobs", list}, {"truncated", listed.truncated}});
          return Status::Ok();
        });
  Route("GET", "/v1/sync/jobs/([a-z0-9_]+)", "/v1/sync/jobs/{id}", any,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(SyncJobRecord job, sync_->Get(req.matches[1].str()));
          BDN_RETURN_IF_ERROR(NeedScope(key, Scope::kPull, job.spec.ns));
          Reply(res, api::SyncJobToJson(sync::AsShown(job)));
          return Status::Ok();
        });
  Route("POST", "/v1/sync/jobs/([a-z0-9_]+)/cancel", "/v1/sync/jobs/{id}/cancel", any,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_ASSIGN_OR_RETURN(SyncJobRecord job, sync_->Get(req.matches[1].str()));
          BDN_RETURN_IF_ERROR(NeedScope(key, Scope::kPush, job.spec.ns));
          BDN_ASSIGN_OR_RETURN(job, sync_->Cancel(job.id));
          Reply(res, api::SyncJobToJson(sync::AsShown(job)));
          return Status::Ok();
        });

  Route("PUT", "/v1/secrets/([^/]+)", "/v1/secrets/{name}", admin,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_RETURN_IF_ERROR(NeedSecretAdmin(key));
          const std::string name = req.matches[1].str();
          BDN_RETURN_IF_ERROR(ValidateSecretName(name));
          BDN_ASSIGN_OR_RETURN(json body, ParseBody(req.body));
          BDN_RETURN_IF_ERROR(KnownFields(body, {"value", "namespaces"}));
          BDN_ASSIGN_OR_RETURN(api::SecretPut put, api::SecretPutFromJson(body));
          BDN_RETURN_IF_ERROR(NormalizeSecretNamespaces(put.namespaces));
          BDN_RETURN_IF_ERROR(sync_->SetSecret(name, put.value, put.namespaces));
          Reply(res, {{"name", name}, {"stored", true}, {"namespaces", put.namespaces}});
          return Status::Ok();
        });
  Route("GET", "/v1/secrets", "/v1/secrets", admin,
        [this](Req, Res res, const ApiKey& key) -> Status {
          BDN_RETURN_IF_ERROR(NeedSecretAdmin(key));
          BDN_ASSIGN_OR_RETURN(auto secrets, sync_->ListSecrets());
          json list = json::array();
          for (const auto& s : secrets) list.push_back(api::SecretInfoToJson(s));
          Reply(res, {{"secrets", list}});
          return Status::Ok();
        });
  Route("DELETE", "/v1/secrets/([^/]+)", "/v1/secrets/{name}", admin,
        [this](Req req, Res res, const ApiKey& key) -> Status {
          BDN_RETURN_IF_ERROR(NeedSecretAdmin(key));
          const std::string name = req.matches[1].str();
          BDN_RETURN_IF_ERROR(ValidateSecretName(name));
          BDN_RETURN_IF_ERROR(sync_->RemoveSecret(name));
          Reply(res, {{"name", name}, {"removed", true}});
          return Status::Ok();
        });
}

}  // namespace bdn::origin
