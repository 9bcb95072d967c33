#include "bdn/cache/node_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"
#include "bdn/store/atomic_file.h"

namespace bdn {
namespace fs = std::filesystem;

struct NodeCache::Flight {
  std::condition_variable cv;
  int waiters = 0;  // threads that joined; the result is kept for them only
  bool done = false;
  std::shared_ptr<const Result<std::vector<uint8_t>>> result;
};

namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
// A promoted chunk's mtime is set this far behind its atime, so that "atime > mtime" survives
// file systems that keep whole seconds.
constexpr int64_t kPromotedMtimeLagNs = 2 * kNsPerSecond;
constexpr int64_t kStaleTempNs = 3600 * kNsPerSecond;

// Space a chunk is charged: its length rounded up to the 4 KiB a file system block takes.
int64_t AccountedBytes(uint64_t size) {
  return static_cast<int64_t>(std::max<uint64_t>(4096, (size + 4095) & ~uint64_t{4095}));
}

int SubdirOf(const Digest& id) { return id.data()[0]; }

std::string SubdirName(int subdir) {
  char name[3];
  std::snprintf(name, sizeof name, "%02x", subdir);
  return name;
}

int64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * kNsPerSecond + ts.tv_nsec;
}

int64_t ToNs(const timespec& ts) { return ts.tv_sec * kNsPerSecond + ts.tv_nsec; }

// Probation: never re-read since written (Store sets atime == mtime; a re-read sets atime later).
bool InProbation(const struct stat& st) { return ToNs(st.st_atim) <= ToNs(st.st_mtim); }

bool IsChunkFileName(const char* name) {
  size_t n = 0;
  for (; name[n] != '\0'; ++n) {
    char c = name[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return n == 2 * Digest::kSize;
}

// Reads the whole file behind `fd` (of `size` bytes). Errors: Internal on I/O errors.
Result<std::vector<uint8_t>> ReadAll(int fd, size_t size, const std::string& what) {
  std::vector<uint8_t> buf(size);
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::pread(fd, buf.data() + off, size - off, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err(ErrnoError(what, errno));
    }
    if (n == 0) break;
    off += static_cast<size_t>(n);
  }
  buf.resize(off);
  return buf;
}

// One pass over every subdirectory: what the accounting should say.
Result<CacheUsage> ScanUsage(const fs::path& chunks_dir) {
  CacheUsage usage{};
  for (int s = 0; s < kCacheSubdirs; ++s) {
    fs::path dir = chunks_dir / SubdirName(s);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return Err(ErrnoError("node cache " + dir.string(), errno));
    }
    while (dirent* de = ::readdir(d)) {
      if (!IsChunkFileName(de->d_name)) continue;
      struct stat st;
      if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISREG(st.st_mode)) continue;
      int64_t bytes = AccountedBytes(static_cast<uint64_t>(st.st_size));
      usage[s].bytes += bytes;
      if (InProbation(st)) usage[s].probation_bytes += bytes;
    }
    ::closedir(d);
  }
  return usage;
}

}  // namespace

NodeCache::NodeCache(std::shared_ptr<ChunkStore> upstream, NodeCacheOptions options)
    : upstream_(std::move(upstream)), options_(std::move(options)) {}

NodeCache::~NodeCache() = default;

Result<std::unique_ptr<NodeCache>> NodeCache::Open(std::shared_ptr<ChunkStore> upstream,
                                                   NodeCacheOptions options) {
  const std::string what = "node cache " + options.dir.string();
  if (upstream == nullptr) return Err(InvalidArgumentError(what + ": no upstream store"));
  if (options.capacity_bytes == 0) return Err(InvalidArgumentError(what + ": size must be > 0"));
  if (!(options.low_watermark > 0 && options.low_watermark <= 1) ||
      !(options.probation_share > 0 && options.probation_share <= 1)) {
    return Err(InvalidArgumentError(what + ": watermarks must be in (0, 1]"));
  }
  // Private to its owner: it holds chunks of every namespace mounted on the node.
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(options.dir, "node cache"));
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(options.dir / "tmp", "node cache"));
  // Subdirectories of chunks/: on first use.
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(options.dir / "chunks", "node cache"));
  std::unique_ptr<NodeCache> cache(new NodeCache(std::move(upstream), options));
  fs::path chunks = options.dir / "chunks";
  // One ghost slot per average (64 KiB) chunk the cache can hold.
  BDN_ASSIGN_OR_RETURN(cache->state_,
                       CacheState::Open(options.dir / "state", options.capacity_bytes >> 16,
                                        [&] { return ScanUsage(chunks); }));
  cache->RemoveStaleTemps();
  cache->MakeRoom(0);
  return cache;
}

fs::path NodeCache::PathOf(const Digest& id) const {
  return options_.dir / "chunks" / SubdirName(SubdirOf(id)) / id.Hex();
}

bool NodeCache::IsCached(const Digest& id) const {
  struct stat st;
  return ::stat(PathOf(id).c_str(), &st) == 0;
}

Result<bool> NodeCache::Contains(const Digest& id) { return upstream_->Contains(id); }

Result<std::vector<Digest>> NodeCache::FindMissing(std::span<const Digest> ids) {
  return upstream_->FindMissing(ids);
}

Result<BlobSizes> NodeCache::Sizes(std::span<const Digest> ids) {
  return upstream_->Sizes(ids);
}

Status NodeCache::Put(const Digest& id, std::span<const uint8_t> data) {
  return upstream_->Put(id, data);
}

Status NodeCache::Sync() { return upstream_->Sync(); }

Result<std::vector<uint8_t>> NodeCache::Get(const Digest& id) {
  if (auto hit = ReadCached(id)) return std::move(*hit);
  ++counters_.misses;
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = inflight_.try_emplace(id);
    if (inserted) {
      it->second = std::make_shared<Flight>();
      leader = true;
    } else {
      ++it->second->waiters;
    }
    flight = it->second;
  }
  if (!leader) {
    ++counters_.joined;
    std::shared_ptr<const Result<std::vector<uint8_t>>> result;
    {
      std::unique_lock lock(mu_);
      flight->cv.wait(lock, [&] { return flight->done; });
      result = flight->result;
    }
    return *result;  // a copy: each caller owns its bytes
  }
  // Whatever happens, the flight completes, or its waiters would hang.
  Result<std::vector<uint8_t>> result;
  try {
    result = FetchAndStore(id);
  } catch (const std::exception& e) {
    result = Err(InternalError("chunk " + id.ToString() + ": " + e.what()));
  }
  Finish(id, flight, result);
  return result;
}

void NodeCache::Finish(const Digest& id, const std::shared_ptr<Flight>& flight,
                       const Result<std::vector<uint8_t>>& result) {
  {
    std::lock_guard lock(mu_);
    // Joining happens under mu_ while the flight is in inflight_, so no waiter comes later.
    if (flight->waiters > 0) {
      flight->result = std::make_shared<const Result<std::vector<uint8_t>>>(result);
    }
    flight->done = true;
    inflight_.erase(id);
  }
  flight->cv.notify_all();
}

Result<BlobBatch> NodeCache::GetMany(std::span<const Digest> ids) {
  BlobBatch out(ids.size());
  // Hits first, read in parallel: a cold page cache makes each file a disk round trip.
  ParallelFor(ids.size(), 8, [&](size_t k) { out[k] = ReadCached(ids[k]); });
  // The misses: lead the fetch of those nobody else is fetching, join the others.
  std::vector<size_t> led;
  std::vector<std::shared_ptr<Flight>> led_flights;
  std::vector<std::pair<size_t, std::shared_ptr<Flight>>> joined;
  {
    std::lock_guard lock(mu_);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (out[k]) continue;
      ++counters_.misses;
      auto [it, inserted] = inflight_.try_emplace(ids[k]);
      if (inserted) {
        it->second = std::make_shared<Flight>();
        led.push_back(k);
        led_flights.push_back(it->second);
      } else {
        ++counters_.joined;
        ++it->second->waiters;
        joined.emplace_back(k, it->second);
      }
    }
  }
  std::optional<Status> first_error;
  if (!led.empty()) {
    std::vector<Digest> want;
    want.reserve(led.size());
    for (size_t k : led) want.push_back(ids[k]);
    ++counters_.upstream_fetches;
    Result<BlobBatch> got;
    try {
      got = upstream_->GetMany(want);
    } catch (const std::exception& e) {
      got = Err(InternalError("chunk batch of " + std::to_string(want.size()) + ": " + e.what()));
    }
    if (!got) ++counters_.upstream_errors;
    // Verified and written to the directory by a few threads: file creation dominates.
    std::vector<Result<std::vector<uint8_t>>> results(led.size());
    ParallelFor(led.size(), 4, [&](size_t j) {
      if (!got) {
        results[j] = Err(got.error());
      } else if ((*got)[j]) {
        results[j] = Admit(want[j], std::move(*(*got)[j]));
      } else {
        results[j] = Err(NotFoundError("chunk " + want[j].ToString() + ": not in store"));
      }
    });
    for (size_t j = 0; j < led.size(); ++j) {
      Result<std::vector<uint8_t>>& result = results[j];
      Finish(want[j], led_flights[j], result);
      if (result) {
        out[led[j]] = std::move(*result);
      } else if (result.error().code() != StatusCode::kNotFound && !first_error) {
        first_error = result.error();
      }
    }
  }
  for (auto& [k, flight] : joined) {
    std::shared_ptr<const Result<std::vector<uint8_t>>> result;
    {
      std::unique_lock lock(mu_);
      flight->cv.wait(lock, [&] { return flight->done; });
      result = flight->result;
    }
    if (*result) {
      out[k] = **result;  // a copy: each caller owns its bytes
    } else if (result->error().code() != StatusCode::kNotFound && !first_error) {
      first_error = result->error();
    }
  }
  if (first_error) return Err(*first_error);
  return out;
}

std::optional<std::vector<uint8_t>> NodeCache::ReadCached(const Digest& id) {
  fs::path path = PathOf(id);
  // O_NOATIME: the access time is this cache's own record of re-reads (see InProbation).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // absent (maybe evicted by another process a moment ago)
  struct stat st;
  std::optional<std::vector<uint8_t>> out;
  if (::fstat(fd, &st) == 0) {
    auto bytes = ReadAll(fd, static_cast<size_t>(st.st_size), "read");
    // Keep one copy of the bytes in the page cache: the mount's, not this file's.
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (bytes && VerifyChunk(id, *bytes).ok()) {
      out = std::move(*bytes);
    } else if (bytes) {
      // Bad bytes on the cache disk: drop the file, unless another process already replaced
      // it (then it is a different inode and may well be good).
      ++counters_.corrupt_dropped;
      struct stat now_st;
      if (::stat(path.c_str(), &now_st) == 0 && now_st.st_ino == st.st_ino &&
          now_st.st_dev == st.st_dev && ::unlink(path.c_str()) == 0) {
        int64_t charged = AccountedBytes(static_cast<uint64_t>(st.st_size));
        state_->AddBytes(SubdirOf(id), -charged);
        if (InProbation(st)) state_->AddProbationBytes(SubdirOf(id), -charged);
      }
    }
  }
  if (out) {
    int s = SubdirOf(id);
    int64_t now = NowNs();
    if (InProbation(st)) {
      // First re-read: promote.
      timespec times[2] = {ToTimespec(now), ToTimespec(now - kPromotedMtimeLagNs)};
      if (::futimens(fd, times) == 0) {
        state_->AddProbationBytes(s, -AccountedBytes(static_cast<uint64_t>(st.st_size)));
      }
    } else if (ToNs(st.st_atim) <= state_->LastVisitNs(s)) {
      // Read again since the eviction hand last passed: CLOCK's reference bit.
      timespec times[2] = {ToTimespec(now), {.tv_sec = 0, .tv_nsec = UTIME_OMIT}};
      ::futimens(fd, times);
    }
    ++counters_.hits;
    counters_.hit_bytes += out->size();
  }
  ::close(fd);
  return out;
}

Result<std::vector<uint8_t>> NodeCache::FetchAndStore(const Digest& id) {
  // Another process may have stored it since our miss.
  if (auto hit = ReadCached(id)) return std::move(*hit);
  ++counters_.upstream_fetches;
  Result<std::vector<uint8_t>> got = upstream_->Get(id);
  if (!got) {
    ++counters_.upstream_errors;
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
  int64_t charged = AccountedBytes(data.size());
  if (charged > static_cast<int64_t>(options_.capacity_bytes)) return Status::Ok();
  MakeRoom(charged);
  const std::string what = "chunk " + id.ToString();
  // A chunk evicted from probation a short while ago and wanted again goes straight to the
  // promoted set (S3-FIFO's ghost queue).
  int subdir = SubdirOf(id);
  bool probation = !state_->WasEvicted(id);
  auto charge = [&](int64_t sign) {
    state_->AddBytes(subdir, sign * charged);
    if (probation) state_->AddProbationBytes(subdir, sign * charged);
  };
  bool counted = false;
  auto written = WriteFileAtomically(
      PathOf(id), data, what,
      {.tmp_dir = options_.dir / "tmp",
       .existing = ExistingFile::kKeep,
       .before_close =
           [&](int fd) {
             int64_t now = NowNs();
             timespec times[2] = {ToTimespec(now),
                                  ToTimespec(probation ? now : now - kPromotedMtimeLagNs)};
             if (::futimens(fd, times) != 0) return ErrnoError(what + ": set times", errno);
             return Status::Ok();
           },
       // Charged before it becomes visible, so a crash in between overcounts (safe) rather
       // than under.
       .before_rename =
           [&] {
             charge(+1);
             counted = true;
           }});
  // kAlreadyExisted: another thread or process stored it first; its file counts, not ours.
  if (counted && !(written && *written == WriteOutcome::kWritten)) charge(-1);
  return written ? Status::Ok() : written.error();
}

void NodeCache::MakeRoom(int64_t incoming) {
  const auto capacity = static_cast<int64_t>(options_.capacity_bytes);
  if (state_->TotalBytes() + incoming <= capacity) return;
  std::lock_guard lock(evict_mu_);
  const int64_t target =
      std::min(static_cast<int64_t>(static_cast<double>(capacity) * options_.low_watermark),
               capacity - incoming);
  // Normally one visit frees enough; after a full turn that did not (everything was re-read
  // recently), recency is ignored; after three, the rest is files we cannot unlink.
  for (int visits = 0; visits < 3 * kCacheSubdirs; ++visits) {
    if (state_->TotalBytes() + incoming <= capacity) return;
    EvictFrom(state_->NextSubdir(), target, visits >= kCacheSubdirs);
  }
}

void NodeCache::EvictFrom(int subdir, int64_t target_bytes, bool force) {
  struct Candidate {
    std::string name;
    int64_t bytes;
    int64_t order_ns;  // probation: mtime (FIFO); promoted: atime (CLOCK / LRU)
    bool probation;
    bool referenced;  // promoted and read since the hand's last visit
  };
  const int64_t visit_ns = NowNs();
  fs::path dir = options_.dir / "chunks" / SubdirName(subdir);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const int64_t counted = state_->SubdirBytes(subdir);
  const int64_t counted_probation = state_->SubdirProbationBytes(subdir);
  const int64_t last_visit = state_->LastVisitNs(subdir);
  int64_t found = 0;
  int64_t found_probation = 0;
  std::vector<Candidate> candidates;
  while (dirent* de = ::readdir(d)) {
    if (!IsChunkFileName(de->d_name)) continue;
    struct stat st;
    if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode)) continue;
    Candidate c{de->d_name, AccountedBytes(static_cast<uint64_t>(st.st_size)), 0, InProbation(st),
                false};
    c.order_ns = c.probation ? ToNs(st.st_mtim) : ToNs(st.st_atim);
    c.referenced = !c.probation && ToNs(st.st_atim) > last_visit;
    found += c.bytes;
    if (c.probation) found_probation += c.bytes;
    candidates.push_back(std::move(c));
  }
  // Correct this subdirectory's accounting from what is really there (killed writers, files
  // removed by hand, races between processes).
  state_->AddBytes(subdir, found - counted);
  state_->AddProbationBytes(subdir, found_probation - counted_probation);
  state_->SetLastVisitNs(subdir, visit_ns);

  // Victims (S3-FIFO): while probation holds more than its share, only probationary chunks,
  // oldest first; otherwise promoted chunks not read since the last visit (CLOCK), then
  // probationary ones. Forced (a whole turn freed too little): anything, in that order.
  const bool probation_first =
      state_->ProbationBytes() >
      static_cast<int64_t>(static_cast<double>(options_.capacity_bytes) * options_.probation_share);
  auto rank = [&](const Candidate& c) {
    if (probation_first) return c.probation ? 0 : (c.referenced ? 3 : 2);
    return c.probation ? 1 : (c.referenced ? 3 : 0);
  };
  const int max_rank = force ? 3 : (probation_first ? 0 : 1);
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    int ra = rank(a), rb = rank(b);
    return ra != rb ? ra < rb : a.order_ns < b.order_ns;
  });
  for (const Candidate& c : candidates) {
    if (state_->TotalBytes() <= target_bytes) break;
    if (rank(c) > max_rank) break;                                 // sorted by rank
    if (::unlinkat(::dirfd(d), c.name.c_str(), 0) != 0) continue;  // gone already
    state_->AddBytes(subdir, -c.bytes);
    if (c.probation) {
      state_->AddProbationBytes(subdir, -c.bytes);
      if (auto id = Digest::Parse(c.name)) state_->RememberEvicted(*id);
    }
    ++counters_.evictions;
    counters_.evicted_bytes += static_cast<uint64_t>(c.bytes);
  }
  ::closedir(d);
}

void NodeCache::RemoveStaleTemps() {
  fs::path dir = options_.dir / "tmp";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  int64_t now = NowNs();
  while (dirent* de = ::readdir(d)) {
    if (de->d_name[0] == '.') continue;
    struct stat st;
    if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode) && now - ToNs(st.st_mtim) > kStaleTempNs) {
      ::unlinkat(::dirfd(d), de->d_name, 0);
    }
  }
  ::closedir(d);
}

NodeCacheStats NodeCache::stats() const {
  NodeCacheStats s;
  s.hits = counters_.hits;
  s.misses = counters_.misses;
  s.joined = counters_.joined;
  s.upstream_fetches = counters_.upstream_fetches;
  s.upstream_errors = counters_.upstream_errors;
  s.hit_bytes = counters_.hit_bytes;
  s.fetched_bytes = counters_.fetched_bytes;
  s.evictions = counters_.evictions;
  s.evicted_bytes = counters_.evicted_bytes;
  s.corrupt_dropped = counters_.corrupt_dropped;
  s.write_errors = counters_.write_errors;
  s.cached_bytes = state_->TotalBytes();
  s.probation_bytes = state_->ProbationBytes();
  return s;
}

}  // namespace bdn
