#include "bdn/cache/cache_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "bdn/base/private_files.h"

namespace bdn {

namespace {
constexpr uint64_t kMagic = 0x3130304e4e44425aull;  // "ZBDNN001", little-endian
constexpr size_t kGhostOffset = 8192;
}  // namespace

struct CacheState::Layout {
  uint64_t magic;
  uint64_t ghost_slots;  // a power of two; the table starts at kGhostOffset
  int64_t hand;
  int64_t reserved[5];
  int64_t bytes[kCacheSubdirs];
  int64_t probation_bytes[kCacheSubdirs];
  int64_t last_visit_ns[kCacheSubdirs];
};

Result<std::unique_ptr<CacheState>> CacheState::Open(
    const std::filesystem::path& file, uint64_t ghost_slots_hint,
    const std::function<Result<CacheUsage>()>& scan) {
  static_assert(sizeof(Layout) <= kGhostOffset);
  const std::string what = "node cache state " + file.string();
  MakePrivate(file, "node cache state");
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Err(ErrnoError(what, errno));
  auto fail = [&](Status s) -> Result<std::unique_ptr<CacheState>> {
    ::close(fd);  // also drops the flock
    return Err(std::move(s));
  };
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return fail(ErrnoError(what + ": flock", errno));
  }
  uint64_t header[2] = {0, 0};
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail(ErrnoError(what + ": stat", errno));
  ssize_t got = ::pread(fd, header, sizeof header, 0);
  uint64_t slots = header[1];
  bool valid = got == static_cast<ssize_t>(sizeof header) && header[0] == kMagic &&
               std::has_single_bit(slots) &&
               static_cast<uint64_t>(st.st_size) >= kGhostOffset + slots * 8;
  if (!valid) {
    slots = std::bit_ceil(std::max<uint64_t>(ghost_slots_hint, 1024));
    // Zero everything (including a stale magic) before filling it in.
    if (::ftruncate(fd, 0) != 0 ||
        ::ftruncate(fd, static_cast<off_t>(kGhostOffset + slots * 8)) != 0) {
      return fail(ErrnoError(what + ": truncate", errno));
    }
  }
  size_t map_bytes = kGhostOffset + slots * 8;
  void* map = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail(ErrnoError(what + ": mmap", errno));
  std::unique_ptr<CacheState> state(new CacheState(map, map_bytes, fd));
  if (!valid) {
    auto usage = scan();
    if (!usage) {
      state.reset();  // unmaps and closes fd
      return Err(usage.error());
    }
    Layout& l = *state->layout_;
    l.ghost_slots = slots;
    for (int i = 0; i < kCacheSubdirs; ++i) {
      l.bytes[i] = (*usage)[i].bytes;
      l.probation_bytes[i] = (*usage)[i].probation_bytes;
    }
    // The magic goes last: a process killed during the scan leaves a file the next Open redoes.
    std::atomic_ref<uint64_t>(l.magic).store(kMagic, std::memory_order_release);
    ::msync(map, kGhostOffset, MS_ASYNC);
  }
  ::flock(fd, LOCK_UN);
  return state;
}

CacheState::CacheState(void* map, size_t map_bytes, int fd)
    : layout_(static_cast<Layout*>(map)), map_bytes_(map_bytes), fd_(fd) {}

CacheState::~CacheState() {
  ::munmap(layout_, map_bytes_);
  ::close(fd_);
}

int64_t CacheState::TotalBytes() const {
  int64_t sum = 0;
  for (int i = 0; i < kCacheSubdirs; ++i) sum += SubdirBytes(i);
  return sum;
}

int64_t CacheState::ProbationBytes() const {
  int64_t sum = 0;
  for (int i = 0; i < kCacheSubdirs; ++i) sum += SubdirProbationBytes(i);
  return sum;
}

int64_t CacheState::SubdirBytes(int subdir) const {
  return Ref(layout_->bytes[subdir]).load(std::memory_order_relaxed);
}

int64_t CacheState::SubdirProbationBytes(int subdir) const {
  return Ref(layout_->probation_bytes[subdir]).load(std::memory_order_relaxed);
}

void CacheState::AddBytes(int subdir, int64_t delta) {
  Ref(layout_->bytes[subdir]).fetch_add(delta, std::memory_order_relaxed);
}

void CacheState::AddProbationBytes(int subdir, int64_t delta) {
  Ref(layout_->probation_bytes[subdir]).fetch_add(delta, std::memory_order_relaxed);
}

int64_t CacheState::LastVisitNs(int subdir) const {
  return Ref(layout_->last_visit_ns[subdir]).load(std::memory_order_relaxed);
}

void CacheState::SetLastVisitNs(int subdir, int64_t ns) {
  Ref(layout_->last_visit_ns[subdir]).store(ns, std::memory_order_relaxed);
}

int CacheState::NextSubdir() {
  int64_t h = Ref(layout_->hand).fetch_add(1, std::memory_order_relaxed);
  return static_cast<int>(static_cast<uint64_t>(h) % kCacheSubdirs);
}

uint64_t* CacheState::GhostSlot(const Digest& id) const {
  uint64_t fp;
  std::memcpy(&fp, id.data() + 8, sizeof fp);  // bytes 0..7 also pick the subdirectory
  auto* table = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(layout_) + kGhostOffset);
  return &table[fp & (layout_->ghost_slots - 1)];
}

void CacheState::RememberEvicted(const Digest& id) {
  uint64_t fp;
  std::memcpy(&fp, id.data() + 8, sizeof fp);
  std::atomic_ref<uint64_t>(*GhostSlot(id)).store(fp | 1, std::memory_order_relaxed);
}

bool CacheState::WasEvicted(const Digest& id) const {
  uint64_t fp;
  std::memcpy(&fp, id.data() + 8, sizeof fp);
  return std::atomic_ref<uint64_t>(*GhostSlot(id)).load(std::memory_order_relaxed) == (fp | 1);
}

}  // namespace bdn
