// https://host/path (and http://): one file, named by the last segment of its URL path. Its
// size comes from Content-Length, its etag from ETag (else Last-Modified, else none: then only
// the size is checked). The secret, if any, is sent as "Authorization: Bearer <value>" to the
// URL's host only.
#pragma once

#include <memory>
#include <string>

#include "bdn/sync/source.h"
#include "bdn/sync/source_uri.h"

namespace bdn::sync {

Result<std::unique_ptr<Source>> OpenHttpsSource(const std::string& uri, const HttpsUri& parsed,
                                                const SourceOptions& options);

// An ETag as a source's etag: without the blanks around it, the weak prefix W/ and the quotes.
std::string NormalizeEtag(std::string_view etag);

// Whether the ETag `etag` (blanks around it allowed) is weak: W/"...".
bool IsWeakEtag(std::string_view etag);

}  // namespace bdn::sync
