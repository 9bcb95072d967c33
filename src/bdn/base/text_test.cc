// IsValidUtf8 and EscapeName: table-driven over valid and invalid sequences and control bytes.
#include "bdn/base/text.h"

#include <gtest/gtest.h>

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
      {"\xc2\xa0nbsp \xe2\x80\xa7 \xe2\x81\xa5",
       "\xc2\xa0nbsp \xe2\x80\xa7 \xe2\x81\xa5"},  // neighbours stay
  };
  for (const auto& c : cases) {
    EXPECT_EQ(EscapeName(c.in), c.escaped);
    EXPECT_TRUE(IsValidUtf8(EscapeName(c.in)));
  }
}

}  // namespace
}  // namespace bdn
