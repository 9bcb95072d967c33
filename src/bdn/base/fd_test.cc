// UniqueFd and the whole-buffer loops on real files and pipes.
#include "bdn/base/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesOnDestructionAndResetAndNotAfterRelease) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.get(), raw);
  }
  EXPECT_FALSE(IsOpen(raw));

  int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int b = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  UniqueFd fd(a);
  fd.Reset(b);
  EXPECT_FALSE(IsOpen(a));
  EXPECT_TRUE(IsOpen(b));
  int kept = fd.Release();
  EXPECT_EQ(kept, b);
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(fd.get(), -1);
  EXPECT_TRUE(IsOpen(b));  // released: the caller owns it
  UniqueFd again(kept);
}

TEST(UniqueFd, MoveTransfersOwnershipOnce) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  UniqueFd a(raw);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c.Reset();
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, ResetKeepsErrnoAndNegativeMeansEmpty) {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  errno = ENOENT;
  fd.Reset(::open("/nonexistent/bdn", O_RDONLY));
  EXPECT_EQ(errno, ENOENT);
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(UniqueFd(-7).get(), -1);
}

TEST(UniqueFd, CloseReportsTheErrorAndEmptiesTheOwner) {
  UniqueFd empty;
  EXPECT_OK(empty.Close("nothing"));
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  UniqueFd fd(raw);
  EXPECT_OK(fd.Close("null"));
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(IsOpen(raw));
  // A descriptor closed behind the owner's back: close(2) fails with EBADF, named.
  UniqueFd stale(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ::close(stale.get());
  EXPECT_STATUS(stale.Close("file x"), kInternal, "file x: Bad file descriptor");
}

TEST(FdLoops, WriteAllThenReadFullRoundTripsAndStopsAtEndOfFile) {
  testutil::TempDir dir;
  const auto path = dir.path() / "f";
  const std::vector<uint8_t> data = testutil::RandomBytes(3 << 20, 7);
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    ASSERT_OK(WriteAll(fd.get(), data, "f"));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::vector<uint8_t> back(data.size() + 100, 0xee);
  auto n = ReadFull(fd.get(), back, "f");
  ASSERT_OK(n);
  EXPECT_EQ(*n, data.size());
  back.resize(*n);
  EXPECT_EQ(back, data);
  // At end of file: 0 bytes.
  auto more = ReadFull(fd.get(), back, "f");
  ASSERT_OK(more);
  EXPECT_EQ(*more, 0u);
}

TEST(FdLoops, PositionalAndVectoredTransfersUseTheOffset) {
  testutil::TempDir dir;
  const auto path = dir.path() / "f";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd);
  ASSERT_OK(PWriteAll(fd.get(), AsBytes("world"), 6, "f"));
  std::string hello = "hello ", bang = "!";
  struct iovec iov[2] = {{hello.data(), hello.size()}, {bang.data(), 0}};
  ASSERT_OK(PWritevAll(fd.get(), iov, 2, 0, "f"));
  struct stat st;
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 11);
  char a[5], b[20] = {};
  struct iovec in[2] = {{a, sizeof a}, {b, sizeof b}};
  auto n = PReadvFull(fd.get(), in, 2, 0, "f");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 11u);
  EXPECT_EQ(std::string(a, 5) + std::string(b, 6), "hello world");
  uint8_t w[5];
  auto m = PReadFull(fd.get(), w, 6, "f");
  ASSERT_OK(m);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(w), *m), "world");
  // The file offset was never moved by the positional calls.
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 0);
}

TEST(FdLoops, ErrorsNameWhatFailed) {
  UniqueFd ro(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_STATUS(WriteAll(ro.get(), AsBytes("x"), "file y: write"), kInternal,
                "file y: write: Bad file descriptor");
  UniqueFd wo(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  uint8_t buf[4];
  EXPECT_STATUS(ReadFull(wo.get(), buf, "file z: read"), kInternal,
                "file z: read: Bad file descriptor");
}

TEST(FdLoops, ReadFullBeforeGetsBytesAndTellsClosedFromLate) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  ASSERT_OK(WriteAll(w.get(), AsBytes("abc"), "pipe"));
  const Clock& real = *Clock::Real();
  uint8_t got[3];
  ASSERT_OK(ReadFullBefore(r.get(), got, real.SteadyNow() + std::chrono::seconds(30), real, "p"));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(got), 3), "abc");

  // A deadline already passed on the clock: DeadlineExceeded at once, nothing read.
  testutil::FakeClock fake;
  EXPECT_STATUS(ReadFullBefore(r.get(), got, fake.SteadyNow(), fake, "daemon pipe"),
                kDeadlineExceeded, "daemon pipe: no answer in time");

  ASSERT_OK(WriteAll(w.get(), AsBytes("z"), "pipe"));
  w.Reset();
  EXPECT_STATUS(ReadFullBefore(r.get(), got, real.SteadyNow() + std::chrono::seconds(30), real,
                               "daemon pipe"),
                kUnavailable, "daemon pipe: closed after 1 of 3 bytes");
}

}  // namespace
}  // namespace bdn
