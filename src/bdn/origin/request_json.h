// Readers of the origin's JSON request bodies (docs/http-api.md). The records it answers with
// are encoded by the shared codec, bdn/api/records_json.h. Digests are bare 64-hex strings.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn::origin {

// How deep a request body's JSON may nest (the API's bodies nest 3 levels at most).
inline constexpr size_t kMaxBodyDepth = 32;

// Parses a request body as a JSON object, bounded while it parses: nesting deeper than
// kMaxBodyDepth stops the parser at once, so no body makes the server hold far more than the
// body itself. A key twice in one object is refused (the parser would keep the last). Errors:
// InvalidArgument "request body: not valid JSON", "request body: must be a JSON object",
// "request body: nested deeper than 32 levels", "request body: field \"x\" appears twice",
// "request body: starts with a byte order mark (EF BB BF); send JSON without one" (RFC 8259
// §8.1: a sender adds none; the parser would skip it).
Result<nlohmann::json> ParseBody(std::string_view body);

// Refuses a body with a top-level field outside `known`, so that a misspelt field ("include" for
// "includes") is an error rather than silently ignored. Errors: InvalidArgument "request body:
// unknown field \"x\" (the fields are a, b, c)".
Status KnownFields(const nlohmann::json& body, std::initializer_list<std::string_view> known);

// Parses a body {"ids": ["<hex>", ...]} (other fields are ignored) into at most `max_ids`
// digests, counting the ids while it parses: ids past the limit are counted, never stored.
// Errors: those of ParseBody, then those of IdsField ("ids: N ids, at most M per request" with
// N the full count).
Result<std::vector<Digest>> ParseIdsBody(std::string_view body, size_t max_ids);

// Field readers over a parsed body; `field` names the field in messages.
// Errors: InvalidArgument "<field>: missing" / "<field>: must be <type>" / digest errors;
// OptionalIntField also "<field>: N is out of range" for an integer past 2^63-1.
Result<Digest> DigestField(const nlohmann::json& j, const char* field);
Result<std::optional<int64_t>> OptionalIntField(const nlohmann::json& j, const char* field);
Result<std::optional<std::string>> OptionalStringField(const nlohmann::json& j, const char* field);
Result<std::vector<std::string>> StringListField(const nlohmann::json& j, const char* field);
// "ids": a list of at most `max_ids` digests. Errors: InvalidArgument naming the bad item or the
// size limit.
Result<std::vector<Digest>> IdsField(const nlohmann::json& j, size_t max_ids);

}  // namespace bdn::origin
