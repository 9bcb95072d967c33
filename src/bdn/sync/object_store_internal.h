// Pieces the object-store sources (s3_source.cc, gcs_source.cc, azure_source.cc) share: the
// prefix-as-folder rule, endpoint checks, the errors of an object that changed or
// went away, and the choice between one stream and ranged parts for an object's bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/objstore/xml_listing.h"
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/source.h"

namespace bdn::sync {

// The decoders of the stores' XML (objstore/xml_listing.h).
using objstore::ListedObject;
using objstore::ParseAzureListPage;
using objstore::ParseS3ListPage;
using objstore::ParseStoreError;

// Objects at least this large are read as ranged parts, several in flight.
inline constexpr uint64_t kRangedObjectBytes = uint64_t{64} << 20;
inline constexpr uint64_t kPartBytes = uint64_t{8} << 20;
inline constexpr int kPartsInFlight = 4;

// The key prefix a source prefix lists: "" for the whole bucket, else the prefix with one '/'.
std::string FolderPrefix(const std::string& prefix);

// `endpoint` (SourceOptions::endpoint) without a trailing '/'. Errors: InvalidArgument
// "<uri>: --endpoint \"x\": must be http(s)://host[:port][/path] without credentials or query".
Result<std::string> CheckEndpoint(const std::string& uri, const std::string& endpoint);

// Sorts `objects` bytewise by path. Errors: FailedPrecondition (invalid_answer) "<uri>: the
// listing names \"p\" twice".
Status SortUnique(const std::string& uri, std::vector<SourceObject>& objects);

// NotFound (source_not_found) "<uri>: no objects under the prefix \"p\"" (or "the bucket is
// empty").
Status NothingUnder(const std::string& uri, const std::string& list_prefix);

// FailedPrecondition (source_changed) "<uri>: object \"p\": changed during the sync (etag X
// listed, Y now)".
Status ChangedEtag(const std::string& uri, const SourceObject& object, const std::string& now);

// What a 404 or 412 to an object's GET means: the object was removed or rewritten since it was
// listed (source_changed); nullopt for other statuses.
std::optional<Status> ObjectGone(const std::string& uri, const SourceObject& object, int status);

// Whether `etag` (without quotes) can be sent as "\"etag\"" in If-Match: not empty, and only
// etagc characters (0x21, 0x23-0x7e, 0x80-0xff): no quote, blank or control character.
bool IsEntityTag(std::string_view etag);

// The object at `path` of `size_bytes` that a listing or HEAD gave with the ETag `etag` as the
// store sent it (quoted, perhaps weak, perhaps with blanks around it), mode 0644.
SourceObject StoreObject(std::string path, uint64_t size_bytes, std::string_view etag);

// The GET of `object` at `url` from `offset`, as S3 and Azure answer it: If-Match its listed
// etag when IsEntityTag and not weak, its answer's ETag (weakly) and size checked against the
// listing (ChangedEtag, CheckObjectSize), a 404 or 412 read as ObjectGone; a ValidatorPin holds
// every part and resumption to the first answer's ETag.
ObjectRequest EtagCheckedRequest(const std::string& uri, std::string url,
                                 const SourceObject& object, uint64_t offset);

// Adds the listed `o` under `list_prefix` to `out` as the object at its path below the prefix,
// leaving out "folder" markers (keys ending in '/'). Errors: Internal "<uri>: unexpected listing
// from <from>: key \"k\" is not under the prefix \"p\"" for a store that lists outside it.
Status AddListed(const std::string& uri, const std::string& from, const std::string& list_prefix,
                 ListedObject o, std::vector<SourceObject>& out);

// How messages name the job's credentials: "the credentials in secret \"name\"".
std::string SecretNamed(const SourceOptions& options);

// The stream of `req`'s object: ranged parts (RangedObjectStream) from kRangedObjectBytes on,
// else one HttpObjectStream.
std::unique_ptr<ByteStream> OpenObjectStream(std::shared_ptr<HttpFetcher> fetcher,
                                             ObjectRequest req);

}  // namespace bdn::sync
