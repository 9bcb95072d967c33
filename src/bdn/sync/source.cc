// Source URIs and the factory of sources.
#include "bdn/sync/source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "bdn/base/units.h"   // FormatBytes, FormatDuration
#include "bdn/http/client.h"  // ShownUrl
#include "bdn/http/peer_address.h"
#include "bdn/sync/file_source.h"
#include "bdn/sync/hf_source.h"
#include "bdn/sync/http_fetch.h"  // SplitUrl
#include "bdn/sync/https_source.h"
#include "bdn/sync/object_store_sources.h"
#include "bdn/sync/source_uri.h"

namespace bdn::sync {
namespace {

bool IsRepoNamePart(const std::string& s) {
  if (s.empty() || s.size() > 96 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// A bucket or container name as object stores allow them (S3, R2, CoreWeave: [a-z0-9.-]; GCS
// also '_'; Azure [a-z0-9-]; upper case for legacy S3 buckets): the store itself refuses the
// ones it does not know.
bool IsBucketName(const std::string& s) {
  if (s.empty() || s.size() > 222) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// Whether `path` is `dir` or lies below it (both absolute and normal).
bool Within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.starts_with(dir) && path[dir.size()] == '/');
}

// The host of an http(s) URL ("127.0.0.1", "[::1]"), "" if it has none.
std::string HostOf(const std::string& url) {
  auto split = SplitUrl(url);
  if (!split) return "";
  std::string host = split->first.substr(split->first.find("://") + 3);
  if (size_t at = host.rfind('@'); at != std::string::npos) host.erase(0, at + 1);
  if (host.starts_with("[")) return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.find(':'));
}

Status CheckHost(const std::string& what, const std::string& url) {
  const std::string host = HostOf(url);
  auto kind = http::NonPublicKindOfLiteral(host);
  if (!kind) return Status::Ok();
  return WithCode(PermissionDeniedError(what + ": " + host + " is a " + std::string(*kind) +
                                        " address; this server syncs only from public "
                                        "addresses (bdn serve --sync-allow-private-addresses "
                                        "allows others)"),
                  kAddressNotAllowed);
}

}  // namespace

ListingBudget::ListingBudget(std::string uri, const SourceOptions& options)
    : uri_(std::move(uri)),
      limits_(options.listing),
      clock_(options.retry.clock ? options.retry.clock : Clock::Real()),
      start_(clock_->SteadyNow()) {}

Status ListingBudget::Objects(size_t objects) const {
  if (objects > limits_.max_objects) {
    return WithCode(FailedPreconditionError(
                        uri_ + ": the listing exceeds " + std::to_string(limits_.max_objects) +
                        " objects (the most one sync takes); sync a narrower prefix or "
                        "--include less"),
                    kListingTooLarge);
  }
  return Status::Ok();
}

Status ListingBudget::Page(uint64_t page_bytes, size_t entries,
                           const std::vector<SourceObject>& objects) {
  BDN_RETURN_IF_ERROR(Objects(objects.size()));
  // A repeated path ends the listing at the page that repeats it: a next-page link or token that
  // is new each time over the same page would otherwise run to the object limit or the deadline.
  for (; checked_ < objects.size(); ++checked_) {
    const std::string& path = objects[checked_].path;
    const uint64_t hash = std::hash<std::string>{}(path);
    auto [first, last] = paths_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (objects[it->second].path == path) {
        return WithCode(FailedPreconditionError(uri_ + ": the listing names \"" + EscapeName(path) +
                                                "\" twice"),
                        kInvalidAnswer);
      }
    }
    paths_.emplace(hash, checked_);
  }
  bytes_ += page_bytes;
  if (bytes_ > limits_.max_bytes) {
    return WithCode(FailedPreconditionError(uri_ + ": the listing's answers exceed " +
                                            FormatBytes(limits_.max_bytes) +
                                            " (the most one sync reads); sync a narrower prefix"),
                    kListingTooLarge);
  }
  empty_pages_ = entries == 0 ? empty_pages_ + 1 : 0;
  if (empty_pages_ >= limits_.max_empty_pages) {
    return WithCode(FailedPreconditionError(uri_ + ": " + std::to_string(empty_pages_) +
                                            " listing pages in a row listed nothing (the listing "
                                            "would never end)"),
                    kListingTooLarge);
  }
  const auto spent =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - start_);
  if (spent > limits_.deadline) {
    return WithCode(DeadlineExceededError(uri_ + ": listing took longer than " +
                                          FormatDuration(limits_.deadline) +
                                          " (the most one listing may take)"),
                    kSourceUnavailable);
  }
  return Status::Ok();
}

Result<std::string> CheckFileAccess(const std::string& uri, const std::string& path,
                                    const SourceAccess& access) {
  if (!access.file_roots && access.forbidden_dirs.empty()) return path;
  auto refuse = [&](const std::string& why) {
    return Err(WithCode(PermissionDeniedError("source \"" + ShownSource(uri) + "\": " + why),
                        kFileNotAllowed));
  };
  if (access.file_roots && access.file_roots->empty()) {
    return refuse(
        "file:// sources are not allowed on this server (bdn serve --sync-file-root "
        "DIR allows the files under DIR)");
  }
  std::error_code ec;
  // Symlinks resolved as far as the path exists; the rest taken lexically ("..", ".").
  const std::string real = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) return Err(ErrnoError(ShownSource(uri), ec.value()));
  for (const std::string& dir : access.forbidden_dirs) {
    if (Within(real, dir)) return refuse("the server's data directory is never a sync source");
    if (Within(dir, real)) {
      return refuse("holds the server's data directory, which is never a sync source");
    }
  }
  if (access.file_roots) {
    const bool inside = std::any_of(access.file_roots->begin(), access.file_roots->end(),
                                    [&](const std::string& root) { return Within(real, root); });
    if (!inside) {
      return refuse(path +
                    " is outside the directories bdn serve --sync-file-root allows "
                    "(symlinks are resolved first)");
    }
  }
  return real;
}

Status CheckSourceAccess(const std::string& uri, const std::string& endpoint,
                         const SourceAccess& access) {
  BDN_ASSIGN_OR_RETURN(SourceUri parsed, ParseSourceUri(uri));
  if (auto* file = std::get_if<FileUri>(&parsed)) {
    auto checked = CheckFileAccess(uri, file->path, access);
    return checked ? Status::Ok() : checked.error();
  }
  if (!access.public_addresses_only) return Status::Ok();
  if (auto* https = std::get_if<HttpsUri>(&parsed)) {
    BDN_RETURN_IF_ERROR(CheckHost("source \"" + ShownSource(uri) + "\"", https->url));
  }
  if (!endpoint.empty()) {
    BDN_RETURN_IF_ERROR(CheckHost(
        "source \"" + ShownSource(uri) + "\": --endpoint \"" + http::ShownUrl(endpoint) + "\"",
        endpoint));
  }
  return Status::Ok();
}

std::optional<std::string> SecretHostChosenByCaller(const std::string& uri,
                                                    const std::string& endpoint) {
  auto parsed = ParseSourceUri(uri);
  if (!parsed) return "the source \"" + ShownSource(uri) + "\" is not valid";
  if (std::holds_alternative<HttpsUri>(*parsed)) return "an http(s):// source names its host";
  if (!endpoint.empty()) return "--endpoint names the host";
  // A SAS token travels in the URL, to <account>.blob.core.windows.net for an account the
  // caller names: the victim's token sent to the caller's account.
  if (std::holds_alternative<AzureUri>(*parsed)) {
    return "an azure:// source names the storage account, and so the host";
  }
  return std::nullopt;
}

namespace {

// Whether `s` has the shape of a Hugging Face user access token: "hf_" then at least 20 letters
// and digits (they are "hf_" and 34 today).
bool LooksLikeHfToken(std::string_view s) {
  return s.starts_with("hf_") && s.size() >= 23 && std::all_of(s.begin() + 3, s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0;
         });
}

}  // namespace

std::string ShownSource(const std::string& uri) {
  const size_t sep = uri.find("://");
  std::string scheme = sep == std::string::npos ? "" : uri.substr(0, sep);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  constexpr size_t kWhole = std::string::npos;  // a source is shown whole, not cut at 200 bytes
  if (scheme == "http" || scheme == "https") {
    // A URL with no "@" before its query: only the query and fragment are hidden (from an
    // attacking helper: an "@" in a query, "?sig=S&x=@y", made the shown URL "http://***@y", a
    // host it never named, and so the version's record); otherwise all that may be credentials
    // too. A "?" or "#" before the path is inside the authority (a password holding one): all
    // that is shown as credentials.
    // A valid host[:port] before the path: an "@" after it is in the path (from attacking helper
    // 125: "http://h/a@b/w.bin" was shown, and recorded with its version, as "http://***@b/w.bin").
    const size_t q = uri.find_first_of("?#");
    const size_t end = std::min(uri.find_first_of("/?#", sep + 3), uri.size());
    if (http::IsAuthority(std::string_view(uri).substr(sep + 3, end - sep - 3))) {
      return q == std::string::npos ? uri : uri.substr(0, q + 1) + "***";
    }
    return http::ShownUrl(uri, kWhole);
  }
  static constexpr std::string_view kSchemes[] = {"hf", "s3", "gs", "azure", "r2", "cw", "file"};
  if (std::ranges::find(kSchemes, scheme) == std::end(kSchemes)) {
    // Refused anyway; shown as a URL (from attacking helper 124: "ftp://u:PW@h/x", "u:PW@h/x" and
    // " https://u:PW@h/x" were quoted whole).
    return http::ShownUrl(uri);
  }
  // From attacking helper 124: a query (an Azure SAS, a presigned S3 signature) or credentials
  // before the host of any other source were shown whole in its messages, `sync list` and the
  // sync API. An hf:// source's "@" names a revision ("hf://org/repo@main"): only an "@" after a
  // ":" before the first "/" ("hf://user:token@org/repo") hides what precedes it.
  std::string out = uri;
  if (const size_t q = out.find_first_of("?#"); q != std::string::npos) {
    out = out.substr(0, q + 1) + "***";
  }
  const size_t start = sep + 3;
  const size_t end = std::min(out.find_first_of("/?#", start), out.size());
  const size_t at = out.rfind('@', end == 0 ? 0 : end - 1);
  if (at != std::string::npos && at >= start && (scheme != "hf" || out.find(':', start) < at)) {
    out.replace(start, at - start, "***");
  } else if (const size_t colon = out.find(':', start); colon < end) {
    // No bucket, account or repo holds a ":": what follows may be a password ("s3://b:PW/p",
    // "azure://acct:KEY/c"; from attacking helper 125).
    out.replace(colon + 1, end - colon - 1, "***");
  }
  // A Hugging Face token where an org, a repo or a revision goes ("hf://hf_TOKEN@org/repo" is
  // repo hf_TOKEN at revision org/repo; "hf://org/repo@hf_TOKEN", "hf://datasets/hf_TOKEN/x";
  // from attacking helpers 125 and 126): ParseSourceUri refuses it.
  if (scheme == "hf") {
    for (size_t begin = start; begin < out.size();) {
      const size_t stop = std::min(out.find_first_of("@/?#", begin), out.size());
      if (LooksLikeHfToken(std::string_view(out).substr(begin, stop - begin))) {
        out.replace(begin, stop - begin, "***");
        begin += 3;
      } else {
        begin = stop;
      }
      if (begin < out.size() && (out[begin] == '?' || out[begin] == '#')) break;
      ++begin;
    }
  }
  return out;
}

Result<SourceUri> ParseSourceUri(const std::string& uri) {
  auto bad = [&](const std::string& why) {
    return Err(InvalidArgumentError("source \"" + ShownSource(uri) + "\": " + why));
  };
  if (uri.starts_with("hf://")) {
    std::string rest = uri.substr(5);
    // Any part of it ("/" and "@" apart) with a token's shape: a token pasted where the repo or
    // the revision goes would be sent to the Hub as a name, and shown (ShownSource hides it).
    for (size_t begin = 0; begin <= rest.size();) {
      const size_t stop = std::min(rest.find_first_of("@/", begin), rest.size());
      if (LooksLikeHfToken(std::string_view(rest).substr(begin, stop - begin))) {
        return bad(
            "names a Hugging Face token where an org, a repo or a revision goes; a token is "
            "given as a secret (bdn secret set NAME, then --auth-secret-name NAME)");
      }
      begin = stop + 1;
    }
    HfUri out;
    if (size_t at = rest.find('@'); at != std::string::npos) {
      out.revision = rest.substr(at + 1);
      rest.resize(at);
      if (out.revision.empty()) return bad("empty revision after '@'");
    }
    for (const char* type : {"datasets/", "spaces/", "models/"}) {
      if (rest.starts_with(type)) {
        out.repo_type = std::string(type, std::string_view(type).size() - 1);
        rest.erase(0, std::string_view(type).size());
        break;
      }
    }
    size_t slash = rest.find('/');
    std::string org = slash == std::string::npos ? "" : rest.substr(0, slash);
    std::string name = slash == std::string::npos ? rest : rest.substr(slash + 1);
    if ((slash != std::string::npos && !IsRepoNamePart(org)) || !IsRepoNamePart(name)) {
      return bad("expected hf://org/repo[@revision] (or hf://datasets/org/repo...)");
    }
    out.repo_id = rest;
    return SourceUri(out);
  }
  if (uri.starts_with("file://")) {
    std::string path = uri.substr(7);
    if (!path.starts_with("/")) {
      return bad(
          "file:// needs an absolute path on the machine that runs the job "
          "(file:///abs/path)");
    }
    if (path.find('\0') != std::string::npos) return bad("the path holds a NUL byte");
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return SourceUri(FileUri{path});
  }
  if (uri.starts_with("https://") || uri.starts_with("http://")) {
    size_t host_start = uri.find("://") + 3;
    size_t path_start = uri.find('/', host_start);
    if (path_start == host_start) return bad("no host");
    std::string path = path_start == std::string::npos ? "" : uri.substr(path_start);
    path = path.substr(0, path.find_first_of("?#"));
    if (path.empty() || path.back() == '/') {
      return bad("https:// needs the URL of one file (https://host/path/file)");
    }
    const std::string authority = uri.substr(
        host_start, std::min(uri.find_first_of("/?#", host_start), uri.size()) - host_start);
    if (authority.find('@') != std::string::npos) {
      return bad("credentials in the URL are refused (use --auth-secret-name)");
    }
    // Refused at start, not when the job runs (from attacking helper 125: "http://u:PW:8080/f"
    // and "http://[u:PW/f" started and failed later as internal).
    if (!http::IsAuthority(authority)) {
      return bad(
          "the host must be host[:port] (a name, an IPv4 address or a bracketed IPv6 one; "
          "a port of 1 to 65535)");
    }
    return SourceUri(HttpsUri{uri});
  }
  for (const char* scheme : {"s3", "r2", "cw", "gs"}) {
    const std::string lead = std::string(scheme) + "://";
    if (!uri.starts_with(lead)) continue;
    BucketUri out;
    out.scheme = scheme;
    std::string rest = uri.substr(lead.size());
    size_t slash = rest.find('/');
    out.bucket = rest.substr(0, slash);
    out.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (out.scheme == "r2") {
      size_t dot = out.bucket.find('.');
      if (dot == std::string::npos || dot == 0) {
        return bad("expected r2://account_id.bucket[/prefix]");
      }
      out.account = out.bucket.substr(0, dot);
      out.bucket.erase(0, dot + 1);
      if (!std::all_of(out.account.begin(), out.account.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
          })) {
        // Not quoted: it may hold credentials ("r2://user:PW@acct.bucket").
        return bad("the account id (before the first \".\") must be letters and digits");
      }
    }
    if (!IsBucketName(out.bucket)) {
      return bad("expected " + lead + (out.scheme == "r2" ? "account_id." : "") +
                 "bucket[/prefix] (a bucket name of letters, digits, '.', '-' and '_')");
    }
    if (out.prefix.find('\0') != std::string::npos) return bad("the prefix holds a NUL byte");
    return SourceUri(out);
  }
  if (uri.starts_with("azure://")) {
    std::string rest = uri.substr(8);
    AzureUri out;
    size_t a = rest.find('/');
    size_t c = a == std::string::npos ? std::string::npos : rest.find('/', a + 1);
    out.account = rest.substr(0, a);
    out.container = a == std::string::npos ? "" : rest.substr(a + 1, c - a - 1);
    out.prefix = c == std::string::npos ? "" : rest.substr(c + 1);
    auto lower_alnum = [](const std::string& s, bool dash) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [dash](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || (dash && ch == '-');
      });
    };
    if (!lower_alnum(out.account, false) || out.account.size() > 24 ||
        !(lower_alnum(out.container, true) || out.container == "$root") ||
        out.container.size() > 63) {
      return bad(
          "expected azure://account/container[/prefix] (an account of lower-case letters "
          "and digits, a container of lower-case letters, digits and '-')");
    }
    if (out.prefix.find('\0') != std::string::npos) return bad("the prefix holds a NUL byte");
    return SourceUri(out);
  }
  // From a new user: `--source /abs/dir` (a local directory is a file:// URI).
  const std::string local =
      uri.starts_with("/") ? "; a local directory is file://" + EscapeName(std::string(uri)) : "";
  // A known scheme in another case (from attacking helper 126: "HTTP://h/f" was an "unknown
  // scheme"; RFC 3986 calls schemes case-insensitive, but a source is recorded as given).
  if (const size_t sep = uri.find("://"); sep != std::string::npos && sep <= 5) {
    std::string lower = uri.substr(0, sep);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static constexpr std::string_view kKnown[] = {"hf", "s3",   "gs",    "azure", "r2",
                                                  "cw", "file", "https", "http"};
    if (lower != uri.substr(0, sep) && std::ranges::find(kKnown, lower) != std::end(kKnown)) {
      return bad("the scheme is written in lower case: " + lower + "://");
    }
  }
  return bad(
      "unknown scheme (expected hf://, s3://, gs://, azure://, r2://, cw://, file://, "
      "https:// or http://)" +
      local);
}

Status ValidateSourceUri(const std::string& uri) {
  auto parsed = ParseSourceUri(uri);
  return parsed ? Status::Ok() : parsed.error();
}

Result<std::unique_ptr<Source>> OpenSource(const std::string& uri, const SourceOptions& options) {
  BDN_ASSIGN_OR_RETURN(SourceUri parsed, ParseSourceUri(uri));
  // The sources other than http(s):// use their URI only to name themselves in messages: they get
  // it as shown (from attacking helper 124: "file:///x?SECRET: No such file or directory").
  // An http(s):// source fetches its URL, and hides its query itself.
  const std::string shown = ShownSource(uri);
  if (auto* hf = std::get_if<HfUri>(&parsed)) return OpenHfSource(shown, *hf, options);
  if (auto* file = std::get_if<FileUri>(&parsed)) return OpenFileSource(shown, *file, options);
  if (auto* bucket = std::get_if<BucketUri>(&parsed)) {
    if (bucket->scheme == "gs") return OpenGcsSource(shown, *bucket, options);
    return OpenS3Source(shown, *bucket, options);
  }
  if (auto* azure = std::get_if<AzureUri>(&parsed)) return OpenAzureSource(shown, *azure, options);
  return OpenHttpsSource(uri, std::get<HttpsUri>(parsed), options);
}

}  // namespace bdn::sync
