#include "bdn/remote/claim_journal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bdn/testing/test_util.h"

namespace bdn::remote {
namespace {

const std::string kServer = "http://127.0.0.1:8440";

// A process that has exited: its pid and the start time it had.
ProcessIdentity DeadChild() {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ProcessIdentity me = SelfIdentity();
    (void)!::write(fds[1], &me.start, sizeof me.start);
    ::_exit(0);
  }
  ProcessIdentity id = SelfIdentity();
  id.pid = pid;
  EXPECT_EQ(::read(fds[0], &id.start, sizeof id.start), static_cast<ssize_t>(sizeof id.start));
  ::close(fds[0]);
  ::close(fds[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return id;
}

void WriteRecord(const std::filesystem::path& file, const ProcessIdentity& id,
                 const std::string& key) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << nlohmann::json{
      {"boot", id.boot},
      {"pid", id.pid},
      {"start", id.start},
      {"key", key}}.dump();
}

TEST(ClaimJournal, StillRunningTellsDeadAndReusedPidsFromLiveOnes) {
  ProcessIdentity self = SelfIdentity();
  ASSERT_FALSE(self.boot.empty());
  ASSERT_NE(self.start, 0u);
  EXPECT_TRUE(StillRunning(self));
  EXPECT_FALSE(StillRunning(DeadChild()));
  ProcessIdentity reused = self;  // this pid, but a process that started at another time
  reused.start += 1;
  EXPECT_FALSE(StillRunning(reused));
  ProcessIdentity other_boot = DeadChild();  // another boot: maybe another machine's process
  other_boot.boot = "00000000-0000-0000-0000-000000000000";
  EXPECT_TRUE(StillRunning(other_boot));
}

TEST(ClaimJournal, ADeadHoldersKeyIsTakenOverAndALiveHoldersNever) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  const auto file = journal.FileOf(kServer, "w/model");
  EXPECT_EQ(file.filename().string().size(), 32u);
  EXPECT_NE(journal.FileOf(kServer, "w/other"), file);
  EXPECT_NE(journal.FileOf("http://127.0.0.1:8441", "w/model"), file);

  // KeyFor: Begin, the lock released at once.
  bool taken = true;
  auto KeyFor = [&](const std::string& volume, bool* taken_over = nullptr) {
    ClaimJournal::Attempt a = journal.Begin(kServer, volume);
    EXPECT_TRUE(a.lock.valid());
    if (taken_over) *taken_over = a.taken_over;
    return a.key;
  };
  // No record: a fresh key each time.
  std::string fresh = KeyFor("w/model", &taken);
  EXPECT_FALSE(taken);
  EXPECT_FALSE(fresh.empty());
  EXPECT_NE(KeyFor("w/model"), fresh);

  // This (live) process's record: never reused.
  journal.Record(kServer, "w/model", "key-live");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(file.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(KeyFor("w/model", &taken), "key-live");
  EXPECT_FALSE(taken);

  // A dead process's record: its key.
  WriteRecord(file, DeadChild(), "key-dead");
  EXPECT_EQ(KeyFor("w/model", &taken), "key-dead");
  EXPECT_TRUE(taken);
  EXPECT_NE(KeyFor("w/other"), "key-dead");  // only for its own volume

  // Another boot's record, a malformed one, one without a key: fresh keys.
  ProcessIdentity other_boot = DeadChild();
  other_boot.boot = "00000000-0000-0000-0000-000000000000";
  WriteRecord(file, other_boot, "key-other-boot");
  EXPECT_NE(KeyFor("w/model"), "key-other-boot");
  std::ofstream(file) << "{\"pid\": ";
  EXPECT_FALSE(KeyFor("w/model", &taken).empty());
  EXPECT_FALSE(taken);
  WriteRecord(file, DeadChild(), "");
  EXPECT_FALSE(KeyFor("w/model", &taken).empty());
  EXPECT_FALSE(taken);
}

// From attacking helper 122: a push that found another live push's record replaced it with its
// own (and removed it when refused), so a re-push after the holder was killed waited out the claim.
TEST(ClaimJournal, AnAttemptSaysWhenTheRecordIsALiveProcesss) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ProcessIdentity me = SelfIdentity();
    (void)!::write(fds[1], &me.start, sizeof me.start);
    ::sleep(30);
    ::_exit(0);
  }
  ProcessIdentity live = SelfIdentity();
  live.pid = pid;
  ASSERT_EQ(::read(fds[0], &live.start, sizeof live.start),
            static_cast<ssize_t>(sizeof live.start));
  ::close(fds[0]);
  ::close(fds[1]);
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  WriteRecord(journal.FileOf(kServer, "w/model"), live, "key-live");
  ClaimJournal::Attempt a = journal.Begin(kServer, "w/model");
  EXPECT_TRUE(a.live_holder);
  EXPECT_FALSE(a.taken_over);
  EXPECT_NE(a.key, "key-live");
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  a = ClaimJournal::Attempt();
  a = journal.Begin(kServer, "w/model");  // gone now: taken over
  EXPECT_FALSE(a.live_holder);
  EXPECT_TRUE(a.taken_over);
  EXPECT_EQ(a.key, "key-live");
}

TEST(ClaimJournal, ForgetRemovesOnlyThisProcesssOwnRecord) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  const auto file = journal.FileOf(kServer, "w/model");
  journal.Record(kServer, "w/model", "mine");
  journal.Forget(kServer, "w/model", "not-mine");
  EXPECT_TRUE(std::filesystem::exists(file));
  journal.Forget(kServer, "w/model", "mine");
  EXPECT_FALSE(std::filesystem::exists(file));
  // A record another process wrote (a later push took the claim over): left alone.
  WriteRecord(file, DeadChild(), "mine");
  journal.Forget(kServer, "w/model", "mine");
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(file.parent_path()),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left behind
}

// From an attacking helper: push-claims/ kept a lock file for every volume ever pushed.
TEST(ClaimJournal, AFinishedPushLeavesNoFileBehind) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  for (const std::string volume : {"w/a", "w/b", "w/c"}) {
    std::optional<ClaimJournal::Attempt> a = journal.Begin(kServer, volume);
    ASSERT_TRUE(a->lock.valid());
    journal.Record(kServer, volume, a->key);
    const std::string key = a->key;
    a.reset();
    journal.Forget(kServer, volume, key);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "push-claims"));
  // While another attempt holds the lock, the lock file stays (the record goes).
  ClaimJournal::Attempt held = journal.Begin(kServer, "w/a");
  journal.Record(kServer, "w/a", "k");
  journal.Forget(kServer, "w/a", "k");
  EXPECT_FALSE(std::filesystem::exists(journal.FileOf(kServer, "w/a")));
  EXPECT_TRUE(std::filesystem::exists(journal.FileOf(kServer, "w/a").string() + ".lock"));
}

// An attempt that waited on a lock file removed meanwhile (by Forget, under the lock) locks the
// file at the path now, so that two attempts never hold "the" lock at once.
TEST(ClaimJournal, AnAttemptWhoseLockFileWasRemovedLocksTheNewOne) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  const std::string lock = journal.FileOf(kServer, "w/model").string() + ".lock";
  std::optional<ClaimJournal::Attempt> first = journal.Begin(kServer, "w/model");
  ASSERT_TRUE(first->lock.valid());
  ClaimJournal::Attempt second;
  std::thread t([&] { second = journal.Begin(kServer, "w/model"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(::unlink(lock.c_str()), 0);  // as Forget does, holding the lock
  first.reset();
  t.join();
  ASSERT_TRUE(second.lock.valid());
  struct stat held {
  }, there{};
  ASSERT_EQ(::fstat(second.lock.get(), &held), 0);
  ASSERT_EQ(::stat(lock.c_str(), &there), 0);
  EXPECT_EQ(held.st_ino, there.st_ino);
  // A third attempt now waits for the second: they hold one lock.
  std::atomic<bool> third_done{false};
  std::thread t3([&] {
    ClaimJournal::Attempt third = journal.Begin(kServer, "w/model");
    third_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(third_done);
  second = ClaimJournal::Attempt();
  t3.join();
}

TEST(ClaimJournal, AnUnwritableDirectoryFallsBackToFreshKeys) {
  testutil::TempDir dir;
  std::ofstream(dir.path() / "file") << "in the way";
  ClaimJournal journal(dir.path() / "file" / "push-claims");
  journal.Record(kServer, "w/model", "k");  // no error, nothing written
  ClaimJournal::Attempt a = journal.Begin(kServer, "w/model");
  EXPECT_FALSE(a.lock.valid());
  EXPECT_FALSE(a.key.empty());
  EXPECT_FALSE(a.taken_over);
}

// Of two pushes that find the same dead holder, the second waits for the first's record and
// then finds its holder alive: only one takes the claim over.
TEST(ClaimJournal, OnlyOneOfTwoAttemptsTakesADeadHoldersClaimOver) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  WriteRecord(journal.FileOf(kServer, "w/model"), DeadChild(), "key-dead");
  std::optional<ClaimJournal::Attempt> first = journal.Begin(kServer, "w/model");
  ASSERT_TRUE(first->taken_over);
  std::atomic<bool> second_done{false};
  ClaimJournal::Attempt second;
  std::thread t([&] {
    second = journal.Begin(kServer, "w/model");  // its own open file: flock excludes it
    second_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(second_done) << "the second attempt did not wait for the first";
  journal.Record(kServer, "w/model", first->key);  // the first claimed: this process holds it
  first.reset();
  t.join();
  EXPECT_FALSE(second.taken_over);
  EXPECT_NE(second.key, "key-dead");
}

// Only a regular file is a record: a FIFO (whose open would wait for a writer), a symlink or a
// device is ignored at once.
TEST(ClaimJournal, AFifoOrSymlinkAtTheRecordPathIsNoRecord) {
  testutil::TempDir dir;
  ClaimJournal journal(dir.path() / "push-claims");
  const auto file = journal.FileOf(kServer, "w/model");
  std::filesystem::create_directories(file.parent_path());
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  ClaimJournal::Attempt a = journal.Begin(kServer, "w/model");  // returns: no writer needed
  EXPECT_FALSE(a.taken_over);
  EXPECT_FALSE(a.key.empty());
  a = ClaimJournal::Attempt();
  journal.Forget(kServer, "w/model", "k");  // does not block either
  std::filesystem::remove(file);
  const auto target = dir.path() / "elsewhere";
  WriteRecord(target, DeadChild(), "key-dead");
  std::filesystem::create_symlink(target, file);
  a = journal.Begin(kServer, "w/model");
  EXPECT_FALSE(a.taken_over);
  EXPECT_NE(a.key, "key-dead");
}

}  // namespace
}  // namespace bdn::remote
