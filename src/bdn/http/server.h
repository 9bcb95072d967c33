// Server: a thin wrapper over cpp-httplib's server for bdn's HTTP endpoints (docs/http-api.md):
// a listen address, a bounded worker pool, per-route Prometheus metrics, JSON error bodies, and
// exceptions caught at the edge. Handlers are plain cpp-httplib handlers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
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

#include "bdn/base/status.h"
#include "bdn/http/errors.h"

namespace bdn::http {

// A listen address split into host and port. Port 0 means "pick a free one".
struct ListenAddress {
  std::string host;
  int port = 0;
};

// Parses "HOST:PORT", "[IPV6]:PORT" or ":PORT" (host 0.0.0.0).
// Errors: InvalidArgument "listen address \"x\": <reason>".
Result<ListenAddress> ParseListenAddress(std::string_view text);

// A byte range of a resource: [offset, offset + length).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Parses a Range header value against a resource of `size_bytes` (RFC 9110 §14.1.2, one range
// only): "bytes=a-b", "bytes=a-" or "bytes=-n"; b past the end is clamped to the end.
// Errors: InvalidArgument "range \"v\": <reason>" when it is malformed, lists several ranges, or
// is unsatisfiable (starts at or past the end, or a suffix of 0 bytes): answer 416.
Result<ByteRange> ParseRange(std::string_view value, uint64_t size_bytes);

// Writes the JSON error body of `s` into `res`, with the HTTP status HttpStatusFor(s,
// credentials); with kRejected a 401 also carries `WWW-Authenticate: Bearer realm="bdn"`.
void SetError(httplib::Response& res, const Status& s,
              Credentials credentials = Credentials::kAccepted);
// The same with an explicit HTTP status (e.g. 416 for an InvalidArgument range).
void SetError(httplib::Response& res, const Status& s, int http_status);
// Sets a JSON body and the HTTP status.
void SetJson(httplib::Response& res, std::string json, int http_status = 200);

// Labels of one metric sample, in order: {{"method", "GET"}, {"route", "/v1/chunks/{id}"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Prometheus metrics in the text exposition format (version 0.0.4): counters, gauges, and
// histograms with fixed buckets. Samples are created at first use. Thread-safe.
class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares the family `name` with its HELP text (and bucket upper bounds, in ascending order,
  // for a histogram). Re-declaring is a no-op. Families used before they are declared are
  // counters without HELP.
  void Declare(const std::string& name, Type type, std::string help,
               std::vector<double> buckets = {});
  // Adds `delta` to a counter or gauge sample.
  void Add(const std::string& name, const Labels& labels, double delta);
  // Sets a gauge sample.
  void Set(const std::string& name, const Labels& labels, double value);
  // Records one observation in a histogram sample (the family must be declared as a histogram).
  void Observe(const std::string& name, const Labels& labels, double value);
  // The value of a counter or gauge sample (0 if it does not exist); for tests.
  double Value(const std::string& name, const Labels& labels) const;
  // Registers `sample`, run at the start of every Render (each scrape), in registration order,
  // to Set samples whose values live elsewhere (a cache's counters, a queue's length). It runs
  // on the scraping thread without this object's lock held, so it may call Declare/Add/Set, but
  // not Render.
  void OnScrape(std::function<void(Metrics&)> sample);
  // Runs the OnScrape functions, then renders all families, in name order, in the text format.
  std::string Render();

 private:
  struct Sample {
    double value = 0;               // counter/gauge value; histogram sum
    uint64_t count = 0;             // histogram observations
    std::vector<uint64_t> buckets;  // histogram: observations <= each bound (not cumulative)
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> bounds;
    std::map<std::string, Sample> samples;  // by rendered label text
  };
  Family& FamilyLocked(const std::string& name);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::mutex scrape_mu_;  // guards on_scrape_ (not held with mu_)
  std::vector<std::function<void(Metrics&)>> on_scrape_;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:8440";
  // Workers; each serves one connection at a time (keep-alive connections hold theirs while
  // open), so size it for the expected concurrent readers.
  int threads = 64;
  // Accepted connections waiting for a worker; when full, accepting pauses (back-pressure).
  size_t max_queued_connections = 256;
  // Larger request bodies get 413.
  size_t max_body_bytes = 65 * 1024 * 1024;
  std::chrono::seconds keep_alive_timeout{5};
  std::chrono::seconds io_timeout{30};
};

// An HTTP/1.1 server. Register routes, then Start. Every route gets: its metrics
// (bdn_http_requests_total{method,route,status}, bdn_http_request_duration_seconds{route},
// bdn_http_errors_total{route,code}, bdn_http_request_bytes_total{route},
// bdn_http_response_bytes_total{route}); exceptions turned into 500 with a JSON error; Range
// headers left to the handler (cpp-httplib's own range slicing is disabled). Unmatched paths get
// a JSON 404. GET /healthz ("ok\n") and GET /metrics are built in.
// Thread-safety: register routes before Start; Start/Stop from one thread; handlers run
// concurrently on the workers; metrics() is thread-safe.
class Server {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  // Reads the request body into req.body (none without Content-Length or chunked
  // Transfer-Encoding: RFC 9112 §6.3). False when reading failed; the response is then an error.
  using BodyReader = std::function<bool()>;
  // A POST/PUT handler that runs before the body is read, and calls `read_body` only once it
  // accepts the request (e.g. after authentication), so that the body of a refused request is
  // never received. A handler that answers without calling it gets its connection closed after
  // the response (unless the unread body is small, then it is read and dropped).
  using DeferredBodyHandler = std::function<void(const httplib::Request&, httplib::Response&,
                                                 const BodyReader& read_body)>;

  explicit Server(ServerOptions options);
  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes `pattern` (an ECMAScript regex matched against the whole path; groups land in
  // req.matches) to `handler`. `route` names the route in metrics, e.g. "/v1/chunks/{id}".
  // GET routes also answer HEAD (without the body).
  void Get(const std::string& pattern, std::string route, Handler handler);
  void Post(const std::string& pattern, std::string route, Handler handler);
  void Put(const std::string& pattern, std::string route, Handler handler);
  void Delete(const std::string& pattern, std::string route, Handler handler);
  // POST/PUT routes whose handler decides before the body is read (DeferredBodyHandler).
  void PostDeferred(const std::string& pattern, std::string route, DeferredBodyHandler handler);
  void PutDeferred(const std::string& pattern, std::string route, DeferredBodyHandler handler);

  // Binds the listen address and serves on a background thread; returns once it accepts.
  // Errors: InvalidArgument for a malformed address; Unavailable "listen H:P: cannot bind: ..."
  // when the address is in use or not local; FailedPrecondition if already started.
  Status Start();
  // Stops accepting, lets in-flight requests finish, joins the workers. Idempotent.
  void Stop();

  // The bound host and port (valid after Start), and "http://HOST:PORT".
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string url() const;

  Metrics& metrics() { return metrics_; }

 private:
  Handler Wrap(std::string route, Handler handler);
  // Runs `call` (a route's handler) with the route's metrics, exceptions answered with 500.
  // With `*unrecorded` true afterwards the response is left to the error handler, which records it.
  void Handle(const std::string& route, const httplib::Request& req, httplib::Response& res,
              const std::function<void()>& call, const bool* unrecorded = nullptr);
  httplib::Server::HandlerWithContentReader WrapWithBody(std::string route,
                                                         DeferredBodyHandler handler);
  void Record(const httplib::Request& req, const std::string& route, const httplib::Response& res,
              std::optional<double> seconds);

  ServerOptions options_;
  httplib::Server server_;
  Metrics metrics_;
  std::string host_;
  int port_ = 0;
  std::thread thread_;
  bool started_ = false;
};

}  // namespace bdn::http
