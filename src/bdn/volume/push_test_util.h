// Test support: a version pushed from files written for the test, and a check that every file of
// a version reads back whole. Shared by the GC tests over each pack store. Test-only.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"
#include "bdn/volume/push.h"
#include "bdn/volume/version_view.h"

namespace bdn::testing {

// Writes `files` ({name: bytes}) into the new directory `src`, pushes it to `store` as a new
// version of ns/volume committed in `registry`, and returns the version's digest.
// Errors: Push's.
inline Result<Digest> PushFilesForTest(
    ChunkStore& store, Registry& registry, const std::filesystem::path& src,
    const std::vector<std::pair<std::string, std::vector<uint8_t>>>& files,
    const std::string& ns = "w", const std::string& volume = "v") {
  std::filesystem::create_directories(src);
  for (const auto& [name, bytes] : files) {
    std::ofstream(src / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  PushOptions o;
  o.dir = src;
  o.ns = ns;
  o.volume = volume;
  BDN_ASSIGN_OR_RETURN(auto r, Push(o, store, registry, nullptr));
  return r.ref.digest;
}

// Reads every file of `version` from `store` whole (verified). Errors: the first read's, or
// Internal "<path>: read N of M bytes" for a short one.
inline Status ReadVersionForTest(std::shared_ptr<ChunkStore> store, const Digest& version) {
  BDN_ASSIGN_OR_RETURN(auto view, VersionView::Open(std::move(store), version));
  for (const Entry& e : view->manifest().entries) {
    if (e.kind != EntryKind::kFile) continue;
    std::vector<uint8_t> buf(e.size_bytes);
    BDN_ASSIGN_OR_RETURN(auto n, view->Read(e, 0, buf));
    if (n != e.size_bytes) {
      return InternalError(e.path + ": read " + std::to_string(n) + " of " +
                           std::to_string(e.size_bytes) + " bytes");
    }
  }
  return Status::Ok();
}

}  // namespace bdn::testing
