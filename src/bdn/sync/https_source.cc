#include "bdn/sync/https_source.h"

#include "bdn/sync/http_fetch.h"
#include "bdn/sync/source_uri.h"  // ShownSource

namespace bdn::sync {

namespace {

std::string_view TrimBlanks(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t first = s.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}

}  // namespace

bool IsWeakEtag(std::string_view etag) { return TrimBlanks(etag).starts_with("W/"); }

std::string NormalizeEtag(std::string_view etag) {
  etag = TrimBlanks(etag);
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

namespace {

// The etag of an answer: its ETag, else "lm:" + Last-Modified, else "".
std::string EtagOf(const Headers& headers) {
  if (auto e = FindHeader(headers, "etag")) return NormalizeEtag(*e);
  if (auto lm = FindHeader(headers, "last-modified")) return "lm:" + std::string(*lm);
  return "";
}

class HttpsSource : public Source {
 public:
  HttpsSource(std::string uri, std::shared_ptr<HttpFetcher> fetcher)
      : uri_(std::move(uri)), shown_(ShownSource(uri_)), fetcher_(std::move(fetcher)) {}

  // Messages name the source as shown_ (its query may hold a presigned signature).
  const std::string& uri() const override { return shown_; }
  std::string Identity() const override { return uri_; }

  Result<SourceListing> List() override {
    HttpFetcher::Call call{.method = http::Method::kHead, .url = uri_};
    BDN_ASSIGN_OR_RETURN(http::Response r, fetcher_->Fetch(call));
    auto length = r.Header("content-length");
    if (!length) {
      return Err(InternalError(shown_ + ": HEAD: the answer has no Content-Length"));
    }
    // At most 19 digits: 18446744073709551621 wrapped to 5 when added up digit by digit.
    const std::optional<uint64_t> size = ParseByteCount(*length);
    if (!size) {
      return Err(InternalError(shown_ + ": HEAD: bad Content-Length \"" + EscapeName(*length) +
                               "\" (expected a byte count of at most 19 digits)"));
    }
    auto path = SplitUrl(uri_);
    std::string name = path ? path->second.substr(0, path->second.find('?')) : "";
    name = PercentDecode(name.substr(name.rfind('/') + 1));
    SourceListing out;
    out.objects.push_back({name, *size, EtagOf(r.headers), 0644});
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    ObjectRequest req;
    req.url = uri_;
    req.object = object;
    req.offset = offset;
    req.check = [this, object](int status, const Headers& headers) -> Status {
      if (!object.etag.empty() && EtagOf(headers) != object.etag) {
        return WithCode(FailedPreconditionError(shown_ + ": changed during the sync (etag \"" +
                                                EscapeName(object.etag) + "\" listed, \"" +
                                                EscapeName(EtagOf(headers)) + "\" now)"),
                        kSourceChanged);
      }
      return CheckObjectSize(shown_, object, status, headers);
    };
    req.pin = std::make_shared<ValidatorPin>();
    return std::unique_ptr<ByteStream>(std::make_unique<HttpObjectStream>(fetcher_, req));
  }

 private:
  std::string uri_;
  std::string shown_;
  std::shared_ptr<HttpFetcher> fetcher_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenHttpsSource(const std::string& uri, const HttpsUri& parsed,
                                                const SourceOptions& options) {
  BDN_ASSIGN_OR_RETURN(auto split, SplitUrl(parsed.url));
  FetcherOptions fo;
  fo.source = ShownSource(uri);
  fo.secret_queries = true;  // the user's URL: its query may be a presigned signature
  fo.source_options = options;
  if (!options.secret.empty()) {
    fo.authorization = "Bearer " + options.secret;
    fo.auth_origin = split.first;
  }
  return std::unique_ptr<Source>(
      std::make_unique<HttpsSource>(uri, std::make_shared<HttpFetcher>(std::move(fo))));
}

}  // namespace bdn::sync
