// The commit precondition: a version may become visible only when its manifest, every chunk
// index it names and every chunk those list are stored.
#pragma once

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"

namespace bdn::origin {

// Checks that version `digest` is complete in `store` and returns its stats, computed from the
// manifest (files, bytes, chunk references, entries: as push computes them).
// Errors: FailedPrecondition "version b3:…: manifest is not stored",
// "version b3:…: chunk index b3:… of \"path\" is not stored" or
// "version b3:…: chunk b3:… is not stored" (plus " (N chunks are missing)" when several are);
// Corruption "version b3:…: …" when the manifest or an index does not decode or disagrees with
// a file's size, or a stored blob fails verification; Internal/Unavailable from the store.
// Thread-safe if `store` is.
Result<VersionStats> CheckVersionStored(ChunkStore& store, const Digest& digest);

}  // namespace bdn::origin
