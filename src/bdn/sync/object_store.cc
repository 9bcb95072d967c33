#include <algorithm>
#include <optional>
#include <string_view>

#include "bdn/base/text.h"
#include "bdn/http/client.h"        // ShownUrl, SplitAuthority, ParsePort
#include "bdn/sync/https_source.h"  // NormalizeEtag
#include "bdn/sync/object_store_internal.h"

namespace bdn::sync {

bool IsEntityTag(std::string_view etag) {
  return !etag.empty() && std::ranges::all_of(etag, [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == 0x21 || (u >= 0x23 && u <= 0x7e) || u >= 0x80;
  });
}

std::string FolderPrefix(const std::string& prefix) {
  if (prefix.empty() || prefix.back() == '/') return prefix;
  return prefix + "/";
}

Result<std::string> CheckEndpoint(const std::string& uri, const std::string& endpoint) {
  std::string e = endpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  auto bad = [&] {
    return Err(InvalidArgumentError(uri + ": --endpoint \"" + http::ShownUrl(endpoint) +
                                    "\": must be http(s)://host[:port][/path] without "
                                    "credentials or query"));
  };
  auto split = SplitUrl(e);
  if (!split) return bad();
  size_t host = split->first.find("://") + 3;
  // An "@" anywhere (from an attacker: "http://u:pa/ss@h", a password holding a "/", passed as
  // a host "u" with a path, and the job's errors showed the password as the port).
  if (split->first.find('@', host) != std::string::npos ||
      e.find_first_of("?# @") != std::string::npos) {
    return bad();
  }
  // A port, where given, is 1 to 65535 (from an attacking helper: "http://h:SECRET" was taken
  // and the job failed later as "internal", showing it). Not quoted: it may be a password.
  // From attacking helper 124: "http://u:SECRET:8080" passed as port 8080 (the last ":"), and
  // its errors and `sync describe` showed the password. The port is all after the host's first
  // ":" (after "]" for an IPv6 address).
  const auto parts = http::SplitAuthority(std::string_view(split->first).substr(host));
  if (!parts) return bad();
  if (parts->port && !http::ParsePort(*parts->port)) {
    return Err(InvalidArgumentError(uri + ": --endpoint: its port must be 1 to 65535"));
  }
  return e;
}

Status SortUnique(const std::string& uri, std::vector<SourceObject>& objects) {
  std::sort(objects.begin(), objects.end(),
            [](const SourceObject& a, const SourceObject& b) { return a.path < b.path; });
  for (size_t i = 1; i < objects.size(); ++i) {
    if (objects[i].path == objects[i - 1].path) {
      return WithCode(FailedPreconditionError(uri + ": the listing names \"" +
                                              EscapeName(objects[i].path) + "\" twice"),
                      kInvalidAnswer);
    }
  }
  return Status::Ok();
}

Status NothingUnder(const std::string& uri, const std::string& list_prefix) {
  return WithCode(NotFoundError(uri + ": " +
                                (list_prefix.empty() ? std::string("the bucket is empty")
                                                     : "no objects under the prefix \"" +
                                                           EscapeName(list_prefix) + "\"")),
                  kSourceNotFound);
}

Status ChangedEtag(const std::string& uri, const SourceObject& object, const std::string& now) {
  return WithCode(FailedPreconditionError(uri + ": object \"" + EscapeName(object.path) +
                                          "\": changed during the sync (etag " + object.etag +
                                          " listed, " + EscapeName(now) + " now)"),
                  kSourceChanged);
}

std::optional<Status> ObjectGone(const std::string& uri, const SourceObject& object, int status) {
  const std::string what = uri + ": object \"" + EscapeName(object.path) + "\": ";
  if (status == 404) {
    return WithCode(FailedPreconditionError(what + "removed during the sync"), kSourceChanged);
  }
  if (status == 412) {
    return WithCode(FailedPreconditionError(what + "changed during the sync (its etag " +
                                            object.etag + " no longer matches)"),
                    kSourceChanged);
  }
  return std::nullopt;
}

ObjectRequest EtagCheckedRequest(const std::string& uri, std::string url,
                                 const SourceObject& object, uint64_t offset) {
  ObjectRequest req;
  req.url = std::move(url);
  req.object = object;
  req.offset = offset;
  // Listing data goes into a header only as a valid entity-tag (RFC 9110 §8.8.3): a CR or LF
  // there would add headers of the listing's choosing. Another etag is still compared with the
  // answer's ETag below.
  if (IsEntityTag(object.etag) && !object.etag_weak) {
    req.headers.emplace_back("If-Match", "\"" + object.etag + "\"");
  }
  req.check = [uri, object](int status, const Headers& headers) -> Status {
    auto etag = FindHeader(headers, "etag");
    if (!object.etag.empty() && etag && NormalizeEtag(*etag) != object.etag) {
      return ChangedEtag(uri, object, NormalizeEtag(*etag));
    }
    return CheckObjectSize(uri, object, status, headers);
  };
  req.on_error = [uri, object](const http::Response& r) {
    return ObjectGone(uri, object, r.status);
  };
  // Without a listed etag, the parts and resumptions are held to the first answer's.
  req.pin = std::make_shared<ValidatorPin>();
  return req;
}

Status AddListed(const std::string& uri, const std::string& from, const std::string& list_prefix,
                 ListedObject o, std::vector<SourceObject>& out) {
  if (!o.key.starts_with(list_prefix)) {
    return InternalError(uri + ": unexpected listing from " + from + ": key \"" +
                         EscapeName(o.key) + "\" is not under the prefix \"" +
                         EscapeName(list_prefix) + "\"");
  }
  if (o.key.back() == '/') return Status::Ok();  // a "folder" marker
  out.push_back(StoreObject(o.key.substr(list_prefix.size()), o.size_bytes, o.etag));
  return Status::Ok();
}

SourceObject StoreObject(std::string path, uint64_t size_bytes, std::string_view etag) {
  return {.path = std::move(path),
          .size_bytes = size_bytes,
          .etag = NormalizeEtag(etag),
          .mode = 0644,
          .etag_weak = IsWeakEtag(etag)};
}

std::string SecretNamed(const SourceOptions& options) {
  return options.secret_name.empty() ? std::string("the credentials")
                                     : "the credentials in secret \"" + options.secret_name + "\"";
}

std::unique_ptr<ByteStream> OpenObjectStream(std::shared_ptr<HttpFetcher> fetcher,
                                             ObjectRequest req) {
  if (req.object.size_bytes - std::min(req.offset, req.object.size_bytes) >= kRangedObjectBytes) {
    return std::make_unique<RangedObjectStream>(std::move(fetcher), std::move(req), kPartBytes,
                                                kPartsInFlight);
  }
  return std::make_unique<HttpObjectStream>(std::move(fetcher), std::move(req));
}

}  // namespace bdn::sync
