// LocalChunkStore: the store on a local directory (the embedded store, and `bdn serve`'s): blobs
// appended to pack files, found through the pack index (docs/format.md, "Packs").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/fd.h"
#include "bdn/base/mutex.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/gc_store.h"
#include "bdn/store/pack_format.h"
#include "bdn/store/pack_index.h"

namespace bdn {

// What RebuildIndex found.
struct IndexRebuildReport {
  uint64_t packs = 0;           // packs now indexed
  uint64_t blobs = 0;           // index entries written
  uint64_t packs_repaired = 0;  // packs whose footer was missing or damaged, sealed again
  uint64_t tables_replaced = 0;
};

// Counts over the whole store (Stats).
struct StoreStats {
  uint64_t packs = 0;
  uint64_t pack_bytes = 0;  // bytes of the pack files
  uint64_t blobs = 0;       // index entries (a blob stored twice counts twice)
  uint64_t raw_bytes = 0;   // decoded bytes of those blobs
  uint64_t stored_bytes = 0;
  uint64_t zstd_blobs = 0;  // of which stored with zstd
  uint64_t index_tables = 0;
};

// Where one stored copy of a blob is (Locate).
struct StoredBlob {
  std::filesystem::path pack_path;
  pack::BlobLocation loc;
};

// The reason of LocalChunkStore::Get's NotFound for a chunk whose only copy was found corrupt
// and set aside: the store lost it, which a reader reports as corruption (exit 5), not as a
// chunk it never had.
inline constexpr std::string_view kSetAsideCorrupt = "set_aside_corrupt";

// The local pack store under `root`:
//
//   packs/<16 hex>.pack   sealed packs: records, then the footer listing them (immutable)
//   packs/<16 hex>.open   packs being written (each flock'ed by its writer)
//   index/<16 hex>.idx    index tables (derived from the footers; rebuilt when missing)
//   quarantine            copies found damaged, one line each ("<pack> <offset> <id>"), never
//                         read again
//   gc/lock               flock: shared by commits (HoldForCommit), exclusive by a GC's sweep
//   gc/running            flock: held by the one GC run at a time (its pid inside)
//   gc/doomed             the packs a GC run is about to delete or repack (one hex id a line)
//   gc/doomed.reserve     256 KiB allocated while there is space: a doom is written into it, so
//                         that a GC can run on a full disk
//   gc/claims/*.claims    blob ids each live writer process was told are stored (ClaimMode)
//
// Put appends a record to one of up to Options::max_open_packs open packs (one writer thread per
// pack at a time); a pack is sealed (footer, fdatasync, renamed .open -> .pack) when it reaches
// pack_target_bytes, and by Sync, which seals every open pack and syncs the directory: one
// fdatasync per pack instead of one per blob. Blobs of a pack this process has open are visible
// to this process at once, and to other processes once the pack is sealed (or, with
// Options::read_others_open_packs, as soon as their records are whole: a cache).
//
// Crash safety: a record carries its own checked header and its id is the BLAKE3 of its bytes, so
// the whole records of a pack whose writer died (no footer, or a torn one) are found by a scan:
// the next Open (of any process) seals them into a valid pack and drops the torn tail. Nothing
// committed is lost, because Sync ran before the commit.
//
// Every Get re-hashes the bytes. A copy that fails is recorded in `quarantine` and never used
// again; Get then tries another copy and otherwise reports Corruption, and the blob counts as
// missing, so the next push of the same data stores a good copy (the index points at it).
//
// Several processes may use one store: writers never share a pack, index tables are immutable and
// replaced under a lock file, and a process that misses a blob in Get rescans the directories
// (another process may have sealed a pack since). The store starts no threads, so it may be opened
// before a fork.
//
// Garbage collection (GcStore, maintenance/gc.h): a writer's FindMissing, Contains, Put and
// StartPut record the ids they answer "stored" for (or store) as claims first, then look at the
// doom, and count a blob whose only copies are in doomed packs as missing; Get and Sizes read
// doomed copies as any other. So a blob a GC is deciding to delete is stored again by whoever
// needs it, and one a writer relied on before the doom is claimed.
//
// Thread-safe.
class LocalChunkStore : public ChunkStore, public GcStore {
 public:
  // kDurable: Sync() fdatasyncs each pack it seals, and the directory, so a committed version
  // survives a power cut. kNone: no fdatasync at all (scratch stores, tests, BDN_SYNC=0).
  enum class Durability { kDurable, kNone };

  struct Options {
    Durability durability = Durability::kDurable;
    pack::CodecOptions codec;
    // A pack is sealed once it holds this many bytes (docs/benchmarks.md: 16-64 MiB measured).
    uint64_t pack_target_bytes = uint64_t{32} << 20;
    // Packs written at once; each is written by one thread at a time.
    int max_open_packs = 4;
    // Sealed packs that no index table covers yet are read from their footers at Open; once this
    // many accumulate, or packs holding loose_blobs_per_table blobs (small blobs: reading 10^6
    // footer entries takes seconds, docs/benchmarks.md "Opening a store"), Sync writes a table.
    size_t loose_packs_per_table = 8;
    size_t loose_blobs_per_table = 65536;
    // Named in the error Open gives for a store in the old one-file-per-chunk layout, e.g.
    // "bdn store migrate --data /srv/bdn".
    std::string migrate_command = "bdn store migrate";
    // Open a store in the old layout anyway (for the migration itself).
    bool allow_old_layout = false;
    // Whether index tables are written (Sync, Open). A bounded cache (NodeCache) drops packs
    // whole and keeps few enough that reading their footers at Open is cheap: no tables.
    bool index_tables = true;
    // Whether the blobs of packs other live processes are still writing (.open) are read too:
    // each such pack is scanned for its whole records (pack::ScanRecords, every record verified;
    // a half-written last one is left for later) when first seen, and again from where that scan
    // stopped whenever a lookup misses and the file has grown since; a pack whose writer died
    // (its flock free) is recovered then as Open recovers it. Only for a cache (NodeCache): a
    // blob in another process's open pack is not durable, so a store whose answers a commit
    // relies on (FindMissing, Sizes) must not count it.
    bool read_others_open_packs = false;
    // Where writers' claims are recorded for GC (gc_store.h). kNone also ignores any doom.
    ClaimMode claims = ClaimMode::kNone;
    // kMemory: claims recorded before the time this returns are dropped (bdn serve: the start
    // of its oldest live push claim, or a minute ago). Called at most once a second. Null: kept
    // for 10 minutes.
    std::function<SteadyTime()> claims_retain_since;
    // Steady time of claims in memory. Never null.
    std::shared_ptr<Clock> clock = Clock::Real();
  };

  // One pack file (ListPacks).
  struct PackInfo {
    uint64_t id = 0;
    uint64_t bytes = 0;    // file size
    int64_t mtime_ns = 0;  // last write: for a sealed pack, when it was sealed
    bool sealed = false;   // .pack (else .open: being written, by this or another process)
  };

  // Opens the store, creating its directories private to the owner (0700, files 0600; an existing
  // root with group or other bits is tightened, with a warning: CreatePrivateDirectory). Recovers
  // packs whose writer died (sealing their
  // whole records, dropping a torn tail), reads the footers of packs no index table covers, and
  // writes a table for them if there are many or none exists (the index is rebuilt when
  // missing). On a read-only file system it opens read-only: reads work, Put fails.
  // Errors: FailedPrecondition "chunk store <root>: in the old one-file-per-chunk layout (…);
  // convert it with: <migrate_command>" for a store of the old layout; ErrnoError naming the
  // path on I/O errors.
  static Result<std::unique_ptr<LocalChunkStore>> Open(const std::filesystem::path& root,
                                                       Options options);
  static Result<std::unique_ptr<LocalChunkStore>> Open(
      const std::filesystem::path& root, Durability durability = Durability::kDurable);
  // Seals the open packs (without fdatasync: what they hold is not committed).
  ~LocalChunkStore() override;

  // Whether `root` holds a store in the old one-file-per-chunk layout (a chunks/ directory).
  static bool IsOldLayout(const std::filesystem::path& root);

  Result<bool> Contains(const Digest& id) override;
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  // The raw (decoded) length of each blob from the pack index, in order; nullopt where no good
  // copy is indexed. Reads no blob, so the length is not verified (Get would refuse a damaged
  // copy). On a miss the pack and index directories are looked at again once, as in Get.
  // Errors: none today (the index is in memory).
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  // Appends the blob to an open pack, zstd-compressed if Options::codec says so; nothing is
  // written if a good copy is stored already, or while another thread stores it (Put waits for
  // that one). Errors: InvalidArgument if Digest::Of(data) != id; FailedPrecondition on a full
  // disk; PermissionDenied on a read-only store; Internal on other I/O errors; each names the
  // chunk.
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  // An upload streamed into an open pack as it arrives (never held whole, no temporary file):
  // the payload is written after a zeroed record header, which Commit writes once the bytes hash
  // to `id`; until then the record is invisible, and a crash leaves a torn tail that the next
  // Open drops. The writer holds its pack for the whole upload (such packs do not count against
  // max_open_packs, and Sync does not wait for them: it fdatasyncs them instead). The bytes are
  // stored raw (no zstd: it would need them whole). Nothing is written when a good copy is stored
  // already. Errors: PermissionDenied on a read-only store; then as Put.
  Result<std::unique_ptr<BlobWriter>> StartPut(const Digest& id) override;
  // One pread of the record into the returned buffer (decoded if compressed), verified.
  // Errors: NotFound "chunk b3:…: not in store" (with " (a copy found corrupt was set aside;
  // push the data again to repair)" and reason kSetAsideCorrupt when this store quarantined its
  // copy: the CLI exits 5 for it, as for the first read that found it corrupt); Corruption
  // "chunk b3:…: <why> in pack <path> at offset N; set aside, push the data again to repair"
  // (the copy is quarantined); Internal on I/O errors.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  // The blob's newest copy when its pack is open in this process and its record is in the page
  // cache (pack::ReadBlobNow); nullopt otherwise, and for a blob not indexed here.
  std::optional<std::vector<uint8_t>> GetNow(const Digest& id, uint64_t max_bytes) override;
  // Get per id, by up to 8 threads at once.
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  // Seals every open pack (footer; fdatasync when durable; renamed to .pack), waits for packs
  // other threads are sealing, syncs the packs directory, and writes an index table once
  // loose_packs_per_table packs are not in one. Errors: ErrnoError naming the pack.
  Status Sync() override;
  // See ChunkStore. Deletes the .open packs this process writes, held by no writer and covered by
  // no Sync (an upload's pack that a Sync fdatasync'ed is kept), once a write of this store found
  // the disk full, and forgets their blobs; sealed packs stay. Errors: ErrnoError "pack <path>:
  // delete: …" (that pack is kept and sealed later as before).
  Result<Discarded> DiscardAfterFullDisk() override;
  uint64_t FullDiskCount() const override { return full_disk_count_; }
  Sealed SealedSoFar() const override { return {sealed_packs_, sealed_bytes_}; }
  // See ChunkStore: ForgetDeletedPacks, then ForgetDeletedFollowedPacks (in a cache,
  // read_others_open_packs); otherwise forgets the deleted packs this process never read a blob
  // from (held since Open read their footers), and keeps those it read from, which it reads on
  // from (docs/format.md "Garbage collection").
  void ReleaseDeleted() override;

  // Where a good copy of `id` is, or nullopt. Errors: as Get's lookup (none today).
  Result<std::optional<StoredBlob>> Locate(const Digest& id);
  // Rebuilds the index from the pack footers alone (recovering packs without a valid footer),
  // replacing every table by one. Safe while other processes use the store.
  // Errors: ErrnoError; PermissionDenied on a read-only store.
  Result<IndexRebuildReport> RebuildIndex();
  // Counts over every pack (reads every footer). Errors: ErrnoError.
  Result<StoreStats> Stats();

  // ---- for a bounded cache over the store (NodeCache): packs dropped whole, oldest first ----

  // Every pack file in packs/ (sealed and being written), oldest first (modification time,
  // then id). Errors: ErrnoError naming the directory.
  Result<std::vector<PackInfo>> ListPacks();
  // The blobs a sealed pack holds (from this process's view, else its footer).
  // Errors: NotFound if the pack is gone; Corruption if its footer is damaged; ErrnoError.
  Result<std::vector<pack::BlobLocation>> PackBlobs(uint64_t pack);
  // Deletes the sealed pack `pack` and forgets its blobs: they count as missing from now on in
  // this process, and in others once they look again (their next miss or Open). A reader that
  // already has the pack open finishes its read. Errors: ErrnoError naming the pack;
  // PermissionDenied on a read-only store.
  Status DropPack(uint64_t pack);

  // ---- garbage collection (GcStore; see the class comment) ----

  // LOCK_SH on gc/lock (a no-op hold for a read-only store or ClaimMode::kNone), then forgets
  // the packs a GC in another process deleted since this one looked (ForgetPacksGoneFromDisk):
  // the commit's check must not count a blob only they held.
  Result<std::unique_ptr<StoreHold>> HoldForCommit() override;
  Result<std::unique_ptr<StoreHold>> BeginGc() override;
  // Sealed packs from their footers (loose ones from memory).
  Result<std::vector<GcPack>> ListSealedPacks(uint64_t* skipped) override;
  bool IsQuarantined(uint64_t pack, uint64_t offset) override;
  // Writes gc/doomed (temporary name, renamed), which every process looks at before answering
  // a writer. The doom is written into gc/doomed.reserve's blocks when it fits them, so that a
  // GC on a full disk can doom (and then delete) what it frees.
  Status PublishDoom(std::span<const uint64_t> packs) override;
  // Removes gc/doomed, and takes the reserve again (EnsureDoomReserve).
  Status ClearDoom() override;
  // LOCK_EX on gc/lock.
  Result<std::unique_ptr<StoreHold>> HoldForSweep() override;
  // kProcessFile: the ids in the claims files of processes still alive (the files of dead ones
  // are deleted); kMemory: those recorded since claims_retain_since.
  Result<std::vector<Digest>> LiveClaims() override;
  Result<bool> HasLiveCopy(const Digest& id, std::span<const uint64_t> doomed) override;
  // Unlinks each pack, forgets its blobs, and syncs the directory.
  Status DeletePacks(std::span<const uint64_t> packs) override;
  ChunkStore& blobs() override { return *this; }
  // Rewrites every index table that covers a pack no longer in packs/ without it, and deletes
  // tables left over from an interrupted merge or rewrite (under index/lock). Errors: I/O.
  Status CompactIndex() override;

  std::filesystem::path PackPath(uint64_t pack, bool sealed = true) const;
  const std::filesystem::path& root() const { return root_; }
  bool read_only() const { return !writable_; }

 private:
  struct PackFile;
  struct OpenPack;
  struct Found {
    pack::IndexedBlob blob;
    std::shared_ptr<PackFile> file;
  };

  LocalChunkStore(std::filesystem::path root, Options options);
  Status Init();

  // Which copies a lookup may return: any good one (readers), or only one outside the doomed
  // packs (writers deciding whether to store a blob).
  enum class Copies { kAny, kLive };
  // A good copy of `id` (not quarantined), from this process's packs or the index tables.
  std::optional<pack::IndexedBlob> Lookup(const Digest& id, Copies copies = Copies::kAny) const;
  // `also`: with kLive, packs (sorted) that count as doomed too.
  std::optional<pack::IndexedBlob> LookupLocked(const Digest& id, Copies copies = Copies::kAny,
                                                std::span<const uint64_t> also = {}) const
      REQUIRES_SHARED(mu_);
  // Before a writer relies on `ids` being stored: records them as claims, then takes up a doom
  // published since the last look. Returns whether the doom changed.
  // Errors: I/O errors recording the claims (ENOSPC → FailedPrecondition).
  Result<bool> ClaimThenRefreshDoom(std::span<const Digest> ids);
  // Re-reads gc/doomed if it changed since the last look; returns whether it did.
  bool RefreshDoom();
  // Makes gc/doomed.reserve (256 KiB of allocated blocks) if it is missing or short: the space a
  // GC's doom is written into on a full disk (PublishDoom). Best effort (a full disk: the next
  // open or ClearDoom tries again).
  void EnsureDoomReserve();
  bool IsBadLocked(const pack::IndexedBlob& b) const REQUIRES_SHARED(mu_);
  // Re-reads the index and packs directories if they may have changed since the last look (a
  // blob was missed), and scans the packs other processes are writing that grew since
  // (read_others_open_packs); returns whether anything may have been found. Costs two fstat
  // calls, plus an fstat and a flock probe per pack other processes are writing, when nothing
  // changed.
  bool RefreshIfChanged();
  // In a cache (read_others_open_packs): forgets the packs this process holds open whose file
  // has no name left (another process deleted it: DropPack, a region evicted), and closes
  // their descriptors, so that their disk space returns; one fstat per held pack, no other I/O
  // and no wait for a refresh. (A store's reader keeps the packs a GC deleted under it: it reads
  // on from them, docs/format.md "Garbage collection".) A renamed pack (an .open one sealed)
  // keeps a name.
  void ForgetDeletedPacks();
  // Drops the packs of other processes this one follows (others_open_, which holds a descriptor
  // of each apart from files_) whose file has no name left: a region another process was
  // filling when this one began to follow it, then sealed and evicted. Only when no refresh is
  // under way (which drops them itself, LoadLoosePacks): never waits for one. Not to be called
  // with refresh_mu_ held.
  void ForgetDeletedFollowedPacks() EXCLUDES(refresh_mu_);
  // ReleaseDeleted at most once a second (options.clock), from every read, hits included: a
  // process that only hits otherwise kept the regions other processes evicted, and their disk
  // space, until its next miss.
  void ForgetDeletedPacksNowAndThen();
  Status Refresh();
  // Loads every table of index/ not loaded yet and drops those that were replaced.
  Status LoadTables();
  // Reads the footers of sealed packs no table covers and recovers packs whose writer died;
  // with read_others_open_packs, starts following the packs live writers of other processes
  // have open (TrackOthersOpenPack) and stops following those sealed, recovered or gone.
  Status LoadLoosePacks() REQUIRES(refresh_mu_);
  // One pack another live process is writing (read_others_open_packs): its reading descriptor
  // and how far it was scanned.
  struct OthersOpenPack {
    std::shared_ptr<PackFile> file;
    uint64_t seen_bytes = 0;   // the file's size at the last scan
    uint64_t valid_bytes = 0;  // where the last whole record found ends
    std::vector<Digest> ids;   // of the records found, each once
  };
  // Starts following the .open pack `pack` (`fd`, whose flock its live writer holds): scans its
  // whole records and makes their blobs visible here.
  void TrackOthersOpenPack(uint64_t pack, UniqueFd fd) REQUIRES(refresh_mu_);
  // Scans `p` (the pack `pack`, now `file_bytes` long) from its valid_bytes on, adding the blobs
  // of the whole records found; returns whether it found any.
  bool ScanOthersOpenPack(uint64_t pack, OthersOpenPack& p, uint64_t file_bytes)
      REQUIRES(refresh_mu_);
  // For each followed pack: scans it again if it grew, and recovers it (RecoverPack) if its
  // writer died without sealing it. Returns whether any blob was found or recovered.
  bool ScanOthersOpenPacks() REQUIRES(refresh_mu_);
  // Forgets where this process saw `id` if that was in `pack`, which is gone.
  void ForgetBlob(const Digest& id, uint64_t pack);
  // Forgets the blobs `ids` of the followed pack `pack`, which is gone, and its descriptor.
  void ForgetOthersOpenPack(uint64_t pack, const std::vector<Digest>& ids);
  // Recovers a dead writer's .open pack: its records up to the first one that is not whole,
  // sealed again when writable (the torn tail is cut off, never committed to). `fd` is open with
  // an exclusive flock; the store keeps it (the pack's reading descriptor).
  // The text of `quarantine` ("" if missing); one that is not a regular file is set aside as
  // quarantine.damaged (when writable), with a warning on stderr.
  std::string ReadQuarantine();
  // Renames packs/<name>, which is not a pack file (a symlink, FIFO, directory), to
  // <name>.damaged, writing "warning: <why>; set aside as <path>" to stderr (a read-only store
  // only warns).
  void SetAside(const std::string& name, const std::string& why);
  Status RecoverPack(uint64_t pack, UniqueFd fd);
  // Takes the open pack file `fd` as a PackFile, with the file's size in bytes.
  // Errors: ErrnoError "`what`" (fstat).
  static Result<std::pair<std::shared_ptr<PackFile>, uint64_t>> AdoptPackFile(
      UniqueFd fd, const std::string& what);
  // Repairs a sealed .pack whose footer is damaged without cutting anything: every whole record
  // (SalvageRecords: bad records skipped, the scan resynced past damaged headers) is listed in a
  // new footer appended at the end of the file. `fd` is open with an exclusive flock; the store
  // keeps it.
  Status RepairSealedPack(uint64_t pack, UniqueFd fd);
  void AddLoose(uint64_t pack, std::shared_ptr<PackFile> file,
                const std::vector<pack::BlobLocation>& blobs);
  std::shared_ptr<PackFile> FileOf(uint64_t pack);
  // The pack's file if this process has it open already (never opens one); else null.
  std::shared_ptr<PackFile> OpenFileOf(uint64_t pack);
  // Forgets every blob of `pack` (deleted by DropPack here or in another process).
  void ForgetPack(uint64_t pack);
  // Forgets each pack this process knows (index tables, loose packs, files it holds open) whose
  // file is in packs/ under neither its sealed nor its open name: a GC in another process deleted
  // it after this one loaded its view, which Sizes (the index alone) and Get (reading on from a
  // pack held open) would otherwise still count. From an attacking helper: a push that loaded the
  // store before a `bdn gc` swept a collected version's packs, then pushed that tree again,
  // committed it with its manifest gone. One or two fstatat per known pack.
  void ForgetPacksGoneFromDisk();

  class PackBlobWriter;
  // A pack for one writer thread: an idle one, or a new one while fewer than max_open_packs are
  // held by Puts (`streaming`: for an upload; always gets one at once).
  Result<OpenPack*> AcquirePack(bool streaming = false);
  void ReleasePack(OpenPack* p);
  // Put after the checks (the bytes hash to `id`, the store is writable, the claim is made):
  // one writer per blob (pending_), compressed where the codec saves, appended to a pack.
  // kAlreadyStored when another writer stored it meanwhile.
  Result<PutOutcome> AppendBlob(const Digest& id, std::span<const uint8_t> data,
                                const std::string& chunk);
  // After a record was appended to `p` (held): indexes it, releases `p`, seals it if full.
  Status FinishAppend(OpenPack* p, const Digest& id, const pack::BlobLocation& loc,
                      const std::string& chunk);
  Result<std::unique_ptr<OpenPack>> CreatePack();
  // Returns `s`, noting a full disk (FailedPrecondition: ENOSPC, EDQUOT) for
  // DiscardAfterFullDisk.
  Status NoteFullDisk(Status s);
  // Puts back a pack whose seal failed (a full disk): no writer takes it, the next Sync or the
  // destructor seals it, DiscardAfterFullDisk may delete it.
  void KeepUnsealed(std::unique_ptr<OpenPack> p);
  // Footer, fdatasync (durable and `sync`), rename; registers the blobs as loose.
  Status SealPack(OpenPack& p, bool sync);
  Status SyncPacksDir();
  // Writes one table for the loose packs (and merges small tables) under index/lock, if
  // `force` or at least loose_packs_per_table packs are loose.
  Status PublishIndex(bool force);
  Status MergeTables();
  // Every blob of the loose packs, and those packs.
  void LooseBlobs(std::vector<pack::IndexedBlob>& blobs, std::vector<uint64_t>& packs) const;
  Status Quarantine(const pack::IndexedBlob& b, const std::string& why);

  std::filesystem::path root_;
  Options options_;
  // Whether the loose packs are enough for a table (loose_packs_per_table or
  // loose_blobs_per_table). Requires mu_ (shared).
  bool TableDue() const REQUIRES_SHARED(mu_);
  bool writable_ = true;
  // The store's directories, opened (and their owner checked) by Init, never through a symlink:
  // the files below them are opened relative to these.
  UniqueFd root_dir_;
  UniqueFd packs_dir_;
  UniqueFd index_dir_;
  UniqueFd gc_dir_;      // when opened for garbage collection (ClaimMode other than kNone)
  UniqueFd claims_dir_;  // gc/claims, likewise

  // Guards the lookup state below.
  mutable SharedMutex mu_;
  std::unordered_map<Digest, pack::IndexedBlob> recent_
      GUARDED_BY(mu_);  // blobs of open and loose packs
  std::unordered_map<uint64_t, std::vector<pack::BlobLocation>> loose_
      GUARDED_BY(mu_);                                     // sealed, not in a table
  std::unordered_set<uint64_t> open_ids_ GUARDED_BY(mu_);  // packs this process writes
  std::vector<std::shared_ptr<const pack::IndexTable>> tables_ GUARDED_BY(mu_);
  std::unordered_set<uint64_t> indexed_ GUARDED_BY(mu_);  // packs covered by tables_
  std::unordered_set<uint64_t> gone_ GUARDED_BY(mu_);  // packs deleted (DropPack) that tables_ name
  std::set<std::pair<uint64_t, uint64_t>> bad_ GUARDED_BY(mu_);  // quarantined (pack, offset)
  std::set<Digest> bad_ids_ GUARDED_BY(mu_);             // ids of those copies (a NotFound says so)
  std::unordered_set<uint64_t> doomed_ GUARDED_BY(mu_);  // packs of gc/doomed
  PendingPuts pending_ GUARDED_BY(mu_);                  // Puts in flight

  // Open packs: each idle or held by one writer.
  Mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<OpenPack>> open_ GUARDED_BY(pool_mu_);
  int sealing_ GUARDED_BY(pool_mu_) = 0;
  bool dir_dirty_ GUARDED_BY(pool_mu_) = false;

  Mutex files_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<PackFile>> files_ GUARDED_BY(files_mu_);

  Mutex sync_mu_;     // one Sync at a time
  Mutex refresh_mu_;  // one Refresh at a time
  // Packs other live processes are writing, followed (read_others_open_packs); their blobs are
  // in recent_ and their files in files_.
  std::unordered_map<uint64_t, OthersOpenPack> others_open_ GUARDED_BY(refresh_mu_);
  std::atomic<uint64_t> packs_recovered_{0};  // by RecoverPack, sealed again
  std::atomic<bool> disk_full_{false};        // a write found the disk full (NoteFullDisk)
  std::atomic<uint64_t> full_disk_count_{0};  // how many did (NoteFullDisk)
  std::atomic<uint64_t> sealed_packs_{0};     // packs this process sealed (SealPack), and
  std::atomic<uint64_t> sealed_bytes_{0};     // their size

  class ClaimLog;
  std::unique_ptr<ClaimLog> claims_;
  Mutex doom_mu_;           // one RefreshDoom at a time
  std::string doom_stamp_;  // identity of the gc/doomed last read ("" = none)
  int64_t seen_dirs_mtime_ns_ = 0;
  int64_t refreshed_at_ns_ = 0;
  std::atomic<int64_t> next_deleted_check_ns_{0};  // steady time, ForgetDeletedPacksNowAndThen
};

}  // namespace bdn
