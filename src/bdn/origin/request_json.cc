// Request-body field readers of the origin.
#include "bdn/origin/request_json.h"

namespace bdn::origin {

using nlohmann::json;

Result<json> ParseBody(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Err(InvalidArgumentError("request body: not valid JSON"));
  if (!j.is_object()) return Err(InvalidArgumentError("request body: must be a JSON object"));
  return j;
}

Result<Digest> DigestField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null())
    return Err(InvalidArgumentError(std::string(field) + ": missing"));
  if (!it->is_string()) return Err(InvalidArgumentError(std::string(field) + ": must be a string"));
  auto d = Digest::Parse(it->get<std::string>());
  if (!d) return Err(d.error().WithPrefix(field));
  return *d;
}

Result<std::optional<int64_t>> OptionalIntField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return Err(InvalidArgumentError(std::string(field) + ": must be an integer or null"));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<std::string>> OptionalStringField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Err(InvalidArgumentError(std::string(field) + ": must be a string or null"));
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::vector<std::string>> StringListField(const json& j, const char* field) {
  std::vector<std::string> out;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return Err(InvalidArgumentError(std::string(field) + ": must be a list"));
  for (const json& v : *it) {
    if (!v.is_string()) {
      return Err(InvalidArgumentError(std::string(field) + ": must be a list of strings"));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::vector<Digest>> IdsField(const json& j, size_t max_ids) {
  auto it = j.find("ids");
  if (it == j.end() || !it->is_array()) {
    return Err(InvalidArgumentError("ids: must be a list of chunk ids"));
  }
  if (it->size() > max_ids) {
    return Err(InvalidArgumentError("ids: " + std::to_string(it->size()) + " ids, at most " +
                                    std::to_string(max_ids) + " per request"));
  }
  std::vector<Digest> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) {
      return Err(InvalidArgumentError("ids[" + std::to_string(i) + "]: must be a string"));
    }
    auto d = Digest::Parse(v.get<std::string>());
    if (!d) return Err(d.error().WithPrefix("ids[" + std::to_string(i) + "]"));
    out.push_back(*d);
  }
  return out;
}

}  // namespace bdn::origin
