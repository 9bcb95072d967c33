// Typed reads of JSON fields with the API codec's error messages ("<field>: missing", ...),
// shared by the codecs of api/.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn::api::internal {

using nlohmann::json;

// `v` as the integer type T, only when it is a JSON integer that T holds: nlohmann's get<T>
// would cast a float (1e300: undefined behaviour) or wrap 2^64-1 to -1.
template <typename T>
Result<T> IntegerValue(const json& v, const char* key) {
  if (!v.is_number_integer())
    return Err(InvalidArgumentError(std::string(key) + ": not an integer"));
  const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<uint64_t>())
                                           : std::in_range<T>(v.get<int64_t>());
  if (!fits) {
    return Err(InvalidArgumentError(std::string(key) + ": " + v.dump() + " is out of range"));
  }
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>())
                                : static_cast<T>(v.get<int64_t>());
}

// Reads field `key` of object `j` as T; a missing key is an error unless `fallback` is given.
template <typename T>
Result<T> Field(const json& j, const char* key, std::optional<T> fallback = std::nullopt) {
  if (!j.is_object())
    return Err(InvalidArgumentError(std::string(key) + ": parent is not an object"));
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Err(InvalidArgumentError(std::string(key) + ": missing"));
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return IntegerValue<T>(*it, key);
  } else {
    try {
      return it->get<T>();
    } catch (const json::exception& e) {
      return Err(InvalidArgumentError(std::string(key) + ": " + e.what()));
    }
  }
}

// Reads field `key` of object `j` as a JSON object: anything else there (an array, a string, a
// number) is "<key>: not an object"; a missing or null key is an error unless `optional`, when it
// reads as an empty object.
inline Result<json> ObjectField(const json& j, const char* key, bool optional) {
  BDN_ASSIGN_OR_RETURN(
      json v, Field<json>(j, key, optional ? std::optional<json>(json::object()) : std::nullopt));
  if (!v.is_object()) return Err(InvalidArgumentError(std::string(key) + ": not an object"));
  return v;
}

inline Result<Digest> DigestField(const json& j, const char* key) {
  BDN_ASSIGN_OR_RETURN(std::string hex, Field<std::string>(j, key));
  auto d = Digest::Parse(hex);
  if (!d) return Err(InvalidArgumentError(std::string(key) + ": " + d.error().message()));
  return *d;
}

inline Result<std::optional<int64_t>> OptionalInt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  BDN_ASSIGN_OR_RETURN(int64_t v, IntegerValue<int64_t>(*it, key));
  return std::optional<int64_t>(v);
}

}  // namespace bdn::api::internal
