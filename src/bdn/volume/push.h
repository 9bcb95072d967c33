// Push: seal a local directory as a version (chunk, hash, store) and commit it to the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/base/transfer_counters.h"
#include "bdn/chunk/chunker.h"
#include "bdn/format/manifest.h"
#include "bdn/format/ref.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

struct SealOptions {
  ChunkerParams chunker = ChunkerParams::Default();
  int jobs = 0;  // threads; 0 = all cores
  enum class Mtimes { kIgnore, kPreserve } mtimes = Mtimes::kIgnore;
};

struct SealResult {
  Manifest manifest;
  Digest digest;  // BLAKE3 of the encoded manifest: the version digest
  VersionStats stats;
  uint64_t chunks_uploaded = 0;  // distinct data chunks the store did not hold before
  uint64_t bytes_uploaded = 0;   // all bytes newly stored: data chunks, chunk indexes, manifest
  uint64_t chunks_reused = 0;    // data chunk references the store (or this seal) already held
  uint64_t metadata_bytes_uploaded = 0;  // the part of bytes_uploaded that is indexes + manifest
};

// Walks `dir` (never following symlinks), chunks and hashes every regular file on `jobs` threads,
// stores the chunks the store lacks, then the chunk indexes and the manifest. Nothing is committed.
// Errors: InvalidArgument "path \"x\": is a socket|FIFO|device …" for other file types or names
// that are not valid UTF-8; FailedPrecondition "file \"x\": changed while being pushed" when a
// file's size, mtime or ctime moves during the read; store errors.
Result<SealResult> SealDirectory(const std::filesystem::path& dir, const SealOptions& options,
                                 ChunkStore& store, TransferCounters* counters);

struct PushOptions {
  std::filesystem::path dir;
  std::string ns;
  std::string volume;
  std::vector<std::string> tags;
  std::string source_uri;
  std::optional<int64_t> expected_sequence;
  SealOptions seal;
};

struct PushResult {
  PinnedRef ref;
  int64_t sequence = 0;
  bool head_updated = false;
  std::vector<std::string> tags_applied;
  VersionStats stats;
  uint64_t chunks_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t chunks_reused = 0;
  uint64_t metadata_bytes_uploaded = 0;
  bool unchanged = false;
};

// Claims the volume, seals options.dir into `store`, makes the store durable, and commits the
// version with its tags in one registry transaction: the only point where it becomes visible.
// Errors: Conflict "volume …: push in progress" when another push holds the claim; the errors of
// SealDirectory and Registry::Commit. On any error nothing is committed.
Result<PushResult> Push(const PushOptions& options, ChunkStore& store, Registry& registry,
                        TransferCounters* counters);

}  // namespace bdn
