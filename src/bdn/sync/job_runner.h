// RunJob: runs one sync job from PENDING or SYNCING to READY, FAILED or CANCELED (docs/spec.md §6):
// lists the source, selects with --include/--exclude, resolves an already mirrored listing to its
// version by metadata alone, else streams every object through SealEntries (the one sealing path
// of push) into the store and commits the version with its source identity. Durable: the job's
// state, progress and the files it has sealed are in the SyncJobStore, so a run after a crash
// re-uses every file sealed before and fetches only the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "bdn/registry/registry.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/store/chunk_store.h"
#include "bdn/sync/secrets.h"
#include "bdn/sync/source.h"
#include "bdn/volume/push.h"

namespace bdn::sync {

// What a runner works with. The store, registry and jobs are required.
struct RunnerDeps {
  std::shared_ptr<ChunkStore> store;
  std::shared_ptr<Registry> registry;
  std::shared_ptr<SyncJobStore> jobs;
  // Null: a job naming a secret fails with secret_not_found.
  std::shared_ptr<SecretVault> secrets;
  // When `secrets` is null: why, for the FailedPrecondition of the secret calls ("" : "not
  // available here").
  std::string secrets_unavailable;
  // Takes the volume's push claim for the whole run of job `job_id` (the origin uses its claim
  // table, and waits out a claim an earlier run of the same job left live: a server killed, or
  // stopped while its database did not answer), giving up when `stop` is set. Unset:
  // registry->ClaimPush.
  std::function<Result<std::unique_ptr<PushClaim>>(const std::string& ns, const std::string& volume,
                                                   const std::string& job_id,
                                                   const std::atomic<bool>* stop)>
      claim;
  // Opens the job's source. Unset: OpenSource.
  std::function<Result<std::unique_ptr<Source>>(const std::string& uri, const SourceOptions&)>
      open_source;
  // Where sources may read from: anywhere (the embedded CLI), or what bdn serve allows. Checked
  // when a job is started (LocalSyncService::Start) and again each time it runs.
  SourceAccess access;
  int files_in_parallel = 4;                          // objects fetched at once
  std::chrono::milliseconds progress_interval{1000};  // how often progress reaches the job store
  // Options of every source call (the retry deadline comes from the job).
  RetryOptions retry;
  // The floor of object-body transfers (SourceOptions::min_body_bytes_per_second and
  // body_stall_timeout; bdn serve --sync-min-source-rate and --sync-source-stall-time).
  uint64_t min_body_bytes_per_second = SourceOptions{}.min_body_bytes_per_second;
  std::chrono::milliseconds body_stall_timeout = SourceOptions{}.body_stall_timeout;
  // A job already started this many times (SyncJobRecord::runs) that is still unfinished fails
  // at its next start instead of running again: each of those runs ended with its process (a
  // kernel OOM kill, which no catch sees), and a server that resumed it at every start would
  // crash-loop. A run that a clean stop ended (RunOptions::shutdown) is not counted
  // (SyncJobStore::UncountRun). 0: no limit (the embedded CLI, where a person re-runs the job).
  // bdn serve: 5.
  int max_unfinished_runs = 0;
};

struct RunOptions {
  // Live counters for a progress display: bytes/files totals and done; may be null.
  TransferCounters* counters = nullptr;
  // Object bytes read from the source by this run; may be null.
  std::atomic<uint64_t>* bytes_fetched = nullptr;
  // When set, the run stops as soon as it can and leaves the job as it is (SYNCING), to be
  // resumed later: a server shutting down. May be null.
  const std::atomic<bool>* shutdown = nullptr;
  // Told the source calls' retries, for a progress line (RetryWatch); may be null.
  std::shared_ptr<RetryWatch> retry_watch;
};

// Runs job `id` in this thread until it is terminal (or `options.shutdown`), and returns it as
// it is then. A cancel request (SyncJobStore::RequestCancel, seen within progress_interval)
// stops the run and the job ends CANCELED. A lease lost behind the run's back
// (SyncJobLease::Held, looked at every progress_interval) is taken again and the run goes on;
// if another runner took it first, the run stops and leaves the job to that runner (no outcome
// recorded, the run not counted); if the job ended meanwhile (another runner's outcome, a
// cancel), the run stops and returns it. Before each commit the run looks again (lease held,
// job SYNCING, no cancel requested) and commits nothing otherwise. The job's own failures are
// recorded in it (FAILED, with a stable code and a message naming the source), not returned.
// Errors: NotFound for an unknown job; Conflict "sync job <id>: already running in another process"
// while another runner holds it; Conflict "sync job <id>: its lease was lost and another runner
// took the job; this run stopped"; the job store's errors. A job past deps.max_unfinished_runs ends
// FAILED (internal)
// "<source>: started 5 times without finishing (the server stopped during each run: out of
// memory?); start a new job to try again" without running.
Result<SyncJobRecord> RunJob(const std::string& id, const RunnerDeps& deps,
                             const RunOptions& options = {});

// The Status a finished job's error gives (for exit codes and HTTP answers): its code's
// StatusCode and its message. Ok for READY.
Status JobStatus(const SyncJobRecord& job);

}  // namespace bdn::sync
