// The mount when its store misbehaves: reads fail with EIO within the read deadline and never
// hang, metadata keeps answering at once, cached bytes stay readable, and reads recover by
// themselves once the store is back.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bdn/mount/fuse_mount.h"
#include "bdn/mount/mount_test_support.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;
using namespace mount_testing;  // NOLINT: test helpers
using Clock = std::chrono::steady_clock;
using Mode = FaultyStore::Mode;

constexpr auto kReadTimeout = std::chrono::seconds(3);
// Allowed beyond the deadline: scheduling, the kernel round trip, a loaded test machine.
constexpr auto kSlack = std::chrono::milliseconds(3000);
constexpr size_t kPiece = 64 << 10;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class MountFaultTest : public FaultyStoreMountTest {
 protected:
  void SetUp() override {
    FaultyStoreMountTest::SetUp();
    if (IsSkipped()) return;
    VersionBuilder b(*store_);
    b.Dir("a");
    b.File("a/warm.bin", RandomBytes(600'000, 31), 0644, {kPiece});
    b.Dir("b");
    b.File("b/cold.bin", RandomBytes(600'000, 32), 0644, {kPiece});
    b.File("b/cold2.bin", RandomBytes(600'000, 33), 0644, {kPiece});
    b.Dir("c");
    for (int i = 0; i < 20; ++i) b.File("c/f" + std::to_string(i), "small " + std::to_string(i));
    b.Symlink("link", "a/warm.bin");
    digest_ = b.Finish();
    contents_ = b.contents;
  }

  // `prefetch_bytes` 0: the store sees only the chunks reads ask for.
  void Mount(bool prefetch_indexes = true, uint64_t prefetch_bytes = 64ull << 20) {
    auto view = VersionView::Open(store_, digest_);
    ASSERT_TRUE(view.has_value()) << view.error().ToString();
    MountOptions options;
    options.read_timeout = kReadTimeout;
    options.prefetch_indexes = prefetch_indexes;
    options.prefetch_bytes = prefetch_bytes;
    Status s = StartMount(*view, options);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // The manifest, then (in the background) the three chunk indexes: let the loader finish so
    // that it does not take a fault meant for a test's read. Counting Gets that have returned,
    // not started: a fault set while the last index was still being fetched failed it (seen
    // under load), and the loader installs an index right after its Get returns.
    for (int i = 0; prefetch_indexes && i < 1000 && store_->gets_done < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (prefetch_indexes) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // A mount that fetches only what reads ask for, with b/cold.bin's chunk index loaded (opened
  // once) and b/cold2.bin's not.
  void MountWithColdIndexLoaded() {
    Mount(/*prefetch_indexes=*/false, /*prefetch_bytes=*/0);
    ASSERT_TRUE(OpenAndClose("b/cold.bin"));
  }

  // Opens and closes `path` in the mount (an open loads the file's chunk index).
  bool OpenAndClose(const std::string& path) {
    int fd = ::open((mountpoint_ / path).c_str(), O_RDONLY);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }

  // Metadata requests the kernel has not cached yet: each reaches the daemon. Returns how long
  // they took in all.
  Clock::duration TimeMetadata(int round) {
    auto t0 = Clock::now();
    struct stat st;
    EXPECT_EQ(::stat(mountpoint_.c_str(), &st), 0);
    EXPECT_EQ(::stat((mountpoint_ / ("c/f" + std::to_string(round))).c_str(), &st), 0);
    EXPECT_EQ(st.st_size, static_cast<off_t>(contents_.at("c/f" + std::to_string(round)).size()));
    EXPECT_EQ(::stat((mountpoint_ / "b/cold.bin").c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 600'000);
    EXPECT_EQ(ListDir(mountpoint_ / "c").size(), 22u);
    char target[64];
    EXPECT_EQ(::readlink((mountpoint_ / "link").c_str(), target, sizeof target), 10);
    errno = 0;
    EXPECT_NE(::stat((mountpoint_ / ("c/absent" + std::to_string(round))).c_str(), &st), 0);
    EXPECT_EQ(errno, ENOENT);
    return Clock::now() - t0;
  }

  Digest digest_;
  std::map<std::string, std::string> contents_;
};

TEST_F(MountFaultTest, ReadOfAnUnreachableChunkFailsWithinTheDeadlineAndMetadataAnswers) {
  Mount();
  int err = 0;
  // warm.bin is read (and kept in memory); cold.bin only opened, so its index is loaded.
  ASSERT_EQ(DirectRead(mountpoint_ / "a/warm.bin", 0, 600'000, &err), contents_.at("a/warm.bin"));
  ASSERT_TRUE(OpenAndClose("b/cold.bin"));  // loads its chunk index

  store_->set_mode(Mode::kHang);
  // Many reads hang at once, more than libfuse has worker threads.
  std::vector<std::thread> readers;
  std::vector<int> errs(12, 0);
  std::vector<double> took(12, 0);
  for (int i = 0; i < 12; ++i) {
    readers.emplace_back([&, i] {
      auto t0 = Clock::now();
      const char* file = i % 2 ? "b/cold.bin" : "b/cold2.bin";
      DirectRead(mountpoint_ / file, (i / 2) * kPiece, 4096, &errs[i]);
      took[i] = Seconds(Clock::now() - t0);
    });
  }
  ASSERT_TRUE(store_->WaitHanging(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  // Meanwhile ls, stat and readlink answer at once, and cached bytes are served.
  EXPECT_LT(Seconds(TimeMetadata(1)), 1.0);
  auto t0 = Clock::now();
  EXPECT_EQ(DirectRead(mountpoint_ / "a/warm.bin", 70'000, 100'000, &err),
            contents_.at("a/warm.bin").substr(70'000, 100'000));
  EXPECT_EQ(err, 0);
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);

  for (auto& t : readers) t.join();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(errs[i], EIO) << "reader " << i;
    EXPECT_LT(took[i], Seconds(kReadTimeout + kSlack)) << "reader " << i;
    EXPECT_GT(took[i], Seconds(kReadTimeout) - 0.5) << "reader " << i;
  }
  EXPECT_LT(Seconds(TimeMetadata(2)), 1.0);

  // The store recovers: the same reads work, with no remount.
  store_->set_mode(Mode::kNormal);
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold.bin", 0, 600'000, &err), contents_.at("b/cold.bin"));
  EXPECT_EQ(err, 0);
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold2.bin", 0, 600'000, &err), contents_.at("b/cold2.bin"));
  EXPECT_EQ(err, 0);
}

TEST_F(MountFaultTest, OpenThatNeedsAnUnreachableChunkIndexFailsWithinTheDeadline) {
  Mount(/*prefetch_indexes=*/false);
  store_->set_mode(Mode::kHang);
  auto t0 = Clock::now();
  int fd = ::open((mountpoint_ / "b/cold.bin").c_str(), O_RDONLY);
  int err = errno;
  double took = Seconds(Clock::now() - t0);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(err, EIO);
  EXPECT_LT(took, Seconds(kReadTimeout + kSlack));
  EXPECT_LT(Seconds(TimeMetadata(3)), 1.0);
  // Files with one chunk need no index: they open, and their read fails in time.
  fd = ::open((mountpoint_ / "c/f4").c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);

  store_->set_mode(Mode::kNormal);
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold.bin", 0, 600'000, &err), contents_.at("b/cold.bin"));
  EXPECT_EQ(err, 0);
}

// Runs `fn` in a forked child, which then exits 0. `fn` may make only async-signal-safe calls
// (this process has threads).
template <typename F>
pid_t Spawn(F fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(0);
  }
  return pid;
}

// Whether child `pid` ended (and was reaped) within `limit`; polls, no fixed sleep.
bool EndsWithin(pid_t pid, Clock::duration limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

alignas(4096) char g_direct_buffer[kPiece];

// A reader killed with SIGKILL cannot exit before its FUSE request is answered; the kernel
// interrupts the request, and the daemon must answer at once instead of at the read deadline.
TEST_F(MountFaultTest, KilledReaderAndOpenerEndAtOnceWhileTheStoreHangs) {
  ASSERT_NO_FATAL_FAILURE(MountWithColdIndexLoaded());
  store_->set_mode(Mode::kHang);
  const std::string cold = (mountpoint_ / "b/cold.bin").string();
  const std::string cold2 = (mountpoint_ / "b/cold2.bin").string();
  pid_t reader = Spawn([&] {
    int f = ::open(cold.c_str(), O_RDONLY | O_DIRECT);
    (void)::pread(f, g_direct_buffer, kPiece, 3 * kPiece);
  });
  pid_t opener = Spawn([&] { (void)::open(cold2.c_str(), O_RDONLY); });  // index not loaded
  ASSERT_GT(reader, 0);
  ASSERT_GT(opener, 0);
  // The read's chunk and the open's chunk index: both requests wait on the store.
  ASSERT_TRUE(store_->WaitHanging(2));
  EXPECT_FALSE(EndsWithin(reader, std::chrono::milliseconds(100)));
  ::kill(reader, SIGKILL);
  ::kill(opener, SIGKILL);
  EXPECT_TRUE(EndsWithin(reader, std::chrono::seconds(1))) << "killed reader still there";
  EXPECT_TRUE(EndsWithin(opener, std::chrono::seconds(1))) << "killed opener still there";
  EXPECT_LT(Seconds(TimeMetadata(4)), 1.0);

  // The fetches were left to finish: once the store is back, both files read.
  store_->set_mode(Mode::kNormal);
  int err = 0;
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold.bin", 0, 600'000, &err), contents_.at("b/cold.bin"));
  EXPECT_EQ(err, 0);
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold2.bin", 0, 600'000, &err), contents_.at("b/cold2.bin"));
  EXPECT_EQ(err, 0);
}

// More waiting requests than the mount has threads to wait on: a killed reader whose request is
// still queued behind them is answered at once too, not when a waiting thread frees up.
TEST_F(MountFaultTest, AKilledReaderQueuedBehindOtherWaitsEndsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(MountWithColdIndexLoaded());
  store_->set_mode(Mode::kHang);
  // 80 readers of one chunk: each request waits on its own thread (the mount has 64).
  std::vector<std::thread> readers;
  std::vector<int> errs(80, 0);
  for (size_t i = 0; i < errs.size(); ++i) {
    readers.emplace_back([&, i] { DirectRead(mountpoint_ / "b/cold.bin", 0, 4096, &errs[i]); });
  }
  ASSERT_TRUE(store_->WaitHanging(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them all queue up
  const std::string cold = (mountpoint_ / "b/cold.bin").string();
  pid_t reader = Spawn([&] {
    int f = ::open(cold.c_str(), O_RDONLY | O_DIRECT);
    (void)::pread(f, g_direct_buffer, kPiece, 0);
  });
  ASSERT_GT(reader, 0);
  EXPECT_FALSE(EndsWithin(reader, std::chrono::milliseconds(200)));
  auto t0 = Clock::now();
  ::kill(reader, SIGKILL);
  EXPECT_TRUE(EndsWithin(reader, std::chrono::seconds(1))) << "killed reader still there";
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);
  store_->set_mode(Mode::kNormal);
  for (auto& t : readers) t.join();
  for (size_t i = 0; i < errs.size(); ++i) EXPECT_EQ(errs[i], 0) << "reader " << i;
}

std::atomic<int> g_handled{0};
void CountSignal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

// Installs CountSignal for `sig` with SA_RESTART, as a C or C++ program with a handler would;
// restores the old action when it goes. Only async-signal-safe calls (usable in a Spawn child).
class HandledSignal {
 public:
  explicit HandledSignal(int sig) : sig_(sig) {
    struct sigaction sa {};
    sa.sa_handler = CountSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ok_ = ::sigaction(sig, &sa, &old_) == 0;
  }
  ~HandledSignal() {
    if (ok_) ::sigaction(sig_, &old_, nullptr);
  }
  bool ok() const { return ok_; }

 private:
  int sig_;
  bool ok_ = false;
  struct sigaction old_ {};
};

// The kernel interrupts a waiting FUSE request for every signal its caller gets, also one the
// program handles (SIGCHLD, SIGALRM, Go's SIGURG, a SIGHUP handler); such a caller is not dying,
// so its read and open go on as if no signal had come: no EINTR (the kernel would not restart
// the read, SA_RESTART or not), the right bytes once the store is back.
TEST_F(MountFaultTest, AReadAndAnOpenSignalledWithAHandledSignalGetTheirBytesNotEintr) {
  ASSERT_NO_FATAL_FAILURE(MountWithColdIndexLoaded());
  HandledSignal usr1(SIGUSR1);
  ASSERT_TRUE(usr1.ok());
  g_handled = 0;
  const int gets_before = store_->gets;
  store_->set_mode(Mode::kHang);
  int read_err = -1;
  std::string got;
  std::atomic<bool> read_done{false};
  std::thread reader([&] {
    got = DirectRead(mountpoint_ / "b/cold.bin", 2 * kPiece, 4096, &read_err);
    read_done = true;
  });
  int open_err = -1;
  std::atomic<bool> open_done{false};
  std::thread opener([&] {  // cold2.bin's chunk index is not loaded: the open waits for it
    int fd = ::open((mountpoint_ / "b/cold2.bin").c_str(), O_RDONLY);
    open_err = fd >= 0 ? 0 : errno;
    if (fd >= 0) ::close(fd);
    open_done = true;
  });
  // The read's chunk and the open's chunk index: both requests wait on the store.
  ASSERT_TRUE(store_->WaitHanging(2));
  // Signalled again and again while they wait (the kernel sends the mount one FUSE_INTERRUPT
  // per request, at the first signal; the handler runs once the call returns).
  for (int i = 0; i < 30; ++i) {
    ::pthread_kill(reader.native_handle(), SIGUSR1);
    ::pthread_kill(opener.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Longer than the mount's checks of an interrupted caller (5..40 ms, then every 100 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(read_done) << "the read ended while the store hung: " << std::strerror(read_err);
  EXPECT_FALSE(open_done) << "the open ended while the store hung: " << std::strerror(open_err);
  store_->set_mode(Mode::kNormal);
  reader.join();
  opener.join();
  EXPECT_EQ(read_err, 0) << std::strerror(read_err);
  EXPECT_EQ(got.size(), 4096u);
  EXPECT_TRUE(got == contents_.at("b/cold.bin").substr(2 * kPiece, 4096));
  EXPECT_EQ(open_err, 0) << std::strerror(open_err);
  EXPECT_GE(g_handled.load(), 2);  // the signals came (handled once each call returned)
  // One fetch each: nothing was withdrawn and fetched again.
  EXPECT_EQ(store_->gets - gets_before, 2);
}

// A thread that handled a signal while it waited gets no second interrupt when it is killed
// afterwards: the mount keeps checking an interrupted request's caller, so the killed reader
// and opener still end at once, not at the read deadline.
TEST_F(MountFaultTest, AReaderAndOpenerKilledAfterAHandledSignalEndAtOnce) {
  ASSERT_NO_FATAL_FAILURE(MountWithColdIndexLoaded());
  store_->set_mode(Mode::kHang);
  const std::string cold = (mountpoint_ / "b/cold.bin").string();
  const std::string cold2 = (mountpoint_ / "b/cold2.bin").string();
  // Each exits 3 if its call failed (an EINTR would end it early).
  pid_t reader = Spawn([&] {
    HandledSignal usr1(SIGUSR1);  // kept: the child ends with _exit
    if (!usr1.ok()) ::_exit(2);
    int f = ::open(cold.c_str(), O_RDONLY | O_DIRECT);
    if (::pread(f, g_direct_buffer, kPiece, 4 * kPiece) != static_cast<ssize_t>(kPiece)) ::_exit(3);
  });
  pid_t opener = Spawn([&] {
    HandledSignal usr1(SIGUSR1);
    if (!usr1.ok()) ::_exit(2);
    if (::open(cold2.c_str(), O_RDONLY) < 0) ::_exit(3);
  });
  ASSERT_GT(reader, 0);
  ASSERT_GT(opener, 0);
  ASSERT_TRUE(store_->WaitHanging(2));
  for (int i = 0; i < 5; ++i) {
    ::kill(reader, SIGUSR1);
    ::kill(opener, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(EndsWithin(reader, std::chrono::milliseconds(300))) << "reader ended on SIGUSR1";
  EXPECT_FALSE(EndsWithin(opener, std::chrono::milliseconds(10))) << "opener ended on SIGUSR1";
  auto t0 = Clock::now();
  ::kill(reader, SIGKILL);
  ::kill(opener, SIGKILL);
  EXPECT_TRUE(EndsWithin(reader, std::chrono::seconds(1))) << "killed reader still there";
  EXPECT_TRUE(EndsWithin(opener, std::chrono::seconds(1))) << "killed opener still there";
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);
  EXPECT_LT(Seconds(TimeMetadata(5)), 1.0);
  store_->set_mode(Mode::kNormal);
  int err = 0;
  EXPECT_EQ(DirectRead(mountpoint_ / "b/cold2.bin", 0, 600'000, &err), contents_.at("b/cold2.bin"));
  EXPECT_EQ(err, 0);
}

TEST_F(MountFaultTest, IndexesLoadedAtMountKeepFilesOpenableWhenTheStoreGoesAway) {
  Mount(/*prefetch_indexes=*/true);  // waits for the background loader
  store_->set_mode(Mode::kUnavailable);
  auto t0 = Clock::now();
  int fd = ::open((mountpoint_ / "b/cold2.bin").c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);
  if (fd >= 0) ::close(fd);
}

TEST_F(MountFaultTest, TransientErrorsAreRetriedWithinTheDeadline) {
  Mount();
  store_->FailNext(3);  // three Unavailable answers, then good ones
  int err = 0;
  EXPECT_EQ(DirectRead(mountpoint_ / "c/f7", 0, 4096, &err), contents_.at("c/f7"));
  EXPECT_EQ(err, 0);

  // A store that stays unavailable: EIO once the deadline is spent, never later.
  store_->set_mode(Mode::kUnavailable);
  auto t0 = Clock::now();
  DirectRead(mountpoint_ / "c/f8", 0, 4096, &err);
  EXPECT_EQ(err, EIO);
  EXPECT_LT(Seconds(Clock::now() - t0), Seconds(kReadTimeout + kSlack));
  store_->set_mode(Mode::kNormal);
  EXPECT_EQ(DirectRead(mountpoint_ / "c/f8", 0, 4096, &err), contents_.at("c/f8"));
}

TEST_F(MountFaultTest, MissingAndCorruptChunksFailAtOnce) {
  Mount();
  const std::string& f10 = contents_.at("c/f10");
  store_->inner.CorruptForTest(Digest::Of(f10), std::vector<uint8_t>(f10.size(), 'x'));
  store_->set_mode(Mode::kNotFound);
  int err = 0;
  auto t0 = Clock::now();
  DirectRead(mountpoint_ / "c/f9", 0, 4096, &err);
  EXPECT_EQ(err, EIO);
  store_->set_mode(Mode::kNormal);
  DirectRead(mountpoint_ / "c/f10", 0, 4096, &err);  // the store reports Corruption
  EXPECT_EQ(err, EIO);
  EXPECT_LT(Seconds(Clock::now() - t0), 1.0);  // nothing worth waiting for
}

}  // namespace
}  // namespace bdn
