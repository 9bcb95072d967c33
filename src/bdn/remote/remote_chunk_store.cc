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
    BDN_ASSIGN_OR_RETURN(
        http::Response r,
        CallWithRetries(*client_,
                        {.method = http::Method::kPost,
                         .path = "/v1/chunks/missing",
                         .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()}},
                        options_.retry, options_.budget.get()));
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
  auto r = CallWithRetries(*client_,
                           {.method = http::Method::kPut,
                            .path = ChunkPath(id),
                            .body = data,
                            .content_type = "application/octet-stream"},
                           options_.retry, options_.budget.get());
  return r ? Status::Ok() : r.error();
}

Result<std::vector<uint8_t>> RemoteChunkStore::Get(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(
      http::Response r,
      CallWithRetries(*client_, {.method = http::Method::kGet, .path = ChunkPath(id)},
                      options_.retry, options_.budget.get()));
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
    BDN_ASSIGN_OR_RETURN(BlobBatch got, WithRetries(options_.retry, options_.budget.get(),
                                                    [&](Try& t) { return GetBatchOnce(part, t); }));
    for (auto& b : got) out.push_back(std::move(b));
  }
  return out;
}

namespace {

// Decodes a POST /v1/chunks/batch response as it arrives, so that no more than one blob is
// buffered beyond the result: "BDNB", then per requested id, in order: id (32) | status (u8:
// 0 found, 1 missing) | length (u32 LE) | bytes. Every found blob is verified against its id.
class BatchDecoder {
 public:
  BatchDecoder(std::span<const Digest> ids, std::string source)
      : ids_(ids), source_(std::move(source)) {
    out_.reserve(ids.size());
  }

  // Consumes the next piece of the body; false once the body is malformed or a blob is bad
  // (then error() says why).
  bool Feed(std::span<const uint8_t> in) {
    while (!in.empty() && !error_) {
      if (state_ == State::kBlob) {
        size_t take = std::min(in.size(), want_ - blob_.size());
        blob_.insert(blob_.end(), in.begin(), in.begin() + take);
        in = in.subspan(take);
        if (blob_.size() == want_) FinishBlob();
        continue;
      }
      if (state_ == State::kHeader && out_.size() == ids_.size()) {
        Fail("trailing bytes");
        break;
      }
      size_t need = (state_ == State::kMagic ? 4 : kRecordHeader) - head_.size();
      size_t take = std::min(in.size(), need);
      head_.insert(head_.end(), in.begin(), in.begin() + take);
      in = in.subspan(take);
      if (take == need) state_ == State::kMagic ? FinishMagic() : FinishHeader();
    }
    return !error_;
  }

  // The blobs, once the whole body was fed. Errors: Corruption for a bad blob or a malformed
  // (truncated, reordered, trailing) body.
  Result<BlobBatch> Finish() && {
    if (!error_ && state_ == State::kMagic) Fail("no BDNB header");
    if (!error_ && (state_ != State::kHeader || !head_.empty() || out_.size() != ids_.size())) {
      Fail("truncated at chunk " + ids_[std::min(out_.size(), ids_.size() - 1)].ToString());
    }
    if (error_) return Err(*error_);
    return std::move(out_);
  }

  const std::optional<Status>& error() const { return error_; }

 private:
  enum class State { kMagic, kHeader, kBlob };
  static constexpr size_t kRecordHeader = Digest::kSize + 5;

  void Fail(const std::string& why) {
    error_ = CorruptionError(source_ + ": POST /v1/chunks/batch: " + why);
  }
  void FinishMagic() {
    if (std::memcmp(head_.data(), "BDNB", 4) != 0) return Fail("no BDNB header");
    head_.clear();
    state_ = State::kHeader;
  }
  void FinishHeader() {
    const Digest& id = ids_[out_.size()];
    if (std::memcmp(head_.data(), id.data(), Digest::kSize) != 0) {
      return Fail("records out of order at chunk " + id.ToString());
    }
    uint8_t status = head_[Digest::kSize];
    const uint8_t* l = head_.data() + Digest::kSize + 1;
    want_ = static_cast<uint32_t>(l[0]) | static_cast<uint32_t>(l[1]) << 8 |
            static_cast<uint32_t>(l[2]) << 16 | static_cast<uint32_t>(l[3]) << 24;
    head_.clear();
    if (status == 1) {
      out_.emplace_back(std::nullopt);
    } else if (status != 0) {
      Fail("unknown record status " + std::to_string(status));
    } else if (want_ == 0) {
      FinishBlob();
    } else {
      blob_.clear();
      blob_.reserve(want_);
      state_ = State::kBlob;
    }
  }
  void FinishBlob() {
    const Digest& id = ids_[out_.size()];
    Digest got = Digest::Of(blob_);
    if (got != id) {
      error_ = CorruptionError("chunk " + id.ToString() + ": digest mismatch (bytes from " +
                               source_ + " hash to " + got.ToString() + ")");
      return;
    }
    out_.emplace_back(std::move(blob_));
    blob_ = {};
    state_ = State::kHeader;
  }

  std::span<const Digest> ids_;
  std::string source_;
  State state_ = State::kMagic;
  std::vector<uint8_t> head_;
  std::vector<uint8_t> blob_;
  size_t want_ = 0;
  BlobBatch out_;
  std::optional<Status> error_;
};

}  // namespace

Result<BlobBatch> RemoteChunkStore::GetBatchOnce(std::span<const Digest> ids, Try& t) {
  std::string body = IdsBody(ids);
  BatchDecoder decoder(ids, client_->Name());
  auto sent =
      CallOnce(*client_,
               {.method = http::Method::kPost,
                .path = "/v1/chunks/batch",
                .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                .deadline = options_.batch_deadline,
                .stall_timeout = options_.batch_stall_timeout,
                .on_body = [&](std::span<const uint8_t> piece) { return decoder.Feed(piece); }},
               t);
  // A bad blob or a malformed body aborts the transfer: report why, not the abort.
  if (decoder.error()) return Err(*decoder.error());
  if (!sent) return Err(sent.error());
  return std::move(decoder).Finish();
}

}  // namespace bdn::remote
