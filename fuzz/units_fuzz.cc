// Fuzzes the flag-value parsers of base/units.h: ParseByteSize (--cache-size, --memory-cache)
// and ParseDuration (--read-timeout, --claim-ttl, ...). Input: one byte picks the parser, the
// rest is the text. Every error is InvalidArgument naming the text; an accepted value is the
// text's number times its unit, rounded, checked against an exact reference (long double), so
// no wrap, clamp or sloppy parse passes. The first byte's other bits pick duration bounds.
#include <charconv>
#include <cmath>
#include <optional>

#include "bdn/base/units.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;
using std::chrono::milliseconds;

// The text's leading decimal number (digits with at most one '.', at least one digit) as a long
// double, and where it ends; nullopt if there is none.
std::optional<std::pair<long double, size_t>> Number(std::string_view text) {
  size_t i = 0, digits = 0;
  bool dot = false;
  for (; i < text.size(); ++i) {
    if (text[i] >= '0' && text[i] <= '9') {
      ++digits;
    } else if (text[i] == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return std::nullopt;
  return std::pair(std::strtold(std::string(text.substr(0, i)).c_str(), nullptr), i);
}

void CheckByteSize(std::string_view text) {
  auto got = ParseByteSize(text);
  if (!got) {
    FUZZ_CHECK(fuzz::IsError(got.error(), StatusCode::kInvalidArgument,
                             "size \"" + std::string(text) + "\": "),
               got.error().ToString());
    return;
  }
  auto n = Number(text);
  FUZZ_CHECK(n.has_value(), std::string(text));
  std::string unit;
  for (char c : text.substr(n->second)) unit += static_cast<char>(std::toupper(c));
  long double mult = unit.empty() || unit == "B"                    ? 1
                     : unit == "K" || unit == "KB" || unit == "KIB" ? 1024.0L
                     : unit == "M" || unit == "MB" || unit == "MIB" ? 1024.0L * 1024
                     : unit == "G" || unit == "GB" || unit == "GIB" ? 1024.0L * 1024 * 1024
                     : unit == "T" || unit == "TB" || unit == "TIB" ? 1024.0L * 1024 * 1024 * 1024
                                                                    : 0;
  FUZZ_CHECK(mult != 0, std::string(text));
  long double want = n->first * mult;
  // Within one unit of the exact value (the parser may round through a double).
  FUZZ_CHECK(std::fabs(static_cast<long double>(*got) - want) <= std::max(1.0L, want * 1e-15L),
             std::string(text) + " -> " + std::to_string(*got));
}

void CheckDuration(std::string_view text, milliseconds min, milliseconds max) {
  auto got = ParseDuration(text, min, max);
  if (!got) {
    FUZZ_CHECK(fuzz::IsError(got.error(), StatusCode::kInvalidArgument,
                             "duration \"" + std::string(text) + "\": "),
               got.error().ToString());
    return;
  }
  FUZZ_CHECK(*got >= min && *got <= max, std::string(text));
  auto n = Number(text);
  FUZZ_CHECK(n.has_value(), std::string(text));
  std::string_view unit = text.substr(n->second);
  long double per = unit == "ms"                  ? 1
                    : unit == "s" || unit.empty() ? 1000
                    : unit == "m"                 ? 60000
                    : unit == "h"                 ? 3600000
                    : unit == "d"                 ? 86400000
                                                  : 0;
  FUZZ_CHECK(per != 0, std::string(text));
  long double want = n->first * per;
  FUZZ_CHECK(std::fabs(static_cast<long double>(got->count()) - want) <= 0.5L + want * 1e-15L,
             std::string(text) + " -> " + std::to_string(got->count()) + "ms");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::Text(data + 1, size - 1);
  if (data[0] & 1) {
    CheckByteSize(text);
  } else {
    static const milliseconds kBounds[][2] = {
        {milliseconds(0), milliseconds::max()},
        {milliseconds(1), milliseconds(86'400'000)},
        {milliseconds(100), milliseconds(3'600'000)},
        {milliseconds::min(), milliseconds::max()},
    };
    const auto& b = kBounds[(data[0] >> 1) % 4];
    CheckDuration(text, b[0], b[1]);
  }
  return 0;
}
