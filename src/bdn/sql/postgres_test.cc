// Tests for PgPool and the Database over it, against a real PostgreSQL the test starts
// (testing/pg_server.h): URL redaction, parameter rewriting, migrations (once, also when several
// processes start at once; a newer schema refused), reconnection after a server restart, the
// clear error while the server is down, advisory locks that die with their connection, and text
// PostgreSQL cannot store.
#include "bdn/sql/postgres.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bdn/testing/pg_server.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::sql {
namespace {

TEST(RedactedDatabaseName, KeepsHostPortAndDatabaseOnly) {
  struct Case {
    const char* url;
    const char* shown;
  };
  for (const Case& c : {
           Case{"postgresql://alice:s3cret@db.example.com:6543/bdn?sslmode=require",
                "postgresql://db.example.com:6543/bdn"},
           Case{"postgres://db/bdn", "postgresql://db/bdn"},
           Case{"host=10.0.0.5 port=5432 dbname=meta user=bdn password=hunter2",
                "postgresql://10.0.0.5:5432/meta"},
           Case{"postgresql:///bdn?host=/var/run/postgresql",
                "postgresql:///bdn?host=/var/run/postgresql"},
       }) {
    auto r = RedactedDatabaseName(c.url);
    ASSERT_OK(r);
    EXPECT_EQ(*r, c.shown) << c.url;
  }
  auto bad = RedactedDatabaseName("postgresql://db/x?nosuchoption=1");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message(), "--db: invalid URI query parameter: \"nosuchoption\"");
  EXPECT_EQ(bad.error().message().find('\n'), std::string::npos);
  // From attacking helper 124: libpq's reasons quoted the password, or the whole URL.
  for (const auto& [url, message] : std::vector<std::pair<std::string, std::string>>{
           {"postgresql://u:SEK%zzRET@h/db", "--db: invalid percent-encoded token: \"***\""},
           {"postgresql://u:SEK%00RET@h/db",
            "--db: forbidden value %00 in percent-encoded value: \"***\""},
           {"host=h SEKRET", "--db: missing \"=\" after \"***\" in connection info string"},
           {"postgresql://u:SEKRET@h:SEK/db",
            "--db: its port must be a number (the value is not shown: it may hold a password)"},
           {"host=h port=SEKRET",
            "--db: its port must be a number (the value is not shown: it may hold a password)"}}) {
    auto r = RedactedDatabaseName(url);
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().message(), message) << url;
  }
  for (const std::string url :
       {"POSTGRESQL://u:SEKRET@h/db", " postgresql://u:SEKRET@h/db", "mysql://u:SEKRET@h/db",
        "postgresql//u:SEKRET@h/db", "postgresql:/u:SEKRET@h", "postgresql://u:SEKRET@[h/db"}) {
    auto r = RedactedDatabaseName(url);
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().message().find("SEKRET"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(*RedactedDatabaseName("host=a,b port=5432,5433 dbname=x"),
            "postgresql://a,b:5432,5433/x");
  // From attacking helper 125: a password pasted into host= or dbname=.
  EXPECT_EQ(RedactedDatabaseName("host=u:SEKRET@127.0.0.1 port=1").error().message(),
            "--db: a host must be a name or an address (the value is not shown: it may hold a "
            "password)");
  EXPECT_EQ(*RedactedDatabaseName("host=127.0.0.1 port=1 dbname=x?password=SEKRET"),
            "postgresql://127.0.0.1:1/***");
  EXPECT_EQ(*RedactedDatabaseName("postgres://127.0.0.1:1/u:SEKRET@x"),
            "postgresql://127.0.0.1:1/***");
  EXPECT_EQ(*RedactedDatabaseName("host=::1 dbname=bdn"), "postgresql://::1/bdn");
}

TEST(PostgresParameters, RewritesPlaceholdersOutsideQuotesAndComments) {
  EXPECT_EQ(PostgresParameters("SELECT a FROM t WHERE x=?1 AND y=?12"),
            "SELECT a FROM t WHERE x=$1 AND y=$12");
  EXPECT_EQ(PostgresParameters("SELECT '?1', \"?2\" -- ?3\nFROM t WHERE z=?4"),
            "SELECT '?1', \"?2\" -- ?3\nFROM t WHERE z=$4");
  EXPECT_EQ(PostgresParameters("SELECT ? , ?x"), "SELECT ? , ?x");
}

// One server for the whole binary; each test gets a database of its own.
class PostgresTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    server_ = testutil::PgServer::Start(&why).release();
    if (!server_) why_ = why;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!server_) GTEST_SKIP() << "no PostgreSQL: " << why_;
    auto admin = PgPool::Open({.url = server_->Url("postgres")});
    ASSERT_OK(admin);
    db_name_ = "t" + std::to_string(next_++);
    // CREATE DATABASE cannot run inside a transaction: Read with kStatement runs it bare.
    ASSERT_OK(admin.value()->Use("test")->Read(
        [&](Session& s) { return ToStatus(s.Exec("CREATE DATABASE " + db_name_)); },
        Consistency::kStatement));
  }
  Result<std::shared_ptr<PgPool>> Open(size_t connections = 4,
                                       std::chrono::milliseconds idle_in_transaction_timeout =
                                           PgOptions().idle_in_transaction_timeout) {
    PgOptions o;
    o.url = server_->Url(db_name_);
    o.max_connections = connections;
    o.idle_in_transaction_timeout = idle_in_transaction_timeout;
    return PgPool::Open(o);
  }

  static testutil::PgServer* server_;
  static std::string why_;
  static int next_;
  std::string db_name_;
};
testutil::PgServer* PostgresTest::server_ = nullptr;
std::string PostgresTest::why_;
int PostgresTest::next_ = 0;

const Migration kTwo[] = {
    {1, "first", "CREATE TABLE a(x BIGINT); INSERT INTO a VALUES (1);"},
    {2, "second", "ALTER TABLE a ADD COLUMN y TEXT NOT NULL DEFAULT 'y';"},
};

TEST_F(PostgresTest, MigrationsApplyOnceAndInOrder) {
  auto pool = Open();
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Migrate("demo", std::span(kTwo).first(1)));
  ASSERT_OK((*pool)->Migrate("demo", kTwo));
  ASSERT_OK((*pool)->Migrate("demo", kTwo));  // again: nothing to do
  auto db = (*pool)->Use("test");
  auto rows = ReadValue<Rows>(*db, [](Session& s) {
    return s.Query(
        "SELECT version, name FROM bdn_schema_migrations WHERE component='demo' "
        "ORDER BY version");
  });
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ(rows->Text(1, 1), "second");
  auto a = ReadValue<Rows>(*db, [](Session& s) { return s.Query("SELECT x, y FROM a"); });
  ASSERT_OK(a);
  ASSERT_EQ(a->size(), 1u);  // the INSERT of migration 1 ran once
  EXPECT_EQ(a->Text(0, 1), "y");
}

TEST_F(PostgresTest, ReplicasMigratingAtOnceApplyEachMigrationOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto pool = Open(1);
      if (pool && (*pool)->Migrate("demo", kTwo).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  auto pool = Open();
  ASSERT_OK(pool);
  auto n = ReadValue<Rows>(*(*pool)->Use("test"),
                           [](Session& s) { return s.Query("SELECT count(*) FROM a"); });
  ASSERT_OK(n);
  EXPECT_EQ(n->Int(0, 0), 1);
}

TEST_F(PostgresTest, ASchemaNewerThanTheBinaryIsRefused) {
  auto pool = Open();
  ASSERT_OK(pool);
  ASSERT_OK((*pool)->Migrate("demo", kTwo));
  Status s = (*pool)->Migrate("demo", std::span(kTwo).first(1));
  EXPECT_STATUS(s, kFailedPrecondition,
                "database postgresql://127.0.0.1:" + std::to_string(server_->port()) + "/" +
                    db_name_ +
                    ": the demo schema is at version 2, newer than this bdn knows (1); run a bdn "
                    "at least as new as the one that migrated it");
}

TEST_F(PostgresTest, AFailedMigrationIsRolledBackAndNamed) {
  auto pool = Open();
  ASSERT_OK(pool);
  const Migration bad[] = {{1, "broken", "CREATE TABLE b(x BIGINT); SELECT nosuchcolumn FROM b;"}};
  Status s = (*pool)->Migrate("demo", bad);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "database " + (*pool)->name() +
                             ": migration demo 1 (broken): column \"nosuchcolumn\" does not exist");
  auto b = ReadValue<Rows>(*(*pool)->Use("test"), [](Session& s) {
    return s.Query("SELECT count(*) FROM pg_tables WHERE tablename='b'");
  });
  ASSERT_OK(b);
  EXPECT_EQ(b->Int(0, 0), 0);
}

TEST_F(PostgresTest, ARestartedServerIsReconnectedToWithoutAnError) {
  auto pool = Open(2);
  ASSERT_OK(pool);
  auto db = (*pool)->Use("test");
  ASSERT_OK(db->Write([](Session& s) { return ToStatus(s.Exec("CREATE TABLE c(x BIGINT)")); }));
  // Both pooled connections in use once, so both are idle (and then dead) after the restart.
  std::string why;
  ASSERT_TRUE(server_->Restart(&why)) << why;
  ASSERT_OK(db->Write([](Session& s) { return ToStatus(s.Exec("INSERT INTO c VALUES (7)")); }));
  auto r = ReadValue<Rows>(*db, [](Session& s) { return s.Query("SELECT x FROM c"); });
  ASSERT_OK(r);
  EXPECT_EQ(r->Int(0, 0), 7);
}

TEST_F(PostgresTest, AServerThatIsDownGivesAClearRetryableError) {
  auto pool = Open();
  ASSERT_OK(pool);
  auto db = (*pool)->Use("registry");
  server_->Stop();
  Status s = db->Write([](Session& s) { return ToStatus(s.Exec("SELECT 1")); }, "commit");
  std::string why;
  ASSERT_TRUE(server_->Restart(&why)) << why;
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  const std::string prefix = "registry " + (*pool)->name() + ": commit: cannot connect: ";
  EXPECT_TRUE(s.message().starts_with(prefix)) << s.message();
  EXPECT_NE(s.message().find("Connection refused"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  // And once it is back, the same pool works.
  ASSERT_OK(db->Write([](Session& s) { return ToStatus(s.Exec("SELECT 1")); }));
}

TEST_F(PostgresTest, LocksAreExclusiveNamedAndDieWithTheirConnection) {
  auto a = Open();
  auto b = Open();
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto first = (*a)->Use("registry")->TryLock("gc");
  ASSERT_OK(first);
  ASSERT_NE(first->held, nullptr);
  auto second = (*b)->Use("registry")->TryLock("gc");
  ASSERT_OK(second);
  EXPECT_EQ(second->held, nullptr);
  EXPECT_EQ(
      second->holder, "bdn pid " + std::to_string(::getpid()) + " on " + [] {
        char host[256] = {0};
        ::gethostname(host, sizeof host - 1);
        return std::string(host);
      }());
  auto other = (*b)->Use("registry")->TryLock("gc-other");
  ASSERT_OK(other);
  EXPECT_NE(other->held, nullptr);
  first->held.reset();  // closes its connection
  auto third = (*b)->Use("registry")->TryLock("gc");
  ASSERT_OK(third);
  EXPECT_NE(third->held, nullptr);
  auto bad = (*b)->Use("registry")->TryLock("no spaces");
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
}

// A released lock is free to another session at once, every time: closing the connection left it
// held until the server's backend had exited (SyncJobStoreTest's lease handover failed under
// load).
TEST_F(PostgresTest, AReleasedLockIsFreeToAnotherSessionAtOnce) {
  auto a = Open();
  auto b = Open();
  ASSERT_OK(a);
  ASSERT_OK(b);
  for (int i = 0; i < 100; ++i) {
    auto mine = (*a)->Use("registry")->TryLock("lease");
    ASSERT_OK(mine);
    ASSERT_NE(mine->held, nullptr) << "round " << i;
    mine->held.reset();
    auto theirs = (*b)->Use("registry")->TryLock("lease");
    ASSERT_OK(theirs);
    ASSERT_NE(theirs->held, nullptr) << "round " << i << ": still held after its release";
  }
}

// Held()'s answer, or a failure naming its error.
bool Unwrap(Result<bool> held) {
  EXPECT_OK(held);
  return held && *held;
}

// A lock whose connection ended (its backend terminated here, a server restart likewise) is gone
// from the server, and another holder may take it: its holder learns that from Held().
TEST_F(PostgresTest, ALockWhoseConnectionEndedIsNoLongerHeld) {
  auto a = Open();
  auto b = Open();
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto first = (*a)->Use("sync jobs")->TryLock("sync-job1");
  ASSERT_OK(first);
  ASSERT_NE(first->held, nullptr);
  EXPECT_TRUE(Unwrap(first->held->Held()));
  EXPECT_TRUE(Unwrap(first->held->Held()));
  auto db = (*b)->Use("sync jobs");
  auto ended = ReadValue<std::string>(*db, [](Session& s) -> Result<std::string> {
    BDN_ASSIGN_OR_RETURN(
        Rows r, s.Query("SELECT pg_terminate_backend(l.pid, 5000)::text FROM pg_locks l WHERE "
                        "l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND "
                        "((l.classid::bigint << 32) | l.objid::bigint) = "
                        "hashtextextended('bdn/sync-job1', 0)"));
    return r.Text(0, 0);
  });
  ASSERT_OK(ended);
  EXPECT_EQ("true", *ended);
  auto taken = db->TryLock("sync-job1");
  ASSERT_OK(taken);
  EXPECT_NE(taken->held, nullptr);
  EXPECT_FALSE(Unwrap(first->held->Held()));
  EXPECT_FALSE(Unwrap(first->held->Held()));
  EXPECT_TRUE(Unwrap(taken->held->Held()));
  // A lock taken by Lock is checked the same way.
  auto waited = db->Lock("other", Database::LockMode::kExclusive, std::chrono::seconds(1));
  ASSERT_OK(waited);
  EXPECT_TRUE(Unwrap((*waited)->Held()));
}

TEST_F(PostgresTest, SharedLocksCoexistAndKeepAnExclusiveOneWaitingUntilTheyEnd) {
  auto a = Open();
  auto b = Open();
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto da = (*a)->Use("pack catalog");
  auto db = (*b)->Use("pack catalog");
  using Mode = Database::LockMode;
  auto shared_a = da->Lock("sweep", Mode::kShared, std::chrono::seconds(5));
  ASSERT_OK(shared_a);
  auto shared_b = db->Lock("sweep", Mode::kShared, std::chrono::seconds(5));
  ASSERT_OK(shared_b);
  auto exclusive = db->Lock("sweep", Mode::kExclusive, std::chrono::milliseconds(200));
  ASSERT_FALSE(exclusive);
  EXPECT_EQ(exclusive.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(exclusive.error().message(),
            "pack catalog " + db->name() + ": lock sweep: not granted within 200 ms");
  // Another name is another lock; TryLock's space is the same.
  EXPECT_OK(db->Lock("sweep-other", Mode::kExclusive, std::chrono::milliseconds(200)));
  auto attempt = db->TryLock("sweep");
  ASSERT_OK(attempt);
  EXPECT_EQ(attempt->held, nullptr);
  // An exclusive waiter is granted once the last shared holder ends (its connection closes).
  shared_a->reset();
  std::atomic<bool> released{false};
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = true;
    shared_b->reset();
  });
  auto granted = da->Lock("sweep", Mode::kExclusive, std::chrono::seconds(10));
  EXPECT_TRUE(released.load());
  release.join();
  ASSERT_OK(granted);
  auto shared_late = db->Lock("sweep", Mode::kShared, std::chrono::milliseconds(100));
  EXPECT_EQ(shared_late.error().code(), StatusCode::kUnavailable);
  granted->reset();
  EXPECT_OK(db->Lock("sweep", Mode::kShared, std::chrono::milliseconds(1000)));
  EXPECT_EQ(db->Lock("no spaces", Mode::kShared, std::chrono::seconds(1)).error().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(PostgresTest, TextThatIsNotUtf8IsRefusedByName) {
  auto pool = Open();
  ASSERT_OK(pool);
  auto db = (*pool)->Use("sync job store");
  Status s =
      db->Write([](Session& s) { return ToStatus(s.Query("SELECT ?1", {std::string("caf\xe9")})); },
                "record file");
  EXPECT_STATUS(s, kInvalidArgument,
                "sync job store " + (*pool)->name() +
                    ": record file: text is not valid UTF-8 without NUL bytes (PostgreSQL stores "
                    "text as UTF-8)");
}

TEST_F(PostgresTest, SerializationFailuresAreRetried) {
  auto pool = Open(8);
  ASSERT_OK(pool);
  auto db = (*pool)->Use("test");
  ASSERT_OK(db->Write([](Session& s) -> Status {
    BDN_RETURN_IF_ERROR(ToStatus(s.Exec("CREATE TABLE n(id BIGINT PRIMARY KEY, v BIGINT)")));
    return ToStatus(s.Exec("INSERT INTO n VALUES (1, 0)"));
  }));
  // Each body reads, then writes what it read plus one, under SERIALIZABLE: the losers of each
  // race fail with 40001 and run again, so no increment is lost.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        Status s = db->Write([](Session& s) -> Status {
          BDN_RETURN_IF_ERROR(ToStatus(s.Exec("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")));
          BDN_ASSIGN_OR_RETURN(Rows r, s.Query("SELECT v FROM n WHERE id=1"));
          return ToStatus(s.Exec("UPDATE n SET v=?1 WHERE id=1", {r.Int(0, 0) + 1}));
        });
        if (!s.ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto r = ReadValue<Rows>(*db, [](Session& s) { return s.Query("SELECT v FROM n"); });
  ASSERT_OK(r);
  EXPECT_EQ(r->Int(0, 0), 40);
}

// A writer that stops in the middle of its transaction (a process stopped with SIGSTOP, a
// frozen VM; here: a body that sleeps 3 s) holds the row it updated only until the server ends
// its session (idle_in_transaction_session_timeout, 300 ms here): another writer of the row goes
// on while the first still sleeps. The stalled writer, on waking, finds its session ended and
// runs its body again: it stalled between two statements, or after its last one, before COMMIT
// (the server's "terminating connection due to idle-in-transaction timeout" says nothing was
// applied, so that is no "may or may not have been applied"). Each increment lands once.
TEST_F(PostgresTest, AWriterStalledInItsTransactionLetsOthersGoOnAndRunsAgain) {
  using std::chrono::milliseconds;
  auto stalling = Open(4, milliseconds(300));
  ASSERT_OK(stalling);
  auto other = Open();
  ASSERT_OK(other);
  auto db = (*stalling)->Use("registry");
  auto r = ReadValue<Rows>(
      *db, [](Session& s) { return s.Query("SHOW idle_in_transaction_session_timeout"); });
  ASSERT_OK(r);
  EXPECT_EQ(r->Text(0, 0), "300ms");
  ASSERT_OK(db->Write([](Session& s) -> Status {
    BDN_RETURN_IF_ERROR(ToStatus(s.Exec("CREATE TABLE n(id BIGINT PRIMARY KEY, v BIGINT)")));
    return ToStatus(s.Exec("INSERT INTO n VALUES (1, 0)"));
  }));
  for (const bool before_commit : {false, true}) {
    SCOPED_TRACE(before_commit ? "stalled before COMMIT" : "stalled between statements");
    std::atomic<int> runs{0};
    std::atomic<bool> locked{false}, woke{false};
    Status stalled;
    std::thread a([&] {
      stalled = db->Write(
          [&](Session& s) -> Status {
            const bool first = ++runs == 1;
            BDN_RETURN_IF_ERROR(ToStatus(s.Exec("UPDATE n SET v = v + 1 WHERE id = 1")));
            if (first) {
              locked = true;
              std::this_thread::sleep_for(std::chrono::seconds(3));
              woke = true;
            }
            if (before_commit) return Status::Ok();
            return ToStatus(s.Exec("UPDATE n SET v = v + 10 WHERE id = 1"));
          },
          "commit");
    });
    while (!locked.load()) std::this_thread::sleep_for(milliseconds(1));
    Status s = (*other)->Use("registry")->Write([](Session& s) {
      return ToStatus(s.Exec("UPDATE n SET v = v + 100 WHERE id = 1"));
    });
    const bool went_on_while_stalled = !woke.load();
    a.join();
    EXPECT_OK(s);
    EXPECT_TRUE(went_on_while_stalled) << "the other writer waited for the stalled one";
    EXPECT_OK(stalled);
    EXPECT_EQ(runs.load(), 2);
  }
  r = ReadValue<Rows>(*db, [](Session& s) { return s.Query("SELECT v FROM n"); });
  ASSERT_OK(r);
  EXPECT_EQ(r->Int(0, 0), 111 + 101);
}

// A server stopping while the database does not answer (here: statements and a lock that take
// 30 s) ends its calls with PgPool::Shutdown: the statement under way, a lock wait, a caller
// waiting for a connection, and every call after it, each within a second.
TEST_F(PostgresTest, ShutdownEndsCallsThatWaitOnTheServer) {
  auto pool = Open(/*connections=*/1);
  ASSERT_OK(pool);
  auto other = Open();
  ASSERT_OK(other);
  auto db = (*pool)->Use("registry");
  using Mode = Database::LockMode;
  auto held = (*other)->Use("registry")->Lock("gc", Mode::kExclusive, std::chrono::seconds(5));
  ASSERT_OK(held);
  const std::string prefix = "registry " + (*pool)->name() + ": ";
  std::atomic<int> started{0};
  Status sleeper, waiter, locker;
  auto sleep = [&](Status* out) {
    ++started;
    *out = db->Read([](Session& s) { return ToStatus(s.Query("SELECT pg_sleep(30)")); },
                    Consistency::kStatement, "commit");
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a(sleep, &sleeper);
  while (started.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its statement is sent
  std::thread b(sleep, &waiter);  // waits for the pool's one connection
  std::thread c([&] {
    ++started;
    locker = ToStatus(db->Lock("gc", Mode::kExclusive, std::chrono::seconds(30)));
  });
  while (started.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*pool)->Shutdown();
  a.join();
  b.join();
  c.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  for (const Status* s : {&sleeper, &waiter}) {
    EXPECT_EQ(s->code(), StatusCode::kUnavailable);
    EXPECT_EQ(s->message(), prefix + "commit: shutting down");
    EXPECT_EQ(s->reason(), kShuttingDown);
  }
  EXPECT_EQ(locker.message(), prefix + "lock gc: shutting down");
  EXPECT_EQ(locker.reason(), kShuttingDown);
  Status later = db->Write([](Session& s) { return ToStatus(s.Exec("SELECT 1")); }, "tag");
  EXPECT_EQ(later.message(), prefix + "tag: shutting down");
  // The other pool (another server's, say) goes on.
  EXPECT_OK(
      (*other)->Use("registry")->Write([](Session& s) { return ToStatus(s.Exec("SELECT 1")); }));
}

}  // namespace
}  // namespace bdn::sql
