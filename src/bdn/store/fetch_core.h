// FetchCore: the one fetch path of every reader that shares fetches of blobs — the mount's
// ChunkCache, the node cache (NodeCache) and ChunkReader (pull, cat, verify). Concurrent misses
// of one blob share one fetch (single-flight), and fetches queued while the fetch threads were
// busy go out together as bounded batches: one ChunkStore::GetMany per batch to a store that
// prefers batches, so a stream of 64 KiB chunks costs one request per batch rather than one per
// chunk (docs/benchmarks.md, "requests per GiB").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// A blob's verified bytes, shared by everyone who waited for its fetch; never modified.
using SharedBytes = std::shared_ptr<const std::vector<uint8_t>>;

// What one fetch brought, one entry per id asked for, in the order asked: the verified bytes, or
// the error for that blob.
using FetchResults = std::vector<Result<std::vector<uint8_t>>>;

// Fetches `ids` (distinct ids, at least one) and returns exactly ids.size() results in order. It
// may throw: every id then gets Internal naming the exception ("chunk b3:…: …" for one id,
// "chunk batch of N: …" for more). Called without any lock of the FetchCore held.
using BatchFetch = std::function<FetchResults(std::span<const Digest> ids)>;

// What ReadBlobs does when a batch (one GetMany) fails as a whole.
enum class BatchFailure {
  // Every blob is read again alone with Get, so each gets exactly the answer Get gives for it.
  kReadEachAlone,
  // As kReadEachAlone, except that Unavailable and DeadlineExceeded (a tier that is down, a
  // request out of time: a second try of each blob at once would only repeat it) go to every
  // blob of the batch; the caller retries with back-off.
  kReadEachAloneUnlessTransient,
};

// Reads `ids` from `store`: one GetMany if store.PrefersBatches() (also for one id: a remote
// tier answers it with one request either way), else one Get per id. A blob the batch answer
// lacks is asked for alone (Get), whose error says why the store lacks it (a copy found
// corrupt and set aside: reason kSetAsideCorrupt), or brings it if it is there by now; a missing
// blob is rare, and only then costs a request. A batch that fails as a whole (one bad blob
// fails a GetMany, see ChunkStore::GetMany) is handled per `on_failure`; an answer of the wrong
// length is Internal "chunk batch of N: M answers" for each blob. Never throws: an exception
// from the store becomes Internal naming the chunk ("chunk b3:…: what") or the batch. Adds the
// number of store calls made to `*store_calls` if given.
FetchResults ReadBlobs(ChunkStore& store, std::span<const Digest> ids, BatchFailure on_failure,
                       uint64_t* store_calls = nullptr);

// Whether `s` is an error a later try may not repeat (Unavailable, DeadlineExceeded).
bool IsTransient(const Status& s);

namespace internal {
// Wakes the waiters on `cv` when a stop is requested. Taking the lock first means a waiter is
// either before its predicate check (and sees the stop) or already waiting.
struct NotifyOnStop {
  std::mutex* mu;
  std::condition_variable* cv;
  void operator()() const {
    { std::lock_guard lock(*mu); }
    cv->notify_all();
  }
};
}  // namespace internal

// Clock::WaitUntil on `cv` (with `lock` held) that also ends as soon as `stop` is requested:
// returns once pred() holds (true), or at `deadline` or a stop request (pred() then). `lock` is
// released for a moment before and after the wait (to register and unregister the stop
// callback), so what it guards may change then; `pred` is always evaluated with it held (and may
// be marked REQUIRES(the mutex): the analysis, which cannot see `lock` hold it, skips this body).
template <typename Pred>
bool WaitUntilOrStopped(const Clock& clock, std::condition_variable& cv,
                        std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                        const std::stop_token& stop, Pred pred) NO_THREAD_SAFETY_ANALYSIS {
  std::optional<std::stop_callback<internal::NotifyOnStop>> on_stop;
  if (stop.stop_possible()) {
    // Registered without the lock held: a stop already requested runs the callback here.
    lock.unlock();
    on_stop.emplace(stop, internal::NotifyOnStop{lock.mutex(), &cv});
    lock.lock();
  }
  clock.WaitUntil(cv, lock, deadline,
                  [&]() NO_THREAD_SAFETY_ANALYSIS { return pred() || stop.stop_requested(); });
  const bool ok = pred();
  if (on_stop) {
    // Unregistered without the lock held: a callback running now waits for it.
    lock.unlock();
    on_stop.reset();
    lock.lock();
  }
  return ok;
}

// Single-flight fetching with coalescing queues. A fetch ("flight") of a blob is created by the
// first reader that misses it and joined by every reader that misses it while it is queued or
// running; its one result (bytes or error) goes to all of them, and is then forgotten (what the
// owner keeps of it is the Keeper's business: the mount's LRU, the node cache's disk).
//
// Two ways to run fetches:
//  - Queued, on the core's own threads (demand_threads + background_threads > 0): Fetch, Request
//    and Background queue flights, and a thread takes the queued flights one after another, up
//    to max_batch_chunks and max_batch_bytes (by the items' sizes; a blob of unknown size counts
//    kUnknownBytes), as one batch: one call of the BatchFetch given at construction. Demand work
//    goes first: a background thread takes demand flights before background ones, and a demand
//    read of a blob still queued in the background moves it to the demand queue ("promoted").
//    Background threads start no batch while the background batches in flight hold
//    background_inflight_bytes. Readers wait only until their deadline or a stop request; the
//    fetch goes on, so a store that hangs costs the core's threads, never a reader's.
//  - On the caller's thread (FetchHere): the caller fetches the misses nobody is fetching with
//    its own BatchFetch, and waits for the others. A core with no threads uses only this.
//
// Memory: the batches in flight (each bounded as above; max_demand_batch_bytes for a demand
// batch, whose readers wait for all of it), plus what held Tickets keep; at most
// max_queued_background queued background flights. Errors of fetches nobody waited for are kept
// for the next reader of the blob for unclaimed_error_ttl (0: not kept), at most 1024 of them.
//
// Thread-safe. No lock is held while a BatchFetch runs; the Keeper is called under the core's
// lock (so a blob is never both missing from the keeper and without a flight), and must not call
// back into the core.
class FetchCore {
 public:
  // A blob of unknown size (a chunk index) counts this much towards a batch's bytes.
  static constexpr uint64_t kUnknownBytes = 64 << 10;

  // One blob to fetch. `size_bytes`: its length if known, else 0 (only the batch bounds use
  // it). `hints`: the owner's bits, handed back to the Keeper; when a reader joins a flight its
  // hints are ORed into the flight's, so a bit means "someone wants this".
  struct Item {
    Digest id;
    uint64_t size_bytes = 0;
    uint32_t hints = 0;
  };

  // What the owner keeps of fetched blobs. Called under the core's lock; must not block on I/O
  // or call the core.
  class Keeper {
   public:
    virtual ~Keeper() = default;
    // The kept bytes of `id` (a hit, which may reorder the owner's cache per `hints`), or
    // nullptr. Fetch asks before it joins or creates a flight.
    virtual SharedBytes Lookup(const Digest& id, uint32_t hints) = 0;
    // Whether `id` is kept (not a hit). Request and Background skip kept blobs.
    virtual bool Holds(const Digest& id) = 0;
    // A fetch of `id` succeeded with `bytes`; `hints`: the flight's, ORed over its readers.
    virtual void Fetched(const Digest& id, const SharedBytes& bytes, uint32_t hints) = 0;
  };

  struct Options {
    // Names the owner in "<name>: shutting down".
    std::string name = "fetch core";
    // Threads serving the demand queue (Fetch, Request).
    int demand_threads = 0;
    // Threads serving the background queue (Background); they take demand work first. 0: Background
    // queues nothing.
    int background_threads = 0;
    // Bounds of one batch: chunks (1 for a store that does not prefer batches), and bytes by the
    // items' sizes (a batch holds at least one item, however large).
    size_t max_batch_chunks = 1;
    uint64_t max_batch_bytes = 32ull << 20;
    // A demand batch's bound (within max_batch_bytes); 0: max_batch_bytes.
    uint64_t max_demand_batch_bytes = 0;
    // Background threads start no batch while the background batches in flight hold this many
    // bytes; 0: bounded by the threads only.
    uint64_t background_inflight_bytes = 0;
    // Background flights waiting for a thread; beyond this Background drops the newest.
    size_t max_queued_background = 1024;
    // How long the error of a fetch nobody waited for (a background fetch, a Request whose
    // reader has not come) waits for the next reader of the blob; 0: not kept.
    std::chrono::nanoseconds unclaimed_error_ttl{0};
    // The source of deadlines and of the unclaimed errors' age; never null.
    std::shared_ptr<const Clock> clock = Clock::Real();
    // What the owner keeps of fetched blobs; may be null (nothing kept). Must outlive the core.
    Keeper* keeper = nullptr;
  };

  // Counters since construction.
  struct Stats {
    uint64_t joined = 0;              // Fetch found a flight already queued or running
    uint64_t fetches = 0;             // flights completed (blobs fetched, well or not)
    uint64_t batches = 0;             // BatchFetch calls that fetched them
    uint64_t fetch_errors = 0;        // of the fetches, those that failed
    uint64_t fetched_bytes = 0;       // bytes of the successful fetches
    uint64_t background_queued = 0;   // flights Background queued
    uint64_t background_dropped = 0;  // items Background refused: its queue was full
    uint64_t promoted = 0;            // queued background flights a demand moved up
    uint64_t timeouts = 0;            // Fetch/Await calls that ended at their deadline
  };

  // How a wait for a flight ended.
  enum class End {
    kFetched,    // the flight completed: `bytes` is its result (bytes or the fetch's error)
    kDeadline,   // DeadlineExceeded "chunk b3:…: not fetched within the read deadline"
    kCancelled,  // Unavailable "chunk b3:…: the wait was cancelled" (the stop token)
    kShutdown,   // Unavailable "<name>: shutting down"
  };
  struct Answer {
    End end;
    Result<SharedBytes> bytes;
  };

 private:
  struct Flight;

 public:
  // A hold on one flight (Hold): its result stays readable through Await for as long as the
  // ticket lives, and Withdraw leaves the flight alone. Empty for a blob the Keeper holds.
  // Move-only; must not outlive its core.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket();
    explicit operator bool() const { return flight_ != nullptr; }

   private:
    friend class FetchCore;
    Ticket(FetchCore* core, std::shared_ptr<Flight> flight);
    void Reset();
    FetchCore* core_ = nullptr;
    std::shared_ptr<Flight> flight_;
  };

  // `fetch` runs the queued batches (it may be empty for a core without threads). Starts
  // demand_threads + background_threads threads.
  FetchCore(BatchFetch fetch, Options options);
  // Shutdown(), then waits for the running batches to return.
  ~FetchCore();
  FetchCore(const FetchCore&) = delete;
  FetchCore& operator=(const FetchCore&) = delete;

  // Returns `item`'s bytes: the Keeper's (a hit), or a kept unclaimed error of the blob (once),
  // or the result of the flight already queued or running for it (joined; promoted to the
  // demand queue if it was a background one), or of a new flight on the demand queue. Waits
  // until `deadline` (steady time of the core's clock) or until `stop` is requested or the core
  // shuts down; the flight goes on either way (see End for each ending's error). An already
  // requested `stop` returns kCancelled at once unless the Keeper holds the blob.
  Answer Fetch(const Item& item, SteadyTime deadline = SteadyTime::max(),
               std::stop_token stop = {});

  // Queues demand flights of those `items` that the Keeper does not hold and nobody fetches
  // (a queued background flight of one is promoted), all under one lock so that a fetch thread
  // takes them together; the readers come later through Fetch (an error that arrives before
  // them is kept for them as an unclaimed error). Never blocks on I/O; does nothing after
  // Shutdown.
  void Request(std::span<const Item> items);

  // As Request, and returns a ticket per item, in order, through which the caller Awaits the
  // result (empty for a blob the Keeper holds, and for all after Shutdown). Errors of held
  // flights are the holders': they are not kept as unclaimed.
  std::vector<Ticket> Hold(std::span<const Item> items);

  // Waits for `ticket`'s flight as Fetch does (an empty ticket is Internal at once).
  Answer Await(const Ticket& ticket, SteadyTime deadline = SteadyTime::max(),
               std::stop_token stop = {});

  // Gives `tickets` back (they are empty afterwards): their flights that have not started and
  // that nobody else holds or waits for are dropped from the queue; returns once those of them
  // that started have completed, so the bytes they bring are not in flight uncounted.
  void Release(std::vector<Ticket>& tickets);

  // Queues background flights of those `items` that are neither held by the Keeper, in flight,
  // nor waiting with an unclaimed error, in order. Never blocks on I/O; drops what does not fit
  // the queue (Stats::background_dropped). Does nothing without background threads.
  void Background(std::span<const Item> items);

  // Whether a fetch of `id` is queued or running now (its result is coming: a reader that can
  // wait for it should, rather than read the blob a second time).
  bool Busy(const Digest& id) const;

  // Drops the flights of `ids` that are on the demand queue, not started, and that nobody waits
  // for or holds a ticket of: what a reader that gave up had asked for. Running flights go on.
  // A later Fetch or Request queues a dropped blob again. Never blocks on I/O.
  void Withdraw(std::span<const Digest> ids);

  // Fetches `ids` on the calling thread: those nobody is fetching with one call of `fetch` (led
  // by this caller; others that miss them meanwhile join), the others by waiting for their
  // flights (without deadline: in a core without threads every flight is led by a FetchHere
  // caller that is running its fetch). Results in the order of `ids`; a led blob's bytes are
  // this caller's own (copied only for those who joined). After Shutdown, waits end with
  // Unavailable "<name>: shutting down".
  FetchResults FetchHere(std::span<const Digest> ids, const BatchFetch& fetch);

  // Wakes every waiter (kShutdown), drops the queued flights and stops the threads once their
  // running batch returns. Idempotent.
  void Shutdown();

  Stats stats() const;
  const Clock& clock() const { return *options_.clock; }

 private:
  // Under mu_: the flight of `item` (joined) or a new one on the demand queue.
  std::shared_ptr<Flight> DemandLocked(const Item& item, bool* joined) REQUIRES(mu_);
  // Wakes one demand thread and one background thread for a newly queued demand flight.
  void WakeForDemandLocked() REQUIRES(mu_);
  // Waits with mu_ held in `lock` (the caller counted itself in flight->waiters, which this
  // undoes) until the flight is done, `deadline`, `stop` or shutdown.
  Answer WaitLocked(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Flight>& flight,
                    SteadyTime deadline, const std::stop_token& stop) REQUIRES(mu_);
  // Under mu_: records `result` (of `size_bytes` when ok) as the flight's, tells the Keeper,
  // keeps an error nobody waited for, unlists the flight and wakes its waiters.
  void CompleteLocked(const std::shared_ptr<Flight>& flight, Result<SharedBytes> result,
                      uint64_t size_bytes) REQUIRES(mu_);
  // Runs `fetch` over `ids`, turning a throw or a wrong count into errors for every id.
  static FetchResults RunFetch(const BatchFetch& fetch, std::span<const Digest> ids);
  void Worker(bool background);
  Status ShutdownError() const;

  const BatchFetch fetch_;
  const Options options_;

  mutable Mutex mu_;
  std::unordered_map<Digest, std::shared_ptr<Flight>> flights_
      GUARDED_BY(mu_);  // queued or running
  std::deque<std::shared_ptr<Flight>> demand_queue_ GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Flight>> background_queue_ GUARDED_BY(mu_);
  struct UnclaimedError {
    Status status;
    SteadyTime when;
  };
  static constexpr size_t kMaxUnclaimedErrors = 1024;
  std::unordered_map<Digest, UnclaimedError> unclaimed_ GUARDED_BY(mu_);
  // Demand threads wait on demand_cv_, background threads on background_cv_ (they take demand
  // work too). Each queued item wakes one thread of each, and a thread that leaves work queued
  // behind its batch wakes the next: not every thread per item (with 24 threads a 4 KiB random
  // read cost ~140 futex calls).
  std::condition_variable demand_cv_;      // demand work, or stopping
  std::condition_variable background_cv_;  // any work the background threads may take, or stopping
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t background_inflight_ GUARDED_BY(mu_) =
      0;  // bytes of the background batches being fetched
  Stats stats_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace bdn
