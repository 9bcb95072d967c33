#include "bdn/base/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace bdn {

void KeepFreedMemory(size_t bytes) {
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes > INT_MAX ? INT_MAX : bytes));
  // Setting the trim threshold also fixes the mmap threshold at its 128 KiB default (glibc stops
  // raising it), so every chunk buffer would be mapped and unmapped: set it to what glibc's own
  // raising would reach.
  (void)mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
}

std::optional<std::string> TunablesForHugePageHeap(std::string_view thp_enabled,
                                                   const char* tunables) {
  if (thp_enabled.find("[madvise]") == std::string_view::npos) return std::nullopt;
  const std::string_view current = tunables ? tunables : "";
  if (current.find("glibc.malloc.hugetlb") != std::string_view::npos) return std::nullopt;
  std::string out(current);
  if (!out.empty()) out += ':';
  out += "glibc.malloc.hugetlb=1";
  return out;
}

void ReexecWithHugePageHeap(char** argv) {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!in) return;
  std::stringstream mode;
  mode << in.rdbuf();
  const char* before = std::getenv("GLIBC_TUNABLES");
  std::optional<std::string> tunables = TunablesForHugePageHeap(mode.str(), before);
  if (!tunables) return;
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  if (::setenv("GLIBC_TUNABLES", tunables->c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // The exec failed (no /proc, a deleted binary): go on with the default heap and leave the
  // environment of the commands this process starts as it was.
  if (saved) {
    (void)::setenv("GLIBC_TUNABLES", saved->c_str(), 1);
  } else {
    (void)::unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace bdn
