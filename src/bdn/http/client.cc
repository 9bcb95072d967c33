#include "bdn/http/client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "bdn/base/units.h"  // FormatBytes
#include "bdn/http/errors.h"

namespace bdn::http {
namespace {

std::once_flag curl_init_once;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Where libcurl's callbacks put the response. The callbacks never throw (libcurl is C): a
// failure makes them return 0, which aborts the transfer with CURLE_WRITE_ERROR.
struct Sink {
  Response* response;
  uint64_t max_body_bytes;
  const std::function<bool(std::span<const uint8_t>)>* on_body = nullptr;
  CURL* handle = nullptr;
  const std::function<bool(int, const std::vector<std::pair<std::string, std::string>>&)>*
      on_headers = nullptr;
  bool too_large = false;
  bool refused = false;
  bool refused_headers = false;
  bool head = false;  // a HEAD request: Content-Length describes a body that never comes
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  auto* r = sink->response;
  if (sink->on_body != nullptr && *sink->on_body) {
    long code = 0;
    curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
      try {
        if ((*sink->on_body)({reinterpret_cast<const uint8_t*>(data), size * n})) return size * n;
      } catch (...) {
      }
      sink->refused = true;
      return 0;
    }
  }
  if (r->body.size() + size * n > sink->max_body_bytes) {
    sink->too_large = true;
    return 0;
  }
  try {
    r->body.insert(r->body.end(), reinterpret_cast<uint8_t*>(data),
                   reinterpret_cast<uint8_t*>(data) + size * n);
  } catch (...) {
    return 0;
  }
  return size * n;
}

// What a request's progress callback checks: the client's Shutdown, the request's own
// should_abort, and, with `stall`, whether no byte has moved for that long, and with `min_rate`
// (bytes per second, above 1) whether the answer moved, but fewer than min_rate x stall bytes
// moved in a window of `stall` (consecutive windows, so a drip is noticed between stall and
// twice it). libcurl's
// low-speed limit noticed a stall only once its speed, an average over ~5 s, fell (from an
// attacker: a 1 s stall of a cache node was noticed after 7 s, past the read's deadline): the
// byte counts are compared here on each call, about once a second while nothing moves.
struct AbortCheck {
  const std::atomic<bool>* shut_down;
  const std::function<bool()>* should_abort;  // may hold no function
  std::optional<std::chrono::milliseconds> stall;
  uint64_t min_rate = 1;
  curl_off_t moved = -1;  // download and upload bytes at the last call
  std::chrono::steady_clock::time_point moved_at = std::chrono::steady_clock::now();
  curl_off_t window_bytes = 0;       // bytes moved when the current window began, and when it began
  curl_off_t window_downloaded = 0;  // of them, the answer's
  std::chrono::steady_clock::time_point window_at = std::chrono::steady_clock::now();
  bool stalled = false;   // aborted for the stall
  bool too_slow = false;  // and bytes moved, below min_rate
};

int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* check = static_cast<AbortCheck*>(user);
  if (check->shut_down->load(std::memory_order_relaxed)) return 1;
  if (check->stall) {
    const auto now = std::chrono::steady_clock::now();
    const curl_off_t moved = dlnow + ulnow;
    if (check->min_rate > 1 && now - check->window_at >= *check->stall) {
      const double want = static_cast<double>(check->min_rate) *
                          std::chrono::duration<double>(*check->stall).count();
      // Only an answer that moves counts as a drip: a request sent and not yet answered waits.
      if (dlnow > check->window_downloaded &&
          static_cast<double>(moved - check->window_bytes) < want) {
        check->stalled = true;
        check->too_slow = true;
        return 1;
      }
      check->window_bytes = moved;
      check->window_downloaded = dlnow;
      check->window_at = now;
    }
    if (moved != check->moved) {
      check->moved = moved;
      check->moved_at = now;
    } else if (now - check->moved_at >= *check->stall) {
      check->stalled = true;
      return 1;
    }
  }
  if (!*check->should_abort) return 0;
  try {
    return (*check->should_abort)() ? 1 : 0;
  } catch (...) {
    return 1;
  }
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) try {
  auto* sink = static_cast<Sink*>(user);
  auto* r = sink->response;
  std::string_view line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) {  // the end of a header block: the final one unless its status is 1xx
    long code = 0;
    curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && sink->on_headers != nullptr && *sink->on_headers &&
        !(*sink->on_headers)(static_cast<int>(code), r->headers)) {
      sink->refused = true;
      sink->refused_headers = true;
      return 0;
    }
    return size * n;
  }
  if (line.starts_with("HTTP/")) {
    r->headers.clear();  // a new (final or interim) response starts
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  std::string name = Lower(line.substr(0, colon));
  long code = 0;
  curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &code);
  const bool streamed = sink->on_body != nullptr && *sink->on_body && code >= 200 && code < 300;
  if (name == "content-length" && !streamed && !sink->head) {
    // Reserve up front so a large blob is not copied while it grows.
    uint64_t len = std::strtoull(std::string(value).c_str(), nullptr, 10);
    if (len > sink->max_body_bytes) {
      sink->too_large = true;
      return 0;
    }
    r->body.reserve(static_cast<size_t>(len));
  }
  r->headers.emplace_back(std::move(name), std::string(value));
  return size * n;
} catch (...) {
  return 0;
}

// What the opening of sockets saw under PeerAddresses::kPublicOnly: the first address refused.
struct PeerCheck {
  std::string refused;  // numeric address, "" while none was refused
  std::string_view kind;
};

// CURLOPT_OPENSOCKETFUNCTION under PeerAddresses::kPublicOnly: opens the socket only for a public
// address; CURL_SOCKET_BAD for another makes libcurl try the name's next address or fail the
// connect (CURLE_COULDNT_CONNECT).
curl_socket_t OpenPublicSocket(void* user, curlsocktype, curl_sockaddr* a) {
  auto* check = static_cast<PeerCheck*>(user);
  if (auto kind = NonPublicKind(&a->addr)) {
    if (check->refused.empty()) {
      check->refused = AddressText(&a->addr);
      check->kind = *kind;
    }
    return CURL_SOCKET_BAD;
  }
  return ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

// $SSL_CERT_FILE, read once: the CA bundle that replaces libcurl's built-in one (a private CA, a
// test's self-signed certificate); "" for the built-in one.
const std::string& CaFile() {
  static const std::string file = [] {
    const char* f = std::getenv("SSL_CERT_FILE");
    return std::string(f != nullptr ? f : "");
  }();
  return file;
}

// How messages show the request's path: without its query when that holds a credential.
std::string ShownPath(const Request& req) {
  return req.secret_query ? req.path.substr(0, req.path.find('?')) : WithoutSecretParams(req.path);
}

// Whether `host` is a host a URL may name: an IPv6 address in brackets (inet_pton), with an
// optional zone ("[fe80::1%25eth0]", RFC 6874), or a name or IPv4 address: letters, digits, "-",
// ".", "_" and "~" (RFC 3986's unreserved characters; percent-encoding and non-ASCII names are
// refused, as libcurl would send them as they are).
bool IsHost(std::string_view host) {
  if (host.empty()) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    std::string_view inner = host.substr(1, host.size() - 2);
    if (const size_t zone = inner.find("%25"); zone != std::string_view::npos) {
      const std::string_view id = inner.substr(zone + 3);
      if (id.empty() || !std::ranges::all_of(id, [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
                   c == '_' || c == '~';
          })) {
        return false;
      }
      inner = inner.substr(0, zone);
    }
    in6_addr addr{};
    return ::inet_pton(AF_INET6, std::string(inner).c_str(), &addr) == 1;
  }
  return std::ranges::all_of(host, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
           c == '~';
  });
}

// How a stall message names the request's floor: "no bytes", or "slower than 16.00 KiB/s".
std::string StallRate(const Request& req) {
  return req.stall_bytes_per_second <= 1
             ? std::string("no bytes")
             : "slower than " + FormatBytes(req.stall_bytes_per_second) + "/s";
}

// The Status of a libcurl failure, named by the server and (for deadlines) the request.
Status TransportError(const std::string& who, const Request& req, CURL* h, CURLcode rc,
                      const char* errbuf, std::chrono::milliseconds connect_timeout,
                      std::chrono::milliseconds deadline) {
  long os_errno = 0;
  curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
  curl_off_t connected_us = 0;
  curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connected_us);
  std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
      if (os_errno == ECONNREFUSED) return UnavailableError(who + ": connection refused");
      if (os_errno != 0)
        return UnavailableError(who +
                                ": cannot connect: " + std::strerror(static_cast<int>(os_errno)));
      return UnavailableError(who + ": cannot connect: " + detail);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return UnavailableError(who + ": cannot resolve host");
    case CURLE_OPERATION_TIMEDOUT: {
      // A reused connection has no connect time either: only a transfer that never got as far
      // as sending (no pre-transfer time) timed out connecting.
      curl_off_t pretransfer_us = 0;
      curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
      if (connected_us == 0 && pretransfer_us == 0) {
        return UnavailableError(who + ": connect timed out after " +
                                std::to_string(connect_timeout.count()) + " ms");
      }
      // The request's deadline (CURLOPT_TIMEOUT_MS): the stall checks are the client's own
      // (OnProgress, CURLE_ABORTED_BY_CALLBACK). From an attacker: a deadline that curl ended a
      // millisecond early was reported as "stalled: slower than 1.00 KiB/s", so a node sending
      // at 4 KiB/s was judged a drip. An answer that began but did not end says so.
      long status = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      return DeadlineExceededError(
          who + ": " + std::string(MethodName(req.method)) + " " + ShownPath(req) +
          (status > 0 ? ": answer not complete within " : ": no response within ") +
          std::to_string(deadline.count()) + " ms");
    }
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return UnavailableError(who + ": " + std::string(MethodName(req.method)) + " " +
                              ShownPath(req) + ": " + detail);
    default:
      return InternalError(who + ": " + std::string(MethodName(req.method)) + " " + ShownPath(req) +
                           ": " + detail);
  }
}

}  // namespace

std::optional<AuthorityParts> SplitAuthority(std::string_view authority) {
  AuthorityParts parts{authority, std::nullopt};
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    parts.host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      parts.port = authority.substr(close + 2);
    }
  } else if (const size_t colon = authority.find(':'); colon != std::string_view::npos) {
    parts.host = authority.substr(0, colon);
    parts.port = authority.substr(colon + 1);
  }
  return parts;
}

std::optional<int> ParsePort(std::string_view port) {
  // Digits only: from_chars alone takes no "+" or space, but say so where it is decided.
  if (port.empty() || !std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  // Leading zeros are RFC 3986's digits too ("041517"; from attacking helper 127).
  port.remove_prefix(std::min(port.find_first_not_of('0'), port.size()));
  if (port.empty() || port.size() > 5) return std::nullopt;
  int n = 0;
  std::from_chars(port.data(), port.data() + port.size(), n);
  if (n < 1 || n > 65535) return std::nullopt;
  return n;
}

bool IsAuthority(std::string_view authority) {
  const auto parts = SplitAuthority(authority);
  if (!parts || (parts->port && !ParsePort(*parts->port))) return false;
  return IsHost(parts->host) && parts->host.size() <= 253;
}

std::string ShownUrl(std::string_view url, size_t max_bytes) {
  std::string out(url);
  // Everything before the last "@" may be credentials, the path included where a password holds
  // a "/" ("http://u:pa/ss@h"), and so may all before it where the URL has no "://" ("u:p@h",
  // "http:/u:p@h", "//u:p@h"). From an attacker: those were shown whole.
  // (The last "@" of all: a password may hold a "?" too.)
  const size_t at = out.rfind('@');
  if (at != std::string::npos) {
    const size_t scheme = out.find("://");
    const size_t start = scheme != std::string::npos && scheme < at ? scheme + 3 : 0;
    if (at > start) out.replace(start, at - start, "***");
  }
  // A query or fragment may hold a credential too (a presigned signature, "?token=").
  if (const size_t q = out.find_first_of("?#"); q != std::string::npos) {
    out = out.substr(0, q + 1) + "***";
  }
  // So may what stands where a port goes, unless it is one (from attacking helpers 123 and 124:
  // "http://h:SECRET#x" and "http://u:SECRET:8080", a user and password without "@", were
  // quoted whole), a host that holds a "%" ("u%3ASECRET%40h"), and all after "scheme:" where "//"
  // is missing ("http:/u:SECRET") or the host is ("http:///u:SECRET").
  auto digits = [](std::string_view t) {
    return std::ranges::all_of(t, [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t shown_end = std::min(out.find_first_of("?#"), out.size());
  const size_t masked = out.rfind("***@", shown_end);
  // A scheme is a letter, then letters, digits, "+", "-" and "." (RFC 3986): a "://" after anything
  // else is in a path (from attacking helper 125: "u:SECRET/a://b" was quoted whole).
  size_t scheme = out.find("://");
  if (scheme != std::string::npos &&
      (scheme == 0 || !std::isalpha(static_cast<unsigned char>(out[0])) ||
       !std::all_of(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(scheme), [](char c) {
         return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
       }))) {
    scheme = std::string::npos;
  }
  if (masked == std::string::npos && scheme == std::string::npos && !out.starts_with('[')) {
    // No authority to find: "host:port[/path]" shows, anything else after the first ":" does not.
    const size_t colon = out.find(':');
    if (out.find('%') < shown_end) {
      out.replace(0, shown_end, "***");
    } else if (colon != std::string::npos && colon < shown_end) {
      const size_t path = std::min(out.find('/', colon), shown_end);
      const std::string_view port = std::string_view(out).substr(colon + 1, path - colon - 1);
      if (port.empty() || !digits(port)) out.replace(colon + 1, shown_end - colon - 1, "***");
    }
  } else {
    const size_t start = masked != std::string::npos   ? masked + 4
                         : scheme != std::string::npos ? scheme + 3
                                                       : 0;
    const size_t end = std::min(out.find_first_of("/?#", start), out.size());
    const std::string_view authority = std::string_view(out).substr(start, end - start);
    // (A "%" in an IPv6 address is its zone: "[fe80::1%25eth0]".)
    if (authority.empty()
            ? out.find(':', start) < shown_end
            : authority.front() != '[' && authority.find('%') != std::string_view::npos) {
      out.replace(start, shown_end - start, "***");
    } else if (authority.front() == '[') {
      // "[v6]" then ":port" or nothing.
      const size_t close = authority.find(']');
      if (close == std::string_view::npos) {
        // No "]": nothing tells the address from a password (from attacking helper 125:
        // "http://[u:SECRET" was quoted whole).
        if (authority.size() > 1) out.replace(start + 1, authority.size() - 1, "***");
      } else if (close + 1 < authority.size() &&
                 (authority[close + 1] != ':' || !digits(authority.substr(close + 2)))) {
        out.replace(start + close + 1, authority.size() - close - 1, ":***");
      }
    } else if (const size_t colon = authority.find(':');
               colon != std::string_view::npos && !digits(authority.substr(colon + 1))) {
      out.replace(start + colon + 1, authority.size() - colon - 1, "***");
    }
  }
  if (out.size() > max_bytes) out = out.substr(0, max_bytes) + "...";
  return out;
}

std::string WithoutSecretParams(std::string_view target) {
  const size_t hash = target.find('#');
  const std::string_view before = target.substr(0, hash);
  const size_t q = before.find('?');
  std::string out(before.substr(0, q == std::string_view::npos ? before.size() : q + 1));
  if (q != std::string_view::npos) {
    std::string_view query = before.substr(q + 1);
    bool first = true;
    while (true) {
      const size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      const size_t eq = param.find('=');
      std::string name = Lower(param.substr(0, eq));
      const bool secret = std::ranges::any_of(
          std::initializer_list<std::string_view>{"sig", "token", "key", "secret", "credential",
                                                  "password", "auth", "policy"},
          [&](std::string_view mark) { return name.find(mark) != std::string::npos; });
      if (!first) out += '&';
      first = false;
      out += secret && eq != std::string_view::npos ? std::string(param.substr(0, eq + 1)) + "***"
                                                    : std::string(param);
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  if (hash != std::string_view::npos) out += "#***";
  return out;
}

bool IsTooSlow(const Status& s) {
  return s.code() == StatusCode::kDeadlineExceeded &&
         s.message().find(": stalled: slower than ") != std::string::npos;
}

bool FailedBeforeSending(const Status& s) {
  if (s.code() != StatusCode::kUnavailable) return false;
  const std::string& m = s.message();
  // The messages TransportError gives the connect phase's failures (they name no request).
  for (std::string_view phase : {": connection refused", ": cannot connect",
                                 ": cannot resolve host", ": connect timed out after "}) {
    if (m.find(phase) != std::string::npos) return true;
  }
  return false;
}

std::string_view MethodName(Method m) {
  switch (m) {
    case Method::kGet:
      return "GET";
    case Method::kPut:
      return "PUT";
    case Method::kPost:
      return "POST";
    case Method::kDelete:
      return "DELETE";
    case Method::kHead:
      return "HEAD";
  }
  return "GET";
}

std::optional<std::string_view> Response::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

Status CheckBearerToken(std::string_view token) {
  auto plain = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
  };
  const size_t end = token.find_last_not_of('=') == std::string_view::npos
                         ? 0
                         : token.find_last_not_of('=') + 1;  // where the trailing ='s start
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (plain(c) || (c == '=' && i >= end)) continue;
    const char* what = c == '\n' || c == '\r'  ? "a line break"
                       : c == ' '              ? "a space"
                       : c == '\t'             ? "a tab"
                       : c < 0x20 || c == 0x7f ? "a control character"
                       : c >= 0x80             ? "a byte outside ASCII"
                       : c == '='              ? "an = before the end"
                                               : "a character";
    return InvalidArgumentError("byte " + std::to_string(i + 1) + " of " +
                                std::to_string(token.size()) + " is " + what +
                                ", which a bearer token cannot hold (RFC 6750: letters, digits, "
                                "- . _ ~ + / and = at the end)");
  }
  return Status::Ok();
}

Result<std::unique_ptr<HttpClient>> HttpClient::Create(ClientOptions options) {
  if (Status s = CheckBearerToken(options.token); !s.ok()) return Err(s.WithPrefix("token"));
  std::string& url = options.base_url;
  const std::string given = ShownUrl(url);  // messages quote what the user wrote, less secrets
  auto refuse = [&](const std::string& why) {
    return Err(InvalidArgumentError("url \"" + given + "\": " + why));
  };
  // A part of the URL quoted in a message: "***" where the URL holds an "@" anywhere (from an
  // attacker: "http://u:pa/ss@h" said `port "pa"`, a piece of the password).
  const bool has_at = url.find('@') != std::string::npos;
  auto part = [&](std::string_view p) { return has_at ? std::string("***") : ShownUrl(p); };
  size_t scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : Lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return refuse("must start with http:// or https://");
  // In lower case from here on (from an attacker: "HTTPS://node" passed as TLS to the check that a
  // TLS node lists no plain-HTTP peers, which compares the text, and the token went out in the
  // clear).
  url.replace(0, scheme_end, scheme);
  while (url.size() > scheme_end + 3 && url.back() == '/') url.pop_back();
  std::string_view rest = std::string_view(url).substr(scheme_end + 3);
  if (rest.empty() || rest.front() == '/' || rest.front() == ':') return refuse("no host");
  if (rest.find_first_of("?# ") != std::string_view::npos ||
      rest.substr(0, rest.find('/')).find('@') != std::string_view::npos) {
    return refuse("must be scheme://host[:port][/prefix], without credentials, query or fragment");
  }
  // From an attacker: a tab in the path or a backslash in the host passed, and libcurl failed
  // every request ("URL using bad/illegal format").
  if (std::ranges::any_of(rest, [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\';
      })) {
    return refuse("holds a control character or a backslash");
  }
  // host[:port], host a name, an IPv4 address or a bracketed IPv6 one, and a port, where given,
  // 1 to 65535 (from attackers: ":0", ":99999", "h:1:2" and "[::1" were accepted, and every
  // request to them failed later).
  const std::string_view authority = rest.substr(0, rest.find('/'));
  const auto parts = SplitAuthority(authority);
  if (!parts || !IsHost(parts->host)) {
    return refuse("malformed host \"" + part(authority) + "\"");
  }
  if (parts->host.size() > 253) {
    return refuse("host of " + std::to_string(parts->host.size()) + " bytes, at most 253");
  }
  if (parts->port && !ParsePort(*parts->port)) {
    // A port that is no number is not quoted: it may be a password.
    const std::string_view port = *parts->port;
    const bool digits = std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; });
    return refuse("port \"" + (digits ? part(port) : std::string("***")) +
                  "\": must be 1 to 65535");
  }
  // One spelling per address, RFC 3986 §6.2.2.1 and §6.2.3: the host in lower case (an IPv6
  // zone, an interface name, as given) and a scheme's default port dropped, so that
  // "http://Node:80/" and "http://node" are one cache node to rendezvous hashing, to a --peers
  // list's check for twins and to GET /v1/chain's loop check.
  {
    const size_t host_at = scheme_end + 3;
    const size_t zone = parts->host.find("%25");
    const size_t host_len = zone == std::string_view::npos ? parts->host.size() : zone;
    const int port = parts->port ? ParsePort(*parts->port).value_or(0) : 0;  // checked above
    const bool default_port =
        (scheme == "http" && port == 80) || (scheme == "https" && port == 443);
    const size_t authority_len = authority.size();
    std::string normalized = Lower(std::string_view(url).substr(host_at, host_len)) +
                             std::string(parts->host.substr(host_len));
    if (parts->port && !default_port) normalized += ":" + std::to_string(port);
    url.replace(host_at, authority_len, normalized);
  }
  for (const auto& [name, value] : options.headers) {
    auto bad = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
    if (name.empty() || name.find_first_of(": ") != std::string::npos ||
        std::ranges::any_of(name, bad) || std::ranges::any_of(value, bad)) {
      return Err(InvalidArgumentError("header \"" + name +
                                      "\": a name must be a non-empty token, and neither it nor "
                                      "its value may hold control characters"));
    }
  }
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(options)));
}

HttpClient::HttpClient(ClientOptions options) : options_(std::move(options)), pid_(::getpid()) {}

HttpClient::~HttpClient() {
  // Handles of a parent process (after fork) are left alone: their sockets are the parent's.
  if (pid_ != ::getpid()) return;
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    MutexLock lock(mu_);
    if (pid_ != ::getpid()) {
      idle_.clear();  // inherited across fork: never used, never closed here
      pid_ = ::getpid();
    }
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::Release(void* h) {
  {
    MutexLock lock(mu_);
    if (pid_ == ::getpid() && idle_.size() < options_.max_idle_connections) {
      idle_.push_back(h);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(h));
}

void HttpClient::Shutdown() { shut_down_.store(true); }

Status HttpClient::ShuttingDown(const Request& req) const {
  return UnavailableError(Name() + ": " + std::string(MethodName(req.method)) + " " +
                          ShownPath(req) + ": shutting down")
      .WithReason(std::string(kShuttingDown));
}

Result<Response> HttpClient::Send(const Request& req) {
  if (shut_down_.load()) return Err(ShuttingDown(req));
  CURL* h = static_cast<CURL*>(Acquire());
  if (!h) return Err(InternalError(Name() + ": cannot create a libcurl handle"));
  // Reset clears the options of the previous request but keeps the connection open.
  curl_easy_reset(h);
  Response response;
  const uint64_t max_response_bytes = req.max_response_bytes.value_or(options_.max_response_bytes);
  Sink sink{&response, max_response_bytes, &req.on_body, h, &req.on_headers};
  sink.head = req.method == Method::kHead;
  char errbuf[CURL_ERROR_SIZE] = {0};
  const auto connect_timeout = req.connect_timeout.value_or(options_.connect_timeout);
  const auto deadline = req.deadline.value_or(options_.deadline);
  std::string url = options_.base_url + req.path;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(deadline.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "bdn/0.1");
  if (!CaFile().empty()) curl_easy_setopt(h, CURLOPT_CAINFO, CaFile().c_str());
  PeerCheck peer_check;
  if (options_.peers == PeerAddresses::kPublicOnly) {
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, OpenPublicSocket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &peer_check);
  }
  // Always: Shutdown ends requests in flight (libcurl calls it about once a second while it
  // waits, more often while bytes move).
  AbortCheck abort_check{.shut_down = &shut_down_, .should_abort = &req.should_abort};
  if (req.stall_timeout) {  // OnProgress
    abort_check.stall = req.stall_timeout;
    abort_check.min_rate = req.stall_bytes_per_second;
  }
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &abort_check);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  switch (req.method) {
    case Method::kGet:
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      break;
    case Method::kPost:
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      break;
    case Method::kPut:
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
      break;
    case Method::kDelete:
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
      break;
    case Method::kHead:
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
      break;
  }
  if (req.method == Method::kPost || req.method == Method::kPut || !req.body.empty()) {
    // POSTFIELDS sends the caller's buffer without copying it.
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     req.body.empty() ? "" : reinterpret_cast<const char*>(req.body.data()));
  }

  curl_slist* headers = nullptr;
  std::string auth;
  if (!options_.token.empty()) {
    auth = "Authorization: Bearer " + options_.token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  std::string content_type;
  if (!req.body.empty() || req.method == Method::kPost || req.method == Method::kPut) {
    content_type = "Content-Type: " + req.content_type;
    headers = curl_slist_append(headers, content_type.c_str());
  }
  if ((!req.body.empty() || req.method == Method::kPost || req.method == Method::kPut) &&
      !req.aws_sigv4) {
    // No 100-continue round trip. Not for a SigV4-signed request: libcurl 7.88 signs the empty
    // header it then leaves out, and S3 refuses the signature (such a request may wait for a
    // 100 Continue, one round trip per upload of megabytes).
    headers = curl_slist_append(headers, "Expect:");
  }
  std::vector<std::string> extra;
  extra.reserve(options_.headers.size() + req.headers.size());
  for (const auto& [k, v] : options_.headers) {
    extra.push_back(k + ": " + v);
    headers = curl_slist_append(headers, extra.back().c_str());
  }
  for (const auto& [k, v] : req.headers) {
    extra.push_back(k + ": " + v);
    headers = curl_slist_append(headers, extra.back().c_str());
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  if (req.aws_sigv4) {
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // the signed path is the one sent
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, req.aws_sigv4->provider.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, req.aws_sigv4->access_key_id.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, req.aws_sigv4->secret_access_key.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  // The slist and the token string must not outlive the request in the handle's options.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  std::fill(auth.begin(), auth.end(), '\0');
  if (rc != CURLE_OK && sink.too_large) {
    curl_easy_cleanup(h);
    return Err(InternalError(Name() + ": " + std::string(MethodName(req.method)) + " " +
                             ShownPath(req) + ": response larger than " +
                             std::to_string(max_response_bytes) + " bytes")
                   .WithReason(std::string(kResponseTooLarge)));
  }
  if (rc != CURLE_OK && sink.refused) {
    curl_easy_cleanup(h);
    return Err(
        InternalError(Name() + ": " + std::string(MethodName(req.method)) + " " + ShownPath(req) +
                      (sink.refused_headers ? ": response refused" : ": response body refused")));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK && shut_down_.load()) {
    curl_easy_cleanup(h);
    return Err(ShuttingDown(req));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK && abort_check.stalled) {
    curl_easy_cleanup(h);
    return Err(DeadlineExceededError(
        Name() + ": " + std::string(MethodName(req.method)) + " " + ShownPath(req) +
        ": stalled: " + (abort_check.too_slow ? StallRate(req) : std::string("no bytes")) +
        " for " + std::to_string(req.stall_timeout->count()) + " ms"));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    curl_easy_cleanup(h);
    return Err(InternalError(Name() + ": " + std::string(MethodName(req.method)) + " " +
                             ShownPath(req) + ": aborted"));
  }
  if (rc != CURLE_OK && !peer_check.refused.empty()) {
    curl_easy_cleanup(h);
    return Err(PermissionDeniedError(Name() + ": " + std::string(MethodName(req.method)) + " " +
                                     ShownPath(req) + ": connecting to " + peer_check.refused +
                                     " refused (" + std::string(peer_check.kind) +
                                     " address; only public addresses are allowed)")
                   .WithReason(std::string(kAddressNotAllowed)));
  }
  if (rc != CURLE_OK) {
    Status s = TransportError(Name(), req, h, rc, errbuf, connect_timeout, deadline);
    curl_easy_cleanup(h);  // the connection may be in any state: do not reuse it
    return Err(std::move(s));
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  response.status = static_cast<int>(code);
  // Drop this request's pointers (error buffer, sink, body) before the handle idles in the pool.
  curl_easy_reset(h);
  Release(h);
  return response;
}

Status HttpClient::ErrorOf(const Request& req, const Response& r) const {
  if (auto s = ParseErrorBody(r.text())) {
    if (options_.name_server_in_rejections && r.status == 401) {  // code "unauthenticated"
      Status named = s->WithPrefix(Name());
      if (!options_.token.empty()) return named;
      // A person without BDN_TOKEN reads "send Authorization: Bearer ..." as HTTP talk.
      return Status(named.code(), named.message() +
                                      "; no token was sent: set BDN_TOKEN to a key of this "
                                      "server (bdn key create makes one)")
          .WithReason(named.reason());
    }
    return std::move(*s);
  }
  // Not the API's error shape (a proxy's page, say): name the server and the request.
  return Status(StatusCodeForHttp(r.status), Name() + ": " + std::string(MethodName(req.method)) +
                                                 " " + ShownPath(req) + ": HTTP " +
                                                 std::to_string(r.status));
}

Result<Response> HttpClient::Call(const Request& req) {
  BDN_ASSIGN_OR_RETURN(Response r, Send(req));
  if (r.status >= 200 && r.status < 300) return r;
  return Err(ErrorOf(req, r));
}

Result<Response> HttpClient::Get(std::string path) {
  return Call({.method = Method::kGet, .path = std::move(path)});
}

Result<Response> HttpClient::Delete(std::string path) {
  return Call({.method = Method::kDelete, .path = std::move(path)});
}

Result<Response> HttpClient::PostJson(std::string path, std::string_view json) {
  return Call({.method = Method::kPost,
               .path = std::move(path),
               .body = {reinterpret_cast<const uint8_t*>(json.data()), json.size()}});
}

Result<Response> HttpClient::PutJson(std::string path, std::string_view json) {
  return Call({.method = Method::kPut,
               .path = std::move(path),
               .body = {reinterpret_cast<const uint8_t*>(json.data()), json.size()}});
}

}  // namespace bdn::http
