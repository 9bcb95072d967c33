// Tests for ChunkStore: the same scenarios against LocalChunkStore and the in-memory
// MemChunkStore, plus what only the local pack store promises (its files).
#include "bdn/testing/test_util.h"
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

#include "bdn/store/local_chunk_store.h"
#include "bdn/store/store_test_util.h"

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

TYPED_TEST(ChunkStoreTest, PutThenGetReturnsTheBytes) {
  for (size_t size : {size_t{1}, size_t{4096}, size_t{262144}, size_t{1000003}}) {
    std::vector<uint8_t> data = RandomBytes(size, size);
    Digest id = Digest::Of(data);
    ASSERT_TRUE(this->store_->Put(id, data).ok());
    auto got = this->store_->Get(id);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, data) << "size " << size;
  }
}

TYPED_TEST(ChunkStoreTest, EmptyBlobIsStorable) {
  Digest id = Digest::Of(std::string_view());
  ASSERT_TRUE(this->store_->Put(id, {}).ok());
  auto got = this->store_->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE(got->empty());
}

TYPED_TEST(ChunkStoreTest, PutIsIdempotent) {
  std::vector<uint8_t> data = RandomBytes(5000, 1);
  Digest id = Digest::Of(data);
  for (int i = 0; i < 3; ++i) {
    Status s = this->store_->Put(id, data);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  auto got = this->store_->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TYPED_TEST(ChunkStoreTest, ContainsReflectsPuts) {
  std::vector<uint8_t> a = RandomBytes(100, 2);
  std::vector<uint8_t> b = RandomBytes(100, 3);
  Digest ida = Digest::Of(a), idb = Digest::Of(b);
  auto before = this->store_->Contains(ida);
  ASSERT_TRUE(before.has_value()) << before.error().message();
  EXPECT_FALSE(*before);
  ASSERT_TRUE(this->store_->Put(ida, a).ok());
  ExpectContains(this->store_.get(), ida, true);
  ExpectContains(this->store_.get(), idb, false);
}

TYPED_TEST(ChunkStoreTest, GetOfMissingChunkIsNotFound) {
  Digest id = Digest::Of(std::string_view("never stored"));
  auto got = this->store_->Get(id);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.error().message(), "chunk b3:" + id.Hex() + ": not in store");
}

TYPED_TEST(ChunkStoreTest, PutWithWrongIdIsRefusedAndStoresNothing) {
  std::vector<uint8_t> data = RandomBytes(777, 4);
  Digest wrong = Digest::Of(std::string_view("something else"));
  Status s = this->store_->Put(wrong, data);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "chunk " + wrong.ToString() + ": bytes do not match the id");
  ExpectContains(this->store_.get(), wrong, false);
  ExpectContains(this->store_.get(), Digest::Of(data), false);
  auto got = this->store_->Get(wrong);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
}

TYPED_TEST(ChunkStoreTest, GetManyAnswersInOrderWithMissingBlobsAsNullopt) {
  std::vector<Digest> ids;
  std::vector<std::optional<std::vector<uint8_t>>> want;
  for (uint64_t i = 0; i < 40; ++i) {
    std::vector<uint8_t> data = RandomBytes(1000 + i * 37, 100 + i);
    ids.push_back(Digest::Of(data));
    if (i % 7 == 3) {
      want.emplace_back(std::nullopt);
    } else {
      ASSERT_TRUE(this->store_->Put(ids.back(), data).ok());
      want.emplace_back(std::move(data));
    }
  }
  auto got = this->store_->GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(this->store_->GetMany({})->empty());
}

TYPED_TEST(ChunkStoreTest, SizesGivesStoredLengthsInOrderWithMissingAsNullopt) {
  std::vector<Digest> ids;
  BlobSizes want;
  for (uint64_t i = 0; i < 12; ++i) {
    std::vector<uint8_t> data = RandomBytes(i * 1001, 300 + i);
    ids.push_back(Digest::Of(data));
    if (i % 4 == 1) {
      want.emplace_back(std::nullopt);
    } else {
      ASSERT_TRUE(this->store_->Put(ids.back(), data).ok());
      want.emplace_back(data.size());
    }
  }
  ids.push_back(ids[0]);  // repeats are answered again
  want.push_back(want[0]);
  auto got = this->store_->Sizes(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(this->store_->Sizes({})->empty());
}

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

TYPED_TEST(ChunkStoreTest, ConcurrentPutsOfTheSameChunk) {
  std::vector<uint8_t> data = RandomBytes(300000, 6);
  Digest id = Digest::Of(data);
  std::vector<Status> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        Status s = this->store_->Put(id, data);
        if (!s.ok()) results[t] = s;
        auto got = this->store_->Get(id);
        // A reader never sees a partial blob: either absent (before the first rename) or whole.
        if (got.has_value()) {
          if (*got != data) results[t] = InternalError("different bytes");
        } else if (got.error().code() != StatusCode::kNotFound) {
          results[t] = got.error();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(results[t].ok()) << t << ": " << results[t].message();
  auto got = this->store_->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TYPED_TEST(ChunkStoreTest, ConcurrentPutsOfDifferentChunks) {
  std::vector<std::vector<uint8_t>> blobs;
  for (int i = 0; i < 64; ++i) blobs.push_back(RandomBytes(1000 + i, 100 + i));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < blobs.size(); i += 8) {
        if (!this->store_->Put(Digest::Of(blobs[i]), blobs[i]).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (const auto& b : blobs) {
    auto got = this->store_->Get(Digest::Of(b));
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, b);
  }
}

// StartPut: pieces hashed as they come, stored only once they hash to the id.
TYPED_TEST(ChunkStoreTest, StartPutStoresPiecesOnlyWhenTheyHashToTheId) {
  std::vector<uint8_t> data = RandomBytes(700000, 11);
  Digest id = Digest::Of(data);
  auto w = this->store_->StartPut(id);
  ASSERT_TRUE(w.has_value()) << w.error().message();
  for (size_t off = 0; off < data.size(); off += 65536) {
    size_t n = std::min<size_t>(65536, data.size() - off);
    ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).subspan(off, n)).ok());
  }
  EXPECT_FALSE(*this->store_->Contains(id)) << "visible before Commit";
  auto outcome = (*w)->Commit();
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(*outcome, PutOutcome::kStored);
  EXPECT_EQ(*this->store_->Get(id), data);

  w = this->store_->StartPut(id);
  ASSERT_TRUE((*w)->Append(data).ok());
  EXPECT_EQ(*(*w)->Commit(), PutOutcome::kAlreadyStored);

  // Bytes that do not hash to the id are refused and leave nothing.
  Digest claimed = Digest::Of(std::string_view("claimed"));
  w = this->store_->StartPut(claimed);
  ASSERT_TRUE((*w)->Append(data).ok());
  auto bad = (*w)->Commit();
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(bad.error().message(),
            "chunk " + claimed.ToString() + ": received bytes hash to " + id.ToString());
  EXPECT_FALSE(*this->store_->Contains(claimed));
  // An abandoned writer stores nothing.
  std::vector<uint8_t> other = RandomBytes(1000, 12);
  {
    auto abandoned = this->store_->StartPut(Digest::Of(other));
    ASSERT_TRUE((*abandoned)->Append(other).ok());
  }
  EXPECT_FALSE(*this->store_->Contains(Digest::Of(other)));
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
