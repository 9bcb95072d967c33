#include "bdn/maintenance/version_blobs.h"

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
    switch (e.layout) {
      case FileLayout::kEmpty:
        break;
      case FileLayout::kSingleChunk:
        out.push_back(e.digest);
        break;
      case FileLayout::kIndexed: {
        out.push_back(e.index);
        auto index = store.Get(e.index);
        if (!index) {
          if (index.error().code() == StatusCode::kNotFound) {
            return NotFoundError("chunk index " + e.index.ToString() + " of file \"" + e.path +
                                 "\": not in the store");
          }
          return index.error().WithPrefix("file \"" + e.path + "\"");
        }
        auto chunks = DecodeChunkIndex(*index);
        if (!chunks) return chunks.error().WithPrefix("file \"" + e.path + "\"");
        for (const ChunkRef& c : *chunks) out.push_back(c.id);
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace bdn
