// How long opening a pack store takes as it grows (issue 9: "opening a store with 1 million blobs
// takes under a second"), and how long rebuilding its index from the pack footers takes.
//
// Usage: build/bench/store_open DIR [BLOBS]   (default 1,000,000 blobs of 64 to 191 bytes each;
// DIR is created, and must not exist). Writes the store once (not timed as a benchmark: it is the
// fixture), then times, each three times: LocalChunkStore::Open with the index present, one Get
// of a random blob after the open, and Open after the index directory was deleted (rebuilt from the
// footers). Prints a markdown table; the reference is `ls -f` of the store's packs directory.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bdn/store/local_chunk_store.h"

namespace {

namespace fs = std::filesystem;
using bdn::Digest;
using bdn::LocalChunkStore;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Blob i: 64 to 191 bytes of pseudo-random data seeded by i, so every blob is distinct.
std::vector<uint8_t> Blob(uint64_t i) {
  std::mt19937_64 rng(i * 0x9E3779B97F4A7C15ull + 1);
  std::vector<uint8_t> b(64 + rng() % 128);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

LocalChunkStore::Options BenchOptions() {
  LocalChunkStore::Options o;
  o.durability = LocalChunkStore::Durability::kNone;  // the fixture; durability is not measured
  o.codec.min_saving = 1.0;                           // random bytes: never compressed
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: store_open DIR [BLOBS]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const uint64_t n = argc > 2 ? std::stoull(argv[2]) : 1'000'000;
  if (fs::exists(dir)) {
    std::fprintf(stderr, "store_open: %s exists; give a new directory\n", dir.c_str());
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  {
    auto store = LocalChunkStore::Open(dir, BenchOptions());
    if (!store) {
      std::fprintf(stderr, "open: %s\n", store.error().ToString().c_str());
      return 1;
    }
    for (uint64_t i = 0; i < n; ++i) {
      auto b = Blob(i);
      if (auto s = (*store)->Put(Digest::Of(b), b); !s.ok()) {
        std::fprintf(stderr, "put: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    if (auto s = (*store)->Sync(); !s.ok()) {
      std::fprintf(stderr, "sync: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const double write_s = Seconds(t0);
  size_t packs = 0;
  for (const auto& e : fs::directory_iterator(dir / "packs")) packs += e.is_regular_file();

  std::mt19937_64 pick(7);
  auto open_and_get = [&](double* open_s, double* get_s) {
    auto t = std::chrono::steady_clock::now();
    auto store = LocalChunkStore::Open(dir, BenchOptions());
    *open_s = Seconds(t);
    if (!store) {
      std::fprintf(stderr, "open: %s\n", store.error().ToString().c_str());
      return false;
    }
    auto b = Blob(pick() % n);
    t = std::chrono::steady_clock::now();
    auto got = (*store)->Get(Digest::Of(b));
    *get_s = Seconds(t);
    if (!got || *got != b) {
      std::fprintf(stderr, "get: the blob did not read back\n");
      return false;
    }
    return true;
  };
  std::printf("Store of %llu blobs in %zu packs (written in %.1f s)\n\n",
              static_cast<unsigned long long>(n), packs, write_s);
  std::printf(
      "| run | Open, index present (s) | first Get after it (ms) | Open, index deleted: "
      "rebuilt from footers (s) |\n|---|---|---|---|\n");
  for (int run = 1; run <= 3; ++run) {
    double open_s = 0, get_s = 0, rebuild_s = 0, unused = 0;
    if (!open_and_get(&open_s, &get_s)) return 1;
    fs::remove_all(dir / "index");
    if (!open_and_get(&rebuild_s, &unused)) return 1;
    std::printf("| %d | %.3f | %.3f | %.3f |\n", run, open_s, get_s * 1000, rebuild_s);
  }
  return 0;
}
