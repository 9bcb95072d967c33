// The JSON codec of sync jobs and secrets (see sync_json.h).
#include "bdn/api/sync_json.h"

#include "bdn/api/json_fields.h"

namespace bdn::api {

using internal::Field;
using internal::ObjectField;
using nlohmann::json;

namespace {

using Strings = std::vector<std::string>;

// A digest field that may be null or missing; "" is refused (the encoder writes null).
Result<std::optional<Digest>> OptionalDigest(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<Digest>();
  BDN_ASSIGN_OR_RETURN(std::string text, Field<std::string>(j, key));
  auto d = Digest::Parse(text);
  if (!d) return Err(InvalidArgumentError(std::string(key) + ": " + d.error().message()));
  return std::optional<Digest>(*d);
}

}  // namespace

json SyncJobSpecToJson(const SyncJobSpec& s) {
  return {{"source", s.source_uri},
          {"namespace", s.ns},
          {"volume", s.volume},
          {"tag", s.tag},
          {"includes", s.includes},
          {"excludes", s.excludes},
          {"auth_secret_name", s.auth_secret_name},
          {"retry_deadline_ms", s.retry_deadline_ms},
          {"endpoint", s.endpoint},
          {"region", s.region}};
}

Result<SyncJobSpec> SyncJobSpecFromJson(const json& j) {
  SyncJobSpec s;
  BDN_ASSIGN_OR_RETURN(s.source_uri, Field<std::string>(j, "source"));
  BDN_ASSIGN_OR_RETURN(s.ns, Field<std::string>(j, "namespace"));
  BDN_ASSIGN_OR_RETURN(s.volume, Field<std::string>(j, "volume"));
  BDN_ASSIGN_OR_RETURN(s.tag, Field<std::string>(j, "tag", std::string()));
  BDN_ASSIGN_OR_RETURN(s.includes, Field<Strings>(j, "includes", Strings()));
  BDN_ASSIGN_OR_RETURN(s.excludes, Field<Strings>(j, "excludes", Strings()));
  BDN_ASSIGN_OR_RETURN(s.auth_secret_name,
                       Field<std::string>(j, "auth_secret_name", std::string()));
  BDN_ASSIGN_OR_RETURN(s.retry_deadline_ms,
                       Field<int64_t>(j, "retry_deadline_ms", SyncJobSpec{}.retry_deadline_ms));
  BDN_ASSIGN_OR_RETURN(s.endpoint, Field<std::string>(j, "endpoint", std::string()));
  BDN_ASSIGN_OR_RETURN(s.region, Field<std::string>(j, "region", std::string()));
  return s;
}

json SyncJobToJson(const SyncJobRecord& job) {
  const SyncJobSpec& s = job.spec;
  const std::string volume = "bdn:" + s.ns + "/" + s.volume;
  json j = SyncJobSpecToJson(s);
  j["id"] = job.id;
  j["state"] = std::string(SyncStateName(job.state));
  j["dest"] = volume + (s.tag.empty() ? "" : ":" + s.tag);
  j["cancel_requested"] = job.cancel_requested;
  j["source_revision"] = job.source_revision;
  j["listing_digest"] = job.listing_digest ? json(job.listing_digest->ToString()) : json(nullptr);
  j["progress"] = {{"objects_total", job.progress.objects_total},
                   {"objects_done", job.progress.objects_done},
                   {"bytes_total", job.progress.bytes_total},
                   {"bytes_done", job.progress.bytes_done},
                   {"bytes_fetched", job.progress.bytes_fetched},
                   {"objects_left_out", job.progress.objects_left_out},
                   {"retrying_ms", job.progress.retrying_ms},
                   {"retry_error", job.progress.retry_error}};
  j["version"] = job.version ? json(job.version->ToString()) : json(nullptr);
  j["version_ref"] = job.version ? json(volume + "@" + job.version->ToString()) : json(nullptr);
  j["unchanged"] = job.unchanged;
  j["error"] = job.error_code.empty()
                   ? json(nullptr)
                   : json{{"code", job.error_code}, {"message", job.error_message}};
  j["created_unix_ms"] = job.created_unix_ms;
  j["updated_unix_ms"] = job.updated_unix_ms;
  j["started_unix_ms"] = job.started_unix_ms;
  j["finished_unix_ms"] = job.finished_unix_ms;
  j["runs"] = job.runs;
  return j;
}

Result<SyncJobRecord> SyncJobFromJson(const json& j) {
  SyncJobRecord job;
  BDN_ASSIGN_OR_RETURN(job.spec, SyncJobSpecFromJson(j));
  BDN_ASSIGN_OR_RETURN(job.id, Field<std::string>(j, "id"));
  BDN_ASSIGN_OR_RETURN(std::string state, Field<std::string>(j, "state"));
  auto parsed = ParseSyncState(state);
  if (!parsed) return Err(InvalidArgumentError("state: " + parsed.error().message()));
  job.state = *parsed;
  BDN_ASSIGN_OR_RETURN(job.cancel_requested, Field<bool>(j, "cancel_requested", false));
  BDN_ASSIGN_OR_RETURN(job.source_revision,
                       Field<std::string>(j, "source_revision", std::string()));
  BDN_ASSIGN_OR_RETURN(job.listing_digest, OptionalDigest(j, "listing_digest"));
  BDN_ASSIGN_OR_RETURN(json p, ObjectField(j, "progress", /*optional=*/true));
  BDN_ASSIGN_OR_RETURN(job.progress.objects_total, Field<uint64_t>(p, "objects_total", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.objects_done, Field<uint64_t>(p, "objects_done", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.bytes_total, Field<uint64_t>(p, "bytes_total", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.bytes_done, Field<uint64_t>(p, "bytes_done", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.bytes_fetched, Field<uint64_t>(p, "bytes_fetched", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.objects_left_out, Field<uint64_t>(p, "objects_left_out", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.retrying_ms, Field<uint64_t>(p, "retrying_ms", 0));
  BDN_ASSIGN_OR_RETURN(job.progress.retry_error,
                       Field<std::string>(p, "retry_error", std::string()));
  BDN_ASSIGN_OR_RETURN(job.version, OptionalDigest(j, "version"));
  BDN_ASSIGN_OR_RETURN(job.unchanged, Field<bool>(j, "unchanged", false));
  // null or missing: no error; anything else must be {"code", "message"} ({} is refused).
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) {
    BDN_ASSIGN_OR_RETURN(json error, ObjectField(j, "error", /*optional=*/false));
    BDN_ASSIGN_OR_RETURN(job.error_code, Field<std::string>(error, "code"));
    if (job.error_code.empty()) return Err(InvalidArgumentError("error: code is empty"));
    BDN_ASSIGN_OR_RETURN(job.error_message, Field<std::string>(error, "message"));
  }
  BDN_ASSIGN_OR_RETURN(job.created_unix_ms, Field<int64_t>(j, "created_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(job.updated_unix_ms, Field<int64_t>(j, "updated_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(job.started_unix_ms, Field<int64_t>(j, "started_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(job.finished_unix_ms, Field<int64_t>(j, "finished_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(job.runs, Field<int>(j, "runs", 0));
  return job;
}

json SecretInfoToJson(const SecretInfo& s) {
  return {{"name", s.name},
          {"created_unix_ms", s.created_unix_ms},
          {"updated_unix_ms", s.updated_unix_ms},
          {"namespaces", s.namespaces}};
}

Result<SecretInfo> SecretInfoFromJson(const json& j) {
  SecretInfo s;
  BDN_ASSIGN_OR_RETURN(s.name, Field<std::string>(j, "name"));
  BDN_ASSIGN_OR_RETURN(s.created_unix_ms, Field<int64_t>(j, "created_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(s.updated_unix_ms, Field<int64_t>(j, "updated_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(s.namespaces, Field<Strings>(j, "namespaces", Strings()));
  return s;
}

Result<SecretPut> SecretPutFromJson(const json& j) {
  SecretPut p;
  auto value = j.find("value");
  if (value == j.end() || !value->is_string()) {
    return Err(InvalidArgumentError("value: missing (the secret, as a JSON string)"));
  }
  p.value = value->get<std::string>();
  BDN_ASSIGN_OR_RETURN(p.namespaces, Field<Strings>(j, "namespaces", Strings()));
  return p;
}

}  // namespace bdn::api
