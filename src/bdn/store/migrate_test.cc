// Tests of MigrateOldLayout over stores written in the old one-file-per-chunk layout by a small
// generator (chunks/<2 hex>/<64 hex>, raw bytes, as the store before packs wrote them): every blob
// ends up in packs and readable, damaged files are set aside, and a migration killed at any point
// finishes when run again.
#include "bdn/store/migrate.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "bdn/testing/test_util.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using testutil::RandomBytes;

// Writes `blobs` into `root` in the old layout, with the old layout's empty tmp/.
void WriteOldLayout(const fs::path& root, const std::vector<std::vector<uint8_t>>& blobs) {
  fs::create_directories(root / "tmp");
  for (const auto& b : blobs) {
    const std::string hex = Digest::Of(b).Hex();
    fs::create_directories(root / "chunks" / hex.substr(0, 2));
    std::ofstream f(root / "chunks" / hex.substr(0, 2) / hex, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
}

std::vector<std::vector<uint8_t>> SampleBlobs(size_t n, uint64_t seed) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < n; ++i) out.push_back(RandomBytes(1000 + 37 * i, seed + i));
  out.push_back({});                              // the empty blob
  out.push_back(std::vector<uint8_t>(50000, 3));  // compresses
  return out;
}

LocalChunkStore::Options Scratch() {
  LocalChunkStore::Options o;
  o.durability = LocalChunkStore::Durability::kNone;
  return o;
}

void ExpectAllReadable(const fs::path& root, const std::vector<std::vector<uint8_t>>& blobs) {
  auto s = LocalChunkStore::Open(root, Scratch());
  ASSERT_TRUE(s.has_value()) << s.error().message();
  for (const auto& b : blobs) {
    auto got = (*s)->Get(Digest::Of(b));
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, b);
  }
}

TEST(Migrate, EveryChunkFileEndsUpInPacksAndTheOldLayoutIsGone) {
  testutil::TempDir dir("bdn_migrate_test");
  const fs::path root = dir.path() / "store";
  auto blobs = SampleBlobs(300, 1);
  WriteOldLayout(root, blobs);
  ASSERT_TRUE(LocalChunkStore::IsOldLayout(root));
  EXPECT_EQ(LocalChunkStore::Open(root, Scratch()).error().code(), StatusCode::kFailedPrecondition);

  TransferCounters progress;
  auto r = MigrateOldLayout(root, Scratch(), &progress, 64 << 10);  // many small batches
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_TRUE(r->was_old_layout);
  EXPECT_EQ(r->blobs, blobs.size());
  uint64_t bytes = 0;
  for (const auto& b : blobs) bytes += b.size();
  EXPECT_EQ(r->bytes, bytes);
  EXPECT_EQ(r->corrupt, 0u);
  EXPECT_EQ(progress.files_total.load(), blobs.size());
  EXPECT_EQ(progress.files_done.load(), blobs.size());
  EXPECT_EQ(progress.bytes_done.load(), bytes);
  EXPECT_FALSE(fs::exists(root / "chunks"));
  EXPECT_FALSE(fs::exists(root / "tmp"));
  EXPECT_FALSE(LocalChunkStore::IsOldLayout(root));
  ExpectAllReadable(root, blobs);

  // Running it again finds nothing to do.
  r = MigrateOldLayout(root, Scratch(), nullptr);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->was_old_layout);
}

TEST(Migrate, DamagedAndForeignFilesAreSetAsideNotMigrated) {
  testutil::TempDir dir("bdn_migrate_test");
  const fs::path root = dir.path() / "store";
  auto blobs = SampleBlobs(20, 100);
  WriteOldLayout(root, blobs);
  // A chunk file whose bytes went bad, and a file that is not a chunk at all.
  const std::string bad = Digest::Of(blobs[3]).Hex();
  { std::ofstream(root / "chunks" / bad.substr(0, 2) / bad, std::ios::binary) << "garbage"; }
  { std::ofstream(root / "chunks" / "notes.txt") << "mine"; }
  auto r = MigrateOldLayout(root, Scratch(), nullptr);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->blobs, blobs.size() - 1);
  EXPECT_EQ(r->corrupt, 1u);
  EXPECT_EQ(r->ignored, 1u);
  EXPECT_TRUE(fs::exists(root / "corrupt" / bad));
  EXPECT_TRUE(fs::exists(root / "chunks.not-migrated" / "notes.txt"));
  EXPECT_FALSE(fs::exists(root / "chunks"));
  auto s = LocalChunkStore::Open(root, Scratch());
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_FALSE(*(*s)->Contains(Digest::Of(blobs[3])));
  blobs.erase(blobs.begin() + 3);
  s->reset();
  ExpectAllReadable(root, blobs);
}

// From an attacking helper: two migrations at once both copied every chunk file.
TEST(Migrate, ASecondMigrationWhileOneRunsIsRefusedAndChangesNothing) {
  testutil::TempDir dir("bdn_migrate_test");
  const fs::path root = dir.path() / "store";
  auto blobs = SampleBlobs(20, 200);
  WriteOldLayout(root, blobs);
  // The first one's lock, as its process holds it (flock is per open file description).
  int held = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  auto r = MigrateOldLayout(root, Scratch(), nullptr);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
  EXPECT_EQ(r.error().message(), "chunk store " + root.string() +
                                     ": another bdn store migrate is converting it; wait for it "
                                     "to end");
  EXPECT_TRUE(LocalChunkStore::IsOldLayout(root));
  EXPECT_FALSE(fs::exists(root / "packs"));
  ::close(held);
  r = MigrateOldLayout(root, Scratch(), nullptr);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->blobs, blobs.size());
  ExpectAllReadable(root, blobs);
}

TEST(Migrate, AMigrationKilledAtAnyPointFinishesWhenRunAgain) {
  auto blobs = SampleBlobs(400, 1000);
  std::mt19937_64 rng(7);
  int killed = 0;
  for (int round = 0; round < 5; ++round) {
    testutil::TempDir dir("bdn_migrate_test");
    const fs::path root = dir.path() / "store";
    WriteOldLayout(root, blobs);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Durable, as a real migration: a kill must never lose a blob whose file is gone.
      auto r = MigrateOldLayout(root, {}, nullptr, 32 << 10);
      ::_exit(r ? 0 : 1);
    }
    ::usleep(static_cast<useconds_t>(rng() % 150'000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) ++killed;
    auto r = MigrateOldLayout(root, Scratch(), nullptr);
    ASSERT_TRUE(r.has_value()) << r.error().message();
    EXPECT_FALSE(fs::exists(root / "chunks"));
    ExpectAllReadable(root, blobs);
  }
  EXPECT_GE(killed, 3) << "the kills came too late to test anything";
}

}  // namespace
}  // namespace bdn
