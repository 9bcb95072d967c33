#include "bdn/volume/version_blobs.h"

#include <algorithm>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"

namespace bdn {
namespace {

// With `degraded` (lenient), a manifest that does not decode adds itself alone, and a file whose
// chunk list cannot be read whole (a chunk index or piece
// not in the store, or one that does not check out: ReadFileChunkIndex's NotFound and
// Corruption) adds the index blobs it asked for (or its one chunk) and the walk goes on; then
// *degraded is set.
Status Collect(ChunkStore& store, const Digest& version, std::vector<Digest>& out,
               std::unordered_set<Digest>* skip_indexes, bool* degraded = nullptr) {
  auto bytes = store.Get(version);
  if (!bytes) {
    if (bytes.error().code() == StatusCode::kNotFound) {
      return NotFoundError("manifest " + version.ToString() + ": not in the store");
    }
    return bytes.error();
  }
  auto manifest = DecodeManifest(*bytes);
  if (!manifest && degraded && manifest.error().code() == StatusCode::kCorruption) {
    *degraded = true;  // the reader fetches the manifest and reports what is wrong with it
    out.push_back(version);
    return Status::Ok();
  }
  if (!manifest) return manifest.error().WithPrefix("manifest " + version.ToString());
  out.push_back(version);
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    if (e.layout == FileLayout::kIndexed && skip_indexes) {
      out.push_back(e.index);
      if (!skip_indexes->insert(e.index).second) continue;  // read for an earlier version
    }
    std::vector<Digest> asked;  // the index blobs fetched for this file
    auto fetch = [&](IndexPart part,
                     std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
      std::vector<IndexBlob> blobs;
      for (const Digest& id : ids) {
        if (degraded) asked.push_back(id);
        auto got = store.Get(id);
        if (!got) {
          const std::string what =
              (part == IndexPart::kRoot ? "chunk index " : "chunk index piece ") + id.ToString();
          if (got.error().code() == StatusCode::kNotFound) {
            return Err(NotFoundError(what + " of file \"" + e.path + "\": not in the store"));
          }
          return Err(got.error().WithPrefix("file \"" + e.path + "\": " + what));
        }
        blobs.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(*got)));
      }
      return blobs;
    };
    auto index = ReadFileChunkIndex(manifest->chunker, e, fetch);
    if (!index) {
      const StatusCode code = index.error().code();
      if (degraded && (code == StatusCode::kCorruption || code == StatusCode::kNotFound)) {
        *degraded = true;
        out.insert(out.end(), asked.begin(), asked.end());
        if (e.layout == FileLayout::kSingleChunk) out.push_back(e.digest);
        continue;
      }
      if (e.layout == FileLayout::kIndexed && skip_indexes) skip_indexes->erase(e.index);
      return index.error();
    }
    if (e.layout == FileLayout::kIndexed && skip_indexes) {
      // The root is already in `out`; its pieces and chunks follow.
      out.insert(out.end(), index->blobs.begin() + (index->blobs.empty() ? 0 : 1),
                 index->blobs.end());
    } else {
      out.insert(out.end(), index->blobs.begin(), index->blobs.end());
    }
    std::unordered_set<const std::vector<ChunkRef>*> walked;
    for (const auto& run : index->runs) {
      if (!walked.insert(run.get()).second) continue;  // a piece listed again adds no chunk
      for (const ChunkRef& c : *run) out.push_back(c.id);
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
    MutexLock lock(mu_);
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
      loaded_.wait(
          lock.native());  // another thread is loading it (or failed: then the slot is gone)
    }
  }
  std::vector<Digest> ids;
  // Lenient: a reader of the version is served a damaged file's chunk index, and reports that
  // file's problem itself (exit 5 naming it), while the version's other files stay readable.
  // Such a set is not kept: a push may restore what was missing.
  bool degraded = false;
  Status s = Collect(*store_, version, ids, nullptr, &degraded);
  std::shared_ptr<const BlobSet> set;
  if (s.ok()) set = std::make_shared<const BlobSet>(std::move(ids));
  {
    MutexLock lock(mu_);
    if (!set || degraded) {
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
  MutexLock lock(mu_);
  VersionBlobCacheStats s = stats_;
  s.ids = ids_;
  s.versions = lru_.size();
  return s;
}

}  // namespace bdn
