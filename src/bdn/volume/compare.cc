#include "bdn/volume/compare.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_set>

#include "bdn/base/thread_pool.h"

namespace bdn {
namespace {

bool SameEntry(const VersionView& a, const Entry& x, const VersionView& b, const Entry& y) {
  // mtimes too, where a version records them (push --preserve-mtime): they are part of the
  // digest (from a user: two versions that differed only in mtimes diffed as "0 changed").
  if (x.kind != y.kind || x.mode != y.mode || x.target != y.target || x.mtime_ns != y.mtime_ns) {
    return false;
  }
  if (x.kind == EntryKind::kFile) return x.size_bytes == y.size_bytes && x.digest == y.digest;
  if (x.kind == EntryKind::kHardlink) {
    const Entry& rx = a.Resolve(x);
    const Entry& ry = b.Resolve(y);
    return rx.digest == ry.digest;
  }
  return true;
}

}  // namespace

Result<DiffResult> DiffVersions(const VersionView& a, const VersionView& b) {
  DiffResult out;
  const auto& ea = a.manifest().entries;
  const auto& eb = b.manifest().entries;
  size_t i = 0, j = 0;
  while (i < ea.size() || j < eb.size()) {
    if (j == eb.size() || (i < ea.size() && ea[i].path < eb[j].path)) {
      out.removed.push_back(ea[i++].path);
    } else if (i == ea.size() || eb[j].path < ea[i].path) {
      out.added.push_back(eb[j++].path);
    } else {
      if (!SameEntry(a, ea[i], b, eb[j])) out.changed.push_back(eb[j].path);
      ++i;
      ++j;
    }
  }
  std::unordered_set<Digest> have;
  for (const auto& e : ea) {
    if (e.kind != EntryKind::kFile) continue;
    BDN_ASSIGN_OR_RETURN(auto fc, a.ChunksOf(e));
    for (const auto& c : fc->chunks) have.insert(c.id);
  }
  for (const auto& e : eb) {
    if (e.kind != EntryKind::kFile) continue;
    BDN_ASSIGN_OR_RETURN(auto fc, b.ChunksOf(e));
    for (const auto& c : fc->chunks) {
      if (have.insert(c.id).second) {
        out.fetch_bytes += c.size_bytes;
        ++out.fetch_chunks;
      }
    }
  }
  return out;
}

Result<VerifyResult> VerifyVersion(const VersionView& view, int jobs,
                                   const ChunkReaderOptions& reads, std::string_view under) {
  VerifyResult out;
  Mutex mu;
  std::unordered_set<Digest> checked;
  // A problem's message is about its file, which the problem names: the readers' "file \"p\": "
  // prefix (the chunk list's and the digest check's) is dropped, so it is said once.
  auto note = [&](const std::string& path, const Digest& id, const Status& s) {
    const std::string prefix = "file \"" + path + "\": ";
    Status own =
        s.message().starts_with(prefix) ? Status(s.code(), s.message().substr(prefix.size())) : s;
    MutexLock lock(mu);
    out.problems.push_back({path, id, std::move(own)});
  };
  ChunkReader reader(view.store(), reads);  // outlives the pool below
  auto check_file = [&](const Entry& e) -> Status {
    std::shared_ptr<const FileChunks> fc;
    if (auto r = view.ChunksOf(e); r) {
      fc = *r;
    } else if (r.error().code() != StatusCode::kNotFound &&
               r.error().code() != StatusCode::kCorruption) {
      return r.error();  // an unreachable store is not a problem of the version
    } else {
      // The chunk list's own object: the chunk index, or the one chunk of a single-chunk file.
      note(e.path, e.layout == FileLayout::kIndexed ? e.index : e.digest, r.error());
      return Status::Ok();
    }
    Blake3Hasher whole;
    bool complete = true;
    BDN_RETURN_IF_ERROR(
        reader.Read(fc->chunks, [&](size_t i, Result<std::span<const uint8_t>> bytes) -> Status {
          const Digest& id = fc->chunks[i].id;
          if (!bytes) {
            if (bytes.error().code() != StatusCode::kNotFound &&
                bytes.error().code() != StatusCode::kCorruption) {
              return bytes.error();
            }
            note(e.path, id, bytes.error());
            complete = false;
            return Status::Ok();
          }
          whole.Update(*bytes);
          MutexLock lock(mu);
          if (checked.insert(id).second) {
            ++out.chunks;
            out.bytes += bytes->size();
          }
          return Status::Ok();
        }));
    if (complete) {
      if (Status s = CheckFileDigest(e.path, e.digest, whole.Finalize()); !s.ok()) {
        note(e.path, e.digest, s);
      }
    }
    return Status::Ok();
  };
  ThreadPool pool(jobs > 0 ? jobs : ThreadPool::DefaultThreads(), 64);
  std::vector<std::future<Status>> futures;
  // Below `under`: the files there, and the files that hardlinks there link to (from an
  // attacking helper: a hardlink below the path to a damaged file outside it was not checked).
  auto below = [&](const std::string& path) {
    return path == under ||
           (path.size() > under.size() && path.starts_with(under) && path[under.size()] == '/');
  };
  std::unordered_set<const Entry*> linked;
  if (!under.empty()) {
    for (const auto& e : view.manifest().entries) {
      if (e.kind == EntryKind::kHardlink && below(e.path)) linked.insert(&view.Resolve(e));
    }
  }
  auto selected = [&](const Entry& e) {
    return under.empty() || below(e.path) || linked.contains(&e);
  };
  for (const auto& e : view.manifest().entries) {
    if (e.kind != EntryKind::kFile || !selected(e)) continue;
    ++out.files;
    futures.push_back(pool.Submit([&, p = &e] { return check_file(*p); }));
  }
  Status first;
  for (auto& f : futures) {
    Status s = f.get();
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok()) return Err(first);
  // Stable: a file's problems stay in chunk order.
  std::stable_sort(out.problems.begin(), out.problems.end(),
                   [](const VerifyProblem& x, const VerifyProblem& y) { return x.path < y.path; });
  return out;
}

}  // namespace bdn
