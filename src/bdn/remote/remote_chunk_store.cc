#include "bdn/remote/remote_chunk_store.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace bdn::remote {
namespace {

using nlohmann::json;

std::string ChunkPath(const Digest& id) { return "/v1/chunks/" + id.Hex(); }

std::string IdsBody(std::span<const Digest> ids) {
  std::string body = "{\"ids\":[";
  body.reserve(body.size() + ids.size() * 67 + 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) body += ',';
    body += '"';
    body += ids[i].Hex();
    body += '"';
  }
  body += "]}";
  return body;
}

Status Malformed(const http::HttpClient& c, std::string_view what, std::string_view why) {
  return InternalError(c.Name() + ": " + std::string(what) +
                       ": malformed response: " + std::string(why));
}

}  // namespace

RemoteChunkStore::RemoteChunkStore(std::shared_ptr<http::HttpClient> client,
                                   RemoteStoreOptions options)
    : client_(std::move(client)), options_(options) {}

Result<bool> RemoteChunkStore::Contains(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(auto missing, FindMissing(std::span<const Digest>(&id, 1)));
  return missing.empty();
}

Result<std::vector<Digest>> RemoteChunkStore::FindMissing(std::span<const Digest> ids) {
  std::vector<Digest> missing;
  for (size_t start = 0; start < ids.size(); start += options_.missing_batch_ids) {
    auto part = ids.subspan(start, std::min(options_.missing_batch_ids, ids.size() - start));
    std::string body = IdsBody(part);
    BDN_ASSIGN_OR_RETURN(http::Response r, WithRetries(options_.retry, [&] {
                           return client_->PostJson("/v1/chunks/missing", body);
                         }));
    json j = json::parse(r.text(), nullptr, false);
    if (!j.is_object() || !j.contains("missing") || !j["missing"].is_array()) {
      return Err(Malformed(*client_, "POST /v1/chunks/missing", "no \"missing\" array"));
    }
    for (const auto& v : j["missing"]) {
      if (!v.is_string())
        return Err(Malformed(*client_, "POST /v1/chunks/missing", "not a string"));
      auto d = Digest::Parse(v.get<std::string>());
      if (!d) return Err(Malformed(*client_, "POST /v1/chunks/missing", d.error().message()));
      missing.push_back(*d);
    }
  }
  return missing;
}

Status RemoteChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  const std::string path = ChunkPath(id);
  return WithRetries(options_.retry, [&]() -> Status {
    auto r = client_->Call({.method = http::Method::kPut,
                            .path = path,
                            .body = data,
                            .content_type = "application/octet-stream"});
    return r ? Status::Ok() : r.error();
  });
}

Result<std::vector<uint8_t>> RemoteChunkStore::Get(const Digest& id) {
  const std::string path = ChunkPath(id);
  BDN_ASSIGN_OR_RETURN(http::Response r,
                       WithRetries(options_.retry, [&] { return client_->Get(path); }));
  Digest got = Digest::Of(r.body);
  if (got != id) {
    return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch (bytes from " +
                               client_->Name() + " hash to " + got.ToString() + ")"));
  }
  return std::move(r.body);
}

Result<BlobBatch> RemoteChunkStore::GetBatch(std::span<const Digest> ids) {
  BlobBatch out;
  out.reserve(ids.size());
  for (size_t start = 0; start < ids.size(); start += options_.get_batch_ids) {
    auto part = ids.subspan(start, std::min(options_.get_batch_ids, ids.size() - start));
    BDN_ASSIGN_OR_RETURN(BlobBatch got,
                         WithRetries(options_.retry, [&] { return GetBatchOnce(part); }));
    for (auto& b : got) out.push_back(std::move(b));
  }
  return out;
}

Result<BlobBatch> RemoteChunkStore::GetBatchOnce(std::span<const Digest> ids) {
  const std::string what = "POST /v1/chunks/batch";
  BDN_ASSIGN_OR_RETURN(http::Response r, client_->PostJson("/v1/chunks/batch", IdsBody(ids)));
  // "BDNB", then per id: id (32) | status (u8: 0 found, 1 missing) | length (u32 LE) | bytes.
  std::span<const uint8_t> in(r.body);
  auto corrupt = [&](const std::string& why) {
    return Err(CorruptionError(client_->Name() + ": " + what + ": " + why));
  };
  if (in.size() < 4 || std::memcmp(in.data(), "BDNB", 4) != 0) return corrupt("no BDNB header");
  size_t pos = 4;
  BlobBatch out;
  out.reserve(ids.size());
  for (const Digest& id : ids) {
    if (in.size() - pos < Digest::kSize + 5) return corrupt("truncated at chunk " + id.ToString());
    if (std::memcmp(in.data() + pos, id.data(), Digest::kSize) != 0) {
      return corrupt("records out of order at chunk " + id.ToString());
    }
    pos += Digest::kSize;
    uint8_t status = in[pos++];
    uint32_t len = static_cast<uint32_t>(in[pos]) | static_cast<uint32_t>(in[pos + 1]) << 8 |
                   static_cast<uint32_t>(in[pos + 2]) << 16 |
                   static_cast<uint32_t>(in[pos + 3]) << 24;
    pos += 4;
    if (in.size() - pos < len) return corrupt("truncated at chunk " + id.ToString());
    if (status == 1) {
      out.emplace_back(std::nullopt);
    } else if (status == 0) {
      auto bytes = in.subspan(pos, len);
      Digest got = Digest::Of(bytes);
      if (got != id) {
        return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch (bytes from " +
                                   client_->Name() + " hash to " + got.ToString() + ")"));
      }
      out.emplace_back(std::vector<uint8_t>(bytes.begin(), bytes.end()));
    } else {
      return corrupt("unknown record status " + std::to_string(status));
    }
    pos += len;
  }
  if (pos != in.size()) return corrupt("trailing bytes");
  return out;
}

}  // namespace bdn::remote
