// Diff and verify: comparing two versions, and re-checking every chunk of one.
#pragma once

#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/volume/chunk_reader.h"
#include "bdn/volume/version_view.h"

namespace bdn {

struct DiffResult {
  std::vector<std::string> added;    // paths in B only
  std::vector<std::string> removed;  // paths in A only
  std::vector<std::string> changed;  // in both, with other kind, mode, mtime, content or target
  uint64_t fetch_bytes = 0;          // bytes of distinct chunks of B that A does not have
  uint64_t fetch_chunks = 0;
};

// Compares versions A and B entry by entry (sorted path order in each list).
// Errors: store errors while loading chunk indexes.
Result<DiffResult> DiffVersions(const VersionView& a, const VersionView& b);

struct VerifyProblem {
  std::string path;  // file path ("" for the manifest itself)
  // The chunk that is missing or corrupt; for a chunk list that cannot be had, the chunk index
  // (the one chunk of a single-chunk file); for a whole-file mismatch, the file's digest.
  Digest chunk;
  // NotFound or Corruption; the message is about the file `path` and does not name it again.
  Status status;
};

struct VerifyResult {
  uint64_t files = 0;
  uint64_t chunks = 0;  // distinct blobs checked (chunks and chunk indexes)
  uint64_t bytes = 0;
  std::vector<VerifyProblem> problems;
};

// Re-reads and re-hashes every chunk of every file (each distinct chunk once) and each file's
// whole-content digest, `jobs` files at once (0 = all cores); from a store that prefers batches,
// the chunks are read in batches (bounded by `reads`). Problems are collected, not returned as
// errors; the Result fails only on errors that stop the walk (any error other than
// NotFound/Corruption, e.g. an unreachable store while loading a chunk index or a chunk).
// With `under` ("" for all), only the file at that path or the files below that directory, and
// the files that hardlinks there link to, are checked; the caller checks that the path is in the
// version (and follows symlinks to it).
Result<VerifyResult> VerifyVersion(const VersionView& view, int jobs,
                                   const ChunkReaderOptions& reads = {},
                                   std::string_view under = "");

}  // namespace bdn
