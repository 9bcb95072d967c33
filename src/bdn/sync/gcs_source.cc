// gs://bucket/prefix over the JSON API, with an OAuth2 token from a service-account key (the JWT
// bearer flow, RFC 7523), or over the XML API with HMAC keys (s3_source.cc).
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "bdn/base/clock.h"
#include "bdn/base/text.h"
#include "bdn/sync/crypto.h"
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/json_answer.h"
#include "bdn/sync/object_store_internal.h"
#include "bdn/sync/object_store_sources.h"

namespace bdn::sync {
namespace {

using nlohmann::json;

constexpr char kScope[] = "https://www.googleapis.com/auth/devstorage.read_only";
constexpr char kTokenUri[] = "https://oauth2.googleapis.com/token";

struct ServiceAccount {
  std::string client_email;
  std::string private_key;  // PEM
  std::string token_uri;
};

Result<ServiceAccount> ParseServiceAccount(const json& j, const std::string& secret_name) {
  auto bad = [&](const std::string& why) {
    return Err(
        WithCode(InvalidArgumentError("secret \"" + secret_name + "\": " + why), kInvalidSecret));
  };
  ServiceAccount sa;
  auto str = [&](const char* name) {
    return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string();
  };
  if (str("type") != "service_account") {
    return bad("a service-account key has \"type\": \"service_account\"");
  }
  sa.client_email = str("client_email");
  sa.private_key = str("private_key");
  sa.token_uri = str("token_uri");
  if (sa.token_uri.empty()) sa.token_uri = kTokenUri;
  if (sa.client_email.empty()) return bad("the service-account key has no \"client_email\"");
  if (sa.private_key.find("PRIVATE KEY-----") == std::string::npos) {
    return bad("the service-account key has no PEM \"private_key\"");
  }
  if (!SplitUrl(sa.token_uri)) return bad("\"token_uri\" is not an http(s) URL");
  return sa;
}

// OAuth2 access tokens of one service account, fetched when needed and refreshed 5 minutes
// before they expire. Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string uri, ServiceAccount sa, const SourceOptions& options)
      : uri_(std::move(uri)), sa_(std::move(sa)), options_(options) {
    FetcherOptions fo;
    fo.source = uri_;
    fo.source_options = options_;
    fo.classify = [this](const std::string& what, const http::Response& r, bool,
                         Attempt&) -> std::optional<Status> {
      // RFC 6749 §5.2: {"error": "invalid_grant", "error_description": "..."}.
      json body = ParseJsonAnswer(r.text()).value_or(json(json::value_t::discarded));
      std::string error = body.is_object() && body.contains("error") && body["error"].is_string()
                              ? body["error"].get<std::string>()
                              : "";
      std::string description = body.is_object() && body.contains("error_description") &&
                                        body["error_description"].is_string()
                                    ? body["error_description"].get<std::string>()
                                    : "";
      if (r.status == 400 || r.status == 401 || r.status == 403) {
        return WithCode(
            PermissionDeniedError(uri_ + ": " + SecretNamed(options_) + " (service account " +
                                  sa_.client_email + ") were refused by " + sa_.token_uri + " (" +
                                  what + ": HTTP " + std::to_string(r.status) +
                                  (error.empty() ? "" : ", " + error) +
                                  (description.empty() ? "" : ": " + description) + ")"),
            kBadCredentials);
      }
      return std::nullopt;
    };
    fetcher_ = std::make_shared<HttpFetcher>(std::move(fo));
  }

  // "Bearer <token>".
  Result<std::string> Authorization() {
    MutexLock lock(mu_);
    const WallTime now = Clock::Real()->WallNow();
    if (!token_.empty() && now + std::chrono::minutes(5) < expiry_) return "Bearer " + token_;
    const int64_t iat =
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    const std::string header = Base64UrlEncode(R"({"alg":"RS256","typ":"JWT"})");
    const std::string claims = Base64UrlEncode(json{
        {"iss", sa_.client_email},
        {"scope", kScope},
        {"aud", sa_.token_uri},
        {"iat", iat},
        {"exp", iat + 3600}}.dump());
    auto signature = Rs256Sign(sa_.private_key, header + "." + claims);
    if (!signature) {
      return Err(WithCode(InvalidArgumentError("secret \"" + options_.secret_name +
                                               "\": the service-account key's private_key: " +
                                               signature.error().message()),
                          kInvalidSecret));
    }
    const std::string form =
        "grant_type=" + PercentEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") +
        "&assertion=" + header + "." + claims + "." + Base64UrlEncode(*signature);
    HttpFetcher::Call call;
    call.method = http::Method::kPost;
    call.url = sa_.token_uri;
    call.body = form;
    call.content_type = "application/x-www-form-urlencoded";
    BDN_ASSIGN_OR_RETURN(http::Response r, fetcher_->Fetch(call));
    json answer = ParseJsonAnswer(r.text()).value_or(json(json::value_t::discarded));
    if (!answer.is_object() || !answer.contains("access_token") ||
        !answer["access_token"].is_string() || answer["access_token"].get<std::string>().empty()) {
      return Err(InternalError(uri_ + ": " + sa_.token_uri + ": the answer has no access_token"));
    }
    int64_t expires_in = 3600;
    if (answer.contains("expires_in") && answer["expires_in"].is_number_integer()) {
      expires_in = std::clamp<int64_t>(answer["expires_in"].get<int64_t>(), 0, 86400);
    }
    token_ = answer["access_token"].get<std::string>();
    expiry_ = now + std::chrono::seconds(expires_in);
    return "Bearer " + token_;
  }

 private:
  const std::string uri_;
  const ServiceAccount sa_;
  const SourceOptions options_;
  std::shared_ptr<HttpFetcher> fetcher_;
  Mutex mu_;
  std::string token_;
  std::chrono::system_clock::time_point expiry_;
};

class GcsSource : public Source {
 public:
  GcsSource(std::string uri, BucketUri parsed, std::string endpoint,
            std::shared_ptr<TokenSource> tokens, SourceOptions options)
      : uri_(std::move(uri)),
        parsed_(std::move(parsed)),
        endpoint_(std::move(endpoint)),
        options_(std::move(options)),
        list_prefix_(FolderPrefix(parsed_.prefix)),
        sends_credentials_(tokens != nullptr) {
    FetcherOptions fo;
    fo.source = uri_;
    fo.source_options = options_;
    if (tokens) {
      auto split = SplitUrl(endpoint_);
      fo.auth_origin = split ? split->first : "";
      fo.sign = [tokens](http::Request& req) -> Status {
        BDN_ASSIGN_OR_RETURN(std::string auth, tokens->Authorization());
        req.headers.emplace_back("Authorization", std::move(auth));
        return Status::Ok();
      };
    }
    fo.classify = [this](const std::string& what, const http::Response& r, bool, Attempt&) {
      return ClassifyGcs(what, r);
    };
    fetcher_ = std::make_shared<HttpFetcher>(std::move(fo));
  }

  const std::string& uri() const override { return uri_; }
  std::string Identity() const override {
    return uri_ + (options_.endpoint.empty() ? "" : " at " + endpoint_);
  }

  Result<SourceListing> List() override {
    SourceListing out;
    std::string token;
    std::set<std::string> tokens;
    uint64_t items_seen = 0;
    ListingBudget budget(uri_, options_);
    while (true) {
      const uint64_t items_before = items_seen;
      std::string url = Bucket() +
                        "/o?fields=" + PercentEncode("items(name,size,generation),nextPageToken") +
                        "&maxResults=1000&prefix=" + PercentEncode(list_prefix_);
      if (!token.empty()) url += "&pageToken=" + PercentEncode(token);
      BDN_ASSIGN_OR_RETURN(
          http::Response r,
          fetcher_->Fetch({.url = url, .max_page_bytes = options_.listing.max_page_bytes}));
      auto parsed = ParseJsonAnswer(r.text());
      if (!parsed) {
        return Err(WithCode(Malformed(parsed.error().message()), parsed.error().reason()));
      }
      const json page = std::move(*parsed);
      if (!page.is_object()) return Err(Malformed("a listing page is not a JSON object"));
      if (page.contains("items")) {
        if (!page["items"].is_array()) return Err(Malformed("\"items\" is not an array"));
        for (const json& item : page["items"]) {
          ++items_seen;
          BDN_ASSIGN_OR_RETURN(SourceObject o, ObjectOf(item, items_seen));
          if (o.path.empty()) continue;  // a "folder" marker
          out.objects.push_back(std::move(o));
        }
      }
      BDN_RETURN_IF_ERROR(budget.Page(r.body.size(), items_seen - items_before, out.objects));
      if (!page.contains("nextPageToken")) break;
      if (!page["nextPageToken"].is_string() || page["nextPageToken"].get<std::string>().empty()) {
        return Err(Malformed("\"nextPageToken\" is not a string"));
      }
      token = page["nextPageToken"].get<std::string>();
      if (!tokens.insert(token).second) {
        return Err(WithCode(Malformed("the page token repeats (the listing would never end)"),
                            kListingTooLarge));
      }
    }
    BDN_RETURN_IF_ERROR(SortUnique(uri_, out.objects));
    if (out.objects.empty() && items_seen == 0 && !parsed_.prefix.empty() &&
        parsed_.prefix.back() != '/') {
      auto r = fetcher_->Fetch({.url = Bucket() + "/o/" + PercentEncode(parsed_.prefix) +
                                       "?fields=" + PercentEncode("name,size,generation")});
      if (r) {
        json item = ParseJsonAnswer(r->text()).value_or(json(json::value_t::discarded));
        single_name_ = parsed_.prefix;
        BDN_ASSIGN_OR_RETURN(SourceObject o, ObjectOf(item, 1));
        out.objects.push_back(std::move(o));
      } else if (r.error().reason() != kSourceNotFound) {
        return Err(r.error());
      }
    }
    if (out.objects.empty()) return Err(NothingUnder(uri_, list_prefix_));
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    const std::string name = single_name_.empty() ? list_prefix_ + object.path : single_name_;
    ObjectRequest req;
    // Asking for the listed generation: a rewritten object is a 404, never other bytes.
    req.url = Bucket() + "/o/" + PercentEncode(name) +
              "?alt=media&generation=" + PercentEncode(object.etag);
    req.object = object;
    req.offset = offset;
    req.check = [this, object](int status, const Headers& headers) -> Status {
      auto generation = FindHeader(headers, "x-goog-generation");
      if (generation && *generation != object.etag) {
        return ChangedEtag(uri_, object, std::string(*generation));
      }
      return CheckObjectSize(uri_, object, status, headers);
    };
    req.on_error = [this, object](const http::Response& r) -> std::optional<Status> {
      if (r.status == 404) {
        return WithCode(FailedPreconditionError(uri_ + ": object \"" + EscapeName(object.path) +
                                                "\": changed or removed during the sync "
                                                "(generation " +
                                                object.etag + " is gone)"),
                        kSourceChanged);
      }
      return ObjectGone(uri_, object, r.status);
    };
    req.pin = std::make_shared<ValidatorPin>();
    return OpenObjectStream(fetcher_, std::move(req));
  }

 private:
  std::string Bucket() const {
    return endpoint_ + "/storage/v1/b/" + PercentEncode(parsed_.bucket);
  }

  Status Malformed(const std::string& what) const {
    return WithCode(
        FailedPreconditionError(uri_ + ": unexpected listing from " + endpoint_ + ": " + what),
        kInvalidAnswer);
  }

  // An objects resource ({"name", "size": "123", "generation": "456"}) as a SourceObject.
  Result<SourceObject> ObjectOf(const json& item, uint64_t n) const {
    auto field = [&](const char* name) -> std::optional<std::string> {
      if (!item.is_object() || !item.contains(name) || !item[name].is_string()) return std::nullopt;
      return item[name].get<std::string>();
    };
    auto name = field("name");
    auto size = field("size");
    auto generation = field("generation");
    const std::string which = "object #" + std::to_string(n);
    if (!name || name->empty()) return Err(Malformed(which + " has no \"name\""));
    if (!size || !ParseByteCount(*size)) {
      return Err(Malformed(which + " (\"" + EscapeName(*name) + "\") has no byte count \"size\""));
    }
    if (!generation || !ParseByteCount(*generation)) {
      return Err(Malformed(which + " (\"" + EscapeName(*name) + "\") has no \"generation\""));
    }
    std::string path;
    if (single_name_.empty() || *name != single_name_) {
      if (!name->starts_with(list_prefix_)) {
        return Err(Malformed("object \"" + EscapeName(*name) + "\" is not under the prefix \"" +
                             EscapeName(list_prefix_) + "\""));
      }
      path = name->back() == '/' ? "" : name->substr(list_prefix_.size());
    } else {
      path = name->substr(name->rfind('/') + 1);
    }
    return SourceObject{path, *ParseByteCount(*size), *generation, 0644};
  }

  std::optional<Status> ClassifyGcs(const std::string& what, const http::Response& r) const {
    // {"error": {"code": 404, "message": "The specified bucket does not exist.", ...}}
    json body = ParseJsonAnswer(r.text()).value_or(json(json::value_t::discarded));
    std::string message;
    if (body.is_object() && body.contains("error") && body["error"].is_object() &&
        body["error"].contains("message") && body["error"]["message"].is_string()) {
      message = body["error"]["message"].get<std::string>();
    }
    const std::string detail = message.empty() ? "" : " (" + message + ")";
    if (r.status == 404 && what.find("/o?") != std::string::npos) {
      return WithCode(
          NotFoundError(uri_ + ": bucket \"" + parsed_.bucket + "\" not found" + detail),
          kSourceNotFound);
    }
    if (r.status == 401 && sends_credentials_) {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + SecretNamed(options_) + " were refused" + detail),
          kBadCredentials);
    }
    if (r.status == 401 || r.status == 403) {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + what + ": access denied" + detail +
                                (sends_credentials_ ? ""
                                                    : " (anonymous: give a service-account key "
                                                      "with --auth-secret-name)")),
          kAccessDenied);
    }
    return std::nullopt;
  }

  const std::string uri_;
  const BucketUri parsed_;
  const std::string endpoint_;
  const SourceOptions options_;
  const std::string list_prefix_;
  const bool sends_credentials_;
  std::shared_ptr<HttpFetcher> fetcher_;
  std::string single_name_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenGcsSource(const std::string& uri, const BucketUri& parsed,
                                              const SourceOptions& options) {
  std::shared_ptr<TokenSource> tokens;
  if (!options.secret.empty()) {
    json j = json::parse(options.secret, nullptr, false);
    if (!j.is_object()) {
      return Err(
          WithCode(InvalidArgumentError("secret \"" + options.secret_name +
                                        "\": not a JSON object (expected a service-account key or "
                                        "{\"access_id\": ..., \"secret\": ...})"),
                   kInvalidSecret));
    }
    if (!j.contains("type") && !j.contains("private_key")) {
      return OpenS3Source(uri, parsed, options);  // an HMAC key pair: the XML API
    }
    BDN_ASSIGN_OR_RETURN(ServiceAccount sa, ParseServiceAccount(j, options.secret_name));
    tokens = std::make_shared<TokenSource>(uri, std::move(sa), options);
  }
  std::string endpoint = "https://storage.googleapis.com";
  if (!options.endpoint.empty()) {
    BDN_ASSIGN_OR_RETURN(endpoint, CheckEndpoint(uri, options.endpoint));
  }
  return std::unique_ptr<Source>(
      std::make_unique<GcsSource>(uri, parsed, std::move(endpoint), std::move(tokens), options));
}

}  // namespace bdn::sync
