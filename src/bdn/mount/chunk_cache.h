// ChunkCache: a bounded in-memory LRU of verified chunks in front of a ChunkStore, with one
// shared fetch per missing chunk (a FetchCore), run on the cache's own threads so that readers
// can give up at a deadline, and a lower-priority background queue for prefetching. The mount
// reads every chunk through it; the network tiers sit behind the same ChunkStore interface.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <unordered_map>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/fetch_core.h"

namespace bdn {

// A chunk's verified bytes, shared between the cache and its readers; never modified.
using ChunkBytes = SharedBytes;

// How a chunk is being read, which decides where it is kept (see ChunkCache).
enum class AccessPattern {
  kRandom,      // kept in the LRU
  kSequential,  // part of a stream (or a prefetch): kept in the smaller streaming FIFO
};

// Counters since construction, for tests and diagnostics.
struct ChunkCacheStats {
  uint64_t hits = 0;              // Get/Peek answered from memory
  uint64_t joined = 0;            // Get waited on a fetch already queued or running
  uint64_t fetches = 0;           // chunks fetched from the store (demand and prefetch)
  uint64_t read_now = 0;          // chunks PeekOrReadNow read from the store on its thread
  uint64_t store_calls = 0;       // ChunkStore::Get and GetMany calls that fetched them
  uint64_t fetch_errors = 0;      // of which failed
  uint64_t fetched_bytes = 0;     // bytes returned by successful fetches
  uint64_t prefetch_queued = 0;   // chunks accepted by Prefetch
  uint64_t prefetch_dropped = 0;  // chunks Prefetch refused because its queue was full
  uint64_t promoted = 0;          // queued prefetches a demand read moved to the demand queue
  uint64_t retries = 0;           // fetches a Get started again after a transient error
  uint64_t timeouts = 0;          // Gets that gave up at their deadline
  uint64_t cached_bytes = 0;      // bytes held now (both segments)
  uint64_t cached_chunks = 0;     // chunks held now (both segments)
  uint64_t streaming_bytes = 0;   // of cached_bytes, in the streaming FIFO
};

// Holds up to `capacity_bytes` of chunks in two segments. Chunks read as part of a sequential
// stream (and prefetches) enter a FIFO of at most `streaming_bytes`; others enter an LRU, and a
// random-access hit on a streamed chunk moves it there (so does a random read that joins the
// fetch of a streamed one). Eviction takes the streaming FIFO first. So one pass over a large
// file neither flushes the chunks that random readers reuse nor grows the daemon past the
// streaming window: the kernel page cache already keeps what was streamed, and recycling a
// bounded set of buffers is much cheaper than touching fresh memory.
//
// Fetching is a FetchCore (store/fetch_core.h): one shared fetch per missing chunk, run on
// `fetch_threads` demand threads and `prefetch_threads` background threads; a background thread
// takes demand work first, and a demand read of a chunk still queued for prefetch moves it to
// the demand queue. A thread takes the chunks queued one after another, up to max_batch_bytes
// and max_batch_chunks, as one batch when the store PrefersBatches (else one chunk per thread):
// one ChunkStore::GetMany call, which a remote tier answers with one request (so a stream of
// 64 KiB chunks costs one request per batch, not per chunk). If the batch fails with anything
// but a transient error, its chunks are fetched one by one, so that each reader gets its own
// chunk's answer (ReadBlobs, BatchFailure::kReadEachAloneUnlessTransient). A reader waits for
// its fetch only until its deadline (the fetch goes on, and its result is cached for the next
// reader), so a store that hangs costs threads of this cache, never the caller. Memory: at most
// capacity_bytes cached, plus the batches in flight: max_demand_batch_bytes per demand thread,
// and prefetch batches up to prefetch_inflight_bytes plus one batch; the prefetch queue holds at
// most max_queued_prefetches chunk ids.
//
// Only successful, verified fetches are cached; an error is returned to every waiter of that
// fetch and forgotten, so a later Get tries the store again (Unavailable and DeadlineExceeded
// are retried within the same Get's deadline, with back-off). The error of a fetch nobody was
// waiting for when it ended (a prefetch, a Request) goes to the next Get of that chunk within
// 10 s, once, so that the reader reports the real cause even from a store whose second answer
// differs. After a Get gave up on a chunk at its deadline, the Gets of that chunk in the next
// 2 s wait at most 1 s (the kernel retries a failed read at once; each retry must not wait a
// whole deadline again), so a read fails within its deadline plus about a second. Deadlines,
// back-off and those memories run on `clock` (a FakeClock in tests).
//
// Thread-safe. No lock is held while the store is called.
class ChunkCache : private FetchCore::Keeper {
 public:
  struct Options {
    uint64_t capacity_bytes = 256ull << 20;
    // Bound of the streaming FIFO (within capacity_bytes); 0 = capacity_bytes / 4.
    uint64_t streaming_bytes = 0;
    // Background threads serving Prefetch; 0 disables prefetching (Prefetch does nothing).
    int prefetch_threads = 2;
    // Chunks waiting for a prefetch thread; beyond this, Prefetch drops the newest requests.
    size_t max_queued_prefetches = 1024;
    // Threads serving demand fetches (Get, Request); at least 1.
    int fetch_threads = 8;
    // Bound of one batch (by the chunk lengths the refs give; a blob of unknown length counts
    // 64 KiB), and of its chunk count (the HTTP API's maximum per batch request).
    uint64_t max_batch_bytes = 32ull << 20;
    size_t max_batch_chunks = 1024;
    // A demand batch's bound (within max_batch_bytes): its readers wait for all of it.
    uint64_t max_demand_batch_bytes = 8ull << 20;
    // Prefetch threads start no batch while the prefetch batches in flight hold this many
    // bytes (by the refs' lengths); 0: bounded by the threads only.
    uint64_t prefetch_inflight_bytes = 0;
    // Back-off before a Get fetches again after Unavailable or DeadlineExceeded; doubles after
    // each try up to retry_max_backoff.
    std::chrono::milliseconds retry_backoff{100};
    std::chrono::milliseconds retry_max_backoff{2000};
    // The time of deadlines, back-off and the memories above; never null.
    std::shared_ptr<const Clock> clock = Clock::Real();
  };

  // `store` must outlive the cache.
  ChunkCache(ChunkStore& store, Options options);
  // Shutdown(), then waits for the running fetches to return from the store.
  ~ChunkCache() override;
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Returns the bytes of chunk `ref`: from memory, or by waiting for a fetch already queued or
  // running for `ref.id`, or by queuing one on the demand threads (the store verifies the bytes
  // against `ref.id`). Gives up at `deadline` (steady time of options.clock).
  // Errors: those of ChunkStore::Get (NotFound, Corruption "chunk b3:…: digest mismatch …",
  // Unavailable, Internal); Corruption "chunk b3:…: is N bytes, the version says M" if the
  // verified blob's length differs from `ref.size_bytes` (CheckChunkLength); DeadlineExceeded
  // "chunk b3:…: not fetched within the read deadline" (with no error from the store yet) at the
  // deadline; Unavailable "chunk cache: shutting down" once Shutdown was called; Unavailable
  // "chunk b3:…: the wait was cancelled" as soon as `stop` is requested (the fetch goes on;
  // Withdraw drops it if it has not started). Bad bytes are never returned or cached. `pattern`
  // only decides where a newly fetched chunk is kept (see the class comment).
  Result<ChunkBytes> Get(const ChunkRef& ref, AccessPattern pattern = AccessPattern::kRandom,
                         SteadyTime deadline = SteadyTime::max(), std::stop_token stop = {});

  // Like Get for a blob of unknown length (a chunk index): no length check, and the fetched
  // bytes are not kept in memory (the caller keeps what it decodes from them).
  Result<ChunkBytes> GetBlob(const Digest& id, SteadyTime deadline = SteadyTime::max(),
                             std::stop_token stop = {});

  // GetBlob of several blobs at once (the pieces of a chunk index): all are queued before any
  // is waited for, so they go out together (one batch to a store that prefers batches), and
  // each result is held for this caller until it takes it. In the order of `ids`. A blob whose
  // fetch failed with a transient error is fetched again alone as GetBlob does (retries until
  // `deadline`). Errors: the first blob's error in order, as GetBlob's.
  Result<std::vector<ChunkBytes>> GetBlobs(std::span<const Digest> ids,
                                           SteadyTime deadline = SteadyTime::max(),
                                           std::stop_token stop = {});

  // The bytes of `ref` if they are in memory now (a hit, as for Get), else nullptr. Never
  // blocks on I/O.
  ChunkBytes Peek(const ChunkRef& ref, AccessPattern pattern = AccessPattern::kRandom);

  // Peek, else the store's ChunkStore::GetNow on this thread (a local store answers from the
  // page cache: read, decompressed and verified here, without the hand-offs to a fetch thread
  // and back) when no fetch of it is under way; the bytes are then cached as a fetch's would
  // be. nullptr when neither answers at once (or the blob is not ref.size_bytes long: Get
  // reports that). Never blocks on a disk or the network.
  ChunkBytes PeekOrReadNow(const ChunkRef& ref, AccessPattern pattern = AccessPattern::kRandom);

  // Queues demand fetches of those `refs` that are neither cached nor being fetched (and moves
  // queued prefetches of them to the demand queue), so that the Gets that follow wait for all
  // of them at once. Never blocks on I/O.
  void Request(std::span<const ChunkRef> refs, AccessPattern pattern = AccessPattern::kRandom);

  // Queues background fetches of those `refs` that are neither cached, in flight nor queued,
  // in order, as AccessPattern::kSequential. Never blocks on I/O; drops what does not fit in
  // the queue. Errors are not reported (the demand Get that needs the chunk will see them).
  // `ref.size_bytes` is not checked here (0 is fine for a blob GetBlob will read).
  void Prefetch(std::span<const ChunkRef> refs);

  // Drops the fetches of those `refs` that are queued on the demand queue, not started, and
  // waited for by no Get: what a reader that gave up (a killed caller's request) had asked for
  // and nobody else waits on. Running fetches go on (their bytes are cached). Never blocks on
  // I/O. A later Get or Request of a dropped chunk queues it again.
  void Withdraw(std::span<const ChunkRef> refs);

  // Wakes every waiting Get (they return Unavailable), drops queued fetches and stops the
  // threads once their running fetch returns. Idempotent; Get/Request/Prefetch do nothing
  // useful afterwards.
  void Shutdown();

  // True if `id` is held in memory now (does not touch the LRU order).
  bool Contains(const Digest& id) const;

  ChunkCacheStats stats() const;

  const Clock& clock() const { return *options_.clock; }

 private:
  struct Node {
    Digest id;
    ChunkBytes bytes;
    bool streaming = false;  // in streaming_ rather than lru_
  };
  using NodeList = std::list<Node>;

  // FetchCore::Item hints.
  static constexpr uint32_t kKeep = 1;    // cache the fetched bytes (GetBlob's are not)
  static constexpr uint32_t kRandom = 2;  // AccessPattern::kRandom (else kSequential)
  static uint32_t Hints(AccessPattern pattern, bool keep);

  // FetchCore::Keeper, called under the core's lock.
  SharedBytes Lookup(const Digest& id, uint32_t hints) override;
  bool Holds(const Digest& id) override;
  void Fetched(const Digest& id, const SharedBytes& bytes, uint32_t hints) override;

  Result<ChunkBytes> GetImpl(const Digest& id, uint64_t size_bytes, uint32_t hints,
                             SteadyTime deadline, std::stop_token stop);
  // Under mu_: the cached bytes of `id` (moved per `pattern`) or nullptr.
  ChunkBytes HitLocked(const Digest& id, AccessPattern pattern) REQUIRES(mu_);
  void InsertLocked(const Digest& id, ChunkBytes bytes, AccessPattern pattern) REQUIRES(mu_);
  void EvictLocked() REQUIRES(mu_);
  void RememberGaveUpLocked(const Digest& id) REQUIRES(mu_);

  ChunkStore& store_;
  const Options options_;

  mutable Mutex mu_;
  uint64_t streaming_limit_bytes_ GUARDED_BY(mu_);
  NodeList lru_ GUARDED_BY(mu_);        // most recently used first
  NodeList streaming_ GUARDED_BY(mu_);  // newest first
  std::unordered_map<Digest, NodeList::iterator> index_ GUARDED_BY(mu_);
  // Chunks a Get gave up on at its deadline (when): for kGaveUpMemory, a Get of one of them
  // waits at most kRetryAfterGiveUp.
  static constexpr size_t kMaxGaveUp = 1024;
  static constexpr auto kGaveUpMemory = std::chrono::seconds(2);
  static constexpr auto kRetryAfterGiveUp = std::chrono::seconds(1);
  std::unordered_map<Digest, SteadyTime> gave_up_ GUARDED_BY(mu_);
  // Shutdown was called (ends back-off waits; the core answers the rest).
  std::condition_variable stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  ChunkCacheStats stats_
      GUARDED_BY(mu_);  // hits, retries and the cached_* fields; the rest is the core's

  // Last: destroyed first, so its threads stop before the state they update goes.
  std::unique_ptr<FetchCore> core_;
};

}  // namespace bdn
