// Tests of the volume operations against the in-memory store and a real SQLite registry.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "bdn/volume/compare.h"
#include "bdn/volume/pull.h"
#include "bdn/volume/push.h"
#include "bdn/volume/resolve.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

class VolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bdn-volume-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "src");
    registry_ = std::move(*SqliteRegistry::Open(dir_ / "registry.db"));
    store_ = std::make_shared<MemChunkStore>();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& rel, const std::string& bytes) {
    fs::create_directories((dir_ / "src" / rel).parent_path());
    std::ofstream(dir_ / "src" / rel, std::ios::binary) << bytes;
  }
  static std::string Random(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  }
  Result<PushResult> PushSrc(const std::string& volume, std::vector<std::string> tags = {}) {
    PushOptions o;
    o.dir = dir_ / "src";
    o.ns = "test";
    o.volume = volume;
    o.tags = std::move(tags);
    return Push(o, *store_, *registry_, nullptr);
  }
  Digest Fake(const std::string& hex_prefix) {
    std::string hex = hex_prefix + std::string(64 - hex_prefix.size(), '0');
    return *Digest::Parse(hex);
  }

  fs::path dir_;
  std::unique_ptr<SqliteRegistry> registry_;
  std::shared_ptr<MemChunkStore> store_;
};

TEST_F(VolumeTest, ResolveAmbiguousPrefixNamesTheCandidates) {
  for (const char* p : {"abcdef0123451", "abcdef0123452"}) {
    CommitRequest req{"w", "v", Fake(p), {}, "", {}, std::nullopt};
    ASSERT_TRUE(registry_->Commit(req).has_value());
  }
  auto ref = ParseRef("bdn:w/v@abcdef012345");
  ASSERT_TRUE(ref.has_value());
  auto r = ResolveRef(*registry_, *ref);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "digest prefix \"abcdef012345\" of bdn:w/v is ambiguous: matches " +
                                     Fake("abcdef0123451").ToString() + ", " +
                                     Fake("abcdef0123452").ToString());
  auto one = ResolveRef(*registry_, *ParseRef("bdn:w/v@abcdef0123452"));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->digest, Fake("abcdef0123452"));
  auto none = ResolveRef(*registry_, *ParseRef("bdn:w/v@abcdef0123459"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message(), "version bdn:w/v@b3:abcdef0123459: not found");
}

TEST_F(VolumeTest, PushPullRoundTripInMemory) {
  Write("a/big.bin", Random(3'000'000, 1));
  Write("a/small.txt", "hello");
  Write("empty", "");
  ::symlink("a/small.txt", (dir_ / "src/link").c_str());
  auto pushed = PushSrc("v", {"prod"});
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  EXPECT_EQ(pushed->stats.files, 3u);
  EXPECT_EQ(pushed->stats.bytes, 3'000'005u);
  EXPECT_GT(pushed->stats.chunks, 10u);
  EXPECT_EQ(pushed->chunks_uploaded, pushed->stats.chunks);

  auto view = VersionView::Open(store_, pushed->ref.digest);
  ASSERT_TRUE(view.has_value());
  const Entry* big = (*view)->Find("a/big.bin");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->layout, FileLayout::kIndexed);
  EXPECT_EQ(big->digest, Digest::Of(Random(3'000'000, 1)));
  EXPECT_EQ((*view)->Find("a/small.txt")->layout, FileLayout::kSingleChunk);
  EXPECT_EQ((*view)->Find("empty")->layout, FileLayout::kEmpty);
  EXPECT_EQ((*view)->Find("link")->target, "a/small.txt");

  // Reads across chunk edges equal the source bytes.
  std::string src = Random(3'000'000, 1);
  auto fc = (*view)->ChunksOf(*big);
  ASSERT_TRUE(fc.has_value());
  for (uint64_t edge : (*fc)->offsets) {
    uint64_t off = edge > 7 ? edge - 7 : 0;
    std::vector<uint8_t> buf(20);
    auto n = (*view)->Read(*big, off, buf);
    ASSERT_TRUE(n.has_value());
    size_t want = std::min<size_t>(20, src.size() - std::min<size_t>(off, src.size()));
    ASSERT_EQ(*n, want);
    EXPECT_EQ(std::string(buf.begin(), buf.begin() + static_cast<long>(want)), src.substr(off, want));
  }

  auto pulled = Pull(**view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_TRUE(pulled.has_value()) << pulled.error().message();
  EXPECT_EQ(pulled->files_written, 3u);
  std::ifstream in(dir_ / "out/a/big.bin", std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(back, src);
  EXPECT_EQ(fs::read_symlink(dir_ / "out/link"), "a/small.txt");
}

TEST_F(VolumeTest, CorruptChunkIsReportedWithChunkAndFileAndNeverServed) {
  Write("w.bin", Random(1'000'000, 2));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const Entry* e = view->Find("w.bin");
  auto fc = *view->ChunksOf(*e);
  Digest bad = fc->chunks[2].id;
  store_->CorruptForTest(bad, std::vector<uint8_t>(fc->chunks[2].size_bytes, 0));
  std::vector<uint8_t> buf(fc->offsets[3]);
  auto r = view->Read(*e, 0, buf);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.error().message().rfind("file \"w.bin\": chunk " + bad.ToString() + ": digest mismatch", 0), 0u)
      << r.error().message();
  auto v = VerifyVersion(*view, 2);
  ASSERT_TRUE(v.has_value());
  ASSERT_EQ(v->problems.size(), 1u);
  EXPECT_EQ(v->problems[0].path, "w.bin");
  EXPECT_EQ(v->problems[0].chunk, bad);
}

TEST_F(VolumeTest, DiffCountsOnlyChunksTheOldVersionLacks) {
  std::string base = Random(2'000'000, 3);
  Write("m.bin", base);
  auto a = PushSrc("v");
  std::string changed = base;
  changed.insert(1'000'000, "inserted bytes");
  Write("m.bin", changed);
  Write("new.txt", "n");
  auto b = PushSrc("v");
  ASSERT_TRUE(a.has_value() && b.has_value());
  auto va = *VersionView::Open(store_, a->ref.digest);
  auto vb = *VersionView::Open(store_, b->ref.digest);
  auto d = DiffVersions(*va, *vb);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->added, std::vector<std::string>{"new.txt"});
  EXPECT_EQ(d->changed, std::vector<std::string>{"m.bin"});
  EXPECT_TRUE(d->removed.empty());
  // An insertion in the middle re-chunks only around it: far less than the file.
  EXPECT_GT(d->fetch_bytes, 14u);
  EXPECT_LT(d->fetch_bytes, 800'000u);
  EXPECT_EQ(d->fetch_bytes, b->bytes_uploaded - b->metadata_bytes_uploaded);
}

TEST_F(VolumeTest, SecondConcurrentPushIsRefused) {
  Write("x", "x");
  auto claim = registry_->ClaimPush("test", "v");
  ASSERT_TRUE(claim.has_value());
  auto r = PushSrc("v");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
  EXPECT_EQ(r.error().message().rfind("volume bdn:test/v: push in progress", 0), 0u);
}

}  // namespace
}  // namespace bdn
