#include "bdn/objstore/s3_client.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "bdn/base/backoff.h"
#include "bdn/base/log.h"
#include "bdn/base/text.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"  // FormatDuration

namespace bdn::objstore {
namespace {

using std::chrono::milliseconds;

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

// "scheme://host[:port]" (the scheme in lower case) and the rest of an http(s) URL; nullopt if it
// is not one.
std::optional<std::pair<std::string, std::string>> SplitOrigin(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return std::nullopt;
  std::string s = url.substr(0, scheme);
  std::ranges::transform(s, s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s != "http" && s != "https") return std::nullopt;
  size_t path = url.find('/', scheme + 3);
  if (path == std::string::npos) path = url.size();
  if (path == scheme + 3) return std::nullopt;
  return std::make_pair(s + url.substr(scheme, path - scheme), url.substr(path));
}

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.has_value() ? Status::Ok() : r.error();
}

// Sleeps `d` on `clock`; with `should_abort`, in steps of at most 100 ms, returning false as soon
// as it answers true (a back-off of seconds, or a Retry-After, then holds up no abort).
bool SleepUnlessAborted(const Clock& clock, milliseconds d,
                        const std::function<bool()>& should_abort) {
  if (!should_abort) {
    clock.SleepFor(d);
    return true;
  }
  const SteadyTime until = clock.SteadyNow() + d;
  for (;;) {
    if (should_abort()) return false;
    const SteadyTime now = clock.SteadyNow();
    if (now >= until) return true;
    clock.SleepFor(std::min<std::chrono::nanoseconds>(until - now, milliseconds(100)));
  }
}

std::string RangeText(uint64_t offset, uint64_t length) {
  return std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

}  // namespace

Result<S3Location> ParseS3Uri(std::string_view uri) {
  // Quoted as a URL is (from attacking helper 124: "s3://u:PW@bucket" and "s3://b/p?SIG" were
  // quoted whole, and the bucket "u:PW@bucket" too).
  auto bad = [&](const std::string& why) {
    return Err(InvalidArgumentError("--store \"" + EscapeName(http::ShownUrl(uri)) + "\": " + why));
  };
  if (!uri.starts_with("s3://")) return bad("must be s3://bucket[/prefix]");
  std::string_view rest = uri.substr(5);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return bad("must be s3://bucket[/prefix], without a query or fragment");
  }
  S3Location loc;
  size_t slash = rest.find('/');
  loc.bucket = std::string(rest.substr(0, slash));
  if (!ValidBucket(loc.bucket)) {
    const bool plain = std::ranges::all_of(loc.bucket, [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
    });
    return bad((plain ? "bucket \"" + loc.bucket + "\"" : std::string("the bucket name")) +
               ": must be 3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter "
               "or digit");
  }
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty()) {
    size_t start = 0;
    while (start <= prefix.size()) {
      size_t end = prefix.find('/', start);
      if (end == std::string::npos) end = prefix.size();
      std::string_view seg = std::string_view(prefix).substr(start, end - start);
      if (seg.empty()) return bad("the prefix has an empty segment");
      if (seg == "." || seg == "..")
        return bad("the prefix has a \"" + std::string(seg) + "\" segment");
      start = end + 1;
    }
  }
  loc.prefix = std::move(prefix);
  return loc;
}

std::string S3UriOf(const S3Location& location) {
  return "s3://" + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix);
}

struct S3Client::Call {
  http::Method method = http::Method::kGet;
  std::string key;    // relative to the prefix; "" for the bucket itself (a listing)
  std::string query;  // canonical (CanonicalQuery)
  std::span<const uint8_t> body;
  std::string content_type = "application/octet-stream";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string what;  // "GET packs/x.pack", for messages
  std::atomic<uint64_t>* counter = nullptr;
  bool large = false;  // a large body in either direction: a stall timeout, a longer deadline
  uint64_t expect_bytes = 0;  // of the answer, for the deadline
  // Passed on to http::Request (a 2xx body streamed to on_body; called again on a retry).
  std::function<bool(int, const std::vector<std::pair<std::string, std::string>>&)> on_headers;
  std::function<bool(std::span<const uint8_t>)> on_body;
  std::function<bool()> should_abort;
  // If set: the HTTP status of an answer that ended the call with an error (0 for none).
  int* failed_status = nullptr;
  std::string* failed_code = nullptr;  // and the <Code> of its <Error> body
  // If set: no try starts after it (besides retry_deadline).
  std::optional<SteadyTime> give_up_at;
};

S3Client::S3Client(S3ClientOptions options, std::unique_ptr<http::HttpClient> http,
                   std::string base_path)
    : options_(std::move(options)),
      http_(std::move(http)),
      base_path_(std::move(base_path)),
      key_prefix_(options_.location.prefix.empty() ? "" : options_.location.prefix + "/"),
      uri_(S3UriOf(options_.location)) {}

Result<std::unique_ptr<S3Client>> S3Client::Create(S3ClientOptions options) {
  const S3Location& loc = options.location;
  std::string base_url, base_path;
  if (loc.endpoint.empty()) {
    if (loc.bucket.find('.') != std::string::npos) {
      base_url = "https://s3." + loc.region + ".amazonaws.com";
      base_path = "/" + loc.bucket;
    } else {
      base_url = "https://" + loc.bucket + ".s3." + loc.region + ".amazonaws.com";
    }
  } else {
    std::string e = loc.endpoint;
    while (!e.empty() && e.back() == '/') e.pop_back();
    auto split = SplitOrigin(e);
    if (!split || split->first.find('@') != std::string::npos ||
        e.find_first_of("?# ") != std::string::npos) {
      return Err(InvalidArgumentError("--s3-endpoint \"" +
                                      EscapeName(http::ShownUrl(loc.endpoint)) +
                                      "\": must be http(s)://host[:port][/path] without "
                                      "credentials or query"));
    }
    if (size_t at = e.find("{bucket}"); at != std::string::npos) {
      base_url = split->first + split->second;
      base_url.replace(base_url.find("{bucket}"), 8, loc.bucket);
    } else {
      base_url = split->first;
      base_path = split->second + "/" + loc.bucket;
    }
  }
  http::ClientOptions co;
  co.base_url = base_url;
  co.label = "object store";
  co.connect_timeout = options.connect_timeout;
  co.deadline = options.request_deadline;
  co.max_response_bytes = uint64_t{4} << 30;
  auto http = http::HttpClient::Create(co);
  if (!http)
    return Err(loc.endpoint.empty() ? http.error() : http.error().WithPrefix("--s3-endpoint"));
  return std::unique_ptr<S3Client>(new S3Client(std::move(options), std::move(*http), base_path));
}

std::string S3Client::PathOf(const std::string& key, const std::string& query) const {
  std::string path = base_path_ + "/" + (key.empty() ? "" : PercentEncode(key_prefix_ + key, "/"));
  return query.empty() ? path : path + "?" + query;
}

Status S3Client::ErrorOf(const Call& call, const http::Response& r, bool* transient) const {
  auto err = ParseStoreError(r.text());
  const std::string code = err ? err->code : "";
  const std::string detail =
      code.empty() ? "" : " (" + code + (err->message.empty() ? "" : ": " + err->message) + ")";
  const std::string what = uri_ + ": " + call.what + ": ";
  // 501 Not Implemented is an answer about the request, not the server's state.
  *transient = (r.status >= 500 && r.status != 501) || r.status == 429 || r.status == 408 ||
               code == "SlowDown" || code == "RequestTimeout" || code == "InternalError";
  if (code == "NoSuchBucket") {
    return NotFoundError(uri_ + ": bucket \"" + options_.location.bucket + "\" not found" + detail);
  }
  if (r.status == 404) return NotFoundError(what + "not found" + detail);
  if (r.status == 401 || r.status == 403) {
    return PermissionDeniedError(what + "HTTP " + std::to_string(r.status) + detail);
  }
  if (*transient) return UnavailableError(what + "HTTP " + std::to_string(r.status) + detail);
  return InternalError(what + "HTTP " + std::to_string(r.status) + detail);
}

void S3Client::Shutdown() {
  shut_down_ = true;
  http_->Shutdown();
}

Result<http::Response> S3Client::Send(const Call& call) {
  const std::string payload_sha = call.body.empty() ? kEmptySha256 : Sha256Hex(call.body);
  const Clock& clock = *options_.clock;
  const SteadyTime start = clock.SteadyNow();
  milliseconds backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    http::Request req;
    req.method = call.method;
    req.path = PathOf(call.key, call.query);
    req.body = call.body;
    req.content_type = call.content_type;
    req.headers = call.headers;
    if (call.large) {
      const uint64_t bytes = std::max<uint64_t>(call.body.size(), call.expect_bytes);
      req.deadline = options_.request_deadline + milliseconds(1000 * (bytes >> 18));
      req.stall_timeout = options_.stall_timeout;
    }
    req.on_headers = call.on_headers;
    req.on_body = call.on_body;
    req.should_abort = call.should_abort;
    SignS3Request(req, options_.credentials, options_.location.region, payload_sha);
    if (call.counter) call.counter->fetch_add(1, std::memory_order_relaxed);
    if (attempt > 1) counters_.retries.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_sent.fetch_add(call.body.size(), std::memory_order_relaxed);
    auto r = http_->Send(req);
    Status failure;
    bool transient = false;
    std::optional<milliseconds> retry_after;
    if (!r) {
      // Refused, reset, timed out, a body cut off: the request may be sent again (every call here
      // is idempotent: a PUT of the same bytes, a GET, a DELETE).
      transient = (r.error().code() == StatusCode::kUnavailable &&
                   r.error().reason() != http::kShuttingDown) ||
                  r.error().code() == StatusCode::kDeadlineExceeded;
      if (shut_down_) transient = false;
      failure = Status(r.error().code(), uri_ + ": " + call.what + ": " + r.error().message())
                    .WithReason(r.error().reason());
      if (call.failed_status) *call.failed_status = 0;  // no answer this time
      if (call.failed_code) call.failed_code->clear();
    } else if (r->status >= 200 && r->status < 300) {
      return std::move(*r);
    } else {
      failure = ErrorOf(call, *r, &transient);
      if (call.failed_status) *call.failed_status = r->status;
      if (call.failed_code) {
        auto err = ParseStoreError(r->text());
        *call.failed_code = err ? err->code : "";
      }
      if (auto ra = r->Header("retry-after")) {
        if (auto secs = ParseByteCount(*ra)) retry_after = milliseconds(*secs * 1000);
      }
    }
    if (!transient) return Err(std::move(failure));
    const milliseconds wait =
        std::max(backoff::Jitter(backoff), retry_after.value_or(milliseconds(0)));
    const auto spent = std::chrono::duration_cast<milliseconds>(clock.SteadyNow() - start);
    if (attempt >= options_.max_attempts || spent + wait > options_.retry_deadline ||
        (call.give_up_at && clock.SteadyNow() + wait > *call.give_up_at)) {
      return Err(Status(failure.code(), failure.message() + " (tried " + std::to_string(attempt) +
                                            " times over " + FormatDuration(spent) + ")"));
    }
    // A back-off ends at Shutdown too.
    const std::function<bool()> stop = [&] {
      return shut_down_.load() || (call.should_abort && call.should_abort());
    };
    if (!SleepUnlessAborted(clock, wait, stop)) {
      if (shut_down_) {
        return Err(
            Status(failure.code(), failure.message()).WithReason(std::string(http::kShuttingDown)));
      }
      return Err(InternalError(uri_ + ": " + call.what + ": aborted"));
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

Status S3Client::Put(const std::string& key, std::span<const uint8_t> data) {
  Call c{.method = http::Method::kPut,
         .key = key,
         .body = data,
         .what = "PUT " + key,
         .counter = &counters_.puts,
         .large = true};
  return StatusOf(Send(c));
}

Status S3Client::PutMultipart(const std::string& key, std::span<const uint8_t> data,
                              uint64_t part_bytes, int parallel) {
  part_bytes = std::max<uint64_t>(part_bytes, 1);
  Call create{.method = http::Method::kPost,
              .key = key,
              .query = CanonicalQuery({{"uploads", ""}}),
              .what = "CreateMultipartUpload " + key,
              .counter = &counters_.posts};
  BDN_ASSIGN_OR_RETURN(http::Response created, Send(create));
  auto upload_id = ParseUploadId(created.text());
  if (!upload_id) {
    return InternalError(uri_ + ": CreateMultipartUpload " + key +
                         ": unexpected answer: " + upload_id.error().message());
  }
  const size_t parts = static_cast<size_t>((data.size() + part_bytes - 1) / part_bytes);
  std::vector<std::string> etags(std::max<size_t>(parts, 1));
  std::vector<Status> results(etags.size());
  ParallelFor(etags.size(), static_cast<size_t>(std::max(parallel, 1)), [&](size_t i) {
    const uint64_t off = i * part_bytes;
    std::span<const uint8_t> part =
        data.subspan(off, std::min<uint64_t>(part_bytes, data.size() - off));
    const std::string n = std::to_string(i + 1);
    Call c{.method = http::Method::kPut,
           .key = key,
           .query = CanonicalQuery({{"partNumber", n}, {"uploadId", *upload_id}}),
           .body = part,
           .what = "UploadPart " + n + " of " + key,
           .counter = &counters_.puts,
           .large = true};
    auto r = Send(c);
    if (!r) {
      results[i] = r.error();
      return;
    }
    auto etag = r->Header("etag");
    if (!etag || etag->empty()) {
      results[i] = InternalError(uri_ + ": " + c.what + ": the answer has no ETag");
      return;
    }
    etags[i] = std::string(*etag);
  });
  Status failed;
  for (const Status& s : results) {
    if (!s.ok()) {
      failed = s;
      break;
    }
  }
  if (failed.ok()) {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags.size(); ++i) {
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
             XmlEscape(etags[i]) + "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    Call complete{.method = http::Method::kPost,
                  .key = key,
                  .query = CanonicalQuery({{"uploadId", *upload_id}}),
                  .body = {reinterpret_cast<const uint8_t*>(xml.data()), xml.size()},
                  .content_type = "application/xml",
                  .what = "CompleteMultipartUpload " + key,
                  .counter = &counters_.posts};
    auto r = Send(complete);
    if (!r) {
      failed = r.error();
    } else if (auto err = ParseStoreError(r->text())) {
      // S3 may answer 200 and still fail the completion: the error is in the body.
      failed = UnavailableError(uri_ + ": " + complete.what + ": " + err->code +
                                (err->message.empty() ? "" : ": " + err->message));
    }
  }
  if (!failed.ok()) {
    Call abort{.method = http::Method::kDelete,
               .key = key,
               .query = CanonicalQuery({{"uploadId", *upload_id}}),
               .what = "AbortMultipartUpload " + key,
               .counter = &counters_.deletes};
    // Best effort on an error path: a lifecycle rule cleans up what is left.
    Send(abort).IgnoreError();
  }
  return failed;
}

Result<std::vector<uint8_t>> S3Client::GetRange(const std::string& key, uint64_t offset,
                                                uint64_t length) {
  // The length may come from a pack's own trailer: refuse one no pack has before allocating.
  if (length > kMaxGetRangeBytes) {
    return Err(InvalidArgumentError(uri_ + ": GET " + key + ": " + std::to_string(length) +
                                    " bytes asked at once (at most " +
                                    std::to_string(kMaxGetRangeBytes) + ")"));
  }
  std::vector<uint8_t> out;
  try {
    out.resize(length);
  } catch (const std::bad_alloc&) {
    return Err(UnavailableError(uri_ + ": GET " + key + ": no memory for " +
                                std::to_string(length) + " bytes"));
  }
  BDN_RETURN_IF_ERROR(GetRangeInto(key, offset, out));
  return out;
}

Status S3Client::GetRangeInto(const std::string& key, uint64_t offset, std::span<uint8_t> out,
                              const std::function<void(uint64_t)>& progress,
                              const std::function<bool()>& should_abort) {
  if (out.empty()) return Status::Ok();
  const uint64_t length = out.size();
  const std::string range = RangeText(offset, length);
  // Where the answer's bytes go: a 206 starts at `offset`; a server that ignores Range answers
  // 200 with the whole object, whose bytes before `offset` are skipped.
  uint64_t seen = 0, filled = 0;
  uint64_t final_bytes = 0;  // [0, final_bytes) of `out` handed to `progress`: never rewritten
  bool partial = false;      // a 206
  std::string refused;       // why the answer was refused, "" if it was not
  Call c{.method = http::Method::kGet,
         .key = key,
         .headers = {{"Range", "bytes=" + range}},
         .what = "GET " + key,
         .counter = &counters_.gets,
         .large = true,
         .expect_bytes = length};
  c.should_abort = should_abort;
  c.on_headers = [&](int status, const std::vector<std::pair<std::string, std::string>>& h) {
    seen = filled = 0;  // a retry starts over
    partial = status == 206;
    const std::string* got = nullptr;  // Content-Range of a 206, Content-Length of a 2xx else
    for (const auto& [name, value] : h) {
      if (name == (partial ? "content-range" : "content-length")) got = &value;
    }
    if (!partial) {
      // The whole object, if the answer is one; a body too short to hold the range is not (a
      // server that sends just the range's bytes with 200): none of it may reach `out`, where
      // bytes from the wrong place would be published as final.
      if (status < 200 || status >= 300 || got == nullptr) return true;  // checked below
      const std::optional<uint64_t> bytes = ParseByteCount(*got);
      if (bytes && *bytes >= offset + length) return true;
      refused = "asked bytes " + range + ", got " + std::to_string(status) + " with " +
                (bytes ? std::to_string(*bytes) : "\"" + EscapeName(*got) + "\"") +
                " bytes, not the whole object";
      return false;
    }
    const std::string want = "bytes " + range + "/";
    if (got == nullptr || !got->starts_with(want)) {
      refused = "asked bytes " + range + ", got " +
                (got ? "\"" + EscapeName(*got) + "\"" : std::string("no range"));
      return false;
    }
    return true;
  };
  // Puts `n` bytes from `from` at `at` of `out`, skipping what is final already.
  auto place = [&](uint64_t at, const uint8_t* from, uint64_t n) {
    const uint64_t skip = std::min(n, final_bytes > at ? final_bytes - at : 0);
    if (n > skip) std::memcpy(out.data() + at + skip, from + skip, n - skip);
    filled += n;
    if (progress && filled > final_bytes) {
      final_bytes = filled;
      progress(final_bytes);
    }
  };
  c.on_body = [&](std::span<const uint8_t> piece) {
    const uint64_t piece_begin = seen;
    seen += piece.size();
    if (partial) {
      if (filled + piece.size() > length) {
        refused = "asked bytes " + range + ", got more than " + std::to_string(length);
        return false;
      }
      place(filled, piece.data(), piece.size());
      return true;
    }
    // The whole object: keep [offset, offset + length).
    const uint64_t lo = std::max(piece_begin, offset), hi = std::min(seen, offset + length);
    if (lo < hi) place(lo - offset, piece.data() + (lo - piece_begin), hi - lo);
    return true;
  };
  auto r = Send(c);
  if (!refused.empty()) return InternalError(uri_ + ": GET " + key + ": " + refused);
  if (!r) return r.error();
  counters_.bytes_received.fetch_add(seen, std::memory_order_relaxed);
  if (filled != length) {
    return InternalError(uri_ + ": GET " + key + ": asked bytes " + range + ", got " +
                         std::to_string(seen) +
                         (partial ? " bytes" : " bytes of the whole object"));
  }
  return Status::Ok();
}

Status S3Client::Delete(const std::string& key) { return DeleteKey(key, std::nullopt); }

Status S3Client::DeleteKey(const std::string& key, std::optional<SteadyTime> give_up_at) {
  Call c{.method = http::Method::kDelete,
         .key = key,
         .what = "DELETE " + key,
         .counter = &counters_.deletes};
  c.give_up_at = give_up_at;
  auto r = Send(c);
  if (!r && r.error().code() == StatusCode::kNotFound &&
      r.error().message().find("bucket") == std::string::npos) {
    return Status::Ok();
  }
  return StatusOf(r);
}

Result<std::vector<std::string>> S3Client::DeleteBatch(std::span<const std::string> keys,
                                                       SteadyTime give_up_at, bool* unsupported) {
  std::string xml = "<Delete><Quiet>true</Quiet>";
  std::unordered_set<std::string> asked;
  for (const std::string& k : keys) {
    xml += "<Object><Key>" + XmlEscape(key_prefix_ + k) + "</Key></Object>";
    asked.insert(key_prefix_ + k);
  }
  xml += "</Delete>";
  const std::span<const uint8_t> body(reinterpret_cast<const uint8_t*>(xml.data()), xml.size());
  auto md5 = Md5Base64(body);
  if (!md5) {
    *unsupported = true;
    return Err(md5.error().WithPrefix(uri_ + ": DeleteObjects"));
  }
  int failed_status = 0;
  std::string failed_code;
  Call c{.method = http::Method::kPost,
         .query = CanonicalQuery({{"delete", ""}}),
         .body = body,
         .content_type = "application/xml",
         .headers = {{"Content-MD5", *md5}},
         .what = "DeleteObjects",
         .counter = &counters_.deletes};
  c.failed_status = &failed_status;
  c.failed_code = &failed_code;
  c.give_up_at = give_up_at;
  auto r = Send(c);
  if (!r) {
    *unsupported = failed_status == 501 || failed_code == "NotImplemented";
    return Err(r.error());
  }
  auto failures = ParseDeleteResult(r->text());
  if (!failures) {
    return Err(
        InternalError(uri_ + ": DeleteObjects: unexpected answer: " + failures.error().message()));
  }
  std::vector<std::string> left;
  for (const DeleteFailure& f : *failures) {
    if (!asked.contains(f.key)) {
      // Not a key of this request: the answer is not about it, so none of its keys is known
      // to be deleted or not.
      return Err(InternalError(uri_ + ": DeleteObjects: unexpected answer: key \"" +
                               EscapeName(f.key) + "\" was not asked for"));
    }
    if (f.code == "NoSuchKey") continue;
    left.push_back(f.key.substr(key_prefix_.size()));
  }
  return left;
}

Status S3Client::DeleteMany(std::span<const std::string> keys,
                            std::optional<std::chrono::milliseconds> within, int parallel) {
  const Clock& clock = *options_.clock;
  const std::optional<SteadyTime> deadline =
      within ? std::optional<SteadyTime>(clock.SteadyNow() + *within) : std::nullopt;
  auto late = [&] { return deadline && clock.SteadyNow() >= *deadline; };
  size_t not_deleted = 0;  // keys no request was started for, by the deadline
  // One DeleteObject per key, `parallel` at once; none started after the deadline.
  auto one_by_one = [&](std::span<const std::string> these) -> Status {
    std::vector<Status> results(these.size());
    std::atomic<size_t> not_started{0};
    ParallelFor(these.size(), static_cast<size_t>(std::max(parallel, 1)), [&](size_t i) {
      if (late()) {
        not_started.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      results[i] = DeleteKey(these[i], deadline);
    });
    for (const Status& s : results) BDN_RETURN_IF_ERROR(s);
    not_deleted += not_started.load();
    return Status::Ok();
  };
  auto past_deadline = [&] {
    return DeadlineExceededError(uri_ + ": DeleteObjects: " + std::to_string(not_deleted) + " of " +
                                 std::to_string(keys.size()) + " keys not deleted by the deadline");
  };
  bool per_key = false;
  for (size_t at = 0; at < keys.size(); at += kMaxDeleteKeys) {
    std::span<const std::string> batch =
        keys.subspan(at, std::min(kMaxDeleteKeys, keys.size() - at));
    if (late()) {
      not_deleted += keys.size() - at;
      return past_deadline();
    }
    if (!per_key) {
      bool unsupported = false;
      auto left = DeleteBatch(batch, deadline.value_or(SteadyTime::max()), &unsupported);
      if (left) {
        BDN_RETURN_IF_ERROR(one_by_one(*left));
        continue;
      }
      if (!unsupported) return left.error();
      per_key = true;
      if (!warned_no_delete_objects_.exchange(true)) {
        log::Warn(uri_ + ": the object store does not implement DeleteObjects (" +
                  left.error().message() + "); deleting one object per request");
      }
    }
    BDN_RETURN_IF_ERROR(one_by_one(batch));
  }
  if (not_deleted > 0) return past_deadline();
  return Status::Ok();
}

Result<std::vector<ListedObject>> S3Client::List(const std::string& key_prefix) {
  std::vector<ListedObject> out;
  std::string token;
  const std::string full = key_prefix_ + key_prefix;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> params = {{"list-type", "2"},
                                                               {"prefix", full}};
    if (!token.empty()) params.emplace_back("continuation-token", token);
    Call c{.method = http::Method::kGet,
           .query = CanonicalQuery(params),
           .what = "LIST " + key_prefix,
           .counter = &counters_.lists};
    BDN_ASSIGN_OR_RETURN(http::Response r, Send(c));
    auto page = ParseS3ListPage(r.text());
    if (!page) {
      return Err(InternalError(uri_ + ": unexpected listing: " + page.error().message()));
    }
    for (ListedObject& o : page->objects) {
      if (!o.key.starts_with(full)) {
        return Err(InternalError(uri_ + ": unexpected listing: key \"" + EscapeName(o.key) +
                                 "\" is not under \"" + EscapeName(full) + "\""));
      }
      o.key = o.key.substr(key_prefix_.size());
      out.push_back(std::move(o));
    }
    if (!page->truncated) break;
    if (page->next_token == token) {
      return Err(InternalError(uri_ + ": unexpected listing: the continuation token repeats"));
    }
    token = page->next_token;
  }
  return out;
}

S3Stats S3Client::stats() const {
  S3Stats s;
  s.puts = counters_.puts.load();
  s.gets = counters_.gets.load();
  s.lists = counters_.lists.load();
  s.deletes = counters_.deletes.load();
  s.posts = counters_.posts.load();
  s.retries = counters_.retries.load();
  s.bytes_sent = counters_.bytes_sent.load();
  s.bytes_received = counters_.bytes_received.load();
  return s;
}

}  // namespace bdn::objstore
