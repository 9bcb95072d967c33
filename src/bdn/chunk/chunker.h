// Content-defined chunker: FastCDC 2020 gear hashing with normalization level 2.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "bdn/base/status.h"

namespace bdn {

// The chunker's parameters, recorded in every manifest. The algorithm itself (gear table, masks,
// normalization level 2) is fixed by format version 1 and documented in docs/format.md.
struct ChunkerParams {
  uint32_t min_bytes = 16 * 1024;
  uint32_t avg_bytes = 64 * 1024;
  uint32_t max_bytes = 256 * 1024;

  // The defaults: 16/64/256 KiB (measured in docs/benchmarks.md; see docs/format.md).
  static ChunkerParams Default() { return {}; }

  // Errors: InvalidArgument unless 64 <= min < avg < max <= 16 MiB and avg is a power of two.
  Status Validate() const;
  std::string ToString() const;
  bool operator==(const ChunkerParams&) const = default;
};

// FastCDC 2020 (Xia et al., "The Design of Fast Content-Defined Chunking for Data Deduplication
// Based Storage Systems", IEEE TPDS 31(9), 2020) with normalized chunking level 2:
//   - gear hash h = (h << 1) + GEAR[byte], starting from 0 at offset `min_bytes` of each chunk
//     (the first min_bytes are skipped, "cut-point skipping");
//   - before offset avg_bytes a cut needs (h & mask_s) == 0, mask_s = the top log2(avg)+2 bits;
//     from avg_bytes on it needs (h & mask_l) == 0, mask_l = the top log2(avg)-2 bits;
//   - the cut is after the byte that satisfied the mask; a chunk never exceeds max_bytes.
// GEAR[i] = the first 8 bytes, little-endian, of BLAKE3 of the one byte i.
// Immutable after construction; thread-safe.
class Chunker {
 public:
  // Precondition: params.Validate().ok().
  explicit Chunker(ChunkerParams params);

  // Returns the length of the chunk that starts at data[0]. `data` holds `data.size()` bytes
  // available from that point; `at_eof` says whether the input ends there.
  // Returns 0 ("need more input") only when !at_eof and data.size() < max_bytes and no cut was
  // found in what is available; the result never depends on how the input was buffered.
  // With at_eof and empty data, returns 0.
  size_t NextCut(std::span<const uint8_t> data, bool at_eof) const;

  const ChunkerParams& params() const { return params_; }
  static const std::array<uint64_t, 256>& GearTable();

 private:
  ChunkerParams params_;
  uint64_t mask_s_;
  uint64_t mask_l_;
};

}  // namespace bdn
