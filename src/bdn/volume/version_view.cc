#include "bdn/volume/version_view.h"

#include <algorithm>
#include <cstring>

namespace bdn {

size_t FileChunks::ChunkAt(uint64_t offset) const {
  auto it = std::upper_bound(offsets.begin(), offsets.end(), offset);
  return static_cast<size_t>(it - offsets.begin()) - 1;
}

Status CheckFileDigest(std::string_view path, const Digest& want, const Digest& got) {
  if (got == want) return Status::Ok();
  return CorruptionError("file \"" + std::string(path) + "\": content does not match its digest " +
                         want.ToString());
}

std::shared_ptr<const FileChunks> MakeFileChunks(std::vector<ChunkRef> chunks) {
  auto fc = std::make_shared<FileChunks>();
  fc->offsets.reserve(chunks.size() + 1);
  uint64_t off = 0;
  fc->offsets.push_back(0);
  for (const auto& c : chunks) {
    off += c.size_bytes;
    fc->offsets.push_back(off);
  }
  fc->chunks = std::move(chunks);
  return fc;
}

Result<std::shared_ptr<VersionView>> VersionView::Open(std::shared_ptr<ChunkStore> store,
                                                       const Digest& digest) {
  auto bytes = store->Get(digest);
  if (!bytes && bytes.error().code() == StatusCode::kNotFound) {
    // A corrupt copy may have been moved aside by an earlier read: still corruption (exit 5),
    // not a version that does not exist (exit 3).
    return Err(CorruptionError("manifest " + digest.ToString() +
                               ": not in the store (the version's data is lost; push it again "
                               "to repair)"));
  }
  if (!bytes) return Err(bytes.error().WithPrefix("manifest " + digest.ToString()));
  auto decoded = DecodeManifest(*bytes);
  if (!decoded) return Err(decoded.error().WithPrefix("version " + digest.ToString()));
  Manifest m = std::move(*decoded);
  std::shared_ptr<VersionView> v(new VersionView());
  v->store_ = std::move(store);
  v->digest_ = digest;
  v->manifest_ = std::move(m);
  v->root_.kind = EntryKind::kDirectory;
  v->root_.mode = 0755;
  const auto& entries = v->manifest_.entries;
  v->by_path_.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string_view p = entries[i].path;
    v->by_path_.emplace(p, i);
    size_t slash = p.rfind('/');
    std::string_view parent = slash == std::string_view::npos ? "" : p.substr(0, slash);
    v->children_[parent].push_back(i);
  }
  return v;
}

const Entry* VersionView::Find(std::string_view path) const {
  if (path.empty()) return &root_;
  auto it = by_path_.find(path);
  return it == by_path_.end() ? nullptr : &manifest_.entries[it->second];
}

Result<const Entry*> VersionView::FindFollowing(std::string_view path) const {
  const std::string shown = "path \"" + std::string(path) + "\"";
  // Components still to walk, the next last; the walked ones, none of them a symlink.
  std::vector<std::string> todo;
  auto push_components = [&](std::string_view p) {
    std::vector<std::string> parts;
    for (size_t at = 0; at <= p.size();) {
      size_t slash = std::min(p.find('/', at), p.size());
      parts.emplace_back(p.substr(at, slash - at));
      at = slash + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_components(path);
  std::string walked;
  const Entry* last_link = nullptr;  // the link whose target is being walked, for errors
  auto outside = [&] {
    return InvalidArgumentError(shown + ": symlink \"" + last_link->path + "\" points to \"" +
                                last_link->target + "\", outside the version");
  };
  int hops = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part.empty() || part == ".") continue;  // only link targets hold these
    if (part == "..") {
      if (walked.empty()) return Err(outside());
      size_t slash = walked.rfind('/');
      walked.resize(slash == std::string::npos ? 0 : slash);
      continue;
    }
    std::string next = walked.empty() ? part : walked + "/" + part;
    const Entry* e = Find(next);
    if (!e) {
      if (!last_link) {
        return Err(NotFoundError(shown + ": not in version " + digest_.ToString()));
      }
      return Err(NotFoundError(shown + ": \"" + next + "\" is not in version " +
                               digest_.ToString() + " (through symlink \"" + last_link->path +
                               "\" -> \"" + last_link->target + "\")"));
    }
    if (e->kind == EntryKind::kSymlink) {
      if (++hops > kMaxSymlinkHops) {
        return Err(InvalidArgumentError(shown + ": more than " + std::to_string(kMaxSymlinkHops) +
                                        " symlinks"));
      }
      last_link = e;
      if (e->target.empty() || e->target[0] == '/') return Err(outside());
      push_components(e->target);
      continue;
    }
    if (!todo.empty() && e->kind != EntryKind::kDirectory) {
      return Err(InvalidArgumentError(shown + ": \"" + e->path + "\" is a " +
                                      std::string(EntryKindName(Resolve(*e).kind)) +
                                      ", not a directory"));
    }
    walked = std::move(next);
  }
  return Find(walked);
}

const Entry& VersionView::Resolve(const Entry& e) const {
  if (e.kind != EntryKind::kHardlink) return e;
  const Entry* t = Find(e.target);
  return t ? *t : e;  // DecodeManifest guarantees the target exists
}

const std::vector<size_t>& VersionView::Children(std::string_view dir_path) const {
  auto it = children_.find(dir_path);
  return it == children_.end() ? no_children_ : it->second;
}

std::shared_ptr<const FileChunks> VersionView::KeepChunks(
    size_t key, std::shared_ptr<const FileChunks> fc) const {
  MutexLock lock(mu_);
  return chunks_cache_.try_emplace(key, std::move(fc)).first->second;
}

std::shared_ptr<const FileChunks> VersionView::KnownChunks(const Entry& entry) const {
  const Entry& e = Resolve(entry);
  if (e.kind != EntryKind::kFile) return nullptr;
  const size_t key = IndexOf(e);
  {
    MutexLock lock(mu_);
    if (auto it = chunks_cache_.find(key); it != chunks_cache_.end()) return it->second;
  }
  if (e.layout == FileLayout::kIndexed) return nullptr;
  // Built from the entry alone, so not kept: a mount of a million small files would otherwise
  // hold a list per file it ever opened. A list that fails its checks is not known: ChunksOf
  // reports why.
  auto chunks = FileChunkList(manifest_.chunker, e, NoIndexFetch());
  return chunks ? MakeFileChunks(std::move(*chunks)) : nullptr;
}

Result<std::shared_ptr<const FileChunks>> VersionView::ChunksOf(const Entry& entry) const {
  return ChunksOf(
      entry, [this](IndexPart part, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
        std::vector<IndexBlob> out;
        out.reserve(ids.size());
        if (part == IndexPart::kRoot) {
          for (const Digest& id : ids) {
            BDN_ASSIGN_OR_RETURN(auto bytes, store_->Get(id));
            out.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
          }
          return out;
        }
        // One GetMany per batch of pieces from a store that prefers batches (a remote tier).
        for (auto& got : ReadBlobs(*store_, ids, BatchFailure::kReadEachAlone)) {
          if (!got) return Err(got.error());
          out.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(*got)));
        }
        return out;
      });
}

Result<std::shared_ptr<const FileChunks>> VersionView::ChunksOf(const Entry& entry,
                                                                const IndexFetch& fetch) const {
  const Entry& e = Resolve(entry);
  if (e.kind != EntryKind::kFile) {
    return Err(InvalidArgumentError("path \"" + e.path + "\": is a " +
                                    std::string(EntryKindName(e.kind)) + ", not a file"));
  }
  if (auto known = KnownChunks(e)) return known;
  if (e.layout != FileLayout::kIndexed) {
    BDN_ASSIGN_OR_RETURN(auto chunks, FileChunkList(manifest_.chunker, e, NoIndexFetch()));
    return MakeFileChunks(std::move(chunks));
  }
  auto named = [&](IndexPart part, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
    auto blobs = fetch(part, ids);
    if (!blobs) {
      return Err(blobs.error().WithPrefix("file \"" + e.path + "\": chunk index" +
                                          (part == IndexPart::kPieces ? " piece" : "")));
    }
    return blobs;
  };
  BDN_ASSIGN_OR_RETURN(auto chunks, FileChunkList(manifest_.chunker, e, named));
  return KeepChunks(IndexOf(e), MakeFileChunks(std::move(chunks)));
}

Result<size_t> VersionView::Read(const Entry& entry, uint64_t offset,
                                 std::span<uint8_t> out) const {
  const Entry& e = Resolve(entry);
  BDN_ASSIGN_OR_RETURN(auto fc, ChunksOf(e));
  if (offset >= e.size_bytes || out.empty()) return size_t{0};
  // Written so that it cannot overflow: offset < size.
  uint64_t end = offset + std::min<uint64_t>(e.size_bytes - offset, out.size());
  size_t done = 0;
  for (size_t i = fc->ChunkAt(offset); offset < end; ++i) {
    auto bytes = store_->Get(fc->chunks[i].id);
    if (!bytes) return Err(bytes.error().WithPrefix("file \"" + e.path + "\""));
    // The chunk list is checked against the file's size; this checks it against the bytes.
    if (Status s = CheckChunkLength(fc->chunks[i], bytes->size()); !s.ok()) {
      return Err(s.WithPrefix("file \"" + e.path + "\""));
    }
    uint64_t in_chunk = offset - fc->offsets[i];
    uint64_t n = std::min<uint64_t>(end - offset, fc->chunks[i].size_bytes - in_chunk);
    std::memcpy(out.data() + done, bytes->data() + in_chunk, n);
    done += n;
    offset += n;
  }
  return done;
}

}  // namespace bdn
