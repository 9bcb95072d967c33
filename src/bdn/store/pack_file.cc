#include "bdn/store/pack_file.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "bdn/base/fd.h"
#include "bdn/store/chunk_store.h"  // VerifyChunk

namespace bdn::pack {
namespace {

std::string InPack(std::string_view pack_what, uint64_t offset) {
  return " in " + std::string(pack_what) + " at offset " + std::to_string(offset);
}

}  // namespace

Result<PackWriter> PackWriter::Start(int fd, std::string what) {
  auto header = EncodePackHeader();
  BDN_RETURN_IF_ERROR(PWriteAll(fd, header, 0, what + ": write"));
  return PackWriter(fd, std::move(what));
}

Result<BlobLocation> PackWriter::Append(const Digest& id, uint64_t raw_bytes, Codec codec,
                                        std::span<const uint8_t> stored) {
  if (sealed_) return Err(InternalError(what_ + ": append after seal"));
  if (stored.size() > kMaxBlobBytes || raw_bytes > kMaxBlobBytes) {
    return Err(InvalidArgumentError("chunk " + id.ToString() + ": " + std::to_string(raw_bytes) +
                                    " bytes, too large for a pack"));
  }
  BlobLocation loc{id, end_, stored.size(), raw_bytes, codec};
  auto header = EncodeRecordHeader(loc);
  struct iovec iov[2] = {{header.data(), header.size()},
                         {const_cast<uint8_t*>(stored.data()), stored.size()}};
  Status s = PWritevAll(fd_, iov, stored.empty() ? 1 : 2, end_, what_ + ": write");
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
  Status s = PWriteAll(fd_, zero, end_, what_ + ": write");
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
  Status s = PWriteAll(fd_, piece, end_ + kRecordHeaderBytes + stream_bytes_, what_ + ": write");
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
  Status s = PWriteAll(fd_, header, end_, what_ + ": write");
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
  BDN_RETURN_IF_ERROR(PWriteAll(fd_, footer, end_, what_ + ": write"));
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
  BDN_ASSIGN_OR_RETURN(size_t n, PReadFull(fd, tail, file_bytes - kTrailerBytes, w + ": read"));
  if (n != sizeof tail) {
    return Err(CorruptionError(w + ": no valid trailer (file shorter than its size)"));
  }
  BDN_ASSIGN_OR_RETURN(Trailer t, DecodeTrailer(tail, file_bytes, what));
  std::vector<uint8_t> footer(file_bytes - t.footer_offset);
  BDN_ASSIGN_OR_RETURN(n, PReadFull(fd, footer, t.footer_offset, w + ": read"));
  if (n != footer.size()) {
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
  BDN_ASSIGN_OR_RETURN(size_t n, PReadFull(fd, header, at, w + ": read"));
  if (n < sizeof header) {
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
  if (loc->payload_offset() > file_bytes ||
      loc->stored_bytes > file_bytes - loc->payload_offset()) {
    out.state = RecordState::kCutOff;
    out.why = here + ": cut off";
    return out;
  }
  stored.resize(loc->stored_bytes);
  BDN_ASSIGN_OR_RETURN(n, PReadFull(fd, stored, loc->payload_offset(), w + ": read"));
  if (n != stored.size()) {
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
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), file_bytes - base));
    BDN_ASSIGN_OR_RETURN(const size_t got,
                         PReadFull(fd, std::span(buf.data(), want), base, w + ": read"));
    // A header starting in this block (at most kBlock starts) lies wholly in buf.
    const size_t starts = std::min(got, kBlock);
    for (size_t i = 0; i < starts;) {
      const void* hit = ::memmem(buf.data() + i, got - i, "BDNR", 4);
      if (hit == nullptr) break;
      const size_t k = static_cast<size_t>(static_cast<const uint8_t*>(hit) - buf.data());
      if (k >= starts) break;
      if (k + kRecordHeaderBytes <= got &&
          DecodeRecordHeader(std::span<const uint8_t>(buf.data() + k, kRecordHeaderBytes), base + k,
                             what)) {
        return base + k;
      }
      i = k + 1;
    }
    if (got < want) break;  // the file is shorter than it was
  }
  return file_bytes;
}

// The check of the pack header at the start of the file: Ok, or the Corruption CheckPackHeader
// gives for it (a short file included). Errors (I/O only): ErrnoError "`what`: read".
Result<Status> ReadPackHeader(int fd, std::string_view what) {
  uint8_t head[kPackHeaderBytes];
  BDN_ASSIGN_OR_RETURN(size_t n, PReadFull(fd, head, 0, std::string(what) + ": read"));
  return CheckPackHeader(std::span<const uint8_t>(head, n), what);
}

}  // namespace

Result<ScanResult> ScanRecords(int fd, uint64_t file_bytes, std::string_view what, uint64_t from) {
  ScanResult out;
  if (from <= kPackHeaderBytes) {
    BDN_ASSIGN_OR_RETURN(Status header, ReadPackHeader(fd, what));
    BDN_RETURN_IF_ERROR(header);
  }
  uint64_t at = std::max<uint64_t>(from, kPackHeaderBytes);
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
  SalvageResult out;
  BDN_ASSIGN_OR_RETURN(Status header, ReadPackHeader(fd, what));
  out.pack_header_damaged = !header.ok();
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

namespace {

// The buffers one read of the record at `loc` fills: its header, then the payload, straight into
// `raw` when it is stored uncompressed, else into this thread's scratch buffer.
struct RecordRead {
  uint8_t header[kRecordHeaderBytes];
  std::vector<uint8_t> raw;
  std::span<uint8_t> payload;
  struct iovec iov[2];
  int iov_count = 0;

  explicit RecordRead(const BlobLocation& loc) : raw(loc.raw_bytes) {
    thread_local std::vector<uint8_t> scratch;
    if (loc.codec == Codec::kNone) {
      payload = raw;
    } else {
      if (scratch.size() < loc.stored_bytes) scratch.resize(loc.stored_bytes);
      payload = std::span<uint8_t>(scratch.data(), loc.stored_bytes);
    }
    iov[0] = {header, sizeof header};
    iov[1] = {payload.data(), payload.size()};
    iov_count = payload.empty() ? 1 : 2;
  }
  RecordRead(const RecordRead&) = delete;
  RecordRead& operator=(const RecordRead&) = delete;
};

}  // namespace

Result<std::vector<uint8_t>> ReadBlob(int fd, const BlobLocation& loc, std::string_view pack_what) {
  const std::string chunk = "chunk " + loc.id.ToString();
  RecordRead r(loc);
  BDN_ASSIGN_OR_RETURN(size_t n, PReadvFull(fd, r.iov, r.iov_count, loc.offset,
                                            chunk + ": read " + std::string(pack_what)));
  if (n != kRecordHeaderBytes + loc.stored_bytes) {
    return Err(CorruptionError(chunk + ": " + std::string(pack_what) +
                               " ends inside the record at offset " + std::to_string(loc.offset)));
  }
  BDN_RETURN_IF_ERROR(CheckRecord(std::span<const uint8_t>(r.header, sizeof r.header), r.payload,
                                  r.raw, loc, pack_what));
  return std::move(r.raw);
}

std::optional<std::vector<uint8_t>> ReadBlobNow(int fd, const BlobLocation& loc) {
  RecordRead r(loc);
  ssize_t n;
  do {
    n = ::preadv2(fd, r.iov, r.iov_count, static_cast<off_t>(loc.offset), RWF_NOWAIT);
  } while (n < 0 && errno == EINTR);
  // EAGAIN (a page not in the page cache), a short read (some of them) or any error: not now.
  if (n < 0 || static_cast<uint64_t>(n) != kRecordHeaderBytes + loc.stored_bytes) {
    return std::nullopt;
  }
  if (!CheckRecord(std::span<const uint8_t>(r.header, sizeof r.header), r.payload, r.raw, loc, "")
           .ok()) {
    return std::nullopt;
  }
  return std::move(r.raw);
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
