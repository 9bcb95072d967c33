// Converting a store of the old one-file-per-chunk layout (store/chunks/<2 hex>/<64 hex>) into
// packs, in place (`bdn store migrate`).
#pragma once

#include <cstdint>
#include <filesystem>

#include "bdn/base/status.h"
#include "bdn/base/transfer_counters.h"
#include "bdn/store/local_chunk_store.h"

namespace bdn {

struct MigrationReport {
  bool was_old_layout = false;  // false: nothing to do, the store was in packs already
  uint64_t blobs = 0;           // chunk files now in packs (stored, or found stored already)
  uint64_t bytes = 0;           // their bytes
  uint64_t corrupt = 0;  // chunk files whose bytes do not hash to their name: moved to corrupt/
  uint64_t ignored =
      0;  // files under chunks/ whose name is not a blob id: kept in chunks.not-migrated/
};

// Moves every blob of the old layout under `root` into packs: each chunk file is read and
// verified (a file whose bytes do not hash to its name is moved to root/corrupt/<hex> and
// reported, as the old store did), stored in packs, and, once a batch of ~`batch_bytes` is durable
// (Sync) and read back verified, its files are deleted. When every file is gone, chunks/ and the
// old tmp/ are removed: from then on the store opens normally. Resumable: a migration that is
// killed leaves every blob either in its old file or in a durable pack (or both); running it
// again finishes the work, storing nothing twice. `options` are the pack store's (its
// allow_old_layout is set here). `progress` (may be null) counts chunk files as files and their
// bytes.
// One migration at a time per root (an exclusive flock on the root directory).
// Errors: Conflict "chunk store <root>: another bdn store migrate is converting it; wait for it
// to end"; ErrnoError naming the file on I/O errors; the pack store's Put/Sync errors.
Result<MigrationReport> MigrateOldLayout(const std::filesystem::path& root,
                                         LocalChunkStore::Options options,
                                         TransferCounters* progress,
                                         uint64_t batch_bytes = uint64_t{256} << 20);

}  // namespace bdn
