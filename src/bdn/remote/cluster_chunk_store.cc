#include "bdn/remote/cluster_chunk_store.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "bdn/base/log.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"
#include "bdn/http/client.h"  // kShuttingDown

namespace bdn::remote {
namespace {

// `clock`'s steady time in nanoseconds, as Node::unhealthy_until_ns holds it.
int64_t NowNs(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.SteadyNow().time_since_epoch())
      .count();
}

uint64_t First8(const Digest& d) {
  uint64_t v;
  std::memcpy(&v, d.data(), sizeof v);
  return v;
}

// The splitmix64 finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t SeedOf(const std::string& url) { return First8(Digest::Of(url)); }

// Node indexes by descending weight; ties (practically impossible) by index.
std::vector<size_t> RankBySeeds(const std::vector<uint64_t>& seeds, const Digest& id) {
  const uint64_t key = First8(id);
  std::vector<std::pair<uint64_t, size_t>> w(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) w[i] = {Mix(seeds[i] ^ key), i};
  std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<size_t> order(seeds.size());
  for (size_t i = 0; i < w.size(); ++i) order[i] = w[i].second;
  return order;
}

}  // namespace

std::vector<std::string> ParseNodeList(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::vector<std::string> DiscoverPeers(const std::vector<std::string>& given,
                                       std::chrono::milliseconds deadline, std::string* note) {
  if (note) note->clear();
  for (const std::string& url : given) {
    http::ClientOptions co;
    co.base_url = url;
    co.label = "cache node";
    co.connect_timeout = deadline;
    co.deadline = deadline;
    co.max_idle_connections = 0;
    co.max_response_bytes = 64 * 1024;
    auto client = http::HttpClient::Create(co);
    if (!client) continue;
    auto r = (*client)->Send({.path = "/v1/peers"});
    if (!r || r->status != 200) continue;
    auto j = nlohmann::json::parse(r->text(), nullptr, false);
    if (!j.is_object() || !j.contains("peers") || !j["peers"].is_array()) continue;
    const auto& list = j["peers"];
    if (list.empty() || list.size() > kMaxPeers) continue;
    std::vector<std::string> peers;
    for (const auto& p : list) {
      if (!p.is_string()) break;
      auto checked = http::HttpClient::Create({.base_url = p.get<std::string>()});
      if (!checked) break;
      peers.push_back((*checked)->base_url());
    }
    if (peers.size() != list.size()) continue;
    // One spelling per node (an older node, or one a user edited, may list a node twice).
    std::vector<std::string> unique;
    for (std::string& p : peers) {
      if (std::ranges::find(unique, p) == unique.end()) unique.push_back(std::move(p));
    }
    peers = std::move(unique);
    // A node reached over TLS does not send its clients' tokens anywhere in the clear.
    if ((*client)->base_url().starts_with("https://") &&
        std::ranges::any_of(peers,
                            [](const std::string& u) { return !u.starts_with("https://"); })) {
      continue;
    }
    if (note) {
      *note = "cache nodes from the --peers of " + (*client)->base_url() + ": " +
              std::to_string(peers.size());
    }
    return peers;
  }
  return given;
}

ClusterOptions ClusterOptions::ForReadTimeout(std::chrono::milliseconds read_timeout) {
  using std::chrono::milliseconds;
  ClusterOptions co;
  co.node_deadline = std::clamp(read_timeout / 5, milliseconds(1000), co.node_deadline);
  co.node_budget =
      std::max(read_timeout / 2 - co.node_deadline - milliseconds(1000), milliseconds(1));
  co.slow_node_patience = std::min(co.slow_node_patience, co.node_budget);
  co.node_batch_deadline = std::max(co.node_budget / 2, co.node_deadline);
  return co;
}

Result<std::unique_ptr<ClusterChunkStore>> ClusterChunkStore::Create(
    const std::vector<std::string>& node_urls, std::shared_ptr<ChunkStore> upstream,
    ClusterOptions options) {
  if (!options.clock) options.clock = Clock::Real();
  std::unique_ptr<ClusterChunkStore> c(new ClusterChunkStore(std::move(upstream), options));
  for (const auto& url : node_urls) {
    http::ClientOptions co;
    co.base_url = url;
    co.label = "cache node";
    co.token = options.token;
    co.connect_timeout = options.node_connect_timeout;
    co.deadline = options.node_deadline;
    BDN_ASSIGN_OR_RETURN(auto client, http::HttpClient::Create(co));
    // A node named twice ("http://Node:80/" and "http://node", one URL once HttpClient has
    // normalized both) is one node: twice in the hash it would draw twice its share.
    if (std::ranges::any_of(c->nodes_,
                            [&](const auto& n) { return n->url == client->base_url(); })) {
      continue;
    }
    auto n = std::make_unique<Node>();
    n->url = client->base_url();
    n->seed = SeedOf(n->url);
    // One try per node: on failure the upstream is the retry. A batch may take longer than
    // node_deadline to move, but a node that sends nothing for that long is given up.
    RemoteStoreOptions ro{.retry = {.attempts = 1},
                          .batch_stall_timeout = options.node_deadline,
                          .batch_min_bytes_per_second = options.node_min_bytes_per_second,
                          .read_version = options.read_version};
    if (options.node_batch_deadline.count() > 0) ro.batch_deadline = options.node_batch_deadline;
    n->store = std::make_unique<RemoteChunkStore>(
        std::shared_ptr<http::HttpClient>(std::move(client)), std::move(ro));
    c->seeds_.push_back(n->seed);
    c->nodes_.push_back(std::move(n));
  }
  return c;
}

std::vector<size_t> ClusterChunkStore::Rank(std::span<const std::string> node_urls,
                                            const Digest& id) {
  std::vector<uint64_t> seeds;
  for (const auto& u : node_urls) {
    std::string url = u;
    while (!url.empty() && url.back() == '/') url.pop_back();
    seeds.push_back(SeedOf(url));
  }
  return RankBySeeds(seeds, id);
}

size_t ClusterChunkStore::OwnerOf(const Digest& id) const { return RankBySeeds(seeds_, id)[0]; }

bool ClusterChunkStore::IsHealthy(size_t node) const {
  return nodes_[node]->unhealthy_until_ns.load() == 0;
}

void ClusterChunkStore::MarkUnhealthy(Node& n, const Status& why) {
  const int64_t now = NowNs(*options_.clock);
  int64_t current = n.unhealthy_until_ns.load();
  // Reads that were in flight when the node stalled fail together: one failure, one strike, one
  // warning; the others find it already left alone. Only the thread that moves it from healthy
  // (or from a back-off that has run out, its probe failed) counts.
  if (current > now) return;
  const int strikes = std::min(n.strikes.load() + 1, 7);
  const auto left_alone = options_.probe_interval * (int64_t{1} << (strikes - 1));
  const int64_t until = std::max<int64_t>(
      now + std::chrono::duration_cast<std::chrono::nanoseconds>(left_alone).count(), 1);
  if (!n.unhealthy_until_ns.compare_exchange_strong(current, until)) return;
  n.strikes.store(strikes);
  log::Warn("cache node " + n.url + ": not used for " + FormatDuration(left_alone) +
            " (reads go to the next node or the origin): " + why.message());
}

ClusterChunkStore::Use ClusterChunkStore::Usable(Node& n) {
  int64_t until = n.unhealthy_until_ns.load();
  if (until == 0) return Use::kYes;
  if (NowNs(*options_.clock) < until) return Use::kResting;
  bool expected = false;
  if (!n.probing.compare_exchange_strong(expected, true)) return Use::kResting;  // another probes
  auto r = n.store->client().Send({.path = "/healthz",
                                   .connect_timeout = options_.probe_deadline,
                                   .deadline = options_.probe_deadline});
  bool ok = r && r->status == 200;
  if (ok) {
    n.unhealthy_until_ns.store(0);
  } else {
    MarkUnhealthy(
        n, r ? Status(StatusCode::kUnavailable, "GET /healthz: HTTP " + std::to_string(r->status))
             : r.error());
  }
  n.probing.store(false);
  return ok ? Use::kYes : Use::kProbeFailed;
}

int ClusterChunkStore::Choose(const Digest& id, std::vector<uint8_t>& failed, int& failures) {
  if (nodes_.empty()) return -1;
  for (size_t i : RankBySeeds(seeds_, id)) {
    if (failures >= options_.max_failed_nodes_per_read) return -1;
    if (failed[i]) continue;
    switch (Usable(*nodes_[i])) {
      case Use::kYes:
        return static_cast<int>(i);
      case Use::kProbeFailed:
        failed[i] = 1;
        ++failures;
        break;
      case Use::kResting:
        break;
    }
  }
  return -1;
}

bool ClusterChunkStore::Alive(Node& n) {
  auto r = n.store->client().Send({.path = "/healthz",
                                   .connect_timeout = options_.probe_deadline,
                                   .deadline = options_.probe_deadline});
  return r && r->status == 200;
}

ClusterChunkStore::Verdict ClusterChunkStore::Judge(Node& n, const Status& error,
                                                    SteadyTime began) {
  // Ended by ShutdownNodeClients: the node did nothing wrong (a warning that it is "not used
  // for 5s" would blame it for this store's own shutdown).
  if (shut_down_.load() || error.reason() == http::kShuttingDown) return Verdict::kRefused;
  switch (error.code()) {
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied:
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
      return Verdict::kRefused;
    case StatusCode::kDeadlineExceeded:
      // Busy (its fetch from the origin under way) or hung: only a hung node is bypassed. One
      // that sends, but below the floor, is neither: it drips (from an attacker: waited for, it
      // held each read for the nodes' whole budget, and its chunks went to the origin).
      // Patience halves with each strike, so that a node that is alive but hung costs a read
      // the whole of it once, not at every end of its back-off.
      if (!http::IsTooSlow(error) &&
          options_.clock->SteadyNow() <
              began + options_.slow_node_patience / (1 << n.strikes.load()) &&
          Alive(n)) {
        return Verdict::kRetry;
      }
      break;
    default:
      break;
  }
  MarkUnhealthy(n, error);
  return Verdict::kFailed;
}

bool ClusterChunkStore::NoteLacked(Node& n, int count) {
  if (count <= 0 || shut_down_.load()) return false;
  const int lacked = n.lacked.fetch_add(count) + count;
  if (lacked < kLackedInARow) return false;
  MarkUnhealthy(n, Status(StatusCode::kFailedPrecondition,
                          "it lacked the last " + std::to_string(lacked) +
                              " chunks it was asked for, which the origin has (is its --upstream "
                              "this origin, and may its key read these versions?)"));
  return true;
}

bool ClusterChunkStore::BudgetSpent(SteadyTime began) const {
  return options_.node_budget.count() > 0 &&
         options_.clock->SteadyNow() >= began + options_.node_budget;
}

Result<std::vector<uint8_t>> ClusterChunkStore::Get(const Digest& id) {
  const SteadyTime began = options_.clock->SteadyNow();
  std::vector<uint8_t> failed(nodes_.size(), 0);
  int failures = 0;
  Node* refused_by = nullptr;
  for (int i = Choose(id, failed, failures); i >= 0;) {
    Node& n = *nodes_[static_cast<size_t>(i)];
    auto r = n.store->Get(id);  // verified against the id
    if (r) {
      n.strikes.store(0);
      n.lacked.store(0);
      return r;
    }
    Verdict v = Judge(n, r.error(), began);
    if (v == Verdict::kRefused) {
      refused_by = &n;
      break;
    }
    if (v == Verdict::kFailed) {
      failed[static_cast<size_t>(i)] = 1;
      // From an attacker: a node list of 256 hung URLs held a mount's first read for 13 minutes.
      if (++failures >= options_.max_failed_nodes_per_read || BudgetSpent(began)) break;
      i = Choose(id, failed, failures);
    }
  }
  auto r = upstream_->Get(id);
  if (r && refused_by) NoteLacked(*refused_by, 1);
  return r;
}

Result<BlobBatch> ClusterChunkStore::GetMany(std::span<const Digest> ids) {
  const SteadyTime began = options_.clock->SteadyNow();
  BlobBatch out(ids.size());
  std::vector<uint8_t> done(ids.size(), 0);       // not vector<bool>: threads write distinct slots
  std::vector<uint8_t> failed(nodes_.size(), 0);  // nodes that failed in this call
  int failures = 0;  // their number: probes and reads (max_failed_nodes_per_read)
  // Per node, the slots it was asked for and lacked (or refused) that went to the upstream, and
  // whether it delivered any.
  std::vector<std::vector<size_t>> lacked(nodes_.size());
  std::vector<uint8_t> delivered(nodes_.size(), 0);
  std::vector<size_t> pending(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) pending[k] = k;
  // Each round asks every chosen node for its part at once; the part of a node that failed is
  // chosen again (the next node by weight) in the next round, up to max_failed_nodes_per_read
  // rounds; what is left then goes to the upstream.
  for (int round = 0; !pending.empty() && round < options_.max_failed_nodes_per_read &&
                      (round == 0 || !BudgetSpent(began));
       ++round) {
    std::vector<std::vector<size_t>> by_node(nodes_.size());
    for (size_t k : pending) {
      if (int i = Choose(ids[k], failed, failures); i >= 0) {
        by_node[static_cast<size_t>(i)].push_back(k);
      }
    }
    std::vector<size_t> asked;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!by_node[i].empty()) asked.push_back(i);
    }
    if (asked.empty()) break;
    std::vector<std::vector<size_t>> round_lacked(nodes_.size());
    // One thread per node asked (the threads end with the call, so none exist when a mount
    // daemon forks). Each writes only its own node's slots of `out`, `done` and `failed`.
    ParallelFor(asked.size(), asked.size(), [&](size_t a) {
      size_t i = asked[a];
      Node& n = *nodes_[i];
      std::vector<Digest> want;
      for (size_t k : by_node[i]) want.push_back(ids[k]);
      for (;;) {
        auto got = n.store->GetMany(want);
        if (got) {
          n.strikes.store(0);
          for (size_t j = 0; j < by_node[i].size(); ++j) {
            if ((*got)[j]) {
              out[by_node[i][j]] = std::move((*got)[j]);
              done[by_node[i][j]] = 1;
              delivered[i] = 1;
            } else {
              round_lacked[i].push_back(by_node[i][j]);
            }
          }
          return;  // what it lacks goes to the upstream
        }
        Verdict v = Judge(n, got.error(), began);
        if (v == Verdict::kRefused) round_lacked[i] = by_node[i];
        if (v == Verdict::kFailed) failed[i] = 1;
        if (v != Verdict::kRetry) return;
      }
    });
    std::vector<size_t> again;
    for (size_t i : asked) {
      // A node that delivered nothing and lacked (or refused) enough to be left alone is left
      // alone now, and what it lacked goes to the next node by weight, not to the upstream: a
      // batch is often much of a file, its reads all in flight at once (from attacking helper
      // 127: a node of another origin still cost up to a third of the file per mount).
      const int round_count = static_cast<int>(round_lacked[i].size());
      if (!failed[i] && !delivered[i] && round_count > 0 &&
          nodes_[i]->lacked.load() + round_count >= kLackedInARow &&
          NoteLacked(*nodes_[i], round_count)) {
        failed[i] = 1;
        by_node[i] = std::move(round_lacked[i]);
      } else {
        lacked[i].insert(lacked[i].end(), round_lacked[i].begin(), round_lacked[i].end());
      }
      if (failed[i]) {
        ++failures;
        again.insert(again.end(), by_node[i].begin(), by_node[i].end());
      }
    }
    pending = std::move(again);
  }
  std::vector<size_t> rest;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!done[k]) rest.push_back(k);
  }
  if (!rest.empty()) {
    std::vector<Digest> want;
    for (size_t k : rest) want.push_back(ids[k]);
    BDN_ASSIGN_OR_RETURN(BlobBatch got, upstream_->GetMany(want));
    for (size_t j = 0; j < rest.size(); ++j) out[rest[j]] = std::move(got[j]);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (delivered[i]) {
      nodes_[i]->lacked.store(0);
    } else {
      NoteLacked(*nodes_[i], static_cast<int>(std::ranges::count_if(
                                 lacked[i], [&](size_t k) { return out[k].has_value(); })));
    }
  }
  return out;
}

void ClusterChunkStore::ShutdownNodeClients() {
  shut_down_.store(true);
  for (auto& n : nodes_) n->store->client().Shutdown();
}

}  // namespace bdn::remote
