// ClaimTable: in-memory push claims with a TTL.
#include "bdn/origin/claims.h"

#include "bdn/base/units.h"

namespace bdn::origin {
namespace {

std::string VolumeText(const std::pair<std::string, std::string>& key) {
  return "bdn:" + key.first + "/" + key.second;
}

}  // namespace

ClaimTable::ClaimTable(std::chrono::milliseconds ttl, std::shared_ptr<Clock> clock)
    : ttl_(ttl), clock_(clock ? std::move(clock) : Clock::Real()) {}

ClaimTable::Claim* ClaimTable::LiveLocked(const Key& key, SteadyTime now) {
  auto it = claims_.find(key);
  if (it == claims_.end()) return nullptr;
  if (it->second.expires <= now) {
    claims_.erase(it);
    return nullptr;
  }
  return &it->second;
}

Status ClaimTable::ConflictLocked(const Key& key, const Claim& c, SteadyTime now) const {
  auto left = std::chrono::ceil<std::chrono::seconds>(c.expires - now).count();
  return ConflictError("volume " + VolumeText(key) + ": push in progress (claimed by " + c.holder +
                       ", expires in " + std::to_string(left) + " s)");
}

Status ClaimTable::NotFoundLocked(const Key& key, const std::string& id) const {
  return NotFoundError("claim " + id + " on " + VolumeText(key) +
                       ": not found (expired or released)");
}

Result<std::string> ClaimTable::Acquire(const std::string& ns, const std::string& vol,
                                        const std::string& holder,
                                        const std::string& idempotency_key) {
  Key key{ns, vol};
  std::lock_guard lock(mu_);
  auto now = clock_->SteadyNow();
  if (Claim* c = LiveLocked(key, now)) {
    // The retry of an Acquire whose answer was lost gets the claim it already holds.
    if (!idempotency_key.empty() && c->idempotency_key == idempotency_key && c->holder == holder) {
      c->expires = now + ttl_;
      return c->id;
    }
    return Err(ConflictLocked(key, *c, now));
  }
  BDN_ASSIGN_OR_RETURN(std::string id, RandomHex(16));
  Claim c{id, holder, now + ttl_, idempotency_key, now};
  claims_[key] = std::move(c);
  return id;
}

Status ClaimTable::Renew(const std::string& ns, const std::string& vol, const std::string& id) {
  Key key{ns, vol};
  std::lock_guard lock(mu_);
  auto now = clock_->SteadyNow();
  Claim* c = LiveLocked(key, now);
  if (!c || c->id != id) return NotFoundLocked(key, id);
  c->expires = now + ttl_;
  return Status::Ok();
}

Status ClaimTable::Release(const std::string& ns, const std::string& vol, const std::string& id) {
  Key key{ns, vol};
  std::lock_guard lock(mu_);
  Claim* c = LiveLocked(key, clock_->SteadyNow());
  if (!c || c->id != id) return NotFoundLocked(key, id);
  claims_.erase(key);
  return Status::Ok();
}

Status ClaimTable::CheckCommit(const std::string& ns, const std::string& vol,
                               const std::optional<std::string>& claim_id) {
  Key key{ns, vol};
  std::lock_guard lock(mu_);
  auto now = clock_->SteadyNow();
  Claim* c = LiveLocked(key, now);
  if (!c || (claim_id && *claim_id == c->id)) return Status::Ok();
  return ConflictLocked(key, *c, now);
}

std::optional<SteadyTime> ClaimTable::OldestLiveAcquired() {
  std::lock_guard lock(mu_);
  const auto now = clock_->SteadyNow();
  std::optional<SteadyTime> oldest;
  for (const auto& [key, c] : claims_) {
    if (c.expires <= now) continue;
    if (!oldest || c.acquired < *oldest) oldest = c.acquired;
  }
  return oldest;
}

}  // namespace bdn::origin
