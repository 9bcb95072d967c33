// The object-store sources (docs/sync.md, "Sources"): S3 and the stores that speak its API (R2,
// CoreWeave, GCS's XML API with HMAC keys, s3rver), GCS's JSON API with a service account, and
// Azure Blob Storage. Each lists the objects under a prefix (following pagination), opens each
// object as a stream of ranged GETs (several in flight for a large one), checks every answer
// against the size and etag it listed, and classifies the store's error codes into the stable
// ones of docs/sync.md.
//
// Prefix rules, the same for every store: the prefix names a folder: s3://b/models/qwen mirrors
// the objects under "models/qwen/", each at its path below it ("models/qwen/config.json" →
// "config.json"); an empty prefix mirrors the whole bucket. A prefix that names no folder but one
// object (s3://b/models/ckpt.bin) mirrors that object alone, under its last segment. Keys that end
// in '/' (the empty "folder" objects consoles create) are left out.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/objstore/s3_sign.h"
#include "bdn/sync/source.h"
#include "bdn/sync/source_uri.h"

namespace bdn::sync {

// s3://, r2://, cw:// and gs:// with an HMAC secret (the S3-interoperable XML API), over
// ListObjectsV2 and GetObject signed with AWS Signature Version 4 by libcurl
// (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html).
// Anonymous without a secret.
//
// Endpoints (SourceOptions::endpoint overrides; "{bucket}" in an override asks for
// virtual-hosted addressing, else the override is addressed path-style, endpoint/bucket/key):
//   s3://  https://{bucket}.s3.{region}.amazonaws.com (path-style for bucket names with '.')
//   r2://  https://{account_id}.r2.cloudflarestorage.com/{bucket}, region "auto"
//   cw://  https://{bucket}.cwobject.com (CoreWeave AI Object Storage: virtual-hosted only)
//   gs://  https://storage.googleapis.com/{bucket}, region "auto" (HMAC keys)
// Region: SourceOptions::region, else the secret's "region", else us-east-1 (s3, cw) or auto.
Result<std::unique_ptr<Source>> OpenS3Source(const std::string& uri, const BucketUri& parsed,
                                             const SourceOptions& options);

// gs://bucket/prefix: with a service-account key (or no secret), the JSON API
// (https://cloud.google.com/storage/docs/json_api/v1/objects/list, objects/get?alt=media) with
// an OAuth2 access token from the JWT bearer flow (RFC 7523; signed RS256 with the key, posted
// to the key's token_uri, refreshed before it expires); with an HMAC key pair, the XML API
// through OpenS3Source. The etag of an object is its generation, and every GET asks for that
// generation. Endpoint: https://storage.googleapis.com (SourceOptions::endpoint overrides).
Result<std::unique_ptr<Source>> OpenGcsSource(const std::string& uri, const BucketUri& parsed,
                                              const SourceOptions& options);

// azure://account/container/prefix over List Blobs and Get Blob
// (https://learn.microsoft.com/rest/api/storageservices/blob-service-rest-api), x-ms-version
// 2021-08-06, authorized with Shared Key (an account key) or a SAS token, anonymous without a
// secret. Endpoint: https://{account}.blob.core.windows.net; an override is the account's URL,
// e.g. http://127.0.0.1:10000/devstoreaccount1 for the emulator (Azurite).
Result<std::unique_ptr<Source>> OpenAzureSource(const std::string& uri, const AzureUri& parsed,
                                                const SourceOptions& options);

// ---- Pieces, exposed for tests ----

// The SigV4 pieces (objstore/s3_sign.h), shared with the object pack store.
using objstore::AwsCredentials;  // an AWS-style key pair (docs/sync.md, "Secrets")
using objstore::CanonicalQuery;
// Reads {"access_key_id", "secret_access_key", "session_token"?, "region"?} (also the spellings
// `aws configure export-credentials` prints: AccessKeyId, SecretAccessKey, SessionToken), or for
// GCS HMAC keys {"access_id", "secret"}. Errors: InvalidArgument "secret \"name\": <what is
// wrong>" with reason invalid_secret; the value never appears in a message.
Result<AwsCredentials> ParseAwsSecret(std::string_view secret, const std::string& secret_name);

// Azure's Shared Key string-to-sign of a Blob service request
// (https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key): `path` is
// the URL path as sent (percent-encoded), `query` its decoded parameters, `headers` every request
// header. The Authorization value is "SharedKey account:" + base64(HMAC-SHA256(key, this)).
std::string AzureStringToSign(std::string_view method, std::string_view account,
                              std::string_view path,
                              const std::vector<std::pair<std::string, std::string>>& query,
                              const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace bdn::sync
