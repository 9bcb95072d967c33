#include "bdn/store/local_chunk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <sstream>

#include "bdn/base/dir_fd.h"
#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"
#include "bdn/store/atomic_file.h"
#include "bdn/store/pack_file.h"

namespace bdn {
namespace fs = std::filesystem;
using pack::BlobLocation;
using pack::IndexedBlob;

namespace {

// Start writeback of an open pack every this many bytes, so that the fdatasync that seals it
// finds little left to write.
constexpr uint64_t kWritebackBytes = 8 << 20;
// Pack files kept open for reading; beyond this the least needed are closed.
constexpr size_t kMaxOpenFiles = 256;
// gc/doomed.reserve: space taken while there is some, for the doom of a GC on a full disk
// (PublishDoom). A doom is 17 bytes a pack: this holds one of 15,000 packs (about 480 GiB).
constexpr const char* kDoomReserve = "doomed.reserve";
constexpr uint64_t kDoomReserveBytes = 256 << 10;
// Bytes read per Get before a parallel GetMany is worth its threads.
constexpr int kGetManyThreads = 8;

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r ? Status::Ok() : r.error();
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Wall time now in ns since the epoch, as directory mtimes are compared with it: the real
// clock, whatever options.clock is (file systems stamp with real time).
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::Real()->WallNow().time_since_epoch())
      .count();
}

// Whether `fd`, a file still under its temporary .new name (a pack before CreatePack names it
// .open, a claims file before CreateLocked names it .claims), is a dead writer's, so that it may
// be deleted. Its creator locks it just after creating it, so a lock taken now proves nothing
// about a young one: only one unchanged for a minute (its creator names it microseconds after
// creating it) whose lock is free is a dead writer's.
bool IsDeadWritersNewFile(int fd) {
  constexpr int64_t kDeadAgeNs = 60'000'000'000;
  struct stat st;
  return ::fstat(fd, &st) == 0 && NowNs() - MtimeNs(st) > kDeadAgeNs &&
         ::flock(fd, LOCK_EX | LOCK_NB) == 0;
}

// Names in the open directory `dir` (no "." or ".."). Errors: ErrnoError "<what> <display>".
Result<std::vector<std::string>> ListDirAt(int dir, const fs::path& display,
                                           const std::string& what) {
  // A new open of the directory, not a dup: a dup shares its read offset with `dir`, so two
  // threads listing at once (eviction, region rotation) each saw part of the other's listing,
  // and eviction missed regions (the cache grew past its capacity).
  UniqueFd copy(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!copy) return Err(ErrnoError(what + " " + display.string(), errno));
  DIR* d = ::fdopendir(copy.get());
  if (d == nullptr) return Err(ErrnoError(what + " " + display.string(), errno));
  (void)copy.Release();  // closedir closes it
  std::vector<std::string> out;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") out.emplace_back(n);
    errno = 0;  // only readdir's own: the allocation above may leave one behind on success
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return Err(ErrnoError(what + " " + display.string(), err));
  return out;
}

// The text of the file `name` in the directory `dir`; "" when it is missing, unreadable or not a
// regular file (never through a symlink, never waiting on a FIFO).
std::string ReadSmallFileAt(int dir, const std::string& name) {
  auto fd = OpenRegularFileAt(dir, name, O_RDONLY, name);
  if (!fd) return "";
  std::string out;
  std::vector<uint8_t> buf(64 << 10);
  for (;;) {
    auto n = ReadFull(fd->get(), buf, name);
    if (!n) return "";
    out.append(reinterpret_cast<const char*>(buf.data()), *n);
    if (*n < buf.size()) return out;
  }
}

Status FsyncDir(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return ErrnoError("directory " + dir.string(), errno);
  if (::fsync(fd.get()) != 0) return ErrnoError("directory " + dir.string() + ": fsync", errno);
  return Status::Ok();
}

// Whether the old layout's chunks/ directory holds any file (its fan-out directories may exist
// empty: the old code made chunks/ on every open).
bool HoldsAnyFile(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_directory(ec)) return true;
  }
  return false;
}

// A lock held on an open file for as long as the hold lives (flock is per open file, so each
// hold opens its own).
class FlockHold : public StoreHold {
 public:
  explicit FlockHold(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;
};

// Takes `how` (LOCK_SH, LOCK_EX, optionally | LOCK_NB) on the file `name` in the directory `dir`
// (created if missing; never through a symlink, never a FIFO: EINVAL then). Returns the
// descriptor, or an empty one with errno set (EWOULDBLOCK: held elsewhere, with LOCK_NB;
// ENOSPC or EDQUOT: it could not be created).
UniqueFd LockAt(int dir, const std::string& name, int how) {
  errno = 0;  // an ENOSPC or EDQUOT below is then the open's own, never a stale one
  auto opened = OpenRegularFileAt(dir, name, O_RDWR | O_CREAT, name);
  if (!opened) {
    // FailedPrecondition: not a regular file, or ErrnoError's code for a full disk or quota,
    // whose errno is kept (it was reported as EINVAL, "Invalid argument").
    if (opened.error().code() == StatusCode::kFailedPrecondition && errno != ENOSPC &&
        errno != EDQUOT) {
      errno = EINVAL;
    }
    return UniqueFd();
  }
  UniqueFd fd = std::move(*opened);
  while (::flock(fd.get(), how) != 0) {
    if (errno == EINTR) continue;
    fd.Reset();  // keeps errno
    break;
  }
  return fd;
}

// Holds index/lock (flock) for as long as the descriptor lives. Errors: ErrnoError "index lock
// <path>".
Result<UniqueFd> TakeIndexLock(int index_dir, const fs::path& path) {
  UniqueFd fd = LockAt(index_dir, "lock", LOCK_EX);
  if (!fd) return Err(ErrnoError("index lock " + path.string(), errno));
  return fd;
}

}  // namespace

// The claims of this process's writers (ClaimMode): appended to its own claims file, or kept in
// memory with their time. Thread-safe.
class LocalChunkStore::ClaimLog {
 public:
  ClaimLog(fs::path dir, ClaimMode mode, std::function<SteadyTime()> retain_since,
           std::shared_ptr<Clock> clock)
      : dir_(std::move(dir)),
        mode_(mode),
        retain_since_(std::move(retain_since)),
        clock_(clock ? std::move(clock) : Clock::Real()) {}
  ~ClaimLog() {
    // This process is done with its claims; a forked child that inherited the file leaves it.
    if (fd_ && owner_ == ::getpid()) ::unlink(path_.c_str());
  }

  Status Record(std::span<const Digest> ids) {
    if (ids.empty() || mode_ == ClaimMode::kNone) return Status::Ok();
    MutexLock l(mu_);
    if (mode_ == ClaimMode::kMemory) {
      const SteadyTime now = clock_->SteadyNow();
      for (const Digest& id : ids) mem_.emplace_back(now, id);
      PruneLocked(now);
      return Status::Ok();
    }
    if (!fd_ || owner_ != ::getpid()) BDN_RETURN_IF_ERROR(CreateLocked());
    std::vector<uint8_t> buf(ids.size() * Digest::kSize);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::memcpy(buf.data() + i * Digest::kSize, ids[i].data(), Digest::kSize);
    }
    return WriteAll(fd_.get(), buf, "gc claims " + path_.string() + ": write");
  }

  // kMemory: the ids recorded since retain_since.
  std::vector<Digest> InMemory() {
    MutexLock l(mu_);
    PruneLocked(clock_->SteadyNow(), /*force=*/true);
    std::vector<Digest> out;
    out.reserve(mem_.size());
    for (const auto& [t, id] : mem_) out.push_back(id);
    return out;
  }

  ClaimMode mode() const { return mode_; }

 private:
  // A new claims file, locked (LOCK_SH) under a temporary name before it gets its final one, so
  // that no GC takes it for a dead process's file.
  Status CreateLocked() REQUIRES(mu_) {
    fd_.Reset();  // a fork's inherited file is the parent's
    const std::string base = std::to_string(::getpid()) + "-" + Hex16(pack::RandomId());
    path_ = dir_ / (base + ".claims");
    BDN_ASSIGN_OR_RETURN(AtomicFileWriter fresh,
                         AtomicFileWriter::Create(path_, "gc claims " + path_.string(),
                                                  {.tmp_name = base + ".new"}));
    ::flock(fresh.fd(), LOCK_SH);
    BDN_ASSIGN_OR_RETURN(fd_, fresh.CommitKeepingOpen());
    owner_ = ::getpid();
    return Status::Ok();
  }

  void PruneLocked(SteadyTime now, bool force = false) REQUIRES(mu_) {
    if (!force && now - last_prune_ < std::chrono::seconds(1)) return;
    last_prune_ = now;
    const SteadyTime since = retain_since_ ? retain_since_() : now - std::chrono::minutes(10);
    while (!mem_.empty() && mem_.front().first < since) mem_.pop_front();
  }

  const fs::path dir_;
  const ClaimMode mode_;
  const std::function<SteadyTime()> retain_since_;
  const std::shared_ptr<Clock> clock_;
  Mutex mu_;
  UniqueFd fd_ GUARDED_BY(mu_);
  pid_t owner_ GUARDED_BY(mu_) = 0;
  fs::path path_ GUARDED_BY(mu_);
  std::deque<std::pair<SteadyTime, Digest>> mem_ GUARDED_BY(mu_);
  SteadyTime last_prune_ GUARDED_BY(mu_){};
};

struct LocalChunkStore::PackFile {
  explicit PackFile(UniqueFd f, bool open_pack = false)
      : file(std::move(f)), pinned(open_pack), sealed(!open_pack) {}
  int fd() const { return file.get(); }
  const UniqueFd file;
  std::atomic<bool> pinned;  // a pack this process writes: never closed to make room
  std::atomic<bool> sealed;
  // A Get read a blob from it. A store that is not a cache keeps such a pack once another process
  // deleted it (it reads on from it: docs/format.md "Garbage collection"), and lets go of the
  // others (ReleaseDeleted).
  std::atomic<bool> read_from{false};
};

struct LocalChunkStore::OpenPack {
  uint64_t id = 0;
  std::shared_ptr<PackFile> file;
  std::optional<pack::PackWriter> writer;
  bool in_use = false;
  bool retiring = false;   // Sync takes it: no new writer
  bool streaming = false;  // held by an upload (StartPut) for as long as its bytes arrive
  // A Sync covered its records (fdatasync'ed while an upload held it): a commit may name them,
  // so DiscardAfterFullDisk keeps it.
  bool synced = false;
  uint64_t written_back = 0;
  // The process that created it. After a fork (bdn volume mount daemonizes with the store open)
  // only that process writes or seals it: the other copy of the pack is left alone, or two
  // processes would append at the same offsets and one seal under the other's records.
  pid_t owner = ::getpid();
};

LocalChunkStore::LocalChunkStore(fs::path root, Options options)
    : root_(std::move(root)), options_(std::move(options)) {}

bool LocalChunkStore::IsOldLayout(const fs::path& root) {
  std::error_code ec;
  return fs::is_directory(root / "chunks", ec) && HoldsAnyFile(root / "chunks");
}

Result<std::unique_ptr<LocalChunkStore>> LocalChunkStore::Open(const fs::path& root,
                                                               Durability durability) {
  Options o;
  o.durability = durability;
  return Open(root, std::move(o));
}

Result<std::unique_ptr<LocalChunkStore>> LocalChunkStore::Open(const fs::path& root,
                                                               Options options) {
  std::unique_ptr<LocalChunkStore> s(new LocalChunkStore(root, std::move(options)));
  BDN_RETURN_IF_ERROR(s->Init());
  return s;
}

Status LocalChunkStore::Init() {
  const std::string what = "chunk store " + root_.string();
  std::error_code ec;
  bool empty_old_layout = false;
  if (fs::is_directory(root_ / "chunks", ec)) {
    if (HoldsAnyFile(root_ / "chunks")) {
      if (!options_.allow_old_layout) {
        return FailedPreconditionError(what +
                                       ": in the old one-file-per-chunk layout (chunks/); "
                                       "convert it with: " +
                                       options_.migrate_command);
      }
    } else {
      empty_old_layout = true;  // left empty by the old code: nothing to convert
    }
  }
  // Private to the owner: the store holds every chunk of every namespace.
  // Its own user's only, and what is below it opened relative to it, never through a symlink:
  // another user who owned it or planted links in it would choose where this process writes.
  BDN_ASSIGN_OR_RETURN(root_dir_, OpenPrivateDirectory(root_, "chunk store"));
  if (empty_old_layout) {
    // Removed relative to the directory just checked, never by path (a directory swapped for
    // another user's symlink in between would send the removal elsewhere). Best effort: what
    // stays takes a little disk and nothing else.
    if (auto cursor = DirCursor::Open(
            DirFd(::openat(root_dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), root_)) {
      RemoveTree(*cursor, "chunks").IgnoreError();
      RemoveTree(*cursor, "tmp").IgnoreError();
    }
  }
  BDN_ASSIGN_OR_RETURN(packs_dir_, OpenPrivateSubdirectory(root_dir_.get(), "packs",
                                                           root_ / "packs", "chunk store"));
  BDN_ASSIGN_OR_RETURN(index_dir_, OpenPrivateSubdirectory(root_dir_.get(), "index",
                                                           root_ / "index", "chunk store"));
  auto lock = OpenRegularFileAt(index_dir_.get(), "lock", O_RDWR | O_CREAT,
                                what + ": index lock " + (root_ / "index" / "lock").string());
  if (!lock) {
    if (lock.error().code() != StatusCode::kPermissionDenied) return lock.error();
    writable_ = false;
  }
  // Copies found damaged earlier stay out of use.
  std::istringstream q(ReadQuarantine());
  std::string pack_hex, id_hex;
  uint64_t offset;
  {
    WriterLock l(mu_);  // not shared yet; for the analysis
    while (q >> pack_hex >> offset >> id_hex) {
      if (auto p = pack::ParseHex16Name(pack_hex, "")) bad_.insert({*p, offset});
      if (auto id = Digest::Parse(id_hex)) bad_ids_.insert(*id);
    }
  }
  ClaimMode claim_mode = writable_ ? options_.claims : ClaimMode::kNone;
  if (claim_mode != ClaimMode::kNone) {
    BDN_ASSIGN_OR_RETURN(
        gc_dir_, OpenPrivateSubdirectory(root_dir_.get(), "gc", root_ / "gc", "chunk store"));
    BDN_ASSIGN_OR_RETURN(
        claims_dir_,
        OpenPrivateSubdirectory(gc_dir_.get(), "claims", root_ / "gc" / "claims", "chunk store"));
    // A doom left by a GC that died (no process holds gc/running) ends here.
    struct stat doomed;
    if (::fstatat(gc_dir_.get(), "doomed", &doomed, AT_SYMLINK_NOFOLLOW) == 0) {
      if (UniqueFd running = LockAt(gc_dir_.get(), "running", LOCK_EX | LOCK_NB)) {
        ::unlinkat(gc_dir_.get(), "doomed", 0);
      }
    }
  }
  claims_ = std::make_unique<ClaimLog>(root_ / "gc" / "claims", claim_mode,
                                       options_.claims_retain_since, options_.clock);
  if (claim_mode != ClaimMode::kNone) EnsureDoomReserve();
  RefreshDoom();
  BDN_RETURN_IF_ERROR(Refresh());
  bool publish;
  {
    ReaderLock l(mu_);
    publish = options_.index_tables && !loose_.empty() && (tables_.empty() || TableDue());
  }
  // The index is derived data: a failure to write it leaves the packs readable from their footers.
  if (publish) PublishIndex(true).IgnoreError();
  // A GC that died between deleting packs and rewriting the index left entries of packs that are
  // gone (readers skip them): the first open after it rewrites those tables.
  if (writable_ && options_.index_tables) {
    if (auto names = ListDirAt(packs_dir_.get(), root_ / "packs", "chunk store packs")) {
      std::unordered_set<uint64_t> present;
      for (const auto& n : *names) {
        if (auto id = pack::ParseHex16Name(n, ".pack")) present.insert(*id);
      }
      bool stale = false;
      {
        ReaderLock l(mu_);
        for (uint64_t p : indexed_) stale = stale || !present.contains(p);
      }
      // Derived data as above: readers skip the stale entries, and the next open tries again.
      if (stale) CompactIndex().IgnoreError();
    }
  }
  return Status::Ok();
}

LocalChunkStore::~LocalChunkStore() {
  std::vector<std::unique_ptr<OpenPack>> take;
  {
    MutexLock l(pool_mu_);
    take = std::move(open_);
  }
  for (auto& p : take) {
    // Best effort in a destructor: a pack left unsealed is recovered by the next open.
    if (p->owner == ::getpid()) SealPack(*p, false).IgnoreError();
  }
}

std::string LocalChunkStore::ReadQuarantine() {
  const fs::path q = root_ / "quarantine";
  auto fd = OpenRegularFileAt(root_dir_.get(), "quarantine", O_RDONLY,
                              "chunk store quarantine " + q.string());
  if (!fd) {
    if (fd.error().code() == StatusCode::kFailedPrecondition) {
      // A FIFO would block here for ever, a symlink lead elsewhere: not the store's list.
      std::string line = "warning: " + fd.error().message();
      if (writable_ &&
          ::renameat(root_dir_.get(), "quarantine", root_dir_.get(), "quarantine.damaged") == 0) {
        line += "; set aside as " + q.string() + ".damaged";
      } else {
        line += "; ignored";
      }
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    return "";
  }
  return ReadSmallFileAt(root_dir_.get(), "quarantine");
}

void LocalChunkStore::SetAside(const std::string& name, const std::string& why) {
  const std::string aside = name + ".damaged";
  std::string line = "warning: " + why;
  if (!writable_) {
    line += " (read-only store: skipped)";
  } else if (::renameat(packs_dir_.get(), name.c_str(), packs_dir_.get(), aside.c_str()) == 0) {
    line += "; set aside as " + (root_ / "packs" / aside).string();
  } else {
    line += "; skipped (could not set it aside: " + std::string(std::strerror(errno)) + ")";
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

fs::path LocalChunkStore::PackPath(uint64_t pack, bool sealed) const {
  return root_ / "packs" / (Hex16(pack) + (sealed ? ".pack" : ".open"));
}

// ---- lookup ----

bool LocalChunkStore::IsBadLocked(const IndexedBlob& b) const {
  return !bad_.empty() && bad_.contains({b.pack, b.loc.offset});
}

std::optional<IndexedBlob> LocalChunkStore::LookupLocked(const Digest& id, Copies copies,
                                                         std::span<const uint64_t> also) const {
  const bool live = copies == Copies::kLive && (!doomed_.empty() || !also.empty());
  auto doomed = [&](uint64_t pack) REQUIRES_SHARED(mu_) {
    return doomed_.contains(pack) || std::binary_search(also.begin(), also.end(), pack);
  };
  auto usable = [&](const IndexedBlob& b)
                    REQUIRES_SHARED(mu_) { return !IsBadLocked(b) && !(live && doomed(b.pack)); };
  auto it = recent_.find(id);
  if (it != recent_.end() && usable(it->second)) return it->second;
  std::optional<IndexedBlob> found;
  for (const auto& t : tables_) {
    // Find calls this here, with mu_ held; the analysis does not follow a lock into a template.
    if (t->Find(id, [&](const IndexedBlob& b) NO_THREAD_SAFETY_ANALYSIS {
          if (!usable(b) || (!gone_.empty() && gone_.contains(b.pack))) return false;
          found = b;
          return true;
        })) {
      return found;
    }
  }
  if (live && it != recent_.end()) {
    // recent_ keeps one copy per id: another loose pack may hold a live one.
    for (const auto& [pack, blobs] : loose_) {
      if (doomed(pack)) continue;
      for (const BlobLocation& loc : blobs) {
        if (loc.id == id && usable(IndexedBlob{pack, loc})) return IndexedBlob{pack, loc};
      }
    }
  }
  return std::nullopt;
}

std::optional<IndexedBlob> LocalChunkStore::Lookup(const Digest& id, Copies copies) const {
  ReaderLock l(mu_);
  return LookupLocked(id, copies);
}

bool LocalChunkStore::RefreshIfChanged() {
  struct stat a, b;
  if (::fstat(packs_dir_.get(), &a) != 0 || ::fstat(index_dir_.get(), &b) != 0) return false;
  int64_t mtime = std::max(MtimeNs(a), MtimeNs(b));
  MutexLock l(refresh_mu_);
  bool looked = false;
  // Directory times are coarse (a clock tick): a change in the tick of the last look may not have
  // moved them, so a look that soon after a change proves nothing.
  constexpr int64_t kCoarse = 100'000'000;
  if (mtime != seen_dirs_mtime_ns_ || refreshed_at_ns_ - seen_dirs_mtime_ns_ <= kCoarse) {
    const int64_t now = NowNs();
    if (LoadTables().ok() && LoadLoosePacks().ok()) {
      seen_dirs_mtime_ns_ = mtime;
      refreshed_at_ns_ = now;
      looked = true;
    }
  }
  // Appends to another process's open pack leave the directory as it was.
  if (ScanOthersOpenPacks()) looked = true;
  return looked;
}

void LocalChunkStore::ForgetDeletedPacksNowAndThen() {
  if (!options_.read_others_open_packs) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          options_.clock->SteadyNow().time_since_epoch())
                          .count();
  int64_t due = next_deleted_check_ns_.load(std::memory_order_relaxed);
  if (now < due) return;
  constexpr int64_t kEvery = 1'000'000'000;
  // One reader looks; the others go on.
  if (!next_deleted_check_ns_.compare_exchange_strong(due, now + kEvery)) return;
  ReleaseDeleted();
}

void LocalChunkStore::ReleaseDeleted() {
  if (!options_.read_others_open_packs) {
    // From a new user: `bdn gc` said it reclaimed space that a running mount kept, because the
    // mount held open every pack whose footer it read at Open (packs of other volumes too).
    std::vector<uint64_t> deleted;
    {
      MutexLock l(files_mu_);
      for (const auto& [id, file] : files_) {
        if (file->read_from.load(std::memory_order_relaxed) || file->pinned.load()) continue;
        struct stat st;
        if (::fstat(file->fd(), &st) == 0 && st.st_nlink == 0) deleted.push_back(id);
      }
    }
    for (uint64_t id : deleted) ForgetPack(id);
    return;
  }
  ForgetDeletedPacks();
  ForgetDeletedFollowedPacks();
}

void LocalChunkStore::ForgetDeletedFollowedPacks() {
  if (!refresh_mu_.try_lock()) return;
  std::vector<uint64_t> deleted;
  for (const auto& [id, p] : others_open_) {
    struct stat st;
    if (::fstat(p.file->fd(), &st) == 0 && st.st_nlink == 0) deleted.push_back(id);
  }
  for (uint64_t id : deleted) {
    std::vector<Digest> ids = std::move(others_open_[id].ids);
    others_open_.erase(id);
    ForgetOthersOpenPack(id, ids);
  }
  refresh_mu_.unlock();
}

void LocalChunkStore::ForgetDeletedPacks() {
  if (!options_.read_others_open_packs) return;
  std::vector<uint64_t> deleted;
  {
    MutexLock l(files_mu_);
    for (const auto& [id, file] : files_) {
      struct stat st;
      if (::fstat(file->fd(), &st) == 0 && st.st_nlink == 0) deleted.push_back(id);
    }
  }
  for (uint64_t id : deleted) ForgetPack(id);
}

Status LocalChunkStore::Refresh() {
  MutexLock l(refresh_mu_);
  struct stat a, b;
  int64_t mtime = 0;
  if (::fstat(packs_dir_.get(), &a) == 0 && ::fstat(index_dir_.get(), &b) == 0) {
    mtime = std::max(MtimeNs(a), MtimeNs(b));
  }
  const int64_t now = NowNs();
  BDN_RETURN_IF_ERROR(LoadTables());
  BDN_RETURN_IF_ERROR(LoadLoosePacks());
  seen_dirs_mtime_ns_ = mtime;
  refreshed_at_ns_ = now;
  return Status::Ok();
}

Status LocalChunkStore::LoadTables() {
  const fs::path dir = root_ / "index";
  BDN_ASSIGN_OR_RETURN(auto names, ListDirAt(index_dir_.get(), dir, "chunk store index"));
  std::vector<std::shared_ptr<const pack::IndexTable>> now;
  {
    ReaderLock l(mu_);
    for (const auto& t : tables_) {
      if (std::find(names.begin(), names.end(), t->path().filename().string()) != names.end()) {
        now.push_back(t);
      }
    }
  }
  for (const std::string& name : names) {
    if (!pack::ParseHex16Name(name, ".idx")) continue;
    if (std::any_of(now.begin(), now.end(),
                    [&](const auto& t) { return t->path().filename() == name; })) {
      continue;
    }
    auto t = pack::IndexTable::Open(dir / name);
    if (!t) {
      if (t.error().code() == StatusCode::kNotFound) continue;    // replaced by a merge meanwhile
      if (t.error().code() == StatusCode::kCorruption) continue;  // its packs stay loose
      return t.error();
    }
    now.push_back(std::move(*t));
  }
  // A table whose packs another covers too was replaced by a merge that did not finish its
  // clean-up: leave it out.
  std::sort(now.begin(), now.end(),
            [](const auto& a, const auto& b) { return a->packs().size() > b->packs().size(); });
  std::vector<std::shared_ptr<const pack::IndexTable>> keep;
  for (const auto& t : now) {
    bool covered = std::any_of(keep.begin(), keep.end(), [&](const auto& k) {
      return std::includes(k->packs().begin(), k->packs().end(), t->packs().begin(),
                           t->packs().end());
    });
    if (!covered || t->packs().empty()) keep.push_back(t);
  }
  std::unordered_set<uint64_t> indexed;
  for (const auto& t : keep) indexed.insert(t->packs().begin(), t->packs().end());
  WriterLock l(mu_);
  tables_ = std::move(keep);
  indexed_ = std::move(indexed);
  // Packs now in a table are found there.
  for (auto it = loose_.begin(); it != loose_.end();) {
    if (!indexed_.contains(it->first)) {
      ++it;
      continue;
    }
    for (const BlobLocation& b : it->second) {
      auto r = recent_.find(b.id);
      if (r != recent_.end() && r->second.pack == it->first) recent_.erase(r);
    }
    it = loose_.erase(it);
  }
  return Status::Ok();
}

void LocalChunkStore::AddLoose(uint64_t pack, std::shared_ptr<PackFile> file,
                               const std::vector<BlobLocation>& blobs) {
  {
    WriterLock l(mu_);
    if (indexed_.contains(pack)) return;
    for (const BlobLocation& b : blobs) {
      IndexedBlob ib{pack, b};
      auto [it, inserted] = recent_.try_emplace(b.id, ib);
      if (!inserted && IsBadLocked(it->second)) it->second = ib;
    }
    loose_[pack] = blobs;
  }
  if (file) {
    MutexLock l(files_mu_);
    files_[pack] = std::move(file);
  }
}

Status LocalChunkStore::LoadLoosePacks() {
  const fs::path dir = root_ / "packs";
  BDN_ASSIGN_OR_RETURN(auto names, ListDirAt(packs_dir_.get(), dir, "chunk store packs"));
  {
    // Packs deleted since the last look (DropPack in another process): their blobs are gone.
    ForgetDeletedPacks();
    std::unordered_set<std::string> present(names.begin(), names.end());
    std::vector<uint64_t> vanished;
    {
      ReaderLock l(mu_);
      for (const auto& [id, blobs] : loose_) {
        if (!present.contains(PackPath(id).filename().string())) vanished.push_back(id);
      }
    }
    for (uint64_t id : vanished) ForgetPack(id);
  }
  const int mode = writable_ ? O_RDWR : O_RDONLY;
  for (const std::string& name : names) {
    auto sealed = pack::ParseHex16Name(name, ".pack");
    auto open = pack::ParseHex16Name(name, ".open");
    auto fresh = pack::ParseHex16Name(name, ".new");
    if (!sealed && !open && !fresh) continue;
    const uint64_t id = sealed ? *sealed : open ? *open : *fresh;
    {
      ReaderLock l(mu_);
      if (indexed_.contains(id) || loose_.contains(id) || open_ids_.contains(id)) continue;
    }
    if (open && others_open_.contains(id)) continue;  // followed: ScanOthersOpenPacks
    auto opened = OpenRegularFileAt(packs_dir_.get(), name, sealed ? O_RDONLY : mode,
                                    "pack " + (dir / name).string());
    if (!opened) {
      // Sealed or recovered by its writer or another process.
      if (opened.error().code() == StatusCode::kNotFound) continue;
      if (opened.error().code() != StatusCode::kFailedPrecondition) return opened.error();
      // A symlink, FIFO or directory under a pack's name holds no records: never read (a FIFO
      // would block the open for ever), set aside.
      SetAside(name, opened.error().message());
      continue;
    }
    UniqueFd fd = std::move(*opened);
    if (fresh) {
      // A writer that died before its first record: nothing to keep.
      if (writable_ && IsDeadWritersNewFile(fd.get())) {
        ::unlinkat(packs_dir_.get(), name.c_str(), 0);
      }
      continue;
    }
    if (open) {
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {  // its writer is alive
        if (options_.read_others_open_packs) TrackOthersOpenPack(id, std::move(fd));
        continue;
      }
      // The name may have moved on between the listing and the lock (sealed, recovered).
      struct stat by_fd, by_name;
      if (::fstatat(packs_dir_.get(), name.c_str(), &by_name, 0) != 0 ||
          ::fstat(fd.get(), &by_fd) != 0 || by_fd.st_ino != by_name.st_ino) {
        continue;
      }
      BDN_RETURN_IF_ERROR(RecoverPack(id, std::move(fd)));
      continue;
    }
    const std::string what = "pack " + (dir / name).string();
    BDN_ASSIGN_OR_RETURN(auto adopted, AdoptPackFile(std::move(fd), what));
    auto& [file, size] = adopted;
    auto blobs = pack::ReadFooter(file->fd(), size, what);
    if (blobs) {
      AddLoose(id, std::move(file), *blobs);
      continue;
    }
    if (blobs.error().code() != StatusCode::kCorruption) return blobs.error();
    // A sealed pack whose footer did not survive (a power cut before the fdatasync of a pack that
    // was never committed to, or damage): every whole record in it is still good, wherever it is.
    UniqueFd rw(
        ::openat(packs_dir_.get(), name.c_str(), mode | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!rw || ::flock(rw.get(), LOCK_EX | LOCK_NB) != 0) continue;
    BDN_RETURN_IF_ERROR(RepairSealedPack(id, std::move(rw)));
  }
  // Followed packs that were sealed (now loose: their footer lists every record), or recovered,
  // or are gone altogether (sealed and dropped between two looks, or a recovered empty one).
  const std::unordered_set<std::string> present(names.begin(), names.end());
  for (auto it = others_open_.begin(); it != others_open_.end();) {
    const uint64_t id = it->first;
    bool adopted;
    {
      ReaderLock l(mu_);
      adopted = loose_.contains(id) || indexed_.contains(id);
    }
    if (adopted) {
      it = others_open_.erase(it);
    } else if (!present.contains(PackPath(id, false).filename().string()) &&
               !present.contains(PackPath(id).filename().string())) {
      ForgetOthersOpenPack(id, it->second.ids);
      it = others_open_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

void LocalChunkStore::TrackOthersOpenPack(uint64_t pack, UniqueFd fd) {
  auto file = std::make_shared<PackFile>(std::move(fd), /*open_pack=*/true);
  {
    MutexLock l(files_mu_);
    files_[pack] = file;
  }
  OthersOpenPack& p = others_open_[pack];
  p.file = std::move(file);
  p.valid_bytes = pack::kPackHeaderBytes;
  struct stat st;
  if (::fstat(p.file->fd(), &st) == 0) {
    ScanOthersOpenPack(pack, p, static_cast<uint64_t>(st.st_size));
  }
}

bool LocalChunkStore::ScanOthersOpenPack(uint64_t pack, OthersOpenPack& p, uint64_t file_bytes) {
  auto scan = pack::ScanRecords(p.file->fd(), file_bytes, "pack " + PackPath(pack, false).string(),
                                p.valid_bytes);
  // An I/O error is tried again at the next miss; a damaged pack header never gets better.
  if (!scan && scan.error().code() != StatusCode::kCorruption) return false;
  p.seen_bytes = file_bytes;
  if (!scan || scan->blobs.empty()) return false;
  p.valid_bytes = scan->valid_bytes;
  WriterLock l(mu_);
  for (const BlobLocation& b : scan->blobs) {
    IndexedBlob ib{pack, b};
    auto [it, inserted] = recent_.try_emplace(b.id, ib);
    if (!inserted && IsBadLocked(it->second)) it->second = ib;
    p.ids.push_back(b.id);
  }
  return true;
}

bool LocalChunkStore::ScanOthersOpenPacks() {
  bool found = false;
  std::vector<uint64_t> dead;
  for (auto& [id, p] : others_open_) {
    struct stat st;
    if (::fstat(p.file->fd(), &st) != 0) continue;
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size != p.seen_bytes && ScanOthersOpenPack(id, p, size)) found = true;
    // Its writer was killed before it sealed it: recovered now rather than at the next Open, so
    // that its whole records are sealed and it can be evicted. (The probe's lock is let go at
    // once: the recovery locks a descriptor of its own, checked to be the .open file still.)
    if (writable_ && ::flock(p.file->fd(), LOCK_EX | LOCK_NB) == 0) {
      ::flock(p.file->fd(), LOCK_UN);
      dead.push_back(id);
    }
  }
  for (uint64_t id : dead) {
    const std::string name = PackPath(id, false).filename().string();
    UniqueFd fd(::openat(packs_dir_.get(), name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // sealed, or taken
    struct stat by_fd, by_name;
    if (::fstatat(packs_dir_.get(), name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0 ||
        ::fstat(fd.get(), &by_fd) != 0 || by_fd.st_ino != by_name.st_ino) {
      continue;
    }
    // What this process found in it is forgotten first: the recovery lists the records it finds
    // whole under the pack's sealed name, and may find none (a damaged first record: the pack is
    // removed or set aside), whose entries would otherwise point at a pack that is gone (from an
    // attacking helper: every read of those chunks then spun on the missing file, and a fetched
    // copy was never kept, "already stored").
    std::vector<Digest> ids = std::move(others_open_[id].ids);
    others_open_.erase(id);
    ForgetOthersOpenPack(id, ids);
    if (RecoverPack(id, std::move(fd)).ok()) found = true;
  }
  return found;
}

void LocalChunkStore::ForgetOthersOpenPack(uint64_t pack, const std::vector<Digest>& ids) {
  {
    // Only its own entries: recent_ holds every loose blob of a cache (no index tables).
    WriterLock l(mu_);
    for (const Digest& id : ids) {
      auto r = recent_.find(id);
      if (r != recent_.end() && r->second.pack == pack) recent_.erase(r);
    }
  }
  MutexLock l(files_mu_);
  files_.erase(pack);
}

Result<std::pair<std::shared_ptr<LocalChunkStore::PackFile>, uint64_t>>
LocalChunkStore::AdoptPackFile(UniqueFd fd, const std::string& what) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError(what, errno));
  return std::pair(std::make_shared<PackFile>(std::move(fd)), static_cast<uint64_t>(st.st_size));
}

Status LocalChunkStore::RepairSealedPack(uint64_t pack, UniqueFd owned) {
  const fs::path path = PackPath(pack);
  const std::string what = "pack " + path.string();
  BDN_ASSIGN_OR_RETURN(auto adopted, AdoptPackFile(std::move(owned), what));
  auto& [file, size] = adopted;
  const int fd = file->fd();
  // Another process may have repaired it between our read of the footer and our lock.
  if (auto blobs = pack::ReadFooter(fd, size, what)) {
    AddLoose(pack, std::move(file), *blobs);
    return Status::Ok();
  }
  BDN_ASSIGN_OR_RETURN(pack::SalvageResult found, pack::SalvageRecords(fd, size, what));
  std::string note = "warning: " + what + ": footer damaged; " +
                     std::to_string(found.blobs.size()) + " whole records found";
  if (found.damaged_records > 0) {
    note += ", " + std::to_string(found.damaged_records) +
            (found.damaged_records == 1 ? " damaged record" : " damaged records") +
            // A cache's (read_others_open_packs: NodeCache) fetches them again when read.
            (options_.read_others_open_packs
                 ? " skipped (their blobs are fetched from upstream again when read)"
                 : " skipped (their blobs count as missing until pushed again)");
  }
  if (!writable_) {
    std::fprintf(stderr, "%s (read-only store: not repaired)\n", note.c_str());
    AddLoose(pack, std::move(file), found.blobs);
    return Status::Ok();
  }
  if (found.blobs.empty()) {
    // Nothing in it can be used; kept, not deleted, in case a person can do more with it.
    std::fprintf(stderr, "%s; set aside as %s.damaged\n", note.c_str(), path.string().c_str());
    ::renameat(packs_dir_.get(), path.filename().c_str(), packs_dir_.get(),
               (path.filename().string() + ".damaged").c_str());
    return Status::Ok();
  }
  // A committed pack is never cut: its records stay where they are (a reader of another
  // process may be reading them), and the new footer goes after every byte of the file,
  // the damaged old footer included.
  BDN_RETURN_IF_ERROR(PWriteAll(fd, pack::EncodeFooter(found.blobs, size), size, what + ": write"));
  if (options_.durability == Durability::kDurable && ::fdatasync(fd) != 0) {
    return ErrnoError(what + ": fdatasync", errno);
  }
  std::fprintf(stderr, "%s; a new footer lists them\n", note.c_str());
  ++packs_recovered_;
  AddLoose(pack, std::move(file), found.blobs);
  return Status::Ok();
}

Status LocalChunkStore::RecoverPack(uint64_t pack, UniqueFd owned) {
  const fs::path path = PackPath(pack, false);
  const std::string what = "pack " + path.string();
  BDN_ASSIGN_OR_RETURN(auto adopted, AdoptPackFile(std::move(owned), what));
  auto& [file, size] = adopted;
  const int fd = file->fd();
  auto scan = pack::ScanRecords(fd, size, what);
  if (!scan) {
    if (scan.error().code() != StatusCode::kCorruption) return scan.error();
    // Not a pack at all (its header never reached the disk): nothing in it can be used.
    if (writable_)
      ::renameat(packs_dir_.get(), path.filename().c_str(), packs_dir_.get(),
                 (path.filename().string() + ".damaged").c_str());
    return Status::Ok();
  }
  if (!writable_) {
    AddLoose(pack, std::move(file), scan->blobs);
    return Status::Ok();
  }
  if (scan->blobs.empty()) {
    ::unlinkat(packs_dir_.get(), path.filename().c_str(), 0);
    return Status::Ok();
  }
  // Seal what is whole: the torn tail goes, the footer follows the last good record.
  std::vector<uint8_t> footer = pack::EncodeFooter(scan->blobs, scan->valid_bytes);
  if (::ftruncate(fd, static_cast<off_t>(scan->valid_bytes)) != 0)
    return ErrnoError(what + ": truncate", errno);
  if (Status w = PWriteAll(fd, footer, scan->valid_bytes, what + ": write"); !w.ok()) {
    if (w.code() != StatusCode::kFailedPrecondition) return w;
    // A full disk: its whole records stay readable as they are, and a later open seals it.
    (void)::ftruncate(fd, static_cast<off_t>(scan->valid_bytes));
    AddLoose(pack, std::move(file), scan->blobs);
    return Status::Ok();
  }
  if (options_.durability == Durability::kDurable && ::fdatasync(fd) != 0) {
    return ErrnoError(what + ": fdatasync", errno);
  }
  if (::renameat(packs_dir_.get(), path.filename().c_str(), packs_dir_.get(),
                 PackPath(pack).filename().c_str()) != 0) {
    return ErrnoError(what + ": rename", errno);
  }
  if (options_.durability == Durability::kDurable && ::fsync(packs_dir_.get()) != 0) {
    return ErrnoError("chunk store " + root_.string() + ": packs: fsync", errno);
  }
  ++packs_recovered_;
  AddLoose(pack, std::move(file), scan->blobs);
  return Status::Ok();
}

std::shared_ptr<LocalChunkStore::PackFile> LocalChunkStore::FileOf(uint64_t pack) {
  MutexLock l(files_mu_);
  auto it = files_.find(pack);
  if (it != files_.end()) return it->second;
  // Never through a symlink, never waiting on a FIFO (reads of one then fail at once).
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  UniqueFd fd(::openat(packs_dir_.get(), PackPath(pack).filename().c_str(), kFlags));
  if (!fd && errno == ENOENT) {
    fd.Reset(::openat(packs_dir_.get(), PackPath(pack, false).filename().c_str(), kFlags));
  }
  if (!fd) return nullptr;
  if (files_.size() >= kMaxOpenFiles) {
    for (auto i = files_.begin(); i != files_.end() && files_.size() >= kMaxOpenFiles * 3 / 4;) {
      i = i->second->pinned ? std::next(i) : files_.erase(i);
    }
  }
  auto f = std::make_shared<PackFile>(std::move(fd));
  files_[pack] = f;
  return f;
}

std::shared_ptr<LocalChunkStore::PackFile> LocalChunkStore::OpenFileOf(uint64_t pack) {
  MutexLock l(files_mu_);
  auto it = files_.find(pack);
  return it == files_.end() ? nullptr : it->second;
}

void LocalChunkStore::ForgetBlob(const Digest& id, uint64_t pack) {
  WriterLock l(mu_);
  if (auto r = recent_.find(id); r != recent_.end() && r->second.pack == pack) recent_.erase(r);
}

void LocalChunkStore::ForgetPack(uint64_t pack) {
  {
    WriterLock l(mu_);
    if (auto it = loose_.find(pack); it != loose_.end()) {
      for (const BlobLocation& b : it->second) {
        auto r = recent_.find(b.id);
        if (r != recent_.end() && r->second.pack == pack) recent_.erase(r);
      }
      loose_.erase(it);
    }
    if (indexed_.contains(pack)) gone_.insert(pack);
  }
  MutexLock l(files_mu_);
  files_.erase(pack);
}

Result<std::vector<LocalChunkStore::PackInfo>> LocalChunkStore::ListPacks() {
  const fs::path dir = root_ / "packs";
  BDN_ASSIGN_OR_RETURN(auto names, ListDirAt(packs_dir_.get(), dir, "chunk store packs"));
  std::vector<PackInfo> out;
  for (const std::string& name : names) {
    auto sealed = pack::ParseHex16Name(name, ".pack");
    auto open = pack::ParseHex16Name(name, ".open");
    if (!sealed && !open) continue;
    struct stat st;
    if (::fstatat(packs_dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    if (!S_ISREG(st.st_mode)) continue;  // set aside by the next LoadLoosePacks
    out.push_back({sealed ? *sealed : *open, static_cast<uint64_t>(st.st_size), MtimeNs(st),
                   sealed.has_value()});
  }
  std::sort(out.begin(), out.end(), [](const PackInfo& a, const PackInfo& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.id < b.id;
  });
  return out;
}

Result<std::vector<BlobLocation>> LocalChunkStore::PackBlobs(uint64_t pack) {
  {
    ReaderLock l(mu_);
    if (auto it = loose_.find(pack); it != loose_.end()) return it->second;
  }
  const fs::path path = PackPath(pack);
  UniqueFd fd(::openat(packs_dir_.get(), path.filename().c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return Err(NotFoundError("pack " + path.string() + ": gone"));
    return Err(ErrnoError("pack " + path.string(), errno));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError("pack " + path.string(), errno));
  return pack::ReadFooter(fd.get(), static_cast<uint64_t>(st.st_size), "pack " + path.string());
}

Status LocalChunkStore::DropPack(uint64_t pack) {
  const fs::path path = PackPath(pack);
  if (!writable_) return PermissionDeniedError("pack " + path.string() + ": read-only store");
  ForgetPack(pack);
  if (::unlinkat(packs_dir_.get(), path.filename().c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoError("pack " + path.string() + ": delete", errno);
  }
  return Status::Ok();
}

// ---- reads ----

Result<bool> LocalChunkStore::Contains(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(std::vector<Digest> missing, FindMissing(std::span<const Digest>(&id, 1)));
  return missing.empty();
}

Result<std::vector<Digest>> LocalChunkStore::FindMissing(std::span<const Digest> ids) {
  // A writer asks: blobs only doomed packs hold count as missing (stored again), and those
  // answered "stored" are claimed before the doom is looked at again (gc_store.h).
  const bool gc_aware = claims_ && claims_->mode() != ClaimMode::kNone;
  if (gc_aware) RefreshDoom();
  std::vector<char> present(ids.size(), 0);
  std::vector<Digest> claimed;
  {
    ReaderLock l(mu_);
    for (size_t k = 0; k < ids.size(); ++k) {
      present[k] = LookupLocked(ids[k], Copies::kLive).has_value();
      if (present[k] && gc_aware) claimed.push_back(ids[k]);
    }
  }
  if (gc_aware && !claimed.empty()) {
    BDN_ASSIGN_OR_RETURN(bool changed, ClaimThenRefreshDoom(claimed));
    if (changed) {
      ReaderLock l(mu_);
      for (size_t k = 0; k < ids.size(); ++k) {
        if (present[k]) present[k] = LookupLocked(ids[k], Copies::kLive).has_value();
      }
    }
  }
  std::vector<Digest> missing;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!present[k]) missing.push_back(ids[k]);
  }
  return missing;
}

Result<BlobSizes> LocalChunkStore::Sizes(std::span<const Digest> ids) {
  BlobSizes out(ids.size());
  bool missed = false;
  auto look = [&] {
    missed = false;
    ReaderLock l(mu_);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (out[k]) continue;
      if (auto b = LookupLocked(ids[k])) {
        out[k] = b->loc.raw_bytes;
      } else {
        missed = true;
      }
    }
  };
  look();
  // Another process may have sealed a pack since this one last looked (as Get does).
  if (missed && RefreshIfChanged()) look();
  return out;
}

Result<std::vector<uint8_t>> LocalChunkStore::Get(const Digest& id) {
  ForgetDeletedPacksNowAndThen();
  std::optional<Status> corrupt;
  bool refreshed = false;
  // Each round reads one copy; a damaged one is set aside and the next is tried.
  for (int round = 0; round < 16; ++round) {
    auto b = Lookup(id);
    if (!b) {
      if (corrupt) return Err(*corrupt);
      if (!refreshed) {
        refreshed = true;
        if (RefreshIfChanged()) continue;
      }
      bool set_aside;
      {
        ReaderLock l(mu_);
        set_aside = bad_ids_.contains(id);
      }
      if (set_aside) {
        return Err(NotFoundError("chunk " + id.ToString() +
                                 ": not in store (a copy found corrupt was set aside; push the "
                                 "data again to repair)")
                       .WithReason(std::string(kSetAsideCorrupt)));
      }
      return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
    }
    auto file = FileOf(b->pack);
    const int open_error = file ? 0 : errno;  // before the path is made: FileOf's open's own
    const fs::path path = PackPath(b->pack, !file || file->sealed.load());
    if (!file && open_error == ENOENT) {
      // Deleted by DropPack (a cache's eviction) in another process since this one looked, or a
      // pack of another process's that was followed (read_others_open_packs) and then went.
      ForgetPack(b->pack);
      ForgetBlob(id, b->pack);
      continue;
    }
    if (!file)
      return Err(ErrnoError("chunk " + id.ToString() + ": open pack " + path.string(), open_error));
    file->read_from.store(true, std::memory_order_relaxed);
    auto bytes = pack::ReadBlob(file->fd(), b->loc, "pack " + path.string());
    if (bytes || bytes.error().code() != StatusCode::kCorruption) return bytes;
    corrupt =
        CorruptionError(bytes.error().message() + "; set aside, push the data again to repair");
    // The Corruption error is returned either way; a copy that could not be set aside is found
    // damaged again by the next read, which tries again.
    Quarantine(*b, bytes.error().message()).IgnoreError();
  }
  if (corrupt) return Err(*corrupt);
  return Err(UnavailableError("chunk " + id.ToString() +
                              ": the packs holding it kept going away while it was read"));
}

std::optional<std::vector<uint8_t>> LocalChunkStore::GetNow(const Digest& id, uint64_t max_bytes) {
  ForgetDeletedPacksNowAndThen();
  auto b = Lookup(id);
  if (!b || b->loc.raw_bytes > max_bytes || b->loc.stored_bytes > max_bytes) return std::nullopt;
  auto file = OpenFileOf(b->pack);
  if (!file) return std::nullopt;
  file->read_from.store(true, std::memory_order_relaxed);
  return pack::ReadBlobNow(file->fd(), b->loc);
}

Result<BlobBatch> LocalChunkStore::GetMany(std::span<const Digest> ids) {
  std::vector<Result<std::vector<uint8_t>>> got(ids.size());
  ParallelFor(ids.size(), kGetManyThreads, [&](size_t k) { got[k] = Get(ids[k]); });
  return CollectBatch(std::move(got));
}

Status LocalChunkStore::Quarantine(const IndexedBlob& b, const std::string& why) {
  {
    WriterLock l(mu_);
    if (!bad_.insert({b.pack, b.loc.offset}).second) return Status::Ok();
    bad_ids_.insert(b.loc.id);
    // Another copy in a loose pack takes its place among the recent ones.
    auto it = recent_.find(b.loc.id);
    if (it != recent_.end() && it->second.pack == b.pack && it->second.loc.offset == b.loc.offset) {
      recent_.erase(it);
      for (const auto& [pack, blobs] : loose_) {
        for (const BlobLocation& loc : blobs) {
          if (loc.id == b.loc.id && !bad_.contains({pack, loc.offset})) {
            recent_.try_emplace(b.loc.id, IndexedBlob{pack, loc});
          }
        }
      }
    }
  }
  if (!writable_) return Status::Ok();
  const fs::path q = root_ / "quarantine";
  BDN_ASSIGN_OR_RETURN(
      UniqueFd fd, OpenRegularFileAt(root_dir_.get(), "quarantine", O_WRONLY | O_APPEND | O_CREAT,
                                     "chunk store quarantine " + q.string()));
  std::string line =
      Hex16(b.pack) + " " + std::to_string(b.loc.offset) + " " + b.loc.id.Hex() + "\n";
  (void)why;
  ssize_t n = ::write(fd.get(), line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    return ErrnoError("chunk store quarantine " + q.string(), n < 0 ? errno : ENOSPC);
  }
  return Status::Ok();
}

Result<std::optional<StoredBlob>> LocalChunkStore::Locate(const Digest& id) {
  auto b = Lookup(id);
  if (!b && RefreshIfChanged()) b = Lookup(id);
  if (!b) return std::optional<StoredBlob>();
  // A pack being written, here or by another process, is named as such.
  auto file = OpenFileOf(b->pack);
  const bool sealed = file == nullptr || file->sealed.load();
  return std::optional<StoredBlob>(StoredBlob{PackPath(b->pack, sealed), b->loc});
}

// ---- writes ----

Result<std::unique_ptr<LocalChunkStore::OpenPack>> LocalChunkStore::CreatePack() {
  for (;;) {
    const uint64_t id = pack::RandomId();
    const std::string fresh = Hex16(id) + ".new";
    UniqueFd fd(::openat(packs_dir_.get(), fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                         kPrivateFileMode));
    if (!fd) {
      if (errno == EEXIST) continue;
      return Err(ErrnoError("chunk store " + root_.string() + ": create pack", errno));
    }
    ::fchmod(fd.get(), kPrivateFileMode);  // exactly 0600, whatever the umask
    // Locked before it has its .open name, so that no other process takes it for a dead
    // writer's pack.
    ::flock(fd.get(), LOCK_EX);
    auto fail = [&](Status s) {
      ::unlinkat(packs_dir_.get(), fresh.c_str(), 0);
      return Err(std::move(s));
    };
    auto writer = pack::PackWriter::Start(fd.get(), "pack " + PackPath(id, false).string());
    if (!writer) return fail(writer.error());
    if (::renameat2(packs_dir_.get(), fresh.c_str(), packs_dir_.get(),
                    PackPath(id, false).filename().c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) {
        ::unlinkat(packs_dir_.get(), fresh.c_str(), 0);
        continue;
      }
      return fail(ErrnoError("chunk store " + root_.string() + ": create pack", errno));
    }
    auto p = std::make_unique<OpenPack>();
    p->id = id;
    p->file = std::make_shared<PackFile>(std::move(fd), true);
    p->writer.emplace(std::move(*writer));
    {
      WriterLock l(mu_);
      open_ids_.insert(id);
    }
    {
      MutexLock l(files_mu_);
      files_[id] = p->file;
    }
    return p;
  }
}

Result<LocalChunkStore::OpenPack*> LocalChunkStore::AcquirePack(bool streaming) {
  MutexLock l(pool_mu_);
  for (;;) {
    // Packs held by uploads (streaming) do not count: a slow upload never makes Puts wait.
    // Packs another process created before a fork are its own to write (OpenPack::owner).
    std::erase_if(open_, [](const auto& p) { return p->owner != ::getpid() && !p->in_use; });
    int active = 0;
    for (auto& p : open_) {
      if (p->retiring) continue;
      if (!p->in_use) {
        p->in_use = true;
        p->streaming = streaming;
        return p.get();
      }
      if (!p->streaming) ++active;
    }
    if (streaming || active < std::max(1, options_.max_open_packs)) {
      BDN_ASSIGN_OR_RETURN(auto p, CreatePack());
      p->in_use = true;
      p->streaming = streaming;
      open_.push_back(std::move(p));
      return open_.back().get();
    }
    pool_cv_.wait(l.native());
  }
}

void LocalChunkStore::ReleasePack(OpenPack* p) {
  MutexLock l(pool_mu_);
  p->in_use = false;
  p->streaming = false;
  pool_cv_.notify_all();
}

Status LocalChunkStore::SealPack(OpenPack& p, bool sync) {
  const std::string open_name = PackPath(p.id, false).filename().string();
  auto forget = [&] {
    {
      WriterLock l(mu_);
      open_ids_.erase(p.id);
    }
    MutexLock l(files_mu_);
    files_.erase(p.id);
  };
  if (p.writer->blobs().empty()) {
    ::unlinkat(packs_dir_.get(), open_name.c_str(), 0);
    forget();
    return Status::Ok();
  }
  const std::string what = "pack " + PackPath(p.id).string();
  BDN_RETURN_IF_ERROR(p.writer->Seal());
  if (sync && options_.durability == Durability::kDurable && ::fdatasync(p.file->fd()) != 0) {
    return ErrnoError(what + ": fdatasync", errno);
  }
  if (::renameat(packs_dir_.get(), open_name.c_str(), packs_dir_.get(),
                 PackPath(p.id).filename().c_str()) != 0) {
    return ErrnoError(what + ": rename", errno);
  }
  p.file->sealed = true;
  p.file->pinned = false;
  if (struct stat st; ::fstat(p.file->fd(), &st) == 0) {
    sealed_bytes_ += static_cast<uint64_t>(st.st_size);
  }
  ++sealed_packs_;
  {
    WriterLock l(mu_);
    open_ids_.erase(p.id);
    loose_[p.id] = p.writer->blobs();
  }
  MutexLock l(pool_mu_);
  dir_dirty_ = true;
  return Status::Ok();
}

Status LocalChunkStore::SyncPacksDir() {
  {
    MutexLock l(pool_mu_);
    if (!dir_dirty_) return Status::Ok();
    dir_dirty_ = false;
  }
  if (options_.durability == Durability::kNone) return Status::Ok();
  if (::fsync(packs_dir_.get()) != 0) {
    int e = errno;
    MutexLock l(pool_mu_);
    dir_dirty_ = true;
    return ErrnoError("chunk store " + root_.string() + ": packs: fsync", e);
  }
  return Status::Ok();
}

Status LocalChunkStore::Put(const Digest& id, std::span<const uint8_t> data) {
  const std::string chunk = "chunk " + id.ToString();
  if (!VerifyChunk(id, data).ok())
    return InvalidArgumentError(chunk + ": bytes do not match the id");
  if (!writable_) {
    return PermissionDeniedError(chunk + ": chunk store " + root_.string() + " is read-only");
  }
  if (claims_->mode() != ClaimMode::kNone) {
    auto claimed = ClaimThenRefreshDoom(std::span<const Digest>(&id, 1));
    if (!claimed) return Status(claimed.error().code(), chunk + ": " + claimed.error().message());
  }
  return NoteFullDisk(StatusOf(AppendBlob(id, data, chunk)));
}

Status LocalChunkStore::NoteFullDisk(Status s) {
  // The store's writes report ENOSPC and EDQUOT, and only those, as FailedPrecondition
  // (ErrnoError).
  if (s.code() == StatusCode::kFailedPrecondition) {
    disk_full_ = true;
    ++full_disk_count_;
  }
  return s;
}

void LocalChunkStore::KeepUnsealed(std::unique_ptr<OpenPack> p) {
  // Its records stay this process's (recent_ names them): the next Sync, or the destructor,
  // seals it again, and no new writer takes it.
  MutexLock l(pool_mu_);
  p->in_use = false;
  p->streaming = false;
  p->retiring = true;
  open_.push_back(std::move(p));
  pool_cv_.notify_all();
}

Result<PutOutcome> LocalChunkStore::AppendBlob(const Digest& id, std::span<const uint8_t> data,
                                               const std::string& chunk) {
  std::optional<PendingPuts::Turn> turn = [&] {
    WriterLock l(mu_);
    return pending_.WaitOrBegin(l.native(), id, [&]() REQUIRES(mu_) {
      return LookupLocked(id, Copies::kLive).has_value();
    });
  }();
  if (!turn) return PutOutcome::kAlreadyStored;

  pack::EncodedBlob enc = pack::EncodeBlob(data, options_.codec);
  std::span<const uint8_t> stored = enc.codec == pack::Codec::kNone ? data : enc.stored;
  auto acquired = AcquirePack();
  if (!acquired) {
    return Err(Status(acquired.error().code(), chunk + ": " + acquired.error().message()));
  }
  OpenPack* p = *acquired;
  auto loc = p->writer->Append(id, data.size(), enc.codec, stored);
  if (!loc) {
    ReleasePack(p);
    return Err(Status(loc.error().code(), chunk + ": " + loc.error().message()));
  }
  BDN_RETURN_IF_ERROR(FinishAppend(p, id, *loc, chunk));
  return PutOutcome::kStored;
}

Status LocalChunkStore::FinishAppend(OpenPack* p, const Digest& id, const BlobLocation& loc,
                                     const std::string& chunk) {
  {
    WriterLock l(mu_);
    recent_[id] = IndexedBlob{p->id, loc};
  }
  const uint64_t bytes = p->writer->bytes();
  if (options_.durability == Durability::kDurable && bytes - p->written_back >= kWritebackBytes) {
    ::sync_file_range(p->file->fd(), static_cast<off_t>(p->written_back),
                      static_cast<off_t>(bytes - p->written_back), SYNC_FILE_RANGE_WRITE);
    p->written_back = bytes;
  }
  if (bytes < options_.pack_target_bytes) {
    ReleasePack(p);
    return Status::Ok();
  }
  // Full: seal it here (one fdatasync); the other writers carry on with the other packs.
  std::unique_ptr<OpenPack> full;
  {
    MutexLock l(pool_mu_);
    auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& o) { return o.get() == p; });
    full = std::move(*it);
    open_.erase(it);
    ++sealing_;
  }
  Status s = SealPack(*full, true);
  {
    MutexLock l(pool_mu_);
    --sealing_;
    pool_cv_.notify_all();
  }
  if (!s.ok()) {
    KeepUnsealed(std::move(full));
    return Status(s.code(), chunk + ": " + s.message());
  }
  return Status::Ok();
}

Status LocalChunkStore::Sync() {
  MutexLock sync_lock(sync_mu_);
  std::vector<std::unique_ptr<OpenPack>> take;
  std::vector<std::shared_ptr<PackFile>> streamed;
  {
    MutexLock l(pool_mu_);
    // A pack an upload holds (StartPut) stays open: its records before the upload's are made
    // durable by an fdatasync below, and the upload's is not committed to by anyone yet.
    std::erase_if(open_, [](const auto& p) { return p->owner != ::getpid() && !p->in_use; });
    for (auto& p : open_) p->retiring = !(p->in_use && p->streaming);
    pool_cv_.wait(l.native(), [&]() REQUIRES(pool_mu_) {
      return sealing_ == 0 && std::none_of(open_.begin(), open_.end(),
                                           [](const auto& p) { return p->retiring && p->in_use; });
    });
    for (auto it = open_.begin(); it != open_.end();) {
      if (!(*it)->retiring) {
        (*it)->synced = true;
        if (options_.durability == Durability::kDurable) streamed.push_back((*it)->file);
        ++it;
      } else if ((*it)->retiring) {
        take.push_back(std::move(*it));
        it = open_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Status first;
  for (auto& p : take) {
    Status s = NoteFullDisk(SealPack(*p, true));
    if (s.ok()) continue;
    if (first.ok()) first = s;
    KeepUnsealed(std::move(p));
  }
  for (auto& f : streamed) {
    if (::fdatasync(f->fd()) != 0 && first.ok()) {
      first = ErrnoError("chunk store " + root_.string() + ": pack being uploaded to: fdatasync",
                         errno);
    }
  }
  if (!streamed.empty()) {
    MutexLock l(pool_mu_);
    dir_dirty_ = true;  // their .open names must be durable too
  }
  BDN_RETURN_IF_ERROR(first);
  BDN_RETURN_IF_ERROR(SyncPacksDir());
  // Derived data: if it cannot be written, the packs stay readable from their footers.
  PublishIndex(false).IgnoreError();
  return Status::Ok();
}

Result<ChunkStore::Discarded> LocalChunkStore::DiscardAfterFullDisk() {
  Discarded out;
  out.disk_full = disk_full_;
  out.sealed_packs_kept = sealed_packs_;
  out.sealed_bytes_kept = sealed_bytes_;
  if (!disk_full_ || !writable_) return out;
  // Only packs no other process can see (an .open pack is found by others only once it is
  // sealed, or recovered once its writer is gone) and no commit can name (no Sync covered them).
  std::vector<std::unique_ptr<OpenPack>> take;
  {
    MutexLock l(pool_mu_);
    for (auto it = open_.begin(); it != open_.end();) {
      const OpenPack& p = **it;
      if (p.owner == ::getpid() && !p.in_use && !p.synced) {
        take.push_back(std::move(*it));
        it = open_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Status first;
  std::unordered_set<Digest> dropped;
  for (auto& p : take) {
    const fs::path path = PackPath(p->id, false);
    struct stat st;
    const uint64_t bytes = ::fstat(p->file->fd(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (::unlinkat(packs_dir_.get(), path.filename().c_str(), 0) != 0 && errno != ENOENT) {
      if (first.ok()) first = ErrnoError("pack " + path.string() + ": delete", errno);
      KeepUnsealed(std::move(p));
      continue;
    }
    ++out.packs;
    out.bytes += bytes;
    {
      WriterLock l(mu_);
      open_ids_.erase(p->id);
      for (const BlobLocation& b : p->writer->blobs()) {
        auto r = recent_.find(b.id);
        if (r != recent_.end() && r->second.pack == p->id) {
          recent_.erase(r);
          dropped.insert(b.id);
        }
      }
    }
    MutexLock l(files_mu_);
    files_.erase(p->id);  // with the last reader's reference goes the space
  }
  if (!dropped.empty()) {
    // recent_ keeps one copy per id: another loose pack may hold one (a doomed copy that was
    // stored again).
    WriterLock l(mu_);
    for (const auto& [pack, blobs] : loose_) {
      for (const BlobLocation& loc : blobs) {
        if (dropped.contains(loc.id) && !bad_.contains({pack, loc.offset})) {
          recent_.try_emplace(loc.id, IndexedBlob{pack, loc});
        }
      }
    }
  }
  if (out.packs > 0 && options_.durability == Durability::kDurable) {
    // The deletions need not survive a power cut (the next open recovers such a pack's records
    // as a killed push's), so a failure here is no failure of the discard.
    ::fsync(packs_dir_.get());
  }
  BDN_RETURN_IF_ERROR(first);
  return out;
}

// ---- uploads (StartPut) ----

// Takes an upload: a blob of up to kHeldBytes (every chunk: the chunker's bound is 256 KiB) is
// held in memory and stored by Commit as a Put stores it, compressed where the codec saves;
// a larger one (a manifest or chunk index past that size) is streamed raw into a pack this writer
// holds: payload after a reserved header slot, the header written by Commit once the bytes hash
// to the id (PackWriter::BeginRecord).
class LocalChunkStore::PackBlobWriter : public HashingBlobWriter {
 public:
  static constexpr size_t kHeldBytes = 256 * 1024;

  PackBlobWriter(LocalChunkStore& store, const Digest& id, bool already)
      : HashingBlobWriter(id), store_(store), already_(already) {}
  ~PackBlobWriter() override { Drop(); }

 private:
  Status Keep(std::span<const uint8_t> piece) override {
    if (already_) return Status::Ok();
    const std::string chunk = "chunk " + id_.ToString();
    if (spent_) return InternalError(chunk + ": upload failed earlier");
    if (pack_ == nullptr && held_.size() + piece.size() <= kHeldBytes) {
      held_.insert(held_.end(), piece.begin(), piece.end());
      return Status::Ok();
    }
    if (pack_ == nullptr) {
      auto p = store_.AcquirePack(true);
      if (!p) return Fail(Status(p.error().code(), chunk + ": " + p.error().message()));
      pack_ = *p;
      if (Status s = pack_->writer->BeginRecord(); !s.ok()) {
        return Fail(Status(s.code(), chunk + ": " + s.message()));
      }
      if (Status s = pack_->writer->AppendPayload(held_); !s.ok()) {
        return Fail(Status(s.code(), chunk + ": " + s.message()));
      }
      held_ = {};
    }
    if (Status s = pack_->writer->AppendPayload(piece); !s.ok()) {
      return Fail(Status(s.code(), chunk + ": " + s.message()));
    }
    return Status::Ok();
  }
  void Drop() override {
    held_ = {};
    if (pack_ == nullptr) return;
    if (pack_->writer->streaming()) pack_->writer->AbandonRecord();
    store_.ReleasePack(pack_);
    pack_ = nullptr;
  }
  Result<PutOutcome> Store() override {
    if (already_) return PutOutcome::kAlreadyStored;
    if (spent_) return Err(InternalError("chunk " + id_.ToString() + ": upload failed earlier"));
    if (pack_ == nullptr) {  // held whole (or no bytes: the empty blob); StartPut claimed it
      if (store_.Lookup(id_, Copies::kLive)) return PutOutcome::kAlreadyStored;
      auto stored = store_.AppendBlob(id_, held_, "chunk " + id_.ToString());
      held_ = {};
      if (!stored) return Err(store_.NoteFullDisk(stored.error()));
      return stored;
    }
    if (store_.Lookup(id_, Copies::kLive)) {  // stored by another writer meanwhile
      Drop();
      return PutOutcome::kAlreadyStored;
    }
    OpenPack* p = pack_;
    pack_ = nullptr;
    auto loc = p->writer->FinishRecord(id_);
    if (!loc) {
      store_.ReleasePack(p);
      return Err(store_.NoteFullDisk(
          Status(loc.error().code(), "chunk " + id_.ToString() + ": " + loc.error().message())));
    }
    {
      MutexLock l(store_.pool_mu_);
      p->streaming = false;  // from here on an ordinary append
    }
    BDN_RETURN_IF_ERROR(
        store_.NoteFullDisk(store_.FinishAppend(p, id_, *loc, "chunk " + id_.ToString())));
    return PutOutcome::kStored;
  }
  Status Fail(Status s) {
    spent_ = true;
    Drop();
    return store_.NoteFullDisk(std::move(s));
  }

  LocalChunkStore& store_;
  const bool already_;  // a good copy was stored when the upload began: nothing is written
  bool spent_ = false;
  std::vector<uint8_t> held_;  // the blob's bytes so far, while it fits kHeldBytes
  OpenPack* pack_ = nullptr;
};

Result<std::unique_ptr<BlobWriter>> LocalChunkStore::StartPut(const Digest& id) {
  if (!writable_) {
    return Err(PermissionDeniedError("chunk " + id.ToString() + ": chunk store " + root_.string() +
                                     " is read-only"));
  }
  if (claims_->mode() != ClaimMode::kNone) {
    BDN_RETURN_IF_ERROR(StatusOf(ClaimThenRefreshDoom(std::span<const Digest>(&id, 1))));
  }
  return std::unique_ptr<BlobWriter>(
      std::make_unique<PackBlobWriter>(*this, id, Lookup(id, Copies::kLive).has_value()));
}

// ---- the index ----

void LocalChunkStore::LooseBlobs(std::vector<IndexedBlob>& blobs,
                                 std::vector<uint64_t>& packs) const {
  ReaderLock l(mu_);
  for (const auto& [pack, locs] : loose_) {
    packs.push_back(pack);
    for (const BlobLocation& b : locs) blobs.push_back({pack, b});
  }
}

bool LocalChunkStore::TableDue() const {
  if (loose_.size() >= options_.loose_packs_per_table) return true;
  size_t blobs = 0;
  for (const auto& [pack, locs] : loose_) blobs += locs.size();
  return blobs >= options_.loose_blobs_per_table;
}

Status LocalChunkStore::PublishIndex(bool force) {
  if (!writable_ || !options_.index_tables) return Status::Ok();
  {
    ReaderLock l(mu_);
    if (loose_.empty() || (!force && !TableDue())) return Status::Ok();
  }
  const fs::path dir = root_ / "index";
  BDN_ASSIGN_OR_RETURN(UniqueFd lock, TakeIndexLock(index_dir_.get(), dir / "lock"));
  // Temporary tables are written under the lock: any left now belong to a dead writer.
  if (auto names = ListDirAt(index_dir_.get(), dir, "chunk store index")) {
    for (const auto& n : *names) {
      if (n.starts_with(".tmp-")) ::unlink((dir / n).c_str());
    }
  }
  MutexLock refresh(refresh_mu_);
  BDN_RETURN_IF_ERROR(LoadTables());
  std::vector<IndexedBlob> blobs;
  std::vector<uint64_t> packs;
  LooseBlobs(blobs, packs);
  if (packs.empty()) return Status::Ok();
  const bool durable = options_.durability == Durability::kDurable;
  BDN_RETURN_IF_ERROR(
      StatusOf(pack::WriteIndexTable(dir, std::move(blobs), std::move(packs), durable)));
  if (durable) BDN_RETURN_IF_ERROR(FsyncDir(dir));
  BDN_RETURN_IF_ERROR(LoadTables());
  return MergeTables();
}

Status LocalChunkStore::MergeTables() {
  const fs::path dir = root_ / "index";
  const bool durable = options_.durability == Durability::kDurable;
  for (;;) {
    std::vector<std::shared_ptr<const pack::IndexTable>> tables;
    {
      ReaderLock l(mu_);
      tables = tables_;
    }
    if (tables.size() < 2) return Status::Ok();
    std::sort(tables.begin(), tables.end(),
              [](const auto& a, const auto& b) { return a->size() < b->size(); });
    const auto& a = tables[0];
    const auto& b = tables[1];
    // Tables of similar size merge (so each entry is rewritten O(log n) times); past 8 tables the
    // two smallest merge whatever their sizes.
    if (a->size() * 2 < b->size() && tables.size() <= 8) return Status::Ok();
    std::vector<IndexedBlob> blobs;
    blobs.reserve(a->size() + b->size());
    std::vector<uint64_t> packs;
    for (const auto* t : {a.get(), b.get()}) {
      for (uint64_t i = 0; i < t->size(); ++i) blobs.push_back(t->At(i));
      packs.insert(packs.end(), t->packs().begin(), t->packs().end());
    }
    BDN_RETURN_IF_ERROR(
        StatusOf(pack::WriteIndexTable(dir, std::move(blobs), std::move(packs), durable)));
    if (durable) BDN_RETURN_IF_ERROR(FsyncDir(dir));
    ::unlink(a->path().c_str());
    ::unlink(b->path().c_str());
    BDN_RETURN_IF_ERROR(LoadTables());
  }
}

Result<IndexRebuildReport> LocalChunkStore::RebuildIndex() {
  if (!writable_) {
    return Err(PermissionDeniedError("chunk store " + root_.string() + " is read-only"));
  }
  BDN_RETURN_IF_ERROR(Sync());
  const fs::path dir = root_ / "index";
  BDN_ASSIGN_OR_RETURN(UniqueFd lock, TakeIndexLock(index_dir_.get(), dir / "lock"));
  MutexLock refresh(refresh_mu_);
  IndexRebuildReport report;
  // Every pack's footer, read again; packs without a valid one are recovered.
  {
    WriterLock l(mu_);
    indexed_.clear();
    tables_.clear();
    loose_.clear();
    for (auto it = recent_.begin(); it != recent_.end();) {
      it = open_ids_.contains(it->second.pack) ? std::next(it) : recent_.erase(it);
    }
  }
  others_open_.clear();  // followed again from their start
  const uint64_t recovered_before = packs_recovered_;
  BDN_RETURN_IF_ERROR(LoadLoosePacks());
  report.packs_repaired = packs_recovered_ - recovered_before;
  BDN_ASSIGN_OR_RETURN(auto old_tables, ListDirAt(index_dir_.get(), dir, "chunk store index"));
  std::vector<IndexedBlob> blobs;
  std::vector<uint64_t> packs;
  LooseBlobs(blobs, packs);
  report.packs = packs.size();
  report.blobs = blobs.size();
  const bool durable = options_.durability == Durability::kDurable;
  if (!packs.empty()) {
    BDN_RETURN_IF_ERROR(
        StatusOf(pack::WriteIndexTable(dir, std::move(blobs), std::move(packs), durable)));
  }
  for (const auto& n : old_tables) {
    if (pack::ParseHex16Name(n, ".idx") || n.starts_with(".tmp-")) {
      ::unlink((dir / n).c_str());
      if (!n.starts_with(".tmp-")) ++report.tables_replaced;
    }
  }
  if (durable) BDN_RETURN_IF_ERROR(FsyncDir(dir));
  BDN_RETURN_IF_ERROR(LoadTables());
  return report;
}

Result<StoreStats> LocalChunkStore::Stats() {
  StoreStats st;
  BDN_ASSIGN_OR_RETURN(auto names,
                       ListDirAt(packs_dir_.get(), root_ / "packs", "chunk store packs"));
  for (const auto& n : names) {
    if (!pack::ParseHex16Name(n, ".pack")) continue;
    const fs::path p = root_ / "packs" / n;
    UniqueFd fd(
        ::openat(packs_dir_.get(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT) continue;
      return Err(ErrnoError("pack " + p.string(), errno));
    }
    struct stat s;
    ::fstat(fd.get(), &s);
    auto blobs = pack::ReadFooter(fd.get(), static_cast<uint64_t>(s.st_size), "pack " + p.string());
    if (!blobs) return Err(blobs.error());
    ++st.packs;
    st.pack_bytes += static_cast<uint64_t>(s.st_size);
    for (const BlobLocation& b : *blobs) {
      ++st.blobs;
      st.raw_bytes += b.raw_bytes;
      st.stored_bytes += b.stored_bytes;
      if (b.codec == pack::Codec::kZstd) ++st.zstd_blobs;
    }
  }
  ReaderLock l(mu_);
  st.index_tables = tables_.size();
  return st;
}

// ---- garbage collection ----

Result<bool> LocalChunkStore::ClaimThenRefreshDoom(std::span<const Digest> ids) {
  BDN_RETURN_IF_ERROR(NoteFullDisk(claims_->Record(ids)));
  return RefreshDoom();
}

bool LocalChunkStore::RefreshDoom() {
  if (!claims_ || claims_->mode() == ClaimMode::kNone) return false;
  auto stamp_of = [&]() -> std::string {
    struct stat st;
    if (::fstatat(gc_dir_.get(), "doomed", &st, AT_SYMLINK_NOFOLLOW) != 0) return "";
    return std::to_string(st.st_ino) + ":" + std::to_string(MtimeNs(st)) + ":" +
           std::to_string(st.st_size);
  };
  MutexLock g(doom_mu_);
  std::string stamp = stamp_of();
  if (stamp == doom_stamp_) return false;
  std::unordered_set<uint64_t> packs;
  if (!stamp.empty()) {
    std::istringstream in(ReadSmallFileAt(gc_dir_.get(), "doomed"));
    std::string line;
    while (std::getline(in, line)) {
      if (auto id = pack::ParseHex16Name(line, "")) packs.insert(*id);
    }
  }
  {
    WriterLock l(mu_);
    doomed_ = std::move(packs);
  }
  doom_stamp_ = stamp;
  return true;
}

Result<std::unique_ptr<StoreHold>> LocalChunkStore::HoldForCommit() {
  if (!writable_ || claims_->mode() == ClaimMode::kNone) return std::make_unique<StoreHold>();
  const fs::path path = root_ / "gc" / "lock";
  UniqueFd fd = LockAt(gc_dir_.get(), "lock", LOCK_SH);
  if (!fd) return Err(ErrnoError("chunk store gc lock " + path.string(), errno));
  // No sweep deletes a pack while the lock is held: what is on disk now stays until the commit.
  ForgetPacksGoneFromDisk();
  return std::unique_ptr<StoreHold>(new FlockHold(std::move(fd)));
}

void LocalChunkStore::ForgetPacksGoneFromDisk() {
  std::vector<uint64_t> known;
  {
    ReaderLock l(mu_);
    for (uint64_t p : indexed_) {
      if (!gone_.contains(p)) known.push_back(p);
    }
    for (const auto& [p, blobs] : loose_) known.push_back(p);
  }
  {
    MutexLock l(files_mu_);
    for (const auto& [p, file] : files_) known.push_back(p);
  }
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  for (uint64_t p : known) {
    bool gone = true;
    for (bool sealed : {true, false}) {
      struct stat st;
      const std::string name = Hex16(p) + (sealed ? ".pack" : ".open");
      // Any answer but "no such file" (an I/O error, say) keeps the pack: this only forgets.
      if (::fstatat(packs_dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ||
          errno != ENOENT) {
        gone = false;
        break;
      }
    }
    if (gone) ForgetPack(p);
  }
}

Result<std::unique_ptr<StoreHold>> LocalChunkStore::HoldForSweep() {
  const fs::path path = root_ / "gc" / "lock";
  UniqueFd fd = LockAt(gc_dir_.get(), "lock", LOCK_EX);
  if (!fd) return Err(ErrnoError("chunk store gc lock " + path.string(), errno));
  return std::unique_ptr<StoreHold>(new FlockHold(std::move(fd)));
}

Result<std::unique_ptr<StoreHold>> LocalChunkStore::BeginGc() {
  const std::string what = "chunk store " + root_.string();
  if (!writable_) return Err(PermissionDeniedError(what + " is read-only"));
  if (claims_->mode() == ClaimMode::kNone) {
    return Err(FailedPreconditionError(what + ": not opened for garbage collection"));
  }
  const fs::path path = root_ / "gc" / "running";
  UniqueFd fd = LockAt(gc_dir_.get(), "running", LOCK_EX | LOCK_NB);
  if (!fd) {
    if (errno != EWOULDBLOCK) return Err(ErrnoError(what + ": gc lock " + path.string(), errno));
    std::istringstream in(ReadSmallFileAt(gc_dir_.get(), "running"));
    std::string pid;
    in >> pid;
    return Err(ConflictError(what + ": another gc is running" +
                             (pid.empty() ? std::string() : " (pid " + pid + ")")));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) == 0) (void)::pwrite(fd.get(), pid.data(), pid.size(), 0);
  return std::unique_ptr<StoreHold>(new FlockHold(std::move(fd)));
}

Result<std::vector<GcPack>> LocalChunkStore::ListSealedPacks(uint64_t* skipped) {
  BDN_ASSIGN_OR_RETURN(auto infos, ListPacks());
  std::vector<GcPack> out;
  for (const PackInfo& info : infos) {
    if (!info.sealed) continue;
    auto blobs = PackBlobs(info.id);
    if (!blobs) {
      if (blobs.error().code() == StatusCode::kNotFound) continue;  // deleted meanwhile
      if (blobs.error().code() == StatusCode::kCorruption) {
        if (skipped) ++*skipped;
        continue;
      }
      return Err(blobs.error());
    }
    out.push_back(GcPack{info.id, info.bytes, std::move(*blobs)});
  }
  return out;
}

bool LocalChunkStore::IsQuarantined(uint64_t pack, uint64_t offset) {
  ReaderLock l(mu_);
  return bad_.contains({pack, offset});
}

namespace {

// Whether a file of the GC's (the doom reserve, the doom) may be written through: a regular file
// of this user with no other name. A hard link (a `cp -al` copy of the store shares every inode
// with the original) or anything else is replaced, never written.
bool IsOwnSoleFile(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == ::geteuid();
}

}  // namespace

void LocalChunkStore::EnsureDoomReserve() {
  if (!writable_ || !gc_dir_) return;
  struct stat st;
  if (::fstatat(gc_dir_.get(), kDoomReserve, &st, AT_SYMLINK_NOFOLLOW) == 0 && IsOwnSoleFile(st) &&
      static_cast<uint64_t>(st.st_size) >= kDoomReserveBytes) {
    return;
  }
  const fs::path path = root_ / "gc" / kDoomReserve;
  // A fixed temporary name: processes opening the store at once each fill it whole and rename
  // it; a rename that finds it gone (another's went first) fails harmlessly. Whatever is at that
  // name goes first (the writer opens it with O_TRUNC, which would cut another name's file), and
  // the rename replaces whatever is at the reserve's name without writing into it.
  const std::string tmp = std::string(".") + kDoomReserve + ".tmp";
  ::unlinkat(gc_dir_.get(), tmp.c_str(), 0);
  auto w = AtomicFileWriter::Create(path, "gc doom reserve " + path.string(), {.tmp_name = tmp});
  if (!w) return;
  // Blocks allocated, not a hole: writing into them later needs no free space.
  if (::fallocate(w->fd(), 0, 0, static_cast<off_t>(kDoomReserveBytes)) != 0) {
    if (errno != EOPNOTSUPP) return;  // a full disk: the next open tries again
    std::vector<uint8_t> zeros(kDoomReserveBytes, 0);
    if (!w->Append(zeros).ok()) return;
  }
  // Best effort, as the whole reserve: without it a GC on a full disk fails as before.
  w->Commit().IgnoreError();
}

Status LocalChunkStore::PublishDoom(std::span<const uint64_t> packs) {
  if (!writable_) return PermissionDeniedError("chunk store " + root_.string() + " is read-only");
  std::string text;
  for (uint64_t p : packs) text += Hex16(p) + "\n";
  const fs::path path = root_ / "gc" / "doomed";
  const std::string what = "gc doom " + path.string();
  // A doom that is the front of the one published (a GC on a full disk falling back to the packs
  // it deletes, which it doomed first), or all of it (the sweep publishing its doom again), is
  // cut in place: no new block. A reader racing the cut
  // reads the old doom, or its front and maybe lines of the rest (a torn line names no pack):
  // never fewer packs than the new doom.
  if (UniqueFd cur{
          ::openat(gc_dir_.get(), "doomed", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)}) {
    struct stat st;
    if (::fstat(cur.get(), &st) == 0 && IsOwnSoleFile(st) &&
        static_cast<uint64_t>(st.st_size) >= text.size() &&
        static_cast<uint64_t>(st.st_size) <= kDoomReserveBytes * 64) {
      std::vector<uint8_t> old(static_cast<size_t>(st.st_size));
      auto n = ReadFull(cur.get(), old, what + ": read");
      if (n && *n == old.size() &&
          std::string_view(reinterpret_cast<const char*>(old.data()), old.size())
              .starts_with(text) &&
          ::ftruncate(cur.get(), static_cast<off_t>(text.size())) == 0) {
        RefreshDoom();
        return Status::Ok();
      }
    }
  }
  // One GC at a time (BeginGc's lock): a fixed temporary name. On a full disk the doom, which
  // must be published before the GC frees anything, goes into the space of the reserve: renamed
  // to the temporary name first (whatever another process puts at the reserve's name later is
  // not this doom), written over, cut to the doom's length, renamed into place. A reserve that is
  // not this user's sole regular file (a hard link, say) is not written: it goes, and the doom
  // is written anew.
  if (::renameat(gc_dir_.get(), kDoomReserve, gc_dir_.get(), ".doomed.tmp") == 0) {
    UniqueFd fd(
        ::openat(gc_dir_.get(), ".doomed.tmp", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st;
    if (fd && ::fstat(fd.get(), &st) == 0 && IsOwnSoleFile(st) &&
        static_cast<uint64_t>(st.st_size) >= text.size() &&
        PWriteAll(fd.get(), AsBytes(text), 0, what + ": write").ok() &&
        ::ftruncate(fd.get(), static_cast<off_t>(text.size())) == 0 &&
        ::renameat(gc_dir_.get(), ".doomed.tmp", gc_dir_.get(), "doomed") == 0) {
      RefreshDoom();
      return Status::Ok();
    }
    // Too small for this doom, not ours alone, or a failed step: written anew below.
  }
  // The temporary name is opened with O_TRUNC: whatever is there (the reserve just renamed, a
  // file a killed GC left, another name's inode) goes first, so that nothing else is cut.
  ::unlinkat(gc_dir_.get(), ".doomed.tmp", 0);
  auto written = WriteFileAtomically(path, AsBytes(text), what, {.tmp_name = ".doomed.tmp"});
  if (!written) return written.error();
  RefreshDoom();
  return Status::Ok();
}

Status LocalChunkStore::ClearDoom() {
  const fs::path path = root_ / "gc" / "doomed";
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("gc doom " + path.string() + ": delete", errno);
  }
  RefreshDoom();
  // For the next GC: this one has freed space (or failed, and the next open tries again).
  EnsureDoomReserve();
  return Status::Ok();
}

Result<std::vector<Digest>> LocalChunkStore::LiveClaims() {
  if (claims_->mode() == ClaimMode::kMemory) return claims_->InMemory();
  std::vector<Digest> out;
  const fs::path dir = root_ / "gc" / "claims";
  int claims_dir = claims_dir_.get();
  UniqueFd read_only;
  if (claims_dir < 0) {
    // A store opened read-only (a read-only view of it: gc --dry-run, from an attacking helper,
    // failed "Bad file descriptor"): the claims of writers through another view are read where
    // they are, and none is removed.
    read_only = UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!read_only) {
      if (errno == ENOENT) return out;
      return Err(ErrnoError("gc claims " + dir.string(), errno));
    }
    claims_dir = read_only.get();
  }
  BDN_ASSIGN_OR_RETURN(auto names, ListDirAt(claims_dir, dir, "gc claims"));
  for (const std::string& name : names) {
    if (name.ends_with(".new")) {
      // A process that died between creating its claims file and naming it: nothing in it.
      UniqueFd fd(
          ::openat(claims_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (fd && IsDeadWritersNewFile(fd.get())) ::unlinkat(claims_dir, name.c_str(), 0);
      continue;
    }
    if (!name.ends_with(".claims")) continue;
    const fs::path path = dir / name;
    auto opened = OpenRegularFileAt(claims_dir, name, O_RDONLY, "gc claims " + path.string());
    if (!opened) {
      if (opened.error().code() == StatusCode::kNotFound) continue;
      return Err(opened.error());
    }
    UniqueFd fd = std::move(*opened);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      // Its process is gone: it commits nothing any more.
      ::unlink(path.c_str());
      continue;
    }
    // Whole ids only: the file's writer may be appending one right now.
    std::vector<uint8_t> buf(size_t{2048} * Digest::kSize);
    for (;;) {
      BDN_ASSIGN_OR_RETURN(size_t n,
                           ReadFull(fd.get(), buf, "gc claims " + path.string() + ": read"));
      for (size_t off = 0; off + Digest::kSize <= n; off += Digest::kSize) {
        std::array<uint8_t, Digest::kSize> b;
        std::memcpy(b.data(), buf.data() + off, Digest::kSize);
        out.emplace_back(b);
      }
      if (n < buf.size()) break;
    }
  }
  return out;
}

Result<bool> LocalChunkStore::HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) {
  // Every copy outside both dooms counts: the store's (doomed_) and the run's own.
  auto live = [&] {
    ReaderLock l(mu_);
    return LookupLocked(id, Copies::kLive, doomed).has_value();
  };
  if (live()) return true;
  return RefreshIfChanged() && live();
}

Status LocalChunkStore::DeletePacks(std::span<const uint64_t> packs) {
  if (!writable_) return PermissionDeniedError("chunk store " + root_.string() + " is read-only");
  for (uint64_t p : packs) {
    ForgetPack(p);
    const fs::path path = PackPath(p);
    if (::unlinkat(packs_dir_.get(), path.filename().c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError("pack " + path.string() + ": delete", errno);
    }
  }
  {
    MutexLock l(pool_mu_);
    dir_dirty_ = true;
  }
  return SyncPacksDir();
}

Status LocalChunkStore::CompactIndex() {
  if (!writable_ || !options_.index_tables) return Status::Ok();
  const fs::path dir = root_ / "index";
  BDN_ASSIGN_OR_RETURN(UniqueFd lock, TakeIndexLock(index_dir_.get(), dir / "lock"));
  MutexLock refresh(refresh_mu_);
  BDN_RETURN_IF_ERROR(LoadTables());
  BDN_ASSIGN_OR_RETURN(auto names,
                       ListDirAt(packs_dir_.get(), root_ / "packs", "chunk store packs"));
  std::unordered_set<uint64_t> sealed;
  for (const auto& n : names) {
    if (auto id = pack::ParseHex16Name(n, ".pack")) sealed.insert(*id);
  }
  std::vector<std::shared_ptr<const pack::IndexTable>> tables;
  {
    ReaderLock l(mu_);
    tables = tables_;
  }
  const bool durable = options_.durability == Durability::kDurable;
  bool changed = false;
  std::unordered_set<std::string> live_tables;
  for (const auto& t : tables) {
    std::vector<uint64_t> keep;
    for (uint64_t p : t->packs()) {
      if (sealed.contains(p)) keep.push_back(p);
    }
    if (keep.size() == t->packs().size()) {
      live_tables.insert(t->path().filename().string());
      continue;
    }
    if (!keep.empty()) {
      std::unordered_set<uint64_t> kept(keep.begin(), keep.end());
      std::vector<IndexedBlob> blobs;
      for (uint64_t i = 0; i < t->size(); ++i) {
        IndexedBlob b = t->At(i);
        if (kept.contains(b.pack)) blobs.push_back(b);
      }
      BDN_ASSIGN_OR_RETURN(fs::path written,
                           pack::WriteIndexTable(dir, std::move(blobs), std::move(keep), durable));
      live_tables.insert(written.filename().string());
    }
    ::unlink(t->path().c_str());
    changed = true;
  }
  // Tables no loaded table stands for: left by an interrupted merge or rewrite (covered by
  // another), or damaged (their packs are read from the footers).
  BDN_ASSIGN_OR_RETURN(auto index_names, ListDirAt(index_dir_.get(), dir, "chunk store index"));
  for (const auto& n : index_names) {
    if (pack::ParseHex16Name(n, ".idx") && !live_tables.contains(n)) {
      ::unlink((dir / n).c_str());
      changed = true;
    }
  }
  if (!changed) return Status::Ok();
  if (durable) BDN_RETURN_IF_ERROR(FsyncDir(dir));
  BDN_RETURN_IF_ERROR(LoadTables());
  {
    WriterLock l(mu_);
    std::erase_if(gone_, [&](uint64_t p) REQUIRES(mu_) { return !indexed_.contains(p); });
  }
  // Packs of a table dropped as damaged are read from their footers again.
  return LoadLoosePacks();
}

}  // namespace bdn
