// The blobs one version needs: its manifest, the chunk index of every indexed file, and every
// chunk (docs/format.md, "Manifest" and "Chunk index"). What GC marks, fsck checks, and what a
// read scoped to a version may fetch (VersionBlobCache, for the origin's and cache nodes'
// namespace checks: docs/http-api.md, "Chunks").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// Appends to `out` the manifest `version`, the chunk index of each kIndexed file and each chunk
// of every file, with a version-2 index's pieces (ids may repeat), reading the manifest and the
// chunk indexes from `store` (verified) with ReadFileChunkIndex, which also checks them. Errors:
// NotFound "manifest b3:…: not in the store" / "chunk index b3:… of file \"p\": not in the store" /
// "chunk index piece b3:… of file \"p\": not in the store"; Corruption for a manifest, chunk index
// or piece that does not verify or decode, or lists what its file is not (ReadFileChunkIndex's
// errors), naming it; the store's other errors.
Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out);

// The same, skipping the chunk indexes in `skip_indexes` (and their chunks: a chunk index names
// the same chunks wherever it appears) and adding those it reads to it, so that the versions of
// one volume, which share most of their files' indexes, are read once per index.
Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out,
                           std::unordered_set<Digest>& skip_indexes);

// An immutable set of blob ids: sorted, without repeats (32 bytes per id). Contains is a binary
// search: ~log2(n) comparisons of 32 bytes (17 for a version of 100k chunks). Thread-safe.
class BlobSet {
 public:
  // Sorts and deduplicates `ids`.
  explicit BlobSet(std::vector<Digest> ids);
  bool Contains(const Digest& id) const;
  size_t size() const { return ids_.size(); }

 private:
  std::vector<Digest> ids_;
};

struct VersionBlobCacheStats {
  uint64_t loads = 0;      // versions whose blobs were read from the store
  uint64_t hits = 0;       // Get answered from memory (or joined a load under way)
  uint64_t evictions = 0;  // versions dropped to stay within max_ids
  uint64_t ids = 0;        // ids held now
  uint64_t versions = 0;   // versions held now
};

// The blob set of each version read recently, built from `store` (CollectVersionBlobs) on first
// use and kept, least recently used dropped first, within max_ids ids in all (32 bytes each), so
// that a check of "is this chunk part of that version" costs one lookup in memory, not a read.
// A manifest that does not decode is a set of itself alone (its reader reports why), and a
// file whose chunk list cannot be read whole (an index blob missing or not checking out:
// ReadFileChunkIndex's NotFound and Corruption) adds the index blobs it names only: a reader
// fetches those and reports the file's problem itself, and the version's other files stay
// readable; such a set is answered but not kept (a push may restore what was missing). A version
// is immutable, so a kept set never goes stale. Concurrent Gets of one version share
// one load; a failed load is not kept (the next Get tries again).
// Thread-safe; the store is read without any lock held.
class VersionBlobCache {
 public:
  // max_ids: the bound (a single version over it is still answered, and kept alone).
  VersionBlobCache(std::shared_ptr<ChunkStore> store, size_t max_ids);

  // The blobs `version` needs. Errors: those of CollectVersionBlobs (NotFound naming the
  // manifest or a chunk index; Corruption; the store's transport or I/O errors).
  Result<std::shared_ptr<const BlobSet>> Get(const Digest& version);

  VersionBlobCacheStats stats() const;

 private:
  struct Slot {
    std::shared_ptr<const BlobSet> set;  // null while loading
    std::list<Digest>::iterator lru;     // valid once loaded
  };
  std::shared_ptr<ChunkStore> store_;
  const size_t max_ids_;
  mutable Mutex mu_;
  std::condition_variable loaded_;
  std::unordered_map<Digest, Slot> slots_ GUARDED_BY(mu_);
  std::list<Digest> lru_ GUARDED_BY(mu_);  // loaded versions, most recently used first
  size_t ids_ GUARDED_BY(mu_) = 0;
  VersionBlobCacheStats stats_ GUARDED_BY(mu_);
};

}  // namespace bdn
