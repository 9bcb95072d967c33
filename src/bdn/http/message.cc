// ServerRequest/ServerResponse accessors, listen-address and Range parsing, JSON error bodies.
#include "bdn/http/message.h"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

namespace bdn::http {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

template <typename Map>
std::string FirstValue(const Map& m, std::string_view name, const char* def) {
  auto it = m.find(name);
  return it == m.end() ? std::string(def) : it->second;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return Lower(x) < Lower(y); });
}

bool ServerRequest::has_header(std::string_view name) const { return headers.contains(name); }
std::string ServerRequest::get_header_value(std::string_view name, const char* def) const {
  return FirstValue(headers, name, def);
}
bool ServerRequest::has_param(std::string_view name) const { return params.contains(name); }
std::string ServerRequest::get_param_value(std::string_view name) const {
  return FirstValue(params, name, "");
}

bool DataSink::write(const char* data, size_t n) {
  if (pieces_.empty() || !pieces_.back().owned.empty()) pieces_.emplace_back();
  pieces_.back().copied.append(data, n);
  return true;
}

bool DataSink::write(std::vector<uint8_t>&& bytes) {
  if (bytes.empty()) return true;
  pieces_.push_back(Piece{{}, std::move(bytes)});
  return true;
}

bool ServerResponse::has_header(std::string_view name) const { return headers.contains(name); }
std::string ServerResponse::get_header_value(std::string_view name, const char* def) const {
  return FirstValue(headers, name, def);
}
void ServerResponse::set_header(std::string_view name, std::string value) {
  headers.emplace(std::string(name), std::move(value));
}
void ServerResponse::set_content(const char* data, size_t n, std::string_view content_type) {
  set_content(std::string(data, n), content_type);
}
void ServerResponse::set_content(std::string b, std::string_view content_type) {
  body = std::move(b);
  provider = nullptr;
  headers.erase("Content-Type");
  set_header("Content-Type", std::string(content_type));
}
void ServerResponse::set_chunked_content_provider(std::string_view content_type,
                                                  ContentProvider p) {
  body.clear();
  provider = std::move(p);
  headers.erase("Content-Type");
  set_header("Content-Type", std::string(content_type));
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Err(
        InvalidArgumentError("listen address \"" + std::string(text) + "\": " + std::string(why)));
  };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("expected HOST:PORT");
  std::string_view host = text.substr(0, colon);
  std::string_view port_text = text.substr(colon + 1);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.find_first_of("[]") != std::string_view::npos) {
    return bad("brackets enclose a whole IPv6 host, e.g. [::1]:8440");
  }
  if (bracketed && host.empty()) return bad("empty host in brackets");
  if (!bracketed && host.find(':') != std::string_view::npos) {
    return bad("an IPv6 host must be in brackets, e.g. [::1]:8440");
  }
  auto port = ParseU64(port_text);
  if (!port || *port > 65535) return bad("port must be a number from 0 to 65535");
  ListenAddress out;
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = static_cast<int>(*port);
  return out;
}

Result<std::optional<ByteRange>> ParseRange(std::string_view value, uint64_t size_bytes) {
  const std::optional<ByteRange> ignore;
  size_t eq = value.find('=');
  if (eq == std::string_view::npos) return ignore;  // not a ranges-specifier
  std::string_view unit = value.substr(0, eq);
  constexpr std::string_view kBytes = "bytes";
  if (unit.size() != kBytes.size() || !std::equal(unit.begin(), unit.end(), kBytes.begin(),
                                                  [](char a, char b) { return Lower(a) == b; })) {
    return ignore;  // another unit
  }
  auto digits = [](std::string_view t) {
    return !t.empty() &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  auto trim = [](std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return t;
  };
  // A number of any length: past 2^64-1 it is clamped there (only a position past any size).
  auto number = [](std::string_view t) { return ParseU64(t).value_or(UINT64_MAX); };
  // range-set = 1#range-spec (RFC 9110 §14.1.1; a #list may hold empty elements). Each spec is
  // resolved against the size: a range, or nullopt when unsatisfiable.
  std::vector<std::optional<ByteRange>> specs;
  std::string_view rest = value.substr(eq + 1);
  while (true) {
    size_t comma = rest.find(',');
    std::string_view spec = trim(rest.substr(0, comma));
    if (!spec.empty()) {
      size_t dash = spec.find('-');
      if (dash == std::string_view::npos) return ignore;
      std::string_view first_text = spec.substr(0, dash);
      std::string_view last_text = spec.substr(dash + 1);
      if (first_text.empty()) {  // suffix-range: the last n bytes
        if (!digits(last_text)) return ignore;
        uint64_t n = number(last_text);
        if (n == 0 || size_bytes == 0) {
          specs.emplace_back();
        } else {
          uint64_t len = std::min(n, size_bytes);
          specs.emplace_back(ByteRange{size_bytes - len, len});
        }
      } else {
        if (!digits(first_text) || (!last_text.empty() && !digits(last_text))) return ignore;
        uint64_t first = number(first_text);
        uint64_t last = last_text.empty() ? UINT64_MAX : number(last_text);
        if (last < first) return ignore;  // an invalid range-spec
        if (first >= size_bytes) {
          specs.emplace_back();
        } else {
          last = std::min(last, size_bytes - 1);
          specs.emplace_back(ByteRange{first, last - first + 1});
        }
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (specs.empty()) return ignore;
  const bool any_satisfiable =
      std::any_of(specs.begin(), specs.end(), [](const auto& r) { return r.has_value(); });
  if (!any_satisfiable) {
    return Err(InvalidArgumentError("range \"" + std::string(value) +
                                    "\": not satisfiable for size " + std::to_string(size_bytes)));
  }
  // Several ranges (a multipart answer) are ignored, as RFC 9110 §14.2 lets a server do.
  if (specs.size() > 1) return ignore;
  return specs.front();
}

bool IfRangeAllows(const ServerRequest& req, std::string_view etag) {
  return !req.has_header("If-Range") || req.get_header_value("If-Range") == etag;
}

void SetError(ServerResponse& res, const Status& s, int http_status) {
  res.status = http_status;
  res.set_content(
      ErrorBody(s, http_status == 401 ? Credentials::kRejected : Credentials::kAccepted),
      "application/json");
  if (http_status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"bdn\"");
}

void SetError(ServerResponse& res, const Status& s, Credentials credentials) {
  SetError(res, s, HttpStatusFor(s, credentials));
}

void SetJson(ServerResponse& res, std::string json, int http_status) {
  res.status = http_status;
  res.set_content(std::move(json), "application/json");
}

}  // namespace bdn::http
