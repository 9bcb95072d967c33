#include "bdn/volume/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "bdn/base/thread_pool.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

bool Under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  return path == prefix || (path.size() > prefix.size() && path.starts_with(prefix) &&
                            path[prefix.size()] == '/');
}

Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

bool AllZero(const std::vector<uint8_t>& b) {
  static const uint8_t zeros[4096] = {};
  for (size_t off = 0; off < b.size(); off += sizeof zeros) {
    size_t n = std::min(sizeof zeros, b.size() - off);
    if (std::memcmp(b.data() + off, zeros, n) != 0) return false;
  }
  return true;
}

// BLAKE3 of an existing local file, or nullopt if it cannot be read.
std::optional<Digest> HashLocal(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Blake3Hasher h;
  std::vector<uint8_t> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    h.Update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return h.Finalize();
}

// Fails if any existing component of `rel` under `dest` (excluding the last) is not a directory,
// so nothing is ever written through a symlink.
Status CheckNoSymlinkInPath(const fs::path& dest, const std::string& rel) {
  fs::path cur = dest;
  size_t start = 0;
  while (true) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) return Status::Ok();
    cur /= rel.substr(start, slash - start);
    struct stat st;
    if (::lstat(cur.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return FailedPreconditionError("path \"" + cur.string() +
                                     "\": not a directory (a symlink or file is in the way)");
    }
    start = slash + 1;
  }
}

}  // namespace

Status CatFile(const VersionView& view, const std::string& path, int fd,
               const ChunkReaderOptions& reads) {
  const Entry* e = view.Find(path);
  if (!e) return NotFoundError("path \"" + path + "\": not in version " + view.digest().ToString());
  const Entry& f = view.Resolve(*e);
  if (f.kind != EntryKind::kFile) {
    return InvalidArgumentError("path \"" + path + "\": is a " + std::string(EntryKindName(f.kind)) +
                                ", not a file");
  }
  BDN_ASSIGN_OR_RETURN(auto fc, view.ChunksOf(f));
  ChunkReader reader(view.store(), reads);
  return reader.Read(fc->chunks, [&](size_t, Result<std::vector<uint8_t>> bytes) -> Status {
    if (!bytes) return bytes.error().WithPrefix("file \"" + path + "\"");
    return WriteAll(fd, bytes->data(), bytes->size(), "stdout");
  });
}

Result<PullResult> Pull(const VersionView& view, const fs::path& dest, const PullOptions& options,
                        TransferCounters* counters) {
  const Entry* top = view.Find(options.path);
  if (!top) {
    return Err(NotFoundError("path \"" + options.path + "\": not in version " +
                             view.digest().ToString()));
  }
  // --include paths are relative to the pulled path; each must name an entry.
  std::vector<std::string> includes;
  for (const auto& inc : options.includes) {
    std::string full = options.path.empty() ? inc : options.path + "/" + inc;
    if (!view.Find(full)) {
      return Err(NotFoundError("--include \"" + inc + "\": no such path under \"" +
                               (options.path.empty() ? "/" : options.path) + "\" in version " +
                               view.digest().ToString()));
    }
    includes.push_back(std::move(full));
  }
  auto selected = [&](const Entry& e) {
    if (!Under(e.path, options.path)) return false;
    if (includes.empty()) return true;
    for (const auto& inc : includes) {
      if (Under(e.path, inc) || Under(inc, e.path)) return true;  // ancestors of includes too
    }
    return false;
  };
  // Where entry `p` lands, relative to dest.
  auto local = [&](const std::string& p) -> std::string {
    if (options.layout == PullOptions::Layout::kFullPaths || options.path.empty()) return p;
    if (p == options.path) {
      size_t slash = p.rfind('/');
      return slash == std::string::npos ? p : p.substr(slash + 1);
    }
    return p.substr(options.path.size() + 1);
  };
  // Parent directories of a stripped single path are not created; the top entry itself is.
  std::vector<const Entry*> entries;
  if (top->kind != EntryKind::kDirectory || !options.path.empty()) {
    if (options.layout == PullOptions::Layout::kFullPaths) {
      for (const auto& e : view.manifest().entries) {
        if (Under(options.path, e.path) && e.path != options.path) entries.push_back(&e);
      }
    }
  }
  for (const auto& e : view.manifest().entries) {
    if (selected(e)) {
      if (options.layout == PullOptions::Layout::kStripPrefix && e.path == options.path &&
          e.kind == EntryKind::kDirectory)
        continue;  // its contents go straight into dest
      entries.push_back(&e);
    }
  }

  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return Err(ErrnoError("directory \"" + dest.string() + "\"", ec.value()));
  PullResult result;
  const bool overwrite = options.existing == PullOptions::Existing::kOverwrite;
  if (counters) {
    for (const Entry* e : entries) {
      if (e->kind == EntryKind::kFile) {
        counters->bytes_total += e->size_bytes;
        ++counters->files_total;
      }
    }
  }

  // Directories and symlinks first, in path order (parents before children).
  for (const Entry* e : entries) {
    if (e->kind != EntryKind::kDirectory && e->kind != EntryKind::kSymlink) continue;
    std::string rel = local(e->path);
    fs::path p = dest / rel;
    BDN_RETURN_IF_ERROR(CheckNoSymlinkInPath(dest, rel));
    struct stat st;
    bool exists = ::lstat(p.c_str(), &st) == 0;
    if (e->kind == EntryKind::kDirectory) {
      if (exists && !S_ISDIR(st.st_mode)) {
        if (!overwrite) {
          return Err(AlreadyExistsError("path \"" + p.string() +
                                        "\": exists and is not a directory (use --overwrite)"));
        }
        fs::remove_all(p, ec);
        exists = false;
      }
      if (!exists && ::mkdir(p.c_str(), e->mode | 0700) != 0) {
        return Err(ErrnoError("directory \"" + p.string() + "\"", errno));
      }
    } else {
      if (exists) {
        std::string cur(static_cast<size_t>(st.st_size) + 1, '\0');
        ssize_t n = S_ISLNK(st.st_mode) ? ::readlink(p.c_str(), cur.data(), cur.size()) : -1;
        if (n >= 0 && std::string(cur.data(), static_cast<size_t>(n)) == e->target) continue;
        if (!overwrite) {
          return Err(AlreadyExistsError("path \"" + p.string() +
                                        "\": exists with other content (use --overwrite)"));
        }
        fs::remove_all(p, ec);
      }
      if (::symlink(e->target.c_str(), p.c_str()) != 0) {
        return Err(ErrnoError("symlink \"" + p.string() + "\"", errno));
      }
    }
  }

  // Regular files, in parallel.
  std::vector<const Entry*> files;
  std::vector<Entry> detached;  // hardlinks whose target is not pulled become plain files
  for (const Entry* e : entries) {
    if (e->kind == EntryKind::kHardlink && !selected(view.Resolve(*e))) {
      Entry copy = view.Resolve(*e);
      copy.path = e->path;
      detached.push_back(std::move(copy));
    }
  }
  for (const Entry* e : entries) {
    if (e->kind == EntryKind::kFile) files.push_back(e);
  }
  for (const Entry& e : detached) files.push_back(&e);
  // Declared before the pool below, so that it outlives the tasks that read through it.
  ChunkReader reader(view.store(), options.reads);
  auto write_file = [&](const Entry& e) -> Result<bool> {
    std::string rel = local(e.path);
    fs::path p = dest / rel;
    BDN_RETURN_IF_ERROR(CheckNoSymlinkInPath(dest, rel));
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == e.size_bytes) {
        auto d = HashLocal(p);
        if (d && *d == e.digest) {
          ::chmod(p.c_str(), e.mode);
          if (counters) {
            counters->bytes_done += e.size_bytes;
            ++counters->files_done;
          }
          return false;
        }
      }
      if (!overwrite) {
        return Err(AlreadyExistsError("file \"" + p.string() +
                                      "\": exists with other content (use --overwrite)"));
      }
      if (S_ISDIR(st.st_mode)) {
        std::error_code ec;
        fs::remove_all(p, ec);
        if (ec) return Err(ErrnoError("path \"" + p.string() + "\"", ec.value()));
      }
    }
    // The partial file is named by the content, not the file name (so long names fit, and an
    // interrupted pull of the same file resumes from the chunks already written and verified).
    fs::path tmp = p.parent_path() / (".bdn-partial-" + e.digest.Hex().substr(0, 32));
    int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Err(ErrnoError("file \"" + tmp.string() + "\"", errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return Err(ConflictError("file \"" + p.string() + "\": another pull is writing it"));
    }
    struct stat partial;
    const uint64_t partial_bytes =
        ::fstat(fd, &partial) == 0 ? static_cast<uint64_t>(partial.st_size) : 0;
    // On failure the partial file stays: the next pull of this version resumes from it.
    auto fail = [&](Status s) {
      ::close(fd);
      return Err(std::move(s));
    };
    auto fc = view.ChunksOf(e);
    if (!fc) return fail(fc.error());
    const std::vector<ChunkRef>& chunks = (*fc)->chunks;
    Blake3Hasher h;
    uint64_t off = 0;
    // The leading chunks already in the partial file are kept if they hash to their ids; from
    // the first that does not, everything is fetched and rewritten.
    size_t first_fetch = 0;
    std::vector<uint8_t> have;
    for (; first_fetch < chunks.size(); ++first_fetch) {
      const ChunkRef& c = chunks[first_fetch];
      if (off + c.size_bytes > partial_bytes) break;
      have.resize(c.size_bytes);
      if (::pread(fd, have.data(), have.size(), static_cast<off_t>(off)) !=
              static_cast<ssize_t>(have.size()) ||
          Digest::Of(have) != c.id) {
        break;
      }
      h.Update(have);
      off += c.size_bytes;
      if (counters) counters->bytes_done += c.size_bytes;
    }
    Status read = reader.Read(
        std::span(chunks).subspan(first_fetch),
        [&](size_t, Result<std::vector<uint8_t>> bytes) -> Status {
          if (!bytes) return bytes.error().WithPrefix("file \"" + e.path + "\"");
          h.Update(*bytes);
          // An all-zero chunk is left a hole; over old partial bytes (kept or not: those after
          // the first mismatch may hold anything) it is punched out, or written where the file
          // system cannot punch.
          const bool write =
              !AllZero(*bytes) ||
              (off < partial_bytes &&
               ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                           static_cast<off_t>(bytes->size())) != 0);
          if (write) {
            size_t done = 0;
            while (done < bytes->size()) {
              ssize_t n = ::pwrite(fd, bytes->data() + done, bytes->size() - done,
                                   static_cast<off_t>(off + done));
              if (n < 0) {
                if (errno == EINTR) continue;
                return ErrnoError("file \"" + tmp.string() + "\"", errno);
              }
              done += static_cast<size_t>(n);
            }
          }
          off += bytes->size();
          if (counters) counters->bytes_done += bytes->size();
          return Status::Ok();
        });
    if (!read.ok()) return fail(std::move(read));
    if (h.Finalize() != e.digest) {
      return fail(CorruptionError("file \"" + e.path + "\": content does not match its digest " +
                                  e.digest.ToString()));
    }
    if (::ftruncate(fd, static_cast<off_t>(e.size_bytes)) != 0 || ::fchmod(fd, e.mode) != 0) {
      return fail(ErrnoError("file \"" + tmp.string() + "\"", errno));
    }
    if (::close(fd) != 0) {
      ::unlink(tmp.c_str());
      return Err(ErrnoError("file \"" + tmp.string() + "\"", errno));
    }
    if (::rename(tmp.c_str(), p.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return Err(ErrnoError("file \"" + p.string() + "\"", err));
    }
    if (counters) ++counters->files_done;
    return true;
  };
  {
    int jobs = options.jobs > 0 ? options.jobs : ThreadPool::DefaultThreads();
    ThreadPool pool(jobs, static_cast<size_t>(jobs) * 2);
    std::vector<std::future<Result<bool>>> futures;
    for (const Entry* e : files) futures.push_back(pool.Submit([&, e] { return write_file(*e); }));
    Status first;
    for (size_t i = 0; i < futures.size(); ++i) {
      auto r = futures[i].get();
      if (!r) {
        if (first.ok()) first = r.error();
      } else if (*r) {
        ++result.files_written;
        result.bytes_written += files[i]->size_bytes;
      } else {
        ++result.files_skipped;
      }
    }
    if (!first.ok()) return Err(first);
  }

  // Hardlinks, once their targets exist.
  for (const Entry* e : entries) {
    if (e->kind != EntryKind::kHardlink || !selected(view.Resolve(*e))) continue;
    fs::path p = dest / local(e->path);
    fs::path target = dest / local(e->target);
    struct stat a, b;
    if (::lstat(p.c_str(), &a) == 0 && ::lstat(target.c_str(), &b) == 0 && a.st_ino == b.st_ino) {
      continue;
    }
    if (::lstat(p.c_str(), &a) == 0) {
      if (!overwrite) {
        return Err(AlreadyExistsError("file \"" + p.string() +
                                      "\": exists with other content (use --overwrite)"));
      }
      ::unlink(p.c_str());
    }
    if (::link(target.c_str(), p.c_str()) != 0) {
      return Err(ErrnoError("hardlink \"" + p.string() + "\"", errno));
    }
  }
  // Directory modes last, deepest first, so read-only directories do not block their children.
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if ((*it)->kind != EntryKind::kDirectory) continue;
    fs::path p = dest / local((*it)->path);
    if (::chmod(p.c_str(), (*it)->mode) != 0) {
      return Err(ErrnoError("directory \"" + p.string() + "\"", errno));
    }
  }
  return result;
}

}  // namespace bdn
