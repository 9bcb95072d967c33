// Readers of the origin's JSON request bodies (docs/http-api.md). The records it answers with
// are encoded by the shared codec, bdn/api/records_json.h. Digests are bare 64-hex strings.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn::origin {

// Parses a request body as a JSON object. Errors: InvalidArgument "request body: <why>".
Result<nlohmann::json> ParseBody(std::string_view body);

// Field readers over a parsed body; `field` names the field in messages.
// Errors: InvalidArgument "<field>: missing" / "<field>: must be <type>" / digest errors.
Result<Digest> DigestField(const nlohmann::json& j, const char* field);
Result<std::optional<int64_t>> OptionalIntField(const nlohmann::json& j, const char* field);
Result<std::optional<std::string>> OptionalStringField(const nlohmann::json& j, const char* field);
Result<std::vector<std::string>> StringListField(const nlohmann::json& j, const char* field);
// "ids": a list of at most `max_ids` digests. Errors: InvalidArgument naming the bad item or the
// size limit.
Result<std::vector<Digest>> IdsField(const nlohmann::json& j, size_t max_ids);

}  // namespace bdn::origin
