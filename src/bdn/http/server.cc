// Server over cpp-httplib: routing wrapper, bounded worker pool, metrics and JSON errors.
#include "bdn/http/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "bdn/base/thread_pool.h"

namespace bdn::http {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<double> kDurationBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5,     10};

// httplib's worker pool, backed by bdn's bounded ThreadPool: when every worker is busy and the
// queue is full, enqueue blocks, so the accept loop pauses and the kernel backlog pushes back.
class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int threads, size_t max_queued)
      : pool_(std::make_unique<ThreadPool>(threads, max_queued)) {}
  void enqueue(std::function<void()> fn) override { pool_->Submit(std::move(fn)); }
  // Finishes queued connections and joins the workers.
  void shutdown() override { pool_.reset(); }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelText(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k + "=\"" + EscapeLabel(v) + "\"";
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string_view TypeName(Metrics::Type t) {
  switch (t) {
    case Metrics::Type::kCounter:
      return "counter";
    case Metrics::Type::kGauge:
      return "gauge";
    case Metrics::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// The "code" of a JSON error body, or "" (the wrapper uses it for bdn_http_errors_total).
std::string ErrorCodeOf(const httplib::Response& res) {
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    return j["error"].value("code", "");
  }
  return "";
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Err(
        InvalidArgumentError("listen address \"" + std::string(text) + "\": " + std::string(why)));
  };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("expected HOST:PORT");
  std::string_view host = text.substr(0, colon);
  std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 host must be in brackets, e.g. [::1]:8440");
  }
  auto port = ParseU64(port_text);
  if (!port || *port > 65535) return bad("port must be a number from 0 to 65535");
  ListenAddress out;
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = static_cast<int>(*port);
  return out;
}

Result<ByteRange> ParseRange(std::string_view value, uint64_t size_bytes) {
  auto bad = [&](std::string_view why) {
    return Err(InvalidArgumentError("range \"" + std::string(value) + "\": " + std::string(why)));
  };
  constexpr std::string_view kUnit = "bytes=";
  if (!value.starts_with(kUnit)) return bad("expected bytes=FIRST-LAST");
  std::string_view spec = value.substr(kUnit.size());
  while (!spec.empty() && spec.front() == ' ') spec.remove_prefix(1);
  while (!spec.empty() && spec.back() == ' ') spec.remove_suffix(1);
  if (spec.find(',') != std::string_view::npos) return bad("only a single range is supported");
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return bad("expected bytes=FIRST-LAST");
  std::string_view first_text = spec.substr(0, dash);
  std::string_view last_text = spec.substr(dash + 1);
  std::string size_text = "size " + std::to_string(size_bytes);
  if (first_text.empty()) {  // suffix: the last n bytes
    auto n = ParseU64(last_text);
    if (!n) return bad("expected bytes=-LENGTH");
    if (*n == 0 || size_bytes == 0) return bad("not satisfiable for " + size_text);
    uint64_t len = std::min(*n, size_bytes);
    return ByteRange{size_bytes - len, len};
  }
  auto first = ParseU64(first_text);
  if (!first) return bad("expected bytes=FIRST-LAST");
  uint64_t last = UINT64_MAX;
  if (!last_text.empty()) {
    auto l = ParseU64(last_text);
    if (!l) return bad("expected bytes=FIRST-LAST");
    if (*l < *first) return bad("last byte before first byte");
    last = *l;
  }
  if (*first >= size_bytes) return bad("not satisfiable for " + size_text);
  last = std::min(last, size_bytes - 1);
  return ByteRange{*first, last - *first + 1};
}

void SetError(httplib::Response& res, const Status& s, int http_status) {
  res.status = http_status;
  res.set_content(
      ErrorBody(s, http_status == 401 ? Credentials::kRejected : Credentials::kAccepted),
      "application/json");
  if (http_status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"bdn\"");
}

void SetError(httplib::Response& res, const Status& s, Credentials credentials) {
  SetError(res, s, HttpStatusFor(s, credentials));
}

void SetJson(httplib::Response& res, std::string json, int http_status) {
  res.status = http_status;
  res.set_content(std::move(json), "application/json");
}

// ---- Metrics ----

Metrics::Family& Metrics::FamilyLocked(const std::string& name) {
  return families_[name];  // default: a counter without HELP
}

void Metrics::Declare(const std::string& name, Type type, std::string help,
                      std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = families_.try_emplace(name);
  if (!inserted && !it->second.help.empty()) return;
  it->second.type = type;
  it->second.help = std::move(help);
  it->second.bounds = std::move(buckets);
}

void Metrics::Add(const std::string& name, const Labels& labels, double delta) {
  std::string key = LabelText(labels);
  std::lock_guard lock(mu_);
  FamilyLocked(name).samples[key].value += delta;
}

void Metrics::Set(const std::string& name, const Labels& labels, double value) {
  std::string key = LabelText(labels);
  std::lock_guard lock(mu_);
  FamilyLocked(name).samples[key].value = value;
}

void Metrics::Observe(const std::string& name, const Labels& labels, double value) {
  std::string key = LabelText(labels);
  std::lock_guard lock(mu_);
  Family& f = FamilyLocked(name);
  Sample& s = f.samples[key];
  if (s.buckets.size() != f.bounds.size()) s.buckets.assign(f.bounds.size(), 0);
  for (size_t i = 0; i < f.bounds.size(); ++i) {
    if (value <= f.bounds[i]) {
      ++s.buckets[i];
      break;
    }
  }
  s.value += value;
  ++s.count;
}

double Metrics::Value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto s = f->second.samples.find(LabelText(labels));
  return s == f->second.samples.end() ? 0 : s->second.value;
}

void Metrics::OnScrape(std::function<void(Metrics&)> sample) {
  std::lock_guard lock(scrape_mu_);
  on_scrape_.push_back(std::move(sample));
}

std::string Metrics::Render() {
  {
    std::lock_guard scrape_lock(scrape_mu_);
    for (const auto& sample : on_scrape_) sample(*this);
  }
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " + std::string(TypeName(f.type)) + "\n";
    for (const auto& [labels, s] : f.samples) {
      if (f.type != Type::kHistogram) {
        out +=
            name + (labels.empty() ? "" : "{" + labels + "}") + " " + FormatValue(s.value) + "\n";
        continue;
      }
      std::string sep = labels.empty() ? "" : ",";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += i < s.buckets.size() ? s.buckets[i] : 0;
        out += name + "_bucket{" + labels + sep + "le=\"" + FormatValue(f.bounds[i]) + "\"} " +
               std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket{" + labels + sep + "le=\"+Inf\"} " + std::to_string(s.count) + "\n";
      std::string braces = labels.empty() ? "" : "{" + labels + "}";
      out += name + "_sum" + braces + " " + FormatValue(s.value) + "\n";
      out += name + "_count" + braces + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

// ---- Server ----

Server::Server(ServerOptions options) : options_(std::move(options)) {
  // Without TCP_NODELAY, Nagle's algorithm and delayed ACKs stall small responses ~40 ms each.
  server_.set_tcp_nodelay(true);
  metrics_.Declare("bdn_http_requests_total", Metrics::Type::kCounter,
                   "HTTP requests by method, route and status.");
  metrics_.Declare("bdn_http_request_duration_seconds", Metrics::Type::kHistogram,
                   "Time to handle a request, by route (streamed bodies excluded).",
                   kDurationBuckets);
  metrics_.Declare("bdn_http_errors_total", Metrics::Type::kCounter,
                   "Error responses by route and error code.");
  metrics_.Declare("bdn_http_request_bytes_total", Metrics::Type::kCounter,
                   "Request body bytes received, by route.");
  metrics_.Declare("bdn_http_response_bytes_total", Metrics::Type::kCounter,
                   "Response body bytes sent, by route.");

  int threads = options_.threads > 0 ? options_.threads : 1;
  size_t queued = options_.max_queued_connections > 0 ? options_.max_queued_connections : 1;
  server_.new_task_queue = [threads, queued] { return new BoundedTaskQueue(threads, queued); };
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which lets a second server
  // bind the same port and silently take half the connections.
  server_.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_.set_payload_max_length(options_.max_body_bytes);
  server_.set_keep_alive_max_count(1000);
  server_.set_keep_alive_timeout(options_.keep_alive_timeout.count());
  server_.set_read_timeout(options_.io_timeout.count(), 0);
  server_.set_write_timeout(options_.io_timeout.count(), 0);

  // Errors cpp-httplib produces itself (no route, oversized body, malformed request or Range)
  // come with an empty body; give them the JSON error shape too.
  server_.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.content_length_ > 0 || res.content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const_cast<httplib::Request&>(req).ranges.clear();  // never slice the error body
        std::string what = req.method + " " + req.path;
        std::string message;
        switch (res.status) {
          case 404:
            message = what + ": no such endpoint";
            break;
          case 413:
            message = what + ": request body larger than " +
                      std::to_string(options_.max_body_bytes) + " bytes";
            break;
          case 416:
            message = what + ": malformed Range header";
            break;
          default:
            message = what + ": HTTP " + std::to_string(res.status);
        }
        SetError(res, Status(StatusCodeForHttp(res.status), message), res.status);
        Record(req, res.status == 404 ? "(unmatched)" : "(other)", res, std::nullopt);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SetError(res, InternalError("server: " + what));
      });

  Get("/healthz", "/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  Get("/metrics", "/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
  });
}

Server::~Server() { Stop(); }

Server::Handler Server::Wrap(std::string route, Handler handler) {
  return [this, route = std::move(route), handler = std::move(handler)](const httplib::Request& req,
                                                                        httplib::Response& res) {
    Handle(route, req, res, [&] { handler(req, res); });
  };
}

void Server::Handle(const std::string& route, const httplib::Request& req, httplib::Response& res,
                    const std::function<void()>& call, const bool* unrecorded) {
  auto start = Clock::now();
  // Handlers serve Range themselves; cpp-httplib would otherwise slice every body again.
  const_cast<httplib::Request&>(req).ranges.clear();
  try {
    call();
  } catch (const std::exception& e) {
    res = httplib::Response();
    SetError(res, InternalError(req.method + " " + req.path + ": " + e.what()));
  } catch (...) {
    res = httplib::Response();
    SetError(res, InternalError(req.method + " " + req.path + ": unknown exception"));
  }
  if (res.status == -1) res.status = 200;
  if (unrecorded && *unrecorded) return;
  Record(req, route, res, std::chrono::duration<double>(Clock::now() - start).count());
}

void Server::Record(const httplib::Request& req, const std::string& route,
                    const httplib::Response& res, std::optional<double> seconds) {
  metrics_.Add("bdn_http_requests_total",
               {{"method", req.method}, {"route", route}, {"status", std::to_string(res.status)}},
               1);
  if (seconds) metrics_.Observe("bdn_http_request_duration_seconds", {{"route", route}}, *seconds);
  if (!req.body.empty()) {
    metrics_.Add("bdn_http_request_bytes_total", {{"route", route}},
                 static_cast<double>(req.body.size()));
  }
  size_t out = res.body.empty() ? res.content_length_ : res.body.size();
  if (out > 0 && req.method != "HEAD") {
    metrics_.Add("bdn_http_response_bytes_total", {{"route", route}}, static_cast<double>(out));
  }
  if (res.status >= 400) {
    std::string code = ErrorCodeOf(res);
    metrics_.Add("bdn_http_errors_total", {{"route", route}, {"code", code}}, 1);
    if (res.status >= 500) {
      std::fprintf(stderr, "bdn serve: %s %s: %d %s\n", req.method.c_str(), req.path.c_str(),
                   res.status, res.body.c_str());
    }
  }
}

void Server::Get(const std::string& pattern, std::string route, Handler handler) {
  server_.Get(pattern, Wrap(std::move(route), std::move(handler)));
}
// cpp-httplib 0.11 reads the body of a POST/PUT without Content-Length until the connection
// closes, so a bodiless `curl -X POST` would hang for the I/O timeout and then get 400. Routes
// with a content reader read the body themselves: none without Content-Length or chunked
// Transfer-Encoding (RFC 9112 §6.3: such a request has no body). The handler runs first and reads
// the body through `read_body` when it accepts the request.
httplib::Server::HandlerWithContentReader Server::WrapWithBody(std::string route,
                                                               DeferredBodyHandler handler) {
  // An unread body up to this size is read and dropped after a refusal, to keep the connection;
  // a larger one closes it instead.
  constexpr uint64_t kMaxDrainBytes = 64 * 1024;
  return [this, route = std::move(route), handler = std::move(handler)](
             const httplib::Request& req, httplib::Response& res,
             const httplib::ContentReader& reader) {
    std::string te = req.get_header_value("Transfer-Encoding");
    std::transform(te.begin(), te.end(), te.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    bool chunked = te.find("chunked") != std::string::npos;
    bool has_body = req.has_header("Content-Length") || chunked;
    bool read = false;
    bool read_failed = false;
    BodyReader read_body = [&]() -> bool {
      if (read) return true;
      read = true;
      if (!has_body) return true;
      std::string body;
      body.reserve(std::min<size_t>(req.get_header_value<uint64_t>("Content-Length"),
                                    options_.max_body_bytes));
      bool ok = reader([&](const char* data, size_t n) {
        body.append(data, n);
        return true;
      });
      if (!ok) {
        if (res.status < 400) res.status = 400;  // the error handler adds the JSON body
        read_failed = true;
        return false;
      }
      const_cast<httplib::Request&>(req).body = std::move(body);
      return true;
    };
    Handle(route, req, res, [&] { handler(req, res, read_body); }, &read_failed);
    if (!read && has_body) {
      uint64_t length = req.get_header_value<uint64_t>("Content-Length");
      if (!chunked && length <= kMaxDrainBytes) {
        (void)reader([](const char*, size_t) { return true; });
      } else {
        res.set_header("Connection", "close");
        const_cast<httplib::Request&>(req).set_header("Connection", "close");
      }
    }
  };
}

void Server::Post(const std::string& pattern, std::string route, Handler handler) {
  PostDeferred(pattern, std::move(route),
               [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                              const BodyReader& read_body) {
                 if (read_body()) handler(req, res);
               });
}
void Server::Put(const std::string& pattern, std::string route, Handler handler) {
  PutDeferred(pattern, std::move(route),
              [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                             const BodyReader& read_body) {
                if (read_body()) handler(req, res);
              });
}
void Server::PostDeferred(const std::string& pattern, std::string route,
                          DeferredBodyHandler handler) {
  server_.Post(pattern, WrapWithBody(std::move(route), std::move(handler)));
}
void Server::PutDeferred(const std::string& pattern, std::string route,
                         DeferredBodyHandler handler) {
  server_.Put(pattern, WrapWithBody(std::move(route), std::move(handler)));
}

void Server::Delete(const std::string& pattern, std::string route, Handler handler) {
  server_.Delete(pattern, Wrap(std::move(route), std::move(handler)));
}

Status Server::Start() {
  if (started_) return FailedPreconditionError("server: already started");
  BDN_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(options_.listen));
  errno = 0;
  int port = addr.port;
  bool bound;
  if (port == 0) {
    port = server_.bind_to_any_port(addr.host);
    bound = port > 0;
  } else {
    bound = server_.bind_to_port(addr.host, port);
  }
  if (!bound) {
    int e = errno;
    return UnavailableError("listen " + options_.listen + ": cannot bind" +
                            (e != 0 ? std::string(": ") + std::strerror(e) : std::string()));
  }
  host_ = addr.host;
  port_ = port;
  started_ = true;
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!server_.is_running()) {
    if (Clock::now() > deadline) return InternalError("listen " + url() + ": server did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void Server::Stop() {
  if (!started_) return;
  server_.stop();
  if (thread_.joinable()) thread_.join();
  started_ = false;
}

std::string Server::url() const {
  std::string h = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return "http://" + h + ":" + std::to_string(port_);
}

}  // namespace bdn::http
