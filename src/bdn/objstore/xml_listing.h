// Decoders of the XML that object stores answer with, over expat: a page of an S3 ListObjectsV2
// listing (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html, also what R2,
// CoreWeave, GCS's XML API and s3rver send), a page of Azure's List Blobs
// (https://learn.microsoft.com/rest/api/storageservices/list-blobs), the <Error> body both use, and
// the upload id of an S3 multipart upload.
// Input is outside input: a document type declaration (and so every entity declaration) is
// refused, nesting is limited to 32 levels, a text field to 64 KiB, and every field an entry must
// have is checked, so a hostile or truncated page is an error naming what was wrong, never a
// crash or a listing that skips objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"

namespace bdn::objstore {

// One object of a listing page, as the store names it.
struct ListedObject {
  std::string key;  // the full key (S3) or blob name (Azure), decoded
  uint64_t size_bytes = 0;
  std::string etag;  // as sent (quotes kept; NormalizeEtag strips them)
};

struct S3ListPage {
  std::vector<ListedObject> objects;  // in the order sent
  bool truncated = false;             // IsTruncated: more pages follow
  std::string next_token;             // NextContinuationToken; set whenever truncated
};

// Decodes a ListBucketResult. Errors: InvalidArgument "<what is wrong>" (e.g. "not XML: ...
// at line 3", "expected <ListBucketResult>, got <Foo>", "<Contents> #4 has no <Size>", "<Size>
// \"-1\" of key \"k\" is not a byte count", "IsTruncated is true without a
// NextContinuationToken", "a document type declaration is refused").
Result<S3ListPage> ParseS3ListPage(std::string_view xml);

struct AzureListPage {
  std::vector<ListedObject> blobs;  // in the order sent; directories (ResourceType) left out
  std::string next_marker;          // NextMarker: "" on the last page
};

// Decodes an EnumerationResults of List Blobs; a <Name Encoded="true"> is percent-decoded.
// Errors: InvalidArgument as ParseS3ListPage ("<Blob> #2 has no <Content-Length>", ...).
Result<AzureListPage> ParseAzureListPage(std::string_view xml);

// The <Error><Code>…</Code><Message>…</Message></Error> of an S3 or Azure error answer, if the
// body is one (nullopt for anything else, an empty body included).
struct StoreError {
  std::string code;
  std::string message;
};
std::optional<StoreError> ParseStoreError(std::string_view xml);

// One key a DeleteObjects request did not delete (an <Error> of its DeleteResult).
struct DeleteFailure {
  std::string key;
  std::string code;  // e.g. "AccessDenied"
  std::string message;
};

// The failures listed by S3's DeleteResult, the answer to DeleteObjects
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html); <Deleted> entries are
// skipped. Errors: InvalidArgument as ParseS3ListPage ("expected <DeleteResult>, got <Foo>",
// "<Error> #2 has no <Key>").
Result<std::vector<DeleteFailure>> ParseDeleteResult(std::string_view xml);

// `text` as XML character data: the five predefined entities, and CR as a reference (a raw CR
// would be read back as LF). For the bodies sent to the store (DeleteObjects' keys).
std::string XmlEscape(std::string_view text);

// The <UploadId> of S3's InitiateMultipartUploadResult (the answer to CreateMultipartUpload).
// Errors: InvalidArgument as ParseS3ListPage ("expected <InitiateMultipartUploadResult>, got
// <Foo>", "no <UploadId>").
Result<std::string> ParseUploadId(std::string_view xml);

}  // namespace bdn::objstore
