// Tests for the POST /v1/chunks/batch answer decoder, fed directly (remote_test.cc covers it
// through HTTP): records in any piece sizes, and the exact error for each malformed body.
#include "bdn/remote/batch_response.h"

#include <gtest/gtest.h>
#include <malloc.h>

namespace bdn::remote {
namespace {

const std::string kSource = "origin http://o";

std::string Raw(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), Digest::kSize};
}

std::string Record(const Digest& id, uint8_t status, uint32_t length, const std::string& bytes) {
  std::string r = Raw(id) + static_cast<char>(status);
  for (int i = 0; i < 4; ++i) r += static_cast<char>((length >> (8 * i)) & 0xff);
  return r + bytes;
}
std::string Found(const std::string& bytes) {
  return Record(Digest::Of(bytes), 0, static_cast<uint32_t>(bytes.size()), bytes);
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Result<BlobBatch> Decode(std::span<const Digest> ids, const std::string& body, size_t piece) {
  BatchResponseDecoder d(ids, kSource);
  for (size_t at = 0; at < body.size(); at += piece) {
    if (!d.Feed(Bytes(body).subspan(at, std::min(piece, body.size() - at)))) break;
  }
  return std::move(d).Finish();
}

TEST(BatchResponseDecoder, DecodesFoundAndMissingRecordsFedInAnyPieces) {
  const std::string a = "first", b(1000, 'b');
  const Digest missing = Digest::Of(std::string_view("not there"));
  const std::vector<Digest> ids = {Digest::Of(a), missing, Digest::Of(b), Digest::Of(a),
                                   Digest::Of(std::string_view())};
  const std::string body =
      "BDNB" + Found(a) + Record(missing, 1, 0, "") + Found(b) + Found(a) + Found("");
  const BlobBatch want = {std::vector<uint8_t>(a.begin(), a.end()), std::nullopt,
                          std::vector<uint8_t>(b.begin(), b.end()),
                          std::vector<uint8_t>(a.begin(), a.end()), std::vector<uint8_t>()};
  for (size_t piece : {size_t{1}, size_t{3}, size_t{37}, size_t{41}, body.size()}) {
    auto got = Decode(ids, body, piece);
    ASSERT_TRUE(got.has_value()) << piece << ": " << got.error().ToString();
    EXPECT_EQ(*got, want) << piece;
  }
}

TEST(BatchResponseDecoder, NamesWhatIsWrongWithABody) {
  const Digest id = Digest::Of(std::string_view("abc"));
  const Digest other = Digest::Of(std::string_view("other"));
  const std::string prefix = kSource + ": POST /v1/chunks/batch: ";
  struct Case {
    std::string body;
    std::string message;
  } cases[] = {
      {"", prefix + "no BDNB header"},
      {"BD", prefix + "no BDNB header"},
      {"XXXX" + Found("abc"), prefix + "no BDNB header"},
      {"BDNB", prefix + "truncated at chunk " + id.ToString()},
      {"BDNB" + Found("abc").substr(0, 36), prefix + "truncated at chunk " + id.ToString()},
      {"BDNB" + Found("abc").substr(0, 39), prefix + "truncated at chunk " + id.ToString()},
      {"BDNB" + Record(other, 1, 0, ""), prefix + "records out of order at chunk " + id.ToString()},
      {"BDNB" + Record(id, 7, 0, ""), prefix + "unknown record status 7"},
      {"BDNB" + Found("abc") + "x", prefix + "trailing bytes"},
      {"BDNB" + Record(id, 0, 3, "abd"),
       "chunk " + id.ToString() + ": digest mismatch (bytes from " + kSource + " hash to " +
           Digest::Of(std::string_view("abd")).ToString() + ")"},
      // A missing record carries no bytes: a length there was silently skipped, so the bytes
      // that followed were read as the next record.
      {"BDNB" + Record(id, 1, 3, "abc"),
       prefix + "missing chunk " + id.ToString() + " has length 3"},
  };
  for (const Case& c : cases) {
    for (size_t piece : {size_t{1}, std::max<size_t>(c.body.size(), 1)}) {
      auto got = Decode(std::span<const Digest>(&id, 1), c.body, piece);
      ASSERT_FALSE(got.has_value()) << c.message;
      EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
      EXPECT_EQ(got.error().message(), c.message);
    }
  }
  // No ids: "BDNB" alone is the whole answer.
  auto none = Decode({}, "BDNB", 4);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(Decode({}, "BDNB\x01", 5).error().message(), prefix + "trailing bytes");
}

// A record header's length is the server's word: 4 GiB was reserved the moment a header claimed
// it (one lying or broken server could make a mount daemon allocate 4 GiB per request).
TEST(BatchResponseDecoder, ALyingLengthReservesNoMoreThanAChunkBeforeItsBytesArrive) {
  const Digest id = Digest::Of(std::string_view("abc"));
  const size_t before = mallinfo2().hblkhd;  // bytes in mmap'ed blocks (large allocations)
  BatchResponseDecoder d(std::span<const Digest>(&id, 1), kSource);
  const std::string body = "BDNB" + Record(id, 0, 1 << 30, "abc");
  ASSERT_TRUE(d.Feed(Bytes(body)));
  const size_t held = mallinfo2().hblkhd - before;
  EXPECT_LE(held, BatchResponseDecoder::kReserveLimitBytes + 4096);
  auto got = std::move(d).Finish();
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(),
            kSource + ": POST /v1/chunks/batch: truncated at chunk " + id.ToString());
  // Past what one GET may answer, the length is refused at its header: the bytes after it were
  // buffered up to 4 GiB per record.
  BatchResponseDecoder refused(std::span<const Digest>(&id, 1), kSource);
  EXPECT_FALSE(refused.Feed(Bytes("BDNB" + Record(id, 0, 0xfffffff0, "abc"))));
  EXPECT_EQ(refused.error()->message(), kSource + ": POST /v1/chunks/batch: chunk " +
                                            id.ToString() + " has length 4294967280, more than " +
                                            "1073741824 bytes");
}

}  // namespace
}  // namespace bdn::remote
