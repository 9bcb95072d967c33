#include "bdn/base/memory.h"

#include <malloc.h>

#include <climits>

namespace bdn {

void KeepFreedMemory(size_t bytes) {
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes > INT_MAX ? INT_MAX : bytes));
}

}  // namespace bdn
