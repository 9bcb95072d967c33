// Origin chunk endpoints: missing- and sizes-query, verified upload, download with Range/ETag, and
// the BDNB batch download (docs/http-api.md, "Chunks").
#include <array>
#include <cstring>

#include "bdn/base/log.h"
#include "bdn/origin/origin.h"
#include "bdn/origin/request_json.h"

namespace bdn::origin {
namespace {

using nlohmann::json;

// A shared cache may keep a blob for everyone only where the server checks no credentials;
// elsewhere what a request may read depends on its key and version (chunk_scope.h).
constexpr const char* kImmutablePublic = "public, max-age=31536000, immutable";
constexpr const char* kImmutablePrivate = "private, max-age=31536000, immutable";
constexpr const char* kBinary = "application/octet-stream";
constexpr uint8_t kBatchFound = 0;
constexpr uint8_t kBatchMissing = 1;

Result<Digest> ChunkIdOf(const http::ServerRequest& req) {
  auto id = Digest::Parse(req.matches[1].str());
  if (!id) return Err(id.error().WithPrefix("chunk id"));
  return *id;
}

// Whether an If-None-Match value ("a", W/"a", "a", "b" or *) matches `etag`.
bool EtagMatches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.starts_with("W/")) item.remove_prefix(2);
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

// One batch record header: id (32 bytes) | status (u8) | length (u32 little-endian).
std::string BatchRecordHeader(const Digest& id, uint8_t status, uint32_t length) {
  std::string h(Digest::kSize + 5, '\0');
  std::memcpy(h.data(), id.data(), Digest::kSize);
  h[Digest::kSize] = static_cast<char>(status);
  for (int i = 0; i < 4; ++i) h[Digest::kSize + 1 + i] = static_cast<char>(length >> (8 * i));
  return h;
}

// The body of PUT /v1/chunks/{id}, streamed into the store as it arrives (hashed on the way), so
// an upload is never held whole.
class ChunkUpload : public http::BodySink {
 public:
  explicit ChunkUpload(std::unique_ptr<BlobWriter> writer) : writer_(std::move(writer)) {}
  Status Write(std::span<const uint8_t> piece) override {
    size_bytes_ += piece.size();
    return writer_->Append(piece);
  }
  BlobWriter& writer() { return *writer_; }
  uint64_t size_bytes() const { return size_bytes_; }

 private:
  std::unique_ptr<BlobWriter> writer_;
  uint64_t size_bytes_ = 0;
};

// The body of POST /v1/chunks/upload, parsed as it arrives: "BDNU", the blob count (u32 LE), a
// table of (id: 32 bytes, length: u32 LE) per blob, then the blobs' bytes in table order. Once
// the table is in, the store is told of the whole batch (StartUploads: one claim transaction on
// an object store); each blob streams into its own writer and is committed (verified against its
// id) as soon as its last byte arrives, so the batch is never held whole.
class UploadSink : public http::BodySink {
 public:
  static constexpr size_t kPrefixBytes = 8;
  static constexpr size_t kEntryBytes = Digest::kSize + 4;

  UploadSink(std::shared_ptr<ChunkStore> store, size_t max_ids, uint64_t max_blob_bytes,
             uint64_t max_body_bytes)
      : store_(std::move(store)),
        max_ids_(max_ids),
        max_blob_bytes_(max_blob_bytes),
        max_body_bytes_(max_body_bytes) {}

  Status Write(std::span<const uint8_t> piece) override {
    while (!piece.empty()) {
      if (!batch_) {
        BDN_RETURN_IF_ERROR(TakeTable(piece));
        continue;
      }
      if (next_ == ids_.size()) {
        return InvalidArgumentError(std::string(kWhat) +
                                    ": the body goes on after the table's last blob");
      }
      const uint64_t left = lengths_[next_] - written_;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
      BDN_RETURN_IF_ERROR(writer_->Append(piece.first(n)));
      written_ += n;
      piece = piece.subspan(n);
      if (written_ == lengths_[next_]) BDN_RETURN_IF_ERROR(Finish());
    }
    return Status::Ok();
  }

  // Whether the body held the whole batch. Errors: InvalidArgument naming where it ended.
  Status Complete() const {
    if (!batch_) {
      return InvalidArgumentError(std::string(kWhat) + ": the body ends inside its table (" +
                                  std::to_string(head_.size()) + " bytes)");
    }
    if (next_ < ids_.size()) {
      return InvalidArgumentError(std::string(kWhat) + ": the body ends inside blob " +
                                  std::to_string(next_) + " (chunk " + ids_[next_].ToString() +
                                  ", " + std::to_string(written_) + " of " +
                                  std::to_string(lengths_[next_]) + " bytes)");
    }
    return Status::Ok();
  }
  size_t blobs() const { return ids_.size(); }
  uint64_t size_bytes() const { return size_bytes_; }

 private:
  static constexpr const char* kWhat = "POST /v1/chunks/upload";

  static uint32_t U32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }

  // Collects the prefix and the table from the front of `piece`; once both are in, checks them
  // and starts the batch.
  Status TakeTable(std::span<const uint8_t>& piece) {
    size_t want = kPrefixBytes;
    if (head_.size() >= kPrefixBytes) want += kEntryBytes * size_t{U32(head_.data() + 4)};
    const size_t n = std::min(want - head_.size(), piece.size());
    head_.insert(head_.end(), piece.begin(), piece.begin() + static_cast<ptrdiff_t>(n));
    piece = piece.subspan(n);
    if (head_.size() == kPrefixBytes) {
      if (std::memcmp(head_.data(), "BDNU", 4) != 0) {
        return InvalidArgumentError(std::string(kWhat) + ": the body does not start with BDNU");
      }
      const uint32_t count = U32(head_.data() + 4);
      if (count > max_ids_) {
        return InvalidArgumentError(std::string(kWhat) + ": " + std::to_string(count) +
                                    " blobs, at most " + std::to_string(max_ids_) + " per request");
      }
      head_.reserve(kPrefixBytes + kEntryBytes * count);
      if (count > 0) return Status::Ok();
    }
    if (head_.size() < want) return Status::Ok();
    return StartBatch();
  }

  Status StartBatch() {
    const size_t count = (head_.size() - kPrefixBytes) / kEntryBytes;
    uint64_t total = head_.size();
    ids_.reserve(count);
    lengths_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const uint8_t* e = head_.data() + kPrefixBytes + i * kEntryBytes;
      std::array<uint8_t, Digest::kSize> id;
      std::memcpy(id.data(), e, Digest::kSize);
      ids_.emplace_back(id);
      const uint32_t length = U32(e + Digest::kSize);
      if (length > max_blob_bytes_) {
        return InvalidArgumentError(std::string(kWhat) + ": blob " + std::to_string(i) +
                                    " (chunk " + ids_.back().ToString() + ") is " +
                                    std::to_string(length) + " bytes, at most " +
                                    std::to_string(max_blob_bytes_));
      }
      lengths_.push_back(length);
      total += length;
    }
    if (total > max_body_bytes_) {
      return InvalidArgumentError(std::string(kWhat) + ": the table's blobs make a body of " +
                                  std::to_string(total) + " bytes, larger than " +
                                  std::to_string(max_body_bytes_) + " bytes");
    }
    head_ = {};
    BDN_ASSIGN_OR_RETURN(batch_, store_->StartUploads(ids_));
    return Begin();
  }

  // Starts the next blob's writer; a blob of length 0 is finished at once.
  Status Begin() {
    if (next_ == ids_.size()) return Status::Ok();
    BDN_ASSIGN_OR_RETURN(writer_, batch_->StartPut(next_));
    written_ = 0;
    if (lengths_[next_] == 0) return Finish();
    return Status::Ok();
  }

  Status Finish() {
    if (auto stored = writer_->Commit(); !stored) return stored.error();
    writer_.reset();
    size_bytes_ += lengths_[next_];
    ++next_;
    return Begin();
  }

  std::shared_ptr<ChunkStore> store_;
  const size_t max_ids_;
  const uint64_t max_blob_bytes_;
  const uint64_t max_body_bytes_;
  std::vector<uint8_t> head_;  // the prefix and table, until the batch starts
  std::vector<Digest> ids_;
  std::vector<uint32_t> lengths_;
  std::unique_ptr<UploadBatch> batch_;
  size_t next_ = 0;  // the blob arriving now
  std::unique_ptr<BlobWriter> writer_;
  uint64_t written_ = 0;  // of blob next_
  uint64_t size_bytes_ = 0;
};

}  // namespace

void Origin::RegisterChunks() {
  const Access push_any{Scope::kPush, Where::kAnyNamespace};
  Route(
      "POST", "/v1/chunks/missing", "/v1/chunks/missing", push_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res,
             const ApiKey& key) -> Status {
        BDN_ASSIGN_OR_RETURN(auto ids, ParseIdsBody(req.body, options_.max_missing_ids));
        // A key of one namespace learns only about blobs that namespace may read: any other
        // reads as missing (its upload then stores nothing new).
        BDN_ASSIGN_OR_RETURN(auto missing, PushStore(key, Freshness::kRecent)->FindMissing(ids));
        json list = json::array();
        for (const Digest& d : missing) list.push_back(d.Hex());
        http::SetJson(res, json{{"missing", list}}.dump());
        return Status::Ok();
      },
      IdsBodyLimit(options_.max_missing_ids));
  Route(
      "POST", "/v1/chunks/sizes", "/v1/chunks/sizes", push_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res,
             const ApiKey& key) -> Status {
        BDN_ASSIGN_OR_RETURN(auto ids, ParseIdsBody(req.body, options_.max_missing_ids));
        BDN_ASSIGN_OR_RETURN(BlobSizes sizes, PushStore(key, Freshness::kRecent)->Sizes(ids));
        json list = json::array();
        for (const auto& n : sizes) list.push_back(n ? json(*n) : json(nullptr));
        http::SetJson(res, json{{"sizes", list}}.dump());
        return Status::Ok();
      },
      IdsBodyLimit(options_.max_missing_ids));
  Route(
      "PUT", "/v1/chunks/([^/]+)", "/v1/chunks/{id}", push_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res, const ApiKey& key) {
        return PutChunk(req, res, key);
      },
      options_.max_blob_bytes,
      [this](const http::ServerRequest& req) -> Result<std::unique_ptr<http::BodySink>> {
        BDN_ASSIGN_OR_RETURN(Digest id, ChunkIdOf(req));
        const ApiKey& key = std::any_cast<const Authorized&>(req.context).key;
        BDN_ASSIGN_OR_RETURN(auto writer, PushStore(key, Freshness::kRecent)->StartPut(id));
        return std::unique_ptr<http::BodySink>(std::make_unique<ChunkUpload>(std::move(writer)));
      });
  const uint64_t upload_limit = UploadBodyLimit(options_.max_upload_ids, options_.max_blob_bytes);
  Route(
      "POST", "/v1/chunks/upload", "/v1/chunks/upload", push_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res, const ApiKey&) {
        return UploadChunks(req, res);
      },
      upload_limit,
      [this,
       upload_limit](const http::ServerRequest& req) -> Result<std::unique_ptr<http::BodySink>> {
        const ApiKey& key = std::any_cast<const Authorized&>(req.context).key;
        return std::unique_ptr<http::BodySink>(std::make_unique<UploadSink>(
            PushStore(key, Freshness::kRecent), options_.max_upload_ids, options_.max_blob_bytes,
            upload_limit));
      });
}

void Origin::RegisterChunkReads() {
  const Access pull_any{Scope::kPull, Where::kChunkRead};
  Route(
      "POST", "/v1/chunks/batch", "/v1/chunks/batch", pull_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res, const ApiKey&) {
        return BatchChunks(req, res);
      },
      IdsBodyLimit(options_.max_batch_ids));
  Route(
      "GET", "/v1/chunks/([^/]+)", "/v1/chunks/{id}", pull_any,
      [this](const http::ServerRequest& req, http::ServerResponse& res, const ApiKey&) {
        return GetChunk(req, res);
      },
      0, nullptr,
      [this](http::ServerRequest& req, http::ServerResponse& res) {
        return GetChunkNow(req, res);
      });
}

Status Origin::PutChunk(const http::ServerRequest& req, http::ServerResponse& res,
                        const ApiKey& key) {
  BDN_ASSIGN_OR_RETURN(Digest id, ChunkIdOf(req));
  // The body went into the store's writer as it arrived; the bytes are checked against the id
  // here, and nothing is stored if they do not match.
  auto* upload = dynamic_cast<ChunkUpload*>(req.body_sink.get());
  if (!upload) return InternalError("chunk " + id.ToString() + ": no upload");
  // A key of one namespace is not told that a blob it could not read was stored already.
  bool visible = true;
  if (!SeesEveryNamespace(key) && namespaces_) {
    BDN_ASSIGN_OR_RETURN(auto readable,
                         namespaces_->Readable(key.ns, std::span(&id, 1), Freshness::kRecent));
    visible = readable[0];
  }
  BDN_ASSIGN_OR_RETURN(PutOutcome outcome, upload->writer().Commit());
  bool had = outcome == PutOutcome::kAlreadyStored && visible;
  auto& m = server_->metrics();
  m.Add("bdn_chunks_received_total", {}, 1);
  m.Add("bdn_chunk_bytes_received_total", {}, static_cast<double>(upload->size_bytes()));
  http::SetJson(
      res, json{{"id", id.Hex()}, {"size_bytes", upload->size_bytes()}, {"stored", !had}}.dump(),
      had ? 200 : 201);
  return Status::Ok();
}

Status Origin::UploadChunks(const http::ServerRequest& req, http::ServerResponse& res) {
  // Each blob was verified and stored as its last byte arrived; what is left is whether the body
  // held the whole batch.
  auto* upload = dynamic_cast<UploadSink*>(req.body_sink.get());
  if (!upload) return InternalError("POST /v1/chunks/upload: no upload");
  BDN_RETURN_IF_ERROR(upload->Complete());
  auto& m = server_->metrics();
  m.Add("bdn_chunks_received_total", {}, static_cast<double>(upload->blobs()));
  m.Add("bdn_chunk_bytes_received_total", {}, static_cast<double>(upload->size_bytes()));
  // No per-blob answer: whether a blob was stored already would tell a key of one namespace
  // about another's (chunk_scope.h).
  http::SetJson(res, json{{"blobs", upload->blobs()}, {"size_bytes", upload->size_bytes()}}.dump());
  return Status::Ok();
}

void Origin::ReportCorruption(const Status& s) {
  // Every client that reads a corrupt chunk reports it again: at most 20 lines a minute.
  static log::RateLimiter limiter(20, std::chrono::minutes(1));
  limiter.Write(log::Level::kError, s.message());
  server_->metrics().Add("bdn_chunks_corrupt_total", {}, 1);
}

Status Origin::GetChunk(const http::ServerRequest& req, http::ServerResponse& res) {
  BDN_ASSIGN_OR_RETURN(Digest id, ChunkIdOf(req));
  // Before anything that tells whether the blob is stored (304, 404, 422).
  const ReadGrant& grant = GrantOf(req);
  if (!grant.Allows(id)) {
    return NotFoundError("chunk " + id.ToString() + ": not in " + grant.version);
  }
  const char* cache_control = ChunkCacheControl();
  const std::string etag = "\"" + id.Hex() + "\"";
  if (req.has_header("If-None-Match") && EtagMatches(req.get_header_value("If-None-Match"), etag)) {
    bool have = false;
    if (options_.role == Role::kCache) {
      // A node's key may only read the origin (pull), not ask its push-side queries: the node
      // reads the chunk (into its cache) to know it exists.
      auto got = store_->Get(id);
      if (!got && got.error().code() != StatusCode::kNotFound) return got.error();
      have = got.has_value();
    } else {
      BDN_ASSIGN_OR_RETURN(have, store_->Contains(id));
    }
    if (!have) return NotFoundError("chunk " + id.ToString() + ": not in store");
    res.status = 304;
    res.set_header("ETag", etag);
    res.set_header("Cache-Control", cache_control);
    return Status::Ok();
  }
  auto got = store_->Get(id);
  if (!got) {
    if (got.error().code() == StatusCode::kCorruption) ReportCorruption(got.error());
    return got.error();
  }
  AnswerChunk(req, res, id, *got);
  return Status::Ok();
}

const char* Origin::ChunkCacheControl() const {
  // Public only where anyone may read every chunk: an origin without authentication.
  return options_.auth == AuthMode::kDisabled && options_.role == Role::kOrigin ? kImmutablePublic
                                                                                : kImmutablePrivate;
}

bool Origin::GetChunkNow(http::ServerRequest& req, http::ServerResponse& res) {
  // Larger chunks are hashed on a worker: an I/O thread serves many connections.
  constexpr uint64_t kMaxInlineBytes = 1 << 20;
  auto admitted = read_admissions_->Find(req.get_header_value("Authorization"),
                                         req.get_header_value(kVersionHeader));
  if (!admitted) return false;
  auto id = ChunkIdOf(req);
  // Errors and refusals (400, 404 "not in <version>") and revalidation are GetChunk's.
  if (!id || !admitted->grant.Allows(*id) || req.has_header("If-None-Match")) return false;
  auto bytes = store_->GetNow(*id, kMaxInlineBytes);
  if (!bytes) return false;
  req.key_name = KeyNameForLog(admitted->key, &admitted->grant);
  if (options_.role != Role::kOrigin) {
    if (auto age = AccessMaxAgeValue(admitted->grant)) res.set_header(kAccessMaxAgeHeader, *age);
  }
  req.context = Authorized{std::move(admitted->key), std::move(admitted->grant)};
  AnswerChunk(req, res, *id, *bytes);
  return true;
}

void Origin::AnswerChunk(const http::ServerRequest& req, http::ServerResponse& res,
                         const Digest& id, const std::vector<uint8_t>& bytes) {
  const char* cache_control = ChunkCacheControl();
  const std::string etag = "\"" + id.Hex() + "\"";
  uint64_t offset = 0, length = bytes.size();
  res.status = 200;
  // A Range applies unless If-Range names another validator; another unit is ignored.
  if (req.has_header("Range") && http::IfRangeAllows(req, etag)) {
    auto range = http::ParseRange(req.get_header_value("Range"), bytes.size());
    if (!range) {
      res.set_header("Content-Range", "bytes */" + std::to_string(bytes.size()));
      http::SetError(res, range.error().WithPrefix("chunk " + id.ToString()), 416);
      return;
    }
    if (*range) {
      offset = (*range)->offset;
      length = (*range)->length;
      res.status = 206;
      res.set_header("Content-Range", "bytes " + std::to_string(offset) + "-" +
                                          std::to_string(offset + length - 1) + "/" +
                                          std::to_string(bytes.size()));
    }
  }
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", cache_control);
  res.set_header("Accept-Ranges", "bytes");
  res.set_content(reinterpret_cast<const char*>(bytes.data()) + offset, length, kBinary);
  if (req.method != "HEAD") {
    auto& m = server_->metrics();
    m.Add("bdn_chunks_sent_total", {}, 1);
    m.Add("bdn_chunk_bytes_sent_total", {}, static_cast<double>(length));
  }
}

Status Origin::BatchChunks(const http::ServerRequest& req, http::ServerResponse& res) {
  BDN_ASSIGN_OR_RETURN(auto ids, ParseIdsBody(req.body, options_.max_batch_ids));
  // Streamed one record per provider call, so a response of many large chunks never sits in
  // memory whole. An I/O error mid-stream aborts the connection; the client sees a short body.
  // Chunks are read a group at a time with GetMany: a local store reads a group's files in
  // parallel (cold disks answer several reads at once), a cache node's store (a NodeCache over
  // the origin) fetches a group's misses with one upstream request.
  // Memory: the blobs read ahead count in readahead_bytes_ until they are sent (or the response
  // ends, say when its client is dropped); over options_.batch_readahead_bytes server-wide, a
  // response reads one chunk at a time.
  struct State {
    std::vector<Digest> ids;
    ReadGrant grant;  // ids it does not allow are answered missing, never read
    size_t next = 0;
    bool started = false;
    BlobBatch group;  // blobs of ids [group_begin, group_begin + group.size())
    size_t group_begin = 0;
    std::shared_ptr<std::atomic<int64_t>> readahead;  // the server-wide count
    int64_t held = 0;                                 // this response's part of it
    void Hold(int64_t n) {
      held += n;
      *readahead += n;
    }
    ~State() { *readahead -= held; }
  };
  auto st = std::make_shared<State>();
  st->ids = std::move(ids);
  st->grant = GrantOf(req);
  st->readahead = readahead_bytes_;
  http::Metrics* metrics = &server_->metrics();
  res.status = 200;
  res.set_chunked_content_provider(kBinary, [this, st, metrics](size_t, http::DataSink& sink) {
    uint64_t sent = 0;
    if (!st->started) {
      if (!sink.write(kBatchMagic, sizeof kBatchMagic)) return false;
      st->started = true;
      sent += sizeof kBatchMagic;
    }
    if (st->next < st->ids.size()) {
      // A group is at most 64 chunks. (Smaller groups cost more: a local store starts its reader
      // threads per group, a cache node sends one upstream request per group of misses.)
      size_t k = st->next++;
      const Digest& id = st->ids[k];
      if (k >= st->group_begin + st->group.size()) {
        // Reserved before the read (as default-size chunks, 256 KiB) so that concurrent
        // responses cannot all pass the check at once, then corrected to what was read.
        size_t n = std::min<size_t>(64, st->ids.size() - k);
        int64_t estimate = static_cast<int64_t>(n) * 256 * 1024;
        int64_t before = st->readahead->fetch_add(estimate);
        if (n > 1 && static_cast<uint64_t>(before + estimate) > options_.batch_readahead_bytes) {
          *st->readahead -= estimate;
          n = 1;
          estimate = 256 * 1024;
          *st->readahead += estimate;
        }
        st->held += estimate;
        std::vector<Digest> group;
        for (size_t j = k; j < k + n; ++j) {
          if (st->grant.Allows(st->ids[j])) group.push_back(st->ids[j]);
        }
        auto got = group.empty() ? Result<BlobBatch>(BlobBatch{}) : store_->GetMany(group);
        if (!got && got.error().code() == StatusCode::kCorruption) ReportCorruption(got.error());
        st->group_begin = k;
        // A failed group (a bad chunk in it) is read chunk by chunk below instead.
        st->group.clear();
        if (got) {
          st->group.resize(n);
          for (size_t j = k, g = 0; j < k + n; ++j) {
            if (st->grant.Allows(st->ids[j])) st->group[j - k] = std::move((*got)[g++]);
          }
        }
        st->Hold(-estimate);
        for (const auto& blob : st->group) st->Hold(blob ? static_cast<int64_t>(blob->size()) : 0);
      }
      Result<std::vector<uint8_t>> bytes = Err(Status());
      if (!st->grant.Allows(id)) {
        bytes = Err(NotFoundError("chunk " + id.ToString() + ": not in " + st->grant.version));
      } else if (k < st->group_begin + st->group.size()) {
        auto& blob = st->group[k - st->group_begin];
        if (blob) st->Hold(-static_cast<int64_t>(blob->size()));
        bytes = blob ? Result<std::vector<uint8_t>>(std::move(*blob))
                     : Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
      } else {
        bytes = store_->Get(id);
        if (!bytes && bytes.error().code() == StatusCode::kCorruption) {
          ReportCorruption(bytes.error());
        }
      }
      if (!bytes && bytes.error().code() != StatusCode::kNotFound &&
          bytes.error().code() != StatusCode::kCorruption) {
        static log::RateLimiter limiter(20, std::chrono::minutes(1));
        limiter.Write(log::Level::kError, "POST /v1/chunks/batch: " + bytes.error().message());
        // A cache node whose upstream cannot be had answers that chunk missing and goes on: its
        // caller asks its own upstream for it, and gets the chunks the node holds. From an
        // operator: with the origin down, one uncached chunk in a batch ended the whole
        // response, the caller set the node aside, and chunks the node held went unread.
        const StatusCode code = bytes.error().code();
        if (options_.role != Role::kCache ||
            (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded)) {
          return false;
        }
      }
      // A stored copy that fails verification is never sent: it reads as missing.
      uint32_t length = bytes ? static_cast<uint32_t>(bytes->size()) : 0;
      std::string head = BatchRecordHeader(id, bytes ? kBatchFound : kBatchMissing, length);
      if (!sink.write(head.data(), head.size())) return false;
      if (length > 0 && !sink.write(std::move(*bytes))) return false;
      sent += head.size() + length;
      if (bytes) {
        metrics->Add("bdn_chunks_sent_total", {}, 1);
        metrics->Add("bdn_chunk_bytes_sent_total", {}, length);
      }
    }
    metrics->Add("bdn_http_response_bytes_total", {{"route", "/v1/chunks/batch"}},
                 static_cast<double>(sent));
    if (st->next == st->ids.size()) sink.done();
    return true;
  });
  return Status::Ok();
}

}  // namespace bdn::origin
