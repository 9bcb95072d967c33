// NodeCache: the node's bounded on-disk chunk cache, in front of an upstream ChunkStore (the
// cluster tier and the origin). Shared by every mount and process on the node, kept across
// restarts, and every byte it serves is verified.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/cache/cache_state.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

struct NodeCacheOptions {
  // The cache directory (created if missing). Layout: chunks/<2 hex>/<64 hex>, tmp/, state.
  std::filesystem::path dir;
  // Bound of the accounted bytes (each chunk counts its length rounded up to 4 KiB).
  uint64_t capacity_bytes = 10ull << 30;
  // Once over capacity_bytes, eviction frees down to this fraction of it, so that it runs once
  // per (1 - low_watermark) * capacity_bytes of new chunks rather than on every insert.
  double low_watermark = 0.9;
  // Share of capacity_bytes that chunks never re-read since they were written (probation) may
  // hold before eviction prefers them over re-read ones (S3-FIFO's small queue).
  double probation_share = 0.1;
};

// Counters of this NodeCache object since Open (cached_bytes and probation_bytes are the shared
// accounting of the directory, across processes).
struct NodeCacheStats {
  uint64_t hits = 0;              // Get served from the cache directory
  uint64_t misses = 0;            // Get not found there (including those that joined a fetch)
  uint64_t joined = 0;            // misses that waited for a fetch another thread had started
  uint64_t upstream_fetches = 0;  // upstream Get and GetMany calls
  uint64_t upstream_errors = 0;   // of which failed or returned bytes that do not match the id
  uint64_t hit_bytes = 0;
  uint64_t fetched_bytes = 0;    // bytes of successful upstream fetches
  uint64_t evictions = 0;        // chunk files this object unlinked to make room
  uint64_t evicted_bytes = 0;    // their accounted bytes
  uint64_t corrupt_dropped = 0;  // cached files that failed verification and were deleted
  uint64_t write_errors = 0;     // chunks that could not be written (served anyway)
  int64_t cached_bytes = 0;      // accounted bytes in the directory now (all processes)
  int64_t probation_bytes = 0;   // of which in probation
};

// A ChunkStore whose Get answers from a local directory of verified chunk files, fetching a
// missing chunk from `upstream` (one fetch per chunk at a time in this process, however many
// callers miss it) and keeping it for next time. Contains, FindMissing, Sizes, Put and Sync go to the
// upstream unchanged: the cache holds copies, never the authoritative set.
//
// On disk: one file per chunk, written to tmp/ and renamed into place without replacing
// (RENAME_NOREPLACE), so several processes may share the directory: a reader sees a whole
// chunk or none, and a chunk unlinked by another process's eviction between stat and open is
// simply fetched again. Every read is verified; a file that fails verification is deleted and
// the chunk fetched again (bad bytes are never returned). A cache disk that fails to write
// (full, read-only) only costs the caching: the fetched bytes are still returned.
//
// Eviction (when the shared accounting passes capacity_bytes) is S3-FIFO over sampled
// subdirectories: chunks start in probation (file atime == mtime) and are promoted on their
// first re-read (atime > mtime). A hand visits one subdirectory (1/256 of the cache) at a time;
// while probation holds more than probation_share of the capacity it evicts probationary
// chunks, oldest first, remembering them in a ghost table so that a chunk fetched again soon
// after is admitted as promoted; otherwise it evicts promoted chunks that were not read since
// the hand last passed (CLOCK). So one pass over a volume larger than the cache neither flushes
// the chunks that are reused nor keeps its own one-time chunks. The Get that needs room makes
// it before storing its chunk, usually by visiting one subdirectory; the accounted bytes never
// exceed capacity_bytes except by chunks being stored concurrently. The NodeCache starts no
// threads, so it may be opened before a fork.
//
// Thread-safe; several processes may use one directory.
class NodeCache : public ChunkStore {
 public:
  // Opens (creating) the cache directory, private to its owner (directories 0700, files 0600;
  // an existing directory with group or other bits is tightened, with a warning on stderr:
  // CreatePrivateDirectory). A new directory, or one whose state file is missing
  // or damaged, is scanned once to rebuild the accounting; temporary files older than an hour
  // (left by killed writers) are removed. If the directory holds more than capacity_bytes (a
  // smaller --cache-size than before), eviction runs before Open returns.
  // Errors: InvalidArgument if capacity_bytes is 0 or the watermarks are outside (0, 1];
  // Internal/PermissionDenied naming the path on I/O errors.
  static Result<std::unique_ptr<NodeCache>> Open(std::shared_ptr<ChunkStore> upstream,
                                                 NodeCacheOptions options);
  ~NodeCache() override;

  Result<bool> Contains(const Digest& id) override;
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  Status Sync() override;

  // The verified bytes of `id`: from the cache directory, or from the upstream (then written to
  // the directory). Errors: the upstream's (NotFound, Unavailable, DeadlineExceeded, ...);
  // Corruption "chunk b3:…: digest mismatch …" if the upstream's bytes do not hash to `id`
  // (they are neither returned nor cached). Blocks for as long as the upstream's Get does.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;

  // Many chunks at once: those in the cache directory are read there (by up to 8 threads at
  // once), and the misses this process is not already fetching go to the upstream in one
  // GetMany call (then written to the directory); misses another thread is fetching are
  // waited for. Result in request order; nullopt where the upstream lacks a chunk.
  // Errors: the upstream's (Unavailable, ...); Corruption if the upstream's bytes for a chunk
  // do not hash to its id (never returned nor cached).
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  bool PrefersBatches() const override { return upstream_->PrefersBatches(); }

  // Whether the directory holds a file for `id` now (not verified).
  bool IsCached(const Digest& id) const;
  // Where the file for `id` lives (whether or not it exists).
  std::filesystem::path PathOf(const Digest& id) const;
  const NodeCacheOptions& options() const { return options_; }
  NodeCacheStats stats() const;

 private:
  struct Flight;

  NodeCache(std::shared_ptr<ChunkStore> upstream, NodeCacheOptions options);
  // The verified cached bytes of `id`, or nullopt if absent, unreadable or corrupt (dropped).
  std::optional<std::vector<uint8_t>> ReadCached(const Digest& id);
  Result<std::vector<uint8_t>> FetchAndStore(const Digest& id);
  // Completes a flight this thread leads with `result`, waking its waiters.
  void Finish(const Digest& id, const std::shared_ptr<Flight>& flight,
              const Result<std::vector<uint8_t>>& result);
  // Checks bytes from the upstream and writes them to the directory; the bytes to return.
  Result<std::vector<uint8_t>> Admit(const Digest& id, std::vector<uint8_t> bytes);
  Status Store(const Digest& id, std::span<const uint8_t> data);
  // Evicts until `incoming` more bytes fit within capacity_bytes (then down to the low
  // watermark, as far as the subdirectories visited allow).
  void MakeRoom(int64_t incoming);
  // Visits one subdirectory: corrects its accounting and evicts from it until the total is
  // <= target_bytes; `force` also evicts chunks read since the last visit.
  void EvictFrom(int subdir, int64_t target_bytes, bool force);
  void RemoveStaleTemps();

  std::shared_ptr<ChunkStore> upstream_;
  const NodeCacheOptions options_;
  std::unique_ptr<CacheState> state_;

  std::mutex mu_;
  std::unordered_map<Digest, std::shared_ptr<Flight>> inflight_;
  std::mutex evict_mu_;  // one evicting thread per process (others take other subdirectories)

  struct Counters {
    std::atomic<uint64_t> hits{0}, misses{0}, joined{0}, upstream_fetches{0}, upstream_errors{0},
        hit_bytes{0}, fetched_bytes{0}, evictions{0}, evicted_bytes{0}, corrupt_dropped{0},
        write_errors{0};
  };
  mutable Counters counters_;
};

}  // namespace bdn
