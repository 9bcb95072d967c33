// A version can never describe bytes it does not have: the commit check (bdn serve and the
// embedded registry) refuses versions whose lengths or sizes disagree with the stored bytes, and
// every reader (VersionView, ChunkReader for pull/cat/verify) checks each chunk's real length
// and the whole file's digest. Each case is a crafted version (crafted_versions_test_util.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "bdn/format/chunk_index.h"
#include "bdn/volume/compare.h"
#include "bdn/volume/crafted_versions_test_util.h"
#include "bdn/volume/pull.h"
#include "bdn/volume/push.h"
#include "bdn/volume/version_blobs.h"
#include "bdn/volume/version_check.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using testing::Craft;
using testing::CraftedVersion;
using testing::StoreCrafted;

const Digest kHello = Digest::Of(std::string_view("hello\n"));

// A MemChunkStore that says it prefers batches, so ChunkReader takes its batched path.
class BatchedMemStore : public MemChunkStore {
 public:
  bool PrefersBatches() const override { return true; }
};

Status CommitError(ChunkStore& store, const CraftedVersion& v) {
  auto r = CheckVersionStored(store, v.digest);
  return r ? Status::Ok() : r.error();
}

// --- the commit check -----------------------------------------------------------------------

TEST(CommitCheck, AGoodVersionPassesWithItsStats) {
  MemChunkStore store;
  CraftedVersion v = Craft("good");
  ASSERT_TRUE(StoreCrafted(store, v).ok());
  auto stats = CheckVersionStored(store, v.digest);
  ASSERT_TRUE(stats.has_value()) << stats.error().message();
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->bytes, 12u + 5u);
  EXPECT_EQ(stats->chunks, 3u);
  EXPECT_EQ(stats->entries, 2u);
}

// A blob that Get still answers (a pack held open, a read cache) but that the store no longer
// holds (another process's GC deleted it; Sizes answers for what is stored now): the check asks
// Sizes about the manifest and chunk indexes it read too. From an attacking helper: a push whose
// view predated a gc committed a version whose manifest that gc had deleted.
TEST(CommitCheck, AReadBlobTheStoreNoLongerHoldsIsNotStored) {
  class Forgotten : public MemChunkStore {
   public:
    Result<BlobSizes> Sizes(std::span<const Digest> ids) override {
      BDN_ASSIGN_OR_RETURN(BlobSizes out, MemChunkStore::Sizes(ids));
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == gone) out[i] = std::nullopt;
      }
      return out;
    }
    Digest gone;
  };
  CraftedVersion v = Craft("good");
  Forgotten store;
  ASSERT_TRUE(StoreCrafted(store, v).ok());
  const Digest index = v.blobs[v.blobs.size() - 2].first;
  store.gone = v.digest;
  EXPECT_EQ(CommitError(store, v).message(),
            "version " + v.digest.ToString() + ": manifest is not stored");
  EXPECT_EQ(CommitError(store, v).code(), StatusCode::kFailedPrecondition);
  store.gone = index;
  EXPECT_EQ(CommitError(store, v).message(), "version " + v.digest.ToString() + ": chunk index " +
                                                 index.ToString() + " of \"f.bin\" is not stored");
  store.gone = Digest();
  EXPECT_TRUE(CommitError(store, v).ok());
}

// Issue 7: an index declaring a 6-byte chunk twice as 10 bytes (file size 20) was committed, and
// a single-chunk file declared 999 bytes over a 6-byte chunk. Issue 14: two single-chunk entries
// of 2^64-1 bytes each were committed and `versions` showed the overflowed total.
TEST(CommitCheck, VersionsThatLieAboutTheirBytesAreCorruptionNamingTheFile) {
  struct Case {
    const char* name;
    std::string message;  // after "version b3:…: "
  };
  const std::vector<Case> cases = {
      {"overlong-chunks",
       "file \"f.bin\": chunk " + kHello.ToString() + ": is 6 bytes, the version says 10"},
      {"overlong-single",
       "file \"f.bin\": chunk " + kHello.ToString() + ": is 6 bytes, the version says 999"},
      {"huge-pair",
       "manifest: path \"a.bin\": file size 18446744073709551615 is over 2^63-1 bytes"},
      {"huge-total", "file \"b.bin\": the files' sizes add up to more than 2^63-1 bytes"},
      {"huge-single",
       "manifest: path \"f.bin\": single-chunk file of 4294967296 bytes is longer than the "
       "chunker maximum 262144"},
  };
  for (const Case& c : cases) {
    MemChunkStore store;
    CraftedVersion v = Craft(c.name);
    ASSERT_TRUE(StoreCrafted(store, v).ok());
    Status s = CommitError(store, v);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.name;
    EXPECT_EQ(s.message(), "version " + v.digest.ToString() + ": " + c.message) << c.name;
  }
}

TEST(CommitCheck, OneChunkGivenTwoLengthsIsCorruption) {
  MemChunkStore store;
  ASSERT_TRUE(store.Put(kHello, {reinterpret_cast<const uint8_t*>("hello\n"), 6}).ok());
  Manifest m;
  std::string index = EncodeChunkIndex(std::vector<ChunkRef>{{kHello, 6}, {kHello, 4}});
  ASSERT_TRUE(
      store.Put(Digest::Of(index), {reinterpret_cast<const uint8_t*>(index.data()), index.size()})
          .ok());
  Entry a;
  a.path = "a";
  a.kind = EntryKind::kFile;
  a.size_bytes = 6;
  a.layout = FileLayout::kSingleChunk;
  a.digest = kHello;
  Entry b = a;
  b.path = "b";
  b.size_bytes = 10;
  b.layout = FileLayout::kIndexed;
  b.index = Digest::Of(index);
  m.entries = {a, b};
  std::string bytes = *EncodeManifest(m);
  Digest d = Digest::Of(bytes);
  ASSERT_TRUE(store.Put(d, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}).ok());
  auto r = CheckVersionStored(store, d);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.error().message(), "version " + d.ToString() + ": file \"b\": chunk " +
                                     kHello.ToString() +
                                     ": the version says 4 bytes here and 6 in file \"a\"");
}

TEST(CommitCheck, MissingBlobsAreAPrecondition) {
  CraftedVersion v = Craft("good");
  MemChunkStore none;
  Status s = CommitError(none, v);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "version " + v.digest.ToString() + ": manifest is not stored");

  MemChunkStore some;
  const Digest world = Digest::Of(std::string_view("world\n"));
  ASSERT_TRUE(StoreCrafted(some, v, {world, kHello}).ok());
  s = CommitError(some, v);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "version " + v.digest.ToString() + ": chunk " + kHello.ToString() +
                             " is not stored (2 chunks are missing)");
}

TEST(CommitCheck, ALengthMismatchIsReportedBeforeMissingChunks) {
  CraftedVersion v = Craft("overlong-chunks");
  MemChunkStore store;
  ASSERT_TRUE(StoreCrafted(store, v, {Digest::Of(std::string_view("fine\n"))}).ok());
  EXPECT_EQ(CommitError(store, v).code(), StatusCode::kCorruption);
}

// The embedded store's registry runs the same check: nothing is committed.
TEST(CommitCheck, EmbeddedRegistryRefusesACraftedCommitAndAcceptsAPush) {
  fs::path dir = fs::temp_directory_path() / ("bdn-integrity-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "src");
  auto store = std::make_shared<MemChunkStore>();
  std::shared_ptr<Registry> inner = std::move(*SqliteRegistry::Open(dir / "registry.db"));
  CommitCheckingRegistry registry(inner, store);

  CraftedVersion v = Craft("overlong-chunks");
  ASSERT_TRUE(StoreCrafted(*store, v).ok());
  CommitRequest req;
  req.ns = "t";
  req.volume = "v";
  req.digest = v.digest;
  req.stats = {1, 20, 2, 1};
  auto r = registry.Commit(req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.error().message(), "version " + v.digest.ToString() + ": file \"f.bin\": chunk " +
                                     kHello.ToString() + ": is 6 bytes, the version says 10");
  EXPECT_EQ(registry.GetVolume("t", "v").error().code(), StatusCode::kNotFound);

  // A real push through it commits, with the stats the check computed.
  std::ofstream(dir / "src" / "a.txt") << "abc";
  PushOptions o;
  o.dir = dir / "src";
  o.ns = "t";
  o.volume = "v";
  auto pushed = Push(o, *store, registry, nullptr);
  ASSERT_TRUE(pushed.has_value()) << pushed.error().message();
  auto rec = registry.GetVersion("t", "v", pushed->ref.digest);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->stats.bytes, 3u);
  EXPECT_EQ(rec->stats.files, 1u);
  fs::remove_all(dir);
}

// --- readers, over a store that holds a crafted version (committed before the check existed,
// or written behind the registry's back) ------------------------------------------------------

class Readers : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    // A parameterized test's name is "Name/Param": the slash would make a nested directory that
    // TearDown leaves behind in /tmp.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = fs::temp_directory_path() /
           ("bdn-integrity-readers-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (GetParam()) {
      store_ = std::make_shared<BatchedMemStore>();
    } else {
      store_ = std::make_shared<MemChunkStore>();
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<VersionView> Open(const std::string& name) {
    CraftedVersion v = Craft(name);
    EXPECT_TRUE(StoreCrafted(*store_, v).ok());
    auto view = VersionView::Open(store_, v.digest);
    EXPECT_TRUE(view.has_value()) << view.error().message();
    return view ? *view : nullptr;
  }
  // CatFile into a file: the status, and the bytes written.
  std::pair<Status, std::string> Cat(const VersionView& view, const std::string& path) {
    fs::path out = dir_ / "cat.out";
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    Status s = CatFile(view, path, fd);
    ::close(fd);
    std::ifstream in(out, std::ios::binary);
    return {s, std::string(std::istreambuf_iterator<char>(in), {})};
  }
  std::string ChunkTooLong(uint64_t says) const {
    return "file \"f.bin\": chunk " + kHello.ToString() + ": is 6 bytes, the version says " +
           std::to_string(says);
  }

  fs::path dir_;
  std::shared_ptr<MemChunkStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Store, Readers, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Batched" : "PerChunk"; });

// Issue 7: `verify` reported 0 problems, `cat` exited 0 with 12 bytes and `pull` wrote a
// 20-byte file whose BLAKE3 is not the recorded digest.
TEST_P(Readers, ChunksListedLongerThanStoredAreCorruptionEverywhere) {
  auto view = Open("overlong-chunks");
  ASSERT_NE(view, nullptr);
  const Entry& f = *view->Find("f.bin");

  std::vector<uint8_t> buf(20);
  auto read = view->Read(f, 0, buf);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(read.error().message(), ChunkTooLong(10));

  auto [cat, written] = Cat(*view, "f.bin");
  EXPECT_EQ(cat.code(), StatusCode::kCorruption);
  EXPECT_EQ(cat.message(), ChunkTooLong(10));
  EXPECT_EQ(written, "");  // a chunk is checked before any of it is written
  auto [ok, fine] = Cat(*view, "ok.txt");
  EXPECT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(fine, "fine\n");

  auto pulled = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_FALSE(pulled.has_value());
  EXPECT_EQ(pulled.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(pulled.error().message(), ChunkTooLong(10));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "f.bin"));

  auto verified = VerifyVersion(*view, 2);
  ASSERT_TRUE(verified.has_value()) << verified.error().message();
  EXPECT_EQ(verified->files, 2u);
  ASSERT_EQ(verified->problems.size(), 2u);  // each listing of the chunk
  for (const VerifyProblem& p : verified->problems) {
    EXPECT_EQ(p.path, "f.bin");
    EXPECT_EQ(p.chunk, kHello);
    EXPECT_EQ(p.status.code(), StatusCode::kCorruption);
    EXPECT_EQ(p.status.message(),
              "chunk " + kHello.ToString() + ": is 6 bytes, the version says 10");
  }
}

// Issue 7: a single-chunk file declared 999 bytes over a 6-byte chunk pulled as a zero-padded
// file.
TEST_P(Readers, SingleChunkFileLongerThanItsChunkIsCorruptionEverywhere) {
  auto view = Open("overlong-single");
  ASSERT_NE(view, nullptr);
  const Entry& f = *view->Find("f.bin");
  std::vector<uint8_t> buf(999);
  auto read = view->Read(f, 0, buf);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().message(), ChunkTooLong(999));

  auto [cat, written] = Cat(*view, "f.bin");
  EXPECT_EQ(cat.message(), ChunkTooLong(999));
  EXPECT_EQ(written, "");

  auto pulled = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_FALSE(pulled.has_value());
  EXPECT_EQ(pulled.error().message(), ChunkTooLong(999));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "f.bin"));

  auto verified = VerifyVersion(*view, 1);
  ASSERT_TRUE(verified.has_value());
  ASSERT_EQ(verified->problems.size(), 1u);
  EXPECT_EQ(verified->problems[0].status.message(),
            "chunk " + kHello.ToString() + ": is 6 bytes, the version says 999");
}

// Issue 7: with right lengths but a wrong file digest, `cat` printed the bytes and exited 0.
TEST_P(Readers, AWrongFileDigestIsCorruptionForCatPullAndVerify) {
  auto view = Open("wrong-digest");
  ASSERT_NE(view, nullptr);
  const std::string mismatch = "file \"f.bin\": content does not match its digest " +
                               Digest::Of(std::string_view("something else")).ToString();
  auto [cat, written] = Cat(*view, "f.bin");
  EXPECT_EQ(cat.code(), StatusCode::kCorruption);
  EXPECT_EQ(cat.message(), mismatch + " (the bytes written are not the file's)");
  EXPECT_EQ(written, "hello\nworld\n");

  auto pulled = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_FALSE(pulled.has_value());
  EXPECT_EQ(pulled.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(pulled.error().message(), mismatch);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "f.bin"));

  auto verified = VerifyVersion(*view, 1);
  ASSERT_TRUE(verified.has_value());
  ASSERT_EQ(verified->problems.size(), 1u);
  EXPECT_EQ(verified->problems[0].path, "f.bin");
  // The problem names the file once (verify printed "file \"f.bin\": file \"f.bin\": ...").
  EXPECT_EQ(verified->problems[0].status.message(),
            "content does not match its digest " +
                Digest::Of(std::string_view("something else")).ToString());
}

// A chunk index that leaves part of its file uncovered: pull left an empty ".bdn-partial-…"
// file behind, and verify named the file twice in the problem.
TEST_P(Readers, AChunkListThatDoesNotCoverItsFileLeavesNoPartialFile) {
  CraftedVersion v = Craft("short-index");
  auto view = Open("short-index");
  ASSERT_NE(view, nullptr);
  const std::string uncovered = "chunks add up to 6 bytes, the file has 12";

  auto pulled = Pull(*view, dir_ / "out", PullOptions{}, nullptr);
  ASSERT_FALSE(pulled.has_value());
  EXPECT_EQ(pulled.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(pulled.error().message(), "file \"f.bin\": " + uncovered);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir_ / "out")) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"ok.txt"});

  auto verified = VerifyVersion(*view, 1);
  ASSERT_TRUE(verified.has_value()) << verified.error().message();
  ASSERT_EQ(verified->problems.size(), 1u);
  EXPECT_EQ(verified->problems[0].path, "f.bin");
  EXPECT_EQ(verified->problems[0].chunk, v.blobs[v.blobs.size() - 2].first);  // the index
  EXPECT_EQ(verified->problems[0].status.code(), StatusCode::kCorruption);
  EXPECT_EQ(verified->problems[0].status.message(), uncovered);
}

// A store that cannot be reached while verify loads a chunk index: the walk stops with that
// error (exit 7), it is not a problem of the version (it was reported as corruption, exit 5).
TEST(Verify, AnUnreachableChunkIndexStopsTheWalk) {
  class IndexUnreachable : public MemChunkStore {
   public:
    explicit IndexUnreachable(Digest index) : index_(index) {}
    Result<std::vector<uint8_t>> Get(const Digest& id) override {
      if (id == index_) return Err(UnavailableError("store: connection refused"));
      return MemChunkStore::Get(id);
    }

   private:
    Digest index_;
  };
  CraftedVersion v = Craft("good");
  auto store = std::make_shared<IndexUnreachable>(v.blobs[v.blobs.size() - 2].first);
  ASSERT_TRUE(StoreCrafted(*store, v).ok());
  auto view = VersionView::Open(store, v.digest);
  ASSERT_TRUE(view.has_value());
  auto verified = VerifyVersion(**view, 1);
  ASSERT_FALSE(verified.has_value());
  EXPECT_EQ(verified.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(verified.error().message(), "file \"f.bin\": chunk index: store: connection refused");
}

TEST_P(Readers, AGoodVersionReadsWhole) {
  auto view = Open("good");
  ASSERT_NE(view, nullptr);
  auto [cat, written] = Cat(*view, "f.bin");
  EXPECT_TRUE(cat.ok()) << cat.message();
  EXPECT_EQ(written, "hello\nworld\n");
  auto verified = VerifyVersion(*view, 1);
  ASSERT_TRUE(verified.has_value());
  EXPECT_TRUE(verified->problems.empty());
  std::vector<uint8_t> buf(100);
  auto read = view->Read(*view->Find("f.bin"), 3, buf);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(std::string(buf.begin(), buf.begin() + *read), "lo\nworld\n");
  // An offset and length whose sum overflows reads to the end of the file.
  read = view->Read(*view->Find("f.bin"), 11, std::span<uint8_t>(buf.data(), 1));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, 1u);
}

// Issue 7: a single-chunk file declared 4 GiB overflowed the mount's chunk list; a version that
// says so does not open, and the index lengths a reader gets are checked before use.
TEST(ReadersOpen, SizesNoReaderCanHoldAreRefusedAtOpen) {
  auto store = std::make_shared<MemChunkStore>();
  for (const char* name : {"huge-single", "huge-pair"}) {
    CraftedVersion v = Craft(name);
    ASSERT_TRUE(StoreCrafted(*store, v).ok());
    auto view = VersionView::Open(store, v.digest);
    ASSERT_FALSE(view.has_value()) << name;
    EXPECT_EQ(view.error().code(), StatusCode::kCorruption);
    EXPECT_TRUE(view.error().message().starts_with("version " + v.digest.ToString() +
                                                   ": manifest: path \""))
        << view.error().message();
  }
  // huge-total opens (each size is valid) but its files' chunk lists do not cover them.
  CraftedVersion v = Craft("huge-total");
  ASSERT_TRUE(StoreCrafted(*store, v).ok());
  auto view = *VersionView::Open(store, v.digest);
  auto chunks = view->ChunksOf(*view->Find("a.bin"));
  ASSERT_FALSE(chunks.has_value());
  EXPECT_EQ(chunks.error().message(),
            "file \"a.bin\": chunks add up to 6 bytes, the file has 4611686018427387904");
  std::vector<uint8_t> buf(16);
  auto read = view->Read(*view->Find("a.bin"), (1ull << 62) - 8, buf);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code(), StatusCode::kCorruption);
}

// The blob set that scopes reads of a version (VersionBlobCache) takes a file whose chunk list
// cannot be read whole as the index blobs it names, so readers report that file themselves and
// the rest of the version stays readable; such a set is not kept, so a repaired version is read
// again. CollectVersionBlobs (GC's mark, fsck) stays strict.
TEST(VersionBlobCacheTest, ALyingOrMissingIndexLeavesTheRestOfTheVersionReadable) {
  const Digest fine = Digest::Of(std::string("fine\n"));
  const Digest hello = Digest::Of(std::string("hello\n"));
  {
    auto store = std::make_shared<MemChunkStore>();
    CraftedVersion v = Craft("short-index");
    ASSERT_TRUE(StoreCrafted(*store, v).ok());
    const Digest index = v.blobs[v.blobs.size() - 2].first;
    std::vector<Digest> strict;
    EXPECT_EQ(CollectVersionBlobs(*store, v.digest, strict).code(), StatusCode::kCorruption);
    VersionBlobCache cache(store, 1 << 20);
    auto set = cache.Get(v.digest);
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    EXPECT_TRUE((*set)->Contains(v.digest));
    EXPECT_TRUE((*set)->Contains(fine));
    EXPECT_TRUE((*set)->Contains(index));
    EXPECT_EQ(cache.stats().versions, 0u);
  }
  {
    auto store = std::make_shared<MemChunkStore>();
    CraftedVersion v = Craft("huge-single");  // the manifest itself does not decode
    ASSERT_TRUE(StoreCrafted(*store, v).ok());
    VersionBlobCache cache(store, 1 << 20);
    auto set = cache.Get(v.digest);
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    EXPECT_TRUE((*set)->Contains(v.digest));
    EXPECT_EQ((*set)->size(), 1u);
  }
  auto store = std::make_shared<MemChunkStore>();
  CraftedVersion v = Craft("good");
  const Digest index = v.blobs[v.blobs.size() - 2].first;
  ASSERT_TRUE(StoreCrafted(*store, v, {index}).ok());
  VersionBlobCache cache(store, 1 << 20);
  auto set = cache.Get(v.digest);
  ASSERT_TRUE(set.has_value()) << set.error().ToString();
  EXPECT_TRUE((*set)->Contains(fine));
  EXPECT_TRUE((*set)->Contains(index));
  EXPECT_FALSE((*set)->Contains(hello));  // named only by the missing index
  EXPECT_EQ(cache.stats().loads, 0u);
  // Repaired: the next read builds the whole set, and keeps it.
  ASSERT_TRUE(StoreCrafted(*store, v).ok());
  set = cache.Get(v.digest);
  ASSERT_TRUE(set.has_value()) << set.error().ToString();
  EXPECT_TRUE((*set)->Contains(hello));
  EXPECT_EQ(cache.stats().loads, 1u);
  EXPECT_EQ(cache.stats().versions, 1u);
}

}  // namespace
}  // namespace bdn
