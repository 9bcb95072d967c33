// SyncService: the sync job and secret operations of the CLI and the HTTP API, wherever the jobs
// run: LocalSyncService here (the embedded CLI, and bdn serve behind its handlers), or
// remote::RemoteSyncService on a bdn serve origin.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/sync/job_runner.h"

namespace bdn::sync {

using StartedJob = CreatedSyncJob;

// SyncService::List's answer: newest first, at most kMaxListedSyncJobs.
struct SyncJobList {
  std::vector<SyncJobRecord> jobs;
  bool truncated = false;  // more jobs match than are listed (the oldest are left out)
};

// Checks what `sync start` asks for before a job exists: the source URI's syntax, the globs
// (at most kMaxGlobs of each kind),
// the secret name's syntax, the destination's names and tag (not "head") and the retry deadline
// (1 s to 24 h). Errors: InvalidArgument naming the field.
Status ValidateSpec(const SyncJobSpec& spec);

// `job` as it is shown to anyone (the API's JSON, the CLI's --json): its source as ShownSource
// shows it (from an attacking helper: `sync list --json` on an origin gave every key allowed to
// list the jobs an https:// source's presigned signature).
SyncJobRecord AsShown(SyncJobRecord job);

// Implementations are thread-safe.
class SyncService {
 public:
  virtual ~SyncService() = default;
  // Creates a PENDING job for `spec` (after ValidateSpec), or returns the unfinished job with
  // exactly this spec, so that running the same `sync start` again resumes it. `secrets`: which
  // secrets the job may name (the rights of the key that starts it on a server; the embedded
  // CLI passes kAny); RemoteSyncService ignores it, the origin decides by the caller's key.
  // LocalSyncService records it with the job, and every run checks the job's secret against it
  // again (a resumed job: SyncJobCreate::resume says how its recorded use may change).
  // Errors: Conflict "namespace \"a\": 100 sync jobs unfinished; wait for some or cancel them"
  // for a new job into a namespace that has as many PENDING or SYNCING jobs as the service
  // allows; InvalidArgument from ValidateSpec; PermissionDenied (reason file_not_allowed or
  // address_not_allowed) for a source the service's SourceAccess refuses (CheckSourceAccess);
  // NotFound "secret \"name\": not found" (reason secret_not_found) for a secret that does not
  // exist or that `secrets` does not let the job's namespace use (SecretVault::CheckUse: the
  // same answer).
  virtual Result<StartedJob> Start(const SyncJobSpec& spec, SecretUse secrets) = 0;
  // Errors: NotFound "sync job <id>: not found".
  virtual Result<SyncJobRecord> Get(const std::string& id) = 0;
  // Newest first, at most kMaxListedSyncJobs (SyncJobList::truncated when more match); only
  // jobs into ns (and volume) when given.
  virtual Result<SyncJobList> List(const std::string& ns, const std::string& volume) = 0;
  // Stops a job: one that no runner holds is CANCELED at once, a running one within a second
  // or so. Returns the job as it is then. Errors: NotFound; FailedPrecondition "sync job <id>:
  // already READY" (or FAILED, CANCELED).
  virtual Result<SyncJobRecord> Cancel(const std::string& id) = 0;

  // Secrets (SecretVault): set (with the namespaces whose jobs may use it, replacing the old
  // list; empty: only jobs started with an admin key for every namespace), list (names, times
  // and namespaces, never values), remove.
  virtual Status SetSecret(const std::string& name, const std::string& value,
                           const std::vector<std::string>& namespaces) = 0;
  virtual Result<std::vector<SecretInfo>> ListSecrets() = 0;
  virtual Status RemoveSecret(const std::string& name) = 0;
};

// The service over a local job store and vault. Jobs it creates (or resumes) are handed to
// `on_created` (the server's JobScheduler); without one the caller runs them (the embedded CLI,
// with RunJob). With `max_unfinished_per_namespace` above 0 (bdn serve
// --sync-max-unfinished-per-namespace, default 100), Start refuses a new job into a namespace
// that has that many jobs PENDING or SYNCING; the job store counts and creates in one
// transaction, so concurrent Starts (threads, replicas sharing a database) never pass it.
class LocalSyncService : public SyncService {
 public:
  LocalSyncService(RunnerDeps deps, std::function<void(const SyncJobRecord& job)> on_created = {},
                   int max_unfinished_per_namespace = 0);

  Result<StartedJob> Start(const SyncJobSpec& spec, SecretUse secrets) override;
  Result<SyncJobRecord> Get(const std::string& id) override;
  Result<SyncJobList> List(const std::string& ns, const std::string& volume) override;
  Result<SyncJobRecord> Cancel(const std::string& id) override;
  Status SetSecret(const std::string& name, const std::string& value,
                   const std::vector<std::string>& namespaces) override;
  Result<std::vector<SecretInfo>> ListSecrets() override;
  Status RemoveSecret(const std::string& name) override;

  const RunnerDeps& deps() const { return deps_; }

 private:
  Result<std::shared_ptr<SecretVault>> Vault() const;

  RunnerDeps deps_;
  std::function<void(const SyncJobRecord&)> on_created_;
  const int max_unfinished_per_namespace_;
};

struct SchedulerOptions {
  int runners = 2;  // jobs run at once (bdn serve --sync-runners); at least 1
  // Jobs of one namespace run at once, at most (bdn serve --sync-runners-per-namespace), so
  // that one namespace's jobs (a push key's, against a slow source) cannot hold every runner
  // while other namespaces' jobs wait. 0: max(1, runners / 2). Taken as at most `runners`.
  int runners_per_namespace = 0;
  // With a positive interval, every unfinished job the store lists then is queued too (see
  // JobScheduler).
  std::chrono::milliseconds poll{0};
  // Jobs READY, FAILED or CANCELED longer ago than this are deleted (SyncJobStore::DeleteFinished)
  // soon after Start and then every JobPruneInterval (bdn serve --sync-job-retention, default 30
  // days). 0: kept forever. Unfinished jobs are never deleted.
  std::chrono::milliseconds job_retention{0};
};

// How often a scheduler deletes the jobs past `retention`: a tenth of it, at least every second
// and at most hourly.
std::chrono::milliseconds JobPruneInterval(std::chrono::milliseconds retention);

// The per-namespace cap `options` gives: runners_per_namespace, or max(1, runners / 2) for 0,
// clamped to [1, runners].
int RunnersPerNamespace(const SchedulerOptions& options);

// Runs the jobs of a server on `runners` threads: every unfinished job at Start (a restarted
// server resumes the jobs the last one left), then each job Enqueue'd, and, with a `poll`
// interval, every unfinished job the store lists then that is not queued or running here (a
// replica sharing the job store with others picks up the jobs another created, or left when it
// died; the job's lease keeps one runner per job). A free runner takes the oldest queued job
// whose namespace runs fewer than RunnersPerNamespace jobs here; a job of a namespace at its cap
// stays queued (PENDING) until one of that namespace's jobs ends, while other namespaces' jobs
// run (the cap is per server: replicas sharing a job store each apply it to their own runners).
// With a job_retention, finished jobs older than it are deleted on a thread of its own (every
// replica sharing a job store may: a deletion is idempotent).
// Stop interrupts the running jobs, which stay SYNCING for the next start. Thread-safe.
class JobScheduler {
 public:
  JobScheduler(RunnerDeps deps, SchedulerOptions options);
  ~JobScheduler();  // Stop()

  // Queues the unfinished jobs and starts the threads. Errors: the job store's.
  Status Start();
  // Queues job `id` of namespace `ns` (once: a job already queued is not queued again).
  void Enqueue(const std::string& id, const std::string& ns);
  void Stop();

 private:
  struct Queued {
    std::string id;
    std::string ns;
  };
  void Work();
  void Poll();
  // Deletes the jobs past job_retention now and every JobPruneInterval until Stop.
  void Prune();
  // Queues every unfinished job that is neither queued nor running here.
  Status EnqueueUnfinished(bool log_resumes);
  // The oldest queued job whose namespace is under its cap; queue_.end() if none.
  std::deque<Queued>::iterator NextRunnable() REQUIRES(mu_);

  RunnerDeps deps_;
  const SchedulerOptions options_;
  const int per_namespace_;
  std::atomic<bool> shutdown_{false};
  Mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> running_ GUARDED_BY(mu_);
  std::map<std::string, int> running_per_namespace_ GUARDED_BY(mu_);  // no zero counts
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  std::set<std::string> queued_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace bdn::sync
