#include "bdn/remote/remote_chunk_store.h"

#include <nlohmann/json.hpp>

#include "bdn/remote/batch_response.h"

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
    : client_(std::move(client)),
      options_(options),
      batch_stall_ms_(options.batch_stall_timeout.count()) {}

Result<bool> RemoteChunkStore::Contains(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(auto missing, FindMissing(std::span<const Digest>(&id, 1)));
  return missing.empty();
}

Status RemoteChunkStore::PostIds(const std::string& path, std::span<const Digest> ids,
                                 const std::function<Status(const json&)>& take) {
  for (size_t start = 0; start < ids.size(); start += options_.missing_batch_ids) {
    auto part = ids.subspan(start, std::min(options_.missing_batch_ids, ids.size() - start));
    std::string body = IdsBody(part);
    BDN_ASSIGN_OR_RETURN(
        http::Response r,
        CallWithRetries(*client_,
                        {.method = http::Method::kPost,
                         .path = path,
                         .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                         // A query, not a write: bounded as a read under a budget.
                         .stall_timeout = BudgetStall()},
                        options_.retry, options_.budget.get()));
    BDN_RETURN_IF_ERROR(take(json::parse(r.text(), nullptr, false)));
  }
  return Status::Ok();
}

Result<std::vector<Digest>> RemoteChunkStore::FindMissing(std::span<const Digest> ids) {
  const std::string what = "POST /v1/chunks/missing";
  std::vector<Digest> missing;
  BDN_RETURN_IF_ERROR(PostIds("/v1/chunks/missing", ids, [&](const json& j) -> Status {
    if (!j.is_object() || !j.contains("missing") || !j["missing"].is_array()) {
      return Malformed(*client_, what, "no \"missing\" array");
    }
    for (const auto& v : j["missing"]) {
      if (!v.is_string()) return Malformed(*client_, what, "not a string");
      auto d = Digest::Parse(v.get<std::string>());
      if (!d) return Malformed(*client_, what, d.error().message());
      missing.push_back(*d);
    }
    return Status::Ok();
  }));
  return missing;
}

Result<BlobSizes> RemoteChunkStore::Sizes(std::span<const Digest> ids) {
  const std::string what = "POST /v1/chunks/sizes";
  BlobSizes out;
  out.reserve(ids.size());
  BDN_RETURN_IF_ERROR(PostIds("/v1/chunks/sizes", ids, [&](const json& j) -> Status {
    // Each answer holds one size (or null) per id of its part, in order.
    const size_t want = std::min(options_.missing_batch_ids, ids.size() - out.size());
    if (!j.is_object() || !j.contains("sizes") || !j["sizes"].is_array() ||
        j["sizes"].size() != want) {
      return Malformed(*client_, what, "no \"sizes\" array of " + std::to_string(want));
    }
    for (const auto& v : j["sizes"]) {
      if (v.is_null()) {
        out.emplace_back(std::nullopt);
      } else if (v.is_number_unsigned()) {
        out.emplace_back(v.get<uint64_t>());
      } else {
        return Malformed(*client_, what, "not a size or null");
      }
    }
    return Status::Ok();
  }));
  return out;
}

Status RemoteChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  auto r = CallWithRetries(*client_,
                           {.method = http::Method::kPut,
                            .path = ChunkPath(id),
                            .body = data,
                            .content_type = "application/octet-stream",
                            .stall_timeout = BudgetStall()},
                           options_.retry, options_.budget.get());
  return r ? Status::Ok() : r.error();
}

Status RemoteChunkStore::PutMany(std::span<const BlobPut> blobs) {
  size_t start = 0;
  while (start < blobs.size()) {
    if (no_upload_route_.load(std::memory_order_relaxed)) {
      for (const BlobPut& b : blobs.subspan(start)) BDN_RETURN_IF_ERROR(Put(b.id, b.data));
      return Status::Ok();
    }
    size_t end = start, bytes = 0;
    while (end < blobs.size() && end - start < options_.put_batch_ids &&
           (end == start || bytes + blobs[end].data.size() <= options_.put_batch_bytes)) {
      bytes += blobs[end++].data.size();
    }
    Status s = Upload(blobs.subspan(start, end - start));
    if (s.code() == StatusCode::kNotFound) {
      no_upload_route_.store(true, std::memory_order_relaxed);
      continue;  // the same blobs, one PUT each
    }
    BDN_RETURN_IF_ERROR(s);
    start = end;
  }
  return Status::Ok();
}

Status RemoteChunkStore::Upload(std::span<const BlobPut> blobs) {
  // "BDNU" | count (u32 LE) | (id, length u32 LE) per blob | the blobs' bytes (docs/http-api.md).
  size_t total = 8 + blobs.size() * (Digest::kSize + 4);
  for (const BlobPut& b : blobs) total += b.data.size();
  std::vector<uint8_t> body;
  body.reserve(total);
  auto u32 = [&](uint64_t v) {
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  body.insert(body.end(), {'B', 'D', 'N', 'U'});
  u32(blobs.size());
  for (const BlobPut& b : blobs) {
    if (b.data.size() > UINT32_MAX) {
      return InvalidArgumentError("chunk " + b.id.ToString() + ": " +
                                  std::to_string(b.data.size()) + " bytes, too large to upload");
    }
    body.insert(body.end(), b.id.data(), b.id.data() + Digest::kSize);
    u32(b.data.size());
  }
  for (const BlobPut& b : blobs) body.insert(body.end(), b.data.begin(), b.data.end());
  // Bounded as reads are under a budget: an upload is content-addressed, so one that waited past
  // the deadline and is reported failed changed nothing a caller could see (from an attacker: a
  // push to a stopped origin waited 60 s whatever its --retry-deadline).
  auto r = CallWithRetries(*client_,
                           {.method = http::Method::kPost,
                            .path = "/v1/chunks/upload",
                            .body = body,
                            .content_type = "application/octet-stream",
                            .stall_timeout = BudgetStall()},
                           options_.retry, options_.budget.get());
  return r ? Status::Ok() : r.error();
}

Result<std::vector<uint8_t>> RemoteChunkStore::Get(const Digest& id) {
  http::Request req{.method = http::Method::kGet, .path = ChunkPath(id)};
  if (!options_.read_version.empty())
    req.headers.emplace_back("Bdn-Version", options_.read_version);
  BDN_ASSIGN_OR_RETURN(http::Response r,
                       CallWithRetries(*client_, req, options_.retry, options_.budget.get()));
  Digest got = Digest::Of(r.body);
  if (got != id) {
    return Err(CorruptionError("chunk " + id.ToString() + ": digest mismatch (bytes from " +
                               client_->Name() + " hash to " + got.ToString() + ")"));
  }
  return std::move(r.body);
}

Result<BlobBatch> RemoteChunkStore::GetMany(std::span<const Digest> ids) {
  BlobBatch out;
  out.reserve(ids.size());
  for (size_t start = 0; start < ids.size(); start += options_.get_batch_ids) {
    auto part = ids.subspan(start, std::min(options_.get_batch_ids, ids.size() - start));
    BDN_ASSIGN_OR_RETURN(BlobBatch got, WithRetries(options_.retry, options_.budget.get(),
                                                    [&](Try& t) { return GetManyOnce(part, t); }));
    for (auto& b : got) out.push_back(std::move(b));
  }
  return out;
}

std::optional<std::chrono::milliseconds> RemoteChunkStore::BudgetStall() const {
  if (!options_.budget) return std::nullopt;
  return options_.budget->StallTimeout(std::nullopt);
}

std::chrono::milliseconds RemoteChunkStore::BatchStallTimeout() const {
  const std::chrono::milliseconds stall(batch_stall_ms_.load());
  return options_.budget ? options_.budget->StallTimeout(stall) : stall;
}

Result<BlobBatch> RemoteChunkStore::GetManyOnce(std::span<const Digest> ids, Try& t) {
  std::string body = IdsBody(ids);
  BatchResponseDecoder decoder(ids, client_->Name());
  http::Request req{.method = http::Method::kPost,
                    .path = "/v1/chunks/batch",
                    .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                    .deadline = options_.batch_deadline,
                    .stall_timeout = BatchStallTimeout(),
                    .stall_bytes_per_second = options_.batch_min_bytes_per_second,
                    .on_body = [&](std::span<const uint8_t> piece) { return decoder.Feed(piece); }};
  if (!options_.read_version.empty())
    req.headers.emplace_back("Bdn-Version", options_.read_version);
  auto sent = CallOnce(*client_, req, t);
  // A bad blob or a malformed body aborts the transfer: report why, not the abort.
  if (decoder.error()) return Err(*decoder.error());
  if (!sent) return Err(sent.error());
  return std::move(decoder).Finish();
}

}  // namespace bdn::remote
