#include "bdn/maintenance/version_blobs.h"

#include <unordered_set>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"

namespace bdn {

Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out) {
  auto bytes = store.Get(version);
  if (!bytes) {
    if (bytes.error().code() == StatusCode::kNotFound) {
      return NotFoundError("manifest " + version.ToString() + ": not in the store");
    }
    return bytes.error();
  }
  auto manifest = DecodeManifest(*bytes);
  if (!manifest) return manifest.error().WithPrefix("manifest " + version.ToString());
  out.push_back(version);
  for (const Entry& e : manifest->entries) {
    if (e.kind != EntryKind::kFile) continue;
    auto fetch = [&](IndexPart part, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
      std::vector<IndexBlob> blobs;
      for (const Digest& id : ids) {
        auto got = store.Get(id);
        if (!got) {
          const std::string what =
              (part == IndexPart::kRoot ? "chunk index " : "chunk index piece ") + id.ToString();
          if (got.error().code() == StatusCode::kNotFound) {
            return Err(NotFoundError(what + " of file \"" + e.path + "\": not in the store"));
          }
          return Err(got.error().WithPrefix("file \"" + e.path + "\": " + what));
        }
        blobs.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(*got)));
      }
      return blobs;
    };
    BDN_ASSIGN_OR_RETURN(FileChunkIndex index, ReadFileChunkIndex(manifest->chunker, e, fetch));
    out.insert(out.end(), index.blobs.begin(), index.blobs.end());
    std::unordered_set<const std::vector<ChunkRef>*> walked;
    for (const auto& run : index.runs) {
      if (!walked.insert(run.get()).second) continue;  // a piece listed again adds no chunk
      for (const ChunkRef& c : *run) out.push_back(c.id);
    }
  }
  return Status::Ok();
}

}  // namespace bdn
