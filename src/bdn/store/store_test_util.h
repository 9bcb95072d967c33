// Test helpers that damage a blob's stored copy inside a LocalChunkStore's pack behind the
// store's back, as a failing disk would.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "bdn/store/local_chunk_store.h"

namespace bdn {

// XORs the stored byte at `offset` of the payload of `id` with `mask`. Errors: NotFound if the
// store has no good copy; ErrnoError on I/O.
inline Status FlipStoredByte(LocalChunkStore& store, const Digest& id, uint64_t offset,
                             uint8_t mask = 0x01) {
  BDN_ASSIGN_OR_RETURN(auto where, store.Locate(id));
  if (!where) return NotFoundError("chunk " + id.ToString() + ": not in store");
  if (offset >= where->loc.stored_bytes) return InvalidArgumentError("offset past the blob");
  int fd = ::open(where->pack_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoError(where->pack_path.string(), errno);
  const auto at = static_cast<off_t>(where->loc.payload_offset() + offset);
  uint8_t b = 0;
  bool ok = ::pread(fd, &b, 1, at) == 1;
  b ^= mask;
  ok = ok && ::pwrite(fd, &b, 1, at) == 1;
  ::close(fd);
  return ok ? Status::Ok() : ErrnoError(where->pack_path.string(), errno);
}

// Overwrites every stored byte of `id` with `fill`.
inline Status OverwriteStoredBlob(LocalChunkStore& store, const Digest& id, uint8_t fill = 0x5a) {
  BDN_ASSIGN_OR_RETURN(auto where, store.Locate(id));
  if (!where) return NotFoundError("chunk " + id.ToString() + ": not in store");
  int fd = ::open(where->pack_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoError(where->pack_path.string(), errno);
  std::vector<uint8_t> bytes(where->loc.stored_bytes, fill);
  bool ok =
      ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(where->loc.payload_offset())) ==
      static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok ? Status::Ok() : ErrnoError(where->pack_path.string(), errno);
}

}  // namespace bdn
