// The ChunkStore conformance suite (store/chunk_store_conformance_test_util.h) over the network
// tiers as a mount uses them, every server real on 127.0.0.1: a RemoteChunkStore talking to a
// `bdn serve` origin (Origin on an http::Server over a pack store), and a ClusterChunkStore over
// two `bdn cache serve` nodes (NodeCache over the origin, served by Origin in the cache role) in
// front of that origin. A damaged copy is damaged at every tier that holds one, so no tier can
// answer with the right bytes from behind and the error must reach the caller.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bdn/cache/node_cache.h"
#include "bdn/origin/origin.h"
#include "bdn/registry/registry.h"
#include "bdn/remote/cluster_chunk_store.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/store/chunk_store_conformance_test_util.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/store_test_util.h"

namespace bdn {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<http::Server> StartedServer(const std::function<void(http::Server&)>& setup) {
  http::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.threads = 4;
  auto server = std::make_unique<http::Server>(options);
  setup(*server);
  Status s = server->Start();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return server;
}

std::shared_ptr<remote::RemoteChunkStore> ClientOf(const std::string& url) {
  auto client = http::HttpClient::Create({.base_url = url});
  EXPECT_TRUE(client.has_value()) << client.error().ToString();
  return std::make_shared<remote::RemoteChunkStore>(std::move(*client));
}

// A `bdn serve` origin without authentication over a pack store under `dir`.
struct OriginServer {
  explicit OriginServer(const fs::path& dir) {
    auto s = LocalChunkStore::Open(dir / "store", LocalChunkStore::Durability::kNone);
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    store = std::move(*s);
    auto r = SqliteRegistry::Open(dir / "registry.db");
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    origin::OriginOptions options;
    options.auth = origin::AuthMode::kDisabled;
    origin = std::make_unique<origin::Origin>(options, store, std::move(*r), nullptr);
    server = StartedServer([this](http::Server& s) { origin->Register(s); });
  }
  ~OriginServer() { server->Stop(); }
  void FlipByte(const Digest& id, size_t offset) {
    Status s = FlipStoredByte(*store, id, offset);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::shared_ptr<LocalChunkStore> store;
  std::unique_ptr<origin::Origin> origin;
  std::unique_ptr<http::Server> server;
};

// A `bdn cache serve` node over `upstream_url`, its regions under `dir`.
struct CacheNodeServer {
  CacheNodeServer(const fs::path& dir, const std::string& upstream_url) {
    auto c = NodeCache::Open(ClientOf(upstream_url), {.dir = dir, .capacity_bytes = 64ull << 20});
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    cache = std::move(*c);
    origin::OriginOptions options;
    options.role = origin::Role::kCache;
    // Callers are checked with the origin, as `bdn cache serve` does (it has auth off: all pass).
    auto check = http::HttpClient::Create({.base_url = upstream_url});
    EXPECT_TRUE(check.has_value()) << check.error().ToString();
    options.read_authority =
        origin::UpstreamReadAuthority(std::move(*check), std::chrono::milliseconds(30000));
    node = std::make_unique<origin::Origin>(options, cache, nullptr, nullptr);
    server = StartedServer([this](http::Server& s) { node->Register(s); });
  }
  ~CacheNodeServer() { server->Stop(); }
  // Damages the node's copy of `id`, if it holds one.
  void FlipByteIfCached(const Digest& id, size_t offset) {
    if (!cache->IsCached(id)) return;
    Status s = FlipStoredByte(cache->regions(), id, offset);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::shared_ptr<NodeCache> cache;
  std::unique_ptr<origin::Origin> node;
  std::unique_ptr<http::Server> server;
};

struct RemoteEnv {
  explicit RemoteEnv(const fs::path& dir) : origin(dir), remote(ClientOf(origin.server->url())) {}
  ChunkStore* store() { return remote.get(); }
  void FlipByte(const Digest& id, size_t offset) { origin.FlipByte(id, offset); }
  OriginServer origin;
  std::shared_ptr<remote::RemoteChunkStore> remote;
};

struct ClusterEnv {
  explicit ClusterEnv(const fs::path& dir)
      : origin(dir / "origin"),
        node_a(dir / "node-a", origin.server->url()),
        node_b(dir / "node-b", origin.server->url()) {
    auto c = remote::ClusterChunkStore::Create({node_a.server->url(), node_b.server->url()},
                                               ClientOf(origin.server->url()));
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    cluster = std::move(*c);
  }
  ChunkStore* store() { return cluster.get(); }
  void FlipByte(const Digest& id, size_t offset) {
    origin.FlipByte(id, offset);
    node_a.FlipByteIfCached(id, offset);
    node_b.FlipByteIfCached(id, offset);
  }
  OriginServer origin;
  CacheNodeServer node_a, node_b;
  std::unique_ptr<remote::ClusterChunkStore> cluster;
};

using namespace conformance;  // the suite's registration names, for INSTANTIATE below
INSTANTIATE_TYPED_TEST_SUITE_P(Remote, ChunkStoreConformance, ::testing::Types<RemoteEnv>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cluster, ChunkStoreConformance, ::testing::Types<ClusterEnv>);

}  // namespace
}  // namespace bdn
