// The blobs one version needs: its manifest, the chunk index (and pieces) of every indexed file,
// and every chunk (docs/format.md, "Manifest" and "Chunk index"). What GC marks and fsck checks.
#pragma once

#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// Appends to `out` the manifest `version`, the chunk index of each kIndexed file and the pieces
// of a version-2 one, and each chunk of every file (ids may repeat), reading the manifest and
// the chunk indexes from `store` (verified) with ReadFileChunkIndex, which also checks them.
// Errors: NotFound "manifest b3:…: not in the store" / "chunk index b3:… of file \"p\": not in
// the store" / "chunk index piece b3:… of file \"p\": not in the store"; Corruption for a
// manifest, chunk index or piece that does not verify or decode, or lists what its file is
// not (ReadFileChunkIndex's errors), naming it; the store's other errors.
Status CollectVersionBlobs(ChunkStore& store, const Digest& version, std::vector<Digest>& out);

}  // namespace bdn
