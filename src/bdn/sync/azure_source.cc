// azure://account/container/prefix: List Blobs and Get Blob, with Shared Key or a SAS token.
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bdn/base/text.h"
#include "bdn/objstore/xml_listing.h"
#include "bdn/sync/crypto.h"
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/object_store_internal.h"
#include "bdn/sync/object_store_sources.h"

namespace bdn::sync {
namespace {

constexpr char kVersion[] = "2021-08-06";

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 1123 date of now, as x-ms-date wants it.
std::string HttpDate() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

struct AzureCredentials {
  std::string account_key;  // decoded bytes; "" with a SAS
  std::string sas;          // without a leading '?'; "" with a key
};

Result<AzureCredentials> ParseAzureSecret(std::string value, const std::string& secret_name) {
  auto bad = [&](const std::string& why) {
    return Err(
        WithCode(InvalidArgumentError("secret \"" + secret_name + "\": " + why), kInvalidSecret));
  };
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  std::string key, sas;
  if (value.starts_with("{")) {
    nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
    if (!j.is_object()) return bad("not a JSON object");
    if (j.contains("account_key") && j["account_key"].is_string()) key = j["account_key"];
    if (j.contains("sas") && j["sas"].is_string()) sas = j["sas"];
    if (key.empty() == sas.empty()) {
      return bad("expected {\"account_key\": ...} or {\"sas\": ...} (one of them)");
    }
  } else if (value.find("sig=") != std::string::npos) {
    sas = value;
  } else {
    key = value;
  }
  AzureCredentials c;
  if (!sas.empty()) {
    if (sas.starts_with("?")) sas.erase(0, 1);
    if (sas.find("sig=") == std::string::npos ||
        sas.find_first_of(" \t\r\n#") != std::string::npos) {
      return bad("a SAS token is a query string with sig= (sv=...&sig=...)");
    }
    c.sas = sas;
    return c;
  }
  auto decoded = Base64Decode(key);
  if (!decoded || decoded->empty()) {
    return bad("neither a SAS token (sv=...&sig=...) nor a base64 account key");
  }
  c.account_key = std::move(*decoded);
  return c;
}

// The decoded query parameters of "path?query".
std::vector<std::pair<std::string, std::string>> QueryOf(std::string_view path) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t q = path.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = path.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view part = rest.substr(0, amp);
    size_t eq = part.find('=');
    out.emplace_back(PercentDecode(part.substr(0, eq)),
                     eq == std::string_view::npos ? "" : PercentDecode(part.substr(eq + 1)));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

class AzureSource : public Source {
 public:
  AzureSource(std::string uri, AzureUri parsed, std::string account_url,
              std::optional<AzureCredentials> creds, SourceOptions options)
      : uri_(std::move(uri)),
        parsed_(std::move(parsed)),
        container_url_(account_url + "/" + parsed_.container),
        options_(std::move(options)),
        list_prefix_(FolderPrefix(parsed_.prefix)) {
    FetcherOptions fo;
    fo.source = uri_;
    fo.source_options = options_;
    auto split = SplitUrl(account_url);
    fo.auth_origin = split ? split->first : "";
    const std::string account = parsed_.account;
    fo.sign = [creds, account](http::Request& req) -> Status {
      req.headers.emplace_back("x-ms-version", kVersion);
      if (!creds) return Status::Ok();
      if (!creds->sas.empty()) {
        req.path += (req.path.find('?') == std::string::npos ? "?" : "&") + creds->sas;
        req.secret_query = true;
        return Status::Ok();
      }
      req.headers.emplace_back("x-ms-date", HttpDate());
      const std::string path = req.path.substr(0, req.path.find('?'));
      const std::string to_sign = AzureStringToSign(http::MethodName(req.method), account, path,
                                                    QueryOf(req.path), req.headers);
      req.headers.emplace_back(
          "Authorization",
          "SharedKey " + account + ":" + Base64Encode(HmacSha256(creds->account_key, to_sign)));
      return Status::Ok();
    };
    sends_credentials_ = creds.has_value();
    fo.classify = [this](const std::string& what, const http::Response& r, bool, Attempt&) {
      return ClassifyAzure(what, r);
    };
    fetcher_ = std::make_shared<HttpFetcher>(std::move(fo));
  }

  const std::string& uri() const override { return uri_; }
  std::string Identity() const override {
    return uri_ + (options_.endpoint.empty() ? "" : " at " + container_url_);
  }

  Result<SourceListing> List() override {
    SourceListing out;
    std::string marker;
    std::set<std::string> markers;
    uint64_t blobs_seen = 0;
    ListingBudget budget(uri_, options_);
    while (true) {
      std::string url = container_url_ + "?restype=container&comp=list&maxresults=5000&prefix=" +
                        PercentEncode(list_prefix_);
      if (!marker.empty()) url += "&marker=" + PercentEncode(marker);
      BDN_ASSIGN_OR_RETURN(
          http::Response r,
          fetcher_->Fetch({.url = url, .max_page_bytes = options_.listing.max_page_bytes}));
      auto page = ParseAzureListPage(r.text());
      if (!page) return Err(Malformed(page.error().message()));
      for (ListedObject& o : page->blobs) {
        ++blobs_seen;
        BDN_RETURN_IF_ERROR(
            AddListed(uri_, container_url_, list_prefix_, std::move(o), out.objects));
      }
      BDN_RETURN_IF_ERROR(budget.Page(r.body.size(), page->blobs.size(), out.objects));
      if (page->next_marker.empty()) break;
      if (!markers.insert(page->next_marker).second) {
        return Err(WithCode(Malformed("the marker repeats (the listing would never end)"),
                            kListingTooLarge));
      }
      marker = std::move(page->next_marker);
    }
    BDN_RETURN_IF_ERROR(SortUnique(uri_, out.objects));
    if (out.objects.empty() && blobs_seen == 0 && !parsed_.prefix.empty() &&
        parsed_.prefix.back() != '/') {
      HttpFetcher::Call call{.method = http::Method::kHead, .url = BlobUrl(parsed_.prefix)};
      auto r = fetcher_->Fetch(call);
      if (r) {
        auto size = ParseByteCount(r->Header("content-length").value_or(""));
        if (!size) return Err(Malformed("HEAD of the blob gave no Content-Length"));
        single_name_ = parsed_.prefix;
        out.objects.push_back(StoreObject(parsed_.prefix.substr(parsed_.prefix.rfind('/') + 1),
                                          *size, r->Header("etag").value_or("")));
      } else if (r.error().reason() != kSourceNotFound) {
        return Err(r.error());
      }
    }
    if (out.objects.empty()) return Err(NothingUnder(uri_, list_prefix_));
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    ObjectRequest req = EtagCheckedRequest(
        uri_, BlobUrl(single_name_.empty() ? list_prefix_ + object.path : single_name_), object,
        offset);
    req.on_error = [this, object](const http::Response& r) -> std::optional<Status> {
      std::string code(r.Header("x-ms-error-code").value_or(""));
      if (r.status == 404 && code != "BlobNotFound" && !code.empty()) return std::nullopt;
      return ObjectGone(uri_, object, r.status);
    };
    return OpenObjectStream(fetcher_, std::move(req));
  }

 private:
  std::string BlobUrl(const std::string& name) const {
    return container_url_ + "/" + PercentEncode(name, "/");
  }
  Status Malformed(const std::string& what) const {
    return WithCode(
        FailedPreconditionError(uri_ + ": unexpected listing from " + container_url_ + ": " + what),
        kInvalidAnswer);
  }

  std::optional<Status> ClassifyAzure(const std::string& what, const http::Response& r) const {
    std::string code(r.Header("x-ms-error-code").value_or(""));
    std::string message;
    if (auto err = ParseStoreError(r.text())) {
      if (code.empty()) code = err->code;
      message = err->message.substr(0, err->message.find('\n'));
    }
    const std::string detail =
        code.empty() ? "" : " (" + code + (message.empty() ? "" : ": " + message) + ")";
    const std::string container = "container \"" + parsed_.container + "\"";
    if (code == "ContainerNotFound") {
      return WithCode(NotFoundError(uri_ + ": " + container + " not found" + detail),
                      kSourceNotFound);
    }
    if (code == "ResourceNotFound" && !sends_credentials_) {
      // Azure answers an anonymous request for a private container as if it did not exist.
      return WithCode(NotFoundError(uri_ + ": " + container + " not found" + detail +
                                    " (or private: give a key or SAS with --auth-secret-name)"),
                      kSourceNotFound);
    }
    // Azure says AuthenticationFailed for a wrong key or signature; Azurite says
    // AuthorizationFailure, with Azure's message for it.
    if (code == "AuthenticationFailed" || code == "InvalidAuthenticationInfo" ||
        message.starts_with("Server failed to authenticate the request")) {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + SecretNamed(options_) + " were refused" + detail),
          kBadCredentials);
    }
    if (code.starts_with("Authorization") || code == "NoAuthenticationInformation" ||
        code == "AccountIsDisabled" || code == "InsufficientAccountPermissions" ||
        r.status == 401 || r.status == 403) {
      return WithCode(
          PermissionDeniedError(uri_ + ": " + what + ": access denied" + detail +
                                (sends_credentials_ ? ""
                                                    : " (anonymous: give a key or SAS with "
                                                      "--auth-secret-name)")),
          kAccessDenied);
    }
    return std::nullopt;
  }

  const std::string uri_;
  const AzureUri parsed_;
  const std::string container_url_;
  const SourceOptions options_;
  const std::string list_prefix_;
  bool sends_credentials_ = false;
  std::shared_ptr<HttpFetcher> fetcher_;
  std::string single_name_;
};

}  // namespace

std::string AzureStringToSign(std::string_view method, std::string_view account,
                              std::string_view path,
                              const std::vector<std::pair<std::string, std::string>>& query,
                              const std::vector<std::pair<std::string, std::string>>& headers) {
  auto header = [&](std::string_view name) -> std::string {
    for (const auto& [k, v] : headers) {
      if (Lower(k) == name) return v;
    }
    return "";
  };
  std::string length = header("content-length");
  if (length == "0") length.clear();  // versions from 2015-02-21 on: empty, not "0"
  std::string out = std::string(method) + "\n" + header("content-encoding") + "\n" +
                    header("content-language") + "\n" + length + "\n" + header("content-md5") +
                    "\n" + header("content-type") + "\n" + header("date") + "\n" +
                    header("if-modified-since") + "\n" + header("if-match") + "\n" +
                    header("if-none-match") + "\n" + header("if-unmodified-since") + "\n" +
                    header("range") + "\n";
  std::vector<std::pair<std::string, std::string>> ms;
  for (const auto& [k, v] : headers) {
    std::string name = Lower(k);
    if (name.starts_with("x-ms-")) {
      std::string value = v;
      while (!value.empty() && value.back() == ' ') value.pop_back();
      ms.emplace_back(std::move(name), std::move(value));
    }
  }
  std::sort(ms.begin(), ms.end());
  for (const auto& [k, v] : ms) out += k + ":" + v + "\n";
  out += "/" + std::string(account) + std::string(path);
  std::map<std::string, std::vector<std::string>> params;
  for (const auto& [k, v] : query) params[Lower(k)].push_back(v);
  for (auto& [k, values] : params) {
    std::sort(values.begin(), values.end());
    out += "\n" + k + ":";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + values[i];
  }
  return out;
}

Result<std::unique_ptr<Source>> OpenAzureSource(const std::string& uri, const AzureUri& parsed,
                                                const SourceOptions& options) {
  std::optional<AzureCredentials> creds;
  if (!options.secret.empty()) {
    BDN_ASSIGN_OR_RETURN(creds, ParseAzureSecret(options.secret, options.secret_name));
  }
  std::string account_url = "https://" + parsed.account + ".blob.core.windows.net";
  if (!options.endpoint.empty()) {
    BDN_ASSIGN_OR_RETURN(account_url, CheckEndpoint(uri, options.endpoint));
  }
  return std::unique_ptr<Source>(
      std::make_unique<AzureSource>(uri, parsed, account_url, std::move(creds), options));
}

}  // namespace bdn::sync
