// Tests for the FastCDC chunker: size limits, determinism, resynchronisation after an insertion,
// independence from buffering, and parameter validation.
#include "bdn/chunk/chunker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "bdn/base/units.h"
#include "bdn/digest/digest.h"

namespace bdn {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    for (int k = 0; k < 8; ++k) v[i + k] = static_cast<uint8_t>(x >> (8 * k));
  }
  for (; i < n; ++i) v[i] = static_cast<uint8_t>(rng());
  return v;
}

// Chunk lengths of a whole in-memory input, calling NextCut with at_eof = true.
std::vector<size_t> ChunkAll(const Chunker& c, std::span<const uint8_t> data) {
  std::vector<size_t> lengths;
  size_t off = 0;
  while (off < data.size()) {
    size_t n = c.NextCut(data.subspan(off), /*at_eof=*/true);
    EXPECT_GT(n, 0u) << "NextCut returned 0 at offset " << off << " with at_eof";
    if (n == 0) break;
    lengths.push_back(n);
    off += n;
  }
  return lengths;
}

// Chunk lengths when the input arrives in pieces of the sizes `piece_sizes` (cycled), the way a
// streaming reader would feed it: leftovers are carried and at_eof is set only at the end.
std::vector<size_t> ChunkStreaming(const Chunker& c, std::span<const uint8_t> data,
                                   const std::vector<size_t>& piece_sizes) {
  std::vector<size_t> lengths;
  std::vector<uint8_t> pending;
  size_t off = 0;
  size_t piece = 0;
  while (off < data.size()) {
    size_t n = std::min(piece_sizes[piece++ % piece_sizes.size()], data.size() - off);
    pending.insert(pending.end(), data.begin() + off, data.begin() + off + n);
    off += n;
    while (true) {
      size_t cut = c.NextCut(pending, /*at_eof=*/false);
      if (cut == 0) break;
      EXPECT_LE(cut, pending.size());
      lengths.push_back(cut);
      pending.erase(pending.begin(), pending.begin() + cut);
    }
    // "Need more input" is only allowed while less than max_bytes is buffered.
    EXPECT_LT(pending.size(), c.params().max_bytes);
  }
  while (!pending.empty()) {
    size_t cut = c.NextCut(pending, /*at_eof=*/true);
    EXPECT_GT(cut, 0u);
    if (cut == 0) break;
    lengths.push_back(cut);
    pending.erase(pending.begin(), pending.begin() + cut);
  }
  return lengths;
}

// End offsets of the chunks.
std::vector<size_t> Boundaries(const std::vector<size_t>& lengths) {
  std::vector<size_t> out;
  size_t end = 0;
  for (size_t n : lengths) out.push_back(end += n);
  return out;
}

size_t Sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}

// Chunk lengths of RandomBytes(2 MiB, 42) with the default parameters.
const std::vector<size_t> kPinnedLengths = {
    73894, 88125, 78063,  81286, 43517, 42422, 69543, 78342, 73563, 28816,
    68087, 79374, 65614,  67574, 44802, 93431, 17601, 80754, 84411, 111983,
    80794, 99798, 134171, 74742, 90481, 19428, 68073, 69994, 68198, 20271,
};

TEST(ChunkerParams, DefaultsAreValidAndDocumented) {
  ChunkerParams p = ChunkerParams::Default();
  EXPECT_EQ(p.min_bytes, 16 * kKiB);
  EXPECT_EQ(p.avg_bytes, 64 * kKiB);
  EXPECT_EQ(p.max_bytes, 256 * kKiB);
  EXPECT_TRUE(p.Validate().ok()) << p.Validate().message();
  EXPECT_EQ(p.ToString(), "fastcdc2020 min=16384 avg=65536 max=262144");
}

TEST(ChunkerParams, ValidateAcceptsGoodCombinations) {
  for (ChunkerParams p : {ChunkerParams{64, 256, 257}, ChunkerParams{2048, 8192, 65536},
                          ChunkerParams{255, 256, 1024},
                          ChunkerParams{4 * 1024 * 1024, 8 * 1024 * 1024, 16 * 1024 * 1024}}) {
    EXPECT_TRUE(p.Validate().ok()) << p.ToString() << ": " << p.Validate().message();
  }
}

TEST(ChunkerParams, ValidateRejectsBadCombinations) {
  const std::string need = ": need 64 <= min < avg < max <= 16 MiB, avg a power of two";
  struct Case {
    ChunkerParams p;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{63, 1024, 4096}, "chunker parameters fastcdc2020 min=63 avg=1024 max=4096" + need},
      {{0, 1024, 4096}, "chunker parameters fastcdc2020 min=0 avg=1024 max=4096" + need},
      {{1024, 1024, 4096}, "chunker parameters fastcdc2020 min=1024 avg=1024 max=4096" + need},
      {{2048, 1024, 4096}, "chunker parameters fastcdc2020 min=2048 avg=1024 max=4096" + need},
      {{256, 1024, 1024}, "chunker parameters fastcdc2020 min=256 avg=1024 max=1024" + need},
      {{256, 1024, 512}, "chunker parameters fastcdc2020 min=256 avg=1024 max=512" + need},
      {{256, 1000, 4096}, "chunker parameters fastcdc2020 min=256 avg=1000 max=4096" + need},
      {{256, 1024, 16 * 1024 * 1024 + 1},
       "chunker parameters fastcdc2020 min=256 avg=1024 max=16777217" + need},
      {{64, 128, 4096},
       "chunker parameters fastcdc2020 min=64 avg=128 max=4096: avg must be >= 256"},
  };
  for (const Case& c : cases) {
    Status s = c.p.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.p.ToString();
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(Chunker, GearTableIsBlake3OfEachByte) {
  const auto& gear = Chunker::GearTable();
  // BLAKE3 of the one byte 0x00 is 2d3adedff11b61f1... (the official vector for length 1).
  EXPECT_EQ(gear[0], 0xf1611bf1dfde3a2dULL);
  for (int i = 0; i < 256; ++i) {
    uint8_t b = static_cast<uint8_t>(i);
    Digest d = Digest::Of(std::span<const uint8_t>(&b, 1));
    uint64_t want = 0;
    for (int k = 0; k < 8; ++k) want |= uint64_t{d.data()[k]} << (8 * k);
    EXPECT_EQ(gear[i], want) << "GEAR[" << i << "]";
  }
  std::set<uint64_t> distinct(gear.begin(), gear.end());
  EXPECT_EQ(distinct.size(), 256u);
  EXPECT_EQ(&Chunker::GearTable(), &gear);
}

TEST(Chunker, EmptyInputGivesZero) {
  Chunker c(ChunkerParams::Default());
  EXPECT_EQ(c.NextCut({}, true), 0u);
  EXPECT_EQ(c.NextCut({}, false), 0u);
  EXPECT_TRUE(ChunkAll(c, {}).empty());
}

TEST(Chunker, ShortTailAtEofIsOneChunk) {
  Chunker c(ChunkerParams::Default());
  std::vector<uint8_t> data = RandomBytes(1000, 1);
  EXPECT_EQ(c.NextCut(data, true), 1000u);
  // Without EOF the chunker cannot know whether more bytes follow.
  EXPECT_EQ(c.NextCut(data, false), 0u);
  std::vector<uint8_t> exactly_min = RandomBytes(c.params().min_bytes, 2);
  EXPECT_EQ(c.NextCut(exactly_min, true), exactly_min.size());
  EXPECT_EQ(c.NextCut(exactly_min, false), 0u);
}

TEST(Chunker, MinAndMaxRespectedOnRandomData) {
  for (ChunkerParams p :
       {ChunkerParams::Default(), ChunkerParams{64, 256, 1024}, ChunkerParams{2048, 8192, 32768}}) {
    SCOPED_TRACE(p.ToString());
    Chunker c(p);
    std::vector<uint8_t> data = RandomBytes(8 * kMiB + 12345, 42);
    std::vector<size_t> lengths = ChunkAll(c, data);
    ASSERT_GT(lengths.size(), 2u);
    EXPECT_EQ(Sum(lengths), data.size());
    for (size_t i = 0; i + 1 < lengths.size(); ++i) {
      EXPECT_GE(lengths[i], p.min_bytes) << "chunk " << i;
      EXPECT_LE(lengths[i], p.max_bytes) << "chunk " << i;
    }
    EXPECT_GE(lengths.back(), 1u);
    EXPECT_LE(lengths.back(), p.max_bytes);
  }
}

TEST(Chunker, AllZeroInputGivesMaxSizeChunks) {
  // The gear hash of a zero run settles to a constant with high bits set, so no cut is ever
  // found and every chunk is cut at max_bytes; the last one is the remainder.
  Chunker c(ChunkerParams::Default());
  std::vector<uint8_t> zeros(10 * kMiB, 0);
  std::vector<size_t> lengths = ChunkAll(c, zeros);
  ASSERT_EQ(lengths.size(), 40u);
  for (size_t n : lengths) EXPECT_EQ(n, 256 * kKiB);

  std::vector<uint8_t> uneven(10 * kMiB + 100, 0);
  lengths = ChunkAll(c, uneven);
  ASSERT_EQ(lengths.size(), 41u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(lengths[i], 256 * kKiB);
  EXPECT_EQ(lengths[40], 100u);
}

// The cut rule exactly as docs/format.md writes it, with its own gear table and masks: a second
// implementation to hold the optimised one to.
size_t ReferenceCut(std::span<const uint8_t> p, const ChunkerParams& params) {
  uint64_t gear[256];
  for (int i = 0; i < 256; ++i) {
    uint8_t b = static_cast<uint8_t>(i);
    Digest d = Digest::Of(std::span<const uint8_t>(&b, 1));
    gear[i] = 0;
    for (int k = 0; k < 8; ++k) gear[i] |= uint64_t{d.data()[k]} << (8 * k);
  }
  int bits = 0;
  while ((uint64_t{1} << bits) < params.avg_bytes) ++bits;
  const uint64_t mask_s = ~uint64_t{0} << (64 - (bits + 2));
  const uint64_t mask_l = ~uint64_t{0} << (64 - (bits - 2));
  size_t n = p.size();
  if (n <= params.min_bytes) return n;
  if (n > params.max_bytes) n = params.max_bytes;
  const size_t normal = std::min<size_t>(params.avg_bytes, n);
  uint64_t h = 0;
  for (size_t i = params.min_bytes; i < normal; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_s) == 0) return i + 1;
  }
  for (size_t i = normal; i < n; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_l) == 0) return i + 1;
  }
  return n;
}

TEST(Chunker, MatchesTheReferenceCutRule) {
  for (ChunkerParams p : {ChunkerParams::Default(), ChunkerParams{64, 256, 1024},
                          ChunkerParams{2048, 8192, 32768}, ChunkerParams{1000, 4096, 5000}}) {
    SCOPED_TRACE(p.ToString());
    Chunker c(p);
    std::vector<uint8_t> data = RandomBytes(3 * kMiB + 17, 2024);
    std::vector<size_t> want;
    for (size_t off = 0; off < data.size();) {
      size_t n = ReferenceCut(std::span<const uint8_t>(data).subspan(off), p);
      want.push_back(n);
      off += n;
    }
    EXPECT_EQ(ChunkAll(c, data), want);
  }
}

TEST(Chunker, DefaultBoundariesArePinned) {
  // Chunk ids, and so version digests, depend on these cuts: a change here is a format change.
  Chunker c(ChunkerParams::Default());
  std::vector<size_t> lengths = ChunkAll(c, RandomBytes(2 * kMiB, 42));
  EXPECT_EQ(lengths, kPinnedLengths);
}

TEST(Chunker, IsDeterministic) {
  Chunker a(ChunkerParams::Default());
  Chunker b(ChunkerParams::Default());
  std::vector<uint8_t> data = RandomBytes(4 * kMiB, 9);
  EXPECT_EQ(ChunkAll(a, data), ChunkAll(b, data));
}

TEST(Chunker, MeanChunkSizeOnRandomDataIsBetweenAvgAnd2Avg) {
  for (ChunkerParams p : {ChunkerParams::Default(), ChunkerParams{2048, 8192, 32768}}) {
    Chunker c(p);
    std::vector<uint8_t> data = RandomBytes(32 * kMiB, 77);
    std::vector<size_t> lengths = ChunkAll(c, data);
    double mean = static_cast<double>(data.size()) / static_cast<double>(lengths.size());
    EXPECT_GE(mean, p.avg_bytes) << p.ToString();
    EXPECT_LE(mean, 2.0 * p.avg_bytes) << p.ToString();
  }
}

TEST(Chunker, StreamingInAnyBufferSizesGivesTheSameCuts) {
  Chunker c(ChunkerParams::Default());
  std::vector<uint8_t> data = RandomBytes(6 * kMiB + 777, 5);
  const std::vector<size_t> whole = ChunkAll(c, data);
  const std::vector<std::vector<size_t>> patterns = {
      {1 * kMiB},   {64 * kKiB},      {4096},      {100000, 1, 7, 300000},
      {256 * kKiB}, {256 * kKiB + 1}, {13, 65536}, {8 * kMiB},
  };
  for (const auto& pattern : patterns) {
    SCOPED_TRACE("first piece " + std::to_string(pattern[0]));
    EXPECT_EQ(ChunkStreaming(c, data, pattern), whole);
  }
  // Random piece sizes.
  std::mt19937 rng(3);
  std::vector<size_t> random_pieces;
  for (int i = 0; i < 1000; ++i) random_pieces.push_back(1 + rng() % 200000);
  EXPECT_EQ(ChunkStreaming(c, data, random_pieces), whole);

  // The same holds for an all-zero input, where every cut is a max_bytes cut.
  std::vector<uint8_t> zeros(2 * kMiB + 5, 0);
  EXPECT_EQ(ChunkStreaming(c, zeros, {70000}), ChunkAll(c, zeros));
}

TEST(Chunker, NeedMoreInputUntilMaxBytesAreBuffered) {
  Chunker c(ChunkerParams::Default());
  std::vector<uint8_t> zeros(c.params().max_bytes, 0);
  std::span<const uint8_t> all(zeros);
  EXPECT_EQ(c.NextCut(all.first(c.params().max_bytes - 1), false), 0u);
  EXPECT_EQ(c.NextCut(all, false), c.params().max_bytes);
}

// Boundary offsets of `lengths` as a set of chunk contents, for counting new chunks.
std::set<Digest> ChunkDigests(std::span<const uint8_t> data, const std::vector<size_t>& lengths) {
  std::set<Digest> out;
  size_t off = 0;
  for (size_t n : lengths) {
    out.insert(Digest::Of(data.subspan(off, n)));
    off += n;
  }
  return out;
}

TEST(Chunker, BoundariesResynchroniseAfterAnInsertion) {
  // FastCDC's cut decision at a byte depends only on the 64 bytes before it and on the offset
  // from the chunk start, so after an insertion the boundaries before the insertion are
  // unchanged, and once one boundary after it coincides with an old (shifted) one, every later
  // boundary does. How soon that happens is a matter of probability: usually within the next
  // chunk, occasionally (normalisation shifts the mask with the chunk offset) several chunks
  // later. Checked exactly per trial where it is a property, and as a distribution otherwise.
  const ChunkerParams p = ChunkerParams::Default();
  Chunker c(p);
  const std::vector<size_t> insert_sizes = {1, 2, 3, 7, 31, 64, 100, 513, 1000, 4096};
  int trials = 0;
  int resynced_within_one_max = 0;
  int at_most_three_new_chunks = 0;
  size_t worst_new_chunks = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::vector<uint8_t> data = RandomBytes(8 * kMiB, 1000 + seed);
    const std::vector<size_t> old_lengths = ChunkAll(c, data);
    const std::vector<size_t> old_bounds = Boundaries(old_lengths);
    const std::set<Digest> old_chunks = ChunkDigests(data, old_lengths);
    std::mt19937_64 rng(seed);
    for (size_t insert : insert_sizes) {
      ++trials;
      const size_t at = kMiB + rng() % (5 * kMiB);
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(insert) +
                   " bytes inserted at " + std::to_string(at));
      std::vector<uint8_t> edited(data.begin(), data.begin() + at);
      std::vector<uint8_t> extra = RandomBytes(insert, rng());
      edited.insert(edited.end(), extra.begin(), extra.end());
      edited.insert(edited.end(), data.begin() + at, data.end());
      const std::vector<size_t> new_lengths = ChunkAll(c, edited);
      const std::vector<size_t> new_bounds = Boundaries(new_lengths);
      ASSERT_EQ(Sum(new_lengths), edited.size());

      // Old boundaries as they sit in the edited input; those that ended before the insertion
      // point (the unaffected prefix) must all still be there.
      std::set<size_t> shifted;
      for (size_t b : old_bounds) {
        if (b <= at) {
          EXPECT_TRUE(std::binary_search(new_bounds.begin(), new_bounds.end(), b))
              << "boundary " << b << " before the insertion moved";
        }
        shifted.insert(b < at ? b : b + insert);
      }
      // The first new boundary after the inserted bytes that is also an old one.
      const size_t insert_end = at + insert;
      size_t resync = 0;
      for (size_t b : new_bounds) {
        if (b > insert_end && shifted.contains(b)) {
          resync = b;
          break;
        }
      }
      ASSERT_NE(resync, 0u) << "boundaries never resynchronised";
      // From the resync point on, the two lists are the same (shifted by the insert length).
      std::vector<size_t> new_tail, old_tail;
      for (size_t b : new_bounds) {
        if (b >= resync) new_tail.push_back(b);
      }
      for (size_t b : shifted) {
        if (b >= resync) old_tail.push_back(b);
      }
      EXPECT_EQ(new_tail, old_tail);

      size_t new_chunks = 0;
      for (const Digest& d : ChunkDigests(edited, new_lengths)) {
        if (!old_chunks.contains(d)) ++new_chunks;
      }
      EXPECT_GE(new_chunks, 1u);  // the chunk holding the inserted bytes is new
      worst_new_chunks = std::max(worst_new_chunks, new_chunks);
      if (resync <= insert_end + p.max_bytes) ++resynced_within_one_max;
      if (new_chunks <= 3) ++at_most_three_new_chunks;
    }
  }
  RecordProperty("trials", trials);
  RecordProperty("resynced_within_one_max", resynced_within_one_max);
  RecordProperty("at_most_three_new_chunks", at_most_three_new_chunks);
  RecordProperty("worst_new_chunks", static_cast<int>(worst_new_chunks));
  // Fixed seeds make these counts exact; the bounds leave room for the rare slow resync.
  EXPECT_GE(resynced_within_one_max * 10, trials * 9)
      << resynced_within_one_max << " of " << trials << " resynchronised within max_bytes";
  EXPECT_GE(at_most_three_new_chunks * 10, trials * 9)
      << at_most_three_new_chunks << " of " << trials << " changed at most 3 chunks";
  EXPECT_LE(worst_new_chunks, 10u);
}

}  // namespace
}  // namespace bdn
