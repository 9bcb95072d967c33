// JobStatus: the StatusCode (and so the CLI's exit status) of every stable error code, as the
// table in docs/sync.md, "Error codes", documents them. RunJob's limit on unfinished starts, and
// LocalSyncService::Start's check of the secret a job names.
#include "bdn/sync/job_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bdn/registry/secret_store.h"
#include "bdn/sync/service.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn::sync {
namespace {

SyncJobRecord Failed(const std::string& code) {
  SyncJobRecord job;
  job.state = SyncState::kFailed;
  job.error_code = code;
  job.error_message = "hf://org/repo: what went wrong";
  return job;
}

TEST(JobStatus, EveryStableCodeHasTheDocumentedStatus) {
  // docs/sync.md: code | exit (2 InvalidArgument, 3 NotFound, 4 Conflict, 6 PermissionDenied,
  // 7 Unavailable, 8 FailedPrecondition, 1 Internal).
  const std::vector<std::pair<std::string_view, StatusCode>> table = {
      {kSourceNotFound, StatusCode::kNotFound},
      {kRevisionNotFound, StatusCode::kNotFound},
      {kIncludeMatchedNothing, StatusCode::kNotFound},
      {kSecretNotFound, StatusCode::kNotFound},
      {kAccessDenied, StatusCode::kPermissionDenied},
      {kFileNotAllowed, StatusCode::kPermissionDenied},
      {kAddressNotAllowed, StatusCode::kPermissionDenied},
      {kSecretNotAllowed, StatusCode::kPermissionDenied},
      {kBadCredentials, StatusCode::kPermissionDenied},
      {kSourceUnavailable, StatusCode::kUnavailable},
      {kSourceChanged, StatusCode::kFailedPrecondition},
      {kStoreFailed, StatusCode::kFailedPrecondition},
      {kListingTooLarge, StatusCode::kFailedPrecondition},
      {kInvalidAnswer, StatusCode::kFailedPrecondition},
      {kInvalidObject, StatusCode::kInvalidArgument},
      {kInvalidSecret, StatusCode::kInvalidArgument},
      {kCanceled, StatusCode::kConflict},
      {kVolumeBusy, StatusCode::kConflict},
      {kInternal, StatusCode::kInternal},
  };
  for (const auto& [code, want] : table) {
    Status s = JobStatus(Failed(std::string(code)));
    EXPECT_EQ(want, s.code()) << code;
    EXPECT_EQ(std::string(code), s.reason());
    EXPECT_EQ("hf://org/repo: what went wrong", s.message());
  }
  SyncJobRecord ready;
  ready.state = SyncState::kReady;
  EXPECT_TRUE(JobStatus(ready).ok());
}

// A job store in `dir` for `deps`, with bdn serve's limit of 5 unfinished runs.
void OpenJobs(const testutil::TempDir& dir, RunnerDeps& deps) {
  auto jobs = SqliteSyncJobStore::Open(dir.path() / "registry.db");
  ASSERT_OK(jobs);
  deps.jobs = std::shared_ptr<SyncJobStore>(std::move(*jobs));
  deps.max_unfinished_runs = 5;
}

SyncJobSpec HubSpec() {
  SyncJobSpec spec;
  spec.source_uri = "hf://org/repo";
  spec.ns = "w";
  spec.volume = "v";
  return spec;
}

// A 250 MB listing page got the server OOM-killed (SIGKILL: no catch sees it) in every run, and
// every restart resumed the job into the same kill.
TEST(RunJob, AJobStartedTooOftenWithoutFinishingFailsInsteadOfRunning) {
  testutil::TempDir dir("bdn_runs");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  std::atomic<int> opened{0};
  deps.open_source = [&](const std::string&,
                         const SourceOptions&) -> Result<std::unique_ptr<Source>> {
    ++opened;
    return Err(InternalError("not reached"));
  };
  auto job = deps.jobs->Create(HubSpec());
  ASSERT_OK(job);
  // Five runs, each ended by the death of its process: started, never finished.
  for (int i = 0; i < 5; ++i) ASSERT_OK(deps.jobs->StartRun(job->id));
  auto ran = RunJob(job->id, deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ("internal", ran->error_code);
  EXPECT_EQ(
      "hf://org/repo: started 5 times without finishing (the server stopped during each run: "
      "out of memory?); start a new job to try again",
      ran->error_message);
  EXPECT_EQ(5, ran->runs);
  EXPECT_EQ(0, opened.load());
}

// Stopping the server cleanly (SIGTERM at a deploy) while a job ran counted as one of its five
// unfinished runs: the sixth deploy during a long mirror failed the job.
TEST(RunJob, ARunEndedByACleanStopDoesNotCountTowardTheLimit) {
  testutil::TempDir dir("bdn_runs");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  std::atomic<bool> shutdown{false};
  std::atomic<int> opened{0};
  // The run's first step; the server is told to stop while it is under way.
  deps.claim = [&](const std::string&, const std::string&, const std::string&,
                   const std::atomic<bool>*) -> Result<std::unique_ptr<PushClaim>> {
    ++opened;
    shutdown = true;
    return Err(UnavailableError("hf://org/repo: stopped"));
  };
  auto job = deps.jobs->Create(HubSpec());
  ASSERT_OK(job);
  RunOptions options;
  options.shutdown = &shutdown;
  for (int i = 0; i < 7; ++i) {
    shutdown = false;
    auto ran = RunJob(job->id, deps, options);
    ASSERT_OK(ran);
    EXPECT_EQ(SyncState::kSyncing, ran->state) << "stop " << i;
    EXPECT_EQ(0, ran->runs) << "stop " << i;
  }
  EXPECT_EQ(7, opened.load());
  // Runs that ended with their process still count.
  ASSERT_OK(deps.jobs->StartRun(job->id));
  auto once = deps.jobs->Get(job->id);
  ASSERT_OK(once);
  EXPECT_EQ(1, once->runs);
}

// A job run by an origin said nothing of why it did not move while its source was retried
// (from an attacking helper: `sync start --wait` against an origin showed "0 B/0 B  files 0/0"
// for the whole retry deadline). The job's progress record says it, and the end clears it.
TEST(RunJob, TheProgressRecordSaysWhileTheSourceIsRetriedAndWhy) {
  testutil::TempDir dir("bdn_retrying");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  deps.progress_interval = std::chrono::milliseconds(20);
  deps.claim = [](const std::string&, const std::string&, const std::string&,
                  const std::atomic<bool>*) -> Result<std::unique_ptr<PushClaim>> {
    return std::make_unique<PushClaim>();
  };
  auto job = deps.jobs->Create(HubSpec());
  ASSERT_OK(job);
  SyncProgress seen;
  bool watched = false;
  deps.open_source = [&](const std::string&,
                         const SourceOptions& o) -> Result<std::unique_ptr<Source>> {
    // No watch of the caller's (an origin's run): the runner watches all the same.
    watched = o.retry.watch != nullptr;
    if (!watched) return Err(InternalError("no retry watch"));
    o.retry.watch->Retrying(UnavailableError("hf://org/repo: connection refused"), true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto now = deps.jobs->Get(job->id);
      if (now && now->progress.retrying_ms > 0) {
        seen = now->progress;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    o.retry.watch->Ended();
    return Err(WithCode(UnavailableError("hf://org/repo: connection refused (gave up)"),
                        kSourceUnavailable));
  };
  auto ran = RunJob(job->id, deps);
  ASSERT_OK(ran);
  EXPECT_TRUE(watched);
  EXPECT_GT(seen.retrying_ms, 0u);
  EXPECT_EQ("hf://org/repo: connection refused", seen.retry_error);
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ(0u, ran->progress.retrying_ms);
  EXPECT_EQ("", ran->progress.retry_error);
  // As a client shows it.
  seen.retrying_ms = 12'345;
  EXPECT_EQ("retrying for 12s (gives up at 5m): hf://org/repo: connection refused",
            RetryNote(seen, std::chrono::minutes(5)));
  EXPECT_EQ("", RetryNote(ran->progress, std::chrono::minutes(5)));
}

// A job started for a key that is not an admin key for every namespace may name only a secret
// set for its namespace (or "*"); another reads as missing, exactly as an unknown name, and no
// job is made. SecretUse::kAny (admin keys for "*", the embedded CLI) may name any secret.
TEST(LocalSyncService, AJobNamesOnlyASecretItsNamespaceMayUse) {
  testutil::TempDir dir("bdn_sync_secret_use");
  auto jobs = SqliteSyncJobStore::Open(dir.path() / "registry.db");
  ASSERT_OK(jobs);
  auto secrets = SqliteSecretStore::Open(dir.path() / "registry.db");
  ASSERT_OK(secrets);
  auto vault = SecretVault::Open(std::shared_ptr<SecretStore>(std::move(*secrets)),
                                 dir.path() / "secrets.key");
  ASSERT_OK(vault);
  RunnerDeps deps;
  deps.jobs = std::shared_ptr<SyncJobStore>(std::move(*jobs));
  deps.secrets = *vault;
  LocalSyncService service(deps);
  ASSERT_OK(service.SetSecret("team-b-hf-token", "hf_b", {"b"}));
  ASSERT_OK(service.SetSecret("team-a-hf-token", "hf_a", {"a"}));
  auto spec = [](const std::string& secret) {
    SyncJobSpec s;
    s.source_uri = "hf://teamb/private-model";
    s.ns = "a";
    s.volume = "stolen";
    s.auth_secret_name = secret;
    return s;
  };
  for (const std::string name : {"team-b-hf-token", "no-such-secret"}) {
    auto refused = service.Start(spec(name), SecretUse::kJobNamespace);
    EXPECT_STATUS(refused, kNotFound, "secret \"" + name + "\": not found");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ("secret \"" + name + "\": not found", refused.error().message());
    EXPECT_EQ("secret_not_found", refused.error().reason());
  }
  auto none = service.List("", "");
  ASSERT_OK(none);
  EXPECT_TRUE(none->jobs.empty());
  EXPECT_FALSE(none->truncated);
  auto own = service.Start(spec("team-a-hf-token"), SecretUse::kJobNamespace);
  ASSERT_OK(own);
  EXPECT_TRUE(own->created);
  auto admin = service.Start(spec("team-b-hf-token"), SecretUse::kAny);
  ASSERT_OK(admin);
  EXPECT_TRUE(admin->created);
  auto listed = service.ListSecrets();
  ASSERT_OK(listed);
  ASSERT_EQ(2u, listed->size());
  EXPECT_EQ(std::vector<std::string>{"a"}, (*listed)[0].namespaces);
  EXPECT_EQ(std::vector<std::string>{"b"}, (*listed)[1].namespaces);
}

// A job store and a vault in `dir`, for a LocalSyncService.
void OpenJobsAndVault(const testutil::TempDir& dir, RunnerDeps& deps) {
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  auto secrets = SqliteSecretStore::Open(dir.path() / "registry.db");
  ASSERT_OK(secrets);
  auto vault = SecretVault::Open(std::shared_ptr<SecretStore>(std::move(*secrets)),
                                 dir.path() / "secrets.key");
  ASSERT_OK(vault);
  deps.secrets = *vault;
}

// The namespaces of a job's secret were checked only when the job started; each run revealed
// whatever was stored under the name then. A job of namespace a, started with a's key while the
// secret was a's, ran with team b's token once an admin removed the secret and set it again for
// b. Every run now checks the secret against how the job was started, and fails the job with
// the answer of a missing secret (not saying whether it exists for another namespace).
TEST(RunJob, AJobDoesNotUseASecretSetAgainForAnotherNamespaceSinceItStarted) {
  testutil::TempDir dir("bdn_sync_secret_run");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobsAndVault(dir, deps));
  deps.claim = [](const std::string&, const std::string&, const std::string&,
                  const std::atomic<bool>*) -> Result<std::unique_ptr<PushClaim>> {
    return std::make_unique<PushClaim>();
  };
  std::vector<std::string> revealed;
  deps.open_source = [&](const std::string&,
                         const SourceOptions& o) -> Result<std::unique_ptr<Source>> {
    revealed.push_back(o.secret);
    return Err(WithCode(NotFoundError("hf://org/repo: stop here"), kSourceNotFound));
  };
  LocalSyncService service(deps);
  ASSERT_OK(service.SetSecret("hf-token", "hf_a", {"a"}));
  auto spec = [](const std::string& volume) {
    SyncJobSpec s;
    s.source_uri = "hf://org/repo";
    s.ns = "a";
    s.volume = volume;
    s.auth_secret_name = "hf-token";
    return s;
  };
  auto by_key = service.Start(spec("by-key"), SecretUse::kJobNamespace);
  ASSERT_OK(by_key);
  auto by_admin = service.Start(spec("by-admin"), SecretUse::kAny);
  ASSERT_OK(by_admin);
  auto gone = service.Start(spec("gone"), SecretUse::kJobNamespace);
  ASSERT_OK(gone);
  // While the jobs wait (PENDING), the secret is removed and set again, for namespace b only.
  ASSERT_OK(service.RemoveSecret("hf-token"));
  ASSERT_OK(service.SetSecret("hf-token", "hf_b", {"b"}));

  auto ran = RunJob(by_key->job.id, deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ("secret_not_found", ran->error_code);
  EXPECT_EQ("sync job " + by_key->job.id + ": secret \"hf-token\": not found", ran->error_message);
  EXPECT_TRUE(revealed.empty());
  EXPECT_STATUS(JobStatus(*ran), kNotFound,
                "sync job " + by_key->job.id + ": secret \"hf-token\": not found");

  // Removed for good: the very same answer.
  ASSERT_OK(service.RemoveSecret("hf-token"));
  ran = RunJob(gone->job.id, deps);
  ASSERT_OK(ran);
  EXPECT_EQ("secret_not_found", ran->error_code);
  EXPECT_EQ("sync job " + gone->job.id + ": secret \"hf-token\": not found", ran->error_message);
  EXPECT_TRUE(revealed.empty());

  // An admin key for "*" may name any secret: its job runs with the value stored now.
  ASSERT_OK(service.SetSecret("hf-token", "hf_b", {"b"}));
  ran = RunJob(by_admin->job.id, deps);
  ASSERT_OK(ran);
  EXPECT_EQ("source_not_found", ran->error_code);
  EXPECT_EQ(std::vector<std::string>{"hf_b"}, revealed);
}

// The cap of unfinished jobs per namespace was a count, then a create: starts at the same time
// all passed the count. N concurrent starts with cap K leave exactly K jobs unfinished.
TEST(LocalSyncService, ConcurrentStartsNeverPassTheUnfinishedCap) {
  testutil::TempDir dir("bdn_sync_cap");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  constexpr int kStarts = 16;
  constexpr int kCap = 3;
  LocalSyncService service(deps, {}, kCap);
  auto results = testutil::RunTogether(kStarts, [&](int i) {
    SyncJobSpec s = HubSpec();
    s.volume = "v" + std::to_string(i);
    return service.Start(s, SecretUse::kAny);
  });
  int created = 0;
  for (const auto& r : results) {
    if (r) {
      ++created;
      continue;
    }
    EXPECT_STATUS(r, kConflict,
                  "namespace \"w\": 3 sync jobs unfinished; wait for some or cancel them");
  }
  EXPECT_EQ(kCap, created);
  auto unfinished = deps.jobs->ListUnfinished();
  ASSERT_OK(unfinished);
  EXPECT_EQ(static_cast<size_t>(kCap), unfinished->size());
}

// `sync list` and GET /v1/sync/jobs showed the newest 1000 jobs with no sign that more
// matched. The list says so (SyncJobList::truncated), only when more match.
TEST(LocalSyncService, AListCutAtItsBoundSaysSo) {
  testutil::TempDir dir("bdn_sync_list");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  LocalSyncService service(deps);
  std::vector<std::string> ids;  // oldest first
  for (size_t i = 0; i < kMaxListedSyncJobs; ++i) {
    auto job = deps.jobs->Create(HubSpec());
    ASSERT_OK(job);
    ids.push_back(job->id);
  }
  auto whole = service.List("", "");
  ASSERT_OK(whole);
  EXPECT_EQ(whole->jobs.size(), kMaxListedSyncJobs);
  EXPECT_FALSE(whole->truncated);
  SyncJobSpec other = HubSpec();
  other.ns = "x";
  auto newest = deps.jobs->Create(other);
  ASSERT_OK(newest);
  auto cut = service.List("", "");
  ASSERT_OK(cut);
  ASSERT_EQ(cut->jobs.size(), kMaxListedSyncJobs);
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->jobs.front().id, newest->id);
  EXPECT_EQ(cut->jobs.back().id, ids[1]);  // the oldest is left out
  auto in_w = service.List("w", "v");
  ASSERT_OK(in_w);
  EXPECT_EQ(in_w->jobs.size(), kMaxListedSyncJobs);
  EXPECT_FALSE(in_w->truncated);
  auto in_x = service.List("x", "");
  ASSERT_OK(in_x);
  EXPECT_EQ(in_x->jobs.size(), 1u);
  EXPECT_FALSE(in_x->truncated);
}

// Finished jobs were kept forever. A scheduler with a retention deletes the ones that ended
// longer ago, soon after it starts (SyncJobStore::DeleteFinished keeps the unfinished ones).
TEST(JobScheduler, DeletesFinishedJobsPastTheRetention) {
  testutil::TempDir dir("bdn_sync_retention");
  RunnerDeps deps;
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  auto done = deps.jobs->Create(HubSpec());
  ASSERT_OK(done);
  ASSERT_OK(deps.jobs->Finish(done->id, SyncState::kFailed, std::nullopt, false, "x", "y"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(std::chrono::seconds(1), JobPruneInterval(std::chrono::milliseconds(5)));
  EXPECT_EQ(std::chrono::hours(1), JobPruneInterval(std::chrono::days(30)));
  {
    JobScheduler scheduler(deps, {.runners = 1, .job_retention = std::chrono::milliseconds(5)});
    ASSERT_OK(scheduler.Start());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (deps.jobs->Get(done->id) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_STATUS(deps.jobs->Get(done->id), kNotFound, "sync job " + done->id + ": not found");
}

// A job store whose leases the test can take away: Held() answers `held`, and a TryLease after
// the first gives a lease only while `free_again` (else another runner has the job).
class LosingLeases : public SyncJobStore {
 public:
  explicit LosingLeases(std::shared_ptr<SyncJobStore> inner) : inner_(std::move(inner)) {}
  using SyncJobStore::Create;
  std::atomic<bool> held{true};
  std::atomic<bool> free_again{false};
  std::atomic<int> leases{0};
  // Called at each Held() before it answers (the test's doings while the lease is looked at).
  std::function<void()> on_held;
  // A TryLease after the first fails with this (the database does not answer).
  std::optional<Status> lease_error;

  Result<CreatedSyncJob> Create(const SyncJobSpec& spec, const SyncJobCreate& how) override {
    return inner_->Create(spec, how);
  }
  Result<SyncJobRecord> Get(const std::string& id) override { return inner_->Get(id); }
  Result<std::vector<SyncJobRecord>> List(const std::string& ns, const std::string& volume,
                                          size_t limit) override {
    return inner_->List(ns, volume, limit);
  }
  Result<std::vector<SyncJobRecord>> ListUnfinished() override { return inner_->ListUnfinished(); }
  Result<int64_t> DeleteFinished(int64_t before) override { return inner_->DeleteFinished(before); }
  Result<SyncJobRecord> StartRun(const std::string& id) override { return inner_->StartRun(id); }
  Status UncountRun(const std::string& id) override { return inner_->UncountRun(id); }
  Status SetSource(const std::string& id, const std::string& revision, const Digest& listing,
                   uint64_t objects, uint64_t bytes, uint64_t left_out) override {
    return inner_->SetSource(id, revision, listing, objects, bytes, left_out);
  }
  Status SetProgress(const std::string& id, const SyncProgress& progress) override {
    return inner_->SetProgress(id, progress);
  }
  Result<SyncJobRecord> Finish(const std::string& id, SyncState state,
                               std::optional<Digest> version, bool unchanged,
                               const std::string& code, const std::string& message) override {
    return inner_->Finish(id, state, version, unchanged, code, message);
  }
  Result<SyncJobRecord> RequestCancel(const std::string& id) override {
    return inner_->RequestCancel(id);
  }
  Status RecordFile(const std::string& id, const SyncFileRecord& file) override {
    return inner_->RecordFile(id, file);
  }
  Result<std::vector<SyncFileRecord>> Files(const std::string& id) override {
    return inner_->Files(id);
  }
  Result<std::unique_ptr<SyncJobLease>> TryLease(const std::string&) override {
    if (++leases > 1 && lease_error) return Err(*lease_error);
    if (leases > 1 && !free_again) return std::unique_ptr<SyncJobLease>();
    if (leases > 1) held = true;
    return std::unique_ptr<SyncJobLease>(std::make_unique<Lease>(*this));
  }

 private:
  class Lease : public SyncJobLease {
   public:
    explicit Lease(LosingLeases& jobs) : jobs_(jobs) {}
    Result<bool> Held() override {
      if (jobs_.on_held) jobs_.on_held();
      return jobs_.held.load();
    }

   private:
    LosingLeases& jobs_;
  };
  std::shared_ptr<SyncJobStore> inner_;
};

// Waits up to 10 s for the run to be told to stop; whether it was.
bool WaitForStop(const std::atomic<bool>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return stop.load();
}

// A job store in `dir` for `deps` whose leases the test takes away, looked at every 20 ms.
void OpenLosingLeases(const testutil::TempDir& dir, RunnerDeps& deps,
                      std::shared_ptr<LosingLeases>& jobs) {
  ASSERT_NO_FATAL_FAILURE(OpenJobs(dir, deps));
  jobs = std::make_shared<LosingLeases>(deps.jobs);
  deps.jobs = jobs;
  deps.progress_interval = std::chrono::milliseconds(20);
}

// A job's lease is a PostgreSQL lock held by a connection of its own: when that connection
// ended (PostgreSQL restarted, the backend terminated), the run went on while another replica
// took the lease and ran the job too. The run now stops for that runner, leaving the job to it
// (no outcome recorded, no run counted).
TEST(RunJob, ARunWhoseLeaseAnotherRunnerTookStopsAndLeavesTheJobToIt) {
  testutil::TempDir dir("bdn_lease");
  RunnerDeps deps;
  std::shared_ptr<LosingLeases> jobs;
  ASSERT_NO_FATAL_FAILURE(OpenLosingLeases(dir, deps, jobs));
  std::atomic<bool> stopped{false};
  // The run's first step, under way when the lease is lost.
  deps.claim = [&](const std::string&, const std::string&, const std::string&,
                   const std::atomic<bool>* stop) -> Result<std::unique_ptr<PushClaim>> {
    jobs->held = false;
    stopped = WaitForStop(*stop);
    return Err(ConflictError("stopped"));
  };
  auto job = jobs->Create(HubSpec());
  ASSERT_OK(job);
  EXPECT_STATUS(RunJob(job->id, deps), kConflict,
                "sync job " + job->id +
                    ": its lease was lost and another runner took the job; this run stopped");
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(2, jobs->leases.load());
  auto now = jobs->Get(job->id);
  ASSERT_OK(now);
  EXPECT_EQ(SyncState::kSyncing, now->state);
  EXPECT_EQ(0, now->runs);
  EXPECT_EQ("", now->error_code);
}

// A lost lease that no other runner has taken is taken again, and the run goes on.
TEST(RunJob, ARunWhoseLostLeaseIsStillFreeTakesItAgainAndGoesOn) {
  testutil::TempDir dir("bdn_lease");
  RunnerDeps deps;
  std::shared_ptr<LosingLeases> jobs;
  ASSERT_NO_FATAL_FAILURE(OpenLosingLeases(dir, deps, jobs));
  jobs->free_again = true;
  std::atomic<bool> stopped{false};
  deps.claim = [&](const std::string&, const std::string&, const std::string&,
                   const std::atomic<bool>* stop) -> Result<std::unique_ptr<PushClaim>> {
    jobs->held = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (jobs->leases.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // A few more ticks of the watcher: the lease it holds again stays held.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopped = stop->load();
    return Err(UnavailableError("hf://org/repo: went on"));
  };
  auto job = jobs->Create(HubSpec());
  ASSERT_OK(job);
  auto ran = RunJob(job->id, deps);
  ASSERT_OK(ran);
  EXPECT_FALSE(stopped.load());
  EXPECT_EQ(2, jobs->leases.load());
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ("hf://org/repo: went on", ran->error_message);
  EXPECT_EQ(1, ran->runs);
}

// Free again, but ended meanwhile: another replica took the lease, ran the job to its end (here
// FAILED) and let go, while this run was stalled (a paused VM, a network cut). The run took the
// lease back and went on, and its commit then put a version under a FAILED job. It stops now,
// and the other run's outcome stands.
TEST(RunJob, ARunWhoseJobEndedWhileItsLeaseWasLostStopsAndLeavesThatOutcome) {
  testutil::TempDir dir("bdn_lease");
  RunnerDeps deps;
  std::shared_ptr<LosingLeases> jobs;
  ASSERT_NO_FATAL_FAILURE(OpenLosingLeases(dir, deps, jobs));
  jobs->free_again = true;
  std::atomic<bool> stopped{false};
  std::string id;
  deps.claim = [&](const std::string&, const std::string&, const std::string&,
                   const std::atomic<bool>* stop) -> Result<std::unique_ptr<PushClaim>> {
    // Lost, and ended by another runner before this run looks again.
    EXPECT_OK(jobs->Finish(id, SyncState::kFailed, std::nullopt, false, "source_changed",
                           "hf://org/repo: changed"));
    jobs->held = false;
    stopped = WaitForStop(*stop);
    return Err(ConflictError("stopped"));
  };
  auto job = jobs->Create(HubSpec());
  ASSERT_OK(job);
  id = job->id;
  auto ran = RunJob(job->id, deps);
  ASSERT_OK(ran);
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ("source_changed", ran->error_code);
  EXPECT_EQ("hf://org/repo: changed", ran->error_message);
}

// A run that reaches its commit: a directory with one file as the source (file://), a store in
// memory, a registry in `dir`; the watcher looks only every 10 s, so the look before the commit
// is the one that counts.
struct CommittingRun {
  testutil::TempDir dir{"bdn_commit_look"};
  RunnerDeps deps;
  std::shared_ptr<LosingLeases> jobs;
  std::shared_ptr<Registry> registry;
  std::string id;

  void Open() {
    ASSERT_NO_FATAL_FAILURE(OpenLosingLeases(dir, deps, jobs));
    deps.progress_interval = std::chrono::seconds(10);
    deps.store = std::make_shared<MemChunkStore>();
    auto r =
        SqliteRegistry::Open(dir.path() / "registry.db");  // the jobs' database, as bdn serve's
    ASSERT_OK(r);
    registry = std::move(*r);
    deps.registry = registry;
    std::filesystem::create_directories(dir.path() / "src");
    std::ofstream(dir.path() / "src" / "weights.bin") << "weights";
    SyncJobSpec spec;
    spec.source_uri = "file://" + (dir.path() / "src").string();
    spec.ns = "w";
    spec.volume = "v";
    auto job = jobs->Create(spec);
    ASSERT_OK(job);
    id = job->id;
  }
  // The versions of w/v (none: NotFound from the registry).
  size_t Versions() {
    auto v = registry->ListVersions("w", "v", true);
    return v ? v->size() : 0;
  }
};

TEST(RunJob, ACommittingRunWithItsLeaseHeldCommits) {
  CommittingRun run;
  ASSERT_NO_FATAL_FAILURE(run.Open());
  auto ran = RunJob(run.id, run.deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kReady, ran->state) << ran->error_message;
  EXPECT_EQ(1u, run.Versions());
}

// A cancel that came while the lease was lost found no runner and ended the job CANCELED; the
// run, taking its free lease back at its commit, commits nothing and the job stays CANCELED.
TEST(RunJob, ACommitAfterTheJobWasCancelledWhileItsLeaseWasLostIsNotMade) {
  CommittingRun run;
  ASSERT_NO_FATAL_FAILURE(run.Open());
  run.jobs->free_again = true;
  run.jobs->on_held = [&] {
    if (!run.jobs->held) return;
    run.jobs->held = false;
    EXPECT_OK(run.jobs->RequestCancel(run.id));
    EXPECT_OK(run.jobs->Finish(run.id, SyncState::kCanceled, std::nullopt, false, "canceled",
                               "sync job " + run.id + ": canceled"));
  };
  auto ran = RunJob(run.id, run.deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kCanceled, ran->state);
  EXPECT_EQ(0u, run.Versions());
}

// A cancel request the watcher had not seen yet: looked at before the commit, it wins.
TEST(RunJob, ACancelRequestedJustBeforeTheCommitIsHonoured) {
  CommittingRun run;
  ASSERT_NO_FATAL_FAILURE(run.Open());
  run.jobs->on_held = [&] { EXPECT_OK(run.jobs->RequestCancel(run.id)); };
  auto ran = RunJob(run.id, run.deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kCanceled, ran->state);
  EXPECT_EQ("sync job " + run.id + ": canceled", ran->error_message);
  EXPECT_EQ(0u, run.Versions());
}

// Lost, and the database does not answer when the run tries to take it back: no commit, and the
// job fails as a commit that could not reach the database would (store_failed).
TEST(RunJob, ACommitWhoseLostLeaseCannotBeTakenBackIsNotMade) {
  CommittingRun run;
  ASSERT_NO_FATAL_FAILURE(run.Open());
  run.jobs->lease_error = UnavailableError("registry postgresql://db: connection lost");
  run.jobs->on_held = [&] { run.jobs->held = false; };
  auto ran = RunJob(run.id, run.deps);
  ASSERT_OK(ran);
  EXPECT_EQ(SyncState::kFailed, ran->state);
  EXPECT_EQ("store_failed", ran->error_code);
  EXPECT_EQ("sync job " + run.id +
                ": its lease was lost and could not be taken again; nothing was committed",
            ran->error_message);
  EXPECT_EQ(0u, run.Versions());
}

// A run stalled after its last look (a paused VM, the commit waiting on a table lock), past its
// lease and its push claim, while the job was cancelled or ended elsewhere: its commit, made
// under the job's row lock, is refused (the stale run committed over a user's later push). A
// commit that is made ends the job READY in the same transaction, so no cancel lands between.
TEST(RunJob, ACommitOfASyncRunIsMadeOnlyWhileItsJobIsSyncingWithNoCancelAndEndsItReady) {
  CommittingRun run;
  ASSERT_NO_FATAL_FAILURE(run.Open());
  CommitRequest req;
  req.ns = "w";
  req.volume = "v";
  req.digest = Digest::Of(std::string("a version"));
  req.sync_job_id = run.id;
  req.sync_unchanged = true;
  EXPECT_OK(run.jobs->StartRun(run.id));
  EXPECT_OK(run.registry->Commit(req));
  auto ready = run.jobs->Get(run.id);
  ASSERT_OK(ready);
  EXPECT_EQ(SyncState::kReady, ready->state);
  ASSERT_TRUE(ready->version.has_value());
  EXPECT_EQ(req.digest, *ready->version);
  EXPECT_TRUE(ready->unchanged);
  EXPECT_STATUS(run.jobs->RequestCancel(run.id), kFailedPrecondition,
                "sync job " + run.id + ": already READY");
  EXPECT_STATUS(run.registry->Commit(req), kFailedPrecondition,
                "sync job " + run.id + ": already READY; its run's version was not committed");

  auto cancelled = run.jobs->Create(HubSpec());
  ASSERT_OK(cancelled);
  ASSERT_OK(run.jobs->StartRun(cancelled->id));
  ASSERT_OK(run.jobs->RequestCancel(cancelled->id));
  req.sync_job_id = cancelled->id;
  req.digest = Digest::Of(std::string("another version"));
  EXPECT_STATUS(
      run.registry->Commit(req), kFailedPrecondition,
      "sync job " + cancelled->id + ": cancel requested; its run's version was not committed");
  ASSERT_OK(
      run.jobs->Finish(cancelled->id, SyncState::kCanceled, std::nullopt, false, "canceled", "x"));
  EXPECT_STATUS(
      run.registry->Commit(req), kFailedPrecondition,
      "sync job " + cancelled->id + ": already CANCELED; its run's version was not committed");
  req.sync_job_id = "sync_0000000000000000";
  EXPECT_STATUS(run.registry->Commit(req), kNotFound, "sync job sync_0000000000000000: not found");
  EXPECT_EQ(1u, run.Versions());
  req.sync_job_id.clear();  // a push: no condition
  EXPECT_OK(run.registry->Commit(req));
  EXPECT_EQ(2u, run.Versions());
}

}  // namespace
}  // namespace bdn::sync
