// The store stack a mount of a remote version reads through: node cache, then the in-cluster
// cache tier, then the origin (docs/spec.md §5, "Tiers, nearest first").
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "bdn/base/status.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

inline constexpr uint64_t kDefaultNodeCacheBytes = 10ull << 30;

struct MountStoreOptions {
  // The node cache directory (--cache-dir); empty: no node cache.
  std::filesystem::path cache_dir;
  // Its bound (--cache-size).
  uint64_t cache_size_bytes = kDefaultNodeCacheBytes;
};

// Returns a NodeCache (options.cache_dir, options.cache_size_bytes) reading through `cluster`
// when given, else through `origin`; without a cache_dir, that tier itself. `cluster` must
// already fall back to `origin` on its own (remote::ClusterChunkStore created over `origin`
// does: a failing or lying cache node is skipped for the origin). Writes (Put, Contains,
// FindMissing) reach the origin either way. `origin` must not be null.
// Errors: InvalidArgument without an origin; NodeCache::Open's (InvalidArgument for a zero
// size; Internal/PermissionDenied naming the cache directory).
// Fork: the node cache starts no threads, so the stack may be built before MountInBackground
// forks, as far as `origin` and `cluster` allow (the remote stores keep no threads either).
Result<std::shared_ptr<ChunkStore>> BuildMountStore(std::shared_ptr<ChunkStore> origin,
                                                    std::shared_ptr<ChunkStore> cluster,
                                                    const MountStoreOptions& options);

// The default --cache-dir: `home`/cache (home being $BDN_HOME), shared by every mount that
// uses the same home.
std::filesystem::path DefaultNodeCacheDir(const std::filesystem::path& home);

}  // namespace bdn
