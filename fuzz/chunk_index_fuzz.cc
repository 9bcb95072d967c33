// Fuzzes the chunk index objects and the one loader (format/chunk_index.h).
// Input: u64 file size | u16 root length | root | then pieces, each u16 length | bytes.
//  - DecodeChunkIndexObject(root) either fails with Corruption "chunk index: …" or decodes to an
//    object (version 1: no empty chunk; version 2: 1 to kPieceMaxChunks chunks per piece) whose
//    encoding is exactly the root's bytes.
//  - ReadFileChunkIndex of an indexed file of that size whose index is the root, its k-th
//    distinct piece fetched as the input's k-th piece (NotFound once they run out), under a
//    small chunker (max 1024): fails with Corruption "file \"f\": …" or the fetch's NotFound,
//    or gives a list whose chunks are 1 to 1024 bytes, add up to the file size, and number
//    chunk_count.
#include <algorithm>
#include <string>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  std::span<const uint8_t> in(data, size);
  auto le = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | in[at + i];
    return v;
  };
  if (in.size() < 10) return 0;
  const uint64_t file_size = le(0, 8);
  size_t at = 10;
  const size_t root_len = std::min<size_t>(le(8, 2), in.size() - at);
  std::span<const uint8_t> root = in.subspan(at, root_len);
  at += root_len;
  std::vector<std::vector<uint8_t>> pieces;
  while (in.size() - at >= 2) {
    const size_t n = std::min<size_t>(le(at, 2), in.size() - at - 2);
    pieces.emplace_back(in.begin() + at + 2, in.begin() + at + 2 + n);
    at += 2 + n;
  }

  auto object = DecodeChunkIndexObject(root);
  if (!object) {
    FUZZ_CHECK(fuzz::IsError(object.error(), StatusCode::kCorruption, "chunk index: "),
               object.error().ToString());
  } else {
    std::string again;
    if (object->version == 1) {
      FUZZ_CHECK(object->pieces.empty(), "version 1 with pieces");
      for (const ChunkRef& c : object->chunks) FUZZ_CHECK(c.size_bytes > 0, c.id.ToString());
      again = EncodeChunkIndex(object->chunks);
    } else {
      FUZZ_CHECK(object->version == 2 && object->chunks.empty() && !object->pieces.empty(),
                 "version " + std::to_string(object->version));
      for (const ChunkIndexPiece& p : object->pieces) {
        FUZZ_CHECK(p.chunk_count >= 1 && p.chunk_count <= kPieceMaxChunks, p.id.ToString());
      }
      again = EncodePieceTable(object->pieces);
    }
    FUZZ_CHECK(again.size() == root.size() &&
                   std::equal(root.begin(), root.end(), fuzz::Bytes(again).begin()),
               "re-encoding differs from the input");
  }

  const ChunkerParams chunker{64, 256, 1024};
  Entry e;
  e.path = "f";
  e.kind = EntryKind::kFile;
  e.size_bytes = file_size;
  e.layout = FileLayout::kIndexed;
  e.index = Digest::Of(root);
  size_t next = 0;
  auto fetch = [&](IndexPart part, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
    std::vector<IndexBlob> out;
    for (const Digest& id : ids) {
      if (part == IndexPart::kRoot) {
        out.push_back(std::make_shared<const std::vector<uint8_t>>(root.begin(), root.end()));
      } else if (next < pieces.size()) {
        out.push_back(std::make_shared<const std::vector<uint8_t>>(pieces[next++]));
      } else {
        return Err(NotFoundError("chunk " + id.ToString() + ": not in store"));
      }
    }
    return out;
  };
  auto index = ReadFileChunkIndex(chunker, e, fetch);
  if (!index) {
    FUZZ_CHECK(fuzz::IsError(index.error(), StatusCode::kCorruption, "file \"f\": ") ||
                   fuzz::IsError(index.error(), StatusCode::kNotFound, "chunk b3:"),
               index.error().ToString());
    return 0;
  }
  std::vector<ChunkRef> chunks = index->Flatten();
  FUZZ_CHECK(chunks.size() == index->chunk_count, "chunk_count");
  uint64_t total = 0;
  for (const ChunkRef& c : chunks) {
    FUZZ_CHECK(c.size_bytes >= 1 && c.size_bytes <= chunker.max_bytes, c.id.ToString());
    total += c.size_bytes;
  }
  FUZZ_CHECK(total == file_size, "chunks add up to " + std::to_string(total));
  return 0;
}
