#include "bdn/cache/store_stack.h"

#include "bdn/cache/node_cache.h"

namespace bdn {

Result<std::shared_ptr<ChunkStore>> BuildMountStore(std::shared_ptr<ChunkStore> origin,
                                                    std::shared_ptr<ChunkStore> cluster,
                                                    const MountStoreOptions& options) {
  if (origin == nullptr) return Err(InvalidArgumentError("mount store: no origin"));
  std::shared_ptr<ChunkStore> upstream =
      cluster != nullptr ? std::move(cluster) : std::move(origin);
  if (options.cache_dir.empty()) return upstream;
  BDN_ASSIGN_OR_RETURN(auto cache, NodeCache::Open(std::move(upstream),
                                                   {.dir = options.cache_dir,
                                                    .capacity_bytes = options.cache_size_bytes}));
  return std::shared_ptr<ChunkStore>(std::move(cache));
}

std::filesystem::path DefaultNodeCacheDir(const std::filesystem::path& home) {
  return home / "cache";
}

}  // namespace bdn
