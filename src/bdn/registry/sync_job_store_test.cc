// Tests for SqlSyncJobStore and SqlSecretStore on SQLite and PostgreSQL (one typed suite): the
// states of a job, its progress and files, the lookups a restarted or polling server uses, and
// leases: one runner per job across servers, released when its holder process dies.
#include "bdn/registry/sync_job_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

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
  ASSERT_OK(this->jobs_->SetSource(created->id, "abc123", D(9), 3, 300));
  ASSERT_OK(this->jobs_->SetProgress(created->id, {3, 2, 300, 200, 250}));
  auto again = this->jobs_->StartRun(created->id);  // a resumed run
  ASSERT_OK(again);
  EXPECT_EQ(again->runs, 2);
  EXPECT_EQ(again->started_unix_ms, run->started_unix_ms);
  EXPECT_EQ(again->source_revision, "abc123");
  EXPECT_EQ(again->listing_digest, D(9));
  EXPECT_EQ(again->progress.objects_done, 2u);
  EXPECT_EQ(again->progress.bytes_fetched, 250u);

  auto done = this->jobs_->Finish(created->id, SyncState::kReady, D(7), true, "", "");
  ASSERT_OK(done);
  EXPECT_EQ(done->state, SyncState::kReady);
  EXPECT_EQ(done->version, D(7));
  EXPECT_TRUE(done->unchanged);
  EXPECT_GT(done->finished_unix_ms, 0);
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
  auto counted = this->jobs_->CountUnfinished("w");
  ASSERT_OK(counted);
  EXPECT_EQ(2, *counted);
  counted = this->jobs_->CountUnfinished("other");
  ASSERT_OK(counted);
  EXPECT_EQ(0, *counted);
  auto found = this->jobs_->FindUnfinished(Spec("a"));
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, a->id);
  SyncJobSpec other = Spec("a");
  other.tag = "other";
  auto none = this->jobs_->FindUnfinished(other);
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
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
  EXPECT_STATUS(this->secrets_->Put("-bad", "x", {}), kInvalidArgument, "secret name \"-bad\"");
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
