// Digest: a BLAKE3-256 value printed as "b3:<64 lowercase hex>", and a streaming hasher.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

// A 32-byte BLAKE3 output. Value type; thread-compatible.
class Digest {
 public:
  static constexpr size_t kSize = 32;

  Digest() { bytes_.fill(0); }
  explicit Digest(const std::array<uint8_t, kSize>& bytes) : bytes_(bytes) {}

  // BLAKE3-256 of `data` (the official C implementation, SIMD-dispatched).
  static Digest Of(std::span<const uint8_t> data);
  static Digest Of(std::string_view data);

  // Parses "b3:<64 hex>" or "<64 hex>", in lower case only: the one spelling of a digest
  // (ToString, Hex), so that text from outside (URLs, JSON bodies, headers) never names one
  // blob two ways. Errors: InvalidArgument "digest \"...\": ..." naming what is wrong
  // ("expected 64 hex characters, got N", "'g' is not a hex character", "'A' is upper case (a
  // digest is lower-case hex)").
  static Result<Digest> Parse(std::string_view text);

  // "b3:<64 lowercase hex>".
  std::string ToString() const;
  // "<64 lowercase hex>", as b3sum prints it.
  std::string Hex() const;
  // The first `n` hex characters, for file names and short displays.
  std::string ShortHex(size_t n = 12) const { return Hex().substr(0, n); }

  const std::array<uint8_t, kSize>& bytes() const { return bytes_; }
  const uint8_t* data() const { return bytes_.data(); }

  auto operator<=>(const Digest&) const = default;
  bool operator==(const Digest&) const = default;

 private:
  std::array<uint8_t, kSize> bytes_;
};

// Streaming BLAKE3-256 over the official C implementation (BLAKE3 spec, 2020, O'Connor et al.).
// Not thread-safe; one hasher per thread.
class Blake3Hasher {
 public:
  Blake3Hasher();
  ~Blake3Hasher();
  Blake3Hasher(const Blake3Hasher&) = delete;
  Blake3Hasher& operator=(const Blake3Hasher&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::span<const uint8_t> data) { Update(data.data(), data.size()); }
  // Returns the 32-byte digest; the hasher may keep being updated afterwards.
  Digest Finalize() const;
  // Extended output: `out.size()` bytes of XOF output from position 0.
  void FinalizeXof(std::span<uint8_t> out) const;

 private:
  struct State;
  State* state_;
};

}  // namespace bdn

template <>
struct std::hash<bdn::Digest> {
  size_t operator()(const bdn::Digest& d) const noexcept {
    size_t v;
    static_assert(sizeof v <= bdn::Digest::kSize);
    __builtin_memcpy(&v, d.data(), sizeof v);
    return v;
  }
};
