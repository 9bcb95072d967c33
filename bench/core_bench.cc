// Google Benchmark microbenchmarks of the hot loops: BLAKE3 on chunk-sized inputs and the
// FastCDC chunker on random and all-zero data. Run: build/bench/core_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bdn/chunk/chunker.h"
#include "bdn/digest/digest.h"

namespace {

std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = static_cast<uint8_t>(x >> (8 * k));
  }
  return v;
}

void BM_Blake3(benchmark::State& state) {
  auto data = RandomBytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(bdn::Digest::Of(data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Blake3)->Arg(64 << 10)->Arg(256 << 10)->Arg(8 << 20);

void ChunkAll(benchmark::State& state, const std::vector<uint8_t>& data) {
  bdn::Chunker c(bdn::ChunkerParams::Default());
  for (auto _ : state) {
    size_t pos = 0, n = 0;
    while (pos < data.size()) {
      pos += c.NextCut({data.data() + pos, data.size() - pos}, true);
      ++n;
    }
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}

void BM_ChunkerRandom(benchmark::State& state) { ChunkAll(state, RandomBytes(64 << 20)); }
BENCHMARK(BM_ChunkerRandom);

void BM_ChunkerZeros(benchmark::State& state) { ChunkAll(state, std::vector<uint8_t>(64 << 20)); }
BENCHMARK(BM_ChunkerZeros);

}  // namespace

BENCHMARK_MAIN();
