// NodeCache: the node's bounded on-disk chunk cache, in front of an upstream ChunkStore (the
// cluster tier and the origin). Shared by every mount and process on the node, kept across
// restarts, and every byte it serves is verified.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_set>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/fetch_core.h"
#include "bdn/store/local_chunk_store.h"

namespace bdn {

struct NodeCacheOptions {
  // The cache directory (created if missing). Layout: a pack store (docs/format.md, "Packs"):
  // packs/<16 hex>.pack regions, packs/<16 hex>.open the regions being filled, quarantine; and
  // bdn-node-cache, the marker that makes it the node cache's (cache_dir.h).
  std::filesystem::path dir;
  // Bound of the bytes of the region files (sealed and being filled).
  uint64_t capacity_bytes = 10ull << 30;
  // Size of a region: it is sealed once it holds this many bytes. 0: 32 MiB (twice CacheLib
  // Navy's default), or capacity_bytes / 16 for a cache under 512 MiB (at least 64 KiB), so that a
  // dropped region is a small part of the cache.
  uint64_t region_bytes = 0;
  // Once the regions reach capacity_bytes, eviction drops whole regions, oldest first, down to
  // this fraction of it, so that it runs once per (1 - low_watermark) * capacity_bytes of new
  // chunks rather than on every insert.
  double low_watermark = 0.9;
};

// The options of the region store under a node cache directory (no fdatasync, no compression,
// packs of the region size, no index tables), for NodeCache::Open and the migration of an old
// cache directory.
LocalChunkStore::Options NodeCacheStoreOptions(const NodeCacheOptions& options);

// Counters of this NodeCache object since Open (cached_bytes is what the directory holds now,
// whoever wrote it).
struct NodeCacheStats {
  uint64_t hits = 0;              // Get served from the cache directory
  uint64_t misses = 0;            // Get not found there (including those that joined a fetch)
  uint64_t joined = 0;            // misses that waited for a fetch another thread had started
  uint64_t upstream_fetches = 0;  // upstream Get and GetMany calls
  // Chunks the upstream failed (NotFound aside: a chunk it lacks) or answered with bytes that do
  // not match the id.
  uint64_t upstream_errors = 0;
  uint64_t hit_bytes = 0;
  uint64_t fetched_bytes = 0;    // bytes of successful upstream fetches
  uint64_t evictions = 0;        // regions this object dropped to make room
  uint64_t evicted_bytes = 0;    // their bytes
  uint64_t reinserted = 0;       // chunks read since they were cached, written again on eviction
  uint64_t corrupt_dropped = 0;  // cached copies that failed verification (set aside, refetched)
  uint64_t write_errors = 0;     // chunks that could not be written (served anyway)
  int64_t cached_bytes = 0;      // bytes of the region files in the directory now
  uint64_t regions = 0;          // region files in the directory now
};

// A ChunkStore whose Get answers from a local log-structured cache of verified chunks, fetching
// a missing chunk from `upstream` (one fetch per chunk at a time in this process, however many
// callers miss it: a FetchCore without threads, FetchHere on the caller's thread) and keeping it
// for next time. Contains, FindMissing, Sizes and Put go to the upstream unchanged (Sync too,
// after sealing the region being filled): the cache holds copies, never the authoritative set.
//
// On disk (CacheLib Navy's BlockCache is the model): fixed-size region files, filled in order by
// appending records (the pack format: a checked header per record, a footer listing them), and
// evicted whole, oldest first (FIFO). A chunk read from the cache since it was written is written
// again into the region being filled when its region is evicted (Navy's reinsertion of hits), so
// that one pass over a volume larger than the cache does not flush the chunks that are reused.
// ~64 files per GiB instead of one per chunk. Eviction runs in the Get that stores a chunk, under
// a lock file shared by the processes on the directory, which no process waits for (one that
// finds it taken leaves the eviction to its holder and looks again a region later); it keeps the
// region files within capacity_bytes, except by regions other processes are filling at the same
// moment (each process looks at the directory again after every region's worth of its writes),
// by the chunks this process's other threads write while one evicts (one chunk each at most),
// and while another process holds the lock without evicting (stopped).
//
// Persistent across restarts: the regions are found again at Open (their footers; a region being
// filled when its process died keeps its whole records, verified, and loses the torn tail).
// Every read is verified; a copy that fails verification is set aside (the store's quarantine)
// and the chunk fetched again from upstream (bad bytes are never returned). A cache disk that
// fails to write (full, read-only) only costs the caching: the fetched bytes are still returned.
// Several processes may share the directory (every mount on the node with the same --cache-dir,
// and `bdn cache serve`), and each reads what any of them cached: on a miss, before going
// upstream, a NodeCache looks again (two fstat calls when nothing changed, plus one fstat and one
// flock probe per region another process is filling), reads the footers of regions other
// processes sealed since its last look (a region is sealed when full, by Sync, and when its
// process closes the cache), and scans the records other live processes appended to the regions
// they are still filling (only the bytes added since its last scan, each record verified; a
// record not yet whole is left for the next miss). A region whose process died unsealed is
// recovered then (its whole records kept). Hits cost nothing more. Two processes that miss one
// chunk at the same moment may both fetch it and keep a copy each.
// The NodeCache starts no threads, so it may be opened before a fork.
//
// Thread-safe; several processes may use one directory.
class NodeCache : public ChunkStore {
 public:
  // Opens (creating) the cache directory, private to its owner (directories 0700, files 0600;
  // an existing directory with group or other bits is tightened, with a warning on stderr:
  // CreatePrivateDirectory). Regions whose process died are recovered. If the directory holds
  // more than capacity_bytes (a smaller --cache-size than before), eviction runs before Open
  // returns. A node cache marks a directory it makes as its own (the file bdn-node-cache,
  // cache_dir.h), first thing; an existing directory is taken only when it is empty (or holds only
  // an empty lost+found), marked, or exactly what an earlier release's node cache made there
  // without a marker (JudgeCacheDir), so that eviction never deletes another thing's files (a
  // chunk store's packs, a copy of them); it is judged before anything in it is changed, and
  // everything Open does in it is relative to the directory it judged. Only in an earlier
  // release's directory are the old layout's `state` and tmp/ removed; it is marked once its
  // store opens. Regions set aside as damaged at an earlier open are deleted; those set aside by
  // this one stay until the next. Errors: InvalidArgument if capacity_bytes is 0 or low_watermark
  // is outside (0, 1]; FailedPrecondition "node cache <dir>: holds registry.db, which is not the
  // node cache's; give an empty directory or one the node cache made" (or "holds tmp/project",
  // "holds packs/<name>", "holds index/<name>": JudgeCacheDir's errors); those of
  // OpenPrivateDirectory; FailedPrecondition "chunk store <dir>: in the old one-file-per-chunk
  // layout (chunks/); convert it with: bdn store migrate --cache-dir <dir>" for a cache of the old
  // layout; PermissionDenied "node cache <dir>: Read-only file system" (or "Permission denied")
  // for a directory this process cannot write; Internal/PermissionDenied naming the path on I/O
  // errors.
  static Result<std::unique_ptr<NodeCache>> Open(std::shared_ptr<ChunkStore> upstream,
                                                 NodeCacheOptions options);
  ~NodeCache() override;

  Result<bool> Contains(const Digest& id) override;
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  // Seals the region this process is filling (no fdatasync: a cache), so that other processes
  // read its chunks from its footer, then the upstream's Sync. A region that cannot be sealed is
  // a warning in the log (its whole records are recovered by the next process that finds it
  // unlocked), not an error: errors are the upstream's Sync's.
  Status Sync() override;
  // Closes the regions this process holds that another process evicted (their disk space
  // returns); reads do it once a second too (LocalChunkStore::ForgetDeletedPacks). Not passed
  // to the upstream.
  void ReleaseDeleted() override;

  // The verified bytes of `id`: from the cache directory, or from the upstream (then written to
  // the directory). Errors: the upstream's (NotFound, Unavailable, DeadlineExceeded, ...);
  // Corruption "chunk b3:…: digest mismatch …" if the upstream's bytes do not hash to `id`
  // (they are neither returned nor cached). Blocks for as long as the upstream's Get does.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  // A hit whose region record is in the page cache, counted as Get counts hits; nullopt for
  // anything else (a miss, a record on disk only, a corrupt copy: Get handles those).
  std::optional<std::vector<uint8_t>> GetNow(const Digest& id, uint64_t max_bytes) override;

  // Many chunks at once: those in the cache directory are read there (by up to 8 threads at
  // once), and the misses this process is not already fetching go to the upstream in one
  // GetMany call (then written to the directory); misses another thread is fetching are
  // waited for. Result in request order; nullopt where the upstream lacks a chunk.
  // Errors: the upstream's (Unavailable, ...); Corruption if the upstream's bytes for a chunk
  // do not hash to its id (never returned nor cached).
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  bool PrefersBatches() const override { return upstream_->PrefersBatches(); }

  // Whether the cache holds a good copy of `id` now, as far as this process knows (not read).
  bool IsCached(const Digest& id) const;
  // The region store (tests damage copies through it).
  LocalChunkStore& regions() const { return *store_; }
  const NodeCacheOptions& options() const { return options_; }
  // Counters; lists the directory for cached_bytes and regions.
  NodeCacheStats stats() const;

 private:
  NodeCache(std::shared_ptr<ChunkStore> upstream, NodeCacheOptions options);
  // The verified cached bytes of `id`, or nullopt if absent, unreadable or corrupt (set aside).
  std::optional<std::vector<uint8_t>> ReadCached(const Digest& id);
  // Logs (log::Warn) that a cached copy failed verification, naming the chunk and its region
  // file (`error` is the store's Corruption): at most kCorruptLinesPerMinute lines a minute, the
  // next line counting those left out, so that a damaged disk cannot flood the log.
  void LogCorruptCopy(const Status& error);
  // Counts a hit of `bytes` bytes on `id` (hits keep a chunk's region data on eviction).
  void CountHit(const Digest& id, size_t bytes);
  Result<std::vector<uint8_t>> FetchAndStore(const Digest& id);
  // The misses of a GetMany this thread leads: those stored since the miss (another thread's
  // fetch ended meanwhile) read from the directory, the others in one upstream GetMany
  // (ReadBlobs), then verified and written to the directory by 4 threads.
  FetchResults FetchManyAndStore(std::span<const Digest> ids);
  // Checks bytes from the upstream and writes them to the directory; the bytes to return.
  Result<std::vector<uint8_t>> Admit(const Digest& id, std::vector<uint8_t> bytes);
  Status Store(const Digest& id, std::span<const uint8_t> data);
  // Drops the oldest regions (reinserting their chunks read since they were cached) until the
  // region files fit in low_watermark * capacity_bytes, if they do not fit in capacity_bytes
  // minus one region being filled. Only while no other process holds the directory's eviction
  // lock (evict.lock), which it never waits for: that process evicts meanwhile, or is stopped.
  void MakeRoom();
  // A write found the disk full before the regions reached capacity_bytes (a --cache-size larger
  // than the disk's room, or other files filling it): drops the oldest sealed regions, two
  // regions' worth, so that the cache goes on caching instead of keeping its first bytes forever.
  // Whether anything was dropped (nothing while another process holds evict.lock).
  bool EvictForFullDisk();

  std::shared_ptr<ChunkStore> upstream_;
  NodeCacheOptions options_;
  std::unique_ptr<LocalChunkStore> store_;
  UniqueFd evict_lock_fd_;  // flock'ed by the process evicting

  FetchCore fetches_;  // single-flight of the misses; no threads (NodeCache starts none)
  Mutex evict_mu_;     // one evicting thread per process
  // Chunks read from the cache since they were written (by this process): reinserted on eviction.
  Mutex hot_mu_;
  std::unordered_set<Digest> hot_ GUARDED_BY(hot_mu_);
  // Bytes of the region files at the last look plus what this process wrote since.
  std::atomic<int64_t> approx_bytes_{0};
  // Bytes of the region files at the last look (MakeRoom).
  std::atomic<int64_t> looked_bytes_{0};
  // The last look found the cache over its bound and evict.lock taken by another process: the
  // next look waits for another region's worth of writes (not every chunk lists the directory).
  std::atomic<bool> eviction_deferred_{false};
  // When a Store over the bound last looked whether evict.lock is free again (steady ms).
  std::atomic<int64_t> deferred_look_ms_{0};

  // The upstream refused a fetch (PermissionDenied: this node's key was revoked, or lacks the
  // scope): one warning a minute at most, since every miss would say the same.
  void LogRefusedFetch(const Digest& id, const Status& error);
  log::RateLimiter refused_log_{1, std::chrono::minutes(1)};
  // EvictForFullDisk's warning, once a minute at most.
  log::RateLimiter full_disk_log_{1, std::chrono::minutes(1)};

  Mutex log_mu_;
  std::chrono::steady_clock::time_point log_window_start_ GUARDED_BY(log_mu_){};
  uint64_t logged_in_window_ GUARDED_BY(log_mu_) = 0;
  uint64_t not_logged_ GUARDED_BY(log_mu_) = 0;

  struct Counters {
    std::atomic<uint64_t> hits{0}, misses{0}, upstream_fetches{0}, upstream_errors{0}, hit_bytes{0},
        fetched_bytes{0}, evictions{0}, evicted_bytes{0}, reinserted{0}, corrupt_dropped{0},
        write_errors{0};
  };
  mutable Counters counters_;
};

}  // namespace bdn
