// The ChunkStore conformance suite: what every store promises, whatever tier it is (the local
// pack store, the in-memory store, the node cache, a remote origin, a cluster of cache nodes).
// Each test module instantiates it over its stores:
//
//   struct MyEnv {  // one per test: makes the store under `dir` (a fresh private directory)
//     explicit MyEnv(const std::filesystem::path& dir);
//     ChunkStore* store();
//     // Damages the copy of `id` the store reads first (its own disk, or the tier it asks).
//     void FlipByte(const Digest& id, size_t offset);
//   };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Mine, ChunkStoreConformance, ::testing::Types<MyEnv>);
//
// A tier may answer a damaged copy with an error or with the right bytes fetched again from a
// tier behind it; it never answers with the damaged bytes. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bdn/store/chunk_store.h"
#include "bdn/testing/test_util.h"

namespace bdn::conformance {

template <typename Env>
class ChunkStoreConformance : public ::testing::Test {
 protected:
  ChunkStore* store() { return env_.store(); }
  void FlipByte(const Digest& id, size_t offset) { env_.FlipByte(id, offset); }

  testutil::TempDir dir_{"bdn_chunk_store_conformance"};
  Env env_{dir_.path()};
};
TYPED_TEST_SUITE_P(ChunkStoreConformance);

inline void ExpectContains(ChunkStore* store, const Digest& id, bool expected) {
  auto r = store->Contains(id);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(*r, expected) << id.ToString();
}

using testutil::RandomBytes;

TYPED_TEST_P(ChunkStoreConformance, PutThenGetReturnsTheBytes) {
  for (size_t size : {size_t{1}, size_t{4096}, size_t{262144}, size_t{1000003}}) {
    std::vector<uint8_t> data = RandomBytes(size, size);
    Digest id = Digest::Of(data);
    ASSERT_TRUE(this->store()->Put(id, data).ok());
    auto got = this->store()->Get(id);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, data) << "size " << size;
    // GetNow may decline, but what it returns is the blob.
    auto now = this->store()->GetNow(id, 1 << 20);
    if (now) {
      EXPECT_EQ(*now, data) << "size " << size;
    }
    if (size > 1 << 20) {
      EXPECT_FALSE(now.has_value()) << "over max_bytes";
    }
  }
  EXPECT_FALSE(this->store()->GetNow(Digest::Of("never stored"), 1 << 20).has_value());
}

TYPED_TEST_P(ChunkStoreConformance, EmptyBlobIsStorable) {
  Digest id = Digest::Of(std::string_view());
  ASSERT_TRUE(this->store()->Put(id, {}).ok());
  auto got = this->store()->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE(got->empty());
}

TYPED_TEST_P(ChunkStoreConformance, PutIsIdempotent) {
  std::vector<uint8_t> data = RandomBytes(5000, 1);
  Digest id = Digest::Of(data);
  for (int i = 0; i < 3; ++i) {
    Status s = this->store()->Put(id, data);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  auto got = this->store()->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TYPED_TEST_P(ChunkStoreConformance, ContainsReflectsPuts) {
  std::vector<uint8_t> a = RandomBytes(100, 2);
  std::vector<uint8_t> b = RandomBytes(100, 3);
  Digest ida = Digest::Of(a), idb = Digest::Of(b);
  auto before = this->store()->Contains(ida);
  ASSERT_TRUE(before.has_value()) << before.error().message();
  EXPECT_FALSE(*before);
  ASSERT_TRUE(this->store()->Put(ida, a).ok());
  ExpectContains(this->store(), ida, true);
  ExpectContains(this->store(), idb, false);
}

TYPED_TEST_P(ChunkStoreConformance, GetOfMissingChunkIsNotFound) {
  Digest id = Digest::Of(std::string_view("never stored"));
  auto got = this->store()->Get(id);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.error().message(), "chunk b3:" + id.Hex() + ": not in store");
}

// Bytes that do not hash to the id are refused naming the chunk, and nothing is stored. (A local
// store refuses them as a bad argument before storing; a remote tier's server as bytes that
// arrived damaged, Corruption "received bytes hash to ...", since it cannot tell which.)
TYPED_TEST_P(ChunkStoreConformance, PutWithWrongIdIsRefusedAndStoresNothing) {
  std::vector<uint8_t> data = RandomBytes(777, 4);
  Digest wrong = Digest::Of(std::string_view("something else"));
  Status s = this->store()->Put(wrong, data);
  EXPECT_TRUE(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kCorruption)
      << s.ToString();
  EXPECT_TRUE(s.message() == "chunk " + wrong.ToString() + ": bytes do not match the id" ||
              s.message() == "chunk " + wrong.ToString() + ": received bytes hash to " +
                                 Digest::Of(data).ToString())
      << s.message();
  ExpectContains(this->store(), wrong, false);
  ExpectContains(this->store(), Digest::Of(data), false);
  auto got = this->store()->Get(wrong);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
}

TYPED_TEST_P(ChunkStoreConformance, GetManyAnswersInOrderWithMissingBlobsAsNullopt) {
  std::vector<Digest> ids;
  std::vector<std::optional<std::vector<uint8_t>>> want;
  for (uint64_t i = 0; i < 40; ++i) {
    std::vector<uint8_t> data = RandomBytes(1000 + i * 37, 100 + i);
    ids.push_back(Digest::Of(data));
    if (i % 7 == 3) {
      want.emplace_back(std::nullopt);
    } else {
      ASSERT_TRUE(this->store()->Put(ids.back(), data).ok());
      want.emplace_back(std::move(data));
    }
  }
  auto got = this->store()->GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(this->store()->GetMany({})->empty());
}

TYPED_TEST_P(ChunkStoreConformance, SizesGivesStoredLengthsInOrderWithMissingAsNullopt) {
  std::vector<Digest> ids;
  BlobSizes want;
  for (uint64_t i = 0; i < 12; ++i) {
    std::vector<uint8_t> data = RandomBytes(i * 1001, 300 + i);
    ids.push_back(Digest::Of(data));
    if (i % 4 == 1) {
      want.emplace_back(std::nullopt);
    } else {
      ASSERT_TRUE(this->store()->Put(ids.back(), data).ok());
      want.emplace_back(data.size());
    }
  }
  ids.push_back(ids[0]);  // repeats are answered again
  want.push_back(want[0]);
  auto got = this->store()->Sizes(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(this->store()->Sizes({})->empty());
}

// A damaged copy is never returned: GetMany and Get answer an error naming the chunk, or the
// right bytes (fetched again from a tier behind). A tier that sets a damaged copy aside may then
// answer NotFound for it (missing in a batch), never the damaged bytes.
TYPED_TEST_P(ChunkStoreConformance, DamagedBytesAreNeverReturned) {
  std::vector<Digest> ids;
  std::vector<std::vector<uint8_t>> blobs;
  for (uint64_t i = 0; i < 5; ++i) {
    blobs.push_back(RandomBytes(70000 + i, 200 + i));
    ids.push_back(Digest::Of(blobs.back()));
    ASSERT_TRUE(this->store()->Put(ids.back(), blobs.back()).ok());
  }
  for (const Digest& id : ids)
    ASSERT_TRUE(this->store()->Get(id).has_value());  // cached, if a cache
  this->FlipByte(ids[2], 12345);
  this->FlipByte(ids[4], 10);
  auto many = this->store()->GetMany(ids);
  if (many.has_value()) {
    ASSERT_EQ(many->size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE((*many)[i].has_value() || i == 2 || i == 4) << i << " went missing";
      if ((*many)[i]) {
        EXPECT_EQ(*(*many)[i], blobs[i]) << "returned damaged bytes for " << i;
      }
    }
  } else {
    EXPECT_NE(many.error().message().find("chunk b3:"), std::string::npos)
        << many.error().message();
  }
  for (size_t i : {2, 4}) {
    auto now = this->store()->GetNow(ids[i], 1 << 20);
    if (now) {
      EXPECT_EQ(*now, blobs[i]) << "GetNow returned damaged bytes";
    }
    auto got = this->store()->Get(ids[i]);
    if (got.has_value()) {
      EXPECT_EQ(*got, blobs[i]) << "returned damaged bytes";
    } else {
      EXPECT_NE(got.error().message().find("chunk " + ids[i].ToString()), std::string::npos)
          << got.error().message();
    }
  }
}

TYPED_TEST_P(ChunkStoreConformance, ConcurrentPutsOfTheSameChunk) {
  std::vector<uint8_t> data = RandomBytes(300000, 6);
  Digest id = Digest::Of(data);
  std::vector<Status> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        Status s = this->store()->Put(id, data);
        if (!s.ok()) results[t] = s;
        auto got = this->store()->Get(id);
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
  auto got = this->store()->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TYPED_TEST_P(ChunkStoreConformance, ConcurrentPutsOfDifferentChunks) {
  std::vector<std::vector<uint8_t>> blobs;
  for (int i = 0; i < 64; ++i) blobs.push_back(RandomBytes(1000 + i, 100 + i));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < blobs.size(); i += 8) {
        if (!this->store()->Put(Digest::Of(blobs[i]), blobs[i]).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (const auto& b : blobs) {
    auto got = this->store()->Get(Digest::Of(b));
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, b);
  }
}

// StartPut: pieces hashed as they come, stored only once they hash to the id.
TYPED_TEST_P(ChunkStoreConformance, StartPutStoresPiecesOnlyWhenTheyHashToTheId) {
  std::vector<uint8_t> data = RandomBytes(700000, 11);
  Digest id = Digest::Of(data);
  auto w = this->store()->StartPut(id);
  ASSERT_TRUE(w.has_value()) << w.error().message();
  for (size_t off = 0; off < data.size(); off += 65536) {
    size_t n = std::min<size_t>(65536, data.size() - off);
    ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).subspan(off, n)).ok());
  }
  EXPECT_FALSE(*this->store()->Contains(id)) << "visible before Commit";
  auto outcome = (*w)->Commit();
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(*outcome, PutOutcome::kStored);
  EXPECT_EQ(*this->store()->Get(id), data);

  w = this->store()->StartPut(id);
  ASSERT_TRUE((*w)->Append(data).ok());
  EXPECT_EQ(*(*w)->Commit(), PutOutcome::kAlreadyStored);

  // Bytes that do not hash to the id are refused and leave nothing.
  Digest claimed = Digest::Of(std::string_view("claimed"));
  w = this->store()->StartPut(claimed);
  ASSERT_TRUE((*w)->Append(data).ok());
  auto bad = (*w)->Commit();
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(bad.error().message(),
            "chunk " + claimed.ToString() + ": received bytes hash to " + id.ToString());
  EXPECT_FALSE(*this->store()->Contains(claimed));
  // An abandoned writer stores nothing.
  std::vector<uint8_t> other = RandomBytes(1000, 12);
  {
    auto abandoned = this->store()->StartPut(Digest::Of(other));
    ASSERT_TRUE((*abandoned)->Append(other).ok());
  }
  EXPECT_FALSE(*this->store()->Contains(Digest::Of(other)));
}

REGISTER_TYPED_TEST_SUITE_P(ChunkStoreConformance, PutThenGetReturnsTheBytes, EmptyBlobIsStorable,
                            PutIsIdempotent, ContainsReflectsPuts, GetOfMissingChunkIsNotFound,
                            PutWithWrongIdIsRefusedAndStoresNothing,
                            GetManyAnswersInOrderWithMissingBlobsAsNullopt,
                            SizesGivesStoredLengthsInOrderWithMissingAsNullopt,
                            DamagedBytesAreNeverReturned, ConcurrentPutsOfTheSameChunk,
                            ConcurrentPutsOfDifferentChunks,
                            StartPutStoresPiecesOnlyWhenTheyHashToTheId);

}  // namespace bdn::conformance
