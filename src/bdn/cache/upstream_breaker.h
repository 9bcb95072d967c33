// UpstreamBreaker: a circuit breaker in front of a cache node's upstream, so that an origin that
// hangs costs the node one fetch's stall, not one per chunk it lacks. From an attacker with a
// stopped (SIGSTOP) origin: a batch holding chunks the node lacked waited ~30 s on the group,
// then 60 s on each such chunk asked alone, and the chunks the node held in that batch waited
// behind them, past every caller's patience.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bdn/base/circuit_breaker.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// A ChunkStore that forwards everything to `upstream` (ForwardingChunkStore), except that Get
// and GetMany go through `breaker` (base/circuit_breaker.h), which a failed read opens: one the
// upstream did not answer (DeadlineExceeded; Unavailable other than a shutdown: a refused or reset
// connection, or 429/502/503/504 after the retries); any other outcome (bytes, NotFound,
// Corruption, a refusal, a 500) is an answer and closes it. While it is open, reads fail at once
// with its Unavailable "<name> failed a read <N>s ago (<that read's error>); not asked again for
// <M>s". The callers (a cache node's batch answers, docs/http-api.md "Chunks") answer such chunks
// missing and go on with the ones the node holds; their own callers ask the origin directly.
// Thread-safe; starts no threads.
class UpstreamBreaker : public ForwardingChunkStore {
 public:
  UpstreamBreaker(std::shared_ptr<ChunkStore> upstream, std::shared_ptr<CircuitBreaker> breaker)
      : ForwardingChunkStore(std::move(upstream)), breaker_(std::move(breaker)) {}

  // The upstream's Get and GetMany, or the breaker's Unavailable while it is open.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;

  // Whether reads fail at once now (CircuitBreaker::IsOpen).
  bool IsOpen() const { return breaker_->IsOpen(); }

 private:
  std::shared_ptr<CircuitBreaker> breaker_;
};

}  // namespace bdn
