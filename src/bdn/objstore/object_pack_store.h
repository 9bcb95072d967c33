// ObjectPackStore: the pack store on an S3-compatible object store (`bdn serve --store
// s3://bucket/prefix`; docs/format.md, "Packs in an object store"). Blobs are appended to packs
// in a local spool directory; a pack is uploaded whole, as one object <prefix>/packs/<16
// hex>.pack in the pack format (records, footer, trailer: the same bytes a local pack holds), once
// it reaches pack_target_bytes or at Sync; the index is derived from the packs' footers and kept
// on local disk as mmapped index tables (store/pack_index.h); reads are ranged GETs of the records
// a batch needs, neighbours in one pack coalesced into one GET, sequential reads served by
// read-ahead into a bounded cache, every blob verified (BLAKE3) before it is returned.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/objstore/pack_catalog.h"
#include "bdn/objstore/s3_client.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/gc_store.h"
#include "bdn/store/pack_format.h"
#include "bdn/store/pack_index.h"

namespace bdn::objstore {

struct ObjectPackStoreOptions {
  // Local, private (0700): spool/ (packs being written, sealed packs waiting for their upload)
  // and index/ (the index tables). Never the only copy of anything committed.
  std::filesystem::path dir;
  pack::CodecOptions codec;
  // A pack is sealed and uploaded once it holds this many bytes (64 MiB: 16 objects per GiB).
  uint64_t pack_target_bytes = uint64_t{64} << 20;
  int max_open_packs = 4;
  // Once no writer has appended to any open pack for this long, the open packs are sealed and
  // uploaded without waiting for a Sync, so that a commit on another replica sharing the bucket
  // finds their blobs (0: only at pack_target_bytes or Sync). While writes go on, packs fill up
  // as before (no small objects). A pack whose upload failed is tried again after this long too.
  std::chrono::milliseconds idle_seal{500};
  int uploads_in_flight = 4;
  // A pack larger than this is uploaded in parts of part_bytes, parts_in_flight at once.
  uint64_t multipart_bytes = uint64_t{128} << 20;
  uint64_t part_bytes = uint64_t{32} << 20;
  int parts_in_flight = 4;
  // An upload (StartPut) is kept in memory up to this many bytes, then in a spool file.
  uint64_t spill_bytes = uint64_t{4} << 20;
  // Reads: records of one pack this close are read with one GET (the bytes between are read and
  // dropped).
  uint64_t coalesce_gap_bytes = uint64_t{1} << 20;
  // A batch (GetMany) of records adding up to at least this many bytes (a batch of a pull, or
  // of a cache node's misses: the origin reads 64 chunks at a time) reads each pack it touches
  // whole, if the pack is at most whole_pack_bytes: the batches that follow read the rest from
  // memory (concurrent ones wait for it), so a sequential read costs about one GET per pack.
  uint64_t bulk_read_bytes = uint64_t{1} << 20;
  uint64_t whole_pack_bytes = uint64_t{96} << 20;
  // A smaller read that continues where an earlier one of the same pack ended fetches this much
  // more of the pack, kept in the cache.
  uint64_t readahead_bytes = uint64_t{32} << 20;
  // Bytes of fetched pack ranges kept in memory for later reads (0: none, and no read-ahead).
  // Besides these, the buffers of up to two whole packs (2 x whole_pack_bytes, at most
  // read_cache_bytes) are kept after their ranges are dropped, for the next fetches to write
  // into: on a virtual machine, touching fresh memory (page faults, the host mapping the page)
  // was the largest share of an origin's CPU in a cold read (bench/run_cluster.sh).
  // Ranges still arriving are not counted here. Those fetched for readers that may have gone on
  // (the rest of a whole pack, a read-ahead) are bounded apart: at most read_cache_bytes of them
  // in 32 fetches at once (ObjectPackStore::kMaxBackgroundFetches); past that, a read fetches
  // just its own bytes.
  uint64_t read_cache_bytes = uint64_t{512} << 20;
  // GETs one GetMany runs at once. A GET that reads more than its caller asked (a whole pack, a
  // read-ahead) runs on a thread of its own and may outlive the call, so no stalled pack holds up
  // the reads of another.
  int gets_in_flight = 8;
  // Uploaded packs not yet in an index table are written into one once this many accumulate.
  size_t loose_packs_per_table = 64;
  // A read that misses a blob looks at the catalog again (another replica may have uploaded it),
  // at most once per this interval.
  std::chrono::milliseconds min_refresh_interval{1000};
  // Null: a BucketCatalog over the client (one bdn serve per bucket) keeping claims from
  // claims_retain_since() on.
  std::shared_ptr<PackCatalog> catalog;
  std::function<SteadyTime()> claims_retain_since;
  // Called once per pack found missing from the object store (a 404, or gone from the listing
  // without a GC of this store deleting it), with the blobs its footer listed: bdn serve names
  // the versions that need them. On a thread of the reader; must not block long.
  std::function<void(uint64_t pack, const std::vector<Digest>& blobs)> on_missing_pack;
  std::shared_ptr<Clock> clock = Clock::Real();
};

// Counters since Open (bdn_objstore_* metrics).
struct ObjectPackStoreStats {
  S3Stats s3;
  uint64_t packs_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t upload_failures = 0;  // uploads that failed after their retries (retried at Sync)
  uint64_t cache_hit_bytes = 0;  // record bytes served from fetched ranges kept in memory
  uint64_t fetched_bytes = 0;    // bytes of ranged GETs
  uint64_t refreshes = 0;        // looks at the catalog after a miss
  uint64_t missing_packs = 0;    // packs found missing from the object store
  uint64_t damaged_copies = 0;   // records that failed verification twice (set aside)
};

// Thread-safe. One process per `dir`.
class ObjectPackStore : public ChunkStore, public GcStore {
 public:
  // Creates `dir` (private), uploads the packs a previous process left in its spool (sealing the
  // whole records of a pack it was writing), lists the catalog's packs and reads the footers of
  // those no index table in `dir` covers (one ranged GET each, several at once), and starts the
  // uploaders. Errors: those of the catalog and the client (Unavailable, PermissionDenied,
  // NotFound "<uri>: bucket \"b\" not found"); ErrnoError naming the local path.
  static Result<std::unique_ptr<ObjectPackStore>> Open(std::shared_ptr<S3Client> client,
                                                       ObjectPackStoreOptions options);
  // Stops the uploaders after their current upload; packs not uploaded stay in the spool for the
  // next Open.
  ~ObjectPackStore() override;

  // Writers: a blob counts as stored when an uploaded, undoomed pack or this process's spool
  // holds a good copy; the ids are claimed first (PackCatalog::RecordClaims). Errors: as the
  // catalog's.
  Result<bool> Contains(const Digest& id) override;
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  // From the index; on a miss the catalog is looked at again (rate-limited). A blob whose only
  // copy is in a missing pack is nullopt (not stored: the next push stores it again).
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  // Appends the blob (zstd if Options::codec says so) to an open spool pack. Errors:
  // InvalidArgument "chunk b3:…: bytes do not match the id"; ErrnoError naming the spool file
  // (ENOSPC → FailedPrecondition).
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  // Held in memory up to spill_bytes, then in an unnamed spool file; appended at Commit.
  Result<std::unique_ptr<BlobWriter>> StartPut(const Digest& id) override;
  // Claims `ids` and looks at the doom once for the whole batch (ClaimForPut, joining any group
  // of Puts then forming); its writers then store as StartPut's do, without a claim of their
  // own while the batch's claims stand when a blob's last byte is in (ClaimStands; else that
  // blob claims and looks again). A doom published after that look is answered by the claims, as
  // for a group of Puts.
  Result<std::unique_ptr<UploadBatch>> StartUploads(std::span<const Digest> ids) override;
  // Errors: NotFound "chunk b3:…: not in store"; Corruption "chunk b3:…: <why> in pack
  // s3://…/packs/<hex>.pack at offset N" for a record that fails verification twice (the copy is
  // set aside), and "chunk b3:…: pack s3://…/packs/<hex>.pack is missing from the object store
  // (deleted outside bdn?)" for a pack that is gone; Unavailable when the object store cannot be
  // reached after retries.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  // The blobs of one pack that lie close together are read with one ranged GET; up to
  // gets_in_flight GETs at once. Errors: as Get (NotFound is a nullopt).
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  bool PrefersBatches() const override { return true; }
  // Seals every open pack and waits until every pack sealed so far is uploaded (retrying those
  // whose upload failed before) and recorded in the catalog. Errors: the upload's (Unavailable
  // after retries), naming the pack; the packs stay in the spool and the next Sync tries again.
  Status Sync() override;
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override { return catalog_->HoldForCommit(); }

  // ---- GcStore: packs are deleted and repacked as objects ----
  Result<std::unique_ptr<StoreHold>> BeginGc() override { return catalog_->BeginGc(); }
  // Every uploaded pack the index knows (after looking at the catalog again), with its blobs.
  Result<std::vector<GcPack>> ListSealedPacks(uint64_t* skipped) override;
  bool IsQuarantined(uint64_t pack, uint64_t offset) override;
  Status PublishDoom(std::span<const uint64_t> packs) override;
  Status ClearDoom() override;
  // The catalog's hold, then a look at the packs deleted since this index last looked: another
  // run's sweep (its locks lost to a PostgreSQL restart, so two runs overlapped) may have
  // deleted packs this index still names, and HasLiveCopy must not count a copy in them.
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override;
  Result<std::vector<Digest>> LiveClaims() override { return catalog_->LiveClaims(); }
  // Counts only uploaded copies (Where::Kind::kObject): a copy in this process's spool is not
  // in the bucket yet, and the doomed pack the sweep deletes may be the version's only durable
  // copy (a version committed through another replica during the grace).
  Result<bool> HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) override;
  // In batches of S3Client::kMaxDeleteKeys: records the packs as deleted in the catalog, forgets
  // them here, then deletes their objects (one DeleteObjects each); at the end the index tables
  // are rewritten without them. No request starts more than kDeleteWithin after its batch's
  // record, and no batch is recorded once kDeleteWithin has passed since the call began.
  // Errors: the catalog's and the object store's (a batch recorded whose objects are not all
  // deleted is listed again after kRelistDeletedAfter); DeadlineExceeded "gc: delete packs: N of
  // M packs left for the next run (deleting took over 5m)".
  Status DeletePacks(std::span<const uint64_t> packs) override;
  // DeletePacks has rewritten the local index tables already (they are a cache of the packs'
  // footers here, rebuilt from the bucket when missing, so there is no crash window to close).
  Status CompactIndex() override { return Status::Ok(); }
  ChunkStore& blobs() override { return *this; }

  // Where the uploaded copy of `id` that reads use is (nullopt: none, or only in the spool).
  std::optional<pack::IndexedBlob> Locate(const Digest& id) const;

  ObjectPackStoreStats stats() const;
  // "s3://bucket/prefix/packs/<hex>.pack".
  std::string PackUri(uint64_t pack) const;
  const std::string& uri() const { return client_->uri(); }

 private:
  struct SpoolPack;
  struct Segment;
  class BufferPool;
  class SpoolWriter;
  // Where a blob is.
  struct Where {
    enum class Kind { kNone, kSpool, kObject, kMissing } kind = Kind::kNone;
    pack::IndexedBlob blob;
    std::shared_ptr<SpoolPack> spool;
  };
  enum class Copies { kAny, kLive };

  ObjectPackStore(std::shared_ptr<S3Client> client, ObjectPackStoreOptions options);
  Status Init();

  // `also`: with kLive, packs (sorted) that count as doomed too.
  Where Lookup(const Digest& id, Copies copies, std::span<const uint64_t> also = {}) const;
  Where LookupLocked(const Digest& id, Copies copies, std::span<const uint64_t> also = {}) const
      REQUIRES_SHARED(mu_);
  // Records `ids` as claims (none if empty), then takes up the doom and the packs another
  // replica's GC deleted (RefreshDeleted); remembers the ids as claimed (RecentlyClaimed).
  Status ClaimThenRefreshDoom(std::span<const Digest> ids);
  // Whether this process claimed `id` at most kClaimReuse ago and that claim is still kept
  // (claimed at or after claims_retain_since(); replicas sharing a catalog must keep claims
  // alike, the same --gc-grace): a Put of a chunk that the push's FindMissing just claimed needs
  // no claim of its own (a database transaction per chunk, most of PostgreSQL's load in a push).
  // It still looks at the doom and the deleted packs (a GC's copy of a doomed blob is such a Put).
  bool RecentlyClaimed(const Digest& id);
  // Whether a claim this process recorded at `at` still stands for a Put now: at most
  // kClaimReuse ago, and at or after claims_retain_since().
  bool ClaimStands(SteadyTime at) const;
  // A Put's claim and look at the doom: those of concurrent Puts go to the catalog together, one
  // ClaimThenRefreshDoom for all that arrived while the previous one ran (group commit), which
  // claims the ids not RecentlyClaimed, so that a push's uploads cost a look per group, and a
  // claim transaction per group only where they reach a replica that did not answer their
  // FindMissing. Errors: ClaimThenRefreshDoom's for the group. Several ids (an UploadBatch's)
  // join one group together.
  Status ClaimForPut(std::span<const Digest> ids);
  // Forgets the packs that the catalog says were deleted since the last look (PackCatalog::
  // DeletedSince), so that nothing is answered from an index that still names them; looks at the
  // whole pack list again if the catalog pruned some unseen. Single-flight.
  Status RefreshDeleted();
  // The part of RefreshDeleted that only reads the catalog's deleted packs; returns whether the
  // catalog had every position since the last look (RefreshPacks uses it: no listing from inside
  // a listing). With `from`, reads from that position (if earlier than the last look) again.
  Result<bool> ApplyDeleted(std::optional<uint64_t> from = std::nullopt);
  // One look of ApplyDeleted (from `from`, else from the last look's end).
  Result<bool> LookAtDeleted(std::optional<uint64_t> from);
  // Forgets pack `p`, deleted: its blobs are no longer found in it; held off for `hold`. The ids
  // whose one loose entry (loose_blobs_) named it go into `orphaned`, for ReindexLooseLocked.
  void ForgetDeletedLocked(uint64_t p, std::chrono::milliseconds hold,
                           std::unordered_set<Digest>& orphaned) REQUIRES(mu_);
  // Points loose_blobs_ of each id in `ids` that has none at another loose pack holding it, if
  // one does (a blob stored twice, by two replicas or a repack, whose indexed copy was deleted).
  void ReindexLooseLocked(const std::unordered_set<Digest>& ids) REQUIRES(mu_);
  // Keeps listings from indexing pack `p` for `hold` from now (or longer, if already so; nothing
  // for a hold of 0); whether that still holds.
  void HoldOffRelistLocked(uint64_t p, std::chrono::milliseconds hold) REQUIRES(mu_);
  bool RelistHeldOffLocked(uint64_t p) const REQUIRES_SHARED(mu_);
  // Looks at the catalog again unless a look that began after `since` has ended (single-flight,
  // at most one per min_refresh_interval).
  Status RefreshAfter(SteadyTime since);
  Status RefreshPacks();
  Result<std::vector<pack::BlobLocation>> ReadPackFooter(uint64_t pack, uint64_t bytes);
  void AddUploaded(uint64_t pack, uint64_t bytes, std::vector<pack::BlobLocation> blobs,
                   bool from_this_process);
  void MarkMissing(uint64_t pack, const std::string& why);
  // Writes an index table for the loose packs once there are loose_packs_per_table of them (or
  // any, with `force`), then merges the tables into one when there are more than 16.
  Status PublishIndex(bool force);
  // Rewrites the index tables as one, without the packs in gone_, if any table names one (or
  // always, with `force`).
  Status CompactIndex(bool force);
  Status CompactLocked(bool force) REQUIRES(index_write_mu_);

  // Writing.
  // `claimed_at`: when the caller's ClaimForPut covered `id` (an UploadBatch's writer); it stands
  // for this Put's claim if it still does now (ClaimStands), else the Put claims.
  Result<PutOutcome> StoreBlob(const Digest& id, std::span<const uint8_t> raw,
                               std::optional<SteadyTime> claimed_at = std::nullopt);
  Result<std::shared_ptr<SpoolPack>> AcquirePack();
  void ReleasePack(const std::shared_ptr<SpoolPack>& p, bool full);
  Result<std::shared_ptr<SpoolPack>> CreateSpoolPack();
  Status SealLocked(SpoolPack& p);
  void UploadLoop();
  // Seals open packs idle for options_.idle_seal and queues them, and queues failed uploads
  // again, until the store stops.
  void IdleSealLoop();
  Status Upload(SpoolPack& p);
  Status RecoverSpool();

  // Reading.
  Result<std::vector<uint8_t>> ReadSpool(const Where& w, const Digest& id);
  // Reads the blobs of `want` (index into `out`, and where) from their packs.
  Status ReadObjects(std::vector<std::pair<size_t, pack::IndexedBlob>> want, BlobBatch& out,
                     bool retry_missing);
  // The bytes [begin, end) of `pack`, from the cache or fetched and cached: the whole pack for a
  // `bulk` batch, with read-ahead for a small read that goes on where another ended; exactly
  // those bytes, not cached, with `bypass_cache`.
  Result<std::shared_ptr<const Segment>> Range(uint64_t pack, uint64_t begin, uint64_t end,
                                               bool bulk, bool bypass_cache);
  // Fetches `seg` (listed in segments_, not ready) into a buffer of its own, publishing its
  // bytes as they arrive (Segment::filled), then marks it ready (cached, the least recently used
  // ranges dropped past read_cache_bytes) or failed (no longer listed) and wakes the waiters.
  void Fetch(const std::shared_ptr<Segment>& seg);
  Result<std::vector<uint8_t>> DecodeRecord(const pack::IndexedBlob& b,
                                            std::span<const uint8_t> rec);
  void DropCached(uint64_t pack);

  const std::shared_ptr<S3Client> client_;
  const ObjectPackStoreOptions options_;
  std::shared_ptr<PackCatalog> catalog_;

  // The index (guarded by mu_).
  mutable SharedMutex mu_;
  // Blobs in the spool: their pack and where in it.
  std::unordered_map<Digest, std::pair<std::shared_ptr<SpoolPack>, pack::BlobLocation>> spool_blobs_
      GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::vector<pack::BlobLocation>> loose_
      GUARDED_BY(mu_);  // uploaded, not in a table
  std::unordered_map<Digest, pack::IndexedBlob> loose_blobs_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const pack::IndexTable>> tables_ GUARDED_BY(mu_);
  std::unordered_set<uint64_t> indexed_ GUARDED_BY(mu_);  // packs covered by tables_
  std::unordered_map<uint64_t, uint64_t> pack_bytes_
      GUARDED_BY(mu_);  // every uploaded pack known: its size
  std::unordered_map<uint64_t, uint64_t> pack_gen_
      GUARDED_BY(mu_);  // refresh generation it became known in
  uint64_t gen_ GUARDED_BY(mu_) = 0;
  std::unordered_set<uint64_t> gone_
      GUARDED_BY(mu_);  // deleted by a GC of this store or another replica; tables may name them
  // Packs recorded as deleted (by this process's GC or another replica's, through the catalog,
  // whether this process knew them or not) and when a listing may index them again: until then a
  // listing that still shows the object (its DeleteObject not done yet) skips it, so no writer is
  // told its blobs are stored just before it goes. After kRelistDeletedAfter an object still listed
  // is one whose deletion failed or whose deleter died: it is indexed again and collected by a
  // later run. A deleter deletes no object later than kDeleteWithin (plus one request's deadline)
  // after recording it (DeletePacks), well inside this window. Entries go only once expired
  // (memory: the deletions of kRelistDeletedAfter). The hold runs from the row's record, by the
  // catalog's clock (PackCatalog::Deleted::ages), so rows older than the window (an Open reads
  // 30 days of them) hold nothing off: a pack whose deletion failed, indexed again since and
  // relied on by later versions, stays readable on a replica that restarts.
  std::unordered_map<uint64_t, SteadyTime> relist_after_ GUARDED_BY(mu_);
  static constexpr std::chrono::minutes kRelistDeletedAfter{10};
  static constexpr std::chrono::minutes kDeleteWithin{5};
  static constexpr std::chrono::milliseconds kZeroAge{0};
  std::unordered_set<uint64_t> missing_ GUARDED_BY(mu_);  // found missing from the object store
  std::set<std::pair<uint64_t, uint64_t>> bad_
      GUARDED_BY(mu_);  // damaged copies (pack, record offset)
  std::unordered_set<uint64_t> doomed_ GUARDED_BY(mu_);
  // Looks at the doom in the order they began: each takes a ticket before asking the catalog,
  // and its answer replaces doomed_ only if no later look (or PublishDoom, ClearDoom) was applied
  // first, so a slow answer never undoes a newer one.
  uint64_t doom_tickets_ GUARDED_BY(mu_) = 0;
  uint64_t doom_applied_ GUARDED_BY(mu_) = 0;
  // RefreshDeleted's position in the catalog's deleted packs, and its single flight: a caller
  // needs a look that began after it arrived; one look runs at a time, and the callers waiting
  // when it ends take its answer if it began after them (so a burst costs at most two queries).
  Mutex deleted_mu_;
  std::condition_variable deleted_cv_;
  uint64_t deleted_seen_ GUARDED_BY(deleted_mu_) = 0;
  bool deleted_running_ GUARDED_BY(deleted_mu_) = false;
  uint64_t deleted_started_ GUARDED_BY(deleted_mu_) = 0;  // looks begun
  uint64_t deleted_ended_ GUARDED_BY(deleted_mu_) = 0;    // the last look that ended
  Status deleted_status_ GUARDED_BY(deleted_mu_);         // its answer
  bool deleted_complete_ GUARDED_BY(deleted_mu_) = true;
  // Looks that found rows pruned unseen, and how many of them a whole listing has answered since.
  uint64_t deleted_gaps_ GUARDED_BY(deleted_mu_) = 0;
  uint64_t deleted_gaps_listed_ GUARDED_BY(deleted_mu_) = 0;
  PendingPuts pending_ GUARDED_BY(mu_);  // Puts in flight

  // The spool (guarded by spool_mu_).
  Mutex spool_mu_;
  std::condition_variable spool_cv_;
  std::vector<std::shared_ptr<SpoolPack>> open_
      GUARDED_BY(spool_mu_);  // being written, each by one writer at a time
  std::deque<std::shared_ptr<SpoolPack>> queue_
      GUARDED_BY(spool_mu_);  // sealed, waiting for an uploader
  std::vector<std::shared_ptr<SpoolPack>> uploading_ GUARDED_BY(spool_mu_);  // taken by an uploader
  std::vector<std::shared_ptr<SpoolPack>> failed_
      GUARDED_BY(spool_mu_);  // sealed, upload failed: retried at Sync
  bool stopping_ GUARDED_BY(spool_mu_) = false;
  std::vector<std::thread> uploaders_;
  std::thread idle_sealer_;
  SteadyTime last_append_ GUARDED_BY(spool_mu_){};  // when a writer last let go of an open pack
  Mutex sync_mu_;                                   // one Sync at a time
  Mutex index_write_mu_;                            // one PublishIndex or CompactIndex at a time

  // Refreshes.
  Mutex refresh_mu_;
  std::condition_variable refresh_cv_;
  bool refreshing_ GUARDED_BY(refresh_mu_) = false;
  SteadyTime last_refresh_start_ GUARDED_BY(refresh_mu_){};
  bool refreshed_once_ GUARDED_BY(refresh_mu_) = false;
  Status last_refresh_ GUARDED_BY(refresh_mu_);

  Mutex claimed_mu_;
  std::unordered_map<Digest, SteadyTime> claimed_ GUARDED_BY(claimed_mu_);
  SteadyTime claimed_pruned_ GUARDED_BY(claimed_mu_){};  // when claimed_ last dropped old entries
  // ClaimForPut's groups: the one filling up, and whether one is being recorded.
  struct ClaimGroup;
  Mutex group_mu_;
  std::condition_variable group_cv_;
  std::shared_ptr<ClaimGroup> open_group_ GUARDED_BY(group_mu_);
  bool group_running_ GUARDED_BY(group_mu_) = false;

  // The read cache (guarded by cache_mu_).
  Mutex cache_mu_;
  std::condition_variable cache_cv_;
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Segment>>> segments_
      GUARDED_BY(cache_mu_);
  uint64_t cached_bytes_ GUARDED_BY(cache_mu_) = 0;
  uint64_t use_clock_ GUARDED_BY(cache_mu_) = 0;
  // Buffers of dropped segments, for the next fetches (shared with the segments, which give their
  // buffer back when the last reader lets go).
  std::shared_ptr<BufferPool> buffers_;

  struct Counters {
    std::atomic<uint64_t> packs_uploaded{0}, bytes_uploaded{0}, upload_failures{0},
        cache_hit_bytes{0}, fetched_bytes{0}, refreshes{0}, missing_packs{0}, damaged_copies{0};
  };
  mutable Counters counters_;
  // The GETs that read more than their caller asked (a whole pack, a read-ahead) run on threads
  // of their own, so that the caller goes on once its own bytes are in and a stalled pack holds
  // up no other; the destructor aborts them (fetch_stop_) and joins them.
  struct FetchThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // Starts Fetch(seg) on a thread of its own; if no thread can be started, fails `seg`.
  void StartFetch(const std::shared_ptr<Segment>& seg);
  // Takes `seg`, if it is a background one, off background_bytes_ and background_fetches_.
  void EndBackgroundLocked(Segment& seg) REQUIRES(cache_mu_);
  // Background fetches (Segment::background) at once, at most; their bytes are held within
  // read_cache_bytes.
  static constexpr int kMaxBackgroundFetches = 32;
  uint64_t background_bytes_ GUARDED_BY(cache_mu_) = 0;
  int background_fetches_ GUARDED_BY(cache_mu_) = 0;
  // Marks `seg` (not ready) failed with `why`, unlisted, and wakes its waiters.
  void FailSegment(const std::shared_ptr<Segment>& seg, const Status& why);
  Mutex fetch_mu_;
  std::vector<FetchThread> fetch_threads_ GUARDED_BY(fetch_mu_);
  std::atomic<bool> fetch_stop_{false};
};

}  // namespace bdn::objstore
