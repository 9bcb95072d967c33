#include "bdn/store/fetch_core.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

namespace bdn {

bool IsTransient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

namespace {

std::string BatchName(std::span<const Digest> ids) {
  return ids.size() == 1 ? "chunk " + ids[0].ToString()
                         : "chunk batch of " + std::to_string(ids.size());
}

Result<std::vector<uint8_t>> GetAlone(ChunkStore& store, const Digest& id) {
  try {
    return store.Get(id);
  } catch (const std::exception& e) {
    return Err(InternalError("chunk " + id.ToString() + ": " + e.what()));
  }
}

}  // namespace

FetchResults ReadBlobs(ChunkStore& store, std::span<const Digest> ids, BatchFailure on_failure,
                       uint64_t* store_calls) {
  uint64_t ignored = 0;
  uint64_t& calls = store_calls != nullptr ? *store_calls : ignored;
  FetchResults out;
  out.reserve(ids.size());
  if (!store.PrefersBatches()) {
    for (const Digest& id : ids) out.push_back(GetAlone(store, id));
    calls += ids.size();
    return out;
  }
  ++calls;
  Result<BlobBatch> got;
  try {
    got = store.GetMany(ids);
  } catch (const std::exception& e) {
    got = Err(InternalError(BatchName(ids) + ": " + e.what()));
  }
  if (got && got->size() != ids.size()) {
    got = Err(InternalError("chunk batch of " + std::to_string(ids.size()) + ": " +
                            std::to_string(got->size()) + " answers"));
  }
  if (!got) {
    if (on_failure == BatchFailure::kReadEachAloneUnlessTransient && IsTransient(got.error())) {
      for (size_t i = 0; i < ids.size(); ++i) out.push_back(Err(got.error()));
      return out;
    }
    // One bad blob (or a store fault) fails the whole batch: ask again one by one, so that each
    // reader gets its own blob's answer and the good blobs still arrive.
    for (const Digest& id : ids) out.push_back(GetAlone(store, id));
    calls += ids.size();
    return out;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*got)[i]) {
      out.push_back(std::move(*(*got)[i]));
    } else {
      // The batch answer says only "missing"; the store's own answer says why.
      out.push_back(GetAlone(store, ids[i]));
      ++calls;
    }
  }
  return out;
}

// One fetch of one blob, queued or running; its waiters wait on `cv` under FetchCore::mu_.
struct FetchCore::Flight {
  Digest id;
  uint64_t size_bytes = 0;  // 0 if unknown
  uint32_t hints = 0;
  bool demand = false;   // on (or taken from) the demand queue
  bool started = false;  // taken by a thread, or led by a FetchHere caller
  bool led = false;      // led by a FetchHere caller, who gets the result itself
  bool done = false;
  int waiters = 0;  // Fetch/Await/FetchHere calls waiting now
  int holders = 0;  // live Tickets
  // When done: the bytes or the error. The bytes are null for a led flight that nobody else
  // waited for or held (the leader keeps its own, uncopied).
  Result<SharedBytes> result;
  std::condition_variable cv;
};

FetchCore::Ticket::Ticket(FetchCore* core, std::shared_ptr<Flight> flight)
    : core_(core), flight_(std::move(flight)) {}

FetchCore::Ticket::Ticket(Ticket&& other) noexcept
    : core_(std::exchange(other.core_, nullptr)), flight_(std::move(other.flight_)) {}

FetchCore::Ticket& FetchCore::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Reset();
    core_ = std::exchange(other.core_, nullptr);
    flight_ = std::move(other.flight_);
  }
  return *this;
}

FetchCore::Ticket::~Ticket() { Reset(); }

void FetchCore::Ticket::Reset() {
  if (flight_ == nullptr) return;
  {
    MutexLock lock(core_->mu_);
    --flight_->holders;
  }
  flight_.reset();
  core_ = nullptr;
}

FetchCore::FetchCore(BatchFetch fetch, Options options)
    : fetch_(std::move(fetch)), options_(std::move(options)) {
  if (options_.clock == nullptr) std::terminate();  // a contract: never null
  for (int i = 0; i < options_.demand_threads; ++i) {
    threads_.emplace_back([this] { Worker(false); });
  }
  for (int i = 0; i < options_.background_threads; ++i) {
    threads_.emplace_back([this] { Worker(true); });
  }
}

FetchCore::~FetchCore() {
  Shutdown();
  for (auto& t : threads_) t.join();
}

Status FetchCore::ShutdownError() const {
  return UnavailableError(options_.name + ": shutting down");
}

void FetchCore::Shutdown() {
  MutexLock lock(mu_);
  if (stopping_) return;
  stopping_ = true;
  demand_queue_.clear();
  background_queue_.clear();
  for (auto& [id, flight] : flights_) flight->cv.notify_all();
  demand_cv_.notify_all();
  background_cv_.notify_all();
}

FetchCore::Stats FetchCore::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

std::shared_ptr<FetchCore::Flight> FetchCore::DemandLocked(const Item& item, bool* joined) {
  if (auto it = flights_.find(item.id); it != flights_.end()) {
    std::shared_ptr<Flight> flight = it->second;
    flight->hints |= item.hints;
    if (!flight->started && !flight->demand) {
      auto pos = std::find(background_queue_.begin(), background_queue_.end(), flight);
      if (pos != background_queue_.end()) background_queue_.erase(pos);
      flight->demand = true;
      demand_queue_.push_back(flight);
      ++stats_.promoted;
      WakeForDemandLocked();
    }
    if (joined) *joined = true;
    return flight;
  }
  auto flight = std::make_shared<Flight>();
  flight->id = item.id;
  flight->size_bytes = item.size_bytes;
  flight->hints = item.hints;
  flight->demand = true;
  flights_.emplace(item.id, flight);
  demand_queue_.push_back(flight);
  WakeForDemandLocked();
  if (joined) *joined = false;
  return flight;
}

void FetchCore::WakeForDemandLocked() {
  demand_cv_.notify_one();
  background_cv_.notify_one();  // a background thread takes demand work when it is free
}

FetchCore::Answer FetchCore::WaitLocked(std::unique_lock<std::mutex>& lock,
                                        const std::shared_ptr<Flight>& flight, SteadyTime deadline,
                                        const std::stop_token& stop) {
  WaitUntilOrStopped(*options_.clock, flight->cv, lock, deadline, stop,
                     [&]() REQUIRES(mu_) { return flight->done || stopping_; });
  --flight->waiters;
  Answer answer{End::kFetched, flight->result};
  if (flight->done) {
    // kFetched with its result.
  } else if (stopping_) {
    answer = {End::kShutdown, Err(ShutdownError())};
  } else if (stop.stop_requested()) {
    answer = {End::kCancelled,
              Err(UnavailableError("chunk " + flight->id.ToString() + ": the wait was cancelled"))};
  } else {
    ++stats_.timeouts;
    answer = {End::kDeadline, Err(DeadlineExceededError("chunk " + flight->id.ToString() +
                                                        ": not fetched within the read deadline"))};
  }
  return answer;
}

FetchCore::Answer FetchCore::Fetch(const Item& item, SteadyTime deadline, std::stop_token stop) {
  MutexLock lock(mu_);
  if (stopping_) return {End::kShutdown, Err(ShutdownError())};
  if (options_.keeper != nullptr) {
    if (SharedBytes bytes = options_.keeper->Lookup(item.id, item.hints)) {
      return {End::kFetched, std::move(bytes)};
    }
  }
  if (stop.stop_requested()) {
    return {End::kCancelled,
            Err(UnavailableError("chunk " + item.id.ToString() + ": the wait was cancelled"))};
  }
  if (auto it = unclaimed_.find(item.id); it != unclaimed_.end()) {
    std::optional<Status> status;
    if (options_.clock->SteadyNow() - it->second.when < options_.unclaimed_error_ttl) {
      status = std::move(it->second.status);
    }
    unclaimed_.erase(it);
    if (status) return {End::kFetched, Err(std::move(*status))};
  }
  bool joined = false;
  std::shared_ptr<Flight> flight = DemandLocked(item, &joined);
  if (joined) ++stats_.joined;
  ++flight->waiters;
  return WaitLocked(lock.native(), flight, deadline, stop);
}

void FetchCore::Request(std::span<const Item> items) {
  MutexLock lock(mu_);
  if (stopping_) return;
  for (const Item& item : items) {
    if (options_.keeper == nullptr || !options_.keeper->Holds(item.id)) DemandLocked(item, nullptr);
  }
}

std::vector<FetchCore::Ticket> FetchCore::Hold(std::span<const Item> items) {
  std::vector<Ticket> tickets(items.size());
  MutexLock lock(mu_);
  if (stopping_) return tickets;
  for (size_t i = 0; i < items.size(); ++i) {
    if (options_.keeper != nullptr && options_.keeper->Holds(items[i].id)) continue;
    std::shared_ptr<Flight> flight = DemandLocked(items[i], nullptr);
    ++flight->holders;
    tickets[i] = Ticket(this, std::move(flight));
  }
  return tickets;
}

FetchCore::Answer FetchCore::Await(const Ticket& ticket, SteadyTime deadline,
                                   std::stop_token stop) {
  if (!ticket) return {End::kFetched, Err(InternalError("fetch core: await of no flight"))};
  MutexLock lock(mu_);
  ++ticket.flight_->waiters;
  return WaitLocked(lock.native(), ticket.flight_, deadline, stop);
}

void FetchCore::Release(std::vector<Ticket>& tickets) {
  std::vector<std::shared_ptr<Flight>> running;
  {
    MutexLock lock(mu_);
    for (Ticket& ticket : tickets) {
      if (!ticket) continue;
      std::shared_ptr<Flight> flight = std::move(ticket.flight_);
      ticket.core_ = nullptr;
      --flight->holders;
      if (flight->done) continue;
      if (flight->started) {
        running.push_back(std::move(flight));
      } else if (flight->holders == 0 && flight->waiters == 0) {
        auto& queue = flight->demand ? demand_queue_ : background_queue_;
        if (auto pos = std::find(queue.begin(), queue.end(), flight); pos != queue.end()) {
          queue.erase(pos);
        }
        if (auto it = flights_.find(flight->id); it != flights_.end() && it->second == flight) {
          flights_.erase(it);
        }
      }
    }
    for (const auto& flight : running) {
      ++flight->waiters;
      options_.clock->WaitUntil(flight->cv, lock.native(), SteadyTime::max(),
                                [&]() REQUIRES(mu_) { return flight->done || stopping_; });
      --flight->waiters;
    }
  }
  tickets.clear();
}

void FetchCore::Background(std::span<const Item> items) {
  if (options_.background_threads <= 0 || items.empty()) return;
  bool queued_any = false;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    const SteadyTime now = options_.clock->SteadyNow();
    for (const Item& item : items) {
      if (flights_.contains(item.id)) continue;
      if (options_.keeper != nullptr && options_.keeper->Holds(item.id)) continue;
      // A blob whose error awaits its reader is not fetched again before it is read.
      if (auto it = unclaimed_.find(item.id);
          it != unclaimed_.end() && now - it->second.when < options_.unclaimed_error_ttl) {
        continue;
      }
      if (background_queue_.size() >= options_.max_queued_background) {
        ++stats_.background_dropped;
        continue;
      }
      auto flight = std::make_shared<Flight>();
      flight->id = item.id;
      flight->size_bytes = item.size_bytes;
      flight->hints = item.hints;
      flights_.emplace(item.id, flight);
      background_queue_.push_back(std::move(flight));
      ++stats_.background_queued;
      queued_any = true;
    }
  }
  if (queued_any) background_cv_.notify_one();  // it wakes the next if it leaves work behind
}

bool FetchCore::Busy(const Digest& id) const {
  MutexLock lock(mu_);
  return flights_.contains(id);
}

void FetchCore::Withdraw(std::span<const Digest> ids) {
  MutexLock lock(mu_);
  for (const Digest& id : ids) {
    auto it = flights_.find(id);
    if (it == flights_.end()) continue;
    const std::shared_ptr<Flight>& flight = it->second;
    if (flight->started || !flight->demand || flight->waiters > 0 || flight->holders > 0) {
      continue;
    }
    auto pos = std::find(demand_queue_.begin(), demand_queue_.end(), flight);
    if (pos != demand_queue_.end()) demand_queue_.erase(pos);
    flights_.erase(it);
  }
}

void FetchCore::CompleteLocked(const std::shared_ptr<Flight>& flight, Result<SharedBytes> result,
                               uint64_t size_bytes) {
  ++stats_.fetches;
  if (result) {
    stats_.fetched_bytes += size_bytes;
    if (options_.keeper != nullptr && *result != nullptr) {
      options_.keeper->Fetched(flight->id, *result, flight->hints);
    }
  } else {
    ++stats_.fetch_errors;
    if (!flight->led && flight->waiters == 0 && flight->holders == 0 &&
        options_.unclaimed_error_ttl.count() > 0) {
      // Nobody waited for this fetch (a background one, or a Request whose reader has not come
      // yet or gave up). Its error goes to the next reader of the blob, once: a store may not
      // fail the same way twice (LocalChunkStore sets a corrupt copy aside, so its next Get says
      // NotFound), and the reader should report the real cause. The first error is the cause;
      // a later fetch's may only be its consequence.
      const SteadyTime now = options_.clock->SteadyNow();
      if (unclaimed_.size() >= kMaxUnclaimedErrors) unclaimed_.clear();
      auto [it, fresh] = unclaimed_.try_emplace(flight->id, result.error(), now);
      if (!fresh && now - it->second.when >= options_.unclaimed_error_ttl) {
        it->second = {result.error(), now};
      }
    }
  }
  flight->result = std::move(result);
  flight->done = true;
  if (auto it = flights_.find(flight->id); it != flights_.end() && it->second == flight) {
    flights_.erase(it);
  }
  flight->cv.notify_all();
}

FetchResults FetchCore::RunFetch(const BatchFetch& fetch, std::span<const Digest> ids) {
  FetchResults got;
  try {
    got = fetch(ids);
  } catch (const std::exception& e) {
    got.clear();
    Status error = InternalError(BatchName(ids) + ": " + e.what());
    for (size_t i = 0; i < ids.size(); ++i) got.push_back(Err(error));
  }
  if (got.size() != ids.size()) {
    Status error = InternalError(BatchName(ids) + ": " + std::to_string(got.size()) +
                                 " answers to " + std::to_string(ids.size()) + " ids");
    got.clear();
    for (size_t i = 0; i < ids.size(); ++i) got.push_back(Err(error));
  }
  return got;
}

namespace {
Result<SharedBytes> Share(Result<std::vector<uint8_t>> r) {
  if (!r) return Err(r.error());
  return std::make_shared<const std::vector<uint8_t>>(std::move(*r));
}
}  // namespace

void FetchCore::Worker(bool background) {
  for (;;) {
    std::vector<std::shared_ptr<Flight>> batch;
    bool demand = false;
    uint64_t bytes = 0;
    {
      MutexLock lock(mu_);
      auto background_room = [&]() REQUIRES(mu_) {
        return options_.background_inflight_bytes == 0 ||
               background_inflight_ < options_.background_inflight_bytes;
      };
      (background ? background_cv_ : demand_cv_).wait(lock.native(), [&]() REQUIRES(mu_) {
        return stopping_ || !demand_queue_.empty() ||
               (background && !background_queue_.empty() && background_room());
      });
      if (stopping_) return;
      // Demand first: a background thread free for work takes a waiting reader's blobs before
      // any background fetch.
      demand = !demand_queue_.empty();
      auto& queue = demand ? demand_queue_ : background_queue_;
      const uint64_t max_bytes =
          demand && options_.max_demand_batch_bytes > 0
              ? std::min(options_.max_batch_bytes, options_.max_demand_batch_bytes)
              : options_.max_batch_bytes;
      const size_t max_chunks = std::max<size_t>(1, options_.max_batch_chunks);
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
      if (!demand) background_inflight_ += bytes;
      ++stats_.batches;
      // Work left queued behind this batch wakes the next thread.
      if (!demand_queue_.empty()) {
        WakeForDemandLocked();
      } else if (!background_queue_.empty() && background_room()) {
        background_cv_.notify_one();
      }
    }
    std::vector<Digest> ids;
    ids.reserve(batch.size());
    for (const auto& flight : batch) ids.push_back(flight->id);
    FetchResults got = RunFetch(fetch_, ids);
    std::vector<Result<SharedBytes>> shared;
    shared.reserve(got.size());
    for (auto& r : got) shared.push_back(Share(std::move(r)));  // outside the lock: no copy
    MutexLock lock(mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      const uint64_t size = shared[i] ? (*shared[i])->size() : 0;
      CompleteLocked(batch[i], std::move(shared[i]), size);
    }
    if (!demand) {
      background_inflight_ -= bytes;
      background_cv_.notify_one();  // room for another background batch
    }
  }
}

FetchResults FetchCore::FetchHere(std::span<const Digest> ids, const BatchFetch& fetch) {
  FetchResults out(ids.size());
  std::vector<size_t> led_at;
  std::vector<Digest> led_ids;
  std::vector<std::shared_ptr<Flight>> led;
  std::vector<std::pair<size_t, std::shared_ptr<Flight>>> joined;
  {
    MutexLock lock(mu_);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (auto it = flights_.find(ids[k]); it != flights_.end()) {
        ++it->second->waiters;
        ++stats_.joined;
        joined.emplace_back(k, it->second);
        continue;
      }
      auto flight = std::make_shared<Flight>();
      flight->id = ids[k];
      flight->demand = true;
      flight->started = true;
      flight->led = true;
      flights_.emplace(ids[k], flight);
      led_at.push_back(k);
      led_ids.push_back(ids[k]);
      led.push_back(std::move(flight));
    }
    if (!led.empty()) ++stats_.batches;
  }
  if (!led.empty()) {
    FetchResults got = RunFetch(fetch, led_ids);
    MutexLock lock(mu_);
    for (size_t j = 0; j < led.size(); ++j) {
      // Joining happens under mu_ while the flight is listed, so nobody joins after this: the
      // bytes are copied only for those who already did (or hold a ticket, or for the Keeper).
      const Flight& flight = *led[j];
      const bool others = flight.waiters > 0 || flight.holders > 0 || options_.keeper != nullptr;
      Result<SharedBytes> shared = SharedBytes();
      if (!got[j]) {
        shared = Err(got[j].error());
      } else if (others) {
        shared = std::make_shared<const std::vector<uint8_t>>(*got[j]);
      }
      CompleteLocked(led[j], std::move(shared), got[j] ? got[j]->size() : 0);
      out[led_at[j]] = std::move(got[j]);
    }
  }
  for (auto& [k, flight] : joined) {
    MutexLock lock(mu_);
    options_.clock->WaitUntil(flight->cv, lock.native(), SteadyTime::max(),
                              [&]() REQUIRES(mu_) { return flight->done || stopping_; });
    --flight->waiters;
    if (!flight->done) {
      out[k] = Err(ShutdownError());
    } else if (flight->result) {
      out[k] = **flight->result;  // a copy: each caller owns its bytes
    } else {
      out[k] = Err(flight->result.error());
    }
  }
  return out;
}

}  // namespace bdn
