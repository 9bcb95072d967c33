// RemoteSyncService: sync jobs and secrets on a bdn serve origin (docs/http-api.md, "Sync jobs"
// and "Secrets"): the jobs run on the server; nothing is fetched by the caller.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "bdn/http/client.h"
#include "bdn/remote/retry.h"
#include "bdn/sync/service.h"

namespace bdn::remote {

// Reads are retried (RetryPolicy); a start is sent once (the origin answers a repeated start
// of the same spec with the job it already has). Thread-safe.
class RemoteSyncService : public sync::SyncService {
 public:
  explicit RemoteSyncService(std::shared_ptr<http::HttpClient> client, RetryPolicy policy = {});

  // POST /v1/sync/jobs (ValidateSpec first, so a malformed spec never leaves the machine).
  // `secrets` is ignored: the origin decides by the caller's key.
  Result<sync::StartedJob> Start(const SyncJobSpec& spec, sync::SecretUse secrets) override;
  Result<SyncJobRecord> Get(const std::string& id) override;
  // GET /v1/sync/jobs; "truncated" is false when the origin (one from before it) sends none.
  Result<sync::SyncJobList> List(const std::string& ns, const std::string& volume) override;
  Result<SyncJobRecord> Cancel(const std::string& id) override;
  // PUT /v1/secrets/{name} with {"value": ...} in the body (never in the URL).
  Status SetSecret(const std::string& name, const std::string& value,
                   const std::vector<std::string>& namespaces) override;
  Result<std::vector<SecretInfo>> ListSecrets() override;
  Status RemoveSecret(const std::string& name) override;

 private:
  Result<nlohmann::json> Call(http::Method method, const std::string& path,
                              const std::string& body = "", bool retry = true);

  std::shared_ptr<http::HttpClient> client_;
  RetryPolicy policy_;
};

}  // namespace bdn::remote
