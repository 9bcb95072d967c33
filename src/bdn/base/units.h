// Byte-size parsing and formatting helpers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;

// Parses "123", "64K", "64KiB", "10G", "1.5GiB" (binary multiples) into bytes.
// Errors: InvalidArgument naming the text.
Result<uint64_t> ParseByteSize(std::string_view text);

// Formats bytes with a binary unit, e.g. "1.50 GiB", "512 B".
std::string FormatBytes(uint64_t bytes);

// Lower-case hex of `data[0, size)`.
std::string HexEncode(const uint8_t* data, size_t size);

}  // namespace bdn
