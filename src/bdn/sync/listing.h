// What a sync takes from a source listing: the selected objects, the entries they become, and
// the listing digest that identifies the source revision a version mirrors (docs/sync.md,
// "Source identity").
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/sync/glob.h"
#include "bdn/sync/source.h"
#include "bdn/volume/push.h"

namespace bdn::sync {

// The objects of `listing` that `filter` selects, in listing order.
// Errors: NotFound "--include \"p\": matches nothing in <source> (N objects)", reason
// include_matched_nothing, for the first include that matches no object of the listing (the
// message names every such include when there are several); `canceled` (reason canceled) once
// `cancel` (may be null) is set, which is looked at every 1024 objects.
Result<std::vector<SourceObject>> Select(const SourceListing& listing, const PathFilter& filter,
                                         const std::string& source,
                                         const std::atomic<bool>* cancel = nullptr);

// The BLAKE3 of "bdn sync listing v2\n" and the fields identity, revision and, per selected
// object in order, path, size (decimal) and etag, each as <its length in bytes, decimal>:<its
// bytes> ("13:hf://org/repo"): equal for two syncs exactly when they would seal the same objects
// at the same content, whatever bytes the names hold.
Digest ListingDigest(const std::string& identity, const std::string& revision,
                     const std::vector<SourceObject>& objects);

// The entries a version of `objects` holds: each object as a file (its mode, its size) and every
// directory above one (mode 0755), sorted bytewise. Errors: InvalidArgument with reason
// invalid_object: "<source>: object \"p\": <why no version can hold it>" for a name that is not a
// valid entry path (empty segments, "." or "..", not UTF-8) or an object whose path is also a
// directory of another ("a" and "a/b"), a path segment longer than 255 bytes (NAME_MAX: no file
// system could pull it) or a size over 2^63-1 bytes (format/manifest.h kMaxFileBytes);
// "<source>: object \"p\": its etag \"e\" holds control characters; --exclude it" for an etag
// with a byte below 0x20 or 0x7f (it would be sent back in a header); "<source>: the objects add
// up to more than 2^63-1 bytes, the most a version holds; --include less".
Result<std::vector<SealItem>> ItemsOf(const std::vector<SourceObject>& objects,
                                      const std::string& source);

}  // namespace bdn::sync
