// Hex encoding and decoding.
#include "bdn/base/hex.h"

namespace bdn {
namespace {
constexpr char kDigits[] = "0123456789abcdef";
}  // namespace

std::string HexEncode(std::span<const uint8_t> bytes) {
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::string HexEncode(std::string_view bytes) {
  return HexEncode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexDigitValue(hex[2 * i]);
    int lo = HexDigitValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string Hex16(uint64_t n) {
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, n >>= 4) s[static_cast<size_t>(i)] = kDigits[n & 15];
  return s;
}

std::optional<uint64_t> ParseHex16(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c >= 'A' && c <= 'F') return std::nullopt;  // names are lower case
    int d = HexDigitValue(c);
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace bdn
