// Allocator settings for processes that stream bulk data (bdn serve, bdn cache serve, the mount
// daemon, an embedded `bdn volume sync start`).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

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

// Re-executes the running program (/proc/self/exe, the same argv, the same environment plus
// "glibc.malloc.hugetlb=1" in GLIBC_TUNABLES) so that glibc's malloc (2.35 and later) asks for
// transparent huge pages under its heap (madvise MADV_HUGEPAGE on the memory it maps). Only where
// TunablesForHugePageHeap says so, and never in secure mode (setuid, file capabilities: glibc
// ignores the tunable there), nor where the program has no interpreter (run through the dynamic
// loader by hand, or linked statically); otherwise, and when the exec fails, it returns and the
// process goes on as it is. On success it does not return. The re-executed process, marked by
// BDN_HUGE_PAGE_REEXEC (the name it had), returns at once from its own call, so there is at most
// one re-exec; it takes back its name (comm: "bdn", not "exe") and removes the marker from the
// environment of what it starts. Call first thing in main, before any thread, file or lock
// exists (the exec keeps the pid and the open descriptors, and parses argv again).
// Why: on a virtual machine a page fault is a trip to the hypervisor, ~15 us per 4 KiB page here:
// a fresh mount daemon reading its first GiB faulted ~54,000 times (0.8 of its 3.0 CPU-s), and
// with 2 MiB pages the same read took 1.2 s instead of 1.7 s (docs/benchmarks.md, "Huge pages
// under the heap"). Costs one more exec (~25 ms) and up to 2 MiB of resident memory per arena
// top that a small heap would not use.
void ReexecWithHugePageHeap(char** argv);

// The GLIBC_TUNABLES value ReexecWithHugePageHeap runs with, or nullopt when it should not
// re-execute: the kernel's transparent huge page mode (`thp_enabled`, the text of
// /sys/kernel/mm/transparent_hugepage/enabled, e.g. "always [madvise] never\n") is not "madvise"
// (under "always" the heap gets huge pages anyway; under "never" it cannot), or `tunables` (the
// current GLIBC_TUNABLES, nullptr when unset) already names glibc.malloc.hugetlb (the user's
// choice, or this process is the re-executed one). Otherwise `tunables` with
// "glibc.malloc.hugetlb=1" appended (":"-separated), or just that when unset or empty.
std::optional<std::string> TunablesForHugePageHeap(std::string_view thp_enabled,
                                                   const char* tunables);

}  // namespace bdn
