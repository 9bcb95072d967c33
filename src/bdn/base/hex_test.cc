// HexEncode/HexDecode, HexDigitValue and the 16-digit names: tables of good and bad inputs.
#include "bdn/base/hex.h"

#include <gtest/gtest.h>

#include <vector>

namespace bdn {
namespace {

TEST(Hex, EncodesLowerCaseMostSignificantNibbleFirst) {
  const std::vector<uint8_t> bytes = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
  EXPECT_EQ(HexEncode(bytes), "00017f80abff");
  EXPECT_EQ(HexEncode(bytes.data(), 2), "0001");
  EXPECT_EQ(HexEncode(std::string_view("\x12\xfe", 2)), "12fe");
  EXPECT_EQ(HexEncode(std::span<const uint8_t>()), "");
}

TEST(Hex, DecodesEitherCaseAndRefusesOddLengthOrNonHex) {
  EXPECT_EQ(HexDecode("00017f80ABff"), std::string("\x00\x01\x7f\x80\xab\xff", 6));
  EXPECT_EQ(HexDecode(""), std::string());
  for (std::string_view bad : {"0", "abc", "0g", "g0", "-1", " 0", "0x"}) {
    EXPECT_EQ(HexDecode(bad), std::nullopt) << bad;
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(HexDecode(HexEncode(std::string_view(all))), all);
}

TEST(Hex, DigitValues) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (char c : {'g', 'G', '/', ':', '@', '`', ' ', '\0'}) EXPECT_EQ(HexDigitValue(c), -1) << c;
}

TEST(Hex, SixteenDigitNumbersRoundTripAndOnlyLowerCaseParses) {
  EXPECT_EQ(Hex16(0), "0000000000000000");
  EXPECT_EQ(Hex16(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_EQ(Hex16(~uint64_t{0}), "ffffffffffffffff");
  EXPECT_EQ(ParseHex16("0123456789abcdef"), 0x0123456789abcdefULL);
  EXPECT_EQ(ParseHex16("ffffffffffffffff"), ~uint64_t{0});
  for (std::string_view bad :
       {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF", "0123456789abcdeg"}) {
    EXPECT_EQ(ParseHex16(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace bdn
