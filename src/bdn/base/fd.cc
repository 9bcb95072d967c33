// UniqueFd and the whole-buffer read/write loops.
#include "bdn/base/fd.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>

namespace bdn {
namespace {

// Moves `iov`/`count` past `n` transferred bytes.
void Advance(struct iovec*& iov, int& count, size_t n) {
  while (count > 0 && n >= iov->iov_len) {
    n -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0) {
    iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + n;
    iov->iov_len -= n;
  }
}

}  // namespace

void UniqueFd::Reset(int fd) noexcept {
  if (fd_ >= 0) {
    int saved = errno;
    ::close(fd_);
    errno = saved;
  }
  fd_ = fd < 0 ? -1 : fd;
}

Status UniqueFd::Close(std::string_view what) {
  if (fd_ < 0) return Status::Ok();
  if (::close(std::exchange(fd_, -1)) != 0) return ErrnoError(what, errno);
  return Status::Ok();
}

Status WriteAll(int fd, std::span<const uint8_t> data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    data = data.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status PWriteAll(int fd, std::span<const uint8_t> data, uint64_t offset, std::string_view what) {
  struct iovec iov = {const_cast<uint8_t*>(data.data()), data.size()};
  return PWritevAll(fd, &iov, 1, offset, what);
}

Status PWritevAll(int fd, struct iovec* iov, int count, uint64_t offset, std::string_view what) {
  uint64_t at = offset;
  while (count > 0) {
    ssize_t n = ::pwritev(fd, iov, count, static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    at += static_cast<uint64_t>(n);
    Advance(iov, count, static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<size_t> ReadFull(int fd, std::span<uint8_t> buf, std::string_view what) {
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err(ErrnoError(what, errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

Result<size_t> PReadFull(int fd, std::span<uint8_t> buf, uint64_t offset, std::string_view what) {
  struct iovec iov = {buf.data(), buf.size()};
  return PReadvFull(fd, &iov, 1, offset, what);
}

Result<size_t> PReadvFull(int fd, struct iovec* iov, int count, uint64_t offset,
                          std::string_view what) {
  size_t total = 0;
  while (count > 0) {
    ssize_t n = ::preadv(fd, iov, count, static_cast<off_t>(offset + total));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err(ErrnoError(what, errno));
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
    Advance(iov, count, static_cast<size_t>(n));
  }
  return total;
}

Status ReadFullBefore(int fd, std::span<uint8_t> buf, SteadyTime deadline, const Clock& clock,
                      std::string_view what) {
  size_t got = 0;
  while (got < buf.size()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock.SteadyNow());
    if (left.count() <= 0) {
      return DeadlineExceededError(std::string(what) + ": no answer in time");
    }
    pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    if (r < 0 && errno != EINTR) return ErrnoError(what, errno);
    if (r <= 0) continue;
    ssize_t k = ::read(fd, buf.data() + got, buf.size() - got);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoError(what, errno);
    }
    if (k == 0) {
      return UnavailableError(std::string(what) + ": closed after " + std::to_string(got) + " of " +
                              std::to_string(buf.size()) + " bytes");
    }
    got += static_cast<size_t>(k);
  }
  return Status::Ok();
}

}  // namespace bdn
