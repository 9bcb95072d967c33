// CacheState: the small shared-memory file (`<cache dir>/state`) through which every process
// using one node cache directory shares its size accounting, eviction hand and ghost list.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn {

// Chunks live in 256 fan-out subdirectories named by the first byte of their id, so each one
// holds a uniform sample of the cache; eviction visits them one at a time (see NodeCache).
inline constexpr int kCacheSubdirs = 256;

// What a full scan of the directory found in each subdirectory, in accounted bytes.
struct SubdirUsage {
  int64_t bytes = 0;            // every chunk file
  int64_t probation_bytes = 0;  // of which never re-read since they were written
};
using CacheUsage = std::array<SubdirUsage, kCacheSubdirs>;

// The mapped file holds, per subdirectory, the accounted bytes, the probationary bytes and the
// time the eviction hand last visited it; a shared hand; and a direct-mapped table of the
// fingerprints of recently evicted chunks (the "ghost" list of S3-FIFO). All fields are
// updated with atomic operations on the shared mapping, so processes need no lock. The counts
// are kept conservative (bytes are added before a chunk becomes visible and removed after it is
// unlinked), and each eviction visit corrects its subdirectory from what it finds on disk, so a
// process killed in between leaves a small, self-healing overcount.
//
// Thread-safe and multi-process safe.
class CacheState {
 public:
  // Maps `file`, creating it if needed. A new or unrecognized file is initialized (under an
  // exclusive flock, so concurrent openers wait) from `scan`, which must return the usage found
  // on disk. `ghost_slots_hint` sizes the ghost table of a new file (rounded up to a power of
  // two, at least 1024); an existing file keeps its own size.
  // Errors: Internal/PermissionDenied naming the file; `scan`'s errors.
  static Result<std::unique_ptr<CacheState>> Open(const std::filesystem::path& file,
                                                  uint64_t ghost_slots_hint,
                                                  const std::function<Result<CacheUsage>()>& scan);
  ~CacheState();
  CacheState(const CacheState&) = delete;
  CacheState& operator=(const CacheState&) = delete;

  // Sum of the subdirectories' bytes.
  int64_t TotalBytes() const;
  // Sum of the subdirectories' probationary bytes.
  int64_t ProbationBytes() const;
  int64_t SubdirBytes(int subdir) const;
  int64_t SubdirProbationBytes(int subdir) const;
  void AddBytes(int subdir, int64_t delta);
  void AddProbationBytes(int subdir, int64_t delta);

  // Wall-clock time (ns since the epoch) of the hand's last visit to `subdir`; 0 if never.
  int64_t LastVisitNs(int subdir) const;
  void SetLastVisitNs(int subdir, int64_t ns);
  // Advances the shared hand and returns the subdirectory to visit next.
  int NextSubdir();

  // Remembers that `id` was evicted; WasEvicted is then true until another id takes its slot.
  void RememberEvicted(const Digest& id);
  bool WasEvicted(const Digest& id) const;

 private:
  struct Layout;
  CacheState(void* map, size_t map_bytes, int fd);
  static std::atomic_ref<int64_t> Ref(int64_t& v) { return std::atomic_ref<int64_t>(v); }
  uint64_t* GhostSlot(const Digest& id) const;

  Layout* layout_;
  size_t map_bytes_;
  int fd_;
};

}  // namespace bdn
