// The one JSON serialization of the CLI's results and errors: it never fails on a string that is
// not UTF-8. (Text output escapes names with EscapeName, base/text.h.)
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace bdn::cli {

// `j` as JSON text indented by 2. Names from a version are valid UTF-8 (docs/format.md) and come
// out exactly (control characters as JSON escapes); any other string that is not valid UTF-8 (a
// local path, say) has each invalid byte replaced by U+FFFD instead of failing. Thread-safe.
std::string JsonText(const nlohmann::json& j);

}  // namespace bdn::cli
