#include "bdn/store/migrate.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/base/thread_pool.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

constexpr size_t kThreads = 8;

struct OldFile {
  fs::path path;
  Digest id;
  uint64_t bytes = 0;
};

Result<std::vector<uint8_t>> ReadWhole(const fs::path& p) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Err(ErrnoError("chunk file " + p.string(), errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Err(ErrnoError("chunk file " + p.string(), errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  BDN_ASSIGN_OR_RETURN(size_t got, ReadFull(fd.get(), buf, "chunk file " + p.string() + ": read"));
  buf.resize(got);
  return buf;
}

}  // namespace

Result<MigrationReport> MigrateOldLayout(const fs::path& root, LocalChunkStore::Options options,
                                         TransferCounters* progress, uint64_t batch_bytes) {
  MigrationReport report;
  // One migration of a store at a time: two both copied every chunk file (each blob then stored
  // twice) and the second ended with "rename chunks/: No such file or directory". The lock is
  // the root directory's own flock, which nothing else takes.
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return Err(ErrnoError("chunk store " + root.string(), errno));
  while (::flock(root_fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return Err(ConflictError("chunk store " + root.string() +
                               ": another bdn store migrate is converting it; wait for it to end"));
    }
    return Err(ErrnoError("chunk store " + root.string() + ": lock", errno));
  }
  const fs::path chunks = root / "chunks";
  std::error_code ec;
  if (!fs::is_directory(chunks, ec)) return report;
  report.was_old_layout = true;

  // The files to move, listed first so that progress has totals.
  std::vector<OldFile> files;
  for (auto it = fs::recursive_directory_iterator(chunks, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_directory()) continue;
    auto id = Digest::Parse(it->path().filename().string());
    if (!id || it->path().parent_path().filename() != id->Hex().substr(0, 2)) {
      ++report.ignored;
      continue;
    }
    std::error_code size_ec;
    uint64_t bytes = it->file_size(size_ec);
    files.push_back({it->path(), *id, size_ec ? 0 : bytes});
  }
  if (ec) return Err(ErrnoError("chunk store " + root.string() + ": list chunks/", ec.value()));
  if (progress) {
    progress->files_total = files.size();
    for (const OldFile& f : files) progress->bytes_total += f.bytes;
  }

  options.allow_old_layout = true;
  BDN_ASSIGN_OR_RETURN(auto store, LocalChunkStore::Open(root, options));
  Mutex mu;
  Status failed;
  size_t next = 0;
  while (next < files.size()) {
    size_t end = next;
    uint64_t batch = 0;
    while (end < files.size() && (end == next || batch < batch_bytes)) {
      batch += files[end++].bytes;
    }
    std::vector<char> stored(end - next, 0);
    ParallelFor(end - next, kThreads, [&](size_t k) {
      const OldFile& f = files[next + k];
      auto bytes = ReadWhole(f.path);
      Status s;
      if (!bytes) {
        s = bytes.error();
      } else if (Digest::Of(*bytes) != f.id) {
        // As the old store did with a chunk that failed its read: kept aside, reported.
        fs::path bad = root / "corrupt" / f.id.Hex();
        s = CreatePrivateDirectory(bad.parent_path(), "chunk store");
        if (!s.ok()) {
          // reported below
        } else if (::rename(f.path.c_str(), bad.c_str()) != 0) {
          s = ErrnoError("chunk file " + f.path.string() + ": move to " + bad.string(), errno);
        } else {
          MutexLock l(mu);
          ++report.corrupt;
        }
      } else {
        s = store->Put(f.id, *bytes);
        if (s.ok()) stored[k] = 1;
      }
      MutexLock l(mu);
      if (!s.ok() && failed.ok()) failed = s;
      if (progress) {
        ++progress->files_done;
        progress->bytes_done += f.bytes;
      }
    });
    BDN_RETURN_IF_ERROR(failed);
    // Durable, and readable back, before the old copies go.
    BDN_RETURN_IF_ERROR(store->Sync());
    ParallelFor(end - next, kThreads, [&](size_t k) {
      if (!stored[k]) return;
      const OldFile& f = files[next + k];
      auto back = store->Get(f.id);
      Status s = back ? Status::Ok() : back.error();
      if (s.ok() && ::unlink(f.path.c_str()) != 0 && errno != ENOENT) {
        s = ErrnoError("chunk file " + f.path.string() + ": remove", errno);
      }
      MutexLock l(mu);
      if (!s.ok() && failed.ok()) failed = s;
      if (s.ok()) {
        ++report.blobs;
        report.bytes += f.bytes;
      }
    });
    BDN_RETURN_IF_ERROR(failed);
    next = end;
  }
  if (report.ignored > 0) {
    // Not blobs: kept, out of the way of the layout check.
    if (::rename(chunks.c_str(), (root / "chunks.not-migrated").c_str()) != 0) {
      return Err(ErrnoError("chunk store " + root.string() + ": rename chunks/", errno));
    }
  }
  fs::remove_all(chunks, ec);
  if (ec) return Err(ErrnoError("chunk store " + root.string() + ": remove chunks/", ec.value()));
  fs::remove_all(root / "tmp", ec);
  return report;
}

}  // namespace bdn
