// hf://org/repo[@revision]: a Hugging Face Hub repository at one commit, over the Hub's HTTP API
// as huggingface_hub (src/huggingface_hub/hf_api.py, file_download.py, utils/_http.py) uses it:
//
//  1. GET {endpoint}/api/{models|datasets|spaces}/{repo}/revision/{revision, all of it
//     percent-encoded so refs/pr/3 and names with '/' work} → {"sha": <commit>, "gated": ...}.
//     A pinned job skips the branch and asks for its commit.
//  2. GET {endpoint}/api/{type}/{repo}/tree/{commit}?recursive=true&expand=false → a JSON array
//     of {"type": "file"|"directory", "path", "size", "oid", "lfs": {"oid", "size"}}, continued
//     while the answer has a Link header with rel="next".
//  3. GET {endpoint}/{datasets/|spaces/}{repo}/resolve/{commit}/{path} → the bytes, after
//     redirects (an LFS or Xet file redirects to a CDN with X-Linked-Etag/X-Linked-Size on the
//     redirect; the token goes to the Hub's host only).
//
// An object's etag is its LFS sha256 (lfs.oid) if it has one, else its git blob id (oid): what
// the resolve endpoint reports as X-Linked-Etag or ETag. The endpoint is $HF_ENDPOINT (default
// https://huggingface.co). The secret is the bare token (hf_...), sent as a Bearer token.
// Failures follow the Hub's X-Error-Code: RepoNotFound (and an anonymous 401) source_not_found,
// RevisionNotFound revision_not_found, GatedRepo and 403 access_denied, 401 "Invalid credentials
// in Authorization header" bad_credentials; 429 (Retry-After or RateLimit) and 5xx are retried.
//
// The etags are in lower case (an lfs.oid's "sha256:" prefix dropped), and every file's bytes are
// hashed as they stream and checked against its etag at their end.
#pragma once

#include <memory>
#include <string>

#include "bdn/sync/source.h"
#include "bdn/sync/source_uri.h"

namespace bdn::sync {

Result<std::unique_ptr<Source>> OpenHfSource(const std::string& uri, const HfUri& parsed,
                                             const SourceOptions& options);

// The Hub's URL: $HF_ENDPOINT without trailing '/', else https://huggingface.co. Checked when a
// job is started and when its source is opened. Errors: InvalidArgument "HF_ENDPOINT \"x\": must
// be http:// or https://", "HF_ENDPOINT \"http://***@host\": credentials in the URL are refused
// (give a token with --auth-secret-name)" (messages never show the URL's user information).
Result<std::string> HfEndpoint();

// The URL of the next page in a Link header ("<url>; rel=\"next\", ..."), if any.
std::optional<std::string> NextPageLink(std::string_view link_header);

}  // namespace bdn::sync
