// Tests for PgCatalog against a real PostgreSQL the test starts (sql/pg_test_util.h): two
// catalogs over two pools stand for two `bdn serve` replicas sharing a bucket. What one records
// (claims, the doom, the gc run, a sweep) the other sees; two buckets in one database do not.
// No object store is needed: the catalog lists packs through the bucket, which no test here does.
#include "bdn/objstore/pg_catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "bdn/sql/pg_test_util.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::objstore {
namespace {

class PgCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    url_ = testutil::SharedPgServer::Get().NewDatabase(&why);
    if (url_.empty()) GTEST_SKIP() << "no PostgreSQL: " << why;
  }

  // A replica's catalog of s3://`bucket`/models, claims kept from `retain_since()` on.
  std::shared_ptr<PgCatalog> Replica(const std::string& bucket = "shared",
                                     std::function<SteadyTime()> retain_since = nullptr) {
    S3ClientOptions o;
    o.location.bucket = bucket;
    o.location.prefix = "models";
    o.location.endpoint = "http://127.0.0.1:9";  // never contacted
    o.credentials.access_key_id = "k";
    o.credentials.secret_access_key = "s";
    auto client = S3Client::Create(o);
    EXPECT_OK(client);
    if (!client) return nullptr;
    auto pool = sql::PgPool::Open({.url = url_});
    EXPECT_OK(pool);
    if (!pool) return nullptr;
    auto c = PgCatalog::Open(std::shared_ptr<S3Client>(std::move(*client)), *pool,
                             std::move(retain_since));
    EXPECT_OK(c);
    return c ? *c : nullptr;
  }

  std::string url_;  // a schema of this test's own
};

std::vector<Digest> Sorted(std::vector<Digest> v) {
  std::sort(v.begin(), v.end(), [](const Digest& a, const Digest& b) { return a.Hex() < b.Hex(); });
  return v;
}

TEST_F(PgCatalogTest, ClaimsRecordedOnOneReplicaAreLiveOnTheOther) {
  auto a = Replica();
  auto b = Replica();
  ASSERT_TRUE(a && b);
  std::vector<Digest> ids;
  for (int i = 0; i < 1200; ++i) ids.push_back(Digest::Of("blob " + std::to_string(i)));
  ASSERT_OK(a->RecordClaims(ids));
  ASSERT_OK(b->RecordClaims(std::span(ids).first(3)));  // again: one row each
  auto live = b->LiveClaims();
  ASSERT_OK(live);
  EXPECT_EQ(Sorted(*live), Sorted(ids));
}

TEST_F(PgCatalogTest, AClaimListThatRepeatsAnIdIsRecordedOnce) {
  // A file whose content repeats a chunk lists its id more than once; one upsert statement may
  // not touch a row twice, so this failed with "ON CONFLICT DO UPDATE command cannot affect row a
  // second time" (a 500 from POST /v1/chunks/missing).
  auto a = Replica();
  ASSERT_TRUE(a);
  const Digest x = Digest::Of("zeros"), y = Digest::Of("other");
  std::vector<Digest> ids = {x, y, x, x};
  ASSERT_OK(a->RecordClaims(ids));
  auto live = a->LiveClaims();
  ASSERT_OK(live);
  EXPECT_EQ(Sorted(*live), Sorted({x, y}));
}

TEST_F(PgCatalogTest, ClaimsOlderThanTheHorizonAreDropped) {
  std::atomic<int64_t> keep_ms{3600'000};
  auto retain = [&] { return Clock::Real()->SteadyNow() - std::chrono::milliseconds(keep_ms); };
  auto a = Replica("shared", retain);
  ASSERT_TRUE(a);
  const Digest old = Digest::Of("old"), fresh = Digest::Of("fresh");
  ASSERT_OK(a->RecordClaims(std::span(&old, 1)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_OK(a->RecordClaims(std::span(&fresh, 1)));
  auto both = a->LiveClaims();
  ASSERT_OK(both);
  EXPECT_EQ(both->size(), 2u);
  keep_ms = 750;  // the first claim is 1.5 s older than the second: it falls out
  auto one = a->LiveClaims();
  ASSERT_OK(one);
  EXPECT_EQ(*one, std::vector<Digest>{fresh});
}

TEST_F(PgCatalogTest, TheDoomIsSharedPerBucketAndKeepsEveryBitOfAPackId) {
  auto a = Replica();
  auto b = Replica();
  auto other = Replica("other-bucket");
  ASSERT_TRUE(a && b && other);
  const std::vector<uint64_t> doom = {1, 0xfedcba9876543210ull, 0xffffffffffffffffull};
  ASSERT_OK(a->PublishDoom(doom));
  auto seen = b->Doom();
  ASSERT_OK(seen);
  std::sort(seen->begin(), seen->end());
  EXPECT_EQ(*seen, doom);
  auto none = other->Doom();
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  ASSERT_OK(b->PublishDoom(std::vector<uint64_t>{7}));  // replaces the doom
  EXPECT_EQ(a->Doom().value(), std::vector<uint64_t>{7});
  ASSERT_OK(a->ClearDoom());
  EXPECT_TRUE(b->Doom().value().empty());
}

// A replica whose index still names packs another replica's GC deleted would tell writers that
// blobs are stored which are not: the deletions are read back from any replica, in order, from
// where it last looked.
TEST_F(PgCatalogTest, PacksDeletedOnOneReplicaAreSeenOnTheOtherFromWhereItLastLooked) {
  auto a = Replica();
  auto b = Replica();
  auto other = Replica("other-bucket");
  ASSERT_TRUE(a && b && other);
  auto start = b->DeletedSince(0);
  ASSERT_OK(start);
  EXPECT_TRUE(start->packs.empty());
  EXPECT_TRUE(start->complete);
  const std::vector<uint64_t> first = {5, 0xffffffffffffffffull};
  ASSERT_OK(a->RemovePacks(first));
  auto seen = b->DeletedSince(start->next);
  ASSERT_OK(seen);
  EXPECT_EQ(seen->packs, first);
  // How long ago each was recorded, by the database's clock (a replica holds listings off from
  // then).
  ASSERT_EQ(seen->ages.size(), first.size());
  for (std::chrono::milliseconds age : seen->ages) {
    EXPECT_GE(age.count(), 0);
    EXPECT_LT(age, std::chrono::seconds(30));
  }
  EXPECT_TRUE(seen->complete);
  EXPECT_GT(seen->next, start->next);
  auto none = b->DeletedSince(seen->next);
  ASSERT_OK(none);
  EXPECT_TRUE(none->packs.empty());
  EXPECT_EQ(none->next, seen->next);
  EXPECT_TRUE(other->DeletedSince(0).value().packs.empty());
  ASSERT_OK(a->RemovePacks(std::vector<uint64_t>{9}));
  EXPECT_EQ(b->DeletedSince(seen->next).value().packs, std::vector<uint64_t>{9});
  // Rows pruned before a replica saw them: it is told to look at the whole pack list again.
  auto pool = sql::PgPool::Open({.url = url_});
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Use("test")->Write(
      [](sql::Session& s) {
        return sql::ToStatus(
            s.Exec("DELETE FROM objstore_deleted_packs WHERE seq < (SELECT MAX(seq) FROM "
                   "objstore_deleted_packs)",
                   {}));
      },
      "prune"));
  // (A replica that last looked after the first of the first two: the second was pruned unseen.)
  auto behind = b->DeletedSince(seen->next - 1);
  ASSERT_OK(behind);
  EXPECT_FALSE(behind->complete);
  EXPECT_EQ(behind->packs, std::vector<uint64_t>{9});
}

// A replica that looked while its store had no deleted packs must not stay at position 0 (which
// used to mean "just opened", and so "complete"): rows recorded and pruned before its next look
// are reported as missed.
TEST_F(PgCatalogTest, AReplicaThatSawNoRowsStillLearnsThatRowsWerePrunedUnseen) {
  auto a = Replica();
  auto b = Replica();
  auto other = Replica("other-bucket");
  ASSERT_TRUE(a && b && other);
  ASSERT_OK(other->RemovePacks(std::vector<uint64_t>{77}));  // another store's position
  auto empty = b->DeletedSince(0);
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->packs.empty());
  EXPECT_GT(empty->next, 0u) << "the position moves past every position handed out";
  ASSERT_OK(a->RemovePacks(std::vector<uint64_t>{1}));
  ASSERT_OK(a->RemovePacks(std::vector<uint64_t>{2}));
  auto pool = sql::PgPool::Open({.url = url_});
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Use("test")->Write(
      [](sql::Session& s) {
        return sql::ToStatus(
            s.Exec("DELETE FROM objstore_deleted_packs WHERE pack IN (1, 77)", {}));  // pruned
      },
      "prune"));
  auto later = b->DeletedSince(empty->next);
  ASSERT_OK(later);
  EXPECT_EQ(later->packs, std::vector<uint64_t>{2});
  EXPECT_FALSE(later->complete) << "pack 1 was pruned before this replica saw it";
}

// GCs on several replicas recording deleted packs at once while another replica follows them
// from where it last looked: it sees every pack (a position never passes a row committed later
// with a smaller seq), and a GC deleting more packs than one statement takes records them all.
TEST_F(PgCatalogTest, AFollowerOfConcurrentGcsMissesNoDeletedPack) {
  auto follower = Replica();
  ASSERT_TRUE(follower);
  constexpr int kWriters = 4, kRuns = 25;
  std::vector<std::thread> writers;
  std::atomic<int> done{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto gc = Replica();
      for (int r = 0; gc && r < kRuns; ++r) {
        const uint64_t base = static_cast<uint64_t>((w * kRuns + r) * 3 + 1);
        EXPECT_OK(gc->RemovePacks(std::vector<uint64_t>{base, base + 1, base + 2}));
      }
      ++done;
    });
  }
  std::set<uint64_t> seen;
  uint64_t next = 0;
  auto follow = [&] {
    auto d = follower->DeletedSince(next);
    ASSERT_OK(d);
    EXPECT_TRUE(d->complete);
    seen.insert(d->packs.begin(), d->packs.end());
    next = d->next;
  };
  while (done.load() < kWriters) follow();
  for (auto& t : writers) t.join();
  follow();
  EXPECT_EQ(seen.size(), size_t{kWriters * kRuns * 3});
  EXPECT_EQ(*seen.begin(), 1u);
  EXPECT_EQ(*seen.rbegin(), uint64_t{kWriters * kRuns * 3});

  std::vector<uint64_t> many;
  for (uint64_t p = 0; p < 1234; ++p) many.push_back(100000 + p);
  ASSERT_OK(follower->RemovePacks(many));
  auto all = follower->DeletedSince(next);
  ASSERT_OK(all);
  EXPECT_EQ(all->packs, many);
}

TEST_F(PgCatalogTest, OneGcRunAtATimeAcrossReplicas) {
  auto a = Replica();
  auto b = Replica();
  auto other = Replica("other-bucket");
  ASSERT_TRUE(a && b && other);
  auto run = a->BeginGc();
  ASSERT_OK(run);
  auto second = b->BeginGc();
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), StatusCode::kConflict);
  EXPECT_TRUE(second.error().message().starts_with(
      "chunk store s3://shared/models: another gc is running (bdn pid "))
      << second.error().message();
  EXPECT_OK(other->BeginGc());  // another bucket: another lock
  run->reset();
  EXPECT_OK(b->BeginGc());
}

TEST_F(PgCatalogTest, ASweepWaitsForCommitsOnEveryReplica) {
  auto a = Replica();
  auto b = Replica();
  ASSERT_TRUE(a && b);
  auto commit_a = a->HoldForCommit();
  auto commit_b = b->HoldForCommit();  // commits do not exclude each other
  ASSERT_OK(commit_a);
  ASSERT_OK(commit_b);
  std::atomic<bool> commits_done{false};
  std::thread finish([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    commit_a->reset();
    commits_done = true;
    commit_b->reset();
  });
  auto sweep = a->HoldForSweep();
  EXPECT_TRUE(commits_done.load());
  finish.join();
  ASSERT_OK(sweep);
  // And a commit waits for the sweep: granted once it ends.
  std::atomic<bool> sweep_done{false};
  std::thread end_sweep([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sweep_done = true;
    sweep->reset();
  });
  auto late = b->HoldForCommit();
  EXPECT_TRUE(sweep_done.load());
  end_sweep.join();
  EXPECT_OK(late);
}

// The lock between sweeps and commits can be lost with its connection (a database restart, a
// terminated backend); the fence (objstore_fence) still keeps a sweep and a commit from both
// going ahead. Here each lock is let go outright, as a lost one is:
//  - a commit that got in after the sweep's second mark (its fence passed) makes the sweep's
//    RemovePacks record nothing, so nothing is deleted;
//  - a commit whose blobs were checked before a sweep recorded packs deleted finds that its
//    fence changes no row (the registry then commits nothing), even after a second batch of the
//    same sweep; a commit that starts after the sweep passes.
TEST_F(PgCatalogTest, TheFenceKeepsASweepAndACommitApartWhenTheirLockIsLost) {
  auto a = Replica();  // sweeps
  auto b = Replica();  // commits
  ASSERT_TRUE(a && b);
  auto pool = sql::PgPool::Open({.url = url_});
  ASSERT_OK(pool);
  auto registry = (*pool)->Use("registry");
  auto run = [&](const std::string& fence) {  // as SqlRegistry runs it: the rows it changed
    return sql::WriteValue<int64_t>(*registry, [&](sql::Session& s) { return s.Exec(fence); });
  };
  const uint64_t p = 7, q = 8;

  {
    auto sweep = a->HoldForSweep();  // before its second mark; then its lock is lost
    ASSERT_OK(sweep);
  }
  auto commit = b->HoldForCommit();
  ASSERT_OK(commit);
  const std::string fence = (*commit)->CommitFence();
  EXPECT_EQ(fence.rfind("UPDATE objstore_fence SET commits = commits + 1 WHERE tag = '", 0), 0u)
      << fence;
  EXPECT_EQ(*run(fence), 1);
  commit->reset();
  EXPECT_STATUS(a->RemovePacks(std::span(&p, 1)), kUnavailable,
                "gc: sweep: a commit, a restore or another gc reached the store since the second "
                "mark (the sweep's lock was lost: its database connection ended); nothing more "
                "was deleted");
  auto seen = b->DeletedSince(0);
  ASSERT_OK(seen);
  EXPECT_TRUE(seen->packs.empty());

  commit = b->HoldForCommit();  // its blobs checked; then its lock is lost
  ASSERT_OK(commit);
  const std::string checked_before = (*commit)->CommitFence();
  commit->reset();
  {
    auto sweep = a->HoldForSweep();
    ASSERT_OK(sweep);
  }
  ASSERT_OK(a->RemovePacks(std::span(&p, 1)));
  ASSERT_OK(a->RemovePacks(std::span(&q, 1)));  // the same sweep's next batch
  EXPECT_EQ(*run(checked_before), 0);
  seen = b->DeletedSince(0);
  ASSERT_OK(seen);
  EXPECT_EQ(seen->packs, (std::vector<uint64_t>{p, q}));
  commit = b->HoldForCommit();
  ASSERT_OK(commit);
  EXPECT_EQ(*run((*commit)->CommitFence()), 1);
}

// Every hold is an advisory lock on a connection of its own: when that connection ends (the
// server restarted, the backend terminated), the server drops the lock, and the hold says so.
TEST_F(PgCatalogTest, HoldsWhoseConnectionsEndedSayTheyNoLongerHold) {
  auto a = Replica();
  auto b = Replica();
  ASSERT_TRUE(a && b);
  auto run = a->BeginGc();
  auto commit = a->HoldForCommit();
  ASSERT_OK(run);
  ASSERT_OK(commit);
  for (auto* hold : {&*run, &*commit}) {
    auto held = (*hold)->Held();
    ASSERT_OK(held);
    EXPECT_TRUE(*held);
  }
  auto pool = sql::PgPool::Open({.url = url_});
  ASSERT_OK(pool);
  auto ended = sql::ReadValue<std::string>(
      *(*pool)->Use("test"), [](sql::Session& s) -> Result<std::string> {
        BDN_ASSIGN_OR_RETURN(
            sql::Rows r,
            s.Query("SELECT count(pg_terminate_backend(pid, 5000))::text FROM pg_locks "
                    "WHERE locktype = 'advisory' AND granted AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"));
        return r.Text(0, 0);
      });
  ASSERT_OK(ended);
  EXPECT_EQ("2", *ended);
  for (auto* hold : {&*run, &*commit}) {
    auto held = (*hold)->Held();
    ASSERT_OK(held);
    EXPECT_FALSE(*held);
  }
  // The other replica takes them now.
  EXPECT_OK(b->BeginGc());
  auto sweep = b->HoldForSweep();
  ASSERT_OK(sweep);
  auto held = (*sweep)->Held();
  ASSERT_OK(held);
  EXPECT_TRUE(*held);
}

}  // namespace
}  // namespace bdn::objstore
