// Tests for the lifecycle of versions in SqlRegistry, on SQLite and PostgreSQL (docs/spec.md §8):
// soft delete drops tags and moves head, restore within the retention window (time moved with a
// FakeClock, never slept), the sequence bumps, idempotent retries, and what garbage collection must
// keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bdn/registry/backends_test_util.h"
#include "bdn/registry/registry.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

Digest D(uint8_t fill) {
  std::array<uint8_t, Digest::kSize> b;
  b.fill(fill);
  return Digest(b);
}

template <typename Backend>
class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    Open();
  }
  void Open(milliseconds retention = hours(7 * 24)) {
    reg_.reset();
    RegistryOptions o;
    o.retention = retention;
    o.clock = clock_;
    auto r = backend_.OpenRegistry(o);
    ASSERT_OK(r);
    reg_ = std::move(*r);
  }
  CommitResult Commit(const Digest& d, std::vector<std::string> tags = {}) {
    CommitRequest req;
    req.ns = "w";
    req.volume = "v";
    req.digest = d;
    req.tags = std::move(tags);
    auto r = reg_->Commit(req);
    EXPECT_OK(r);
    return r.value_or(CommitResult{});
  }
  VolumeRecord Volume() {
    auto v = reg_->GetVolume("w", "v");
    EXPECT_OK(v);
    return v.value_or(VolumeRecord{});
  }
  VersionRecord Version(const Digest& d) {
    auto v = reg_->GetVersion("w", "v", d);
    EXPECT_OK(v);
    return v.value_or(VersionRecord{});
  }

  Backend backend_;
  std::shared_ptr<testutil::FakeClock> clock_ = std::make_shared<testutil::FakeClock>();
  std::unique_ptr<Registry> reg_;
};

TYPED_TEST_SUITE(LifecycleTest, testutil::Backends, testutil::BackendName);

TYPED_TEST(LifecycleTest, DeleteDropsTagsSetsDeleteAfterMovesHeadAndBumpsTheSequence) {
  this->Commit(D(1), {"stable"});
  this->Commit(D(2), {"prod", "candidate"});
  const int64_t before = this->Volume().sequence;
  const int64_t now = WallNowMs(*this->clock_);
  auto r = this->reg_->DeleteVersions("w", "v", D(2), std::nullopt);
  ASSERT_OK(r);
  EXPECT_EQ(r->sequence, before + 1);
  ASSERT_EQ(r->deleted.size(), 1u);
  EXPECT_EQ(r->deleted[0].digest, D(2));
  EXPECT_EQ(r->deleted[0].deleted_unix_ms, now);
  EXPECT_EQ(r->deleted[0].delete_after_unix_ms, now + 7 * 86'400'000LL);
  EXPECT_EQ(r->deleted[0].tags_dropped, (std::vector<std::string>{"candidate", "prod"}));
  EXPECT_TRUE(r->head_moved);
  EXPECT_EQ(r->head, D(1));

  VolumeRecord v = this->Volume();
  EXPECT_EQ(v.head, D(1));
  EXPECT_EQ(v.tags.size(), 1u);  // only "stable" is left
  EXPECT_EQ(v.live_versions, 1u);
  EXPECT_EQ(v.deleted_versions, 1u);
  VersionRecord gone = this->Version(D(2));
  EXPECT_EQ(gone.lifecycle, Lifecycle::kDeleted);
  EXPECT_EQ(gone.delete_after_unix_ms, now + 7 * 86'400'000LL);
  EXPECT_TRUE(gone.tags.empty());
  // Listed only with include_deleted.
  auto alive = this->reg_->ListVersions("w", "v", false);
  ASSERT_OK(alive);
  EXPECT_EQ(alive->size(), 1u);
  auto all = this->reg_->ListVersions("w", "v", true);
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 2u);
}

TYPED_TEST(LifecycleTest, DeletingADeletedVersionIsAConflict) {
  this->Commit(D(1));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  auto again = this->reg_->DeleteVersions("w", "v", D(1), std::nullopt);
  EXPECT_STATUS(again, kConflict, "");
  EXPECT_EQ(again.error().message(),
            "version bdn:w/v@" + D(1).ToString() +
                ": already deleted (at 2026-01-01T00:00:00Z; restorable until "
                "2026-01-08T00:00:00Z)");
  // Past its retention: said so, not "restorable until" a time gone by.
  this->clock_->Advance(std::chrono::hours(24 * 8));
  again = this->reg_->DeleteVersions("w", "v", D(1), std::nullopt);
  EXPECT_STATUS(again, kConflict, "");
  EXPECT_EQ(again.error().message(),
            "version bdn:w/v@" + D(1).ToString() +
                ": already deleted (at 2026-01-01T00:00:00Z; its retention ended at "
                "2026-01-08T00:00:00Z, so it is no longer restorable)");
}

TYPED_TEST(LifecycleTest, DeletingTheLastVersionLeavesNoHead) {
  this->Commit(D(1));
  auto r = this->reg_->DeleteVersions("w", "v", D(1), std::nullopt);
  ASSERT_OK(r);
  EXPECT_TRUE(r->head_moved);
  EXPECT_FALSE(r->head.has_value());
  EXPECT_FALSE(this->Volume().head.has_value());
}

TYPED_TEST(LifecycleTest, RecursiveDeleteTakesEveryLiveVersionInOneStep) {
  this->Commit(D(1), {"a"});
  this->Commit(D(2), {"b"});
  this->Commit(D(3));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  const int64_t before = this->Volume().sequence;
  auto r = this->reg_->DeleteVersions("w", "v", std::nullopt, std::nullopt);
  ASSERT_OK(r);
  EXPECT_EQ(r->sequence, before + 1);
  ASSERT_EQ(r->deleted.size(), 2u);  // D(1) was deleted already
  EXPECT_EQ(r->deleted[0].digest, D(3));
  EXPECT_EQ(r->deleted[1].digest, D(2));
  EXPECT_EQ(r->deleted[1].tags_dropped, std::vector<std::string>{"b"});
  EXPECT_FALSE(this->Volume().head.has_value());
  EXPECT_TRUE(this->Volume().tags.empty());
  auto none = this->reg_->DeleteVersions("w", "v", std::nullopt, std::nullopt);
  EXPECT_STATUS(none, kNotFound, "");
  EXPECT_EQ(none.error().message(), "volume bdn:w/v: has no live versions");
}

TYPED_TEST(LifecycleTest, RestoreWithinTheWindowBringsTheVersionBackWithoutTags) {
  this->Commit(D(1));
  this->Commit(D(2), {"prod"});
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(2), std::nullopt));
  this->clock_->Advance(hours(7 * 24) - milliseconds(1));  // the last millisecond of the window
  const int64_t before = this->Volume().sequence;
  auto r = this->reg_->RestoreVersion("w", "v", D(2), std::nullopt);
  ASSERT_OK(r);
  EXPECT_EQ(r->sequence, before + 1);
  // D(2) is newer than head D(1): head moves back to it.
  EXPECT_TRUE(r->head_updated);
  EXPECT_EQ(this->Volume().head, D(2));
  VersionRecord v = this->Version(D(2));
  EXPECT_EQ(v.lifecycle, Lifecycle::kAlive);
  EXPECT_FALSE(v.delete_after_unix_ms.has_value());
  EXPECT_FALSE(v.deleted_unix_ms.has_value());
  EXPECT_TRUE(v.tags.empty());  // tags are not restored
}

TYPED_TEST(LifecycleTest, RestoringAnOlderVersionLeavesHeadAlone) {
  this->Commit(D(1));
  this->Commit(D(2));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  auto r = this->reg_->RestoreVersion("w", "v", D(1), std::nullopt);
  ASSERT_OK(r);
  EXPECT_FALSE(r->head_updated);
  EXPECT_EQ(this->Volume().head, D(2));
}

TYPED_TEST(LifecycleTest, RestoreAfterTheWindowIsAClearError) {
  this->Commit(D(1));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  this->clock_->Advance(hours(7 * 24));
  auto r = this->reg_->RestoreVersion("w", "v", D(1), std::nullopt);
  EXPECT_STATUS(r, kFailedPrecondition, "");
  EXPECT_EQ(r.error().message(),
            "version bdn:w/v@" + D(1).ToString() +
                ": deleted at 2026-01-01T00:00:00Z; its retention ended at "
                "2026-01-08T00:00:00Z, so it can no longer be restored (its data may be gone; "
                "push the same tree again to make it a new version)");
  auto alive = this->reg_->RestoreVersion("w", "v", D(9), std::nullopt);
  EXPECT_STATUS(alive, kNotFound, "");
}

TYPED_TEST(LifecycleTest, RestoringALiveVersionIsAConflict) {
  this->Commit(D(1));
  auto r = this->reg_->RestoreVersion("w", "v", D(1), std::nullopt);
  EXPECT_STATUS(r, kConflict, "");
  EXPECT_EQ(r.error().message(), "version bdn:w/v@" + D(1).ToString() + ": is not deleted");
}

TYPED_TEST(LifecycleTest, CommitOfADeletedVersionNeedsARestoreUntilTheWindowEnds) {
  this->Commit(D(1));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  CommitRequest req;
  req.ns = "w";
  req.volume = "v";
  req.digest = D(1);
  auto r = this->reg_->Commit(req);
  EXPECT_STATUS(r, kFailedPrecondition, "");
  EXPECT_EQ(r.error().message(), "version bdn:w/v@" + D(1).ToString() +
                                     ": is deleted; restore it first (bdn volume restore "
                                     "bdn:w/v@" +
                                     D(1).ToString() + ")");
  // Past the window the same tree pushed again is a new version.
  this->clock_->Advance(hours(8 * 24));
  auto again = this->reg_->Commit(req);
  ASSERT_OK(again);
  EXPECT_FALSE(again->unchanged);
  EXPECT_EQ(this->Version(D(1)).lifecycle, Lifecycle::kAlive);
  EXPECT_EQ(this->Version(D(1)).created_unix_ms, WallNowMs(*this->clock_));
  EXPECT_EQ(this->Volume().head, D(1));
}

TYPED_TEST(LifecycleTest, StaleExpectedSequenceRefusesDeleteAndRestore) {
  this->Commit(D(1));
  const int64_t seq = this->Volume().sequence;
  auto del = this->reg_->DeleteVersions("w", "v", D(1), seq + 1);
  EXPECT_STATUS(del, kConflict, "");
  EXPECT_EQ(del.error().message(), "volume bdn:w/v: sequence is " + std::to_string(seq) +
                                       ", expected " + std::to_string(seq + 1));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), seq));
  EXPECT_STATUS(this->reg_->RestoreVersion("w", "v", D(1), seq), kConflict, "");
  EXPECT_OK(this->reg_->RestoreVersion("w", "v", D(1), seq + 1));
}

TYPED_TEST(LifecycleTest, RetriedDeleteAndRestoreWithTheirKeyReturnTheFirstResult) {
  this->Commit(D(1), {"prod"});
  this->Commit(D(2));
  auto first = this->reg_->DeleteVersions("w", "v", D(1), std::nullopt, "del-key");
  ASSERT_OK(first);
  this->clock_->Advance(hours(1));
  auto retry = this->reg_->DeleteVersions("w", "v", D(1), std::nullopt, "del-key");
  ASSERT_OK(retry);  // not "already deleted"
  EXPECT_EQ(retry->sequence, first->sequence);
  ASSERT_EQ(retry->deleted.size(), 1u);
  EXPECT_EQ(retry->deleted[0].digest, D(1));
  EXPECT_EQ(retry->deleted[0].delete_after_unix_ms, first->deleted[0].delete_after_unix_ms);
  EXPECT_EQ(retry->deleted[0].tags_dropped, std::vector<std::string>{"prod"});
  EXPECT_EQ(retry->head, first->head);
  EXPECT_EQ(this->Volume().sequence, first->sequence);

  auto restored = this->reg_->RestoreVersion("w", "v", D(1), std::nullopt, "restore-key");
  ASSERT_OK(restored);
  auto again = this->reg_->RestoreVersion("w", "v", D(1), std::nullopt, "restore-key");
  ASSERT_OK(again);
  EXPECT_EQ(again->sequence, restored->sequence);
  EXPECT_EQ(this->Volume().sequence, restored->sequence);
}

TYPED_TEST(LifecycleTest, RetainedVersionsAreTheLiveAndTheRestorableOnes) {
  this->Commit(D(1));
  this->Commit(D(2));
  this->Commit(D(3));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(2), std::nullopt));
  this->clock_->Advance(hours(24));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(3), std::nullopt));
  auto kept = this->reg_->ListRetainedVersions();
  ASSERT_OK(kept);
  EXPECT_EQ(kept->size(), 3u);
  // D(2)'s window ends a day before D(3)'s.
  this->clock_->Advance(hours(6 * 24));
  kept = this->reg_->ListRetainedVersions();
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 2u);
  EXPECT_EQ((*kept)[0].digest, D(1));
  EXPECT_EQ((*kept)[1].digest, D(3));
  EXPECT_EQ((*kept)[1].lifecycle, Lifecycle::kDeleted);
}

TYPED_TEST(LifecycleTest, ZeroRetentionMakesADeleteFinalAtOnce) {
  this->Open(milliseconds(0));
  this->Commit(D(1));
  ASSERT_OK(this->reg_->DeleteVersions("w", "v", D(1), std::nullopt));
  EXPECT_STATUS(this->reg_->RestoreVersion("w", "v", D(1), std::nullopt), kFailedPrecondition, "");
  auto kept = this->reg_->ListRetainedVersions();
  ASSERT_OK(kept);
  EXPECT_TRUE(kept->empty());
}

// Eight writers race on one tag with compare-and-swap, in rounds: each reads the volume, all wait
// until every writer has read (so all eight hold the same sequence), then each deletes the tag if
// it is there or sets it if it is not, passing the sequence it read. With no lost update exactly
// one writer of each round succeeds, the successes form one unbroken chain from the start (each
// moved the sequence by exactly one), and every refused writer got a conflict naming the newer
// sequence it missed. The rounds make the race certain rather than left to thread timing.
TYPED_TEST(LifecycleTest, EightConcurrentTagWritersLoseNoUpdate) {
  for (uint8_t i = 1; i <= 8; ++i) this->Commit(D(i));
  const int64_t start = this->Volume().sequence;
  constexpr int kWriters = 8;
  constexpr int kRounds = 30;
  std::mutex mu;
  std::vector<int64_t> based_on;  // the expected_sequence of every successful write
  std::atomic<int> conflicts{0};
  std::barrier sync(kWriters);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto own = this->backend_.OpenRegistry();
      EXPECT_OK(own);
      for (int i = 0; i < kRounds; ++i) {
        std::optional<VolumeRecord> v;
        if (own) {
          auto got = (*own)->GetVolume("w", "v");
          EXPECT_OK(got);
          if (got) v = *std::move(got);
        }
        sync.arrive_and_wait();  // every writer has read: all hold this round's sequence
        if (v) {
          Result<int64_t> r =
              v->tags.contains("t")
                  ? (*own)->DeleteTag("w", "v", "t", v->sequence)
                  : (*own)->SetTag("w", "v", "t", D(static_cast<uint8_t>(w + 1)), v->sequence);
          if (r) {
            EXPECT_EQ(*r, v->sequence + 1);
            std::lock_guard l(mu);
            based_on.push_back(v->sequence);
          } else {
            EXPECT_EQ(r.error().code(), StatusCode::kConflict) << r.error().message();
            ++conflicts;
            const std::string prefix = "volume bdn:w/v: sequence is ";
            const std::string& m = r.error().message();
            EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
            if (m.rfind(prefix, 0) == 0) {
              EXPECT_GT(std::stoll(m.substr(prefix.size())), v->sequence) << m;
            }
            EXPECT_NE(m.find(", expected " + std::to_string(v->sequence)), std::string::npos) << m;
          }
        }
        sync.arrive_and_wait();  // every write of this round is done before the next read
      }
    });
  }
  for (auto& t : writers) t.join();
  std::sort(based_on.begin(), based_on.end());
  ASSERT_EQ(based_on.size(), static_cast<size_t>(kRounds)) << "one success per round";
  for (size_t i = 0; i < based_on.size(); ++i) {
    ASSERT_EQ(based_on[i], start + static_cast<int64_t>(i)) << "two writes based on one state";
  }
  EXPECT_EQ(this->Volume().sequence, start + kRounds);
  EXPECT_EQ(conflicts.load(), (kWriters - 1) * kRounds);
  // The tag is there exactly when an odd number of writes succeeded (set, delete, set, ...).
  EXPECT_EQ(this->Volume().tags.contains("t"), kRounds % 2 == 1);
}

}  // namespace
}  // namespace bdn
