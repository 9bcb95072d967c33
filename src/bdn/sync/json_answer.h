// Parsing a source's JSON answers (a Hub tree page or revision info, a GCS listing page or token)
// with bounds checked while the parser runs, so that no answer makes the process hold far more
// than the answer itself: deep nesting ([[[[…]]]]) and pages of millions of tiny values are
// stopped at once instead of growing a document 17 times the size of its text.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn::sync {

struct JsonAnswerLimits {
  // Containers nested deeper than this stop the parser (the APIs nest 3 levels at most).
  size_t max_depth = 16;
  // Values kept in the document (every scalar and container, keys not counted); real pages hold
  // about 10,000 (1,000 entries of about 10 fields).
  size_t max_values = 1'000'000;
  // Containers below this depth are neither kept nor counted: each reads as null in its parent
  // (1: the top-level object's scalar fields alone, as the Hub's revision info is read, whose
  // "siblings" list every file of the repository). Their nesting is still bounded by max_depth.
  size_t keep_depth = SIZE_MAX;
};

// Parses `text`. Returns a discarded value (is_discarded()) when it is not JSON, so callers keep
// their own "not a JSON array" messages. Errors: InvalidArgument with reason invalid_answer
// "the answer nests deeper than 16 levels"; FailedPrecondition with reason listing_too_large
// "the answer holds more than 1000000 JSON values (the most one answer may hold)".
Result<nlohmann::json> ParseJsonAnswer(std::string_view text, const JsonAnswerLimits& limits = {});

}  // namespace bdn::sync
