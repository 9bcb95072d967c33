// Test support: versions that lie about their bytes, written with the format encoder. Used by
// the unit tests and by tests/tools/bdn_craft (the integration tests' crafted versions).
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "bdn/format/manifest.h"

namespace bdn::testing {

// Encodes `m` with EncodeManifest, then overwrites the size field of each file entry named in
// `sizes` with the size given there: sizes the encoder itself refuses (over 2^63-1, a single
// chunk over the chunker maximum) can be written this way. Throws std::runtime_error if `m`
// does not encode or a path is not a file entry.
inline std::string EncodeWithFileSizes(const Manifest& m,
                                       const std::map<std::string, uint64_t>& sizes) {
  auto encoded = EncodeManifest(m);
  if (!encoded) throw std::runtime_error(encoded.error().ToString());
  std::string bytes = std::move(*encoded);
  for (const auto& [path, size] : sizes) {
    // A file entry is: kind (u8 2) | mode (u16) | u32 path length | path | size (u64) | ...
    std::string key(4, '\0');
    for (int i = 0; i < 4; ++i) key[i] = static_cast<char>((path.size() >> (8 * i)) & 0xff);
    key += path;
    size_t at = std::string::npos;
    for (size_t pos = bytes.find(key); pos != std::string::npos; pos = bytes.find(key, pos + 1)) {
      if (pos >= 3 && bytes[pos - 3] == static_cast<char>(EntryKind::kFile)) {
        at = pos + key.size();
        break;
      }
    }
    if (at == std::string::npos || at + 8 > bytes.size()) {
      throw std::runtime_error("EncodeWithFileSizes: no file entry \"" + path + "\"");
    }
    for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
  return bytes;
}

}  // namespace bdn::testing
