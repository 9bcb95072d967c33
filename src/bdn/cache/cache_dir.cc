#include "bdn/cache/cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bdn/base/dir_fd.h"
#include "bdn/base/fd.h"
#include "bdn/base/path_walk.h"  // UidText
#include "bdn/base/private_files.h"
#include "bdn/store/pack_format.h"
#include "bdn/store/pack_index.h"

namespace bdn {
namespace fs = std::filesystem;

namespace {

// The names of a marked cache directory (sorted): the region store's (local_chunk_store.h; no
// gc/, as a cache records no claims), bad copies a migration set aside, a file system's lost+found.
constexpr std::string_view kMarkedNames[] = {
    "corrupt", "evict.lock", "index", "lost+found", "packs", "quarantine", "quarantine.damaged"};
// Those of an earlier release's, unmarked: also the one-file-per-chunk layout's (before regions).
constexpr std::string_view kEarlierNames[] = {
    "chunks", "corrupt",    "evict.lock",         "index", "lost+found",
    "packs",  "quarantine", "quarantine.damaged", "state", "tmp"};

// The one-file-per-chunk layout's shared accounting file (cache_state.cc of that release):
// "ZBDNN001" (a little-endian u64), the ghost table's slot count (a power of two, u64), and the
// table from byte 8192, 8 bytes a slot.
constexpr uint64_t kOldStateMagic = 0x3130304e4e44425aull;
constexpr uint64_t kOldStateTableOffset = 8192;

// The first path below the cache directory that is not what the node cache makes there; nullopt
// when everything judged is.
using Misfit = std::optional<std::string>;

bool IsLowerHex(std::string_view s, size_t digits) {
  return s.size() == digits && std::ranges::all_of(s, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

// "<64 hex>.<pid>.<n>": a temporary file of the one-file-per-chunk layout's writer.
bool IsOldTempName(std::string_view name) {
  if (name.size() < 68 || !IsLowerHex(name.substr(0, 64), 64) || name[64] != '.') return false;
  const std::string_view rest = name.substr(65);
  const size_t dot = rest.find('.');
  return dot != std::string_view::npos && IsDigits(rest.substr(0, dot)) &&
         IsDigits(rest.substr(dot + 1));
}

// lstat of `name` in `dir` (a symlink is itself).
Result<struct stat> StatAt(int dir, const std::string& name, const fs::path& display) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Err(ErrnoError("node cache " + (display / name).string(), errno));
  }
  return st;
}

Result<bool> IsRegularAt(int dir, const std::string& name, const fs::path& display) {
  BDN_ASSIGN_OR_RETURN(struct stat st, StatAt(dir, name, display));
  return S_ISREG(st.st_mode);
}

// The first `n` bytes of the regular file `name` in `dir` (fewer if it is shorter) and its size;
// nullopt when it is not a regular file. Never follows a symlink nor waits on a FIFO.
struct Head {
  std::vector<uint8_t> bytes;
  uint64_t size = 0;
};
Result<std::optional<Head>> ReadHeadAt(int dir, const std::string& name, size_t n,
                                       const fs::path& display) {
  const std::string what = "node cache " + (display / name).string();
  auto fd = OpenRegularFileAt(dir, name, O_RDONLY, what);
  if (!fd) {
    if (fd.error().code() == StatusCode::kFailedPrecondition) return std::optional<Head>();
    return Err(fd.error());
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Err(ErrnoError(what, errno));
  Head head;
  head.size = static_cast<uint64_t>(st.st_size);
  head.bytes.resize(n);
  BDN_ASSIGN_OR_RETURN(size_t got, PReadFull(fd->get(), head.bytes, 0, what));
  head.bytes.resize(got);
  return std::optional<Head>(std::move(head));
}

// The first entry of the directory `name` in `dir` that `fits(subdir, entry, subdir_display)`
// refuses, as "name/entry"; `name` itself when it is not a directory.
template <typename Fits>
Result<Misfit> FirstMisfitIn(int dir, const std::string& name, const fs::path& display,
                             const Fits& fits) {
  BDN_ASSIGN_OR_RETURN(struct stat st, StatAt(dir, name, display));
  if (!S_ISDIR(st.st_mode)) return Misfit(name);
  const fs::path sub_display = display / name;
  UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) return Err(ErrnoError("node cache " + sub_display.string(), errno));
  BDN_ASSIGN_OR_RETURN(auto entries, ListNames(sub.get(), sub_display.string()));
  for (const std::string& entry : entries) {
    BDN_ASSIGN_OR_RETURN(Misfit below, fits(sub.get(), entry, sub_display));
    if (below) return Misfit(name + "/" + *below);
  }
  return Misfit();
}

// A Fits for FirstMisfitIn: regular files whose names `named` accepts.
template <typename Named>
auto RegularFilesNamed(const Named& named) {
  return [&named](int dir, const std::string& entry, const fs::path& display) -> Result<Misfit> {
    if (!named(entry)) return Misfit(entry);
    BDN_ASSIGN_OR_RETURN(bool regular, IsRegularAt(dir, entry, display));
    return regular ? Misfit() : Misfit(entry);
  };
}

Result<bool> IsOldStateAt(int dir, const fs::path& display) {
  BDN_ASSIGN_OR_RETURN(auto head, ReadHeadAt(dir, "state", 16, display));
  if (!head || head->bytes.size() < 16) return false;
  uint64_t magic, slots;
  std::memcpy(&magic, head->bytes.data(), 8);
  std::memcpy(&slots, head->bytes.data() + 8, 8);
  return magic == kOldStateMagic && std::has_single_bit(slots) && slots < (uint64_t{1} << 40) &&
         head->size >= kOldStateTableOffset + slots * 8;
}

// Whether an earlier release's node cache made the top-level entry `name` of `dir` as it is.
Result<Misfit> JudgeEarlierEntry(int dir, const std::string& name, const fs::path& display) {
  auto regular = [&]() -> Result<Misfit> {
    BDN_ASSIGN_OR_RETURN(bool is, IsRegularAt(dir, name, display));
    return is ? Misfit() : Misfit(name);
  };
  if (name == "evict.lock" || name == "quarantine") return regular();
  // Whatever the store renamed out of the way.
  if (name == "quarantine.damaged") return Misfit();
  if (name == "state") {
    BDN_ASSIGN_OR_RETURN(bool is, IsOldStateAt(dir, display));
    return is ? Misfit() : Misfit(name);
  }
  if (name == "lost+found") {
    return FirstMisfitIn(dir, name, display,
                         [](int, const std::string&, const fs::path&) -> Result<Misfit> {
                           return Misfit();  // the file system's, never touched
                         });
  }
  if (name == "index") {
    return FirstMisfitIn(dir, name, display,
                         RegularFilesNamed([](std::string_view e) { return e == "lock"; }));
  }
  const auto chunk_file = [](std::string_view e) { return IsLowerHex(e, 64); };
  if (name == "corrupt") return FirstMisfitIn(dir, name, display, RegularFilesNamed(chunk_file));
  if (name == "tmp") return FirstMisfitIn(dir, name, display, RegularFilesNamed(IsOldTempName));
  if (name == "chunks") {
    return FirstMisfitIn(
        dir, name, display,
        [&chunk_file](int chunks, const std::string& sub, const fs::path& chunks_display) {
          if (!IsLowerHex(sub, 2)) return Result<Misfit>(Misfit(sub));
          return FirstMisfitIn(chunks, sub, chunks_display, RegularFilesNamed(chunk_file));
        });
  }
  if (name == "packs") {
    return FirstMisfitIn(
        dir, name, display,
        [](int packs, const std::string& entry, const fs::path& packs_display) -> Result<Misfit> {
          if (IsSetAsideRegionName(entry)) return Misfit();
          if (pack::ParseHex16Name(entry, ".open") || pack::ParseHex16Name(entry, ".new")) {
            // Being filled, or left by a writer that died: its header may never have been written.
            BDN_ASSIGN_OR_RETURN(bool is, IsRegularAt(packs, entry, packs_display));
            return is ? Misfit() : Misfit(entry);
          }
          if (!pack::ParseHex16Name(entry, ".pack")) return Misfit(entry);
          BDN_ASSIGN_OR_RETURN(auto head,
                               ReadHeadAt(packs, entry, pack::kPackHeaderBytes, packs_display));
          if (!head || !pack::CheckPackHeader(head->bytes, entry).ok()) return Misfit(entry);
          return Misfit();
        });
  }
  return Misfit(name);
}

enum class MarkerState { kWhole, kEmpty, kOther };

Result<MarkerState> ReadMarker(int dir, const fs::path& display) {
  const std::string name(kNodeCacheMarkerName);
  BDN_ASSIGN_OR_RETURN(auto head, ReadHeadAt(dir, name, kNodeCacheMarkerText.size() + 1, display));
  if (!head) return MarkerState::kOther;
  if (head->size == 0) return MarkerState::kEmpty;
  const std::string text(head->bytes.begin(), head->bytes.end());
  return text == kNodeCacheMarkerText ? MarkerState::kWhole : MarkerState::kOther;
}

bool Among(std::span<const std::string_view> names, std::string_view name) {
  return std::ranges::find(names, name) != names.end();
}

}  // namespace

bool IsSetAsideRegionName(std::string_view name) {
  constexpr std::string_view kSuffix = ".damaged";
  if (!name.ends_with(kSuffix)) return false;
  const std::string_view region = name.substr(0, name.size() - kSuffix.size());
  return pack::ParseHex16Name(region, ".pack") || pack::ParseHex16Name(region, ".open") ||
         pack::ParseHex16Name(region, ".new");
}

Result<CacheDirKind> JudgeCacheDir(int dir, const fs::path& display) {
  const auto refuse = [&display](const std::string& name) -> Result<CacheDirKind> {
    return Err(FailedPreconditionError("node cache " + display.string() + ": holds " + name +
                                       ", which is not the node cache's; give an empty directory "
                                       "or one the node cache made"));
  };
  BDN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, display.string()));
  bool marked = false;
  if (auto it = std::ranges::find(names, kNodeCacheMarkerName); it != names.end()) {
    BDN_ASSIGN_OR_RETURN(MarkerState marker, ReadMarker(dir, display));
    if (marker == MarkerState::kOther) {
      struct stat st {};
      if (::fstatat(dir, it->c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
        return Err(FailedPreconditionError(
            "node cache " + display.string() + ": " + std::string(kNodeCacheMarkerName) +
            " does not read \"" +
            std::string(kNodeCacheMarkerText.substr(0, kNodeCacheMarkerText.size() - 1)) +
            "\" (a later bdn's cache, or not a node cache's); give an empty directory or one the "
            "node cache made"));
      }
      return refuse(*it);
    }
    marked = marker == MarkerState::kWhole;
    names.erase(it);  // an empty marker is a marking that died before its write: judged absent
  }
  if (marked) {
    for (const std::string& name : names) {
      if (!Among(kMarkedNames, name)) return refuse(name);
    }
    // A store's index tables are not a cache's (a cache keeps none). What is not a directory here
    // is refused when the store opens it.
    UniqueFd index(::openat(dir, "index", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (index) {
      BDN_ASSIGN_OR_RETURN(auto in_index, ListNames(index.get(), (display / "index").string()));
      for (const std::string& name : in_index) {
        if (name != "lock") return refuse("index/" + name);
      }
    }
    return CacheDirKind::kMarked;
  }
  if (names.empty()) return CacheDirKind::kEmpty;
  if (names.size() == 1 && names[0] == "lost+found") {
    BDN_ASSIGN_OR_RETURN(Misfit misfit, FirstMisfitIn(dir, names[0], display,
                                                      [](int, const std::string& entry,
                                                         const fs::path&) -> Result<Misfit> {
                                                        return Misfit(entry);
                                                      }));
    if (misfit) return refuse(*misfit);
    return CacheDirKind::kEmpty;
  }
  // Names no node cache ever made first (a chunk store's gc/, BDN_HOME's registry.db), then what
  // is under the cache's names.
  for (const std::string& name : names) {
    if (!Among(kEarlierNames, name)) return refuse(name);
  }
  for (const std::string& name : names) {
    BDN_ASSIGN_OR_RETURN(Misfit misfit, JudgeEarlierEntry(dir, name, display));
    if (misfit) return refuse(*misfit);
  }
  // A node cache of either earlier layout made one of these first; a chunk store (or a copy of
  // its packs/, which alone describe a store) never has them.
  const auto has = [&names](std::string_view name) {
    return std::ranges::find(names, name) != names.end();
  };
  if (!has("evict.lock") && !has("state")) return refuse(names.front());
  return CacheDirKind::kEarlierRelease;
}

Status MarkCacheDir(int dir, const fs::path& display) {
  const std::string what = "node cache " + display.string();
  BDN_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFileAt(dir, std::string(kNodeCacheMarkerName),
                                                      O_WRONLY | O_CREAT, what));
  // An empty marker already there (judged absent) may be another user's file, or a hard link to
  // a file elsewhere that they planted: never written then.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(what, errno);
  const std::string marker = what + ": " + std::string(kNodeCacheMarkerName);
  if (st.st_uid != ::geteuid()) {
    return PermissionDeniedError(marker + " is owned by " + UidText(st.st_uid) +
                                 ", not by this user; give an empty directory or one the node "
                                 "cache made");
  }
  if (st.st_nlink != 1) {
    return PermissionDeniedError(marker + " has " + std::to_string(st.st_nlink) +
                                 " hard links (it may be a link to a file elsewhere); give an "
                                 "empty directory or one the node cache made");
  }
  const auto* text = reinterpret_cast<const uint8_t*>(kNodeCacheMarkerText.data());
  return PWriteAll(fd.get(), {text, kNodeCacheMarkerText.size()}, 0,
                   what + ": write " + std::string(kNodeCacheMarkerName));
}

}  // namespace bdn
