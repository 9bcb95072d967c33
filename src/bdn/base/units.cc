#include "bdn/base/units.h"

#include <sys/random.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace bdn {

Result<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [&] {
    return Err(InvalidArgumentError("size \"" + std::string(text) +
                                    "\": expected a number with an optional unit (K, M, G, T)"));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return bad();
  double number = 0;
  try {
    number = std::stod(std::string(text.substr(0, i)));
  } catch (...) {
    return bad();
  }
  std::string unit;
  for (char c : text.substr(i)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = kKiB;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = kMiB;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = kGiB;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = kGiB * 1024;
  else return bad();
  return static_cast<uint64_t>(std::llround(number * static_cast<double>(mult)));
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds min,
                                                std::chrono::milliseconds max) {
  auto bad = [&] {
    return Err(InvalidArgumentError("duration \"" + std::string(text) +
                                    "\": expected a number and a unit such as 500ms, 30s, 2m, 1h "
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
                                                : 0;
  if (ms_per == 0) return bad();
  double number = std::strtod(std::string(text.substr(0, i)).c_str(), nullptr);
  double ms = std::round(number * ms_per);
  if (!(ms >= static_cast<double>(min.count()) && ms <= static_cast<double>(max.count()))) {
    return Err(InvalidArgumentError("duration \"" + std::string(text) + "\": must be between " +
                                    FormatDuration(min) + " and " + FormatDuration(max)));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
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
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

std::string HexEncode(const uint8_t* data, size_t size) {
  static const char* kHex = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 15];
  }
  return out;
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
