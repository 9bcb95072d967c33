// Chunk index objects: how a file of more than one chunk lists its chunks (docs/format.md,
// "Chunk index object"), and the one loader every reader builds a file's chunk list with.
//
// A file of at most kFlatIndexMaxChunks chunks names one version-1 object, the whole list. A
// longer file names a version-2 object that lists *pieces*: each piece is a version-1 object of
// a run of the file's chunks, cut where a chunk's id says (content-defined, like the chunks
// themselves), so an insertion or edit rewrites the one or two pieces around it and the small
// version-2 object, not an index of the whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/chunk/chunker.h"
#include "bdn/digest/digest.h"
#include "bdn/format/manifest.h"

namespace bdn {

// A file of at most this many chunks has a version-1 chunk index (the whole list in one object).
inline constexpr size_t kFlatIndexMaxChunks = 1024;
// A piece ends at a chunk whose id's last byte has its low 6 bits clear (kPieceCutMask: 1 chunk
// in 64) once it holds at least kPieceMinChunks chunks, and after kPieceMaxChunks chunks in any
// case (docs/format.md, "Pieces"): about 80 chunks (2.9 KB) a piece on average.
inline constexpr size_t kPieceMinChunks = 16;
inline constexpr size_t kPieceMaxChunks = 1024;
inline constexpr uint8_t kPieceCutMask = 0x3f;

// One entry of a version-2 chunk index: a piece, and what it must list.
struct ChunkIndexPiece {
  Digest id;                 // BLAKE3 of the piece's version-1 chunk index object
  uint64_t chunk_count = 0;  // chunks it lists: 1 to kPieceMaxChunks
  uint64_t size_bytes = 0;   // the sum of their lengths
  bool operator==(const ChunkIndexPiece&) const = default;
};

// A decoded chunk index object: version 1 lists chunks, version 2 lists pieces (the other list
// is empty).
struct ChunkIndexObject {
  uint32_t version = 1;
  std::vector<ChunkRef> chunks;
  std::vector<ChunkIndexPiece> pieces;
};

// Encodes a version-1 object (magic, version 1, count, then (id, u32 length) per chunk).
std::string EncodeChunkIndex(std::span<const ChunkRef> chunks);

// Encodes a version-2 object (magic, version 2, count, then (id, u64 chunk count, u64 bytes)
// per piece). `pieces` is non-empty and each piece lists 1 to kPieceMaxChunks chunks.
std::string EncodePieceTable(std::span<const ChunkIndexPiece> pieces);

// Decodes a chunk index object of either version. Errors: Corruption "chunk index: <what>, at
// byte N": bad magic, truncation, an unknown version, a length that does not match the count,
// an empty chunk (version 1), no pieces or a piece of 0 or more than kPieceMaxChunks chunks
// (version 2).
Result<ChunkIndexObject> DecodeChunkIndexObject(std::span<const uint8_t> bytes);

// Decodes a version-1 object (a piece, or the whole list of a short file). Errors: as
// DecodeChunkIndexObject, and Corruption "chunk index: version 2 (a list of pieces) where a
// list of chunks (version 1) belongs, at byte 8".
Result<std::vector<ChunkRef>> DecodeChunkIndex(std::span<const uint8_t> bytes);

// Where a writer cuts `chunks` (a file's list, in order) into pieces: the end of each piece
// (exclusive), ascending, the last being chunks.size(). One piece for a list of at most
// kFlatIndexMaxChunks chunks. Deterministic: depends on the chunk ids only.
std::vector<size_t> PieceEnds(std::span<const ChunkRef> chunks);

// The objects a writer stores for a file of at least two chunks.
struct FileIndexBlobs {
  // The object the manifest entry names (Entry::index is its BLAKE3): version 1 when the list
  // is one piece, else version 2.
  std::string root;
  // Version 2 only: the distinct pieces, (id, object), in the order the file first lists them.
  std::vector<std::pair<Digest, std::string>> pieces;
};

// Cuts `chunks` with PieceEnds and encodes the objects. The same list always gives the same
// bytes.
FileIndexBlobs EncodeFileIndex(std::span<const ChunkRef> chunks);

// ---- Reading a file's chunk list ----

// A blob of a chunk index as a fetch returns it: verified bytes.
using IndexBlob = std::shared_ptr<const std::vector<uint8_t>>;

// Which blobs a fetch is asked for.
enum class IndexPart {
  kRoot,    // the object the manifest entry names (one id)
  kPieces,  // pieces of a version-2 object (distinct ids, at most kPieceFetchBatch)
};

// At most this many pieces are asked for in one fetch.
inline constexpr size_t kPieceFetchBatch = 64;

// Gets verified index blobs for ReadFileChunkIndex: exactly one non-null blob per id, in order,
// or an error, which ReadFileChunkIndex returns as it is (so the fetch's message names the blob,
// the file and whatever its caller needs).
using IndexFetch =
    std::function<Result<std::vector<IndexBlob>>(IndexPart part, std::span<const Digest> ids)>;

// A file's chunk list as read from its entry and its chunk index.
struct FileChunkIndex {
  // The index blobs read: the root (Entry::index), then each distinct piece in the order the
  // file first lists it. Empty for an empty or single-chunk file.
  std::vector<Digest> blobs;
  // The chunks in file order, as runs: one per piece (a piece listed twice shares its run), or
  // one run for the whole list of a version-1 index or a single-chunk file, none for an empty
  // file.
  std::vector<std::shared_ptr<const std::vector<ChunkRef>>> runs;
  uint64_t chunk_count = 0;  // chunks in all runs

  // The whole list, in file order (chunk_count entries).
  std::vector<ChunkRef> Flatten() const;
};

// Reads the chunk list of file entry `e` of a manifest whose chunker parameters are `chunker`:
// none for an empty file, the one chunk (digest, size) for a single-chunk file, else the chunk
// index `e.index` and, for a version-2 index, its pieces, got with `fetch` (never called for
// the other layouts; each distinct piece is fetched once). Checks what every reader relies on
// before it sizes or indexes memory with these numbers (docs/format.md, "Rules a reader
// enforces"): each chunk is 1 to chunker.max_bytes long and the lengths add up to the entry's
// size; for version 2, the pieces' sizes add up to the file's size, each piece is a version-1
// object listing exactly the chunks and bytes the index says, and a piece listed twice is
// listed alike. Memory: the distinct pieces' chunks, plus one pointer per piece.
// Errors: the fetch's, as they are; Corruption "file \"p\": …": "chunk index: …" (the root
// does not decode), "chunk index piece b3:…: …" (a piece does not decode), "chunk b3:… of N
// bytes is longer than the chunker maximum M", "chunks add up to N bytes, the file has M" (N
// is "more than 2^64-1" on overflow), "chunk index pieces add up to N bytes, the file has M",
// "chunk index piece b3:…: lists N chunks, the chunk index says M", "chunk index piece b3:…:
// chunks add up to N bytes, the chunk index says M", "chunk index piece b3:… is listed as N
// chunks of M bytes and as N' chunks of M' bytes"; Internal if the fetch answers a different
// number of blobs than asked for.
Result<FileChunkIndex> ReadFileChunkIndex(const ChunkerParams& chunker, const Entry& e,
                                          const IndexFetch& fetch);

// ReadFileChunkIndex(...).Flatten(): the file's chunks in order. Errors: ReadFileChunkIndex's.
Result<std::vector<ChunkRef>> FileChunkList(const ChunkerParams& chunker, const Entry& e,
                                            const IndexFetch& fetch);

// A fetch for files with no chunk index (empty, single chunk): fails with Internal if called.
IndexFetch NoIndexFetch();

}  // namespace bdn
