// Tests for the pack format (records, footer, trailer, codecs), the pack writer and reader (torn
// tails, bad checksums, zero-length blobs) and the index tables.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bdn/store/pack_file.h"
#include "bdn/store/pack_format.h"
#include "bdn/store/pack_index.h"
#include "bdn/testing/test_util.h"

namespace bdn::pack {
namespace {
namespace fs = std::filesystem;
using testutil::RandomBytes;

// A file open for reading and writing, closed at the end.
class File {
 public:
  explicit File(const fs::path& p) : fd_(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644)) {
    EXPECT_GE(fd_, 0) << p;
  }
  ~File() { ::close(fd_); }
  int fd() const { return fd_; }
  uint64_t size() const { return static_cast<uint64_t>(::lseek(fd_, 0, SEEK_END)); }
  void Flip(uint64_t offset) {
    uint8_t b;
    ASSERT_EQ(::pread(fd_, &b, 1, static_cast<off_t>(offset)), 1);
    b ^= 0x40;
    ASSERT_EQ(::pwrite(fd_, &b, 1, static_cast<off_t>(offset)), 1);
  }

 private:
  int fd_;
};

TEST(PackFormat, RecordHeaderRoundTripsAndEveryByteIsChecked) {
  BlobLocation loc{Digest::Of(std::string_view("abc")), 4096, 3, 3, Codec::kNone};
  auto h = EncodeRecordHeader(loc);
  auto back = DecodeRecordHeader(h, 4096, "pack p");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, loc);
  for (size_t i = 0; i < h.size(); ++i) {
    auto bad = h;
    bad[i] ^= 0x01;
    auto r = DecodeRecordHeader(bad, 4096, "pack p");
    ASSERT_FALSE(r.has_value()) << "byte " << i;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
    EXPECT_TRUE(r.error().message().starts_with("pack p: record at offset 4096: "))
        << r.error().message();
  }
}

TEST(PackFormat, RecordHeaderRefusesImpossibleFields) {
  const Digest id = Digest::Of(std::string_view("x"));
  struct Case {
    BlobLocation loc;
    std::string why;
  } cases[] = {
      {{id, 16, 5, 6, Codec::kNone}, "stored and raw lengths differ for codec none"},
      {{id, 16, kMaxBlobBytes + 1, 1, Codec::kZstd}, "length out of range"},
      {{id, 16, 1, kMaxBlobBytes + 1, Codec::kZstd}, "length out of range"},
      {{id, 16, 1, 1, static_cast<Codec>(7)}, "unknown codec 7"},
  };
  for (const Case& c : cases) {
    auto r = DecodeRecordHeader(EncodeRecordHeader(c.loc), 16, "p");
    ASSERT_FALSE(r.has_value()) << c.why;
    EXPECT_EQ(r.error().message(), "p: record at offset 16: " + c.why);
  }
}

TEST(PackFormat, FooterRoundTripsAndTheChecksumCoversEveryByte) {
  std::vector<BlobLocation> blobs = {
      {Digest::Of(std::string_view("a")), 16, 1, 1, Codec::kNone},
      {Digest::Of(std::string_view("")), 81, 0, 0, Codec::kNone},
      {Digest::Of(std::string_view("c")), 145, 10, 1000, Codec::kZstd},
  };
  const uint64_t footer_offset = 145 + 64 + 10;
  std::vector<uint8_t> footer = EncodeFooter(blobs, footer_offset);
  ASSERT_EQ(footer.size(), 3 * kFooterEntryBytes + kTrailerBytes);
  const uint64_t file_bytes = footer_offset + footer.size();
  auto t = DecodeTrailer(std::span(footer).last(kTrailerBytes), file_bytes, "p");
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->footer_offset, footer_offset);
  EXPECT_EQ(t->entry_count, 3u);
  auto back = DecodeFooter(footer, *t, "p");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, blobs);
  for (size_t i = 0; i < footer.size(); ++i) {
    auto bad = footer;
    bad[i] ^= 0x80;
    auto bt = DecodeTrailer(std::span(bad).last(kTrailerBytes), file_bytes, "p");
    if (!bt) continue;  // the trailer's own fields caught it
    auto r = DecodeFooter(bad, *bt, "p");
    EXPECT_FALSE(r.has_value()) << "byte " << i;
  }
}

TEST(PackFormat, FooterEntriesMustNotOverlap) {
  std::vector<BlobLocation> blobs = {
      {Digest::Of(std::string_view("a")), 16, 100, 100, Codec::kNone},
      {Digest::Of(std::string_view("b")), 100, 1, 1, Codec::kNone},  // inside the first record
  };
  std::vector<uint8_t> footer = EncodeFooter(blobs, 1000);
  auto t = DecodeTrailer(std::span(footer).last(kTrailerBytes), 1000 + footer.size(), "p");
  ASSERT_TRUE(t.has_value());
  auto r = DecodeFooter(footer, *t, "p");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(),
            "p: footer: record at offset 100: overlaps another record or the footer");
}

TEST(PackCodec, ZstdOnlyWhenItSavesTheConfiguredFraction) {
  std::vector<uint8_t> zeros(65536, 0);
  std::vector<uint8_t> noise = RandomBytes(65536, 1);
  // Half random, half zeros: zstd saves about half.
  std::vector<uint8_t> half = RandomBytes(32768, 2);
  half.resize(65536, 0);

  EncodedBlob z = EncodeBlob(zeros, {});
  EXPECT_EQ(z.codec, Codec::kZstd);
  EXPECT_LT(z.stored.size(), 100u);
  std::vector<uint8_t> back(zeros.size(), 1);
  ASSERT_TRUE(DecodeBlob(z.codec, z.stored, back, "chunk").ok());
  EXPECT_EQ(back, zeros);

  EncodedBlob n = EncodeBlob(noise, {});
  EXPECT_EQ(n.codec, Codec::kNone);
  EXPECT_TRUE(n.stored.empty());

  EXPECT_EQ(EncodeBlob(half, {.min_saving = 0.4}).codec, Codec::kZstd);
  EXPECT_EQ(EncodeBlob(half, {.min_saving = 0.6}).codec, Codec::kNone);
  EXPECT_EQ(EncodeBlob(zeros, {.min_saving = 1.0}).codec, Codec::kNone);
  EXPECT_EQ(EncodeBlob(std::vector<uint8_t>(63, 0), {}).codec, Codec::kNone);
}

TEST(PackCodec, DamagedZstdBytesAreCorruption) {
  std::vector<uint8_t> zeros(65536, 0);
  EncodedBlob z = EncodeBlob(zeros, {});
  ASSERT_EQ(z.codec, Codec::kZstd);
  std::vector<uint8_t> out(zeros.size());
  // Declared one byte longer than the frame holds.
  std::vector<uint8_t> longer(zeros.size() + 1);
  Status s = DecodeBlob(Codec::kZstd, z.stored, longer, "chunk x");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "chunk x: stored bytes decompress to 65536 bytes, not 65537");
  auto cut = z.stored;
  cut.resize(cut.size() / 2);
  s = DecodeBlob(Codec::kZstd, cut, out, "chunk x");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(s.message().starts_with("chunk x: stored bytes do not decompress (zstd: "))
      << s.message();
}

// A pack of `blobs` written with PackWriter to `path`.
struct WrittenPack {
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<BlobLocation> locs;
};

WrittenPack WritePack(int fd, const std::vector<std::vector<uint8_t>>& blobs, bool seal) {
  WrittenPack out;
  out.blobs = blobs;
  auto w = PackWriter::Start(fd, "pack p");
  EXPECT_TRUE(w.has_value());
  for (const auto& b : blobs) {
    EncodedBlob enc = EncodeBlob(b, {});
    std::span<const uint8_t> stored =
        enc.codec == Codec::kNone ? std::span<const uint8_t>(b) : enc.stored;
    auto loc = w->Append(Digest::Of(b), b.size(), enc.codec, stored);
    EXPECT_TRUE(loc.has_value());
    out.locs.push_back(*loc);
  }
  if (seal) {
    EXPECT_TRUE(w->Seal().ok());
  }
  EXPECT_EQ(w->blobs(), out.locs);
  return out;
}

std::vector<std::vector<uint8_t>> SampleBlobs() {
  return {RandomBytes(1000, 1),  {}, std::vector<uint8_t>(70000, 7),
          RandomBytes(65536, 2), {}, RandomBytes(1, 3),
          RandomBytes(300000, 4)};
}

TEST(PackFile, WrittenBlobsReadBackThroughTheFooter) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p.pack");
  WrittenPack w = WritePack(f.fd(), SampleBlobs(), true);
  EXPECT_EQ(w.locs[2].codec, Codec::kZstd);  // 70,000 equal bytes
  EXPECT_EQ(w.locs[3].codec, Codec::kNone);
  EXPECT_EQ(w.locs[1].stored_bytes, 0u);
  auto footer = ReadFooter(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(footer.has_value()) << footer.error().message();
  EXPECT_EQ(*footer, w.locs);
  for (size_t i = 0; i < w.blobs.size(); ++i) {
    auto got = ReadBlob(f.fd(), w.locs[i], "pack p");
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().message();
    EXPECT_EQ(*got, w.blobs[i]) << i;
  }
  // A sealed pack scans to the same records: the footer does not parse as a record.
  auto scan = ScanRecords(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(scan.has_value());
  EXPECT_EQ(scan->blobs, w.locs);
  EXPECT_EQ(scan->valid_bytes, w.locs.back().end());
}

TEST(PackFile, ATornTailKeepsEveryWholeRecord) {
  testutil::TempDir dir{"bdn_pack_test"};
  const fs::path path = dir.path() / "p.open";
  std::vector<std::vector<uint8_t>> blobs = {RandomBytes(500, 1),
                                             {},
                                             RandomBytes(200, 2),
                                             std::vector<uint8_t>(3000, 9),
                                             RandomBytes(100, 3)};
  uint64_t full;
  std::vector<BlobLocation> locs;
  {
    File f(path);
    locs = WritePack(f.fd(), blobs, false).locs;
    full = f.size();
  }
  std::vector<uint8_t> bytes(full);
  {
    int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_EQ(::pread(fd, bytes.data(), full, 0), static_cast<ssize_t>(full));
    ::close(fd);
  }
  // Cut the unsealed pack at every length: the scan keeps exactly the records that fit.
  for (uint64_t cut = kPackHeaderBytes; cut <= full; ++cut) {
    const fs::path torn = dir.path() / "torn";
    File f(torn);
    ASSERT_EQ(::pwrite(f.fd(), bytes.data(), cut, 0), static_cast<ssize_t>(cut));
    auto scan = ScanRecords(f.fd(), cut, "pack t");
    ASSERT_TRUE(scan.has_value()) << cut;
    size_t whole = 0;
    while (whole < locs.size() && locs[whole].end() <= cut) ++whole;
    ASSERT_EQ(scan->blobs.size(), whole) << "cut at " << cut;
    EXPECT_EQ(scan->valid_bytes, whole == 0 ? kPackHeaderBytes : locs[whole - 1].end());
    EXPECT_EQ(scan->stop_reason.empty(), scan->valid_bytes == cut)
        << cut << " " << scan->stop_reason;
    // And no footer to read.
    EXPECT_EQ(ReadFooter(f.fd(), cut, "pack t").error().code(), StatusCode::kCorruption);
  }
}

TEST(PackFile, AScanContinuedWhereItStoppedFindsEveryLaterRecordOnce) {
  // A pack another process is still writing, seen at every length: a scan of what is there,
  // then one from its valid_bytes once the rest is written, find every record exactly once.
  testutil::TempDir dir{"bdn_pack_test"};
  std::vector<std::vector<uint8_t>> blobs = {
      RandomBytes(500, 1), {}, RandomBytes(200, 2), RandomBytes(100, 3)};
  File f(dir.path() / "p.open");
  const std::vector<BlobLocation> locs = WritePack(f.fd(), blobs, false).locs;
  const uint64_t full = f.size();
  for (uint64_t seen = kPackHeaderBytes; seen <= full; ++seen) {
    auto first = ScanRecords(f.fd(), seen, "pack p");
    ASSERT_TRUE(first.has_value()) << seen;
    auto rest = ScanRecords(f.fd(), full, "pack p", first->valid_bytes);
    ASSERT_TRUE(rest.has_value()) << seen << ": " << rest.error().message();
    std::vector<BlobLocation> all = first->blobs;
    all.insert(all.end(), rest->blobs.begin(), rest->blobs.end());
    ASSERT_EQ(all, locs) << "first scan saw " << seen << " bytes";
    EXPECT_EQ(rest->valid_bytes, full);
  }
  // Continued past the header, the pack header is not read again: a damaged one is not seen.
  f.Flip(0);
  auto later = ScanRecords(f.fd(), full, "pack p", locs[0].end());
  ASSERT_TRUE(later.has_value()) << later.error().message();
  EXPECT_EQ(later->blobs.size(), locs.size() - 1);
}

TEST(PackFile, ZeroedTailAfterRecordsIsNotARecord) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p");
  WrittenPack w = WritePack(f.fd(), {RandomBytes(100, 1)}, false);
  // Preallocated or never-written blocks read as zeros.
  std::vector<uint8_t> zeros(8192, 0);
  ASSERT_EQ(::pwrite(f.fd(), zeros.data(), zeros.size(), static_cast<off_t>(w.locs[0].end())),
            8192);
  auto scan = ScanRecords(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(scan.has_value());
  EXPECT_EQ(scan->blobs.size(), 1u);
  EXPECT_EQ(scan->valid_bytes, w.locs[0].end());
  EXPECT_EQ(scan->stop_reason,
            "record at offset " + std::to_string(w.locs[0].end()) + ": bad magic");
}

TEST(PackFile, ABadFooterChecksumIsDetectedAndTheRecordsStillScan) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p.pack");
  WrittenPack w = WritePack(f.fd(), SampleBlobs(), true);
  const uint64_t footer_at = w.locs.back().end();
  f.Flip(footer_at + 40);  // inside the first footer entry
  auto footer = ReadFooter(f.fd(), f.size(), "pack p");
  ASSERT_FALSE(footer.has_value());
  EXPECT_EQ(footer.error().message(), "pack p: footer: checksum mismatch");
  auto scan = ScanRecords(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(scan.has_value());
  EXPECT_EQ(scan->blobs, w.locs);
  // A damaged trailer magic reads as no trailer at all.
  f.Flip(f.size() - 40);
  EXPECT_EQ(ReadFooter(f.fd(), f.size(), "pack p").error().message(),
            "pack p: no valid trailer (bad magic)");
}

TEST(PackFile, SalvageOfASealedPackSkipsARottenPayloadAndResyncsPastARottenHeader) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p.pack");
  std::vector<std::vector<uint8_t>> blobs;
  for (int i = 0; i < 12; ++i) blobs.push_back(RandomBytes(2000 + 37 * i, 100 + i));
  blobs.push_back(std::vector<uint8_t>(50000, 3));  // zstd
  blobs.push_back({});
  WrittenPack w = WritePack(f.fd(), blobs, true);
  const uint64_t footer_at = w.locs.back().end();
  f.Flip(footer_at + 100);                 // the footer: ReadFooter refuses the pack
  f.Flip(w.locs[3].payload_offset() + 7);  // record 3's payload: its header still checks
  f.Flip(w.locs[8].offset + 30);           // record 8's header (inside the id): no longer checks
  ASSERT_FALSE(ReadFooter(f.fd(), f.size(), "pack p").has_value());
  // The scan of a dead writer's pack stops at record 3, losing everything after it.
  auto scan = ScanRecords(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(scan.has_value());
  EXPECT_EQ(scan->blobs.size(), 3u);
  f.Flip(0);  // the pack header too

  auto found = SalvageRecords(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(found.has_value()) << found.error().message();
  std::vector<BlobLocation> want;
  for (size_t i = 0; i < w.locs.size(); ++i) {
    if (i != 3 && i != 8) want.push_back(w.locs[i]);
  }
  EXPECT_EQ(found->blobs, want);
  EXPECT_EQ(found->damaged_records, 1u);  // record 3, skipped by its length
  EXPECT_TRUE(found->pack_header_damaged);
  // Record 8's header and payload, then the old footer and trailer, searched past.
  EXPECT_EQ(found->resyncs, 2u);
  EXPECT_EQ(found->resynced_bytes, (w.locs[9].offset - w.locs[8].offset) + (f.size() - footer_at));
  for (const BlobLocation& loc : found->blobs) {
    EXPECT_TRUE(ReadBlob(f.fd(), loc, "pack p").has_value());
  }
}

TEST(PackFile, SalvageFindsRecordsAfterGarbageOfAnyLength) {
  testutil::TempDir dir{"bdn_pack_test"};
  std::vector<std::vector<uint8_t>> blobs = {RandomBytes(700, 1), RandomBytes(900, 2)};
  for (uint64_t garbage : {1u, 3u, 63u, 64u, 65u, 4096u, (1u << 20) + 5}) {
    File f(dir.path() / ("g" + std::to_string(garbage)));
    WrittenPack w = WritePack(f.fd(), blobs, false);
    // Garbage that holds the record magic, then two records copied after it.
    std::vector<uint8_t> junk = RandomBytes(garbage, garbage);
    if (garbage >= 4) std::memcpy(junk.data(), "BDNR", 4);
    std::vector<uint8_t> tail(w.locs.back().end() - kPackHeaderBytes);
    ASSERT_EQ(::pread(f.fd(), tail.data(), tail.size(), kPackHeaderBytes),
              static_cast<ssize_t>(tail.size()));
    const uint64_t at = w.locs.back().end();
    ASSERT_EQ(::pwrite(f.fd(), junk.data(), junk.size(), static_cast<off_t>(at)),
              static_cast<ssize_t>(junk.size()));
    ASSERT_EQ(::pwrite(f.fd(), tail.data(), tail.size(), static_cast<off_t>(at + garbage)),
              static_cast<ssize_t>(tail.size()));
    auto found = SalvageRecords(f.fd(), f.size(), "pack g");
    ASSERT_TRUE(found.has_value());
    ASSERT_EQ(found->blobs.size(), 4u) << garbage;
    EXPECT_EQ(found->blobs[2].offset, at + garbage) << garbage;
    EXPECT_EQ(found->blobs[3].id, Digest::Of(blobs[1]));
    EXPECT_EQ(found->resyncs, 1u);
    EXPECT_EQ(found->resynced_bytes, garbage);
  }
}

TEST(PackFile, ACorruptBlobIsReportedNamingTheChunkThePackAndTheOffset) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p.pack");
  WrittenPack w = WritePack(f.fd(), SampleBlobs(), true);
  const BlobLocation& raw = w.locs[3];  // stored as is
  std::vector<uint8_t> damaged = w.blobs[3];
  damaged[10] ^= 0x40;
  f.Flip(raw.payload_offset() + 10);
  auto got = ReadBlob(f.fd(), raw, "pack /s/p.pack");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(got.error().message(),
            "chunk " + raw.id.ToString() + ": digest mismatch (stored bytes hash to " +
                Digest::Of(damaged).ToString() + ") in pack /s/p.pack at offset " +
                std::to_string(raw.offset));
  // A compressed blob whose bytes are damaged.
  const BlobLocation& z = w.locs[2];
  f.Flip(z.payload_offset() + z.stored_bytes / 2);
  got = ReadBlob(f.fd(), z, "pack q");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(got.error().message().starts_with("chunk " + z.id.ToString() + ": "))
      << got.error().message();
  EXPECT_TRUE(got.error().message().ends_with(" in pack q at offset " + std::to_string(z.offset)));
  // A damaged record header.
  const BlobLocation& h = w.locs[0];
  f.Flip(h.offset + 30);
  got = ReadBlob(f.fd(), h, "pack q");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(), "chunk " + h.id.ToString() +
                                       ": damaged record header in pack q at offset 16 (record at "
                                       "offset 16: header check mismatch)");
  // A record cut off by the end of the file.
  ASSERT_EQ(::ftruncate(f.fd(), static_cast<off_t>(w.locs[6].payload_offset() + 5)), 0);
  got = ReadBlob(f.fd(), w.locs[6], "pack q");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(), "chunk " + w.locs[6].id.ToString() +
                                       ": pack q ends inside the record at offset " +
                                       std::to_string(w.locs[6].offset));
}

// Whether every page of [offset, offset + n) of `fd` is in the page cache (mincore over a map).
bool Resident(int fd, uint64_t file_bytes, uint64_t offset, uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  EXPECT_NE(map, MAP_FAILED);
  const uint64_t first = offset / page, last = (offset + n - 1) / page;
  std::vector<unsigned char> in(last + 1);
  EXPECT_EQ(::mincore(map, file_bytes, in.data()), 0);
  ::munmap(map, file_bytes);
  for (uint64_t p = first; p <= last; ++p) {
    if (!(in[p] & 1)) return false;
  }
  return true;
}

// ReadBlobNow: ReadBlob's bytes for records in the page cache; nullopt, never bytes, for a
// record any page of which is only on disk, and for a damaged or cut-off record.
TEST(PackFile, ReadBlobNowReadsOnlyFromThePageCache) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p.pack");
  WrittenPack w = WritePack(f.fd(), SampleBlobs(), true);
  for (size_t i = 0; i < w.blobs.size(); ++i) {
    auto got = ReadBlobNow(f.fd(), w.locs[i]);  // just written: in the page cache
    ASSERT_TRUE(got.has_value()) << i;
    EXPECT_EQ(*got, w.blobs[i]) << i;
  }
  // Written back, then dropped from the page cache.
  ASSERT_EQ(::fdatasync(f.fd()), 0);
  ASSERT_EQ(::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED), 0);
  const BlobLocation& big = w.locs[6];  // 300,000 random bytes: many pages
  const bool resident = Resident(f.fd(), f.size(), big.offset, big.end() - big.offset);
  auto got = ReadBlobNow(f.fd(), big);
  // A file system that keeps every page (tmpfs) answers from memory; any other must decline.
  EXPECT_EQ(got.has_value(), resident);
  if (got) {
    EXPECT_EQ(*got, w.blobs[6]);
  }
  auto slow = ReadBlob(f.fd(), big, "pack p");  // reads it in
  ASSERT_TRUE(slow.has_value());
  got = ReadBlobNow(f.fd(), big);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, w.blobs[6]);
  // Damaged bytes are never returned (ReadBlob reports them).
  f.Flip(w.locs[3].payload_offset() + 10);
  EXPECT_FALSE(ReadBlobNow(f.fd(), w.locs[3]).has_value());
  EXPECT_EQ(ReadBlob(f.fd(), w.locs[3], "pack p").error().code(), StatusCode::kCorruption);
  // Cut off by the end of the file.
  ASSERT_EQ(::ftruncate(f.fd(), static_cast<off_t>(big.payload_offset() + 5)), 0);
  EXPECT_FALSE(ReadBlobNow(f.fd(), big).has_value());
}

TEST(PackFile, AppendAfterAFailedWriteLeavesNoPartialRecord) {
  testutil::TempDir dir{"bdn_pack_test"};
  File f(dir.path() / "p");
  auto w = PackWriter::Start(f.fd(), "pack p");
  ASSERT_TRUE(w.has_value());
  auto a = RandomBytes(100, 1);
  ASSERT_TRUE(w->Append(Digest::Of(a), a.size(), Codec::kNone, a).has_value());
  auto r = w->Append(Digest::Of(a), kMaxBlobBytes + 1, Codec::kZstd, a);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(w->Seal().ok());
  EXPECT_FALSE(w->Append(Digest::Of(a), a.size(), Codec::kNone, a).has_value());
  auto footer = ReadFooter(f.fd(), f.size(), "pack p");
  ASSERT_TRUE(footer.has_value());
  EXPECT_EQ(footer->size(), 1u);
}

TEST(IndexTable, FindsEveryCopyOfEveryBlob) {
  testutil::TempDir dir{"bdn_pack_test"};
  std::vector<IndexedBlob> blobs;
  for (uint64_t i = 0; i < 5000; ++i) {
    auto b = RandomBytes(8, i);
    blobs.push_back({i % 7, {Digest::Of(b), 16 + 100 * i, 8, 8, Codec::kNone}});
  }
  // A second copy of some blobs in another pack, and an exact duplicate entry (dropped).
  for (uint64_t i = 0; i < 5000; i += 100) {
    IndexedBlob copy = blobs[i];
    copy.pack = 99;
    copy.loc.codec = Codec::kZstd;
    copy.loc.stored_bytes = 5;
    blobs.push_back(copy);
  }
  blobs.push_back(blobs[3]);
  auto path = WriteIndexTable(dir.path(), blobs, {0, 1, 2, 3, 4, 5, 6, 99}, true);
  ASSERT_TRUE(path.has_value()) << path.error().message();
  auto t = IndexTable::Open(*path);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ((*t)->size(), 5050u);
  EXPECT_EQ((*t)->packs(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 99}));
  EXPECT_TRUE((*t)->VerifyChecksum().ok());
  for (uint64_t i = 0; i < 5000; ++i) {
    std::vector<IndexedBlob> found;
    (*t)->Find(blobs[i].loc.id, [&](const IndexedBlob& b) {
      found.push_back(b);
      return false;
    });
    ASSERT_EQ(found.size(), i % 100 == 0 ? 2u : 1u) << i;
    EXPECT_EQ(found[0], blobs[i]);
    if (i % 100 == 0) {
      EXPECT_EQ(found[1].pack, 99u);
    }
  }
  bool any =
      (*t)->Find(Digest::Of(std::string_view("absent")), [](const IndexedBlob&) { return true; });
  EXPECT_FALSE(any);
}

TEST(IndexTable, EmptyTableOpens) {
  testutil::TempDir dir{"bdn_pack_test"};
  auto path = WriteIndexTable(dir.path(), {}, {}, false);
  ASSERT_TRUE(path.has_value());
  auto t = IndexTable::Open(*path);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ((*t)->size(), 0u);
  EXPECT_FALSE((*t)->Find(Digest(), [](const IndexedBlob&) { return true; }));
}

TEST(IndexTable, DamageIsCorruption) {
  testutil::TempDir dir{"bdn_pack_test"};
  std::vector<IndexedBlob> blobs = {
      {1, {Digest::Of(std::string_view("a")), 16, 1, 1, Codec::kNone}}};
  auto path = WriteIndexTable(dir.path(), blobs, {1}, false);
  ASSERT_TRUE(path.has_value());
  const uint64_t bytes = fs::file_size(*path);
  int fd = ::open(path->c_str(), O_RDWR);
  uint8_t b;
  ASSERT_EQ(::pread(fd, &b, 1, 9), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, 9), 1);
  auto t = IndexTable::Open(*path);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message(), "index table " + path->string() + ": bad header");
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, 9), 1);
  // An entry byte: the header still opens, the checksum catches it.
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(kIndexHeaderBytes + kIndexFanoutBytes + 40)), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(kIndexHeaderBytes + kIndexFanoutBytes + 40)), 1);
  t = IndexTable::Open(*path);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)->VerifyChecksum().message(),
            "index table " + path->string() + ": checksum mismatch");
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes - 1)), 0);
  ::close(fd);
  t = IndexTable::Open(*path);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message(),
            "index table " + path->string() + ": length does not match its counts");
}

TEST(PackNames, Hex16RoundTrips) {
  EXPECT_EQ(Hex16(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_EQ(ParseHex16Name("0123456789abcdef.pack", ".pack"), 0x0123456789abcdefULL);
  EXPECT_FALSE(ParseHex16Name("0123456789abcdef.open", ".pack"));
  EXPECT_FALSE(ParseHex16Name("0123456789ABCDEF.pack", ".pack"));
  EXPECT_FALSE(ParseHex16Name("123.pack", ".pack"));
}

}  // namespace
}  // namespace bdn::pack
