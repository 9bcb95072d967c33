// TransferCounters: live counters of a long operation (push, pull, store migration) for a progress
// display.
#pragma once

#include <atomic>
#include <cstdint>

namespace bdn {

// Live counters for progress display; written by the operation, read by any thread.
struct TransferCounters {
  std::atomic<uint64_t> bytes_total{0};
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> files_total{0};
  std::atomic<uint64_t> files_done{0};
  std::atomic<uint64_t> bytes_uploaded{0};
  // What the operation does once its bytes have moved, for a progress line: a string literal
  // ("syncing", "committing"), null while bytes move (from an attacker: a push whose commit the
  // origin held showed 100% and a falling rate, with no word of what it waited for).
  std::atomic<const char*> step{nullptr};
};

}  // namespace bdn
