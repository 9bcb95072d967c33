#include "bdn/sync/job_runner.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "bdn/base/log.h"
#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/sync/glob.h"
#include "bdn/sync/listing.h"
#include "bdn/sync/retry.h"
#include "bdn/sync/source_uri.h"  // ShownSource

namespace bdn::sync {
namespace {

// A failure of storing or committing: the store's own message, with the stable code that says
// the source was not at fault.
Status StoreFailure(const Status& s) {
  if (!s.reason().empty()) return s;
  return s.WithReason(std::string(s.code() == StatusCode::kConflict ? kVolumeBusy : kStoreFailed));
}

// Whether the store holds every blob of a file sealed by an earlier run: its chunk index (and
// the pieces of a version-2 one), read with the one loader, and every chunk. A blob missing or
// damaged, or an index that does not describe the file, means no: the file is sealed again.
Result<bool> StoreHolds(ChunkStore& store, const SyncFileRecord& f, const ChunkerParams& chunker) {
  Entry e;
  e.path = f.path;
  e.kind = EntryKind::kFile;
  e.size_bytes = f.size_bytes;
  e.digest = f.digest;
  e.layout = static_cast<FileLayout>(f.layout);
  e.index = f.index;
  if (e.layout == FileLayout::kEmpty) return true;
  if (e.layout == FileLayout::kSingleChunk) return store.Contains(f.digest);
  auto fetch = [&](IndexPart, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
    std::vector<IndexBlob> blobs;
    for (const Digest& id : ids) {
      BDN_ASSIGN_OR_RETURN(auto bytes, store.Get(id));
      blobs.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
    }
    return blobs;
  };
  auto index = ReadFileChunkIndex(chunker, e, fetch);
  if (!index) {
    const StatusCode code = index.error().code();
    if (code == StatusCode::kNotFound || code == StatusCode::kCorruption) return false;
    return Err(index.error());
  }
  std::vector<Digest> ids;
  ids.reserve(index->chunk_count);
  std::unordered_set<const std::vector<ChunkRef>*> walked;
  for (const auto& run : index->runs) {
    if (!walked.insert(run.get()).second) continue;  // a piece listed again
    for (const ChunkRef& r : *run) ids.push_back(r.id);
  }
  BDN_ASSIGN_OR_RETURN(auto missing, store.FindMissing(ids));
  return missing.empty();
}

// The objects of a job as SealEntries reads them: each opened from the source, or re-used when
// an earlier run of the job sealed it (same path, size and etag) and the store still holds it;
// each sealed file is recorded in the job store at once.
class JobEntrySource : public EntrySource {
 public:
  JobEntrySource(Source& source, const std::vector<SourceObject>& objects,
                 std::vector<SyncFileRecord> recorded, ChunkStore& store, SyncJobStore& jobs,
                 std::string job_id, const ChunkerParams& chunker)
      : source_(source), store_(store), jobs_(jobs), job_id_(std::move(job_id)), chunker_(chunker) {
    for (const SourceObject& o : objects) objects_.emplace(o.path, &o);
    for (SyncFileRecord& r : recorded) recorded_.emplace(r.path, std::move(r));
  }

  Result<std::unique_ptr<ByteStream>> Open(size_t, const SealItem& item) override {
    return source_.Open(*objects_.at(item.path), 0);
  }

  Result<std::optional<SealedFile>> Reuse(size_t, const SealItem& item) override {
    auto it = recorded_.find(item.path);
    const SourceObject& o = *objects_.at(item.path);
    // Without an etag, a file sealed by an earlier run may have other content now.
    if (it == recorded_.end() || o.etag.empty() || it->second.size_bytes != o.size_bytes ||
        it->second.etag != o.etag) {
      return std::optional<SealedFile>();
    }
    const SyncFileRecord& r = it->second;
    auto held = StoreHolds(store_, r, chunker_);
    if (!held) return Err(StoreFailure(held.error()));
    if (!*held) return std::optional<SealedFile>();
    return std::optional<SealedFile>(
        SealedFile{r.size_bytes, r.digest, static_cast<FileLayout>(r.layout), r.index, r.chunks});
  }

  Status OnSealed(size_t, const SealItem& item, const SealedFile& f) override {
    const SourceObject& o = *objects_.at(item.path);
    Status s = jobs_.RecordFile(job_id_, {o.path, o.size_bytes, o.etag, f.digest,
                                          static_cast<int>(f.layout), f.index, f.chunks});
    return s.ok() ? s : StoreFailure(s);
  }

 private:
  Source& source_;
  ChunkStore& store_;
  SyncJobStore& jobs_;
  const std::string job_id_;
  const ChunkerParams chunker_;  // the seal's: what a recorded file's chunks may be
  std::unordered_map<std::string, const SourceObject*> objects_;
  std::unordered_map<std::string, SyncFileRecord> recorded_;
};

// What RunJob answers for a run whose lease another runner took.
Status LeaseLost(const std::string& id) {
  return ConflictError("sync job " + id +
                       ": its lease was lost and another runner took the job; this run stopped");
}

// Writes the run's progress to the job store every interval and watches for a cancel request,
// a shutdown or a lost lease, setting `stop` for the source. A lease lost behind the run's back
// (a PostgreSQL lock whose connection ended) is taken again at once if no other runner has
// taken it; if one has, `lease_lost` is set too and the run stops for that runner. Stops on
// destruction.
class Watcher {
 public:
  Watcher(const RunnerDeps& deps, const std::string& id, const RunOptions& options,
          const TransferCounters& counters, const std::atomic<uint64_t>& fetched,
          uint64_t fetched_before, const RetryWatch& retries, std::unique_ptr<SyncJobLease>& lease,
          std::atomic<bool>& stop, std::atomic<bool>& canceled, std::atomic<bool>& lease_lost)
      : deps_(deps),
        id_(id),
        options_(options),
        counters_(counters),
        fetched_(fetched),
        fetched_before_(fetched_before),
        retries_(retries),
        lease_(lease),
        stop_(stop),
        canceled_(canceled),
        lease_lost_(lease_lost),
        thread_([this] { Run(); }) {}
  ~Watcher() {
    {
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  SyncProgress Progress() const {
    SyncProgress p;
    p.objects_total = counters_.files_total;
    p.objects_done = counters_.files_done;
    p.bytes_total = counters_.bytes_total;
    p.bytes_done = counters_.bytes_done;
    p.bytes_fetched = fetched_before_ + fetched_.load();
    retries_.Fill(p);
    return p;
  }

 private:
  void Run() {
    MutexLock lock(mu_);
    while (!done_) {
      // Shutdown is looked at often; the job store only every interval.
      for (auto waited = std::chrono::milliseconds(0); !done_ && waited < deps_.progress_interval;
           waited += std::chrono::milliseconds(50)) {
        cv_.wait_for(lock.native(), std::chrono::milliseconds(50));
        if (options_.shutdown && options_.shutdown->load()) stop_ = true;
      }
      if (done_) break;
      lock.Unlock();
      // Progress is advisory and written again at the next tick; a job store that fails for
      // good is reported by Finish, which records the job's outcome.
      deps_.jobs->SetProgress(id_, Progress()).IgnoreError();
      auto job = deps_.jobs->Get(id_);
      if (job && job->cancel_requested) {
        canceled_ = true;
        stop_ = true;
      }
      CheckLease();
      lock.Lock();
    }
  }

  // A lease that cannot be checked now is checked again at the next tick.
  void CheckLease() {
    MutexLock lock(lease_mu_);
    CheckLeaseLocked();
  }

 public:
  // The last look before the run commits: OK while the job is still this run's (its lease held,
  // the job SYNCING, no cancel requested). Else the run must not commit: Conflict for a lease
  // another runner took (lease_lost set); CanceledError after a cancel request (canceled set);
  // FailedPrecondition "sync job <id>: already <STATE>" for a job that another run (or a cancel
  // while the lease was lost) ended; Unavailable (reason store_failed) while the lease, lost,
  // cannot be taken again.
  Status ConfirmBeforeCommit() {
    MutexLock lock(lease_mu_);
    CheckLeaseLocked();
    if (lease_lost_) return LeaseLost(id_);
    if (!lease_) {
      // The database did not answer when the lease was taken again: what a commit's own failure
      // there would have been.
      return UnavailableError("sync job " + id_ +
                              ": its lease was lost and could not be taken again; nothing was "
                              "committed")
          .WithReason(std::string(kStoreFailed));
    }
    BDN_ASSIGN_OR_RETURN(SyncJobRecord job, deps_.jobs->Get(id_));
    if (IsTerminal(job.state)) {
      return FailedPreconditionError("sync job " + id_ + ": already " +
                                     std::string(SyncStateName(job.state)));
    }
    if (job.cancel_requested) {
      canceled_ = true;
      stop_ = true;
      return CanceledError("sync job " + id_);
    }
    return Status::Ok();
  }

 private:
  void CheckLeaseLocked() REQUIRES(lease_mu_) {
    if (lease_lost_) return;
    if (lease_) {
      auto held = lease_->Held();
      if (!held || *held) return;
      lease_.reset();
      log::Warn("sync job " + id_ + ": its lease was lost (its database connection ended)");
    }
    auto again = deps_.jobs->TryLease(id_);
    if (!again) return;  // no lease now: the next tick tries again
    if (*again) {
      // Free again, but another runner may have held it meanwhile and ended the job (or a cancel
      // may have, seeing no runner): then this run is over.
      auto job = deps_.jobs->Get(id_);
      if (job && IsTerminal(job->state)) {
        log::Warn("sync job " + id_ + ": " + std::string(SyncStateName(job->state)) +
                  " meanwhile (ended while its lease was lost); this run stops");
        lease_lost_ = true;
        stop_ = true;
        return;
      }
      lease_ = std::move(*again);
      log::Info("sync job " + id_ + ": lease taken again; the run goes on");
      return;
    }
    // Another runner holds the job now: it waits for this run's push claim, which the run
    // releases when it stops.
    log::Warn("sync job " + id_ + ": another runner took the job; this run stops");
    lease_lost_ = true;
    stop_ = true;
  }

  const RunnerDeps& deps_;
  const std::string id_;
  const RunOptions& options_;
  const TransferCounters& counters_;
  const std::atomic<uint64_t>& fetched_;
  const uint64_t fetched_before_;
  const RetryWatch& retries_;
  Mutex lease_mu_;  // one look at the lease at a time (the watcher's, the commit's)
  std::unique_ptr<SyncJobLease>& lease_ GUARDED_BY(lease_mu_);
  std::atomic<bool>& stop_;
  std::atomic<bool>& canceled_;
  std::atomic<bool>& lease_lost_;
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

struct Outcome {
  Digest version;
  bool unchanged = false;
};

// The work of one run; every failure comes back as a Status with its stable code (reason).
// `before_commit` is the last look before each commit (Watcher::ConfirmBeforeCommit): its error
// ends the run uncommitted.
Result<Outcome> Execute(const SyncJobRecord& job, const RunnerDeps& deps,
                        SourceOptions source_options, TransferCounters& counters,
                        const std::function<Status()>& before_commit) {
  const SyncJobSpec& spec = job.spec;
  // Again at each run: a job created before the server's access rules narrowed obeys them too.
  BDN_RETURN_IF_ERROR(CheckSourceAccess(spec.source_uri, spec.endpoint, deps.access));
  BDN_ASSIGN_OR_RETURN(PathFilter filter, PathFilter::Create(spec.includes, spec.excludes));
  auto claim = deps.claim ? deps.claim(spec.ns, spec.volume, job.id, source_options.cancel)
                          : deps.registry->ClaimPush(spec.ns, spec.volume);
  if (!claim) return Err(StoreFailure(claim.error()));

  if (!spec.auth_secret_name.empty()) {
    if (!deps.secrets) {
      return Err(WithCode(
          NotFoundError("secret \"" + spec.auth_secret_name + "\": not found (no secrets here)"),
          kSecretNotFound));
    }
    // Checked again at every run against how the job was started: a secret removed and set
    // again, for other namespaces, since then is not this job's to use.
    auto secret = deps.secrets->RevealFor(spec.auth_secret_name, spec.ns, job.secret_use);
    if (!secret) return Err(secret.error().WithPrefix("sync job " + job.id));
    source_options.secret = std::move(*secret);
    source_options.secret_name = spec.auth_secret_name;
  }
  source_options.pinned_revision = job.source_revision;
  source_options.endpoint = spec.endpoint;
  source_options.region = spec.region;
  source_options.access = deps.access;
  auto open = deps.open_source ? deps.open_source : OpenSource;
  BDN_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, open(spec.source_uri, source_options));
  BDN_ASSIGN_OR_RETURN(SourceListing listing, source->List());
  BDN_ASSIGN_OR_RETURN(std::vector<SourceObject> objects,
                       Select(listing, filter, source->uri(), source_options.cancel));
  const Digest digest = ListingDigest(source->Identity(), listing.revision, objects);
  if (job.listing_digest && *job.listing_digest != digest) {
    return Err(WithCode(FailedPreconditionError(
                            source->uri() + ": changed since the job started (its listing differs "
                                            "from the first run's); start a new job"),
                        kSourceChanged));
  }
  BDN_ASSIGN_OR_RETURN(std::vector<SealItem> items, ItemsOf(objects, source->uri()));
  uint64_t bytes_total = 0;
  for (const SourceObject& o : objects) bytes_total += o.size_bytes;
  // What the selection matched but no version holds, so the job can say it left them out.
  const auto left_out = static_cast<uint64_t>(
      std::count_if(listing.left_out.begin(), listing.left_out.end(),
                    [&](const std::string& path) { return filter.Selects(path); }));
  if (Status s = deps.jobs->SetSource(job.id, listing.revision, digest, objects.size(), bytes_total,
                                      left_out);
      !s.ok()) {
    return Err(StoreFailure(s));
  }
  counters.files_total = objects.size();
  counters.bytes_total = bytes_total;

  CommitRequest commit;
  commit.ns = spec.ns;
  commit.volume = spec.volume;
  // The version records the source as shown (a presigned signature in its query is no record).
  commit.source_uri = ShownSource(spec.source_uri);
  commit.source_revision = listing.revision;
  commit.source_listing_digest = digest.ToString();
  // Made only while the job is still SYNCING with no cancel (in the commit's transaction): a run
  // that stalls after ConfirmBeforeCommit, past its lease and its claim, commits nothing once
  // the job ended elsewhere.
  commit.sync_job_id = job.id;
  if (!spec.tag.empty()) commit.tags.push_back(spec.tag);

  // Already mirrored: the same listing sealed before resolves to that version, by metadata only.
  // Not when an object has no etag (an https:// file with neither ETag nor Last-Modified, a
  // store listing none): its listing stays the same when its content changes, so it is fetched
  // and sealed again (the same bytes seal the same version).
  const bool identified =
      std::ranges::none_of(objects, [](const SourceObject& o) { return o.etag.empty(); });
  auto versions = deps.registry->ListVersions(spec.ns, spec.volume, /*include_deleted=*/false);
  if (!versions && versions.error().code() != StatusCode::kNotFound) {
    return Err(StoreFailure(versions.error()));
  }
  if (versions && identified) {
    for (const VersionRecord& v : *versions) {
      if (v.source_listing_digest != commit.source_listing_digest) continue;
      commit.digest = v.digest;
      commit.stats = v.stats;
      commit.sync_unchanged = true;
      BDN_RETURN_IF_ERROR(before_commit());
      auto r = deps.registry->Commit(commit);
      if (!r) return Err(StoreFailure(r.error()));
      counters.files_done = objects.size();
      counters.bytes_done = bytes_total;
      return Outcome{v.digest, true};
    }
  }

  BDN_ASSIGN_OR_RETURN(std::vector<SyncFileRecord> recorded, deps.jobs->Files(job.id));
  SealOptions seal;
  seal.jobs = deps.files_in_parallel;
  JobEntrySource entries(*source, objects, std::move(recorded), *deps.store, *deps.jobs, job.id,
                         seal.chunker);
  BDN_ASSIGN_OR_RETURN(SealResult sealed,
                       SealEntries(items, entries, seal, *deps.store, &counters));
  if (Status s = deps.store->Sync(); !s.ok()) return Err(StoreFailure(s));
  commit.digest = sealed.digest;
  commit.stats = sealed.stats;
  BDN_RETURN_IF_ERROR(before_commit());
  auto r = deps.registry->Commit(commit);
  if (!r) return Err(StoreFailure(r.error()));
  // "unchanged" is the metadata check's word (nothing fetched); bytes fetched again that sealed
  // the same version are a sync like any other.
  return Outcome{sealed.digest, false};
}

}  // namespace

Result<SyncJobRecord> RunJob(const std::string& id, const RunnerDeps& deps,
                             const RunOptions& options) {
  BDN_ASSIGN_OR_RETURN(std::unique_ptr<SyncJobLease> lease, deps.jobs->TryLease(id));
  if (!lease) return Err(ConflictError("sync job " + id + ": already running in another process"));
  BDN_ASSIGN_OR_RETURN(SyncJobRecord job, deps.jobs->Get(id));
  if (IsTerminal(job.state)) return job;
  if (job.cancel_requested) {
    return deps.jobs->Finish(id, SyncState::kCanceled, std::nullopt, false, std::string(kCanceled),
                             "sync job " + id + ": canceled");
  }
  if (deps.max_unfinished_runs > 0 && job.runs >= deps.max_unfinished_runs) {
    return deps.jobs->Finish(
        id, SyncState::kFailed, std::nullopt, false, std::string(kInternal),
        ShownSource(job.spec.source_uri) + ": started " + std::to_string(job.runs) +
            " times without finishing (the server stopped during each run: out of memory?); "
            "start a new job to try again");
  }
  BDN_ASSIGN_OR_RETURN(job, deps.jobs->StartRun(id));

  TransferCounters own_counters;
  TransferCounters& counters = options.counters ? *options.counters : own_counters;
  std::atomic<uint64_t> own_fetched{0};
  std::atomic<uint64_t>& fetched = options.bytes_fetched ? *options.bytes_fetched : own_fetched;
  const uint64_t fetched_before = job.progress.bytes_fetched - 0;
  std::atomic<bool> stop{false};
  std::atomic<bool> canceled{false};
  std::atomic<bool> lease_lost{false};

  SourceOptions source_options;
  source_options.retry = deps.retry;
  source_options.retry.deadline = std::chrono::milliseconds(job.spec.retry_deadline_ms);
  // Always watched: the job's progress record says while its source is retried, for a client
  // that follows the job on an origin.
  source_options.retry.watch =
      options.retry_watch ? options.retry_watch : std::make_shared<RetryWatch>(deps.retry.clock);
  source_options.min_body_bytes_per_second = deps.min_body_bytes_per_second;
  source_options.body_stall_timeout = deps.body_stall_timeout;
  source_options.bytes_fetched = &fetched;
  source_options.cancel = &stop;

  Result<Outcome> outcome;
  SyncProgress progress;
  {
    Watcher watcher(deps, id, options, counters, fetched, fetched_before,
                    *source_options.retry.watch, lease, stop, canceled, lease_lost);
    // A run that throws (std::bad_alloc from a source's answer that no limit caught) ends the
    // job FAILED rather than the process: a job left SYNCING would be resumed into the same
    // failure at every start of the server.
    try {
      outcome = Execute(job, deps, source_options, counters,
                        [&] { return watcher.ConfirmBeforeCommit(); });
    } catch (const std::exception& e) {
      outcome =
          Err(InternalError(ShownSource(job.spec.source_uri) + ": the sync failed: " + e.what()));
    }
    progress = watcher.Progress();
  }
  if (!outcome && lease_lost) {
    // Ended meanwhile (by the runner that took the lease, or a cancel): that outcome stands.
    if (auto now = deps.jobs->Get(id); now && IsTerminal(now->state)) return now;
    // The job is another runner's now (it counted a run of its own): this one neither records
    // an outcome nor counts as a run that ended with its process.
    deps.jobs->UncountRun(id).IgnoreError();
    return Err(LeaseLost(id));
  }
  // Advisory, as in the watcher: Finish below records the job's state and reports its failure.
  deps.jobs->SetProgress(id, progress).IgnoreError();
  if (!outcome && options.shutdown && options.shutdown->load() && !canceled) {
    // Left SYNCING: the next start of the server resumes it. A clean stop is not a run that
    // ended with its process, so it does not count toward max_unfinished_runs.
    BDN_RETURN_IF_ERROR(deps.jobs->UncountRun(id));
    return deps.jobs->Get(id);
  }
  if (!outcome && !canceled) {
    // A cancel request that came in after the watcher's last look still wins over the error it
    // caused.
    auto now = deps.jobs->Get(id);
    canceled = now && now->cancel_requested;
  }
  Result<SyncJobRecord> finished =
      outcome
          ? deps.jobs->Finish(id, SyncState::kReady, outcome->version, outcome->unchanged, "", "")
      : canceled ? deps.jobs->Finish(id, SyncState::kCanceled, std::nullopt, false,
                                     std::string(kCanceled), "sync job " + id + ": canceled")
                 : deps.jobs->Finish(id, SyncState::kFailed, std::nullopt, false,
                                     ErrorCodeOf(outcome.error()), outcome.error().message());
  if (!finished && finished.error().code() == StatusCode::kFailedPrecondition) {
    return deps.jobs->Get(id);  // finished meanwhile by someone else: that outcome stands
  }
  return finished;
}

Status JobStatus(const SyncJobRecord& job) {
  if (job.state == SyncState::kReady || !IsTerminal(job.state)) return Status::Ok();
  const std::string& c = job.error_code;
  StatusCode code = StatusCode::kInternal;
  if (c == kSourceNotFound || c == kRevisionNotFound || c == kIncludeMatchedNothing ||
      c == kSecretNotFound) {
    code = StatusCode::kNotFound;
  } else if (c == kAccessDenied || c == kBadCredentials || c == kFileNotAllowed ||
             c == kAddressNotAllowed || c == kSecretNotAllowed) {
    code = StatusCode::kPermissionDenied;
  } else if (c == kSourceUnavailable) {
    code = StatusCode::kUnavailable;
  } else if (c == kSourceChanged || c == kStoreFailed || c == kListingTooLarge ||
             c == kInvalidAnswer) {
    code = StatusCode::kFailedPrecondition;
  } else if (c == kInvalidObject || c == kInvalidSecret) {
    code = StatusCode::kInvalidArgument;
  } else if (c == kCanceled || c == kVolumeBusy) {
    code = StatusCode::kConflict;
  }
  return Status(code, job.error_message).WithReason(c);
}

}  // namespace bdn::sync
