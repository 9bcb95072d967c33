#include "bdn/mount/volume_reader.h"

#include <algorithm>
#include <string>

namespace bdn {

namespace {

// Threads that wait for fetches on behalf of FUSE requests. A waiting thread holds no I/O of
// its own (the ChunkCache's threads do that), so many are cheap; a request queued behind busy
// ones still fails at its own deadline, which is never later than theirs.
constexpr int kWaitingThreads = 64;

ChunkCache::Options CacheOptions(const MountOptions& o) {
  ChunkCache::Options c;
  c.capacity_bytes = o.memory_cache_bytes;
  // Room for a few streams' prefetch windows; the rest is for random access.
  c.streaming_bytes =
      std::min(o.memory_cache_bytes, std::max(o.memory_cache_bytes / 4, 2 * o.prefetch_bytes));
  c.prefetch_threads = o.prefetch_bytes > 0 ? o.prefetch_threads : 0;
  c.max_queued_prefetches = 4096;
  c.fetch_threads = std::max(1, o.fetch_threads);
  // A prefetch top-up (at least half the window) goes to a remote tier as one request.
  c.max_batch_bytes = std::max<uint64_t>(c.max_batch_bytes, o.prefetch_bytes);
  // Prefetched bytes in flight stay within what the streaming FIFO will hold of them.
  c.prefetch_inflight_bytes = c.streaming_bytes;
  return c;
}

}  // namespace

VolumeReader::VolumeReader(std::shared_ptr<VersionView> view, const MountOptions& options)
    : view_(std::move(view)),
      cache_(view_->store(), CacheOptions(options)),
      read_timeout_(options.read_timeout),
      waiters_(std::make_unique<ThreadPool>(kWaitingThreads, size_t{1} << 16)) {
  if (options.prefetch_indexes) {
    warmer_ = std::thread([this] { WarmIndexes(); });
  } else {
    indexes_warmed_ = true;
  }
}

VolumeReader::~VolumeReader() { Stop(); }

void VolumeReader::Stop() {
  if (stopping_.exchange(true)) return;
  cache_.Shutdown();
  if (warmer_.joinable()) warmer_.join();
  waiters_.reset();  // runs what is queued (each finishes at once now) and joins
}

SteadyTime VolumeReader::Deadline() const { return cache_.clock().SteadyNow() + read_timeout_; }

Result<std::shared_ptr<const FileChunks>> VolumeReader::ChunksOf(const Entry& e,
                                                                 SteadyTime deadline,
                                                                 std::stop_token stop) {
  return view_->ChunksOf(
      e, [&](IndexPart, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
        // Every piece asked for at once: one batch to a remote tier rather than a round trip each.
        auto blobs = cache_.GetBlobs(ids, deadline, stop);
        if (!blobs && stop.stop_requested()) {
          std::vector<ChunkRef> refs;
          for (const Digest& d : ids) refs.push_back({d, 0});
          cache_.Withdraw(refs);
        }
        return blobs;
      });
}

std::optional<std::vector<ChunkBytes>> VolumeReader::ChunksNow(const FileChunks& fc, uint64_t begin,
                                                               uint64_t end,
                                                               AccessPattern pattern) {
  size_t first = fc.ChunkAt(begin);
  size_t last = fc.ChunkAt(end - 1);
  std::vector<ChunkBytes> held;
  held.reserve(last - first + 1);
  for (size_t i = first; i <= last; ++i) {
    ChunkBytes bytes = cache_.PeekOrReadNow(fc.chunks[i], pattern);
    if (!bytes) return std::nullopt;
    held.push_back(std::move(bytes));
  }
  return held;
}

namespace {
std::span<const ChunkRef> Covering(const FileChunks& fc, uint64_t begin, uint64_t end) {
  size_t first = fc.ChunkAt(begin);
  size_t last = fc.ChunkAt(end - 1);
  return {fc.chunks.data() + first, last - first + 1};
}
}  // namespace

void VolumeReader::RequestChunks(const FileChunks& fc, uint64_t begin, uint64_t end,
                                 AccessPattern pattern) {
  cache_.Request(Covering(fc, begin, end), pattern);
}

Result<std::vector<ChunkBytes>> VolumeReader::Chunks(const FileChunks& fc, uint64_t begin,
                                                     uint64_t end, AccessPattern pattern,
                                                     SteadyTime deadline, std::stop_token stop) {
  std::span<const ChunkRef> refs = Covering(fc, begin, end);
  // All of them at once: a 1 MiB read of 64 KiB chunks is one round trip, not sixteen.
  cache_.Request(refs, pattern);
  std::vector<ChunkBytes> held;
  held.reserve(refs.size());
  for (const ChunkRef& ref : refs) {
    auto bytes = cache_.Get(ref, pattern, deadline, stop);
    if (!bytes) {
      // A killed reader's request releases what it queued (RequestChunks) for others to use.
      if (stop.stop_requested()) cache_.Withdraw(refs);
      return Err(bytes.error());
    }
    held.push_back(std::move(*bytes));
  }
  return held;
}

void VolumeReader::Submit(std::function<void()> task) {
  if (waiters_ == nullptr) return task();  // stopped: nothing waits any more
  (void)waiters_->Submit(std::move(task));
}

void VolumeReader::WarmIndexes() {
  for (const Entry& e : view_->manifest().entries) {
    if (stopping_) break;
    if (e.kind != EntryKind::kFile || e.layout != FileLayout::kIndexed) continue;
    if (!ChunksOf(e, Deadline())) break;  // unreachable or broken: opens load their own
  }
  indexes_warmed_ = true;
}

}  // namespace bdn
