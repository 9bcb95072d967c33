// VersionView: a sealed version's manifest loaded from a ChunkStore, with path lookup, directory
// listing and per-file chunk lists, and verified reads of file byte ranges.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/fetch_core.h"

namespace bdn {

// A file's chunk list with cumulative offsets: chunk i covers [offsets[i], offsets[i+1]).
struct FileChunks {
  std::vector<ChunkRef> chunks;
  std::vector<uint64_t> offsets;  // chunks.size() + 1 entries; offsets.back() == file size

  // Index of the chunk holding byte `offset` (offset < size).
  size_t ChunkAt(uint64_t offset) const;
};

// Immutable after Open except for the chunk-list cache (ChunksOf); thread-safe.
class VersionView {
 public:
  // Loads and decodes the manifest blob `digest` from `store`. Callers open versions the registry
  // lists, so a manifest the store lacks is lost data, not a missing version.
  // Errors: Corruption "manifest b3:…: not in the store (the version's data is lost; push it
  // again to repair)" when the store has no such blob; the store's other errors, Corruption for
  // bytes that fail verification ("manifest b3:…: …"); Corruption from decoding
  // ("version b3:…: manifest: …", e.g. a file size no reader can hold).
  static Result<std::shared_ptr<VersionView>> Open(std::shared_ptr<ChunkStore> store,
                                                   const Digest& digest);

  const Digest& digest() const { return digest_; }
  const Manifest& manifest() const { return manifest_; }
  ChunkStore& store() const { return *store_; }

  // The entry at `path` ("" is the root, returned as a synthetic directory), or nullptr.
  const Entry* Find(std::string_view path) const;
  // The entry at `path` with every symlink on the way followed inside the version, as open(2)
  // follows them on the mount (relative targets only; at most kMaxSymlinkHops links). Errors:
  // NotFound "path \"p\": not in version b3:…" (no link followed) or "path \"p\": \"r\" is not
  // in version b3:… (through symlink \"l\" -> \"t\")" (r: the path the links led to);
  // InvalidArgument "path \"p\": symlink
  // \"l\" points to \"t\", outside the version" (an absolute target, or `..` above the root),
  // "path \"p\": \"d\" is a <kind>, not a directory", "path \"p\": more than 40 symlinks".
  Result<const Entry*> FindFollowing(std::string_view path) const;
  static constexpr int kMaxSymlinkHops = 40;  // Linux's MAXSYMLINKS
  // Follows a hardlink to the file entry it links to; other entries are returned unchanged.
  const Entry& Resolve(const Entry& e) const;
  // Indexes into manifest().entries of the direct children of directory `path`, in path order.
  const std::vector<size_t>& Children(std::string_view dir_path) const;
  // Entry index of `e` (which must belong to this view).
  size_t IndexOf(const Entry& e) const {
    return static_cast<size_t>(&e - manifest_.entries.data());
  }

  // Chunk list of a file entry (hardlinks resolved), read with ReadFileChunkIndex (the one
  // loader: its chunk index, and for a version-2 index its pieces, fetched with `fetch`;
  // default: the store, pieces as one ReadBlobs batch per kPieceFetchBatch) and kept, so each
  // index is read once per view (the one chunk-index cache: pull, cat, verify, diff and the mount
  // all read lists through it); the list of an empty or single-chunk file is built from the
  // entry each time. The list is checked by ReadFileChunkIndex (each chunk 1 to
  // chunker-maximum bytes, the lengths add up to the entry's size, the pieces agree with the
  // index), so offsets into it stay inside the file. Concurrent first calls for one file may
  // each load the index (a fetch that shares fetches, as the mount's ChunkCache, fetches it
  // once); all of them return the list kept first.
  // Errors: InvalidArgument "path \"p\": is a <kind>, not a file"; the fetch's (the store's),
  // prefixed "file \"path\": chunk index" (the root) or "file \"path\": chunk index piece";
  // Corruption "file \"path\": …" from ReadFileChunkIndex.
  Result<std::shared_ptr<const FileChunks>> ChunksOf(const Entry& e) const;
  Result<std::shared_ptr<const FileChunks>> ChunksOf(const Entry& e, const IndexFetch& fetch) const;

  // The chunk list of file entry `e` (hardlinks resolved) if it is known without I/O: empty and
  // single-chunk files (built anew), and indexed files whose index ChunksOf loaded. Else nullptr
  // (also for entries that are not files, and for a list that fails ReadFileChunkIndex's checks:
  // ChunksOf says why).
  std::shared_ptr<const FileChunks> KnownChunks(const Entry& e) const;

  // Reads [offset, offset + out.size()) of a file entry into `out`, stopping at EOF; returns the
  // bytes read. Every chunk is verified, and its length checked against the chunk list; a bad
  // one gives Corruption naming the file and the chunk ("file \"p\": chunk b3:…: digest
  // mismatch …" or "file \"p\": chunk b3:…: is N bytes, the version says M").
  Result<size_t> Read(const Entry& e, uint64_t offset, std::span<uint8_t> out) const;

 private:
  VersionView() = default;
  std::shared_ptr<ChunkStore> store_;
  Digest digest_;
  Manifest manifest_;
  Entry root_;
  std::unordered_map<std::string_view, size_t> by_path_;
  std::unordered_map<std::string_view, std::vector<size_t>> children_;
  std::vector<size_t> no_children_;
  // Keeps `fc` as the list of entry `key` unless one is kept already; returns the kept one.
  std::shared_ptr<const FileChunks> KeepChunks(size_t key,
                                               std::shared_ptr<const FileChunks> fc) const;
  mutable Mutex mu_;
  mutable std::unordered_map<size_t, std::shared_ptr<const FileChunks>> chunks_cache_
      GUARDED_BY(mu_);  // by entry
};

// Checks a file's whole-content BLAKE3 `got` (what b3sum prints) against `want`, the entry's
// digest; `path` names the file. Errors: Corruption "file \"path\": content does not match its
// digest b3:…".
Status CheckFileDigest(std::string_view path, const Digest& want, const Digest& got);

// Builds FileChunks from a chunk list.
std::shared_ptr<const FileChunks> MakeFileChunks(std::vector<ChunkRef> chunks);

}  // namespace bdn
