#include "bdn/store/chunk_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"
#include "bdn/store/atomic_file.h"

namespace bdn {
namespace fs = std::filesystem;

Result<std::vector<Digest>> ChunkStore::FindMissing(std::span<const Digest> ids) {
  std::vector<Digest> missing;
  for (const Digest& id : ids) {
    BDN_ASSIGN_OR_RETURN(bool has, Contains(id));
    if (!has) missing.push_back(id);
  }
  return missing;
}

namespace {
// One GetMany answer from per-blob Get results: NotFound becomes nullopt, any other error fails
// the whole batch.
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
}  // namespace

Result<BlobBatch> ChunkStore::GetMany(std::span<const Digest> ids) {
  std::vector<Result<std::vector<uint8_t>>> got;
  got.reserve(ids.size());
  for (const Digest& id : ids) {
    got.push_back(Get(id));
    if (!got.back() && got.back().error().code() != StatusCode::kNotFound) break;
  }
  return CollectBatch(std::move(got));
}

Result<BlobBatch> LocalChunkStore::GetMany(std::span<const Digest> ids) {
  std::vector<Result<std::vector<uint8_t>>> got(ids.size());
  ParallelFor(ids.size(), 8, [&](size_t k) { got[k] = Get(ids[k]); });
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

Result<std::unique_ptr<LocalChunkStore>> LocalChunkStore::Open(const fs::path& root,
                                                               Durability durability) {
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(root, "chunk store"));
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(root / "chunks", "chunk store"));
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(root / "tmp", "chunk store"));
  std::error_code ec;
  // Temporary files of writers that died (kill -9) are removed: their names end in ".<pid>.<n>".
  for (const auto& de : fs::directory_iterator(root / "tmp", ec)) {
    std::string name = de.path().filename().string();
    size_t last = name.rfind('.');
    size_t prev =
        last == std::string::npos || last == 0 ? std::string::npos : name.rfind('.', last - 1);
    if (prev == std::string::npos) continue;
    std::string pid = name.substr(prev + 1, last - prev - 1);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(std::stoi(pid), 0) != 0 && errno == ESRCH) fs::remove(de.path(), ec);
  }
  return std::unique_ptr<LocalChunkStore>(new LocalChunkStore(root, durability));
}

fs::path LocalChunkStore::PathOf(const Digest& id) const {
  std::string hex = id.Hex();
  return root_ / "chunks" / hex.substr(0, 2) / hex;
}

Result<bool> LocalChunkStore::Contains(const Digest& id) {
  struct stat st;
  if (::stat(PathOf(id).c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return Err(ErrnoError("chunk " + id.ToString(), errno));
}

Result<BlobSizes> LocalChunkStore::Sizes(std::span<const Digest> ids) {
  BlobSizes out;
  out.reserve(ids.size());
  for (const Digest& id : ids) {
    struct stat st;
    if (::stat(PathOf(id).c_str(), &st) == 0) {
      out.emplace_back(static_cast<uint64_t>(st.st_size));
    } else if (errno == ENOENT) {
      out.emplace_back(std::nullopt);
    } else {
      return Err(ErrnoError("chunk " + id.ToString(), errno));
    }
  }
  return out;
}

Status LocalChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  if (Status s = VerifyChunk(id, data); !s.ok()) {
    return InvalidArgumentError("chunk " + id.ToString() + ": bytes do not match the id");
  }
  fs::path final_path = PathOf(id);
  struct stat st;
  if (::stat(final_path.c_str(), &st) == 0) return Status::Ok();
  auto written = WriteFileAtomically(final_path, data, "chunk " + id.ToString(), WriteOptions());
  return written ? Status::Ok() : written.error();
}

AtomicWriteOptions LocalChunkStore::WriteOptions() const {
  AtomicWriteOptions options{.tmp_dir = root_ / "tmp"};
  if (durability_ == Durability::kSyncfs) {
    // Start writeback now so the Sync() before a commit finds little left to write.
    options.before_close = [](int fd) {
      ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
      return Status::Ok();
    };
  }
  return options;
}

namespace {

// Hashes a blob's pieces as they come; subclasses keep the bytes.
class HashingBlobWriter : public BlobWriter {
 public:
  explicit HashingBlobWriter(const Digest& id) : id_(id) {}
  Status Append(std::span<const uint8_t> piece) override {
    hasher_.Update(piece);
    return Keep(piece);
  }
  Result<PutOutcome> Commit() override {
    Digest got = hasher_.Finalize();
    if (got != id_) {
      Drop();
      return Err(CorruptionError("chunk " + id_.ToString() + ": received bytes hash to " +
                                 got.ToString()));
    }
    return Store();
  }

 protected:
  virtual Status Keep(std::span<const uint8_t> piece) = 0;
  virtual void Drop() = 0;
  virtual Result<PutOutcome> Store() = 0;
  const Digest id_;

 private:
  Blake3Hasher hasher_;
};

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

// LocalChunkStore's: the bytes go to a temporary file as they come (none if already stored).
class FileBlobWriter : public HashingBlobWriter {
 public:
  FileBlobWriter(const Digest& id, std::unique_ptr<AtomicFileWriter> file)
      : HashingBlobWriter(id), file_(std::move(file)) {}

 private:
  Status Keep(std::span<const uint8_t> piece) override {
    return file_ ? file_->Append(piece) : Status::Ok();
  }
  void Drop() override { file_.reset(); }
  Result<PutOutcome> Store() override {
    if (!file_) return PutOutcome::kAlreadyStored;
    BDN_ASSIGN_OR_RETURN(WriteOutcome w, file_->Commit());
    file_.reset();
    return w == WriteOutcome::kWritten ? PutOutcome::kStored : PutOutcome::kAlreadyStored;
  }

  std::unique_ptr<AtomicFileWriter> file_;  // null: the blob is already stored
};

}  // namespace

Result<std::unique_ptr<BlobWriter>> ChunkStore::StartPut(const Digest& id) {
  return std::unique_ptr<BlobWriter>(std::make_unique<BufferedBlobWriter>(*this, id));
}

Result<std::unique_ptr<BlobWriter>> LocalChunkStore::StartPut(const Digest& id) {
  fs::path final_path = PathOf(id);
  struct stat st;
  std::unique_ptr<AtomicFileWriter> file;
  if (::stat(final_path.c_str(), &st) != 0) {
    BDN_ASSIGN_OR_RETURN(
        file, AtomicFileWriter::Create(final_path, "chunk " + id.ToString(), WriteOptions()));
  }
  return std::unique_ptr<BlobWriter>(std::make_unique<FileBlobWriter>(id, std::move(file)));
}

Result<std::vector<uint8_t>> LocalChunkStore::Get(const Digest& id) {
  fs::path p = PathOf(id);
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
    return Err(ErrnoError("chunk " + id.ToString() + ": open " + p.string(), errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Err(ErrnoError("chunk " + id.ToString() + ": stat", e));
  }
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + off, buf.size() - off, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Err(ErrnoError("chunk " + id.ToString() + ": read", e));
    }
    if (n == 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(off);
  if (Status s = VerifyChunk(id, buf); !s.ok()) {
    // Move the bad copy aside so the chunk counts as missing: the next push of the same data
    // stores it again (repairing the store), and nothing is deleted.
    fs::path bad = root_ / "corrupt" / id.Hex();
    if (CreatePrivateDirectory(bad.parent_path(), "chunk store").ok() &&
        ::rename(p.c_str(), bad.c_str()) == 0) {
      return Err(CorruptionError(s.message() + "; moved to " + bad.string() +
                                 ", push the data again to repair"));
    }
    return Err(s);
  }
  return buf;
}

Status LocalChunkStore::Sync() {
  if (durability_ == Durability::kNone) return Status::Ok();
  int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("chunk store " + root_.string(), errno);
  int rc = ::syncfs(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError("chunk store " + root_.string() + ": syncfs", e);
  return Status::Ok();
}

Result<bool> MemChunkStore::Contains(const Digest& id) {
  std::lock_guard lock(mu_);
  return blobs_.contains(id);
}

Result<BlobSizes> MemChunkStore::Sizes(std::span<const Digest> ids) {
  std::lock_guard lock(mu_);
  BlobSizes out;
  out.reserve(ids.size());
  for (const Digest& id : ids) {
    auto it = blobs_.find(id);
    out.emplace_back(it == blobs_.end() ? std::nullopt : std::optional<uint64_t>(it->second.size()));
  }
  return out;
}

Status MemChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  if (!VerifyChunk(id, data).ok()) {
    return InvalidArgumentError("chunk " + id.ToString() + ": bytes do not match the id");
  }
  std::lock_guard lock(mu_);
  blobs_.try_emplace(id, data.begin(), data.end());
  return Status::Ok();
}

Result<std::vector<uint8_t>> MemChunkStore::Get(const Digest& id) {
  std::vector<uint8_t> copy;
  {
    std::lock_guard lock(mu_);
    auto it = blobs_.find(id);
    if (it == blobs_.end()) return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
    copy = it->second;
  }
  BDN_RETURN_IF_ERROR(VerifyChunk(id, copy));
  return copy;
}

void MemChunkStore::CorruptForTest(const Digest& id, std::vector<uint8_t> bytes) {
  std::lock_guard lock(mu_);
  blobs_[id] = std::move(bytes);
}

size_t MemChunkStore::size() const {
  std::lock_guard lock(mu_);
  return blobs_.size();
}

}  // namespace bdn
