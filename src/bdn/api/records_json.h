// The JSON forms of the registry and key records as docs/http-api.md ("Registry", "Keys") defines
// them: the one codec of the origin that serves them, the remote client that reads them, and the
// test fakes of the API. Digests are bare 64-hex strings.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bdn/base/status.h"
#include "bdn/registry/key_store.h"
#include "bdn/registry/registry.h"

namespace bdn::api {

// {"files", "bytes", "chunks", "entries"}.
nlohmann::json StatsToJson(const VersionStats& s);
// {"namespace", "volume", "head": "<hex>"|null, "sequence", "tags": {name: "<hex>"},
//  "live_versions", "deleted_versions", "created_unix_ms"}.
nlohmann::json VolumeToJson(const VolumeRecord& v);
// {"namespace", "volume", "digest", "sequence", "lifecycle", "created_unix_ms",
//  "deleted_unix_ms"?, "delete_after_unix_ms"?, "stats", "source_uri", "tags", "is_head"}.
nlohmann::json VersionToJson(const VersionRecord& v);
// The POST .../commit body: {"digest", "stats", "source_uri", "tags", "expected_sequence",
// "claim"}; ns and volume are in the URL.
nlohmann::json CommitRequestToJson(const CommitRequest& req,
                                   const std::optional<std::string>& claim);
// {"sequence", "unchanged", "head_updated", "tags_applied"}.
nlohmann::json CommitResultToJson(const CommitResult& r);
// The DELETE .../versions answer: {"sequence", "deleted": [{"digest", "deleted_unix_ms",
// "delete_after_unix_ms", "tags_dropped"}], "head": "<hex>"|null, "head_moved"}.
nlohmann::json DeleteResultToJson(const DeleteResult& r);
// The POST .../versions/<hex>/restore answer: {"sequence", "head_updated"}.
nlohmann::json RestoreResultToJson(const RestoreResult& r);
// {"id", "namespace", "scopes": [name], "created_unix_ms", "revoked"}; never the secret.
nlohmann::json KeyToJson(const ApiKey& k);

// The inverses. Errors: InvalidArgument
// "<field>: <what is wrong>" for a missing field, a wrong type or a malformed digest, e.g.
// "volume: missing", "lifecycle: unknown value \"X\"", "tags: not an object"; a number field
// takes only a JSON integer its type holds ("sequence: not an integer" for 1.5 or a string,
// "sequence: 18446744073709551615 is out of range").
Result<VersionStats> StatsFromJson(const nlohmann::json& j);
Result<VolumeRecord> VolumeFromJson(const nlohmann::json& j);
Result<VersionRecord> VersionFromJson(const nlohmann::json& j);
// Fills everything but ns and volume; `claim` (if not null) receives the claim id, or nullopt.
Result<CommitRequest> CommitRequestFromJson(const nlohmann::json& j,
                                            std::optional<std::string>* claim);
Result<CommitResult> CommitResultFromJson(const nlohmann::json& j);
Result<DeleteResult> DeleteResultFromJson(const nlohmann::json& j);
Result<RestoreResult> RestoreResultFromJson(const nlohmann::json& j);
// A key as KeyToJson writes it (scopes by ScopeName: "scope \"x\": must be one of ..." for
// another name; "revoked" defaults to false).
Result<ApiKey> KeyFromJson(const nlohmann::json& j);
// The POST /v1/keys answer: the key and its "token" (shown only there).
Result<CreatedKey> CreatedKeyFromJson(const nlohmann::json& j);

}  // namespace bdn::api
