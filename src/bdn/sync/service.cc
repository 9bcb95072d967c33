#include "bdn/sync/service.h"

#include <algorithm>
#include <cstdio>

#include "bdn/base/clock.h"
#include "bdn/base/log.h"
#include "bdn/base/units.h"  // FormatUtc
#include "bdn/format/ref.h"
#include "bdn/sync/glob.h"
#include "bdn/sync/hf_source.h"              // HfEndpoint
#include "bdn/sync/object_store_internal.h"  // CheckEndpoint
#include "bdn/sync/source.h"

namespace bdn::sync {

SyncJobRecord AsShown(SyncJobRecord job) {
  job.spec.source_uri = ShownSource(job.spec.source_uri);
  return job;
}

Status ValidateSpec(const SyncJobSpec& spec) {
  BDN_RETURN_IF_ERROR(ValidateSourceUri(spec.source_uri));
  BDN_RETURN_IF_ERROR(ValidateName("namespace", spec.ns));
  BDN_RETURN_IF_ERROR(ValidateName("volume", spec.volume));
  if (!spec.tag.empty()) {
    BDN_RETURN_IF_ERROR(ValidateTag(spec.tag));
    if (spec.tag == kHeadTag) {
      return InvalidArgumentError("tag \"head\": reserved; a sync always moves head");
    }
  }
  if (auto filter = PathFilter::Create(spec.includes, spec.excludes); !filter) {
    return filter.error();
  }
  if (!spec.auth_secret_name.empty()) {
    BDN_RETURN_IF_ERROR(ValidateSecretName(spec.auth_secret_name));
  }
  if (spec.retry_deadline_ms < 1000 || spec.retry_deadline_ms > 24 * 3'600'000) {
    return InvalidArgumentError("--retry-deadline: must be between 1s and 24h");
  }
  const bool object_store =
      spec.source_uri.starts_with("s3://") || spec.source_uri.starts_with("r2://") ||
      spec.source_uri.starts_with("cw://") || spec.source_uri.starts_with("gs://") ||
      spec.source_uri.starts_with("azure://");
  if (!spec.endpoint.empty()) {
    if (!object_store) {
      return InvalidArgumentError(
          "--endpoint: only for s3://, r2://, cw://, gs:// and azure:// "
          "sources (hf:// takes HF_ENDPOINT on the machine that runs "
          "the job)");
    }
    if (auto e = CheckEndpoint("source \"" + ShownSource(spec.source_uri) + "\"", spec.endpoint);
        !e) {
      return e.error();
    }
  }
  if (!spec.region.empty()) {
    if (!object_store || spec.source_uri.starts_with("azure://")) {
      return InvalidArgumentError("--region: only for s3://, r2://, cw:// and gs:// sources");
    }
    if (spec.region.size() > 64 || !std::all_of(spec.region.begin(), spec.region.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_';
        })) {
      return InvalidArgumentError("--region \"" + spec.region +
                                  "\": letters, digits, '-' and '_' only (e.g. eu-west-1)");
    }
  }
  return Status::Ok();
}

LocalSyncService::LocalSyncService(RunnerDeps deps,
                                   std::function<void(const SyncJobRecord&)> on_created,
                                   int max_unfinished_per_namespace)
    : deps_(std::move(deps)),
      on_created_(std::move(on_created)),
      max_unfinished_per_namespace_(max_unfinished_per_namespace) {}

Result<std::shared_ptr<SecretVault>> LocalSyncService::Vault() const {
  if (!deps_.secrets) {
    return Err(FailedPreconditionError("secrets: " + (deps_.secrets_unavailable.empty()
                                                          ? std::string("not available here")
                                                          : deps_.secrets_unavailable)));
  }
  return deps_.secrets;
}

Result<StartedJob> LocalSyncService::Start(const SyncJobSpec& spec, SecretUse secrets) {
  BDN_RETURN_IF_ERROR(ValidateSpec(spec));
  BDN_RETURN_IF_ERROR(CheckSourceAccess(spec.source_uri, spec.endpoint, deps_.access));
  if (spec.source_uri.starts_with("hf://")) {
    auto endpoint = HfEndpoint();  // this machine's: where the job runs
    if (!endpoint) return Err(endpoint.error());
  }
  if (!spec.auth_secret_name.empty()) {
    BDN_ASSIGN_OR_RETURN(auto vault, Vault());
    BDN_RETURN_IF_ERROR(vault->CheckUse(spec.auth_secret_name, spec.ns, secrets));
  }
  BDN_ASSIGN_OR_RETURN(StartedJob out,
                       deps_.jobs->Create(spec, {.secret_use = secrets,
                                                 .resume = true,
                                                 .max_unfinished = max_unfinished_per_namespace_}));
  if (on_created_) on_created_(out.job);
  return out;
}

Result<SyncJobRecord> LocalSyncService::Get(const std::string& id) { return deps_.jobs->Get(id); }

Result<SyncJobList> LocalSyncService::List(const std::string& ns, const std::string& volume) {
  // One more than shown: whether more match.
  BDN_ASSIGN_OR_RETURN(auto jobs, deps_.jobs->List(ns, volume, kMaxListedSyncJobs + 1));
  SyncJobList out;
  out.truncated = jobs.size() > kMaxListedSyncJobs;
  if (out.truncated) jobs.resize(kMaxListedSyncJobs);
  out.jobs = std::move(jobs);
  return out;
}

Result<SyncJobRecord> LocalSyncService::Cancel(const std::string& id) {
  BDN_ASSIGN_OR_RETURN(SyncJobRecord job, deps_.jobs->RequestCancel(id));
  // No runner holds it (pending, or its runner died): it ends now.
  BDN_ASSIGN_OR_RETURN(auto lease, deps_.jobs->TryLease(id));
  if (!lease) return job;
  auto done = deps_.jobs->Finish(id, SyncState::kCanceled, std::nullopt, false,
                                 std::string(kCanceled), "sync job " + id + ": canceled");
  if (!done && done.error().code() == StatusCode::kFailedPrecondition) return deps_.jobs->Get(id);
  return done;
}

Status LocalSyncService::SetSecret(const std::string& name, const std::string& value,
                                   const std::vector<std::string>& namespaces) {
  BDN_ASSIGN_OR_RETURN(auto vault, Vault());
  return vault->Set(name, value, namespaces);
}

Result<std::vector<SecretInfo>> LocalSyncService::ListSecrets() {
  BDN_ASSIGN_OR_RETURN(auto vault, Vault());
  return vault->List();
}

Status LocalSyncService::RemoveSecret(const std::string& name) {
  BDN_ASSIGN_OR_RETURN(auto vault, Vault());
  return vault->Remove(name);
}

// ---- JobScheduler ----

int RunnersPerNamespace(const SchedulerOptions& options) {
  const int runners = std::max(1, options.runners);
  const int cap = options.runners_per_namespace > 0 ? options.runners_per_namespace : runners / 2;
  return std::clamp(cap, 1, runners);
}

JobScheduler::JobScheduler(RunnerDeps deps, SchedulerOptions options)
    : deps_(std::move(deps)), options_(options), per_namespace_(RunnersPerNamespace(options)) {}

JobScheduler::~JobScheduler() { Stop(); }

Status JobScheduler::EnqueueUnfinished(bool log_resumes) {
  BDN_ASSIGN_OR_RETURN(auto unfinished, deps_.jobs->ListUnfinished());
  for (const auto& job : unfinished) {
    {
      MutexLock lock(mu_);
      if (running_.contains(job.id)) continue;
    }
    if (log_resumes && job.state == SyncState::kSyncing) {
      log::Info("sync job " + job.id + ": resuming (" + ShownSource(job.spec.source_uri) +
                " into bdn:" + job.spec.ns + "/" + job.spec.volume + ")");
    }
    Enqueue(job.id, job.spec.ns);
  }
  return Status::Ok();
}

Status JobScheduler::Start() {
  BDN_RETURN_IF_ERROR(EnqueueUnfinished(true));
  for (int i = 0; i < std::max(1, options_.runners); ++i) {
    threads_.emplace_back([this] { Work(); });
  }
  if (options_.poll.count() > 0) threads_.emplace_back([this] { Poll(); });
  if (options_.job_retention.count() > 0) threads_.emplace_back([this] { Prune(); });
  return Status::Ok();
}

std::chrono::milliseconds JobPruneInterval(std::chrono::milliseconds retention) {
  return std::clamp<std::chrono::milliseconds>(retention / 10, std::chrono::seconds(1),
                                               std::chrono::hours(1));
}

void JobScheduler::Prune() {
  const auto interval = JobPruneInterval(options_.job_retention);
  while (true) {
    const int64_t before = WallNowMs(*Clock::Real()) - options_.job_retention.count();
    if (auto deleted = deps_.jobs->DeleteFinished(before); !deleted) {
      log::Warn("sync jobs: deleting the finished ones past the retention: " +
                deleted.error().message());
    } else if (*deleted > 0) {
      log::Info("sync jobs: deleted " + std::to_string(*deleted) + " finished before " +
                FormatUtc(before));
    }
    MutexLock lock(mu_);
    if (cv_.wait_for(lock.native(), interval, [&] { return shutdown_.load(); })) return;
  }
}

void JobScheduler::Poll() {
  while (true) {
    {
      MutexLock lock(mu_);
      if (cv_.wait_for(lock.native(), options_.poll, [&] { return shutdown_.load(); })) return;
    }
    if (Status s = EnqueueUnfinished(false); !s.ok()) {
      log::Warn("sync jobs: listing the unfinished ones: " + s.message());
    }
  }
}

void JobScheduler::Enqueue(const std::string& id, const std::string& ns) {
  {
    MutexLock lock(mu_);
    if (!queued_.insert(id).second) return;
    queue_.push_back({id, ns});
  }
  cv_.notify_all();
}

std::deque<JobScheduler::Queued>::iterator JobScheduler::NextRunnable() {
  return std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) REQUIRES(mu_) {
    auto it = running_per_namespace_.find(q.ns);
    return it == running_per_namespace_.end() || it->second < per_namespace_;
  });
}

void JobScheduler::Stop() {
  shutdown_ = true;
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void JobScheduler::Work() {
  while (true) {
    Queued next;
    {
      MutexLock lock(mu_);
      // A job of a namespace at its cap waits for one of that namespace's jobs to end (which
      // notifies) while the runner takes a later job of another namespace.
      cv_.wait(lock.native(),
               [&]() REQUIRES(mu_) { return shutdown_ || NextRunnable() != queue_.end(); });
      if (shutdown_) return;
      auto it = NextRunnable();
      next = std::move(*it);
      queue_.erase(it);
      queued_.erase(next.id);
      running_.insert(next.id);
      ++running_per_namespace_[next.ns];
    }
    const std::string& id = next.id;
    RunOptions options;
    options.shutdown = &shutdown_;
    auto job = RunJob(id, deps_, options);
    {
      MutexLock lock(mu_);
      running_.erase(id);
      if (--running_per_namespace_[next.ns] == 0) running_per_namespace_.erase(next.ns);
    }
    cv_.notify_all();  // a slot of next.ns is free: a job of it waiting may run now
    if (!job && job.error().code() == StatusCode::kConflict) {
      // Its lease is held by another runner (another replica's, when jobs are polled).
      log::Debug("sync job " + id + ": " + job.error().message());
    } else if (!job && job.error().code() == StatusCode::kFailedPrecondition &&
               job.error().message().starts_with("sync job " + id + ": already ")) {
      // Ended elsewhere before this runner started it (another replica's run, a cancel).
      log::Info(job.error().message());
    } else if (!job) {
      log::Error("sync job " + id + ": " + job.error().message());
    } else if (job->state == SyncState::kReady) {
      log::Info("sync job " + id + ": READY bdn:" + job->spec.ns + "/" + job->spec.volume + "@" +
                (job->version ? job->version->ToString() : ""));
    } else if (IsTerminal(job->state)) {
      log::Warn("sync job " + id + ": " + std::string(SyncStateName(job->state)) + " " +
                job->error_code + ": " + job->error_message);
    }
  }
}

}  // namespace bdn::sync
