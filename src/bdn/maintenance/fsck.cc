// RunFsck (fsck.h): the packs read file by file, the index tables against them, the versions
// against the blobs found, the registry against itself; then, when asked, the repair.
#include "bdn/maintenance/fsck.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/format/ref.h"
#include "bdn/store/pack_file.h"
#include "bdn/store/pack_index.h"

namespace bdn {
namespace fs = std::filesystem;
using pack::BlobLocation;

std::string_view FsckKindName(FsckProblem::Kind k) {
  switch (k) {
    case FsckProblem::Kind::kPack:
      return "pack";
    case FsckProblem::Kind::kBlob:
      return "blob";
    case FsckProblem::Kind::kMissing:
      return "missing";
    case FsckProblem::Kind::kManifest:
      return "manifest";
    case FsckProblem::Kind::kChunkIndex:
      return "chunk-index";
    case FsckProblem::Kind::kIndex:
      return "index";
    case FsckProblem::Kind::kRegistry:
      return "registry";
  }
  return "?";
}

namespace {

struct Copy {
  uint64_t pack;
  BlobLocation loc;
  bool good;
};

// What the packs hold: every record found, by blob id.
struct Scan {
  std::unordered_map<Digest, std::vector<Copy>> copies;
  std::map<uint64_t, fs::path> pack_paths;          // sealed (and unsealed) packs read
  std::set<std::pair<uint64_t, uint64_t>> records;  // (pack, offset) of every record found
  std::set<std::pair<uint64_t, uint64_t>> quarantined;
};

// One pack file: its footer (or, failing that, its whole records), every record read and
// hashed. Problems are added to `problems` (the blob ones keyed by id in `bad_blobs`).
void ScanPack(uint64_t id, const fs::path& path, Scan& scan, FsckReport& report,
              std::map<Digest, FsckProblem>& bad_blobs) {
  const std::string what = "pack " + path.string();
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) {
    report.problems.push_back(
        {FsckProblem::Kind::kPack, what, ErrnoError("open", errno).message(), {}, ""});
    return;
  }
  const int fd = file.get();
  struct stat st;
  ::fstat(fd, &st);
  ++report.packs;
  scan.pack_paths[id] = path;
  auto footer = pack::ReadFooter(fd, static_cast<uint64_t>(st.st_size), what);
  std::vector<BlobLocation> locs;
  if (footer) {
    locs = std::move(*footer);
  } else {
    std::string why = footer.error().message();
    if (why.starts_with(what + ": ")) why = why.substr(what.size() + 2);
    auto whole = pack::ScanRecords(fd, static_cast<uint64_t>(st.st_size), what);
    std::string found =
        whole ? "; its first " + std::to_string(whole->blobs.size()) + " records are whole"
              : "; " + whole.error().message();
    report.problems.push_back({FsckProblem::Kind::kPack, what, why + found, {}, ""});
    if (whole) locs = whole->blobs;
  }
  for (const BlobLocation& loc : locs) {
    scan.records.insert({id, loc.offset});
    auto bytes = pack::ReadBlob(fd, loc, what);
    ++report.blobs;
    report.bytes += loc.stored_bytes;
    const bool quarantined = scan.quarantined.contains({id, loc.offset});
    const bool good = bytes.has_value() && !quarantined;
    scan.copies[loc.id].push_back({id, loc, good});
    if (!bytes && !quarantined) {
      // The id once: "blob b3:X: digest mismatch …", not "blob b3:X: chunk b3:X: digest …".
      std::string why = bytes.error().message();
      if (const std::string chunk = "chunk " + loc.id.ToString() + ": "; why.starts_with(chunk)) {
        why = why.substr(chunk.size());
      }
      auto [it, fresh] = bad_blobs.try_emplace(loc.id);
      if (fresh) {
        it->second.kind = FsckProblem::Kind::kBlob;
        it->second.object = "blob " + loc.id.ToString();
        it->second.message = why;
      } else {
        it->second.message += "; " + why;
      }
    }
  }
}

// The bytes of a good copy of `id`, or nullopt.
std::optional<std::vector<uint8_t>> ReadGood(const Scan& scan, const Digest& id) {
  auto it = scan.copies.find(id);
  if (it == scan.copies.end()) return std::nullopt;
  for (const Copy& c : it->second) {
    if (!c.good) continue;
    auto p = scan.pack_paths.find(c.pack);
    if (p == scan.pack_paths.end()) continue;
    UniqueFd fd(::open(p->second.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    auto bytes = pack::ReadBlob(fd.get(), c.loc, "pack " + p->second.string());
    if (bytes) return std::move(*bytes);
  }
  return std::nullopt;
}

bool HasGood(const Scan& scan, const Digest& id) {
  auto it = scan.copies.find(id);
  return it != scan.copies.end() &&
         std::any_of(it->second.begin(), it->second.end(), [](const Copy& c) { return c.good; });
}

}  // namespace

Result<FsckReport> RunFsck(const fs::path& store_root, Registry& registry, FsckMode mode,
                           const LocalChunkStore::Options& options) {
  FsckReport report;
  Scan scan;
  {
    std::ifstream q(store_root / "quarantine");
    std::string pack_hex, id_hex;
    uint64_t offset;
    while (q >> pack_hex >> offset >> id_hex) {
      if (auto p = pack::ParseHex16Name(pack_hex, "")) scan.quarantined.insert({*p, offset});
    }
  }
  std::map<Digest, FsckProblem> bad_blobs;
  std::error_code ec;
  std::vector<fs::path> names;
  for (const auto& e : fs::directory_iterator(store_root / "packs", ec)) names.push_back(e.path());
  if (ec) return Err(ErrnoError("chunk store " + (store_root / "packs").string(), ec.value()));
  std::sort(names.begin(), names.end());
  for (const fs::path& path : names) {
    const std::string name = path.filename().string();
    auto sealed = pack::ParseHex16Name(name, ".pack");
    auto open = pack::ParseHex16Name(name, ".open");
    if (sealed) {
      ScanPack(*sealed, path, scan, report, bad_blobs);
    } else if (open) {
      ScanPack(*open, path, scan, report, bad_blobs);  // a writer's, or a dead writer's
      // An open pack has no footer by design: not a problem of its own.
      if (!report.problems.empty() && report.problems.back().object == "pack " + path.string()) {
        report.problems.pop_back();
      }
    } else if (name.ends_with(".damaged")) {
      report.problems.push_back({FsckProblem::Kind::kPack,
                                 "pack " + path.string(),
                                 "set aside: its pack header never reached the disk",
                                 {},
                                 ""});
    }
  }

  // The index against the packs.
  for (const auto& e : fs::directory_iterator(store_root / "index", ec)) {
    if (!pack::ParseHex16Name(e.path().filename().string(), ".idx")) continue;
    ++report.index_tables;
    const std::string what = "index table " + e.path().string();
    auto t = pack::IndexTable::Open(e.path());
    if (!t) {
      // The object once: "index table P: bad fan-out", not "index table P: index table P: …".
      std::string why = t.error().message();
      if (why.starts_with(what + ": ")) why = why.substr(what.size() + 2);
      report.problems.push_back({FsckProblem::Kind::kIndex, what, why, {}, ""});
      continue;
    }
    if (Status s = (*t)->VerifyChecksum(); !s.ok()) {
      std::string why = s.message();
      if (why.starts_with(what + ": ")) why = why.substr(what.size() + 2);
      report.problems.push_back({FsckProblem::Kind::kIndex, what, why, {}, ""});
      continue;
    }
    uint64_t wrong = 0;
    std::string first;
    for (uint64_t i = 0; i < (*t)->size(); ++i) {
      pack::IndexedBlob b = (*t)->At(i);
      if (scan.records.contains({b.pack, b.loc.offset})) continue;
      // Entries of a pack that is gone (a GC that died before rewriting the index) are skipped
      // by every reader and dropped by the next open of the store: not an inconsistency.
      if (!scan.pack_paths.contains(b.pack)) continue;
      if (first.empty()) {
        first = "blob " + b.loc.id.ToString() + " at offset " + std::to_string(b.loc.offset) +
                " of pack " + Hex16(b.pack);
      }
      ++wrong;
    }
    if (wrong > 0) {
      report.problems.push_back({FsckProblem::Kind::kIndex,
                                 what,
                                 std::to_string(wrong) +
                                     " entries name records the packs do "
                                     "not hold (the first: " +
                                     first + ")",
                                 {},
                                 ""});
    }
  }

  // Every version the registry keeps, against the blobs found.
  std::map<Digest, FsckProblem> missing;
  std::map<Digest, std::set<std::string>> affected;  // blob with bad copies -> versions
  BDN_ASSIGN_OR_RETURN(std::vector<VersionRecord> versions, registry.ListRetainedVersions());
  for (const VersionRecord& v : versions) {
    ++report.versions;
    const std::string ref = PinnedRef{v.ns, v.volume, v.digest}.ToString();
    auto need = [&](const Digest& id, const std::string& where) {
      if (bad_blobs.contains(id)) affected[id].insert(ref + where);
      if (HasGood(scan, id)) return true;
      auto [it, fresh] = missing.try_emplace(id);
      if (fresh) {
        it->second.kind = FsckProblem::Kind::kMissing;
        it->second.object = "blob " + id.ToString();
        it->second.message =
            bad_blobs.contains(id) ? "no good copy is stored (only damaged ones)" : "not stored";
      }
      it->second.affects.push_back(ref + where);
      return false;
    };
    if (!need(v.digest, " (its manifest)")) continue;
    auto mbytes = ReadGood(scan, v.digest);
    Result<Manifest> manifest = Err(CorruptionError("unreadable"));
    if (mbytes) manifest = DecodeManifest(*mbytes);
    if (!manifest) {
      report.problems.push_back(
          {FsckProblem::Kind::kManifest,
           "version " + ref,
           "manifest " + v.digest.ToString() + ": " + manifest.error().message(),
           {ref},
           ""});
      continue;
    }
    for (const Entry& e : manifest->entries) {
      if (e.kind != EntryKind::kFile) continue;
      const std::string where = " (file \"" + e.path + "\")";
      if (e.layout == FileLayout::kSingleChunk) {
        need(e.digest, where);
      } else if (e.layout == FileLayout::kIndexed) {
        // A blob the index needs and the store lacks is reported by need() (as missing, or
        // with its bad copies); the walk of this file stops there.
        bool lacking = false;
        auto fetch = [&](IndexPart, std::span<const Digest> ids) -> Result<std::vector<IndexBlob>> {
          std::vector<IndexBlob> blobs;
          for (const Digest& id : ids) {
            std::optional<std::vector<uint8_t>> bytes;
            if (need(id, where)) bytes = ReadGood(scan, id);
            if (!bytes) {
              lacking = true;
              return Err(NotFoundError("blob " + id.ToString() + ": no good copy"));
            }
            blobs.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(*bytes)));
          }
          return blobs;
        };
        auto index = ReadFileChunkIndex(manifest->chunker, e, fetch);
        if (!index) {
          if (!lacking) {
            report.problems.push_back({FsckProblem::Kind::kChunkIndex,
                                       "chunk index " + e.index.ToString(),
                                       index.error().message(),
                                       {ref + where},
                                       ""});
          }
          continue;
        }
        std::unordered_set<const std::vector<ChunkRef>*> walked;
        for (const auto& run : index->runs) {
          if (!walked.insert(run.get()).second) continue;  // a piece listed again
          for (const ChunkRef& c : *run) need(c.id, where);
        }
      }
    }
  }
  for (auto& [id, p] : bad_blobs) {
    p.affects.assign(affected[id].begin(), affected[id].end());
    report.problems.push_back(std::move(p));
  }
  for (auto& [id, p] : missing) {
    std::sort(p.affects.begin(), p.affects.end());
    p.affects.erase(std::unique(p.affects.begin(), p.affects.end()), p.affects.end());
    report.problems.push_back(std::move(p));
  }
  BDN_ASSIGN_OR_RETURN(std::vector<std::string> registry_problems, registry.CheckConsistency());
  for (const std::string& r : registry_problems) {
    // "registry: registry.db: tag …" (the kind, then the object: "registry: registry: …" before).
    report.problems.push_back({FsckProblem::Kind::kRegistry, "registry.db", r, {}, ""});
  }
  if (mode == FsckMode::kCheck || report.problems.empty()) return report;

  // Repair: damaged copies set aside, then the index rebuilt from the packs.
  {
    std::string lines;
    for (const auto& [id, copies] : scan.copies) {
      for (const Copy& c : copies) {
        if (!c.good && !scan.quarantined.contains({c.pack, c.loc.offset})) {
          lines += Hex16(c.pack) + " " + std::to_string(c.loc.offset) + " " + id.Hex() + "\n";
        }
      }
    }
    if (!lines.empty()) {
      std::ofstream q(store_root / "quarantine", std::ios::app);
      q << lines;
      if (!q)
        return Err(
            InternalError("quarantine " + (store_root / "quarantine").string() + ": write failed"));
    }
  }
  BDN_ASSIGN_OR_RETURN(auto store, LocalChunkStore::Open(store_root, options));
  BDN_ASSIGN_OR_RETURN(IndexRebuildReport rebuilt, store->RebuildIndex());
  for (FsckProblem& p : report.problems) {
    switch (p.kind) {
      case FsckProblem::Kind::kBlob:
        p.repair = "set aside (quarantine); push or sync the data again to store a good copy";
        break;
      case FsckProblem::Kind::kPack:
        p.repair = "sealed again from its whole records (index rebuilt: " +
                   std::to_string(rebuilt.packs_repaired) + " packs repaired)";
        break;
      case FsckProblem::Kind::kIndex:
        p.repair = "index rebuilt from the packs (" + std::to_string(rebuilt.blobs) + " blobs)";
        break;
      case FsckProblem::Kind::kMissing:
      case FsckProblem::Kind::kManifest:
      case FsckProblem::Kind::kChunkIndex:
        p.repair = "push or sync the data again to restore it";
        break;
      case FsckProblem::Kind::kRegistry:
        break;
    }
  }
  return report;
}

}  // namespace bdn
