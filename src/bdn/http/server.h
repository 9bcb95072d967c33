// Server: bdn's asynchronous HTTP/1.1 server (docs/http-api.md) on Boost.Beast over Asio. A few
// I/O threads own every connection; handlers, which read disks and hash, run on a worker pool,
// so an idle or slow connection costs no thread. Routes get per-route Prometheus metrics, JSON
// error bodies, exceptions caught at the edge, body limits, and an admission step that runs
// before a body is read.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/http/errors.h"
#include "bdn/http/message.h"
#include "bdn/http/metrics.h"

namespace bdn::http {

struct ServerOptions {
  std::string listen = "127.0.0.1:8440";
  // When set, GET /metrics is served only on this second address (e.g. an internal interface),
  // not on `listen`.
  std::string metrics_listen;
  // Threads that run handlers (disk reads, hashing, the registry). Each runs one request at a
  // time; connections waiting for bytes hold none.
  int threads = 64;
  // Threads that own the sockets (parse, route, write, and chunk GETs answered inline); 0 picks
  // one per core, 1 to 4.
  int io_threads = 0;
  // Body limit of routes that set none (RouteOptions::max_body_bytes); larger bodies get 413.
  uint64_t max_body_bytes = 1 << 20;
  // A request's line and header must arrive within this (counted from the connection's start,
  // or from the first byte of a later request); else the connection is closed.
  std::chrono::milliseconds header_timeout{10'000};
  // A keep-alive connection with no request under way is closed after this long.
  std::chrono::milliseconds idle_timeout{60'000};
  // Each write of a response (a header, a whole body, or one piece of a streamed body) must
  // complete within this, else the connection is closed and its memory freed (a client that
  // stops reading).
  std::chrono::milliseconds write_timeout{30'000};
  // A request body must arrive at this average rate at least (bytes per second, counted from
  // the end of the header after a grace of header_timeout); else the connection is closed.
  uint64_t min_body_rate = 1024;
  // Connections open at once, overall and from one client IP address; a connection over either
  // limit gets 503 with Retry-After and is closed.
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;
  // ServerRequest line plus header fields; over it: 414 (the line alone) or 431, and close.
  size_t max_header_bytes = 8192;
};

// Runs on a worker before the request body is read. Returns true to accept the request (it may
// then set req.body_sink to stream the body, and req.context for the handler); false when it
// answered in `res` itself (e.g. 401): the body is then never read, and the connection is closed
// after the response if the request has one.
using Admission = std::function<bool(ServerRequest& req, ServerResponse& res)>;

// Runs on the I/O thread that read a request without a body, before its admission: answers it
// there, with no hand-off to a worker and back, when that needs no waiting (no disk read that
// may miss the page cache, no database, no network, no lock held across any of them). Returns
// true when `res` is the answer; false to decline, and the request then takes the usual path
// (admission, then the handler, on a worker) as if this had not run (`res` and req.context are
// reset). Must be cheap: every I/O thread serves many connections.
using InlineHandler = std::function<bool(ServerRequest& req, ServerResponse& res)>;

// What a route adds to its handler.
struct RouteOptions {
  // Larger bodies get 413 before any of it is read (a chunked body is cut off at the limit);
  // 0 uses ServerOptions::max_body_bytes.
  uint64_t max_body_bytes = 0;
  Admission admit;
  // Tried first for requests without a body (counted in bdn_http_inline_requests_total when it
  // answers).
  InlineHandler try_inline;
};

// An HTTP/1.1 server. Register routes, then Start. Every route gets: its metrics
// (bdn_http_requests_total{method,route,status}, bdn_http_request_duration_seconds{route},
// bdn_http_errors_total{route,code}, bdn_http_request_bytes_total{route},
// bdn_http_response_bytes_total{route}); exceptions turned into 500 with a JSON error; Range
// headers left to the handler. Unmatched paths get a JSON 404. GET /healthz ("ok\n") and GET
// /metrics are built in.
// Thread-safety: register routes before Start; Start/Stop from one thread; handlers and
// admission steps run concurrently on the workers; metrics() is thread-safe.
class Server {
 public:
  using Handler = std::function<void(const ServerRequest&, ServerResponse&)>;
  using Admission = http::Admission;
  using RouteOptions = http::RouteOptions;

  explicit Server(ServerOptions options);
  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes `pattern` (an ECMAScript regex matched against the whole decoded path; groups land in
  // req.matches) to `handler`. `route` names the route in metrics, e.g. "/v1/chunks/{id}".
  // GET routes also answer HEAD (without the body).
  void Get(const std::string& pattern, std::string route, Handler handler,
           RouteOptions options = {});
  void Post(const std::string& pattern, std::string route, Handler handler,
            RouteOptions options = {});
  void Put(const std::string& pattern, std::string route, Handler handler,
           RouteOptions options = {});
  void Delete(const std::string& pattern, std::string route, Handler handler,
              RouteOptions options = {});

  // Binds the listen address(es) without serving yet (connections wait in the backlog until
  // Start), so that a server can find out an address is taken before it creates anything
  // (`bdn serve` on a busy port leaves its data directory untouched); host() and port() are
  // valid from here. Routes may still be added afterwards. Errors: as Start's.
  Status Bind();
  // Binds the listen address(es) (unless Bind did) and serves on background threads; returns
  // once it accepts.
  // Errors: InvalidArgument for a malformed address; Unavailable "listen H:P: cannot bind: ..."
  // when the address is in use or not local; FailedPrecondition if already started.
  Status Start();
  // Stops accepting, closes idle connections, lets in-flight requests finish (a few seconds at
  // most), then closes the rest and joins every thread; closes the sockets of a server that was
  // bound but never started. Idempotent. `grace_over`, if set, is called once the in-flight
  // requests had their few seconds (at once when none was left), before the rest are closed and
  // the threads joined: the owner ends there what handlers may still wait on (an upstream's
  // HttpClient::Shutdown), so that the stop does not wait for their deadlines.
  void Stop(const std::function<void()>& grace_over = {});

  // The bound host and port (valid after Start), and "http://HOST:PORT".
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string url() const;
  // With metrics_listen, after Start: "http://HOST:PORT" of the metrics address; else "".
  const std::string& metrics_url() const { return metrics_url_; }

  Metrics& metrics() { return metrics_; }

  struct Impl;

 private:
  void Add(std::string method, const std::string& pattern, std::string route, Handler handler,
           RouteOptions options);

  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
  std::string metrics_url_;
  bool bound_ = false;
  bool started_ = false;
};

}  // namespace bdn::http
