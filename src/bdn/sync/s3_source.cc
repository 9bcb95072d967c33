// s3://, r2://, cw:// and gs:// (HMAC): ListObjectsV2 and GetObject, signed with SigV4 by libcurl.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "bdn/base/text.h"
#include "bdn/objstore/xml_listing.h"
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/object_store_internal.h"
#include "bdn/sync/object_store_sources.h"

namespace bdn::sync {
namespace {

struct S3Target {
  std::string bucket_url;  // the bucket's URL without a trailing '/'
  bool virtual_hosted = false;
  std::string region;
};

Result<S3Target> TargetOf(const std::string& uri, const BucketUri& b, const SourceOptions& o,
                          const std::string& secret_region) {
  S3Target t;
  const bool aws_like = b.scheme == "s3" || b.scheme == "cw";
  t.region = !o.region.empty()        ? o.region
             : !secret_region.empty() ? secret_region
             : aws_like               ? "us-east-1"
                                      : "auto";
  if (!o.endpoint.empty()) {
    BDN_ASSIGN_OR_RETURN(std::string endpoint, CheckEndpoint(uri, o.endpoint));
    if (size_t at = endpoint.find("{bucket}"); at != std::string::npos) {
      t.bucket_url = endpoint.replace(at, 8, b.bucket);
      t.virtual_hosted = true;
    } else {
      t.bucket_url = endpoint + "/" + b.bucket;
    }
    return t;
  }
  if (b.scheme == "s3") {
    if (b.bucket.find('.') != std::string::npos) {
      t.bucket_url = "https://s3." + t.region + ".amazonaws.com/" + b.bucket;
    } else {
      t.bucket_url = "https://" + b.bucket + ".s3." + t.region + ".amazonaws.com";
      t.virtual_hosted = true;
    }
  } else if (b.scheme == "r2") {
    t.bucket_url = "https://" + b.account + ".r2.cloudflarestorage.com/" + b.bucket;
  } else if (b.scheme == "cw") {
    t.bucket_url = "https://" + b.bucket + ".cwobject.com";
    t.virtual_hosted = true;
  } else {
    t.bucket_url = "https://storage.googleapis.com/" + b.bucket;
  }
  return t;
}

class S3Source : public Source {
 public:
  S3Source(std::string uri, BucketUri parsed, S3Target target, std::optional<AwsCredentials> creds,
           SourceOptions options)
      : uri_(std::move(uri)),
        parsed_(std::move(parsed)),
        target_(std::move(target)),
        options_(std::move(options)),
        list_prefix_(FolderPrefix(parsed_.prefix)) {
    FetcherOptions fo;
    fo.source = uri_;
    fo.source_options = options_;
    if (creds) {
      auto split = SplitUrl(target_.bucket_url);
      fo.auth_origin = split ? split->first : "";
      fo.sign = [creds = *creds, region = target_.region](http::Request& req) {
        objstore::SignS3Request(req, creds, region);
        return Status::Ok();
      };
    }
    fo.classify = [this](const std::string& what, const http::Response& r, bool sent, Attempt& a) {
      return ClassifyS3(what, r, sent, a);
    };
    fetcher_ = std::make_shared<HttpFetcher>(std::move(fo));
  }

  const std::string& uri() const override { return uri_; }
  std::string Identity() const override {
    return uri_ + (options_.endpoint.empty() ? "" : " at " + target_.bucket_url);
  }

  Result<SourceListing> List() override {
    SourceListing out;
    std::string token;
    std::set<std::string> tokens;
    uint64_t keys_seen = 0;
    ListingBudget budget(uri_, options_);
    uint64_t pages = 0;
    while (true) {
      std::vector<std::pair<std::string, std::string>> params = {{"list-type", "2"},
                                                                 {"prefix", list_prefix_}};
      if (!token.empty()) params.emplace_back("continuation-token", token);
      const std::string url =
          target_.bucket_url + (target_.virtual_hosted ? "/" : "") + "?" + CanonicalQuery(params);
      BDN_ASSIGN_OR_RETURN(
          http::Response r,
          fetcher_->Fetch({.url = url, .max_page_bytes = options_.listing.max_page_bytes}));
      ++pages;
      auto page = ParseS3ListPage(r.text());
      if (!page) {
        const std::string& why = page.error().message();
        auto split = SplitUrl(url);
        return Err(Malformed(
            "page " + std::to_string(pages) + " (GET " + (split ? split->second : url) +
            "): " + why +
            (why.starts_with("not XML")
                 ? "; a key there may hold a character XML cannot carry (a control character): "
                   "sync a prefix that leaves it out"
                 : "")));
      }
      for (ListedObject& o : page->objects) {
        ++keys_seen;
        BDN_RETURN_IF_ERROR(
            AddListed(uri_, target_.bucket_url, list_prefix_, std::move(o), out.objects));
      }
      BDN_RETURN_IF_ERROR(budget.Page(r.body.size(), page->objects.size(), out.objects));
      if (!page->truncated) break;
      if (!tokens.insert(page->next_token).second) {
        return Err(
            WithCode(Malformed("the continuation token repeats (the listing would never end)"),
                     kListingTooLarge));
      }
      token = std::move(page->next_token);
    }
    BDN_RETURN_IF_ERROR(SortUnique(uri_, out.objects));
    if (out.objects.empty() && keys_seen == 0 && !parsed_.prefix.empty() &&
        parsed_.prefix.back() != '/') {
      BDN_ASSIGN_OR_RETURN(auto single, HeadSingle());
      if (single) out.objects.push_back(std::move(*single));
    }
    if (out.objects.empty()) return Err(NothingUnder(uri_, list_prefix_));
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    const std::string key = single_key_.empty() ? list_prefix_ + object.path : single_key_;
    return OpenObjectStream(
        fetcher_, EtagCheckedRequest(uri_, target_.bucket_url + "/" + PercentEncode(key, "/"),
                                     object, offset));
  }

 private:
  Status Malformed(const std::string& what) const {
    return WithCode(FailedPreconditionError(uri_ + ": unexpected listing from " +
                                            target_.bucket_url + ": " + what),
                    kInvalidAnswer);
  }

  // The object the prefix names, when it names no folder.
  Result<std::optional<SourceObject>> HeadSingle() {
    HttpFetcher::Call call{.method = http::Method::kHead,
                           .url = target_.bucket_url + "/" + PercentEncode(parsed_.prefix, "/")};
    auto r = fetcher_->Fetch(call);
    if (!r) {
      if (r.error().reason() == kSourceNotFound) return std::optional<SourceObject>();
      return Err(r.error());
    }
    auto size = ParseByteCount(r->Header("content-length").value_or(""));
    if (!size) return Err(Malformed("HEAD of the object gave no Content-Length"));
    single_key_ = parsed_.prefix;
    std::string name = parsed_.prefix.substr(parsed_.prefix.rfind('/') + 1);
    return std::optional<SourceObject>(StoreObject(name, *size, r->Header("etag").value_or("")));
  }

  std::optional<Status> ClassifyS3(const std::string& what, const http::Response& r, bool sent,
                                   Attempt&) const {
    auto err = ParseStoreError(r.text());
    const std::string code = err ? err->code : "";
    const std::string detail =
        code.empty() ? "" : " (" + code + (err->message.empty() ? "" : ": " + err->message) + ")";
    const std::string bucket = "bucket \"" + parsed_.bucket + "\"";
    if (auto region = r.Header("x-amz-bucket-region");
        region && *region != target_.region &&
        (r.status == 301 || code == "PermanentRedirect" ||
         code == "AuthorizationHeaderMalformed")) {
      return WithCode(
          NotFoundError(uri_ + ": " + bucket + " is in region " + std::string(*region) + ", not " +
                        target_.region + ": give --region " + std::string(*region)),
          kSourceNotFound);
    }
    if (code == "NoSuchBucket") {
      return WithCode(NotFoundError(uri_ + ": " + bucket + " not found" + detail), kSourceNotFound);
    }
    if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "InvalidToken" ||
        code == "ExpiredToken" || code == "TokenRefreshRequired" || code == "InvalidSecurity" ||
        (r.status == 401 && sent)) {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + SecretNamed(options_) + " were refused" + detail),
          kBadCredentials);
    }
    if (code == "AccessDenied" || code == "AllAccessDisabled" || r.status == 401 ||
        r.status == 403) {
      return WithCode(PermissionDeniedError(
                          uri_ + ": " + what + ": access denied" + detail +
                          (sent ? "" : " (anonymous: give a key pair with --auth-secret-name)")),
                      kAccessDenied);
    }
    return std::nullopt;
  }

  const std::string uri_;
  const BucketUri parsed_;
  const S3Target target_;
  const SourceOptions options_;
  const std::string list_prefix_;
  std::shared_ptr<HttpFetcher> fetcher_;
  std::string single_key_;  // set by List when the prefix names one object
};

std::string JsonString(const nlohmann::json& j, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (j.contains(n) && j[n].is_string()) return j[n].get<std::string>();
  }
  return "";
}

}  // namespace

Result<AwsCredentials> ParseAwsSecret(std::string_view secret, const std::string& secret_name) {
  auto bad = [&](const std::string& why) {
    return Err(
        WithCode(InvalidArgumentError("secret \"" + secret_name + "\": " + why), kInvalidSecret));
  };
  nlohmann::json j = nlohmann::json::parse(secret, nullptr, false);
  if (!j.is_object()) {
    return bad("not a JSON object (expected {\"access_key_id\": ..., \"secret_access_key\": ...})");
  }
  AwsCredentials c;
  c.access_key_id =
      JsonString(j, {"access_key_id", "AccessKeyId", "aws_access_key_id", "access_id", "accessId"});
  c.secret_access_key =
      JsonString(j, {"secret_access_key", "SecretAccessKey", "aws_secret_access_key", "secret"});
  c.session_token = JsonString(j, {"session_token", "SessionToken", "aws_session_token"});
  c.region = JsonString(j, {"region"});
  if (c.access_key_id.empty()) return bad("no \"access_key_id\"");
  if (c.secret_access_key.empty()) return bad("no \"secret_access_key\"");
  auto printable = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char ch) { return ch > 0x20 && ch < 0x7f; });
  };
  if (!printable(c.access_key_id) || !printable(c.secret_access_key) ||
      !printable(c.session_token)) {
    return bad("a key holds spaces or control characters");
  }
  return c;
}

Result<std::unique_ptr<Source>> OpenS3Source(const std::string& uri, const BucketUri& parsed,
                                             const SourceOptions& options) {
  std::optional<AwsCredentials> creds;
  if (!options.secret.empty()) {
    BDN_ASSIGN_OR_RETURN(creds, ParseAwsSecret(options.secret, options.secret_name));
  }
  BDN_ASSIGN_OR_RETURN(S3Target target,
                       TargetOf(uri, parsed, options, creds ? creds->region : std::string()));
  return std::unique_ptr<Source>(
      std::make_unique<S3Source>(uri, parsed, std::move(target), std::move(creds), options));
}

}  // namespace bdn::sync
