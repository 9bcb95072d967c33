// The request and response a bdn HTTP handler sees (docs/http-api.md), independent of the
// server library underneath: method, path and its regex groups, headers, query parameters and
// a body (whole, or streamed into a BodySink); a status, headers and a body (whole, or written
// piece by piece by a content provider). Also the small parsers handlers share: listen
// addresses and Range headers, and the JSON error helpers.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/http/errors.h"

namespace bdn::http {

// Orders header names without regard to ASCII case (field names are case-insensitive).
struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};

// Header fields in arrival order per name; a name may repeat.
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
// Decoded query parameters ("a=1&b=x%20y" gives a→1, b→"x y"); a name may repeat.
using Params = std::multimap<std::string, std::string, std::less<>>;

// One regex group of the matched path (group 0 is the whole path).
struct PathMatch {
  std::string text;
  const std::string& str() const { return text; }
};

// Receives a request body piece by piece, in order, as it arrives (a route's admission step sets
// ServerRequest::body_sink to stream a body that should not be held whole, e.g. an upload written
// to disk while it is hashed). Write runs on a worker thread, never concurrently with itself.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // Takes the next piece. A non-ok Status stops the upload: the client gets that error (its
  // HTTP status) and the connection is closed, the rest of the body unread.
  virtual Status Write(std::span<const uint8_t> piece) = 0;
};

struct ServerRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string target;  // as sent, e.g. "/v1/x?a=1"
  std::string path;    // the target's path, percent-decoded
  Headers headers;
  Params params;
  // The route pattern's groups over `path`: matches[0] is the path, matches[1] the first group.
  std::vector<PathMatch> matches;
  // The body, for routes that read it whole (empty when it was streamed into body_sink).
  std::string body;
  // Set by a route's admission step to receive the body as it arrives instead of `body`.
  std::unique_ptr<BodySink> body_sink;
  // Whatever a route's admission step hands to its handler (e.g. the authenticated key).
  std::any context;
  // Set by a route's admission step: how the access log names the caller's key ("bdn_<id>",
  // never the token); "" for none.
  std::string key_name;
  std::string remote_addr;  // the peer's IP address, e.g. "127.0.0.1"
  int remote_port = 0;

  bool has_header(std::string_view name) const;
  // The first value of header `name`, or `def`.
  std::string get_header_value(std::string_view name, const char* def = "") const;
  bool has_param(std::string_view name) const;
  // The first value of query parameter `name`, or "".
  std::string get_param_value(std::string_view name) const;
};

// Takes the pieces of a streamed response body (see ServerResponse::set_chunked_content_provider).
// Not thread-safe; used by one provider call at a time.
class DataSink {
 public:
  // One piece of output: bytes copied in, or a buffer handed over whole.
  struct Piece {
    std::string copied;
    std::vector<uint8_t> owned;
    std::span<const uint8_t> bytes() const {
      return owned.empty() ? std::span<const uint8_t>(
                                 reinterpret_cast<const uint8_t*>(copied.data()), copied.size())
                           : std::span<const uint8_t>(owned);
    }
  };

  // Appends a copy of `n` bytes to the response. Returns false once the connection is gone.
  bool write(const char* data, size_t n);
  // Appends `bytes` without copying them (the sink keeps the buffer until it is sent).
  bool write(std::vector<uint8_t>&& bytes);
  // Marks the body complete (the provider is not called again).
  void done() { done_ = true; }

  // For the server: what the provider wrote since the last take, in order.
  std::vector<Piece> Take() { return std::exchange(pieces_, {}); }
  bool is_done() const { return done_; }

 private:
  std::vector<Piece> pieces_;
  bool done_ = false;
};

// Produces a streamed body: called again and again (on a worker thread, one call at a time, each
// after the bytes of the previous one were sent) with the number of bytes sent so far, until it
// calls sink.done(). Returning false aborts: the connection is closed mid-body, so the client
// sees a truncated response, never a short one that looks complete.
using ContentProvider = std::function<bool(size_t offset, DataSink& sink)>;

struct ServerResponse {
  int status = 200;
  Headers headers;  // the server adds framing (Content-Length or chunked, Connection) itself
  std::string body;
  // Set by set_chunked_content_provider: the body is streamed with chunked transfer coding.
  ContentProvider provider;

  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name, const char* def = "") const;
  // Adds a header (a second call with the same name adds a second field).
  void set_header(std::string_view name, std::string value);
  // Sets the body and its Content-Type.
  void set_content(const char* data, size_t n, std::string_view content_type);
  void set_content(std::string body, std::string_view content_type);
  // Streams the body from `provider` instead.
  void set_chunked_content_provider(std::string_view content_type, ContentProvider provider);
};

// A listen address split into host and port. Port 0 means "pick a free one".
struct ListenAddress {
  std::string host;
  int port = 0;
};

// Parses "HOST:PORT", "[IPV6]:PORT" or ":PORT" (host 0.0.0.0); the host comes back without
// brackets. Errors: InvalidArgument "listen address \"x\": <reason>" for no ':', a port that is
// not a number from 0 to 65535, an IPv6 host without brackets, brackets anywhere but around the
// whole host, or "[]". Thread-safe.
Result<ListenAddress> ParseListenAddress(std::string_view text);

// A byte range of a resource: [offset, offset + length).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Parses a Range header value against a resource of `size_bytes` (RFC 9110 §14.1.2):
// "bytes=a-b", "bytes=a-" or "bytes=-n", the unit case-insensitive; a last byte past the end (up
// to 2^64-1 or beyond) means "to the end", a suffix longer than the resource is all of it.
// Returns nullopt when the header is to be ignored and the whole resource sent with 200 (RFC 9110
// §14.2): a range unit other than bytes, a value that does not parse as a range set (including a
// last byte before the first), or several ranges of which at least one is satisfiable (a
// multipart answer is never sent).
// Errors: InvalidArgument "range \"v\": not satisfiable for size N" (answer 416 with
// `Content-Range: bytes */N`) when no range of the set is satisfiable: each starts at or past the
// end, or is a suffix of 0 bytes (any range of an empty resource). Thread-safe.
Result<std::optional<ByteRange>> ParseRange(std::string_view value, uint64_t size_bytes);

// Whether a request's Range applies (RFC 9110 §13.1.5): it has no If-Range, or its If-Range is
// exactly `etag`, the resource's strong entity tag (a weak tag or a date never matches, so the
// Range is ignored and the whole resource sent).
bool IfRangeAllows(const ServerRequest& req, std::string_view etag);

// Writes the JSON error body of `s` into `res`, with the HTTP status HttpStatusFor(s,
// credentials); with kRejected a 401 also carries `WWW-Authenticate: Bearer realm="bdn"`.
void SetError(ServerResponse& res, const Status& s,
              Credentials credentials = Credentials::kAccepted);
// The same with an explicit HTTP status (e.g. 416 for an InvalidArgument range).
void SetError(ServerResponse& res, const Status& s, int http_status);
// Sets a JSON body and the HTTP status.
void SetJson(ServerResponse& res, std::string json, int http_status = 200);

}  // namespace bdn::http
