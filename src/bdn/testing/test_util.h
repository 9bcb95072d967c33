// Helpers shared by the unit tests of every module: a private temporary directory and seeded
// random bytes. Header-only; for tests only.
#pragma once

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace bdn::testutil {

// A private directory under the temporary directory ("<tmp>/<prefix>.XXXXXX"), removed with
// everything in it at the end. path() is empty if it could not be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "bdn_test") {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// `n` bytes from a Mersenne Twister seeded with `seed`: the same bytes for the same arguments.
inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Calls fn(i) for every i in [0, n) on n threads released together (each waits until all have
// started), for races; returns the results in order of i.
template <typename F>
auto RunTogether(int n, F fn) -> std::vector<decltype(fn(0))> {
  using R = decltype(fn(0));
  std::atomic<int> started{0};
  std::vector<std::optional<R>> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ++started;
      while (started.load() < n) std::this_thread::yield();
      results[static_cast<size_t>(i)].emplace(fn(i));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<R> out;
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace bdn::testutil
