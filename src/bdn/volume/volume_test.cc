// Tests of the volume operations against the in-memory store and a real SQLite registry.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "bdn/base/clock.h"
#include "bdn/base/fd.h"
#include "bdn/format/chunk_index.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/volume/compare.h"
#include "bdn/volume/pull.h"
#include "bdn/volume/push.h"
#include "bdn/volume/resolve.h"
#include "bdn/volume/version_check.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

// A store in front of a MemChunkStore that counts Get and GetMany calls, can claim to prefer
// batches (as a remote tier does), and can lack chunks (Get: NotFound; GetMany: nullopt).
class CountingStore : public ChunkStore {
 public:
  CountingStore(std::shared_ptr<MemChunkStore> inner, bool batches)
      : inner_(std::move(inner)), batches_(batches) {}
  Result<bool> Contains(const Digest& id) override { return inner_->Contains(id); }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return inner_->Sizes(ids); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return inner_->Put(id, data);
  }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    if (missing.contains(id))
      return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
    return inner_->Get(id);
  }
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    ++get_manys;
    ids_in_batches += ids.size();
    BDN_ASSIGN_OR_RETURN(BlobBatch got, inner_->GetMany(ids));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (missing.contains(ids[i])) got[i].reset();
    }
    return got;
  }
  bool PrefersBatches() const override { return batches_; }

  std::set<Digest> missing;  // set before reading
  std::atomic<int> gets{0};
  std::atomic<int> get_manys{0};
  std::atomic<size_t> ids_in_batches{0};

 private:
  std::shared_ptr<MemChunkStore> inner_;
  bool batches_;
};

class VolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bdn-volume-test-" + std::to_string(::getpid()) + "-" +
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
  // A push of src/ to bdn:test/<volume>.
  PushOptions SrcOptions(const std::string& volume, std::vector<std::string> tags = {}) {
    PushOptions o;
    o.dir = dir_ / "src";
    o.ns = "test";
    o.volume = volume;
    o.tags = std::move(tags);
    return o;
  }
  Result<PushResult> PushSrc(const std::string& volume, std::vector<std::string> tags = {}) {
    return Push(SrcOptions(volume, std::move(tags)), *store_, *registry_, nullptr);
  }
  Digest Fake(const std::string& hex_prefix) {
    std::string hex = hex_prefix + std::string(64 - hex_prefix.size(), '0');
    return *Digest::Parse(hex);
  }

  static std::string ReadFile(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Another pull writing file `name` in `dir` (made if missing), as a pull would: its partial file
  // opened (0600) and locked (flock). Returns the descriptor, -1 if either failed.
  static int HoldPartialFile(const fs::path& dir, const std::string& name) {
    fs::create_directories(dir);
    int fd = ::open((dir / PartialFileName(name)).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && ::flock(fd, LOCK_EX) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  // A version holding one file, `name` with `content`, opened.
  std::shared_ptr<VersionView> PushOneFile(const std::string& name, const std::string& content) {
    Write(name, content);
    auto pushed = PushSrc("v");
    EXPECT_TRUE(pushed.has_value());
    if (!pushed) return nullptr;
    auto view = VersionView::Open(store_, pushed->ref.digest);
    EXPECT_TRUE(view.has_value());
    return view ? *view : nullptr;
  }
  // dir_/shared, mode 1777 as /tmp (dir_ made 0755, so that another user reaches it).
  fs::path SharedStickyDirectory() {
    const fs::path shared = dir_ / "shared";
    fs::create_directories(shared);
    fs::permissions(dir_, fs::perms(0755));
    fs::permissions(shared, fs::perms(01777));
    return shared;
  }
  // CatFile into a file; its bytes, or the error.
  Result<std::string> Cat(const VersionView& view, const std::string& path,
                          const ChunkReaderOptions& reads = {}) {
    fs::path out = dir_ / "cat.out";
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Err(InternalError("open cat.out"));
    Status s = CatFile(view, path, fd, reads);
    ::close(fd);
    if (!s.ok()) return Err(s);
    return ReadFile(out);
  }

  // Pull(view, dest, opts) in a child process as uid and gid 65534 (the caller is root): the
  // status code it returned (kOk when it worked) and its message.
  static std::pair<StatusCode, std::string> PullAsNobody(const VersionView& view,
                                                         const fs::path& dest,
                                                         const PullOptions& opts) {
    int fds[2];
    if (::pipe(fds) != 0) return {StatusCode::kInternal, "pipe"};
    pid_t child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(255);
      auto p = Pull(view, dest, opts, nullptr);
      const std::string said = p ? "" : p.error().message();
      (void)!::write(fds[1], said.data(), said.size());
      ::_exit(static_cast<int>(p ? StatusCode::kOk : p.error().code()));
    }
    ::close(fds[1]);
    std::string said;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, n);
    ::close(fds[0]);
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
      return {StatusCode::kInternal, "child"};
    }
    return {static_cast<StatusCode>(WEXITSTATUS(status)), said};
  }

  fs::path dir_;
  std::unique_ptr<SqliteRegistry> registry_;
  std::shared_ptr<MemChunkStore> store_;
};

// cat follows symlinks inside the version as open(2) on the mount does, and names the link
// whose target is outside the version or missing; pull counts the symlinks it makes.
TEST_F(VolumeTest, CatFollowsSymlinksInsideTheVersionAndNamesTheOthers) {
  Write("d/sub/f.txt", "hello");
  fs::create_symlink("f.txt", dir_ / "src/d/sub/link");
  fs::create_symlink("d/sub", dir_ / "src/dlink");
  fs::create_symlink("../dlink/link", dir_ / "src/d/up");
  fs::create_symlink("/etc/passwd", dir_ / "src/abs");
  fs::create_symlink("../../x", dir_ / "src/d/climb");
  fs::create_symlink("nothere", dir_ / "src/dangling");
  fs::create_symlink("loop2", dir_ / "src/loop1");
  fs::create_symlink("loop1", dir_ / "src/loop2");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto view = VersionView::Open(store_, pushed->ref.digest);
  ASSERT_TRUE(view.has_value());
  const std::string v = (*view)->digest().ToString();
  for (const char* p : {"d/sub/f.txt", "d/sub/link", "dlink/f.txt", "dlink/link", "d/up"}) {
    auto got = Cat(**view, p);
    ASSERT_TRUE(got.has_value()) << p << ": " << got.error().message();
    EXPECT_EQ(*got, "hello") << p;
  }
  const struct {
    const char* path;
    StatusCode code;
    std::string message;
  } refused[] = {
      {"abs", StatusCode::kInvalidArgument,
       "path \"abs\": symlink \"abs\" points to \"/etc/passwd\", outside the version"},
      {"d/climb", StatusCode::kInvalidArgument,
       "path \"d/climb\": symlink \"d/climb\" points to \"../../x\", outside the version"},
      {"dangling", StatusCode::kNotFound,
       "path \"dangling\": \"nothere\" is not in version " + v +
           " (through symlink \"dangling\" -> \"nothere\")"},
      {"dlink/nothere", StatusCode::kNotFound,
       "path \"dlink/nothere\": \"d/sub/nothere\" is not in version " + v +
           " (through symlink \"dlink\" -> \"d/sub\")"},
      {"nothere", StatusCode::kNotFound, "path \"nothere\": not in version " + v},
      {"loop1", StatusCode::kInvalidArgument, "path \"loop1\": more than 40 symlinks"},
      {"dlink/f.txt/x", StatusCode::kInvalidArgument,
       "path \"dlink/f.txt/x\": \"d/sub/f.txt\" is a file, not a directory"},
      {"dlink", StatusCode::kInvalidArgument, "path \"dlink\": is a directory, not a file"},
  };
  for (const auto& r : refused) {
    auto got = Cat(**view, r.path);
    ASSERT_FALSE(got.has_value()) << r.path;
    EXPECT_EQ(got.error().code(), r.code) << r.path;
    EXPECT_EQ(got.error().message(), r.message) << r.path;
  }

  PullOptions one;
  one.includes = {"d/sub/link"};
  auto pulled = Pull(**view, dir_ / "one", one, nullptr);
  ASSERT_TRUE(pulled.has_value()) << pulled.error().message();
  EXPECT_EQ(pulled->files_written, 0u);
  EXPECT_EQ(pulled->symlinks, 1u);
  EXPECT_EQ(fs::read_symlink(dir_ / "one/d/sub/link"), "f.txt");
  auto all = Pull(**view, dir_ / "all", {}, nullptr);
  ASSERT_TRUE(all.has_value()) << all.error().message();
  EXPECT_EQ(all->files_written, 1u);
  EXPECT_EQ(all->symlinks, 8u);
  auto again = Pull(**view, dir_ / "all", {}, nullptr);  // nothing made the second time
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(again->symlinks, 0u);
}

// What push warns about: links whose target is absolute or climbs above the root (read as text
// from the link's directory), not those that stay inside, however they get there.
TEST(SymlinksLeavingTheTree, AbsoluteAndClimbingTargetsOnly) {
  Manifest m;
  auto link = [&](std::string path, std::string target) {
    Entry e;
    e.path = std::move(path);
    e.kind = EntryKind::kSymlink;
    e.target = std::move(target);
    m.entries.push_back(std::move(e));
  };
  link("a", "b");
  link("abs", "/etc/passwd");
  link("blob", "../../blobs/2222");  // a Hugging Face cache snapshot's file
  link("d/e/f", "../../g");          // back up to the root: inside
  link("d/e/g", "../../../g");       // one level too many
  link("d/e/h", "./.././/../x/../y");
  link("d/e/i", "x/../../../../y");  // down one, then up three from d/e: out
  link("dot", ".");
  link("up", "..");
  Entry file;
  file.path = "z";
  m.entries.push_back(file);
  std::vector<std::string> paths;
  for (const Entry& e : SymlinksLeavingTheTree(m)) paths.push_back(e.path + " -> " + e.target);
  EXPECT_EQ(paths, (std::vector<std::string>{"abs -> /etc/passwd", "blob -> ../../blobs/2222",
                                             "d/e/g -> ../../../g", "d/e/i -> x/../../../../y",
                                             "up -> .."}));
}

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
  EXPECT_EQ(r.error().message(),
            "digest prefix \"abcdef012345\" of bdn:w/v is ambiguous: matches " +
                Fake("abcdef0123451").ToString() + ", " + Fake("abcdef0123452").ToString());
  auto one = ResolveRef(*registry_, *ParseRef("bdn:w/v@abcdef0123452"));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->digest, Fake("abcdef0123452"));
  auto none = ResolveRef(*registry_, *ParseRef("bdn:w/v@abcdef0123459"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message(), "version bdn:w/v@b3:abcdef0123459: not found");
}

TEST_F(VolumeTest, ResolveAMissingTagNamesTheTagsThereAre) {
  CommitRequest req{"w", "v", Fake("abcdef0123451"), {}, "", {}, std::nullopt};
  ASSERT_TRUE(registry_->Commit(req).has_value());
  auto none = ResolveRef(*registry_, *ParseRef("bdn:w/v:prod"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.error().message(), "tag \"prod\" of bdn:w/v: not found; it has no tags");
  // Sorted by bytes, head left out, eight shown and the rest counted.
  for (const char* t : {"Prod", "staging", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}) {
    ASSERT_TRUE(registry_->SetTag("w", "v", t, Fake("abcdef0123451"), std::nullopt).has_value());
  }
  auto mistyped = ResolveRef(*registry_, *ParseRef("bdn:w/v:prod"));
  ASSERT_FALSE(mistyped.has_value());
  EXPECT_EQ(mistyped.error().message(),
            "tag \"prod\" of bdn:w/v: not found; its tags: Prod, a1, a2, a3, a4, a5, a6, a7, and 2 "
            "more");
  ASSERT_TRUE(registry_->DeleteTag("w", "v", "a1", std::nullopt).has_value());
  ASSERT_TRUE(registry_->DeleteTag("w", "v", "a2", std::nullopt).has_value());
  auto d = registry_->DeleteTag("w", "v", "a2", std::nullopt);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(),
            "tag \"a2\" of bdn:w/v: not found; its tags: Prod, a3, a4, a5, a6, a7, a8, staging");
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
    EXPECT_EQ(std::string(buf.begin(), buf.begin() + static_cast<long>(want)),
              src.substr(off, want));
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
  EXPECT_EQ(
      r.error().message().rfind("file \"w.bin\": chunk " + bad.ToString() + ": digest mismatch", 0),
      0u)
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

TEST_F(VolumeTest, DiffNamesAFileWhoseRecordedMtimeAloneChanged) {
  Write("f.txt", "same bytes");
  PushOptions o = SrcOptions("mt");
  o.seal.mtimes = SealOptions::Mtimes::kPreserve;
  auto a = Push(o, *store_, *registry_, nullptr);
  fs::last_write_time(dir_ / "src" / "f.txt",
                      fs::last_write_time(dir_ / "src" / "f.txt") - std::chrono::hours(24));
  auto b = Push(o, *store_, *registry_, nullptr);
  auto plain = PushSrc("mt");  // no mtimes recorded
  ASSERT_TRUE(a.has_value() && b.has_value() && plain.has_value());
  ASSERT_NE(a->ref.digest, b->ref.digest);
  auto va = *VersionView::Open(store_, a->ref.digest);
  auto vb = *VersionView::Open(store_, b->ref.digest);
  auto vp = *VersionView::Open(store_, plain->ref.digest);
  for (const auto* other : {&vb, &vp}) {
    auto d = DiffVersions(*va, **other);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->changed, std::vector<std::string>{"f.txt"});
    EXPECT_TRUE(d->added.empty() && d->removed.empty());
    EXPECT_EQ(d->fetch_bytes, 0u);
  }
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

// A replica that said it held every blob (in a spool it never uploaded) and then died: its
// missing-queries answer "nothing missing" until the commit check first reads from it.
class ForgetfulReplica : public MemChunkStore {
 public:
  Result<bool> Contains(const Digest& id) override {
    if (lying_) return true;
    return MemChunkStore::Contains(id);
  }
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override {
    if (lying_) return std::vector<Digest>();
    return MemChunkStore::FindMissing(ids);
  }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    lying_ = false;
    return MemChunkStore::Get(id);
  }

 private:
  std::atomic<bool> lying_{true};
};

TEST_F(VolumeTest, ACommitRefusedAsNotStoredIsFollowedByStoringWhatIsMissingAndCommittingAgain) {
  Write("a.bin", Random(300'000, 31));
  Write("b.txt", "small");
  auto store = std::make_shared<ForgetfulReplica>();
  std::shared_ptr<Registry> inner = std::move(registry_);
  CommitCheckingRegistry checked(inner, store);
  PushOptions o = SrcOptions("v");
  auto r = Push(o, *store, checked, nullptr);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_GT(r->chunks_uploaded, 0u);  // all of them, in the second round
  auto stored = CheckVersionStored(*store, r->ref.digest);
  EXPECT_TRUE(stored.has_value()) << stored.error().ToString();
  EXPECT_TRUE(inner->GetVersion("test", "v", r->ref.digest).has_value());

  // With no rounds allowed, the 412 is the push's answer.
  auto again = std::make_shared<ForgetfulReplica>();
  CommitCheckingRegistry checked_again(inner, again);
  o.volume = "w";
  o.max_commit_rounds = 0;
  auto refused = Push(o, *again, checked_again, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_TRUE(IsNotStoredError(refused.error())) << refused.error().ToString();
}

// A store whose commit holds are lost before they are looked at again: a PostgreSQL advisory
// lock whose connection ended (the server restarted) between a commit's check and its write.
class LosingCommitHolds : public MemChunkStore {
 public:
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override {
    class Lost : public StoreHold {
     public:
      Result<bool> Held() override { return false; }
    };
    return std::unique_ptr<StoreHold>(std::make_unique<Lost>());
  }
};

// A sweep may have run since the check: the commit ends unwritten, with a 503 (Unavailable) that
// its client retries, and a restore likewise.
TEST_F(VolumeTest, ACommitWhoseHoldWasLostSinceItsCheckWritesNothing) {
  Write("a.bin", Random(300'000, 32));
  auto store = std::make_shared<LosingCommitHolds>();
  std::shared_ptr<Registry> inner = std::move(registry_);
  CommitCheckingRegistry checked(inner, store);
  PushOptions o = SrcOptions("v");
  o.max_commit_rounds = 0;
  auto r = Push(o, *store, checked, nullptr);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(StatusCode::kUnavailable, r.error().code());
  EXPECT_NE(r.error().message().find(
                "commit: the chunk store's GC lock was lost (its database connection ended)"),
            std::string::npos)
      << r.error().message();
  EXPECT_EQ(StatusCode::kNotFound, inner->ListVersions("test", "v", true).error().code());
  // A deleted version's restore is checked the same way (the same tree pushed through a store
  // that holds: the same digest, whose blobs `store` got from the first push).
  auto plain = std::make_shared<MemChunkStore>();
  CommitCheckingRegistry ok(inner, plain);
  auto pushed = Push(o, *plain, ok, nullptr);
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  ASSERT_TRUE(inner->DeleteVersions("test", "v", pushed->ref.digest, std::nullopt).has_value());
  auto restored = checked.RestoreVersion("test", "v", pushed->ref.digest, std::nullopt, "");
  ASSERT_FALSE(restored.has_value());
  EXPECT_EQ("restore: the chunk store's GC lock was lost (its database connection ended)",
            restored.error().message());
}

// Pull, cat and verify from a store that prefers batches (a remote tier) fetch a file's chunks
// with a few GetMany calls, not a Get per chunk, and write the same bytes as from a local store.
TEST_F(VolumeTest, BatchingStoreReadsInFewBatchesWithIdenticalBytes) {
  Write("a/big.bin", Random(6'000'000, 11));
  Write("a/mid.bin", Random(3'000'000, 12));
  Write("a/small.txt", "hello");
  for (int i = 0; i < 5; ++i) Write("s/f" + std::to_string(i), Random(1000 + i, 20 + i));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  const uint64_t chunks = pushed->stats.chunks;
  ASSERT_GT(chunks, 100u);

  auto plain = *VersionView::Open(store_, pushed->ref.digest);
  auto local = Pull(*plain, dir_ / "local", PullOptions{}, nullptr);
  ASSERT_TRUE(local.has_value()) << local.error().message();

  auto counting = std::make_shared<CountingStore>(store_, /*batches=*/true);
  auto view = *VersionView::Open(counting, pushed->ref.digest);
  int gets_before = counting->gets;  // the manifest
  auto pulled = Pull(*view, dir_ / "batched", PullOptions{}, nullptr);
  ASSERT_TRUE(pulled.has_value()) << pulled.error().message();
  EXPECT_EQ(pulled->files_written, local->files_written);
  for (const char* f : {"a/big.bin", "a/mid.bin", "a/small.txt", "s/f0", "s/f4"}) {
    EXPECT_EQ(ReadFile(dir_ / "batched" / f), ReadFile(dir_ / "local" / f)) << f;
  }
  EXPECT_EQ(ReadFile(dir_ / "batched/a/big.bin"), Random(6'000'000, 11));
  // At most one batch per file (each is under 16 MiB); Gets only for the two chunk indexes.
  EXPECT_LE(counting->get_manys, 8);
  EXPECT_EQ(counting->gets - gets_before, 2);
  EXPECT_EQ(counting->ids_in_batches, chunks);

  counting->get_manys = 0;
  counting->gets = 0;
  auto cat = Cat(*view, "a/big.bin");
  ASSERT_TRUE(cat.has_value()) << cat.error().message();
  EXPECT_EQ(*cat, Random(6'000'000, 11));
  EXPECT_EQ(counting->get_manys, 1);
  EXPECT_EQ(counting->gets, 0);  // the chunk index is cached in the view

  counting->get_manys = 0;
  auto batched_verify = VerifyVersion(*view, 4);
  auto local_verify = VerifyVersion(*plain, 4);
  ASSERT_TRUE(batched_verify.has_value() && local_verify.has_value());
  EXPECT_TRUE(batched_verify->problems.empty());
  EXPECT_EQ(batched_verify->chunks, local_verify->chunks);
  EXPECT_EQ(batched_verify->bytes, local_verify->bytes);
  EXPECT_LE(counting->get_manys, 8);

  // Small batches, several in flight at once, several files at once: still the same bytes, in
  // order, and each chunk asked for once.
  counting->get_manys = 0;
  counting->ids_in_batches = 0;
  PullOptions small;
  small.jobs = 3;
  small.reads.max_batch_bytes = 256 << 10;
  small.reads.max_pending_bytes = 1 << 20;
  auto again = Pull(*view, dir_ / "small-batches", small, nullptr);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(ReadFile(dir_ / "small-batches/a/big.bin"), Random(6'000'000, 11));
  EXPECT_EQ(ReadFile(dir_ / "small-batches/a/mid.bin"), Random(3'000'000, 12));
  EXPECT_EQ(ReadFile(dir_ / "small-batches/s/f3"), Random(1003, 23));
  EXPECT_GE(counting->get_manys, 9'000'000 / (256 << 10));
  EXPECT_EQ(counting->ids_in_batches, chunks);
  auto small_cat = Cat(*view, "a/mid.bin", small.reads);
  ASSERT_TRUE(small_cat.has_value());
  EXPECT_EQ(*small_cat, Random(3'000'000, 12));
}

// A chunk that is missing or corrupt in a batch gives the same error (naming the chunk and the
// file) as the per-chunk path, and the pull resumes from the chunks written before it.
TEST_F(VolumeTest, BadChunkInBatchGivesTheSameErrorAsPerChunkReads) {
  Write("w.bin", Random(2'000'000, 5));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto fc = *(*VersionView::Open(store_, pushed->ref.digest))
                 ->ChunksOf(*(*VersionView::Open(store_, pushed->ref.digest))->Find("w.bin"));
  ASSERT_GT(fc->chunks.size(), 10u);
  const Digest gone = fc->chunks[3].id;
  const Digest bad = fc->chunks[7].id;

  struct Outcome {
    std::string pull, cat;
    std::vector<std::pair<Digest, std::string>> problems;
  };
  auto run = [&](bool batches, const std::string& out) {
    auto store = std::make_shared<CountingStore>(store_, batches);
    store->missing.insert(gone);
    auto view = *VersionView::Open(store, pushed->ref.digest);
    Outcome o;
    auto p = Pull(*view, dir_ / out, PullOptions{}, nullptr);
    EXPECT_FALSE(p.has_value());
    if (!p) o.pull = p.error().ToString();
    auto c = Cat(*view, "w.bin");
    EXPECT_FALSE(c.has_value());
    if (!c) o.cat = c.error().ToString();
    auto v = VerifyVersion(*view, 2);
    EXPECT_TRUE(v.has_value());
    if (v) {
      for (const auto& pr : v->problems) o.problems.emplace_back(pr.chunk, pr.status.ToString());
    }
    return o;
  };
  Outcome per_chunk = run(false, "a");
  Outcome batched = run(true, "b");
  EXPECT_EQ(batched.pull, per_chunk.pull);
  EXPECT_EQ(batched.cat, per_chunk.cat);
  EXPECT_EQ(batched.problems, per_chunk.problems);
  EXPECT_NE(batched.pull.find("file \"w.bin\": chunk " + gone.ToString() + ": not in store"),
            std::string::npos)
      << batched.pull;
  ASSERT_EQ(batched.problems.size(), 1u);
  EXPECT_EQ(batched.problems[0].first, gone);

  store_->CorruptForTest(bad, std::vector<uint8_t>(fc->chunks[7].size_bytes, 1));
  per_chunk = run(false, "c");
  batched = run(true, "d");
  EXPECT_EQ(batched.pull, per_chunk.pull);
  EXPECT_EQ(batched.cat, per_chunk.cat);
  EXPECT_EQ(batched.problems, per_chunk.problems);
  ASSERT_EQ(batched.problems.size(), 2u);
  EXPECT_EQ(batched.problems[1].first, bad);
  EXPECT_NE(batched.problems[1].second.find("chunk " + bad.ToString() + ": digest mismatch"),
            std::string::npos)
      << batched.problems[1].second;

  // Mended, the batched pull into "d" resumes: the three chunks before the missing one are kept
  // from the partial file, the rest fetched in one batch.
  std::string original = Random(2'000'000, 5).substr(fc->offsets[7], fc->chunks[7].size_bytes);
  store_->CorruptForTest(bad, std::vector<uint8_t>(original.begin(), original.end()));
  auto store = std::make_shared<CountingStore>(store_, true);
  auto view = *VersionView::Open(store, pushed->ref.digest);
  auto p = Pull(*view, dir_ / "d", PullOptions{}, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(ReadFile(dir_ / "d/w.bin"), Random(2'000'000, 5));
  EXPECT_EQ(store->ids_in_batches, fc->chunks.size() - 3);
  EXPECT_EQ(store->get_manys, 1);
}

// Regression: resuming from a partial file whose chunks after the first mismatch held other
// bytes left those bytes where the version has all-zero chunks (holes were punched only before
// the mismatch), so the renamed file differed from its verified digest.
TEST_F(VolumeTest, ResumeOverDamagedPartialFileZeroesItsHoles) {
  std::string content = Random(300'000, 7) + std::string(2'000'000, '\0') + Random(300'000, 8);
  Write("z.bin", content);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const Entry* e = view->Find("z.bin");
  auto fc = *view->ChunksOf(*e);
  // The partial file: the first chunk right, everything after it garbage.
  fs::create_directories(dir_ / "out");
  std::string partial = content.substr(0, fc->chunks[0].size_bytes) +
                        std::string(content.size() - fc->chunks[0].size_bytes, '\x5a');
  std::ofstream(dir_ / "out" / PartialFileName("z.bin"), std::ios::binary) << partial;
  auto p = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_TRUE(ReadFile(dir_ / "out/z.bin") == content);
}

// Regression: partial files were named by the content digest, so entries with the same content
// in one directory shared one: three copies of a file failed ("another pull is writing it"),
// empty files failed now and then (ENOENT from the rename of a partial another entry had already
// renamed), and so did hardlinks pulled with --include (detached copies). Run many times, with
// many jobs, as the races were timing-dependent.
TEST_F(VolumeTest, PullOfIdenticalContentWritesEveryEntry) {
  const std::string same = Random(1'500'000, 9);
  for (const char* name : {"copy-a", "copy-b", "copy-c", "sub/copy-d"}) Write(name, same);
  for (int i = 0; i < 10; ++i) Write("empty-" + std::to_string(i), "");
  Write("linked", "hardlinked bytes");
  for (const char* name : {"link-1", "link-2", "link-3"}) {
    ASSERT_EQ(::link((dir_ / "src/linked").c_str(), (dir_ / "src" / name).c_str()), 0);
  }
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  EXPECT_EQ(view->Find("link-1")->kind, EntryKind::kFile);  // the first name in path order
  EXPECT_EQ(view->Find("linked")->kind, EntryKind::kHardlink);
  for (int run = 0; run < 20; ++run) {
    fs::path out = dir_ / ("out-" + std::to_string(run));
    PullOptions all;
    all.jobs = 8;
    auto p = Pull(*view, out, all, nullptr);
    ASSERT_TRUE(p.has_value()) << "run " << run << ": " << p.error().message();
    EXPECT_EQ(p->files_written, 15u);  // 4 copies, 10 empty files, one of the 4 hardlinked names
    for (const char* name : {"copy-a", "copy-b", "copy-c", "sub/copy-d"}) {
      EXPECT_TRUE(ReadFile(out / name) == same) << name;
    }
    for (int i = 0; i < 10; ++i) EXPECT_EQ(fs::file_size(out / ("empty-" + std::to_string(i))), 0u);
    EXPECT_EQ(fs::hard_link_count(out / "linked"), 4u);
    // Only the hardlinks, whose file entry is not pulled: each becomes a file of its own.
    PullOptions links;
    links.jobs = 8;
    links.includes = {"linked", "link-2", "link-3"};
    fs::path only = dir_ / ("links-" + std::to_string(run));
    auto q = Pull(*view, only, links, nullptr);
    ASSERT_TRUE(q.has_value()) << "run " << run << ": " << q.error().message();
    for (const char* name : {"linked", "link-2", "link-3"}) {
      EXPECT_EQ(ReadFile(only / name), "hardlinked bytes") << name;
    }
    for (const auto& d : {out, out / "sub", only}) {
      for (const auto& f : fs::directory_iterator(d)) {
        EXPECT_FALSE(f.path().filename().string().starts_with(".bdn-partial-")) << f.path();
      }
    }
    fs::remove_all(out);
    fs::remove_all(only);
  }
}

// From an attacking helper: a hard link planted at a file's partial-file name made pull write
// the version's bytes and mode into the linked file outside the destination. Anything at that
// name but a regular file of this user's with one link is removed, never written or renamed.
TEST_F(VolumeTest, PullNeverWritesThroughWhatStandsAtAPartialFileName) {
  Write("a.txt", "hello");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const std::string partial = PartialFileName("a.txt");
  auto fresh_out = [&](const std::string& name) {
    fs::path out = dir_ / name;
    fs::create_directories(out);
    return out;
  };
  auto pulled = [&](const fs::path& out) {
    auto p = Pull(*view, out, PullOptions{}, nullptr);
    ASSERT_TRUE(p.has_value()) << out << ": " << p.error().message();
    EXPECT_EQ(ReadFile(out / "a.txt"), "hello") << out;
    EXPECT_EQ(fs::hard_link_count(out / "a.txt"), 1u) << out;
    EXPECT_FALSE(fs::exists(fs::symlink_status(out / partial))) << out;
  };
  // A hard link to a file outside: the file keeps its bytes, mode and single other name.
  fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "VICTIM";
  fs::permissions(victim, fs::perms(0640));
  fs::path out = fresh_out("out-link");
  ASSERT_EQ(::link(victim.c_str(), (out / partial).c_str()), 0);
  pulled(out);
  EXPECT_EQ(ReadFile(victim), "VICTIM");
  EXPECT_EQ(fs::status(victim).permissions(), fs::perms(0640));
  EXPECT_EQ(fs::hard_link_count(victim), 1u);
  // A symlink, a FIFO and an empty directory are removed; the symlink's target is untouched.
  out = fresh_out("out-symlink");
  fs::create_symlink(victim, out / partial);
  pulled(out);
  EXPECT_EQ(ReadFile(victim), "VICTIM");
  out = fresh_out("out-fifo");
  ASSERT_EQ(::mkfifo((out / partial).c_str(), 0600), 0);
  pulled(out);
  out = fresh_out("out-dir");
  fs::create_directory(out / partial);
  pulled(out);
  // Another user's file (root only: chown).
  if (::geteuid() == 0) {
    out = fresh_out("out-other");
    std::ofstream(out / partial) << "planted";
    ASSERT_EQ(::chown((out / partial).c_str(), 65534, 65534), 0);
    pulled(out);
    struct stat st;
    ASSERT_EQ(::stat((out / "a.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
  }
  // From an attacking helper: a file of ours that others may open (0644, say an earlier pull's,
  // renamed to the partial file's name in a directory of another user's) is not resumed from, so
  // nothing is written into an inode another user may hold open; it is removed.
  for (mode_t mode : {0644, 0604, 0640, 04600, 01600}) {
    out = fresh_out("out-mode-" + std::to_string(mode));
    std::ofstream(out / partial) << "hel";
    ASSERT_EQ(::chmod((out / partial).c_str(), mode), 0);
    // Held open, as the other user would: what the pull writes must not reach it.
    UniqueFd held(::open((out / partial).c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(held);
    pulled(out);
    struct stat planted, st;
    ASSERT_EQ(::fstat(held.get(), &planted), 0);
    ASSERT_EQ(::stat((out / "a.txt").c_str(), &st), 0);
    EXPECT_NE(st.st_ino, planted.st_ino) << std::oct << mode;
    EXPECT_EQ(planted.st_size, 3) << std::oct << mode;
    EXPECT_EQ(planted.st_nlink, 0u) << std::oct << mode << ": removed";
  }
  // A directory that holds something is not removed: the pull says so.
  out = fresh_out("out-full-dir");
  fs::create_directories(out / partial / "keep");
  auto p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.error().message(), "file \"" + (out / "a.txt").string() + "\" (its partial file " +
                                     partial + "): a directory is in the way; remove it");
  EXPECT_TRUE(fs::exists(out / partial / "keep"));
}

// From a tester: a file kept in place (identical) was checked and hashed by name and then
// chmod-ed by name, following a symlink; a user who can write the directory swapped the name
// for a symlink in between (renameat2 RENAME_EXCHANGE in a loop), and the pull chmod-ed the
// symlink's target, any file. Every check and change of a file in place now goes through one
// descriptor opened without following a symlink.
TEST_F(VolumeTest, PullNeverChmodsThroughASymlinkSwappedIntoAFilesPlace) {
  Write("a.txt", "hello");
  fs::permissions(dir_ / "src/a.txt", fs::perms(0644));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "VICTIM";
  fs::permissions(victim, fs::perms(0600));
  fs::path out = dir_ / "out";
  ASSERT_TRUE(Pull(*view, out, PullOptions{}, nullptr).has_value());
  fs::create_symlink(victim, out / "swap");
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    while (!stop) {
      ::renameat2(AT_FDCWD, (out / "a.txt").c_str(), AT_FDCWD, (out / "swap").c_str(),
                  RENAME_EXCHANGE);
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int pulls = 0;
  while (std::chrono::steady_clock::now() < until &&
         fs::status(victim).permissions() == fs::perms(0600)) {
    std::error_code ec;  // a symlink now and then
    fs::permissions(out / "a.txt", fs::perms(0600),
                    fs::perm_options::replace | fs::perm_options::nofollow, ec);
    (void)Pull(*view, out, PullOptions{}, nullptr);  // refused whenever it meets the symlink
    ++pulls;
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(fs::status(victim).permissions(), fs::perms(0600)) << "after " << pulls << " pulls";
  EXPECT_EQ(ReadFile(victim), "VICTIM");
}

// From a tester: with fs.protected_symlinks off, root's pull followed another user's symlink
// at DIR in a shared directory and overwrote a file of root's it pointed at.
TEST_F(VolumeTest, PullRefusesADestinationThatIsAnotherUsersSymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a symlink another user owns";
  Write("a.txt", "hello");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::create_directories(dir_ / "roots");
  fs::path link = dir_ / "link";
  fs::create_symlink(dir_ / "roots", link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  // From an attacking helper: only the last component was looked at, once, so a trailing slash
  // ("link/"), a link before the last component ("link/x") or a link swapped in after the look
  // (base/path_walk_test.cc) led root's pull into the directory the other user named.
  for (const auto& [dest, subject] : std::vector<std::pair<fs::path, std::string>>{
           {link, "a symlink"},
           {dir_ / "link/", link.string() + " is a symlink"},
           {link / "x", link.string() + " is a symlink"}}) {
    for (auto existing : {PullOptions::Existing::kRefuse, PullOptions::Existing::kOverwrite}) {
      PullOptions opts;
      opts.existing = existing;
      auto p = Pull(*view, dest, opts, nullptr);
      ASSERT_FALSE(p.has_value()) << dest;
      EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(p.error().message(), "directory \"" + dest.string() + "\": " + subject +
                                         " owned by uid 65534 (nobody), not by this user or "
                                         "root; give the directory it names (\"" +
                                         (dir_ / "roots").string() +
                                         "\") if that is where the files go");
    }
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "roots"));
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);  // one of root's own is followed
  ASSERT_TRUE(Pull(*view, link, PullOptions{}, nullptr).has_value());
  EXPECT_EQ(ReadFile(dir_ / "roots/a.txt"), "hello");
  ASSERT_TRUE(Pull(*view, link / "x", PullOptions{}, nullptr).has_value());
  EXPECT_EQ(ReadFile(dir_ / "roots/x/a.txt"), "hello");
}

// Push applies the same rule to the directory it seals: another user's symlink would choose
// which of this user's directories is sealed (and so readable from the volume).
TEST_F(VolumeTest, PushRefusesADirectoryThroughAnotherUsersSymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a symlink another user owns";
  Write("secret", "root only");
  fs::path link = dir_ / "model";
  fs::create_symlink(dir_ / "src", link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  for (const fs::path& dir : {link, dir_ / "model/"}) {
    PushOptions o = SrcOptions("v");
    o.dir = dir;
    auto p = Push(o, *store_, *registry_, nullptr);
    ASSERT_FALSE(p.has_value()) << dir;
    EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(p.error().message(),
              "directory \"" + dir.string() + "\": " +
                  (dir == link ? std::string("a symlink") : link.string() + " is a symlink") +
                  " owned by uid 65534 (nobody), not by this user or root; give the directory it "
                  "names (\"" +
                  (dir_ / "src").string() + "\") if that is the one you mean");
  }
  auto versions = registry_->ListVersions("test", "v", true);
  EXPECT_TRUE(!versions.has_value() || versions->empty()) << "nothing was committed";
  EXPECT_EQ(store_->size(), 0u) << "nothing of it was stored";
}

// A file already in place with the version's content but with another name elsewhere (a hard
// link) is replaced by a copy of its own: its mode and time were set on the shared inode.
TEST_F(VolumeTest, PullReplacesAnIdenticalHardLinkInsteadOfChangingItsInode) {
  Write("a.txt", "hello\n");
  fs::permissions(dir_ / "src/a.txt", fs::perms(0644));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path outside = dir_ / "private";
  std::ofstream(outside) << "hello\n";
  fs::permissions(outside, fs::perms(0600));
  fs::create_directories(dir_ / "out");
  ASSERT_EQ(::link(outside.c_str(), (dir_ / "out/a.txt").c_str()), 0);
  auto p = Pull(*view, dir_ / "out", PullOptions{}, nullptr);  // no --overwrite needed
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->files_written, 1u);
  EXPECT_EQ(fs::status(outside).permissions(), fs::perms(0600));
  EXPECT_EQ(fs::hard_link_count(outside), 1u);
  EXPECT_EQ(fs::status(dir_ / "out/a.txt").permissions(), fs::perms(0644));
  EXPECT_EQ(ReadFile(dir_ / "out/a.txt"), "hello\n");
}

// From a tester: a file with one name outside passed the "no more names than the version gives
// it" count whenever the version gives it a hardlink; the pull then chmod-ed the outside file and
// linked the version's other name to it. Links are told by their inode now: the file in place is
// kept only when its every name is one the version gives it here.
TEST_F(VolumeTest, PullReplacesAFileLinkedFromOutsideThoughTheVersionHardLinksIt) {
  Write("small", "hello\n");
  fs::permissions(dir_ / "src/small", fs::perms(0755));
  ASSERT_EQ(::link((dir_ / "src/small").c_str(), (dir_ / "src/small2").c_str()), 0);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path secret = dir_ / "secret";
  std::ofstream(secret) << "hello\n";
  fs::permissions(secret, fs::perms(0600));
  fs::path out = dir_ / "out";
  fs::create_directories(out);
  ASSERT_EQ(::link(secret.c_str(), (out / "small").c_str()), 0);
  auto unlinked = [&](const std::string& when) {
    EXPECT_EQ(fs::status(secret).permissions(), fs::perms(0600)) << when;
    EXPECT_EQ(fs::hard_link_count(secret), 1u) << when;
    EXPECT_EQ(fs::hard_link_count(out / "small"), 2u) << when;
    EXPECT_TRUE(fs::equivalent(out / "small", out / "small2")) << when;
    EXPECT_EQ(fs::status(out / "small").permissions(), fs::perms(0755)) << when;
    EXPECT_EQ(ReadFile(out / "small2"), "hello\n") << when;
  };
  auto p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->files_written, 1u);
  unlinked("one outside name");
  // Both of the version's names linked to the outside file (what the bug left): both are
  // replaced, without --overwrite.
  fs::remove(out / "small");
  fs::remove(out / "small2");
  ASSERT_EQ(::link(secret.c_str(), (out / "small").c_str()), 0);
  ASSERT_EQ(::link(secret.c_str(), (out / "small2").c_str()), 0);
  p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  unlinked("both names linked outside");
}

// The version's own hardlinks, linked by an earlier pull, are not names from elsewhere: a pull
// again keeps the file and its links (it replaced the file and then found each link "with other
// content").
TEST_F(VolumeTest, PullAgainKeepsTheVersionsOwnHardLinks) {
  Write("a", "linked bytes");
  ASSERT_EQ(::link((dir_ / "src/a").c_str(), (dir_ / "src/b").c_str()), 0);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  for (int run = 0; run < 2; ++run) {
    auto p = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
    ASSERT_TRUE(p.has_value()) << "run " << run << ": " << p.error().message();
    EXPECT_EQ(p->files_written, run == 0 ? 1u : 0u) << "run " << run;
    EXPECT_EQ(fs::hard_link_count(dir_ / "out/a"), 2u) << "run " << run;
  }
}

// From a tester: a FIFO where a file goes was reported as "exists with other content", as were a
// socket and a device. The pull names what is in the way, never opens it (a FIFO's open would
// wait for a writer), and --overwrite replaces it.
TEST_F(VolumeTest, APullNamesAFifoSocketOrDeviceInTheWay) {
  Write("a.txt", "hello");
  fs::create_symlink("a.txt", dir_ / "src" / "l");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  struct Case {
    std::string what, name;
    std::function<int(const fs::path&)> make;  // 0, or the errno
  };
  auto node = [](mode_t mode, dev_t dev) {
    return
        [mode, dev](const fs::path& p) { return ::mknod(p.c_str(), mode, dev) == 0 ? 0 : errno; };
  };
  auto socket_at = [](const fs::path& p) {
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{.sun_family = AF_UNIX, .sun_path = {}};
    p.string().copy(addr.sun_path, sizeof addr.sun_path - 1);
    return ::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  };
  const std::vector<Case> cases = {
      {"a FIFO", "a.txt", node(S_IFIFO | 0600, 0)},
      {"a socket", "a.txt", socket_at},
      {"a character device", "a.txt", node(S_IFCHR | 0600, makedev(1, 3))},
      {"a block device", "a.txt", node(S_IFBLK | 0600, makedev(7, 0))},
      {"a FIFO", "l", node(S_IFIFO | 0600, 0)},
  };
  int n = 0;
  for (const Case& c : cases) {
    const fs::path out = dir_ / ("out" + std::to_string(++n));
    fs::create_directories(out);
    SCOPED_TRACE(c.what + " at " + c.name);
    if (int err = c.make(out / c.name); err != 0) {
      ASSERT_TRUE(err == EPERM || err == EACCES) << std::strerror(err);  // devices: not as a user
      continue;
    }
    // A FIFO opened for reading would wait for a writer; if the pull does, a writer's open
    // lets it go and the test fails rather than hangs.
    auto pull = [&](PullOptions opts) {
      auto pulled = std::async(std::launch::async, [&] { return Pull(*view, out, opts, nullptr); });
      if (pulled.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
        ADD_FAILURE() << "the pull blocked";
        UniqueFd w(::open((out / c.name).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
      }
      return pulled.get();
    };
    auto p = pull(PullOptions{});
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().code(), StatusCode::kAlreadyExists);
    EXPECT_EQ(p.error().message(), std::string(c.name == "l" ? "path" : "file") + " \"" +
                                       (out / c.name).string() + "\": " + c.what +
                                       " is in the way (use --overwrite)");
    struct stat st;
    ASSERT_EQ(::lstat((out / c.name).c_str(), &st), 0);
    EXPECT_FALSE(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));  // left as it was
    PullOptions overwrite;
    overwrite.existing = PullOptions::Existing::kOverwrite;
    p = pull(overwrite);
    ASSERT_TRUE(p.has_value()) << p.error().message();
    EXPECT_EQ(ReadFile(out / "a.txt"), "hello");
    EXPECT_EQ(fs::read_symlink(out / "l"), "a.txt");
  }
  // A file where a symlink goes is named too.
  const fs::path out = dir_ / "out-file";
  fs::create_directories(out);
  std::ofstream(out / "l") << "a file";
  auto p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().message(),
            "path \"" + (out / "l").string() + "\": a file is in the way (use --overwrite)");
}

// A pull refused for what stands in the way writes nothing: it wrote the new version's other
// files before it met the first conflict, leaving the directory half one version, half another.
// Every conflict is found first, and the message names the others too.
TEST_F(VolumeTest, APullRefusedForAConflictChangesNothing) {
  Write("config.json", "old config");
  Write("weights.bin", "old weights");
  Write("same.txt", "same");
  auto v1 = PushSrc("v");
  ASSERT_TRUE(v1.has_value());
  Write("config.json", "new config!");
  Write("weights.bin", "new weights!");
  Write("added.txt", "added");
  Write("sub/deep.txt", "deep");
  auto v2 = PushSrc("v");
  ASSERT_TRUE(v2.has_value());
  auto old_view = *VersionView::Open(store_, v1->ref.digest);
  auto new_view = *VersionView::Open(store_, v2->ref.digest);
  ASSERT_TRUE(Pull(*old_view, dir_ / "out", PullOptions{}, nullptr).has_value());
  auto p = Pull(*new_view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(p.error().message(), "file \"" + (dir_ / "out/config.json").string() +
                                     "\": exists with other content (use --overwrite); also in the "
                                     "way: \"" +
                                     (dir_ / "out/weights.bin").string() + "\" (2 in all)");
  EXPECT_FALSE(fs::exists(dir_ / "out/added.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "out/sub"));
  EXPECT_EQ(ReadFile(dir_ / "out/config.json"), "old config");
  // With --overwrite it goes through; a pull again keeps every file (hashed once each).
  PullOptions overwrite;
  overwrite.existing = PullOptions::Existing::kOverwrite;
  ASSERT_TRUE(Pull(*new_view, dir_ / "out", overwrite, nullptr).has_value());
  auto again = Pull(*new_view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(again->files_written, 0u);
  EXPECT_EQ(again->files_skipped, 5u);
  EXPECT_EQ(ReadFile(dir_ / "out/sub/deep.txt"), "deep");
}

// --overwrite replaces files and symlinks in the way, and an empty directory, but never deletes
// a directory's contents (it removed a whole tree of the user's files without a word).
TEST_F(VolumeTest, PullOverwriteNeverDeletesADirectorysContents) {
  Write("a.txt", "hello");
  Write("d/f", "x");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  PullOptions overwrite;
  overwrite.existing = PullOptions::Existing::kOverwrite;
  fs::create_directories(dir_ / "out/a.txt/precious");
  std::ofstream(dir_ / "out/a.txt/precious/data") << "mine";
  auto p = Pull(*view, dir_ / "out", overwrite, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.error().message(),
            "path \"" + (dir_ / "out/a.txt").string() +
                "\": a directory that is not empty is in the way (--overwrite replaces files and "
                "symlinks, not a directory's contents)");
  EXPECT_EQ(ReadFile(dir_ / "out/a.txt/precious/data"), "mine");
  fs::remove_all(dir_ / "out/a.txt/precious");  // now empty: replaced
  p = Pull(*view, dir_ / "out", overwrite, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(ReadFile(dir_ / "out/a.txt"), "hello");
}

// From a tester: a version entry named like a sibling's partial file (".bdn-partial-" and 32
// hex digits of BLAKE3("x")) shared its name: the pull put that entry's bytes at "x" and left no
// entry of that name (a file), or removed the version's symlink or directory as a stranger. A
// partial file takes a name no entry of the pull has in that directory.
TEST_F(VolumeTest, PullNeverGivesAPartialFileTheNameOfAnEntry) {
  const std::string p = PartialFileName("x");
  Write("x", Random(300'000, 1));
  Write(p, Random(100'000, 2));
  auto files = PushSrc("files");
  ASSERT_TRUE(files.has_value());
  fs::remove(dir_ / "src" / p);
  fs::create_symlink("target", dir_ / "src" / p);
  auto symlink = PushSrc("symlink");
  ASSERT_TRUE(symlink.has_value());
  fs::remove(dir_ / "src" / p);
  Write(p + "/inner", "inside");
  auto directory = PushSrc("directory");
  ASSERT_TRUE(directory.has_value());
  for (const auto& [name, pushed] :
       {std::pair{"files", *files}, {"symlink", *symlink}, {"directory", *directory}}) {
    auto view = *VersionView::Open(store_, pushed.ref.digest);
    fs::path out = dir_ / ("out-" + std::string(name));
    PullOptions opts;
    opts.jobs = 2;
    auto pulled = Pull(*view, out, opts, nullptr);
    ASSERT_TRUE(pulled.has_value()) << name << ": " << pulled.error().message();
    EXPECT_TRUE(ReadFile(out / "x") == Random(300'000, 1)) << name;
    if (std::string(name) == "files") {
      EXPECT_TRUE(ReadFile(out / p) == Random(100'000, 2));
    } else if (std::string(name) == "symlink") {
      EXPECT_EQ(fs::read_symlink(out / p), "target");
    } else {
      EXPECT_EQ(ReadFile(out / p / "inner"), "inside");
    }
    for (const auto& f : fs::directory_iterator(out)) {
      EXPECT_TRUE(f.path().filename() == "x" || f.path().filename() == p) << f.path();
    }
  }
  EXPECT_NE(PartialFileName("x", 1), p);
  EXPECT_EQ(PartialFileName("x", 1).size(), p.size());
}

// From a tester: a pull with --include chose partial file names among the entries it pulled
// only, so a version holding "a.txt" and a file named exactly PartialFileName("a.txt") gave
// a.txt that name as its partial file when only a.txt was included: after a full pull had put
// both there, a re-fetch of a.txt resumed from the other file and renamed it over a.txt (the
// other file gone). A partial file avoids every name of the version in its directory.
TEST_F(VolumeTest, PullNeverTouchesAnEntryNamedLikeAPartialFileOutsideItsIncludes) {
  const std::string p = PartialFileName("a.txt");
  const std::string a = Random(300'000, 1), other = Random(100'000, 2);
  Write("a.txt", a);
  Write(p, other);
  Write("d/a.txt", a);
  Write("d/" + p, other);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const fs::path out = dir_ / "out";
  auto pull = [&](PullOptions opts, const fs::path& into, const std::string& what) {
    auto r = Pull(*view, into, opts, nullptr);
    ASSERT_TRUE(r.has_value()) << what << ": " << r.error().message();
    EXPECT_TRUE(ReadFile(into / "a.txt") == a) << what;
    EXPECT_TRUE(ReadFile(into / p) == other) << what << ": the entry named " << p;
    for (const auto& f : fs::directory_iterator(into)) {
      const std::string name = f.path().filename();
      EXPECT_TRUE(name == "a.txt" || name == p || name == "d") << what << ": " << f.path();
    }
  };
  pull(PullOptions{}, out, "full pull");
  PullOptions include;
  include.includes = {"a.txt"};
  pull(include, out, "--include a.txt, nothing changed");
  // A pattern, as sync start's --include takes: not found, saying what pull's --include is.
  PullOptions glob;
  glob.includes = {"*.txt"};
  auto refused = Pull(*view, out, glob, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message(),
            "--include \"*.txt\": no such path under \"/\" in version " +
                pushed->ref.digest.ToString() +
                " (pull's --include names a file or directory, not a pattern: list them with bdn "
                "volume ls -R)");
  fs::resize_file(out / "a.txt", 1000);
  include.existing = PullOptions::Existing::kOverwrite;
  pull(include, out, "--include a.txt --overwrite of a truncated a.txt");
  // A path pulled alone: its siblings in the version are avoided too (an earlier pull of the
  // directory put them there).
  const fs::path stripped = dir_ / "stripped";
  PullOptions dir;
  dir.path = "d";
  dir.layout = PullOptions::Layout::kStripPrefix;
  pull(dir, stripped, "pull of d");
  fs::resize_file(stripped / "a.txt", 1000);
  PullOptions file = dir;
  file.path = "d/a.txt";
  file.existing = PullOptions::Existing::kOverwrite;
  pull(file, stripped, "pull of d/a.txt of a truncated a.txt");
}

// From a tester: a refused --overwrite pull had already replaced a file where a symlink goes and
// written other files before it met a directory that is not empty in the way. Such directories
// are found before anything is written, all of them listed as conflicts are.
TEST_F(VolumeTest, APullOverwriteRefusedForADirectoryInTheWayChangesNothing) {
  Write("big", "big bytes");
  Write("small", "small bytes");
  Write("sub/f", "f");
  Write("zz", "zz");
  fs::create_symlink("big", dir_ / "src/lnk");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path out = dir_ / "out";
  fs::create_directories(out / "small");
  fs::create_directories(out / "zz");
  std::ofstream(out / "small/keep") << "precious";
  std::ofstream(out / "zz/keep") << "precious";
  std::ofstream(out / "lnk") << "user notes";
  PullOptions overwrite;
  overwrite.existing = PullOptions::Existing::kOverwrite;
  auto p = Pull(*view, out, overwrite, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.error().message(),
            "path \"" + (out / "small").string() +
                "\": a directory that is not empty is in the way (--overwrite replaces files and "
                "symlinks, not a directory's contents); also in the way: \"" +
                (out / "zz").string() + "\" (2 in all)");
  EXPECT_EQ(ReadFile(out / "lnk"), "user notes");
  EXPECT_FALSE(fs::exists(out / "big"));
  EXPECT_FALSE(fs::exists(out / "sub"));
}

// From a tester: without --overwrite, a symlink or file where a directory of the version goes
// stopped the conflict check at the first entry below it ("not a directory (a symlink or file
// is in the way)", exit 8) instead of listing it with the other conflicts.
TEST_F(VolumeTest, APullRefusedForAFileWhereADirectoryGoesListsEveryConflict) {
  Write("a.txt", "version");
  Write("sub/f", "f");
  Write("sub/deeper/g", "g");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "a.txt") << "mine";
  fs::create_symlink(dir_ / "src", out / "sub");
  auto p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(p.error().message(), "path \"" + (out / "sub").string() +
                                     "\": exists and is not a directory (use --overwrite); also in "
                                     "the way: \"" +
                                     (out / "a.txt").string() + "\" (2 in all)");
  EXPECT_EQ(ReadFile(out / "a.txt"), "mine");
}

// From a tester: a pull (not as root) into a sticky directory where another user owns a file
// identical to the version's found it fine up front, wrote the other files, and then failed to
// replace it ("Operation not permitted", exit 6). That it cannot be replaced is found first.
TEST_F(VolumeTest, APullThatCannotReplaceAnotherUsersFileInAStickyDirectoryWritesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown, then a pull as another user)";
  Write("a.txt", "hello");
  Write("b.txt", "other");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path shared = dir_ / "shared";
  fs::create_directories(shared);
  fs::permissions(dir_, fs::perms(0755));
  fs::permissions(shared, fs::perms(01777));
  std::ofstream(shared / "a.txt") << "hello";
  ASSERT_EQ(::chown((shared / "a.txt").c_str(), 65533, 65533), 0);
  for (bool overwrite : {false, true}) {
    PullOptions opts;
    if (overwrite) opts.existing = PullOptions::Existing::kOverwrite;
    auto [code, said] = PullAsNobody(*view, shared, opts);
    EXPECT_EQ(code, StatusCode::kFailedPrecondition) << said;
    EXPECT_EQ(said, "file \"" + (shared / "a.txt").string() +
                        "\": another user's file in a sticky directory is in the way and cannot be "
                        "replaced (remove it, or pull elsewhere)");
    EXPECT_FALSE(fs::exists(shared / "b.txt")) << "overwrite " << overwrite;
  }
}

// From a tester: in a shared sticky directory, root's pull removed the partial file of another
// user's pull of the same file while that pull was writing it (that pull then failed), and a
// user's pull that found root's pull writing said only that another user's file was in the way.
// Root's pull now waits for it as for a pull of its own (and names it when it stalls); a pull
// that cannot open the file says who holds it; a held file with other names is left alone.
TEST_F(VolumeTest, APullLeavesAnotherUsersLivePartialFileAndSaysWhoWritesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown, then a pull as another user)";
  const std::shared_ptr<VersionView> view = PushOneFile("a.txt", "hello");
  ASSERT_TRUE(view);
  const fs::path shared = SharedStickyDirectory();
  const fs::path partial = shared / PartialFileName("a.txt");
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  const std::string holder = "(pid " + std::to_string(::getpid()) + ", \"" + comm + "\")";
  const std::string file = "file \"" + (shared / "a.txt").string() + "\"";

  // Root's pull, another user's partial file held and not changing.
  int held = HoldPartialFile(shared, "a.txt");
  ASSERT_GE(held, 0);
  ASSERT_EQ(::fchown(held, 65533, 65533), 0);
  struct stat before, after;
  ASSERT_EQ(::fstat(held, &before), 0);
  PullOptions waiting;
  waiting.clock = std::make_shared<testutil::FakeClock>();
  waiting.writer_stall_time = std::chrono::seconds(90);
  auto p = Pull(*view, shared, waiting, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kConflict);
  EXPECT_EQ(p.error().message(), file + ": another user's pull (uid 65533) is writing it " +
                                     holder + " and its partial file " + PartialFileName("a.txt") +
                                     " has not changed for 90s (stopped? pull again once it has "
                                     "ended)");
  ASSERT_EQ(::lstat(partial.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_FALSE(fs::exists(shared / "a.txt"));
  ::close(held);
  // Let go: a stranger, removed (under its lock), and the pull works.
  auto q = Pull(*view, shared, waiting, nullptr);
  ASSERT_TRUE(q.has_value()) << q.error().message();
  EXPECT_EQ(ReadFile(shared / "a.txt"), "hello");
  EXPECT_FALSE(fs::exists(partial));

  // Another user's pull, root's partial file held (not theirs to open: /proc/locks says).
  fs::remove(shared / "a.txt");
  held = HoldPartialFile(shared, "a.txt");
  ASSERT_GE(held, 0);
  auto [code, said] = PullAsNobody(*view, shared, PullOptions{});
  EXPECT_EQ(code, StatusCode::kConflict) << said;
  EXPECT_EQ(said, file + ": another user's pull (uid 0) is writing it " + holder +
                      " through its partial file " + PartialFileName("a.txt") +
                      "; pull again once it has ended");
  EXPECT_TRUE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(shared / "a.txt"));
  ::close(held);

  // A file with another name, held: no pull's; left alone, and said.
  fs::remove(partial);
  std::ofstream(shared / "elsewhere") << "keep";
  fs::create_hard_link(shared / "elsewhere", partial);
  UniqueFd lock(::open(partial.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(lock);
  ASSERT_EQ(::flock(lock.get(), LOCK_EX), 0);
  auto r = Pull(*view, shared, waiting, nullptr);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.error().message(), file + " (its partial file " + PartialFileName("a.txt") +
                                     "): a file with 2 names is in the way, locked by another "
                                     "process " +
                                     holder + "; remove it, or pull elsewhere");
  EXPECT_EQ(ReadFile(shared / "elsewhere"), "keep");
  EXPECT_TRUE(fs::exists(partial));
  lock.Reset();

  // From an attacking helper: a lock held by a process that is no pull (`flock` of util-linux,
  // here a child named so) was called another user's pull.
  fs::remove(partial);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, "flock");
    const int fd = HoldPartialFile(shared, "a.txt");
    if (fd < 0 || ::fchown(fd, 65533, 65533) != 0 || ::write(ready[1], "x", 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto s = Pull(*view, shared, waiting, nullptr);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().message(), file + ": another user's process (uid 65533) is writing it (pid " +
                                     std::to_string(child) + ", \"flock\") and its partial file " +
                                     PartialFileName("a.txt") +
                                     " has not changed for 90s (stopped? pull again once it has "
                                     "ended)");
}

// From a tester: root's pull wrote into (and chmod-ed) a directory another user had made where
// the version's directory goes (in a sticky directory all may write), who could then swap its
// entries while the pull worked. Another user's directory below DIR is refused before anything
// is written; DIR itself, named by the user, may be anyone's.
TEST_F(VolumeTest, PullRefusesAnotherUsersDirectoryBelowDir) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  Write("models/weights.bin", "weights");
  Write("top.txt", "top");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path out = dir_ / "out";
  fs::create_directories(out / "models");
  fs::permissions(out / "models", fs::perms(0700));
  ASSERT_EQ(::chown((out / "models").c_str(), 65534, 65534), 0);
  auto p = Pull(*view, out, PullOptions{}, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.error().message(), "directory \"" + (out / "models").string() +
                                     "\": another user's (uid 65534); a pull writes into no other "
                                     "user's directory below DIR (remove it, or pull into it as "
                                     "DIR)");
  EXPECT_TRUE(fs::is_empty(out / "models"));
  EXPECT_FALSE(fs::exists(out / "top.txt"));
  EXPECT_EQ(fs::status(out / "models").permissions(), fs::perms(0700));
  // Into that directory as DIR: fine.
  ASSERT_EQ(::chown(out.c_str(), 65534, 65534), 0);
  fs::remove(out / "models");
  PullOptions models;
  models.path = "models";
  models.layout = PullOptions::Layout::kStripPrefix;
  auto q = Pull(*view, out, models, nullptr);
  ASSERT_TRUE(q.has_value()) << q.error().message();
  EXPECT_EQ(ReadFile(out / "weights.bin"), "weights");
}
// From an attacking helper: check_directory (the CLI's refusal of the embedded store's
// directories) was asked only about the walk to DIR and DIR's ancestors, so a version holding
// "home/store/packs/zz.txt" pulled into the home's parent wrote zz.txt among the packs and gave
// home/, store/ and packs/ the version's modes. Every directory already below DIR that the pull
// enters or where a directory of the version goes is checked too, before anything is written.
TEST_F(VolumeTest, PullChecksEveryDirectoryOfThePulledTreeBeforeWritingAnything) {
  Write("home/store/packs/zz.txt", "evil");
  Write("top.txt", "top");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "home/store/packs");
  for (const char* d : {"home", "home/store", "home/store/packs"}) {
    fs::permissions(out / d, fs::perms(0700));
  }
  struct stat packs;
  ASSERT_EQ(::stat((out / "home/store/packs").c_str(), &packs), 0);
  std::vector<std::string> asked;
  PullOptions options;
  options.check_directory = [&](const struct stat& st, const std::string& dir) {
    asked.push_back(dir);
    if (st.st_dev != packs.st_dev || st.st_ino != packs.st_ino) return Status::Ok();
    return InvalidArgumentError("directory \"" + dir + "\": refused");
  };
  auto p = Pull(*view, out, options, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.error().message(),
            "directory \"" + (out / "home/store/packs").string() + "\": refused");
  EXPECT_NE(std::find(asked.begin(), asked.end(), (out / "home/store").string()), asked.end());
  EXPECT_FALSE(fs::exists(out / "top.txt"));
  EXPECT_TRUE(fs::is_empty(out / "home/store/packs"));
  for (const char* d : {"home", "home/store", "home/store/packs"}) {
    EXPECT_EQ(fs::status(out / d).permissions(), fs::perms(0700)) << d;
  }
  // Without the refusal the same pull goes through.
  options.check_directory = nullptr;
  auto q = Pull(*view, out, options, nullptr);
  ASSERT_TRUE(q.has_value()) << q.error().message();
  EXPECT_EQ(ReadFile(out / "home/store/packs/zz.txt"), "evil");
}

// From a tester: a pull with everything already in place on a read-only file system failed
// ("Read-only file system", exit 6): it chmod-ed every directory, its mode right or not. Here a
// directory of root's that is already right, pulled into by another user, who cannot chmod it.
TEST_F(VolumeTest, APullWithNothingToDoChangesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown, then a pull as another user)";
  Write("sub/f", "f");
  fs::permissions(dir_ / "src/sub", fs::perms(0755));
  fs::permissions(dir_ / "src/sub/f", fs::perms(0644));
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::path out = dir_ / "out";
  ASSERT_TRUE(Pull(*view, out, PullOptions{}, nullptr).has_value());
  fs::permissions(dir_, fs::perms(0755));
  ASSERT_EQ(::chown((out / "sub/f").c_str(), 65534, 65534), 0);
  auto [code, said] = PullAsNobody(*view, out, PullOptions{});
  EXPECT_EQ(code, StatusCode::kOk) << said;
}

// From a tester: a destination that is a symlink to a file failed with "Not a directory" (exit
// 1) and a dangling one with "File exists" (exit 4). Each says what it is.
TEST_F(VolumeTest, PullSaysWhatStandsWhereItsDestinationGoes) {
  Write("a.txt", "hello");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  std::ofstream(dir_ / "file") << "x";
  fs::create_symlink(dir_ / "file", dir_ / "to-file");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  for (const auto& [name, why] :
       {std::pair<std::string, std::string>{"file", "exists and is not a directory"},
        {"to-file", "a symlink to \"" + (dir_ / "file").string() + "\", which is not a directory"},
        {"dangling",
         "a symlink to \"" + (dir_ / "nowhere").string() + "\", which does not exist"}}) {
    auto p = Pull(*view, dir_ / name, PullOptions{}, nullptr);
    ASSERT_FALSE(p.has_value()) << name;
    EXPECT_EQ(p.error().code(), StatusCode::kFailedPrecondition) << name;
    EXPECT_EQ(p.error().message(), "directory \"" + (dir_ / name).string() + "\": " + why);
  }
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
}

TEST_F(VolumeTest, PartialFileNamesDifferPerNameAndFitNameMax) {
  EXPECT_EQ(PartialFileName("a"),
            ".bdn-partial-" + Digest::Of(std::string_view("a")).Hex().substr(0, 32));
  EXPECT_NE(PartialFileName("a"), PartialFileName("b"));
  EXPECT_EQ(PartialFileName(std::string(255, 'n')).size(), 13u + 32u);
}

// Another pull holding a file's partial file (flock) that makes no progress: the pull waits for
// it (PullOptions::writer_stall_time, on its clock), then fails with a conflict naming the file,
// the holder and the partial file. Before, it failed at once, so two pulls of one version into
// one directory at once failed (exit 4). Once the holder lets go, the pull works.
TEST_F(VolumeTest, PullWaitsForAStalledWriterThenNamesIt) {
  Write("f", "bytes");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  int held = HoldPartialFile(dir_ / "out", "f");
  ASSERT_GE(held, 0);
  auto clock = std::make_shared<testutil::FakeClock>();
  PullOptions options;
  options.clock = clock;
  options.writer_stall_time = std::chrono::seconds(90);
  const auto start = clock->SteadyNow();
  auto p = Pull(*view, dir_ / "out", options, nullptr);
  ASSERT_FALSE(p.has_value());
  EXPECT_GE(clock->SteadyNow() - start, std::chrono::seconds(90));
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  EXPECT_EQ(p.error().code(), StatusCode::kConflict);
  EXPECT_EQ(p.error().message(), "file \"" + (dir_ / "out/f").string() +
                                     "\": another pull is writing it (pid " +
                                     std::to_string(::getpid()) + ", \"" + comm +
                                     "\") and its partial file " + PartialFileName("f") +
                                     " has not changed for 90s (stopped? pull again once it has "
                                     "ended)");
  ::close(held);
  auto again = Pull(*view, dir_ / "out", options, nullptr);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(ReadFile(dir_ / "out/f"), "bytes");
}

// A Clock whose first SleepFor runs `hook` (then sleeps on fake time): lets a test act at the
// moment a component waits.
class HookOnSleepClock final : public Clock {
 public:
  explicit HookOnSleepClock(std::function<void()> hook) : hook_(std::move(hook)) {}
  SteadyTime SteadyNow() const override { return SteadyTime(elapsed_ + std::chrono::hours(1)); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  void SleepFor(std::chrono::nanoseconds d) const override {
    if (auto hook = std::exchange(hook_, nullptr)) hook();
    elapsed_ += d;
  }

 protected:
  void WaitSome(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                SteadyTime) const override {
    cv.wait_for(lock, std::chrono::milliseconds(1));
  }

 private:
  mutable std::function<void()> hook_;
  mutable std::chrono::nanoseconds elapsed_{0};
};

// pull_concurrent_test failed in CI ("…(its partial file .bdn-partial-…): Resource temporarily
// unavailable"): while a pull waited for another pull's partial file, that one was renamed
// away and a third pull made a new one at its name; the waiting pull then looked at the new
// file and took the errno its last flock had left (EWOULDBLOCK) for an error. It now locks the
// new partial file and writes the file.
TEST_F(VolumeTest, PullWhoseAwaitedPartialFileIsReplacedByAnotherTakesTheNewOne) {
  Write("f", "bytes");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const fs::path partial = dir_ / "out" / PartialFileName("f");
  int held = HoldPartialFile(dir_ / "out", "f");
  ASSERT_GE(held, 0);
  PullOptions options;
  options.clock = std::make_shared<HookOnSleepClock>([&] {
    ASSERT_EQ(::rename(partial.c_str(), (dir_ / "elsewhere").c_str()), 0);
    int fresh = ::open(partial.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fresh, 0);
    ::close(fresh);
  });
  auto p = Pull(*view, dir_ / "out", options, nullptr);
  ::close(held);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->files_written, 1u);
  EXPECT_EQ(ReadFile(dir_ / "out/f"), "bytes");
  EXPECT_FALSE(fs::exists(partial));
}

// From an attacking helper: a user's pull into a sticky directory waited for another pull of
// the same file (root's), which then put its file in place; the user's pull then downloaded the
// whole file and failed to rename it over root's: "Operation not permitted". It says at once
// what CheckConflicts says up front, and downloads nothing.
TEST_F(VolumeTest, APullThatFindsAnotherUsersFileAfterWaitingSaysItCannotReplaceIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown, then a pull as another user)";
  const std::shared_ptr<VersionView> view = PushOneFile("a.txt", "hello");
  ASSERT_TRUE(view);
  const fs::path shared = SharedStickyDirectory();
  const fs::path partial = shared / PartialFileName("a.txt");
  // "Root's pull": a partial file of nobody's (so that nobody's pull waits on its lock), held
  // here; when nobody's pull first waits, root's file goes in place and the partial file goes.
  int held = HoldPartialFile(shared, "a.txt");
  ASSERT_GE(held, 0);
  ASSERT_EQ(::fchown(held, 65534, 65534), 0);
  int waiting[2], done[2];
  ASSERT_EQ(::pipe(waiting), 0);
  ASSERT_EQ(::pipe(done), 0);
  // A process, not a thread: PullAsNobody forks, and a fork of a threaded process cannot start
  // threads under ThreadSanitizer. Forked while this process has no other thread.
  const pid_t root_pull = ::fork();
  ASSERT_GE(root_pull, 0);
  if (root_pull == 0) {
    ::close(waiting[1]);
    ::close(done[0]);
    char c;
    if (::read(waiting[0], &c, 1) != 1) ::_exit(0);  // the pull never waited
    std::ofstream(shared / "a.txt") << "hello";
    ::unlink(partial.c_str());
    ::close(held);
    ::_exit(::write(done[1], "x", 1) == 1 ? 0 : 1);
  }
  ::close(held);  // the lock stays with root_pull's copy
  ::close(waiting[0]);
  ::close(done[1]);
  PullOptions options;
  options.clock = std::make_shared<HookOnSleepClock>([&] {
    char c = 'w';
    if (::write(waiting[1], &c, 1) != 1 || ::read(done[0], &c, 1) != 1) ::_exit(3);
  });
  auto [code, said] = PullAsNobody(*view, shared, options);
  ::close(waiting[1]);  // a child that never waited: root_pull ends
  ::close(done[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(root_pull, &status, 0), root_pull);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(code, StatusCode::kFailedPrecondition) << said;
  EXPECT_EQ(said, "file \"" + (shared / "a.txt").string() +
                      "\": another user's file in a sticky directory is in the way and cannot be "
                      "replaced (remove it, or pull elsewhere)");
  EXPECT_EQ(ReadFile(shared / "a.txt"), "hello");
  struct stat st;
  ASSERT_EQ(::stat((shared / "a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_FALSE(fs::exists(partial));  // nobody's own, empty: removed
}

// Another pull writing a file (holding its partial file, which keeps changing) is waited for
// past writer_stall_time, as long as it makes progress; the file it puts in place is then the
// version's and is kept (skipped), not written again.
TEST_F(VolumeTest, PullWaitsForAnotherPullWritingAFileAndKeepsItsFile) {
  const std::string content = Random(200'000, 21);
  Write("f", content);
  Write("g", "other file");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  const fs::path partial = dir_ / "out" / PartialFileName("f");
  int held = HoldPartialFile(dir_ / "out", "f");
  ASSERT_GE(held, 0);
  // The other pull: writes the file a piece at a time (each write a change the waiter sees),
  // over 1.2 s, four times the stall time, then renames it into place and lets go.
  std::thread other([&] {
    for (size_t off = 0; off < content.size(); off += content.size() / 12) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const size_t n = std::min(content.size() - off, content.size() / 12);
      ASSERT_EQ(::pwrite(held, content.data() + off, n, static_cast<off_t>(off)),
                static_cast<ssize_t>(n));
    }
    ASSERT_EQ(::fchmod(held, 0644), 0);
    ASSERT_EQ(::rename(partial.c_str(), (dir_ / "out/f").c_str()), 0);
    ::close(held);
  });
  PullOptions options;
  options.writer_stall_time = std::chrono::milliseconds(300);
  auto p = Pull(*view, dir_ / "out", options, nullptr);
  other.join();
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->files_skipped, 1u);
  EXPECT_EQ(p->files_written, 1u);
  EXPECT_TRUE(ReadFile(dir_ / "out/f") == content);
  EXPECT_EQ(ReadFile(dir_ / "out/g"), "other file");
  for (const auto& e : fs::directory_iterator(dir_ / "out")) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".bdn-partial-")) << e.path();
  }
}

// From an attacking helper: the pull that held the partial file gave it its entry's mode (0644)
// and then failed without renaming it; another user opened it meanwhile. The waiting pull, once
// it has the lock, does not resume from it (what it wrote would reach that user's descriptor).
TEST_F(VolumeTest, PullThatWaitedDoesNotResumeFromAPartialFileMadeReadableMeanwhile) {
  const std::string secret = Random(50'000, 23);
  Write("f", secret);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::create_directories(dir_ / "out");
  const fs::path partial = dir_ / "out" / PartialFileName("f");
  UniqueFd held(::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(held);
  ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);
  ASSERT_EQ(::pwrite(held.get(), secret.data(), 100, 0), 100);
  UniqueFd reader;
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(::fchmod(held.get(), 0644), 0);
    reader.Reset(::open(partial.c_str(), O_RDONLY | O_CLOEXEC));  // the other user's open
    held.Reset();                                                 // failed: lets go, no rename
  });
  PullOptions options;
  options.writer_stall_time = std::chrono::milliseconds(2000);
  auto p = Pull(*view, dir_ / "out", options, nullptr);
  other.join();
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_TRUE(ReadFile(dir_ / "out/f") == secret);
  ASSERT_TRUE(reader);
  struct stat st;
  ASSERT_EQ(::fstat(reader.get(), &st), 0);
  EXPECT_EQ(st.st_size, 100) << "the pull wrote into the file the other user holds";
  EXPECT_EQ(st.st_nlink, 0u) << "removed";
}

// Another pull (of another version) puts other content in place while this one waits for it:
// a conflict, with --overwrite too (replacing it would mix the two versions without a word).
TEST_F(VolumeTest, PullThatWaitedFindsOtherContentIsAConflict) {
  Write("f", "this version's bytes");
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  for (auto existing : {PullOptions::Existing::kRefuse, PullOptions::Existing::kOverwrite}) {
    const fs::path out = dir_ / (existing == PullOptions::Existing::kRefuse ? "out" : "out-o");
    const fs::path partial = out / PartialFileName("f");
    int held = HoldPartialFile(out, "f");
    ASSERT_GE(held, 0);
    std::thread other([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ASSERT_EQ(::write(held, "another version", 15), 15);
      ASSERT_EQ(::rename(partial.c_str(), (out / "f").c_str()), 0);
      ::close(held);
    });
    PullOptions options;
    options.existing = existing;
    auto p = Pull(*view, out, options, nullptr);
    other.join();
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().code(), StatusCode::kConflict);
    EXPECT_EQ(p.error().message(), "file \"" + (out / "f").string() +
                                       "\": another pull put other content there while this one "
                                       "ran (a pull of another version into the same directory?)");
    EXPECT_EQ(ReadFile(out / "f"), "another version");
    EXPECT_FALSE(fs::exists(partial));
  }
}

// A version whose entry's size or digest disagrees with its chunks (a crafted manifest): pull
// puts nothing in place and leaves no partial file. Before, a 6-byte chunk declared twice as 10
// bytes pulled as a zero-padded 20-byte file, and a single chunk declared 999 bytes likewise.
TEST_F(VolumeTest, PullPutsNothingInPlaceThatDoesNotMatchTheEntry) {
  const std::string six = "abcdef";
  const Digest chunk = Digest::Of(six);
  ASSERT_TRUE(store_->Put(chunk, std::span(reinterpret_cast<const uint8_t*>(six.data()), 6)).ok());
  auto put = [&](const std::string& bytes) {
    Digest id = Digest::Of(bytes);
    EXPECT_TRUE(
        store_->Put(id, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
            .ok());
    return id;
  };
  std::vector<ChunkRef> twice_as_ten = {{chunk, 10}, {chunk, 10}};
  std::vector<ChunkRef> twice_as_six = {{chunk, 6}, {chunk, 6}};
  struct Case {
    std::string what;
    Entry entry;
    std::string message;
  };
  auto indexed = [&](uint64_t size, const Digest& digest, const std::vector<ChunkRef>& chunks) {
    Entry e;
    e.path = "f";
    e.mode = 0644;
    e.size_bytes = size;
    e.digest = digest;
    e.layout = FileLayout::kIndexed;
    e.index = put(EncodeChunkIndex(chunks));
    return e;
  };
  Entry single;
  single.path = "f";
  single.mode = 0644;
  single.size_bytes = 999;
  single.digest = chunk;
  single.layout = FileLayout::kSingleChunk;
  const Digest twelve = Digest::Of(six + six);
  const Digest wrong = Digest::Of(std::string_view("something else"));
  std::vector<Case> cases = {
      {"lengths over the chunks", indexed(20, twelve, twice_as_ten),
       "file \"f\": its chunks hold 12 bytes, not its size 20"},
      {"one chunk over its bytes", single, "file \"f\": its chunks hold 6 bytes, not its size 999"},
      {"right lengths, wrong digest", indexed(12, wrong, twice_as_six),
       "file \"f\": content does not match its digest " + wrong.ToString()},
  };
  for (const Case& c : cases) {
    Manifest m;
    m.entries = {c.entry};
    auto encoded = EncodeManifest(m);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().message();
    auto view = VersionView::Open(store_, put(*encoded));
    ASSERT_TRUE(view.has_value()) << c.what << ": " << view.error().message();
    fs::path out = dir_ / "out";
    auto p = Pull(**view, out, PullOptions{}, nullptr);
    ASSERT_FALSE(p.has_value()) << c.what;
    EXPECT_EQ(p.error().code(), StatusCode::kCorruption) << c.what;
    // The chunk reader may see a chunk shorter than its index entry first; either way the file
    // is named and nothing is written.
    if (p.error().message().find("chunk " + chunk.ToString()) == std::string::npos) {
      EXPECT_EQ(p.error().message(), c.message) << c.what;
    }
    EXPECT_FALSE(fs::exists(out / "f")) << c.what;
    EXPECT_FALSE(fs::exists(out / PartialFileName("f"))) << c.what;
    fs::remove_all(out);
  }
}

// Resumed bytes count in the whole-file check: a partial file that holds the whole content and
// then garbage is cut to size, and one whose first chunk is right but whose digest cannot be
// reached (the entry lies) is refused.
TEST_F(VolumeTest, ResumedPartialFileIsVerifiedWholeAndCutToSize) {
  std::string content = Random(700'000, 11);
  Write("r.bin", content);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value());
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  fs::create_directories(dir_ / "out");
  std::ofstream(dir_ / "out" / PartialFileName("r.bin"), std::ios::binary)
      << content << std::string(5000, '\x77');
  auto p = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_TRUE(ReadFile(dir_ / "out/r.bin") == content);
  EXPECT_FALSE(fs::exists(dir_ / "out" / PartialFileName("r.bin")));
}

// Regression: "a/x" was walked before "a-b" ('-' sorts before '/'), and the manifest refused the
// order ("entries not sorted or duplicated"). Also the file entry of a hardlinked inode is the
// name that sorts first (docs/format.md), not the one walked first.
TEST_F(VolumeTest, PushSortsPathsBytewise) {
  Write("a/x", "x");
  Write("a-b", "y");
  ASSERT_EQ(::link((dir_ / "src/a/x").c_str(), (dir_ / "src/a.z").c_str()), 0);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  std::vector<std::string> paths;
  for (const Entry& e : view->manifest().entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "a-b", "a.z", "a/x"}));
  EXPECT_EQ(view->Find("a.z")->kind, EntryKind::kFile);
  EXPECT_EQ(view->Find("a/x")->kind, EntryKind::kHardlink);
  EXPECT_EQ(view->Find("a/x")->target, "a.z");
}

// The format says names and symlink targets are UTF-8: push refuses others, naming the path.
TEST_F(VolumeTest, PushRefusesNamesAndSymlinkTargetsThatAreNotUtf8) {
  Write("ok", "x");
  ASSERT_EQ(::symlink("t\xff", (dir_ / "src/link").c_str()), 0);
  auto p = PushSrc("v");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.error().message(), "symlink \"" + (dir_ / "src/link").string() +
                                     "\": target \"t\xff\" is not valid UTF-8");
  fs::remove(dir_ / "src/link");
  Write("sub/bad\xfe", "x");
  p = PushSrc("v");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.error().message(),
            "path \"" + (dir_ / "src/sub/bad\xfe").string() + "\": name is not valid UTF-8");
}

// Opens (creating if asked) the directory chain `names` below `root` one level at a time, as no
// single path to it may fit PATH_MAX; returns its descriptor.
int OpenChain(const fs::path& root, const std::vector<std::string>& names, bool create) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const auto& n : names) {
    if (create) ::mkdirat(fd, n.c_str(), 0755);
    int next = ::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    if (next < 0) return -1;
    fd = next;
  }
  return fd;
}

// Regression: 25 nested directories of 200-byte names (a path over PATH_MAX) failed to push with
// "File name too long". Push and pull now step through directory handles.
TEST_F(VolumeTest, PushAndPullPathsLongerThanPathMax) {
  std::vector<std::string> names;
  for (int i = 0; i < 25; ++i) names.push_back(std::string(199, 'd') + static_cast<char>('a' + i));
  int deep = OpenChain(dir_ / "src", names, true);
  ASSERT_GE(deep, 0);
  int f = ::openat(deep, "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  ASSERT_EQ(::write(f, "leaf bytes", 10), 10);
  ::close(f);
  ASSERT_EQ(::symlinkat("../leaf", deep, "up"), 0);
  ::close(deep);
  auto pushed = PushSrc("v");
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto view = *VersionView::Open(store_, pushed->ref.digest);
  std::string leaf_path;
  for (const auto& n : names) leaf_path += n + "/";
  ASSERT_GT(leaf_path.size(), 4096u);
  ASSERT_NE(view->Find(leaf_path + "leaf"), nullptr);
  for (int run = 0; run < 2; ++run) {  // the second run finds everything in place
    auto p = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
    ASSERT_TRUE(p.has_value()) << p.error().message();
    EXPECT_EQ(p->files_written, run == 0 ? 1u : 0u);
  }
  int out = OpenChain(dir_ / "out", names, false);
  ASSERT_GE(out, 0);
  char buf[32] = {};
  int r = ::openat(out, "leaf", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(r, 0);
  EXPECT_EQ(::read(r, buf, sizeof buf), 10);
  EXPECT_EQ(std::string(buf), "leaf bytes");
  struct stat st;
  ASSERT_EQ(::fstat(r, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ::close(r);
  char target[32] = {};
  EXPECT_EQ(::readlinkat(out, "up", target, sizeof target), 7);
  EXPECT_EQ(std::string(target), "../leaf");
  ::close(out);
}

}  // namespace
}  // namespace bdn
