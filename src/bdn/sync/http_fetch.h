// HTTP for sync sources: HttpFetcher (any URL on any host, redirects followed by hand with the
// credentials kept to the host they belong to, failures classified into the stable codes and
// transient ones retried) and HttpObjectStream (an object's body streamed through a bounded
// buffer, checked against the listed size and etag, resumed with a Range request after a
// transient failure).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/text.h"  // PercentEncode, PercentDecode, ParseByteCount
#include "bdn/http/client.h"
#include "bdn/sync/source.h"

namespace bdn::sync {

using Headers = std::vector<std::pair<std::string, std::string>>;

// The value of header `name` (lower case) in `headers`, if present.
std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name);

// "scheme://host[:port]" and "/path?query" of an absolute http(s) URL ("/" if it has no path).
// Errors: InvalidArgument "url \"x\": must be http:// or https://…" (x as http::ShownUrl shows
// it).
Result<std::pair<std::string, std::string>> SplitUrl(const std::string& url);

// The URL a Location header value points to, relative to `base` (RFC 3986 §5.2, the cases
// servers use: absolute, scheme-relative "//host/…", absolute-path "/…", and relative "x/y").
std::string ResolveLocation(const std::string& base, const std::string& location);

// The delay a 429 or 503 asks for: Retry-After in seconds, else the IETF RateLimit header
// ("api";r=0;t=55 → 55 s, as the Hub sends), else nullopt.
std::optional<std::chrono::milliseconds> RetryAfterOf(const Headers& headers);

// The generic reading of an HTTP answer that is not 2xx from source `source` (the URI) for the
// request described by `what` (e.g. "GET /api/..."): 401 is bad_credentials when credentials
// were sent, else access_denied; 403 access_denied (PermissionDenied); 404 and 410
// source_not_found (NotFound); 408, 429 and 5xx transient (Unavailable, `a.transient` and
// `a.retry_after` set); others Internal. Messages: "<source>: <what>: HTTP <status>".
Status ClassifyHttpStatus(const std::string& source, const std::string& what,
                          const http::Response& r, bool sent_credentials, Attempt& a);

// Whether a 2xx answer's length (Content-Length, or the total of a 206's Content-Range) is the
// object's listed size; an answer that states neither passes (the stream counts the bytes).
// Errors: FailedPrecondition "<source>: object \"p\": changed during the sync (N bytes listed,
// M now)", reason source_changed.
Status CheckObjectSize(const std::string& source, const SourceObject& object, int status,
                       const Headers& headers);

// The most bytes a collected answer other than a listing page (repository info, a token, an
// error body) may hold: a larger one fails the call (listing_too_large) instead of being held.
inline constexpr uint64_t kMaxAnswerBytes = uint64_t{256} << 20;

struct FetcherOptions {
  std::string source;  // the source URI: how messages name it
  // Sent as "Authorization: <value>" to `auth_origin` only (never after a redirect to another
  // host, as the Hub's clients do for signed CDN URLs); "" for none. Never logged.
  std::string authorization;
  std::string auth_origin;  // "scheme://host[:port]"
  // Signs every request to `auth_origin` just before it is sent (and again at each retry), for
  // credentials that depend on the request or on time: SigV4 (setting Request::aws_sigv4 and
  // its headers), Azure Shared Key, a SAS token appended to the query, a refreshed OAuth2 token.
  // Its errors end the call (classified as they are). Unset: only `authorization` is sent.
  std::function<Status(http::Request& req)> sign;
  // The source's URL is the user's own (an https:// source, maybe presigned): messages show no
  // query of any request (http::Request::secret_query); otherwise the values of parameters that
  // look like credentials are hidden (http::WithoutSecretParams).
  bool secret_queries = false;
  SourceOptions source_options;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_deadline{60'000};  // listings and other small requests
  // Object bodies (Call::long_transfer) are bounded by source_options.min_body_bytes_per_second
  // and body_stall_timeout instead of request_deadline.
  int max_redirects = 10;
  // The source's own reading of a non-2xx answer (e.g. the Hub's X-Error-Code), tried first;
  // nullopt falls back to ClassifyHttpStatus.
  std::function<std::optional<Status>(const std::string& what, const http::Response& r,
                                      bool sent_credentials, Attempt& a)>
      classify;
};

// One HTTP client per host the source talks to. Thread-safe.
class HttpFetcher {
 public:
  explicit HttpFetcher(FetcherOptions options);

  struct Call {
    http::Method method = http::Method::kGet;
    std::string url;
    Headers headers;
    std::string body;  // sent with its content_type (a token request's form)
    std::string content_type = "application/x-www-form-urlencoded";
    // Streamed bodies (HttpObjectStream): see http::Request.
    std::function<bool(int, const Headers&)> on_headers;
    std::function<bool(std::span<const uint8_t>)> on_body;
    // A body of any size: no deadline, only the floor of SourceOptions::min_body_bytes_per_second
    // over body_stall_timeout.
    bool long_transfer = false;
    // A listing page: its collected body may hold at most this many bytes (else the call fails
    // with listing_too_large naming the limit); unset, an answer's bound is kMaxAnswerBytes.
    std::optional<uint64_t> max_page_bytes;
    // Called with each redirect answer before it is followed (the Hub puts an LFS file's
    // X-Linked-Etag and X-Linked-Size there); an error ends the call with it.
    std::function<Status(const http::Response&)> on_redirect;
  };

  // One try of `call`, following up to max_redirects redirects (3xx with Location); returns
  // the final answer whatever its status, and sets *final_url (if given) to where it came
  // from. Transport failures: Unavailable/DeadlineExceeded marked transient in `a`.
  Result<http::Response> SendOnce(const Call& call, Attempt& a, std::string* final_url = nullptr);
  // A request target ("/path?query") as messages show it (FetcherOptions::secret_queries).
  std::string Shown(const std::string& path) const;

  // `call` with retries (WithSourceRetries), its body collected; a non-2xx answer becomes its
  // classified Status. For listings and metadata.
  Result<http::Response> Fetch(const Call& call, std::string* final_url = nullptr);

  // Whether requests to `origin` ("scheme://host[:port]") carry credentials.
  bool SendsCredentialsTo(const std::string& origin) const {
    return (!options_.authorization.empty() || options_.sign) && origin == options_.auth_origin;
  }

  // The classified Status of a non-2xx answer to `what`.
  Status Classify(const std::string& what, const http::Response& r, bool sent_credentials,
                  Attempt& a) const;

  const FetcherOptions& options() const { return options_; }

 private:
  Result<std::shared_ptr<http::HttpClient>> ClientFor(const std::string& origin);

  const FetcherOptions options_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<http::HttpClient>> clients_ GUARDED_BY(mu_);
};

// The validator of an object's first answer, which every later answer for the same object (a
// resumed try, another ranged part) must repeat, so that an object is never read from two of
// its versions, also when the listing gave no etag to ask for. The validator is the answer's
// ETag (compared weakly: W/ and quotes dropped), else its Last-Modified, else none; an answer
// whose validator differs from the first (one with none after one with an ETag too) is refused
// before its body is used. Thread-safe: the parts of a RangedObjectStream share one.
class ValidatorPin {
 public:
  // Pins the validator of `headers` (a 2xx answer for `object` of source `source`) if none is
  // pinned yet, else compares it with the pinned one. Errors: FailedPrecondition, reason
  // source_changed, "<source>: object \"p\": changed during the sync (its first answer had
  // ETag \"a\", this one ETag \"b\")".
  Status Check(const std::string& source, const SourceObject& object, const Headers& headers);

 private:
  Mutex mu_;
  std::optional<std::string> pinned_ GUARDED_BY(mu_);
};

// What HttpObjectStream fetches.
struct ObjectRequest {
  std::string url;
  SourceObject object;
  uint64_t offset = 0;  // the first byte delivered
  // One past the last byte delivered; 0 = the object's end. A part of an object [offset, end)
  // is asked for with a Range header.
  uint64_t end = 0;
  Headers headers;  // extra request headers (a Range header is added for a part or a resumption)
  // Called before each try (the first, and each resumption after a transient failure), so
  // that what on_redirect and check learn from one try's answers is not taken for the next's.
  std::function<void()> on_attempt;
  // As HttpFetcher::Call::on_redirect.
  std::function<Status(const http::Response&)> on_redirect;
  // Checks the final 2xx answer's status and headers against `object` before its body is used
  // (etag, size); returns FailedPrecondition with reason source_changed when they differ.
  // Default: CheckObjectSize.
  std::function<Status(int status, const Headers& headers)> check;
  // The source's reading of a non-2xx answer to the object's GET, tried before the fetcher's
  // (a 404 or 412 there means the object changed or went away since it was listed).
  std::function<std::optional<Status>(const http::Response& r)>
      on_error;  // Set by RangedObjectStream for its parts: a 200 (the whole object) to a request
                 // with a Range
  // header sets it and ends the part at once, before its body, so that the object is read as one
  // stream instead of from byte 0 again for every part. Null: a 200 is read, its first bytes
  // skipped.
  std::shared_ptr<std::atomic<bool>> ranges_ignored;
  // Every answer (each try, each part: the pin is shared by copies of the request) must have
  // the validator of the first; null: no such check (the source checks the bytes otherwise).
  std::shared_ptr<ValidatorPin> pin;
};

// The bytes [offset, end) of one object, fetched by a thread of its own and handed over through
// a buffer of at most 8 MiB, so that an object of any size is streamed, never held. A transfer
// that breaks (reset, stall, 5xx) is resumed with Range: bytes=<reached>- (a server answering a
// resumed request with the whole object has its first bytes skipped), within the retry
// deadline. Each Read is called by one thread at a time.
class HttpObjectStream : public ByteStream {
 public:
  HttpObjectStream(std::shared_ptr<HttpFetcher> fetcher, ObjectRequest request);
  ~HttpObjectStream() override;
  // Starts fetching now rather than at the first Read (RangedObjectStream keeps several parts
  // in flight this way). Idempotent.
  void Start();
  Result<size_t> Read(std::span<uint8_t> out) override;

 private:
  struct Pipe;
  void Run();
  // One try from request_.offset (the first byte not yet in the pipe), which it advances.
  Status FetchOnce(Attempt& a);

  std::shared_ptr<HttpFetcher> fetcher_;
  ObjectRequest request_;
  std::shared_ptr<Pipe> pipe_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
  std::thread thread_;
};

// An object read as consecutive parts of `part_bytes`, up to `in_flight` of them fetched at once
// (each an HttpObjectStream with its own connection and bounded buffer), delivered in order: a
// large object arrives at the speed of several connections while at most in_flight * 8 MiB of it
// is buffered. Parts of an object that changed fail as HttpObjectStream does (the request's
// `check`, e.g. against the listed etag). A server that answers a part's Range with the whole
// object (200) has the parts dropped and the rest of the object read as one HttpObjectStream from
// the first byte not yet delivered, so that an object costs its size once, not once per part.
// Each Read is called by one thread at a time.
class RangedObjectStream : public ByteStream {
 public:
  RangedObjectStream(std::shared_ptr<HttpFetcher> fetcher, ObjectRequest request,
                     uint64_t part_bytes, int in_flight);
  Result<size_t> Read(std::span<uint8_t> out) override;

 private:
  std::shared_ptr<HttpFetcher> fetcher_;
  const ObjectRequest request_;
  const uint64_t part_bytes_;
  const size_t in_flight_;
  uint64_t next_ = 0;       // the first byte of the next part to open
  uint64_t delivered_ = 0;  // the first byte Read has not returned yet
  std::deque<std::unique_ptr<HttpObjectStream>> parts_;
  const std::shared_ptr<std::atomic<bool>> ranges_ignored_;
  std::unique_ptr<HttpObjectStream> whole_;  // the rest of the object, once ranges are ignored
};

}  // namespace bdn::sync
