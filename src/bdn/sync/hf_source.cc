#include "bdn/sync/hf_source.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "bdn/base/text.h"  // EscapeName
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/https_source.h"  // NormalizeEtag
#include "bdn/sync/json_answer.h"
#include "bdn/sync/object_store_internal.h"  // SortUnique

namespace bdn::sync {
namespace {

using nlohmann::json;

bool IsCommitSha(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// A Hub id (an LFS sha256, a git blob id) as the tree and the resolve answers may spell it:
// quoted, weak, "sha256:"-prefixed, in upper case; lower case without any of that.
std::string HubId(std::string_view id) {
  std::string out = NormalizeEtag(id);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.starts_with("sha256:")) out.erase(0, 7);
  return out;
}

bool IsLowerHex(std::string_view s, size_t digits) {
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

constexpr size_t kSha256Digits = 64;  // an LFS oid
constexpr size_t kSha1Digits = 40;    // a git blob id

// A Hub file's bytes, hashed from byte 0 as they pass: at their end, their LFS SHA-256 (an etag
// of 64 hex digits) or their git blob id (SHA-1 of "blob <size>\0" and the bytes; 40 digits)
// must be the listed one, or the stream fails (a CDN or a Hub serving other bytes under the
// right headers). `inner` starts at byte 0; the first `skip_bytes` of it are hashed, not
// delivered, so that a stream opened mid-file is still checked whole.
class ContentCheckedStream : public ByteStream {
 public:
  ContentCheckedStream(std::unique_ptr<ByteStream> inner, uint64_t skip_bytes, std::string uri,
                       SourceObject object)
      : inner_(std::move(inner)),
        skip_bytes_(skip_bytes),
        uri_(std::move(uri)),
        object_(std::move(object)),
        lfs_(object_.etag.size() == kSha256Digits),
        ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), lfs_ ? EVP_sha256() : EVP_sha1(), nullptr) != 1) {
      ctx_.reset();
      return;
    }
    if (!lfs_) {
      const std::string header = "blob " + std::to_string(object_.size_bytes);
      EVP_DigestUpdate(ctx_.get(), header.c_str(), header.size() + 1);  // with its NUL
    }
  }

  Result<size_t> Read(std::span<uint8_t> out) override {
    if (!ctx_) return Err(InternalError(uri_ + ": SHA-256 and SHA-1 are not available"));
    std::vector<uint8_t> skipped;
    while (skip_bytes_ > 0) {
      skipped.resize(static_cast<size_t>(std::min<uint64_t>(skip_bytes_, 1 << 16)));
      BDN_ASSIGN_OR_RETURN(size_t n, inner_->Read(skipped));
      if (n == 0) break;
      EVP_DigestUpdate(ctx_.get(), skipped.data(), n);
      skip_bytes_ -= n;
    }
    BDN_ASSIGN_OR_RETURN(size_t n, inner_->Read(out));
    if (n > 0) {
      EVP_DigestUpdate(ctx_.get(), out.data(), n);
      return n;
    }
    if (!out.empty()) BDN_RETURN_IF_ERROR(Verify());
    return n;
  }

  // Verifies here too, so that a reader that stops at the listed size without reading the end
  // still gets the check.
  Status Finish() override {
    BDN_RETURN_IF_ERROR(inner_->Finish());
    return Verify();
  }

 private:
  Status Verify() {
    if (verified_) return Status::Ok();
    if (!ctx_) return InternalError(uri_ + ": SHA-256 and SHA-1 are not available");
    verified_ = true;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
      hex += kHex[md[i] >> 4];
      hex += kHex[md[i] & 15];
    }
    if (hex == object_.etag) return Status::Ok();
    return WithCode(
        CorruptionError(uri_ + ": file \"" + EscapeName(object_.path) + "\": its bytes have " +
                        (lfs_ ? "SHA-256 " : "git blob id ") + hex + ", not the " + object_.etag +
                        " the Hub lists " + (lfs_ ? "(lfs.oid)" : "(oid)")),
        kSourceChanged);
  }

  std::unique_ptr<ByteStream> inner_;
  uint64_t skip_bytes_;
  const std::string uri_;
  const SourceObject object_;
  const bool lfs_;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
  bool verified_ = false;
};

class HfSource : public Source {
 public:
  HfSource(std::string uri, HfUri parsed, std::string endpoint, SourceOptions options)
      : uri_(std::move(uri)),
        parsed_(std::move(parsed)),
        endpoint_(std::move(endpoint)),
        options_(std::move(options)) {
    token_ = Trim(options_.secret);
    FetcherOptions fo;
    fo.source = uri_;
    fo.source_options = options_;
    if (!token_.empty()) {
      fo.authorization = "Bearer " + token_;
      auto split = SplitUrl(endpoint_);
      fo.auth_origin = split ? split->first : "";
    }
    fo.classify = [this](const std::string& what, const http::Response& r, bool sent, Attempt& a) {
      return ClassifyHub(what, r, sent, a);
    };
    fetcher_ = std::make_shared<HttpFetcher>(std::move(fo));
  }

  const std::string& uri() const override { return uri_; }
  std::string Identity() const override {
    return "hf://" + (parsed_.repo_type == "models" ? std::string() : parsed_.repo_type + "/") +
           parsed_.repo_id;
  }

  Result<SourceListing> List() override {
    SourceListing out;
    BDN_ASSIGN_OR_RETURN(out.revision, ResolveRevision());
    std::string url = Api() + "/tree/" + out.revision + "?recursive=true&expand=false";
    ListingBudget budget(uri_, options_);
    uint64_t entries = 0;
    std::set<std::string> pages = {url};  // a link back to one of them would never end
    while (true) {
      BDN_ASSIGN_OR_RETURN(
          http::Response r,
          fetcher_->Fetch({.url = url, .max_page_bytes = options_.listing.max_page_bytes}));
      auto parsed = ParseJsonAnswer(r.text());
      if (!parsed)
        return Err(WithCode(Malformed("tree listing: " + parsed.error().message()),
                            parsed.error().reason()));
      const json page = std::move(*parsed);
      if (!page.is_array()) return Err(Malformed("tree listing is not a JSON array"));
      for (const json& e : page) {
        const std::string number = "tree entry #" + std::to_string(++entries);
        if (!e.is_object()) return Err(Malformed(number + " is not an object"));
        const std::string type =
            e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
        if (type == "directory") continue;
        if (type != "file") {
          return Err(Malformed(number + " has type " +
                               (e.contains("type") ? e["type"].dump() : "(none)") +
                               ", not \"file\" or \"directory\""));
        }
        if (!e.contains("path") || !e["path"].is_string() || !e.contains("size") ||
            !e["size"].is_number_unsigned()) {
          return Err(Malformed(number + " is a file without a path or size"));
        }
        SourceObject o;
        o.path = e["path"].get<std::string>();
        o.size_bytes = e["size"].get<uint64_t>();
        // The id the bytes are checked against at their end: an LFS file's sha256, else the
        // git blob id. Any other spelling would leave the bytes unchecked.
        const std::string entry = number + " (\"" + EscapeName(o.path) + "\")";
        if (e.contains("lfs") && !e["lfs"].is_null()) {
          const json& lfs = e["lfs"];
          const std::string oid = lfs.is_object() && lfs.contains("oid") && lfs["oid"].is_string()
                                      ? lfs["oid"].get<std::string>()
                                      : "";
          o.etag = HubId(oid);
          if (!IsLowerHex(o.etag, kSha256Digits)) {
            return Err(Malformed(entry + " has lfs.oid \"" + EscapeName(oid) +
                                 "\", not a SHA-256 (64 hex digits)"));
          }
        } else {
          const std::string oid =
              e.contains("oid") && e["oid"].is_string() ? e["oid"].get<std::string>() : "";
          o.etag = HubId(oid);
          if (!IsLowerHex(o.etag, kSha1Digits)) {
            return Err(Malformed(entry + " has oid \"" + EscapeName(oid) +
                                 "\", not a git blob id (40 hex digits)"));
          }
        }
        out.objects.push_back(std::move(o));
      }
      auto link = r.Header("link");
      auto next = link ? NextPageLink(*link) : std::nullopt;
      BDN_RETURN_IF_ERROR(
          budget.Page(r.body.size() + (next ? next->size() : 0), page.size(), out.objects));
      if (!next) break;
      url = ResolveLocation(url, *next);
      if (!pages.insert(url).second) {
        return Err(
            WithCode(Malformed("the tree listing's next-page link repeats (the listing would "
                               "never end)"),
                     kListingTooLarge));
      }
    }
    // As the object stores' "no objects under the prefix": nothing to seal is not a version.
    if (out.objects.empty()) {
      return Err(
          WithCode(NotFoundError(uri_ + ": the repository has no files at commit " + out.revision),
                   kSourceNotFound));
    }
    // A path listed twice is refused as the object stores refuse it: merging the two (an unstable
    // sort kept either) made the survivor's etag look "changed during the sync".
    BDN_RETURN_IF_ERROR(SortUnique(uri_, out.objects));
    commit_ = out.revision;
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    if (commit_.empty()) return Err(InternalError(uri_ + ": Open before List"));
    ObjectRequest req;
    req.url = endpoint_ + "/" + FilePrefix() + parsed_.repo_id + "/resolve/" + commit_ + "/" +
              PercentEncode(object.path, "/");
    req.object = object;
    req.offset = offset;
    // The Hub states an LFS file's sha256 and size on its redirect to the CDN, a plain file's
    // git blob id on its direct answer. Each try (a resumption too) checks its own answer.
    auto checked = std::make_shared<bool>(false);
    req.on_attempt = [checked] { *checked = false; };
    req.on_redirect = [this, object, checked](const http::Response& hop) -> Status {
      auto etag = hop.Header("x-linked-etag");
      if (!etag) return Status::Ok();
      *checked = true;
      return Compare(object, HubId(*etag), hop.Header("x-linked-size"));
    };
    req.check = [this, object, checked](int status, const Headers& headers) -> Status {
      if (!*checked) {
        auto etag = FindHeader(headers, "x-linked-etag");
        if (!etag) etag = FindHeader(headers, "etag");
        if (etag) {
          BDN_RETURN_IF_ERROR(Compare(object, HubId(*etag), FindHeader(headers, "x-linked-size")));
        }
      }
      return CheckObjectSize(uri_, object, status, headers);
    };
    // The bytes are checked whole against the listed id, from byte 0 even when asked for from
    // `offset`; List refuses an entry whose id could not be checked.
    if (IsLowerHex(object.etag, kSha256Digits) || IsLowerHex(object.etag, kSha1Digits)) {
      req.offset = 0;
      return std::unique_ptr<ByteStream>(std::make_unique<ContentCheckedStream>(
          std::make_unique<HttpObjectStream>(fetcher_, req), offset, uri_, object));
    }
    return std::unique_ptr<ByteStream>(std::make_unique<HttpObjectStream>(fetcher_, req));
  }

 private:
  std::string Api() const {
    return endpoint_ + "/api/" + parsed_.repo_type + "/" + parsed_.repo_id;
  }
  std::string FilePrefix() const {
    return parsed_.repo_type == "models" ? std::string() : parsed_.repo_type + "/";
  }
  std::string Revision() const {
    return parsed_.revision.empty() ? std::string("main") : parsed_.revision;
  }

  Status Malformed(const std::string& what) const {
    return WithCode(FailedPreconditionError(uri_ + ": unexpected answer from the Hub: " + what),
                    kInvalidAnswer);
  }

  Status Compare(const SourceObject& object, const std::string& etag,
                 std::optional<std::string_view> size) const {
    if (etag != object.etag) {
      return WithCode(
          FailedPreconditionError(uri_ + ": file \"" + EscapeName(object.path) +
                                  "\": changed during the sync (etag " + EscapeName(object.etag) +
                                  " listed, " + EscapeName(etag) + " now)"),
          kSourceChanged);
    }
    if (size && *size != std::to_string(object.size_bytes)) {
      return WithCode(FailedPreconditionError(uri_ + ": file \"" + EscapeName(object.path) +
                                              "\": changed during the sync (" +
                                              std::to_string(object.size_bytes) +
                                              " bytes listed, " + EscapeName(*size) + " now)"),
                      kSourceChanged);
    }
    return Status::Ok();
  }

  // The commit the job works from: the pinned one, or what the URI's revision points to now.
  Result<std::string> ResolveRevision() {
    const std::string rev =
        options_.pinned_revision.empty() ? Revision() : options_.pinned_revision;
    BDN_ASSIGN_OR_RETURN(http::Response r,
                         fetcher_->Fetch({.url = Api() + "/revision/" + PercentEncode(rev)}));
    // Its top-level fields alone: "siblings" lists every file of the repository.
    auto parsed = ParseJsonAnswer(r.text(), {.keep_depth = 1});
    if (!parsed)
      return Err(WithCode(Malformed("revision info: " + parsed.error().message()),
                          parsed.error().reason()));
    const json info = std::move(*parsed);
    if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() ||
        !IsCommitSha(info["sha"].get<std::string>())) {
      return Err(Malformed("revision info without a commit sha"));
    }
    // A gated repository needs a token even for its files' metadata to be worth anything: say so
    // now rather than at the first download.
    const bool gated = info.contains("gated") && !(info["gated"].is_boolean() && !info["gated"]);
    if (gated && token_.empty()) {
      return Err(WithCode(
          PermissionDeniedError(uri_ + ": a gated repository: give a token of an account that "
                                       "was granted access (--auth-secret-name)"),
          kAccessDenied));
    }
    if (info.value("disabled", false)) {
      return Err(WithCode(PermissionDeniedError(uri_ + ": access to this repository is disabled"),
                          kAccessDenied));
    }
    return info["sha"].get<std::string>();
  }

  std::optional<Status> ClassifyHub(const std::string& what, const http::Response& r, bool sent,
                                    Attempt& a) const {
    std::string code(r.Header("x-error-code").value_or(""));
    std::string message(r.Header("x-error-message").value_or(""));
    const std::string hint =
        sent ? "" : " (or private or gated: give a token with --auth-secret-name)";
    const std::string token_name = options_.secret_name.empty()
                                       ? "the token"
                                       : "the token in secret \"" + options_.secret_name + "\"";
    if (r.status == 401 && message == "Invalid credentials in Authorization header") {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + token_name + " was refused (" + message + ")"),
          kBadCredentials);
    }
    if (code == "RevisionNotFound") {
      return WithCode(
          NotFoundError(uri_ + ": revision \"" +
                        (options_.pinned_revision.empty() ? Revision() : options_.pinned_revision) +
                        "\" not found"),
          kRevisionNotFound);
    }
    if (code == "GatedRepo") {
      return WithCode(PermissionDeniedError(
                          uri_ + ": a gated repository: " +
                          (sent ? token_name + " has no access to it (request access on the Hub)"
                                : std::string("give a token of an account that was granted "
                                              "access (--auth-secret-name)"))),
                      kAccessDenied);
    }
    if (code == "EntryNotFound") {
      return WithCode(NotFoundError(uri_ + ": " + what + ": file not found at commit " + commit_),
                      kSourceNotFound);
    }
    if (message == "Access to this resource is disabled.") {
      return WithCode(PermissionDeniedError(uri_ + ": access to this repository is disabled"),
                      kAccessDenied);
    }
    if (code == "RepoNotFound" || (r.status == 401 && what.find(" /api/") != std::string::npos)) {
      return WithCode(NotFoundError(uri_ + ": repository not found" + hint), kSourceNotFound);
    }
    if (r.status == 403) {
      return WithCode(PermissionDeniedError(uri_ + ": " + what + ": access denied" +
                                            (message.empty() ? "" : " (" + message + ")")),
                      kAccessDenied);
    }
    (void)a;
    return std::nullopt;
  }

  const std::string uri_;
  const HfUri parsed_;
  const std::string endpoint_;
  const SourceOptions options_;
  std::string token_;
  std::shared_ptr<HttpFetcher> fetcher_;
  std::string commit_;
};

}  // namespace

std::optional<std::string> NextPageLink(std::string_view link) {
  // Link: <https://host/api/...&cursor=abc>; rel="next", <...>; rel="prev"
  while (!link.empty()) {
    size_t lt = link.find('<');
    size_t gt = link.find('>', lt == std::string_view::npos ? 0 : lt);
    if (lt == std::string_view::npos || gt == std::string_view::npos) return std::nullopt;
    std::string_view url = link.substr(lt + 1, gt - lt - 1);
    size_t comma = link.find(',', gt);
    std::string_view params = link.substr(
        gt + 1, comma == std::string_view::npos ? std::string_view::npos : comma - gt - 1);
    if (params.find("rel=\"next\"") != std::string_view::npos ||
        params.find("rel=next") != std::string_view::npos) {
      return std::string(url);
    }
    if (comma == std::string_view::npos) break;
    link.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

Result<std::string> HfEndpoint() {
  std::string endpoint = "https://huggingface.co";
  if (const char* env = std::getenv("HF_ENDPOINT"); env && *env) endpoint = env;
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  auto split = SplitUrl(endpoint);
  if (!split) {
    return Err(InvalidArgumentError("HF_ENDPOINT \"" + http::ShownUrl(endpoint) +
                                    "\": must be http:// or https://"));
  }
  if (split->first.find('@') != std::string::npos) {
    return Err(InvalidArgumentError("HF_ENDPOINT \"" + http::ShownUrl(endpoint) +
                                    "\": credentials in the URL are refused (give a token "
                                    "with --auth-secret-name)"));
  }
  return endpoint;
}

Result<std::unique_ptr<Source>> OpenHfSource(const std::string& uri, const HfUri& parsed,
                                             const SourceOptions& options) {
  BDN_ASSIGN_OR_RETURN(std::string endpoint, HfEndpoint());
  return std::unique_ptr<Source>(std::make_unique<HfSource>(uri, parsed, endpoint, options));
}

}  // namespace bdn::sync
