// MemoryPushClaims (claims with a TTL in this process's memory) and PgPushClaims (the same in
// the PostgreSQL database replicas share).
#include "bdn/registry/push_claims.h"

#include "bdn/base/units.h"
#include "bdn/sql/database.h"

namespace bdn {
namespace {

std::string VolumeText(const std::pair<std::string, std::string>& key) {
  return "bdn:" + key.first + "/" + key.second;
}

// The words of a conflict that name the claim's holder (IsClaimConflictOf looks for them).
std::string ClaimedBy(std::string_view holder) {
  return " (claimed by " + std::string(holder) + ", expires in ";
}

Status ClaimConflict(const std::pair<std::string, std::string>& key, const std::string& holder,
                     int64_t seconds_left) {
  return ConflictError("volume " + VolumeText(key) + ": push in progress" + ClaimedBy(holder) +
                       std::to_string(seconds_left) + " s); push again once it has ended");
}

Status ClaimNotFound(const std::pair<std::string, std::string>& key, const std::string& id) {
  return NotFoundError("claim " + id + " on " + VolumeText(key) +
                       ": not found (expired or released)");
}

}  // namespace

bool IsClaimConflictOf(const Status& conflict, std::string_view holder) {
  if (conflict.code() != StatusCode::kConflict) return false;
  const std::string_view m = conflict.message();
  const size_t at = m.find(": push in progress" + ClaimedBy(holder));
  return m.starts_with("volume bdn:") && at != std::string_view::npos;
}

MemoryPushClaims::MemoryPushClaims(std::chrono::milliseconds ttl,
                                   std::function<Clock::time_point()> now)
    : ttl_(ttl), now_(std::move(now)) {}

MemoryPushClaims::Claim* MemoryPushClaims::LiveLocked(const Key& key, Clock::time_point now) {
  auto it = claims_.find(key);
  if (it == claims_.end()) return nullptr;
  if (it->second.expires <= now) {
    claims_.erase(it);
    return nullptr;
  }
  return &it->second;
}

Status MemoryPushClaims::ConflictLocked(const Key& key, const Claim& c,
                                        Clock::time_point now) const {
  return ClaimConflict(key, c.holder,
                       std::chrono::ceil<std::chrono::seconds>(c.expires - now).count());
}

Status MemoryPushClaims::NotFoundLocked(const Key& key, const std::string& id) const {
  return ClaimNotFound(key, id);
}

Result<std::string> MemoryPushClaims::Acquire(const std::string& ns, const std::string& vol,
                                              const std::string& holder,
                                              const std::string& idempotency_key) {
  Key key{ns, vol};
  MutexLock lock(mu_);
  auto now = now_();
  if (Claim* c = LiveLocked(key, now)) {
    // The retry of an Acquire whose answer was lost gets the claim it already holds, under a new
    // id (PushClaims::Acquire).
    if (!idempotency_key.empty() && c->idempotency_key == idempotency_key && c->holder == holder) {
      BDN_ASSIGN_OR_RETURN(c->id, RandomHex(16));
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

Status MemoryPushClaims::Renew(const std::string& ns, const std::string& vol,
                               const std::string& id) {
  Key key{ns, vol};
  MutexLock lock(mu_);
  auto now = now_();
  Claim* c = LiveLocked(key, now);
  if (!c || c->id != id) return NotFoundLocked(key, id);
  c->expires = now + ttl_;
  return Status::Ok();
}

Status MemoryPushClaims::Release(const std::string& ns, const std::string& vol,
                                 const std::string& id) {
  Key key{ns, vol};
  MutexLock lock(mu_);
  Claim* c = LiveLocked(key, now_());
  if (!c || c->id != id) return NotFoundLocked(key, id);
  claims_.erase(key);
  return Status::Ok();
}

Status MemoryPushClaims::CheckCommit(const std::string& ns, const std::string& vol,
                                     const std::optional<std::string>& claim_id) {
  Key key{ns, vol};
  MutexLock lock(mu_);
  auto now = now_();
  Claim* c = LiveLocked(key, now);
  if (!c || (claim_id && *claim_id == c->id)) return Status::Ok();
  return ConflictLocked(key, *c, now);
}

Result<std::optional<PushClaims::Clock::time_point>> MemoryPushClaims::OldestLiveAcquired() {
  MutexLock lock(mu_);
  const auto now = now_();
  std::optional<Clock::time_point> oldest;
  for (const auto& [key, c] : claims_) {
    if (c.expires <= now) continue;
    if (!oldest || c.acquired < *oldest) oldest = c.acquired;
  }
  return oldest;
}

// ---- PgPushClaims ----

namespace {

// The live claim of a volume as the statements below read it: id, holder, idempotency key,
// whole seconds left (rounded up).
constexpr const char* kLiveClaim =
    "SELECT id, holder, idempotency_key, "
    "CAST(ceil(extract(epoch FROM expires_at - clock_timestamp())) AS bigint) "
    "FROM push_claims WHERE ns=?1 AND volume=?2 AND expires_at > clock_timestamp()";

}  // namespace

PgPushClaims::PgPushClaims(std::shared_ptr<sql::Database> db, std::chrono::milliseconds ttl)
    : db_(std::move(db)), ttl_(ttl) {}

Result<std::string> PgPushClaims::Acquire(const std::string& ns, const std::string& vol,
                                          const std::string& holder,
                                          const std::string& idempotency_key) {
  const std::pair<std::string, std::string> key{ns, vol};
  const std::string ttl = std::to_string(ttl_.count()) + " milliseconds";
  BDN_ASSIGN_OR_RETURN(std::string fresh, RandomHex(16));
  return sql::WriteValue<std::string>(
      *db_,
      [&](sql::Session& s) -> Result<std::string> {
        // Locks the volume's claim row when there is one, live or not; a claim inserted by a
        // concurrent Acquire after this read makes the INSERT below wait for it and then do
        // nothing, and the second read then sees it.
        for (int round = 0; round < 2; ++round) {
          BDN_ASSIGN_OR_RETURN(
              sql::Rows live,
              s.Query(std::string(kLiveClaim) + std::string(s.ForUpdate()), {ns, vol}));
          if (!live.empty()) {
            // The retry of an Acquire whose answer was lost gets the claim it already holds,
            // under a new id (PushClaims::Acquire).
            if (!idempotency_key.empty() && live.Text(0, 2) == idempotency_key &&
                live.Text(0, 1) == holder) {
              BDN_RETURN_IF_ERROR(sql::ToStatus(
                  s.Exec("UPDATE push_claims SET id = ?4, expires_at = clock_timestamp() + "
                         "CAST(?3 AS interval) WHERE ns=?1 AND volume=?2",
                         {ns, vol, ttl, fresh})));
              return fresh;
            }
            return Err(ClaimConflict(key, live.Text(0, 1), live.Int(0, 3)));
          }
          BDN_ASSIGN_OR_RETURN(
              int64_t taken,
              s.Exec("INSERT INTO push_claims(ns, volume, id, holder, idempotency_key, "
                     "acquired_at, expires_at) VALUES(?1, ?2, ?3, ?4, ?5, clock_timestamp(), "
                     "clock_timestamp() + CAST(?6 AS interval)) ON CONFLICT(ns, volume) DO "
                     "UPDATE SET id=excluded.id, holder=excluded.holder, "
                     "idempotency_key=excluded.idempotency_key, "
                     "acquired_at=excluded.acquired_at, expires_at=excluded.expires_at "
                     "WHERE push_claims.expires_at <= clock_timestamp()",
                     {ns, vol, fresh, holder, idempotency_key, ttl}));
          if (taken == 1) return fresh;
        }
        return Err(UnavailableError("volume " + VolumeText(key) +
                                    ": push claim: the claim changed while it was taken; retry"));
      },
      "push claim");
}

Status PgPushClaims::Renew(const std::string& ns, const std::string& vol, const std::string& id) {
  const std::string ttl = std::to_string(ttl_.count()) + " milliseconds";
  return db_->Write(
      [&](sql::Session& s) -> Status {
        BDN_ASSIGN_OR_RETURN(int64_t n,
                             s.Exec("UPDATE push_claims SET expires_at = clock_timestamp() + "
                                    "CAST(?4 AS interval) WHERE ns=?1 AND volume=?2 AND id=?3 AND "
                                    "expires_at > clock_timestamp()",
                                    {ns, vol, id, ttl}));
        return n == 1 ? Status::Ok() : ClaimNotFound({ns, vol}, id);
      },
      "push claim");
}

Status PgPushClaims::Release(const std::string& ns, const std::string& vol, const std::string& id) {
  return db_->Write(
      [&](sql::Session& s) -> Status {
        BDN_ASSIGN_OR_RETURN(
            int64_t n, s.Exec("DELETE FROM push_claims WHERE ns=?1 AND volume=?2 AND id=?3 AND "
                              "expires_at > clock_timestamp()",
                              {ns, vol, id}));
        return n == 1 ? Status::Ok() : ClaimNotFound({ns, vol}, id);
      },
      "push claim");
}

Status PgPushClaims::CheckCommit(const std::string& ns, const std::string& vol,
                                 const std::optional<std::string>& claim_id) {
  return db_->Read(
      [&](sql::Session& s) -> Status {
        BDN_ASSIGN_OR_RETURN(sql::Rows live, s.Query(kLiveClaim, {ns, vol}));
        if (live.empty() || (claim_id && *claim_id == live.Text(0, 0))) return Status::Ok();
        return ClaimConflict({ns, vol}, live.Text(0, 1), live.Int(0, 3));
      },
      sql::Consistency::kStatement, "push claim");
}

Status CheckPushClaimInTransaction(sql::Session& s, const std::string& ns, const std::string& vol,
                                   const std::optional<std::string>& claim_id) {
  // push_claims lives only in PostgreSQL (PgPushClaims): FOR SHARE is that engine's.
  BDN_ASSIGN_OR_RETURN(sql::Rows live, s.Query(std::string(kLiveClaim) + " FOR SHARE", {ns, vol}));
  if (live.empty() || (claim_id && *claim_id == live.Text(0, 0))) return Status::Ok();
  return ClaimConflict({ns, vol}, live.Text(0, 1), live.Int(0, 3));
}

Result<std::optional<PushClaims::Clock::time_point>> PgPushClaims::OldestLiveAcquired() {
  BDN_ASSIGN_OR_RETURN(
      sql::Rows r,
      sql::ReadValue<sql::Rows>(
          *db_,
          [](sql::Session& s) {
            return s.Query(
                "SELECT CAST(extract(epoch FROM clock_timestamp() - min(acquired_at)) * 1000 "
                "AS bigint) FROM push_claims WHERE expires_at > clock_timestamp()");
          },
          sql::Consistency::kStatement, "push claims"));
  if (r.empty() || r.IsNull(0, 0)) return std::optional<Clock::time_point>();
  return std::optional<Clock::time_point>(Clock::now() - std::chrono::milliseconds(r.Int(0, 0)));
}

}  // namespace bdn
