#include "bdn/mount/chunk_cache.h"

#include <algorithm>
#include <optional>
#include <string>

namespace bdn {

namespace {

// The error of a fetch nobody waited for waits this long for the chunk's next reader.
constexpr auto kUnclaimedErrorTtl = std::chrono::seconds(10);

// A chunk id fixes its bytes, so a ref whose length disagrees comes from a bad chunk index; its
// caller would otherwise index past the buffer.
Result<ChunkBytes> CheckSize(const ChunkRef& ref, Result<ChunkBytes> bytes) {
  if (bytes) BDN_RETURN_IF_ERROR(CheckChunkLength(ref, (*bytes)->size()));
  return bytes;
}

// The largest blob PeekOrReadNow reads on the caller's thread (a chunk is at most 256 KiB).
constexpr uint64_t kMaxReadNowBytes = 4ull << 20;

}  // namespace

ChunkCache::ChunkCache(ChunkStore& store, Options options)
    : store_(store),
      options_(std::move(options)),
      streaming_limit_bytes_(std::min(options_.capacity_bytes, options_.streaming_bytes > 0
                                                                   ? options_.streaming_bytes
                                                                   : options_.capacity_bytes / 4)) {
  FetchCore::Options core;
  core.name = "chunk cache";
  core.demand_threads = std::max(1, options_.fetch_threads);
  core.background_threads = std::max(0, options_.prefetch_threads);
  core.max_batch_chunks =
      store_.PrefersBatches() ? std::max<size_t>(1, options_.max_batch_chunks) : 1;
  core.max_batch_bytes = options_.max_batch_bytes;
  core.max_demand_batch_bytes = std::min(options_.max_batch_bytes, options_.max_demand_batch_bytes);
  core.background_inflight_bytes = options_.prefetch_inflight_bytes;
  core.max_queued_background = options_.max_queued_prefetches;
  core.unclaimed_error_ttl = kUnclaimedErrorTtl;
  core.clock = options_.clock;
  core.keeper = this;
  core_ = std::make_unique<FetchCore>(
      [this](std::span<const Digest> ids) {
        return ReadBlobs(store_, ids, BatchFailure::kReadEachAloneUnlessTransient);
      },
      std::move(core));
}

ChunkCache::~ChunkCache() {
  Shutdown();
  core_.reset();  // joins the fetch threads, which call Fetched
}

void ChunkCache::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  core_->Shutdown();
}

uint32_t ChunkCache::Hints(AccessPattern pattern, bool keep) {
  return (keep ? kKeep : 0) | (pattern == AccessPattern::kRandom ? kRandom : 0);
}

SharedBytes ChunkCache::Lookup(const Digest& id, uint32_t hints) {
  MutexLock lock(mu_);
  return HitLocked(id, hints & kRandom ? AccessPattern::kRandom : AccessPattern::kSequential);
}

bool ChunkCache::Holds(const Digest& id) {
  MutexLock lock(mu_);
  return index_.contains(id);
}

void ChunkCache::Fetched(const Digest& id, const SharedBytes& bytes, uint32_t hints) {
  MutexLock lock(mu_);
  gave_up_.erase(id);
  if (hints & kKeep) {
    InsertLocked(id, bytes, hints & kRandom ? AccessPattern::kRandom : AccessPattern::kSequential);
  }
}

void ChunkCache::RememberGaveUpLocked(const Digest& id) {
  if (gave_up_.size() >= kMaxGaveUp) gave_up_.clear();
  gave_up_[id] = options_.clock->SteadyNow();
}

Result<ChunkBytes> ChunkCache::GetImpl(const Digest& id, uint64_t size_bytes, uint32_t hints,
                                       SteadyTime deadline, std::stop_token stop) {
  const Clock& clock = *options_.clock;
  auto backoff = options_.retry_backoff;
  for (;;) {
    {
      MutexLock lock(mu_);
      // A reader just gave up on this chunk at its deadline: the kernel retries a failed read
      // (readahead, then the read itself), and each retry must not wait a whole deadline again.
      if (auto it = gave_up_.find(id); it != gave_up_.end()) {
        if (clock.SteadyNow() - it->second < kGaveUpMemory) {
          deadline = std::min(deadline, clock.SteadyNow() + kRetryAfterGiveUp);
        } else {
          gave_up_.erase(it);
        }
      }
    }
    FetchCore::Answer answer = core_->Fetch({id, size_bytes, hints}, deadline, stop);
    if (answer.end == FetchCore::End::kDeadline) {
      MutexLock lock(mu_);
      RememberGaveUpLocked(id);
    }
    if (answer.end != FetchCore::End::kFetched) return std::move(answer.bytes);
    Result<ChunkBytes> result = std::move(answer.bytes);
    if (result || !IsTransient(result.error())) return result;
    MutexLock lock(mu_);
    if (clock.SteadyNow() + backoff >= deadline) {
      RememberGaveUpLocked(id);
      return result;
    }
    ++stats_.retries;
    // The back-off ends early at Shutdown and at a stop request.
    WaitUntilOrStopped(clock, stop_cv_, lock.native(), clock.SteadyNow() + backoff, stop,
                       [&]() REQUIRES(mu_) { return stopping_; });
    lock.Unlock();
    if (stop.stop_requested()) {
      return Err(UnavailableError("chunk " + id.ToString() + ": the wait was cancelled"));
    }
    backoff = std::min(backoff * 2, options_.retry_max_backoff);
  }
}

Result<ChunkBytes> ChunkCache::Get(const ChunkRef& ref, AccessPattern pattern, SteadyTime deadline,
                                   std::stop_token stop) {
  return CheckSize(ref, GetImpl(ref.id, ref.size_bytes, Hints(pattern, /*keep=*/true), deadline,
                                std::move(stop)));
}

Result<ChunkBytes> ChunkCache::GetBlob(const Digest& id, SteadyTime deadline,
                                       std::stop_token stop) {
  return GetImpl(id, /*size_bytes=*/0, Hints(AccessPattern::kRandom, /*keep=*/false), deadline,
                 std::move(stop));
}

Result<std::vector<ChunkBytes>> ChunkCache::GetBlobs(std::span<const Digest> ids,
                                                     SteadyTime deadline, std::stop_token stop) {
  std::vector<FetchCore::Item> items;
  items.reserve(ids.size());
  for (const Digest& id : ids) items.push_back({id, 0, Hints(AccessPattern::kRandom, false)});
  // Held, not just queued: a blob's bytes are not kept, so a flight that completes before its
  // turn to be waited for would otherwise be lost and fetched again.
  std::vector<FetchCore::Ticket> tickets = core_->Hold(items);
  std::vector<ChunkBytes> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    Result<ChunkBytes> bytes = Err(InternalError("unset"));
    if (tickets[i]) {
      FetchCore::Answer answer = core_->Await(tickets[i], deadline, stop);
      bytes = std::move(answer.bytes);
      if (!bytes && answer.end == FetchCore::End::kFetched && IsTransient(bytes.error())) {
        bytes = GetBlob(ids[i], deadline, stop);  // with GetBlob's retries
      }
    } else {
      bytes = GetBlob(ids[i], deadline, stop);  // shut down: GetBlob says so
    }
    if (!bytes) return Err(bytes.error());  // the tickets' flights are dropped by Withdraw
    out.push_back(std::move(*bytes));
  }
  return out;
}

void ChunkCache::Withdraw(std::span<const ChunkRef> refs) {
  std::vector<Digest> ids;
  ids.reserve(refs.size());
  for (const ChunkRef& ref : refs) ids.push_back(ref.id);
  core_->Withdraw(ids);
}

ChunkBytes ChunkCache::Peek(const ChunkRef& ref, AccessPattern pattern) {
  MutexLock lock(mu_);
  ChunkBytes bytes = HitLocked(ref.id, pattern);
  return bytes && bytes->size() == ref.size_bytes ? bytes : nullptr;
}

ChunkBytes ChunkCache::PeekOrReadNow(const ChunkRef& ref, AccessPattern pattern) {
  if (ChunkBytes held = Peek(ref, pattern)) return held;
  if (core_->Busy(ref.id)) return nullptr;  // its fetch's waiters share it
  auto bytes = store_.GetNow(ref.id, kMaxReadNowBytes);
  if (!bytes || bytes->size() != ref.size_bytes) return nullptr;
  auto shared = std::make_shared<const std::vector<uint8_t>>(std::move(*bytes));
  MutexLock lock(mu_);
  ++stats_.read_now;
  InsertLocked(ref.id, shared, pattern);
  return shared;
}

void ChunkCache::Request(std::span<const ChunkRef> refs, AccessPattern pattern) {
  std::vector<FetchCore::Item> items;
  items.reserve(refs.size());
  for (const ChunkRef& ref : refs) items.push_back({ref.id, ref.size_bytes, Hints(pattern, true)});
  core_->Request(items);
}

void ChunkCache::Prefetch(std::span<const ChunkRef> refs) {
  std::vector<FetchCore::Item> items;
  items.reserve(refs.size());
  for (const ChunkRef& ref : refs) {
    items.push_back({ref.id, ref.size_bytes, Hints(AccessPattern::kSequential, true)});
  }
  core_->Background(items);
}

ChunkBytes ChunkCache::HitLocked(const Digest& id, AccessPattern pattern) {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  Node& node = *it->second;
  if (!node.streaming) {
    lru_.splice(lru_.begin(), lru_, it->second);
  } else if (pattern == AccessPattern::kRandom) {
    node.streaming = false;
    stats_.streaming_bytes -= node.bytes->size();
    lru_.splice(lru_.begin(), streaming_, it->second);
  }
  ++stats_.hits;
  return node.bytes;
}

void ChunkCache::InsertLocked(const Digest& id, ChunkBytes bytes, AccessPattern pattern) {
  uint64_t size = bytes->size();
  if (size > options_.capacity_bytes || index_.contains(id)) return;
  bool streaming = pattern == AccessPattern::kSequential;
  NodeList& list = streaming ? streaming_ : lru_;
  list.push_front(Node{id, std::move(bytes), streaming});
  index_.emplace(id, list.begin());
  stats_.cached_bytes += size;
  ++stats_.cached_chunks;
  if (streaming) stats_.streaming_bytes += size;
  EvictLocked();
}

void ChunkCache::EvictLocked() {
  auto evict_back = [this](NodeList& list) REQUIRES(mu_) {
    Node& victim = list.back();
    uint64_t size = victim.bytes->size();
    stats_.cached_bytes -= size;
    if (victim.streaming) stats_.streaming_bytes -= size;
    --stats_.cached_chunks;
    index_.erase(victim.id);
    list.pop_back();
  };
  while (stats_.streaming_bytes > streaming_limit_bytes_ && !streaming_.empty()) {
    evict_back(streaming_);
  }
  while (stats_.cached_bytes > options_.capacity_bytes) {
    evict_back(!streaming_.empty() ? streaming_ : lru_);
  }
}

bool ChunkCache::Contains(const Digest& id) const {
  MutexLock lock(mu_);
  return index_.contains(id);
}

ChunkCacheStats ChunkCache::stats() const {
  FetchCore::Stats core = core_->stats();
  MutexLock lock(mu_);
  ChunkCacheStats s = stats_;
  s.joined = core.joined;
  s.fetches = core.fetches;
  s.store_calls = core.batches;
  s.fetch_errors = core.fetch_errors;
  s.fetched_bytes = core.fetched_bytes;
  s.prefetch_queued = core.background_queued;
  s.prefetch_dropped = core.background_dropped;
  s.promoted = core.promoted;
  s.timeouts = core.timeouts;
  return s;
}

}  // namespace bdn
