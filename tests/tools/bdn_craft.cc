// bdn_craft: writes a crafted version (one that lies about its bytes; see
// src/bdn/volume/crafted_versions_test_util.h) for the integration tests. Test-only.
//
//   bdn_craft CASE --home DIR --ref bdn:NS/VOL
//       stores CASE's blobs in DIR/store and records the version in DIR/registry.db directly,
//       without the commit check (as a store written before the check existed, or behind the
//       registry's back); prints the pinned ref bdn:NS/VOL@b3:<hex>. DIR may be a BDN_HOME or a
//       `bdn serve --data` directory (not while a server runs on it).
//   bdn_craft CASE --blobs DIR
//       writes each blob to DIR/<64 hex> and prints their hex ids in upload order, one a line;
//       the last is the manifest, whose id is the version digest.
//   CASE "dir:PATH" reads a version from blobs written by another tool: PATH/order lists the
//   blobs' hex ids one a line in upload order (the last is the manifest), each in PATH/<hex>.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "bdn/format/ref.h"
#include "bdn/registry/registry.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/volume/crafted_versions_test_util.h"

namespace {
namespace fs = std::filesystem;

int Usage() {
  std::cerr << "usage: bdn_craft CASE --home DIR --ref bdn:NS/VOL | bdn_craft CASE --blobs DIR\n";
  return 2;
}

int Fail(const std::string& what) {
  std::cerr << "bdn_craft: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Usage();
  std::string name = argv[1];
  std::string home, blobs, ref_text;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--home") {
      home = argv[i + 1];
    } else if (flag == "--blobs") {
      blobs = argv[i + 1];
    } else if (flag == "--ref") {
      ref_text = argv[i + 1];
    } else {
      return Usage();
    }
  }
  bdn::testing::CraftedVersion v;
  try {
    if (name.starts_with("dir:")) {
      fs::path dir = name.substr(4);
      std::ifstream order(dir / "order");
      if (!order) return Fail("cannot read " + (dir / "order").string());
      std::string hex;
      while (std::getline(order, hex)) {
        if (hex.empty()) continue;
        std::ifstream in(dir / hex, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        auto id = bdn::Digest::Parse("b3:" + hex);
        if (!id) return Fail("bad blob id " + hex);
        v.blobs.push_back({*id, bytes});
        v.digest = *id;
      }
    } else {
      v = bdn::testing::Craft(name);
    }
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  if (!blobs.empty()) {
    fs::create_directories(blobs);
    for (const auto& [id, bytes] : v.blobs) {
      std::ofstream(fs::path(blobs) / id.Hex(), std::ios::binary) << bytes;
      std::cout << id.Hex() << "\n";
    }
    return 0;
  }
  if (home.empty() || ref_text.empty()) return Usage();
  auto ref = bdn::ParseRef(ref_text);
  if (!ref) return Fail(ref.error().message());
  auto store = bdn::LocalChunkStore::Open(fs::path(home) / "store");
  if (!store) return Fail(store.error().message());
  if (bdn::Status s = bdn::testing::StoreCrafted(**store, v); !s.ok()) return Fail(s.message());
  // Sealed, so that the bdn processes the test runs next see the blobs.
  if (bdn::Status s = (*store)->Sync(); !s.ok()) return Fail(s.message());
  auto registry = bdn::SqliteRegistry::Open(fs::path(home) / "registry.db");
  if (!registry) return Fail(registry.error().message());
  bdn::CommitRequest req;
  req.ns = ref->ns;
  req.volume = ref->volume;
  req.digest = v.digest;
  auto committed = (*registry)->Commit(req);
  if (!committed) return Fail(committed.error().message());
  std::cout << bdn::PinnedRef{ref->ns, ref->volume, v.digest}.ToString() << "\n";
  return 0;
}
