#include "bdn/mount/chunk_cache.h"

#include <algorithm>
#include <exception>
#include <string>

namespace bdn {

ChunkCache::ChunkCache(ChunkStore& store, Options options)
    : store_(store),
      options_(options),
      streaming_limit_bytes_(std::min(options.capacity_bytes, options.streaming_bytes > 0
                                                                  ? options.streaming_bytes
                                                                  : options.capacity_bytes / 4)) {
  for (int i = 0; i < options_.prefetch_threads; ++i) {
    workers_.emplace_back([this] { PrefetchWorker(); });
  }
}

ChunkCache::~ChunkCache() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
    queued_.clear();
  }
  queue_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// A chunk id fixes its bytes, so a ref whose length disagrees comes from a bad chunk index; its
// caller would otherwise index past the buffer.
Result<ChunkBytes> CheckSize(const ChunkRef& ref, Result<ChunkBytes> bytes) {
  if (bytes && (*bytes)->size() != ref.size_bytes) {
    return Err(CorruptionError("chunk " + ref.id.ToString() + ": " +
                               std::to_string((*bytes)->size()) + " bytes, the index says " +
                               std::to_string(ref.size_bytes)));
  }
  return bytes;
}
}  // namespace

Result<ChunkBytes> ChunkCache::FetchFromStore(const ChunkRef& ref) {
  // Anything thrown here (bad_alloc) must still complete the shared fetch, or waiters hang.
  try {
    auto bytes = store_.Get(ref.id);
    if (!bytes) return Err(bytes.error());
    return std::make_shared<const std::vector<uint8_t>>(std::move(*bytes));
  } catch (const std::exception& e) {
    return Err(InternalError("chunk " + ref.id.ToString() + ": " + e.what()));
  }
}

Result<ChunkBytes> ChunkCache::Get(const ChunkRef& ref, AccessPattern pattern) {
  std::shared_ptr<std::promise<Result<ChunkBytes>>> promise;
  Fetch fetch;
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(ref.id); it != index_.end()) {
      Node& node = *it->second;
      if (!node.streaming) {
        lru_.splice(lru_.begin(), lru_, it->second);
      } else if (pattern == AccessPattern::kRandom) {
        node.streaming = false;
        stats_.streaming_bytes -= node.bytes->size();
        lru_.splice(lru_.begin(), streaming_, it->second);
      }
      ++stats_.hits;
      return CheckSize(ref, node.bytes);
    }
    if (auto it = inflight_.find(ref.id); it != inflight_.end()) {
      fetch = it->second;
      ++stats_.joined;
    } else {
      promise = std::make_shared<std::promise<Result<ChunkBytes>>>();
      fetch = promise->get_future().share();
      inflight_.emplace(ref.id, fetch);
      ++stats_.fetches;
    }
  }
  if (!promise) return CheckSize(ref, fetch.get());

  Result<ChunkBytes> result = FetchFromStore(ref);
  {
    std::lock_guard lock(mu_);
    if (result) {
      stats_.fetched_bytes += (*result)->size();
      InsertLocked(ref.id, *result, pattern);
    } else {
      ++stats_.fetch_errors;
    }
    inflight_.erase(ref.id);
  }
  promise->set_value(result);
  return CheckSize(ref, std::move(result));
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
  if (workers_.empty() || refs.empty()) return;
  bool queued_any = false;
  {
    std::lock_guard lock(mu_);
    for (const ChunkRef& ref : refs) {
      if (index_.contains(ref.id) || inflight_.contains(ref.id) || queued_.contains(ref.id)) {
        continue;
      }
      if (queue_.size() >= options_.max_queued_prefetches) {
        ++stats_.prefetch_dropped;
        continue;
      }
      queue_.push_back(ref);
      queued_.insert(ref.id);
      ++stats_.prefetch_queued;
      queued_any = true;
    }
  }
  if (queued_any) queue_cv_.notify_all();
}

void ChunkCache::PrefetchWorker() {
  for (;;) {
    ChunkRef ref;
    {
      std::unique_lock lock(mu_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      ref = queue_.front();
      queue_.pop_front();
      queued_.erase(ref.id);
    }
    (void)Get(ref, AccessPattern::kSequential);
  }
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
