#include "bdn/objstore/pack_catalog.h"

#include "bdn/base/hex.h"
#include "bdn/store/pack_index.h"  // Hex16, ParseHex16Name

namespace bdn::objstore {
namespace {

// A lock held for as long as the hold lives.
template <typename Lock>
class LockHold : public StoreHold {
 public:
  explicit LockHold(Lock lock) : lock_(std::move(lock)) {}

 private:
  Lock lock_;
};

}  // namespace

std::string PackKey(uint64_t id) { return "packs/" + Hex16(id) + ".pack"; }

BucketCatalog::BucketCatalog(std::shared_ptr<S3Client> client,
                             std::function<SteadyTime()> retain_since, std::shared_ptr<Clock> clock)
    : client_(std::move(client)),
      retain_since_(std::move(retain_since)),
      clock_(clock ? std::move(clock) : Clock::Real()) {}

Result<std::vector<CatalogPack>> BucketCatalog::ListPacks() {
  BDN_ASSIGN_OR_RETURN(std::vector<ListedObject> listed, client_->List("packs/"));
  std::vector<CatalogPack> out;
  out.reserve(listed.size());
  for (const ListedObject& o : listed) {
    std::string_view name = std::string_view(o.key).substr(6);  // after "packs/"
    if (auto id = pack::ParseHex16Name(name, ".pack")) out.push_back({*id, o.size_bytes});
  }
  return out;
}

Result<std::unique_ptr<StoreHold>> BucketCatalog::BeginGc() {
  std::unique_lock lock(gc_running_.native(), std::try_to_lock);
  if (!lock.owns_lock()) {
    return Err(ConflictError("chunk store " + client_->uri() + ": another gc is running"));
  }
  return std::unique_ptr<StoreHold>(
      std::make_unique<LockHold<std::unique_lock<std::mutex>>>(std::move(lock)));
}

Result<std::unique_ptr<StoreHold>> BucketCatalog::HoldForCommit() {
  return std::unique_ptr<StoreHold>(std::make_unique<LockHold<std::shared_lock<std::shared_mutex>>>(
      std::shared_lock<std::shared_mutex>(sweep_.native())));
}

Result<std::unique_ptr<StoreHold>> BucketCatalog::HoldForSweep() {
  return std::unique_ptr<StoreHold>(std::make_unique<LockHold<std::unique_lock<std::shared_mutex>>>(
      std::unique_lock<std::shared_mutex>(sweep_.native())));
}

Status BucketCatalog::PublishDoom(std::span<const uint64_t> packs) {
  MutexLock l(mu_);
  doom_.assign(packs.begin(), packs.end());
  return Status::Ok();
}

Status BucketCatalog::ClearDoom() {
  MutexLock l(mu_);
  doom_.clear();
  return Status::Ok();
}

Result<std::vector<uint64_t>> BucketCatalog::Doom() {
  MutexLock l(mu_);
  return doom_;
}

void BucketCatalog::PruneLocked(SteadyTime now, bool force) {
  if (!force && now - last_prune_ < std::chrono::seconds(1)) return;
  last_prune_ = now;
  const SteadyTime since = retain_since_ ? retain_since_() : now - std::chrono::minutes(10);
  while (!claims_.empty() && claims_.front().first < since) claims_.pop_front();
}

Status BucketCatalog::RecordClaims(std::span<const Digest> ids) {
  if (ids.empty()) return Status::Ok();
  MutexLock l(mu_);
  const SteadyTime now = clock_->SteadyNow();
  for (const Digest& id : ids) claims_.emplace_back(now, id);
  PruneLocked(now, false);
  return Status::Ok();
}

Result<std::vector<Digest>> BucketCatalog::LiveClaims() {
  MutexLock l(mu_);
  PruneLocked(clock_->SteadyNow(), true);
  std::vector<Digest> out;
  out.reserve(claims_.size());
  for (const auto& [t, id] : claims_) out.push_back(id);
  return out;
}

}  // namespace bdn::objstore
