// CheckVersionStored: walks a manifest and its chunk indexes and asks the store for every blob.
#include "bdn/origin/version_check.h"

#include <unordered_set>
#include <vector>

#include "bdn/format/manifest.h"

namespace bdn::origin {
namespace {

constexpr size_t kFindMissingBatch = 4096;

// Get, with NotFound turned into the commit precondition failure.
Result<std::vector<uint8_t>> GetRequired(ChunkStore& store, const Digest& id,
                                         const std::string& prefix, const std::string& what) {
  auto bytes = store.Get(id);
  if (bytes) return bytes;
  if (bytes.error().code() == StatusCode::kNotFound) {
    return Err(FailedPreconditionError(prefix + what + " is not stored"));
  }
  return Err(bytes.error().WithPrefix(prefix.substr(0, prefix.size() - 2)));
}

}  // namespace

Result<VersionStats> CheckVersionStored(ChunkStore& store, const Digest& digest) {
  const std::string prefix = "version " + digest.ToString() + ": ";
  BDN_ASSIGN_OR_RETURN(auto manifest_bytes, GetRequired(store, digest, prefix, "manifest"));
  auto manifest = DecodeManifest(manifest_bytes);
  if (!manifest) return Err(manifest.error().WithPrefix(prefix.substr(0, prefix.size() - 2)));

  VersionStats stats;
  stats.entries = manifest->entries.size();
  std::vector<Digest> chunks;
  std::unordered_set<Digest> seen;
  auto add = [&](const Digest& id) {
    if (seen.insert(id).second) chunks.push_back(id);
  };
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    ++stats.files;
    stats.bytes += e.size_bytes;
    switch (e.layout) {
      case FileLayout::kEmpty:
        break;
      case FileLayout::kSingleChunk:
        ++stats.chunks;
        add(e.digest);
        break;
      case FileLayout::kIndexed: {
        std::string what = "chunk index " + e.index.ToString() + " of \"" + e.path + "\"";
        BDN_ASSIGN_OR_RETURN(auto index_bytes, GetRequired(store, e.index, prefix, what));
        auto refs = DecodeChunkIndex(index_bytes);
        if (!refs) return Err(refs.error().WithPrefix(prefix + what));
        uint64_t total = 0;
        for (const ChunkRef& r : *refs) {
          total += r.size_bytes;
          add(r.id);
        }
        if (total != e.size_bytes) {
          return Err(CorruptionError(prefix + what + ": lists " + std::to_string(total) +
                                     " bytes, the file has " + std::to_string(e.size_bytes)));
        }
        stats.chunks += refs->size();
        break;
      }
    }
  }

  std::vector<Digest> missing;
  for (size_t i = 0; i < chunks.size(); i += kFindMissingBatch) {
    size_t n = std::min(kFindMissingBatch, chunks.size() - i);
    BDN_ASSIGN_OR_RETURN(auto m, store.FindMissing(std::span(chunks).subspan(i, n)));
    missing.insert(missing.end(), m.begin(), m.end());
  }
  if (!missing.empty()) {
    std::string more =
        missing.size() > 1 ? " (" + std::to_string(missing.size()) + " chunks are missing)" : "";
    return Err(FailedPreconditionError(prefix + "chunk " + missing[0].ToString() +
                                       " is not stored" + more));
  }
  return stats;
}

}  // namespace bdn::origin
