#include "bdn/remote/claim_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/digest/digest.h"
#include "bdn/remote/retry.h"

namespace bdn::remote {
namespace {

// At most 4 KiB of `file` if it is a regular file; "" otherwise (missing, a FIFO or device, a
// symlink, unreadable). Never blocks on what it opens.
std::string ReadSmall(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string text(4096, '\0');
  auto n = ReadFull(fd.get(), {reinterpret_cast<uint8_t*>(text.data()), text.size()}, "");
  text.resize(n ? *n : 0);
  return text;
}

std::string BootId() {
  std::string id = ReadSmall("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

// Field 22 (starttime) of /proc/<pid>/stat; 0 when the process is gone or the line is odd. The
// command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
unsigned long long StartTimeOf(long pid) {
  std::string stat = ReadSmall("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  // After ')': field 3 (state) is the first; starttime is field 22, the 20th from here.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return 0;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

// Whether the open file `fd` is still the file at `path` (not removed or replaced meanwhile).
bool StillAtPath(int fd, const std::string& path) {
  struct stat open {
  }, there{};
  return ::fstat(fd, &open) == 0 && ::lstat(path.c_str(), &there) == 0 &&
         open.st_dev == there.st_dev && open.st_ino == there.st_ino;
}

}  // namespace

ProcessIdentity SelfIdentity() {
  ProcessIdentity id;
  id.boot = BootId();
  id.pid = static_cast<long>(::getpid());
  id.start = StartTimeOf(id.pid);
  return id;
}

bool StillRunning(const ProcessIdentity& id) {
  if (id.boot.empty() || id.pid <= 0 || id.boot != BootId()) return true;
  unsigned long long now = StartTimeOf(id.pid);
  if (now == 0) {
    // No /proc/<pid>: gone, unless /proc itself cannot be read (then we cannot tell).
    return ::access("/proc/self/stat", R_OK) != 0;
  }
  return now == id.start;
}

std::filesystem::path ClaimJournal::FileOf(const std::string& server,
                                           const std::string& volume) const {
  return dir_ / Digest::Of(server + "\n" + volume).Hex().substr(0, 32);
}

ClaimJournal::Attempt ClaimJournal::Begin(const std::string& server,
                                          const std::string& volume) const {
  Attempt a;
  const std::filesystem::path file = FileOf(server, volume);
  if (CreatePrivateDirectory(dir_, "push claim journal").ok()) {
    const std::string lock = file.string() + ".lock";
    // Forget removes a lock file while holding it: a lock taken on a file no longer at the path
    // is taken again on the one there now (a few tries; then none, as for a lock file that
    // cannot be opened).
    for (int tries = 0; tries < 8 && !a.lock.valid(); ++tries) {
      a.lock = UniqueFd(::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!a.lock.valid()) break;
      int rc;
      do {
        rc = ::flock(a.lock.get(), LOCK_EX);
      } while (rc != 0 && errno == EINTR);
      if (rc != 0) {
        a.lock = UniqueFd();
        break;
      }
      if (!StillAtPath(a.lock.get(), lock)) a.lock = UniqueFd();
    }
  }
  // Without the lock another push may take the same record over at once: take nothing over.
  auto j = nlohmann::json::parse(a.lock.valid() ? ReadSmall(file) : "", nullptr, false);
  if (j.is_object() && j["boot"].is_string() && j["pid"].is_number_integer() &&
      j["start"].is_number_unsigned() && j["key"].is_string() &&
      !j["key"].get<std::string>().empty()) {
    ProcessIdentity holder{j["boot"].get<std::string>(), j["pid"].get<long>(),
                           j["start"].get<unsigned long long>()};
    if (!StillRunning(holder)) {
      a.taken_over = true;
      a.key = j["key"].get<std::string>();
      return a;
    }
    a.live_holder = holder.pid != static_cast<long>(::getpid());
  }
  a.key = NewIdempotencyKey().value_or("");
  return a;
}

void ClaimJournal::Record(const std::string& server, const std::string& volume,
                          const std::string& key) const {
  if (key.empty() || !CreatePrivateDirectory(dir_, "push claim journal").ok()) return;
  ProcessIdentity self = SelfIdentity();
  nlohmann::json j = {{"boot", self.boot}, {"pid", self.pid}, {"start", self.start}, {"key", key}};
  const std::string text = j.dump() + "\n";
  const std::filesystem::path file = FileOf(server, volume);
  const std::filesystem::path tmp = file.string() + "." + std::to_string(self.pid) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  bool ok = WriteAll(fd, AsBytes(text), tmp.string()).ok();
  ok = ::close(fd) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, file, ec);
  if (!ok || ec) std::filesystem::remove(tmp, ec);
}

void ClaimJournal::Forget(const std::string& server, const std::string& volume,
                          const std::string& key) const {
  const std::filesystem::path file = FileOf(server, volume);
  auto j = nlohmann::json::parse(ReadSmall(file), nullptr, false);
  if (!j.is_object() || !j["key"].is_string() || j["key"].get<std::string>() != key ||
      !j["pid"].is_number_integer() || j["pid"].get<long>() != static_cast<long>(::getpid())) {
    return;
  }
  // The lock file goes too when nobody holds it (from an attacking helper: one was left per
  // volume ever pushed). Begin takes a lock again when its file left the path meanwhile.
  const std::string lock = file.string() + ".lock";
  UniqueFd fd(::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  const bool locked =
      fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 && StillAtPath(fd.get(), lock);
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (locked) ::unlink(lock.c_str());
}

}  // namespace bdn::remote
