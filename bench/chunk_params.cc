// Chooses chunker defaults by measurement: for several min/avg/max settings, chunks a checkpoint
// series (bench/gen_checkpoints.py) and reports chunking speed, chunk counts, the bytes each later
// checkpoint adds to a store holding the earlier ones, and the chunk index size.
// Usage: chunk_params DIR   (DIR holds ckpt-0, ckpt-1, ckpt-2 from gen_checkpoints.py)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "bdn/chunk/chunker.h"
#include "bdn/digest/digest.h"

namespace {

struct Mapped {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

Mapped Map(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  struct stat st;
  ::fstat(fd, &st);
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE,
                   fd, 0);
  ::close(fd);
  return {static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)};
}

struct Cut {
  size_t offset, length;
};

std::vector<Cut> ChunkAll(const bdn::Chunker& c, const Mapped& m) {
  std::vector<Cut> cuts;
  size_t pos = 0;
  while (pos < m.size) {
    size_t n = c.NextCut({m.data + pos, m.size - pos}, true);
    cuts.push_back({pos, n});
    pos += n;
  }
  return cuts;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  Mapped files[3] = {Map(dir + "/ckpt-0/model.safetensors"), Map(dir + "/ckpt-1/model.safetensors"),
                     Map(dir + "/ckpt-2/model.safetensors")};
  const uint32_t K = 1024;
  std::vector<bdn::ChunkerParams> sets = {
      {4 * K, 16 * K, 64 * K},    {8 * K, 32 * K, 128 * K},    {16 * K, 64 * K, 256 * K},
      {32 * K, 128 * K, 512 * K}, {64 * K, 256 * K, 1024 * K}, {256 * K, 1024 * K, 4096 * K}};
  std::printf(
      "| min/avg/max KiB | chunking MiB/s (1 core) | chunks in ckpt-0 | mean chunk KiB | ckpt-1 "
      "new bytes | ckpt-2 new bytes | chunk index bytes per GiB |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& p : sets) {
    bdn::Chunker chunker(p);
    std::unordered_set<bdn::Digest> store;
    uint64_t added[3] = {0, 0, 0};
    double chunk_seconds = 0;
    size_t count0 = 0;
    for (int f = 0; f < 3; ++f) {
      auto t0 = std::chrono::steady_clock::now();
      auto cuts = ChunkAll(chunker, files[f]);
      chunk_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (f == 0) count0 = cuts.size();
      for (const auto& c : cuts) {
        auto id = bdn::Digest::Of(std::span<const uint8_t>(files[f].data + c.offset, c.length));
        if (store.insert(id).second) added[f] += c.length;
      }
    }
    double total_mib =
        static_cast<double>(files[0].size + files[1].size + files[2].size) / (1 << 20);
    std::printf(
        "| %u/%u/%u | %.0f | %zu | %.1f | %llu | %llu | %.0f |\n", p.min_bytes / K, p.avg_bytes / K,
        p.max_bytes / K, total_mib / chunk_seconds, count0,
        static_cast<double>(files[0].size) / static_cast<double>(count0) / 1024,
        static_cast<unsigned long long>(added[1]), static_cast<unsigned long long>(added[2]),
        36.0 * static_cast<double>(count0) * (1 << 30) / static_cast<double>(files[0].size));
  }
  return 0;
}
