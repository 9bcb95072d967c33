#include "bdn/cache/node_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/base/dir_fd.h"
#include "bdn/base/log.h"
#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"
#include "bdn/cache/cache_dir.h"

namespace bdn {
namespace fs = std::filesystem;

namespace {

// CacheLib Navy's default is 16 MiB; 32 MiB keeps a cache at about 34 files per GiB with its
// own files (16 MiB regions made 67 per GiB, over issue 9's bound of 64; docs/benchmarks.md).
constexpr uint64_t kRegionBytes = 32ull << 20;
// Bytes a blob takes in a region beyond its own: its record header and its footer entry (the
// footer's trailer and the region header are within the slack of one region left free).
constexpr int64_t kRecordOverhead = pack::kRecordHeaderBytes + pack::kFooterEntryBytes;

uint64_t RegionBytes(const NodeCacheOptions& o) {
  if (o.region_bytes > 0) return o.region_bytes;
  return std::clamp<uint64_t>(o.capacity_bytes / 16, 64 << 10, kRegionBytes);
}

// Tries for an exclusive flock on `fd`, without waiting, and holds it for its lifetime if it got
// it (held(); a `fd` < 0 counts as held: no other process to keep out).
class TryFileLock {
 public:
  explicit TryFileLock(int fd) : fd_(fd) {
    if (fd_ < 0) return;
    int rc;
    while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0) fd_ = -2;  // EWOULDBLOCK: another process holds it
  }
  ~TryFileLock() {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }
  bool held() const { return fd_ != -2; }
  TryFileLock(const TryFileLock&) = delete;
  TryFileLock& operator=(const TryFileLock&) = delete;

 private:
  int fd_;
};

// Deletes the regions an earlier open set aside (packs/<16 hex>.{pack,open,new}.damaged, the
// names the region store gives what it sets aside): they hold nothing worth keeping in a cache,
// and would take disk beyond capacity_bytes unseen. Run before the store opens, so that what it
// sets aside now stays (its warning names it) until the next open. A directory under such a name
// stays (unlinkat fails on it). Best effort, like the removal it replaces.
void DeleteRegionsSetAside(int dir, const fs::path& display) {
  struct stat st {};
  if (::fstatat(dir, "packs", &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // nothing set aside yet
  auto packs = OpenPrivateSubdirectory(dir, "packs", display / "packs", "node cache");
  if (!packs) return;  // refused, with its message, when the store opens it
  auto names = ListNames(packs->get(), (display / "packs").string());
  if (!names) return;
  for (const std::string& name : *names) {
    if (IsSetAsideRegionName(name)) ::unlinkat(packs->get(), name.c_str(), 0);
  }
}

}  // namespace

LocalChunkStore::Options NodeCacheStoreOptions(const NodeCacheOptions& options) {
  LocalChunkStore::Options so;
  so.durability = LocalChunkStore::Durability::kNone;  // a cache: every read is verified anyway
  so.codec.min_saving = 1.0;  // never compressed: reads of the cache must run at disk speed
  so.pack_target_bytes = RegionBytes(options);
  so.max_open_packs = 1;  // one region filled at a time: the bound holds but for its slack
  so.index_tables = false;
  // Every mount on the node reads what the others cached, in the regions they are still filling
  // too: the cache holds copies, none of them committed to (every read is verified).
  so.read_others_open_packs = true;
  so.migrate_command = "bdn store migrate --cache-dir " + options.dir.string();
  return so;
}

NodeCache::NodeCache(std::shared_ptr<ChunkStore> upstream, NodeCacheOptions options)
    : upstream_(std::move(upstream)),
      options_(std::move(options)),
      fetches_(BatchFetch(), FetchCore::Options{.name = "node cache"}) {}

NodeCache::~NodeCache() {
  store_.reset();  // seals the region being filled, so that the next Open finds it whole
}

Result<std::unique_ptr<NodeCache>> NodeCache::Open(std::shared_ptr<ChunkStore> upstream,
                                                   NodeCacheOptions options) {
  const std::string what = "node cache " + options.dir.string();
  if (upstream == nullptr) return Err(InvalidArgumentError(what + ": no upstream store"));
  if (options.capacity_bytes == 0) return Err(InvalidArgumentError(what + ": size must be > 0"));
  if (!(options.low_watermark > 0 && options.low_watermark <= 1)) {
    return Err(InvalidArgumentError(what + ": watermarks must be in (0, 1]"));
  }
  // Private to its owner: it holds chunks of every namespace mounted on the node.
  // Refused when another user owns it: that user could plant symlinks in it. What is inside is
  // opened relative to it, never through a symlink.
  // An existing directory that is not a node cache's is refused before anything in it is changed
  // (or its mode tightened): eviction would delete whatever regions it found there.
  std::optional<CacheDirKind> judged;  // stays unset when the directory is made here
  BDN_ASSIGN_OR_RETURN(UniqueFd dir_fd,
                       OpenPrivateDirectory(options.dir, "node cache", [&](int fd) -> Status {
                         BDN_ASSIGN_OR_RETURN(judged, JudgeCacheDir(fd, options.dir));
                         return Status::Ok();
                       }));
  const CacheDirKind kind = judged.value_or(CacheDirKind::kEmpty);
  // The directory is the cache's from its first file on.
  if (kind == CacheDirKind::kEmpty) BDN_RETURN_IF_ERROR(MarkCacheDir(dir_fd.get(), options.dir));
  std::unique_ptr<NodeCache> cache(new NodeCache(std::move(upstream), options));
  // A cache that cannot be written (a read-only file system, another owner) is refused here, so
  // that the caller goes without it rather than with one that never keeps anything.
  auto lock = OpenRegularFileAt(dir_fd.get(), "evict.lock", O_RDWR | O_CREAT, what);
  if (!lock) {
    // "node cache <dir>: Read-only file system"; a FIFO or symlink in the way is named.
    if (lock.error().code() != StatusCode::kFailedPrecondition) return Err(lock.error());
    return Err(FailedPreconditionError("node cache " + (options.dir / "evict.lock").string() +
                                       lock.error().message().substr(what.size())));
  }
  cache->evict_lock_fd_ = std::move(*lock);
  DeleteRegionsSetAside(dir_fd.get(), options.dir);
  BDN_ASSIGN_OR_RETURN(cache->store_,
                       LocalChunkStore::Open(options.dir, NodeCacheStoreOptions(options)));
  if (kind == CacheDirKind::kEarlierRelease) {
    // The one-file-per-chunk layout's accounting file and temporary files (JudgeCacheDir saw
    // only those there), once migrated: removed relative to the directory judged. Best effort:
    // what stays takes a little disk and nothing else.
    ::unlinkat(dir_fd.get(), "state", 0);
    if (auto cursor = DirCursor::Open(
            DirFd(::openat(dir_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), options.dir)) {
      RemoveTree(*cursor, "tmp").IgnoreError();
    }
    // Marked once its store opened: one of the old layout that still needs `bdn store migrate`
    // is refused above and stays as that release left it. A marker that cannot be written (a
    // full disk) costs nothing now: the next open judges the directory as this one did.
    if (Status marked = MarkCacheDir(dir_fd.get(), options.dir); !marked.ok()) {
      log::Warn(marked.message() + "; the directory stays unmarked until the next open");
    }
  }
  cache->MakeRoom();
  return cache;
}

bool NodeCache::IsCached(const Digest& id) const {
  auto r = store_->Contains(id);
  return r && *r;
}

Result<bool> NodeCache::Contains(const Digest& id) { return upstream_->Contains(id); }

Result<std::vector<Digest>> NodeCache::FindMissing(std::span<const Digest> ids) {
  return upstream_->FindMissing(ids);
}

Result<BlobSizes> NodeCache::Sizes(std::span<const Digest> ids) { return upstream_->Sizes(ids); }

Status NodeCache::Put(const Digest& id, std::span<const uint8_t> data) {
  return upstream_->Put(id, data);
}

Status NodeCache::Sync() {
  // The region being filled is sealed first: a cache that is not written to again (a mount
  // about to exit) leaves every chunk it kept in a sealed region for the other processes.
  if (Status sealed = store_->Sync(); !sealed.ok()) {
    log::Warn("node cache " + options_.dir.string() + ": " + sealed.message() +
              "; its whole records are kept when the next process recovers the region");
  }
  return upstream_->Sync();
}

void NodeCache::ReleaseDeleted() { store_->ReleaseDeleted(); }

Result<std::vector<uint8_t>> NodeCache::Get(const Digest& id) {
  if (auto hit = ReadCached(id)) return std::move(*hit);
  ++counters_.misses;
  FetchResults got = fetches_.FetchHere({&id, 1}, [this](std::span<const Digest> ids) {
    FetchResults one;
    one.push_back(FetchAndStore(ids[0]));
    return one;
  });
  return std::move(got[0]);
}

Result<BlobBatch> NodeCache::GetMany(std::span<const Digest> ids) {
  BlobBatch out(ids.size());
  // Hits first, read in parallel: a cold page cache makes each file a disk round trip.
  ParallelFor(ids.size(), 8, [&](size_t k) { out[k] = ReadCached(ids[k]); });
  // The misses: fetched together (those nobody else is fetching), or joined.
  std::vector<size_t> missed;
  std::vector<Digest> want;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (out[k]) continue;
    ++counters_.misses;
    missed.push_back(k);
    want.push_back(ids[k]);
  }
  if (want.empty()) return out;
  FetchResults got = fetches_.FetchHere(
      want, [this](std::span<const Digest> led) { return FetchManyAndStore(led); });
  std::optional<Status> first_error;
  for (size_t j = 0; j < missed.size(); ++j) {
    if (got[j]) {
      out[missed[j]] = std::move(*got[j]);
    } else if (got[j].error().code() != StatusCode::kNotFound && !first_error) {
      first_error = got[j].error();
    }
  }
  if (first_error) return Err(*first_error);
  return out;
}

FetchResults NodeCache::FetchManyAndStore(std::span<const Digest> ids) {
  // Chunks stored since this thread's miss are read here, not fetched again: another thread's
  // fetch of them may have ended (stored, no longer in flight) between the look in GetMany and
  // the FetchHere that made this thread their leader. Concurrent readers of the same chunks
  // (cold mounts through one cache node) hit that window often, and each such chunk would cost
  // the origin a second send.
  FetchResults results(ids.size());
  std::vector<size_t> fetch;
  std::vector<Digest> want;
  for (size_t j = 0; j < ids.size(); ++j) {
    if (auto hit = ReadCached(ids[j])) {
      results[j] = std::move(*hit);
    } else {
      fetch.push_back(j);
      want.push_back(ids[j]);
    }
  }
  if (want.empty()) return results;
  uint64_t calls = 0;
  // A batch that fails as a whole (one bad chunk) is asked again chunk by chunk, so the good
  // chunks still arrive and are cached; an unreachable upstream fails them all at once.
  FetchResults got =
      ReadBlobs(*upstream_, want, BatchFailure::kReadEachAloneUnlessTransient, &calls);
  counters_.upstream_fetches += calls;
  // Verified and written to the directory by a few threads: file creation dominates.
  ParallelFor(want.size(), 4, [&](size_t i) {
    if (got[i]) {
      got[i] = Admit(want[i], std::move(*got[i]));
    } else if (got[i].error().code() != StatusCode::kNotFound) {
      ++counters_.upstream_errors;
      if (got[i].error().code() == StatusCode::kPermissionDenied) {
        LogRefusedFetch(want[i], got[i].error());
      }
      // Another process may have cached it meanwhile (a mount beside this one reading while the
      // origin is down): one last look.
      if (auto hit = ReadCached(want[i])) got[i] = std::move(*hit);
    }
  });
  for (size_t i = 0; i < fetch.size(); ++i) results[fetch[i]] = std::move(got[i]);
  return results;
}

std::optional<std::vector<uint8_t>> NodeCache::ReadCached(const Digest& id) {
  auto got = store_->Get(id);  // one pread of the record, then BLAKE3
  if (!got) {
    // Corruption: the copy is set aside (never read again) and the chunk fetched again.
    if (got.error().code() == StatusCode::kCorruption) {
      ++counters_.corrupt_dropped;
      LogCorruptCopy(got.error());
    }
    return std::nullopt;
  }
  CountHit(id, got->size());
  return std::move(*got);
}

std::optional<std::vector<uint8_t>> NodeCache::GetNow(const Digest& id, uint64_t max_bytes) {
  auto got = store_->GetNow(id, max_bytes);
  if (got) CountHit(id, got->size());
  return got;
}

void NodeCache::LogCorruptCopy(const Status& error) {
  constexpr uint64_t kCorruptLinesPerMinute = 10;
  uint64_t left_out = 0;
  {
    MutexLock l(log_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - log_window_start_ >= std::chrono::minutes(1)) {
      log_window_start_ = now;
      logged_in_window_ = 0;
    }
    if (logged_in_window_ >= kCorruptLinesPerMinute) {
      ++not_logged_;
      return;
    }
    ++logged_in_window_;
    left_out = std::exchange(not_logged_, 0);
  }
  // "chunk b3:…: digest mismatch … in pack <region> at offset N"; the store's advice to push the
  // data again is for a store, not a cache.
  std::string why = error.message();
  if (size_t cut = why.rfind("; set aside"); cut != std::string::npos) why.resize(cut);
  std::string line = "node cache " + options_.dir.string() + ": cached copy failed its check (" +
                     why + "); set aside, fetched again";
  if (left_out > 0) {
    line += " (" + std::to_string(left_out) + " more such copies since the last line, not logged)";
  }
  log::Warn(line);
}

void NodeCache::LogRefusedFetch(const Digest& id, const Status& error) {
  refused_log_.Write(log::Level::kWarn,
                     "node cache " + options_.dir.string() + ": the upstream refused chunk " +
                         id.ToString() + ": " + error.message() +
                         " (chunks not cached here fail until its key may read them)");
}

void NodeCache::CountHit(const Digest& id, size_t bytes) {
  {
    MutexLock l(hot_mu_);
    hot_.insert(id);
  }
  ++counters_.hits;
  counters_.hit_bytes += bytes;
}

Result<std::vector<uint8_t>> NodeCache::FetchAndStore(const Digest& id) {
  // Another process may have stored it since our miss.
  if (auto hit = ReadCached(id)) return std::move(*hit);
  ++counters_.upstream_fetches;
  Result<std::vector<uint8_t>> got = upstream_->Get(id);
  if (!got) {
    if (got.error().code() == StatusCode::kNotFound) return got;
    ++counters_.upstream_errors;
    if (got.error().code() == StatusCode::kPermissionDenied) LogRefusedFetch(id, got.error());
    // As in FetchManyAndStore: one last look, another process may have cached it meanwhile.
    if (auto hit = ReadCached(id)) return std::move(*hit);
    return got;
  }
  return Admit(id, std::move(*got));
}

Result<std::vector<uint8_t>> NodeCache::Admit(const Digest& id, std::vector<uint8_t> bytes) {
  // Stores promise verified bytes; a tier that breaks the promise must not poison the disk.
  if (Status s = VerifyChunk(id, bytes); !s.ok()) {
    ++counters_.upstream_errors;
    return Err(s);
  }
  counters_.fetched_bytes += bytes.size();
  if (Status s = Store(id, bytes); !s.ok()) ++counters_.write_errors;
  return bytes;
}

Status NodeCache::Store(const Digest& id, std::span<const uint8_t> data) {
  const int64_t charged = static_cast<int64_t>(data.size()) + kRecordOverhead;
  if (static_cast<uint64_t>(charged) > RegionBytes(options_)) return Status::Ok();  // never fits
  // Over the bound while another process holds evict.lock without evicting (stopped): not
  // cached, so that the cache does not fill the disk meanwhile (the bytes are still returned).
  if (eviction_deferred_ &&
      approx_bytes_.load() + charged > static_cast<int64_t>(options_.capacity_bytes)) {
    // The lock may be free again: looked at once a second at most.
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    int64_t last = deferred_look_ms_.load();
    if (now_ms - last >= 1000 && deferred_look_ms_.compare_exchange_strong(last, now_ms)) {
      MakeRoom();
    }
    if (eviction_deferred_ &&
        approx_bytes_.load() + charged > static_cast<int64_t>(options_.capacity_bytes)) {
      ++counters_.write_errors;
      full_disk_log_.Write(
          log::Level::kWarn,
          "node cache " + options_.dir.string() + ": at --cache-size (" +
              FormatBytes(options_.capacity_bytes) +
              ") and another process holds evict.lock without evicting (stopped?): "
              "not caching until it is free");
      return Status::Ok();
    }
  }
  Status put = store_->Put(id, data);
  if (put.code() == StatusCode::kFailedPrecondition && EvictForFullDisk()) {
    put = store_->Put(id, data);  // once more, into the room made
  }
  BDN_RETURN_IF_ERROR(put);
  const int64_t now = approx_bytes_ += charged;
  const auto region = static_cast<int64_t>(RegionBytes(options_));
  // Near the bound by this process's count, or a region written since the last look: look at
  // the directory again (what the other processes on it wrote counts too, so that N processes
  // filling one cache at once do not take N times its bound).
  // While another process holds evict.lock, only the second.
  if ((now + region > static_cast<int64_t>(options_.capacity_bytes) && !eviction_deferred_) ||
      now - looked_bytes_.load() >= region) {
    MakeRoom();
  }
  return Status::Ok();
}

bool NodeCache::EvictForFullDisk() {
  MutexLock local(evict_mu_);
  TryFileLock shared(evict_lock_fd_.get());
  if (!shared.held()) return false;
  auto packs = store_->ListPacks();
  if (!packs) return false;
  // Two regions' worth, oldest first: the one being filled and the next.
  const auto want = static_cast<int64_t>(2 * RegionBytes(options_));
  int64_t freed = 0;
  for (const auto& victim : *packs) {
    if (freed >= want) break;
    if (!victim.sealed || !store_->DropPack(victim.id).ok()) continue;
    freed += static_cast<int64_t>(victim.bytes);
    ++counters_.evictions;
    counters_.evicted_bytes += victim.bytes;
  }
  approx_bytes_ -= freed;
  looked_bytes_ -= freed;
  if (freed > 0) {
    full_disk_log_.Write(
        log::Level::kWarn,
        "node cache " + options_.dir.string() + ": the disk is full below --cache-size (" +
            FormatBytes(options_.capacity_bytes) + "); evicted " +
            FormatBytes(static_cast<uint64_t>(freed)) + " of the oldest regions to go on caching");
  }
  return freed > 0;
}

void NodeCache::MakeRoom() {
  // Waits for another thread's eviction, then looks again: its own write may not be counted.
  MutexLock local(evict_mu_);
  const auto capacity = static_cast<int64_t>(options_.capacity_bytes);
  const auto region = static_cast<int64_t>(RegionBytes(options_));
  auto total_of = [](const std::vector<LocalChunkStore::PackInfo>& packs) {
    int64_t total = 0;
    for (const auto& p : packs) total += static_cast<int64_t>(p.bytes);
    return total;
  };
  auto packs = store_->ListPacks();
  if (!packs) return;
  int64_t total = total_of(*packs);
  approx_bytes_ = total;
  looked_bytes_ = total;
  eviction_deferred_ = false;
  // Room for one more region being filled, so the files stay within the capacity.
  if (total + region <= capacity) return;
  // No other process at once. Never waited for: another process evicting makes the room, and
  // one stopped while it holds the lock (SIGSTOP, a frozen cgroup, a disk wait) stalled every
  // mount and cache node on the directory, new mounts included. This one looks again after
  // another region's worth of writes.
  TryFileLock shared(evict_lock_fd_.get());
  if (!shared.held()) {
    eviction_deferred_ = true;
    return;
  }
  packs = store_->ListPacks();  // what the last evicting process left
  if (!packs) return;
  total = total_of(*packs);
  if (total + region <= capacity) {
    approx_bytes_ = total;
    looked_bytes_ = total;
    return;
  }
  const int64_t target = std::min<int64_t>(
      static_cast<int64_t>(static_cast<double>(capacity) * options_.low_watermark),
      capacity - region);
  for (const auto& victim : *packs) {  // oldest first
    if (total <= target) break;
    if (!victim.sealed) continue;
    // Chunks read since they were cached go to the region being filled (Navy's reinsertion);
    // each once per hit, so that a cache of only hot chunks still makes progress.
    std::vector<std::pair<Digest, std::vector<uint8_t>>> keep;
    if (auto blobs = store_->PackBlobs(victim.id)) {
      std::vector<Digest> hot;
      {
        MutexLock l(hot_mu_);
        for (const auto& b : *blobs) {
          if (hot_.erase(b.id) > 0) hot.push_back(b.id);
        }
      }
      for (const Digest& id : hot) {
        if (auto bytes = store_->Get(id)) keep.emplace_back(id, std::move(*bytes));
      }
    }
    if (!store_->DropPack(victim.id).ok()) continue;
    total -= static_cast<int64_t>(victim.bytes);
    ++counters_.evictions;
    counters_.evicted_bytes += victim.bytes;
    for (auto& [id, bytes] : keep) {
      if (store_->Put(id, bytes).ok()) {
        total += static_cast<int64_t>(bytes.size()) + kRecordOverhead;
        ++counters_.reinserted;
      }
    }
  }
  approx_bytes_ = total;
  looked_bytes_ = total;
}

NodeCacheStats NodeCache::stats() const {
  NodeCacheStats s;
  s.hits = counters_.hits;
  s.misses = counters_.misses;
  s.joined = fetches_.stats().joined;
  s.upstream_fetches = counters_.upstream_fetches;
  s.upstream_errors = counters_.upstream_errors;
  s.hit_bytes = counters_.hit_bytes;
  s.fetched_bytes = counters_.fetched_bytes;
  s.evictions = counters_.evictions;
  s.evicted_bytes = counters_.evicted_bytes;
  s.reinserted = counters_.reinserted;
  s.corrupt_dropped = counters_.corrupt_dropped;
  s.write_errors = counters_.write_errors;
  if (auto packs = store_->ListPacks()) {
    for (const auto& p : *packs) s.cached_bytes += static_cast<int64_t>(p.bytes);
    s.regions = packs->size();
  }
  return s;
}

}  // namespace bdn
