// Tests for RunGc over the local pack store: what is deleted and repacked, what live and
// restorable versions keep, dry runs, and the interleavings with writers that a GC must survive
// (driven exactly through GcOptions::hook, never with sleeps).
#include "bdn/maintenance/gc.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bdn/base/hex.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/maintenance/fsck.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/pack_index.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"
#include "bdn/volume/push.h"
#include "bdn/volume/push_test_util.h"
#include "bdn/volume/version_check.h"
#include "bdn/volume/version_view.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using std::chrono::hours;

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(ClaimMode::kProcessFile); }

  void Open(ClaimMode mode) {
    mode_ = mode;
    registry_.reset();
    store_.reset();
    LocalChunkStore::Options o;
    o.durability = LocalChunkStore::Durability::kNone;
    o.codec.min_saving = 1;  // raw: record sizes are the data sizes
    o.claims = mode;
    o.clock = clock_;
    o.max_open_packs = 1;  // one push, one pack
    o.pack_target_bytes = pack_target_bytes_;
    auto s = LocalChunkStore::Open(store_dir_, o);
    ASSERT_OK(s);
    store_ = std::move(*s);
    RegistryOptions r;
    r.retention = hours(24);
    r.clock = clock_;
    auto reg = SqliteRegistry::Open(dir_.path() / "registry.db", r);
    ASSERT_OK(reg);
    registry_ = std::make_shared<CommitCheckingRegistry>(std::move(*reg), store_, clock_);
  }

  // Pushes files {name: bytes} as a new version of w/v and returns its digest.
  Digest PushFiles(const std::vector<std::pair<std::string, std::vector<uint8_t>>>& files) {
    auto r = ::bdn::testing::PushFilesForTest(
        *store_, *registry_, dir_.path() / ("src-" + std::to_string(++pushes_)), files);
    EXPECT_OK(r);
    return r ? *r : Digest();
  }

  // A version of file "a" pushed, deleted and past its retention, in a new process: what a GC
  // collects unless something commits it again.
  Digest PushedAndExpired() {
    Digest v = PushFiles({{"a", a_}});
    EXPECT_OK(registry_->DeleteVersions("w", "v", v, std::nullopt));
    clock_->Advance(hours(25));
    NewProcess();
    return v;
  }

  // Every file of `version` reads back whole and verified.
  void ExpectReadable(const Digest& version) {
    EXPECT_OK(::bdn::testing::ReadVersionForTest(store_, version));
  }

  size_t PackCount() {
    size_t n = 0;
    for (const auto& f : fs::directory_iterator(dir_.path() / "store" / "packs")) {
      n += f.path().extension() == ".pack";
    }
    return n;
  }

  // A store opened anew: the writers of the pushes so far are gone (their claims end with them,
  // as with a bdn process that exits).
  void NewProcess() { Open(mode_); }

  Result<GcReport> Gc(GcOptions o = {}) {
    o.clock = clock_;
    return RunGc(*registry_, *store_, o);
  }
  // Commits `version` again as a version of volume w/other, straight from the blobs stored (the
  // commit check reads doomed copies as stored): a version committed during a GC's grace.
  void CommitAsOther(const Digest& version) {
    CommitRequest req;
    req.ns = "w";
    req.volume = "other";
    req.digest = version;
    EXPECT_OK(registry_->Commit(req));
  }

  testutil::TempDir dir_;
  fs::path store_dir_ = dir_.path() / "store";
  std::shared_ptr<testutil::FakeClock> clock_ = std::make_shared<testutil::FakeClock>();
  std::shared_ptr<LocalChunkStore> store_;
  std::shared_ptr<Registry> registry_;
  int pushes_ = 0;
  ClaimMode mode_ = ClaimMode::kProcessFile;
  uint64_t pack_target_bytes_ = uint64_t{32} << 20;
  const std::vector<uint8_t> a_ = testutil::RandomBytes(3 << 20, 1);
  const std::vector<uint8_t> b_ = testutil::RandomBytes(1 << 20, 2);
  const std::vector<uint8_t> small_ = testutil::RandomBytes(20000, 3);
};

TEST_F(GcTest, NothingIsReclaimedWhileEveryVersionIsLive) {
  Digest v1 = PushFiles({{"a", a_}});
  Digest v2 = PushFiles({{"b", b_}});
  auto r = Gc();
  ASSERT_OK(r);
  EXPECT_EQ(r->versions, 2u);
  EXPECT_TRUE(r->actions.empty());
  EXPECT_EQ(r->packs_deleted, 0u);
  ExpectReadable(v1);
  ExpectReadable(v2);
}

// A registry that never held a volume beside a store of packs is not the store's (a server of a
// --db started without it made a new one, and its GC deleted every pack): nothing is doomed.
TEST_F(GcTest, ARegistryThatNeverHeldAVolumeBesidePacksIsRefused) {
  Digest v = PushFiles({{"a", a_}});
  const size_t packs = PackCount();
  ASSERT_GT(packs, 0u);
  registry_.reset();
  fs::remove(dir_.path() / "registry.db");
  NewProcess();
  for (GcMode mode : {GcMode::kDryRun, GcMode::kRun}) {
    GcOptions o;
    o.mode = mode;
    auto r = Gc(o);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.error().message(), "gc: the registry holds no volume, but the store holds " +
                                       std::to_string(packs) + (packs == 1 ? " pack" : " packs") +
                                       ": refusing to delete them all (is the registry this "
                                       "store's?); nothing was done");
  }
  EXPECT_EQ(PackCount(), packs);
  ExpectReadable(v);
}

TEST_F(GcTest, AVersionPastItsRetentionLosesItsPacksAndADryRunSaysSoFirst) {
  Digest v1 = PushFiles({{"a", a_}});
  Digest v2 = PushFiles({{"b", b_}});
  const size_t packs = PackCount();
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  NewProcess();
  // Restorable: kept.
  auto kept = Gc();
  ASSERT_OK(kept);
  EXPECT_TRUE(kept->actions.empty());
  EXPECT_EQ(kept->versions, 2u);

  clock_->Advance(hours(25));
  NewProcess();
  GcOptions dry;
  dry.mode = GcMode::kDryRun;
  auto plan = Gc(dry);
  ASSERT_OK(plan);
  ASSERT_EQ(plan->actions.size(), 1u);
  EXPECT_EQ(plan->actions[0].kind, GcPackAction::Kind::kDelete);
  EXPECT_GT(plan->reclaimable_bytes, a_.size());
  EXPECT_EQ(PackCount(), packs);  // a dry run deletes nothing

  auto r = Gc();
  ASSERT_OK(r);
  EXPECT_EQ(r->packs_deleted, 1u);
  EXPECT_EQ(r->bytes_reclaimed, plan->reclaimable_bytes);
  EXPECT_EQ(PackCount(), packs - 1);
  ExpectReadable(v2);
  auto gone = store_->Get(v1);
  EXPECT_STATUS(gone, kNotFound, "");
  // The store opened again (its index rewritten) agrees.
  Open(ClaimMode::kProcessFile);
  ExpectReadable(v2);
  EXPECT_STATUS(store_->Get(v1), kNotFound, "");
}

TEST_F(GcTest, AMostlyDeadPackIsRepackedAndItsNeededBlobsStay) {
  // One push: a big file and a small one share a pack; the next version keeps only the small one.
  Digest v1 = PushFiles({{"a", a_}, {"s", small_}});
  Digest v2 = PushFiles({{"s", small_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  auto r = Gc();
  ASSERT_OK(r);
  ASSERT_GE(r->packs_repacked, 1u);
  EXPECT_GT(r->blobs_copied, 0u);
  EXPECT_GT(r->bytes_reclaimed, a_.size());
  ExpectReadable(v2);
  EXPECT_STATUS(store_->Get(v1), kNotFound, "");
  Open(ClaimMode::kProcessFile);
  ExpectReadable(v2);
  // A second run finds nothing more to do.
  auto again = Gc();
  ASSERT_OK(again);
  EXPECT_TRUE(again->actions.empty());
}

// A pack whose every blob is needed is kept whatever the fraction, however small: its header
// and footer outweigh a small blob, but a repack would make as small a pack, copied again at
// every run (found by ReadersOpenedBeforeGc...: a pack holding one manifest was repacked
// by each GC).
TEST_F(GcTest, APackOfNeededBlobsOnlyIsNeverRepacked) {
  Digest v1 = PushFiles({{"s", small_}});
  Digest v2 = PushFiles({{"s", small_}, {"t", std::vector<uint8_t>{'t'}}});  // a tiny pack
  GcOptions o;
  o.max_repack_fraction = 1;  // repack every pack that holds any garbage
  for (int run = 0; run < 2; ++run) {
    auto r = Gc(o);
    ASSERT_OK(r);
    EXPECT_EQ(r->versions, 2u);
    EXPECT_TRUE(r->actions.empty())
        << "run " << run << ": pack " << Hex16(r->actions[0].pack) << " of " << r->actions[0].bytes
        << " bytes, " << r->actions[0].needed_bytes << " needed";
  }
  ExpectReadable(v1);
  ExpectReadable(v2);
}

TEST_F(GcTest, ZeroRepackFractionOnlyDeletesDeadPacks) {
  Digest v1 = PushFiles({{"a", a_}, {"s", small_}});
  PushFiles({{"s", small_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  GcOptions o;
  o.max_repack_fraction = 0;
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_TRUE(r->actions.empty());
  // The report says what was held back, so a dry run that reclaims nothing explains itself.
  EXPECT_EQ(r->packs_kept_with_garbage, 1u);
  EXPECT_GT(r->garbage_bytes_kept, a_.size());
  o.max_repack_fraction = 1;
  o.mode = GcMode::kDryRun;
  auto all = Gc(o);
  ASSERT_OK(all);
  EXPECT_EQ(all->actions.size(), 1u);
  EXPECT_EQ(all->packs_kept_with_garbage, 0u);
  EXPECT_EQ(all->garbage_bytes_kept, 0u);
}

// The interleaving of the issue: a blob GC has decided to delete is uploaded again (a push of
// the same data) after the doom and before the sweep. Put sees the doom and stores a new copy;
// the sweep deletes the old pack; the new version reads back whole.
TEST_F(GcTest, ABlobUploadedAgainWhileGcDecidesToDeleteItSurvives) {
  Digest v1 = PushFiles({{"a", a_}});
  Digest v2 = PushFiles({{"b", b_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  Digest again;
  GcOptions o;
  o.hook = [&](GcPhase p) {
    if (p != GcPhase::kDoomed) return;
    // The pack of v1 is doomed now: the same tree pushed again must store its chunks anew.
    again = PushFiles({{"a", a_}});
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_EQ(again, v1);  // the same tree: the same digest, alive again as a new version
  EXPECT_EQ(r->packs_deleted, 1u);
  ExpectReadable(v1);
  ExpectReadable(v2);
  Open(ClaimMode::kProcessFile);
  ExpectReadable(v1);
}

// A writer told "stored" before the doom (FindMissing), that commits after the sweep: its claim
// keeps the blob (copied out of the doomed pack), so its commit check passes.
TEST_F(GcTest, ABlobAWriterWasToldIsStoredBeforeTheDoomIsKept) {
  Digest v1 = PushFiles({{"a", a_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  GcOptions o;
  o.hook = [&](GcPhase p) {
    if (p != GcPhase::kPlanned) return;
    // After the first mark (v1 is garbage), before the doom: the writer learns v1's manifest
    // is stored and will rely on it.
    auto missing = store_->FindMissing(std::vector<Digest>{v1});
    ASSERT_OK(missing);
    EXPECT_TRUE(missing->empty());
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_EQ(r->blobs_rescued, 1u);
  EXPECT_OK(store_->Get(v1));
}

// The same with the claims of bdn serve, kept in memory.
TEST_F(GcTest, ClaimsInMemoryKeepWhatTheyClaim) {
  Open(ClaimMode::kMemory);
  Digest v1 = PushFiles({{"a", a_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));  // claims older than 10 minutes are dropped
  GcOptions o;
  o.hook = [&](GcPhase p) {
    if (p == GcPhase::kPlanned) {
      EXPECT_OK(store_->Contains(v1));
    }
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_EQ(r->blobs_rescued, 1u);
  EXPECT_OK(store_->Get(v1));
}

// A version committed during the grace is marked by the sweep's second look.
TEST_F(GcTest, AVersionCommittedDuringTheGraceKeepsItsBlobs) {
  const Digest v1 = PushedAndExpired();
  GcOptions o;
  o.grace = std::chrono::minutes(10);
  o.hook = [&](GcPhase p) {
    if (p == GcPhase::kCopied) CommitAsOther(v1);
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_GE(r->blobs_rescued, 2u);  // the manifest and the file's chunks
  ExpectReadable(v1);
}

// The sweep decides what to rescue from its own doom, not from the store's view of the doom,
// which every writer re-reads (in PostgreSQL, another run whose lock was lost may replace or
// clear it meanwhile): here the doom is cleared during the grace, so writers see the doomed
// pack as live and a commit relies on it; the sweep still copies its blobs before deleting it.
TEST_F(GcTest, ADoomClearedBehindTheRunsBackStillGetsItsNeededBlobsCopied) {
  const Digest v1 = PushedAndExpired();
  GcOptions o;
  o.grace = std::chrono::minutes(10);
  o.hook = [&](GcPhase p) {
    if (p != GcPhase::kCopied) return;
    ASSERT_OK(store_->ClearDoom());
    CommitAsOther(v1);
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_GE(r->blobs_rescued, 2u);  // the manifest and the file's chunks
  EXPECT_EQ(r->packs_deleted, 1u);
  ExpectReadable(v1);
}

// Readers that opened the store before a GC (other processes: their own LocalChunkStore) keep
// reading the right bytes across a repack and a pack deletion (docs/format.md, "Garbage
// collection", readers). During the grace every doomed copy is still there. After the sweep, a
// reader that had a doomed pack open keeps reading it (the file lives on while it is open), one
// that had not finds a repacked blob in its new pack, and a blob no retained version needs is
// gone for it: NotFound, as for any blob not in the store.
TEST_F(GcTest, ReadersOpenedBeforeGcKeepReadingAcrossARepackAndAPackDeletion) {
  Digest mixed = PushFiles({{"a", a_}, {"s", small_}});  // pack 1: repacked (only s is needed)
  Digest keep = PushFiles({{"s", small_}});
  Digest dead = PushFiles({{"b", b_}});  // pack 3: deleted with this version
  ASSERT_OK(registry_->DeleteVersions("w", "v", mixed, std::nullopt));
  ASSERT_OK(registry_->DeleteVersions("w", "v", dead, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  auto open_reader = [&]() -> std::shared_ptr<LocalChunkStore> {
    LocalChunkStore::Options o;
    o.durability = LocalChunkStore::Durability::kNone;
    auto s = LocalChunkStore::Open(store_dir_, o);
    EXPECT_OK(s);
    return s ? std::shared_ptr<LocalChunkStore>(std::move(*s)) : nullptr;
  };
  // `held` read from both doomed packs before the GC (it has them open); `late` opened the store
  // before the GC but reads only after the sweep; `during` reads in the grace.
  std::shared_ptr<LocalChunkStore> held = open_reader(), late = open_reader(),
                                   during = open_reader();
  ASSERT_TRUE(held && late && during);
  // Bytes of file `name` of `version` as `store` reads them.
  auto read = [](std::shared_ptr<ChunkStore> store, const Digest& version,
                 const std::string& name) -> Result<std::vector<uint8_t>> {
    BDN_ASSIGN_OR_RETURN(auto view, VersionView::Open(std::move(store), version));
    const Entry* e = view->Find(name);
    if (!e) return Err(NotFoundError(name));
    std::vector<uint8_t> out(e->size_bytes);
    BDN_ASSIGN_OR_RETURN(size_t n, view->Read(*e, 0, out));
    out.resize(n);
    return out;
  };
  auto held_keep = VersionView::Open(held, keep);
  ASSERT_OK(held_keep);
  auto held_dead = VersionView::Open(held, dead);
  ASSERT_OK(held_dead);
  std::vector<uint8_t> first(1000);
  ASSERT_OK((*held_keep)->Read(*(*held_keep)->Find("s"), 0, first));
  ASSERT_OK((*held_dead)->Read(*(*held_dead)->Find("b"), 0, first));

  size_t packs_in_grace = 0;
  GcOptions o;
  o.grace = std::chrono::minutes(10);
  o.hook = [&](GcPhase p) {
    if (p != GcPhase::kCopied) return;
    packs_in_grace = PackCount();
    // Doomed and copied, nothing deleted: every reader reads every copy.
    for (auto store : {std::static_pointer_cast<ChunkStore>(held),
                       std::static_pointer_cast<ChunkStore>(during)}) {
      auto s = read(store, keep, "s");
      ASSERT_OK(s);
      EXPECT_EQ(*s, small_);
      auto b = read(store, dead, "b");
      ASSERT_OK(b);
      EXPECT_EQ(*b, b_);
    }
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_EQ(r->packs_repacked, 1u);
  EXPECT_EQ(r->packs_deleted, 2u);
  EXPECT_EQ(PackCount(), packs_in_grace - 2);

  // The views opened before the GC read on, from the packs they hold open.
  std::vector<uint8_t> s(small_.size()), b(b_.size());
  auto n = (*held_keep)->Read(*(*held_keep)->Find("s"), 0, s);
  ASSERT_OK(n);
  EXPECT_EQ(s, small_);
  n = (*held_dead)->Read(*(*held_dead)->Find("b"), 0, b);
  ASSERT_OK(n);
  EXPECT_EQ(b, b_);
  // A reader that had not opened the repacked pack finds the copy in its new pack.
  auto late_s = read(late, keep, "s");
  ASSERT_OK(late_s);
  EXPECT_EQ(*late_s, small_);
  // The collected version is gone for a reader that did not hold its pack.
  auto late_b = read(late, dead, "b");
  EXPECT_STATUS(late_b, kCorruption, "manifest " + dead.ToString() + ": not in the store");
  EXPECT_STATUS(late->Get(dead), kNotFound, "chunk " + dead.ToString() + ": not in store");
}

// A writer in another process that loaded its view of the store before a GC deleted a version's
// packs, then pushes the same tree (committing the expired version again): its commit check must
// not count the blobs only those deleted packs held, whether it still has a pack open (it read the
// manifest before the GC) or knows it from the index alone. From an attacking helper: pushes,
// rm/restore and `gc --grace 0s` in loops committed versions whose manifest was gone, and the next
// gc stopped with "manifest ...: not in the store".
TEST_F(GcTest, AWriterWhoseViewPredatesTheSweepStoresWhatTheSweepDeletedAgain) {
  for (bool held_open : {true, false}) {
    SCOPED_TRACE(held_open ? "the writer has the pack open" : "the writer knows it from the index");
    Digest v = PushedAndExpired();
    LocalChunkStore::Options o;
    o.durability = LocalChunkStore::Durability::kNone;
    o.claims = ClaimMode::kProcessFile;
    o.clock = clock_;
    auto opened = LocalChunkStore::Open(store_dir_, o);
    ASSERT_OK(opened);
    std::shared_ptr<LocalChunkStore> writer = std::move(*opened);
    if (held_open) {
      ASSERT_OK(writer->Get(v));
    }
    RegistryOptions ro;
    ro.retention = hours(24);
    ro.clock = clock_;
    auto reg = SqliteRegistry::Open(dir_.path() / "registry.db", ro);
    ASSERT_OK(reg);
    CommitCheckingRegistry writer_registry(std::move(*reg), writer, clock_);

    auto r = Gc();
    ASSERT_OK(r);
    ASSERT_GE(r->packs_deleted, 1u);
    auto again = ::bdn::testing::PushFilesForTest(
        *writer, writer_registry, dir_.path() / ("again-" + std::to_string(held_open)),
        {{"a", a_}});
    ASSERT_OK(again);
    EXPECT_EQ(*again, v);
    writer.reset();
    NewProcess();
    ExpectReadable(v);
    auto next = Gc();
    EXPECT_OK(next);
    ASSERT_OK(registry_->DeleteVersions("w", "v", v, std::nullopt));
    clock_->Advance(hours(25));
  }
}

// A GC that dies after deleting its packs and before rewriting the index (GcPhase::kDeleted)
// leaves index entries of packs that are gone: readers skip them, the next open of the store
// drops them, and fsck does not count them as a problem.
TEST_F(GcTest, AGcDeadBeforeItRewroteTheIndexLeavesEntriesTheNextOpenDrops) {
  Digest v1 = PushFiles({{"a", a_}});
  Digest v2 = PushFiles({{"b", b_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();  // its open writes one index table over both packs
  auto located = store_->Locate(v1);
  ASSERT_OK(located);
  ASSERT_TRUE(located->has_value());
  auto dead_pack = pack::ParseHex16Name((*located)->pack_path.filename().string(), ".pack");
  ASSERT_TRUE(dead_pack.has_value());
  auto tables_naming = [&](uint64_t p) {
    int n = 0;
    for (const auto& f : fs::directory_iterator(dir_.path() / "store" / "index")) {
      if (f.path().extension() != ".idx") continue;
      auto t = pack::IndexTable::Open(f.path());
      EXPECT_OK(t);
      if (t && std::ranges::find((*t)->packs(), p) != (*t)->packs().end()) ++n;
    }
    return n;
  };
  ASSERT_EQ(tables_naming(*dead_pack), 1);
  bool reached = false;
  GcOptions o;
  o.hook = [&](GcPhase p) {
    if (p != GcPhase::kDeleted) return;
    reached = true;
    // As if the GC died here: the pack is gone, the index still names it.
    EXPECT_FALSE(fs::exists(dir_.path() / "store" / "packs" / (Hex16(*dead_pack) + ".pack")));
    EXPECT_EQ(tables_naming(*dead_pack), 1);
    LocalChunkStore::Options next_options;
    next_options.durability = LocalChunkStore::Durability::kNone;
    next_options.claims = ClaimMode::kProcessFile;
    auto fsck = RunFsck(dir_.path() / "store", *registry_, FsckMode::kCheck, next_options);
    ASSERT_OK(fsck);
    EXPECT_TRUE(fsck->problems.empty()) << fsck->problems.front().message;
    auto next = LocalChunkStore::Open(dir_.path() / "store", next_options);  // the next process
    ASSERT_OK(next);
    EXPECT_EQ(tables_naming(*dead_pack), 0);
    std::shared_ptr<ChunkStore> next_store = std::move(*next);
    auto view = VersionView::Open(next_store, v2);
    ASSERT_OK(view);
    std::vector<uint8_t> got(b_.size());
    auto n = (*view)->Read(*(*view)->Find("b"), 0, got);
    ASSERT_OK(n);
    EXPECT_EQ(got, b_);
    EXPECT_STATUS(next_store->Get(v1), kNotFound, "chunk " + v1.ToString() + ": not in store");
  };
  auto r = Gc(o);
  ASSERT_OK(r);
  EXPECT_TRUE(reached);
  EXPECT_EQ(r->packs_deleted, 1u);
  ExpectReadable(v2);
}

TEST_F(GcTest, OneGcAtATime) {
  auto held = store_->BeginGc();
  ASSERT_OK(held);
  auto r = Gc();
  EXPECT_STATUS(r, kConflict, "");
  EXPECT_NE(r.error().message().find("another gc is running (pid "), std::string::npos)
      << r.error().message();
}

// A store whose sweep holds are lost once taken (a PostgreSQL advisory lock whose connection
// ended: the server restarted during the sweep's mark), the rest the store's own.
// A GcStore that forwards every call to a LocalChunkStore: the base of the test doubles below.
class ForwardingGcStore : public GcStore {
 public:
  explicit ForwardingGcStore(LocalChunkStore& store) : store_(store) {}
  Result<std::unique_ptr<StoreHold>> BeginGc() override { return store_.BeginGc(); }
  Result<std::vector<GcPack>> ListSealedPacks(uint64_t* skipped) override {
    return store_.ListSealedPacks(skipped);
  }
  bool IsQuarantined(uint64_t pack, uint64_t offset) override {
    return store_.IsQuarantined(pack, offset);
  }
  Status PublishDoom(std::span<const uint64_t> packs) override { return store_.PublishDoom(packs); }
  Status ClearDoom() override { return store_.ClearDoom(); }
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override { return store_.HoldForSweep(); }
  Result<std::vector<Digest>> LiveClaims() override { return store_.LiveClaims(); }
  Result<bool> HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) override {
    return store_.HasLiveCopy(id, doomed);
  }
  Status DeletePacks(std::span<const uint64_t> packs) override { return store_.DeletePacks(packs); }
  Status CompactIndex() override { return store_.CompactIndex(); }
  ChunkStore& blobs() override { return store_.blobs(); }

 protected:
  LocalChunkStore& store_;
};

// Its sweep hold is lost (a database connection that ended).
class LosingSweepHolds : public ForwardingGcStore {
 public:
  using ForwardingGcStore::ForwardingGcStore;
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override {
    class Lost : public StoreHold {
     public:
      explicit Lost(std::unique_ptr<StoreHold> inner) : inner_(std::move(inner)) {}
      Result<bool> Held() override { return false; }

     private:
      std::unique_ptr<StoreHold> inner_;
    };
    BDN_ASSIGN_OR_RETURN(auto held, store_.HoldForSweep());
    return std::unique_ptr<StoreHold>(std::make_unique<Lost>(std::move(held)));
  }
};

// A writer holds claims on `claimed` until, during the first mark (when the mark first reads
// blobs, after the registry), it commits and exits (`commit`, then no claims).
class CommitsDuringTheMark : public ForwardingGcStore {
 public:
  CommitsDuringTheMark(LocalChunkStore& store, std::vector<Digest> claimed,
                       std::function<void()> commit)
      : ForwardingGcStore(store), claimed_(std::move(claimed)), commit_(std::move(commit)) {}
  Result<std::vector<Digest>> LiveClaims() override {
    if (committed_) return std::vector<Digest>{};
    return claimed_;
  }
  ChunkStore& blobs() override {
    if (!committed_) {
      committed_ = true;
      commit_();
    }
    return store_.blobs();
  }

 private:
  std::vector<Digest> claimed_;
  std::function<void()> commit_;
  bool committed_ = false;
};

// The first mark reads the claims before the registry, as the sweep does: a writer that released
// its claims had committed by then. From a user: read the other way round, a push that committed
// and exited in between was in neither, its packs were doomed whole and the sweep copied them
// back (200 MiB of writes for a 200 MiB push).
TEST_F(GcTest, AWriterThatCommitsDuringTheMarkIsNeverDoomed) {
  Digest v1 = PushFiles({{"a", a_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  std::vector<Digest> claimed;
  auto packs = store_->ListSealedPacks(nullptr);
  ASSERT_OK(packs);
  for (const GcPack& p : *packs) {
    for (const auto& b : p.blobs) claimed.push_back(b.id);
  }
  ASSERT_FALSE(claimed.empty());
  CommitsDuringTheMark writer(*store_, claimed, [&] { CommitAsOther(v1); });
  GcOptions o;
  o.clock = clock_;
  auto r = RunGc(*registry_, writer, o);
  ASSERT_OK(r);
  EXPECT_EQ(r->packs_deleted, 0u);
  EXPECT_EQ(r->blobs_rescued, 0u);
  ExpectReadable(v1);
}

// The sweep's hold kept commits out since its mark; lost, it may have let one in, so the run
// deletes nothing (the next run starts over).
TEST_F(GcTest, ASweepWhoseHoldWasLostDeletesNothing) {
  Digest v1 = PushFiles({{"a", a_}});
  Digest v2 = PushFiles({{"b", b_}});
  const size_t packs = PackCount();
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  NewProcess();
  LosingSweepHolds losing(*store_);
  GcOptions o;
  o.clock = clock_;
  auto r = RunGc(*registry_, losing, o);
  EXPECT_STATUS(r, kUnavailable,
                "gc: sweep: the chunk store's GC lock was lost (its database connection ended); "
                "nothing was deleted");
  EXPECT_EQ(PackCount(), packs);
  ExpectReadable(v1);
  ExpectReadable(v2);
  auto again = Gc();
  ASSERT_OK(again);
  EXPECT_EQ(again->packs_deleted, 1u);
  EXPECT_EQ(PackCount(), packs - 1);
}

// A version whose blobs cannot be read (here: committed without them) stops the run before
// anything is deleted, and the error names the version and the command that says more.
TEST_F(GcTest, AVersionWhoseManifestIsMissingStopsTheRunAndIsNamed) {
  Digest v1 = PushFiles({{"a", a_}});
  ASSERT_OK(registry_->DeleteVersions("w", "v", v1, std::nullopt));
  clock_->Advance(hours(25));
  auto raw = SqliteRegistry::Open(dir_.path() / "registry.db", {});
  ASSERT_OK(raw);
  CommitRequest req;
  req.ns = "w";
  req.volume = "lost";
  req.digest = Digest::Of("never stored");
  ASSERT_OK((*raw)->Commit(req));
  const size_t packs = PackCount();
  const std::string ref = "bdn:w/lost@" + req.digest.ToString();
  auto r = Gc();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(r.error().message().starts_with("gc: version " + ref + ": manifest "))
      << r.error().message();
  EXPECT_TRUE(r.error().message().ends_with("; nothing was deleted (bdn volume verify " + ref +
                                            " says what is damaged)"))
      << r.error().message();
  EXPECT_EQ(PackCount(), packs);
}

TEST_F(GcTest, ADoomLeftByADeadGcIsDroppedAtOpen) {
  Digest v1 = PushFiles({{"a", a_}});
  auto packs = store_->ListSealedPacks(nullptr);
  ASSERT_OK(packs);
  std::vector<uint64_t> ids;
  for (const auto& p : *packs) ids.push_back(p.id);
  ASSERT_OK(store_->PublishDoom(ids));
  // While doomed, a writer is told to store the blob again.
  auto missing = store_->FindMissing(std::vector<Digest>{v1});
  ASSERT_OK(missing);
  EXPECT_EQ(missing->size(), 1u);
  EXPECT_OK(store_->Get(v1));     // readers still read it
  Open(ClaimMode::kProcessFile);  // no GC holds gc/running
  EXPECT_FALSE(fs::exists(dir_.path() / "store" / "gc" / "doomed"));
  missing = store_->FindMissing(std::vector<Digest>{v1});
  ASSERT_OK(missing);
  EXPECT_TRUE(missing->empty());
}

// The store on a tmpfs of 8 MiB the test mounts (root only; skipped elsewhere): a real full disk.
class FullDiskGcTest : public GcTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    fs::create_directories(small());
    if (::mount("tmpfs", small().c_str(), "tmpfs", 0, "size=8m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
    store_dir_ = small() / "store";
    GcTest::SetUp();
  }
  void TearDown() override {
    registry_.reset();
    store_.reset();
    if (mounted_) ::umount2(small().c_str(), MNT_DETACH);
  }
  fs::path small() const { return dir_.path() / "small"; }
  uint64_t FreeBytes() const {
    struct statvfs v;
    EXPECT_EQ(::statvfs(small().c_str(), &v), 0);
    return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  }
  std::vector<std::string> Files(const std::string& suffix) {
    std::vector<std::string> out;
    for (const auto& f : fs::directory_iterator(store_dir_ / "packs")) {
      if (f.path().string().ends_with(suffix)) out.push_back(f.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Deletes `versions` of w/v, lets their retention pass, and returns a dry run's plan (in a new
  // process: the pushes' claims are gone).
  Result<GcReport> DeleteThenPlan(const std::vector<Digest>& versions) {
    for (const Digest& v : versions) {
      BDN_ASSIGN_OR_RETURN(auto deleted, registry_->DeleteVersions("w", "v", v, std::nullopt));
      (void)deleted;
    }
    clock_->Advance(hours(25));
    NewProcess();
    GcOptions dry;
    dry.mode = GcMode::kDryRun;
    return Gc(dry);
  }
  // Fills the tmpfs with the file `filler`, to its last byte.
  void FillTheDisk() {
    std::ofstream f(small() / "filler", std::ios::binary);
    std::vector<char> block(64 << 10, 'x');
    while (f.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
    f.close();
    EXPECT_EQ(FreeBytes(), 0u);
  }
  // Three pushes; v1 and v3 deleted and past retention: one pack with no needed blob (v3's) and
  // one to repack (v1's, whose keeper v2 needs: bigger than the doom reserve's 256 KiB, which
  // the doom gives back). Then the disk is filled. The plan's pack to delete and to repack.
  struct FullDiskPlan {
    Digest v1, v2, v3;
    uint64_t deleted = 0, repacked = 0, dead_bytes = 0;
    std::vector<std::string> sealed;  // the .pack files before the run
  };
  FullDiskPlan PlanAndFillTheDisk(bool fill = true) {
    FullDiskPlan p;
    const auto keep = testutil::RandomBytes(600'000, 4);
    p.v1 = PushFiles({{"a", a_}, {"k", keep}});
    p.v2 = PushFiles({{"k", keep}});
    p.v3 = PushFiles({{"b", b_}});
    auto plan = DeleteThenPlan({p.v1, p.v3});
    EXPECT_OK(plan);
    std::vector<uint64_t> deletes, repacks;
    for (const auto& a : plan ? plan->actions : std::vector<GcPackAction>{}) {
      if (a.kind == GcPackAction::Kind::kDelete) {
        deletes.push_back(a.pack);
        p.dead_bytes += a.bytes;
      } else {
        repacks.push_back(a.pack);
      }
    }
    EXPECT_EQ(deletes.size(), 1u);
    EXPECT_EQ(repacks.size(), 1u);
    if (deletes.size() == 1 && repacks.size() == 1) {
      p.deleted = deletes[0];
      p.repacked = repacks[0];
    }
    p.sealed = Files(".pack");
    if (fill) FillTheDisk();
    return p;
  }
  // The message of a gc whose repack filled the disk, up to what it says of the copies.
  static std::string FullDiskSaid(const FullDiskPlan& p) {
    return ".open: write: No space left on device; the disk is full: deleted only the 1 pack no "
           "version needs (" +
           FormatBytes(p.dead_bytes) + " freed); 1 pack to repack was kept (";
  }
  // Once there is space, a second gc repacks, and the store checks clean.
  void RunGcAgainWithSpace(const FullDiskPlan& p) {
    fs::remove(small() / "filler");
    auto again = Gc();
    ASSERT_OK(again);
    EXPECT_EQ(again->packs_repacked, 1u);
    ExpectReadable(p.v2);
    EXPECT_STATUS(store_->Get(p.v1), kNotFound, "");
    auto fsck = RunFsck(store_dir_, *registry_, FsckMode::kCheck, {});
    ASSERT_OK(fsck);
    EXPECT_TRUE(fsck->problems.empty());
  }
  bool mounted_ = false;
};

// A repack that fills the disk: the pack with no needed blob is still deleted (it was doomed
// first, the doom narrowed to it), the pack being repacked is kept and its copies removed, and
// the run says so; once there is space a second run repacks.
TEST_F(FullDiskGcTest, ARepackThatFillsTheDiskStillDeletesTheDeadPacksAndLeavesNoCopy) {
  const FullDiskPlan p = PlanAndFillTheDisk();
  GcOptions o;
  o.discard_copies_on_full_disk = true;
  std::string doom_at_grace;
  o.hook = [&](GcPhase phase) {
    if (phase != GcPhase::kCopied) return;
    std::ifstream in(store_dir_ / "gc" / "doomed");
    doom_at_grace.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  auto r = Gc(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
  const std::string& m = r.error().message();
  EXPECT_TRUE(m.starts_with("gc: repack " + Hex16(p.repacked) + ": chunk b3:")) << m;
  EXPECT_NE(m.find(FullDiskSaid(p) + "the copies made were removed): run gc again to repack"),
            std::string::npos)
      << m;
  EXPECT_EQ(doom_at_grace, Hex16(p.deleted) + "\n");  // narrowed to the pack deleted
  std::vector<std::string> left = p.sealed;
  std::erase(left, Hex16(p.deleted) + ".pack");
  EXPECT_EQ(Files(".pack"), left);
  EXPECT_TRUE(Files(".open").empty());
  EXPECT_FALSE(fs::exists(store_dir_ / "gc" / "doomed"));
  EXPECT_EQ(fs::file_size(store_dir_ / "gc" / "doomed.reserve"), 256u << 10);
  ExpectReadable(p.v2);
  NewProcess();  // the store's destructor leaves no copy either
  EXPECT_EQ(Files(".pack"), left);
  ExpectReadable(p.v2);
  RunGcAgainWithSpace(p);
}

// The same with packs of 64 KiB: the repack sealed a pack of copies before the disk filled.
// Sealed packs stay (another process may already rely on their blobs); the message said "the
// copies made were removed" all the same. It now names the packs kept and their size, and they
// are the only files more than the run without a sealed copy leaves.
TEST_F(FullDiskGcTest, ARepackThatSealedCopiesBeforeTheDiskFilledSaysTheyStay) {
  pack_target_bytes_ = 64 << 10;
  const FullDiskPlan p = PlanAndFillTheDisk();
  GcOptions o;
  o.discard_copies_on_full_disk = true;
  auto r = Gc(o);
  ASSERT_FALSE(r.has_value());
  const std::string& m = r.error().message();
  std::vector<std::string> copies = Files(".pack");
  std::erase_if(copies, [&](const std::string& f) {
    return std::find(p.sealed.begin(), p.sealed.end(), f) != p.sealed.end();
  });
  ASSERT_FALSE(copies.empty()) << m;
  uint64_t copy_bytes = 0;
  for (const auto& f : copies) copy_bytes += fs::file_size(store_dir_ / "packs" / f);
  EXPECT_NE(m.find(FullDiskSaid(p) + "the copies made were removed but for the " +
                   Counted(copies.size(), "pack") + " of them sealed before the disk filled (" +
                   FormatBytes(copy_bytes) +
                   "), which the next gc keeps in place of the originals): run gc again to "
                   "repack"),
            std::string::npos)
      << m;
  EXPECT_TRUE(Files(".open").empty());
  ExpectReadable(p.v2);
  NewProcess();
  RunGcAgainWithSpace(p);
}

// From the last stop's list: a copy in the sweep (a blob of a doomed pack that a version
// committed during the run needs, with no other copy) that filled the disk failed the whole run
// with nothing deleted. The pack that needed the copy is kept (its copy removed) and the pack
// no version needs is still deleted; the run says so, and a later one with space finishes.
TEST_F(FullDiskGcTest, ACopyInTheSweepThatFillsTheDiskKeepsItsPackAndDeletesTheRest) {
  // Bigger than the doom reserve's 256 KiB, which the doom gives back.
  const Digest v1 = PushFiles({{"k", testutil::RandomBytes(600'000, 4)}});
  const Digest v3 = PushFiles({{"b", b_}});
  auto plan = DeleteThenPlan({v1, v3});
  ASSERT_OK(plan);
  ASSERT_EQ(plan->actions.size(), 2u);
  const std::vector<std::string> sealed = Files(".pack");
  FillTheDisk();

  GcOptions o;
  o.discard_copies_on_full_disk = true;
  o.hook = [&](GcPhase p) {
    if (p == GcPhase::kCopied) CommitAsOther(v1);
  };
  auto r = Gc(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
  const std::string& m = r.error().message();
  std::vector<std::string> left = Files(".pack");
  ASSERT_EQ(left.size(), sealed.size() - 1) << m;
  uint64_t dead_bytes = 0;
  for (const auto& a : plan->actions) {
    if (std::find(left.begin(), left.end(), Hex16(a.pack) + ".pack") == left.end()) {
      dead_bytes = a.bytes;
    }
  }
  EXPECT_GT(dead_bytes, b_.size());  // the pack deleted is v3's
  EXPECT_TRUE(m.starts_with("gc: keep b3:")) << m;
  EXPECT_TRUE(
      m.ends_with(".open: write: No space left on device; the disk is full: deleted only "
                  "the 1 pack no version needs (" +
                  FormatBytes(dead_bytes) +
                  " freed); 1 pack that a version committed during the run needs was "
                  "kept (the copies made were removed): run gc again"))
      << m;
  EXPECT_TRUE(Files(".open").empty());
  EXPECT_FALSE(fs::exists(store_dir_ / "gc" / "doomed"));
  ExpectReadable(v1);
  EXPECT_STATUS(store_->Get(v3), kNotFound, "");
  NewProcess();
  ExpectReadable(v1);

  fs::remove(small() / "filler");
  auto again = Gc();
  ASSERT_OK(again);
  ExpectReadable(v1);
  auto fsck = RunFsck(store_dir_, *registry_, FsckMode::kCheck, {});
  ASSERT_OK(fsck);
  EXPECT_TRUE(fsck->problems.empty());
}

// From an attacking helper: when the repack had worked (sealing packs of copies) and the sweep's
// copy then filled the disk, the message counted the repacked pack among those "no version
// needs" and the repack's copies, which the kept blobs now live in, as copies of the sweep's
// "sealed before the disk filled". Each is now told apart.
TEST_F(FullDiskGcTest, ASweepThatFillsTheDiskAfterARepackSaysWhatWasRepackedAndKept) {
  pack_target_bytes_ = 64 << 10;
  const FullDiskPlan p = PlanAndFillTheDisk(/*fill=*/false);
  const Digest v3 = p.v3;  // its pack is the one the plan deletes
  GcOptions o;
  o.discard_copies_on_full_disk = true;
  o.hook = [&](GcPhase phase) {
    if (phase != GcPhase::kCopied) return;
    FillTheDisk();
    CommitAsOther(v3);  // its pack, doomed, must now be copied: no room
  };
  auto r = Gc(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
  const std::string& m = r.error().message();
  EXPECT_TRUE(m.starts_with("gc: keep b3:")) << m;
  EXPECT_NE(m.find("; the disk is full: deleted only the 1 pack repacked ("), std::string::npos)
      << m;
  EXPECT_TRUE(
      m.ends_with(" freed); 1 pack that a version committed during the run needs was "
                  "kept (the copies made were removed): run gc again"))
      << m;
  std::vector<std::string> left = Files(".pack");
  EXPECT_NE(std::find(left.begin(), left.end(), Hex16(p.deleted) + ".pack"), left.end());
  EXPECT_EQ(std::find(left.begin(), left.end(), Hex16(p.repacked) + ".pack"), left.end());
  EXPECT_TRUE(Files(".open").empty());
  ExpectReadable(p.v2);
  ExpectReadable(v3);
  NewProcess();
  fs::remove(small() / "filler");
  ASSERT_OK(Gc());
  ExpectReadable(p.v2);
  ExpectReadable(v3);
  auto fsck = RunFsck(store_dir_, *registry_, FsckMode::kCheck, {});
  ASSERT_OK(fsck);
  EXPECT_TRUE(fsck->problems.empty());
}

}  // namespace
}  // namespace bdn
