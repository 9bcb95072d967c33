#include "bdn/volume/version_blobs.h"

#include <algorithm>

#include "bdn/format/manifest.h"

namespace bdn {
namespace {

Status Collect(ChunkStore& store, const Digest& version, std::vector<Digest>& out,
               std::unordered_set<Digest>* skip_indexes) {
  auto bytes = store.Get(version);
  if (!bytes) {
    if (bytes.error().code() == StatusCode::kNotFound) {
      return NotFoundError("manifest " + version.ToString() + ": not in the store");
    }
    return bytes.error();
  }
  auto manifest = DecodeManifest(*bytes);
  if (!manifest) return manifest.error().WithPrefix("manifest " + version.ToString());
  out.push_back(version);
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    switch (e.layout) {
      case FileLayout::kEmpty:
        break;
      case FileLayout::kSingleChunk:
        out.push_back(e.digest);
        break;
      case FileLayout::kIndexed: {
        out.push_back(e.index);
        if (skip_indexes && !skip_indexes->insert(e.index).second) break;
        auto index = store.Get(e.index);
        if (!index) {
          if (skip_indexes) skip_indexes->erase(e.index);
          if (index.error().code() == StatusCode::kNotFound) {
            return NotFoundError("chunk index " + e.index.ToString() + " of file \"" + e.path +
                                 "\": not in the store");
          }
          return index.error().WithPrefix("file \"" + e.path + "\"");
        }
        auto chunks = DecodeChunkIndex(*index);
        if (!chunks) {
          if (skip_indexes) skip_indexes->erase(e.index);
          return chunks.error().WithPrefix("file \"" + e.path + "\"");
        }
        for (const ChunkRef& c : *chunks) out.push_back(c.id);
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out) {
  return Collect(store, version, out, nullptr);
}

Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out,
                           std::unordered_set<Digest>& skip_indexes) {
  return Collect(store, version, out, &skip_indexes);
}

BlobSet::BlobSet(std::vector<Digest> ids) : ids_(std::move(ids)) {
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  ids_.shrink_to_fit();
}

bool BlobSet::Contains(const Digest& id) const {
  return std::binary_search(ids_.begin(), ids_.end(), id);
}

VersionBlobCache::VersionBlobCache(std::shared_ptr<ChunkStore> store, size_t max_ids)
    : store_(std::move(store)), max_ids_(max_ids) {}

Result<std::shared_ptr<const BlobSet>> VersionBlobCache::Get(const Digest& version) {
  {
    std::unique_lock lock(mu_);
    for (;;) {
      auto it = slots_.find(version);
      if (it == slots_.end()) {
        slots_.emplace(version, Slot{});  // this thread loads it
        break;
      }
      if (it->second.set) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        ++stats_.hits;
        return it->second.set;
      }
      loaded_.wait(lock);  // another thread is loading it (or failed: then the slot is gone)
    }
  }
  std::vector<Digest> ids;
  Status s = CollectVersionBlobs(*store_, version, ids);
  std::shared_ptr<const BlobSet> set;
  if (s.ok()) set = std::make_shared<const BlobSet>(std::move(ids));
  {
    std::lock_guard lock(mu_);
    if (!set) {
      slots_.erase(version);
    } else {
      ++stats_.loads;
      Slot& slot = slots_[version];
      slot.set = set;
      lru_.push_front(version);
      slot.lru = lru_.begin();
      ids_ += set->size();
      // Oldest first; the set just loaded stays even if it alone is over the bound.
      while (ids_ > max_ids_ && lru_.size() > 1) {
        auto victim = slots_.find(lru_.back());
        ids_ -= victim->second.set->size();
        slots_.erase(victim);
        lru_.pop_back();
        ++stats_.evictions;
      }
    }
  }
  loaded_.notify_all();
  if (!set) return Err(s);
  return set;
}

VersionBlobCacheStats VersionBlobCache::stats() const {
  std::lock_guard lock(mu_);
  VersionBlobCacheStats s = stats_;
  s.ids = ids_;
  s.versions = lru_.size();
  return s;
}

}  // namespace bdn
