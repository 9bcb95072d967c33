#include "bdn/base/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

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

}  // namespace bdn
