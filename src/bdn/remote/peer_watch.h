// PeerWatch: a cache node's view of its --peers, the cache nodes of its cluster that it reads
// chunks from by rendezvous hashing (a ClusterChunkStore over the same URLs), so that the cluster
// fetches each chunk from the origin once whichever node a client asks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/http/client.h"
#include "bdn/remote/cluster_chunk_store.h"

namespace bdn::remote {

// The header fields of a cache node's GET /healthz answer that its peers read.
inline constexpr const char* kNodeIdHeader = "Bdn-Node";  // its id, "cache-<12 hex>"
inline constexpr const char* kPeersHeader = "Bdn-Peers";  // PeerListDigest of its --peers

// The digest of a --peers list: the first 16 hex digits of BLAKE3 over its URLs, each without
// trailing '/', sorted, joined with '\n'. Two nodes with the same digest rank every chunk's nodes
// alike (ClusterChunkStore::Rank depends only on the URLs).
std::string PeerListDigest(std::vector<std::string> urls);

// Probes each URL of `store` (GET /healthz, 1 s) and sets its ClusterChunkStore::Role: kSelf for
// the URL whose answer names this node's id, kNode for one whose answer carries this node's
// PeerListDigest, kOff for one that does not answer or has another list (its ranking differs,
// so reads could go round in a circle). Until one URL is found to be this node, every node stays
// kOff and every chunk goes to the upstream: a node that cannot tell itself apart would read from
// itself. With every node on the same list, a read goes from node to node only towards nodes that
// rank higher for its chunk, so it ends at the first node that ranks itself highest among those
// it can use, which reads the upstream. Changes are logged (info for a usable peer, warning
// for one set off, with the reason), each once per change. Thread-safe.
class PeerWatch {
 public:
  // `store` must outlive this; it should start with every node off (nodes_start_off).
  PeerWatch(ClusterChunkStore* store, std::string node_id, std::string digest);

  // One round of probes (about 1 s at most per URL that does not answer; in sequence).
  void ProbeAll() EXCLUDES(mu_);

 private:
  enum class Seen { kUnknown, kSelf, kPeer, kOtherList, kNoAnswer };
  ClusterChunkStore* const store_;
  const std::string node_id_;
  const std::string digest_;
  std::vector<std::shared_ptr<http::HttpClient>> clients_;
  Mutex mu_;
  std::vector<Seen> seen_ GUARDED_BY(mu_);
  bool warned_no_self_ GUARDED_BY(mu_) = false;
};

}  // namespace bdn::remote
