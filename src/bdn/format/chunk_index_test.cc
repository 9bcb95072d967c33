// Tests for chunk index objects of version 2 (pieces): where a writer cuts, the exact bytes, the
// one loader (ReadFileChunkIndex) over both versions, that an edit rewrites only the pieces
// around it, and every way a crafted index or piece is refused.
#include "bdn/format/chunk_index.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace bdn {
namespace {

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void PutLe(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutDigest(std::string& out, const Digest& d) {
  out.append(reinterpret_cast<const char*>(d.data()), Digest::kSize);
}

// `n` chunks whose ids are BLAKE3 of "<seed>/<i>", lengths 1000 + i % 7000.
std::vector<ChunkRef> Chunks(size_t n, const std::string& seed = "c") {
  std::vector<ChunkRef> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(
        {Digest::Of(seed + "/" + std::to_string(i)), static_cast<uint32_t>(1000 + i % 7000)});
  }
  return out;
}

uint64_t Bytes(std::span<const ChunkRef> chunks) {
  uint64_t n = 0;
  for (const ChunkRef& c : chunks) n += c.size_bytes;
  return n;
}

Entry IndexedFile(const std::string& path, uint64_t size, const Digest& index) {
  Entry e;
  e.path = path;
  e.kind = EntryKind::kFile;
  e.mode = 0644;
  e.size_bytes = size;
  e.layout = FileLayout::kIndexed;
  e.digest = Digest::Of(std::string_view("whole file"));
  e.index = index;
  return e;
}

// Blobs by id, served to ReadFileChunkIndex; records every fetch.
struct Blobs {
  std::map<Digest, std::string> by_id;
  std::vector<std::pair<IndexPart, std::vector<Digest>>> calls;

  Digest Add(const std::string& blob) {
    Digest id = Digest::Of(blob);
    by_id[id] = blob;
    return id;
  }
  // Stores a file's objects as a writer does; returns the root's id.
  Digest AddFile(std::span<const ChunkRef> chunks) {
    FileIndexBlobs b = EncodeFileIndex(chunks);
    for (const auto& [id, blob] : b.pieces) by_id[id] = blob;
    return Add(b.root);
  }
  IndexFetch Fetch() {
    return [this](IndexPart part, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
      calls.push_back({part, {ids.begin(), ids.end()}});
      std::vector<IndexBlob> out;
      for (const Digest& id : ids) {
        auto it = by_id.find(id);
        if (it == by_id.end())
          return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
        out.push_back(
            std::make_shared<const std::vector<uint8_t>>(it->second.begin(), it->second.end()));
      }
      return out;
    };
  }
};

// The piece ids of a version-2 root.
std::vector<Digest> PieceIds(const std::string& root) {
  auto decoded = DecodeChunkIndexObject(AsBytes(root));
  EXPECT_TRUE(decoded.has_value());
  std::vector<Digest> out;
  if (decoded) {
    for (const ChunkIndexPiece& p : decoded->pieces) out.push_back(p.id);
  }
  return out;
}

TEST(PieceEnds, AListOfAtMost1024ChunksIsOnePiece) {
  for (size_t n : {0, 1, 2, 1000, 1024}) {
    EXPECT_EQ(PieceEnds(Chunks(n)), std::vector<size_t>{n}) << n;
  }
  FileIndexBlobs b = EncodeFileIndex(Chunks(1024));
  EXPECT_EQ(b.root, EncodeChunkIndex(Chunks(1024)));  // the version-1 object, as before pieces
  EXPECT_TRUE(b.pieces.empty());
}

bool Qualifies(const ChunkRef& c) { return (c.id.data()[31] & 0x3f) == 0; }

TEST(PieceEnds, CutsAfterAQualifyingChunkOnceAPieceHas16) {
  const std::vector<ChunkRef> chunks = Chunks(20000);
  const std::vector<size_t> ends = PieceEnds(chunks);
  ASSERT_GT(ends.size(), 1u);
  EXPECT_EQ(ends.back(), chunks.size());
  // The rule, restated: every end but the last is at a chunk whose id's last byte has its low 6
  // bits clear and makes a piece of 16 to 1024 chunks, and no earlier chunk of the piece could
  // have ended it.
  size_t start = 0;
  for (size_t i = 0; i + 1 < ends.size(); ++i) {
    const size_t end = ends[i];
    ASSERT_GE(end - start, kPieceMinChunks);
    ASSERT_LE(end - start, kPieceMaxChunks);
    if (end - start < kPieceMaxChunks) {
      EXPECT_TRUE(Qualifies(chunks[end - 1])) << "piece " << i;
    }
    for (size_t k = start + kPieceMinChunks - 1; k + 1 < end; ++k) {
      EXPECT_FALSE(Qualifies(chunks[k])) << "chunk " << k << " should have ended piece " << i;
    }
    start = end;
  }
  // One chunk in 64 qualifies: pieces average 16 + 64 chunks.
  EXPECT_GT(ends.size(), 20000u / 160);
  EXPECT_LT(ends.size(), 20000u / 40);
}

TEST(PieceEnds, A1024ChunkPieceEndsWithoutAQualifyingChunk) {
  // One chunk id repeated (a file of identical chunks) that does not qualify.
  std::vector<ChunkRef> same(3000, {Digest::Of(std::string_view("x")), 1});
  ASSERT_FALSE(Qualifies(same[0]));
  EXPECT_EQ(PieceEnds(same), (std::vector<size_t>{1024, 2048, 3000}));
  // The two full pieces are one blob: stored once, listed twice.
  FileIndexBlobs b = EncodeFileIndex(same);
  EXPECT_EQ(b.pieces.size(), 2u);
  EXPECT_EQ(PieceIds(b.root).size(), 3u);
}

TEST(EncodeFileIndex, VersionTwoBytesAreThePiecesInOrder) {
  const std::vector<ChunkRef> chunks = Chunks(3000);
  const std::vector<size_t> ends = PieceEnds(chunks);
  FileIndexBlobs b = EncodeFileIndex(chunks);
  std::string expected = "BDNI";
  PutLe(expected, 2, 4);
  PutLe(expected, ends.size(), 8);
  ASSERT_EQ(b.pieces.size(), ends.size());  // distinct chunks: distinct pieces
  size_t start = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    std::span<const ChunkRef> run =
        std::span<const ChunkRef>(chunks).subspan(start, ends[i] - start);
    const std::string piece = EncodeChunkIndex(run);
    PutDigest(expected, Digest::Of(piece));
    PutLe(expected, run.size(), 8);
    PutLe(expected, Bytes(run), 8);
    EXPECT_EQ(b.pieces[i].first, Digest::Of(piece));
    EXPECT_EQ(b.pieces[i].second, piece);
    start = ends[i];
  }
  EXPECT_EQ(b.root, expected);
  EXPECT_EQ(b.root.size(), 16 + 48 * ends.size());
  // Pinned: the same list gives these bytes on every machine (a change breaks every digest).
  EXPECT_EQ(Digest::Of(b.root).ToString(),
            "b3:35628f1fa3e4a6ef6e9334bd11148ea2180c60da957170fe8959a15c7a5dbf46");
}

TEST(ReadFileChunkIndex, VersionTwoGivesTheWholeListAndNamesEveryBlob) {
  const std::vector<ChunkRef> chunks = Chunks(20000);
  Blobs blobs;
  const Digest root = blobs.AddFile(chunks);
  Entry e = IndexedFile("big", Bytes(chunks), root);
  auto index = ReadFileChunkIndex(ChunkerParams::Default(), e, blobs.Fetch());
  ASSERT_TRUE(index.has_value()) << index.error().message();
  EXPECT_EQ(index->Flatten(), chunks);
  EXPECT_EQ(index->chunk_count, chunks.size());
  const std::vector<Digest> pieces = PieceIds(blobs.by_id[root]);
  EXPECT_EQ(index->runs.size(), pieces.size());
  std::vector<Digest> want{root};
  want.insert(want.end(), pieces.begin(), pieces.end());
  EXPECT_EQ(index->blobs, want);
  // The root, then the pieces in batches of at most 64.
  ASSERT_EQ(blobs.calls.size(), 1 + (pieces.size() + 63) / 64);
  EXPECT_EQ(blobs.calls[0].first, IndexPart::kRoot);
  EXPECT_EQ(blobs.calls[0].second, std::vector<Digest>{root});
  size_t asked = 0;
  for (size_t i = 1; i < blobs.calls.size(); ++i) {
    EXPECT_EQ(blobs.calls[i].first, IndexPart::kPieces);
    EXPECT_LE(blobs.calls[i].second.size(), kPieceFetchBatch);
    asked += blobs.calls[i].second.size();
  }
  EXPECT_EQ(asked, pieces.size());
  EXPECT_EQ(FileChunkList(ChunkerParams::Default(), e, blobs.Fetch()).value(), chunks);
}

TEST(ReadFileChunkIndex, APieceListedTwiceIsFetchedOnceAndSharesItsRun) {
  std::vector<ChunkRef> same(3000, {Digest::Of(std::string_view("x")), 7});
  Blobs blobs;
  const Digest root = blobs.AddFile(same);
  auto index =
      ReadFileChunkIndex(ChunkerParams::Default(), IndexedFile("z", 21000, root), blobs.Fetch());
  ASSERT_TRUE(index.has_value()) << index.error().message();
  EXPECT_EQ(index->chunk_count, 3000u);
  ASSERT_EQ(index->runs.size(), 3u);
  EXPECT_EQ(index->runs[0].get(), index->runs[1].get());
  EXPECT_EQ(index->blobs.size(), 3u);  // the root and two distinct pieces
  ASSERT_EQ(blobs.calls.size(), 2u);
  EXPECT_EQ(blobs.calls[1].second.size(), 2u);
  EXPECT_EQ(index->Flatten(), same);
}

// The point of pieces: an insertion near the start of a large file changes one or two pieces
// and the root; every other piece is the same blob as before.
TEST(EncodeFileIndex, AnInsertionRewritesOnlyThePiecesAroundIt) {
  const std::vector<ChunkRef> before = Chunks(14400);
  for (size_t at : {0, 1, 300, 7000, 14399}) {
    std::vector<ChunkRef> after = before;
    // FastCDC re-cuts the chunk at an insertion into one or two new chunks.
    after[at] = {Digest::Of("new a " + std::to_string(at)), 5000};
    after.insert(after.begin() + at + 1, {Digest::Of("new b " + std::to_string(at)), 4099});
    FileIndexBlobs old_blobs = EncodeFileIndex(before), new_blobs = EncodeFileIndex(after);
    std::set<Digest> old_ids;
    for (const auto& [id, blob] : old_blobs.pieces) old_ids.insert(id);
    uint64_t new_bytes = new_blobs.root.size();
    size_t new_pieces = 0;
    for (const auto& [id, blob] : new_blobs.pieces) {
      if (old_ids.contains(id)) continue;
      ++new_pieces;
      new_bytes += blob.size();
    }
    EXPECT_GE(new_pieces, 1u) << at;
    EXPECT_LE(new_pieces, 2u) << at;
    // Against 518,416 bytes for the whole list in one object.
    EXPECT_LT(new_bytes, 40'000u) << at;
    EXPECT_EQ(EncodeChunkIndex(before).size(), 518'416u);
  }
}

TEST(ReadFileChunkIndex, RefusesPiecesThatDisagreeWithTheIndexOrTheFile) {
  const ChunkerParams p = ChunkerParams::Default();
  const std::vector<ChunkRef> first = Chunks(100, "a"), second = Chunks(50, "b");
  Blobs blobs;
  const std::string a = EncodeChunkIndex(first), b = EncodeChunkIndex(second);
  const Digest ida = blobs.Add(a), idb = blobs.Add(b);
  auto table = [&](std::vector<ChunkIndexPiece> pieces) {
    return blobs.Add(EncodePieceTable(pieces));
  };
  const uint64_t size = Bytes(first) + Bytes(second);
  auto expect = [&](const Digest& root, uint64_t file_size, const std::string& message,
                    StatusCode code = StatusCode::kCorruption) {
    auto r = ReadFileChunkIndex(p, IndexedFile("f", file_size, root), blobs.Fetch());
    ASSERT_FALSE(r.has_value()) << message;
    EXPECT_EQ(r.error().code(), code);
    EXPECT_EQ(r.error().message(), message);
  };
  const Digest good = table({{ida, 100, Bytes(first)}, {idb, 50, Bytes(second)}});
  ASSERT_TRUE(ReadFileChunkIndex(p, IndexedFile("f", size, good), blobs.Fetch()).has_value());

  expect(good, size + 1,
         "file \"f\": chunk index pieces add up to " + std::to_string(size) +
             " bytes, the file has " + std::to_string(size + 1));
  expect(table({{ida, 100, UINT64_MAX}, {idb, 50, 2}}), 5,
         "file \"f\": chunk index pieces add up to more than 2^64-1 bytes, the file has 5");
  // Sizes moved from one piece to the other: the total is right, each piece is not.
  expect(table({{ida, 100, Bytes(first) + 1}, {idb, 50, Bytes(second) - 1}}), size,
         "file \"f\": chunk index piece " + ida.ToString() + ": chunks add up to " +
             std::to_string(Bytes(first)) + " bytes, the chunk index says " +
             std::to_string(Bytes(first) + 1));
  expect(table({{ida, 99, Bytes(first)}, {idb, 50, Bytes(second)}}), size,
         "file \"f\": chunk index piece " + ida.ToString() +
             ": lists 100 chunks, the chunk index says 99");
  expect(table({{ida, 100, Bytes(first)}, {ida, 99, Bytes(first)}}), 2 * Bytes(first),
         "file \"f\": chunk index piece " + ida.ToString() + " is listed as 100 chunks of " +
             std::to_string(Bytes(first)) + " bytes and as 99 chunks of " +
             std::to_string(Bytes(first)) + " bytes");
  // A piece that is itself a list of pieces: pieces do not nest.
  const Digest nested = table({{ida, 100, Bytes(first)}});
  expect(
      table({{nested, 100, Bytes(first)}, {idb, 50, Bytes(second)}}), size,
      "file \"f\": chunk index piece " + nested.ToString() +
          ": version 2 (a list of pieces) where a list of chunks (version 1) belongs, at byte 8");
  // A piece that does not decode.
  const Digest junk = blobs.Add(std::string("BDNI\x07\0\0\0", 8));
  expect(table({{junk, 100, Bytes(first)}, {idb, 50, Bytes(second)}}), size,
         "file \"f\": chunk index piece " + junk.ToString() +
             ": unsupported format version 7, at byte 8");
  // A chunk in a piece longer than the chunker allows.
  const std::vector<ChunkRef> overlong{{first[0].id, p.max_bytes + 1}};
  const Digest idl = blobs.Add(EncodeChunkIndex(overlong));
  expect(table({{idl, 1, p.max_bytes + 1}, {idb, 50, Bytes(second)}}),
         p.max_bytes + 1 + Bytes(second),
         "file \"f\": chunk " + first[0].id.ToString() + " of " + std::to_string(p.max_bytes + 1) +
             " bytes is longer than the chunker maximum " + std::to_string(p.max_bytes));
  // A piece the store lacks: the fetch's error, as it is.
  const Digest absent = Digest::Of(std::string_view("absent"));
  expect(table({{ida, 100, Bytes(first)}, {absent, 50, Bytes(second)}}), size,
         "chunk " + absent.ToString() + ": not in store", StatusCode::kNotFound);
}

TEST(ReadFileChunkIndex, ALieAboutSizesCostsNoPieceFetch) {
  Blobs blobs;
  const Digest ida = blobs.Add(EncodeChunkIndex(Chunks(10)));
  const Digest root =
      blobs.Add(EncodePieceTable(std::vector<ChunkIndexPiece>{{ida, 10, 1}, {ida, 10, 1}}));
  auto r = ReadFileChunkIndex(ChunkerParams::Default(), IndexedFile("f", 3, root), blobs.Fetch());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(),
            "file \"f\": chunk index pieces add up to 2 bytes, the file has 3");
  EXPECT_EQ(blobs.calls.size(), 1u);  // the root only
}

TEST(ReadFileChunkIndex, AFetchThatAnswersTheWrongNumberOfBlobsIsInternal) {
  Entry e = IndexedFile("f", 10, Digest::Of(std::string_view("i")));
  auto r =
      ReadFileChunkIndex(ChunkerParams::Default(), e,
                         [](IndexPart, std::span<const Digest>) -> Result<std::vector<IndexBlob>> {
                           return std::vector<IndexBlob>{};
                         });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
  EXPECT_EQ(r.error().message(), "chunk index fetch: asked for 1 blobs, got 0 (or a null one)");
}

TEST(ChunkIndexObject, VersionTwoRoundTripsAndRefusesMalformedInput) {
  const std::vector<ChunkIndexPiece> pieces{{Digest::Of(std::string_view("p1")), 64, 1 << 20},
                                            {Digest::Of(std::string_view("p2")), 1024, 7}};
  const std::string good = EncodePieceTable(pieces);
  auto back = DecodeChunkIndexObject(AsBytes(good));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back->version, 2u);
  EXPECT_EQ(back->pieces, pieces);
  EXPECT_TRUE(back->chunks.empty());
  // Version 1 through the same decoder.
  auto v1 = DecodeChunkIndexObject(AsBytes(EncodeChunkIndex(Chunks(3))));
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->version, 1u);
  EXPECT_EQ(v1->chunks, Chunks(3));

  auto expect = [](const std::string& bytes, const std::string& message) {
    auto r = DecodeChunkIndexObject(AsBytes(bytes));
    ASSERT_FALSE(r.has_value()) << message;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
    EXPECT_EQ(r.error().message(), message);
  };
  for (size_t n = 16; n < good.size(); ++n) {
    expect(good.substr(0, n), "chunk index: length does not match count, at byte 16");
  }
  expect(good + "x", "chunk index: length does not match count, at byte 16");
  std::string b = good;
  for (int i = 8; i < 16; ++i) b[i] = '\xff';
  expect(b, "chunk index: length does not match count, at byte 16");
  b = good;
  for (int i = 8; i < 16; ++i) b[i] = 0;
  expect(b.substr(0, 16), "chunk index: no pieces, at byte 16");
  // A piece's chunk count (bytes 48..55 of the first entry's): 0, then 1025.
  b = good;
  for (int i = 48; i < 56; ++i) b[i] = 0;
  expect(b, "chunk index: piece of 0 chunks (1 to 1024 allowed), at byte 56");
  b[48] = 1;
  b[49] = 0x04;  // 1025
  expect(b, "chunk index: piece of 1025 chunks (1 to 1024 allowed), at byte 56");
}

}  // namespace
}  // namespace bdn
