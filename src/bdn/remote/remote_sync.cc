#include "bdn/remote/remote_sync.h"

#include <algorithm>

#include "bdn/api/sync_json.h"
#include "bdn/base/text.h"  // EscapeName, PercentEncode

namespace bdn::remote {

using nlohmann::json;

namespace {
// A job id from the user goes into a URL path: refuse anything but the id's own characters.
Status CheckJobId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  return ok ? Status::Ok()
            : InvalidArgumentError("sync job \"" + EscapeName(id) +
                                   "\": not a job id (sync_<hex>)");
}

// A job as the server sent it. Its id is printed and typed back by users, so it must be one (a
// hostile or broken server could otherwise put control characters on the user's terminal).
Result<SyncJobRecord> JobFromServer(const std::string& server, const json& j) {
  BDN_ASSIGN_OR_RETURN(SyncJobRecord job, api::SyncJobFromJson(j));
  if (!CheckJobId(job.id).ok()) {
    return Err(InternalError(server + ": sent a sync job whose id \"" + EscapeName(job.id) +
                             "\" is not a job id (sync_<hex>)"));
  }
  return job;
}
}  // namespace

RemoteSyncService::RemoteSyncService(std::shared_ptr<http::HttpClient> client, RetryPolicy policy)
    : client_(std::move(client)), policy_(std::move(policy)) {}

Result<json> RemoteSyncService::Call(http::Method method, const std::string& path,
                                     const std::string& body, bool retry) {
  http::Request req;
  req.method = method;
  req.path = path;
  req.body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()};
  Result<http::Response> r =
      retry ? CallWithRetries(*client_, req, policy_, nullptr) : client_->Call(req);
  if (!r) return Err(r.error());
  json j = json::parse(r->text(), nullptr, false);
  if (j.is_discarded()) {
    return Err(InternalError(client_->Name() + ": " + std::string(http::MethodName(method)) + " " +
                             path + ": response is not JSON"));
  }
  return j;
}

Result<sync::StartedJob> RemoteSyncService::Start(const SyncJobSpec& spec, sync::SecretUse) {
  BDN_RETURN_IF_ERROR(sync::ValidateSpec(spec));
  BDN_ASSIGN_OR_RETURN(json j, Call(http::Method::kPost, "/v1/sync/jobs",
                                    api::SyncJobSpecToJson(spec).dump(), /*retry=*/false));
  sync::StartedJob out;
  BDN_ASSIGN_OR_RETURN(out.job, JobFromServer(client_->Name(), j));
  out.created = j.value("created", false);
  return out;
}

Result<SyncJobRecord> RemoteSyncService::Get(const std::string& id) {
  BDN_RETURN_IF_ERROR(CheckJobId(id));
  BDN_ASSIGN_OR_RETURN(json j, Call(http::Method::kGet, "/v1/sync/jobs/" + id));
  return JobFromServer(client_->Name(), j);
}

Result<sync::SyncJobList> RemoteSyncService::List(const std::string& ns,
                                                  const std::string& volume) {
  std::string path = "/v1/sync/jobs";
  if (!ns.empty()) path += "?namespace=" + PercentEncode(ns);
  if (!volume.empty()) path += "&volume=" + PercentEncode(volume);
  BDN_ASSIGN_OR_RETURN(json j, Call(http::Method::kGet, path));
  sync::SyncJobList out;
  if (!j.contains("jobs") || !j["jobs"].is_array()) {
    return Err(InternalError(client_->Name() + ": GET " + path + ": no \"jobs\" list"));
  }
  for (const json& e : j["jobs"]) {
    BDN_ASSIGN_OR_RETURN(SyncJobRecord job, JobFromServer(client_->Name(), e));
    out.jobs.push_back(std::move(job));
  }
  if (auto t = j.find("truncated"); t != j.end()) {
    if (!t->is_boolean()) {
      return Err(InternalError(client_->Name() + ": GET " + path +
                               ": \"truncated\" is not true or false"));
    }
    out.truncated = t->get<bool>();
  }
  return out;
}

Result<SyncJobRecord> RemoteSyncService::Cancel(const std::string& id) {
  BDN_RETURN_IF_ERROR(CheckJobId(id));
  BDN_ASSIGN_OR_RETURN(json j, Call(http::Method::kPost, "/v1/sync/jobs/" + id + "/cancel", "{}",
                                    /*retry=*/false));
  return JobFromServer(client_->Name(), j);
}

Status RemoteSyncService::SetSecret(const std::string& name, const std::string& value,
                                    const std::vector<std::string>& namespaces) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  json body = {{"value", value}};
  // Only when given: a server from before secrets had namespaces refuses the field (400), so a
  // secret meant for some namespaces is never stored there as one for none; without it, a set
  // still works there.
  if (!namespaces.empty()) body["namespaces"] = namespaces;
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  auto r = Call(http::Method::kPut, "/v1/secrets/" + name, text);
  std::fill(text.begin(), text.end(), '\0');
  return r ? Status::Ok() : r.error();
}

Result<std::vector<SecretInfo>> RemoteSyncService::ListSecrets() {
  BDN_ASSIGN_OR_RETURN(json j, Call(http::Method::kGet, "/v1/secrets"));
  std::vector<SecretInfo> out;
  if (!j.contains("secrets") || !j["secrets"].is_array()) {
    return Err(InternalError(client_->Name() + ": GET /v1/secrets: no \"secrets\" list"));
  }
  for (const json& e : j["secrets"]) {
    BDN_ASSIGN_OR_RETURN(SecretInfo s, api::SecretInfoFromJson(e));
    out.push_back(std::move(s));
  }
  return out;
}

Status RemoteSyncService::RemoveSecret(const std::string& name) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  auto r = Call(http::Method::kDelete, "/v1/secrets/" + name, "", /*retry=*/false);
  return r ? Status::Ok() : r.error();
}

}  // namespace bdn::remote
