#include "bdn/format/chunk_index.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "bdn/format/byte_codec.h"

namespace bdn {
namespace {

using format_internal::Reader;
using format_internal::Writer;

constexpr char kIndexMagic[4] = {'B', 'D', 'N', 'I'};
constexpr uint32_t kChunkListVersion = 1;
constexpr uint32_t kPieceTableVersion = 2;
constexpr size_t kChunkEntryBytes = 36;  // id, u32 length
constexpr size_t kPieceEntryBytes = 48;  // id, u64 chunk count, u64 bytes

// Decodes the body of a version-1 object after its version field.
Result<std::vector<ChunkRef>> DecodeChunkList(Reader& r) {
  BDN_ASSIGN_OR_RETURN(uint64_t count, r.Le(8));
  if (count > r.size() / kChunkEntryBytes || count * kChunkEntryBytes != r.size() - r.pos()) {
    return Err(r.Fail("length does not match count"));
  }
  std::vector<ChunkRef> out(count);
  for (auto& c : out) {
    BDN_ASSIGN_OR_RETURN(c.id, r.Dig());
    BDN_ASSIGN_OR_RETURN(uint64_t n, r.Le(4));
    if (n == 0) return Err(r.Fail("empty chunk"));
    c.size_bytes = static_cast<uint32_t>(n);
  }
  return out;
}

// Decodes the body of a version-2 object after its version field.
Result<std::vector<ChunkIndexPiece>> DecodePieceTable(Reader& r) {
  BDN_ASSIGN_OR_RETURN(uint64_t count, r.Le(8));
  if (count == 0) return Err(r.Fail("no pieces"));
  if (count > r.size() / kPieceEntryBytes || count * kPieceEntryBytes != r.size() - r.pos()) {
    return Err(r.Fail("length does not match count"));
  }
  std::vector<ChunkIndexPiece> out(count);
  for (auto& p : out) {
    BDN_ASSIGN_OR_RETURN(p.id, r.Dig());
    BDN_ASSIGN_OR_RETURN(p.chunk_count, r.Le(8));
    if (p.chunk_count == 0 || p.chunk_count > kPieceMaxChunks) {
      return Err(r.Fail("piece of " + std::to_string(p.chunk_count) + " chunks (1 to " +
                        std::to_string(kPieceMaxChunks) + " allowed)"));
    }
    BDN_ASSIGN_OR_RETURN(p.size_bytes, r.Le(8));
  }
  return out;
}

// Decodes an object of either version; `what` names it in errors.
Result<ChunkIndexObject> DecodeObject(std::span<const uint8_t> bytes, std::string what) {
  Reader r(bytes, std::move(what));
  BDN_RETURN_IF_ERROR(r.Magic(kIndexMagic));
  BDN_ASSIGN_OR_RETURN(uint64_t version, r.Le(4));
  ChunkIndexObject out;
  out.version = static_cast<uint32_t>(version);
  if (version == kChunkListVersion) {
    BDN_ASSIGN_OR_RETURN(out.chunks, DecodeChunkList(r));
  } else if (version == kPieceTableVersion) {
    BDN_ASSIGN_OR_RETURN(out.pieces, DecodePieceTable(r));
  } else {
    return Err(r.Fail("unsupported format version " + std::to_string(version)));
  }
  return out;
}

// Decodes a version-1 object; `what` names it in errors.
Result<std::vector<ChunkRef>> DecodeChunkListObject(std::span<const uint8_t> bytes,
                                                    std::string what) {
  Reader r(bytes, std::move(what));
  BDN_RETURN_IF_ERROR(r.Magic(kIndexMagic));
  BDN_ASSIGN_OR_RETURN(uint64_t version, r.Le(4));
  if (version == kPieceTableVersion) {
    return Err(r.Fail("version 2 (a list of pieces) where a list of chunks (version 1) belongs"));
  }
  if (version != kChunkListVersion) {
    return Err(r.Fail("unsupported format version " + std::to_string(version)));
  }
  return DecodeChunkList(r);
}

// Checks a run of chunks of file `file`: each at most the chunker maximum; returns their sum,
// or nullopt on overflow.
Result<std::optional<uint64_t>> CheckRun(const ChunkerParams& chunker, const std::string& file,
                                         std::span<const ChunkRef> chunks) {
  uint64_t total = 0;
  bool overflow = false;
  for (const ChunkRef& c : chunks) {
    if (c.size_bytes > chunker.max_bytes) {
      return Err(CorruptionError(
          file + ": chunk " + c.id.ToString() + " of " + std::to_string(c.size_bytes) +
          " bytes is longer than the chunker maximum " + std::to_string(chunker.max_bytes)));
    }
    overflow = overflow || __builtin_add_overflow(total, uint64_t{c.size_bytes}, &total);
  }
  if (overflow) return std::optional<uint64_t>();
  return std::optional<uint64_t>(total);
}

std::string Sum(const std::optional<uint64_t>& total) {
  return total ? std::to_string(*total) : std::string("more than 2^64-1");
}

Result<std::vector<IndexBlob>> Fetch(const IndexFetch& fetch, IndexPart part,
                                     std::span<const Digest> ids) {
  BDN_ASSIGN_OR_RETURN(std::vector<IndexBlob> blobs, fetch(part, ids));
  if (blobs.size() != ids.size() ||
      std::any_of(blobs.begin(), blobs.end(), [](const IndexBlob& b) { return b == nullptr; })) {
    return Err(InternalError("chunk index fetch: asked for " + std::to_string(ids.size()) +
                             " blobs, got " + std::to_string(blobs.size()) + " (or a null one)"));
  }
  return blobs;
}

// The pieces of a version-2 index of file entry `e`, fetched, decoded and checked into `out`.
Status ReadPieces(const ChunkerParams& chunker, const Entry& e, const std::string& file,
                  const std::vector<ChunkIndexPiece>& pieces, const IndexFetch& fetch,
                  FileChunkIndex& out) {
  uint64_t total = 0;
  bool overflow = false;
  std::unordered_map<Digest, size_t> slot_of;  // piece id -> index into `distinct`
  std::vector<const ChunkIndexPiece*> distinct;
  for (const ChunkIndexPiece& p : pieces) {
    overflow = overflow || __builtin_add_overflow(total, p.size_bytes, &total);
    auto [it, fresh] = slot_of.try_emplace(p.id, distinct.size());
    if (fresh) {
      distinct.push_back(&p);
      continue;
    }
    const ChunkIndexPiece& first = *distinct[it->second];
    if (first.chunk_count != p.chunk_count || first.size_bytes != p.size_bytes) {
      return CorruptionError(file + ": chunk index piece " + p.id.ToString() + " is listed as " +
                             std::to_string(first.chunk_count) + " chunks of " +
                             std::to_string(first.size_bytes) + " bytes and as " +
                             std::to_string(p.chunk_count) + " chunks of " +
                             std::to_string(p.size_bytes) + " bytes");
    }
  }
  if (overflow || total != e.size_bytes) {
    return CorruptionError(file + ": chunk index pieces add up to " +
                           (overflow ? std::string("more than 2^64-1") : std::to_string(total)) +
                           " bytes, the file has " + std::to_string(e.size_bytes));
  }
  // Checked before any piece is fetched, so a lie costs no I/O.
  std::vector<std::shared_ptr<const std::vector<ChunkRef>>> runs(distinct.size());
  for (size_t begin = 0; begin < distinct.size(); begin += kPieceFetchBatch) {
    const size_t end = std::min(distinct.size(), begin + kPieceFetchBatch);
    std::vector<Digest> ids;
    ids.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) ids.push_back(distinct[i]->id);
    BDN_ASSIGN_OR_RETURN(std::vector<IndexBlob> blobs, Fetch(fetch, IndexPart::kPieces, ids));
    for (size_t i = begin; i < end; ++i) {
      const ChunkIndexPiece& p = *distinct[i];
      const std::string piece = "chunk index piece " + p.id.ToString();
      auto chunks = DecodeChunkListObject(*blobs[i - begin], piece);
      if (!chunks) return chunks.error().WithPrefix(file);
      if (chunks->size() != p.chunk_count) {
        return CorruptionError(file + ": " + piece + ": lists " + std::to_string(chunks->size()) +
                               " chunks, the chunk index says " + std::to_string(p.chunk_count));
      }
      BDN_ASSIGN_OR_RETURN(std::optional<uint64_t> sum, CheckRun(chunker, file, *chunks));
      if (!sum || *sum != p.size_bytes) {
        return CorruptionError(file + ": " + piece + ": chunks add up to " + Sum(sum) +
                               " bytes, the chunk index says " + std::to_string(p.size_bytes));
      }
      runs[i] = std::make_shared<const std::vector<ChunkRef>>(std::move(*chunks));
    }
  }
  for (const ChunkIndexPiece* p : distinct) out.blobs.push_back(p->id);
  out.runs.reserve(pieces.size());
  for (const ChunkIndexPiece& p : pieces) {
    out.runs.push_back(runs[slot_of.at(p.id)]);
    out.chunk_count += p.chunk_count;
  }
  return Status::Ok();
}

// A writer holding the 16-byte header of an object of `version` with `count` entries of
// `entry_bytes` each, room reserved for them.
Writer Header(uint32_t version, size_t count, size_t entry_bytes) {
  Writer w;
  w.Reserve(16 + entry_bytes * count);
  w.Bytes(kIndexMagic, 4);
  w.U32(version);
  w.U64(count);
  return w;
}

}  // namespace

std::string EncodeChunkIndex(std::span<const ChunkRef> chunks) {
  Writer w = Header(kChunkListVersion, chunks.size(), kChunkEntryBytes);
  for (const ChunkRef& c : chunks) {
    w.Dig(c.id);
    w.U32(c.size_bytes);
  }
  return w.Take();
}

std::string EncodePieceTable(std::span<const ChunkIndexPiece> pieces) {
  Writer w = Header(kPieceTableVersion, pieces.size(), kPieceEntryBytes);
  for (const ChunkIndexPiece& p : pieces) {
    w.Dig(p.id);
    w.U64(p.chunk_count);
    w.U64(p.size_bytes);
  }
  return w.Take();
}

Result<ChunkIndexObject> DecodeChunkIndexObject(std::span<const uint8_t> bytes) {
  return DecodeObject(bytes, "chunk index");
}

Result<std::vector<ChunkRef>> DecodeChunkIndex(std::span<const uint8_t> bytes) {
  return DecodeChunkListObject(bytes, "chunk index");
}

std::vector<size_t> PieceEnds(std::span<const ChunkRef> chunks) {
  const size_t n = chunks.size();
  if (n <= kFlatIndexMaxChunks) return {n};
  std::vector<size_t> ends;
  size_t start = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t len = k - start + 1;
    if (k + 1 == n || len == kPieceMaxChunks ||
        (len >= kPieceMinChunks && (chunks[k].id.data()[Digest::kSize - 1] & kPieceCutMask) == 0)) {
      ends.push_back(k + 1);
      start = k + 1;
    }
  }
  return ends;
}

FileIndexBlobs EncodeFileIndex(std::span<const ChunkRef> chunks) {
  FileIndexBlobs out;
  const std::vector<size_t> ends = PieceEnds(chunks);
  if (ends.size() == 1) {
    out.root = EncodeChunkIndex(chunks);
    return out;
  }
  std::vector<ChunkIndexPiece> table;
  table.reserve(ends.size());
  std::unordered_set<Digest> seen;
  size_t begin = 0;
  for (size_t end : ends) {
    std::span<const ChunkRef> run = chunks.subspan(begin, end - begin);
    std::string bytes = EncodeChunkIndex(run);
    ChunkIndexPiece p;
    p.id = Digest::Of(bytes);
    p.chunk_count = run.size();
    for (const ChunkRef& c : run) p.size_bytes += c.size_bytes;
    if (seen.insert(p.id).second) out.pieces.emplace_back(p.id, std::move(bytes));
    table.push_back(p);
    begin = end;
  }
  out.root = EncodePieceTable(table);
  return out;
}

std::vector<ChunkRef> FileChunkIndex::Flatten() const {
  std::vector<ChunkRef> out;
  out.reserve(chunk_count);
  for (const auto& run : runs) out.insert(out.end(), run->begin(), run->end());
  return out;
}

Result<FileChunkIndex> ReadFileChunkIndex(const ChunkerParams& chunker, const Entry& e,
                                          const IndexFetch& fetch) {
  const std::string file = "file \"" + e.path + "\"";
  FileChunkIndex out;
  std::vector<ChunkRef> whole;  // the one run of the layouts other than a version-2 index
  switch (e.layout) {
    case FileLayout::kEmpty:
      break;
    case FileLayout::kSingleChunk:
      // Checked before the narrowing below: the length must fit a chunk.
      if (e.size_bytes > chunker.max_bytes) {
        return Err(CorruptionError(
            file + ": chunk " + e.digest.ToString() + " of " + std::to_string(e.size_bytes) +
            " bytes is longer than the chunker maximum " + std::to_string(chunker.max_bytes)));
      }
      whole.push_back({e.digest, static_cast<uint32_t>(e.size_bytes)});
      break;
    case FileLayout::kIndexed: {
      BDN_ASSIGN_OR_RETURN(std::vector<IndexBlob> root,
                           Fetch(fetch, IndexPart::kRoot, std::span<const Digest>(&e.index, 1)));
      auto decoded = DecodeChunkIndexObject(*root[0]);
      if (!decoded) return Err(decoded.error().WithPrefix(file));
      out.blobs.push_back(e.index);
      if (decoded->version == kPieceTableVersion) {
        BDN_RETURN_IF_ERROR(ReadPieces(chunker, e, file, decoded->pieces, fetch, out));
        return out;
      }
      whole = std::move(decoded->chunks);
      break;
    }
  }
  BDN_ASSIGN_OR_RETURN(std::optional<uint64_t> total, CheckRun(chunker, file, whole));
  if (!total || *total != e.size_bytes) {
    return Err(CorruptionError(file + ": chunks add up to " + Sum(total) + " bytes, the file has " +
                               std::to_string(e.size_bytes)));
  }
  out.chunk_count = whole.size();
  if (!whole.empty())
    out.runs.push_back(std::make_shared<const std::vector<ChunkRef>>(std::move(whole)));
  return out;
}

Result<std::vector<ChunkRef>> FileChunkList(const ChunkerParams& chunker, const Entry& e,
                                            const IndexFetch& fetch) {
  BDN_ASSIGN_OR_RETURN(FileChunkIndex index, ReadFileChunkIndex(chunker, e, fetch));
  return index.Flatten();
}

IndexFetch NoIndexFetch() {
  return [](IndexPart, std::span<const Digest>) -> Result<std::vector<IndexBlob>> {
    return Err(InternalError("chunk index fetch: none given"));
  };
}

}  // namespace bdn
