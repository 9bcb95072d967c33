#include "bdn/base/units.h"

#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "bdn/base/hex.h"

namespace bdn {

Result<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [&] {
    return Err(InvalidArgumentError("size \"" + std::string(text) +
                                    "\": expected a number with an optional unit (K, M, G, T)"));
  };
  // Digits with at most one '.', at least one digit before or after it.
  size_t i = 0, dot = std::string_view::npos, digits = 0;
  for (; i < text.size(); ++i) {
    if (text[i] >= '0' && text[i] <= '9') {
      ++digits;
    } else if (text[i] == '.' && dot == std::string_view::npos) {
      dot = i;
    } else {
      break;
    }
  }
  if (digits == 0) return bad();
  std::string unit;
  for (char c : text.substr(i))
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = kKiB;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = kMiB;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = kGiB;
  else if (unit == "T" || unit == "TB" || unit == "TIB")
    mult = kGiB * 1024;
  else
    return bad();
  // Exact integer arithmetic: whole * mult + round(0.fraction * mult), refusing overflow.
  auto too_large = [&] {
    return Err(InvalidArgumentError("size \"" + std::string(text) +
                                    "\": larger than 18446744073709551615 bytes"));
  };
  const std::string_view whole = text.substr(0, std::min(dot, i));
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1, i - dot - 1);
  uint64_t bytes = 0;
  for (char c : whole) {
    if (__builtin_mul_overflow(bytes, 10, &bytes) ||
        __builtin_add_overflow(bytes, static_cast<uint64_t>(c - '0'), &bytes)) {
      return too_large();
    }
  }
  if (__builtin_mul_overflow(bytes, mult, &bytes)) return too_large();
  // 18 fraction digits are exact to far below a byte for any unit (mult <= 2^40).
  // __extension__: -Wpedantic (-Werror) rejects the GNU 128-bit integer otherwise.
  __extension__ typedef unsigned __int128 Uint128;
  Uint128 num = 0, den = 1;
  for (char c : fraction.substr(0, 18)) {
    num = num * 10 + static_cast<unsigned>(c - '0');
    den *= 10;
  }
  const auto part = static_cast<uint64_t>((num * mult * 2 + den) / (den * 2));  // rounded
  if (__builtin_add_overflow(bytes, part, &bytes)) return too_large();
  return bytes;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds min,
                                                std::chrono::milliseconds max) {
  auto bad = [&] {
    return Err(
        InvalidArgumentError("duration \"" + std::string(text) +
                             "\": expected a number and a unit such as 500ms, 30s, 2m, 1h, 7d "
                             "(a plain number is seconds)"));
  };
  // Digits with at most one '.', at least one digit before or after it.
  size_t i = 0;
  size_t digits = 0;
  bool dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0 || digits > 15) return bad();  // 15 digits stay exact in a double
  std::string_view unit = text.substr(i);
  double ms_per = unit == "ms"                  ? 1
                  : unit == "s" || unit.empty() ? 1000
                  : unit == "m"                 ? 60'000
                  : unit == "h"                 ? 3'600'000
                  : unit == "d"                 ? 86'400'000
                                                : 0;
  if (ms_per == 0) return bad();
  double number = std::strtod(std::string(text.substr(0, i)).c_str(), nullptr);
  double ms = std::round(number * ms_per);
  if (ms == 0 && number > 0 && min.count() == 0) {
    // From an attacking helper: BDN_RETENTION=0.0000001s was taken as 0, a final delete.
    return Err(InvalidArgumentError("duration \"" + std::string(text) +
                                    "\": under half a millisecond, which would be 0; give 0 or at "
                                    "least 1ms"));
  }
  if (!(ms >= static_cast<double>(min.count()) && ms <= static_cast<double>(max.count()))) {
    return Err(InvalidArgumentError("duration \"" + std::string(text) + "\": must be between " +
                                    FormatDuration(min) + " and " + FormatDuration(max)));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::string FormatUtc(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";  // as the flags' help says it ("0s to 24h")
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

timespec ToTimespec(int64_t unix_ns) {
  int64_t sec = unix_ns / 1'000'000'000;
  int64_t rem = unix_ns % 1'000'000'000;
  if (rem < 0) {
    rem += 1'000'000'000;
    --sec;
  }
  return {.tv_sec = static_cast<time_t>(sec), .tv_nsec = static_cast<long>(rem)};
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

Result<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err(ErrnoError("getrandom", errno));
    }
    got += static_cast<size_t>(n);
  }
  return HexEncode(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

}  // namespace bdn
