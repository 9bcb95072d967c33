// Large files' chunk indexes in pieces (docs/format.md, "Chunk index object", version 2), end to
// end through the volume operations: a push writes them deterministically, an insertion stores
// only the pieces around it, every reader (VersionView, pull, cat, verify, diff, the commit
// check, GC's CollectVersionBlobs) reads them through the one loader, a missing or damaged piece
// is named, and a large file with a version-1 index (written before pieces) still reads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bdn/format/chunk_index.h"
#include "bdn/testing/test_util.h"
#include "bdn/volume/compare.h"
#include "bdn/volume/pull.h"
#include "bdn/volume/push.h"
#include "bdn/volume/version_blobs.h"
#include "bdn/volume/version_check.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

// Small chunks (64..1024 bytes, about 300 on average) so that a 1.5 MB file has ~5,000 chunks,
// well over the 1,024 a version-1 index may hold.
SealOptions SmallChunks(int jobs = 2) {
  SealOptions o;
  o.chunker = {64, 256, 1024};
  o.jobs = jobs;
  return o;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string Random(size_t n, uint64_t seed) {
  auto v = testutil::RandomBytes(n, seed);
  return {v.begin(), v.end()};
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class IndexPiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    src_ = tmp_.path() / "src";
    fs::create_directories(src_);
    big_ = Random(1'500'000, 7);
    WriteFile(src_ / "big", big_);
    WriteFile(src_ / "small", "hello\n");
  }

  // Seals src_ into `store`; the version's view.
  std::shared_ptr<VersionView> Seal(std::shared_ptr<ChunkStore> store, SealResult* out = nullptr,
                                    int jobs = 2) {
    auto sealed = SealDirectory(src_, SmallChunks(jobs), *store, nullptr);
    EXPECT_TRUE(sealed.has_value()) << sealed.error().message();
    if (!sealed) return nullptr;
    if (out) *out = *sealed;
    auto view = VersionView::Open(store, sealed->digest);
    EXPECT_TRUE(view.has_value()) << view.error().message();
    return view ? *view : nullptr;
  }

  // The decoded root of file `path`'s chunk index in `view`.
  ChunkIndexObject Root(const VersionView& view, const std::string& path) {
    const Entry* e = view.Find(path);
    EXPECT_NE(e, nullptr);
    auto bytes = view.store().Get(e->index);
    EXPECT_TRUE(bytes.has_value());
    auto root = DecodeChunkIndexObject(*bytes);
    EXPECT_TRUE(root.has_value()) << root.error().message();
    return *root;
  }

  testutil::TempDir tmp_{"bdn_index_pieces"};
  fs::path src_;
  std::string big_;
};

TEST_F(IndexPiecesTest, ALargeFileIsIndexedInPiecesThatEveryReaderReads) {
  auto store = std::make_shared<MemChunkStore>();
  auto view = Seal(store);
  ASSERT_NE(view, nullptr);
  const Entry& big = *view->Find("big");
  ASSERT_EQ(big.layout, FileLayout::kIndexed);
  ChunkIndexObject root = Root(*view, "big");
  ASSERT_EQ(root.version, 2u);
  ASSERT_GT(root.pieces.size(), 10u);
  uint64_t chunks = 0;
  for (const ChunkIndexPiece& p : root.pieces) chunks += p.chunk_count;
  ASSERT_GT(chunks, kFlatIndexMaxChunks);

  // VersionView: the whole list, and reads across piece boundaries.
  auto fc = view->ChunksOf(big);
  ASSERT_TRUE(fc.has_value()) << fc.error().message();
  EXPECT_EQ((*fc)->chunks.size(), chunks);
  std::string got(big_.size(), '\0');
  auto n = view->Read(big, 0, {reinterpret_cast<uint8_t*>(got.data()), got.size()});
  ASSERT_TRUE(n.has_value()) << n.error().message();
  EXPECT_EQ(*n, big_.size());
  EXPECT_TRUE(got == big_);

  // Pull and cat.
  auto pulled = Pull(*view, tmp_.path() / "out", {}, nullptr);
  ASSERT_TRUE(pulled.has_value()) << pulled.error().message();
  EXPECT_TRUE(ReadAll(tmp_.path() / "out" / "big") == big_);
  {
    int fd = ::open((tmp_.path() / "cat").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    Status s = CatFile(*view, "big", fd);
    ::close(fd);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(ReadAll(tmp_.path() / "cat") == big_);
  }

  // Verify, the commit check, and GC's list of the blobs the version needs.
  auto verified = VerifyVersion(*view, 2);
  ASSERT_TRUE(verified.has_value()) << verified.error().message();
  EXPECT_TRUE(verified->problems.empty());
  auto stats = CheckVersionStored(*store, view->digest());
  ASSERT_TRUE(stats.has_value()) << stats.error().message();
  EXPECT_EQ(stats->chunks, chunks + 1);  // and "small"'s one chunk
  EXPECT_EQ(stats->bytes, big_.size() + 6);
  std::vector<Digest> needed;
  ASSERT_TRUE(CollectVersionBlobs(*store, view->digest(), needed).ok());
  for (const ChunkIndexPiece& p : root.pieces) {
    EXPECT_NE(std::find(needed.begin(), needed.end(), p.id), needed.end()) << p.id.ToString();
  }
  EXPECT_NE(std::find(needed.begin(), needed.end(), big.index), needed.end());
  // Every blob in the store is needed: nothing was stored that the version does not name.
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  EXPECT_EQ(needed.size(), store->size());
}

TEST_F(IndexPiecesTest, TheSameTreeGivesTheSameDigestWhateverTheThreads) {
  auto one = std::make_shared<MemChunkStore>(), seven = std::make_shared<MemChunkStore>();
  auto a = Seal(one, nullptr, 1), b = Seal(seven, nullptr, 7);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->digest(), b->digest());
  EXPECT_EQ(a->Find("big")->index, b->Find("big")->index);
  EXPECT_EQ(one->size(), seven->size());
}

TEST_F(IndexPiecesTest, AnInsertionStoresOnlyThePiecesAroundIt) {
  auto store = std::make_shared<MemChunkStore>();
  auto before = Seal(store);
  ASSERT_NE(before, nullptr);
  const size_t flat_bytes = 16 + 36 * (*before->ChunksOf(*before->Find("big")))->chunks.size();
  // 4,099 bytes inserted 100,000 bytes in (as ckpt-2 of bench/gen_checkpoints.py).
  WriteFile(src_ / "big", big_.substr(0, 100'000) + Random(4099, 8) + big_.substr(100'000));
  SealResult sealed;
  auto after = Seal(store, &sealed);
  ASSERT_NE(after, nullptr);
  ChunkIndexObject old_root = Root(*before, "big"), new_root = Root(*after, "big");
  ASSERT_EQ(new_root.version, 2u);
  size_t fresh = 0, fresh_bytes = 0;
  for (const ChunkIndexPiece& p : new_root.pieces) {
    bool had = std::any_of(old_root.pieces.begin(), old_root.pieces.end(),
                           [&](const ChunkIndexPiece& o) { return o.id == p.id; });
    if (!had) {
      ++fresh;
      fresh_bytes += 16 + 36 * p.chunk_count;
    }
  }
  EXPECT_GE(fresh, 1u);
  EXPECT_LE(fresh, 3u);
  const size_t manifest_bytes = EncodeManifest(after->manifest())->size();
  EXPECT_EQ(sealed.metadata_bytes_uploaded,
            manifest_bytes + 16 + 48 * new_root.pieces.size() + fresh_bytes);
  // Against the whole list rewritten, as a version-1 index would be.
  EXPECT_LT(sealed.metadata_bytes_uploaded * 5, flat_bytes);

  // diff sees one changed file and fetches only its new chunks.
  auto diff = DiffVersions(*before, *after);
  ASSERT_TRUE(diff.has_value()) << diff.error().message();
  EXPECT_EQ(diff->changed, std::vector<std::string>{"big"});
  EXPECT_EQ(diff->fetch_chunks, sealed.chunks_uploaded);
}

TEST_F(IndexPiecesTest, AMissingOrDamagedPieceIsNamedByEveryReader) {
  auto store = std::make_shared<MemChunkStore>();
  auto view = Seal(store);
  ASSERT_NE(view, nullptr);
  const Digest piece = Root(*view, "big").pieces[3].id;
  const std::string version = "version " + view->digest().ToString();
  auto listed = view->ChunksOf(*view->Find("big"));  // read while every piece is sound
  ASSERT_TRUE(listed.has_value()) << listed.error().ToString();

  // Damaged: the store refuses its bytes; each reader says so naming the piece and the file.
  store->CorruptForTest(piece, {'B', 'D', 'N', 'I'});
  auto fresh_view = VersionView::Open(store, view->digest());
  ASSERT_TRUE(fresh_view.has_value());
  auto fc = (*fresh_view)->ChunksOf(*(*fresh_view)->Find("big"));
  ASSERT_FALSE(fc.has_value());
  EXPECT_EQ(fc.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(fc.error().message().starts_with("file \"big\": chunk index piece: chunk " +
                                               piece.ToString() + ": digest mismatch"))
      << fc.error().message();
  auto checked = CheckVersionStored(*store, view->digest());
  ASSERT_FALSE(checked.has_value());
  EXPECT_EQ(checked.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(checked.error().message().starts_with(version + ": chunk index piece " +
                                                    piece.ToString() + " of \"big\": chunk " +
                                                    piece.ToString() + ": digest mismatch"))
      << checked.error().message();
  auto verified = VerifyVersion(**fresh_view, 2);
  ASSERT_TRUE(verified.has_value()) << verified.error().message();
  ASSERT_EQ(verified->problems.size(), 1u);
  EXPECT_EQ(verified->problems[0].path, "big");
  EXPECT_TRUE(verified->problems[0].status.message().starts_with(
      "chunk index piece: chunk " + piece.ToString() + ": digest mismatch"))
      << verified->problems[0].status.message();

  // Missing: a store with every blob of the version but that piece.
  auto lacking = std::make_shared<MemChunkStore>();
  auto copy = [&](const Digest& id) {
    if (id == piece) return;
    auto bytes = store->Get(id);
    ASSERT_TRUE(bytes.has_value()) << bytes.error().ToString();
    ASSERT_TRUE(lacking->Put(id, *bytes).ok());
  };
  copy(view->digest());
  copy(view->Find("small")->digest);
  copy(view->Find("big")->index);
  for (const ChunkIndexPiece& p : Root(*view, "big").pieces) copy(p.id);
  for (const ChunkRef& c : (*listed)->chunks) copy(c.id);
  auto missing = CheckVersionStored(*lacking, view->digest());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.error().message(),
            version + ": chunk index piece " + piece.ToString() + " of \"big\" is not stored");
  std::vector<Digest> blobs;
  Status collected = CollectVersionBlobs(*lacking, view->digest(), blobs);
  EXPECT_EQ(collected.code(), StatusCode::kNotFound);
  EXPECT_EQ(collected.message(),
            "chunk index piece " + piece.ToString() + " of file \"big\": not in the store");
  auto lacking_view = VersionView::Open(lacking, view->digest());
  ASSERT_TRUE(lacking_view.has_value());
  auto none = (*lacking_view)->ChunksOf(*(*lacking_view)->Find("big"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.error().message(),
            "file \"big\": chunk index piece: chunk " + piece.ToString() + ": not in store");
}

// A large file whose index is one version-1 object (as every file had before pieces existed)
// reads and commits as before: version-1 indexes of any length stay valid.
TEST(IndexPiecesCompat, ALargeFileWithAVersionOneIndexStillReads) {
  auto store = std::make_shared<MemChunkStore>();
  std::string content;
  std::vector<ChunkRef> chunks;
  for (size_t i = 0; i < 3000; ++i) {
    std::string chunk = "chunk " + std::to_string(i) + std::string(i % 50, 'x');
    Digest id = Digest::Of(chunk);
    ASSERT_TRUE(store->Put(id, AsBytes(chunk)).ok());
    chunks.push_back({id, static_cast<uint32_t>(chunk.size())});
    content += chunk;
  }
  const std::string index = EncodeChunkIndex(chunks);
  ASSERT_TRUE(store->Put(Digest::Of(index), AsBytes(index)).ok());
  Manifest m;
  m.chunker = ChunkerParams::Default();
  Entry e;
  e.path = "old.bin";
  e.kind = EntryKind::kFile;
  e.mode = 0644;
  e.size_bytes = content.size();
  e.layout = FileLayout::kIndexed;
  e.digest = Digest::Of(content);
  e.index = Digest::Of(index);
  m.entries.push_back(e);
  const std::string manifest = *EncodeManifest(m);
  const Digest digest = Digest::Of(manifest);
  ASSERT_TRUE(store->Put(digest, AsBytes(manifest)).ok());

  auto stats = CheckVersionStored(*store, digest);
  ASSERT_TRUE(stats.has_value()) << stats.error().message();
  EXPECT_EQ(stats->chunks, 3000u);
  auto view = VersionView::Open(store, digest);
  ASSERT_TRUE(view.has_value());
  std::string got(content.size(), '\0');
  auto n = (*view)->Read(*(*view)->Find("old.bin"), 0,
                         {reinterpret_cast<uint8_t*>(got.data()), got.size()});
  ASSERT_TRUE(n.has_value()) << n.error().message();
  EXPECT_TRUE(got == content);
  auto verified = VerifyVersion(**view, 2);
  ASSERT_TRUE(verified.has_value());
  EXPECT_TRUE(verified->problems.empty());
  std::vector<Digest> needed;
  ASSERT_TRUE(CollectVersionBlobs(*store, digest, needed).ok());
  EXPECT_EQ(needed.size(), 1 + 1 + 3000u);  // manifest, index, chunks
}

}  // namespace
}  // namespace bdn
