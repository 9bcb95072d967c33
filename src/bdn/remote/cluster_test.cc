// Tests for ClusterChunkStore: rendezvous owner choice, fall-through to the upstream for down,
// slow and lying nodes, and re-probing of unhealthy nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "bdn/remote/cluster_chunk_store.h"
#include "bdn/remote/fake_origin_test_util.h"
#include "bdn/testing/fake_clock.h"

namespace bdn::remote {
namespace {

using namespace std::chrono_literals;
using testing::FakeOrigin;

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

// An upstream that counts reads.
class CountingStore : public MemChunkStore {
 public:
  std::atomic<int> gets{0};
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    return MemChunkStore::Get(id);
  }
};

TEST(ClusterChunkStore, OwnerIsStableAndIndependentOfListOrder) {
  std::vector<std::string> urls = {"http://10.0.0.1:8441", "http://10.0.0.2:8441",
                                   "http://10.0.0.3:8441", "http://10.0.0.4:8441"};
  std::vector<std::string> reversed(urls.rbegin(), urls.rend());
  for (int i = 0; i < 1000; ++i) {
    Digest id = Digest::Of(std::to_string(i));
    auto a = ClusterChunkStore::Rank(urls, id);
    auto b = ClusterChunkStore::Rank(reversed, id);
    ASSERT_EQ(a.size(), 4u);
    EXPECT_EQ(urls[a[0]], reversed[b[0]]) << "owner depends on list order";
    EXPECT_EQ(a, ClusterChunkStore::Rank(urls, id)) << "not deterministic";
  }
  auto store = ClusterChunkStore::Create(urls, std::make_shared<MemChunkStore>());
  ASSERT_TRUE(store.has_value());
  Digest id = Digest::Of(std::string_view("x"));
  EXPECT_EQ((*store)->OwnerOf(id), ClusterChunkStore::Rank(urls, id)[0]);
}

TEST(ClusterChunkStore, OwnersSpreadEvenlyAndRemovingANodeMovesOnlyItsChunks) {
  std::vector<std::string> urls;
  for (int i = 0; i < 5; ++i) urls.push_back("http://cache-" + std::to_string(i) + ":8441");
  std::vector<std::string> four(urls.begin(), urls.begin() + 4);
  std::map<size_t, int> count;
  int moved = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    Digest id = Digest::Of("chunk" + std::to_string(i));
    size_t owner = ClusterChunkStore::Rank(urls, id)[0];
    ++count[owner];
    size_t owner4 = ClusterChunkStore::Rank(four, id)[0];
    if (owner != 4 && owner4 != owner) ++moved;
  }
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_GT(count[k], n / 5 * 0.9) << "node " << k;
    EXPECT_LT(count[k], n / 5 * 1.1) << "node " << k;
  }
  EXPECT_EQ(moved, 0) << "chunks of the remaining nodes changed owner";
}

TEST(ClusterChunkStore, ReadsFromTheOwnerNode) {
  FakeOrigin a, b;
  a.Start();
  b.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto store = ClusterChunkStore::Create({a.url(), b.url()}, upstream);
  ASSERT_TRUE(store.has_value());
  for (int i = 0; i < 40; ++i) {
    auto data = Bytes("chunk " + std::to_string(i));
    Digest id = Digest::Of(data);
    FakeOrigin& owner = (*store)->OwnerOf(id) == 0 ? a : b;
    ASSERT_TRUE(owner.store.Put(id, data).ok());
    auto got = (*store)->Get(id);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, data);
  }
  EXPECT_EQ(upstream->gets, 0);
  EXPECT_GT(a.get_requests, 5);
  EXPECT_GT(b.get_requests, 5);
}

// A node named twice in another spelling is one node: twice in the hash, it would own twice
// its share of the chunks.
TEST(ClusterChunkStore, ANodeNamedTwiceIsOneNode) {
  FakeOrigin a, b;
  a.Start();
  b.Start();
  std::string a_again = a.url() + "/";
  a_again.replace(0, 4, "HTTP");
  auto store =
      ClusterChunkStore::Create({a.url(), b.url(), a_again}, std::make_shared<CountingStore>());
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ((*store)->node_count(), 2u);
}

// A client given one node of a cluster whose nodes were started with --peers reads from all of
// them (bdn cache serve --peers answers GET /v1/peers); anything else keeps the list it was given.
TEST(DiscoverPeers, TakesTheFirstWellFormedListAndOtherwiseKeepsTheGivenOne) {
  testing::TestServer node;
  std::mutex mu;
  std::string body;  // the answer to GET /v1/peers
  int status = 200;
  node.http().Get("/v1/peers", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard l(mu);
    res.status = status;
    res.set_content(body, "application/json");
  });
  node.Start();
  auto answer = [&](int st, std::string b) {
    std::lock_guard l(mu);
    status = st;
    body = std::move(b);
  };
  const std::vector<std::string> given = {node.url()};
  std::string note;
  answer(200, R"({"peers": ["http://a:8441/", "http://b:8441", "https://c"]})");
  EXPECT_EQ(DiscoverPeers(given, 1000ms, &note),
            (std::vector<std::string>{"http://a:8441", "http://b:8441", "https://c"}));
  EXPECT_EQ(note, "cache nodes from the --peers of " + node.url() + ": 3");
  // A dead node first: the next one is asked.
  EXPECT_EQ(DiscoverPeers({"http://127.0.0.1:9", node.url()}, 1000ms).size(), 3u);
  // A node named twice in two spellings is named once.
  answer(200, R"({"peers": ["http://a:8441/", "http://A:8441", "http://b:80", "http://b"]})");
  EXPECT_EQ(DiscoverPeers(given, 1000ms), (std::vector<std::string>{"http://a:8441", "http://b"}));
  for (const auto& [st, b] : std::vector<std::pair<int, std::string>>{
           {200, R"({"peers": []})"},  // a node without --peers
           {404, R"({"error": {}})"},  // an origin, or an older node
           {200, "not json"},
           {200, R"({"peers": "http://a"})"},
           {200, R"({"peers": ["http://a", 7]})"},
           {200, R"({"peers": ["ftp://a"]})"},
           {200, R"([1, 2])"},
           {200, R"({"peers": ["http://a"], "x": ")" + std::string(70000, 'x') + R"("})"}}) {
    answer(st, b);
    EXPECT_EQ(DiscoverPeers(given, 1000ms, &note), given) << b.substr(0, 60);
    EXPECT_EQ(note, "") << b.substr(0, 60);
  }
  std::string many = R"({"peers": [)";
  for (size_t i = 0; i <= kMaxPeers; ++i) {
    many += (i ? "," : "") + std::string("\"http://n") + std::to_string(i) + "\"";
  }
  answer(200, many + "]}");
  EXPECT_EQ(DiscoverPeers(given, 1000ms), given) << "more than kMaxPeers";
}

// From an attacker whose node answered /v1/peers with 256 URLs of one stopped node: a mount's
// first read tried them one after another, 3 s each, for 13 minutes. A read now gives up on the
// nodes after two failures (a Get's nodes in turn, a GetMany's rounds) and reads the upstream.
TEST(ClusterChunkStore, AReadTriesAtMostTwoFailingNodesThenTheUpstream) {
  std::vector<std::unique_ptr<FakeOrigin>> nodes;
  std::vector<std::string> urls;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(std::make_unique<FakeOrigin>());
    nodes.back()->wrong_bytes = true;  // each fails its read (and is marked unhealthy)
    nodes.back()->Start();
    urls.push_back(nodes.back()->url());
  }
  auto upstream = std::make_shared<CountingStore>();
  std::vector<Digest> ids;
  for (int i = 0; i < 2; ++i) {
    auto data = Bytes("many nodes " + std::to_string(i));
    ids.push_back(Digest::Of(data));
    ASSERT_TRUE(upstream->Put(ids.back(), data).ok());
    for (auto& n : nodes) ASSERT_TRUE(n->store.Put(ids.back(), data).ok());
  }
  auto asked = [&] {
    int sum = 0;
    for (auto& n : nodes) sum += n->get_requests + n->batch_requests;
    return sum;
  };
  auto store = ClusterChunkStore::Create(urls, upstream);
  ASSERT_TRUE(store.has_value());
  auto got = (*store)->Get(ids[0]);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(asked(), 2);
  EXPECT_EQ(upstream->gets, 1);
  // A batch on a fresh store (every node healthy again): two rounds of nodes, then the upstream.
  auto again = ClusterChunkStore::Create(urls, upstream);
  ASSERT_TRUE(again.has_value());
  const int before = asked();
  auto many = (*again)->GetMany(std::span<const Digest>(&ids[1], 1));
  ASSERT_TRUE(many.has_value()) << many.error().message();
  ASSERT_TRUE((*many)[0].has_value());
  EXPECT_EQ(asked() - before, 2);
}

// From an attacker: nodes that accept and never answer, listed by a node's /v1/peers, were
// probed (GET /healthz, 1 s each) one after another by every read once their back-off ran out,
// and reads failed with EIO; the probes did not count against max_failed_nodes_per_read. A read
// now counts a failed probe as a failed node: at most two, then the upstream.
TEST(ClusterChunkStore, AReadProbesAtMostTwoNodesWhoseBackOffRanOut) {
  std::vector<std::unique_ptr<FakeOrigin>> nodes;
  std::vector<std::string> urls;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(std::make_unique<FakeOrigin>());
    nodes.back()->wrong_bytes = true;  // each read fails (the node is marked unhealthy)
    nodes.back()->healthy = false;     // and so does each probe
    nodes.back()->Start();
    urls.push_back(nodes.back()->url());
  }
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("probed");
  const Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  for (auto& n : nodes) ASSERT_TRUE(n->store.Put(id, data).ok());
  auto probes = [&] {
    int sum = 0;
    for (auto& n : nodes) sum += n->health_requests;
    return sum;
  };
  for (bool batch : {false, true}) {
    SCOPED_TRACE(batch ? "GetMany" : "Get");
    auto clock = std::make_shared<testutil::FakeClock>();
    auto store =
        ClusterChunkStore::Create(urls, upstream, {.probe_interval = 1000ms, .clock = clock});
    ASSERT_TRUE(store.has_value());
    auto read = [&] {
      if (!batch) return (*store)->Get(id).has_value();
      auto got = (*store)->GetMany(std::span<const Digest>(&id, 1));
      return got.has_value() && (*got)[0].has_value();
    };
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(read());  // two nodes marked unhealthy by each
    for (size_t i = 0; i < nodes.size(); ++i) ASSERT_FALSE((*store)->IsHealthy(i)) << i;
    clock->Advance(1000ms);  // every back-off has run out
    const int before = probes();
    ASSERT_TRUE(read());
    EXPECT_EQ(probes() - before, 2);
  }
}

// From an attacker: with --read-timeout 5s a node answering /healthz but not reads made mount
// reads fail with EIO, since a read went on to the next node whatever time it had left. Past
// node_budget a read asks no further node: here each node takes 50 ms to fail, the budget is
// 20 ms, and the second node is never asked.
TEST(ClusterChunkStore, AReadAsksNoFurtherNodeOnceItsNodeBudgetIsSpent) {
  for (bool batch : {false, true}) {
    SCOPED_TRACE(batch ? "GetMany" : "Get");
    FakeOrigin a, b;
    for (FakeOrigin* n : {&a, &b}) {
      n->delay_ms = 50;
      n->wrong_bytes = true;  // fails the read: the node is marked unhealthy
      n->Start();
    }
    const std::vector<std::string> urls = {a.url(), b.url()};
    auto upstream = std::make_shared<CountingStore>();
    // Chunks that a owns (a batch of one chunk goes as a GET).
    std::vector<Digest> ids;
    std::vector<std::vector<uint8_t>> datas;
    for (int i = 0; ids.size() < (batch ? 4u : 1u); ++i) {
      auto d = Bytes("budget " + std::to_string(i));
      const Digest id = Digest::Of(d);
      if (ClusterChunkStore::Rank(urls, id)[0] != 0) continue;
      for (ChunkStore* s :
           {static_cast<ChunkStore*>(upstream.get()), static_cast<ChunkStore*>(&a.store),
            static_cast<ChunkStore*>(&b.store)}) {
        ASSERT_TRUE(s->Put(id, d).ok());
      }
      ids.push_back(id);
      datas.push_back(d);
    }
    auto store = ClusterChunkStore::Create(urls, upstream, {.node_budget = 20ms});
    ASSERT_TRUE(store.has_value());
    if (batch) {
      auto got = (*store)->GetMany(ids);
      ASSERT_TRUE(got.has_value()) << got.error().message();
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_TRUE((*got)[i].has_value()) << i;
        EXPECT_EQ(*(*got)[i], datas[i]) << i;
      }
    } else {
      auto got = (*store)->Get(ids[0]);
      ASSERT_TRUE(got.has_value()) << got.error().message();
      EXPECT_EQ(*got, datas[0]);
    }
    EXPECT_EQ(a.get_requests + a.batch_requests, 1);
    EXPECT_EQ(b.get_requests + b.batch_requests, 0) << "asked after the budget was spent";
    EXPECT_FALSE((*store)->IsHealthy(0));
    EXPECT_EQ(upstream->gets, static_cast<int>(ids.size()));
  }
}

// From attacking helper 118: a node that sent its batch answer a byte every 0.5 s never
// stalled and held every read to the mount's deadline (EIO). node_batch_deadline bounds a node's
// batch in all: here the node would answer after 2 s, and the batch is given up at 300 ms.
TEST(ClusterChunkStore, ANodesBatchIsGivenUpAtItsDeadlineWhateverItsBytesDo) {
  FakeOrigin a;
  a.delay_ms = 2000;
  a.Start();
  const std::vector<std::string> urls = {a.url()};
  auto upstream = std::make_shared<CountingStore>();
  std::vector<Digest> ids;
  for (int i = 0; i < 3; ++i) {
    auto d = Bytes("slow batch " + std::to_string(i));
    ids.push_back(Digest::Of(d));
    ASSERT_TRUE(upstream->Put(ids.back(), d).ok());
    ASSERT_TRUE(a.store.Put(ids.back(), d).ok());
  }
  auto store = ClusterChunkStore::Create(
      urls, upstream,
      {.node_deadline = 10s, .slow_node_patience = 0ms, .node_batch_deadline = 300ms});
  ASSERT_TRUE(store.has_value());
  const auto start = std::chrono::steady_clock::now();
  auto got = (*store)->GetMany(ids);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.has_value()) << got.error().message();
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_TRUE((*got)[i].has_value()) << i;
  EXPECT_EQ(a.batch_requests, 1);
  EXPECT_EQ(upstream->gets, 3) << "the node's slow answer was waited for";
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_LT(took, 1500ms);
  a.delay_ms = 0;
}

// From attacking helper 119: a node that dripped its batch (or stalled, answering /healthz) held
// each read for the nodes' whole budget, and its chunks went to the origin, never to the good
// node beside it. A node moving bytes below node_min_bytes_per_second is skipped for the next
// node at once, not waited for as a node that sends nothing.
TEST(ClusterChunkStore, ADrippingNodesChunksGoToTheNextNodeWithinTheBudget) {
  FakeOrigin drip, good;
  drip.SetFault([](const httplib::Request& req, httplib::Response& res) {
    if (req.path != "/v1/chunks/batch") return false;
    res.set_chunked_content_provider(
        "application/octet-stream", [](size_t offset, httplib::DataSink& sink) {
          if (offset > 100) return false;  // 20 s: past every bound
          std::this_thread::sleep_for(200ms);
          return sink.write(offset == 0 ? "BDNB" : "x", offset == 0 ? 4 : 1);
        });
    return true;
  });
  drip.Start();
  good.Start();
  const std::vector<std::string> urls = {drip.url(), good.url()};
  auto upstream = std::make_shared<CountingStore>();
  // As ForReadTimeout sizes them, scaled down; a batch deadline far away: only the rate floor
  // ends the drip early.
  const ClusterOptions options{.node_deadline = 500ms,
                               .slow_node_patience = 3000ms,
                               .node_budget = 3000ms,
                               .node_batch_deadline = 60s};
  auto store = ClusterChunkStore::Create(urls, upstream, options);
  ASSERT_TRUE(store.has_value());
  // Chunks the dripping node owns.
  std::vector<Digest> ids;
  for (int i = 0; ids.size() < 4; ++i) {
    auto d = Bytes("drip " + std::to_string(i));
    const Digest id = Digest::Of(d);
    if ((*store)->OwnerOf(id) != 0) continue;
    ids.push_back(id);
    ASSERT_TRUE(upstream->Put(id, d).ok());
    ASSERT_TRUE(good.store.Put(id, d).ok());
  }
  const auto start = std::chrono::steady_clock::now();
  auto got = (*store)->GetMany(ids);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.has_value()) << got.error().message();
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_TRUE((*got)[i].has_value()) << i;
  EXPECT_EQ(upstream->gets, 0) << "the dripping node's chunks went to the origin";
  EXPECT_GE(good.batch_requests, 1);
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_LT(took, options.node_budget);
}

// The mount's sizing (--read-timeout): one node's patience and batch end with the budget not yet
// spent, and the budget leaves the origin half the read's time.
TEST(ClusterOptions, ForReadTimeoutLeavesTheNextNodeAndTheOriginTheirTime) {
  for (auto rt : {5000ms, 10000ms, 55000ms, 120000ms, 600000ms}) {
    SCOPED_TRACE(rt.count());
    const ClusterOptions o = ClusterOptions::ForReadTimeout(rt);
    EXPECT_GE(o.node_deadline, 1000ms);
    EXPECT_LE(o.node_deadline, 3000ms);
    EXPECT_LE(o.node_budget + o.node_deadline + 1000ms, std::max(rt / 2, o.node_deadline + 1001ms));
    // From the default up: a dripping node (noticed within twice node_deadline) is skipped,
    // and a batch given up at its deadline, with time left to ask the next node.
    if (rt >= 55000ms) {
      EXPECT_LT(2 * o.node_deadline, o.node_budget / 2);
      EXPECT_LE(o.node_batch_deadline, o.node_budget / 2);
    }
    EXPECT_LE(o.slow_node_patience, o.node_budget);
  }
  const ClusterOptions d = ClusterOptions::ForReadTimeout(55000ms);
  EXPECT_EQ(d.node_deadline, 3000ms);
  EXPECT_EQ(d.node_budget, 23500ms);
  EXPECT_EQ(d.slow_node_patience, 23500ms);
  EXPECT_EQ(d.node_batch_deadline, 11750ms);
  EXPECT_EQ(d.node_min_bytes_per_second, 1024u);
}

TEST(ClusterChunkStore, DownNodeFallsThroughToUpstreamAndIsReprobedLater) {
  FakeOrigin node;
  node.Start();
  const int port = node.port();
  const std::string url = node.url();
  node.Stop();  // down: connection refused
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("hello");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  auto clock = std::make_shared<testutil::FakeClock>();
  auto store =
      ClusterChunkStore::Create({url}, upstream, {.probe_interval = 1000ms, .clock = clock});
  ASSERT_TRUE(store.has_value());

  auto got = (*store)->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(upstream->gets, 1);
  EXPECT_FALSE((*store)->IsHealthy(0));

  // The node comes back with the chunk; before the back-off it is not asked.
  FakeOrigin back;
  ASSERT_TRUE(back.store.Put(id, data).ok());
  back.Start(port);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(upstream->gets, 2);
  EXPECT_EQ(back.health_requests, 0);
  EXPECT_EQ(back.get_requests, 0);
  clock->Advance(999ms);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(back.health_requests, 0) << "1 ms before the back-off ends";
  EXPECT_EQ(upstream->gets, 3);

  clock->Advance(1ms);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(back.health_requests, 1);
  EXPECT_EQ(back.get_requests, 1);
  EXPECT_EQ(upstream->gets, 3);
  EXPECT_TRUE((*store)->IsHealthy(0));
}

TEST(ClusterChunkStore, FailedProbeKeepsTheNodeOut) {
  FakeOrigin node;
  node.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("x");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  node.SetFault([](const httplib::Request&, httplib::Response& res) {
    testing::SendError(res, InternalError("node: broken"));
    return true;
  });
  node.healthy = false;
  auto clock = std::make_shared<testutil::FakeClock>();
  auto store =
      ClusterChunkStore::Create({node.url()}, upstream, {.probe_interval = 100ms, .clock = clock});
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.get_requests, 1);
  clock->Advance(100ms);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.health_requests, 1);
  EXPECT_EQ(node.get_requests, 1) << "a node failing its probe gets no reads";
  EXPECT_EQ(upstream->gets, 2);
}

TEST(ClusterChunkStore, NodeReturningWrongBytesIsSkipped) {
  FakeOrigin node;
  node.Start();
  node.wrong_bytes = true;
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("the real bytes");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  auto store = ClusterChunkStore::Create({node.url()}, upstream);
  auto got = (*store)->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
  EXPECT_FALSE((*store)->IsHealthy(0));
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.get_requests, 1) << "an unhealthy node is not asked again before the back-off";
  EXPECT_EQ(upstream->gets, 2);
}

// A node that misses its deadline and no longer answers /healthz is hung: skipped.
TEST(ClusterChunkStore, AHungNodeIsSkippedAfterItsDeadline) {
  FakeOrigin node;
  node.Start();
  node.delay_ms = 2000;
  node.healthy = false;
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("slow");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  auto store = ClusterChunkStore::Create({node.url()}, upstream, {.node_deadline = 200ms});
  auto got = (*store)->Get(id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, data);
  // The node would have answered with the right bytes after 2 s: that the read came from the
  // upstream and the node is marked unhealthy shows its deadline ended the wait.
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_EQ(node.health_requests, 1);
  EXPECT_EQ(upstream->gets, 1);
}

// Issue 12 item 5: a node that misses its deadline but answers /healthz is busy (fetching from
// the origin): it is asked again, never bypassed, so the chunk is not fetched from the origin a
// second time. Here its first answer takes 700 ms against a 200 ms deadline.
TEST(ClusterChunkStore, ASlowButAliveNodeIsWaitedForNotBypassed) {
  FakeOrigin node;
  node.Start();
  std::atomic<int> reads{0};
  auto slow_first = [&](const httplib::Request&, httplib::Response&) {
    if (reads++ == 0) std::this_thread::sleep_for(700ms);
    return false;  // then answered as usual
  };
  node.SetFault(slow_first);
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("busy");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  auto store = ClusterChunkStore::Create({node.url()}, upstream, {.node_deadline = 200ms});
  auto got = (*store)->Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_TRUE((*store)->IsHealthy(0));
  EXPECT_EQ(upstream->gets, 0);
  EXPECT_EQ(node.get_requests, 2);
  EXPECT_EQ(node.health_requests, 1);

  // The same for a batch: the node's first answer sends nothing until the read is asked again
  // (a batch stall is noticed after 1 to ~5 s: libcurl's low-speed check), while /healthz
  // answers; the second answer comes at once.
  std::atomic<bool> first_batch{true};
  node.SetFault([&](const httplib::Request& req, httplib::Response&) {
    if (req.path == "/v1/chunks/batch" && first_batch.exchange(false)) {
      const auto until = std::chrono::steady_clock::now() + 30s;
      while (node.batch_requests < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(10ms);
      }
    }
    return false;
  });
  auto stalled = ClusterChunkStore::Create({node.url()}, upstream, {.node_deadline = 1000ms});
  const int health0 = node.health_requests;
  auto batch = (*stalled)->GetMany(std::vector<Digest>{id});
  ASSERT_TRUE(batch.has_value()) << batch.error().ToString();
  EXPECT_EQ((*batch)[0], data);
  EXPECT_EQ(upstream->gets, 0);
  EXPECT_EQ(node.batch_requests, 2);
  EXPECT_EQ(node.health_requests - health0, 1);
  EXPECT_TRUE((*stalled)->IsHealthy(0));

  // Patience has a bound: past slow_node_patience the node is given up for the upstream.
  node.SetFault(slow_first);
  reads = 0;
  auto impatient = ClusterChunkStore::Create({node.url()}, upstream,
                                             {.node_deadline = 200ms, .slow_node_patience = 0ms});
  ASSERT_TRUE((*impatient)->Get(id).has_value());
  EXPECT_EQ(upstream->gets, 1);
  EXPECT_FALSE((*impatient)->IsHealthy(0));
}

// From attacking helper 121: a node that answers /healthz but never sends a read's bytes was
// waited for the whole patience again at each end of its back-off (40 small files: 572 s). Each
// strike halves the patience it gets.
TEST(ClusterChunkStore, AHungButAliveNodeGetsLessPatienceAfterEachFailure) {
  FakeOrigin node;
  node.Start();
  node.delay_ms = 3000;  // past every deadline below; /healthz answers at once
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("hung");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  auto store = ClusterChunkStore::Create(
      {node.url()}, upstream,
      {.node_deadline = 200ms, .slow_node_patience = 2000ms, .probe_interval = 50ms});
  auto timed_read = [&] {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE((*store)->Get(id).has_value());
    return std::chrono::steady_clock::now() - start;
  };
  const auto first = timed_read();  // the whole patience: 2 s
  EXPECT_GE(first, 1900ms);
  std::this_thread::sleep_for(100ms);  // its back-off (50 ms) ends
  const auto second = timed_read();    // 1 s
  EXPECT_LT(second, 1500ms);
  EXPECT_GE(second, 900ms);
  std::this_thread::sleep_for(200ms);
  const auto third = timed_read();  // 0.5 s
  EXPECT_LT(third, 900ms);
  EXPECT_EQ(upstream->gets, 3);
}

// Reads in flight when a node stalls all fail at once: that is one failure of the node, not one
// per read (three concurrent reads left it alone for 5 s, 10 s and 20 s within 35 ms).
TEST(ClusterChunkStore, ConcurrentFailuresOfOneStallCountOnce) {
  FakeOrigin node;
  node.Start();
  node.delay_ms = 2000;  // every read stalls past the deadline
  node.healthy = false;  // and /healthz fails: a hung node
  auto upstream = std::make_shared<CountingStore>();
  std::vector<Digest> ids;
  for (int i = 0; i < 3; ++i) {
    auto data = Bytes("stalled " + std::to_string(i));
    ids.push_back(Digest::Of(data));
    ASSERT_TRUE(upstream->Put(ids.back(), data).ok());
  }
  auto store = ClusterChunkStore::Create(
      {node.url()}, upstream,
      {.node_deadline = 300ms, .slow_node_patience = 0ms, .probe_interval = 1000ms});
  ASSERT_TRUE(store.has_value());
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> readers;
  for (const Digest& id : ids) {
    readers.emplace_back([&store, id] { EXPECT_TRUE((*store)->Get(id).has_value()); });
  }
  for (auto& t : readers) t.join();
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(upstream->gets, 3);
  EXPECT_FALSE((*store)->IsHealthy(0));
  size_t warnings = 0;
  for (size_t at = 0; (at = logged.find("not used for", at)) != std::string::npos; ++at) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << logged;
  EXPECT_NE(logged.find("not used for 1s"), std::string::npos) << logged;
}

// A node that answers /healthz but stalls every read passed each probe and got cold reads again
// every 5 s, each failing at the mount's read deadline: now every failure without a read that
// succeeded in between doubles how long it is left alone.
TEST(ClusterChunkStore, ANodeThatPassesProbesButFailsReadsIsLeftAloneLongerEachTime) {
  FakeOrigin node;
  node.Start();
  node.delay_ms = 2000;  // past the deadline below; /healthz still answers at once
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("stalled");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  auto clock = std::make_shared<testutil::FakeClock>();
  auto store = ClusterChunkStore::Create(
      {node.url()}, upstream,
      {.node_deadline = 200ms, .slow_node_patience = 0ms, .probe_interval = 100ms, .clock = clock});
  ASSERT_TRUE((*store)->Get(id).has_value());  // strike 1: left alone 100 ms
  EXPECT_EQ(node.get_requests, 1);
  clock->Advance(100ms);
  ASSERT_TRUE((*store)->Get(id).has_value());  // probed, asked, stalls: strike 2, 200 ms
  EXPECT_EQ(node.get_requests, 2);
  const int probes = node.health_requests;
  clock->Advance(100ms);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.health_requests, probes) << "probed again after 100 ms of its 200";
  EXPECT_EQ(node.get_requests, 2);
  clock->Advance(100ms);
  node.delay_ms = 0;  // delivers again: a read that succeeds clears the strikes
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.get_requests, 3);
  EXPECT_TRUE((*store)->IsHealthy(0));
  EXPECT_EQ(upstream->gets, 3);
  node.delay_ms = 2000;
  ASSERT_TRUE((*store)->Get(id).has_value());  // strike 1 again: 100 ms
  clock->Advance(100ms);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_EQ(node.get_requests, 5);
}

TEST(ClusterChunkStore, DownOwnerHandsItsChunksToTheNextNode) {
  FakeOrigin a, b;
  a.Start();
  b.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto store = ClusterChunkStore::Create({a.url(), b.url()}, upstream);
  // A chunk owned by a; a is down.
  Digest id;
  std::vector<uint8_t> data;
  for (int i = 0;; ++i) {
    data = Bytes("c" + std::to_string(i));
    id = Digest::Of(data);
    if ((*store)->OwnerOf(id) == 0) break;
  }
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(b.store.Put(id, data).ok());
  a.Stop();
  // a refuses the connection: marked unhealthy, and b (the next by weight) answers at once: the
  // upstream is not asked (every client picks b, so the cluster fetches the chunk once).
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_EQ(b.get_requests, 1);
  EXPECT_EQ(upstream->gets, 0);
  ASSERT_TRUE((*store)->Get(id).has_value());  // b again, a not tried before its back-off
  EXPECT_EQ(b.get_requests, 2);
  EXPECT_EQ(upstream->gets, 0);

  // A batch: the down node's part goes to b in a second round, nothing to the upstream.
  FakeOrigin c;
  c.Start();
  const std::string down = c.url();
  c.Stop();
  auto fresh = ClusterChunkStore::Create({down, b.url()}, upstream);
  std::vector<Digest> ids;
  int owned_by_down = 0;
  for (int i = 0; owned_by_down < 3; ++i) {
    auto bytes = Bytes("batch" + std::to_string(i));
    ids.push_back(Digest::Of(bytes));
    ASSERT_TRUE(b.store.Put(ids.back(), bytes).ok());
    if ((*fresh)->OwnerOf(ids.back()) == 0) ++owned_by_down;
  }
  auto got = (*fresh)->GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_TRUE((*got)[k].has_value()) << k;
    EXPECT_EQ(Digest::Of(*(*got)[k]), ids[k]);
  }
  EXPECT_FALSE((*fresh)->IsHealthy(0));
  EXPECT_EQ(upstream->gets, 0);
}

TEST(ClusterChunkStore, MissingOnNodeFallsThroughWithoutMarkingIt) {
  FakeOrigin node;
  node.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("only upstream");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  auto store = ClusterChunkStore::Create({node.url()}, upstream);
  ASSERT_TRUE((*store)->Get(id).has_value());
  EXPECT_TRUE((*store)->IsHealthy(0));
  auto missing = (*store)->Get(Digest::Of(std::string_view("nowhere")));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
}

// From an attacking helper: a node whose --upstream is another origin answers 404 for every chunk,
// and every client then fetched that node's chunks from the origin itself (egress 2.6x over 6
// mounts). After kLackedInARow chunks in a row that it lacked and the upstream had, it is left
// alone and its chunks go to the next node by weight; one it delivers resets the count.
TEST(ClusterChunkStore, ANodeThatLacksWhatTheOriginHasIsLeftAlone) {
  FakeOrigin a, b;
  a.Start();
  b.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto store = ClusterChunkStore::Create({a.url(), b.url()}, upstream);
  ASSERT_TRUE(store.has_value());
  std::vector<std::pair<Digest, std::vector<uint8_t>>> owned_by_a;
  for (int i = 0; owned_by_a.size() < 2 * kLackedInARow + 8; ++i) {
    auto data = Bytes("chunk " + std::to_string(i));
    Digest id = Digest::Of(data);
    if ((*store)->OwnerOf(id) != 0) continue;
    ASSERT_TRUE(upstream->Put(id, data).ok());
    ASSERT_TRUE(b.store.Put(id, data).ok());  // b's upstream is the origin: it has them
    owned_by_a.emplace_back(id, data);
  }
  // One a delivers resets its count.
  ASSERT_TRUE(
      a.store.Put(owned_by_a[kLackedInARow - 2].first, owned_by_a[kLackedInARow - 2].second).ok());
  ::testing::internal::CaptureStderr();
  for (const auto& [id, data] : owned_by_a) {
    auto got = (*store)->Get(id);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, data);
  }
  const std::string logged = ::testing::internal::GetCapturedStderr();
  // kLackedInARow - 2 lacked, one delivered, then kLackedInARow lacked: left alone.
  EXPECT_EQ(a.get_requests, 2 * kLackedInARow - 1);
  EXPECT_EQ(upstream->gets, 2 * kLackedInARow - 2);
  EXPECT_EQ(b.get_requests, 9) << "the chunks after a was left alone";
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_TRUE((*store)->IsHealthy(1));
  EXPECT_NE(logged.find("cache node " + a.url() +
                        ": not used for 5s (reads go to the next node or "
                        "the origin): it lacked the last 32 chunks it was asked for, which the "
                        "origin has (is its --upstream this origin, and may its key read these "
                        "versions?)"),
            std::string::npos)
      << logged;
}

// The same in batches: a node that delivers none of a batch the upstream has all of is left
// alone after it; one that delivers some of it is not.
TEST(ClusterChunkStore, ANodeThatLacksABatchTheOriginHasIsLeftAlone) {
  FakeOrigin a;
  a.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto store = ClusterChunkStore::Create({a.url()}, upstream);
  ASSERT_TRUE(store.has_value());
  std::vector<Digest> ids;
  for (int i = 0; i < 2 * kLackedInARow; ++i) {
    auto data = Bytes("b" + std::to_string(i));
    ids.push_back(Digest::Of(data));
    ASSERT_TRUE(upstream->Put(ids.back(), data).ok());
    if (i == 0) {
      ASSERT_TRUE(a.store.Put(ids.back(), data).ok());
    }
  }
  ::testing::internal::CaptureStderr();
  auto got = (*store)->GetMany(ids);  // a delivers one
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE((*store)->IsHealthy(0));
  got = (*store)->GetMany(std::span(ids).subspan(1));  // a delivers none
  ASSERT_TRUE(got.has_value()) << got.error().message();
  for (const auto& chunk : *got) EXPECT_TRUE(chunk.has_value());
  EXPECT_FALSE((*store)->IsHealthy(0));
  got = (*store)->GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(a.batch_requests, 2) << "asked again while left alone";
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(logged.find("it lacked the last " + std::to_string(2 * kLackedInARow - 1) + " chunks"),
            std::string::npos)
      << logged;
}

// From attacking helper 127: a batch is often much of a file, all in flight at once, and the part
// of a node that lacked it all went to the upstream before the node was left alone (a third of
// the file per mount). A part that reaches the bound by itself goes to the next node by weight.
TEST(ClusterChunkStore, ABatchANodeLacksGoesToTheNextNodeNotTheUpstream) {
  FakeOrigin a, b, origin;
  a.Start();
  b.Start();
  origin.Start();
  auto upstream_client = http::HttpClient::Create({.base_url = origin.url()});
  auto upstream = std::make_shared<RemoteChunkStore>(
      std::shared_ptr<http::HttpClient>(std::move(*upstream_client)));
  auto store = ClusterChunkStore::Create({a.url(), b.url()}, upstream);
  ASSERT_TRUE(store.has_value());
  std::vector<Digest> ids;
  std::vector<std::optional<std::vector<uint8_t>>> want;
  for (int i = 0; i < 4 * kLackedInARow; ++i) {
    auto data = Bytes("c" + std::to_string(i));
    ids.push_back(Digest::Of(data));
    want.emplace_back(data);
    ASSERT_TRUE(origin.store.Put(ids.back(), data).ok());
    ASSERT_TRUE(b.store.Put(ids.back(), data).ok());  // b's upstream is the origin
  }
  ::testing::internal::CaptureStderr();
  auto got = (*store)->GetMany(ids);
  const std::string logged = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_FALSE((*store)->IsHealthy(0));
  EXPECT_EQ(a.batch_requests, 1);
  EXPECT_EQ(b.batch_requests, 2) << "its own part, then a's";
  EXPECT_EQ(origin.batch_requests, 0) << "a's part went to the origin";
  EXPECT_NE(logged.find("it lacked the last"), std::string::npos) << logged;
}

// A mount whose session is over ends its node reads (ShutdownNodeClients): the read in flight and
// the ones after it go to the upstream, and the node is neither marked unhealthy nor logged as
// "not used for" (it did nothing wrong).
TEST(ClusterChunkStore, ShutdownEndsNodeReadsWithoutBlamingTheNode) {
  FakeOrigin node;
  node.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto data = Bytes("slow");
  Digest id = Digest::Of(data);
  ASSERT_TRUE(upstream->Put(id, data).ok());
  ASSERT_TRUE(node.store.Put(id, data).ok());
  node.delay_ms = 3000;
  auto store = ClusterChunkStore::Create({node.url()}, upstream,
                                         {.node_deadline = 10s, .slow_node_patience = 10s});
  ASSERT_TRUE(store.has_value());
  ::testing::internal::CaptureStderr();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    auto got = (*store)->Get(id);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, data);
  });
  while (node.get_requests.load() == 0) std::this_thread::sleep_for(1ms);
  (*store)->ShutdownNodeClients();
  reader.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2500ms) << "the read in flight was not ended";
  auto batch = (*store)->GetMany(std::vector<Digest>{id});
  ASSERT_TRUE(batch.has_value()) << batch.error().message();
  ASSERT_TRUE((*batch)[0].has_value());
  EXPECT_EQ(*(*batch)[0], data);
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(upstream->gets, 2) << "the read in flight and the batch";
  EXPECT_EQ(node.get_requests, 1) << "asked again after its client was shut down";
  EXPECT_TRUE((*store)->IsHealthy(0));
  EXPECT_EQ(logged.find("not used for"), std::string::npos) << logged;
}

TEST(ClusterChunkStore, GetManyUsesNodesThenUpstream) {
  FakeOrigin a, origin;
  a.Start();
  origin.Start();
  auto upstream_client = http::HttpClient::Create({.base_url = origin.url()});
  auto upstream = std::make_shared<RemoteChunkStore>(
      std::shared_ptr<http::HttpClient>(std::move(*upstream_client)));
  auto store = ClusterChunkStore::Create({a.url()}, upstream);
  std::vector<Digest> ids;
  std::vector<std::optional<std::vector<uint8_t>>> want;
  for (int i = 0; i < 30; ++i) {
    auto data = Bytes("b" + std::to_string(i));
    Digest id = Digest::Of(data);
    ids.push_back(id);
    if (i % 3 == 0) {
      ASSERT_TRUE(a.store.Put(id, data).ok());
    } else if (i % 3 == 1) {
      ASSERT_TRUE(origin.store.Put(id, data).ok());
    }
    want.push_back(i % 3 == 2 ? std::nullopt : std::optional(data));
  }
  auto got = (*store)->GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_EQ(a.batch_requests, 1);
  EXPECT_EQ(origin.batch_requests, 1);
}

TEST(ClusterChunkStore, WritesGoToTheUpstream) {
  FakeOrigin node;
  node.Start();
  auto upstream = std::make_shared<CountingStore>();
  auto store = ClusterChunkStore::Create({node.url()}, upstream);
  auto data = Bytes("w");
  Digest id = Digest::Of(data);
  ASSERT_TRUE((*store)->Put(id, data).ok());
  EXPECT_TRUE(*upstream->Contains(id));
  EXPECT_TRUE(*(*store)->Contains(id));
  EXPECT_EQ(node.put_requests + node.missing_requests, 0);
}

TEST(ClusterChunkStore, ParsesNodeLists) {
  EXPECT_EQ(ParseNodeList(" http://a:1, http://b:2,,http://c:3 "),
            (std::vector<std::string>{"http://a:1", "http://b:2", "http://c:3"}));
  EXPECT_TRUE(ParseNodeList("").empty());
  EXPECT_FALSE(
      ClusterChunkStore::Create({"not a url"}, std::make_shared<MemChunkStore>()).has_value());
}

}  // namespace
}  // namespace bdn::remote
