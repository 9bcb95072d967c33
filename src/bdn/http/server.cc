// Server on Boost.Beast/Asio: acceptors and connections on a few I/O threads (one strand per
// connection), handlers on a ThreadPool, per-route metrics and JSON errors.
//
// A connection is a Session that walks one request at a time through: wait for the first byte
// (keep-alive idle timeout) → read the header (header deadline, size limit) → route, framing and
// body-limit checks → admission (on a worker) → body (minimum rate; whole into req.body, or
// piece by piece into a BodySink on a worker) → handler (on a worker) → response (write deadline;
// a provider's pieces are produced on a worker, one at a time). Pipelined requests wait in the
// read buffer and are answered in order. A response that ends the connection says
// `Connection: close` once, then the socket is shut down for sending and whatever the client
// still sends is read and dropped for a moment (never parsed) before it is closed, so the
// response is not lost to a reset.
#include "bdn/http/server.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>
#include <unordered_map>

#include "bdn/base/hex.h"
#include "bdn/base/log.h"
#include "bdn/base/thread_pool.h"
#include "bdn/http/client.h"  // WithoutSecretParams

namespace bdn::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
// Asio's timers run on the real steady clock; connection deadlines are measured on it too.
using SteadyClock = std::chrono::steady_clock;

namespace {

const std::vector<double> kDurationBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5,     10};

// Whether a Transfer-Encoding value names the one coding "chunked" (any case, optional white
// space) and nothing else ("gzip, chunked" and "chunked, chunked" do not), by Beast's own
// token-list parser.
bool OnlyChunked(std::string_view value) {
  bhttp::token_list codings{value};
  auto it = codings.begin();
  return it != codings.end() && beast::iequals(*it, "chunked") && ++it == codings.end();
}

// Pieces in which a request body is read (and handed to a BodySink): the first is at most
// kFirstPieceBytes, and a piece doubles each time the body fills it, up to kPieceBytes, so that
// a connection holds about as much as it was sent (a stalled upload does not hold kPieceBytes).
constexpr size_t kPieceBytes = 256 * 1024;
constexpr size_t kFirstPieceBytes = 16 * 1024;
// Reads for the first byte of the next request on an idle connection.
constexpr size_t kIdleReadBytes = 1024;
// The read buffer's capacity while a body arrives. Beast reads at most the buffer's free
// capacity (never less than 512 bytes) per read_some, and the buffer shrinks between requests:
// without this, bodies were read 1 KiB per recvmsg (a million system calls and completions per
// GiB uploaded, which made the I/O threads the bound of a push).
constexpr size_t kBodyReadBytes = 64 * 1024;
// After a response that ends the connection, what the client still sends is dropped for at most
// this long before the socket is closed.
constexpr auto kLingerTime = std::chrono::seconds(1);
// How long Stop waits for in-flight requests before it closes their connections.
constexpr auto kStopGrace = std::chrono::seconds(5);

enum class Listener { kMain, kMetrics };

// The method label of a request in metrics: one of a closed set, so clients cannot grow it.
std::string_view MethodLabel(std::string_view m) {
  for (std::string_view known : {"GET", "HEAD", "POST", "PUT", "DELETE"}) {
    if (m == known) return known;
  }
  return "other";
}

bool IEquals(std::string_view a, std::string_view b) { return beast::iequals(a, b); }

// Percent-decodes `s` (and '+' as a space in query strings). Invalid escapes stay as they are.
std::string Decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigitValue(s[i + 1]) >= 0 &&
        HexDigitValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

Params ParseQuery(std::string_view q) {
  Params out;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view item = q.substr(0, amp);
    if (!item.empty()) {
      size_t eq = item.find('=');
      std::string key = Decode(item.substr(0, eq), true);
      std::string value = eq == std::string_view::npos ? "" : Decode(item.substr(eq + 1), true);
      out.emplace(std::move(key), std::move(value));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

// 5xx answers and aborted responses can repeat per request: at most 20 lines a minute.
log::RateLimiter& ServerFaults() {
  static log::RateLimiter limiter(20, std::chrono::minutes(1));
  return limiter;
}

// Text from a request, made safe for one log line.
// `s` (a request's method or decoded path) as one word of a log line: every byte outside
// printable ASCII, the space and '%' percent-encoded ("%20", "%C2%85"), so that no caller can end
// the word early, start a line (a newline, or U+0085 NEL, U+2028 for readers that split there)
// or turn text around (U+202E): the access line's fields are always the server's. At most `max`
// bytes of `s`, then "...".
std::string Printable(std::string_view s, size_t max = 200) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s.substr(0, max)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '%') {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// A request's path as the access log and a 404 show it: the values of credential-looking
// parameters after a "?" that was percent-encoded into the path hidden (WithoutSecretParams), and
// each segment cut after its first "=", space or control byte, "***" standing for the rest: what
// follows may be a value pasted with a name (from attacking helper 124: `PUT /v1/secrets/tok=PW`
// and "/v1/nope%3Ftoken=PW" were logged whole, while the answer hid them).
std::string ShownPath(std::string_view path) {
  const std::string hidden = WithoutSecretParams(path);
  const size_t q = std::min(hidden.find('?'), hidden.size());
  std::string out;
  for (size_t i = 0; i < q;) {
    const size_t slash = std::min(hidden.find('/', i + 1), q);
    const std::string_view segment = std::string_view(hidden).substr(i, slash - i);
    const size_t cut = std::ranges::find_if(segment,
                                            [](char c) {
                                              const auto u = static_cast<unsigned char>(c);
                                              return c == '=' || u <= 0x20 || u == 0x7f;
                                            }) -
                       segment.begin();
    out += cut < segment.size() ? std::string(segment.substr(0, cut + 1)) + "***"
                                : std::string(segment);
    i = slash;
  }
  return out + hidden.substr(q);
}

// The "code" of a JSON error body, or "" (for bdn_http_errors_total).
std::string ErrorCodeOf(const ServerResponse& res) {
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    return j["error"].value("code", "");
  }
  return "";
}

// The literal text every path matching `pattern` starts with (for a quick test before the regex).
std::string LiteralPrefix(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) {
      if ((c == '?' || c == '*' || c == '{') && !out.empty()) out.pop_back();
      break;
    }
    out += c;
  }
  return out;
}

}  // namespace

struct RouteEntry {
  std::string method;
  std::regex pattern;
  std::string prefix;
  std::string name;
  Server::Handler handler;
  Server::RouteOptions options;
  bool on_io_thread = false;  // cheap and never blocking: answered without a worker
  bool metrics_endpoint = false;
};

class Session;

struct Server::Impl {
  Server& server;
  const ServerOptions& o;
  std::vector<RouteEntry> routes;

  std::unique_ptr<asio::io_context> ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::unique_ptr<ThreadPool> pool;
  struct Acceptor {
    tcp::acceptor acceptor;
    Listener kind;
    asio::steady_timer retry;
  };
  std::vector<std::unique_ptr<Acceptor>> acceptors;

  Mutex mu;
  std::condition_variable cv;
  size_t open = 0;
  std::unordered_map<std::string, size_t> per_client GUARDED_BY(mu);
  std::map<Session*, std::weak_ptr<Session>> sessions GUARDED_BY(mu);
  bool stopping GUARDED_BY(mu) = false;

  Impl(Server& s, const ServerOptions& options) : server(s), o(options) {}

  const RouteEntry* Match(const std::string& method, const std::string& path, Listener kind,
                          std::vector<PathMatch>* groups) const;
  // Accepts connections on `a` until it closes (async_accept, then a burst of non-blocking
  // accepts per completion).
  void Accept(Acceptor* a);
  // Starts a session on an accepted socket, or refuses it (503) when over a connection limit.
  void Admit(Acceptor* a, tcp::socket socket);
  // Counts a new connection; false when it is over a limit (then `why` says which).
  bool Register(const std::shared_ptr<Session>& s, const std::string& addr, std::string* why);
  void Unregister(Session* s, const std::string& addr);
  void Submit(std::function<void()> fn) { pool->Submit(std::move(fn)); }
};

const RouteEntry* Server::Impl::Match(const std::string& method, const std::string& path,
                                      Listener kind, std::vector<PathMatch>* groups) const {
  const std::string& m = method == "HEAD" ? std::string("GET") : method;
  for (const RouteEntry& r : routes) {
    if (r.method != m || !path.starts_with(r.prefix)) continue;
    if (kind == Listener::kMetrics && r.name != "/metrics" && r.name != "/healthz") continue;
    if (kind == Listener::kMain && r.metrics_endpoint && !o.metrics_listen.empty()) continue;
    std::smatch sm;
    if (!std::regex_match(path, sm, r.pattern)) continue;
    groups->clear();
    for (const auto& g : sm) groups->push_back({g.str()});
    return &r;
  }
  return nullptr;
}

// One connection. Every member is touched only on the connection's strand, except the request
// and response, which a worker uses while the strand waits for it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl* impl, tcp::socket socket, Listener kind, std::string addr, int port)
      : impl_(impl),
        stream_(std::move(socket)),
        buffer_(impl->o.max_header_bytes + 64 * 1024),
        kind_(kind),
        addr_(std::move(addr)),
        port_(port) {}
  ~Session() { impl_->Unregister(this, addr_); }

  const std::string& addr() const { return addr_; }

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // Over a connection limit: 503 with Retry-After, then close.
  void Reject(std::string why) {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), why = std::move(why)] {
      self->res_ = std::make_unique<ServerResponse>();
      SetError(*self->res_, UnavailableError("server: " + why + "; retry later"), 503);
      self->res_->set_header("Retry-After", "1");
      self->close_ = true;
      self->WriteResponse();
    });
  }

  // Server::Stop: an idle connection closes now, a busy one after its response.
  void OnStop() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kHeader ||
          self->phase_ == Phase::kLinger) {
        self->Close();
      }
    });
  }
  void ForceClose() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

 private:
  enum class Phase { kIdle, kHeader, kAdmit, kBody, kHandler, kWrite, kLinger, kClosed };

  const ServerOptions& o() const { return impl_->o; }
  Metrics& metrics() { return impl_->server.metrics(); }

  // ---- reading a request ----

  void ReadHeader() {
    if (stopping_) return Close();
    req_.reset();
    res_.reset();
    route_ = nullptr;
    body_bytes_ = 0;
    body_reads_ = 0;
    sink_ = DataSink();
    sent_ = 0;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(o().max_header_bytes));
    parser_->body_limit(boost::none);  // checked per route once the route is known
    if (buffer_.size() == 0 && !first_) {
      // Between requests: wait for the next one's first byte within the idle timeout, holding
      // no buffer beyond a small read.
      phase_ = Phase::kIdle;
      buffer_.shrink_to_fit();
      stream_.expires_after(o().idle_timeout);
      stream_.async_read_some(buffer_.prepare(kIdleReadBytes),
                              [self = shared_from_this()](beast::error_code ec, size_t n) {
                                if (ec) return self->Close();
                                self->buffer_.commit(n);
                                self->ReadHeaderBytes();
                              });
      return;
    }
    ReadHeaderBytes();
  }

  void ReadHeaderBytes() {
    phase_ = Phase::kHeader;
    stream_.expires_after(o().header_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    first_ = false;
    start_ = SteadyClock::now();
    if (ec) {
      if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
        // The request line alone over the limit is 414, else the header block is 431 (the
        // parser takes the request line out of the buffer once it has all of it).
        bool line_done = !parser_->get().target().empty();
        std::string limit = std::to_string(o().max_header_bytes) + " bytes";
        return Refuse(
            line_done ? 431 : 414,
            InvalidArgumentError(line_done ? "request: header larger than " + limit
                                           : "request: request line longer than " + limit));
      }
      if (IsParseError(ec)) return Refuse(400, InvalidArgumentError(ParseErrorMessage(ec)));
      return Close();  // end of stream, reset, or the header deadline passed
    }
    auto& msg = parser_->get();
    req_ = std::make_unique<ServerRequest>();
    res_ = std::make_unique<ServerResponse>();
    req_->method = std::string(msg.method_string());
    req_->target = std::string(msg.target());
    req_->remote_addr = addr_;
    req_->remote_port = port_;
    for (const auto& f : msg) {
      req_->headers.emplace(std::string(f.name_string()), std::string(f.value()));
    }
    keep_alive_ = msg.keep_alive();
    http10_ = msg.version() < 11;
    std::string_view target = msg.target();
    if (target.starts_with("http://") || target.starts_with("https://")) {  // absolute-form
      size_t slash = target.find('/', target.find("//") + 2);
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    size_t q = target.find('?');
    req_->path = Decode(target.substr(0, q), false);
    if (q != std::string_view::npos) req_->params = ParseQuery(target.substr(q + 1));
    if (!target.starts_with("/")) {
      return Refuse(400, InvalidArgumentError("request: target must be a path starting with /"));
    }
    if (msg.count(bhttp::field::transfer_encoding) > 0 &&
        (!parser_->chunked() || !OnlyChunked(msg[bhttp::field::transfer_encoding]))) {
      // "gzip, chunked" is framed by Beast as chunked, but its body would be stored as sent.
      return Refuse(400,
                    InvalidArgumentError("request: Transfer-Encoding: only chunked is supported"));
    }
    route_ = impl_->Match(req_->method, req_->path, kind_, &req_->matches);
    if (!route_) {
      SetError(*res_,
               NotFoundError(req_->method + " " + ShownPath(req_->path) + ": no such endpoint"),
               404);
      return Finish();
    }
    uint64_t limit =
        route_->options.max_body_bytes > 0 ? route_->options.max_body_bytes : o().max_body_bytes;
    if (auto length = parser_->content_length(); length && *length > limit) {
      return Refuse(413, TooLarge(limit));
    }
    parser_->body_limit(limit);
    if (route_->options.try_inline && parser_->is_done() && TryInline()) return;
    if (!route_->options.admit) return StartBody();
    phase_ = Phase::kAdmit;
    // A request without a body (a GET, say) is admitted and handled in one task on one worker:
    // one hand-off to the pool and one back per request, not two of each.
    const bool handle_here = parser_->is_done() && !route_->on_io_thread;
    impl_->Submit([self = shared_from_this(), handle_here] {
      bool admitted = false;
      self->Guard([&] { admitted = self->route_->options.admit(*self->req_, *self->res_); });
      if (admitted && handle_here && !self->req_->body_sink) {
        self->Guard([&] { self->route_->handler(*self->req_, *self->res_); });
        asio::post(self->stream_.get_executor(), [self] { self->Finish(); });
        return;
      }
      asio::post(self->stream_.get_executor(), [self, admitted] {
        if (!admitted) return self->Finish();
        self->StartBody();
      });
    });
  }

  // RouteOptions::try_inline; true when it answered (the response is then under way).
  bool TryInline() {
    bool answered = false;
    // A handler that throws has answered: with the 500 Guard wrote.
    if (!Guard([&] { answered = route_->options.try_inline(*req_, *res_); })) answered = true;
    if (!answered) {
      *res_ = ServerResponse();
      req_->context.reset();
      req_->key_name.clear();
      return false;
    }
    metrics().Add("bdn_http_inline_requests_total", {{"route", route_->name}}, 1);
    Finish();
    return true;
  }

  Status TooLarge(uint64_t limit) const {
    return InvalidArgumentError(req_->method + " " + RouteName() + ": request body larger than " +
                                std::to_string(limit) + " bytes");
  }

  static bool IsParseError(beast::error_code ec) {
    return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
           ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
           ec != bhttp::error::need_buffer;
  }

  static std::string ParseErrorMessage(beast::error_code ec) {
    if (ec == bhttp::error::bad_content_length) {
      return "request: Content-Length must be one non-negative decimal number (and not "
             "combined with Transfer-Encoding)";
    }
    if (ec == bhttp::error::multiple_content_length) {
      return "request: conflicting Content-Length headers";
    }
    if (ec == bhttp::error::bad_transfer_encoding) {
      return "request: Transfer-Encoding repeated or combined with Content-Length";
    }
    if (ec == bhttp::error::bad_chunk || ec == bhttp::error::bad_chunk_extension) {
      return "request: malformed chunked body";
    }
    return "request: malformed (" + ec.message() + ")";
  }

  // Answers with an error and ends the connection: used when the request cannot be trusted to
  // be framed, or its body will not be read.
  void Refuse(int http_status, const Status& s) {
    if (!req_) req_ = std::make_unique<ServerRequest>();  // refused before it could be read
    if (!res_) res_ = std::make_unique<ServerResponse>();
    *res_ = ServerResponse();
    SetError(*res_, s, http_status);
    close_ = true;
    Finish();
  }

  void StartBody() {
    if (parser_->is_done()) return RunHandler();
    phase_ = Phase::kBody;
    body_start_ = SteadyClock::now();
    if (IEquals(req_->get_header_value("Expect"), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(o().write_timeout);
      asio::async_write(stream_, asio::buffer(kContinue),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (piece_.empty()) {
      // A streamed body fills whole pieces before each hand-off to the sink; a body read whole
      // is appended to req.body as it comes. The first piece is no larger than a body of known
      // length either (a 1-byte upload holds 1 byte while it arrives); GrowPiece does the rest.
      size_t size = kFirstPieceBytes;
      if (const auto length = parser_->content_length()) size = std::min<uint64_t>(size, *length);
      piece_.resize(std::max<size_t>(size, 1));
      piece_fill_ = 0;
    }
    size_t want = kBodyReadBytes;  // no more than the rest of a body of known length needs
    if (auto length = parser_->content_length()) {
      want = static_cast<size_t>(std::min<uint64_t>(want, *length - body_bytes_ + 1));
    }
    if (buffer_.capacity() < want) buffer_.reserve(want);
    auto& body = parser_->get().body();
    body.data = piece_.data() + piece_fill_;
    body.size = piece_.size() - piece_fill_;
    body.more = true;
    // The minimum average rate: after a grace of one header timeout, the next bytes must come
    // before the time by which what arrived so far would have arrived at that rate.
    auto allowed = std::chrono::duration<double>(static_cast<double>(body_bytes_) /
                                                 static_cast<double>(o().min_body_rate));
    stream_.expires_at(body_start_ + o().header_timeout +
                       std::chrono::duration_cast<SteadyClock::duration>(allowed));
    bhttp::async_read_some(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec == bhttp::error::body_limit) return Refuse(413, TooLarge(*LimitOf()));
    if (ec) {
      if (IsParseError(ec)) return Refuse(400, InvalidArgumentError(ParseErrorMessage(ec)));
      return Close();
    }
    size_t got = piece_.size() - piece_fill_ - parser_->get().body().size;
    body_bytes_ += got;
    if (got > 0) ++body_reads_;
    bool done = parser_->is_done();
    if (done) buffer_.shrink_to_fit();  // keeps a pipelined request's bytes, frees the rest
    if (!req_->body_sink) {
      req_->body.append(reinterpret_cast<const char*>(piece_.data()), got);
      if (!done) {
        if (got == piece_.size()) GrowPiece(0);
        return ReadBody();
      }
      piece_ = {};
      return RunHandler();
    }
    piece_fill_ += got;
    if (!done && piece_fill_ < piece_.size()) return ReadBody();
    if (!done && piece_.size() < kPieceBytes) {  // filled while the body keeps coming: grow it
      GrowPiece(piece_fill_);
      return ReadBody();
    }
    size_t fill = std::exchange(piece_fill_, 0);
    impl_->Submit([self = shared_from_this(), fill, done] {
      Status s = Status::Ok();
      // A sink that throws stops the upload as an error would (Guard set the 500).
      if (!self->Guard([&] {
            s = self->req_->body_sink->Write(std::span<const uint8_t>(self->piece_.data(), fill));
          })) {
        s = InternalError("body sink threw");
      }
      asio::post(self->stream_.get_executor(), [self, s, done] {
        if (!s.ok()) {
          if (self->res_->status < 400) SetError(*self->res_, s);
          self->close_ = true;
          return self->Finish();
        }
        if (!done) return self->ReadBody();
        self->piece_ = {};
        self->RunHandler();
      });
    });
  }

  // Doubles piece_ (up to kPieceBytes, and no more than `kept` bytes plus the rest of a body of
  // known length), keeping its first `kept` bytes.
  void GrowPiece(size_t kept) {
    uint64_t next = std::min(piece_.size() * 2, kPieceBytes);
    if (const auto length = parser_->content_length()) {
      next = std::min<uint64_t>(next, kept + (*length - std::min<uint64_t>(*length, body_bytes_)));
    }
    if (next > piece_.size()) piece_.resize(next);
  }

  std::optional<uint64_t> LimitOf() const {
    if (!route_) return o().max_body_bytes;
    return route_->options.max_body_bytes > 0 ? route_->options.max_body_bytes : o().max_body_bytes;
  }

  // Runs `fn` (a handler or an admission step); an exception becomes a 500 JSON error.
  // Returns whether `fn` returned (false: it threw, and res_ holds the 500).
  bool Guard(const std::function<void()>& fn) {
    try {
      fn();
      return true;
    } catch (const std::exception& e) {
      *res_ = ServerResponse();
      SetError(*res_, InternalError(req_->method + " " + req_->path + ": " + e.what()));
    } catch (...) {
      *res_ = ServerResponse();
      SetError(*res_, InternalError(req_->method + " " + req_->path + ": unknown exception"));
    }
    return false;
  }

  void RunHandler() {
    phase_ = Phase::kHandler;
    if (route_->on_io_thread) {
      Guard([&] { route_->handler(*req_, *res_); });
      return Finish();
    }
    impl_->Submit([self = shared_from_this()] {
      self->Guard([&] { self->route_->handler(*self->req_, *self->res_); });
      asio::post(self->stream_.get_executor(), [self] { self->Finish(); });
    });
  }

  // ---- writing the response ----

  std::string RouteName() const {
    if (route_) return route_->name;
    return res_ && res_->status == 404 ? "(unmatched)" : "(other)";
  }

  void Finish() {
    Record();
    WriteResponse();
  }

  void Record() {
    if (!req_) return;  // a connection refused before any request: counted as such
    const ServerResponse& res = *res_;
    std::string route = RouteName();
    std::string method(MethodLabel(req_->method));
    metrics().Add("bdn_http_requests_total",
                  {{"method", method}, {"route", route}, {"status", std::to_string(res.status)}},
                  1);
    metrics().Observe("bdn_http_request_duration_seconds", {{"route", route}},
                      std::chrono::duration<double>(SteadyClock::now() - start_).count());
    if (body_bytes_ > 0) {
      metrics().Add("bdn_http_request_bytes_total", {{"route", route}},
                    static_cast<double>(body_bytes_));
      metrics().Add("bdn_http_request_body_reads_total", {{"route", route}},
                    static_cast<double>(body_reads_));
    }
    if (!res.body.empty() && req_->method != "HEAD") {
      metrics().Add("bdn_http_response_bytes_total", {{"route", route}},
                    static_cast<double>(res.body.size()));
    }
    if (res.status >= 400) {
      metrics().Add("bdn_http_errors_total", {{"route", route}, {"code", ErrorCodeOf(res)}}, 1);
      if (res.status >= 500) {
        ServerFaults().Write(log::Level::kError, Printable(req_->method) + " " +
                                                     Printable(req_->path) + ": " +
                                                     std::to_string(res.status) + " " + res.body);
      }
    }
  }

  // One access-log line per answered request (docs/http-api.md, "Logs"): client address,
  // method, path (without the query), status, body bytes sent, duration, and the key's name
  // (never its token); "aborted" when the connection ended before the response was written.
  void LogAccess(bool complete) {
    if (!req_ || !res_ || !log::Enabled(log::Level::kInfo)) return;
    const size_t bytes = chunked_ || res_->provider ? sent_ : response_bytes_;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f",
                  std::chrono::duration<double, std::milli>(SteadyClock::now() - start_).count());
    log::Info("access " + addr_ + " " + Printable(req_->method, 16) + " " +
              Printable(ShownPath(req_->path)) + " " + std::to_string(res_->status) + " " +
              std::to_string(bytes) + " B " + ms + " ms key=" +
              (req_->key_name.empty() ? "-" : req_->key_name) + (complete ? "" : " aborted"));
  }

  void WriteResponse() {
    phase_ = Phase::kWrite;
    response_bytes_ = 0;
    sent_ = 0;
    ServerResponse& res = *res_;
    if (!keep_alive_ || stopping_) close_ = true;
    // A body left unread would be parsed as the next request: never keep such a connection.
    if (parser_ && parser_->is_header_done() && !parser_->is_done()) close_ = true;
    bool head = req_ && req_->method == "HEAD";
    bool no_body = res.status < 200 || res.status == 204 || res.status == 304;
    bool stream = res.provider && !head && !no_body;
    if (stream && http10_) close_ = true;  // no chunked coding for HTTP/1.0: the close ends it
    chunked_ = stream && !http10_;

    std::string_view reason = bhttp::obsolete_reason(static_cast<bhttp::status>(res.status));
    if (reason.empty() || reason.starts_with("<")) reason = "Unknown";
    out_ = "HTTP/1.1 " + std::to_string(res.status) + " " + std::string(reason) + "\r\n";
    for (const auto& [name, value] : res.headers) {
      if (IEquals(name, "Connection") || IEquals(name, "Content-Length") ||
          IEquals(name, "Transfer-Encoding") || IEquals(name, "Keep-Alive")) {
        continue;
      }
      std::string v = value;
      std::erase_if(v, [](char c) { return c == '\r' || c == '\n'; });
      out_ += name + ": " + v + "\r\n";
    }
    if (chunked_) {
      out_ += "Transfer-Encoding: chunked\r\n";
    } else if (!no_body && !stream) {
      out_ += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    }
    if (close_) {
      out_ += "Connection: close\r\n";
    } else if (http10_) {
      out_ += "Connection: keep-alive\r\n";
    }
    out_ += "\r\n";
    if (stream) {
      Write([self = shared_from_this()] { self->StreamNext(); });
      return;
    }
    if (!head && !no_body) data_ = std::move(res.body);
    response_bytes_ = data_.size();
    res.body = {};
    Write([self = shared_from_this()] { self->Done(); });
  }

  // Writes out_, data_, pieces_ and tail_ within the write deadline, then calls `next`.
  void Write(std::function<void()> next) {
    stream_.expires_after(o().write_timeout);
    std::vector<asio::const_buffer> buffers = {asio::buffer(out_), asio::buffer(data_)};
    for (const auto& p : pieces_)
      buffers.push_back(asio::buffer(p.bytes().data(), p.bytes().size()));
    buffers.push_back(asio::buffer(tail_));
    asio::async_write(
        stream_, buffers,
        [self = shared_from_this(), next = std::move(next)](beast::error_code ec, size_t) {
          self->out_ = {};
          self->data_ = {};
          self->pieces_ = {};
          self->tail_ = {};
          if (ec) return self->Close();
          next();
        });
  }

  // One provider call on a worker, then its bytes on the wire, until it is done.
  void StreamNext() {
    impl_->Submit([self = shared_from_this()] {
      bool ok = false;
      try {
        ok = self->res_->provider(self->sent_, self->sink_);
      } catch (const std::exception& e) {
        ServerFaults().Write(log::Level::kError, Printable(self->req_->method) + " " +
                                                     Printable(self->req_->path) +
                                                     ": response aborted: " + e.what());
      }
      asio::post(self->stream_.get_executor(), [self, ok] {
        // A failed provider aborts the connection mid-body, so the client sees a truncated
        // response, not a short one that looks complete.
        if (!ok) return self->Close();
        // Written as framing + pieces + framing, without copying the pieces again.
        self->pieces_ = self->sink_.Take();
        size_t size = 0;
        for (const auto& p : self->pieces_) size += p.bytes().size();
        bool done = self->sink_.is_done();
        self->sent_ += size;
        self->out_.clear();
        self->tail_.clear();
        if (self->chunked_) {
          if (size > 0) {
            char line[32];
            std::snprintf(line, sizeof line, "%zx\r\n", size);
            self->out_ = line;
            self->tail_ = "\r\n";
          }
          if (done) self->tail_ += "0\r\n\r\n";
        }
        if (self->out_.empty() && size == 0 && self->tail_.empty()) return self->StreamNext();
        self->Write([self, done] { done ? self->Done() : self->StreamNext(); });
      });
    });
  }

  // The response is on the wire: the next request, or the end of the connection.
  void Done() {
    LogAccess(true);
    req_.reset();
    res_.reset();
    if (close_) return Linger();
    ReadHeader();
  }

  // Shuts down sending and drops what the client still sends (never parsed) for a moment, so
  // that the response is read before the socket closes (a close with unread data resets it).
  void Linger() {
    phase_ = Phase::kLinger;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    if (linger_until_ == SteadyClock::time_point())
      linger_until_ = SteadyClock::now() + kLingerTime;
    buffer_.clear();
    buffer_.shrink_to_fit();
    if (discard_.empty()) discard_.resize(16 * 1024);
    stream_.expires_at(linger_until_);
    stream_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    if (phase_ == Phase::kWrite) LogAccess(false);  // a response cut off mid-write
    phase_ = Phase::kClosed;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  Server::Impl* impl_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const Listener kind_;
  const std::string addr_;
  const int port_;

  Phase phase_ = Phase::kHeader;
  bool first_ = true;       // no request read yet on this connection
  bool keep_alive_ = true;  // the client allows another request after this one
  bool http10_ = false;
  bool close_ = false;  // this response ends the connection
  bool chunked_ = false;
  bool stopping_ = false;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> parser_;
  std::unique_ptr<ServerRequest> req_;
  std::unique_ptr<ServerResponse> res_;
  const RouteEntry* route_ = nullptr;
  SteadyClock::time_point start_;
  SteadyClock::time_point body_start_;
  SteadyClock::time_point linger_until_;
  uint64_t body_bytes_ = 0;
  uint64_t body_reads_ = 0;  // reads that delivered body bytes (bdn_http_request_body_reads_total)
  std::vector<uint8_t> piece_;  // the body piece being read
  size_t piece_fill_ = 0;       // bytes of piece_ filled (streamed bodies)
  std::vector<char> discard_;   // lingering reads
  DataSink sink_;
  size_t sent_ = 0;                      // streamed body bytes produced so far
  size_t response_bytes_ = 0;            // body bytes of a response written whole
  std::string out_;                      // bytes being written: a header, or a piece's framing
  std::string data_;                     // then a body,
  std::vector<DataSink::Piece> pieces_;  // or a provider's output
  std::string tail_;                     // then its framing
};

bool Server::Impl::Register(const std::shared_ptr<Session>& s, const std::string& addr,
                            std::string* why) {
  MutexLock lock(mu);
  sessions[s.get()] = s;
  size_t& mine = per_client[addr];
  ++open;
  ++mine;
  if (open > o.max_connections) {
    *why = std::to_string(o.max_connections) + " connections open (--max-connections)";
    return false;
  }
  if (mine > o.max_connections_per_client) {
    *why = std::to_string(o.max_connections_per_client) +
           " connections open from this address (--max-connections-per-client)";
    return false;
  }
  return true;
}

void Server::Impl::Unregister(Session* s, const std::string& addr) {
  MutexLock lock(mu);
  sessions.erase(s);
  --open;
  auto it = per_client.find(addr);
  if (it != per_client.end() && --it->second == 0) per_client.erase(it);
  cv.notify_all();
}

// An accept's completion is queued behind every other ready handler of the I/O threads, so one
// accept per completion took 2,000 connections arriving at once under load seconds to take in
// (their first requests waited in the backlog). Each completion therefore also takes whatever
// else is waiting, up to kAcceptBurst, with non-blocking accepts, before it waits again.
void Server::Impl::Accept(Acceptor* a) {
  a->acceptor.async_accept(asio::make_strand(*ioc),
                           [this, a](beast::error_code ec, tcp::socket socket) {
                             if (ec == asio::error::operation_aborted || !a->acceptor.is_open())
                               return;
                             if (ec) {
                               // Out of descriptors (or another transient failure): back off
                               // instead of spinning.
                               a->retry.expires_after(std::chrono::milliseconds(50));
                               a->retry.async_wait([this, a](beast::error_code) {
                                 if (a->acceptor.is_open()) Accept(a);
                               });
                               return;
                             }
                             Admit(a, std::move(socket));
                             constexpr int kAcceptBurst = 256;
                             for (int i = 0; i < kAcceptBurst; ++i) {
                               tcp::socket more(asio::make_strand(*ioc));
                               // would_block ends the burst; any other error is met again by the
                               // async_accept below.
                               if (a->acceptor.accept(more, ec)) break;
                               Admit(a, std::move(more));
                             }
                             Accept(a);
                           });
}

void Server::Impl::Admit(Acceptor* a, tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto peer = socket.remote_endpoint(ignored);
  std::string addr = ignored ? std::string("?") : peer.address().to_string();
  auto session =
      std::make_shared<Session>(this, std::move(socket), a->kind, addr, ignored ? 0 : peer.port());
  std::string why;
  if (Register(session, addr, &why)) {
    server.metrics().Add("bdn_http_connections_accepted_total", {}, 1);
    session->Start();
  } else {
    server.metrics().Add("bdn_http_connections_refused_total", {}, 1);
    session->Reject(why);
  }
}

// ---- Server ----

Server::Server(ServerOptions options) : options_(std::move(options)) {
  impl_ = std::make_unique<Impl>(*this, options_);
  metrics_.Declare("bdn_http_requests_total", Metrics::Type::kCounter,
                   "HTTP requests by method, route and status.");
  metrics_.Declare("bdn_http_request_duration_seconds", Metrics::Type::kHistogram,
                   "Time to handle a request, by route (streamed bodies excluded).",
                   kDurationBuckets);
  metrics_.Declare("bdn_http_errors_total", Metrics::Type::kCounter,
                   "Error responses by route and error code.");
  metrics_.Declare("bdn_http_request_bytes_total", Metrics::Type::kCounter,
                   "ServerRequest body bytes received, by route.");
  metrics_.Declare("bdn_http_request_body_reads_total", Metrics::Type::kCounter,
                   "Reads that received request body bytes, by route (bytes / reads is the "
                   "average read).");
  metrics_.Declare("bdn_http_response_bytes_total", Metrics::Type::kCounter,
                   "ServerResponse body bytes sent, by route.");
  metrics_.Declare("bdn_http_inline_requests_total", Metrics::Type::kCounter,
                   "Requests answered on an I/O thread without a worker (a chunk in the page "
                   "cache), by route.");
  metrics_.Declare("bdn_http_connections", Metrics::Type::kGauge, "Open connections.");
  metrics_.Declare("bdn_http_connections_accepted_total", Metrics::Type::kCounter,
                   "Connections accepted.");
  metrics_.Declare("bdn_http_connections_refused_total", Metrics::Type::kCounter,
                   "Connections refused with 503 over --max-connections or "
                   "--max-connections-per-client.");
  metrics_.Add("bdn_http_connections_accepted_total", {}, 0);
  metrics_.Add("bdn_http_connections_refused_total", {}, 0);
  metrics_.OnScrape([impl = impl_.get()](Metrics& m) {
    size_t open;
    {
      MutexLock lock(impl->mu);
      open = impl->open;
    }
    m.Set("bdn_http_connections", {}, static_cast<double>(open));
  });

  Get("/healthz", "/healthz",
      [](const ServerRequest&, ServerResponse& res) { res.set_content("ok\n", "text/plain"); });
  impl_->routes.back().on_io_thread = true;
  Get("/metrics", "/metrics", [this](const ServerRequest&, ServerResponse& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
  });
  impl_->routes.back().metrics_endpoint = true;
}

Server::~Server() { Stop(); }

void Server::Add(std::string method, const std::string& pattern, std::string route, Handler handler,
                 RouteOptions options) {
  RouteEntry e;
  e.method = std::move(method);
  e.pattern = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  e.prefix = LiteralPrefix(pattern);
  e.name = std::move(route);
  e.handler = std::move(handler);
  e.options = std::move(options);
  impl_->routes.push_back(std::move(e));
}

void Server::Get(const std::string& pattern, std::string route, Handler handler,
                 RouteOptions options) {
  Add("GET", pattern, std::move(route), std::move(handler), std::move(options));
}
void Server::Post(const std::string& pattern, std::string route, Handler handler,
                  RouteOptions options) {
  Add("POST", pattern, std::move(route), std::move(handler), std::move(options));
}
void Server::Put(const std::string& pattern, std::string route, Handler handler,
                 RouteOptions options) {
  Add("PUT", pattern, std::move(route), std::move(handler), std::move(options));
}
void Server::Delete(const std::string& pattern, std::string route, Handler handler,
                    RouteOptions options) {
  Add("DELETE", pattern, std::move(route), std::move(handler), std::move(options));
}

namespace {

// Binds a listening socket on `text` (HOST:PORT). Errors as Server::Start.
Result<std::unique_ptr<Server::Impl::Acceptor>> BindAcceptor(asio::io_context& ioc,
                                                             const std::string& text, Listener kind,
                                                             ListenAddress* bound) {
  BDN_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(text));
  auto fail = [&](const beast::error_code& ec) {
    return Err(UnavailableError("listen " + text + ": cannot bind: " + ec.message()));
  };
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(addr.host, std::to_string(addr.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return fail(ec);
  if (endpoints.empty()) return fail(asio::error::host_not_found);
  tcp::endpoint ep = endpoints.begin()->endpoint();
  auto a = std::unique_ptr<Server::Impl::Acceptor>(
      new Server::Impl::Acceptor{tcp::acceptor(ioc), kind, asio::steady_timer(ioc)});
  a->acceptor.open(ep.protocol(), ec);
  if (ec) return fail(ec);
  // SO_REUSEADDR only (never SO_REUSEPORT, which would let a second server share the port).
  a->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  a->acceptor.bind(ep, ec);
  if (ec) return fail(ec);
  a->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec);
  // Accept's synchronous accepts answer would_block instead of waiting.
  a->acceptor.non_blocking(true, ec);
  if (ec) return fail(ec);
  bound->host = addr.host;
  bound->port = a->acceptor.local_endpoint().port();
  return a;
}

std::string UrlOf(const ListenAddress& a) {
  std::string h = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  return "http://" + h + ":" + std::to_string(a.port);
}

// One per core, at most 4: with one I/O thread on a 2-core machine the p99 of chunk GETs at
// 2,000 connections was 4.5-6x its value at 16 at the same offered load, with two 2.2x
// (docs/benchmarks.md, "HTTP server under load"). Past 4 the worker pool does the heavy work.
int DefaultIoThreads() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores, 1, 4);
}

}  // namespace

Status Server::Bind() {
  if (started_ || bound_) return FailedPreconditionError("server: already started");
  impl_->ioc = std::make_unique<asio::io_context>();
  ListenAddress bound;
  BDN_ASSIGN_OR_RETURN(auto main,
                       BindAcceptor(*impl_->ioc, options_.listen, Listener::kMain, &bound));
  std::unique_ptr<Impl::Acceptor> metrics;
  ListenAddress metrics_bound;
  if (!options_.metrics_listen.empty()) {
    BDN_ASSIGN_OR_RETURN(metrics, BindAcceptor(*impl_->ioc, options_.metrics_listen,
                                               Listener::kMetrics, &metrics_bound));
  }
  host_ = bound.host;
  port_ = bound.port;
  metrics_url_ = metrics ? UrlOf(metrics_bound) : std::string();
  impl_->acceptors.push_back(std::move(main));
  if (metrics) impl_->acceptors.push_back(std::move(metrics));
  bound_ = true;
  return Status::Ok();
}

Status Server::Start() {
  if (started_) return FailedPreconditionError("server: already started");
  if (!bound_) BDN_RETURN_IF_ERROR(Bind());
  {
    MutexLock lock(impl_->mu);
    impl_->stopping = false;
  }
  int threads = std::max(1, options_.threads);
  // Each connection has at most one task queued, so this bound is never reached: Submit, called
  // on I/O threads, must not block.
  impl_->pool = std::make_unique<ThreadPool>(threads, options_.max_connections * 2 + 1024);
  for (auto& a : impl_->acceptors) impl_->Accept(a.get());
  impl_->work.emplace(impl_->ioc->get_executor());
  int io = options_.io_threads > 0 ? options_.io_threads : DefaultIoThreads();
  for (int i = 0; i < io; ++i)
    impl_->io_threads.emplace_back([ioc = impl_->ioc.get()] { ioc->run(); });
  started_ = true;
  return Status::Ok();
}

void Server::Stop(const std::function<void()>& grace_over) {
  if (bound_ && !started_) {  // bound, never served: no thread to stop, just close the sockets
    impl_->acceptors.clear();
    impl_->ioc.reset();
    bound_ = false;
    return;
  }
  if (!started_) return;
  Impl& m = *impl_;
  asio::post(*m.ioc, [&m] {
    for (auto& a : m.acceptors) {
      beast::error_code ec;
      a->acceptor.close(ec);
      a->retry.cancel();
    }
  });
  auto for_each_session = [&m](auto fn) {
    std::vector<std::shared_ptr<Session>> live;
    {
      MutexLock lock(m.mu);
      m.stopping = true;
      for (auto& [p, w] : m.sessions) {
        if (auto s = w.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) fn(*s);
  };
  for_each_session([](Session& s) { s.OnStop(); });
  {
    MutexLock lock(m.mu);
    m.cv.wait_for(lock.native(), kStopGrace, [&m] { return m.open == 0; });
  }
  if (grace_over) grace_over();
  for_each_session([](Session& s) { s.ForceClose(); });
  {
    MutexLock lock(m.mu);
    m.cv.wait_for(lock.native(), std::chrono::seconds(1), [&m] { return m.open == 0; });
  }
  m.work.reset();
  m.ioc->stop();
  for (auto& t : m.io_threads) t.join();
  m.io_threads.clear();
  m.pool.reset();  // finishes tasks still queued; what they post stays queued
  m.acceptors.clear();
  m.ioc.reset();  // destroys queued handlers, and with them the last sessions
  started_ = false;
  bound_ = false;
}

std::string Server::url() const { return UrlOf({host_, port_}); }

}  // namespace bdn::http
