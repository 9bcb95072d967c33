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
  // A node that has not answered a read within this (for a batch read: sent no byte for this
  // long; libcurl notices up to ~5 s later) is asked whether it is alive (GET /healthz, which a
  // node answers on its I/O thread even while every worker waits on the origin). Alive, the read
  // is sent to it again: its fetch from the origin is still under way and the retry joins it.
  // Not alive, it is marked unhealthy and the next node by weight is asked.
  // 3 s, not 10: from an operator, a stopped (SIGSTOP) node that owned a version's manifest
  // added 10-19 s to every new replica's mount and first read; a node that is only slow answers
  // /healthz and is waited for all the same (slow_node_patience).
  std::chrono::milliseconds node_deadline{3000};
  // How long in all a read waits on a node that is alive but slow, before it marks the node
  // unhealthy and asks the next one. Halved for each strike the node has (failures since its last
  // read that succeeded): from an attacker, a node that answers /healthz but sends nothing was
  // waited for this whole time again each time its back-off ended (40 small files: 572 s).
  std::chrono::milliseconds slow_node_patience{60000};
  // How long after a read began it may still start asking a node (another one after a failure,
  // a probe, a new GetMany round); past it the rest goes to the upstream. The attempt under way
  // then ends within node_deadline (a batch's stall: up to ~1 s more). 0: no bound. The mount
  // sets it so that the origin keeps half of --read-timeout whatever the nodes do (from an
  // attacker: a node answering /healthz but not reads, with --read-timeout 5s, made reads fail
  // with EIO: the node had 2.5 s, but its first stall alone took 3 s and more).
  std::chrono::milliseconds node_budget{0};
  // The longest a node's batch may take in all, however its bytes move (0: RemoteStoreOptions'
  // default, 10 min). The mount sets it to half of node_budget, at least node_deadline (from an
  // attacker: a node that sent its answer a byte every 0.5 s never stalled, and held every read
  // to its deadline: EIO; at half of --read-timeout it outlasted the budget, and the next node
  // was never asked).
  std::chrono::milliseconds node_batch_deadline{0};
  // A node's batch that moves some bytes, but fewer per second than this over node_deadline,
  // drips: the node is skipped for the next by weight at once, not waited for as a node that
  // sends nothing while its fetch from the origin is under way is (from an attacker: a node
  // dripping 128 B/s held each read for the nodes' whole budget). Low, so that an honest node
  // whose origin link is slow is never taken for one (from an attacker: at 64 KiB/s, three nodes
  // behind a 120 KiB/s origin link were bypassed and the origin sent the file 2.2 times).
  uint64_t node_min_bytes_per_second = 1024;
  // An unhealthy node is left alone this long, then re-probed with GET /healthz; twice as long
  // after each further failure without a read that succeeded in between (up to 64x).
  std::chrono::milliseconds probe_interval{5000};
  std::chrono::milliseconds probe_deadline{1000};
  // How many nodes one read may find failing (a Get's nodes in turn, a GetMany's rounds) before
  // it goes to the upstream, however long the list: each may cost node_deadline.
  int max_failed_nodes_per_read = 2;
  // Sent to every node as the caller's credentials ("Authorization: Bearer <token>"; empty:
  // none) and as the Bdn-Version of every read (RemoteStoreOptions::read_version): a node checks
  // with the origin that the caller may read that version before it answers.
  std::string token;
  std::string read_version;
  // The time of the health bookkeeping (when an unhealthy node is probed again). Null:
  // Clock::Real().
  std::shared_ptr<Clock> clock;

  // The options of a reader whose every read must end within `read_timeout` (a mount's
  // --read-timeout): the nodes get at most half of it, so the origin still has the other half
  // (with the default 60 s, a node that answered /healthz but never the read made every read
  // fail with EIO at the mount's 55 s). node_deadline is a fifth of it, 1 to 3 s (from an
  // attacker: with --read-timeout 5s one stall of 3 s outlasted the node's 2.5 s); node_budget is
  // the half less the attempt that may be under way when it ends (node_deadline and 1 s), and
  // the patience with a node that is slow but alive (its fetch from the origin under way: asking
  // another node would fetch the chunks from the origin again); node_batch_deadline is half the
  // budget (node_deadline at least), and a dripping node (node_min_bytes_per_second) is skipped
  // at once, so the next node by weight is still asked in time. 55 s gives 3 s, 23.5 s, 23.5 s
  // and 11.75 s.
  static ClusterOptions ForReadTimeout(std::chrono::milliseconds read_timeout);
};

// Splits a node list as --cluster-cache and BDN_CLUSTER_CACHE give it: "URL,URL,..." (blanks
// around items and empty items are dropped).
std::vector<std::string> ParseNodeList(std::string_view list);

// Chunks in a row a cache node may lack (or refuse) that the upstream has before reads leave it
// alone as unhealthy (ClusterChunkStore).
inline constexpr int kLackedInARow = 32;

// The most URLs a cache node's --peers (and so its GET /v1/peers answer) may hold.
inline constexpr size_t kMaxPeers = 256;

// The cache nodes a client given `given` reads from: the first of them (in order) that answers
// GET /v1/peers within `deadline` with {"peers": [URL, ...]} (its --peers: 1 to kMaxPeers http or
// https URLs, at most 64 KiB) gives them all, so that every client, whichever node it was
// given, ranks every chunk over the same list and the cluster fetches each chunk from the origin
// once (`bdn cache serve --peers`). A node without --peers answers an empty list, which is
// passed over, as are nodes that do not answer, answer another status, or something malformed
// (or, from a node reached over https, a list with an http URL);
// when none gives a list, `given` as it is. A list is given as HttpClient spells its URLs, each
// once. `*note`, if given, says what was used (for a log):
// "cache nodes from the --peers of http://a:8441: 3" or "" when `given` stands. Never fails.
std::vector<std::string> DiscoverPeers(const std::vector<std::string>& given,
                                       std::chrono::milliseconds deadline,
                                       std::string* note = nullptr);

// Which node serves a chunk: rendezvous (highest random weight) hashing, Thaler & Ravishankar,
// "Using name-based mappings to increase hit rates", 1998. A node's weight for a chunk is
// splitmix64(seed(node) XOR the first 8 bytes of the chunk id), seed(node) = the first 8 bytes
// of BLAKE3(node URL); the owner has the highest weight. Chunk ids are uniform, so chunks spread
// evenly; every client with the same node list picks the same owner whatever the list's order;
// adding or removing one node of n moves only ~1/n of the chunks.
//
// A read goes to the highest-weight node that is healthy (normally the owner), so that every
// client sends each chunk to the same node and the cluster fetches it from the origin once. A
// node that fails (refuses connections, answers 5xx, sends bytes that do not match the id, or is
// slow and no longer answers /healthz) is marked unhealthy and the read goes to the next node by
// weight (the node that would own the chunk without it: every client picks the same one), and
// to the upstream only when no node is left; a node that is slow but alive is waited for (see
// ClusterOptions::node_deadline), never bypassed, since a bypass fetches the chunk from the
// origin a second time. A node's NotFound or refusal (PermissionDenied, InvalidArgument) goes to
// the upstream without marking the node, as does a chunk a batch answer lists as missing, unless
// the node has delivered none of the last kLackedInARow chunks it was asked for that the upstream
// then had: a node whose --upstream is another origin (or whose key may not read these versions)
// lacks them all, and each client fetching them from the origin itself multiplies the origin's
// egress (from an attacking helper: 2.6x over 6 mounts); it is marked unhealthy, so the
// chunks it owns go to the next node by weight, which fetches each once. An
// unhealthy node gets no reads until probe_interval has passed; then the first read that would
// pick it probes GET /healthz (one thread at a time; the others skip the node meanwhile) and uses
// it again if the probe answers 200. Contains, FindMissing, Sizes, Put, PutMany and Sync go
// straight to the upstream.
//
// The caller's token and version go to the nodes (options.token, options.read_version), which
// check them with the origin (docs/http-api.md, "Chunks"); a node's refusal (PermissionDenied,
// NotFound) does not mark it unhealthy, and the upstream gives the authoritative answer.
// Thread-safe; keeps no threads of its own (safe to use in a forked mount daemon).
class ClusterChunkStore : public ForwardingChunkStore {
 public:
  // A node named twice, in any spelling HttpClient makes one URL of, is one node. Errors:
  // InvalidArgument for an empty or malformed node URL.
  static Result<std::unique_ptr<ClusterChunkStore>> Create(
      const std::vector<std::string>& node_urls, std::shared_ptr<ChunkStore> upstream,
      ClusterOptions options = {});

  // The verified bytes of `id` from its node or else the upstream. Errors: the upstream's
  // (NotFound, Corruption, Unavailable, ...); a node's failure alone is never an error.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;

  // Many chunks at once: one POST /v1/chunks/batch per chosen node (the nodes in parallel); the
  // chunks of a node that failed go to the next node by weight, in another round; then the
  // upstream's GetMany for what the nodes did not deliver.
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
  // Ends every request to the nodes, running or later (HttpClient::Shutdown): for a mount whose
  // session is over. The upstream is the caller's to end. A read the shutdown ends goes to the
  // upstream without marking its node unhealthy (nor logging it as one).
  void ShutdownNodeClients();

 private:
  struct Node {
    std::string url;
    uint64_t seed = 0;
    std::unique_ptr<RemoteChunkStore> store;
    std::atomic<int64_t> unhealthy_until_ns{0};  // 0: healthy; else options_.clock's steady ns
    std::atomic<bool> probing{false};
    // Times it was marked unhealthy since its last read that succeeded: each doubles how long it
    // is left alone (probe_interval, 2x, 4x ... 64x), as /healthz alone does not prove that a
    // node which stalled reads will deliver the next one.
    std::atomic<int> strikes{0};
    // Chunks in a row it lacked or refused and the upstream then had, since it last delivered
    // one (see kLackedInARow).
    std::atomic<int> lacked{0};
  };

  // Set by ShutdownNodeClients: the nodes' failures from then on are this store's own doing.
  std::atomic<bool> shut_down_{false};

  ClusterChunkStore(std::shared_ptr<ChunkStore> upstream, ClusterOptions options)
      : ForwardingChunkStore(std::move(upstream)), options_(options) {}
  // The node a read of `id` goes to, or -1 for none (all unhealthy, `failed` in this call, or
  // the read's `failures` reached max_failed_nodes_per_read). Probes the nodes whose back-off
  // ran out, in rank order, until one answers; a probe that fails marks its node `failed` and
  // counts in `failures`, as a failed read does. From an attacker: a /v1/peers list of 255
  // addresses that accept and never answer had every read probe them one after another, 1 s
  // each (the reads failed with EIO).
  int Choose(const Digest& id, std::vector<uint8_t>& failed, int& failures);
  enum class Use { kYes, kResting, kProbeFailed };
  Use Usable(Node& n);
  void MarkUnhealthy(Node& n, const Status& why);
  // Whether `n` answers GET /healthz within probe_deadline.
  bool Alive(Node& n);
  // What a node's failed read means for it.
  enum class Verdict {
    kRefused,  // the node's answer stands for the cluster's: ask the upstream, node stays healthy
    kRetry,    // slow but alive: ask it again
    kFailed,   // marked unhealthy: ask the next node
  };
  // `began`: when the read began (its patience with `n` counts from there).
  Verdict Judge(Node& n, const Status& error, SteadyTime began);
  // Whether options_.node_budget has passed since `began` (never, for 0).
  bool BudgetSpent(SteadyTime began) const;
  // `count` more chunks `n` lacked (or refused) in a row: at kLackedInARow the node is marked
  // unhealthy, as one that fails is, and true is returned. Counted once the upstream delivered
  // them, or, for a batch's part that reaches the bound by itself, at once (those chunks then go
  // to the next node by weight).
  bool NoteLacked(Node& n, int count);

  ClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint64_t> seeds_;  // nodes_[i]->seed
};

}  // namespace bdn::remote
