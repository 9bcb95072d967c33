// Tests for Digest and Blake3Hasher: the official BLAKE3 test vectors, streaming, parsing, and
// agreement with the b3sum binary.
#include "bdn/digest/digest.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "bdn/base/hex.h"
#include "bdn/base/units.h"

namespace bdn {
namespace {

// The input of the official vectors: byte i is i % 251.
std::vector<uint8_t> VectorInput(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 251);
  return v;
}

struct Vector {
  size_t length;
  const char* hash_hex;  // the first 32 bytes of "hash" in test_vectors.json
};

// From BLAKE3-team/BLAKE3 test_vectors/test_vectors.json.
constexpr Vector kVectors[] = {
    {0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
    {1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
    {1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"},
    {1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7"},
    {1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
    {2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a"},
    {3073, "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3"},
    {8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
    {16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"},
    {31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47"},
    {102400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085"},
};

TEST(Digest, MatchesOfficialTestVectors) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE("length " + std::to_string(v.length));
    std::vector<uint8_t> in = VectorInput(v.length);
    Digest d = Digest::Of(in);
    EXPECT_EQ(d.Hex(), v.hash_hex);
    EXPECT_EQ(d.ToString(), std::string("b3:") + v.hash_hex);
  }
}

TEST(Digest, StringViewOverloadMatchesSpanOverload) {
  for (const Vector& v : kVectors) {
    std::vector<uint8_t> in = VectorInput(v.length);
    std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
    EXPECT_EQ(Digest::Of(text).Hex(), v.hash_hex) << "length " << v.length;
  }
}

TEST(Digest, EmptyInputIsTheKnownEmptyDigest) {
  EXPECT_EQ(Digest::Of(std::string_view()).Hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
}

TEST(Digest, DefaultIsAllZero) {
  Digest d;
  EXPECT_EQ(d.Hex(), std::string(64, '0'));
  EXPECT_NE(d, Digest::Of(std::string_view()));
}

TEST(Blake3Hasher, ExtendedOutputMatchesOfficialVectorForEmptyInput) {
  Blake3Hasher h;
  std::vector<uint8_t> out(64);
  h.FinalizeXof(out);
  EXPECT_EQ(HexEncode(out.data(), out.size()),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
            "e00f03e7b69af26b7faaf09fcd333050338ddfe085b8cc869ca98b206c08243a");
}

TEST(Blake3Hasher, ExtendedOutputPrefixIsTheDigest) {
  std::vector<uint8_t> in = VectorInput(5000);
  Blake3Hasher h;
  h.Update(in);
  std::vector<uint8_t> out(131);
  h.FinalizeXof(out);
  Digest d = h.Finalize();
  EXPECT_EQ(HexEncode(out.data(), Digest::kSize), d.Hex());
}

TEST(Blake3Hasher, StreamingInOddPiecesEqualsOneShot) {
  std::vector<uint8_t> in = VectorInput(102400);
  const Digest one_shot = Digest::Of(in);
  for (size_t piece : {1u, 3u, 63u, 64u, 65u, 1023u, 1025u, 4097u, 65537u}) {
    Blake3Hasher h;
    for (size_t off = 0; off < in.size(); off += piece) {
      size_t n = std::min(piece, in.size() - off);
      h.Update(in.data() + off, n);
    }
    EXPECT_EQ(h.Finalize(), one_shot) << "piece " << piece;
  }
  // Irregular pieces, including empty updates.
  std::mt19937 rng(7);
  Blake3Hasher h;
  size_t off = 0;
  while (off < in.size()) {
    size_t n = std::min<size_t>(rng() % 3000, in.size() - off);
    h.Update(in.data() + off, n);
    off += n;
  }
  EXPECT_EQ(h.Finalize(), one_shot);
}

TEST(Blake3Hasher, FinalizeDoesNotEndTheStream) {
  std::vector<uint8_t> in = VectorInput(3073);
  Blake3Hasher h;
  h.Update(in.data(), 1000);
  EXPECT_EQ(h.Finalize(), Digest::Of(std::span<const uint8_t>(in.data(), 1000)));
  h.Update(in.data() + 1000, in.size() - 1000);
  EXPECT_EQ(h.Finalize().Hex(), "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3");
}

TEST(Digest, ParseRoundTrip) {
  for (const Vector& v : kVectors) {
    Digest d = Digest::Of(VectorInput(v.length));
    auto with_prefix = Digest::Parse(d.ToString());
    ASSERT_TRUE(with_prefix.has_value()) << with_prefix.error().message();
    EXPECT_EQ(*with_prefix, d);
    auto bare = Digest::Parse(d.Hex());
    ASSERT_TRUE(bare.has_value()) << bare.error().message();
    EXPECT_EQ(*bare, d);
  }
}

// Upper-case hex was accepted, so a chunk (GET /v1/chunks/<ID>) or a version had two names
// (cache keys, logs); the canonical form is lower case, and the error names the digest.
TEST(Digest, ParseRefusesUpperCase) {
  const std::string lower = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";
  std::string upper = lower;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& text : {upper, "b3:" + upper, lower.substr(0, 63) + "F"}) {
    SCOPED_TRACE(text);
    auto d = Digest::Parse(text);
    ASSERT_FALSE(d.has_value());
    EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.error().message(), "digest \"" + text + "\": '" +
                                       (text.ends_with("F") ? "F" : "A") +
                                       "' is upper case (a digest is lower-case hex)");
  }
  EXPECT_EQ(Digest::Parse(lower)->Hex(), lower);
}

TEST(Digest, ShortHexIsAPrefix) {
  Digest d = Digest::Of(std::string_view());
  EXPECT_EQ(d.ShortHex(), "af1349b9f5f9");
  EXPECT_EQ(d.ShortHex(4), "af13");
  EXPECT_EQ(d.ShortHex(64), d.Hex());
}

TEST(Digest, OrderingAndHashFollowBytes) {
  std::array<uint8_t, Digest::kSize> a{}, b{};
  b[0] = 1;
  EXPECT_LT(Digest(a), Digest(b));
  std::unordered_set<Digest> set{Digest(a), Digest(b), Digest(a)};
  EXPECT_EQ(set.size(), 2u);
}

struct BadParse {
  std::string input;
  std::string message;
};

TEST(Digest, ParseRejectsBadInputWithExactMessage) {
  const std::string good = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";
  const std::vector<BadParse> cases = {
      {"", "digest \"\": expected 64 hex characters, got 0"},
      {"b3:", "digest \"b3:\": expected 64 hex characters, got 0"},
      {"abc", "digest \"abc\": expected 64 hex characters, got 3"},
      {good.substr(0, 63),
       "digest \"" + good.substr(0, 63) + "\": expected 64 hex characters, got 63"},
      {good + "0", "digest \"" + good + "0\": expected 64 hex characters, got 65"},
      {"b3:" + good + "0", "digest \"b3:" + good + "0\": expected 64 hex characters, got 65"},
      // Only the lower-case "b3:" prefix is stripped.
      {"B3:" + good, "digest \"B3:" + good + "\": expected 64 hex characters, got 67"},
      {"b3:b3:" + good, "digest \"b3:b3:" + good + "\": expected 64 hex characters, got 67"},
      {"g" + good.substr(1), "digest \"g" + good.substr(1) + "\": 'g' is not a hex character"},
      {good.substr(0, 63) + "z",
       "digest \"" + good.substr(0, 63) + "z\": 'z' is not a hex character"},
      {"b3:" + good.substr(0, 10) + " " + good.substr(11), "digest \"b3:" + good.substr(0, 10) +
                                                               " " + good.substr(11) +
                                                               "\": ' ' is not a hex character"},
      {good.substr(0, 32) + "-" + good.substr(33),
       "digest \"" + good.substr(0, 32) + "-" + good.substr(33) + "\": '-' is not a hex character"},
  };
  for (const BadParse& c : cases) {
    SCOPED_TRACE(c.input);
    auto d = Digest::Parse(c.input);
    ASSERT_FALSE(d.has_value());
    EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.error().message(), c.message);
  }
}

// Runs b3sum on `path` and returns the hex it prints (the first field of its output).
std::string B3sum(const std::filesystem::path& path) {
  std::string cmd = "/usr/bin/b3sum --no-names '" + path.string() + "'";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return "";
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int rc = ::pclose(f);
  if (rc != 0) return "b3sum failed: " + out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

TEST(Digest, AgreesWithB3sumBinary) {
  if (!std::filesystem::exists("/usr/bin/b3sum")) GTEST_SKIP() << "/usr/bin/b3sum not installed";
  std::mt19937_64 rng(20240601);
  std::vector<uint8_t> data(kMiB + 7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  char dir_template[] = "/tmp/bdn_digest_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  std::filesystem::path dir(dir_template);
  std::filesystem::path file = dir / "data.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
    ASSERT_TRUE(out.good());
  }
  std::string expected = B3sum(file);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(expected.size(), 64u) << expected;
  EXPECT_EQ(Digest::Of(data).Hex(), expected);
}

}  // namespace
}  // namespace bdn
