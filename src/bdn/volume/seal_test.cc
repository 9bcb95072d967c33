// Tests of SealEntries, the one sealing path of push and sync, with an in-memory EntrySource.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "bdn/base/mutex.h"
#include "bdn/volume/push.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

std::string Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Streams a string in pieces of at most `piece` bytes, as a network source delivers them.
class StringStream : public ByteStream {
 public:
  StringStream(std::string bytes, size_t piece) : bytes_(std::move(bytes)), piece_(piece) {}
  Result<size_t> Read(std::span<uint8_t> out) override {
    size_t n = std::min({out.size(), piece_, bytes_.size() - pos_});
    std::memcpy(out.data(), bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string bytes_;
  size_t piece_;
  size_t pos_ = 0;
};

// Files from a map; records what was opened and sealed; may offer earlier results for reuse.
class MapSource : public EntrySource {
 public:
  explicit MapSource(std::map<std::string, std::string> files) : files_(std::move(files)) {}
  Result<std::unique_ptr<ByteStream>> Open(size_t, const SealItem& item) override {
    opened.push_back(item.path);
    return std::unique_ptr<ByteStream>(std::make_unique<StringStream>(files_.at(item.path), 1000));
  }
  Result<std::optional<SealedFile>> Reuse(size_t, const SealItem& item) override {
    auto it = reusable.find(item.path);
    if (it == reusable.end()) return std::optional<SealedFile>();
    return std::optional<SealedFile>(it->second);
  }
  Status OnSealed(size_t, const SealItem& item, const SealedFile& file) override {
    MutexLock lock(mu_);
    sealed[item.path] = file;
    return Status::Ok();
  }
  std::vector<std::string> opened;
  std::map<std::string, SealedFile> reusable;
  std::map<std::string, SealedFile> sealed;

 private:
  std::map<std::string, std::string> files_;
  Mutex mu_;
};

std::vector<SealItem> ItemsOf(const std::map<std::string, std::string>& files) {
  std::vector<SealItem> items;
  items.push_back({.path = "d", .kind = EntryKind::kDirectory, .mode = 0755});
  for (const auto& [path, bytes] : files) {
    items.push_back(
        {.path = path, .kind = EntryKind::kFile, .mode = 0644, .size_bytes = bytes.size()});
  }
  std::sort(items.begin(), items.end(),
            [](const SealItem& a, const SealItem& b) { return a.path < b.path; });
  return items;
}

class SealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bdn-seal-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "d");
    files_ = {{"d/big", Random(5'000'000, 1)}, {"d/empty", ""}, {"d/small", "hello\n"}};
    for (const auto& [path, bytes] : files_) {
      std::ofstream(dir_ / path, std::ios::binary) << bytes;
      fs::permissions(dir_ / path, fs::perms(0644));
    }
    fs::permissions(dir_ / "d", fs::perms(0755));
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::map<std::string, std::string> files_;
};

TEST_F(SealTest, EntriesFromStreamsSealLikeTheSameDirectory) {
  MemChunkStore dir_store, stream_store;
  auto from_dir = SealDirectory(dir_, {}, dir_store, nullptr);
  ASSERT_TRUE(from_dir) << from_dir.error().message();
  MapSource source(files_);
  auto items = ItemsOf(files_);
  TransferCounters counters;
  auto from_streams = SealEntries(items, source, {}, stream_store, &counters);
  ASSERT_TRUE(from_streams) << from_streams.error().message();
  EXPECT_EQ(from_dir->digest, from_streams->digest);
  EXPECT_EQ(from_dir->manifest, from_streams->manifest);
  EXPECT_EQ(dir_store.size(), stream_store.size());
  EXPECT_EQ(counters.bytes_done.load(), 5'000'006u);
  EXPECT_EQ(counters.files_done.load(), 3u);
  ASSERT_EQ(source.sealed.size(), 3u);
  EXPECT_EQ(source.sealed["d/big"].layout, FileLayout::kIndexed);
  EXPECT_EQ(source.sealed["d/small"].layout, FileLayout::kSingleChunk);
  EXPECT_EQ(source.sealed["d/empty"].layout, FileLayout::kEmpty);
  EXPECT_EQ(source.sealed["d/big"].digest, Digest::Of(files_["d/big"]));
}

TEST_F(SealTest, ReusedFilesAreNotOpenedAndGiveTheSameVersion) {
  MemChunkStore store;
  MapSource first(files_);
  auto items = ItemsOf(files_);
  auto a = SealEntries(items, first, {}, store, nullptr);
  ASSERT_TRUE(a) << a.error().message();
  MapSource second(files_);
  second.reusable = {{"d/big", first.sealed["d/big"]}};
  auto b = SealEntries(items, second, {}, store, nullptr);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(a->digest, b->digest);
  EXPECT_EQ(second.opened, (std::vector<std::string>{"d/empty", "d/small"}));
  EXPECT_EQ(b->stats.chunks, a->stats.chunks);
}

TEST_F(SealTest, AStreamShorterThanItsEntryFailsTheSeal) {
  MemChunkStore store;
  auto files = files_;
  MapSource source(files);
  auto items = ItemsOf(files);
  for (auto& it : items) {
    if (it.path == "d/small") it.size_bytes = 7;  // the stream delivers 6
  }
  auto r = SealEntries(items, source, {}, store, nullptr);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
  EXPECT_EQ(r.error().message(), "file \"d/small\": the source delivered 6 bytes, expected 7");
}

TEST_F(SealTest, EntriesWithoutTheirParentDirectoryAreRefused) {
  MemChunkStore store;
  MapSource source(files_);
  auto items = ItemsOf(files_);
  items.erase(items.begin());  // "d"
  auto r = SealEntries(items, source, {}, store, nullptr);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(source.opened.empty()) << "checked before any file is read";
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace bdn
