// HttpClient: a thin, thread-safe libcurl client of one HTTP server (an origin or a cache node):
// base URL, bearer token, keep-alive connection pool, per-request deadlines, and the one mapping
// of error responses and transport failures to Status (docs/http-api.md, "Errors").
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/http/peer_address.h"

namespace bdn::http {

enum class Method { kGet, kPut, kPost, kDelete, kHead };
std::string_view MethodName(Method m);  // "GET", ...

struct Request {
  Method method = Method::kGet;
  // Starts with '/', may carry a query: "/v1/chunks/<hex>", "/v1/...?include_deleted=1".
  std::string path;
  // Sent as is (not copied); must stay valid for the call. Empty: no body.
  std::span<const uint8_t> body;
  std::string content_type = "application/json";             // used only with a body
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  // Override the client's defaults for this request.
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<std::chrono::milliseconds> deadline;
  // If set, the request also fails (DeadlineExceeded "...: stalled: no bytes for N ms") once
  // no byte has moved either way for this long (checked about once a second while nothing
  // moves, so noticed up to ~1 s later): a large transfer gets a long deadline without a hung
  // server holding it that long.
  std::optional<std::chrono::milliseconds> stall_timeout;
  // With stall_timeout: the rate below which the transfer counts as stalled, in bytes per
  // second. Above 1, a transfer that moves fewer than this times stall_timeout bytes in a
  // window of stall_timeout (consecutive windows from the request's start: a drip is noticed
  // between stall_timeout and twice it) fails with DeadlineExceeded "...: stalled: slower than
  // 16.00 KiB/s for N ms" (IsTooSlow): a server that drips its body never holds the request for
  // its whole deadline. No byte at all for stall_timeout is "stalled: no bytes", as without a
  // rate.
  uint64_t stall_bytes_per_second = 1;
  // Overrides ClientOptions::max_response_bytes for this request (a listing page's bound).
  std::optional<uint64_t> max_response_bytes;
  // If set, the body of a 2xx response is handed to it piece by piece as it arrives, instead of
  // being collected in Response::body (which then stays empty), so that a large response is
  // never held whole. Returning false aborts the transfer: Send then fails with Internal
  // "...: response body refused" (the callback keeps its own reason). Other statuses' bodies
  // (the error JSON) are collected as usual.
  std::function<bool(std::span<const uint8_t>)> on_body;
  // If set, called once the final response's status line and header fields are in (names
  // lower-cased, in received order), before any body byte reaches on_body, so that a streamed
  // body can be checked (its ETag, its Content-Range) before it is consumed. Returning false
  // aborts the transfer: Send then fails with Internal "...: response refused" (the callback
  // keeps its own reason).
  std::function<bool(int status, const std::vector<std::pair<std::string, std::string>>& headers)>
      on_headers;
  // If set, polled while the request runs (libcurl: about once a second while it waits, more
  // often while bytes move): returning true aborts it
  // at once, and Send fails with Internal "...: aborted". Lets a cancelled operation end a
  // request that waits on a slow server without waiting for its deadline.
  std::function<bool()> should_abort;
  // If set, libcurl signs the request with AWS Signature Version 4 (CURLOPT_AWS_SIGV4; the
  // algorithm of
  // https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html),
  // covering the method, the path and query exactly as given (sent as is: CURLOPT_PATH_AS_IS),
  // host, x-amz-date and every header in `headers`. libcurl 7.88 neither sorts the query nor adds
  // x-amz-content-sha256: the caller passes the query in canonical order and encoding and adds
  // the header itself (objstore/s3_sign.h SignS3Request does). Never logged.
  struct AwsSigV4 {
    std::string provider;  // "aws:amz:<region>:<service>", e.g. "aws:amz:us-east-1:s3"
    std::string access_key_id;
    std::string secret_access_key;
  };
  std::optional<AwsSigV4> aws_sigv4;
  // The query holds a credential (an Azure SAS token): messages show the path without it.
  bool secret_query = false;
};

struct Response {
  int status = 0;
  // Header names lower-cased, in received order (of the final response only).
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<uint8_t> body;

  std::string_view text() const {
    return {reinterpret_cast<const char*>(body.data()), body.size()};
  }
  // The first header named `name` (lower case), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct ClientOptions {
  // "http://host:port" or "https://host:port", optionally with a path prefix. Create spells it
  // one way (RFC 3986 §6.2.2–6.2.3): the scheme and host in lower case (an IPv6 zone as given),
  // the scheme's default port (80, 443) and a trailing '/' dropped, a port without leading zeros.
  // Errors name the server by this URL.
  std::string base_url;
  // Sent as "Authorization: Bearer <token>" when not empty. Never logged or put in a message.
  std::string token;
  // Sent with every request, before the request's own headers: (name, value), e.g. the CLI's
  // ("Bdn-Session", id) that a load balancer may hash (docs/http-api.md, "Sessions"). Names and
  // values must hold no control character (below 0x20, or 0x7f), and a name must be a non-empty
  // token without ':' or space (Create refuses others: InvalidArgument).
  std::vector<std::pair<std::string, std::string>> headers;
  // How messages name the server: "<label> <base_url>: <reason>", e.g. "origin http://…: …".
  std::string label = "origin";
  // Time to establish a connection; a request that cannot connect in time is Unavailable.
  std::chrono::milliseconds connect_timeout{5000};
  // Whole-request deadline (connect + send + receive); past it the request is DeadlineExceeded.
  std::chrono::milliseconds deadline{60000};
  // Idle connections (curl easy handles) kept for reuse; more may be open while busy.
  size_t max_idle_connections = 64;
  // A larger response body fails the request (Internal) instead of exhausting memory.
  uint64_t max_response_bytes = uint64_t{1} << 30;
  // kPublicOnly: every address a connection would be opened to is checked first (each address
  // the name resolves to, at the moment of connecting, so a name that resolves differently
  // later is judged by what it resolves to then), and a non-public one (NonPublicKind) is never
  // connected to. Behind a proxy (http_proxy and friends) the proxy's address is the one checked.
  PeerAddresses peers = PeerAddresses::kAny;
  // Prefix "<label> <url>: " to the message of a 401 answer (error code "unauthenticated": a token
  // the server does not accept, or none), so that a user with several servers sees which one
  // refused it; with no `token`, "; no token was sent: set BDN_TOKEN to a key of this server (bdn
  // key create makes one)" follows. For clients that report to a person (the CLI); a server
  // relaying errors to its own clients keeps this off, so its upstream's address stays private.
  bool name_server_in_rejections = false;
};

// The reason (Status::reason) of a response body larger than max_response_bytes.
inline constexpr std::string_view kResponseTooLarge = "response_too_large";
// The reason of a request refused or ended by HttpClient::Shutdown (base/status.h).
using ::bdn::kShuttingDown;

// One client per server. HTTPS peers are verified against libcurl's CA bundle, or the file
// $SSL_CERT_FILE names (read once per process). Each request borrows an idle keep-alive connection
// from the pool (or opens a new one) and returns it afterwards, so concurrent requests use separate
// connections.
//
// Fork safety: connections opened before a fork(2) are never used in the child (nor closed:
// they are the parent's); the child opens its own on first use. So a client may be created
// before MountInBackground forks its daemon.
// Thread-safe.
// Whether `token` can be sent as "Authorization: Bearer <token>": RFC 6750 §2.1's b64token,
// letters, digits and - . _ ~ + / with = only at the end (so no space, line break or other
// control character can add a header or break the request). "" passes (no token). Errors:
// InvalidArgument "byte N of M is a line break, which a bearer token cannot hold (RFC 6750:
// letters, digits, - . _ ~ + / and = at the end)" (also "a space", "a tab", "a control
// character", "a byte outside ASCII", "a character", "an = before the end"); the token's bytes
// never appear in it.
Status CheckBearerToken(std::string_view token);

// A URL's authority "host[:port]" cut in two, as RFC 3986 §3.2 reads it: the port is all after
// the host's first ":" ("u:SECRET:8080" has the port "SECRET:8080", never 8080), or after "]" for
// a bracketed IPv6 host. Nothing is checked but the brackets: std::nullopt where a "[" has no "]"
// or something other than ":" follows the "]". The views point into `authority`.
struct AuthorityParts {
  std::string_view host;
  std::optional<std::string_view> port;  // set where a ":" follows the host, even if empty
};
std::optional<AuthorityParts> SplitAuthority(std::string_view authority);

// A URL's port as a number, 1 to 65535 (leading zeros allowed: "041517"), or std::nullopt for
// anything else ("", "0", "000", "99999", "+80", " 80", "8080x", a password). The one port check of
// every URL bdn takes.
std::optional<int> ParsePort(std::string_view port);

// Whether `authority` is "host[:port]" as a URL may name them: the host a name, an IPv4 address
// or a bracketed IPv6 one (with an optional zone, "%25eth0"), at most 253 bytes, a port 1 to
// 65535 (SplitAuthority, ParsePort).
bool IsAuthority(std::string_view authority);

// A URL as an error shows it: what lies between "://" (or the start, without one) and the last
// "@" (credentials, whatever "/", "?" or "#" they hold), what follows a "?" or "#" after that,
// what stands where the port goes unless it is a number ("h:SECRET", "u:SECRET:8080"), a host
// holding a "%" (a percent-encoded "@"), and all after "scheme:" where "//" or the host is missing
// ("http:/u:SECRET"), as "***"; and its first `max_bytes` bytes then "..." (from attackers: a
// password or a presigned signature in a URL was repeated whole, also where the URL lacked "://"
// or the password held a "/", and a 70,000-byte host printed whole).
std::string ShownUrl(std::string_view url, size_t max_bytes = 200);

// A request target ("/path?query#fragment", or a whole URL) with the value of each query
// parameter whose name looks like a credential ("sig", "token", "key", "secret", "credential",
// "password", "auth" or "policy" in it, in any case: X-Amz-Signature, X-Amz-Credential,
// X-Goog-Signature, an Azure SAS's sig, ?token=) as "***", and a fragment as "#***"; other
// parameters as they are, so a listing's "?recursive=true" still shows (from an attacking helper:
// a presigned signature was repeated in a sync job's error, its log and its JSON).
std::string WithoutSecretParams(std::string_view target);

// Whether `s` is Send's DeadlineExceeded for a transfer that moved bytes, but fewer than its
// stall_bytes_per_second ("...: stalled: slower than 1.00 KiB/s for N ms"), as opposed to one
// that moved none ("stalled: no bytes"): a server that drips, not one that waits.
bool IsTooSlow(const Status& s);

// Whether `s`, a transport error of HttpClient::Send (or one that carries its message), came
// before the request was sent: connection refused, cannot connect, cannot resolve host, connect
// timed out. A write that failed so was not applied; one that failed after it was sent (an empty
// reply, a reset while waiting) may have been.
bool FailedBeforeSending(const Status& s);

class HttpClient {
 public:
  // Validates the URL and the token (CheckBearerToken). Errors: InvalidArgument "url \"x\": must
  // start with http:// or https://" (or "...: no host", "...: must be
  // scheme://host[:port][/prefix]..."); "token: byte N of M is ..." (CheckBearerToken).
  static Result<std::unique_ptr<HttpClient>> Create(ClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `req` and returns the response whatever its HTTP status.
  // Errors (transport only): Unavailable "<label> <url>: connection refused" (or another reason:
  // cannot resolve host, connect timed out, connection reset, TLS failure); PermissionDenied
  // "<label> <url>: <METHOD> <path>: connecting to 127.0.0.1 refused (loopback address; only
  // public addresses are allowed)" with reason kAddressNotAllowed when PeerAddresses::
  // kPublicOnly left no address to connect to; DeadlineExceeded
  // "<label> <url>: GET /path: no response within N ms"; Internal for a body over
  // max_response_bytes (reason kResponseTooLarge) and for other libcurl failures; Unavailable
  // "<label> <url>: <METHOD> <path>: shutting down" (reason kShuttingDown) after Shutdown.
  Result<Response> Send(const Request& req);

  // Ends every request of this client: those in flight within about a second (libcurl's
  // progress callback), and every later one at once, with Unavailable "...: shutting down". For
  // a server that stops while its handlers wait on an upstream that does not answer, so that
  // they return instead of holding the stop for their whole deadline. Thread-safe; there is no
  // way back.
  void Shutdown();

  // Send, then maps a non-2xx response to its Status: the JSON error body's code and message,
  // verbatim (ParseErrorBody in errors.h; "<label> <url>: " first for a 401 with
  // name_server_in_rejections); a body without that shape gives the code
  // StatusCodeForHttp(status) with the message "<label> <url>: <METHOD> <path>: HTTP <code>".
  Result<Response> Call(const Request& req);

  // The Status Call gives a non-2xx response `r` to `req` (see Call).
  Status ErrorOf(const Request& req, const Response& r) const;

  // Shorthands for Call.
  Result<Response> Get(std::string path);
  Result<Response> Delete(std::string path);
  // Body is JSON text.
  Result<Response> PostJson(std::string path, std::string_view json);
  Result<Response> PutJson(std::string path, std::string_view json);

  const std::string& base_url() const { return options_.base_url; }
  const std::string& label() const { return options_.label; }
  // "<label> <base_url>", the prefix of this client's messages.
  std::string Name() const { return options_.label + " " + options_.base_url; }

 private:
  explicit HttpClient(ClientOptions options);
  void* Acquire();           // a CURL* of this process
  void Release(void* curl);  // back to the pool (or cleaned up)

  Status ShuttingDown(const Request& req) const;

  ClientOptions options_;
  std::atomic<bool> shut_down_{false};
  Mutex mu_;
  std::vector<void*> idle_
      GUARDED_BY(mu_);         // CURL* handles, each keeping its own keep-alive connection
  pid_t pid_ GUARDED_BY(mu_);  // the process the idle handles belong to
};

}  // namespace bdn::http
