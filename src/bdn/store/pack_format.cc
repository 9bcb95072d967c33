#include "bdn/store/pack_format.h"

#include <zstd.h>

#include <cstring>
#include <vector>

namespace bdn::pack {
namespace {

constexpr char kPackMagic[8] = {'B', 'D', 'N', 'P', 'A', 'C', 'K', '\0'};
constexpr uint32_t kPackVersion = 1;
constexpr char kRecordMagic[4] = {'B', 'D', 'N', 'R'};
constexpr char kTrailerMagic[8] = {'B', 'D', 'N', 'P', 'E', 'N', 'D', '\x01'};

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool KnownCodec(uint8_t c) { return c <= static_cast<uint8_t>(Codec::kZstd); }

std::string At(uint64_t offset) { return "record at offset " + std::to_string(offset); }

// Checks the fields a record header and a footer entry share.
Status CheckLengths(const BlobLocation& loc, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return CorruptionError(std::string(what) + ": " + At(loc.offset) + ": " + why);
  };
  if (loc.stored_bytes > kMaxBlobBytes || loc.raw_bytes > kMaxBlobBytes) {
    return bad("length out of range");
  }
  if (loc.codec == Codec::kNone && loc.stored_bytes != loc.raw_bytes) {
    return bad("stored and raw lengths differ for codec none");
  }
  return Status::Ok();
}

ZSTD_CCtx* ThreadCCtx() {
  struct Holder {
    ZSTD_CCtx* ctx = ZSTD_createCCtx();
    ~Holder() { ZSTD_freeCCtx(ctx); }
  };
  thread_local Holder h;
  return h.ctx;
}

ZSTD_DCtx* ThreadDCtx() {
  struct Holder {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~Holder() { ZSTD_freeDCtx(ctx); }
  };
  thread_local Holder h;
  return h.ctx;
}

}  // namespace

std::string CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kZstd:
      return "zstd";
  }
  return "codec " + std::to_string(static_cast<int>(codec));
}

std::array<uint8_t, kPackHeaderBytes> EncodePackHeader() {
  std::array<uint8_t, kPackHeaderBytes> h{};
  std::memcpy(h.data(), kPackMagic, 8);
  PutU32(h.data() + 8, kPackVersion);
  return h;
}

Status CheckPackHeader(std::span<const uint8_t> bytes, std::string_view what) {
  if (bytes.size() < kPackHeaderBytes || std::memcmp(bytes.data(), kPackMagic, 8) != 0) {
    return CorruptionError(std::string(what) + ": not a pack (bad header)");
  }
  uint32_t version = GetU32(bytes.data() + 8);
  if (version != kPackVersion) {
    return CorruptionError(std::string(what) + ": pack format version " + std::to_string(version) +
                           " is not supported");
  }
  return Status::Ok();
}

std::array<uint8_t, kRecordHeaderBytes> EncodeRecordHeader(const BlobLocation& loc) {
  std::array<uint8_t, kRecordHeaderBytes> h{};
  std::memcpy(h.data(), kRecordMagic, 4);
  h[4] = static_cast<uint8_t>(loc.codec);
  PutU64(h.data() + 8, loc.stored_bytes);
  PutU64(h.data() + 16, loc.raw_bytes);
  std::memcpy(h.data() + 24, loc.id.data(), Digest::kSize);
  Digest check = Digest::Of(std::span<const uint8_t>(h.data(), 56));
  std::memcpy(h.data() + 56, check.data(), 8);
  return h;
}

Result<BlobLocation> DecodeRecordHeader(std::span<const uint8_t> bytes, uint64_t offset,
                                        std::string_view what) {
  auto bad = [&](const std::string& why) {
    return Err(CorruptionError(std::string(what) + ": " + At(offset) + ": " + why));
  };
  if (bytes.size() < kRecordHeaderBytes) return bad("truncated header");
  if (std::memcmp(bytes.data(), kRecordMagic, 4) != 0) return bad("bad magic");
  Digest check = Digest::Of(bytes.first(56));
  if (std::memcmp(check.data(), bytes.data() + 56, 8) != 0) return bad("header check mismatch");
  if (!KnownCodec(bytes[4])) return bad("unknown codec " + std::to_string(bytes[4]));
  if (bytes[5] != 0 || bytes[6] != 0 || bytes[7] != 0) return bad("reserved bytes are not zero");
  BlobLocation loc;
  loc.offset = offset;
  loc.codec = static_cast<Codec>(bytes[4]);
  loc.stored_bytes = GetU64(bytes.data() + 8);
  loc.raw_bytes = GetU64(bytes.data() + 16);
  std::array<uint8_t, Digest::kSize> id;
  std::memcpy(id.data(), bytes.data() + 24, Digest::kSize);
  loc.id = Digest(id);
  BDN_RETURN_IF_ERROR(CheckLengths(loc, what));
  return loc;
}

std::vector<uint8_t> EncodeFooter(std::span<const BlobLocation> blobs, uint64_t footer_offset) {
  std::vector<uint8_t> out(blobs.size() * kFooterEntryBytes + kTrailerBytes, 0);
  uint8_t* p = out.data();
  for (const BlobLocation& b : blobs) {
    std::memcpy(p, b.id.data(), Digest::kSize);
    PutU64(p + 32, b.offset);
    PutU64(p + 40, b.stored_bytes);
    PutU64(p + 48, b.raw_bytes);
    p[56] = static_cast<uint8_t>(b.codec);
    p += kFooterEntryBytes;
  }
  PutU64(p, footer_offset);
  PutU64(p + 8, blobs.size());
  std::memcpy(p + 24, kTrailerMagic, 8);
  Digest sum = Digest::Of(std::span<const uint8_t>(out.data(), out.size() - 32));
  std::memcpy(p + 32, sum.data(), Digest::kSize);
  return out;
}

Result<Trailer> DecodeTrailer(std::span<const uint8_t> trailer, uint64_t file_bytes,
                              std::string_view what) {
  auto bad = [&](const std::string& why) {
    return Err(CorruptionError(std::string(what) + ": no valid trailer (" + why + ")"));
  };
  if (trailer.size() != kTrailerBytes || file_bytes < kPackHeaderBytes + kTrailerBytes) {
    return bad("file too short");
  }
  const uint8_t* p = trailer.data();
  if (std::memcmp(p + 24, kTrailerMagic, 8) != 0) return bad("bad magic");
  Trailer t{GetU64(p), GetU64(p + 8)};
  uint64_t footer_bytes = file_bytes - t.footer_offset;
  if (t.footer_offset < kPackHeaderBytes || t.footer_offset > file_bytes - kTrailerBytes ||
      t.entry_count > (file_bytes - kTrailerBytes) / kFooterEntryBytes ||
      footer_bytes != t.entry_count * kFooterEntryBytes + kTrailerBytes) {
    return bad("footer offset and entry count do not fit the file size " +
               std::to_string(file_bytes));
  }
  return t;
}

Result<std::vector<BlobLocation>> DecodeFooter(std::span<const uint8_t> bytes,
                                               const Trailer& trailer, std::string_view what) {
  const std::string w(what);
  if (bytes.size() != trailer.entry_count * kFooterEntryBytes + kTrailerBytes) {
    return Err(CorruptionError(w + ": footer: wrong length"));
  }
  Digest sum = Digest::Of(bytes.first(bytes.size() - 32));
  if (std::memcmp(sum.data(), bytes.data() + bytes.size() - 32, 32) != 0) {
    return Err(CorruptionError(w + ": footer: checksum mismatch"));
  }
  std::vector<BlobLocation> out;
  out.reserve(trailer.entry_count);
  uint64_t next = kPackHeaderBytes;
  for (uint64_t i = 0; i < trailer.entry_count; ++i) {
    const uint8_t* p = bytes.data() + i * kFooterEntryBytes;
    BlobLocation b;
    std::array<uint8_t, Digest::kSize> id;
    std::memcpy(id.data(), p, Digest::kSize);
    b.id = Digest(id);
    b.offset = GetU64(p + 32);
    b.stored_bytes = GetU64(p + 40);
    b.raw_bytes = GetU64(p + 48);
    if (!KnownCodec(p[56])) {
      return Err(CorruptionError(w + ": footer: " + At(b.offset) + ": unknown codec " +
                                 std::to_string(p[56])));
    }
    b.codec = static_cast<Codec>(p[56]);
    BDN_RETURN_IF_ERROR(CheckLengths(b, w + ": footer"));
    if (b.offset < next || b.offset > trailer.footer_offset ||
        b.stored_bytes > trailer.footer_offset ||
        b.payload_offset() > trailer.footer_offset - b.stored_bytes) {
      return Err(CorruptionError(w + ": footer: " + At(b.offset) +
                                 ": overlaps another record or the footer"));
    }
    next = b.end();
    out.push_back(b);
  }
  return out;
}

EncodedBlob EncodeBlob(std::span<const uint8_t> raw, const CodecOptions& options) {
  EncodedBlob out;
  if (options.min_saving >= 1.0 || raw.size() < 64) return out;
  // Worth storing compressed only below this many bytes.
  const auto limit =
      static_cast<size_t>(static_cast<double>(raw.size()) * (1.0 - options.min_saving));
  if (limit == 0) return out;
  ZSTD_CCtx* ctx = ThreadCCtx();
  if (ctx == nullptr) return {};
  ZSTD_CCtx_reset(ctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, options.zstd_level);
  ZSTD_CCtx_setParameter(ctx, ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(ctx, ZSTD_c_contentSizeFlag, 1);
  // Into this thread's scratch buffer, at most `limit` bytes: most blobs (weights) do not
  // compress, and a blob that does not is then neither copied nor given a zero-filled buffer of
  // its own. zstd stops with an error once the output would pass the limit.
  // The scratch kept per thread is at most 1 MiB (chunks average 64 KiB); a larger blob gets a
  // buffer for this call.
  constexpr size_t kKeptScratch = 1 << 20;
  thread_local std::vector<uint8_t> kept;
  std::vector<uint8_t> once;
  std::vector<uint8_t>& scratch = limit <= kKeptScratch ? kept : once;
  if (scratch.size() < limit) scratch.resize(limit);
  size_t n = ZSTD_compress2(ctx, scratch.data(), limit, raw.data(), raw.size());
  if (ZSTD_isError(n) || n > limit) return {};
  out.stored.assign(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(n));
  out.codec = Codec::kZstd;
  return out;
}

Status DecodeBlob(Codec codec, std::span<const uint8_t> stored, std::span<uint8_t> raw,
                  std::string_view what) {
  switch (codec) {
    case Codec::kNone:
      if (stored.size() != raw.size()) {
        return CorruptionError(std::string(what) + ": stored length " +
                               std::to_string(stored.size()) + " differs from raw length " +
                               std::to_string(raw.size()));
      }
      if (stored.data() != raw.data() && !raw.empty()) {
        std::memcpy(raw.data(), stored.data(), raw.size());
      }
      return Status::Ok();
    case Codec::kZstd: {
      ZSTD_DCtx* ctx = ThreadDCtx();
      if (ctx == nullptr) return InternalError(std::string(what) + ": zstd: out of memory");
      size_t n = ZSTD_decompressDCtx(ctx, raw.data(), raw.size(), stored.data(), stored.size());
      if (ZSTD_isError(n)) {
        return CorruptionError(std::string(what) + ": stored bytes do not decompress (zstd: " +
                               ZSTD_getErrorName(n) + ")");
      }
      if (n != raw.size()) {
        return CorruptionError(std::string(what) + ": stored bytes decompress to " +
                               std::to_string(n) + " bytes, not " + std::to_string(raw.size()));
      }
      return Status::Ok();
    }
  }
  return CorruptionError(std::string(what) + ": unknown " + CodecName(codec));
}

}  // namespace bdn::pack
