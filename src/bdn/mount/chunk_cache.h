// ChunkCache: a bounded in-memory LRU of verified chunks in front of a ChunkStore, with one
// shared fetch per missing chunk and a small background pool for prefetching. The mount reads
// every chunk through it; later network tiers sit behind the same ChunkStore interface.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// A chunk's verified bytes, shared between the cache and its readers; never modified.
using ChunkBytes = std::shared_ptr<const std::vector<uint8_t>>;

// How a chunk is being read, which decides where it is kept (see ChunkCache).
enum class AccessPattern {
  kRandom,      // kept in the LRU
  kSequential,  // part of a stream (or a prefetch): kept in the smaller streaming FIFO
};

// Counters since construction, for tests and diagnostics.
struct ChunkCacheStats {
  uint64_t hits = 0;              // Get answered from memory
  uint64_t joined = 0;            // Get waited on a fetch another caller had started
  uint64_t fetches = 0;           // ChunkStore::Get calls (demand and prefetch)
  uint64_t fetch_errors = 0;      // of which failed
  uint64_t fetched_bytes = 0;     // bytes returned by successful fetches
  uint64_t prefetch_queued = 0;   // chunks accepted by Prefetch
  uint64_t prefetch_dropped = 0;  // chunks Prefetch refused because its queue was full
  uint64_t cached_bytes = 0;      // bytes held now (both segments)
  uint64_t cached_chunks = 0;     // chunks held now (both segments)
  uint64_t streaming_bytes = 0;   // of cached_bytes, in the streaming FIFO
};

// Holds up to `capacity_bytes` of chunks in two segments. Chunks read as part of a sequential
// stream (and prefetches) enter a FIFO of at most `streaming_bytes`; others enter an LRU, and a
// random-access hit on a streamed chunk moves it there. Eviction takes the streaming FIFO first.
// So one pass over a large file neither flushes the chunks that random readers reuse nor grows
// the daemon past the streaming window: the kernel page cache already keeps what was streamed,
// and recycling a bounded set of buffers is much cheaper than touching fresh memory.
//
// Only successful, verified fetches are cached; errors are returned to every waiter of that
// fetch and forgotten, so a later Get tries the store again.
//
// Thread-safe. No lock is held while the store is called, and a prefetch never delays a demand
// Get beyond sharing a fetch that is already running for the same chunk.
class ChunkCache {
 public:
  struct Options {
    uint64_t capacity_bytes = 256ull << 20;
    // Bound of the streaming FIFO (within capacity_bytes); 0 = capacity_bytes / 4.
    uint64_t streaming_bytes = 0;
    // Background threads serving Prefetch; 0 disables prefetching (Prefetch does nothing).
    int prefetch_threads = 2;
    // Chunks waiting for a prefetch thread; beyond this, Prefetch drops the newest requests.
    size_t max_queued_prefetches = 1024;
  };

  // `store` must outlive the cache.
  ChunkCache(ChunkStore& store, Options options);
  // Drops queued prefetches and waits for the running ones to finish.
  ~ChunkCache();
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Returns the bytes of chunk `ref`: from memory, or by joining a fetch already in flight for
  // `ref.id`, or by fetching it from the store (which verifies it against `ref.id`).
  // Errors: those of ChunkStore::Get (NotFound, Corruption "chunk b3:…: digest mismatch …",
  // Unavailable, Internal); Corruption "chunk b3:…: N bytes, the index says M" if the verified
  // blob's length differs from `ref.size_bytes`. Bad bytes are never returned or cached.
  // `pattern` only decides where a newly fetched chunk is kept (see the class comment).
  Result<ChunkBytes> Get(const ChunkRef& ref, AccessPattern pattern = AccessPattern::kRandom);

  // Queues background fetches of those `refs` that are neither cached, in flight nor queued,
  // in order, as AccessPattern::kSequential. Never blocks on I/O; drops what does not fit in
  // the queue. Errors are not reported (the demand Get that needs the chunk will see them).
  void Prefetch(std::span<const ChunkRef> refs);

  // True if `id` is held in memory now (does not touch the LRU order).
  bool Contains(const Digest& id) const;

  ChunkCacheStats stats() const;

 private:
  using Fetch = std::shared_future<Result<ChunkBytes>>;
  struct Node {
    Digest id;
    ChunkBytes bytes;
    bool streaming = false;  // in streaming_ rather than lru_
  };
  using NodeList = std::list<Node>;

  Result<ChunkBytes> FetchFromStore(const ChunkRef& ref);
  void InsertLocked(const Digest& id, ChunkBytes bytes, AccessPattern pattern);
  void EvictLocked();
  void PrefetchWorker();

  ChunkStore& store_;
  const Options options_;

  mutable std::mutex mu_;
  uint64_t streaming_limit_bytes_;
  NodeList lru_;        // most recently used first
  NodeList streaming_;  // newest first
  std::unordered_map<Digest, NodeList::iterator> index_;
  std::unordered_map<Digest, Fetch> inflight_;
  std::deque<ChunkRef> queue_;
  std::unordered_set<Digest> queued_;
  std::condition_variable queue_cv_;
  bool stopping_ = false;
  ChunkCacheStats stats_;

  std::vector<std::thread> workers_;
};

}  // namespace bdn
