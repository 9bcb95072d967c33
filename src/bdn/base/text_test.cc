// IsValidUtf8 and EscapeName: table-driven over valid and invalid sequences and control bytes.
#include "bdn/base/text.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace bdn {
namespace {

TEST(IsValidUtf8, AcceptsWellFormedAndRejectsEveryMalformedShape) {
  for (std::string_view s :
       {"", "abc", "模型-权重 ünïcødé", "\x7f", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "a\nb"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
  }
  for (std::string_view s : {"a\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe6\xa8", "\xf4\x90\x80\x80",
                             "\x80", "\xc3", "\xe0\x80\x80"}) {
    EXPECT_FALSE(IsValidUtf8(s)) << EscapeName(s);
  }
}

TEST(Counted, OneIsSingularEveryOtherCountPlural) {
  EXPECT_EQ(Counted(1, "file"), "1 file");
  EXPECT_EQ(Counted(0, "file"), "0 files");
  EXPECT_EQ(Counted(2, "problem"), "2 problems");
}

TEST(EscapeName, ControlAndInvalidBytesBecomeCEscapesUtf8Stays) {
  struct Case {
    std::string_view in, escaped, kept;
  } cases[] = {
      {"plain.txt", "plain.txt", "plain.txt"},
      {"模型 ü", "模型 ü", "模型 ü"},
      {"new\nline", "new\\nline", "new\\nline"},
      {"tab\tcr\r", "tab\\tcr\\r", "tab\\tcr\\r"},
      {"back\\slash", "back\\\\slash", "back\\slash"},
      {"a\xff"
       "b",
       "a\\xffb", "a\\xffb"},
      {"\x1b[31mred", "\\x1b[31mred", "\\x1b[31mred"},
      {std::string_view("nul\0x", 5), "nul\\x00x", "nul\\x00x"},
      {"del\x7f", "del\\x7f", "del\\x7f"},
      {"\xe6\xa8", "\\xe6\\xa8", "\\xe6\\xa8"},  // a truncated sequence: each byte escaped
      {"\xc0\xaf", "\\xc0\\xaf", "\\xc0\\xaf"},  // overlong '/'
  };
  for (const auto& c : cases) {
    EXPECT_EQ(EscapeName(c.in), c.escaped);
    EXPECT_EQ(EscapeName(c.in, Backslashes::kKeep), c.kept);
    EXPECT_TRUE(IsValidUtf8(EscapeName(c.in)));
  }
}

// From an attacking helper: a sync job's message quoted an object name holding U+0085 (NEL) and
// U+2028 as they were, and a reader that splits lines there (Python's splitlines) read a forged
// access line after them; U+202E turned the rest of the line around.
TEST(EscapeName, CodePointsThatBreakOrTurnALineBecomeUEscapes) {
  struct Case {
    std::string_view in, escaped;
  } cases[] = {
      {"x\xc2\x85y", "x\\u0085y"},                 // NEL
      {"x\xc2\x80\xc2\x9fy", "x\\u0080\\u009fy"},  // the C1 range's ends
      {"a\xe2\x80\xa8"
       "b\xe2\x80\xa9"
       "c",
       "a\\u2028b\\u2029c"},
      {"\xe2\x80\xae"
       "evil",
       "\\u202eevil"},  // right-to-left override
      {"\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c",
       "\\u202a\\u2066\\u2069\\u200e\\u200f\\u061c"},
      // Invisible: zero width space and joiner, word joiner, BOM, a tag character.
      {"a\xe2\x80\x8b"
       "b\xe2\x80\x8d"
       "c\xe2\x81\xa0"
       "d\xef\xbb\xbf"
       "e\xf3\xa0\x80\x81"
       "f",
       "a\\u200bb\\u200dc\\u2060d\\ufeffe\\U000e0001f"},
      {"\xc2\xa0nbsp \xe2\x80\xa7 \xe2\x80\x8a \xef\xbf\xbc",
       "\xc2\xa0nbsp \xe2\x80\xa7 \xe2\x80\x8a \xef\xbf\xbc"},  // neighbours stay
  };
  for (const auto& c : cases) {
    EXPECT_EQ(EscapeName(c.in), c.escaped);
    EXPECT_TRUE(IsValidUtf8(EscapeName(c.in)));
  }
}

// UTF-8 of one code point (for the tables below).
std::string Utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

// From an attacking helper: the soft hyphen and other characters that show as nothing stayed raw,
// so "config<U+00AD>.json" listed and logged as "config.json". Every Default_Ignorable_Code_Point
// (Unicode's DerivedCoreProperties.txt) is escaped: each range's ends and a point inside.
TEST(EscapeName, EveryDefaultIgnorableCodePointIsEscaped) {
  const uint32_t ignorable[] = {
      0x00ad,  0x034f,  0x061c,  0x115f,  0x1160,  0x17b4,  0x17b5,  0x180b,  0x180e,
      0x180f,  0x200b,  0x200f,  0x202a,  0x202e,  0x2060,  0x2065,  0x206f,  0x3164,
      0xfe00,  0xfe0f,  0xfeff,  0xffa0,  0xfff0,  0xfff8,  0x1bca0, 0x1bca3, 0x1d173,
      0x1d17a, 0xe0000, 0xe0001, 0xe007f, 0xe0100, 0xe01ef, 0xe0fff,
  };
  for (uint32_t cp : ignorable) {
    char want[16];
    std::snprintf(want, sizeof want, cp > 0xffff ? "\\U%08x" : "\\u%04x", cp);
    EXPECT_EQ(EscapeName("config" + Utf8(cp) + ".json"), "config" + std::string(want) + ".json")
        << std::hex << cp;
  }
  // Their neighbours are letters and symbols that show: they stay.
  for (uint32_t cp : {0x00ac, 0x00ae,  0x034e,  0x0350,  0x115e,  0x1161, 0x17b3, 0x17b6,
                      0x180a, 0x1810,  0x3163,  0x3165,  0xfdff,  0xfe10, 0xff9f, 0xffa1,
                      0xfffc, 0x1bc9f, 0x1bca4, 0x1d172, 0x1d17b, 0xe1000}) {
    EXPECT_EQ(EscapeName("x" + Utf8(cp)), "x" + Utf8(cp)) << std::hex << cp;
  }
}

}  // namespace
}  // namespace bdn
