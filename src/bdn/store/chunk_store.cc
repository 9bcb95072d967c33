#include "bdn/store/chunk_store.h"

namespace bdn {

Result<std::vector<Digest>> ChunkStore::FindMissing(std::span<const Digest> ids) {
  std::vector<Digest> missing;
  for (const Digest& id : ids) {
    BDN_ASSIGN_OR_RETURN(bool has, Contains(id));
    if (!has) missing.push_back(id);
  }
  return missing;
}

Result<BlobBatch> CollectBatch(std::vector<Result<std::vector<uint8_t>>> got) {
  BlobBatch out;
  out.reserve(got.size());
  for (auto& bytes : got) {
    if (bytes) {
      out.emplace_back(std::move(*bytes));
    } else if (bytes.error().code() == StatusCode::kNotFound) {
      out.emplace_back(std::nullopt);
    } else {
      return Err(bytes.error());
    }
  }
  return out;
}

Result<BlobBatch> ChunkStore::GetMany(std::span<const Digest> ids) {
  std::vector<Result<std::vector<uint8_t>>> got;
  got.reserve(ids.size());
  for (const Digest& id : ids) {
    got.push_back(Get(id));
    if (!got.back() && got.back().error().code() != StatusCode::kNotFound) break;
  }
  return CollectBatch(std::move(got));
}

Status VerifyChunk(const Digest& id, std::span<const uint8_t> data) {
  Digest got = Digest::Of(data);
  if (got != id) {
    return CorruptionError("chunk " + id.ToString() + ": digest mismatch (stored bytes hash to " +
                           got.ToString() + ")");
  }
  return Status::Ok();
}

Result<bool> MemChunkStore::Contains(const Digest& id) {
  MutexLock lock(mu_);
  return blobs_.contains(id);
}

Result<BlobSizes> MemChunkStore::Sizes(std::span<const Digest> ids) {
  MutexLock lock(mu_);
  BlobSizes out;
  out.reserve(ids.size());
  for (const Digest& id : ids) {
    auto it = blobs_.find(id);
    out.emplace_back(it == blobs_.end() ? std::nullopt
                                        : std::optional<uint64_t>(it->second.size()));
  }
  return out;
}

Status MemChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  if (!VerifyChunk(id, data).ok()) {
    return InvalidArgumentError("chunk " + id.ToString() + ": bytes do not match the id");
  }
  MutexLock lock(mu_);
  blobs_.try_emplace(id, data.begin(), data.end());
  return Status::Ok();
}

Result<std::vector<uint8_t>> MemChunkStore::Get(const Digest& id) {
  std::vector<uint8_t> copy;
  {
    MutexLock lock(mu_);
    auto it = blobs_.find(id);
    if (it == blobs_.end()) return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
    copy = it->second;
  }
  BDN_RETURN_IF_ERROR(VerifyChunk(id, copy));
  return copy;
}

void MemChunkStore::CorruptForTest(const Digest& id, std::vector<uint8_t> bytes) {
  MutexLock lock(mu_);
  blobs_[id] = std::move(bytes);
}

size_t MemChunkStore::size() const {
  MutexLock lock(mu_);
  return blobs_.size();
}

namespace {

// The default: the bytes in memory, then ChunkStore::Put.
class BufferedBlobWriter : public HashingBlobWriter {
 public:
  BufferedBlobWriter(ChunkStore& store, const Digest& id) : HashingBlobWriter(id), store_(store) {}

 private:
  Status Keep(std::span<const uint8_t> piece) override {
    bytes_.insert(bytes_.end(), piece.begin(), piece.end());
    return Status::Ok();
  }
  void Drop() override { bytes_ = {}; }
  Result<PutOutcome> Store() override {
    BDN_ASSIGN_OR_RETURN(bool had, store_.Contains(id_));
    if (had) return PutOutcome::kAlreadyStored;
    BDN_RETURN_IF_ERROR(store_.Put(id_, bytes_));
    return PutOutcome::kStored;
  }

  ChunkStore& store_;
  std::vector<uint8_t> bytes_;
};

}  // namespace

Result<std::unique_ptr<BlobWriter>> ChunkStore::StartPut(const Digest& id) {
  return std::unique_ptr<BlobWriter>(std::make_unique<BufferedBlobWriter>(*this, id));
}

Status ChunkStore::PutMany(std::span<const BlobPut> blobs) {
  for (const BlobPut& b : blobs) BDN_RETURN_IF_ERROR(Put(b.id, b.data));
  return Status::Ok();
}

std::optional<std::vector<uint8_t>> ChunkStore::GetNow(const Digest&, uint64_t) {
  return std::nullopt;
}

Result<std::unique_ptr<UploadBatch>> ChunkStore::StartUploads(std::span<const Digest> ids) {
  // Each writer is the store's own StartPut.
  return std::unique_ptr<UploadBatch>(
      std::make_unique<UploadsVia>([this](const Digest& id) { return StartPut(id); }, ids));
}

Status StillHeld(StoreHold& hold) {
  BDN_ASSIGN_OR_RETURN(bool held, hold.Held());
  if (held) return Status::Ok();
  return UnavailableError("the chunk store's GC lock was lost (its database connection ended)");
}

Result<std::unique_ptr<StoreHold>> ChunkStore::HoldForCommit() {
  return std::make_unique<StoreHold>();
}

}  // namespace bdn
