// File descriptors: UniqueFd (the one owner that closes them) and the loops that read or write a
// whole buffer through the short transfers and EINTRs of read(2)/write(2). No raw close(2) is
// called outside this file's implementation.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"

namespace bdn {

// An open file descriptor, closed when the owner goes (errors of that close are ignored: use
// Close where a written file's close may report a deferred write error). Move-only; an empty
// one holds -1. Thread-compatible (the descriptor itself may be used by several threads).
class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd` (-1 or any negative value: empty).
  explicit UniqueFd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership: returns the descriptor (or -1) and leaves this empty.
  int Release() noexcept { return std::exchange(fd_, -1); }
  // Closes the held descriptor (if any) and takes `fd`. errno is preserved across the close, so
  // `int e = errno` after a failed call and before Reset is not needed.
  void Reset(int fd = -1) noexcept;
  // Closes now and reports close(2)'s failure (EIO, ENOSPC, EDQUOT on some file systems). The
  // descriptor is gone either way. Ok when empty. Errors: ErrnoError "`what`".
  Status Close(std::string_view what);

 private:
  int fd_ = -1;
};

// The bytes of `text`, for the functions below.
inline std::span<const uint8_t> AsBytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}
// The bytes of the number `value` as it lies in memory (a pid sent over a pipe).
template <typename T>
  requires std::is_arithmetic_v<T>
std::span<const uint8_t> AsBytes(const T& value) {
  return {reinterpret_cast<const uint8_t*>(&value), sizeof value};
}

// Writes all of `data` at the descriptor's file offset, retrying short writes and EINTR.
// Errors: ErrnoError "`what`" (ENOSPC → FailedPrecondition, ...).
Status WriteAll(int fd, std::span<const uint8_t> data, std::string_view what);
// As WriteAll, at `offset` (pwrite(2)); the file offset is unchanged.
Status PWriteAll(int fd, std::span<const uint8_t> data, uint64_t offset, std::string_view what);
// As PWriteAll for the buffers iov[0, count), back to back from `offset` (pwritev(2)). `iov` is
// consumed: its entries are advanced past what was written.
Status PWritevAll(int fd, struct iovec* iov, int count, uint64_t offset, std::string_view what);

// Reads into `buf` at the descriptor's file offset until it is full or the file ends, retrying
// short reads and EINTR. Returns the bytes read: buf.size(), or fewer at end of file.
// Errors: ErrnoError "`what`".
Result<size_t> ReadFull(int fd, std::span<uint8_t> buf, std::string_view what);
// As ReadFull, from `offset` (pread(2)); the file offset is unchanged.
Result<size_t> PReadFull(int fd, std::span<uint8_t> buf, uint64_t offset, std::string_view what);
// As PReadFull into the buffers iov[0, count), back to back from `offset` (preadv(2)). `iov`
// is consumed as in PWritevAll. Returns the bytes read (fewer than the buffers hold at end of
// file).
Result<size_t> PReadvFull(int fd, struct iovec* iov, int count, uint64_t offset,
                          std::string_view what);

// Reads exactly buf.size() bytes from a pipe or socket, waiting (poll(2)) on `clock`'s steady
// time until `deadline`. Errors: DeadlineExceeded "`what`: no answer in time" once the deadline
// passes; Unavailable "`what`: closed after N of M bytes" when the other end closes first;
// ErrnoError "`what`" on a read error.
Status ReadFullBefore(int fd, std::span<uint8_t> buf, SteadyTime deadline, const Clock& clock,
                      std::string_view what);

}  // namespace bdn
