// Hexadecimal text: the one encoder (lower case) and decoder of bytes and of 64-bit numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bdn {

// Lower-case hex of `bytes`: 2 * size characters, most significant nibble first.
std::string HexEncode(std::span<const uint8_t> bytes);
inline std::string HexEncode(const uint8_t* data, size_t size) {
  return HexEncode(std::span<const uint8_t>(data, size));
}
// The same of the bytes of `bytes` (binary data held in a string).
std::string HexEncode(std::string_view bytes);

// The value 0-15 of the hex digit `c` (either case), or -1 when it is not one.
int HexDigitValue(char c);

// The bytes whose hex (either case) is `hex`; nullopt when its length is odd or a character is
// not a hex digit.
std::optional<std::string> HexDecode(std::string_view hex);

// `n` as exactly 16 lower-case hex digits, most significant first ("00000000000000ff").
std::string Hex16(uint64_t n);
// The number whose 16 lower-case hex digits are `text`; nullopt for any other text (other
// length, upper case, not hex).
std::optional<uint64_t> ParseHex16(std::string_view text);

}  // namespace bdn
