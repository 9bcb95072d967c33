#include "bdn/mount/chunk_cache.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>

namespace bdn {

// One fetch of one blob, queued or running; its waiters wait on `cv` under ChunkCache::mu_.
struct ChunkCache::Flight {
  Digest id;
  AccessPattern pattern = AccessPattern::kRandom;  // where its bytes are kept
  bool demand = false;                             // on (or taken from) the demand queue
  bool keep = true;                                // cache the bytes (GetBlob's are not)
  uint32_t size_bytes = 0;                         // the chunk's length; 0 if unknown
  int waiters = 0;                                 // Gets waiting for it now
  bool started = false;
  bool done = false;
  Result<ChunkBytes> result;
  // condition_variable_any: its waits also end when the waiter's stop_token is requested.
  std::condition_variable_any cv;
};

ChunkCache::ChunkCache(ChunkStore& store, Options options)
    : store_(store),
      options_(options),
      streaming_limit_bytes_(std::min(options.capacity_bytes, options.streaming_bytes > 0
                                                                  ? options.streaming_bytes
                                                                  : options.capacity_bytes / 4)) {
  for (int i = 0; i < std::max(1, options_.fetch_threads); ++i) {
    workers_.emplace_back([this] { Worker(false); });
  }
  for (int i = 0; i < options_.prefetch_threads; ++i) {
    workers_.emplace_back([this] { Worker(true); });
  }
}

ChunkCache::~ChunkCache() {
  Shutdown();
  for (auto& t : workers_) t.join();
}

void ChunkCache::Shutdown() {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  stopping_ = true;
  demand_queue_.clear();
  prefetch_queue_.clear();
  for (auto& [id, flight] : inflight_) flight->cv.notify_all();
  work_cv_.notify_all();
  stop_cv_.notify_all();
}

namespace {
// A chunk id fixes its bytes, so a ref whose length disagrees comes from a bad chunk index; its
// caller would otherwise index past the buffer.
Result<ChunkBytes> CheckSize(const ChunkRef& ref, Result<ChunkBytes> bytes) {
  if (bytes) BDN_RETURN_IF_ERROR(CheckChunkLength(ref, (*bytes)->size()));
  return bytes;
}

// Errors a later try may not repeat: an unreachable tier, a request that ran out of time.
bool IsTransient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}
}  // namespace

Result<ChunkBytes> ChunkCache::FetchFromStore(const Digest& id) {
  // Anything thrown here (bad_alloc) must still complete the flight, or waiters hang.
  try {
    auto bytes = store_.Get(id);
    if (!bytes) return Err(bytes.error());
    return std::make_shared<const std::vector<uint8_t>>(std::move(*bytes));
  } catch (const std::exception& e) {
    return Err(InternalError("chunk " + id.ToString() + ": " + e.what()));
  }
}

void ChunkCache::RunBatch(const std::vector<std::shared_ptr<Flight>>& batch) {
  {
    std::lock_guard lock(mu_);
    ++stats_.store_calls;
  }
  if (batch.size() == 1) return Complete(batch[0], FetchFromStore(batch[0]->id));
  std::vector<Digest> ids;
  ids.reserve(batch.size());
  for (const auto& flight : batch) ids.push_back(flight->id);
  Result<BlobBatch> got;
  try {
    got = store_.GetMany(ids);
  } catch (const std::exception& e) {
    got = Err(InternalError("chunk batch of " + std::to_string(ids.size()) + ": " + e.what()));
  }
  if (!got && !IsTransient(got.error())) {
    // One bad chunk (or a store fault) fails the whole batch: ask again one by one, so that
    // each reader gets its own chunk's answer and the good chunks still arrive.
    for (const auto& flight : batch) Complete(flight, FetchFromStore(flight->id));
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Result<ChunkBytes> result = Err(got ? Status() : got.error());
    if (got && (*got)[i]) {
      result = std::make_shared<const std::vector<uint8_t>>(std::move(*(*got)[i]));
    } else if (got) {
      result = Err(NotFoundError("chunk " + ids[i].ToString() + ": not in store"));
    }
    Complete(batch[i], std::move(result));
  }
}

void ChunkCache::RememberGaveUpLocked(const Digest& id, const Status& status) {
  if (gave_up_.size() >= kMaxUnclaimedErrors) gave_up_.clear();
  gave_up_[id] = {status, Clock::now()};
}

void ChunkCache::Complete(const std::shared_ptr<Flight>& flight, Result<ChunkBytes> result) {
  std::lock_guard lock(mu_);
  ++stats_.fetches;
  if (result) gave_up_.erase(flight->id);
  if (result) {
    stats_.fetched_bytes += (*result)->size();
    if (flight->keep) InsertLocked(flight->id, *result, flight->pattern);
  } else {
    ++stats_.fetch_errors;
    if (flight->waiters == 0) {
      // Nobody waited for this fetch (a prefetch, or a Request whose reader has not come yet, or
      // gave up). Its error goes to the next reader of the chunk, once: a store may not fail the
      // same way twice (LocalChunkStore sets a corrupt copy aside, so the next Get says
      // NotFound), and the reader should report the real cause.
      // The first error is the cause; a later fetch's may only be its consequence.
      if (unclaimed_errors_.size() >= kMaxUnclaimedErrors) unclaimed_errors_.clear();
      auto [it, fresh] = unclaimed_errors_.try_emplace(flight->id, result.error(), Clock::now());
      if (!fresh && Clock::now() - it->second.when >= kUnclaimedErrorTtl) {
        it->second = {result.error(), Clock::now()};
      }
    }
  }
  flight->result = std::move(result);
  flight->done = true;
  if (auto it = inflight_.find(flight->id); it != inflight_.end() && it->second == flight) {
    inflight_.erase(it);
  }
  flight->cv.notify_all();
}

void ChunkCache::Worker(bool prefetch) {
  // A blob of unknown length (a chunk index) counts this much towards a batch's bytes.
  constexpr uint64_t kUnknownBytes = 64 << 10;
  for (;;) {
    std::vector<std::shared_ptr<Flight>> batch;
    bool demand = false;
    uint64_t bytes = 0;
    {
      std::unique_lock lock(mu_);
      auto prefetch_room = [&] {
        return options_.prefetch_inflight_bytes == 0 ||
               prefetch_inflight_ < options_.prefetch_inflight_bytes;
      };
      work_cv_.wait(lock, [&] {
        return stopping_ || !demand_queue_.empty() ||
               (prefetch && !prefetch_queue_.empty() && prefetch_room());
      });
      if (stopping_) return;
      // Demand first: a background thread free for work takes a waiting reader's chunks before
      // any prefetch.
      demand = !demand_queue_.empty();
      auto& queue = demand ? demand_queue_ : prefetch_queue_;
      const uint64_t max_bytes =
          demand ? std::min(options_.max_batch_bytes, options_.max_demand_batch_bytes)
                 : options_.max_batch_bytes;
      const size_t max_chunks =
          store_.PrefersBatches() ? std::max<size_t>(1, options_.max_batch_chunks) : 1;
      while (!queue.empty() && batch.size() < max_chunks) {
        Flight& next = *queue.front();
        uint64_t size = next.size_bytes > 0 ? next.size_bytes : kUnknownBytes;
        if (!batch.empty() && bytes + size > max_bytes) break;
        std::shared_ptr<Flight> flight = std::move(queue.front());
        queue.pop_front();
        if (flight->started) continue;
        flight->started = true;
        bytes += size;
        batch.push_back(std::move(flight));
      }
      if (batch.empty()) continue;
      if (!demand) prefetch_inflight_ += bytes;
    }
    RunBatch(batch);
    if (!demand) {
      std::lock_guard lock(mu_);
      prefetch_inflight_ -= bytes;
      work_cv_.notify_all();
    }
  }
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

std::shared_ptr<ChunkCache::Flight> ChunkCache::DemandLocked(const Digest& id,
                                                             AccessPattern pattern, bool keep,
                                                             uint32_t size_bytes) {
  if (auto it = inflight_.find(id); it != inflight_.end()) {
    std::shared_ptr<Flight> flight = it->second;
    flight->keep = flight->keep || keep;
    if (!flight->started && !flight->demand) {
      auto pos = std::find(prefetch_queue_.begin(), prefetch_queue_.end(), flight);
      if (pos != prefetch_queue_.end()) prefetch_queue_.erase(pos);
      flight->demand = true;
      demand_queue_.push_back(flight);
      ++stats_.promoted;
      work_cv_.notify_all();
    }
    return flight;
  }
  auto flight = std::make_shared<Flight>();
  flight->id = id;
  flight->pattern = pattern;
  flight->demand = true;
  flight->keep = keep;
  flight->size_bytes = size_bytes;
  inflight_.emplace(id, flight);
  demand_queue_.push_back(flight);
  work_cv_.notify_all();
  return flight;
}

Result<ChunkBytes> ChunkCache::GetImpl(const Digest& id, AccessPattern pattern, bool keep,
                                       uint32_t size_bytes, Clock::time_point deadline,
                                       std::stop_token stop) {
  auto backoff = options_.retry_backoff;
  auto cancelled = [&] {
    return Err(UnavailableError("chunk " + id.ToString() + ": the wait was cancelled"));
  };
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) return Err(UnavailableError("chunk cache: shutting down"));
    if (ChunkBytes bytes = HitLocked(id, pattern)) return bytes;
    if (stop.stop_requested()) return cancelled();
    // A reader just gave up on this chunk at its deadline: the kernel retries a failed read
    // (readahead, then the read itself), and each retry must not wait a whole deadline again.
    if (auto it = gave_up_.find(id); it != gave_up_.end()) {
      if (Clock::now() - it->second.when < kGaveUpMemory) {
        deadline = std::min(deadline, Clock::now() + kRetryAfterGiveUp);
      } else {
        gave_up_.erase(it);
      }
    }
    std::optional<Status> unclaimed = TakeUnclaimedErrorLocked(id);
    Result<ChunkBytes> result = Err(unclaimed.value_or(Status()));
    if (!unclaimed) {
      bool existed = inflight_.contains(id);
      std::shared_ptr<Flight> flight = DemandLocked(id, pattern, keep, size_bytes);
      if (existed) ++stats_.joined;
      ++flight->waiters;
      bool ended =
          flight->cv.wait_until(lock, stop, deadline, [&] { return flight->done || stopping_; });
      --flight->waiters;
      if (!ended && stop.stop_requested()) return cancelled();
      if (!ended) {
        ++stats_.timeouts;
        Status late = DeadlineExceededError("chunk " + id.ToString() +
                                            ": not fetched within the read deadline");
        RememberGaveUpLocked(id, late);
        return Err(late);
      }
      if (!flight->done) continue;  // stopping
      result = flight->result;
    }
    if (result || !IsTransient(result.error())) return result;
    if (Clock::now() + backoff >= deadline) {
      RememberGaveUpLocked(id, result.error());
      return result;
    }
    ++stats_.retries;
    stop_cv_.wait_for(lock, stop, backoff, [&] { return stopping_; });
    if (stop.stop_requested()) return cancelled();
    backoff = std::min(backoff * 2, options_.retry_max_backoff);
  }
}

std::optional<Status> ChunkCache::TakeUnclaimedErrorLocked(const Digest& id) {
  auto it = unclaimed_errors_.find(id);
  if (it == unclaimed_errors_.end()) return std::nullopt;
  std::optional<Status> status;
  if (Clock::now() - it->second.when < kUnclaimedErrorTtl) status = std::move(it->second.status);
  unclaimed_errors_.erase(it);
  return status;
}

Result<ChunkBytes> ChunkCache::Get(const ChunkRef& ref, AccessPattern pattern,
                                   Clock::time_point deadline, std::stop_token stop) {
  return CheckSize(
      ref, GetImpl(ref.id, pattern, /*keep=*/true, ref.size_bytes, deadline, std::move(stop)));
}

Result<ChunkBytes> ChunkCache::GetBlob(const Digest& id, Clock::time_point deadline,
                                       std::stop_token stop) {
  return GetImpl(id, AccessPattern::kRandom, /*keep=*/false, /*size_bytes=*/0, deadline,
                 std::move(stop));
}

void ChunkCache::Withdraw(std::span<const ChunkRef> refs) {
  std::lock_guard lock(mu_);
  for (const ChunkRef& ref : refs) {
    auto it = inflight_.find(ref.id);
    if (it == inflight_.end()) continue;
    const std::shared_ptr<Flight>& flight = it->second;
    if (flight->started || !flight->demand || flight->waiters > 0) continue;
    auto pos = std::find(demand_queue_.begin(), demand_queue_.end(), flight);
    if (pos != demand_queue_.end()) demand_queue_.erase(pos);
    inflight_.erase(it);
  }
}

ChunkBytes ChunkCache::Peek(const ChunkRef& ref, AccessPattern pattern) {
  std::lock_guard lock(mu_);
  ChunkBytes bytes = HitLocked(ref.id, pattern);
  return bytes && bytes->size() == ref.size_bytes ? bytes : nullptr;
}

void ChunkCache::Request(std::span<const ChunkRef> refs, AccessPattern pattern) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  for (const ChunkRef& ref : refs) {
    if (!index_.contains(ref.id)) DemandLocked(ref.id, pattern, /*keep=*/true, ref.size_bytes);
  }
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
  auto evict_back = [this](NodeList& list) {
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

void ChunkCache::Prefetch(std::span<const ChunkRef> refs) {
  if (options_.prefetch_threads <= 0 || refs.empty()) return;
  bool queued_any = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (const ChunkRef& ref : refs) {
      // A chunk whose error awaits its reader is not fetched again before it is read.
      if (index_.contains(ref.id) || inflight_.contains(ref.id)) continue;
      if (auto it = unclaimed_errors_.find(ref.id);
          it != unclaimed_errors_.end() && Clock::now() - it->second.when < kUnclaimedErrorTtl) {
        continue;
      }
      if (prefetch_queue_.size() >= options_.max_queued_prefetches) {
        ++stats_.prefetch_dropped;
        continue;
      }
      auto flight = std::make_shared<Flight>();
      flight->id = ref.id;
      flight->pattern = AccessPattern::kSequential;
      flight->size_bytes = ref.size_bytes;
      inflight_.emplace(ref.id, flight);
      prefetch_queue_.push_back(std::move(flight));
      ++stats_.prefetch_queued;
      queued_any = true;
    }
  }
  if (queued_any) work_cv_.notify_all();
}

bool ChunkCache::Contains(const Digest& id) const {
  std::lock_guard lock(mu_);
  return index_.contains(id);
}

ChunkCacheStats ChunkCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace bdn
