// S3Client: the few S3 operations the object pack store needs (PutObject, multipart upload,
// ranged GetObject, DeleteObject(s), ListObjectsV2) on one bucket and key prefix, signed with SigV4
// (s3_sign.h), with deadlines and retries: jittered exponential back-off on 5xx but 501 (503
// SlowDown included), 429, S3's 400 RequestTimeout and transport failures (refused, reset, timed
// out, cut-off bodies), Retry-After honoured, up to a deadline per call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"
#include "bdn/http/client.h"
#include "bdn/objstore/s3_sign.h"
#include "bdn/objstore/xml_listing.h"

namespace bdn::objstore {

// Where a bucket is: `bdn serve --store s3://bucket/prefix --s3-endpoint URL --s3-region R`.
struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or "a/b": keys go under "a/b/"; no leading or trailing '/'
  // "http(s)://host[:port][/path]": path-style requests to <endpoint>/<bucket>/<key>; with
  // "{bucket}" in it, virtual-hosted ("https://{bucket}.s3.example.com"). "": AWS S3 in `region`
  // (https://<bucket>.s3.<region>.amazonaws.com).
  std::string endpoint;
  std::string region = "us-east-1";
};

// Parses "s3://bucket[/prefix]" into `bucket` and `prefix` of a location (a trailing '/' of the
// prefix is dropped). Errors: InvalidArgument "--store \"<uri>\": <why>" for another scheme, a
// bucket name S3 does not allow (3-63 of a-z 0-9 . -, starting and ending with a letter or
// digit), an empty path segment ("a//b") or a "." or ".." segment.
Result<S3Location> ParseS3Uri(std::string_view uri);

// "s3://bucket/prefix" (how messages name the store).
std::string S3UriOf(const S3Location& location);

struct S3ClientOptions {
  S3Location location;
  AwsCredentials credentials;
  std::chrono::milliseconds connect_timeout{5000};
  // A request without a large body must finish in this time.
  std::chrono::milliseconds request_deadline{30'000};
  // A request with a large body (an upload, a ranged read) fails once no byte has moved for this
  // long, and in any case after request_deadline plus one second per 256 KiB of body.
  std::chrono::milliseconds stall_timeout{30'000};
  // Retries of one call: at most this many tries, and none started after retry_deadline.
  int max_attempts = 10;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  std::chrono::milliseconds retry_deadline{120'000};
  // Back-off waits. Never null.
  std::shared_ptr<Clock> clock = Clock::Real();
};

// Requests sent (each try counts), by kind, and bytes moved; for metrics and the tests that count
// requests per GiB.
struct S3Stats {
  uint64_t puts = 0;            // PutObject and UploadPart
  uint64_t gets = 0;            // GetObject (ranged or whole)
  uint64_t lists = 0;           // ListObjectsV2 pages
  uint64_t deletes = 0;         // DeleteObject, DeleteObjects and AbortMultipartUpload
  uint64_t posts = 0;           // CreateMultipartUpload and CompleteMultipartUpload
  uint64_t retries = 0;         // tries after a transient failure
  uint64_t bytes_sent = 0;      // request bodies
  uint64_t bytes_received = 0;  // response bodies of GETs
  uint64_t requests() const { return puts + gets + lists + deletes + posts; }
};

// One bucket and key prefix. Keys given to the methods are relative to the prefix. Thread-safe.
class S3Client {
 public:
  // Errors: InvalidArgument "--s3-endpoint \"x\": must be http(s)://host[:port][/path] without
  // credentials or query".
  static Result<std::unique_ptr<S3Client>> Create(S3ClientOptions options);

  // PutObject of `data` under `key` (x-amz-content-sha256 is the body's SHA-256, so S3 refuses
  // bytes damaged on the way). Errors: Unavailable "<uri>: PUT <key>: <why> (tried N times over
  // T)" once retries are spent; PermissionDenied for 403; Internal for other answers.
  Status Put(const std::string& key, std::span<const uint8_t> data);

  // A multipart upload of `data` under `key`: parts of `part_bytes` (the last one shorter), up to
  // `parallel` in flight, each retried on its own; the upload is aborted when a part or the
  // completion fails for good. Errors: as Put, naming the part.
  Status PutMultipart(const std::string& key, std::span<const uint8_t> data, uint64_t part_bytes,
                      int parallel);

  // Bytes [offset, offset + length) of `key` (a ranged GET; the answer's length is checked).
  // Errors: NotFound "<uri>: object <key> not found" for 404 (NoSuchKey); NotFound "<uri>:
  // bucket not found" for NoSuchBucket; Internal "<uri>: GET <key>: asked bytes a-b, got …" for
  // a short or misplaced answer; as Put for the rest.
  // Also InvalidArgument for a length over kMaxGetRangeBytes, Unavailable if it cannot be
  // allocated.
  Result<std::vector<uint8_t>> GetRange(const std::string& key, uint64_t offset, uint64_t length);
  static constexpr uint64_t kMaxGetRangeBytes = uint64_t{4} << 30;
  // The same ranged GET, written into `out` (bytes [offset, offset + out.size()) of `key`) as
  // they arrive, with no buffer of the client's own: a caller that reuses `out` reads a pack
  // without touching fresh memory. A retry rewrites `out` from its start; after an error its
  // contents are unspecified. With `progress`, it is called (on this thread) each time the
  // bytes of `out` known to be final grow, with their count n: bytes [0, n) are then never
  // written again (a retry skips them), so another thread may read them while the rest arrives.
  // A 200 (a server that ignores Range) is taken as the whole object, trimmed to the range; one
  // whose Content-Length is too short to hold the range is refused before any of it is written.
  // Errors: as GetRange.
  // `should_abort`, if set, is polled while the GET runs (about once a second while it waits)
  // and while it waits to try again (every 100 ms): true ends it (Internal "...: aborted"), with
  // no retry.
  Status GetRangeInto(const std::string& key, uint64_t offset, std::span<uint8_t> out,
                      const std::function<void(uint64_t)>& progress = nullptr,
                      const std::function<bool()>& should_abort = nullptr);

  // DeleteObject; deleting a key that does not exist succeeds (as S3 answers). Errors: as Put.
  Status Delete(const std::string& key);

  // Deletes every key of `keys` with DeleteObjects
  // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html): up to
  // kMaxDeleteKeys per request, quiet (the answer lists only the keys it failed), with the
  // Content-MD5 S3 requires; a key that does not exist counts as deleted. A key the answer lists
  // as failed gets a DeleteObject of its own (with its retries). A store that does not
  // implement DeleteObjects (HTTP 501 or NotImplemented: GCS's XML API) gets one DeleteObject
  // per key, `parallel` at once, for the rest of the call (and DeleteObjects is asked again by
  // the next call). No request, nor any retry, starts once `within` has passed since the call
  // began (one started before ends within request_deadline).
  // Errors: as Put for a request that fails (that of the first failed key's DeleteObject);
  // Internal "<uri>: DeleteObjects: unexpected answer: …" for one that does not decode or names
  // a key it was not asked for;
  // DeadlineExceeded "<uri>: DeleteObjects: N of M keys not deleted by the deadline".
  Status DeleteMany(std::span<const std::string> keys,
                    std::optional<std::chrono::milliseconds> within = std::nullopt,
                    int parallel = 8);
  static constexpr size_t kMaxDeleteKeys = 1000;  // S3's limit per request

  // Every object whose key starts with `key_prefix`, following continuation tokens, keys
  // relative to the client's prefix. Errors: as Put; Internal "<uri>: unexpected listing: …" for
  // a page that does not decode or a key outside the prefix.
  Result<std::vector<ListedObject>> List(const std::string& key_prefix);

  S3Stats stats() const;
  // "s3://bucket/prefix".
  const std::string& uri() const { return uri_; }
  // "s3://bucket/prefix/<key>".
  std::string UriOf(const std::string& key) const { return uri_ + "/" + key; }

  // Ends every request, those in flight within about a second and every later one at once, with
  // Unavailable "<uri>: <what>: object store <endpoint>: …: shutting down", never retried
  // (http::HttpClient::Shutdown): for a server that stops while its handlers or uploaders wait on
  // an object store that does not answer. Thread-safe; there is no way back.
  void Shutdown();

 private:
  // One DeleteObjects request of at most kMaxDeleteKeys keys: the keys it did not delete
  // (relative to the prefix). Sets *unsupported (and returns its error) when the store answers
  // that it does not implement it.
  Result<std::vector<std::string>> DeleteBatch(std::span<const std::string> keys,
                                               SteadyTime give_up_at, bool* unsupported);
  // Delete with no try started after `give_up_at`.
  Status DeleteKey(const std::string& key, std::optional<SteadyTime> give_up_at);
  struct Call;
  explicit S3Client(S3ClientOptions options, std::unique_ptr<http::HttpClient> http,
                    std::string base_path);
  // Sends `call` with retries; returns a 2xx answer, or the error of the last try.
  Result<http::Response> Send(const Call& call);
  // The path of `key` with `query` (canonical), as sent and signed.
  std::string PathOf(const std::string& key, const std::string& query = "") const;
  Status ErrorOf(const Call& call, const http::Response& r, bool* transient) const;

  const S3ClientOptions options_;
  const std::unique_ptr<http::HttpClient> http_;
  std::atomic<bool> shut_down_{false};
  const std::string base_path_;   // "/bucket" (path-style) or "" (virtual-hosted)
  const std::string key_prefix_;  // "prefix/" or ""
  const std::string uri_;
  struct Counters {
    std::atomic<uint64_t> puts{0}, gets{0}, lists{0}, deletes{0}, posts{0}, retries{0},
        bytes_sent{0}, bytes_received{0};
  };
  mutable Counters counters_;
  std::atomic<bool> warned_no_delete_objects_{false};  // said once per client
};

}  // namespace bdn::objstore
