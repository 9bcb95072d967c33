#include "bdn/base/text.h"

#include <cstdint>
#include <cstdio>

#include "bdn/base/hex.h"

namespace bdn {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if none starts there.
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    n = 1;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 2;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 3;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n >= s.size()) return 0;
  for (size_t k = 1; k <= n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
      cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n + 1;
}

// The code point of the valid `n`-byte UTF-8 sequence at s[i] (Utf8SequenceAt said so).
uint32_t CodePointAt(std::string_view s, size_t i, size_t n) {
  static constexpr unsigned char kLead[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = static_cast<unsigned char>(s[i]) & kLead[n];
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  return cp;
}

// Code points that end a line for some readers, turn the text after them around, or show as
// nothing, so that a name holding one could forge what follows it on a log line or a terminal,
// or pass for another name: the C1 controls (U+0085 NEL among them), the line and paragraph
// separators U+2028 and U+2029, the interlinear annotation characters U+FFF9-U+FFFB, and every
// Default_Ignorable_Code_Point of Unicode 15.1 (DerivedCoreProperties.txt): the bidirectional
// controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069; the "Trojan Source" characters,
// CVE-2021-42574), the soft hyphen, joiners and zero width spaces, the Hangul fillers, the
// variation selectors, the musical symbol format characters and the tags.
bool BreaksOrTurnsALine(uint32_t cp) {
  struct Range {
    uint32_t first, last;
  };
  static constexpr Range kRanges[] = {
      {0x0080, 0x009f},    // C1 controls
      {0x00ad, 0x00ad},    // soft hyphen
      {0x034f, 0x034f},    // combining grapheme joiner
      {0x061c, 0x061c},    // Arabic letter mark
      {0x115f, 0x1160},    // Hangul choseong and jungseong fillers
      {0x17b4, 0x17b5},    // Khmer inherent vowels
      {0x180b, 0x180f},    // Mongolian variation selectors and vowel separator
      {0x200b, 0x200f},    // zero width space, (non-)joiner, LRM, RLM
      {0x2028, 0x2029},    // line and paragraph separators
      {0x202a, 0x202e},    // bidirectional embeddings and overrides
      {0x2060, 0x206f},    // word joiner, invisible operators, bidirectional isolates
      {0x3164, 0x3164},    // Hangul filler
      {0xfe00, 0xfe0f},    // variation selectors
      {0xfeff, 0xfeff},    // zero width no-break space (BOM)
      {0xffa0, 0xffa0},    // halfwidth Hangul filler
      {0xfff0, 0xfffb},    // unassigned specials, interlinear annotation
      {0x1bca0, 0x1bca3},  // shorthand format controls
      {0x1d173, 0x1d17a},  // musical symbol format characters
      {0xe0000, 0xe0fff},  // tags, variation selectors supplement
  };
  for (const Range& r : kRanges) {
    if (cp >= r.first && cp <= r.last) return true;
  }
  return false;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Counted(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

std::string EscapeName(std::string_view s, Backslashes backslashes) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    const size_t n = Utf8SequenceAt(s, i);
    if (n > 1) {
      const uint32_t cp = CodePointAt(s, i, n);
      if (BreaksOrTurnsALine(cp)) {
        char hex[16];
        std::snprintf(hex, sizeof hex, cp > 0xffff ? "\\U%08x" : "\\u%04x",
                      static_cast<unsigned>(cp));
        out += hex;
      } else {
        out.append(s.substr(i, n));
      }
      i += n;
      continue;
    }
    ++i;
    if (u == '\\' && backslashes == Backslashes::kEscape) {
      out += "\\\\";
    } else if (u == '\n') {
      out += "\\n";
    } else if (u == '\t') {
      out += "\\t";
    } else if (u == '\r') {
      out += "\\r";
    } else if (n == 0 || u < 0x20 || u == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += static_cast<char>(u);
    }
  }
  return out;
}

std::string PercentEncode(std::string_view s, std::string_view safe) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.' || c == '~' ||
                safe.find(static_cast<char>(c)) != std::string_view::npos;
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string PercentDecode(std::string_view s) {
  const auto hex = HexDigitValue;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<uint64_t> ParseByteCount(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace bdn
