// Whether a directory given as a node cache's (`--cache-dir`) is one, judged before anything in it
// is changed: the marker a node cache writes in a directory it makes, or, in a directory of an
// earlier release (which wrote none), exactly the files that release made.
#pragma once

#include <filesystem>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

// The marker's name in the cache directory, and its whole content.
inline constexpr std::string_view kNodeCacheMarkerName = "bdn-node-cache";
inline constexpr std::string_view kNodeCacheMarkerText = "bdn node cache, format 1\n";

// What an existing directory given to a node cache is.
enum class CacheDirKind {
  // Nothing in it, or only an empty lost+found (a file system of its own): the cache's once the
  // marker is written, before anything else is.
  kEmpty,
  // The marker, and nothing but what a node cache makes: evict.lock, packs/, index/ (holding only
  // its lock: a cache keeps no index tables), quarantine, quarantine.damaged, corrupt/ (bad copies
  // `bdn store migrate --cache-dir` set aside), lost+found.
  kMarked,
  // No marker, and exactly what an earlier release's node cache made, with that cache's own file
  // as proof: evict.lock (the region layout) or a `state` file beginning with the old layout's
  // magic ("ZBDNN001"). Besides them only: packs/ holding <16 hex>.pack files whose pack header
  // checks, <16 hex>.open and .new files, and <16 hex>.{pack,open,new}.damaged; index/ holding only
  // its lock; quarantine, quarantine.damaged; corrupt/ of <64 hex> files; lost+found; and the
  // one-file-per-chunk layout's chunks/<2 hex>/<64 hex> files and tmp/ of its temporary files
  // (<64 hex>.<pid>.<n>). Its `state` and tmp/ are the only things a node cache removes.
  kEarlierRelease,
};

// Judges the existing directory `dir` (open; `display` is its path in messages), changing
// nothing in it; in an unmarked directory it reads the first bytes of `state` and of each
// packs/<16 hex>.pack. A directory that is not a node cache's is refused, so that eviction never
// deletes another thing's files (a chunk store's packs, a copy of them) and the old layout's
// clean-up never removes a `tmp/` or `state` of someone else's.
// Errors: FailedPrecondition "node cache <display>: holds <name>, which is not the node cache's;
// give an empty directory or one the node cache made", naming a top-level name a node cache never
// makes first (in byte order), else the first entry whose kind or contents are not what the cache
// makes there (a path below it: "tmp/project", "packs/x.damaged", "index/<table>"), else, for an
// unmarked directory without evict.lock or the old `state`, its first entry (a copy of a chunk
// store's packs/: "holds packs"); FailedPrecondition "node cache <display>: bdn-node-cache does not
// read \"bdn node cache, format 1\" (a later bdn's cache, or not a node cache's); give an empty
// directory or one the node cache made"; ErrnoError naming the path on I/O errors.
Result<CacheDirKind> JudgeCacheDir(int dir, const std::filesystem::path& display);

// Writes the marker into `dir` (open; `display` is its path in messages), created if missing
// (mode 0600, never through a symlink) and written in place at offset 0, so that processes
// marking one directory at once all leave the same bytes. An empty marker (a writer that died
// between creating and writing it) is judged absent; such an empty file is written only when it
// is this user's with one link. Errors: those of OpenRegularFileAt and PWriteAll, e.g.
// PermissionDenied "node cache <display>: Read-only file system"; PermissionDenied "node cache
// <display>: bdn-node-cache is owned by uid 1001 (mallory), not by this user; ..." or "...
// bdn-node-cache has 2 hard links (it may be a link to a file elsewhere); ...".
Status MarkCacheDir(int dir, const std::filesystem::path& display);

// Whether `name` is one the region store gives what it sets aside in packs/: "<16 hex>.pack",
// ".open" or ".new", followed by ".damaged".
bool IsSetAsideRegionName(std::string_view name);

}  // namespace bdn
