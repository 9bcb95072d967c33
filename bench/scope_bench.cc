// Google Benchmark of what the namespace scope of chunk reads costs (docs/http-api.md, "Chunks:
// scoped to namespaces"): building a version's blob set from its manifest and chunk indexes
// (once per version per process), and the lookup each chunk read makes in it.
// Run: build/bench/scope_bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"
#include "bdn/volume/version_blobs.h"

namespace {

// Stores `bytes`; a store that fails leaves nothing worth measuring, so the bench stops.
void PutOrDie(bdn::ChunkStore& store, const bdn::Digest& id, std::string_view bytes) {
  const bdn::Status s =
      store.Put(id, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!s.ok()) {
    std::fprintf(stderr, "scope_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// A store holding a version of `files` files of `chunks_per_file` chunks each (64 KiB a chunk,
// the chunker's average): its manifest and chunk indexes, not the chunks. Sets `version` and
// returns the ids of its chunks.
std::vector<bdn::Digest> MakeVersion(bdn::ChunkStore& store, int files, int chunks_per_file,
                                     bdn::Digest& version) {
  bdn::Manifest m;
  std::vector<bdn::Digest> chunks;
  uint64_t n = 0;
  for (int f = 0; f < files; ++f) {
    std::vector<bdn::ChunkRef> refs;
    for (int c = 0; c < chunks_per_file; ++c, ++n) {
      uint8_t raw[32] = {};
      std::memcpy(raw, &n, sizeof n);
      refs.push_back({bdn::Digest::Of(std::span<const uint8_t>(raw, sizeof raw)), 64 << 10});
      chunks.push_back(refs.back().id);
    }
    std::string index = bdn::EncodeChunkIndex(refs);
    bdn::Digest index_id = bdn::Digest::Of(index);
    PutOrDie(store, index_id, index);
    bdn::Entry e;
    char name[32];
    std::snprintf(name, sizeof name, "shard-%05d.bin", f);
    e.path = name;
    e.kind = bdn::EntryKind::kFile;
    e.mode = 0644;
    e.size_bytes = uint64_t{64 << 10} * chunks_per_file;
    e.layout = bdn::FileLayout::kIndexed;
    e.index = index_id;
    m.entries.push_back(e);
  }
  std::string bytes = *bdn::EncodeManifest(m);
  version = bdn::Digest::Of(bytes);
  PutOrDie(store, version, bytes);
  return chunks;
}

// Loading the blob set of a version: 1 GiB (one file, 16,384 chunks) and 100 GiB (50 files,
// 1,638,400 chunks), from an in-memory store (the origin's packs are in the page cache when hot).
void BM_BuildVersionBlobSet(benchmark::State& state) {
  auto store = std::make_shared<bdn::MemChunkStore>();
  bdn::Digest version;
  const int files = static_cast<int>(state.range(0));
  const int per_file = static_cast<int>(state.range(1));
  MakeVersion(*store, files, per_file, version);
  for (auto _ : state) {
    bdn::VersionBlobCache cache(store, 64u << 20);
    auto set = cache.Get(version);
    benchmark::DoNotOptimize(set);
  }
  state.counters["chunks"] = static_cast<double>(files) * per_file;
}
BENCHMARK(BM_BuildVersionBlobSet)
    ->Args({1, 16384})
    ->Args({50, 32768})
    ->Unit(benchmark::kMillisecond);

// One chunk read's check: a lookup of a chunk of the version (hit) or of another (miss).
void BM_BlobSetContains(benchmark::State& state) {
  auto store = std::make_shared<bdn::MemChunkStore>();
  bdn::Digest version;
  auto chunks = MakeVersion(*store, static_cast<int>(state.range(0)),
                            static_cast<int>(state.range(1)), version);
  bdn::VersionBlobCache cache(store, 64u << 20);
  auto set = *cache.Get(version);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(set->Contains(chunks[i]));
    i = (i + 7919) % chunks.size();
  }
}
BENCHMARK(BM_BlobSetContains)->Args({1, 16384})->Args({50, 32768});

}  // namespace

BENCHMARK_MAIN();
