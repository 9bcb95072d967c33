// Tests for SqlSyncJobStore and SqlSecretStore on SQLite and PostgreSQL (one typed suite): the
// states of a job, its progress and files, the lookups a restarted or polling server uses, and
// leases: one runner per job across servers, released when its holder process dies.
#include "bdn/registry/sync_job_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bdn/registry/backends_test_util.h"
#include "bdn/sql/database.h"
#include "bdn/sql/sqlite_database.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {

Digest D(uint8_t fill) {
  std::array<uint8_t, Digest::kSize> b;
  b.fill(fill);
  return Digest(b);
}

SyncJobSpec Spec(const std::string& volume = "v") {
  SyncJobSpec s;
  s.source_uri = "hf://org/repo@main";
  s.ns = "w";
  s.volume = volume;
  s.tag = "latest";
  s.includes = {"*.safetensors", "config.json"};
  s.excludes = {"*.bin"};
  s.auth_secret_name = "hf";
  s.retry_deadline_ms = 1234;
  s.endpoint = "http://127.0.0.1:9000";
  s.region = "eu-1";
  return s;
}

// A commit of a job's version holds the job's row and ends it READY in its transaction
// (SqlRegistry::Commit with CommitRequest::sync_job_id). PostgreSQL writes run at READ
// COMMITTED: a cancel, a takeover's StartRun or a Finish that read the job before that commit
// ended (a plain read: SYNCING) then wrote over the READY row once it did: a cancel accepted on a
// READY job, a READY job flipped back to SYNCING and then FAILED with its version committed.
// They read the row locked now, and see READY.
TEST(PgSyncJobStore, WritesWaitingBehindACommitThatEndsTheJobSeeItReady) {
  std::string why;
  const std::string url = testutil::SharedPgServer::Get().NewDatabase(&why);
  if (url.empty()) GTEST_SKIP() << "no PostgreSQL: " << why;
  auto pool = sql::PgPool::Open({.url = url, .max_connections = 4});
  ASSERT_OK(pool);
  ASSERT_OK(MigratePgMetadata(**pool));
  SqlSyncJobStore store((*pool)->Use("sync job store"));
  auto job = store.Create(Spec());
  ASSERT_OK(job);
  const std::string id = job->id;
  ASSERT_OK(store.StartRun(id));
  std::atomic<bool> locked{false};
  // The commit: holds the row, then ends the job READY.
  std::thread commit([&] {
    EXPECT_OK((*pool)->Use("registry")->Write([&](sql::Session& s) -> Status {
      BDN_RETURN_IF_ERROR(
          sql::ToStatus(s.Query("SELECT state FROM sync_jobs WHERE id=?1 FOR UPDATE", {id})));
      locked = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return FinishSyncJobReady(s, id, Digest::Of(std::string("v")), false, 1);
    }));
  });
  while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // All three wait behind the commit at once.
  std::thread cancel([&] {
    EXPECT_STATUS(store.RequestCancel(id), kFailedPrecondition,
                  "sync job " + id + ": already READY");
  });
  std::thread takeover([&] {
    EXPECT_STATUS(store.StartRun(id), kFailedPrecondition, "sync job " + id + ": already READY");
  });
  EXPECT_STATUS(store.Finish(id, SyncState::kFailed, std::nullopt, false, "x", "y"),
                kFailedPrecondition, "sync job " + id + ": already READY");
  cancel.join();
  takeover.join();
  commit.join();
  auto now = store.Get(id);
  ASSERT_OK(now);
  EXPECT_EQ(now->state, SyncState::kReady);
  EXPECT_FALSE(now->cancel_requested);
  EXPECT_EQ(now->runs, 1);
  ASSERT_TRUE(now->version.has_value());
  EXPECT_EQ(*now->version, Digest::Of(std::string("v")));
}

template <typename Backend>
class SyncJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    auto s = backend_.OpenJobs();
    ASSERT_OK(s);
    jobs_ = std::move(*s);
  }
  Backend backend_;
  std::unique_ptr<SyncJobStore> jobs_;
};

TYPED_TEST_SUITE(SyncJobStoreTest, testutil::Backends, testutil::BackendName);

TYPED_TEST(SyncJobStoreTest, AJobGoesFromPendingToReadyKeepingItsSpecAndProgress) {
  auto created = this->jobs_->Create(Spec());
  ASSERT_OK(created);
  EXPECT_TRUE(created->id.starts_with("sync_"));
  EXPECT_EQ(created->id.size(), 5u + 16u);
  EXPECT_EQ(created->state, SyncState::kPending);
  EXPECT_EQ(created->spec, Spec());
  EXPECT_EQ(created->runs, 0);

  auto run = this->jobs_->StartRun(created->id);
  ASSERT_OK(run);
  EXPECT_EQ(run->state, SyncState::kSyncing);
  EXPECT_EQ(run->runs, 1);
  EXPECT_GT(run->started_unix_ms, 0);
  ASSERT_OK(this->jobs_->SetSource(created->id, "abc123", D(9), 3, 300, 5));
  SyncProgress retried{3, 2, 300, 200, 250};
  retried.retrying_ms = 4200;
  retried.retry_error = "hf://org/repo: HTTP 503";
  ASSERT_OK(this->jobs_->SetProgress(created->id, retried));
  auto noted = this->jobs_->Get(created->id);
  ASSERT_OK(noted);
  EXPECT_EQ(noted->progress.retrying_ms, 4200u);
  EXPECT_EQ(noted->progress.retry_error, "hf://org/repo: HTTP 503");
  auto again = this->jobs_->StartRun(created->id);  // a resumed run
  ASSERT_OK(again);
  EXPECT_EQ(again->runs, 2);
  EXPECT_EQ(again->started_unix_ms, run->started_unix_ms);
  EXPECT_EQ(again->source_revision, "abc123");
  EXPECT_EQ(again->listing_digest, D(9));
  EXPECT_EQ(again->progress.objects_done, 2u);
  EXPECT_EQ(again->progress.bytes_fetched, 250u);
  EXPECT_EQ(again->progress.objects_left_out, 5u) << "kept by SetProgress";
  EXPECT_EQ(again->progress.retrying_ms, 0u) << "a new run is not retrying yet";
  EXPECT_EQ(again->progress.retry_error, "");
  ASSERT_OK(this->jobs_->SetProgress(created->id, retried));

  auto done = this->jobs_->Finish(created->id, SyncState::kReady, D(7), true, "", "");
  ASSERT_OK(done);
  EXPECT_EQ(done->state, SyncState::kReady);
  EXPECT_EQ(done->version, D(7));
  EXPECT_TRUE(done->unchanged);
  EXPECT_GT(done->finished_unix_ms, 0);
  EXPECT_EQ(done->progress.retrying_ms, 0u) << "an ended job retries nothing";
  EXPECT_EQ(done->progress.retry_error, "");
  EXPECT_STATUS(this->jobs_->Finish(created->id, SyncState::kFailed, std::nullopt, false, "x", "y"),
                kFailedPrecondition, "sync job " + created->id + ": already READY");
  EXPECT_STATUS(this->jobs_->StartRun(created->id), kFailedPrecondition,
                "sync job " + created->id + ": already READY");
  EXPECT_STATUS(this->jobs_->Get("sync_0000000000000000"), kNotFound,
                "sync job sync_0000000000000000: not found");
}

TYPED_TEST(SyncJobStoreTest, FilesAreRecordedReplacedAndDroppedWhenTheJobEnds) {
  auto job = this->jobs_->Create(Spec());
  ASSERT_OK(job);
  ASSERT_OK(this->jobs_->RecordFile(job->id, {"b.bin", 10, "e1", D(1), 1, Digest(), 1}));
  ASSERT_OK(this->jobs_->RecordFile(job->id, {"a.bin", 20, "e2", D(2), 2, D(3), 4}));
  ASSERT_OK(this->jobs_->RecordFile(job->id, {"b.bin", 11, "e3", D(4), 1, Digest(), 1}));
  auto files = this->jobs_->Files(job->id);
  ASSERT_OK(files);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path, "a.bin");
  EXPECT_EQ((*files)[0].index, D(3));
  EXPECT_EQ((*files)[0].chunks, 4u);
  EXPECT_EQ((*files)[1].path, "b.bin");
  EXPECT_EQ((*files)[1].size_bytes, 11u);
  EXPECT_EQ((*files)[1].etag, "e3");
  EXPECT_EQ((*files)[1].digest, D(4));
  ASSERT_OK(this->jobs_->Finish(job->id, SyncState::kFailed, std::nullopt, false, "source_gone",
                                "hf://org/repo: gone"));
  auto after = this->jobs_->Files(job->id);
  ASSERT_OK(after);
  EXPECT_TRUE(after->empty());
  auto failed = this->jobs_->Get(job->id);
  ASSERT_OK(failed);
  EXPECT_EQ(failed->error_code, "source_gone");
  EXPECT_EQ(failed->error_message, "hf://org/repo: gone");
}

TYPED_TEST(SyncJobStoreTest, ListingsFindTheUnfinishedAndTheNewestFirst) {
  auto a = this->jobs_->Create(Spec("a"));
  auto b = this->jobs_->Create(Spec("b"));
  auto c = this->jobs_->Create(Spec("a"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(c);
  ASSERT_OK(this->jobs_->Finish(c->id, SyncState::kCanceled, std::nullopt, false, "canceled", ""));
  auto all = this->jobs_->List();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, c->id);  // newest first (created in one millisecond: by insertion)
  EXPECT_EQ((*all)[2].id, a->id);
  auto in_a = this->jobs_->List("w", "a");
  ASSERT_OK(in_a);
  ASSERT_EQ(in_a->size(), 2u);
  auto in_w = this->jobs_->List("w");
  ASSERT_OK(in_w);
  EXPECT_EQ(in_w->size(), 3u);
  auto unfinished = this->jobs_->ListUnfinished();
  ASSERT_OK(unfinished);
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].id, a->id);  // oldest first
  EXPECT_EQ((*unfinished)[1].id, b->id);
  auto found = this->jobs_->Create(Spec("a"), {.resume = true});
  ASSERT_OK(found);
  EXPECT_FALSE(found->created);
  EXPECT_EQ(found->job.id, a->id);
  SyncJobSpec other = Spec("a");
  other.tag = "other";
  auto made = this->jobs_->Create(other, {.resume = true});
  ASSERT_OK(made);
  EXPECT_TRUE(made->created);
  EXPECT_NE(made->job.id, a->id);
  auto limited = this->jobs_->List("w", "", 2);
  ASSERT_OK(limited);
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[0].id, made->job.id);  // the newest two
  EXPECT_EQ((*limited)[1].id, c->id);
}

// A job records the secret use of the key that started it. Resumed (the same spec again) by an
// admin key for "*", it may use any secret, as a job that key creates; resumed by a namespace's
// key, it keeps what it had: never widened by that key, and an admin's job not narrowed.
TYPED_TEST(SyncJobStoreTest, AJobKeepsItsSecretUseAndOnlyAnAdminResumeWidensIt) {
  auto by_key = this->jobs_->Create(Spec("a"), {.secret_use = SecretUse::kJobNamespace});
  ASSERT_OK(by_key);
  EXPECT_EQ(by_key->job.secret_use, SecretUse::kJobNamespace);
  auto by_admin = this->jobs_->Create(Spec("b"), {.secret_use = SecretUse::kAny});
  ASSERT_OK(by_admin);
  EXPECT_EQ(by_admin->job.secret_use, SecretUse::kAny);
  auto got = this->jobs_->Get(by_admin->job.id);
  ASSERT_OK(got);
  EXPECT_EQ(got->secret_use, SecretUse::kAny);

  auto key_resumes_admins =
      this->jobs_->Create(Spec("b"), {.secret_use = SecretUse::kJobNamespace, .resume = true});
  ASSERT_OK(key_resumes_admins);
  EXPECT_FALSE(key_resumes_admins->created);
  EXPECT_EQ(key_resumes_admins->job.id, by_admin->job.id);
  EXPECT_EQ(key_resumes_admins->job.secret_use, SecretUse::kAny);

  auto key_resumes_keys =
      this->jobs_->Create(Spec("a"), {.secret_use = SecretUse::kJobNamespace, .resume = true});
  ASSERT_OK(key_resumes_keys);
  EXPECT_EQ(key_resumes_keys->job.id, by_key->job.id);
  EXPECT_EQ(key_resumes_keys->job.secret_use, SecretUse::kJobNamespace);

  auto admin_resumes_keys =
      this->jobs_->Create(Spec("a"), {.secret_use = SecretUse::kAny, .resume = true});
  ASSERT_OK(admin_resumes_keys);
  EXPECT_FALSE(admin_resumes_keys->created);
  EXPECT_EQ(admin_resumes_keys->job.id, by_key->job.id);
  EXPECT_EQ(admin_resumes_keys->job.secret_use, SecretUse::kAny);
  got = this->jobs_->Get(by_key->job.id);
  ASSERT_OK(got);
  EXPECT_EQ(got->secret_use, SecretUse::kAny);
}

// The cap of unfinished jobs per namespace was counted in one call and the job created in
// another, so starts at the same time (threads of one server, replicas sharing a database) all
// passed the count. Each thread here has its own handle on the database, as another server.
TYPED_TEST(SyncJobStoreTest, ConcurrentCreatesNeverPassTheUnfinishedBound) {
  constexpr int kThreads = 12;
  constexpr int64_t kCap = 4;
  std::vector<std::unique_ptr<SyncJobStore>> stores;
  for (int i = 0; i < kThreads; ++i) {
    auto store = this->backend_.OpenJobs();
    ASSERT_OK(store);
    stores.push_back(std::move(*store));
  }
  // Another namespace's jobs count for it alone.
  ASSERT_OK(this->jobs_->Create(Spec("elsewhere"), {.max_unfinished = kCap}));
  SyncJobSpec other_ns = Spec("x");
  other_ns.ns = "other";
  ASSERT_OK(this->jobs_->Create(other_ns, {.max_unfinished = kCap}));
  auto results = testutil::RunTogether(kThreads, [&](int i) {
    return stores[i]->Create(Spec("v" + std::to_string(i)), {.max_unfinished = kCap});
  });
  int created = 0;
  for (const auto& r : results) {
    if (r) {
      ++created;
      continue;
    }
    EXPECT_EQ(r.error().code(), StatusCode::kConflict);
    EXPECT_EQ(r.error().message(),
              "namespace \"w\": 4 sync jobs unfinished; wait for some or cancel them");
  }
  EXPECT_EQ(created, kCap - 1);
  auto unfinished = this->jobs_->ListUnfinished();
  ASSERT_OK(unfinished);
  EXPECT_EQ(std::ranges::count_if(*unfinished, [](const auto& j) { return j.spec.ns == "w"; }),
            kCap);
  // A finished job frees its place.
  ASSERT_OK(this->jobs_->Finish((*unfinished)[0].id, SyncState::kCanceled, std::nullopt, false,
                                "canceled", ""));
  EXPECT_OK(this->jobs_->Create(Spec("later"), {.max_unfinished = kCap}));
  EXPECT_STATUS(this->jobs_->Create(Spec("later2"), {.max_unfinished = kCap}), kConflict,
                "namespace \"w\": 4 sync jobs unfinished");
}

// Finished jobs were never deleted. DeleteFinished removes the terminal jobs that ended before
// its cutoff (and their file records), never an unfinished one, however old.
TYPED_TEST(SyncJobStoreTest, DeleteFinishedRemovesOnlyTerminalJobsEndedBeforeTheCutoff) {
  auto pending = this->jobs_->Create(Spec("pending"));
  auto syncing = this->jobs_->Create(Spec("syncing"));
  auto ready = this->jobs_->Create(Spec("ready"));
  auto failed = this->jobs_->Create(Spec("failed"));
  ASSERT_OK(pending);
  ASSERT_OK(syncing);
  ASSERT_OK(ready);
  ASSERT_OK(failed);
  ASSERT_OK(this->jobs_->StartRun(syncing->id));
  ASSERT_OK(this->jobs_->RecordFile(syncing->id, {"a.bin", 1, "e", D(1), 1, Digest(), 1}));
  ASSERT_OK(this->jobs_->Finish(ready->id, SyncState::kReady, D(7), false, "", ""));
  auto done = this->jobs_->Finish(failed->id, SyncState::kFailed, std::nullopt, false, "x", "y");
  ASSERT_OK(done);
  auto none = this->jobs_->DeleteFinished(done->finished_unix_ms - 60'000);
  ASSERT_OK(none);
  EXPECT_EQ(*none, 0);
  auto deleted = this->jobs_->DeleteFinished(done->finished_unix_ms + 1);
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 2);
  EXPECT_STATUS(this->jobs_->Get(ready->id), kNotFound, "sync job " + ready->id + ": not found");
  EXPECT_STATUS(this->jobs_->Get(failed->id), kNotFound, "sync job " + failed->id + ": not found");
  // However old, an unfinished job stays.
  auto all = this->jobs_->DeleteFinished(int64_t{1} << 62);
  ASSERT_OK(all);
  EXPECT_EQ(*all, 0);
  auto left = this->jobs_->List();
  ASSERT_OK(left);
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].id, syncing->id);
  EXPECT_EQ((*left)[1].id, pending->id);
  auto files = this->jobs_->Files(syncing->id);
  ASSERT_OK(files);
  EXPECT_EQ(files->size(), 1u);
}

TYPED_TEST(SyncJobStoreTest, CancelIsRequestedUntilTheJobEnds) {
  auto job = this->jobs_->Create(Spec());
  ASSERT_OK(job);
  auto canceled = this->jobs_->RequestCancel(job->id);
  ASSERT_OK(canceled);
  EXPECT_TRUE(canceled->cancel_requested);
  EXPECT_EQ(canceled->state, SyncState::kPending);
  ASSERT_OK(this->jobs_->Finish(job->id, SyncState::kCanceled, std::nullopt, false, "canceled",
                                "sync job: canceled"));
  EXPECT_STATUS(this->jobs_->RequestCancel(job->id), kFailedPrecondition,
                "sync job " + job->id + ": already CANCELED");
}

// Two servers over one store: a lease held by one is refused to the other until released.
TYPED_TEST(SyncJobStoreTest, ALeaseIsHeldByOneServerAtATime) {
  auto other = this->backend_.OpenJobs();
  ASSERT_OK(other);
  auto job = this->jobs_->Create(Spec());
  ASSERT_OK(job);
  auto first = this->jobs_->TryLease(job->id);
  ASSERT_OK(first);
  ASSERT_NE(*first, nullptr);
  auto second = (*other)->TryLease(job->id);
  ASSERT_OK(second);
  EXPECT_EQ(*second, nullptr);
  auto elsewhere = (*other)->TryLease("sync_ffffffffffffffff");
  ASSERT_OK(elsewhere);
  EXPECT_NE(*elsewhere, nullptr);
  first->reset();
  auto third = (*other)->TryLease(job->id);
  ASSERT_OK(third);
  EXPECT_NE(*third, nullptr);
}

// A lease whose holder process is killed (kill -9: no destructor runs) is free again: the kernel
// drops the flock, PostgreSQL the session of the dead connection.
TYPED_TEST(SyncJobStoreTest, ALeaseDiesWithItsHolderProcess) {
  auto job = this->jobs_->Create(Spec());
  ASSERT_OK(job);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Its own store (connections of its own); the parent's are never touched here.
    auto own = this->backend_.OpenJobs();
    auto lease = own ? (*own)->TryLease(job->id) : Result<std::unique_ptr<SyncJobLease>>();
    const char c = own && lease && *lease ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  auto held = this->jobs_->TryLease(job->id);
  ASSERT_OK(held);
  EXPECT_EQ(*held, nullptr);
  ::kill(child, SIGKILL);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  // PostgreSQL ends the dead session as soon as it reads the closed socket: poll for that.
  std::unique_ptr<SyncJobLease> lease;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!lease && std::chrono::steady_clock::now() < deadline) {
    auto r = this->jobs_->TryLease(job->id);
    ASSERT_OK(r);
    lease = std::move(*r);
    if (!lease) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(lease, nullptr);
}

// A registry file made before jobs kept their secret use (and before object-store sources, without
// endpoint and region) is upgraded when opened: its jobs read as SecretUse::kLegacyJob, and new
// jobs record theirs.
TEST(SqliteSyncJobStore, AFileFromBeforeSecretUseGetsTheColumnAndLegacyForItsJobs) {
  testutil::TempDir dir("bdn_job_upgrade");
  const auto file = dir.path() / "registry.db";
  {
    sql::SqliteOptions o;
    o.what = "old sync job store";
    o.schema =
        "CREATE TABLE sync_jobs(id TEXT PRIMARY KEY, source_uri TEXT NOT NULL, ns TEXT NOT NULL, "
        "volume TEXT NOT NULL, tag TEXT NOT NULL, includes TEXT NOT NULL, excludes TEXT NOT "
        "NULL, auth_secret_name TEXT NOT NULL, retry_deadline_ms INTEGER NOT NULL, state TEXT NOT "
        "NULL, cancel_requested INTEGER NOT NULL DEFAULT 0, source_revision TEXT NOT NULL "
        "DEFAULT '', listing_digest TEXT NOT NULL DEFAULT '', objects_total INTEGER NOT NULL "
        "DEFAULT 0, objects_done INTEGER NOT NULL DEFAULT 0, bytes_total INTEGER NOT NULL DEFAULT "
        "0, bytes_done INTEGER NOT NULL DEFAULT 0, bytes_fetched INTEGER NOT NULL DEFAULT 0, "
        "version TEXT NOT NULL DEFAULT '', unchanged INTEGER NOT NULL DEFAULT 0, error_code TEXT "
        "NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT "
        "NULL, updated_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL DEFAULT 0, finished_ms "
        "INTEGER NOT NULL DEFAULT 0, runs INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE sync_job_files(job_id TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT "
        "NULL, etag TEXT NOT NULL, digest TEXT NOT NULL, layout INTEGER NOT NULL, index_digest "
        "TEXT NOT NULL, chunks INTEGER NOT NULL, PRIMARY KEY(job_id, path));";
    auto db = sql::OpenSqlite(file, std::move(o));
    ASSERT_OK(db);
    ASSERT_OK((*db)->Write([](sql::Session& s) {
      return sql::ToStatus(
          s.Exec("INSERT INTO sync_jobs(id, source_uri, ns, volume, tag, includes, excludes, "
                 "auth_secret_name, retry_deadline_ms, state, created_ms, updated_ms) "
                 "VALUES('sync_00000000000000aa','hf://org/repo','a','v','','','','hf',1000,"
                 "'SYNCING',1,2)"));
    }));
  }
  auto store = SqliteSyncJobStore::Open(file);
  ASSERT_OK(store);
  auto old = (*store)->Get("sync_00000000000000aa");
  ASSERT_OK(old);
  EXPECT_EQ(old->secret_use, SecretUse::kLegacyJob);
  EXPECT_EQ(old->spec.auth_secret_name, "hf");
  EXPECT_EQ(old->spec.endpoint, "");
  EXPECT_EQ(old->state, SyncState::kSyncing);
  EXPECT_EQ(old->progress.objects_left_out, 0u);
  auto made = (*store)->Create(Spec(), {.secret_use = SecretUse::kJobNamespace});
  ASSERT_OK(made);
  EXPECT_EQ(made->job.secret_use, SecretUse::kJobNamespace);
  EXPECT_EQ(made->job.spec, Spec());
  // Resumed by an admin key for "*", the old job may use any secret.
  SyncJobSpec old_spec = old->spec;
  auto resumed = (*store)->Create(old_spec, {.secret_use = SecretUse::kAny, .resume = true});
  ASSERT_OK(resumed);
  EXPECT_FALSE(resumed->created);
  EXPECT_EQ(resumed->job.secret_use, SecretUse::kAny);
}

// The same on PostgreSQL: a job recorded at migration 0002 reads as kLegacyJob after the last.
TEST(PgSyncJobStore, AJobRecordedBeforeTheSecretUseMigrationIsLegacy) {
  std::string why;
  const std::string url = testutil::SharedPgServer::Get().NewDatabase(&why);
  if (url.empty()) GTEST_SKIP() << "no PostgreSQL: " << why;
  auto pool = sql::PgPool::Open({.url = url});
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Migrate("registry", PgMetadataMigrations().first(2)));
  ASSERT_OK((*pool)->Use("test")->Write([](sql::Session& s) {
    return sql::ToStatus(
        s.Exec("INSERT INTO sync_jobs(id, source_uri, ns, volume, tag, includes, excludes, "
               "auth_secret_name, retry_deadline_ms, state, created_ms, updated_ms) "
               "VALUES('sync_00000000000000aa','hf://org/repo','a','v','','','','hf',1000,"
               "'PENDING',1,2)"));
  }));
  ASSERT_OK(MigratePgMetadata(**pool));
  SqlSyncJobStore store((*pool)->Use("sync job store"));
  auto old = store.Get("sync_00000000000000aa");
  ASSERT_OK(old);
  EXPECT_EQ(old->secret_use, SecretUse::kLegacyJob);
  EXPECT_EQ(old->progress.objects_left_out, 0u);
  auto made = store.Create(Spec(), {.secret_use = SecretUse::kAny});
  ASSERT_OK(made);
  EXPECT_EQ(made->job.secret_use, SecretUse::kAny);
}

template <typename Backend>
class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    auto s = backend_.OpenSecrets();
    ASSERT_OK(s);
    secrets_ = std::move(*s);
  }
  Backend backend_;
  std::unique_ptr<SecretStore> secrets_;
};

TYPED_TEST_SUITE(SecretStoreTest, testutil::Backends, testutil::BackendName);

TYPED_TEST(SecretStoreTest, SealedBytesRoundTripAndAreReplacedListedAndRemoved) {
  std::string sealed;
  for (int i = 0; i < 256; ++i) sealed += static_cast<char>(i);  // every byte, NUL included
  ASSERT_OK(this->secrets_->Put("hf", sealed, {}));
  ASSERT_OK(this->secrets_->Put("aws.prod", "x", {}));
  auto got = this->secrets_->Get("hf");
  ASSERT_OK(got);
  EXPECT_EQ(*got, sealed);
  ASSERT_OK(this->secrets_->Put("hf", "y", {}));
  auto other = this->backend_.OpenSecrets();
  ASSERT_OK(other);
  auto replaced = (*other)->Get("hf");
  ASSERT_OK(replaced);
  EXPECT_EQ(*replaced, "y");
  auto list = this->secrets_->List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "aws.prod");
  EXPECT_EQ((*list)[1].name, "hf");
  EXPECT_LE((*list)[1].created_unix_ms, (*list)[1].updated_unix_ms);
  ASSERT_OK(this->secrets_->Remove("hf"));
  EXPECT_STATUS(this->secrets_->Remove("hf"), kNotFound, "secret \"hf\": not found");
  EXPECT_STATUS(this->secrets_->Get("hf"), kNotFound, "secret \"hf\": not found");
  EXPECT_STATUS(this->secrets_->Put("-bad", "x", {}), kInvalidArgument,
                "secret name \"-\" and 3 more characters (not shown)");
}

// A secret's namespaces are stored sorted and unique, read back by Info and List, and replaced
// with its value; a secret stored without any has none.
TYPED_TEST(SecretStoreTest, NamespacesAreStoredReadAndReplacedWithTheValue) {
  ASSERT_OK(this->secrets_->Put("hf", "v", {"b", "a", "b"}));
  ASSERT_OK(this->secrets_->Put("all", "v", {"*"}));
  ASSERT_OK(this->secrets_->Put("none", "v", {}));
  auto hf = this->secrets_->Info("hf");
  ASSERT_OK(hf);
  EXPECT_EQ(hf->name, "hf");
  EXPECT_EQ(hf->namespaces, (std::vector<std::string>{"a", "b"}));
  EXPECT_LE(hf->created_unix_ms, hf->updated_unix_ms);
  auto list = this->secrets_->List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "all");
  EXPECT_EQ((*list)[0].namespaces, (std::vector<std::string>{"*"}));
  EXPECT_EQ((*list)[1].namespaces, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*list)[2].name, "none");
  EXPECT_TRUE((*list)[2].namespaces.empty());
  // Replacing the value replaces the list: a set without namespaces leaves none.
  ASSERT_OK(this->secrets_->Put("hf", "w", {}));
  hf = this->secrets_->Info("hf");
  ASSERT_OK(hf);
  EXPECT_TRUE(hf->namespaces.empty());
  EXPECT_STATUS(this->secrets_->Info("nope"), kNotFound, "secret \"nope\": not found");
  auto both = this->secrets_->GetWithInfo("all");
  ASSERT_OK(both);
  EXPECT_EQ(both->first.namespaces, (std::vector<std::string>{"*"}));
  EXPECT_EQ(both->second, "v");
  EXPECT_STATUS(this->secrets_->GetWithInfo("nope"), kNotFound, "secret \"nope\": not found");
  EXPECT_STATUS(this->secrets_->Put("hf", "x", {"Team"}), kInvalidArgument, "namespace \"Team\"");
  EXPECT_STATUS(
      this->secrets_->Put("hf", "x", {"*", "a"}), kInvalidArgument,
      "namespaces: \"*\" (every namespace) stands alone; give it or a list of namespaces");
  hf = this->secrets_->Info("hf");
  ASSERT_OK(hf);
  EXPECT_TRUE(hf->namespaces.empty());
}

// A registry file made before secrets had namespaces (no column) is upgraded when opened: its
// secrets keep their values and have no namespaces, so only admin keys for "*" may use them.
TEST(SqliteSecretStore, AFileFromBeforeNamespacesGetsTheColumnAndNoneForItsSecrets) {
  testutil::TempDir dir("bdn_secret_upgrade");
  const auto file = dir.path() / "registry.db";
  {
    sql::SqliteOptions o;
    o.what = "old secret store";
    o.schema =
        "CREATE TABLE secrets(name TEXT PRIMARY KEY, sealed_hex TEXT NOT NULL, "
        "created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);";
    auto db = sql::OpenSqlite(file, std::move(o));
    ASSERT_OK(db);
    ASSERT_OK((*db)->Write([](sql::Session& s) {
      return sql::ToStatus(
          s.Exec("INSERT INTO secrets(name, sealed_hex, created_ms, updated_ms) "
                 "VALUES('old','6869',1,2)"));
    }));
  }
  auto store = SqliteSecretStore::Open(file);
  ASSERT_OK(store);
  auto info = (*store)->Info("old");
  ASSERT_OK(info);
  EXPECT_TRUE(info->namespaces.empty());
  EXPECT_EQ(info->created_unix_ms, 1);
  auto value = (*store)->Get("old");
  ASSERT_OK(value);
  EXPECT_EQ(*value, "hi");
  ASSERT_OK((*store)->Put("old", "hi", {"a"}));
  info = (*store)->Info("old");
  ASSERT_OK(info);
  EXPECT_EQ(info->namespaces, std::vector<std::string>{"a"});
}

// The same on PostgreSQL: a database at the first migration, with a secret, migrated to the
// last (0002_secret_namespaces) keeps the secret, with no namespaces.
TEST(PgSecretStore, ASecretStoredBeforeTheNamespacesMigrationHasNone) {
  std::string why;
  const std::string url = testutil::SharedPgServer::Get().NewDatabase(&why);
  if (url.empty()) GTEST_SKIP() << "no PostgreSQL: " << why;
  auto pool = sql::PgPool::Open({.url = url});
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Migrate("registry", PgMetadataMigrations().first(1)));
  ASSERT_OK((*pool)->Use("test")->Write([](sql::Session& s) {
    return sql::ToStatus(s.Exec(
        "INSERT INTO secrets(name, sealed_hex, created_ms, updated_ms) VALUES('old','6869',1,2)"));
  }));
  ASSERT_OK(MigratePgMetadata(**pool));
  SqlSecretStore store((*pool)->Use("secret store"));
  auto info = store.Info("old");
  ASSERT_OK(info);
  EXPECT_TRUE(info->namespaces.empty());
  auto value = store.Get("old");
  ASSERT_OK(value);
  EXPECT_EQ(*value, "hi");
}

}  // namespace
}  // namespace bdn
