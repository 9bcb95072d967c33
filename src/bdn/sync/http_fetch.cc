#include "bdn/sync/http_fetch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>

#include "bdn/base/units.h"         // FormatBytes
#include "bdn/sync/https_source.h"  // NormalizeEtag
#include "bdn/sync/retry.h"

namespace bdn::sync {

static_assert(kAddressNotAllowed == http::kAddressNotAllowed);

namespace {

constexpr size_t kPipeBytes = 8 * 1024 * 1024;

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool Canceled(const SourceOptions& o) { return o.cancel != nullptr && o.cancel->load(); }

// "bytes a-b/total" → (a, total); nullopt if malformed.
std::optional<std::pair<uint64_t, uint64_t>> ParseContentRange(std::string_view v) {
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  size_t dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) {
    return std::nullopt;
  }
  auto first = ParseByteCount(v.substr(0, dash));
  auto total = ParseByteCount(v.substr(slash + 1));
  if (!first || !total) return std::nullopt;
  return std::make_pair(*first, *total);
}

}  // namespace

std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

Result<std::pair<std::string, std::string>> SplitUrl(const std::string& url) {
  size_t scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https") {
    return Err(
        InvalidArgumentError("url \"" + http::ShownUrl(url) + "\": must be http:// or https://"));
  }
  size_t path_start = url.find_first_of("/?#", scheme_end + 3);
  std::string origin = url.substr(0, path_start);
  if (origin.size() == scheme_end + 3)
    return Err(InvalidArgumentError("url \"" + http::ShownUrl(url) + "\": no host"));
  std::string rest = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (size_t hash = rest.find('#'); hash != std::string::npos) rest.erase(hash);
  if (rest.empty() || rest[0] != '/') rest.insert(0, "/");
  return std::make_pair(origin, rest);
}

std::string ResolveLocation(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos &&
      location.find("://") < location.find_first_of("/?#")) {
    return location;
  }
  auto split = SplitUrl(base);
  if (!split) return location;
  const auto& [origin, path] = *split;
  if (location.starts_with("//")) return origin.substr(0, origin.find("://") + 1) + location;
  if (location.starts_with("/")) return origin + location;
  std::string dir = path.substr(0, path.find('?'));
  dir = dir.substr(0, dir.rfind('/') + 1);
  return origin + dir + location;
}

std::optional<std::chrono::milliseconds> RetryAfterOf(const Headers& headers) {
  if (auto v = FindHeader(headers, "retry-after")) {
    if (auto n = ParseByteCount(*v)) return std::chrono::milliseconds(*n * 1000);
  }
  // The IETF draft RateLimit header, as the Hub sends it: "api";r=0;t=55.
  if (auto v = FindHeader(headers, "ratelimit")) {
    size_t t = v->find(";t=");
    if (t != std::string_view::npos) {
      std::string_view rest = v->substr(t + 3);
      size_t end = 0;
      while (end < rest.size() && rest[end] >= '0' && rest[end] <= '9') ++end;
      if (auto n = ParseByteCount(rest.substr(0, end))) {
        return std::chrono::milliseconds((*n + 1) * 1000);
      }
    }
  }
  return std::nullopt;
}

Status ClassifyHttpStatus(const std::string& source, const std::string& what,
                          const http::Response& r, bool sent_credentials, Attempt& a) {
  const std::string msg = source + ": " + what + ": HTTP " + std::to_string(r.status);
  switch (r.status) {
    case 401:
      if (sent_credentials) {
        return WithCode(PermissionDeniedError(msg + " (the credentials were refused)"),
                        kBadCredentials);
      }
      return WithCode(PermissionDeniedError(msg + " (credentials are needed)"), kAccessDenied);
    case 403:
      return WithCode(PermissionDeniedError(msg + " (access denied)"), kAccessDenied);
    case 404:
    case 410:
      return WithCode(NotFoundError(msg + " (not found)"), kSourceNotFound);
    case 408:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      a.transient = true;
      a.retry_after = RetryAfterOf(r.headers);
      return UnavailableError(msg);
    default:
      return InternalError(msg);
  }
}

Status CheckObjectSize(const std::string& source, const SourceObject& object, int status,
                       const Headers& headers) {
  std::optional<uint64_t> total;
  if (status == 206) {
    if (auto range = FindHeader(headers, "content-range")) {
      if (auto parsed = ParseContentRange(*range)) total = parsed->second;
    }
  } else if (auto len = FindHeader(headers, "content-length")) {
    total = ParseByteCount(*len);
  }
  if (total && *total != object.size_bytes) {
    return WithCode(FailedPreconditionError(source + ": object \"" + EscapeName(object.path) +
                                            "\": changed during the sync (" +
                                            std::to_string(object.size_bytes) + " bytes listed, " +
                                            std::to_string(*total) + " now)"),
                    kSourceChanged);
  }
  return Status::Ok();
}

// ---- ValidatorPin ----

Status ValidatorPin::Check(const std::string& source, const SourceObject& object,
                           const Headers& headers) {
  std::string validator = "no ETag or Last-Modified";
  if (auto etag = FindHeader(headers, "etag")) {
    validator = "ETag \"" + EscapeName(NormalizeEtag(*etag)) + "\"";
  } else if (auto modified = FindHeader(headers, "last-modified")) {
    validator = "Last-Modified \"" + EscapeName(*modified) + "\"";
  }
  MutexLock lock(mu_);
  if (!pinned_) {
    pinned_ = std::move(validator);
    return Status::Ok();
  }
  if (*pinned_ == validator) return Status::Ok();
  return WithCode(FailedPreconditionError(source + ": object \"" + EscapeName(object.path) +
                                          "\": changed during the sync (its first answer had " +
                                          *pinned_ + ", this one " + validator + ")"),
                  kSourceChanged);
}

// ---- HttpFetcher ----

HttpFetcher::HttpFetcher(FetcherOptions options) : options_(std::move(options)) {}

Result<std::shared_ptr<http::HttpClient>> HttpFetcher::ClientFor(const std::string& origin) {
  MutexLock lock(mu_);
  auto it = clients_.find(origin);
  if (it != clients_.end()) return it->second;
  http::ClientOptions o;
  o.base_url = origin;
  o.label = options_.source;
  o.connect_timeout = options_.connect_timeout;
  o.deadline = options_.request_deadline;
  // Answers are small; a larger one is refused rather than held (listing pages: less still).
  o.max_response_bytes = kMaxAnswerBytes;
  if (options_.source_options.access.public_addresses_only) {
    o.peers = http::PeerAddresses::kPublicOnly;
  }
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<http::HttpClient> client, http::HttpClient::Create(o));
  clients_.emplace(origin, client);
  return client;
}

std::string HttpFetcher::Shown(const std::string& path) const {
  if (options_.secret_queries && path.find_first_of("?#") != std::string::npos) {
    return path.substr(0, path.find_first_of("?#")) + "?***";
  }
  return http::WithoutSecretParams(path);
}

Result<http::Response> HttpFetcher::SendOnce(const Call& call, Attempt& a, std::string* final_url) {
  const SourceOptions& so = options_.source_options;
  for (const auto& [name, value] : call.headers) {
    if (std::ranges::any_of(name + value, [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        })) {
      return Err(InternalError(options_.source + ": " + "header \"" + EscapeName(name) +
                               "\" holds control characters; not sent"));
    }
  }
  std::string url = call.url;
  for (int hop = 0; hop <= options_.max_redirects; ++hop) {
    BDN_ASSIGN_OR_RETURN(auto split, SplitUrl(url));
    const auto& [origin, path] = split;
    if (origin.find('@') != std::string::npos) {
      // Never a client for it: its messages would show the password.
      return Err(InternalError(options_.source + ": " + http::ShownUrl(url) +
                               ": a URL with credentials (user:password@) is refused"));
    }
    BDN_ASSIGN_OR_RETURN(auto client, ClientFor(origin));
    http::Request req;
    req.method = call.method;
    req.path = path;
    // A source's query may hold a credential (a presigned https:// source, a redirect to a
    // signed CDN URL): from an attacking helper, a source's X-Amz-Signature was repeated in the
    // job's error.
    req.secret_query = options_.secret_queries;
    req.headers = call.headers;
    if (!call.body.empty()) {
      req.body = {reinterpret_cast<const uint8_t*>(call.body.data()), call.body.size()};
      req.content_type = call.content_type;
    }
    if (origin == options_.auth_origin) {
      if (!options_.authorization.empty()) {
        req.headers.emplace_back("Authorization", options_.authorization);
      }
      if (options_.sign) {
        if (Status s = options_.sign(req); !s.ok()) return Err(s);
      }
    }
    req.connect_timeout = options_.connect_timeout;
    if (call.long_transfer) {
      req.deadline = std::chrono::hours(24 * 7);
      req.stall_timeout = so.body_stall_timeout;
      req.stall_bytes_per_second = so.min_body_bytes_per_second;
    } else {
      req.deadline = options_.request_deadline;
    }
    req.on_body = call.on_body;
    req.max_response_bytes = call.max_page_bytes;
    if (call.on_headers) {
      req.on_headers = [&](int status, const Headers& headers) {
        return IsRedirect(status) || status < 200 || status >= 300 ||
               call.on_headers(status, headers);
      };
    }
    req.should_abort = [&so] { return Canceled(so); };
    auto r = client->Send(req);
    if (!r) {
      if (Canceled(so)) return Err(CanceledError(options_.source));
      if (r.error().reason() == http::kResponseTooLarge) {
        // Never retried: the same answer would come again.
        return Err(WithCode(
            FailedPreconditionError(options_.source + ": " +
                                    std::string(http::MethodName(call.method)) + " " + Shown(path) +
                                    ": the answer exceeds " +
                                    FormatBytes(call.max_page_bytes.value_or(kMaxAnswerBytes)) +
                                    (call.max_page_bytes ? " (the most one listing page may hold)"
                                                         : " (the most one answer may hold)")),
            kListingTooLarge));
      }
      if (r.error().reason() == kAddressNotAllowed) {
        return Err(Status(r.error().code(), r.error().message() +
                                                "; bdn serve --sync-allow-private-addresses "
                                                "allows others")
                       .WithReason(std::string(kAddressNotAllowed)));
      }
      const StatusCode c = r.error().code();
      a.transient = c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded;
      return Err(r.error());
    }
    if (IsRedirect(r->status)) {
      if (call.on_redirect) {
        Status s = call.on_redirect(*r);
        if (!s.ok()) return Err(s);
      }
      if (auto loc = r->Header("location")) {
        std::string next = ResolveLocation(url, std::string(*loc));
        if (!SplitUrl(next)) {
          return Err(InternalError(options_.source + ": " +
                                   std::string(http::MethodName(call.method)) + " " + Shown(path) +
                                   ": redirected to \"" + EscapeName(http::ShownUrl(next)) +
                                   "\", which is not an http:// or https:// URL"));
        }
        url = std::move(next);
        continue;
      }
    }
    if (final_url) *final_url = url;
    return r;
  }
  return Err(InternalError(options_.source + ": " + http::ShownUrl(call.url) + ": more than " +
                           std::to_string(options_.max_redirects) + " redirects"));
}

Status HttpFetcher::Classify(const std::string& what, const http::Response& r,
                             bool sent_credentials, Attempt& a) const {
  if (options_.classify) {
    if (auto s = options_.classify(what, r, sent_credentials, a)) return *s;
  }
  return ClassifyHttpStatus(options_.source, what, r, sent_credentials, a);
}

Result<http::Response> HttpFetcher::Fetch(const Call& call, std::string* final_url) {
  const SourceOptions& so = options_.source_options;
  return WithSourceRetries(so.retry, so.cancel, options_.source,
                           [&](Attempt& a) -> Result<http::Response> {
                             std::string at;
                             BDN_ASSIGN_OR_RETURN(http::Response r, SendOnce(call, a, &at));
                             if (r.status >= 200 && r.status < 300) {
                               if (final_url) *final_url = at;
                               return r;
                             }
                             auto split = SplitUrl(at);
                             bool sent = split && SendsCredentialsTo(split->first);
                             std::string what = std::string(http::MethodName(call.method)) + " " +
                                                (split ? Shown(split->second) : http::ShownUrl(at));
                             return Err(Classify(what, r, sent, a));
                           });
}

// ---- HttpObjectStream ----

// The buffer between the fetching thread and Read.
struct HttpObjectStream::Pipe {
  Mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<uint8_t>> chunks;
  size_t front_pos = 0;
  size_t bytes = 0;
  bool done = false;
  Status error;
};

HttpObjectStream::HttpObjectStream(std::shared_ptr<HttpFetcher> fetcher, ObjectRequest request)
    : fetcher_(std::move(fetcher)), request_(std::move(request)), pipe_(std::make_shared<Pipe>()) {}

HttpObjectStream::~HttpObjectStream() {
  stop_ = true;
  pipe_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HttpObjectStream::Start() {
  if (started_) return;
  started_ = true;
  if (request_.end == 0 || request_.end > request_.object.size_bytes) {
    request_.end = request_.object.size_bytes;
  }
  // Empty objects are fetched too: the answer's headers say whether the object is still what
  // the listing said.
  if (request_.offset >= request_.end && request_.object.size_bytes > 0) {
    MutexLock lock(pipe_->mu);
    pipe_->done = true;
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

Result<size_t> HttpObjectStream::Read(std::span<uint8_t> out) {
  Start();
  Pipe& p = *pipe_;
  MutexLock lock(p.mu);
  p.cv.wait(lock.native(), [&] { return p.bytes > 0 || p.done; });
  if (p.bytes == 0) {
    if (!p.error.ok()) return Err(p.error);
    return size_t{0};
  }
  size_t n = 0;
  while (n < out.size() && !p.chunks.empty()) {
    auto& front = p.chunks.front();
    size_t take = std::min(out.size() - n, front.size() - p.front_pos);
    std::memcpy(out.data() + n, front.data() + p.front_pos, take);
    n += take;
    p.front_pos += take;
    if (p.front_pos == front.size()) {
      p.chunks.pop_front();
      p.front_pos = 0;
    }
  }
  p.bytes -= n;
  lock.Unlock();
  p.cv.notify_all();
  return n;
}

void HttpObjectStream::Run() {
  const SourceOptions& so = fetcher_->options().source_options;
  Status s = WithSourceRetries(so.retry, so.cancel, fetcher_->options().source, [&](Attempt& a) {
    // A try that delivered a real part of the body at the floor's rate or faster, counted over
    // the whole try (its stall included), starts the deadline over: a connection that was reset
    // after moving well. A drip of a few bytes a try does not, nor a source that sends 64 KiB
    // and then stalls every time (it would otherwise hold a runner without end, each try
    // "progressing" at a few hundred bytes a second); both meet the deadline.
    constexpr uint64_t kProgressBytes = 64 * 1024;
    const uint64_t before = request_.offset;
    const auto began = std::chrono::steady_clock::now();  // real time, as libcurl's floor
    Status once = FetchOnce(a);
    const uint64_t moved = request_.offset - before;
    const double seconds = std::max(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(), 1e-3);
    a.progressed = moved >= kProgressBytes && static_cast<double>(moved) / seconds >=
                                                  static_cast<double>(so.min_body_bytes_per_second);
    return once;
  });
  MutexLock lock(pipe_->mu);
  pipe_->done = true;
  pipe_->error = s;
  pipe_->cv.notify_all();
}

Status HttpObjectStream::FetchOnce(Attempt& a) {
  const SourceOptions& so = fetcher_->options().source_options;
  const SourceObject& obj = request_.object;
  const std::string what =
      "object \"" + EscapeName(obj.path) + "\" of " + fetcher_->options().source;
  // Where the last try stopped: every byte before it is in the pipe already.
  const uint64_t offset = request_.offset;
  const uint64_t end = request_.end;
  if (request_.on_attempt) request_.on_attempt();
  HttpFetcher::Call call;
  call.url = request_.url;
  call.headers = request_.headers;
  call.long_transfer = true;
  call.on_redirect = request_.on_redirect;
  if (end < obj.size_bytes) {
    call.headers.emplace_back("Range",
                              "bytes=" + std::to_string(offset) + "-" + std::to_string(end - 1));
  } else if (offset > 0) {
    call.headers.emplace_back("Range", "bytes=" + std::to_string(offset) + "-");
  }
  uint64_t skip = 0;
  bool whole = false;        // a 200 answer: the whole object, whatever was asked
  bool reached_end = false;  // a whole answer delivered up to `end`: the rest is not wanted
  Status header_error;
  call.on_headers = [&](int status, const Headers& headers) {
    if (status == 206) {
      auto range = FindHeader(headers, "content-range");
      auto parsed = range ? ParseContentRange(*range) : std::nullopt;
      if (!parsed || parsed->first != offset) {
        header_error =
            InternalError(what + ": asked for bytes from " + std::to_string(offset) +
                          ", got Content-Range \"" + EscapeName(range.value_or("")) + "\"");
        return false;
      }
    } else {
      whole = true;
      skip = offset;  // the whole object again: drop what was delivered already
    }
    Status s = request_.check ? request_.check(status, headers)
                              : CheckObjectSize(fetcher_->options().source, obj, status, headers);
    if (s.ok() && request_.pin) s = request_.pin->Check(fetcher_->options().source, obj, headers);
    if (!s.ok()) {
      header_error = s;
      return false;
    }
    if (whole && request_.ranges_ignored && (offset > 0 || end < obj.size_bytes)) {
      request_.ranges_ignored->store(true);
      header_error = UnavailableError(what + ": the server ignores Range (answered 200)");
      return false;
    }
    return true;
  };
  Pipe& p = *pipe_;
  call.on_body = [&](std::span<const uint8_t> data) {
    if (so.bytes_fetched) *so.bytes_fetched += data.size();
    if (skip > 0) {
      size_t drop = static_cast<size_t>(std::min<uint64_t>(skip, data.size()));
      skip -= drop;
      data = data.subspan(drop);
    }
    if (data.empty()) return true;
    if (request_.offset + data.size() > end) {
      if (!whole || end == obj.size_bytes) {
        header_error =
            WithCode(FailedPreconditionError(what + ": changed during the sync (more than the " +
                                             std::to_string(obj.size_bytes) + " bytes listed)"),
                     kSourceChanged);
        return false;
      }
      data = data.first(static_cast<size_t>(end - request_.offset));
      reached_end = true;
    }
    MutexLock lock(p.mu);
    p.cv.wait(lock.native(), [&] { return p.bytes < kPipeBytes || stop_.load() || Canceled(so); });
    if (stop_ || Canceled(so)) return false;
    p.chunks.emplace_back(data.begin(), data.end());
    p.bytes += data.size();
    request_.offset += data.size();
    lock.Unlock();
    p.cv.notify_all();
    return !reached_end;
  };
  std::string at = request_.url;
  auto r = fetcher_->SendOnce(call, a, &at);
  if (reached_end && request_.offset == end) return Status::Ok();
  if (!header_error.ok()) {
    a.transient = false;
    return header_error;
  }
  if (Canceled(so)) return CanceledError(fetcher_->options().source);
  if (stop_) return InternalError(what + ": read stopped");
  if (!r) return r.error();
  if (r->status < 200 || r->status >= 300) {
    if (request_.on_error) {
      if (auto s = request_.on_error(*r)) return *s;
    }
    auto split = SplitUrl(at);
    bool sent = split && fetcher_->SendsCredentialsTo(split->first);
    return fetcher_->Classify("GET " + (split ? split->second : at), *r, sent, a);
  }
  if (request_.offset != end) {
    a.transient = true;  // the body ended early: resume from where it stopped
    return UnavailableError(what + ": the body ended after byte " +
                            std::to_string(request_.offset) + " of " +
                            std::to_string(obj.size_bytes));
  }
  return Status::Ok();
}

// ---- RangedObjectStream ----

RangedObjectStream::RangedObjectStream(std::shared_ptr<HttpFetcher> fetcher, ObjectRequest request,
                                       uint64_t part_bytes, int in_flight)
    : fetcher_(std::move(fetcher)),
      request_(std::move(request)),
      part_bytes_(std::max<uint64_t>(part_bytes, 1)),
      in_flight_(static_cast<size_t>(std::max(in_flight, 1))),
      next_(request_.offset),
      delivered_(request_.offset),
      ranges_ignored_(std::make_shared<std::atomic<bool>>(false)) {}

Result<size_t> RangedObjectStream::Read(std::span<uint8_t> out) {
  const uint64_t size = request_.object.size_bytes;
  while (true) {
    if (whole_) {
      BDN_ASSIGN_OR_RETURN(size_t n, whole_->Read(out));
      delivered_ += n;
      return n;
    }
    while (parts_.size() < in_flight_ && next_ < size) {
      ObjectRequest part = request_;
      part.offset = next_;
      part.end = std::min(size, next_ + part_bytes_);
      part.ranges_ignored = ranges_ignored_;
      next_ = part.end;
      parts_.push_back(std::make_unique<HttpObjectStream>(fetcher_, std::move(part)));
      parts_.back()->Start();
    }
    if (parts_.empty()) return size_t{0};
    auto n = parts_.front()->Read(out);
    if (!n && ranges_ignored_->load()) {
      // One stream for the rest: its server skips (once) what was delivered already.
      parts_.clear();
      ObjectRequest rest = request_;
      rest.offset = delivered_;
      rest.end = 0;
      whole_ = std::make_unique<HttpObjectStream>(fetcher_, std::move(rest));
      continue;
    }
    if (!n) return n;
    delivered_ += *n;
    if (*n > 0 || out.empty()) return *n;
    parts_.pop_front();  // this part is whole: go on with the next
  }
}

}  // namespace bdn::sync
