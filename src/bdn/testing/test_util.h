// Helpers shared by the unit tests of every module: a private temporary directory and seeded
// random bytes. Header-only; for tests only.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>
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

}  // namespace bdn::testutil
