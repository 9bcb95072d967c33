// The one JSON codec of registry and key records (see records_json.h).
#include "bdn/api/records_json.h"

#include "bdn/api/json_fields.h"

namespace bdn::api {
using internal::DigestField;
using internal::Field;
using internal::IntegerValue;
using internal::ObjectField;
using internal::OptionalInt;
using nlohmann::json;

json StatsToJson(const VersionStats& s) {
  return {{"files", s.files}, {"bytes", s.bytes}, {"chunks", s.chunks}, {"entries", s.entries}};
}

json VolumeToJson(const VolumeRecord& v) {
  json tags = json::object();
  for (const auto& [name, d] : v.tags) tags[name] = d.Hex();
  return {{"namespace", v.ns},
          {"volume", v.name},
          {"head", v.head ? json(v.head->Hex()) : json(nullptr)},
          {"sequence", v.sequence},
          {"tags", tags},
          {"live_versions", v.live_versions},
          {"deleted_versions", v.deleted_versions},
          {"created_unix_ms", v.created_unix_ms}};
}

json VersionToJson(const VersionRecord& v) {
  json j = {{"namespace", v.ns},
            {"volume", v.volume},
            {"digest", v.digest.Hex()},
            {"sequence", v.sequence},
            {"lifecycle", std::string(LifecycleName(v.lifecycle))},
            {"created_unix_ms", v.created_unix_ms},
            {"stats", StatsToJson(v.stats)},
            {"source_uri", v.source_uri},
            {"tags", v.tags},
            {"is_head", v.is_head}};
  if (v.deleted_unix_ms) j["deleted_unix_ms"] = *v.deleted_unix_ms;
  if (v.delete_after_unix_ms) j["delete_after_unix_ms"] = *v.delete_after_unix_ms;
  if (!v.source_revision.empty()) j["source_revision"] = v.source_revision;
  if (!v.source_listing_digest.empty()) j["source_listing_digest"] = v.source_listing_digest;
  return j;
}

json CommitRequestToJson(const CommitRequest& req, const std::optional<std::string>& claim) {
  return {
      {"digest", req.digest.Hex()},
      {"stats", StatsToJson(req.stats)},
      {"source_uri", req.source_uri},
      {"tags", req.tags},
      {"expected_sequence", req.expected_sequence ? json(*req.expected_sequence) : json(nullptr)},
      {"claim", claim ? json(*claim) : json(nullptr)}};
}

json CommitResultToJson(const CommitResult& r) {
  return {{"sequence", r.sequence},
          {"unchanged", r.unchanged},
          {"head_updated", r.head_updated},
          {"tags_applied", r.tags_applied}};
}

json KeyToJson(const ApiKey& k) {
  json scopes = json::array();
  for (Scope s : k.scopes) scopes.push_back(std::string(ScopeName(s)));
  return {{"id", k.id},
          {"namespace", k.ns},
          {"scopes", scopes},
          {"created_unix_ms", k.created_unix_ms},
          {"revoked", k.revoked}};
}

Result<VersionStats> StatsFromJson(const json& j) {
  VersionStats s;
  BDN_ASSIGN_OR_RETURN(s.files, Field<uint64_t>(j, "files"));
  BDN_ASSIGN_OR_RETURN(s.bytes, Field<uint64_t>(j, "bytes"));
  BDN_ASSIGN_OR_RETURN(s.chunks, Field<uint64_t>(j, "chunks"));
  BDN_ASSIGN_OR_RETURN(s.entries, Field<uint64_t>(j, "entries"));
  return s;
}

Result<VolumeRecord> VolumeFromJson(const json& j) {
  VolumeRecord v;
  BDN_ASSIGN_OR_RETURN(v.ns, Field<std::string>(j, "namespace"));
  BDN_ASSIGN_OR_RETURN(v.name, Field<std::string>(j, "volume"));
  if (j.contains("head") && !j["head"].is_null()) {
    BDN_ASSIGN_OR_RETURN(v.head, DigestField(j, "head"));
  }
  BDN_ASSIGN_OR_RETURN(v.sequence, Field<int64_t>(j, "sequence"));
  BDN_ASSIGN_OR_RETURN(json tags, ObjectField(j, "tags", /*optional=*/true));
  for (const auto& [name, hex] : tags.items()) {
    BDN_ASSIGN_OR_RETURN(v.tags[name], DigestField(tags, name.c_str()));
  }
  BDN_ASSIGN_OR_RETURN(v.live_versions, Field<uint64_t>(j, "live_versions", 0));
  BDN_ASSIGN_OR_RETURN(v.deleted_versions, Field<uint64_t>(j, "deleted_versions", 0));
  BDN_ASSIGN_OR_RETURN(v.created_unix_ms, Field<int64_t>(j, "created_unix_ms", 0));
  return v;
}

Result<VersionRecord> VersionFromJson(const json& j) {
  VersionRecord v;
  BDN_ASSIGN_OR_RETURN(v.ns, Field<std::string>(j, "namespace"));
  BDN_ASSIGN_OR_RETURN(v.volume, Field<std::string>(j, "volume"));
  BDN_ASSIGN_OR_RETURN(v.digest, DigestField(j, "digest"));
  BDN_ASSIGN_OR_RETURN(v.sequence, Field<int64_t>(j, "sequence"));
  BDN_ASSIGN_OR_RETURN(std::string lifecycle, Field<std::string>(j, "lifecycle"));
  if (lifecycle == "ALIVE") {
    v.lifecycle = Lifecycle::kAlive;
  } else if (lifecycle == "DELETED") {
    v.lifecycle = Lifecycle::kDeleted;
  } else {
    return Err(InvalidArgumentError("lifecycle: unknown value \"" + lifecycle + "\""));
  }
  BDN_ASSIGN_OR_RETURN(v.created_unix_ms, Field<int64_t>(j, "created_unix_ms", 0));
  BDN_ASSIGN_OR_RETURN(v.deleted_unix_ms, OptionalInt(j, "deleted_unix_ms"));
  BDN_ASSIGN_OR_RETURN(v.delete_after_unix_ms, OptionalInt(j, "delete_after_unix_ms"));
  BDN_ASSIGN_OR_RETURN(json stats, ObjectField(j, "stats", /*optional=*/false));
  BDN_ASSIGN_OR_RETURN(v.stats, StatsFromJson(stats));
  BDN_ASSIGN_OR_RETURN(v.source_uri, Field<std::string>(j, "source_uri", std::string()));
  BDN_ASSIGN_OR_RETURN(v.source_revision, Field<std::string>(j, "source_revision", std::string()));
  BDN_ASSIGN_OR_RETURN(v.source_listing_digest,
                       Field<std::string>(j, "source_listing_digest", std::string()));
  BDN_ASSIGN_OR_RETURN(v.tags,
                       Field<std::vector<std::string>>(j, "tags", std::vector<std::string>()));
  BDN_ASSIGN_OR_RETURN(v.is_head, Field<bool>(j, "is_head", false));
  return v;
}

Result<CommitRequest> CommitRequestFromJson(const json& j, std::optional<std::string>* claim) {
  CommitRequest req;
  BDN_ASSIGN_OR_RETURN(req.digest, DigestField(j, "digest"));
  BDN_ASSIGN_OR_RETURN(json stats, ObjectField(j, "stats", /*optional=*/true));
  if (!stats.empty()) {
    BDN_ASSIGN_OR_RETURN(req.stats, StatsFromJson(stats));
  }
  BDN_ASSIGN_OR_RETURN(req.source_uri, Field<std::string>(j, "source_uri", std::string()));
  BDN_ASSIGN_OR_RETURN(req.tags,
                       Field<std::vector<std::string>>(j, "tags", std::vector<std::string>()));
  BDN_ASSIGN_OR_RETURN(req.expected_sequence, OptionalInt(j, "expected_sequence"));
  if (claim) {
    claim->reset();
    if (j.contains("claim") && !j["claim"].is_null()) {
      BDN_ASSIGN_OR_RETURN(*claim, Field<std::string>(j, "claim"));
    }
  }
  return req;
}

Result<CommitResult> CommitResultFromJson(const json& j) {
  CommitResult r;
  BDN_ASSIGN_OR_RETURN(r.sequence, Field<int64_t>(j, "sequence"));
  BDN_ASSIGN_OR_RETURN(r.unchanged, Field<bool>(j, "unchanged", false));
  BDN_ASSIGN_OR_RETURN(r.head_updated, Field<bool>(j, "head_updated", false));
  BDN_ASSIGN_OR_RETURN(r.tags_applied, Field<std::vector<std::string>>(j, "tags_applied",
                                                                       std::vector<std::string>()));
  return r;
}

json DeleteResultToJson(const DeleteResult& r) {
  json list = json::array();
  for (const DeletedVersion& d : r.deleted) {
    list.push_back({{"digest", d.digest.Hex()},
                    {"deleted_unix_ms", d.deleted_unix_ms},
                    {"delete_after_unix_ms", d.delete_after_unix_ms},
                    {"tags_dropped", d.tags_dropped}});
  }
  return {{"sequence", r.sequence},
          {"deleted", list},
          {"head", r.head ? json(r.head->Hex()) : json(nullptr)},
          {"head_moved", r.head_moved}};
}

json RestoreResultToJson(const RestoreResult& r) {
  return {{"sequence", r.sequence}, {"head_updated", r.head_updated}};
}

Result<DeleteResult> DeleteResultFromJson(const json& j) {
  DeleteResult r;
  BDN_ASSIGN_OR_RETURN(r.sequence, Field<int64_t>(j, "sequence"));
  if (!j.is_object() || !j.contains("deleted") || !j["deleted"].is_array()) {
    return Err(InvalidArgumentError("deleted: not an array"));
  }
  for (const json& item : j["deleted"]) {
    if (!item.is_object()) return Err(InvalidArgumentError("deleted: not an object"));
    DeletedVersion d;
    BDN_ASSIGN_OR_RETURN(d.digest, DigestField(item, "digest"));
    BDN_ASSIGN_OR_RETURN(d.deleted_unix_ms, Field<int64_t>(item, "deleted_unix_ms"));
    BDN_ASSIGN_OR_RETURN(d.delete_after_unix_ms, Field<int64_t>(item, "delete_after_unix_ms"));
    BDN_ASSIGN_OR_RETURN(d.tags_dropped, Field<std::vector<std::string>>(
                                             item, "tags_dropped", std::vector<std::string>()));
    r.deleted.push_back(std::move(d));
  }
  if (j.contains("head") && !j["head"].is_null()) {
    BDN_ASSIGN_OR_RETURN(Digest h, DigestField(j, "head"));
    r.head = h;
  }
  BDN_ASSIGN_OR_RETURN(r.head_moved, Field<bool>(j, "head_moved", false));
  return r;
}

Result<RestoreResult> RestoreResultFromJson(const json& j) {
  RestoreResult r;
  BDN_ASSIGN_OR_RETURN(r.sequence, Field<int64_t>(j, "sequence"));
  BDN_ASSIGN_OR_RETURN(r.head_updated, Field<bool>(j, "head_updated", false));
  return r;
}

Result<ApiKey> KeyFromJson(const json& j) {
  ApiKey k;
  BDN_ASSIGN_OR_RETURN(k.id, Field<std::string>(j, "id"));
  BDN_ASSIGN_OR_RETURN(k.ns, Field<std::string>(j, "namespace"));
  BDN_ASSIGN_OR_RETURN(std::vector<std::string> names,
                       Field<std::vector<std::string>>(j, "scopes"));
  for (const std::string& name : names) {
    BDN_ASSIGN_OR_RETURN(Scope s, ParseScope(name));
    k.scopes.push_back(s);
  }
  BDN_ASSIGN_OR_RETURN(k.created_unix_ms, Field<int64_t>(j, "created_unix_ms"));
  BDN_ASSIGN_OR_RETURN(k.revoked, Field<bool>(j, "revoked", false));
  return k;
}

Result<CreatedKey> CreatedKeyFromJson(const json& j) {
  CreatedKey c;
  BDN_ASSIGN_OR_RETURN(c.key, KeyFromJson(j));
  BDN_ASSIGN_OR_RETURN(c.token, Field<std::string>(j, "token"));
  return c;
}

}  // namespace bdn::api
