// Byte-size parsing and formatting helpers.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;

// Parses "123", "64K", "64KiB", "10G", "1.5GiB" (binary multiples, any letter case) into bytes:
// a decimal number (digits with at most one '.') and an optional unit B, K, M, G, T (also KB,
// KiB, ...); a fraction of a unit is rounded to the nearest byte. Errors: InvalidArgument
// "size \"<text>\": expected a number with an optional unit (K, M, G, T)" for anything else,
// "size \"<text>\": larger than 18446744073709551615 bytes" past 2^64-1. Thread-safe.
Result<uint64_t> ParseByteSize(std::string_view text);

// Formats bytes with a binary unit, e.g. "1.50 GiB", "512 B".
std::string FormatBytes(uint64_t bytes);

// Parses a duration as every duration flag takes it (--read-timeout, --claim-ttl, ...): a
// decimal number and a unit, "500ms", "30s", "2m", "1h", "7d", "1.5s"; a plain number is seconds
// ("30" is 30 s, "0.5" is 500 ms). The value is rounded to the nearest millisecond and must lie
// within [min, max]. No sign, exponent, blanks, "nan" or "inf".
// Errors: InvalidArgument "duration \"<text>\": expected a number and a unit such as 500ms, 30s,
// 2m, 1h, 7d (a plain number is seconds)" for malformed text; InvalidArgument "duration \"<text>\":
// must be between <min> and <max>" (as FormatDuration writes them) out of range; InvalidArgument
// "duration \"<text>\": under half a millisecond, which would be 0; give 0 or at least 1ms" for a
// value above 0 that rounds to 0 where 0 is allowed (0 means something else: no wait, no
// retention).
// Thread-safe.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds min,
                                                std::chrono::milliseconds max);

// A time as records and messages show it: UTC, ISO 8601 to the second ("2026-01-31T12:00:00Z").
// Thread-safe.
std::string FormatUtc(int64_t unix_ms);

// Formats a duration in the largest unit that divides it: "1h", "2m", "30s", "1500ms", "0s".
std::string FormatDuration(std::chrono::milliseconds d);

// A number as a user would have typed it, in the shortest form that reads back as `v` to 6
// significant digits (printf's %g): "2", "0.25", "-0.1", "1e+20", "nan", "inf".
std::string FormatNumber(double v);

// Nanoseconds since the epoch (negative before 1970) as a timespec: tv_nsec in [0, 1e9).
timespec ToTimespec(int64_t unix_ns);

// `bytes` random bytes from getrandom(2), as 2 * bytes lower-case hex characters (ids, secrets,
// keys). Errors: Internal "getrandom: <reason>" if the kernel refuses.
Result<std::string> RandomHex(size_t bytes);

}  // namespace bdn
