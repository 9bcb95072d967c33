#include "bdn/volume/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <optional>

#include "bdn/base/dir_fd.h"
#include "bdn/base/fd.h"
#include "bdn/base/thread_pool.h"
#include "bdn/base/units.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

bool Under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  return path == prefix || (path.size() > prefix.size() && path.starts_with(prefix) &&
                            path[prefix.size()] == '/');
}

// The times to set for entry `e` (utimensat/futimens): its recorded mtime, atime left alone;
// nullopt when the manifest records no mtimes.
std::optional<std::array<timespec, 2>> TimesOf(const Entry& e) {
  if (!e.mtime_ns) return std::nullopt;
  return std::array<timespec, 2>{timespec{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                                 ToTimespec(*e.mtime_ns)};
}

// Sets `name`'s (in `dir`; a symlink itself, not its target) recorded mtime, if there is one.
// Errors: ErrnoError "<kind> \"shown\"".
Status RestoreMtime(const Entry& e, int dir, const std::string& name, const std::string& kind,
                    const std::string& shown) {
  auto times = TimesOf(e);
  if (times && ::utimensat(dir, name.c_str(), times->data(), AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(kind + " \"" + shown + "\"", errno);
  }
  return Status::Ok();
}

bool AllZero(std::span<const uint8_t> b) {
  static const uint8_t zeros[4096] = {};
  for (size_t off = 0; off < b.size(); off += sizeof zeros) {
    size_t n = std::min(sizeof zeros, b.size() - off);
    if (std::memcmp(b.data() + off, zeros, n) != 0) return false;
  }
  return true;
}

// BLAKE3 of the regular file `name` in directory `dir`, or nullopt if it cannot be read.
std::optional<Digest> HashLocal(int dir, const std::string& name) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  Blake3Hasher h;
  std::vector<uint8_t> buf(1 << 20);
  while (true) {
    auto n = ReadFull(fd.get(), buf, name);
    if (!n) return std::nullopt;
    h.Update(buf.data(), *n);
    if (*n < buf.size()) break;
  }
  return h.Finalize();
}

// Where an entry lands: the name `name` in the directory `parent` (both relative to dest).
struct Place {
  std::string parent;
  std::string name;
};

Place PlaceOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

}  // namespace

std::string PartialFileName(std::string_view name) {
  return ".bdn-partial-" + Digest::Of(name).Hex().substr(0, 32);
}

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
  Blake3Hasher whole;
  BDN_RETURN_IF_ERROR(
      reader.Read(fc->chunks, [&](size_t, Result<std::span<const uint8_t>> bytes) -> Status {
        if (!bytes) return bytes.error().WithPrefix("file \"" + path + "\"");
        whole.Update(*bytes);
        return WriteAll(fd, *bytes, "stdout");
      }));
  // Every chunk matched its id and length, so only a manifest that lies about the file's digest
  // gets here with other bytes; they are already written, and the error says so.
  Status s = CheckFileDigest(path, f.digest, whole.Finalize());
  if (!s.ok()) return CorruptionError(s.message() + " (the bytes written are not the file's)");
  return Status::Ok();
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
  // Every step below is relative to a directory handle: paths of any length work, and walking
  // the entries in path order (each subtree one run) costs time linear in the tree.
  BDN_ASSIGN_OR_RETURN(DirCursor cursor, DirCursor::Open(dest));
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

  // Directories and symlinks first, in path order (parents before children). A symlink or file
  // where a directory is needed stops the cursor (it never goes through a symlink).
  for (const Entry* e : entries) {
    if (e->kind != EntryKind::kDirectory && e->kind != EntryKind::kSymlink) continue;
    const Place at = PlaceOf(local(e->path));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    const int dir = cursor.fd();
    struct stat st;
    bool exists = ::fstatat(dir, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (e->kind == EntryKind::kDirectory) {
      if (exists && !S_ISDIR(st.st_mode)) {
        if (!overwrite) {
          return Err(AlreadyExistsError("path \"" + cursor.Display(at.name) +
                                        "\": exists and is not a directory (use --overwrite)"));
        }
        BDN_RETURN_IF_ERROR(RemoveTree(cursor, at.name));
        exists = false;
      }
      if (!exists && ::mkdirat(cursor.fd(), at.name.c_str(), e->mode | 0700) != 0) {
        return Err(ErrnoError("directory \"" + cursor.Display(at.name) + "\"", errno));
      }
    } else {
      if (exists) {
        std::string cur(static_cast<size_t>(st.st_size) + 1, '\0');
        ssize_t n = S_ISLNK(st.st_mode) ? ::readlinkat(dir, at.name.c_str(), cur.data(), cur.size())
                                        : -1;
        if (n >= 0 && std::string(cur.data(), static_cast<size_t>(n)) == e->target) {
          BDN_RETURN_IF_ERROR(RestoreMtime(*e, dir, at.name, "symlink", cursor.Display(at.name)));
          continue;
        }
        if (!overwrite) {
          return Err(AlreadyExistsError("path \"" + cursor.Display(at.name) +
                                        "\": exists with other content (use --overwrite)"));
        }
        BDN_RETURN_IF_ERROR(RemoveTree(cursor, at.name));
      }
      if (::symlinkat(e->target.c_str(), cursor.fd(), at.name.c_str()) != 0) {
        return Err(ErrnoError("symlink \"" + cursor.Display(at.name) + "\"", errno));
      }
      BDN_RETURN_IF_ERROR(RestoreMtime(*e, dir, at.name, "symlink", cursor.Display(at.name)));
    }
  }

  // Regular files, in parallel, in path order; hardlinks whose target is not pulled become
  // plain files (a deque: the pointers to them stay valid).
  std::vector<const Entry*> files;
  std::deque<Entry> detached;
  for (const Entry* e : entries) {
    if (e->kind == EntryKind::kFile) {
      files.push_back(e);
    } else if (e->kind == EntryKind::kHardlink && !selected(view.Resolve(*e))) {
      Entry copy = view.Resolve(*e);
      copy.path = e->path;
      detached.push_back(std::move(copy));
      files.push_back(&detached.back());
    }
  }
  // Declared before the pool below, so that it outlives the tasks that read through it.
  ChunkReader reader(view.store(), options.reads);
  // Writes entry `e` as `name` in the directory `dir`; `shown` names it in messages. Returns
  // whether it was written (false: already there with the right content). Nothing is renamed
  // into place before its size and whole-file BLAKE3 are the entry's.
  auto write_file = [&](const Entry& e, int dir, const std::string& name,
                        const std::string& shown) -> Result<bool> {
    struct stat st;
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == e.size_bytes) {
        auto d = HashLocal(dir, name);
        if (d && *d == e.digest) {
          ::fchmodat(dir, name.c_str(), e.mode, 0);
          BDN_RETURN_IF_ERROR(RestoreMtime(e, dir, name, "file", shown));
          if (counters) {
            counters->bytes_done += e.size_bytes;
            ++counters->files_done;
          }
          return false;
        }
      }
      if (!overwrite) {
        return Err(AlreadyExistsError("file \"" + shown +
                                      "\": exists with other content (use --overwrite)"));
      }
    }
    // The chunk list first: a file whose list is missing, corrupt or unreachable gets no partial
    // file (an empty one would be no help to a later pull).
    auto fc = view.ChunksOf(e);
    if (!fc) return Err(fc.error());
    const std::string tmp = PartialFileName(name);
    const std::string tmp_shown = shown.substr(0, shown.size() - name.size()) + tmp;
    UniqueFd owned;
    while (true) {
      owned.Reset(::openat(dir, tmp.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!owned) return Err(ErrnoError("file \"" + tmp_shown + "\"", errno));
      if (::flock(owned.get(), LOCK_EX | LOCK_NB) != 0) {
        return Err(ConflictError("file \"" + shown + "\": another pull is writing it"));
      }
      // Another pull may have renamed this partial file into place between our open and our
      // lock; then it is that file now, and we start a partial file of our own.
      struct stat opened, named;
      if (::fstat(owned.get(), &opened) != 0) {
        return Err(ErrnoError("file \"" + tmp_shown + "\"", errno));
      }
      errno = 0;
      if (::fstatat(dir, tmp.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
          named.st_dev == opened.st_dev && named.st_ino == opened.st_ino) {
        break;
      }
      int err = errno;
      if (err != ENOENT && err != 0) return Err(ErrnoError("file \"" + tmp_shown + "\"", err));
    }
    const int fd = owned.get();
    struct stat partial;
    const uint64_t partial_bytes =
        ::fstat(fd, &partial) == 0 ? static_cast<uint64_t>(partial.st_size) : 0;
    // On a read failure the partial file stays (its chunks are verified again when the next
    // pull of this path resumes from it).
    auto fail = [&](Status s) { return Err(std::move(s)); };
    // A file whose size or digest is wrong is not worth resuming from.
    auto refuse = [&](Status s) {
      owned.Reset();
      ::unlinkat(dir, tmp.c_str(), 0);
      return Err(std::move(s));
    };
    const std::vector<ChunkRef>& chunks = (*fc)->chunks;
    // The whole file's BLAKE3 over exactly the bytes it will hold: those kept from the partial
    // file (read back from disk) and those written.
    Blake3Hasher h;
    uint64_t off = 0;
    // The leading chunks already in the partial file are kept if they hash to their ids; from
    // the first that does not, everything is fetched and rewritten.
    size_t first_fetch = 0;
    std::vector<uint8_t> have;
    for (; first_fetch < chunks.size(); ++first_fetch) {
      const ChunkRef& c = chunks[first_fetch];
      if (off + c.size_bytes > partial_bytes || off + c.size_bytes > e.size_bytes) break;
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
        [&](size_t, Result<std::span<const uint8_t>> bytes) -> Status {
          if (!bytes) return bytes.error().WithPrefix("file \"" + e.path + "\"");
          if (bytes->size() > e.size_bytes - off) {
            return CorruptionError("file \"" + e.path + "\": its chunks hold more than its size " +
                                   std::to_string(e.size_bytes) + " bytes");
          }
          h.Update(*bytes);
          // An all-zero chunk is left a hole; over old partial bytes (kept or not: those after
          // the first mismatch may hold anything) it is punched out, or written where the file
          // system cannot punch.
          const bool write =
              !AllZero(*bytes) ||
              (off < partial_bytes &&
               ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                           static_cast<off_t>(bytes->size())) != 0);
          if (write) BDN_RETURN_IF_ERROR(PWriteAll(fd, *bytes, off, "file \"" + tmp_shown + "\""));
          off += bytes->size();
          if (counters) counters->bytes_done += bytes->size();
          return Status::Ok();
        });
    // A partial file that holds nothing (the first chunk failed, e.g. shorter than the version
    // says) is no help to a later pull.
    if (!read.ok()) return off == 0 && partial_bytes == 0 ? refuse(read) : fail(read);
    if (off != e.size_bytes) {
      return refuse(CorruptionError("file \"" + e.path + "\": its chunks hold " +
                                    std::to_string(off) + " bytes, not its size " +
                                    std::to_string(e.size_bytes)));
    }
    if (h.Finalize() != e.digest) {
      return refuse(CorruptionError("file \"" + e.path + "\": content does not match its digest " +
                                    e.digest.ToString()));
    }
    auto times = TimesOf(e);
    if (::ftruncate(fd, static_cast<off_t>(e.size_bytes)) != 0 || ::fchmod(fd, e.mode) != 0 ||
        (times && ::futimens(fd, times->data()) != 0)) {
      return fail(ErrnoError("file \"" + tmp_shown + "\"", errno));
    }
    if (Status closed = owned.Close("file \"" + tmp_shown + "\""); !closed.ok()) {
      ::unlinkat(dir, tmp.c_str(), 0);
      return Err(closed);
    }
    if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
      int err = errno;
      ::unlinkat(dir, tmp.c_str(), 0);
      return Err(ErrnoError("file \"" + shown + "\"", err));
    }
    if (counters) ++counters->files_done;
    return true;
  };
  {
    int jobs = options.jobs > 0 ? options.jobs : ThreadPool::DefaultThreads();
    ThreadPool pool(jobs, static_cast<size_t>(jobs) * 2);
    std::vector<std::future<Result<bool>>> futures;
    Status first;
    // The files of one directory share one descriptor of it; this thread owns the cursor.
    for (const Entry* f : files) {
      Place at = PlaceOf(local(f->path));
      auto here = cursor.Share(at.parent);
      if (!here) {
        first = here.error();
        break;
      }
      std::string shown = cursor.Display(at.name);
      // A directory in the way is removed here, by the cursor's owner, before the file task.
      struct stat st;
      if (::fstatat(cursor.fd(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISDIR(st.st_mode)) {
        first = overwrite ? RemoveTree(cursor, at.name)
                          : AlreadyExistsError("file \"" + shown +
                                               "\": exists with other content (use --overwrite)");
        if (!first.ok()) break;
      }
      futures.push_back(pool.Submit([&, f, here = *here, name = std::move(at.name),
                                     shown = std::move(shown)] {
        return write_file(*f, here->get(), name, shown);
      }));
    }
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

  // Hardlinks, once their targets exist; a second cursor goes to each target's directory.
  std::optional<DirCursor> targets;
  for (const Entry* e : entries) {
    if (e->kind != EntryKind::kHardlink || !selected(view.Resolve(*e))) continue;
    if (!targets) {
      BDN_ASSIGN_OR_RETURN(auto t, DirCursor::Open(dest));
      targets.emplace(std::move(t));
    }
    const Place at = PlaceOf(local(e->path));
    const Place target = PlaceOf(local(e->target));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    BDN_RETURN_IF_ERROR(targets->MoveTo(target.parent));
    struct stat a, b;
    const bool exists = ::fstatat(cursor.fd(), at.name.c_str(), &a, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists &&
        ::fstatat(targets->fd(), target.name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      continue;
    }
    if (exists) {
      if (!overwrite) {
        return Err(AlreadyExistsError("file \"" + cursor.Display(at.name) +
                                      "\": exists with other content (use --overwrite)"));
      }
      BDN_RETURN_IF_ERROR(RemoveTree(cursor, at.name));
    }
    if (::linkat(targets->fd(), target.name.c_str(), cursor.fd(), at.name.c_str(), 0) != 0) {
      return Err(ErrnoError("hardlink \"" + cursor.Display(at.name) + "\"", errno));
    }
  }
  // Directory modes and recorded mtimes last, deepest first, so read-only directories do not
  // block their children and no later write inside moves a directory's mtime.
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if ((*it)->kind != EntryKind::kDirectory) continue;
    const Place at = PlaceOf(local((*it)->path));
    BDN_RETURN_IF_ERROR(cursor.MoveTo(at.parent));
    BDN_ASSIGN_OR_RETURN(DirFd d, DirFd::OpenAt(cursor.fd(), at.name, cursor.Display(at.name)));
    auto times = TimesOf(**it);
    if (::fchmod(d.get(), (*it)->mode) != 0 || (times && ::futimens(d.get(), times->data()) != 0)) {
      return Err(ErrnoError("directory \"" + cursor.Display(at.name) + "\"", errno));
    }
  }
  return result;
}

}  // namespace bdn
