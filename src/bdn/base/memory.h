// Allocator settings for processes that stream bulk data (bdn serve, bdn cache serve, the mount
// daemon, an embedded `bdn volume sync start`).
#pragma once

#include <cstddef>

namespace bdn {

// Tells glibc's malloc to keep up to `bytes` of freed memory at the top of each arena instead of
// handing it back to the kernel (mallopt M_TRIM_THRESHOLD; glibc's default follows the largest
// freed mapping, ~2x the chunk size here). A server that allocates and frees a chunk's buffer per
// request otherwise gives the pages back and faults them in again for the next request: on a
// virtual machine that was two thirds of an origin's CPU serving batches from memory
// (docs/benchmarks.md, "Scale-out", third round). Costs up to `bytes` of resident memory per arena
// after a burst. Call once, early, before the threads start. No error: a libc without mallopt
// keeps its defaults.
// It also sets M_MMAP_THRESHOLD to kMmapThresholdBytes (32 MiB, the most glibc raises it to by
// itself): allocations below that come from the arenas.
void KeepFreedMemory(size_t bytes = size_t{128} << 20);
inline constexpr int kMmapThresholdBytes = 32 << 20;

}  // namespace bdn
