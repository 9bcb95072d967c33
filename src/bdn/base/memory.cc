#include "bdn/base/memory.h"

#include <malloc.h>

#include <climits>

namespace bdn {

void KeepFreedMemory(size_t bytes) {
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes > INT_MAX ? INT_MAX : bytes));
  // Setting the trim threshold also fixes the mmap threshold at its 128 KiB default (glibc stops
  // raising it), so every chunk buffer would be mapped and unmapped: set it to what glibc's own
  // raising would reach.
  (void)mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
}

}  // namespace bdn
