// Tests for ChunkStore: the conformance suite (chunk_store_conformance_test_util.h) over
// LocalChunkStore and the in-memory MemChunkStore, how each reports a damaged copy, and what only
// the local pack store promises (its files).
#include "bdn/store/chunk_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "bdn/store/chunk_store_conformance_test_util.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/store_test_util.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using testutil::RandomBytes;

void ExpectContains(ChunkStore* store, const Digest& id, bool expected) {
  auto r = store->Contains(id);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(*r, expected) << id.ToString();
}

// Each implementation: how to make one, and how to damage a stored blob behind its back.
struct LocalStoreTraits {
  // A corrupt copy found by Get is set aside (quarantined) so the next push repairs it.
  static constexpr bool kQuarantines = true;
  static std::unique_ptr<ChunkStore> Make(const fs::path& dir) {
    auto s = LocalChunkStore::Open(dir / "store", LocalChunkStore::Durability::kNone);
    EXPECT_TRUE(s.has_value()) << s.error().message();
    return s ? std::move(*s) : nullptr;
  }
  // Flips one byte of the blob's stored (uncompressed: the tests store random bytes) copy in its
  // pack.
  static void FlipByte(ChunkStore* store, const Digest& id, size_t offset) {
    auto* local = static_cast<LocalChunkStore*>(store);
    auto where = local->Locate(id);
    ASSERT_TRUE(where.has_value() && where->has_value());
    ASSERT_EQ((*where)->loc.codec, pack::Codec::kNone);
    Status s = FlipStoredByte(*local, id, offset);
    ASSERT_TRUE(s.ok()) << s.message();
  }
};

struct MemStoreTraits {
  static constexpr bool kQuarantines = false;
  static std::unique_ptr<ChunkStore> Make(const fs::path&) {
    return std::make_unique<MemChunkStore>();
  }
  static void FlipByte(ChunkStore* store, const Digest& id, size_t offset) {
    auto bytes = store->Get(id);
    ASSERT_TRUE(bytes.has_value());
    (*bytes)[offset] ^= 0x01;
    static_cast<MemChunkStore*>(store)->CorruptForTest(id, *bytes);
  }
};

template <typename Traits>
class ChunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = Traits::Make(dir_.path());
    ASSERT_NE(store_, nullptr);
  }

  testutil::TempDir dir_{"bdn_chunk_store_test"};
  std::unique_ptr<ChunkStore> store_;
};

using Implementations = ::testing::Types<LocalStoreTraits, MemStoreTraits>;
class ImplementationNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, LocalStoreTraits>) return "Local";
    return "Mem";
  }
};
TYPED_TEST_SUITE(ChunkStoreTest, Implementations, ImplementationNames);

// The conformance suite over each: a store per test, damaged through its Traits.
using namespace conformance;  // the suite's registration names, for INSTANTIATE below
template <typename Traits>
struct EnvOf {
  explicit EnvOf(const fs::path& dir) : store_(Traits::Make(dir)) {}
  ChunkStore* store() { return store_.get(); }
  void FlipByte(const Digest& id, size_t offset) { Traits::FlipByte(store_.get(), id, offset); }
  std::unique_ptr<ChunkStore> store_;
};
INSTANTIATE_TYPED_TEST_SUITE_P(Local, ChunkStoreConformance,
                               ::testing::Types<EnvOf<LocalStoreTraits>>);
INSTANTIATE_TYPED_TEST_SUITE_P(Mem, ChunkStoreConformance, ::testing::Types<EnvOf<MemStoreTraits>>);

// How each reports a damaged copy.

TYPED_TEST(ChunkStoreTest, GetManyFailsOnACorruptBlobNamingIt) {
  std::vector<Digest> ids;
  for (uint64_t i = 0; i < 5; ++i) {
    std::vector<uint8_t> data = RandomBytes(5000, 200 + i);
    ids.push_back(Digest::Of(data));
    ASSERT_TRUE(this->store_->Put(ids.back(), data).ok());
  }
  TypeParam::FlipByte(this->store_.get(), ids[2], 10);
  auto got = this->store_->GetMany(ids);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(got.error().message().starts_with("chunk " + ids[2].ToString() + ": digest mismatch"))
      << got.error().message();
}

TYPED_TEST(ChunkStoreTest, CorruptedBytesAreNeverReturned) {
  std::vector<uint8_t> data = RandomBytes(70000, 5);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(this->store_->Put(id, data).ok());
  TypeParam::FlipByte(this->store_.get(), id, 12345);
  std::vector<uint8_t> damaged = data;
  damaged[12345] ^= 0x01;
  auto got = this->store_->Get(id);
  ASSERT_FALSE(got.has_value()) << "returned corrupted bytes";
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  const std::string reported = "chunk " + id.ToString() +
                               ": digest mismatch (stored bytes hash to " +
                               Digest::Of(damaged).ToString() + ")";
  if (TypeParam::kQuarantines) {
    auto where = static_cast<LocalChunkStore*>(this->store_.get())->Locate(id);
    ASSERT_TRUE(where.has_value());
    EXPECT_FALSE(where->has_value());  // the bad copy is no longer offered
    EXPECT_TRUE(got.error().message().starts_with(reported + " in pack " +
                                                  (this->dir_.path() / "store/packs/").string()))
        << got.error().message();
    EXPECT_TRUE(got.error().message().ends_with("; set aside, push the data again to repair"))
        << got.error().message();
    // Now missing, so a push stores it again; a Put of the right bytes repairs the store.
    ExpectContains(this->store_.get(), id, false);
    ASSERT_TRUE(this->store_->Put(id, data).ok());
    auto again = this->store_->Get(id);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, data);
  } else {
    EXPECT_EQ(got.error().message(), reported);
    ExpectContains(this->store_.get(), id, true);  // Contains does not verify
  }
}

// What only the local pack store promises.
class LocalChunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = LocalChunkStore::Open(dir_.path() / "store");
    ASSERT_TRUE(s.has_value()) << s.error().message();
    store_ = std::move(*s);
  }
  // Names in packs/ ending in `suffix`.
  std::vector<std::string> PackFiles(const std::string& suffix) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(store_->root() / "packs")) {
      if (e.path().filename().string().ends_with(suffix)) out.push_back(e.path().filename());
    }
    return out;
  }

  testutil::TempDir dir_{"bdn_chunk_store_test"};
  std::unique_ptr<LocalChunkStore> store_;
};

TEST_F(LocalChunkStoreTest, OpenCreatesTheLayout) {
  EXPECT_TRUE(fs::is_directory(dir_.path() / "store" / "packs"));
  EXPECT_TRUE(fs::is_directory(dir_.path() / "store" / "index"));
  EXPECT_FALSE(fs::exists(dir_.path() / "store" / "chunks"));
  EXPECT_EQ(store_->root(), dir_.path() / "store");
}

TEST_F(LocalChunkStoreTest, BlobsGoToOnePackThatSyncSeals) {
  std::vector<Digest> ids;
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> data = RandomBytes(4000 + i, 700 + i);
    ids.push_back(Digest::Of(data));
    ASSERT_TRUE(store_->Put(ids.back(), data).ok());
  }
  // One writer thread: one open pack.
  EXPECT_EQ(PackFiles(".open").size(), 1u);
  EXPECT_TRUE(PackFiles(".pack").empty());
  auto where = store_->Locate(ids[0]);
  ASSERT_TRUE(where.has_value() && where->has_value());
  EXPECT_EQ((*where)->pack_path.extension(), ".open");
  ASSERT_TRUE(store_->Sync().ok());
  EXPECT_TRUE(PackFiles(".open").empty());
  ASSERT_EQ(PackFiles(".pack").size(), 1u);
  where = store_->Locate(ids[199]);
  ASSERT_TRUE(where.has_value() && where->has_value());
  EXPECT_EQ((*where)->pack_path, store_->root() / "packs" / PackFiles(".pack")[0]);
  for (const Digest& id : ids) ASSERT_TRUE(store_->Get(id).has_value());
}

TEST_F(LocalChunkStoreTest, NoOpenPacksLeftAfterSyncEvenWithConcurrentWriters) {
  std::vector<uint8_t> shared = RandomBytes(200000, 8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      EXPECT_TRUE(store_->Put(Digest::Of(shared), shared).ok());
      for (int i = 0; i < 20; ++i) {
        std::vector<uint8_t> data = RandomBytes(1000, 1000 * t + i);
        EXPECT_TRUE(store_->Put(Digest::Of(data), data).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  // A refused Put writes nothing either.
  EXPECT_FALSE(store_->Put(Digest(), shared).ok());
  ASSERT_TRUE(store_->Sync().ok());
  EXPECT_TRUE(PackFiles(".open").empty());
  EXPECT_TRUE(PackFiles(".new").empty());
  EXPECT_LE(PackFiles(".pack").size(), 4u);  // max_open_packs
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->blobs, 161u);  // the shared blob once
}

// A writer's new pack is visible under its .new name for a moment before its creator locks it
// (CreatePack): a look at the directory then (another thread's miss, another process) must not
// take it for a dead writer's and delete it, which failed the writer's Put with "create pack:
// No such file or directory". Only an old .new is a dead writer's.
TEST_F(LocalChunkStoreTest, AYoungNewPackIsLeftToItsWriterAndAnOldOneRemoved) {
  const fs::path packs = store_->root() / "packs";
  const fs::path young = packs / "00000000000000a1.new";
  const fs::path old = packs / "00000000000000a2.new";
  for (const fs::path& p : {young, old}) std::ofstream(p).put('x');
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto again = LocalChunkStore::Open(store_->root());  // opening looks at every pack
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(old));
}

// The same for a writer's claims file: a GC listing the claims between its creation and its
// lock must not delete it (the writer's Put failed); an old unlocked one is a dead process's.
TEST(LocalChunkStoreClaims, AYoungNewClaimsFileIsLeftToItsWriterAndAnOldOneRemoved) {
  testutil::TempDir dir{"bdn_chunk_store_test"};
  auto store = LocalChunkStore::Open(dir.path() / "store", {.claims = ClaimMode::kProcessFile});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  const fs::path claims = dir.path() / "store" / "gc" / "claims";
  const fs::path young = claims / "1-00000000000000a1.new";
  const fs::path old = claims / "2-00000000000000a2.new";
  for (const fs::path& p : {young, old}) std::ofstream(p).put('x');
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto live = (*store)->LiveClaims();
  ASSERT_TRUE(live.has_value()) << live.error().ToString();
  EXPECT_TRUE(live->empty());
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(old));
}

TEST_F(LocalChunkStoreTest, TruncatedPackIsCorruption) {
  std::vector<uint8_t> data = RandomBytes(10000, 9);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(store_->Put(id, data).ok());
  ASSERT_TRUE(store_->Sync().ok());
  auto where = store_->Locate(id);
  ASSERT_TRUE(where.has_value() && where->has_value());
  fs::resize_file((*where)->pack_path, (*where)->loc.end() - 1);
  auto got = store_->Get(id);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(got.error().message(), "chunk " + id.ToString() + ": pack " +
                                       (*where)->pack_path.string() +
                                       " ends inside the record at offset 16; set aside, push the "
                                       "data again to repair");
}

TEST_F(LocalChunkStoreTest, ReopenedStoreSeesEarlierPuts) {
  std::vector<uint8_t> data = RandomBytes(3000, 10);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(store_->Put(id, data).ok());
  store_.reset();
  auto reopened = LocalChunkStore::Open(dir_.path() / "store");
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message();
  auto got = (*reopened)->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TEST(VerifyChunk, NamesTheChunkAndTheDigestFound) {
  std::string_view bytes = "abc";
  std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_TRUE(VerifyChunk(Digest::Of(bytes), span).ok());
  Digest other;
  Status s = VerifyChunk(other, span);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "chunk b3:" + std::string(64, '0') +
                             ": digest mismatch (stored bytes hash to " +
                             Digest::Of(bytes).ToString() + ")");
}

TEST(MemChunkStore, SizeCountsDistinctBlobs) {
  MemChunkStore store;
  std::vector<uint8_t> a = RandomBytes(10, 1), b = RandomBytes(10, 2);
  ASSERT_TRUE(store.Put(Digest::Of(a), a).ok());
  ASSERT_TRUE(store.Put(Digest::Of(a), a).ok());
  ASSERT_TRUE(store.Put(Digest::Of(b), b).ok());
  EXPECT_FALSE(store.Put(Digest(), a).ok());
  EXPECT_EQ(store.size(), 2u);
}

}  // namespace
}  // namespace bdn
