// Tests for PushClaims: MemoryPushClaims and PgPushClaims run one typed suite (one push per
// volume, the retry of a lost answer, renew and release, the commit check), then what only the
// shared one does: a claim taken through one server holds on another, and expiry on the database
// server's clock.
#include "bdn/registry/push_claims.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bdn/registry/backends_test_util.h"
#include "bdn/testing/status_matchers.h"

namespace bdn {
namespace {

using std::chrono::milliseconds;

class MemoryClaims {
 public:
  static constexpr const char* kName = "Memory";
  std::string Prepare() { return ""; }
  // Every call: a view of the same claims (one process's table).
  std::shared_ptr<PushClaims> Open(milliseconds ttl) {
    if (!claims_) {
      claims_ = std::make_shared<MemoryPushClaims>(ttl, [this] { return now_; });
    }
    return claims_;
  }

 private:
  PushClaims::Clock::time_point now_ = PushClaims::Clock::now();
  std::shared_ptr<PushClaims> claims_;
};

class PgClaims {
 public:
  static constexpr const char* kName = "Postgres";
  std::string Prepare() { return backend_.Prepare(); }
  // Every call: another server's claims (a pool of its own) over the same database.
  std::shared_ptr<PushClaims> Open(milliseconds ttl) {
    auto pool = backend_.Pool();
    if (!pool) return nullptr;
    return std::make_shared<PgPushClaims>((*pool)->Use("push claims"), ttl);
  }
  testutil::PostgresBackend& backend() { return backend_; }

 private:
  testutil::PostgresBackend backend_;
};

template <typename Backend>
class PushClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    claims_ = backend_.Open(milliseconds(60000));
    ASSERT_NE(claims_, nullptr);
  }
  Backend backend_;
  std::shared_ptr<PushClaims> claims_;
};

using ClaimBackends = ::testing::Types<MemoryClaims, PgClaims>;
TYPED_TEST_SUITE(PushClaimsTest, ClaimBackends, testutil::BackendName);

TYPED_TEST(PushClaimsTest, OnePushPerVolumeUntilReleased) {
  auto id = this->claims_->Acquire("w", "v", "key bdn_aa");
  ASSERT_OK(id);
  EXPECT_EQ(id->size(), 32u);
  EXPECT_STATUS(this->claims_->Acquire("w", "v", "key bdn_bb"), kConflict,
                "volume bdn:w/v: push in progress (claimed by key bdn_aa, expires in 60 s); push "
                "again once it has ended");
  auto elsewhere = this->claims_->Acquire("w", "other", "key bdn_bb");
  ASSERT_OK(elsewhere);
  // A sync job tells its own leftover claim from another's by this (holders that share a
  // prefix included).
  const Status conflict = this->claims_->Acquire("w", "v", "key bdn_bb").error();
  EXPECT_TRUE(IsClaimConflictOf(conflict, "key bdn_aa"));
  EXPECT_FALSE(IsClaimConflictOf(conflict, "key bdn_a"));
  EXPECT_FALSE(IsClaimConflictOf(conflict, "key bdn_bb"));
  EXPECT_FALSE(IsClaimConflictOf(ConflictError("volume bdn:w/v: gone"), "key bdn_aa"));
  EXPECT_FALSE(IsClaimConflictOf(UnavailableError(conflict.message()), "key bdn_aa"));
  ASSERT_OK(this->claims_->Renew("w", "v", *id));
  EXPECT_STATUS(this->claims_->Renew("w", "v", "feed"), kNotFound,
                "claim feed on bdn:w/v: not found (expired or released)");
  ASSERT_OK(this->claims_->Release("w", "v", *id));
  EXPECT_STATUS(this->claims_->Release("w", "v", *id), kNotFound,
                "claim " + *id + " on bdn:w/v: not found (expired or released)");
  auto next = this->claims_->Acquire("w", "v", "key bdn_bb");
  ASSERT_OK(next);
  EXPECT_NE(*next, *id);
}

// The retry of a lost answer (or the CLI taking over its dead process's claim) gets the claim
// under a new id; the old id stops working, so a commit the first requester still had on its way
// is refused once the claim has moved on.
TYPED_TEST(PushClaimsTest, TheRetryOfALostAnswerGetsTheClaimUnderANewId) {
  auto id = this->claims_->Acquire("w", "v", "key bdn_aa", "k1");
  ASSERT_OK(id);
  auto retry = this->claims_->Acquire("w", "v", "key bdn_aa", "k1");
  ASSERT_OK(retry);
  EXPECT_NE(*retry, *id);
  ASSERT_OK(this->claims_->CheckCommit("w", "v", *retry));
  EXPECT_STATUS(this->claims_->CheckCommit("w", "v", *id), kConflict,
                "volume bdn:w/v: push in progress (claimed by key bdn_aa");
  EXPECT_STATUS(this->claims_->Renew("w", "v", *id), kNotFound,
                "claim " + *id + " on bdn:w/v: not found (expired or released)");
  ASSERT_OK(this->claims_->Renew("w", "v", *retry));
  // Another key, or the same key from another holder, is another push.
  EXPECT_STATUS(this->claims_->Acquire("w", "v", "key bdn_aa", "k2"), kConflict, "volume bdn:w/v");
  EXPECT_STATUS(this->claims_->Acquire("w", "v", "key bdn_bb", "k1"), kConflict, "volume bdn:w/v");
}

TYPED_TEST(PushClaimsTest, CommitsNeedTheLiveClaimOrNoneAtAll) {
  ASSERT_OK(this->claims_->CheckCommit("w", "v", std::nullopt));
  auto id = this->claims_->Acquire("w", "v", "key bdn_aa");
  ASSERT_OK(id);
  ASSERT_OK(this->claims_->CheckCommit("w", "v", *id));
  EXPECT_STATUS(this->claims_->CheckCommit("w", "v", std::nullopt), kConflict,
                "volume bdn:w/v: push in progress (claimed by key bdn_aa");
  EXPECT_STATUS(this->claims_->CheckCommit("w", "v", std::string("other")), kConflict,
                "volume bdn:w/v: push in progress");
  auto oldest = this->claims_->OldestLiveAcquired();
  ASSERT_OK(oldest);
  ASSERT_TRUE(oldest->has_value());
  EXPECT_LE(**oldest, PushClaims::Clock::now());
  EXPECT_GT(**oldest, PushClaims::Clock::now() - std::chrono::seconds(30));
  ASSERT_OK(this->claims_->Release("w", "v", *id));
  auto none = this->claims_->OldestLiveAcquired();
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
}

// Many servers claiming one volume at once: exactly one gets it.
TYPED_TEST(PushClaimsTest, OfConcurrentClaimersExactlyOneWins) {
  constexpr int kServers = 8;
  std::vector<std::shared_ptr<PushClaims>> servers;
  for (int i = 0; i < kServers; ++i) servers.push_back(this->backend_.Open(milliseconds(60000)));
  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      auto r = servers[i]->Acquire("w", "race", "server " + std::to_string(i));
      if (r) {
        ++won;
      } else if (r.error().code() == StatusCode::kConflict) {
        ++refused;
      } else {
        ADD_FAILURE() << r.error().ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), kServers - 1);
}

TEST(MemoryPushClaims, AClaimLapsesAfterItsTtlUnlessRenewed) {
  auto now = PushClaims::Clock::now();
  MemoryPushClaims claims(milliseconds(1000), [&] { return now; });
  auto id = claims.Acquire("w", "v", "a");
  ASSERT_OK(id);
  now += milliseconds(900);
  ASSERT_OK(claims.Renew("w", "v", *id));
  now += milliseconds(900);
  EXPECT_STATUS(claims.Acquire("w", "v", "b"), kConflict, "volume bdn:w/v: push in progress");
  now += milliseconds(101);
  EXPECT_STATUS(claims.Renew("w", "v", *id), kNotFound, "claim " + *id);
  ASSERT_OK(claims.Acquire("w", "v", "b"));
}

class PgPushClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = pg_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  PgClaims pg_;
};

// The claim a push takes through one server holds on every other one.
TEST_F(PgPushClaimsTest, AClaimTakenThroughOneServerHoldsOnAnother) {
  auto a = pg_.Open(milliseconds(60000));
  auto b = pg_.Open(milliseconds(60000));
  auto id = a->Acquire("w", "v", "key bdn_aa");
  ASSERT_OK(id);
  EXPECT_STATUS(b->Acquire("w", "v", "key bdn_bb"), kConflict,
                "volume bdn:w/v: push in progress (claimed by key bdn_aa, expires in ");
  EXPECT_STATUS(b->CheckCommit("w", "v", std::nullopt), kConflict, "volume bdn:w/v");
  ASSERT_OK(b->CheckCommit("w", "v", *id));  // the pusher's commit, sent to another server
  ASSERT_OK(b->Renew("w", "v", *id));
  ASSERT_OK(b->Release("w", "v", *id));
  ASSERT_OK(b->Acquire("w", "v", "key bdn_bb"));
}

// Expiry runs on the database server's clock: a claim not renewed is free after its TTL (polled,
// with the refusal seen first and the wait at least the TTL).
TEST_F(PgPushClaimsTest, AClaimNotRenewedLapsesAfterItsTtl) {
  const milliseconds ttl(400);
  auto a = pg_.Open(ttl);
  auto b = pg_.Open(ttl);
  const auto start = std::chrono::steady_clock::now();
  auto id = a->Acquire("w", "v", "a");
  ASSERT_OK(id);
  EXPECT_STATUS(b->Acquire("w", "v", "b"), kConflict, "volume bdn:w/v: push in progress");
  Result<std::string> taken = Err(InternalError("not tried"));
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    taken = b->Acquire("w", "v", "b");
    if (taken) break;
    ASSERT_EQ(taken.error().code(), StatusCode::kConflict) << taken.error().ToString();
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_OK(taken);
  EXPECT_GE(std::chrono::steady_clock::now() - start, ttl);
  EXPECT_STATUS(a->Renew("w", "v", *id), kNotFound, "claim " + *id);
}

}  // namespace
}  // namespace bdn
