// bdn fsck: a check of a local pack store and its registry (docs/spec.md §8): every pack's
// footer and checksum, every blob hashing to its id, the index tables against the packs, every
// live or restorable version's manifest, chunk indexes and chunks, and the registry's own
// consistency; each problem with the versions it affects. With repair, damaged copies are set
// aside (quarantine) and the index is rebuilt from the packs, so that a later push or sync of the
// same data stores good copies again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/registry/registry.h"
#include "bdn/store/local_chunk_store.h"

namespace bdn {

struct FsckProblem {
  enum class Kind {
    kPack,        // a pack whose footer or trailer fails its checks (or that is not a pack)
    kBlob,        // a stored copy that does not hash to its id, or does not decode
    kMissing,     // a blob a version needs with no good copy
    kManifest,    // a version's manifest that does not decode
    kChunkIndex,  // a chunk index (or a piece of one) that does not decode or lists what its
                  // file is not
    kIndex,       // an index table that fails its checksum, or whose entries the packs deny
    kRegistry,    // the registry disagrees with itself
  };
  Kind kind = Kind::kBlob;
  std::string object;   // what is wrong: "pack <path>", "blob b3:…", "version bdn:…", …
  std::string message;  // why
  std::vector<std::string> affects;  // versions (and files) it affects, sorted
  std::string repair;                // what --repair did about it ("" when nothing)
};

// "pack", "blob", "missing", "manifest", "chunk-index", "index", "registry".
std::string_view FsckKindName(FsckProblem::Kind k);

struct FsckReport {
  uint64_t packs = 0;
  uint64_t blobs = 0;  // records read and hashed
  uint64_t bytes = 0;  // their stored bytes
  uint64_t index_tables = 0;
  uint64_t versions = 0;  // live and restorable versions checked
  std::vector<FsckProblem> problems;
};

enum class FsckMode { kCheck, kRepair };

// Checks the pack store under `store_root` (<data>/store) and `registry` (<data>/registry.db):
// reads every pack file itself (before any store is opened, so nothing is repaired unasked),
// then every version the registry retains, then Registry::CheckConsistency. With kRepair, the
// damaged copies found are appended to <store_root>/quarantine and the index is rebuilt from the
// packs (packs without a valid footer are sealed again from their whole records); each problem
// says what was done. Errors: I/O errors reading the directories; the registry's errors.
// Problems are results, not errors.
// `options` are those the store is opened with for the repair.
Result<FsckReport> RunFsck(const std::filesystem::path& store_root, Registry& registry,
                           FsckMode mode, const LocalChunkStore::Options& options);

}  // namespace bdn
