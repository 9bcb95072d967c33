// The bytes of a pack file (docs/format.md, "Packs"): the pack header, blob records (a
// self-checking record header, then the stored bytes), the footer that lists every record and
// the trailer that checks the footer; and the blob codecs (none, zstd). Pure encoding: no I/O.
// The node cache's regions reuse the record framing and the codecs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn::pack {

// Little-endian fixed-width integers, as every field of the pack formats is stored.
inline void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// How a blob's stored bytes encode its raw bytes. The values are the format's codec numbers.
enum class Codec : uint8_t {
  kNone = 0,  // stored bytes are the raw bytes
  kZstd = 1,  // one zstd frame (RFC 8878) whose content is the raw bytes
};

// "none" or "zstd"; "codec <n>" for a number the format does not define.
std::string CodecName(Codec codec);

inline constexpr size_t kPackHeaderBytes = 16;
inline constexpr size_t kRecordHeaderBytes = 64;
inline constexpr size_t kFooterEntryBytes = 64;
inline constexpr size_t kTrailerBytes = 64;
// The largest stored or raw length a record may declare (2^48 - 1 bytes, 256 TiB): a bound that
// keeps a damaged length from being taken for a real one.
inline constexpr uint64_t kMaxBlobBytes = (uint64_t{1} << 48) - 1;

// One blob's place in a pack: what the footer lists, and what the record header repeats.
struct BlobLocation {
  Digest id;                  // BLAKE3-256 of the raw bytes
  uint64_t offset = 0;        // of the record header, from the start of the pack file
  uint64_t stored_bytes = 0;  // bytes after the record header
  uint64_t raw_bytes = 0;     // bytes of the blob once decoded
  Codec codec = Codec::kNone;

  uint64_t payload_offset() const { return offset + kRecordHeaderBytes; }
  // One past the record's last byte.
  uint64_t end() const { return payload_offset() + stored_bytes; }
  bool operator==(const BlobLocation&) const = default;
};

// The 16 bytes every pack starts with: "BDNPACK\0", format version 1 (u32), 4 zero bytes.
std::array<uint8_t, kPackHeaderBytes> EncodePackHeader();
// Errors: Corruption "`what`: not a pack (bad header)" or "...: pack format version N is not
// supported".
Status CheckPackHeader(std::span<const uint8_t> bytes, std::string_view what);

// The 64-byte record header of `loc` (its offset is not part of it): magic "BDNR", codec (u8),
// 3 zero bytes, stored length (u64), raw length (u64), id (32 bytes), check (8 bytes: the first 8
// bytes of BLAKE3-256 of the 56 bytes before it).
std::array<uint8_t, kRecordHeaderBytes> EncodeRecordHeader(const BlobLocation& loc);
// Decodes a record header read at `offset`. Errors: Corruption "`what`: record at offset N: ..."
// when the magic, the check, the codec or a length is wrong.
Result<BlobLocation> DecodeRecordHeader(std::span<const uint8_t> bytes, uint64_t offset,
                                        std::string_view what);

// The footer and trailer that seal a pack whose records end at `footer_offset`: one 64-byte entry
// per blob in `blobs` (id, offset, stored length, raw length, codec, 7 zero bytes), in the order
// given (the writer's: ascending offset), then the 64-byte trailer: footer offset (u64), entry
// count (u64), 8 zero bytes, "BDNPEND\x01", and BLAKE3-256 of every footer byte before these last
// 32.
std::vector<uint8_t> EncodeFooter(std::span<const BlobLocation> blobs, uint64_t footer_offset);

// Where a pack's footer is, from its trailer (the last 64 bytes of a file of `file_bytes`).
struct Trailer {
  uint64_t footer_offset = 0;
  uint64_t entry_count = 0;
};
// Errors: Corruption "`what`: no valid trailer (...)" when the magic is wrong or the offsets do not
// fit the file size. The checksum is checked by DecodeFooter.
Result<Trailer> DecodeTrailer(std::span<const uint8_t> trailer, uint64_t file_bytes,
                              std::string_view what);
// Decodes the footer: `bytes` is everything from trailer.footer_offset to the end of the file.
// Checks the checksum, every entry (lengths, codec, ascending offsets, records inside
// [kPackHeaderBytes, footer_offset)). Errors: Corruption "`what`: footer ...".
Result<std::vector<BlobLocation>> DecodeFooter(std::span<const uint8_t> bytes,
                                               const Trailer& trailer, std::string_view what);

// Codec choice for new blobs.
struct CodecOptions {
  // zstd is used only when it makes the blob at least this fraction smaller (0.1: 10 %); a value
  // >= 1 stores every blob raw.
  double min_saving = 0.10;
  // zstd compression level (1 is zstd's fastest positive level).
  int zstd_level = 1;
};

// The stored form of one blob: `codec` and, for kZstd, the compressed bytes in `stored`
// (kNone keeps `stored` empty: the raw bytes are stored as they are).
struct EncodedBlob {
  Codec codec = Codec::kNone;
  std::vector<uint8_t> stored;
};
// Compresses `raw` with zstd when `options` say it is worth it. Blobs under 64 bytes are never
// compressed. Never fails: a compression error stores the blob raw. Thread-safe (one zstd context
// per thread).
EncodedBlob EncodeBlob(std::span<const uint8_t> raw, const CodecOptions& options);

// Decodes `stored` (written with `codec`) into `raw`, whose size must be the blob's raw length.
// Does not verify the id. Errors: Corruption "`what`: ..." when the bytes do not decode to exactly
// raw.size() bytes. Thread-safe.
Status DecodeBlob(Codec codec, std::span<const uint8_t> stored, std::span<uint8_t> raw,
                  std::string_view what);

}  // namespace bdn::pack
