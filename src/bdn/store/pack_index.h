// The persistent blob index of a pack store (docs/format.md, "Pack index"): immutable sorted
// tables, each mapping blob ids to their places in the packs it covers, opened with mmap and
// searched in place (a 256-way fan-out, then binary search), so opening a store of a million
// blobs costs a few system calls, not a load. Derived data: every table can be rebuilt from the
// pack footers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/hex.h"  // Hex16, the pack and table names
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/pack_format.h"

namespace bdn::pack {

// A blob's place in the store: which pack, and where in it.
struct IndexedBlob {
  uint64_t pack = 0;  // the pack's number; its file is packs/<16 hex digits>.pack
  BlobLocation loc;
  bool operator==(const IndexedBlob&) const = default;
};

// Orders by id, then pack, then offset: the order of a table's entries.
bool IndexOrder(const IndexedBlob& a, const IndexedBlob& b);

inline constexpr size_t kIndexHeaderBytes = 64;
inline constexpr size_t kIndexFanoutBytes = 256 * 8;
inline constexpr size_t kIndexEntryBytes = 64;

// One index table file, mapped read-only. Immutable; thread-safe.
class IndexTable {
 public:
  // Maps `path` and checks its header, fan-out and length (not the checksum of the entries, so
  // opening costs the same for any size; VerifyChecksum reads everything).
  // Errors: NotFound if the file is gone (a merge replaced it); Corruption "index table …: …"
  // for a damaged file; ErrnoError on other I/O errors.
  static Result<std::shared_ptr<const IndexTable>> Open(const std::filesystem::path& path);
  ~IndexTable();
  IndexTable(const IndexTable&) = delete;
  IndexTable& operator=(const IndexTable&) = delete;

  // Calls fn(const IndexedBlob&) for every entry of `id`, in pack order, until fn returns true.
  // Returns whether fn returned true. No system calls once the pages are in memory.
  template <typename F>
  bool Find(const Digest& id, F&& fn) const {
    uint64_t lo = id.data()[0] == 0 ? 0 : Fanout(id.data()[0] - 1), hi = Fanout(id.data()[0]);
    lo = LowerBound(id, lo, hi);
    for (; lo < hi && IdEquals(lo, id); ++lo) {
      if (fn(At(lo))) return true;
    }
    return false;
  }

  uint64_t size() const { return count_; }
  // The entry at `i` < size(), in table order.
  IndexedBlob At(uint64_t i) const;
  // The packs this table covers, ascending: every blob of each is in the table.
  const std::vector<uint64_t>& packs() const { return packs_; }
  const std::filesystem::path& path() const { return path_; }
  // Re-reads the whole file and checks its BLAKE3 trailer. Errors: Corruption.
  Status VerifyChecksum() const;

 private:
  IndexTable() = default;
  uint64_t Fanout(int b) const;
  uint64_t LowerBound(const Digest& id, uint64_t lo, uint64_t hi) const;
  bool IdEquals(uint64_t i, const Digest& id) const;

  std::filesystem::path path_;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t count_ = 0;
  std::vector<uint64_t> packs_;
};

// Writes a table of `blobs` (any order; sorted and exact duplicates dropped here) covering
// `packs` to `dir`/<16 hex digits>.idx: written to a temporary name in `dir`, fdatasynced when
// `durable`, renamed into place (the caller syncs `dir`). Returns the new file's path.
// Errors: ErrnoError "index table …: …" (ENOSPC → FailedPrecondition).
Result<std::filesystem::path> WriteIndexTable(const std::filesystem::path& dir,
                                              std::vector<IndexedBlob> blobs,
                                              std::vector<uint64_t> packs, bool durable);

// A random 64-bit number (getrandom), for pack and table names.
uint64_t RandomId();
// Parses "<16 hex digits><suffix>" (lower case), e.g. "00ab….pack"; nullopt otherwise.
std::optional<uint64_t> ParseHex16Name(std::string_view name, std::string_view suffix);

}  // namespace bdn::pack
