// CheckVersionStored: walks a manifest and its chunk indexes (with their pieces), then asks the
// store for every chunk's stored length.
#include "bdn/volume/version_check.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"

namespace bdn {
namespace {

constexpr size_t kSizesBatch = 4096;

// Get, with NotFound turned into the commit precondition failure "<what> is not stored"; other
// errors are prefixed with `what`.
Result<std::vector<uint8_t>> GetRequired(ChunkStore& store, const Digest& id,
                                         const std::string& what) {
  auto bytes = store.Get(id);
  if (bytes) return bytes;
  if (bytes.error().code() == StatusCode::kNotFound) {
    return Err(FailedPreconditionError(what + " is not stored"));
  }
  return Err(bytes.error().WithPrefix(what));
}

// What the version says of one distinct chunk: its length, and the first file that lists it.
struct Listed {
  uint32_t size_bytes = 0;
  const std::string* path = nullptr;
};

}  // namespace

Result<VersionStats> CheckVersionStored(ChunkStore& store, const Digest& digest) {
  const std::string version = "version " + digest.ToString();
  auto manifest_bytes = GetRequired(store, digest, "manifest");
  if (!manifest_bytes) return Err(manifest_bytes.error().WithPrefix(version));
  auto manifest = DecodeManifest(*manifest_bytes);
  if (!manifest) return Err(manifest.error().WithPrefix(version));
  auto corrupt = [&](const Entry& e, const std::string& why) {
    return Err(CorruptionError(version + ": file \"" + e.path + "\": " + why));
  };

  // Totals first (no I/O): the registry keeps them as signed 64-bit numbers.
  VersionStats stats;
  stats.entries = manifest->entries.size();
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    ++stats.files;
    if (__builtin_add_overflow(stats.bytes, e.size_bytes, &stats.bytes) ||
        stats.bytes > kMaxFileBytes) {
      return corrupt(e, "the files' sizes add up to more than 2^63-1 bytes");
    }
  }

  std::vector<Digest> order;  // distinct chunks, in first-listed order
  std::unordered_map<Digest, Listed> listed;
  // The manifest and the chunk indexes read (and what each is), asked again with Sizes below:
  // a Get may answer from bytes this process still has (a pack held open, a read cache) after
  // another process's GC deleted them, while a store's Sizes answers for what is stored now
  // (LocalChunkStore after HoldForCommit, ObjectPackStore looking at the deletions first).
  std::vector<std::pair<Digest, std::string>> read_blobs = {{digest, "manifest"}};
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    auto fetch = [&](IndexPart part,
                     std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
      std::vector<IndexBlob> out;
      for (const Digest& id : ids) {
        std::string what =
            std::string(part == IndexPart::kRoot ? "chunk index " : "chunk index piece ") +
            id.ToString() + " of \"" + e.path + "\"";
        BDN_ASSIGN_OR_RETURN(auto bytes, GetRequired(store, id, what));
        read_blobs.emplace_back(id, std::move(what));
        out.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
      }
      return out;
    };
    auto index = ReadFileChunkIndex(manifest->chunker, e, fetch);
    if (!index) return Err(index.error().WithPrefix(version));
    stats.chunks += index->chunk_count;
    std::unordered_set<const std::vector<ChunkRef>*> walked;
    for (const auto& run : index->runs) {
      // A piece listed again (runs of identical content) lists nothing new.
      if (!walked.insert(run.get()).second) continue;
      for (const ChunkRef& c : *run) {
        auto [it, fresh] = listed.try_emplace(c.id, Listed{c.size_bytes, &e.path});
        if (fresh) {
          order.push_back(c.id);
        } else if (it->second.size_bytes != c.size_bytes) {
          return corrupt(e, "chunk " + c.id.ToString() + ": the version says " +
                                std::to_string(c.size_bytes) + " bytes here and " +
                                std::to_string(it->second.size_bytes) + " in file \"" +
                                *it->second.path + "\"");
        }
      }
    }
  }

  for (size_t i = 0; i < read_blobs.size(); i += kSizesBatch) {
    const size_t n = std::min(kSizesBatch, read_blobs.size() - i);
    std::vector<Digest> ids;
    for (size_t k = 0; k < n; ++k) ids.push_back(read_blobs[i + k].first);
    BDN_ASSIGN_OR_RETURN(BlobSizes sizes, store.Sizes(ids));
    for (size_t k = 0; k < n && k < sizes.size(); ++k) {
      if (!sizes[k]) {
        return Err(
            FailedPreconditionError(version + ": " + read_blobs[i + k].second + " is not stored"));
      }
    }
  }

  std::vector<Digest> missing;
  for (size_t i = 0; i < order.size(); i += kSizesBatch) {
    auto part = std::span<const Digest>(order).subspan(i, std::min(kSizesBatch, order.size() - i));
    BDN_ASSIGN_OR_RETURN(BlobSizes sizes, store.Sizes(part));
    if (sizes.size() != part.size()) {
      return Err(InternalError(version + ": the store answered " + std::to_string(sizes.size()) +
                               " sizes for " + std::to_string(part.size()) + " chunks"));
    }
    for (size_t k = 0; k < part.size(); ++k) {
      const Listed& l = listed.at(part[k]);
      if (!sizes[k]) {
        missing.push_back(part[k]);
      } else if (Status s = CheckChunkLength({part[k], l.size_bytes}, *sizes[k]); !s.ok()) {
        return Err(CorruptionError(version + ": file \"" + *l.path + "\": " + s.message()));
      }
    }
  }
  if (!missing.empty()) {
    std::string more =
        missing.size() > 1 ? " (" + std::to_string(missing.size()) + " chunks are missing)" : "";
    return Err(FailedPreconditionError(version + ": chunk " + missing[0].ToString() +
                                       " is not stored" + more));
  }
  return stats;
}

bool IsNotStoredError(const Status& s) {
  // CheckVersionStored's FailedPrecondition errors are exactly the "… is not stored" ones; the
  // message is checked too because a commit answers other 412s (a deleted version).
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find(" is not stored") != std::string::npos;
}

Result<CommitResult> CommitCheckingRegistry::Commit(const CommitRequest& req) {
  BDN_ASSIGN_OR_RETURN(auto applied, inner_->FindCommit(req));
  if (applied) return *applied;
  CommitRequest checked = req;
  // No GC sweeps between the check and the commit (store/gc_store.h).
  BDN_ASSIGN_OR_RETURN(auto hold, store_->HoldForCommit());
  BDN_ASSIGN_OR_RETURN(checked.stats, CheckVersionStored(*store_, req.digest));
  // A hold lost since the check may have let a sweep in (PostgreSQL restarted).
  BDN_RETURN_IF_ERROR(StillHeld(*hold).WithPrefix("commit"));
  checked.store_fence = hold->CommitFence();
  return inner_->Commit(checked);
}

Result<RestoreResult> CommitCheckingRegistry::RestoreVersion(
    const std::string& ns, const std::string& volume, const Digest& digest,
    std::optional<int64_t> expected_sequence, const std::string& idempotency_key,
    const std::string& /*store_fence*/) {
  // Only a deleted version needs its blobs checked; the registry answers the rest (not found,
  // not deleted, past its retention) with its own errors, which come first.
  BDN_ASSIGN_OR_RETURN(auto hold, store_->HoldForCommit());
  BDN_ASSIGN_OR_RETURN(VersionRecord v, inner_->GetVersion(ns, volume, digest));
  if (v.lifecycle == Lifecycle::kDeleted && v.delete_after_unix_ms &&
      *v.delete_after_unix_ms > WallNowMs(*clock_)) {
    if (auto checked = CheckVersionStored(*store_, digest); !checked) {
      return Err(checked.error().WithPrefix("restore"));
    }
  }
  BDN_RETURN_IF_ERROR(StillHeld(*hold).WithPrefix("restore"));
  return inner_->RestoreVersion(ns, volume, digest, expected_sequence, idempotency_key,
                                hold->CommitFence());
}

}  // namespace bdn
