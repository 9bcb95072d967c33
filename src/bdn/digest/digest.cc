#include "bdn/digest/digest.h"

#include "bdn/base/hex.h"
#include "blake3.h"

namespace bdn {
namespace {

// The official C BLAKE3 detects the CPU's SIMD features on its first hash and caches them in a
// plain global (blake3_dispatch.c, g_cpu_features), so two threads making the first hashes race
// on it (ThreadSanitizer reports it). One hash during static initialization, before any thread
// exists, does the detection once.
[[maybe_unused]] const bool kCpuFeaturesDetected = [] {
  blake3_hasher h;
  blake3_hasher_init(&h);
  uint8_t out[BLAKE3_OUT_LEN];
  blake3_hasher_finalize(&h, out, sizeof out);
  return true;
}();

}  // namespace

struct Blake3Hasher::State {
  blake3_hasher h;
};

Blake3Hasher::Blake3Hasher() : state_(new State) { blake3_hasher_init(&state_->h); }
Blake3Hasher::~Blake3Hasher() { delete state_; }

void Blake3Hasher::Update(const void* data, size_t size) {
  blake3_hasher_update(&state_->h, data, size);
}

Digest Blake3Hasher::Finalize() const {
  std::array<uint8_t, Digest::kSize> out;
  blake3_hasher_finalize(&state_->h, out.data(), out.size());
  return Digest(out);
}

void Blake3Hasher::FinalizeXof(std::span<uint8_t> out) const {
  blake3_hasher_finalize(&state_->h, out.data(), out.size());
}

Digest Digest::Of(std::span<const uint8_t> data) {
  Blake3Hasher h;
  h.Update(data);
  return h.Finalize();
}

Digest Digest::Of(std::string_view data) {
  Blake3Hasher h;
  h.Update(data.data(), data.size());
  return h.Finalize();
}

Result<Digest> Digest::Parse(std::string_view text) {
  std::string_view hex = text;
  if (hex.starts_with("b3:")) hex.remove_prefix(3);
  auto bad = [&](std::string reason) {
    return Err(InvalidArgumentError("digest \"" + std::string(text) + "\": " + reason));
  };
  if (hex.size() != 2 * kSize) {
    return bad("expected 64 hex characters, got " + std::to_string(hex.size()));
  }
  std::array<uint8_t, kSize> bytes;
  for (size_t i = 0; i < kSize; ++i) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      const char c = hex[2 * i + k];
      // One spelling per digest: an upper-case one would name the same blob under another key
      // (caches, logs, ETags).
      if (c >= 'A' && c <= 'F') {
        return bad("'" + std::string(1, c) + "' is upper case (a digest is lower-case hex)");
      }
      int d = HexDigitValue(c);
      if (d < 0) return bad("'" + std::string(1, c) + "' is not a hex character");
      v = v * 16 + d;
    }
    bytes[i] = static_cast<uint8_t>(v);
  }
  return Digest(bytes);
}

std::string Digest::Hex() const { return HexEncode(bytes_.data(), bytes_.size()); }
std::string Digest::ToString() const { return "b3:" + Hex(); }

}  // namespace bdn
