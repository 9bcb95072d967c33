#include "bdn/store/pack_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/store/atomic_file.h"

namespace bdn::pack {
namespace fs = std::filesystem;
namespace {

constexpr char kIndexMagic[8] = {'B', 'D', 'N', 'P', 'I', 'D', 'X', '\x01'};
constexpr size_t kChecksumBytes = 32;

uint64_t TableBytes(uint64_t entries, uint64_t packs) {
  return kIndexHeaderBytes + kIndexFanoutBytes + entries * kIndexEntryBytes + packs * 8 +
         kChecksumBytes;
}

// Writes into an AtomicFileWriter through a buffer while hashing everything written.
class HashingWriter {
 public:
  explicit HashingWriter(AtomicFileWriter& out) : out_(out) { buf_.reserve(kBuf); }
  Status Write(const uint8_t* p, size_t n) {
    hasher_.Update(p, n);
    while (n > 0) {
      size_t k = std::min(n, kBuf - buf_.size());
      buf_.insert(buf_.end(), p, p + k);
      p += k;
      n -= k;
      if (buf_.size() == kBuf) BDN_RETURN_IF_ERROR(Flush());
    }
    return Status::Ok();
  }
  Status Finish() {
    Digest sum = hasher_.Finalize();
    buf_.insert(buf_.end(), sum.data(), sum.data() + Digest::kSize);
    return Flush();
  }

 private:
  static constexpr size_t kBuf = 1 << 20;
  Status Flush() {
    BDN_RETURN_IF_ERROR(out_.Append(buf_));
    buf_.clear();
    return Status::Ok();
  }
  AtomicFileWriter& out_;
  std::vector<uint8_t> buf_;
  Blake3Hasher hasher_;
};

}  // namespace

bool IndexOrder(const IndexedBlob& a, const IndexedBlob& b) {
  if (a.loc.id != b.loc.id) return a.loc.id < b.loc.id;
  if (a.pack != b.pack) return a.pack < b.pack;
  return a.loc.offset < b.loc.offset;
}

Result<std::shared_ptr<const IndexTable>> IndexTable::Open(const fs::path& path) {
  const std::string what = "index table " + path.string();
  // Never through a symlink, never waiting on a FIFO: anything but a file is a damaged table.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd && errno == ELOOP) return Err(CorruptionError(what + ": not a regular file"));
  if (!fd) return Err(ErrnoError(what, errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(what, errno));
  if (!S_ISREG(st.st_mode)) return Err(CorruptionError(what + ": not a regular file"));
  const auto bytes = static_cast<uint64_t>(st.st_size);
  if (bytes < TableBytes(0, 0)) return Err(CorruptionError(what + ": too short"));
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return Err(ErrnoError(what + ": mmap", errno));
  std::shared_ptr<IndexTable> t(new IndexTable());
  t->path_ = path;
  t->map_ = static_cast<const uint8_t*>(map);
  t->map_bytes_ = bytes;
  const uint8_t* h = t->map_;
  Digest check = Digest::Of(std::span<const uint8_t>(h, 32));
  if (std::memcmp(h, kIndexMagic, 8) != 0 || std::memcmp(check.data(), h + 32, 32) != 0) {
    return Err(CorruptionError(what + ": bad header"));
  }
  t->count_ = GetU64(h + 8);
  uint64_t pack_count = GetU64(h + 16);
  if (t->count_ > bytes / kIndexEntryBytes || pack_count > bytes / 8 ||
      TableBytes(t->count_, pack_count) != bytes) {
    return Err(CorruptionError(what + ": length does not match its counts"));
  }
  uint64_t prev = 0;
  for (int b = 0; b < 256; ++b) {
    uint64_t f = t->Fanout(b);
    if (f < prev || f > t->count_) return Err(CorruptionError(what + ": bad fan-out"));
    prev = f;
  }
  if (prev != t->count_) return Err(CorruptionError(what + ": bad fan-out"));
  const uint8_t* packs = h + kIndexHeaderBytes + kIndexFanoutBytes + t->count_ * kIndexEntryBytes;
  t->packs_.reserve(pack_count);
  for (uint64_t i = 0; i < pack_count; ++i) {
    uint64_t p = GetU64(packs + 8 * i);
    if (i > 0 && p <= t->packs_.back()) return Err(CorruptionError(what + ": packs out of order"));
    t->packs_.push_back(p);
  }
  ::madvise(map, bytes, MADV_RANDOM);
  return std::shared_ptr<const IndexTable>(std::move(t));
}

IndexTable::~IndexTable() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

uint64_t IndexTable::Fanout(int b) const {
  return GetU64(map_ + kIndexHeaderBytes + 8 * static_cast<size_t>(b));
}

bool IndexTable::IdEquals(uint64_t i, const Digest& id) const {
  return std::memcmp(map_ + kIndexHeaderBytes + kIndexFanoutBytes + i * kIndexEntryBytes, id.data(),
                     Digest::kSize) == 0;
}

uint64_t IndexTable::LowerBound(const Digest& id, uint64_t lo, uint64_t hi) const {
  const uint8_t* entries = map_ + kIndexHeaderBytes + kIndexFanoutBytes;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (std::memcmp(entries + mid * kIndexEntryBytes, id.data(), Digest::kSize) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

IndexedBlob IndexTable::At(uint64_t i) const {
  const uint8_t* p = map_ + kIndexHeaderBytes + kIndexFanoutBytes + i * kIndexEntryBytes;
  IndexedBlob b;
  std::array<uint8_t, Digest::kSize> id;
  std::memcpy(id.data(), p, Digest::kSize);
  b.loc.id = Digest(id);
  b.pack = GetU64(p + 32);
  b.loc.offset = GetU64(p + 40);
  b.loc.stored_bytes = GetU64(p + 48);
  uint64_t raw = GetU64(p + 56);
  b.loc.raw_bytes = raw & ((uint64_t{1} << 56) - 1);
  b.loc.codec = static_cast<Codec>(raw >> 56);
  return b;
}

Status IndexTable::VerifyChecksum() const {
  Digest sum = Digest::Of(std::span<const uint8_t>(map_, map_bytes_ - kChecksumBytes));
  if (std::memcmp(sum.data(), map_ + map_bytes_ - kChecksumBytes, kChecksumBytes) != 0) {
    return CorruptionError("index table " + path_.string() + ": checksum mismatch");
  }
  return Status::Ok();
}

Result<fs::path> WriteIndexTable(const fs::path& dir, std::vector<IndexedBlob> blobs,
                                 std::vector<uint64_t> packs, bool durable) {
  std::sort(blobs.begin(), blobs.end(), IndexOrder);
  blobs.erase(std::unique(blobs.begin(), blobs.end(),
                          [](const IndexedBlob& a, const IndexedBlob& b) {
                            return a.loc.id == b.loc.id && a.pack == b.pack &&
                                   a.loc.offset == b.loc.offset;
                          }),
              blobs.end());
  std::sort(packs.begin(), packs.end());
  packs.erase(std::unique(packs.begin(), packs.end()), packs.end());
  const std::string name = Hex16(RandomId()) + ".idx";
  const fs::path final_path = dir / name;
  // ".tmp-" names a temporary table: the store's opener removes those dead writers left.
  BDN_ASSIGN_OR_RETURN(
      AtomicFileWriter out,
      AtomicFileWriter::Create(
          final_path, "index table " + final_path.string(),
          {.tmp_name = ".tmp-" + name, .sync = durable ? FileSync::kData : FileSync::kNone}));
  HashingWriter w(out);
  uint8_t header[kIndexHeaderBytes] = {};
  std::memcpy(header, kIndexMagic, 8);
  PutU64(header + 8, blobs.size());
  PutU64(header + 16, packs.size());
  Digest check = Digest::Of(std::span<const uint8_t>(header, 32));
  std::memcpy(header + 32, check.data(), 32);
  BDN_RETURN_IF_ERROR(w.Write(header, sizeof header));
  uint8_t fanout[kIndexFanoutBytes];
  size_t k = 0;
  for (int b = 0; b < 256; ++b) {
    while (k < blobs.size() && blobs[k].loc.id.data()[0] <= b) ++k;
    PutU64(fanout + 8 * b, k);
  }
  BDN_RETURN_IF_ERROR(w.Write(fanout, sizeof fanout));
  for (const IndexedBlob& b : blobs) {
    uint8_t e[kIndexEntryBytes];
    std::memcpy(e, b.loc.id.data(), Digest::kSize);
    PutU64(e + 32, b.pack);
    PutU64(e + 40, b.loc.offset);
    PutU64(e + 48, b.loc.stored_bytes);
    PutU64(e + 56, b.loc.raw_bytes | (static_cast<uint64_t>(b.loc.codec) << 56));
    BDN_RETURN_IF_ERROR(w.Write(e, sizeof e));
  }
  for (uint64_t p : packs) {
    uint8_t e[8];
    PutU64(e, p);
    BDN_RETURN_IF_ERROR(w.Write(e, sizeof e));
  }
  BDN_RETURN_IF_ERROR(w.Finish());
  if (auto committed = out.Commit(); !committed) return Err(committed.error());
  return final_path;
}

uint64_t RandomId() {
  uint64_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != sizeof v) {
  }
  return v;
}

std::optional<uint64_t> ParseHex16Name(std::string_view name, std::string_view suffix) {
  if (!name.ends_with(suffix)) return std::nullopt;
  return ParseHex16(name.substr(0, name.size() - suffix.size()));
}

}  // namespace bdn::pack
