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

// s3://bucket/prefix, r2://account_id.bucket/prefix, cw://bucket/prefix, gs://bucket/prefix: a
// bucket of an object store and the prefix (taken literally, no percent-decoding) under which
// its objects are mirrored.
struct BucketUri {
  std::string scheme;   // "s3", "r2", "cw" or "gs"
  std::string account;  // r2: the Cloudflare account id; "" otherwise
  std::string bucket;
  std::string prefix;  // "" = the whole bucket
};

// azure://account/container/prefix
struct AzureUri {
  std::string account;
  std::string container;
  std::string prefix;
};

using SourceUri = std::variant<HfUri, FileUri, HttpsUri, BucketUri, AzureUri>;

// Parses a source URI. Errors: InvalidArgument "source \"uri\": <what is wrong>", e.g. "unknown
// scheme (expected hf://, s3://, gs://, azure://, r2://, cw://, file:// or https://)", "expected
// s3://bucket[/prefix]", "expected r2://account_id.bucket[/prefix]", "expected
// hf://org/repo[@revision]", "file:// needs an absolute path (file:///abs/path)", "https:// needs a
// file path (https://host/path)".
Result<SourceUri> ParseSourceUri(const std::string& uri);

// A source URI as messages, listings, the sync API and a version's record show it, whole (no
// 200-byte cut): an http(s):// one as http::ShownUrl shows a URL (credentials, query, fragment and
// a port that is no number as "***": from attacking helpers, a presigned signature in a source's
// query was repeated in its errors, `sync list` and `sync describe`); one of the other schemes
// with its query or fragment and credentials before its host as "***" ("azure://a/c/p?***",
// "s3://***@bucket/p"; an hf:// source's "@" names a revision, so only "hf://user:token@..."
// hides); anything else (refused) as http::ShownUrl shows it.
std::string ShownSource(const std::string& uri);

}  // namespace bdn::sync
