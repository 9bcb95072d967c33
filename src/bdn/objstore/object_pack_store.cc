#include "bdn/objstore/object_pack_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "bdn/base/fd.h"
#include "bdn/base/hex.h"
#include "bdn/base/log.h"
#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"  // FormatDuration
#include "bdn/store/pack_file.h"

namespace bdn::objstore {
namespace {

namespace fs = std::filesystem;
using pack::BlobLocation;
using pack::IndexedBlob;

// Reads as many bytes of a pack's tail as hold its footer in one GET for packs of up to ~2,000
// blobs (64 bytes of footer each).
constexpr uint64_t kTailBytes = uint64_t{128} << 10;
// Footers read at once (at Open and at a refresh).
constexpr size_t kFootersInFlight = 16;
// RecentlyClaimed: how long a claim this process recorded stands for a Put of the same chunk,
// and how many such claims it remembers (a push of 1 GiB claims ~14,000 chunks).
constexpr std::chrono::seconds kClaimReuse{60};
constexpr size_t kClaimedMax = 1 << 20;

// A read-only mapping of a file, unmapped when it goes.
class Mapping {
 public:
  static Result<Mapping> Of(int fd, uint64_t bytes, const std::string& what) {
    Mapping m;
    m.bytes_ = bytes;
    if (bytes == 0) return m;
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return Err(ErrnoError(what + ": mmap", errno));
    m.data_ = static_cast<const uint8_t*>(p);
    return m;
  }
  Mapping() = default;
  Mapping(Mapping&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), bytes_);
  }
  std::span<const uint8_t> span() const { return {data_, data_ ? bytes_ : 0}; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
};

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.has_value() ? Status::Ok() : r.error();
}

}  // namespace

// A pack in the spool: open (written by one writer at a time), then sealed and waiting for its
// upload, then gone from the spool once uploaded and indexed.
struct ObjectPackStore::SpoolPack {
  enum class State { kOpen, kSealed, kUploading, kFailed, kUploaded };
  ~SpoolPack() {
    if (fd >= 0) ::close(fd);
  }
  uint64_t id = 0;
  int fd = -1;
  fs::path path;
  std::optional<pack::PackWriter> writer;  // while open
  std::vector<BlobLocation> blobs;         // once sealed: what the footer lists
  uint64_t bytes = 0;                      // once sealed: the file's size
  bool in_use = false;                     // held by a writer
  bool retiring = false;                   // Sync takes it: no new writer
  SteadyTime last_write{};                 // while open: when a writer last let go of it
  SteadyTime failed_at{};                  // kFailed: when
  State state = State::kOpen;
  Status error;  // kFailed: why
};

// A range of a pack fetched with one GET: being fetched, or ready (with its bytes or an error).
namespace {

// Memory for a fetched pack range, not zero-filled. At least 1 MiB is mapped with MAP_POPULATE:
// the kernel maps it in one go instead of one page fault per 4 KiB as the GET writes it (a fresh
// 64 MiB buffer would cost 16,384 faults, most of an origin's CPU in a cold read).
class RangeBuffer {
 public:
  static constexpr uint64_t kMapBytes = uint64_t{1} << 20;
  RangeBuffer() = default;
  explicit RangeBuffer(uint64_t n) : size_(n) {
    if (n >= kMapBytes) {
      void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                     -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      mapped_ = static_cast<uint8_t*>(p);
    } else if (n > 0) {
      heap_ = std::make_unique_for_overwrite<uint8_t[]>(n);
    }
  }
  RangeBuffer(RangeBuffer&& o) noexcept
      : size_(std::exchange(o.size_, 0)),
        mapped_(std::exchange(o.mapped_, nullptr)),
        heap_(std::move(o.heap_)) {}
  RangeBuffer& operator=(RangeBuffer&& o) noexcept {
    if (this != &o) {
      Unmap();
      size_ = std::exchange(o.size_, 0);
      mapped_ = std::exchange(o.mapped_, nullptr);
      heap_ = std::move(o.heap_);
    }
    return *this;
  }
  ~RangeBuffer() { Unmap(); }

  uint64_t size() const { return size_; }
  uint8_t* data() const { return mapped_ != nullptr ? mapped_ : heap_.get(); }
  std::span<uint8_t> first(uint64_t n) const { return {data(), std::min(n, size_)}; }

 private:
  void Unmap() {
    if (mapped_ != nullptr) munmap(mapped_, size_);
    mapped_ = nullptr;
  }
  uint64_t size_ = 0;
  uint8_t* mapped_ = nullptr;
  std::unique_ptr<uint8_t[]> heap_;
};

}  // namespace

// Buffers of dropped ranges, kept so that the next fetch writes into memory already mapped
// (the kernel need not map and zero it again). Only buffers of at least RangeBuffer::kMapBytes
// are kept, up to `limit` bytes in all. Thread-safe.
class ObjectPackStore::BufferPool {
 public:
  explicit BufferPool(uint64_t limit) : limit_(limit) {
    free_.reserve(limit / RangeBuffer::kMapBytes + 1);  // Give never allocates
  }

  // A buffer of at least n bytes: the smallest kept one of at most 2n bytes, else a new one of
  // exactly n. Only its first n bytes are meant to be used.
  RangeBuffer Take(uint64_t n) {
    if (n >= RangeBuffer::kMapBytes) {
      MutexLock l(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->size() >= n && it->size() <= 2 * n &&
            (best == free_.end() || it->size() < best->size())) {
          best = it;
        }
      }
      if (best != free_.end()) {
        RangeBuffer b = std::move(*best);
        free_.erase(best);
        free_bytes_ -= b.size();
        return b;
      }
    }
    return RangeBuffer(n);
  }

  // Keeps `b` for a later Take if it is large enough and there is room; else frees it.
  // Never throws (a segment's destructor calls it): without room in the list, `b` is freed.
  void Give(RangeBuffer b) noexcept {
    if (b.size() < RangeBuffer::kMapBytes) return;
    MutexLock l(mu_);
    if (free_bytes_ + b.size() > limit_ || free_.size() == free_.capacity()) return;
    free_bytes_ += b.size();
    free_.push_back(std::move(b));
  }

 private:
  const uint64_t limit_;
  Mutex mu_;
  std::vector<RangeBuffer> free_ GUARDED_BY(mu_);
  uint64_t free_bytes_ GUARDED_BY(mu_) = 0;
};

struct ObjectPackStore::Segment {
  uint64_t pack = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool ready = false;
  uint64_t filled = 0;  // bytes of [begin, end) in `bytes` already (all of them once ready)
  // The least `filled` a waiter waits for (waiters are woken when it is reached), and whether the
  // segment was dropped while it arrived (then it is not cached when it ends).
  uint64_t wake_at = UINT64_MAX;
  bool dropped = false;
  // Fetched on a thread of its own for readers that may be gone (counted in
  // background_bytes_ and background_fetches_ until it ends).
  bool background = false;
  Status error;
  RangeBuffer bytes;  // [begin, end) of the pack at its start; may be longer (a reused buffer)
  uint64_t last_use = 0;
  std::shared_ptr<BufferPool> pool;  // where `bytes` goes back to, if anywhere

  std::span<const uint8_t> data() const { return bytes.first(end - begin); }
  ~Segment() {
    if (pool) pool->Give(std::move(bytes));
  }
};

ObjectPackStore::ObjectPackStore(std::shared_ptr<S3Client> client, ObjectPackStoreOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      catalog_(options_.catalog),
      buffers_(std::make_shared<BufferPool>(
          std::min(options_.read_cache_bytes, 2 * options_.whole_pack_bytes))) {
  if (!catalog_) {
    catalog_ =
        std::make_shared<BucketCatalog>(client_, options_.claims_retain_since, options_.clock);
  }
}

Result<std::unique_ptr<ObjectPackStore>> ObjectPackStore::Open(std::shared_ptr<S3Client> client,
                                                               ObjectPackStoreOptions options) {
  std::unique_ptr<ObjectPackStore> store(
      new ObjectPackStore(std::move(client), std::move(options)));
  BDN_RETURN_IF_ERROR(store->Init());
  return store;
}

Status ObjectPackStore::Init() {
  const fs::path& dir = options_.dir;
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(dir, "object store cache"));
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(dir / "spool", "object store spool"));
  BDN_RETURN_IF_ERROR(CreatePrivateDirectory(dir / "index", "object store index"));
  // The index tables this directory kept: what the packs they cover hold.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "index", ec)) {
    const std::string name = e.path().filename().string();
    if (!pack::ParseHex16Name(name, ".idx")) {
      if (name.ends_with(".tmp") || name.find(".idx.") != std::string::npos)
        fs::remove(e.path(), ec);
      continue;
    }
    auto t = pack::IndexTable::Open(e.path());
    if (!t) {
      // Derived data: drop it, the footers are read again.
      log::Warn("object store index: " + t.error().message() + "; rebuilding it from the footers");
      fs::remove(e.path(), ec);
      continue;
    }
    WriterLock l(mu_);  // not shared yet; for the analysis
    for (uint64_t p : (*t)->packs()) indexed_.insert(p);
    tables_.push_back(std::move(*t));
  }
  if (ec) return ErrnoError("object store index " + (dir / "index").string(), ec.value());
  // Packs deleted before the listing below are not in it; those the tables name are forgotten.
  BDN_RETURN_IF_ERROR(RefreshDeleted());
  BDN_RETURN_IF_ERROR(RefreshPacks());
  {
    MutexLock l(refresh_mu_);
    last_refresh_start_ = options_.clock->SteadyNow();
    refreshed_once_ = true;
  }
  BDN_RETURN_IF_ERROR(RecoverSpool());
  for (int i = 0; i < std::max(1, options_.uploads_in_flight); ++i) {
    uploaders_.emplace_back([this] { UploadLoop(); });
  }
  if (options_.idle_seal.count() > 0) idle_sealer_ = std::thread([this] { IdleSealLoop(); });
  return Status::Ok();
}

ObjectPackStore::~ObjectPackStore() {
  fetch_stop_ = true;  // background fetches end within about a second (libcurl polls the abort)
  {
    MutexLock l(fetch_mu_);
    for (auto& t : fetch_threads_) t.thread.join();
    fetch_threads_.clear();
  }
  {
    MutexLock l(spool_mu_);
    stopping_ = true;
    // Open packs are sealed, so that the next Open uploads them as they are.
    for (auto& p : open_) {
      if (!p->in_use && p->state == SpoolPack::State::kOpen) {
        // A destructor cannot return it: say so, and the next Open finds the pack as it is.
        if (Status s = SealLocked(*p); !s.ok()) {
          log::Warn("object store: sealing a spool pack at close: " + s.message());
        }
      }
    }
  }
  spool_cv_.notify_all();
  for (auto& t : uploaders_) t.join();
  if (idle_sealer_.joinable()) idle_sealer_.join();
}

std::string ObjectPackStore::PackUri(uint64_t pack) const { return client_->UriOf(PackKey(pack)); }

// ---- the index ----

ObjectPackStore::Where ObjectPackStore::Lookup(const Digest& id, Copies copies,
                                               std::span<const uint64_t> also) const {
  ReaderLock l(mu_);
  return LookupLocked(id, copies, also);
}

ObjectPackStore::Where ObjectPackStore::LookupLocked(const Digest& id, Copies copies,
                                                     std::span<const uint64_t> also) const {
  Where w;
  if (auto it = spool_blobs_.find(id); it != spool_blobs_.end()) {
    w.kind = Where::Kind::kSpool;
    w.spool = it->second.first;
    w.blob = {it->second.first->id, it->second.second};
    return w;
  }
  bool in_missing = false;
  auto usable = [&](const IndexedBlob& b) REQUIRES_SHARED(mu_) {
    if (gone_.contains(b.pack) || bad_.contains({b.pack, b.loc.offset})) return false;
    if (missing_.contains(b.pack)) {
      in_missing = true;
      return false;
    }
    return copies == Copies::kAny ||
           (!doomed_.contains(b.pack) && !std::binary_search(also.begin(), also.end(), b.pack));
  };
  if (auto it = loose_blobs_.find(id); it != loose_blobs_.end() && usable(it->second)) {
    w.kind = Where::Kind::kObject;
    w.blob = it->second;
    return w;
  }
  for (auto t = tables_.rbegin(); t != tables_.rend(); ++t) {
    bool found =
        (*t)->Find(id, [&](const IndexedBlob& b) NO_THREAD_SAFETY_ANALYSIS {  // in Find, under mu_
          if (!usable(b)) return false;
          w.blob = b;
          return true;
        });
    if (found) {
      w.kind = Where::Kind::kObject;
      return w;
    }
  }
  if (in_missing && copies == Copies::kAny) {
    // Say which missing pack held it (the one a loose entry or a table names).
    if (auto it = loose_blobs_.find(id); it != loose_blobs_.end()) {
      w.blob = it->second;
    } else {
      for (const auto& t : tables_) {
        if (t->Find(id, [&](const IndexedBlob& b) NO_THREAD_SAFETY_ANALYSIS {  // in Find, under mu_
              if (!missing_.contains(b.pack)) return false;
              w.blob = b;
              return true;
            })) {
          break;
        }
      }
    }
    w.kind = Where::Kind::kMissing;
  }
  return w;
}

Status ObjectPackStore::ClaimThenRefreshDoom(std::span<const Digest> ids) {
  const SteadyTime started = options_.clock->SteadyNow();
  if (!ids.empty()) BDN_RETURN_IF_ERROR(catalog_->RecordClaims(ids));
  uint64_t ticket;
  {
    WriterLock l(mu_);
    ticket = ++doom_tickets_;
  }
  BDN_ASSIGN_OR_RETURN(std::vector<uint64_t> doom, catalog_->Doom());
  {
    WriterLock l(mu_);
    if (ticket > doom_applied_) {
      doomed_ = std::unordered_set<uint64_t>(doom.begin(), doom.end());
      doom_applied_ = ticket;
    }
  }
  BDN_RETURN_IF_ERROR(RefreshDeleted());
  if (ids.empty()) return Status::Ok();
  MutexLock l(claimed_mu_);
  if (started - claimed_pruned_ > kClaimReuse) {
    std::erase_if(claimed_, [&](const auto& e) { return started - e.second > kClaimReuse; });
    claimed_pruned_ = started;
  }
  if (claimed_.size() + ids.size() > kClaimedMax) claimed_.clear();
  for (const Digest& id : ids) claimed_[id] = started;
  return Status::Ok();
}

struct ObjectPackStore::ClaimGroup {
  std::vector<Digest> ids;
  bool done = false;
  Status status;
};

Status ObjectPackStore::ClaimForPut(std::span<const Digest> ids) {
  MutexLock l(group_mu_);
  if (!open_group_) open_group_ = std::make_shared<ClaimGroup>();
  std::shared_ptr<ClaimGroup> mine = open_group_;
  mine->ids.insert(mine->ids.end(), ids.begin(), ids.end());
  while (!mine->done) {
    if (group_running_) {
      group_cv_.wait(l.native());
      continue;
    }
    // Nobody is recording: this thread records the open group (its own).
    group_running_ = true;
    std::shared_ptr<ClaimGroup> group = std::move(open_group_);
    open_group_.reset();
    l.Unlock();
    Status s;
    try {
      std::vector<Digest> claim;
      for (const Digest& d : group->ids) {
        if (!RecentlyClaimed(d)) claim.push_back(d);
      }
      s = ClaimThenRefreshDoom(claim);
    } catch (const std::exception& e) {
      s = InternalError(std::string("recording claims: ") + e.what());
    }
    l.Lock();
    group->status = s;
    group->done = true;
    group_running_ = false;
    group_cv_.notify_all();
  }
  return mine->status;
}

bool ObjectPackStore::RecentlyClaimed(const Digest& id) {
  SteadyTime at;
  {
    MutexLock l(claimed_mu_);
    auto it = claimed_.find(id);
    if (it == claimed_.end()) return false;
    at = it->second;
  }
  return ClaimStands(at);
}

bool ObjectPackStore::ClaimStands(SteadyTime at) const {
  if (options_.clock->SteadyNow() - at > kClaimReuse) return false;
  return !options_.claims_retain_since || at >= options_.claims_retain_since();
}

Status ObjectPackStore::RefreshDeleted() {
  BDN_ASSIGN_OR_RETURN(bool complete, ApplyDeleted());
  uint64_t gap = 0;
  {
    MutexLock l(deleted_mu_);
    // A look that found rows pruned unseen (this one or any earlier one, whoever ran it) is
    // answered only by a whole listing that succeeded after it: until then every call lists.
    if (complete && deleted_gaps_ == deleted_gaps_listed_) return Status::Ok();
    gap = deleted_gaps_;
  }
  BDN_RETURN_IF_ERROR(RefreshAfter(options_.clock->SteadyNow()));
  MutexLock l(deleted_mu_);
  deleted_gaps_listed_ = std::max(deleted_gaps_listed_, gap);
  return Status::Ok();
}

Result<bool> ObjectPackStore::ApplyDeleted(std::optional<uint64_t> from) {
  if (from) return LookAtDeleted(from);  // RefreshPacks' own look, from where its listing began
  MutexLock l(deleted_mu_);
  const uint64_t need = deleted_started_ + 1;  // a look that begins after this call did
  while (deleted_ended_ < need) {
    if (deleted_running_) {
      deleted_cv_.wait(l.native());
      continue;
    }
    deleted_running_ = true;
    const uint64_t mine = ++deleted_started_;
    l.Unlock();
    Result<bool> r = Err(InternalError("looking at the deleted packs failed"));
    try {
      r = LookAtDeleted(std::nullopt);
    } catch (const std::exception& e) {
      // Whoever waits for this look must not wait for ever: the look ends, failed.
      r = Err(InternalError(std::string("looking at the deleted packs: ") + e.what()));
    }
    l.Lock();
    if (r && !*r) ++deleted_gaps_;
    deleted_running_ = false;
    deleted_ended_ = mine;
    deleted_status_ = r ? Status::Ok() : r.error();
    deleted_complete_ = r && *r;
    deleted_cv_.notify_all();
  }
  if (!deleted_status_.ok()) return Err(deleted_status_);
  return deleted_complete_;
}

Result<bool> ObjectPackStore::LookAtDeleted(std::optional<uint64_t> from) {
  uint64_t after;
  {
    MutexLock l(deleted_mu_);
    after = from ? std::min(*from, deleted_seen_) : deleted_seen_;
  }
  BDN_ASSIGN_OR_RETURN(PackCatalog::Deleted d, catalog_->DeletedSince(after));
  std::vector<uint64_t> forgotten;
  {
    WriterLock l(mu_);
    std::unordered_set<Digest> orphaned;
    for (size_t i = 0; i < d.packs.size(); ++i) {
      const uint64_t p = d.packs[i];
      // Every row recorded less than kRelistDeletedAfter ago counts, for packs known here or
      // not (pushed by another replica since this one's last listing) and for packs forgotten
      // already (a later run recording one again): no listing indexes the pack before its
      // DeleteObject. An older row's deleter is done (DeletePacks): its object, if still there,
      // is a deletion that failed, and may be indexed again.
      const std::chrono::milliseconds age = i < d.ages.size() ? d.ages[i] : kZeroAge;
      const std::chrono::milliseconds hold =
          age < kRelistDeletedAfter ? kRelistDeletedAfter - age : kZeroAge;
      HoldOffRelistLocked(p, hold);
      if (gone_.contains(p)) continue;
      if (pack_bytes_.contains(p) || indexed_.contains(p) || loose_.contains(p)) {
        ForgetDeletedLocked(p, hold, orphaned);
        forgotten.push_back(p);
      }
    }
    ReindexLooseLocked(orphaned);
  }
  {
    MutexLock l(deleted_mu_);
    deleted_seen_ = std::max(deleted_seen_, d.next);
  }
  for (uint64_t p : forgotten) DropCached(p);
  return d.complete;
}

void ObjectPackStore::HoldOffRelistLocked(uint64_t p, std::chrono::milliseconds hold) {
  if (hold <= kZeroAge) return;
  SteadyTime& until = relist_after_[p];
  until = std::max(until, options_.clock->SteadyNow() + hold);
}

bool ObjectPackStore::RelistHeldOffLocked(uint64_t p) const {
  auto it = relist_after_.find(p);
  return it != relist_after_.end() && options_.clock->SteadyNow() < it->second;
}

void ObjectPackStore::ForgetDeletedLocked(uint64_t p, std::chrono::milliseconds hold,
                                          std::unordered_set<Digest>& orphaned) {
  gone_.insert(p);
  HoldOffRelistLocked(p, hold);
  pack_bytes_.erase(p);
  doomed_.erase(p);
  missing_.erase(p);
  if (auto it = loose_.find(p); it != loose_.end()) {
    for (const BlobLocation& b : it->second) {
      auto lb = loose_blobs_.find(b.id);
      if (lb != loose_blobs_.end() && lb->second.pack == p) {
        loose_blobs_.erase(lb);
        orphaned.insert(b.id);
      }
    }
    loose_.erase(it);
  }
}

void ObjectPackStore::ReindexLooseLocked(const std::unordered_set<Digest>& ids) {
  if (ids.empty()) return;
  // One pass over the loose packs (not one per id): a GC deletes packs in batches.
  for (const auto& [pack, blobs] : loose_) {
    if (gone_.contains(pack) || missing_.contains(pack)) continue;
    for (const BlobLocation& b : blobs) {
      if (ids.contains(b.id)) loose_blobs_.try_emplace(b.id, IndexedBlob{pack, b});
    }
  }
}

Result<std::vector<BlobLocation>> ObjectPackStore::ReadPackFooter(uint64_t pack, uint64_t bytes) {
  const std::string what = "pack " + PackUri(pack);
  const std::string key = PackKey(pack);
  if (bytes < pack::kPackHeaderBytes + pack::kTrailerBytes) {
    return Err(CorruptionError(what + ": no valid trailer (object too short)"));
  }
  const uint64_t tail_start = bytes - std::min(bytes, kTailBytes);
  BDN_ASSIGN_OR_RETURN(std::vector<uint8_t> tail,
                       client_->GetRange(key, tail_start, bytes - tail_start));
  counters_.fetched_bytes += tail.size();
  BDN_ASSIGN_OR_RETURN(
      pack::Trailer t,
      pack::DecodeTrailer(std::span<const uint8_t>(tail).last(pack::kTrailerBytes), bytes, what));
  if (t.footer_offset >= tail_start) {
    return pack::DecodeFooter(std::span<const uint8_t>(tail).subspan(t.footer_offset - tail_start),
                              t, what);
  }
  BDN_ASSIGN_OR_RETURN(std::vector<uint8_t> footer,
                       client_->GetRange(key, t.footer_offset, bytes - t.footer_offset));
  counters_.fetched_bytes += footer.size();
  return pack::DecodeFooter(footer, t, what);
}

void ObjectPackStore::AddUploaded(uint64_t pack, uint64_t bytes, std::vector<BlobLocation> blobs,
                                  bool from_this_process) {
  WriterLock l(mu_);
  // A listed pack recorded as deleted while its footer was read stays out.
  if (!from_this_process && RelistHeldOffLocked(pack)) return;
  pack_bytes_[pack] = bytes;
  pack_gen_[pack] = gen_;
  missing_.erase(pack);
  gone_.erase(pack);
  for (const BlobLocation& b : blobs) {
    loose_blobs_[b.id] = IndexedBlob{pack, b};
    if (from_this_process) {
      // The spool copy goes; the uploaded one takes its place (no moment without either).
      if (auto it = spool_blobs_.find(b.id);
          it != spool_blobs_.end() && it->second.first->id == pack) {
        spool_blobs_.erase(it);
      }
    }
  }
  loose_[pack] = std::move(blobs);
}

void ObjectPackStore::MarkMissing(uint64_t pack, const std::string& why) {
  std::vector<Digest> blobs;
  {
    WriterLock l(mu_);
    if (!missing_.insert(pack).second) return;
    if (auto it = loose_.find(pack); it != loose_.end()) {
      for (const BlobLocation& b : it->second) blobs.push_back(b.id);
    } else {
      for (const auto& t : tables_) {
        for (uint64_t i = 0; i < t->size(); ++i) {
          IndexedBlob b = t->At(i);
          if (b.pack == pack) blobs.push_back(b.loc.id);
        }
      }
    }
  }
  ++counters_.missing_packs;
  log::Error("object store: pack " + PackUri(pack) + " is missing (" + why + "); its " +
             std::to_string(blobs.size()) + " blobs cannot be read from it (deleted outside bdn?)");
  DropCached(pack);
  if (options_.on_missing_pack) options_.on_missing_pack(pack, blobs);
}

Status ObjectPackStore::RefreshPacks() {
  // Deletions from here on are applied again once the listing's packs are added: a pack listed
  // now and deleted while its footer is read must not come back.
  uint64_t deleted_from;
  {
    MutexLock l(deleted_mu_);
    deleted_from = deleted_seen_;
  }
  uint64_t gen;
  std::unordered_set<uint64_t> known;
  {
    WriterLock l(mu_);
    gen = ++gen_;
    for (const auto& [p, b] : pack_bytes_) known.insert(p);
  }
  BDN_ASSIGN_OR_RETURN(std::vector<CatalogPack> listed, catalog_->ListPacks());
  std::vector<CatalogPack> fresh;
  std::unordered_set<uint64_t> listed_ids;
  for (const CatalogPack& p : listed) {
    listed_ids.insert(p.id);
    if (known.contains(p.id)) continue;
    {
      ReaderLock l(mu_);
      if (RelistHeldOffLocked(p.id)) continue;
    }
    bool indexed;
    {
      ReaderLock l(mu_);
      indexed = indexed_.contains(p.id) && !gone_.contains(p.id);
    }
    if (indexed) {
      WriterLock l(mu_);
      pack_bytes_[p.id] = p.bytes;
      pack_gen_[p.id] = gen;
      continue;
    }
    fresh.push_back(p);
  }
  {
    WriterLock l(mu_);
    const SteadyTime now = options_.clock->SteadyNow();
    // Only expired entries: one a listing did not show may be a pack uploaded after it began.
    std::erase_if(relist_after_, [&](const auto& e) { return now >= e.second; });
  }
  // The footers of packs no table covers, several at once.
  std::vector<Result<std::vector<BlobLocation>>> footers(fresh.size());
  ParallelFor(fresh.size(), kFootersInFlight,
              [&](size_t i) { footers[i] = ReadPackFooter(fresh[i].id, fresh[i].bytes); });
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (!footers[i]) {
      const Status& s = footers[i].error();
      if (s.code() == StatusCode::kNotFound) continue;  // deleted since the listing
      if (s.code() == StatusCode::kCorruption) {
        // Kept out of the index: its blobs are stored again by the next push that needs them.
        log::Error("object store: " + s.message() + "; the pack is left out of the index");
        continue;
      }
      return s;
    }
    AddUploaded(fresh[i].id, fresh[i].bytes, std::move(*footers[i]), false);
  }
  // Packs this process knew before the listing began that it no longer shows were deleted by
  // something other than a GC of this bucket's stores (those a GC deleted are forgotten first; if
  // the catalog cannot say, they count as missing).
  ApplyDeleted(deleted_from).IgnoreError();
  std::vector<uint64_t> vanished;
  {
    ReaderLock l(mu_);
    for (const auto& [p, b] : pack_bytes_) {
      auto g = pack_gen_.find(p);
      if (g != pack_gen_.end() && g->second < gen && !listed_ids.contains(p) &&
          !missing_.contains(p)) {
        vanished.push_back(p);
      }
    }
    for (uint64_t p : indexed_) {
      if (!listed_ids.contains(p) && !pack_bytes_.contains(p) && !gone_.contains(p) &&
          !missing_.contains(p) && gen == 1) {
        vanished.push_back(p);  // at Open: covered by a table, not in the bucket
      }
    }
  }
  for (uint64_t p : vanished) MarkMissing(p, "no longer listed in the bucket");
  return PublishIndex(false);
}

Status ObjectPackStore::RefreshAfter(SteadyTime since) {
  MutexLock l(refresh_mu_);
  for (;;) {
    if (refreshed_once_ && last_refresh_start_ >= since && !refreshing_) return last_refresh_;
    if (!refreshing_) break;
    refresh_cv_.wait(l.native());
  }
  refreshing_ = true;
  const SteadyTime earliest = last_refresh_start_ + options_.min_refresh_interval;
  l.Unlock();
  if (SteadyTime now = options_.clock->SteadyNow(); now < earliest) {
    options_.clock->SleepFor(earliest - now);
  }
  const SteadyTime started = options_.clock->SteadyNow();
  ++counters_.refreshes;
  Status s = RefreshPacks();
  l.Lock();
  refreshing_ = false;
  last_refresh_start_ = started;
  last_refresh_ = s;
  refresh_cv_.notify_all();
  return s;
}

Status ObjectPackStore::PublishIndex(bool force) {
  MutexLock write_lock(index_write_mu_);
  std::vector<IndexedBlob> blobs;
  std::vector<uint64_t> packs;
  {
    ReaderLock l(mu_);
    if (loose_.empty() || (!force && loose_.size() < options_.loose_packs_per_table)) {
      return Status::Ok();
    }
    for (const auto& [p, locs] : loose_) {
      packs.push_back(p);
      for (const BlobLocation& b : locs) blobs.push_back({p, b});
    }
  }
  BDN_ASSIGN_OR_RETURN(
      fs::path path, pack::WriteIndexTable(options_.dir / "index", std::move(blobs), packs, false));
  BDN_ASSIGN_OR_RETURN(std::shared_ptr<const pack::IndexTable> table, pack::IndexTable::Open(path));
  WriterLock l(mu_);
  tables_.push_back(table);
  for (uint64_t p : packs) {
    indexed_.insert(p);
    auto it = loose_.find(p);
    if (it == loose_.end()) continue;
    for (const BlobLocation& b : it->second) {
      auto lb = loose_blobs_.find(b.id);
      if (lb != loose_blobs_.end() && lb->second.pack == p) loose_blobs_.erase(lb);
    }
    loose_.erase(it);
  }
  const bool many = tables_.size() > 16;
  l.Unlock();
  return many ? CompactLocked(true) : Status::Ok();
}

Status ObjectPackStore::CompactIndex(bool force) {
  MutexLock write_lock(index_write_mu_);
  return CompactLocked(force);
}

Status ObjectPackStore::CompactLocked(bool force) {
  std::vector<std::shared_ptr<const pack::IndexTable>> old;
  std::vector<IndexedBlob> blobs;
  std::vector<uint64_t> packs;
  {
    ReaderLock l(mu_);
    bool stale = force;
    for (const auto& t : tables_) {
      for (uint64_t p : t->packs()) stale = stale || gone_.contains(p);
    }
    if (!stale || tables_.empty()) return Status::Ok();
    old = tables_;
    for (const auto& t : tables_) {
      for (uint64_t p : t->packs()) {
        if (!gone_.contains(p)) packs.push_back(p);
      }
      for (uint64_t i = 0; i < t->size(); ++i) {
        IndexedBlob b = t->At(i);
        if (!gone_.contains(b.pack)) blobs.push_back(b);
      }
    }
  }
  std::shared_ptr<const pack::IndexTable> merged;
  if (!packs.empty()) {
    BDN_ASSIGN_OR_RETURN(fs::path path, pack::WriteIndexTable(options_.dir / "index",
                                                              std::move(blobs), packs, false));
    BDN_ASSIGN_OR_RETURN(merged, pack::IndexTable::Open(path));
  }
  {
    WriterLock l(mu_);
    std::erase_if(tables_,
                  [&](const auto& t) { return std::find(old.begin(), old.end(), t) != old.end(); });
    if (merged) tables_.push_back(merged);
    indexed_.clear();
    for (const auto& t : tables_) indexed_.insert(t->packs().begin(), t->packs().end());
    for (uint64_t p : gone_) {
      if (!indexed_.contains(p)) pack_gen_.erase(p);
    }
    std::erase_if(gone_, [&](uint64_t p) REQUIRES(mu_) {
      return !indexed_.contains(p) && !loose_.contains(p);
    });
  }
  std::error_code ec;
  for (const auto& t : old) fs::remove(t->path(), ec);
  return Status::Ok();
}

// ---- writing ----

Result<std::shared_ptr<ObjectPackStore::SpoolPack>> ObjectPackStore::CreateSpoolPack() {
  auto p = std::make_shared<SpoolPack>();
  p->id = pack::RandomId();
  p->path = options_.dir / "spool" / (Hex16(p->id) + ".pack");
  p->fd = ::open(p->path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (p->fd < 0) return Err(ErrnoError("object store spool " + p->path.string(), errno));
  BDN_ASSIGN_OR_RETURN(pack::PackWriter w,
                       pack::PackWriter::Start(p->fd, "spool pack " + p->path.string()));
  p->writer.emplace(std::move(w));
  return p;
}

Result<std::shared_ptr<ObjectPackStore::SpoolPack>> ObjectPackStore::AcquirePack() {
  MutexLock l(spool_mu_);
  for (;;) {
    size_t active = 0;
    for (auto& p : open_) {
      if (p->retiring) continue;
      if (!p->in_use) {
        p->in_use = true;
        return p;
      }
      ++active;
    }
    if (active < static_cast<size_t>(std::max(1, options_.max_open_packs))) {
      BDN_ASSIGN_OR_RETURN(auto p, CreateSpoolPack());
      p->in_use = true;
      open_.push_back(p);
      return p;
    }
    spool_cv_.wait(l.native());
  }
}

Status ObjectPackStore::SealLocked(SpoolPack& p) {
  BDN_RETURN_IF_ERROR(p.writer->Seal());
  p.blobs = p.writer->blobs();
  p.bytes = p.writer->bytes();
  p.state = SpoolPack::State::kSealed;
  return Status::Ok();
}

void ObjectPackStore::ReleasePack(const std::shared_ptr<SpoolPack>& p, bool full) {
  MutexLock l(spool_mu_);
  p->in_use = false;
  p->last_write = options_.clock->SteadyNow();
  last_append_ = p->last_write;
  if (full && p->state == SpoolPack::State::kOpen) {
    Status s = SealLocked(*p);
    if (s.ok()) {
      std::erase(open_, p);
      queue_.push_back(p);
    } else {
      log::Error("object store: " + s.message());
    }
  }
  spool_cv_.notify_all();
}

Result<PutOutcome> ObjectPackStore::StoreBlob(const Digest& id, std::span<const uint8_t> raw,
                                              std::optional<SteadyTime> claimed_at) {
  const std::string chunk = "chunk " + id.ToString();
  // A batch's claims stand for its blob as a recent claim stands for a Put: judged now, as the
  // blob is stored, however long its bytes took to arrive.
  const bool claimed = claimed_at && ClaimStands(*claimed_at);
  if (Status s = claimed ? Status::Ok() : ClaimForPut(std::span(&id, 1)); !s.ok()) {
    return Err(Status(s.code(), chunk + ": " + s.message()));
  }
  std::optional<PendingPuts::Turn> turn = [&] {
    WriterLock l(mu_);
    return pending_.WaitOrBegin(l.native(), id, [&]() REQUIRES(mu_) {
      Where::Kind k = LookupLocked(id, Copies::kLive).kind;
      return k == Where::Kind::kSpool || k == Where::Kind::kObject;
    });
  }();
  if (!turn) return PutOutcome::kAlreadyStored;
  pack::EncodedBlob enc = pack::EncodeBlob(raw, options_.codec);
  std::span<const uint8_t> stored = enc.codec == pack::Codec::kNone ? raw : enc.stored;
  auto acquired = AcquirePack();
  if (!acquired)
    return Err(Status(acquired.error().code(), chunk + ": " + acquired.error().message()));
  std::shared_ptr<SpoolPack> p = *acquired;
  auto loc = p->writer->Append(id, raw.size(), enc.codec, stored);
  if (!loc) {
    ReleasePack(p, false);
    return Err(Status(loc.error().code(), chunk + ": " + loc.error().message()));
  }
  {
    WriterLock l(mu_);
    spool_blobs_[id] = {p, *loc};
  }
  ReleasePack(p, p->writer->bytes() >= options_.pack_target_bytes);
  return PutOutcome::kStored;
}

Status ObjectPackStore::Put(const Digest& id, std::span<const uint8_t> data) {
  if (!VerifyChunk(id, data).ok()) {
    return InvalidArgumentError("chunk " + id.ToString() + ": bytes do not match the id");
  }
  return StatusOf(StoreBlob(id, data));
}

// An upload held in memory up to spill_bytes, then in an unnamed file of the spool; appended to a
// spool pack at Commit, once the bytes hash to the id.
class ObjectPackStore::SpoolWriter : public HashingBlobWriter {
 public:
  // `claimed_at`: an UploadBatch's writer, whose claim the batch recorded then.
  SpoolWriter(ObjectPackStore& store, const Digest& id,
              std::optional<SteadyTime> claimed_at = std::nullopt)
      : HashingBlobWriter(id), store_(store), claimed_at_(claimed_at) {}
  ~SpoolWriter() override { Drop(); }

 private:
  Status Keep(std::span<const uint8_t> piece) override {
    const std::string chunk = "chunk " + id_.ToString();
    if (fd_ < 0 && mem_.size() + piece.size() <= store_.options_.spill_bytes) {
      mem_.insert(mem_.end(), piece.begin(), piece.end());
      return Status::Ok();
    }
    if (fd_ < 0) {
      const fs::path dir = store_.options_.dir / "spool";
      fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, kPrivateFileMode);
      if (fd_ < 0) return ErrnoError(chunk + ": object store spool " + dir.string(), errno);
      BDN_RETURN_IF_ERROR(Write(mem_));
      mem_.clear();
      mem_.shrink_to_fit();
    }
    return Write(piece);
  }
  void Drop() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    mem_.clear();
  }
  Result<PutOutcome> Store() override {
    if (fd_ < 0) return store_.StoreBlob(id_, mem_, claimed_at_);
    BDN_ASSIGN_OR_RETURN(Mapping m,
                         Mapping::Of(fd_, written_, "chunk " + id_.ToString() + ": spool file"));
    return store_.StoreBlob(id_, m.span(), claimed_at_);
  }
  Status Write(std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(written_));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("chunk " + id_.ToString() + ": object store spool: write", errno);
      }
      written_ += static_cast<uint64_t>(n);
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  ObjectPackStore& store_;
  const std::optional<SteadyTime> claimed_at_;
  std::vector<uint8_t> mem_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

Result<std::unique_ptr<BlobWriter>> ObjectPackStore::StartPut(const Digest& id) {
  return std::unique_ptr<BlobWriter>(std::make_unique<SpoolWriter>(*this, id));
}

Result<std::unique_ptr<UploadBatch>> ObjectPackStore::StartUploads(std::span<const Digest> ids) {
  // Taken before the claims are recorded, so that it is never later than they are.
  const SteadyTime claimed_at = options_.clock->SteadyNow();
  if (Status s = ClaimForPut(ids); !s.ok()) {
    return Err(s.WithPrefix("upload of " + std::to_string(ids.size()) + " blobs"));
  }
  // A blob stored when the claims no longer stand (kClaimReuse after them: a very slow upload,
  // or before claims_retain_since) claims again, as a Put of a chunk claimed then would.
  return std::unique_ptr<UploadBatch>(std::make_unique<UploadsVia>(
      [this, claimed_at](const Digest& id) -> Result<std::unique_ptr<BlobWriter>> {
        return std::unique_ptr<BlobWriter>(std::make_unique<SpoolWriter>(*this, id, claimed_at));
      },
      ids));
}

Status ObjectPackStore::Upload(SpoolPack& p) {
  const std::string key = PackKey(p.id);
  BDN_ASSIGN_OR_RETURN(Mapping m, Mapping::Of(p.fd, p.bytes, "spool pack " + p.path.string()));
  Status s =
      p.bytes > options_.multipart_bytes
          ? client_->PutMultipart(key, m.span(), options_.part_bytes, options_.parts_in_flight)
          : client_->Put(key, m.span());
  if (s.ok()) s = catalog_->AddPack({p.id, p.bytes}, p.blobs);
  if (!s.ok()) return s.WithPrefix("pack " + PackUri(p.id));
  counters_.packs_uploaded += 1;
  counters_.bytes_uploaded += p.bytes;
  AddUploaded(p.id, p.bytes, p.blobs, true);
  std::error_code ec;
  fs::remove(p.path, ec);  // readers that hold it finish from the open descriptor
  return Status::Ok();
}

void ObjectPackStore::UploadLoop() {
  for (;;) {
    std::shared_ptr<SpoolPack> p;
    {
      MutexLock l(spool_mu_);
      spool_cv_.wait(l.native(),
                     [&]() REQUIRES(spool_mu_) { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      p = queue_.front();
      queue_.pop_front();
      p->state = SpoolPack::State::kUploading;
      uploading_.push_back(p);
    }
    Status s = Upload(*p);
    {
      MutexLock l(spool_mu_);
      std::erase(uploading_, p);
      if (s.ok()) {
        p->state = SpoolPack::State::kUploaded;
      } else {
        p->state = SpoolPack::State::kFailed;
        p->failed_at = options_.clock->SteadyNow();
        p->error = s;
        failed_.push_back(p);
        ++counters_.upload_failures;
        log::Warn("object store: upload failed, kept for the next sync: " + s.message());
      }
    }
    spool_cv_.notify_all();
    // The index is derived from the packs' footers: a failure to write it costs reads of
    // footers, not data, and the next upload tries again; it is logged, not returned.
    if (s.ok()) {
      if (Status published = PublishIndex(false); !published.ok()) {
        log::Warn("object store: index tables not written: " + published.message());
      }
    }
  }
}

void ObjectPackStore::IdleSealLoop() {
  const auto idle = options_.idle_seal;
  MutexLock l(spool_mu_);
  while (!stopping_) {
    const SteadyTime now = options_.clock->SteadyNow();
    SteadyTime next = now + idle;
    bool queued = false;
    // Once no writer has appended to any open pack for `idle` (while writes go on, packs fill up
    // to pack_target_bytes, or the commit's Sync seals them): the open packs no writer holds are
    // sealed and queued as at Sync (a pack Sync is retiring is left to Sync).
    const bool store_idle =
        now - last_append_ >= idle &&
        std::none_of(open_.begin(), open_.end(), [](const auto& p) { return p->in_use; });
    if (!store_idle) next = std::min(next, std::max(now, last_append_) + idle);
    for (auto it = open_.begin(); store_idle && it != open_.end();) {
      auto p = *it;
      if (p->in_use || p->retiring || p->state != SpoolPack::State::kOpen ||
          p->writer->blobs().empty()) {
        ++it;
        continue;
      }
      if (now - p->last_write < idle) {
        next = std::min(next, p->last_write + idle);
        ++it;
        continue;
      }
      if (Status s = SealLocked(*p); !s.ok()) {
        // Left open: the next Sync seals it or reports the error.
        log::Warn("object store: sealing an idle spool pack: " + s.message());
        p->last_write = now;
        ++it;
        continue;
      }
      it = open_.erase(it);
      queue_.push_back(p);
      queued = true;
    }
    // Uploads that failed are tried again after `idle` (Sync also retries them at once).
    for (auto it = failed_.begin(); it != failed_.end();) {
      auto p = *it;
      if (now - p->failed_at < idle) {
        next = std::min(next, p->failed_at + idle);
        ++it;
        continue;
      }
      p->state = SpoolPack::State::kSealed;
      queue_.push_back(p);
      it = failed_.erase(it);
      queued = true;
    }
    if (queued) spool_cv_.notify_all();
    options_.clock->WaitUntil(spool_cv_, l.native(), next,
                              [&]() REQUIRES(spool_mu_) { return stopping_; });
  }
}

Status ObjectPackStore::Sync() {
  MutexLock sync_lock(sync_mu_);
  MutexLock l(spool_mu_);
  // The open packs are sealed once their writers let go (new writers get other packs meanwhile).
  for (auto& p : open_) p->retiring = true;
  spool_cv_.wait(l.native(), [&]() REQUIRES(spool_mu_) {
    return std::none_of(open_.begin(), open_.end(),
                        [](const auto& p) { return p->retiring && p->in_use; });
  });
  Status first;
  for (auto it = open_.begin(); it != open_.end();) {
    auto p = *it;
    if (!p->retiring) {
      ++it;
      continue;
    }
    it = open_.erase(it);
    if (p->writer->blobs().empty()) {
      std::error_code ec;
      fs::remove(p->path, ec);
      continue;
    }
    if (Status s = SealLocked(*p); !s.ok()) {
      if (first.ok()) first = s;
      continue;
    }
    queue_.push_back(p);
  }
  BDN_RETURN_IF_ERROR(first);
  for (auto& p : failed_) {
    p->state = SpoolPack::State::kSealed;
    queue_.push_back(p);
  }
  failed_.clear();
  // Every pack sealed so far: queued, or being uploaded.
  std::vector<std::shared_ptr<SpoolPack>> wait_for(queue_.begin(), queue_.end());
  wait_for.insert(wait_for.end(), uploading_.begin(), uploading_.end());
  spool_cv_.notify_all();
  spool_cv_.wait(l.native(), [&] {
    return std::all_of(wait_for.begin(), wait_for.end(), [](const auto& p) {
      return p->state == SpoolPack::State::kUploaded || p->state == SpoolPack::State::kFailed;
    });
  });
  for (const auto& p : wait_for) {
    if (p->state == SpoolPack::State::kFailed) return p->error;
  }
  return Status::Ok();
}

Status ObjectPackStore::RecoverSpool() {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(options_.dir / "spool", ec))
    files.push_back(e.path());
  if (ec) return ErrnoError("object store spool " + (options_.dir / "spool").string(), ec.value());
  for (const fs::path& path : files) {
    auto id = pack::ParseHex16Name(path.filename().string(), ".pack");
    if (!id) {
      fs::remove(path, ec);
      continue;
    }
    const std::string what = "spool pack " + path.string();
    auto p = std::make_shared<SpoolPack>();
    p->id = *id;
    p->path = path;
    p->fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (p->fd < 0) return ErrnoError(what, errno);
    struct stat st;
    if (::fstat(p->fd, &st) != 0) return ErrnoError(what + ": stat", errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    auto footer = pack::ReadFooter(p->fd, size, what);
    if (footer) {
      p->blobs = std::move(*footer);
      p->bytes = size;
    } else {
      // A pack this directory's last process was writing: its whole records, sealed now.
      auto scan = pack::ScanRecords(p->fd, size, what);
      if (!scan || scan->blobs.empty()) {
        fs::remove(path, ec);
        continue;
      }
      if (::ftruncate(p->fd, static_cast<off_t>(scan->valid_bytes)) != 0) {
        return ErrnoError(what + ": truncate", errno);
      }
      std::vector<uint8_t> f = pack::EncodeFooter(scan->blobs, scan->valid_bytes);
      // PWriteAll: a short write (a disk filling up) is continued, so that its ENOSPC is the error
      // reported, not whatever errno held before ("Success").
      BDN_RETURN_IF_ERROR(PWriteAll(p->fd, f, scan->valid_bytes, what + ": write"));
      p->blobs = std::move(scan->blobs);
      p->bytes = scan->valid_bytes + f.size();
    }
    p->state = SpoolPack::State::kSealed;
    bool uploaded;
    {
      ReaderLock l(mu_);
      // Listed, or recorded as deleted by a GC since (which only knows uploaded packs): an
      // upload again under its key could land after the deleter's DeleteObject is sent.
      uploaded = pack_bytes_.contains(p->id) || gone_.contains(p->id) || RelistHeldOffLocked(p->id);
    }
    if (uploaded) {  // the previous process uploaded it, then stopped before removing it
      fs::remove(path, ec);
      continue;
    }
    log::Info("object store: uploading " + std::to_string(p->blobs.size()) +
              " blobs a previous process left in " + path.string());
    {
      WriterLock l(mu_);
      for (const BlobLocation& b : p->blobs) spool_blobs_[b.id] = {p, b};
    }
    MutexLock l(spool_mu_);
    queue_.push_back(p);
  }
  return Status::Ok();
}

// ---- reading ----

Result<std::vector<uint8_t>> ObjectPackStore::ReadSpool(const Where& w, const Digest& id) {
  (void)id;
  return pack::ReadBlob(w.spool->fd, w.blob.loc, "spool pack " + w.spool->path.string());
}

void ObjectPackStore::DropCached(uint64_t pack) {
  MutexLock l(cache_mu_);
  std::vector<std::shared_ptr<Segment>> dropped;  // released after the lock (munmap)
  auto it = segments_.find(pack);
  if (it == segments_.end()) return;
  for (auto& s : it->second) {
    if (s->ready) {
      cached_bytes_ -= s->bytes.size();
    } else {
      s->dropped = true;  // still arriving: its waiters get it, no later reader does
    }
    dropped.push_back(s);
  }
  segments_.erase(it);
  l.Unlock();
}

Result<std::shared_ptr<const ObjectPackStore::Segment>> ObjectPackStore::Range(
    uint64_t pack, uint64_t begin, uint64_t end, bool bulk, bool bypass_cache) {
  const std::string key = PackKey(pack);
  if (bypass_cache || options_.read_cache_bytes == 0) {
    auto seg = std::make_shared<Segment>();
    seg->pack = pack;
    seg->begin = begin;
    seg->end = end;
    try {
      seg->bytes = RangeBuffer(end - begin);
    } catch (const std::bad_alloc&) {
      return Err(UnavailableError(PackUri(pack) + ": no memory to read bytes " +
                                  std::to_string(begin) + "-" + std::to_string(end)));
    }
    BDN_RETURN_IF_ERROR(client_->GetRangeInto(key, begin, seg->bytes.first(end - begin)));
    counters_.fetched_bytes += seg->bytes.size();
    seg->ready = true;
    return std::shared_ptr<const Segment>(seg);
  }
  uint64_t pack_bytes = 0;
  {
    ReaderLock l(mu_);
    if (auto it = pack_bytes_.find(pack); it != pack_bytes_.end()) pack_bytes = it->second;
  }
  std::shared_ptr<Segment> seg;
  {
    MutexLock l(cache_mu_);
    for (;;) {
      // A range that holds [begin, end) already (one still arriving, if those bytes are in);
      // else one that will once it arrives.
      std::shared_ptr<Segment> cover, usable;
      if (auto it = segments_.find(pack); it != segments_.end()) {
        for (const auto& s : it->second) {
          if (s->begin <= begin && s->end >= end) {
            cover = s;
            if (s->ready || s->filled >= end - s->begin) {
              usable = s;
              break;
            }
          }
        }
      }
      if (usable) {
        usable->last_use = ++use_clock_;
        counters_.cache_hit_bytes += end - begin;
        return std::shared_ptr<const Segment>(usable);
      }
      if (!cover) break;
      cover->wake_at = std::min(cover->wake_at, end - cover->begin);
      cache_cv_.wait(l.native());
    }
    // A bulk read (a batch of a pull or of a cache node's misses) takes the whole pack, which the
    // batches that follow read from (concurrent ones wait for it); a small read that goes on
    // where another of the pack ended reads ahead.
    uint64_t fetch_begin = begin, fetch_end = end;
    if (bulk && pack_bytes > 0 && pack_bytes <= options_.whole_pack_bytes) {
      fetch_begin = 0;
      fetch_end = pack_bytes;
    } else if (pack_bytes > end) {
      bool sequential = false;
      if (auto it = segments_.find(pack); it != segments_.end()) {
        for (const auto& s : it->second) {
          sequential =
              sequential ||
              (s->begin < begin && s->end + options_.coalesce_gap_bytes >= begin && s->end <= end);
        }
      }
      if (sequential) {
        fetch_end = std::min(pack_bytes, std::max(end, begin + options_.readahead_bytes));
      }
    }
    // The rest of such a range arrives after this caller has gone on, so those in flight are
    // bounded (read_cache_bytes, kMaxBackgroundFetches); past that, the caller reads its own bytes.
    const bool more = fetch_begin != begin || fetch_end != end;
    if (more && (background_fetches_ >= kMaxBackgroundFetches ||
                 fetch_end - fetch_begin > options_.read_cache_bytes - background_bytes_)) {
      fetch_begin = begin;
      fetch_end = end;
    }
    seg = std::make_shared<Segment>();
    seg->pack = pack;
    seg->begin = fetch_begin;
    seg->end = fetch_end;
    if (fetch_begin != begin || fetch_end != end) {
      seg->background = true;
      background_bytes_ += fetch_end - fetch_begin;
      ++background_fetches_;
    }
    segments_[pack].push_back(seg);
  }
  if (!seg->background) {
    Fetch(seg);  // exactly what this caller needs: no one to hand the rest to
  } else {
    // More than this caller needs: it goes on once its own bytes are in, the rest arrives for
    // the batches that follow.
    StartFetch(seg);
  }
  MutexLock l(cache_mu_);
  while (!seg->ready && seg->filled < end - seg->begin) {
    seg->wake_at = std::min(seg->wake_at, end - seg->begin);
    cache_cv_.wait(l.native());
  }
  if (seg->filled < end - seg->begin) return Err(seg->error);
  return std::shared_ptr<const Segment>(seg);
}

void ObjectPackStore::StartFetch(const std::shared_ptr<Segment>& seg) {
  try {
    auto done = std::make_shared<std::atomic<bool>>(false);
    MutexLock l(fetch_mu_);
    // Threads whose fetch ended are joined here (at once: they have returned or are returning).
    std::erase_if(fetch_threads_, [](FetchThread& t) {
      if (!*t.done) return false;
      t.thread.join();
      return true;
    });
    fetch_threads_.push_back({std::thread([this, seg, done] {
                                Fetch(seg);
                                *done = true;
                              }),
                              done});
  } catch (const std::exception& e) {
    FailSegment(seg, UnavailableError(PackUri(seg->pack) + ": starting a read: " + e.what()));
  }
}

void ObjectPackStore::FailSegment(const std::shared_ptr<Segment>& seg, const Status& why) {
  MutexLock l(cache_mu_);
  EndBackgroundLocked(*seg);
  seg->ready = true;
  seg->error = why;
  if (auto it = segments_.find(seg->pack); it != segments_.end()) {
    std::erase(it->second, seg);
    if (it->second.empty()) segments_.erase(it);
  }
  cache_cv_.notify_all();
}

void ObjectPackStore::EndBackgroundLocked(Segment& seg) {
  if (!seg.background) return;
  seg.background = false;
  background_bytes_ -= seg.end - seg.begin;
  --background_fetches_;
}

void ObjectPackStore::Fetch(const std::shared_ptr<Segment>& seg) {
  const uint64_t n = seg->end - seg->begin;
  Status got;
  try {
    {
      // The buffer is in place before any byte is published; it stays the segment's (given back
      // to the pool only when the last reader lets go), even if the GET fails half way.
      RangeBuffer buffer = buffers_->Take(n);
      MutexLock l(cache_mu_);
      seg->bytes = std::move(buffer);
      seg->pool = buffers_;
    }
    got = client_->GetRangeInto(
        PackKey(seg->pack), seg->begin, seg->bytes.first(n),
        [&](uint64_t filled) {
          MutexLock l(cache_mu_);
          seg->filled = filled;
          if (filled >= seg->wake_at) {  // some waiter's bytes are in
            seg->wake_at = UINT64_MAX;   // the others set it again before they wait
            cache_cv_.notify_all();
          }
        },
        [this] { return fetch_stop_.load(); });
  } catch (const std::exception& e) {
    // No memory for the range (or a failure of the same kind): the waiters get an error, never
    // a segment that stays unready.
    got = UnavailableError(PackUri(seg->pack) + ": reading bytes " + std::to_string(seg->begin) +
                           "-" + std::to_string(seg->end) + ": " + e.what());
  }
  std::vector<std::shared_ptr<Segment>> dropped;  // released after the lock (munmap)
  MutexLock l(cache_mu_);
  EndBackgroundLocked(*seg);
  seg->ready = true;
  if (got.ok() && seg->dropped) {
    counters_.fetched_bytes += n;
    seg->filled = n;  // for the readers waiting on it; no longer listed, so not cached
  } else if (got.ok()) {
    counters_.fetched_bytes += n;
    seg->filled = n;
    seg->last_use = ++use_clock_;
    cached_bytes_ += seg->bytes.size();
    // Least recently used ranges go first.
    while (cached_bytes_ > options_.read_cache_bytes) {
      std::shared_ptr<Segment> oldest;
      for (const auto& [p, list] : segments_) {
        for (const auto& s : list) {
          if (s->ready && (!oldest || s->last_use < oldest->last_use)) oldest = s;
        }
      }
      if (!oldest) break;
      cached_bytes_ -= oldest->bytes.size();
      auto& list = segments_[oldest->pack];
      std::erase(list, oldest);
      if (list.empty()) segments_.erase(oldest->pack);
      dropped.push_back(std::move(oldest));
    }
  } else {
    seg->error = got;
    if (auto it = segments_.find(seg->pack); it != segments_.end()) {
      std::erase(it->second, seg);
      if (it->second.empty()) segments_.erase(it);
    }
  }
  cache_cv_.notify_all();
  l.Unlock();
  dropped.clear();
}

Result<std::vector<uint8_t>> ObjectPackStore::DecodeRecord(const IndexedBlob& b,
                                                           std::span<const uint8_t> rec) {
  const std::string what = "pack " + PackUri(b.pack);
  const uint64_t want = pack::kRecordHeaderBytes + b.loc.stored_bytes;
  if (rec.size() < want) {
    return Err(CorruptionError("chunk " + b.loc.id.ToString() + ": " + what +
                               " ends inside the record at offset " +
                               std::to_string(b.loc.offset)));
  }
  std::span<const uint8_t> payload = rec.subspan(pack::kRecordHeaderBytes, b.loc.stored_bytes);
  // An uncompressed payload is copied once, without zero-filling the buffer first (that memset
  // was 12 % of an origin's CPU in a cold read, bench/run_cluster.sh).
  std::vector<uint8_t> raw;
  if (b.loc.codec == pack::Codec::kNone) {
    raw.assign(payload.begin(), payload.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(
                                                      payload.size(), b.loc.raw_bytes)));
  }
  raw.resize(b.loc.raw_bytes);
  BDN_RETURN_IF_ERROR(
      pack::CheckRecord(rec.first(pack::kRecordHeaderBytes), payload, raw, b.loc, what));
  return raw;
}

Status ObjectPackStore::ReadObjects(std::vector<std::pair<size_t, IndexedBlob>> want,
                                    BlobBatch& out, bool retry_missing) {
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
    return a.second.pack != b.second.pack ? a.second.pack < b.second.pack
                                          : a.second.loc.offset < b.second.loc.offset;
  });
  // Runs: records of one pack close together, read with one GET.
  struct Run {
    uint64_t pack = 0, begin = 0, end = 0;
    std::vector<std::pair<size_t, IndexedBlob>> members;
  };
  std::vector<Run> runs;
  uint64_t batch_bytes = 0;
  for (const auto& w : want) batch_bytes += pack::kRecordHeaderBytes + w.second.loc.stored_bytes;
  const bool bulk = batch_bytes >= options_.bulk_read_bytes;
  for (auto& w : want) {
    const IndexedBlob& b = w.second;
    if (runs.empty() || runs.back().pack != b.pack ||
        b.loc.offset > runs.back().end + options_.coalesce_gap_bytes) {
      runs.push_back({b.pack, b.loc.offset, b.loc.end(), {}});
    }
    runs.back().end = std::max(runs.back().end, b.loc.end());
    runs.back().members.push_back(std::move(w));
  }
  std::vector<Status> errors(runs.size());
  std::vector<std::vector<std::pair<size_t, IndexedBlob>>> lost(runs.size());
  ParallelFor(
      runs.size(), static_cast<size_t>(std::max(1, options_.gets_in_flight)), [&](size_t i) {
        Run& run = runs[i];
        auto seg = Range(run.pack, run.begin, run.end, bulk, false);
        if (!seg) {
          if (seg.error().code() == StatusCode::kNotFound &&
              seg.error().message().find("bucket") == std::string::npos) {
            lost[i] = run.members;  // the pack is gone: looked at again below
            return;
          }
          errors[i] = seg.error();
          return;
        }
        for (const auto& [index, b] : run.members) {
          auto rec =
              (*seg)->data().subspan(b.loc.offset - (*seg)->begin,
                                     std::min<uint64_t>(b.loc.end(), (*seg)->end) - b.loc.offset);
          auto blob = DecodeRecord(b, rec);
          if (!blob && blob.error().code() == StatusCode::kCorruption) {
            // Damaged on the way or in memory? Read the record alone once more.
            DropCached(b.pack);
            auto again = Range(b.pack, b.loc.offset, b.loc.end(), false, true);
            if (again) {
              blob = DecodeRecord(b, (*again)->data());
            } else {
              // Not verified a second time: the copy may be good, so it is not set aside, and
              // the read fails as the second read did (a 404 too: a GC may have deleted the pack
              // since; the next read looks).
              const Status& s = again.error();
              blob = Err(
                  Status(s.code() == StatusCode::kNotFound ? StatusCode::kUnavailable : s.code(),
                         blob.error().message() + "; reading it again: " + s.message()));
            }
            if (!blob && blob.error().code() == StatusCode::kCorruption) {
              WriterLock l(mu_);
              if (bad_.insert({b.pack, b.loc.offset}).second) ++counters_.damaged_copies;
              log::Error("object store: " + blob.error().message() + "; set aside");
            }
          }
          if (!blob) {
            if (errors[i].ok()) errors[i] = blob.error();
            continue;
          }
          out[index] = std::move(*blob);
        }
      });
  // Corruption first: it names a chunk.
  Status first;
  for (const Status& s : errors) {
    if (!s.ok() && (first.ok() || (s.code() == StatusCode::kCorruption &&
                                   first.code() != StatusCode::kCorruption))) {
      first = s;
    }
  }
  BDN_RETURN_IF_ERROR(first);
  std::vector<std::pair<size_t, IndexedBlob>> again;
  // A pack another replica's GC deleted is not missing: its blobs were either copied on (looked
  // for below) or no longer referenced. The catalog says which; if it cannot be asked, nothing is
  // called missing (no corruption reported for what may be a GC's deletion): the read fails as
  // Unavailable, and a later one asks again.
  if (std::any_of(lost.begin(), lost.end(), [](const auto& l) { return !l.empty(); })) {
    if (Status s = RefreshDeleted(); !s.ok()) {
      for (size_t i = 0; i < runs.size(); ++i) {
        if (lost[i].empty()) continue;
        return UnavailableError("chunk " + lost[i].front().second.loc.id.ToString() + ": pack " +
                                PackUri(runs[i].pack) +
                                " answered 404 and the pack catalog cannot say whether a GC "
                                "deleted it (" +
                                s.message() + ")");
      }
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (lost[i].empty()) continue;
    bool deleted;
    {
      ReaderLock l(mu_);
      deleted = gone_.contains(runs[i].pack);
    }
    if (!deleted) MarkMissing(runs[i].pack, "GET answered 404");
    for (auto& m : lost[i]) again.push_back(std::move(m));
  }
  if (again.empty()) return Status::Ok();
  // Another copy (a repack by a GC elsewhere) may hold them: look at the catalog, then at the
  // index again.
  if (retry_missing) BDN_RETURN_IF_ERROR(RefreshAfter(options_.clock->SteadyNow()));
  std::vector<std::pair<size_t, IndexedBlob>> elsewhere;
  for (const auto& [index, b] : again) {
    Where w = Lookup(b.loc.id, Copies::kAny);
    if (w.kind == Where::Kind::kObject && retry_missing) {
      elsewhere.emplace_back(index, w.blob);
    } else if (w.kind == Where::Kind::kSpool) {
      BDN_ASSIGN_OR_RETURN(out[index], ReadSpool(w, b.loc.id));
    } else {
      bool deleted;
      {
        ReaderLock l(mu_);
        deleted = gone_.contains(b.pack);
      }
      if (deleted) {
        return NotFoundError("chunk " + b.loc.id.ToString() + ": not in store (pack " +
                             PackUri(b.pack) + " was collected)");
      }
      return CorruptionError("chunk " + b.loc.id.ToString() + ": pack " + PackUri(b.pack) +
                             " is missing from the object store (deleted outside bdn?)");
    }
  }
  return ReadObjects(std::move(elsewhere), out, false);
}

Result<BlobBatch> ObjectPackStore::GetMany(std::span<const Digest> ids) {
  const SteadyTime started = options_.clock->SteadyNow();
  BlobBatch out(ids.size());
  std::vector<std::pair<size_t, IndexedBlob>> objects;
  std::vector<size_t> misses;
  auto resolve = [&](size_t i) -> Status {
    Where w = Lookup(ids[i], Copies::kAny);
    switch (w.kind) {
      case Where::Kind::kSpool: {
        BDN_ASSIGN_OR_RETURN(out[i], ReadSpool(w, ids[i]));
        return Status::Ok();
      }
      case Where::Kind::kObject:
        objects.emplace_back(i, w.blob);
        return Status::Ok();
      case Where::Kind::kMissing:
        return CorruptionError("chunk " + ids[i].ToString() + ": pack " + PackUri(w.blob.pack) +
                               " is missing from the object store (deleted outside bdn?)");
      case Where::Kind::kNone:
        misses.push_back(i);
        return Status::Ok();
    }
    return Status::Ok();
  };
  for (size_t i = 0; i < ids.size(); ++i) BDN_RETURN_IF_ERROR(resolve(i));
  if (!misses.empty()) {
    // Another replica may have uploaded them since this process last looked.
    BDN_RETURN_IF_ERROR(RefreshAfter(started));
    std::vector<size_t> retry;
    retry.swap(misses);
    for (size_t i : retry) BDN_RETURN_IF_ERROR(resolve(i));
  }
  BDN_RETURN_IF_ERROR(ReadObjects(std::move(objects), out, true));
  return out;
}

Result<std::vector<uint8_t>> ObjectPackStore::Get(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(BlobBatch got, GetMany(std::span<const Digest>(&id, 1)));
  if (!got[0]) return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
  return std::move(*got[0]);
}

Result<BlobSizes> ObjectPackStore::Sizes(std::span<const Digest> ids) {
  const SteadyTime started = options_.clock->SteadyNow();
  // A commit's check asks this: never from an index naming packs another replica deleted.
  BDN_RETURN_IF_ERROR(RefreshDeleted());
  BlobSizes out(ids.size());
  bool missed = false;
  auto fill = [&] {
    missed = false;
    ReaderLock l(mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (out[i]) continue;
      Where w = LookupLocked(ids[i], Copies::kAny);
      if (w.kind == Where::Kind::kSpool || w.kind == Where::Kind::kObject) {
        out[i] = w.blob.loc.raw_bytes;
      } else {
        missed = true;
      }
    }
  };
  fill();
  if (missed) {
    BDN_RETURN_IF_ERROR(RefreshAfter(started));
    fill();
  }
  return out;
}

Result<std::vector<Digest>> ObjectPackStore::FindMissing(std::span<const Digest> ids) {
  BDN_RETURN_IF_ERROR(ClaimThenRefreshDoom(ids));
  std::vector<Digest> missing;
  ReaderLock l(mu_);
  for (const Digest& id : ids) {
    Where::Kind k = LookupLocked(id, Copies::kLive).kind;
    if (k != Where::Kind::kSpool && k != Where::Kind::kObject) missing.push_back(id);
  }
  return missing;
}

Result<bool> ObjectPackStore::Contains(const Digest& id) {
  BDN_ASSIGN_OR_RETURN(std::vector<Digest> missing, FindMissing(std::span<const Digest>(&id, 1)));
  return missing.empty();
}

// ---- garbage collection ----

Result<std::vector<GcPack>> ObjectPackStore::ListSealedPacks(uint64_t* skipped) {
  if (skipped) *skipped = 0;
  BDN_RETURN_IF_ERROR(RefreshAfter(options_.clock->SteadyNow()));
  std::unordered_map<uint64_t, GcPack> packs;
  ReaderLock l(mu_);
  for (const auto& [p, bytes] : pack_bytes_) {
    if (gone_.contains(p) || missing_.contains(p)) continue;
    packs[p] = GcPack{p, bytes, {}};
  }
  for (const auto& [p, locs] : loose_) {
    if (auto it = packs.find(p); it != packs.end()) it->second.blobs = locs;
  }
  for (const auto& t : tables_) {
    for (uint64_t i = 0; i < t->size(); ++i) {
      IndexedBlob b = t->At(i);
      if (loose_.contains(b.pack)) continue;
      if (auto it = packs.find(b.pack); it != packs.end()) it->second.blobs.push_back(b.loc);
    }
  }
  std::vector<GcPack> out;
  out.reserve(packs.size());
  for (auto& [p, g] : packs) {
    std::sort(g.blobs.begin(), g.blobs.end(),
              [](const BlobLocation& a, const BlobLocation& b) { return a.offset < b.offset; });
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const GcPack& a, const GcPack& b) { return a.id < b.id; });
  return out;
}

bool ObjectPackStore::IsQuarantined(uint64_t pack, uint64_t offset) {
  ReaderLock l(mu_);
  return bad_.contains({pack, offset});
}

Status ObjectPackStore::PublishDoom(std::span<const uint64_t> packs) {
  BDN_RETURN_IF_ERROR(catalog_->PublishDoom(packs));
  WriterLock l(mu_);
  doomed_ = std::unordered_set<uint64_t>(packs.begin(), packs.end());
  doom_applied_ = ++doom_tickets_;  // a look that began before this one is not applied
  return Status::Ok();
}

Status ObjectPackStore::ClearDoom() {
  BDN_RETURN_IF_ERROR(catalog_->ClearDoom());
  WriterLock l(mu_);
  doomed_.clear();
  doom_applied_ = ++doom_tickets_;
  return Status::Ok();
}

Result<std::unique_ptr<StoreHold>> ObjectPackStore::HoldForSweep() {
  BDN_ASSIGN_OR_RETURN(std::unique_ptr<StoreHold> hold, catalog_->HoldForSweep());
  BDN_RETURN_IF_ERROR(RefreshDeleted());
  return hold;
}

Result<bool> ObjectPackStore::HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) {
  return Lookup(id, Copies::kLive, doomed).kind == Where::Kind::kObject;
}

Status ObjectPackStore::DeletePacks(std::span<const uint64_t> packs) {
  // Batch by batch, each recorded as deleted (and forgotten here) before its objects go, so that
  // no replica goes on answering from a pack whose deletion failed half-way. No object goes later
  // than kDeleteWithin (plus one request's deadline) after its record, well before replicas may
  // list it again (kRelistDeletedAfter): what is left then stays for a later run, unrecorded. A
  // pack recorded but not deleted is listed again kRelistDeletedAfter later and collected by a
  // later run. DeleteObjects takes 1,000 objects per request: the sweep (which commits wait
  // for) is short.
  const SteadyTime started = options_.clock->SteadyNow();
  for (size_t at = 0; at < packs.size(); at += S3Client::kMaxDeleteKeys) {
    if (options_.clock->SteadyNow() - started >= kDeleteWithin) {
      return DeadlineExceededError("gc: delete packs: " + std::to_string(packs.size() - at) +
                                   " of " + std::to_string(packs.size()) +
                                   " packs left for the next run (deleting took over " +
                                   FormatDuration(kDeleteWithin) + ")");
    }
    std::span<const uint64_t> batch =
        packs.subspan(at, std::min(S3Client::kMaxDeleteKeys, packs.size() - at));
    BDN_RETURN_IF_ERROR(catalog_->RemovePacks(batch));
    {
      WriterLock l(mu_);
      std::unordered_set<Digest> orphaned;
      for (uint64_t p : batch) ForgetDeletedLocked(p, kRelistDeletedAfter, orphaned);
      ReindexLooseLocked(orphaned);
    }
    for (uint64_t p : batch) DropCached(p);
    std::vector<std::string> keys;
    keys.reserve(batch.size());
    for (uint64_t p : batch) keys.push_back(PackKey(p));
    BDN_RETURN_IF_ERROR(client_->DeleteMany(keys, kDeleteWithin).WithPrefix("gc: delete packs"));
  }
  return CompactIndex(false);
}

std::optional<IndexedBlob> ObjectPackStore::Locate(const Digest& id) const {
  ReaderLock l(mu_);
  auto usable = [&](const IndexedBlob& b) REQUIRES_SHARED(mu_) {
    return !gone_.contains(b.pack) && !missing_.contains(b.pack) &&
           !bad_.contains({b.pack, b.loc.offset});
  };
  if (auto it = loose_blobs_.find(id); it != loose_blobs_.end() && usable(it->second)) {
    return it->second;
  }
  std::optional<IndexedBlob> out;
  for (auto t = tables_.rbegin(); t != tables_.rend() && !out; ++t) {
    (*t)->Find(id, [&](const IndexedBlob& b) NO_THREAD_SAFETY_ANALYSIS {  // in Find, under mu_
      if (usable(b)) out = b;
      return out.has_value();
    });
  }
  return out;
}

ObjectPackStoreStats ObjectPackStore::stats() const {
  ObjectPackStoreStats s;
  s.s3 = client_->stats();
  s.packs_uploaded = counters_.packs_uploaded.load();
  s.bytes_uploaded = counters_.bytes_uploaded.load();
  s.upload_failures = counters_.upload_failures.load();
  s.cache_hit_bytes = counters_.cache_hit_bytes.load();
  s.fetched_bytes = counters_.fetched_bytes.load();
  s.refreshes = counters_.refreshes.load();
  s.missing_packs = counters_.missing_packs.load();
  s.damaged_copies = counters_.damaged_copies.load();
  return s;
}

}  // namespace bdn::objstore
