// ParseByteSize, ParseDuration and FormatDuration: the syntax of every size and duration flag,
// table-driven; RandomHex.
#include "bdn/base/units.h"

#include <gtest/gtest.h>

#include <string>

namespace bdn {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMin{1};
constexpr milliseconds kMax{24 * 3'600'000};

TEST(ParseByteSize, AcceptsUnitsAndFractionsExactly) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"0", 0},
      {"123", 123},
      {"123b", 123},
      {"64K", 65'536},
      {"64KiB", 65'536},
      {"64kb", 65'536},
      {"10G", 10 * kGiB},
      {"1.5GiB", 1'610'612'736},
      {".5K", 512},
      {"1.", 1},
      {"0.4", 0},
      {"0.5", 1},
      {"1.0009765625K", 1025},
      {"18446744073709551615", UINT64_MAX},
      {"16777215.999999999999T", UINT64_MAX},
      {"00000000000000000000000000001K", 1024},
  };
  for (const Case& c : cases) {
    auto n = ParseByteSize(c.text);
    ASSERT_TRUE(n.has_value()) << c.text << ": " << n.error().message();
    EXPECT_EQ(*n, c.bytes) << c.text;
  }
}

// Found by fuzz/units_fuzz.cc (input fuzz/corpus/units/crash-bytesize-two-dots): "11.." was read
// as 11 (std::stod stopped at the second '.').
TEST(ParseByteSize, RefusesMalformedTextNamingIt) {
  for (const char* text : {"", ".", "11..", "1.2.3", "1..K", "1e3", "-1", "+1", " 1", "1 K", "1KK",
                           "K", "0x10", "nan", "inf", "1P", "1K\n"}) {
    auto n = ParseByteSize(text);
    ASSERT_FALSE(n.has_value()) << text;
    EXPECT_EQ(n.error().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(n.error().message(), "size \"" + std::string(text) +
                                       "\": expected a number with an optional unit (K, M, G, T)");
  }
}

// Sizes past 2^64-1 wrapped around (or came out as 2^63) through a double.
TEST(ParseByteSize, RefusesSizesPast2To64) {
  for (const char* text : {"18446744073709551616", "16777216T", "17179869184G",
                           "16777215.9999999999999999T", "99999999999999999999999T"}) {
    auto n = ParseByteSize(text);
    ASSERT_FALSE(n.has_value()) << text << " = " << *n;
    EXPECT_EQ(n.error().message(),
              "size \"" + std::string(text) + "\": larger than 18446744073709551615 bytes");
  }
}

TEST(ParseDuration, AcceptsEveryUnitAndPlainSeconds) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {
      {"500ms", 500},     {"30s", 30'000},      {"2m", 120'000},     {"1h", 3'600'000},
      {"30", 30'000},     {"0.5", 500},         {"1.5s", 1'500},     {".25s", 250},
      {"1.", 1'000},      {"0.1", 100},         {"1.5m", 90'000},    {"007s", 7'000},
      {"1ms", 1},         {"0.0015s", 2},       {"24h", 86'400'000}, {"1440m", 86'400'000},
      {"1d", 86'400'000}, {"0.5d", 43'200'000},
  };
  for (const Case& c : cases) {
    auto d = ParseDuration(c.text, kMin, kMax);
    ASSERT_TRUE(d.has_value()) << c.text << ": " << d.error().message();
    EXPECT_EQ(d->count(), c.ms) << c.text;
  }
}

TEST(ParseDuration, RefusesMalformedTextNamingIt) {
  for (const char* text : {"",     "s",    "ms",   ".",     "-1s", "+1s",   "1 s",
                           " 1s",  "1s ",  "1S",   "1sec",  "1e3", "1e3ms", "nan",
                           "inf",  "0x10", "1..2", "1.2.3", "10D", "1m30s", "1234567890123456",
                           "30s\n"}) {
    auto d = ParseDuration(text, kMin, kMax);
    ASSERT_FALSE(d.has_value()) << text;
    EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(d.error().message(),
              "duration \"" + std::string(text) +
                  "\": expected a number and a unit such as 500ms, 30s, 2m, 1h, 7d (a plain number "
                  "is seconds)")
        << text;
  }
}

TEST(ParseDuration, RefusesValuesOutOfRangeNamingTheBounds) {
  struct Case {
    const char* text;
    milliseconds min, max;
    const char* message;
  } cases[] = {
      {"0", kMin, kMax, "duration \"0\": must be between 1ms and 24h"},
      {"0s", milliseconds(100), milliseconds(3'600'000),
       "duration \"0s\": must be between 100ms and 1h"},
      {"99ms", milliseconds(100), milliseconds(3'600'000),
       "duration \"99ms\": must be between 100ms and 1h"},
      {"0.0004s", kMin, kMax, "duration \"0.0004s\": must be between 1ms and 24h"},
      {"61m", milliseconds(1000), milliseconds(3'600'000),
       "duration \"61m\": must be between 1s and 1h"},
      {"999999999999999h", kMin, kMax,
       "duration \"999999999999999h\": must be between 1ms and 24h"},
  };
  for (const Case& c : cases) {
    auto d = ParseDuration(c.text, c.min, c.max);
    ASSERT_FALSE(d.has_value()) << c.text;
    EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(d.error().message(), c.message);
  }
  // Where 0 is allowed, a value above it that would round to 0 is refused, not taken as 0.
  for (const char* text : {"0.0000001s", "0.4ms", "0.000001m"}) {
    auto d = ParseDuration(text, milliseconds(0), kMax);
    ASSERT_FALSE(d.has_value()) << text;
    EXPECT_EQ(d.error().message(), "duration \"" + std::string(text) +
                                       "\": under half a millisecond, which would be 0; give 0 "
                                       "or at least 1ms");
  }
  EXPECT_EQ(ParseDuration("0", milliseconds(0), kMax)->count(), 0);
  EXPECT_EQ(ParseDuration("0.0s", milliseconds(0), kMax)->count(), 0);
  EXPECT_EQ(ParseDuration("0.5ms", milliseconds(0), kMax)->count(), 1);
  // The bounds themselves are inside.
  EXPECT_EQ(ParseDuration("100ms", milliseconds(100), milliseconds(3'600'000))->count(), 100);
  EXPECT_EQ(ParseDuration("1h", milliseconds(100), milliseconds(3'600'000))->count(), 3'600'000);
}

TEST(FormatDuration, UsesTheLargestUnitThatDividesIt) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatNumber(2), "2");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
  EXPECT_EQ(FormatNumber(-0.1), "-0.1");
  EXPECT_EQ(FormatDuration(milliseconds(100)), "100ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(55'000)), "55s");
  EXPECT_EQ(FormatDuration(milliseconds(90'000)), "90s");
  EXPECT_EQ(FormatDuration(milliseconds(120'000)), "2m");
  EXPECT_EQ(FormatDuration(milliseconds(7'200'000)), "2h");
  // What it writes parses back to the same value.
  for (int64_t ms : {1, 100, 1500, 55'000, 120'000, 7'200'000}) {
    EXPECT_EQ(ParseDuration(FormatDuration(milliseconds(ms)), kMin, kMax)->count(), ms);
  }
}

TEST(RandomHex, GivesTwoHexCharactersPerByteAndDiffers) {
  auto a = RandomHex(16);
  auto b = RandomHex(16);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace bdn
