// Manifest: the canonical, byte-exact description of a sealed version; its BLAKE3 is the
// version digest. A large file's chunk list is in chunk index objects (format/chunk_index.h).
// The byte layout is specified in docs/format.md.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/chunk/chunker.h"
#include "bdn/digest/digest.h"

namespace bdn {

enum class EntryKind : uint8_t { kDirectory = 1, kFile = 2, kSymlink = 3, kHardlink = 4 };

// How a file's bytes are found.
enum class FileLayout : uint8_t {
  kEmpty = 0,        // size 0, no chunks
  kSingleChunk = 1,  // one chunk whose id is the file digest
  kIndexed = 2,      // chunk list in a chunk index object, referenced by its digest
                     // (format/chunk_index.h)
};

// One chunk of a file: its id (BLAKE3 of its raw bytes) and its length in bytes.
struct ChunkRef {
  Digest id;
  uint32_t size_bytes = 0;
  bool operator==(const ChunkRef&) const = default;
};

// One entry of a version's tree.
struct Entry {
  std::string path;  // relative, '/'-separated UTF-8; never empty (the root is implicit)
  EntryKind kind = EntryKind::kFile;
  uint16_t mode = 0;  // permission bits, mode & 0777
  // kFile: content size; others: 0.
  uint64_t size_bytes = 0;
  // kFile: BLAKE3 of the whole content (what b3sum prints).
  Digest digest;
  FileLayout layout = FileLayout::kEmpty;
  // kFile with kIndexed layout: digest of the chunk index object.
  Digest index;
  // kSymlink: the link target, verbatim. kHardlink: path of the kFile entry it links to.
  std::string target;
  // Only when the manifest records mtimes (--preserve-mtime).
  std::optional<int64_t> mtime_ns;

  bool operator==(const Entry&) const = default;
};

// A version's tree. Entries are sorted by path (bytewise) with no duplicates; every parent
// directory of an entry is itself a kDirectory entry.
struct Manifest {
  ChunkerParams chunker;
  bool has_mtimes = false;
  std::vector<Entry> entries;

  bool operator==(const Manifest&) const = default;
};

// Encodes `m` canonically (docs/format.md, "Manifest"). Entries must already satisfy the
// Manifest invariants; errors: InvalidArgument naming the offending entry.
Result<std::string> EncodeManifest(const Manifest& m);

// Decodes and validates manifest bytes. Errors: Corruption "manifest: <what>, at byte N" for
// truncation, bad magic, unknown version/kind/layout/flags, or trailing bytes; Corruption
// "manifest: path \"p\": <what>" for unsorted or duplicate paths, invalid paths, missing
// parents, dangling hardlinks, a file size over kMaxFileBytes, or a single-chunk file longer
// than the chunker maximum.
Result<Manifest> DecodeManifest(std::span<const uint8_t> bytes);

// Checks the length of chunk `ref`'s real bytes (as stored or received) against the length the
// version gives it. Every reader calls it before using the bytes at the version's offsets; a
// mismatch means the manifest or chunk index lies about the chunk (the id fixes the bytes).
// Errors: Corruption "chunk b3:…: is N bytes, the version says M".
Status CheckChunkLength(const ChunkRef& ref, uint64_t real_bytes);

// The largest file size a manifest may hold: 2^63-1, so that every size and offset fits a signed
// 64-bit file offset (off_t).
inline constexpr uint64_t kMaxFileBytes = static_cast<uint64_t>(INT64_MAX);

// Checks a path as stored in a manifest: non-empty, valid UTF-8, no NUL, no leading or trailing
// '/', no empty, "." or ".." segments. Errors: InvalidArgument "path \"p\": <reason>".
Status ValidateEntryPath(std::string_view path);

// "directory", "file", "symlink", "hardlink".
std::string_view EntryKindName(EntryKind kind);

}  // namespace bdn
