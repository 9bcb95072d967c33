// Little-endian byte writer and bounds-checked reader shared by the manifest and chunk index
// codecs (docs/format.md). Internal to format/.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn::format_internal {

// Longest `str` field (docs/format.md).
inline constexpr uint32_t kMaxString = 64 * 1024;

// Appends integers (little-endian), strings (u32 length + bytes) and digests. Not thread-safe.
class Writer {
 public:
  void Bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  void Dig(const Digest& d) { Bytes(d.data(), Digest::kSize); }
  void Reserve(size_t n) { out_.reserve(n); }
  std::string Take() { return std::move(out_); }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reads the same fields from `b`, never past its end. Errors are Corruption "<what>: <why>, at
// byte N" (N: where the reader stands). Not thread-safe.
class Reader {
 public:
  Reader(std::span<const uint8_t> b, std::string what) : b_(b), what_(std::move(what)) {}
  Status Fail(const std::string& why) const {
    return CorruptionError(what_ + ": " + why + ", at byte " + std::to_string(pos_));
  }
  bool Need(size_t n) const { return b_.size() - pos_ >= n; }
  Result<uint64_t> Le(int n) {
    if (!Need(n)) return Err(Fail("truncated"));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b_[pos_ + i];
    pos_ += n;
    return v;
  }
  Result<std::string> Str() {
    BDN_ASSIGN_OR_RETURN(uint64_t n, Le(4));
    if (n > kMaxString) return Err(Fail("string of " + std::to_string(n) + " bytes is too long"));
    if (!Need(n)) return Err(Fail("truncated"));
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  Result<Digest> Dig() {
    if (!Need(Digest::kSize)) return Err(Fail("truncated"));
    std::array<uint8_t, Digest::kSize> a;
    std::memcpy(a.data(), b_.data() + pos_, a.size());
    pos_ += a.size();
    return Digest(a);
  }
  Status Magic(const char (&m)[4]) {
    if (!Need(4) || std::memcmp(b_.data() + pos_, m, 4) != 0) return Fail("bad magic");
    pos_ += 4;
    return Status::Ok();
  }
  bool AtEnd() const { return pos_ == b_.size(); }
  size_t pos() const { return pos_; }
  size_t size() const { return b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace bdn::format_internal
