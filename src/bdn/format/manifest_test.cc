// Tests for the manifest and version-1 chunk index encodings: canonical bytes, round trips, and
// every way the decoders and encoders refuse bad input (version 2: chunk_index_test.cc).
#include "bdn/format/manifest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/crafted_test_util.h"

namespace bdn {
namespace {

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Entry Dir(std::string path, uint16_t mode = 0755) {
  Entry e;
  e.path = std::move(path);
  e.kind = EntryKind::kDirectory;
  e.mode = mode;
  return e;
}

Entry EmptyFile(std::string path) {
  Entry e;
  e.path = std::move(path);
  e.kind = EntryKind::kFile;
  e.mode = 0644;
  e.size_bytes = 0;
  e.layout = FileLayout::kEmpty;
  e.digest = Digest::Of(std::string_view());
  return e;
}

Entry SmallFile(std::string path, std::string_view content, uint16_t mode = 0644) {
  Entry e;
  e.path = std::move(path);
  e.kind = EntryKind::kFile;
  e.mode = mode;
  e.size_bytes = content.size();
  e.layout = FileLayout::kSingleChunk;
  e.digest = Digest::Of(content);
  return e;
}

Entry IndexedFile(std::string path, uint64_t size, const Digest& digest, const Digest& index) {
  Entry e;
  e.path = std::move(path);
  e.kind = EntryKind::kFile;
  e.mode = 0600;
  e.size_bytes = size;
  e.layout = FileLayout::kIndexed;
  e.digest = digest;
  e.index = index;
  return e;
}

Entry Link(EntryKind kind, std::string path, std::string target) {
  Entry e;
  e.path = std::move(path);
  e.kind = kind;
  e.mode = kind == EntryKind::kSymlink ? 0777 : 0644;
  e.target = std::move(target);
  return e;
}

std::vector<ChunkRef> SampleChunks() {
  return {{Digest::Of(std::string_view("chunk one")), 262144},
          {Digest::Of(std::string_view("chunk two")), 70000},
          {Digest::Of(std::string_view("chunk three")), 1}};
}

// One entry of every kind and layout: dir, single-chunk file, empty file, indexed file,
// symlink (pointing outside the tree) and hardlink.
Manifest SampleManifest() {
  Manifest m;
  m.chunker = ChunkerParams::Default();
  std::string index = EncodeChunkIndex(SampleChunks());
  m.entries = {
      Dir("d"),
      EmptyFile("d/empty"),
      Link(EntryKind::kHardlink, "d/hard", "d/one"),
      IndexedFile("d/indexed", 262144 + 70000 + 1, Digest::Of(std::string_view("whole file")),
                  Digest::Of(index)),
      SmallFile("d/one", "hello"),
      Link(EntryKind::kSymlink, "d/sym", "../outside"),
  };
  return m;
}

// BLAKE3 of SampleManifest()'s encoding, pinned when format version 1 was written.
constexpr const char* kSampleManifestDigest =
    "b3:f3115ba57cafdbaa5daa5874a6c25d63f841f60ab49ac61b7e5633cfa843e4c6";

// Little-endian helpers for hand-assembled bytes.
void PutLe(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string Header(uint64_t count, uint8_t flags = 0, uint32_t version = 1, uint8_t algorithm = 1,
                   ChunkerParams p = ChunkerParams::Default()) {
  std::string s = "BDNM";
  PutLe(s, version, 4);
  s.push_back(static_cast<char>(algorithm));
  PutLe(s, p.min_bytes, 4);
  PutLe(s, p.avg_bytes, 4);
  PutLe(s, p.max_bytes, 4);
  s.push_back(static_cast<char>(flags));
  PutLe(s, count, 8);
  return s;
}

void PutStr(std::string& out, std::string_view s) {
  PutLe(out, s.size(), 4);
  out.append(s);
}

void PutDigest(std::string& out, const Digest& d) {
  out.append(reinterpret_cast<const char*>(d.data()), Digest::kSize);
}

void PutDirEntry(std::string& out, std::string_view path, uint16_t mode = 0755) {
  out.push_back(static_cast<char>(EntryKind::kDirectory));
  PutLe(out, mode, 2);
  PutStr(out, path);
}

// Expects a decode failure with code Corruption and exactly `message`.
void ExpectCorrupt(const std::string& bytes, const std::string& message) {
  auto m = DecodeManifest(AsBytes(bytes));
  ASSERT_FALSE(m.has_value()) << "decoded: " << message;
  EXPECT_EQ(m.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(m.error().message(), message);
}

void ExpectEncodeRejects(const Manifest& m, const std::string& message) {
  auto bytes = EncodeManifest(m);
  ASSERT_FALSE(bytes.has_value()) << "encoded though expecting: " << message;
  EXPECT_EQ(bytes.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.error().message(), message);
}

TEST(Manifest, SampleHasExactEncodedLengthAndStableDigest) {
  auto bytes = EncodeManifest(SampleManifest());
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  // Header 30; entries: each 1 kind + 2 mode + 4 + path, then per kind:
  //   "d" 8; "d/empty" 14+41; "d/hard" 13+9; "d/indexed" 16+41+32; "d/one" 12+41; "d/sym" 12+14.
  EXPECT_EQ(bytes->size(), 30u + 8 + 55 + 22 + 89 + 53 + 26);
  EXPECT_EQ(bytes->size(), 283u);
  // The version digest of this tree is part of format version 1: it must never change.
  EXPECT_EQ(Digest::Of(*bytes).ToString(), kSampleManifestDigest);
  // Encoding is a pure function of the manifest.
  EXPECT_EQ(*EncodeManifest(SampleManifest()), *bytes);
}

TEST(Manifest, SampleMatchesHandAssembledBytes) {
  const Manifest m = SampleManifest();
  std::string expected = Header(6);
  PutDirEntry(expected, "d");
  auto file_head = [&](std::string_view path, uint16_t mode, uint64_t size, FileLayout layout,
                       const Digest& digest) {
    expected.push_back(static_cast<char>(EntryKind::kFile));
    PutLe(expected, mode, 2);
    PutStr(expected, path);
    PutLe(expected, size, 8);
    expected.push_back(static_cast<char>(layout));
    PutDigest(expected, digest);
  };
  file_head("d/empty", 0644, 0, FileLayout::kEmpty, Digest::Of(std::string_view()));
  expected.push_back(static_cast<char>(EntryKind::kHardlink));
  PutLe(expected, 0644, 2);
  PutStr(expected, "d/hard");
  PutStr(expected, "d/one");
  file_head("d/indexed", 0600, 332145, FileLayout::kIndexed,
            Digest::Of(std::string_view("whole file")));
  PutDigest(expected, Digest::Of(EncodeChunkIndex(SampleChunks())));
  file_head("d/one", 0644, 5, FileLayout::kSingleChunk, Digest::Of(std::string_view("hello")));
  expected.push_back(static_cast<char>(EntryKind::kSymlink));
  PutLe(expected, 0777, 2);
  PutStr(expected, "d/sym");
  PutStr(expected, "../outside");
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  EXPECT_EQ(*bytes, expected);
}

TEST(Manifest, MtimesAddEightBytesPerEntryAndChangeTheDigest) {
  Manifest m = SampleManifest();
  const std::string plain = *EncodeManifest(m);
  m.has_mtimes = true;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    m.entries[i].mtime_ns = int64_t{1'700'000'000'000'000'000} + static_cast<int64_t>(i);
  }
  auto with = EncodeManifest(m);
  ASSERT_TRUE(with.has_value()) << with.error().message();
  EXPECT_EQ(with->size(), plain.size() + 8 * m.entries.size());
  EXPECT_NE(Digest::Of(*with), Digest::Of(plain));
}

TEST(Manifest, OneDirectoryEntryMatchesHandAssembledBytes) {
  Manifest m;
  m.chunker = ChunkerParams::Default();
  m.entries = {Dir("a")};
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  const std::string expected(
      "BDNM"
      "\x01\x00\x00\x00"                  // format version 1
      "\x01"                              // algorithm: FastCDC 2020
      "\x00\x40\x00\x00"                  // min 16384
      "\x00\x00\x01\x00"                  // avg 65536
      "\x00\x00\x04\x00"                  // max 262144
      "\x00"                              // flags
      "\x01\x00\x00\x00\x00\x00\x00\x00"  // entry count
      "\x01"                              // kind: directory
      "\xed\x01"                          // mode 0755
      "\x01\x00\x00\x00"
      "a",
      38);
  EXPECT_EQ(*bytes, expected);
}

TEST(Manifest, OneFileWithMtimeMatchesHandAssembledBytes) {
  Manifest m;
  m.chunker = {1024, 4096, 16384};
  m.has_mtimes = true;
  Entry f = SmallFile("f", "hello", 0640);
  f.mtime_ns = -2;  // before the epoch: stored as two's complement
  m.entries = {f};
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();

  std::string expected = Header(1, /*flags=*/1, 1, 1, m.chunker);
  expected.push_back('\x02');  // kind: file
  PutLe(expected, 0640, 2);    // mode
  PutStr(expected, "f");
  PutLe(expected, 5, 8);       // size
  expected.push_back('\x01');  // layout: single chunk
  PutDigest(expected, Digest::Of(std::string_view("hello")));
  PutLe(expected, ~uint64_t{1}, 8);  // mtime -2
  EXPECT_EQ(*bytes, expected);
  EXPECT_EQ(bytes->size(), 30u + 7 + 1 + 8 + 1 + 32 + 8);

  auto back = DecodeManifest(AsBytes(*bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back->entries.at(0).mtime_ns, -2);
}

TEST(Manifest, EncodeDecodeRoundTrip) {
  Manifest m = SampleManifest();
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  auto back = DecodeManifest(AsBytes(*bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(*EncodeManifest(*back), *bytes);

  m.has_mtimes = true;
  int64_t t = -5;
  for (Entry& e : m.entries) e.mtime_ns = t++ * 1'000'000'007;
  bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  back = DecodeManifest(AsBytes(*bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(Manifest, EmptyManifestRoundTrips) {
  Manifest m;
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  EXPECT_EQ(*bytes, Header(0));
  auto back = DecodeManifest(AsBytes(*bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(Manifest, UnicodeAndOddPathsRoundTrip) {
  Manifest m;
  m.entries = {Dir("$(rm -rf)"), Dir("name with spaces"), Dir("模型"),
               SmallFile("模型/权重.bin", "weights")};
  auto bytes = EncodeManifest(m);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  auto back = DecodeManifest(AsBytes(*bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(Manifest, EncodeRejectsInvalidManifests) {
  {
    Manifest m;
    m.entries = {Dir("b"), Dir("a")};
    ExpectEncodeRejects(m, "manifest: path \"a\": entries not sorted or duplicated");
  }
  {
    Manifest m;
    m.entries = {Dir("a"), Dir("a")};
    ExpectEncodeRejects(m, "manifest: path \"a\": entries not sorted or duplicated");
  }
  {
    // Bytewise order: "a/b" < "a0" ('/' is 0x2f, '0' is 0x30) and "a" < "a/b".
    Manifest m;
    m.entries = {Dir("a"), Dir("a0"), Dir("a/b")};
    ExpectEncodeRejects(m, "manifest: path \"a/b\": entries not sorted or duplicated");
  }
  {
    Manifest m;
    m.entries = {SmallFile("x/y", "data")};
    ExpectEncodeRejects(m, "manifest: path \"x/y\": parent directory is not an entry");
  }
  {
    Manifest m;
    m.entries = {Dir("x"), SmallFile("x/y/z", "data")};
    ExpectEncodeRejects(m, "manifest: path \"x/y/z\": parent directory is not an entry");
  }
  {
    // The parent exists but is a file.
    Manifest m;
    m.entries = {SmallFile("x", "data"), SmallFile("x/y", "data")};
    ExpectEncodeRejects(m, "manifest: path \"x/y\": parent directory is not an entry");
  }
  {
    Manifest m;
    m.entries = {Dir("d"), Link(EntryKind::kHardlink, "h", "d")};
    ExpectEncodeRejects(m, "manifest: path \"h\": hardlink target \"d\" is not a file entry");
  }
  {
    Manifest m;
    m.entries = {Link(EntryKind::kSymlink, "s", "f"), Link(EntryKind::kHardlink, "t", "s")};
    ExpectEncodeRejects(m, "manifest: path \"t\": hardlink target \"s\" is not a file entry");
  }
  {
    Manifest m;
    m.entries = {Link(EntryKind::kHardlink, "h", "missing")};
    ExpectEncodeRejects(m, "manifest: path \"h\": hardlink target \"missing\" is not a file entry");
  }
  {
    Manifest m;
    m.entries = {Link(EntryKind::kSymlink, "s", "")};
    ExpectEncodeRejects(m, "manifest: path \"s\": symlink target is empty");
  }
  {
    Manifest m;
    m.entries = {Link(EntryKind::kSymlink, "s", "t\xff")};
    ExpectEncodeRejects(m, "manifest: path \"s\": symlink target \"t\\xff\" is not valid UTF-8");
  }
  {
    Manifest m;
    m.entries = {Link(EntryKind::kSymlink, "s", std::string("t\0u", 3))};
    ExpectEncodeRejects(m, "manifest: path \"s\": symlink target contains a NUL byte");
  }
  {
    Manifest m;
    m.entries = {Dir("d", 04755)};
    ExpectEncodeRejects(m, "manifest: path \"d\": mode has bits outside 0777");
  }
  {
    Manifest m;
    m.entries = {Dir("a/")};
    ExpectEncodeRejects(m, "manifest: path \"a/\": empty segment");
  }
  {
    Manifest m;
    Entry e = EmptyFile("e");
    e.digest = Digest::Of(std::string_view("x"));
    m.entries = {e};
    ExpectEncodeRejects(m, "manifest: path \"e\": file layout does not match its size");
  }
  {
    Manifest m;
    Entry e = SmallFile("f", "abc");
    e.size_bytes = 0;
    m.entries = {e};
    ExpectEncodeRejects(m, "manifest: path \"f\": file layout does not match its size");
  }
  {
    Manifest m;
    Entry e = Dir("d");
    e.size_bytes = 1;
    m.entries = {e};
    ExpectEncodeRejects(m, "manifest: path \"d\": only files have a size");
  }
  {
    Manifest m;
    m.has_mtimes = true;
    m.entries = {Dir("d")};
    ExpectEncodeRejects(m, "manifest: path \"d\": mtime presence differs from the manifest flag");
  }
  {
    Manifest m;
    Entry e = Dir("d");
    e.mtime_ns = 5;
    m.entries = {e};
    ExpectEncodeRejects(m, "manifest: path \"d\": mtime presence differs from the manifest flag");
  }
  {
    Manifest m;
    m.chunker = {16, 64, 256};
    ExpectEncodeRejects(m,
                        "chunker parameters fastcdc2020 min=16 avg=64 max=256: need 64 <= min "
                        "< avg < max <= 16 MiB, avg a power of two");
  }
}

// What decoding a prefix of the sample manifest must say, derived from its layout.
TEST(Manifest, DecodeRejectsEveryTruncation) {
  const std::string bytes = *EncodeManifest(SampleManifest());
  const size_t entries = SampleManifest().entries.size();
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
    auto m = DecodeManifest(AsBytes(bytes.substr(0, n)));
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.error().code(), StatusCode::kCorruption);
    const std::string& msg = m.error().message();
    if (n < 4) {
      EXPECT_EQ(msg, "manifest: bad magic, at byte 0");
    } else if (n >= 30 && entries > n / 7) {
      EXPECT_EQ(msg, "manifest: entry count 6 exceeds the input, at byte 30");
    } else {
      EXPECT_TRUE(msg.starts_with("manifest: truncated, at byte ")) << msg;
      size_t at = std::stoul(msg.substr(std::string("manifest: truncated, at byte ").size()));
      EXPECT_LE(at, n);
    }
  }
  ExpectCorrupt(bytes.substr(0, 10), "manifest: truncated, at byte 9");
  ExpectCorrupt(bytes.substr(0, 29), "manifest: truncated, at byte 22");
}

TEST(Manifest, DecodeRejectsBadHeaders) {
  const std::string good = *EncodeManifest(SampleManifest());
  std::string b = good;
  b[0] = 'X';
  ExpectCorrupt(b, "manifest: bad magic, at byte 0");
  ExpectCorrupt("BDNI" + good.substr(4), "manifest: bad magic, at byte 0");

  b = good;
  b[4] = 2;
  ExpectCorrupt(b, "manifest: unsupported format version 2, at byte 8");
  b = good;
  b[4] = 0;
  ExpectCorrupt(b, "manifest: unsupported format version 0, at byte 8");
  b = good;
  b[7] = 1;
  ExpectCorrupt(b, "manifest: unsupported format version 16777217, at byte 8");

  b = good;
  b[8] = 2;
  ExpectCorrupt(b, "manifest: unknown chunker algorithm 2, at byte 9");

  // max_bytes (bytes 17..20) set to 0x00000400 * 256: 64 MiB, over the limit.
  b = good;
  b[20] = 4;
  ExpectCorrupt(b,
                "manifest: chunker parameters fastcdc2020 min=16384 avg=65536 max=67371008: "
                "need 64 <= min < avg < max <= 16 MiB, avg a power of two, at byte 21");

  b = good;
  b[21] = 2;
  ExpectCorrupt(b, "manifest: unknown flags, at byte 22");
  b = good;
  b[21] = static_cast<char>(0x81);
  ExpectCorrupt(b, "manifest: unknown flags, at byte 22");

  // An absurd entry count is refused before anything is allocated.
  b = good;
  for (int i = 22; i < 30; ++i) b[i] = '\xff';
  ExpectCorrupt(b, "manifest: entry count 18446744073709551615 exceeds the input, at byte 30");
}

TEST(Manifest, DecodeRejectsTrailingBytes) {
  const std::string good = *EncodeManifest(SampleManifest());
  ExpectCorrupt(good + '\0', "manifest: trailing bytes, at byte 283");
  ExpectCorrupt(good + "xyz", "manifest: trailing bytes, at byte 283");
}

TEST(Manifest, DecodeRejectsUnsortedAndDuplicateEntries) {
  std::string b = Header(2);
  PutDirEntry(b, "b");
  PutDirEntry(b, "a");
  ExpectCorrupt(b, "manifest: path \"a\": entries not sorted or duplicated");

  b = Header(2);
  PutDirEntry(b, "a");
  PutDirEntry(b, "a");
  ExpectCorrupt(b, "manifest: path \"a\": entries not sorted or duplicated");

  // The same, reached by patching an encoded manifest ("a", "b" -> "c", "b").
  Manifest m;
  m.entries = {Dir("a"), Dir("b")};
  b = *EncodeManifest(m);
  ASSERT_EQ(b[37], 'a');
  b[37] = 'c';
  ExpectCorrupt(b, "manifest: path \"b\": entries not sorted or duplicated");
}

TEST(Manifest, DecodeRejectsBadKindAndLayout) {
  std::string b = Header(1);
  b.push_back('\x05');
  PutLe(b, 0755, 2);
  PutStr(b, "a");
  ExpectCorrupt(b, "manifest: unknown entry kind 5, at byte 31");
  b[30] = 0;
  ExpectCorrupt(b, "manifest: unknown entry kind 0, at byte 31");

  b = Header(1);
  b.push_back('\x02');
  PutLe(b, 0644, 2);
  PutStr(b, "f");
  PutLe(b, 5, 8);
  b.push_back('\x03');  // layout 3 does not exist
  PutDigest(b, Digest::Of(std::string_view("hello")));
  ExpectCorrupt(b, "manifest: unknown file layout 3, at byte 47");
  b[46] = '\x01';  // with a valid layout the same bytes decode
  auto ok = DecodeManifest(AsBytes(b));
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->entries.at(0), SmallFile("f", "hello"));
}

TEST(Manifest, DecodeRejectsInvariantViolations) {
  std::string b = Header(1);
  PutDirEntry(b, "x/y");
  ExpectCorrupt(b, "manifest: path \"x/y\": parent directory is not an entry");

  b = Header(1);
  PutDirEntry(b, "a//b");
  ExpectCorrupt(b, "manifest: path \"a//b\": empty segment");

  b = Header(1);
  PutDirEntry(b, "d", 01777);
  ExpectCorrupt(b, "manifest: path \"d\": mode has bits outside 0777");

  b = Header(1);
  b.push_back(static_cast<char>(EntryKind::kHardlink));
  PutLe(b, 0644, 2);
  PutStr(b, "h");
  PutStr(b, "nowhere");
  ExpectCorrupt(b, "manifest: path \"h\": hardlink target \"nowhere\" is not a file entry");

  // A crafted manifest with a name or a symlink target that is not UTF-8 (push refuses both).
  b = Header(1);
  PutDirEntry(b, "bad\xff");
  ExpectCorrupt(b, "manifest: path \"bad\\xff\": not valid UTF-8");
  b = Header(1);
  b.push_back(static_cast<char>(EntryKind::kSymlink));
  PutLe(b, 0777, 2);
  PutStr(b, "s");
  PutStr(b, "\x1b[31m\xfe");
  ExpectCorrupt(b, "manifest: path \"s\": symlink target \"\\x1b[31m\\xfe\" is not valid UTF-8");

  // A string length over 64 KiB is refused before it is read.
  b = Header(1);
  b.push_back(static_cast<char>(EntryKind::kDirectory));
  PutLe(b, 0755, 2);
  PutLe(b, 64 * 1024 + 1, 4);
  b.append(64 * 1024 + 1, 'a');
  ExpectCorrupt(b, "manifest: string of 65537 bytes is too long, at byte 37");
}

// Sizes a reader would use to size or index memory are refused at decode (issue 14: two
// single-chunk entries of 2^64-1 bytes each were committed and overflowed the version's total;
// a single-chunk file declared 4 GiB overflowed the mount's chunk list).
TEST(Manifest, DecodeRejectsFileSizesOver2To63) {
  Manifest m;
  m.entries = {SmallFile("a", "hello"), SmallFile("b", "hello")};
  std::string b = testing::EncodeWithFileSizes(m, {{"a", UINT64_MAX}, {"b", UINT64_MAX}});
  ExpectCorrupt(b, "manifest: path \"a\": file size 18446744073709551615 is over 2^63-1 bytes");

  m.entries = {
      IndexedFile("big", 1, Digest::Of(std::string_view("x")), Digest::Of(std::string_view("i")))};
  b = testing::EncodeWithFileSizes(m, {{"big", kMaxFileBytes + 1}});
  ExpectCorrupt(b, "manifest: path \"big\": file size 9223372036854775808 is over 2^63-1 bytes");
  // 2^63-1 itself is a valid size (its chunk index must then cover it).
  b = testing::EncodeWithFileSizes(m, {{"big", kMaxFileBytes}});
  auto ok = DecodeManifest(AsBytes(b));
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->entries.at(0).size_bytes, kMaxFileBytes);

  Entry e = SmallFile("a", "hello");
  e.size_bytes = kMaxFileBytes + 1;
  m.entries = {e};
  ExpectEncodeRejects(m,
                      "manifest: path \"a\": file size 9223372036854775808 is over 2^63-1 bytes");
}

TEST(Manifest, DecodeRejectsSingleChunkFileLongerThanTheChunkerMaximum) {
  Manifest m;
  m.entries = {SmallFile("big", "hello")};
  std::string b = testing::EncodeWithFileSizes(m, {{"big", 4ull << 30}});
  ExpectCorrupt(b,
                "manifest: path \"big\": single-chunk file of 4294967296 bytes is longer than "
                "the chunker maximum 262144");
  b = testing::EncodeWithFileSizes(m, {{"big", 262145}});
  ExpectCorrupt(b,
                "manifest: path \"big\": single-chunk file of 262145 bytes is longer than "
                "the chunker maximum 262144");
  b = testing::EncodeWithFileSizes(m, {{"big", 262144}});
  EXPECT_TRUE(DecodeManifest(AsBytes(b)).has_value());

  m.entries[0].size_bytes = 262145;
  ExpectEncodeRejects(m,
                      "manifest: path \"big\": single-chunk file of 262145 bytes is longer "
                      "than the chunker maximum 262144");
}

TEST(Manifest, DecodeOfAHugeEntryCountFailsWithoutReservingForIt) {
  // 4 GiB of entries claimed by a 30-byte header plus 7 bytes per... nothing: refused by count.
  std::string b = Header(1ull << 40);
  ExpectCorrupt(b, "manifest: entry count 1099511627776 exceeds the input, at byte 30");
  // A count the input could hold but does not: fails at the truncation.
  b = Header(200);
  b.append(7 * 200, '\x01');
  auto r = DecodeManifest(AsBytes(b));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
}

// A fetch that answers every id with `index` (a version-1 object needs no other blob).
IndexFetch Serving(const std::string& index) {
  return [index](IndexPart, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
    return std::vector<IndexBlob>(
        ids.size(), std::make_shared<const std::vector<uint8_t>>(index.begin(), index.end()));
  };
}

// FileChunkList: the chunk list every reader and the commit check build for a file, checked.
// (Version-2 chunk indexes: chunk_index_test.cc.)
TEST(FileChunkList, LayoutsGiveTheirChunks) {
  const ChunkerParams p = ChunkerParams::Default();
  auto none = FileChunkList(p, EmptyFile("e"), NoIndexFetch());
  ASSERT_TRUE(none.has_value()) << none.error().message();
  EXPECT_TRUE(none->empty());

  Entry one = SmallFile("one", "hello");
  auto single = FileChunkList(p, one, NoIndexFetch());
  ASSERT_TRUE(single.has_value()) << single.error().message();
  EXPECT_EQ(*single, (std::vector<ChunkRef>{{Digest::Of(std::string_view("hello")), 5}}));

  std::string index = EncodeChunkIndex(SampleChunks());
  Entry big =
      IndexedFile("big", 262144 + 70000 + 1, Digest::Of(std::string_view("w")), Digest::Of(index));
  auto indexed = FileChunkList(p, big, Serving(index));
  ASSERT_TRUE(indexed.has_value()) << indexed.error().message();
  EXPECT_EQ(*indexed, SampleChunks());
}

TEST(FileChunkList, RefusesListsThatDisagreeWithTheFile) {
  const ChunkerParams p = ChunkerParams::Default();
  auto expect = [&](const Entry& e, const std::string& index, const std::string& message) {
    auto r = FileChunkList(p, e, Serving(index));
    ASSERT_FALSE(r.has_value()) << message;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
    EXPECT_EQ(r.error().message(), message);
  };
  const Digest six = Digest::Of(std::string_view("hello\n"));
  // A 6-byte chunk listed twice as 10 bytes adds up to the declared 20: FileChunkList accepts
  // the list (only the chunk's real length shows the lie: CheckChunkLength).
  std::string twice = EncodeChunkIndex(std::vector<ChunkRef>{{six, 10}, {six, 10}});
  Entry f = IndexedFile("f", 20, six, Digest::Of(twice));
  EXPECT_TRUE(FileChunkList(p, f, Serving(twice)).has_value());
  f.size_bytes = 21;
  expect(f, twice, "file \"f\": chunks add up to 20 bytes, the file has 21");
  // A chunk longer than the chunker allows, in an index.
  std::string huge = EncodeChunkIndex(std::vector<ChunkRef>{{six, 0xffffffff}, {six, 1}});
  f.size_bytes = 0x100000000ull;
  expect(f, huge,
         "file \"f\": chunk " + six.ToString() +
             " of 4294967295 bytes is longer than the chunker maximum 262144");
  // A single-chunk entry that bypassed the decoder (a 4 GiB chunk would truncate to 0 bytes).
  Entry s = SmallFile("s", "hello");
  s.size_bytes = 4ull << 30;
  expect(s, "",
         "file \"s\": chunk " + s.digest.ToString() +
             " of 4294967296 bytes is longer than the chunker maximum 262144");
  // An index that does not decode.
  expect(f, "BDNX", "file \"f\": chunk index: bad magic, at byte 0");
  // A version-2 index where a version-1 piece belongs is caught where the piece is read
  // (chunk_index_test.cc); as a root it must list pieces.
  std::string no_pieces = "BDNI";
  PutLe(no_pieces, 2, 4);
  PutLe(no_pieces, 0, 8);
  expect(f, no_pieces, "file \"f\": chunk index: no pieces, at byte 16");
}

TEST(CheckChunkLength, NamesTheChunkAndBothLengths) {
  const ChunkRef ref{Digest::Of(std::string_view("hello\n")), 10};
  EXPECT_TRUE(CheckChunkLength(ref, 10).ok());
  Status s = CheckChunkLength(ref, 6);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "chunk " + ref.id.ToString() + ": is 6 bytes, the version says 10");
}

TEST(ChunkIndex, RoundTrip) {
  const std::vector<ChunkRef> chunks = SampleChunks();
  std::string bytes = EncodeChunkIndex(chunks);
  EXPECT_EQ(bytes.size(), 16u + 36 * chunks.size());
  std::string expected = "BDNI";
  PutLe(expected, 1, 4);
  PutLe(expected, chunks.size(), 8);
  for (const ChunkRef& c : chunks) {
    PutDigest(expected, c.id);
    PutLe(expected, c.size_bytes, 4);
  }
  EXPECT_EQ(bytes, expected);
  auto back = DecodeChunkIndex(AsBytes(bytes));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, chunks);

  std::string empty = EncodeChunkIndex({});
  EXPECT_EQ(empty.size(), 16u);
  auto none = DecodeChunkIndex(AsBytes(empty));
  ASSERT_TRUE(none.has_value()) << none.error().message();
  EXPECT_TRUE(none->empty());
}

TEST(ChunkIndex, DecodeRejectsMalformedInput) {
  const std::string good = EncodeChunkIndex(SampleChunks());
  auto expect = [](const std::string& bytes, const std::string& message) {
    auto r = DecodeChunkIndex(AsBytes(bytes));
    ASSERT_FALSE(r.has_value()) << message;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
    EXPECT_EQ(r.error().message(), message);
  };
  expect("", "chunk index: bad magic, at byte 0");
  expect("BDN", "chunk index: bad magic, at byte 0");
  expect("BDNM" + good.substr(4), "chunk index: bad magic, at byte 0");
  expect(good.substr(0, 6), "chunk index: truncated, at byte 4");
  expect(good.substr(0, 15), "chunk index: truncated, at byte 8");
  std::string b = good;
  b[4] = 9;
  expect(b, "chunk index: unsupported format version 9, at byte 8");
  b[4] = 2;
  expect(b,
         "chunk index: version 2 (a list of pieces) where a list of chunks (version 1) "
         "belongs, at byte 8");
  for (size_t n = 16; n < good.size(); ++n) {
    expect(good.substr(0, n), "chunk index: length does not match count, at byte 16");
  }
  expect(good + "x", "chunk index: length does not match count, at byte 16");
  b = good;
  for (int i = 8; i < 16; ++i) b[i] = '\xff';
  expect(b, "chunk index: length does not match count, at byte 16");
  // A zero-length chunk in the second slot (its size field is bytes 84..87).
  b = good;
  for (int i = 84; i < 88; ++i) b[i] = 0;
  expect(b, "chunk index: empty chunk, at byte 88");
}

TEST(EntryPath, ValidPaths) {
  for (std::string_view p : {"a", "a/b", "模型/权重.bin", "name with spaces", "$(rm -rf)",
                             "a/b/c/d.txt", ".hidden", "a/..b", "...", "😀", "a\\b"}) {
    Status s = ValidateEntryPath(p);
    EXPECT_TRUE(s.ok()) << p << ": " << s.message();
  }
}

TEST(EntryPath, InvalidPathsWithExactMessages) {
  struct Case {
    std::string path;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "path \"\": empty"},
      {"/a", "path \"/a\": must be relative"},
      {"/", "path \"/\": must be relative"},
      {"a/", "path \"a/\": empty segment"},
      {"a//b", "path \"a//b\": empty segment"},
      {"./a", "path \"./a\": \".\" segment not allowed"},
      {"a/.", "path \"a/.\": \".\" segment not allowed"},
      {".", "path \".\": \".\" segment not allowed"},
      {"a/..", "path \"a/..\": \"..\" segment not allowed"},
      {"../a", "path \"../a\": \"..\" segment not allowed"},
      {"a/../b", "path \"a/../b\": \"..\" segment not allowed"},
      {"a\xff", "path \"a\\xff\": not valid UTF-8"},         // names are escaped in messages
      {"\xc0\xaf", "path \"\\xc0\\xaf\": not valid UTF-8"},  // overlong '/'
      {"\xed\xa0\x80", "path \"\\xed\\xa0\\x80\": not valid UTF-8"},           // surrogate
      {"\xe6\xa8", "path \"\\xe6\\xa8\": not valid UTF-8"},                    // truncated sequence
      {"\xf4\x90\x80\x80", "path \"\\xf4\\x90\\x80\\x80\": not valid UTF-8"},  // over U+10FFFF
      {std::string("a\0b", 3), "path \"a\\x00b\": contains a NUL byte"},
      {"a\n/", "path \"a\\n/\": empty segment"},
      {"a\\b/", "path \"a\\b/\": empty segment"},  // a backslash stays as it is
  };
  for (const Case& c : cases) {
    Status s = ValidateEntryPath(c.path);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(EntryKind, Names) {
  EXPECT_EQ(EntryKindName(EntryKind::kDirectory), "directory");
  EXPECT_EQ(EntryKindName(EntryKind::kFile), "file");
  EXPECT_EQ(EntryKindName(EntryKind::kSymlink), "symlink");
  EXPECT_EQ(EntryKindName(EntryKind::kHardlink), "hardlink");
}

}  // namespace
}  // namespace bdn
