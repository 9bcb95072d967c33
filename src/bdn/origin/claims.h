// ClaimTable: the origin's push claims (docs/http-api.md, "Push claims"): one push per volume at
// a time, held in memory, lapsing unless renewed within the TTL.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"

namespace bdn::origin {

// Claims by volume. Expired claims are dropped lazily, when their volume is next looked at.
// Thread-safe.
class ClaimTable {
 public:
  // Claims expire on `clock`'s steady time (tests move a FakeClock); null: Clock::Real().
  explicit ClaimTable(std::chrono::milliseconds ttl, std::shared_ptr<Clock> clock = nullptr);

  std::chrono::milliseconds ttl() const { return ttl_; }

  // Claims volume ns/vol for `holder` (how conflict messages name it, e.g. "key bdn_<id>") and
  // returns the new claim id (32 hex characters). A repeated Acquire with the same non-empty
  // `idempotency_key` and holder while that claim is live (the retry of a request whose answer
  // was lost) returns the same id and renews it.
  // Errors: Conflict "volume bdn:ns/vol: push in progress (claimed by <holder>, expires in N s)"
  // while another claim is live; Internal if no random id can be drawn.
  Result<std::string> Acquire(const std::string& ns, const std::string& vol,
                              const std::string& holder, const std::string& idempotency_key = "");
  // Extends a live claim by the TTL from now.
  // Errors: NotFound "claim <id> on bdn:ns/vol: not found (expired or released)".
  Status Renew(const std::string& ns, const std::string& vol, const std::string& id);
  // Releases a live claim. Errors: NotFound as for Renew.
  Status Release(const std::string& ns, const std::string& vol, const std::string& id);
  // Whether a commit presenting `claim_id` (or none) may proceed: OK unless the volume has a live
  // claim with another id. Errors: Conflict with the Acquire message.
  Status CheckCommit(const std::string& ns, const std::string& vol,
                     const std::optional<std::string>& claim_id);
  // When the oldest live claim was acquired, or nullopt when none is live: what a writer under
  // a claim relied on since then is still claimed (bdn serve's GC keeps it).
  std::optional<SteadyTime> OldestLiveAcquired();

 private:
  struct Claim {
    std::string id;
    std::string holder;
    SteadyTime expires;
    std::string idempotency_key;  // of the Acquire that created it; may be empty
    SteadyTime acquired{};
  };
  using Key = std::pair<std::string, std::string>;
  // The live claim on `key`, erasing an expired one. Requires mu_.
  Claim* LiveLocked(const Key& key, SteadyTime now);
  Status ConflictLocked(const Key& key, const Claim& c, SteadyTime now) const;
  Status NotFoundLocked(const Key& key, const std::string& id) const;

  const std::chrono::milliseconds ttl_;
  const std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  std::map<Key, Claim> claims_;
};

}  // namespace bdn::origin
