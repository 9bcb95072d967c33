#include "bdn/chunk/chunker.h"

#include <bit>
#include <cstring>

#include "bdn/digest/digest.h"

namespace bdn {

Status ChunkerParams::Validate() const {
  if (min_bytes < 64 || min_bytes >= avg_bytes || avg_bytes >= max_bytes ||
      max_bytes > 16 * 1024 * 1024 || !std::has_single_bit(avg_bytes)) {
    return InvalidArgumentError("chunker parameters " + ToString() +
                                ": need 64 <= min < avg < max <= 16 MiB, avg a power of two");
  }
  if (std::countr_zero(avg_bytes) < 8) {
    return InvalidArgumentError("chunker parameters " + ToString() + ": avg must be >= 256");
  }
  return Status::Ok();
}

std::string ChunkerParams::ToString() const {
  return "fastcdc2020 min=" + std::to_string(min_bytes) + " avg=" + std::to_string(avg_bytes) +
         " max=" + std::to_string(max_bytes);
}

const std::array<uint64_t, 256>& Chunker::GearTable() {
  static const std::array<uint64_t, 256> table = [] {
    std::array<uint64_t, 256> t;
    for (int i = 0; i < 256; ++i) {
      uint8_t b = static_cast<uint8_t>(i);
      Digest d = Digest::Of(std::span<const uint8_t>(&b, 1));
      uint64_t v = 0;
      for (int k = 7; k >= 0; --k) v = (v << 8) | d.data()[k];
      t[i] = v;
    }
    return t;
  }();
  return table;
}

namespace {
uint64_t TopBits(int bits) { return bits <= 0 ? 0 : (~uint64_t{0}) << (64 - bits); }
}  // namespace

Chunker::Chunker(ChunkerParams params) : params_(params) {
  int bits = std::countr_zero(params.avg_bytes);
  mask_s_ = TopBits(bits + 2);
  mask_l_ = TopBits(bits - 2);
  GearTable();
}

size_t Chunker::NextCut(std::span<const uint8_t> data, bool at_eof) const {
  const size_t avail = data.size();
  if (avail == 0) return 0;
  size_t n = params_.max_bytes;
  if (at_eof && avail < n) n = avail;
  if (n <= params_.min_bytes) {
    // Either the whole tail at EOF, or we need more input to know.
    if (at_eof || avail >= params_.max_bytes) return n;
    return 0;
  }
  size_t normal = params_.avg_bytes;
  if (n < normal) normal = n;
  const size_t limit = avail < n ? avail : n;  // bytes we may look at
  const uint8_t* p = data.data();
  const auto& gear = GearTable();
  uint64_t h = 0;
  size_t i = params_.min_bytes;
  size_t stop_s = normal < limit ? normal : limit;
  for (; i < stop_s; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_s_) == 0) return i + 1;
  }
  for (; i < limit; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_l_) == 0) return i + 1;
  }
  if (limit == n) return n;
  return 0;  // ran out of input before a cut or max_bytes
}

}  // namespace bdn
