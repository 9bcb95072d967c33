// VolumeReader: the read side of a mount. Chunk lists and chunk bytes of one version, fetched
// through a ChunkCache with a deadline per request, and the threads that wait for the network
// so that FUSE worker threads never do (ls and stat keep answering while the origin is down).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/base/thread_pool.h"
#include "bdn/mount/chunk_cache.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/volume/version_view.h"

namespace bdn {

// Built from the MountOptions fields memory_cache_bytes, prefetch_bytes, prefetch_threads,
// fetch_threads, read_timeout and prefetch_indexes. With prefetch_indexes, a background thread
// loads the chunk index of every indexed file, in manifest order, as soon as the reader is
// built, so that files can still be opened after the origin goes away; it stops at the first
// index it cannot get (opens then load their own, with their own deadline).
//
// Thread-safe, except that Stop must not race with Submit (call it once the FUSE loop ended).
class VolumeReader {
 public:
  VolumeReader(std::shared_ptr<VersionView> view, const MountOptions& options);
  // Stop().
  ~VolumeReader();
  VolumeReader(const VolumeReader&) = delete;
  VolumeReader& operator=(const VolumeReader&) = delete;

  // The deadline of a request that arrives now: now + options.read_timeout (steady time of
  // the cache's clock).
  SteadyTime Deadline() const;

  // The chunk list of file entry `e` if it is known without I/O (VersionView::KnownChunks).
  std::shared_ptr<const FileChunks> KnownChunks(const Entry& e) { return view_->KnownChunks(e); }

  // The chunk list of file entry `e` (hardlinks resolved), its chunk index (and the pieces of a
  // version-2 index, requested all at once) loaded through the ChunkCache (concurrent opens of
  // one file share the fetches) into the view's chunk-list cache (VersionView::ChunksOf, the
  // one loader). Errors: InvalidArgument if `e` is not a file; the ChunkCache's errors
  // (DeadlineExceeded at `deadline`, NotFound, Unavailable, ...) prefixed "file \"path\": chunk
  // index" or "file \"path\": chunk index piece"; Corruption "file \"path\": …" from
  // ReadFileChunkIndex (the index or a piece does not decode, a chunk is longer than the
  // chunker maximum, or the lengths do not add up to the entry's size); every list returned
  // passed those checks, so offsets within the file's size index it safely. Once `stop` is
  // requested the wait ends at once (Unavailable "... the wait was cancelled") and the index
  // fetches are withdrawn if they have not started and nobody else waits for them.
  Result<std::shared_ptr<const FileChunks>> ChunksOf(const Entry& e, SteadyTime deadline,
                                                     std::stop_token stop = {});

  // The chunks of `fc` covering the byte range [begin, end) (begin < end <= file size), in
  // order, if all are in memory or readable at once from the store (ChunkCache::PeekOrReadNow:
  // a local store's page cache, on this thread); else nullopt. Never blocks on a disk or the
  // network.
  std::optional<std::vector<ChunkBytes>> ChunksNow(const FileChunks& fc, uint64_t begin,
                                                   uint64_t end, AccessPattern pattern);

  // Queues demand fetches of the chunks of `fc` covering [begin, end) that are not in memory
  // (ChunkCache::Request). Never blocks on I/O.
  void RequestChunks(const FileChunks& fc, uint64_t begin, uint64_t end, AccessPattern pattern);

  // The chunks of `fc` covering [begin, end), fetched in parallel (RequestChunks), waiting until
  // `deadline`. Errors: the ChunkCache's, for the first chunk that failed. Once `stop` is
  // requested the wait ends at once (Unavailable "... the wait was cancelled") and the fetches
  // of the range that have not started and that nobody else waits for are withdrawn.
  Result<std::vector<ChunkBytes>> Chunks(const FileChunks& fc, uint64_t begin, uint64_t end,
                                         AccessPattern pattern, SteadyTime deadline,
                                         std::stop_token stop = {});

  // Runs `task` on one of the threads that may block (up to a deadline); queued tasks start in
  // order. After Stop, runs it on the calling thread (every wait then ends at once).
  void Submit(std::function<void()> task);

  ChunkCache& cache() { return cache_; }
  // Whether the background index loading has finished (all loaded, or it gave up).
  bool indexes_warmed() const { return indexes_warmed_; }

  // Stops the index loading, wakes every waiting Get (they fail with Unavailable), runs the
  // queued tasks (which then finish at once) and joins the threads. Idempotent.
  void Stop();

 private:
  void WarmIndexes();

  std::shared_ptr<VersionView> view_;
  ChunkCache cache_;
  const std::chrono::milliseconds read_timeout_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> indexes_warmed_{false};
  std::unique_ptr<ThreadPool> waiters_;
  std::thread warmer_;
};

}  // namespace bdn
