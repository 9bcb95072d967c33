// Tests of the local pack store's own promises: packs and their sealing, recovery after a writer
// dies (killed children), torn tails, the derived index (deleted and rebuilt), quarantined copies,
// compression, and several store objects (as several processes) on one directory.
#include "bdn/store/local_chunk_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "bdn/store/pack_file.h"
#include "bdn/store/store_test_util.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using testutil::RandomBytes;

std::vector<std::string> Names(const fs::path& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(suffix)) out.push_back(e.path().filename());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class LocalStore : public ::testing::Test {
 protected:
  fs::path root() const { return dir_.path() / "store"; }
  std::unique_ptr<LocalChunkStore> Open(LocalChunkStore::Options o = {}) {
    auto s = LocalChunkStore::Open(root(), o);
    EXPECT_TRUE(s.has_value()) << s.error().message();
    return s ? std::move(*s) : nullptr;
  }
  // Blobs of random bytes (not compressible), one per seed.
  static std::vector<std::vector<uint8_t>> Blobs(size_t n, size_t size, uint64_t seed) {
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < n; ++i) out.push_back(RandomBytes(size + i, seed + i));
    return out;
  }
  static void ExpectAllReadable(LocalChunkStore& s,
                                const std::vector<std::vector<uint8_t>>& blobs) {
    for (const auto& b : blobs) {
      auto got = s.Get(Digest::Of(b));
      ASSERT_TRUE(got.has_value()) << got.error().message();
      EXPECT_EQ(*got, b);
    }
  }
  // A store that also reads the packs other live store objects (processes) write, as a NodeCache.
  // On `follower_clock_`: it looks at the directories again from reads that hit once a second
  // of that clock.
  std::unique_ptr<LocalChunkStore> OpenFollower() {
    LocalChunkStore::Options o;
    o.read_others_open_packs = true;
    o.clock = follower_clock_;
    return Open(o);
  }
  // How many of this process's descriptors are of a deleted file whose name ends in `suffix`.
  static int DeletedFilesOpen(const std::string& suffix) {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = fs::read_symlink(e.path(), ec).string();
      n += !ec && target.ends_with(suffix + " (deleted)");
    }
    return n;
  }
  std::shared_ptr<testutil::FakeClock> follower_clock_ = std::make_shared<testutil::FakeClock>();
  static void PutAll(LocalChunkStore& s, const std::vector<std::vector<uint8_t>>& blobs) {
    for (const auto& b : blobs) ASSERT_OK(s.Put(Digest::Of(b), b));
  }
  // Puts `blobs` in a child process that then dies at once (_exit: no destructor seals its pack).
  void PutInAChildThatDies(const std::vector<std::vector<uint8_t>>& blobs) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto s = LocalChunkStore::Open(root());
      for (const auto& b : blobs) {
        if (!s.has_value() || !(*s)->Put(Digest::Of(b), b).ok()) ::_exit(1);
      }
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  testutil::TempDir dir_{"bdn_local_store_test"};
};

TEST_F(LocalStore, PacksAreSealedAtTheTargetSize) {
  LocalChunkStore::Options o;
  o.pack_target_bytes = 100'000;
  auto s = Open(o);
  auto blobs = Blobs(45, 10'000, 1);
  for (const auto& b : blobs) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
  // ~10 records per pack: sealed as they fill, the last one by Sync.
  EXPECT_EQ(Names(root() / "packs", ".pack").size(), 4u);
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(Names(root() / "packs", ".pack").size(), 5u);
  EXPECT_TRUE(Names(root() / "packs", ".open").empty());
  ExpectAllReadable(*s, blobs);
}

TEST_F(LocalStore, BlobsOfADeadWriterAreRecoveredByTheNextOpen) {
  auto blobs = Blobs(30, 5000, 10);
  // Killed before any Sync: one .open pack, no footer.
  PutInAChildThatDies(blobs);
  ASSERT_EQ(Names(root() / "packs", ".open").size(), 1u);
  auto s = Open();
  EXPECT_TRUE(Names(root() / "packs", ".open").empty());
  EXPECT_EQ(Names(root() / "packs", ".pack").size(), 1u);
  ExpectAllReadable(*s, blobs);
  // The recovered pack now has a valid footer of its own.
  const fs::path p = root() / "packs" / Names(root() / "packs", ".pack")[0];
  int fd = ::open(p.c_str(), O_RDONLY);
  auto footer = pack::ReadFooter(fd, fs::file_size(p), "pack");
  ::close(fd);
  ASSERT_TRUE(footer.has_value()) << footer.error().message();
  EXPECT_EQ(footer->size(), blobs.size());
}

TEST_F(LocalStore, ATornTailIsDroppedAndItsBlobsStoredAgain) {
  auto blobs = Blobs(10, 5000, 20);
  PutInAChildThatDies(blobs);
  const fs::path open = root() / "packs" / Names(root() / "packs", ".open").at(0);
  // The last record and a half are lost, and the bytes after them are garbage.
  const uint64_t size = fs::file_size(open);
  const uint64_t record = 64 + 5009;
  fs::resize_file(open, size - record - record / 2);
  {
    std::ofstream f(open, std::ios::binary | std::ios::app);
    f << std::string(3000, '\x17');
  }
  auto s = Open();
  for (size_t i = 0; i < blobs.size(); ++i) {
    const Digest id = Digest::Of(blobs[i]);
    if (i < 8) {
      ASSERT_TRUE(s->Get(id).has_value()) << i;
    } else {
      EXPECT_FALSE(*s->Contains(id)) << i;
      EXPECT_EQ(s->Get(id).error().code(), StatusCode::kNotFound);
      ASSERT_TRUE(s->Put(id, blobs[i]).ok());
    }
  }
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ExpectAllReadable(*s, blobs);
}

std::vector<uint8_t> FileBytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Regression: a sealed pack with a damaged footer was recovered like a dead writer's pack, cut
// at its first record that was not whole, losing every good record after it.
TEST_F(LocalStore, ASealedPackWithADamagedFooterAndARottenRecordKeepsEveryOtherBlob) {
  auto blobs = Blobs(20, 3000, 40);
  const size_t rotten = 7;
  fs::path pack_path;
  {
    auto s = Open();
    for (const auto& b : blobs) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
    ASSERT_TRUE(s->Sync().ok());
    ASSERT_TRUE(FlipStoredByte(*s, Digest::Of(blobs[rotten]), 1000).ok());
    pack_path = (*s->Locate(Digest::Of(blobs[0])))->pack_path;
  }
  ASSERT_EQ(Names(root() / "packs", ".pack").size(), 1u);
  {
    // A byte of the footer's third entry: the checksum no longer matches.
    const uint64_t size = fs::file_size(pack_path);
    const uint64_t entry = size - 64 - (blobs.size() - 2) * 64;
    std::fstream f(pack_path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(entry + 40));
    f.put('\x7f');
  }
  int fd = ::open(pack_path.c_str(), O_RDONLY);
  ASSERT_FALSE(pack::ReadFooter(fd, fs::file_size(pack_path), "pack").has_value());
  ::close(fd);
  const std::vector<uint8_t> damaged = FileBytes(pack_path);
  // Without the index, the next open reads the footers, and this one fails.
  fs::remove_all(root() / "index");
  auto s = Open();
  for (size_t i = 0; i < blobs.size(); ++i) {
    const Digest id = Digest::Of(blobs[i]);
    if (i == rotten) {
      EXPECT_FALSE(*s->Contains(id));
      EXPECT_EQ(s->Get(id).error().code(), StatusCode::kNotFound);
      continue;
    }
    auto got = s->Get(id);
    ASSERT_TRUE(got.has_value()) << i << ": " << got.error().message();
    EXPECT_EQ(*got, blobs[i]) << i;
  }
  // Nothing was cut or rewritten: the repaired pack is the damaged one with a new footer after
  // it, listing every whole record.
  const std::vector<uint8_t> now = FileBytes(pack_path);
  ASSERT_GT(now.size(), damaged.size());
  EXPECT_TRUE(std::equal(damaged.begin(), damaged.end(), now.begin()));
  fd = ::open(pack_path.c_str(), O_RDONLY);
  auto footer = pack::ReadFooter(fd, now.size(), "pack");
  ::close(fd);
  ASSERT_TRUE(footer.has_value()) << footer.error().message();
  EXPECT_EQ(footer->size(), blobs.size() - 1);
  // The rotten blob, pushed again, is readable; so is everything after another reopen.
  ASSERT_TRUE(s->Put(Digest::Of(blobs[rotten]), blobs[rotten]).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ExpectAllReadable(*s, blobs);
  ASSERT_TRUE(s->RebuildIndex().has_value());
  ExpectAllReadable(*s, blobs);
}

TEST_F(LocalStore, ALiveWritersOpenPackIsLeftAlone) {
  auto writer = Open();
  auto blobs = Blobs(5, 1000, 30);
  for (const auto& b : blobs) ASSERT_TRUE(writer->Put(Digest::Of(b), b).ok());
  // Another store object on the same directory (another process) must not take it for dead.
  auto reader = Open();
  EXPECT_EQ(Names(root() / "packs", ".open").size(), 1u);
  EXPECT_FALSE(*reader->Contains(Digest::Of(blobs[0])));
  ASSERT_TRUE(writer->Sync().ok());
  // Once sealed, a miss makes the reader look again.
  ExpectAllReadable(*reader, blobs);
}

TEST_F(LocalStore, OnlyAStoreThatReadsOthersOpenPacksSeesALiveWritersRecords) {
  auto writer = Open();
  auto blobs = Blobs(5, 1000, 40);
  PutAll(*writer, blobs);
  auto cache = OpenFollower();
  auto plain = Open();
  ExpectAllReadable(*cache, blobs);
  // A store whose answers a commit relies on never counts blobs that are not durable yet.
  std::vector<Digest> ids;
  for (const auto& b : blobs) ids.push_back(Digest::Of(b));
  auto missing = plain->FindMissing(ids);
  ASSERT_TRUE(missing.has_value()) << missing.error().message();
  EXPECT_EQ(*missing, ids);
  EXPECT_EQ(plain->Get(ids[0]).error().code(), StatusCode::kNotFound);
  // Records appended later are found by the next miss, from where the last scan stopped.
  auto more = Blobs(3, 2000, 50);
  PutAll(*writer, more);
  ExpectAllReadable(*cache, more);
  EXPECT_EQ(Names(root() / "packs", ".open").size(), 1u);  // never taken for a dead writer's
  EXPECT_EQ(plain->Get(Digest::Of(more[0])).error().code(), StatusCode::kNotFound);
}

TEST_F(LocalStore, ARecordOfAFollowedPackThatChangesIsNeverServed) {
  auto writer = Open();
  auto blobs = Blobs(2, 1000, 60);
  PutAll(*writer, blobs);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);
  // The bytes under a record found whole change (damage, or a writer that cut its pack back):
  // the read is verified, never served.
  const std::string open = Names(root() / "packs", ".open").at(0);
  UniqueFd fd(::open((root() / "packs" / open).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd);
  const uint64_t last_byte = pack::kPackHeaderBytes + pack::kRecordHeaderBytes + 999;
  uint8_t flipped = static_cast<uint8_t>(blobs[0][999] ^ 0x5a);
  ASSERT_EQ(::pwrite(fd.get(), &flipped, 1, static_cast<off_t>(last_byte)), 1);
  auto got = cache->Get(Digest::Of(blobs[0]));
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption) << got.error().message();
  ExpectAllReadable(*cache, {blobs[1]});
}

TEST_F(LocalStore, AFollowedPackSealedThenDeletedIsForgottenAtTheNextMiss) {
  auto writer = Open();
  auto blobs = Blobs(4, 1000, 70);
  PutAll(*writer, blobs);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);
  // Sealed and evicted (a region dropped whole) between two looks of the follower.
  ASSERT_OK(writer->Sync());
  auto sealed = Names(root() / "packs", ".pack");
  ASSERT_EQ(sealed.size(), 1u);
  ASSERT_OK(writer->DropPack(*pack::ParseHex16Name(sealed[0], ".pack")));
  // Until it looks again, the follower reads its descriptor of the deleted file: the same,
  // verified bytes.
  ExpectAllReadable(*cache, {blobs[0]});
  // A miss looks again: the pack is gone, and so are its blobs.
  EXPECT_EQ(cache->Get(Digest::Of(RandomBytes(10, 99))).error().code(), StatusCode::kNotFound);
  for (const auto& b : blobs) {
    EXPECT_EQ(cache->Get(Digest::Of(b)).error().code(), StatusCode::kNotFound);
  }
  // Stored again, in a new pack, they are found again.
  PutAll(*writer, blobs);
  ExpectAllReadable(*cache, blobs);
}

// A follower that only hits (no miss to make it look again) kept the descriptor of a pack
// another process deleted, and with it the pack's disk space, for as long as it ran. Reads that
// hit now look again once a second: the deleted pack's blobs are forgotten and its descriptor
// closed.
TEST_F(LocalStore, AFollowerThatOnlyHitsLetsGoOfADeletedPackWithinASecond) {
  auto writer = Open();
  auto blobs = Blobs(4, 1000, 75);
  PutAll(*writer, blobs);
  ASSERT_OK(writer->Sync());
  auto sealed = Names(root() / "packs", ".pack");
  ASSERT_EQ(sealed.size(), 1u);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);
  writer.reset();  // only the follower holds the pack open now
  ASSERT_OK(Open()->DropPack(*pack::ParseHex16Name(sealed[0], ".pack")));
  ExpectAllReadable(*cache, {blobs[0]});  // within the second: its descriptor, verified
  EXPECT_EQ(DeletedFilesOpen(sealed[0]), 1);
  // A mount's reads try GetNow first (page cache only): that is where its hits go.
  follower_clock_->Advance(std::chrono::seconds(1));
  EXPECT_EQ(cache->GetNow(Digest::Of(blobs[1]), 1 << 20), std::nullopt);
  EXPECT_EQ(DeletedFilesOpen(sealed[0]), 0);
  EXPECT_EQ(cache->Get(Digest::Of(blobs[0])).error().code(), StatusCode::kNotFound);
}

// From an attacking helper: a pack the follower began to follow while another process was
// writing it holds a descriptor of its own (besides the one reads use); once that pack was sealed
// and deleted, ReleaseDeleted (an idle mount's once-a-second check) closed only the other, and
// the idle process kept the file and its space until its next miss.
TEST_F(LocalStore, ReleaseDeletedClosesAFollowedPackDeletedAfterItWasSealed) {
  auto writer = Open();
  auto blobs = Blobs(3, 1000, 120);
  PutAll(*writer, blobs);  // in the writer's .open pack, which it holds locked
  ASSERT_EQ(Names(root() / "packs", ".open").size(), 1u);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);  // read as it is written: followed
  ASSERT_OK(writer->Sync());         // sealed: renamed to .pack
  writer.reset();
  const auto sealed = Names(root() / "packs", ".pack");
  ASSERT_EQ(sealed.size(), 1u);
  ASSERT_OK(Open()->DropPack(*pack::ParseHex16Name(sealed[0], ".pack")));
  ASSERT_GE(DeletedFilesOpen(sealed[0]), 1);
  cache->ReleaseDeleted();
  EXPECT_EQ(DeletedFilesOpen(sealed[0]), 0);
  EXPECT_EQ(cache->Get(Digest::Of(blobs[0])).error().code(), StatusCode::kNotFound);
}

// From a new user: `bdn gc` said it reclaimed space that a running mount kept, because the mount's
// store held open every pack whose footer it read at Open, packs of other volumes it never read
// included, and a store (unlike a cache) kept every pack deleted under it. ReleaseDeleted (once a
// second in a mount) now lets go of a deleted pack it never read from; one it read from it reads
// on from (docs/format.md "Garbage collection").
TEST_F(LocalStore, ReleaseDeletedClosesADeletedPackAStoreNeverReadFrom) {
  auto writer = Open();
  auto read = Blobs(3, 1000, 130);
  auto unread = Blobs(3, 1000, 131);
  PutAll(*writer, read);
  ASSERT_OK(writer->Sync());  // one pack each
  PutAll(*writer, unread);
  ASSERT_OK(writer->Sync());
  writer.reset();
  auto pack_of = [&](LocalChunkStore& s, const std::vector<uint8_t>& b) {
    auto at = s.Locate(Digest::Of(b));
    EXPECT_TRUE(at.has_value() && at->has_value());
    return at.has_value() && at->has_value() ? (*at)->pack_path.filename().string() : std::string();
  };
  auto reader = Open();
  ExpectAllReadable(*reader, read);
  const std::string read_pack = pack_of(*reader, read[0]);
  const std::string unread_pack = pack_of(*reader, unread[0]);
  ASSERT_NE(read_pack, unread_pack);
  auto deleter = Open();
  ASSERT_OK(deleter->DropPack(*pack::ParseHex16Name(read_pack, ".pack")));
  ASSERT_OK(deleter->DropPack(*pack::ParseHex16Name(unread_pack, ".pack")));
  ASSERT_EQ(DeletedFilesOpen(unread_pack), 1);  // held since the reader's Open
  reader->ReleaseDeleted();
  EXPECT_EQ(DeletedFilesOpen(unread_pack), 0);
  EXPECT_EQ(DeletedFilesOpen(read_pack), 1);
  ExpectAllReadable(*reader, read);  // read on from the pack it had read from
  EXPECT_EQ(reader->Get(Digest::Of(unread[0])).error().code(), StatusCode::kNotFound);
}

// From an attacking helper: a followed pack whose writer died with its first record damaged is
// recovered empty (removed); the blobs found in it before then pointed at a pack that was gone,
// every read of them went round 16 times and then returned an empty error, and a copy stored
// again was "already stored".
TEST_F(LocalStore, AFollowedPackRecoveredEmptyIsForgottenAndItsBlobsCanBeStoredAgain) {
  auto blobs = Blobs(3, 1000, 110);
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a writer that stays alive (its pack .open, locked) until told to die
    auto w = LocalChunkStore::Open(root());
    for (const auto& b : blobs) {
      if (!w.has_value() || !(*w)->Put(Digest::Of(b), b).ok()) ::_exit(1);
    }
    char c = 0;
    if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(2);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);
  // The first record's header is damaged, then the writer dies without sealing.
  const std::string open = Names(root() / "packs", ".open").at(0);
  UniqueFd fd(::open((root() / "packs" / open).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd);
  const uint8_t junk[8] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04};
  ASSERT_EQ(::pwrite(fd.get(), junk, sizeof junk, static_cast<off_t>(pack::kPackHeaderBytes + 4)),
            static_cast<ssize_t>(sizeof junk));
  fd.Reset();
  ASSERT_EQ(::write(go[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int f : {ready[0], ready[1], go[0], go[1]}) ::close(f);
  // A miss looks again: the dead writer's pack holds nothing whole and is removed.
  EXPECT_EQ(cache->Get(Digest::Of(RandomBytes(10, 98))).error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Names(root() / "packs", ".open").empty());
  for (const auto& b : blobs) {
    auto got = cache->Get(Digest::Of(b));
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code(), StatusCode::kNotFound) << got.error().message();
  }
  // Fetched again, they are kept again.
  PutAll(*cache, blobs);
  ExpectAllReadable(*cache, blobs);
  ASSERT_OK(cache->Sync());
  auto reopened = OpenFollower();
  ExpectAllReadable(*reopened, blobs);
}

TEST_F(LocalStore, AFollowedPackSealedByItsWriterIsReadFromItsFooter) {
  auto writer = Open();
  auto blobs = Blobs(3, 1000, 80);
  PutAll(*writer, blobs);
  auto cache = OpenFollower();
  ExpectAllReadable(*cache, blobs);
  ASSERT_OK(writer->Sync());
  auto more = Blobs(2, 3000, 90);
  PutAll(*writer, more);
  ASSERT_OK(writer->Sync());
  // The miss of the new blobs lists the directory: the first pack is now sealed (adopted from
  // its footer), the second is read from its footer; every blob reads back.
  ExpectAllReadable(*cache, more);
  ExpectAllReadable(*cache, blobs);
  auto located = cache->Locate(Digest::Of(blobs[0]));
  ASSERT_TRUE(located.has_value() && located->has_value());
  EXPECT_EQ((*located)->pack_path.extension(), ".pack");
}

TEST_F(LocalStore, DeletedIndexIsRebuiltFromThePackFootersOnOpen) {
  LocalChunkStore::Options o;
  o.pack_target_bytes = 50'000;
  o.loose_packs_per_table = 2;
  auto s = Open(o);
  auto blobs = Blobs(100, 3000, 40);
  for (const auto& b : blobs) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
  ASSERT_TRUE(s->Sync().ok());
  ASSERT_FALSE(Names(root() / "index", ".idx").empty());
  s.reset();
  fs::remove_all(root() / "index");
  s = Open(o);
  EXPECT_EQ(Names(root() / "index", ".idx").size(), 1u);
  ExpectAllReadable(*s, blobs);
  auto report = s->RebuildIndex();
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->blobs, blobs.size());
  EXPECT_EQ(report->packs, Names(root() / "packs", ".pack").size());
  EXPECT_EQ(report->tables_replaced, 1u);
  EXPECT_EQ(Names(root() / "index", ".idx").size(), 1u);
  ExpectAllReadable(*s, blobs);
}

TEST_F(LocalStore, APackOfManySmallBlobsGetsItsTableAtSyncNotAtTheNextOpen) {
  // One pack is below loose_packs_per_table, but its 200 blobs reach loose_blobs_per_table: the
  // table is written by the Sync, so the next Open reads no footer.
  LocalChunkStore::Options o;
  o.loose_blobs_per_table = 200;
  auto s = Open(o);
  auto blobs = Blobs(200, 100, 77);
  for (const auto& b : blobs) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(Names(root() / "packs", ".pack").size(), 1u);
  EXPECT_EQ(Names(root() / "index", ".idx").size(), 1u);
  // 199 blobs in a second pack: not yet.
  auto more = Blobs(199, 100, 5000);
  for (const auto& b : more) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(Names(root() / "index", ".idx").size(), 1u);
  s.reset();
  s = Open(o);
  ExpectAllReadable(*s, blobs);
  ExpectAllReadable(*s, more);
}

TEST_F(LocalStore, ManyPublishesMergeIntoFewTables) {
  LocalChunkStore::Options o;
  o.loose_packs_per_table = 1;
  auto s = Open(o);
  std::vector<std::vector<uint8_t>> all;
  for (int round = 0; round < 40; ++round) {
    auto blobs = Blobs(20, 100, 1000 * round);
    for (const auto& b : blobs) ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
    ASSERT_TRUE(s->Sync().ok());
    all.insert(all.end(), blobs.begin(), blobs.end());
  }
  EXPECT_LE(Names(root() / "index", ".idx").size(), 8u);
  s.reset();
  s = Open(o);
  ExpectAllReadable(*s, all);
}

TEST_F(LocalStore, ACorruptCopyIsSetAsideForGoodAndThePushOfTheSameDataRepairsIt) {
  auto s = Open();
  auto data = RandomBytes(20000, 50);
  const Digest id = Digest::Of(data);
  ASSERT_TRUE(s->Put(id, data).ok());
  ASSERT_TRUE(s->Sync().ok());
  auto bad = *s->Locate(id);
  ASSERT_TRUE(bad.has_value());
  ASSERT_TRUE(FlipStoredByte(*s, id, 100).ok());
  auto got = s->Get(id);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(
      got.error().message().ends_with(" in pack " + bad->pack_path.string() +
                                      " at offset 16; set aside, push the data again to repair"))
      << got.error().message();
  EXPECT_FALSE(*s->Contains(id));
  EXPECT_EQ(s->Get(id).error().code(), StatusCode::kNotFound);
  // Another store object opened now (another process) does not use the bad copy either.
  {
    auto other = Open();
    EXPECT_FALSE(*other->Contains(id));
  }
  ASSERT_TRUE(s->Put(id, data).ok());
  ASSERT_TRUE(s->Sync().ok());
  auto good = *s->Locate(id);
  ASSERT_TRUE(good.has_value());
  EXPECT_NE(good->pack_path, bad->pack_path);
  ASSERT_TRUE(s->Get(id).has_value());
  s.reset();
  // After a reopen, and after the index is rebuilt, the good copy is the one found.
  s = Open();
  EXPECT_EQ(*s->Get(id), data);
  ASSERT_TRUE(s->RebuildIndex().has_value());
  EXPECT_EQ(*s->Get(id), data);
  EXPECT_EQ((*s->Locate(id))->pack_path, good->pack_path);
}

// GetNow: Get's bytes once this process has the pack open and the record in the page cache;
// nullopt for a blob it does not hold, one over max_bytes, and a damaged copy (which Get then
// reports and sets aside); compressed blobs come back decoded.
TEST_F(LocalStore, GetNowAnswersFromOpenPacksInThePageCacheOnly) {
  auto s = Open();
  auto data = RandomBytes(20000, 70);
  std::vector<uint8_t> zeros(50000, 0);  // stored with zstd
  const Digest id = Digest::Of(data), zid = Digest::Of(zeros);
  ASSERT_TRUE(s->Put(id, data).ok());
  ASSERT_TRUE(s->Put(zid, zeros).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ASSERT_TRUE(s->Get(id).has_value());  // opens the pack, if the open did not
  auto got = s->GetNow(id, 1 << 20);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, data);
  got = s->GetNow(zid, 1 << 20);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, zeros);
  EXPECT_FALSE(s->GetNow(id, 19999).has_value());
  EXPECT_FALSE(s->GetNow(Digest::Of("absent"), 1 << 20).has_value());
  ASSERT_TRUE(FlipStoredByte(*s, id, 100).ok());
  EXPECT_FALSE(s->GetNow(id, 1 << 20).has_value());
  EXPECT_EQ(s->Get(id).error().code(), StatusCode::kCorruption);
  EXPECT_FALSE(s->GetNow(id, 1 << 20).has_value());  // set aside
  EXPECT_EQ(s->Get(id).error().code(), StatusCode::kNotFound);
}

TEST_F(LocalStore, WithTwoCopiesADamagedOneFallsBackToTheOther) {
  auto data = RandomBytes(9000, 60);
  const Digest id = Digest::Of(data);
  // Two store objects each store the blob (two concurrent pushes in two processes).
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a->Put(id, data).ok());
  ASSERT_TRUE(b->Put(id, data).ok());
  ASSERT_TRUE(a->Sync().ok());
  ASSERT_TRUE(b->Sync().ok());
  a.reset();
  b.reset();
  auto s = Open();
  ASSERT_EQ(s->Stats()->blobs, 2u);
  ASSERT_TRUE(FlipStoredByte(*s, id, 5).ok());
  auto got = s->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
}

TEST_F(LocalStore, CompressibleBlobsAreStoredWithZstd) {
  auto s = Open();
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "{\"layer\": " + std::to_string(i % 40) + ", \"dtype\": \"bf16\"}\n";
  std::vector<uint8_t> data(text.begin(), text.end());
  const Digest id = Digest::Of(data);
  ASSERT_TRUE(s->Put(id, data).ok());
  auto where = *s->Locate(id);
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->loc.codec, pack::Codec::kZstd);
  EXPECT_LT(where->loc.stored_bytes, data.size() / 5);
  EXPECT_EQ(where->loc.raw_bytes, data.size());
  EXPECT_EQ(*s->Get(id), data);
  // Turned off: raw.
  s.reset();
  fs::remove_all(root());
  LocalChunkStore::Options o;
  o.codec.min_saving = 1.0;
  s = Open(o);
  ASSERT_TRUE(s->Put(id, data).ok());
  EXPECT_EQ((*s->Locate(id))->loc.codec, pack::Codec::kNone);
}

TEST_F(LocalStore, SizesAreRawLengthsFromTheIndexWithoutReadingTheBlobs) {
  auto s = Open();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "{\"layer\": " + std::to_string(i % 40) + "}\n";
  std::vector<uint8_t> zipped(text.begin(), text.end());  // stored with zstd: raw length counts
  auto plain = RandomBytes(30000, 77);
  const Digest zid = Digest::Of(zipped), pid = Digest::Of(plain),
               absent = Digest::Of(RandomBytes(5, 1));
  ASSERT_TRUE(s->Put(zid, zipped).ok());
  ASSERT_TRUE(s->Put(pid, plain).ok());
  ASSERT_TRUE(s->Sync().ok());
  ASSERT_EQ((*s->Locate(zid))->loc.codec, pack::Codec::kZstd);
  // A damaged copy still reports its indexed length (Sizes reads no blob; Get refuses it).
  ASSERT_TRUE(FlipStoredByte(*s, pid, 100).ok());
  const std::vector<Digest> ids{pid, absent, zid};
  EXPECT_EQ(*s->Sizes(ids), (BlobSizes{plain.size(), std::nullopt, zipped.size()}));
  // Another process's sealed pack is seen on a miss, as by Get.
  auto other = Open();
  auto more = RandomBytes(4000, 78);
  const Digest mid = Digest::Of(more);
  EXPECT_EQ(*s->Sizes(std::vector<Digest>{mid}), (BlobSizes{std::nullopt}));
  ASSERT_TRUE(other->Put(mid, more).ok());
  ASSERT_TRUE(other->Sync().ok());
  EXPECT_EQ(*s->Sizes(std::vector<Digest>{mid}), (BlobSizes{more.size()}));
}

TEST_F(LocalStore, AnUploadStreamsIntoAPackWithoutBlockingPutsOrSync) {
  auto s = Open();
  auto data = RandomBytes(600000, 90);
  const Digest id = Digest::Of(data);
  auto w = s->StartPut(id);
  ASSERT_TRUE(w.has_value()) << w.error().message();
  // More than an upload holds in memory (a chunk's bound) arrived: in a pack already (no
  // temporary file), invisible, and neither a Put nor a Sync waits for the rest.
  ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).first(270000)).ok());
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(root() / "packs"))
    files.push_back(e.path().extension());
  EXPECT_EQ(files, std::vector<std::string>{".open"});
  EXPECT_FALSE(fs::exists(root() / "tmp"));
  EXPECT_FALSE(*s->Contains(id));
  auto other = RandomBytes(5000, 91);
  ASSERT_TRUE(s->Put(Digest::Of(other), other).ok());
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(*s->Get(Digest::Of(other)), other);
  ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).subspan(270000)).ok());
  EXPECT_EQ(*(*w)->Commit(), PutOutcome::kStored);
  EXPECT_EQ(*s->Get(id), data);
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  EXPECT_EQ(*s->Get(id), data);
  EXPECT_EQ((*s->Locate(id))->loc.codec, pack::Codec::kNone);
}

// An upload of a chunk (up to the chunker's 256 KiB bound) is stored as a Put stores it:
// compressed where zstd saves enough, in pieces or not; nothing of it is written before Commit,
// and bytes that do not hash to the id write nothing at all.
TEST_F(LocalStore, AnUploadedChunkIsCompressedLikeAPut) {
  auto s = Open();
  std::vector<uint8_t> text;
  for (int i = 0; text.size() < 200000; ++i) {
    std::string line = "tensor " + std::to_string(i % 97) + " weight bias\n";
    text.insert(text.end(), line.begin(), line.end());
  }
  const Digest id = Digest::Of(text);
  auto w = s->StartPut(id);
  ASSERT_TRUE(w.has_value()) << w.error().message();
  ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(text).first(70000)).ok());
  ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(text).subspan(70000)).ok());
  EXPECT_FALSE(fs::exists(root() / "packs") && !fs::is_empty(root() / "packs"));
  EXPECT_EQ(*(*w)->Commit(), PutOutcome::kStored);
  EXPECT_EQ(*s->Get(id), text);
  auto where = s->Locate(id);
  ASSERT_TRUE(where.has_value() && *where);
  EXPECT_EQ((*where)->loc.codec, pack::Codec::kZstd);
  EXPECT_LT((*where)->loc.stored_bytes, text.size() / 4);

  auto random = RandomBytes(100000, 94);
  auto bad = s->StartPut(Digest::Of(random));
  random[5] ^= 1;
  ASSERT_TRUE((*bad)->Append(random).ok());
  EXPECT_EQ((*bad)->Commit().error().code(), StatusCode::kCorruption);
  random[5] ^= 1;
  EXPECT_FALSE(*s->Contains(Digest::Of(random)));
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  EXPECT_EQ(*s->Get(id), text);
}

TEST_F(LocalStore, AnUploadCutOffByADeadWriterLeavesATornTailThatOpenDrops) {
  auto data = RandomBytes(300000, 92);
  const Digest id = Digest::Of(data);
  auto before = RandomBytes(7000, 93);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = LocalChunkStore::Open(root());
    bool ok = s.has_value() && (*s)->Put(Digest::Of(before), before).ok();
    auto w = ok ? (*s)->StartPut(id) : Result<std::unique_ptr<BlobWriter>>(Err(InternalError("x")));
    ok = ok && w.has_value() && (*w)->Append(std::span<const uint8_t>(data).first(270000)).ok();
    ::_exit(ok ? 0 : 1);  // dies mid-upload, as kill -9 would
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto s = Open();
  EXPECT_EQ(*s->Get(Digest::Of(before)), before);  // the whole record before it is kept
  EXPECT_FALSE(*s->Contains(id));
  // Uploaded again: stored once, readable.
  auto w = s->StartPut(id);
  ASSERT_TRUE((*w)->Append(data).ok());
  EXPECT_EQ(*(*w)->Commit(), PutOutcome::kStored);
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(*s->Get(id), data);
}

TEST_F(LocalStore, AForkedChildNeverWritesIntoItsParentsOpenPack) {
  // bdn volume mount opens its stores, reads (a node cache writes), then daemonizes: parent and
  // child each hold the same open pack. Only its creator may append to it or seal it.
  auto s = Open();
  auto a = RandomBytes(20000, 94);
  ASSERT_TRUE(s->Put(Digest::Of(a), a).ok());  // the parent's open pack
  auto b = RandomBytes(30000, 95);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    bool ok = s->Put(Digest::Of(b), b).ok() && s->Sync().ok();
    s.reset();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  s.reset();  // the parent seals its pack
  s = Open();
  EXPECT_EQ(*s->Get(Digest::Of(a)), a);
  EXPECT_EQ(*s->Get(Digest::Of(b)), b);
  auto stats = s->Stats();
  ASSERT_TRUE(stats.has_value()) << stats.error().message();  // every footer reads
  EXPECT_EQ(stats->packs, 2u);
  EXPECT_EQ(stats->blobs, 2u);
}

TEST_F(LocalStore, ConcurrentPutsWhileAnotherThreadSyncs) {
  auto s = Open();
  std::vector<std::vector<std::vector<uint8_t>>> per_thread;
  for (int t = 0; t < 6; ++t) per_thread.push_back(Blobs(200, 2000, 10'000 * (t + 1)));
  std::atomic<bool> done{false};
  std::thread syncer([&] {
    while (!done) ASSERT_TRUE(s->Sync().ok());
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 6; ++t) {
    writers.emplace_back([&, t] {
      for (const auto& b : per_thread[t]) {
        ASSERT_TRUE(s->Put(Digest::Of(b), b).ok());
        // A blob this thread stored is readable at once.
        ASSERT_TRUE(s->Get(Digest::Of(b)).has_value());
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  syncer.join();
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_TRUE(Names(root() / "packs", ".open").empty());
  s.reset();
  s = Open();
  for (const auto& blobs : per_thread) ExpectAllReadable(*s, blobs);
}

TEST_F(LocalStore, AnOldLayoutStoreIsRefusedNamingTheMigrateCommand) {
  fs::create_directories(root() / "chunks" / "ab");
  std::ofstream(root() / "chunks" / "ab" / "abcd") << "x";
  LocalChunkStore::Options o;
  o.migrate_command = "bdn store migrate --data /x";
  auto s = LocalChunkStore::Open(root(), o);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.error().message(), "chunk store " + root().string() +
                                     ": in the old one-file-per-chunk layout (chunks/); convert it "
                                     "with: bdn store migrate --data /x");
  // An old store that never held a chunk has nothing to convert.
  fs::remove(root() / "chunks" / "ab" / "abcd");
  fs::create_directories(root() / "tmp");
  auto fresh = Open();
  EXPECT_FALSE(fs::exists(root() / "chunks"));
  EXPECT_FALSE(fs::exists(root() / "tmp"));
}

TEST_F(LocalStore, AnEmptyOldLayoutIsRemovedWithoutFollowingASymlinkInIt) {
  // The old code's empty chunks/ and tmp/ go, relative to the store's directory: a tmp that is a
  // symlink to a directory elsewhere loses the link, never what the link points at.
  const fs::path elsewhere = root().parent_path() / (root().filename().string() + "-elsewhere");
  fs::create_directories(elsewhere);
  std::ofstream(elsewhere / "keep") << "x";
  fs::create_directories(root() / "chunks" / "ab");
  fs::create_directory_symlink(elsewhere, root() / "tmp");
  fs::create_directory_symlink(elsewhere, root() / "chunks" / "ab" / "link");
  auto s = Open();
  EXPECT_FALSE(fs::exists(root() / "chunks"));
  EXPECT_FALSE(fs::is_symlink(root() / "tmp"));
  EXPECT_TRUE(fs::exists(elsewhere / "keep"));
  fs::remove_all(elsewhere);
}

TEST_F(LocalStore, AStoreOfAnotherUserIsRefusedBeforeItsOldLayoutIsRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  fs::create_directories(root() / "chunks" / "ab");
  ASSERT_EQ(::chown(root().c_str(), 65534, 65534), 0);
  auto s = LocalChunkStore::Open(root(), LocalChunkStore::Options{});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kPermissionDenied) << s.error().message();
  EXPECT_TRUE(fs::is_directory(root() / "chunks" / "ab"));  // nothing changed in it
  ASSERT_EQ(::chown(root().c_str(), 0, 0), 0);
}

TEST_F(LocalStore, EmptyBlobSurvivesAReopen) {
  auto s = Open();
  const Digest empty = Digest::Of(std::string_view());
  ASSERT_TRUE(s->Put(empty, {}).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  auto got = s->Get(empty);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE(got->empty());
}

// A store on a tmpfs of `bytes` the test mounts (root only; skipped elsewhere): a real full disk.
class FullDiskStore : public LocalStore {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    fs::create_directories(small());
    const std::string opts = "size=" + std::to_string(kDiskBytes);
    if (::mount("tmpfs", small().c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(small().c_str(), MNT_DETACH);
  }
  fs::path small() const { return dir_.path() / "small"; }
  fs::path store_root() const { return small() / "store"; }
  uint64_t FreeBytes() const {
    struct statvfs v;
    EXPECT_EQ(::statvfs(small().c_str(), &v), 0);
    return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  }
  // Fills what is left of the disk with a file.
  void Fill() const {
    std::ofstream f(small() / "filler", std::ios::binary);
    std::vector<char> block(64 << 10, 'x');
    while (f.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  static constexpr uint64_t kDiskBytes = 4 << 20;
  bool mounted_ = false;
};

TEST_F(FullDiskStore, AWriterThatFillsTheDiskDiscardsItsOpenPacksAndKeepsTheSealedOnes) {
  LocalChunkStore::Options o;
  o.pack_target_bytes = 1 << 20;
  o.max_open_packs = 1;
  auto opened = LocalChunkStore::Open(store_root(), o);
  ASSERT_OK(opened);
  auto& s = **opened;
  const uint64_t free_before = FreeBytes();
  std::vector<std::vector<uint8_t>> stored;
  Status failed;
  for (uint64_t seed = 1; failed.ok(); ++seed) {
    auto b = RandomBytes(100'000, seed);
    failed = s.Put(Digest::Of(b), b);
    if (failed.ok()) stored.push_back(std::move(b));
  }
  EXPECT_STATUS(failed, kFailedPrecondition, "chunk b3:");
  EXPECT_NE(failed.message().find(": No space left on device"), std::string::npos)
      << failed.message();
  const auto sealed = Names(store_root() / "packs", ".pack");
  ASSERT_GE(sealed.size(), 2u);  // sealed as they filled: visible to others, kept
  ASSERT_EQ(Names(store_root() / "packs", ".open").size(), 1u);
  auto discarded = s.DiscardAfterFullDisk();
  ASSERT_OK(discarded);
  EXPECT_TRUE(discarded->disk_full);
  EXPECT_EQ(discarded->packs, 1u);
  EXPECT_GT(discarded->bytes, 0u);
  EXPECT_TRUE(Names(store_root() / "packs", ".open").empty());
  EXPECT_EQ(Names(store_root() / "packs", ".pack"), sealed);
  // The space of the open pack is back; that of the sealed packs is not (a GC reclaims them).
  EXPECT_GE(FreeBytes(), discarded->bytes);
  EXPECT_LT(FreeBytes(), free_before);
  // The sealed packs' blobs are readable; the open pack's count as missing.
  size_t readable = 0, missing = 0;
  for (const auto& b : stored) {
    auto got = s.Get(Digest::Of(b));
    if (got) {
      EXPECT_EQ(*got, b);
      ++readable;
    } else {
      EXPECT_STATUS(got, kNotFound, "chunk " + Digest::Of(b).ToString() + ": not in store");
      ++missing;
    }
  }
  EXPECT_GT(readable, 0u);
  EXPECT_GT(missing, 0u);
  ASSERT_OK(s.Sync());
  // Another process sees the same.
  auto other = LocalChunkStore::Open(store_root(), o);
  ASSERT_OK(other);
  for (const auto& b : stored) {
    EXPECT_EQ((*other)->Get(Digest::Of(b)).has_value(), s.Get(Digest::Of(b)).has_value());
  }
}

TEST_F(FullDiskStore, WithoutAFullDiskNothingIsDiscarded) {
  auto opened = LocalChunkStore::Open(store_root(), LocalChunkStore::Options{});
  ASSERT_OK(opened);
  auto b = RandomBytes(100'000, 7);
  ASSERT_OK((*opened)->Put(Digest::Of(b), b));
  auto discarded = (*opened)->DiscardAfterFullDisk();
  ASSERT_OK(discarded);
  EXPECT_FALSE(discarded->disk_full);
  EXPECT_EQ(discarded->packs, 0u);
  EXPECT_EQ(Names(store_root() / "packs", ".open").size(), 1u);  // kept for the next push
  ASSERT_OK((*opened)->Get(Digest::Of(b)));
}

TEST_F(FullDiskStore, AnUploadsPackThatASyncCoveredIsNotDiscarded) {
  LocalChunkStore::Options o;
  auto opened = LocalChunkStore::Open(store_root(), o);
  ASSERT_OK(opened);
  auto& s = **opened;
  // An upload holds its pack across a Sync, which fdatasyncs the records before it: a commit may
  // name them.
  auto big = RandomBytes(400'000, 2);
  auto w = s.StartPut(Digest::Of(big));
  ASSERT_OK(w);
  ASSERT_OK((*w)->Append(std::span<const uint8_t>(big).first(300'000)));
  ASSERT_OK(s.Sync());
  Fill();
  Status failed = (*w)->Append(std::span<const uint8_t>(big).subspan(300'000));
  if (failed.ok()) {
    auto committed = (*w)->Commit();
    if (!committed) failed = committed.error();
  }
  EXPECT_STATUS(failed, kFailedPrecondition, "chunk " + Digest::Of(big).ToString());
  w->reset();
  auto discarded = s.DiscardAfterFullDisk();
  ASSERT_OK(discarded);
  EXPECT_TRUE(discarded->disk_full);
  EXPECT_EQ(discarded->packs, 0u);
  EXPECT_EQ(Names(store_root() / "packs", ".open").size(), 1u);
}

TEST_F(FullDiskStore, AGcDoomIsPublishedOnAFullDisk) {
  LocalChunkStore::Options o;
  o.claims = ClaimMode::kProcessFile;
  auto opened = LocalChunkStore::Open(store_root(), o);
  ASSERT_OK(opened);
  auto& s = **opened;
  ASSERT_TRUE(fs::exists(store_root() / "gc" / "doomed.reserve"));
  Fill();
  ASSERT_EQ(FreeBytes(), 0u);
  const std::vector<uint64_t> doom = {0x1234, 0xabcd};
  ASSERT_OK(s.PublishDoom(doom));
  std::ifstream in(store_root() / "gc" / "doomed");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "0000000000001234\n000000000000abcd\n");
  EXPECT_FALSE(fs::exists(store_root() / "gc" / ".doomed.tmp"));
  ASSERT_OK(s.ClearDoom());
  EXPECT_FALSE(fs::exists(store_root() / "gc" / "doomed"));
  // No space for a new reserve yet: taken once there is.
  EXPECT_FALSE(fs::exists(store_root() / "gc" / "doomed.reserve"));
  fs::remove(small() / "filler");
  ASSERT_OK(s.PublishDoom(doom));
  ASSERT_OK(s.ClearDoom());
  EXPECT_EQ(fs::file_size(store_root() / "gc" / "doomed.reserve"), 256u << 10);
}

// A doom cut back to its front (a GC on a full disk falling back to the packs it deletes, which
// it dooms first) needs no block: it is cut in place.
TEST_F(FullDiskStore, ADoomCutToItsFrontIsPublishedOnAFullDisk) {
  LocalChunkStore::Options o;
  o.claims = ClaimMode::kProcessFile;
  auto opened = LocalChunkStore::Open(store_root(), o);
  ASSERT_OK(opened);
  auto& s = **opened;
  Fill();
  const std::vector<uint64_t> doom = {0x1234, 0xabcd, 0x5678};
  ASSERT_OK(s.PublishDoom(doom));
  // The reserve's blocks past the doom are free again: taken, so that nothing is left to write a
  // new file with, and only a cut can publish the next doom.
  {
    std::ofstream more(small() / "more", std::ios::binary);
    std::vector<char> block(4096, 'y');
    while (more.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  ASSERT_EQ(FreeBytes(), 0u);
  ASSERT_OK(s.PublishDoom(std::span<const uint64_t>(doom).first(1)));
  std::ifstream in(store_root() / "gc" / "doomed");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "0000000000001234\n");
  // A doom that is not the front of the one before needs a new file: none on this disk.
  const std::vector<uint64_t> other = {0xabcd};
  EXPECT_STATUS(s.PublishDoom(other), kFailedPrecondition, "gc doom ");
  ASSERT_OK(s.ClearDoom());
  EXPECT_FALSE(fs::exists(store_root() / "gc" / "doomed"));
}

// The reserve is written only when it is this user's regular file with no other name: a hard
// link (a `cp -al` copy of the store shares it) is replaced, at open and when a doom is
// published, and the other name's bytes stay as they were.
TEST_F(LocalStore, AGcReserveWithAnotherNameIsReplacedNotWrittenThrough) {
  LocalChunkStore::Options o;
  o.claims = ClaimMode::kProcessFile;
  const fs::path reserve = root() / "gc" / "doomed.reserve";
  const fs::path victim = dir_.path() / "victim";
  const auto bytes = RandomBytes(300'000, 9);
  auto victim_bytes = [&] {
    std::ifstream in(victim, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  };
  auto plant = [&] {
    {
      std::ofstream out(victim, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
    fs::remove(reserve);
    fs::create_hard_link(victim, reserve);
    ASSERT_EQ(fs::hard_link_count(victim), 2u);
  };
  {
    auto s = Open(o);
    ASSERT_NE(s, nullptr);
  }
  // At open.
  plant();
  auto s = Open(o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(victim_bytes(), bytes);
  EXPECT_EQ(fs::hard_link_count(victim), 1u);
  EXPECT_EQ(fs::hard_link_count(reserve), 1u);
  EXPECT_EQ(fs::file_size(reserve), 256u << 10);
  // Planted after open: the doom is written anew, not into it.
  plant();
  const std::vector<uint64_t> doom = {0x1234, 0xabcd};
  ASSERT_OK(s->PublishDoom(doom));
  EXPECT_EQ(victim_bytes(), bytes);
  EXPECT_EQ(fs::hard_link_count(victim), 1u);
  std::ifstream in(root() / "gc" / "doomed");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "0000000000001234\n000000000000abcd\n");
  // A published doom with another name is not cut in place either.
  fs::create_hard_link(root() / "gc" / "doomed", dir_.path() / "doom-link");
  ASSERT_OK(s->PublishDoom(std::span<const uint64_t>(doom).first(1)));
  std::ifstream link(dir_.path() / "doom-link");
  std::string linked((std::istreambuf_iterator<char>(link)), std::istreambuf_iterator<char>());
  EXPECT_EQ(linked, "0000000000001234\n000000000000abcd\n");
  ASSERT_OK(s->ClearDoom());
  EXPECT_EQ(fs::hard_link_count(reserve), 1u);
  EXPECT_EQ(fs::file_size(reserve), 256u << 10);
  EXPECT_EQ(victim_bytes(), bytes);
}

}  // namespace
}  // namespace bdn
