#include "bdn/base/memory.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

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

namespace {

// Set in the environment of the re-executed process, holding the name (comm) the process had.
constexpr char kReexecMarker[] = "BDN_HUGE_PAGE_REEXEC";

// The text of /sys/kernel/mm/transparent_hugepage/enabled ("" when unreadable), read through a
// descriptor that is closed before any exec (std::ifstream's is not O_CLOEXEC).
std::string ThpMode() {
  const int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

void ReexecWithHugePageHeap(char** argv) {
  if (const char* name = std::getenv(kReexecMarker)) {
    // This is the re-executed process: the kernel named it after "/proc/self/exe" ("exe"); give
    // it back the name ps, pgrep and the journal knew it by, and start nothing with the marker.
    if (*name != '\0') (void)::prctl(PR_SET_NAME, name, 0, 0, 0);
    (void)::unsetenv(kReexecMarker);
    return;
  }
  // Secure mode (setuid, setgid, file capabilities): glibc ignores the tunable there, and the
  // marker above is what keeps such a process from re-executing itself forever.
  if (::getauxval(AT_SECURE) != 0) return;
  // No program interpreter: started by running the dynamic loader by hand (/proc/self/exe is the
  // loader, which would take argv[1] for the program) or linked statically.
  if (::getauxval(AT_BASE) == 0) return;
  const char* before = std::getenv("GLIBC_TUNABLES");
  std::optional<std::string> tunables = TunablesForHugePageHeap(ThpMode(), before);
  if (!tunables) return;
  char name[17] = {};
  (void)::prctl(PR_GET_NAME, name, 0, 0, 0);
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  if (::setenv(kReexecMarker, name, 1) != 0) return;
  if (::setenv("GLIBC_TUNABLES", tunables->c_str(), 1) == 0) {
    ::execv("/proc/self/exe", argv);
  }
  // The exec failed (no /proc, E2BIG, a memory limit): go on with the default heap and leave the
  // environment of the commands this process starts as it was.
  (void)::unsetenv(kReexecMarker);
  if (saved) {
    (void)::setenv("GLIBC_TUNABLES", saved->c_str(), 1);
  } else {
    (void)::unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace bdn
