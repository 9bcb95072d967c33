// Test support: named versions whose manifest or chunk index lies about the bytes they have
// (issue 7 item 1, issue 14 item 6), built with the format encoder. Shared by the unit tests and
// tests/tools/bdn_craft, which stores them for the integration tests.
#pragma once

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/crafted_test_util.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"

namespace bdn::testing {

// A version's blobs in upload order (chunks, chunk indexes, then the manifest, whose digest is
// the version's).
struct CraftedVersion {
  Digest digest;
  std::vector<std::pair<Digest, std::string>> blobs;
};

// Every case also holds "ok.txt" ("fine\n", one chunk), which every reader still serves.
//  - overlong-chunks: "f.bin" indexed, the 6-byte chunk "hello\n" listed twice as 10 bytes; size
//    20; digest = BLAKE3("hello\nhello\n") (what its chunks hold, not what a 20-byte file would).
//  - overlong-single: "f.bin" a single chunk "hello\n" declared 999 bytes.
//  - wrong-digest: "f.bin" indexed, chunks "hello\n" and "world\n" with the right lengths (12
//    bytes), digest = BLAKE3("something else").
//  - huge-single: "f.bin" a single chunk "hello\n" declared 4 GiB (the decoder refuses it).
//  - huge-pair: "a.bin" and "b.bin", single chunks "hello\n" declared 2^64-1 bytes each.
//  - huge-total: "a.bin" and "b.bin" indexed, 2^62 bytes each (sizes add up to 2^63); their
//    indexes ("hello\n" once) are stored but do not cover them.
//  - short-index: "f.bin" indexed, size 12, digest BLAKE3("hello\nworld\n"), but its index
//    lists only "hello\n" (6 bytes): the chunk list leaves the file's last 6 bytes uncovered.
//  - non-utf8-name: "caf\xe9.txt" (Latin-1, not UTF-8), a single chunk "hello\n" (the decoder
//    refuses the name; a store written behind the registry's back could hold it).
//  - good: "f.bin" indexed over "hello\n" and "world\n", right lengths and digest.
inline CraftedVersion Craft(std::string_view name) {
  auto bytes_of = [](std::string_view s) { return std::string(s); };
  const std::string hello = "hello\n", world = "world\n", fine = "fine\n";
  const Digest hello_id = Digest::Of(hello), world_id = Digest::Of(world);
  CraftedVersion v;
  v.blobs.push_back({Digest::Of(fine), fine});
  v.blobs.push_back({hello_id, hello});
  Manifest m;
  m.chunker = ChunkerParams::Default();
  auto file = [](std::string path, uint64_t size, FileLayout layout, Digest digest) {
    Entry e;
    e.path = std::move(path);
    e.kind = EntryKind::kFile;
    e.mode = 0644;
    e.size_bytes = size;
    e.layout = layout;
    e.digest = digest;
    return e;
  };
  auto index = [&](std::vector<ChunkRef> refs) {
    std::string blob = EncodeChunkIndex(refs);
    Digest id = Digest::Of(blob);
    v.blobs.push_back({id, blob});
    return id;
  };
  std::map<std::string, uint64_t> patched;
  if (name == "overlong-chunks") {
    Entry f = file("f.bin", 20, FileLayout::kIndexed, Digest::Of(hello + hello));
    f.index = index({{hello_id, 10}, {hello_id, 10}});
    m.entries.push_back(f);
  } else if (name == "overlong-single") {
    m.entries.push_back(file("f.bin", 999, FileLayout::kSingleChunk, hello_id));
  } else if (name == "wrong-digest" || name == "good") {
    v.blobs.push_back({world_id, world});
    Digest digest = name == "good" ? Digest::Of(hello + world) : Digest::Of("something else");
    Entry f = file("f.bin", 12, FileLayout::kIndexed, digest);
    f.index = index({{hello_id, 6}, {world_id, 6}});
    m.entries.push_back(f);
  } else if (name == "short-index") {
    Entry f = file("f.bin", 12, FileLayout::kIndexed, Digest::Of(hello + world));
    f.index = index({{hello_id, 6}});
    m.entries.push_back(f);
  } else if (name == "huge-single") {
    m.entries.push_back(file("f.bin", 6, FileLayout::kSingleChunk, hello_id));
    patched["f.bin"] = 4ull << 30;
  } else if (name == "huge-pair") {
    m.entries.push_back(file("a.bin", 6, FileLayout::kSingleChunk, hello_id));
    m.entries.push_back(file("b.bin", 6, FileLayout::kSingleChunk, hello_id));
    patched["a.bin"] = patched["b.bin"] = UINT64_MAX;
  } else if (name == "huge-total") {
    Digest idx = index({{hello_id, 6}});
    for (const char* p : {"a.bin", "b.bin"}) {
      Entry f = file(p, 1ull << 62, FileLayout::kIndexed, hello_id);
      f.index = idx;
      m.entries.push_back(f);
    }
  } else if (name == "non-utf8-name") {
    // Encoded under a placeholder of the same length, then the byte is put in place.
    m.entries.push_back(file("cafX.txt", hello.size(), FileLayout::kSingleChunk, hello_id));
  } else {
    throw std::runtime_error("unknown crafted version \"" + std::string(name) + "\"");
  }
  m.entries.push_back(file("ok.txt", fine.size(), FileLayout::kSingleChunk, Digest::Of(fine)));
  std::string manifest = EncodeWithFileSizes(m, patched);
  if (name == "non-utf8-name") manifest.replace(manifest.find("cafX.txt") + 3, 1, "\xe9");
  v.digest = Digest::Of(manifest);
  v.blobs.push_back({v.digest, bytes_of(manifest)});
  return v;
}

// Puts every blob of `v` into `store`, except those in `skip`. Errors: the store's.
inline Status StoreCrafted(ChunkStore& store, const CraftedVersion& v,
                           const std::vector<Digest>& skip = {}) {
  for (const auto& [id, blob] : v.blobs) {
    if (std::find(skip.begin(), skip.end(), id) != skip.end()) continue;
    BDN_RETURN_IF_ERROR(
        store.Put(id, {reinterpret_cast<const uint8_t*>(blob.data()), blob.size()}));
  }
  return Status::Ok();
}

}  // namespace bdn::testing
