// ClusterChunkStore: reads chunks through the in-cluster cache tier (`bdn cache serve` nodes),
// falling back to the upstream store (the origin) when a node fails; writes go to the upstream.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/store/chunk_store.h"

namespace bdn::remote {

struct ClusterOptions {
  std::chrono::milliseconds node_connect_timeout{1000};
  // A node that has not answered a read within this is skipped (and marked unhealthy); for a
  // batch read, one that sent no byte for this long (libcurl notices up to ~5 s later).
  std::chrono::milliseconds node_deadline{10000};
  // An unhealthy node is left alone this long, then re-probed with GET /healthz.
  std::chrono::milliseconds probe_interval{5000};
  std::chrono::milliseconds probe_deadline{1000};
  // The time of the health bookkeeping (when an unhealthy node is probed again). Null:
  // Clock::Real().
  std::shared_ptr<Clock> clock;
};

// Splits a node list as --cluster-cache and BDN_CLUSTER_CACHE give it: "URL,URL,..." (blanks
// around items and empty items are dropped).
std::vector<std::string> ParseNodeList(std::string_view list);

// Which node serves a chunk: rendezvous (highest random weight) hashing, Thaler & Ravishankar,
// "Using name-based mappings to increase hit rates", 1998. A node's weight for a chunk is
// splitmix64(seed(node) XOR the first 8 bytes of the chunk id), seed(node) = the first 8 bytes
// of BLAKE3(node URL); the owner has the highest weight. Chunk ids are uniform, so chunks spread
// evenly; every client with the same node list picks the same owner whatever the list's order;
// adding or removing one node of n moves only ~1/n of the chunks.
//
// Get goes to the highest-weight node that is healthy (normally the owner; when the owner is
// down, the node that would own the chunk without it), once; if that node is down, slower than
// node_deadline, answers an error, or returns bytes that do not match the id, it is marked
// unhealthy and the chunk is read from the upstream. A NotFound from a node also falls through
// to the upstream (without marking the node). An unhealthy node gets no reads until
// probe_interval has passed; then the first read that would pick it probes GET /healthz (one
// thread at a time; the others skip the node meanwhile) and uses it again if the probe answers
// 200. Contains, FindMissing, Sizes, Put and Sync go straight to the upstream.
//
// No credentials are sent to cache nodes (they use their own towards the origin).
// Thread-safe; keeps no threads of its own (safe to use in a forked mount daemon).
class ClusterChunkStore : public ChunkStore {
 public:
  // Errors: InvalidArgument for an empty or malformed node URL.
  static Result<std::unique_ptr<ClusterChunkStore>> Create(
      const std::vector<std::string>& node_urls, std::shared_ptr<ChunkStore> upstream,
      ClusterOptions options = {});

  Result<bool> Contains(const Digest& id) override { return upstream_->Contains(id); }
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override {
    return upstream_->FindMissing(ids);
  }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return upstream_->Sizes(ids); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return upstream_->Put(id, data);
  }
  Status Sync() override { return upstream_->Sync(); }

  // The verified bytes of `id` from its node or else the upstream. Errors: the upstream's
  // (NotFound, Corruption, Unavailable, ...); a node's failure alone is never an error.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;

  // Many chunks at once: one POST /v1/chunks/batch per chosen node (the nodes in parallel),
  // then the upstream's GetMany for what the nodes did not deliver.
  // Result in request order; nullopt where the upstream lacks a chunk too.
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  bool PrefersBatches() const override { return true; }

  // Node indexes ordered by weight for `id`, highest (the owner) first. A pure function of the
  // URLs and the id.
  static std::vector<size_t> Rank(std::span<const std::string> node_urls, const Digest& id);
  // The index of the owner of `id` (healthy or not): Rank(urls, id)[0]. Needs node_count() > 0.
  size_t OwnerOf(const Digest& id) const;
  bool IsHealthy(size_t node) const;
  size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    std::string url;
    uint64_t seed = 0;
    std::unique_ptr<RemoteChunkStore> store;
    std::atomic<int64_t> unhealthy_until_ns{0};  // 0: healthy; else options_.clock's steady ns
    std::atomic<bool> probing{false};
  };

  ClusterChunkStore(std::shared_ptr<ChunkStore> upstream, ClusterOptions options)
      : upstream_(std::move(upstream)), options_(options) {}
  // The node a read of `id` goes to, or -1 for none (all unhealthy). May probe one node.
  int Choose(const Digest& id);
  bool Usable(Node& n);
  void MarkUnhealthy(Node& n);

  std::shared_ptr<ChunkStore> upstream_;
  ClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint64_t> seeds_;  // nodes_[i]->seed
};

}  // namespace bdn::remote
