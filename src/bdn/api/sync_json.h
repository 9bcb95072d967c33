// The JSON forms of sync jobs and secrets as docs/http-api.md ("Sync jobs", "Secrets") defines
// them: one codec for the origin's handlers, the remote client and the CLI's --json output.
#pragma once

#include <nlohmann/json.hpp>

#include "bdn/base/status.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"

namespace bdn::api {

// The POST /v1/sync/jobs body: {"source", "namespace", "volume", "tag", "includes", "excludes",
// "auth_secret_name", "retry_deadline_ms"}.
nlohmann::json SyncJobSpecToJson(const SyncJobSpec& spec);
// The inverse; "tag", "includes", "excludes", "auth_secret_name" and "retry_deadline_ms" may be
// absent. Errors: InvalidArgument "<field>: <what is wrong>".
Result<SyncJobSpec> SyncJobSpecFromJson(const nlohmann::json& j);

// {"id", "state", "source", "dest": "bdn:ns/vol[:tag]", "namespace", "volume", "tag",
//  "includes", "excludes", "auth_secret_name", "retry_deadline_ms", "cancel_requested",
//  "source_revision", "listing_digest": "b3:<hex>"|null, "progress": {"objects_total",
//  "objects_done", "bytes_total", "bytes_done", "bytes_fetched"}, "version": "b3:<hex>"|null,
//  "version_ref": "bdn:ns/vol@b3:<hex>"|null, "unchanged", "error": {"code", "message"}|null,
//  "created_unix_ms", "updated_unix_ms", "started_unix_ms", "finished_unix_ms", "runs"}.
nlohmann::json SyncJobToJson(const SyncJobRecord& job);
// The inverse. Errors: InvalidArgument "<field>: <what is wrong>".
Result<SyncJobRecord> SyncJobFromJson(const nlohmann::json& j);

// {"name", "created_unix_ms", "updated_unix_ms", "namespaces": [ns]}: never a value.
nlohmann::json SecretInfoToJson(const SecretInfo& s);
// The inverse; "namespaces" may be absent (none). Errors: InvalidArgument "<field>: <what is
// wrong>".
Result<SecretInfo> SecretInfoFromJson(const nlohmann::json& j);

// The body of PUT /v1/secrets/<name>: {"value", "namespaces"?}.
struct SecretPut {
  std::string value;
  std::vector<std::string> namespaces;  // as given: SecretStore::Put checks them
};
// Errors: InvalidArgument "value: missing (the secret, as a JSON string)"; "namespaces: <what is
// wrong>" for a field that is not a list of strings.
Result<SecretPut> SecretPutFromJson(const nlohmann::json& j);

}  // namespace bdn::api
