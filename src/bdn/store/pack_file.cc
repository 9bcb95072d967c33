#include "bdn/store/pack_file.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "bdn/store/chunk_store.h"  // VerifyChunk

namespace bdn::pack {
namespace {

// Moves `iov`/`count` past `n` transferred bytes.
void Advance(struct iovec*& iov, int& count, size_t n) {
  while (count > 0 && n >= iov->iov_len) {
    n -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0) {
    iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + n;
    iov->iov_len -= n;
  }
}

// Reads into `iov` (modified) from `offset` until full or end of file; returns bytes read or -1
// with errno set.
ssize_t PreadvFull(int fd, struct iovec* iov, int count, uint64_t offset) {
  size_t total = 0;
  while (count > 0) {
    ssize_t n = ::preadv(fd, iov, count, static_cast<off_t>(offset + total));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
    Advance(iov, count, static_cast<size_t>(n));
  }
  return static_cast<ssize_t>(total);
}

ssize_t PreadFull(int fd, void* buf, size_t len, uint64_t offset) {
  struct iovec iov = {buf, len};
  return PreadvFull(fd, &iov, 1, offset);
}

Status PwriteAll(int fd, struct iovec* iov, int count, uint64_t offset, const std::string& what) {
  uint64_t at = offset;
  while (count > 0) {
    ssize_t n = ::pwritev(fd, iov, count, static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what + ": write", errno);
    }
    at += static_cast<uint64_t>(n);
    Advance(iov, count, static_cast<size_t>(n));
  }
  return Status::Ok();
}

std::string InPack(std::string_view pack_what, uint64_t offset) {
  return " in " + std::string(pack_what) + " at offset " + std::to_string(offset);
}

}  // namespace

Result<PackWriter> PackWriter::Start(int fd, std::string what) {
  auto header = EncodePackHeader();
  struct iovec iov = {header.data(), header.size()};
  BDN_RETURN_IF_ERROR(PwriteAll(fd, &iov, 1, 0, what));
  return PackWriter(fd, std::move(what));
}

Result<BlobLocation> PackWriter::Append(const Digest& id, uint64_t raw_bytes, Codec codec,
                                        std::span<const uint8_t> stored) {
  if (sealed_) return Err(InternalError(what_ + ": append after seal"));
  if (stored.size() > kMaxBlobBytes || raw_bytes > kMaxBlobBytes) {
    return Err(InvalidArgumentError("chunk " + id.ToString() + ": " +
                                    std::to_string(raw_bytes) + " bytes, too large for a pack"));
  }
  BlobLocation loc{id, end_, stored.size(), raw_bytes, codec};
  auto header = EncodeRecordHeader(loc);
  struct iovec iov[2] = {{header.data(), header.size()},
                         {const_cast<uint8_t*>(stored.data()), stored.size()}};
  Status s = PwriteAll(fd_, iov, stored.empty() ? 1 : 2, end_, what_);
  if (!s.ok()) {
    // A partial record must not stay behind the last whole one.
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) {
      // The next append or the footer overwrites it anyway; the scan stops at it.
    }
    return Err(s);
  }
  end_ = loc.end();
  blobs_.push_back(loc);
  return loc;
}

Status PackWriter::BeginRecord() {
  if (sealed_ || streaming_) return InternalError(what_ + ": record begun while another is open");
  // A zeroed header slot: the records scan stops there until FinishRecord fills it.
  std::array<uint8_t, kRecordHeaderBytes> zero{};
  struct iovec iov = {zero.data(), zero.size()};
  Status s = PwriteAll(fd_, &iov, 1, end_, what_);
  if (!s.ok()) {
    AbandonRecord();
    return s;
  }
  streaming_ = true;
  stream_bytes_ = 0;
  return Status::Ok();
}

Status PackWriter::AppendPayload(std::span<const uint8_t> piece) {
  if (!streaming_) return InternalError(what_ + ": no record begun");
  if (stream_bytes_ + piece.size() > kMaxBlobBytes) {
    AbandonRecord();
    return InvalidArgumentError(what_ + ": record too large for a pack");
  }
  struct iovec iov = {const_cast<uint8_t*>(piece.data()), piece.size()};
  Status s = PwriteAll(fd_, &iov, 1, end_ + kRecordHeaderBytes + stream_bytes_, what_);
  if (!s.ok()) {
    AbandonRecord();
    return s;
  }
  stream_bytes_ += piece.size();
  return Status::Ok();
}

Result<BlobLocation> PackWriter::FinishRecord(const Digest& id) {
  if (!streaming_) return Err(InternalError(what_ + ": no record begun"));
  BlobLocation loc{id, end_, stream_bytes_, stream_bytes_, Codec::kNone};
  auto header = EncodeRecordHeader(loc);
  struct iovec iov = {header.data(), header.size()};
  Status s = PwriteAll(fd_, &iov, 1, end_, what_);
  if (!s.ok()) {
    AbandonRecord();
    return Err(s);
  }
  streaming_ = false;
  end_ = loc.end();
  blobs_.push_back(loc);
  return loc;
}

void PackWriter::AbandonRecord() {
  streaming_ = false;
  stream_bytes_ = 0;
  if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) {
    // The next record or the footer overwrites it; the scan stops at its zeroed header anyway.
  }
}

Status PackWriter::Seal() {
  if (streaming_) return InternalError(what_ + ": seal while a record is open");
  if (sealed_) return Status::Ok();
  std::vector<uint8_t> footer = EncodeFooter(blobs_, end_);
  struct iovec iov = {footer.data(), footer.size()};
  BDN_RETURN_IF_ERROR(PwriteAll(fd_, &iov, 1, end_, what_));
  end_ += footer.size();
  sealed_ = true;
  return Status::Ok();
}

Result<std::vector<BlobLocation>> ReadFooter(int fd, uint64_t file_bytes, std::string_view what) {
  const std::string w(what);
  uint8_t tail[kTrailerBytes];
  if (file_bytes < kPackHeaderBytes + kTrailerBytes) {
    return Err(CorruptionError(w + ": no valid trailer (file too short)"));
  }
  ssize_t n = PreadFull(fd, tail, sizeof tail, file_bytes - kTrailerBytes);
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  if (static_cast<size_t>(n) != sizeof tail) {
    return Err(CorruptionError(w + ": no valid trailer (file shorter than its size)"));
  }
  BDN_ASSIGN_OR_RETURN(Trailer t, DecodeTrailer(tail, file_bytes, what));
  std::vector<uint8_t> footer(file_bytes - t.footer_offset);
  n = PreadFull(fd, footer.data(), footer.size(), t.footer_offset);
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  if (static_cast<size_t>(n) != footer.size()) {
    return Err(CorruptionError(w + ": footer: file shorter than its size"));
  }
  return DecodeFooter(footer, t, what);
}

namespace {

// What one record read at an offset turned out to be (ReadRecordAt).
enum class RecordState {
  kWhole,       // header checks, payload in the file, decodes, hashes to the id
  kBadHeader,   // no record header checks here (torn, damaged, zeros, a footer)
  kCutOff,      // the header checks but the file ends inside the header or the payload
  kBadPayload,  // the header checks, the payload is in the file but does not decode or hash
};

struct RecordAt {
  RecordState state = RecordState::kBadHeader;
  BlobLocation loc;  // from the header (kWhole, kCutOff, kBadPayload)
  std::string why;   // for the states other than kWhole
};

// Reads and verifies the record at `at` of a file of `file_bytes`. `stored` and `raw` are
// scratch buffers. Errors: ErrnoError on I/O errors only.
Result<RecordAt> ReadRecordAt(int fd, uint64_t at, uint64_t file_bytes, std::string_view what,
                              std::vector<uint8_t>& stored, std::vector<uint8_t>& raw) {
  const std::string w(what);
  const std::string here = "record at offset " + std::to_string(at);
  RecordAt out;
  uint8_t header[kRecordHeaderBytes];
  ssize_t n = PreadFull(fd, header, sizeof header, at);
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  if (static_cast<size_t>(n) < sizeof header) {
    out.state = RecordState::kCutOff;
    out.why = here + ": cut off";
    return out;
  }
  auto loc = DecodeRecordHeader(header, at, what);
  if (!loc) {
    out.why = loc.error().message().substr(w.size() + 2);
    return out;
  }
  out.loc = *loc;
  if (loc->payload_offset() > file_bytes || loc->stored_bytes > file_bytes - loc->payload_offset()) {
    out.state = RecordState::kCutOff;
    out.why = here + ": cut off";
    return out;
  }
  stored.resize(loc->stored_bytes);
  n = PreadFull(fd, stored.data(), stored.size(), loc->payload_offset());
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  if (static_cast<size_t>(n) != stored.size()) {
    out.state = RecordState::kCutOff;
    out.why = here + ": cut off";
    return out;
  }
  std::span<const uint8_t> bytes = stored;
  if (loc->codec != Codec::kNone) {
    raw.resize(loc->raw_bytes);
    Status s = DecodeBlob(loc->codec, stored, raw, here);
    if (!s.ok()) {
      out.state = RecordState::kBadPayload;
      out.why = s.message();
      return out;
    }
    bytes = raw;
  }
  if (Digest::Of(bytes) != loc->id) {
    out.state = RecordState::kBadPayload;
    out.why = here + ": digest mismatch";
    return out;
  }
  out.state = RecordState::kWhole;
  return out;
}

// The offset of the first valid record header at or after `from` (a 64-byte header at an offset
// <= file_bytes - 64 whose magic and check match), or file_bytes if there is none. Reads the file
// in blocks, looking for the record magic. Errors: ErrnoError on I/O errors.
Result<uint64_t> NextRecordHeader(int fd, uint64_t from, uint64_t file_bytes,
                                  std::string_view what) {
  constexpr size_t kBlock = size_t{1} << 20;
  const std::string w(what);
  std::vector<uint8_t> buf(kBlock + kRecordHeaderBytes);
  for (uint64_t base = from; base + kRecordHeaderBytes <= file_bytes; base += kBlock) {
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(buf.size(), file_bytes - base));
    ssize_t n = PreadFull(fd, buf.data(), want, base);
    if (n < 0) return Err(ErrnoError(w + ": read", errno));
    const size_t got = static_cast<size_t>(n);
    // A header starting in this block (at most kBlock starts) lies wholly in buf.
    const size_t starts = std::min(got, kBlock);
    for (size_t i = 0; i < starts;) {
      const void* hit = ::memmem(buf.data() + i, got - i, "BDNR", 4);
      if (hit == nullptr) break;
      const size_t k = static_cast<size_t>(static_cast<const uint8_t*>(hit) - buf.data());
      if (k >= starts) break;
      if (k + kRecordHeaderBytes <= got &&
          DecodeRecordHeader(std::span<const uint8_t>(buf.data() + k, kRecordHeaderBytes),
                             base + k, what)) {
        return base + k;
      }
      i = k + 1;
    }
    if (got < want) break;  // the file is shorter than it was
  }
  return file_bytes;
}

}  // namespace

Result<ScanResult> ScanRecords(int fd, uint64_t file_bytes, std::string_view what) {
  const std::string w(what);
  ScanResult out;
  uint8_t head[kPackHeaderBytes];
  ssize_t n = PreadFull(fd, head, sizeof head, 0);
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  BDN_RETURN_IF_ERROR(CheckPackHeader(std::span<const uint8_t>(head, static_cast<size_t>(n)), what));
  uint64_t at = kPackHeaderBytes;
  out.valid_bytes = at;
  std::vector<uint8_t> stored, raw;
  while (at < file_bytes) {
    BDN_ASSIGN_OR_RETURN(RecordAt r, ReadRecordAt(fd, at, file_bytes, what, stored, raw));
    if (r.state != RecordState::kWhole) {
      out.stop_reason = r.why;
      break;
    }
    out.blobs.push_back(r.loc);
    at = r.loc.end();
    out.valid_bytes = at;
  }
  return out;
}

Result<SalvageResult> SalvageRecords(int fd, uint64_t file_bytes, std::string_view what) {
  const std::string w(what);
  SalvageResult out;
  uint8_t head[kPackHeaderBytes];
  ssize_t n = PreadFull(fd, head, sizeof head, 0);
  if (n < 0) return Err(ErrnoError(w + ": read", errno));
  out.pack_header_damaged =
      !CheckPackHeader(std::span<const uint8_t>(head, static_cast<size_t>(n)), what).ok();
  std::vector<uint8_t> stored, raw;
  uint64_t at = kPackHeaderBytes;
  while (at + kRecordHeaderBytes <= file_bytes) {
    BDN_ASSIGN_OR_RETURN(RecordAt r, ReadRecordAt(fd, at, file_bytes, what, stored, raw));
    if (r.state == RecordState::kWhole) {
      out.blobs.push_back(r.loc);
      at = r.loc.end();
      continue;
    }
    if (r.state == RecordState::kBadPayload) {
      // The checked header's length is right: the next record starts after this payload.
      ++out.damaged_records;
      at = r.loc.end();
      continue;
    }
    // No usable record here (a damaged header, or one whose payload would pass the end of the
    // file): look for the next valid header.
    BDN_ASSIGN_OR_RETURN(uint64_t next, NextRecordHeader(fd, at + 1, file_bytes, what));
    ++out.resyncs;
    out.resynced_bytes += next - at;
    at = next;
  }
  return out;
}

Result<std::vector<uint8_t>> ReadBlob(int fd, const BlobLocation& loc, std::string_view pack_what) {
  const std::string chunk = "chunk " + loc.id.ToString();
  uint8_t header[kRecordHeaderBytes];
  std::vector<uint8_t> raw(loc.raw_bytes);
  thread_local std::vector<uint8_t> scratch;
  std::span<uint8_t> payload;
  if (loc.codec == Codec::kNone) {
    payload = raw;
  } else {
    if (scratch.size() < loc.stored_bytes) scratch.resize(loc.stored_bytes);
    payload = std::span<uint8_t>(scratch.data(), loc.stored_bytes);
  }
  struct iovec iov[2] = {{header, sizeof header}, {payload.data(), payload.size()}};
  ssize_t n = PreadvFull(fd, iov, payload.empty() ? 1 : 2, loc.offset);
  if (n < 0) return Err(ErrnoError(chunk + ": read " + std::string(pack_what), errno));
  if (static_cast<uint64_t>(n) != kRecordHeaderBytes + loc.stored_bytes) {
    return Err(CorruptionError(chunk + ": " + std::string(pack_what) +
                               " ends inside the record at offset " + std::to_string(loc.offset)));
  }
  BDN_RETURN_IF_ERROR(
      CheckRecord(std::span<const uint8_t>(header, sizeof header), payload, raw, loc, pack_what));
  return raw;
}

Status CheckRecord(std::span<const uint8_t> header, std::span<const uint8_t> payload,
                   std::span<uint8_t> raw, const BlobLocation& loc, std::string_view pack_what) {
  const std::string chunk = "chunk " + loc.id.ToString();
  auto got = DecodeRecordHeader(header, loc.offset, "");
  if (!got || *got != loc) {
    std::string why = !got ? got.error().message().substr(2) : "it describes another blob";
    return CorruptionError(chunk + ": damaged record header" + InPack(pack_what, loc.offset) +
                           " (" + why + ")");
  }
  if (loc.codec != Codec::kNone) {
    Status s = DecodeBlob(loc.codec, payload, raw, chunk);
    if (!s.ok()) return CorruptionError(s.message() + InPack(pack_what, loc.offset));
  }
  if (Status s = VerifyChunk(loc.id, raw); !s.ok()) {
    return CorruptionError(s.message() + InPack(pack_what, loc.offset));
  }
  return Status::Ok();
}

}  // namespace bdn::pack
