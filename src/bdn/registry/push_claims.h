// PushClaims: the origin's push claims (docs/http-api.md, "Push claims"): one push per volume at
// a time, lapsing unless renewed within the TTL. MemoryPushClaims holds them in one server's
// memory (bdn serve with its data directory); PgPushClaims in the PostgreSQL database that every
// replica of `bdn serve --db` shares, so a claim taken through one replica holds on all.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"

namespace bdn {
namespace sql {
class Database;
class Session;
}  // namespace sql

// Claims by volume. Implementations are thread-safe.
class PushClaims {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~PushClaims() = default;

  // How long a claim lives unless renewed.
  virtual std::chrono::milliseconds ttl() const = 0;

  // Claims volume ns/vol for `holder` (how conflict messages name it, e.g. "key bdn_<id>") and
  // returns the new claim id (32 hex characters). A repeated Acquire with the same non-empty
  // `idempotency_key` and holder while that claim is live (the retry of a request whose answer
  // was lost, or the CLI taking over the claim of a process of its own that died) renews the
  // claim under a new id: the old one stops working (Renew, Release, CheckCommit), so that a
  // commit the dead process still had on its way cannot land after the new holder's.
  // Errors: Conflict "volume bdn:ns/vol: push in progress (claimed by <holder>, expires in N s)"
  // while another claim is live; Internal if no random id can be drawn; the database's errors
  // (PgPushClaims: Unavailable when it cannot be reached).
  virtual Result<std::string> Acquire(const std::string& ns, const std::string& vol,
                                      const std::string& holder,
                                      const std::string& idempotency_key = "") = 0;
  // Extends a live claim by the TTL from now.
  // Errors: NotFound "claim <id> on bdn:ns/vol: not found (expired or released)".
  virtual Status Renew(const std::string& ns, const std::string& vol, const std::string& id) = 0;
  // Releases a live claim. Errors: NotFound as for Renew.
  virtual Status Release(const std::string& ns, const std::string& vol, const std::string& id) = 0;
  // Whether a commit presenting `claim_id` (or none) may proceed: OK unless the volume has a live
  // claim with another id. Errors: Conflict with the Acquire message.
  virtual Status CheckCommit(const std::string& ns, const std::string& vol,
                             const std::optional<std::string>& claim_id) = 0;
  // When the oldest live claim was acquired (as a time of this process's steady clock), or
  // nullopt when none is live: what a writer under a claim relied on since then is still
  // claimed (bdn serve's GC keeps it). Errors: the database's.
  virtual Result<std::optional<Clock::time_point>> OldestLiveAcquired() = 0;
  // Whether the claims live in the registry's database (PgPushClaims), so that the registry can
  // check a commit's claim inside the transaction that writes it (CommitRequest::
  // check_push_claim; CheckPushClaimInTransaction).
  virtual bool InRegistryDatabase() const { return false; }
};

// CheckCommit inside a write transaction of the database that holds push_claims (SqlRegistry's
// commit): the volume's claim row is read FOR SHARE, so a claim taken over meanwhile (a repeated
// Acquire, which gives it a new id) waits for this transaction, or was taken before it and is
// seen. Errors: Conflict with Acquire's message; the session's.
Status CheckPushClaimInTransaction(sql::Session& s, const std::string& ns, const std::string& vol,
                                   const std::optional<std::string>& claim_id);

// Whether `conflict` is the Conflict that Acquire answers while `holder` (as it was passed to
// Acquire) holds the volume's live claim: how a sync job tells a claim of its own, left by an
// earlier run of it, from another pusher's. Exactly Acquire's wording; no error.
bool IsClaimConflictOf(const Status& conflict, std::string_view holder);

// Claims in this process's memory. Expired claims are dropped lazily, when their volume is next
// looked at. Thread-safe.
class MemoryPushClaims : public PushClaims {
 public:
  // `now` is for tests; by default the steady clock.
  explicit MemoryPushClaims(std::chrono::milliseconds ttl,
                            std::function<Clock::time_point()> now = Clock::now);

  std::chrono::milliseconds ttl() const override { return ttl_; }
  Result<std::string> Acquire(const std::string& ns, const std::string& vol,
                              const std::string& holder,
                              const std::string& idempotency_key = "") override;
  Status Renew(const std::string& ns, const std::string& vol, const std::string& id) override;
  Status Release(const std::string& ns, const std::string& vol, const std::string& id) override;
  Status CheckCommit(const std::string& ns, const std::string& vol,
                     const std::optional<std::string>& claim_id) override;
  Result<std::optional<Clock::time_point>> OldestLiveAcquired() override;

 private:
  struct Claim {
    std::string id;
    std::string holder;
    Clock::time_point expires;
    std::string idempotency_key;  // of the Acquire that created it; may be empty
    Clock::time_point acquired{};
  };
  using Key = std::pair<std::string, std::string>;
  // The live claim on `key`, erasing an expired one. Requires mu_.
  Claim* LiveLocked(const Key& key, Clock::time_point now) REQUIRES(mu_);
  Status ConflictLocked(const Key& key, const Claim& c, Clock::time_point now) const REQUIRES(mu_);
  Status NotFoundLocked(const Key& key, const std::string& id) const REQUIRES(mu_);

  const std::chrono::milliseconds ttl_;
  const std::function<Clock::time_point()> now_;
  Mutex mu_;
  std::map<Key, Claim> claims_ GUARDED_BY(mu_);
};

// Claims in the table push_claims of a PostgreSQL database (migrated by MigratePgMetadata),
// timed by the database server's clock, so that replicas with skewed clocks agree on when a
// claim lapses. Each call is one transaction; Acquire locks the volume's claim row, so of two
// replicas claiming one volume at once exactly one succeeds. Expired rows are replaced by the
// next Acquire. Thread-safe.
class PgPushClaims : public PushClaims {
 public:
  PgPushClaims(std::shared_ptr<sql::Database> db, std::chrono::milliseconds ttl);

  std::chrono::milliseconds ttl() const override { return ttl_; }
  Result<std::string> Acquire(const std::string& ns, const std::string& vol,
                              const std::string& holder,
                              const std::string& idempotency_key = "") override;
  Status Renew(const std::string& ns, const std::string& vol, const std::string& id) override;
  Status Release(const std::string& ns, const std::string& vol, const std::string& id) override;
  Status CheckCommit(const std::string& ns, const std::string& vol,
                     const std::optional<std::string>& claim_id) override;
  Result<std::optional<Clock::time_point>> OldestLiveAcquired() override;
  bool InRegistryDatabase() const override { return true; }

 private:
  std::shared_ptr<sql::Database> db_;
  const std::chrono::milliseconds ttl_;
};

}  // namespace bdn
