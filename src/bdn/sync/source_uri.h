// The parsed forms of the source URIs (source.h): one struct per scheme, parsed without I/O.
#pragma once

#include <string>
#include <variant>

#include "bdn/base/status.h"

namespace bdn::sync {

// hf://[datasets/|spaces/|models/]org/repo[@revision]
struct HfUri {
  std::string repo_type = "models";  // "models", "datasets" or "spaces": the API's plural
  std::string repo_id;               // "org/repo" (or a legacy "repo")
  std::string revision;              // "" = main; may contain '/'
};

// file:///abs/path
struct FileUri {
  std::string path;  // absolute, taken literally (no percent-decoding)
};

// https://host/path (or http://)
struct HttpsUri {
  std::string url;
};

using SourceUri = std::variant<HfUri, FileUri, HttpsUri>;

// Parses a source URI. Errors: InvalidArgument "source \"uri\": <what is wrong>", e.g. "unknown
// scheme (expected hf://, file://, https://)", "expected hf://org/repo[@revision]", "file://
// needs an absolute path (file:///abs/path)", "https:// needs a file path (https://host/path)".
Result<SourceUri> ParseSourceUri(const std::string& uri);

}  // namespace bdn::sync
