// Push: seal a local directory as a version (chunk, hash, store) and commit it to the registry.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/base/transfer_counters.h"
#include "bdn/chunk/chunker.h"
#include "bdn/format/manifest.h"
#include "bdn/format/ref.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// A directory a push must not seal, known by identity (device and inode), so that no other
// path to it (a bind mount, a symlinked parent, "..") gets past the check.
struct RefusedDir {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string what;  // how messages name it, e.g. "the embedded store /home/u/.local/share/bdn"
  std::string hint;  // appended to the message, e.g. " (push a directory outside it)"
};

struct SealOptions {
  ChunkerParams chunker = ChunkerParams::Default();
  int jobs = 0;  // threads; 0 = all cores
  enum class Mtimes { kIgnore, kPreserve } mtimes = Mtimes::kIgnore;
  // SealDirectory: directories that may be neither the pushed directory, nor one above it, nor
  // one below it (the embedded store: a version would seal its own packs as they change).
  std::vector<RefusedDir> refused_dirs;
};

struct SealResult {
  Manifest manifest;
  Digest digest;  // BLAKE3 of the encoded manifest: the version digest
  VersionStats stats;
  uint64_t chunks_uploaded = 0;  // distinct data chunks the store did not hold before
  uint64_t bytes_uploaded = 0;   // all bytes newly stored: data chunks, chunk indexes, manifest
  uint64_t chunks_reused = 0;    // data chunk references the store (or this seal) already held
  uint64_t metadata_bytes_uploaded = 0;  // the part of bytes_uploaded that is indexes + manifest
};

// ---- Sealing a stream of entries ----
//
// A version is sealed from a list of entries (SealItem: path, kind, mode, size) and, for each
// regular file, a ByteStream of its bytes from an EntrySource. Push lists a directory
// (SealDirectory); a sync lists a remote source (sync/). Both go through SealEntries, the one
// path that chunks, hashes and stores file content.

// One entry to seal.
struct SealItem {
  std::string path;  // relative, '/'-separated UTF-8 (docs/format.md)
  EntryKind kind = EntryKind::kFile;
  uint16_t mode = 0;        // permission bits (mode & 0777)
  uint64_t size_bytes = 0;  // kFile: the size the content must have; others 0
  // kSymlink: the target, verbatim; kHardlink: the path of the kFile entry it links to.
  std::string target;
  // Recorded only with SealOptions::Mtimes::kPreserve.
  std::optional<int64_t> mtime_ns;
};

// The bytes of one file, read front to back once. Each stream is read by one thread at a time.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to out.size() bytes into `out` and returns how many; 0 only at the end. A stream
  // checks what it delivers against its entry: one that would deliver more or fewer bytes than
  // the entry's size, or different ones (the file or object changed meanwhile), fails with
  // FailedPrecondition naming the entry. Other errors: the source's (I/O, network).
  virtual Result<size_t> Read(std::span<uint8_t> out) = 0;
  // Called once Read returned 0: a last check that the content did not change while it was read
  // (e.g. a file's mtime). Errors: FailedPrecondition naming the entry.
  virtual Status Finish() { return Status::Ok(); }
};

// A file whose chunks (and chunk index) are already in the store: what its manifest entry
// records. Lets a resumed seal skip reading a file it sealed before.
struct SealedFile {
  uint64_t size_bytes = 0;
  Digest digest;  // BLAKE3 of the whole content
  FileLayout layout = FileLayout::kEmpty;
  Digest index;         // kIndexed: the chunk index's digest
  uint64_t chunks = 0;  // chunk references
};

// Where the bytes of the entries come from. SealEntries calls Reuse and Open from one thread, in
// path order, and reads the streams on its worker threads; OnSealed may be called from any
// worker thread at any time (implementations make it thread-safe).
class EntrySource {
 public:
  virtual ~EntrySource() = default;
  // Opens the content of the kFile entry `item` (items[index]). Should be cheap: slow work
  // (opening a connection) belongs in the first Read, so that files are fetched in parallel.
  // Errors: the source's; they fail the seal.
  virtual Result<std::unique_ptr<ByteStream>> Open(size_t index, const SealItem& item) = 0;
  // A file this source knows to be stored already (an earlier, interrupted seal of the same
  // content; the source has checked that the store holds every blob it names); nullopt: read
  // it. Default: nullopt.
  virtual Result<std::optional<SealedFile>> Reuse(size_t index, const SealItem& item);
  // Called once a file's chunks and chunk index are in the store (not yet synced). Errors fail
  // the seal. Default: nothing.
  virtual Status OnSealed(size_t index, const SealItem& item, const SealedFile& file);
};

// Seals `items`, which must be sorted bytewise by path, unique, and list every parent directory
// (the manifest's invariants): chunks and hashes every kFile entry's stream on `options.jobs`
// threads (files in parallel, a large file's blocks in parallel), stores the chunks the store
// lacks, then the chunk indexes and the manifest. Nothing is committed. Memory: a few 8 MiB
// blocks per file being read, whatever the file's size. The first failure stops the seal (files
// not yet started are skipped). Errors: InvalidArgument naming an entry that breaks the
// manifest's invariants; the errors of the source and its streams; Internal "file \"x\": the
// source delivered N bytes, expected M" for a stream that breaks its contract; store errors.
Result<SealResult> SealEntries(std::span<const SealItem> items, EntrySource& source,
                               const SealOptions& options, ChunkStore& store,
                               TransferCounters* counters);

// One entry of a walked directory tree.
struct ScannedEntry {
  std::string path;    // relative, '/'-separated
  struct stat st;      // lstat: a symlink is not followed
  std::string target;  // symlink target
};

// Lists the tree below `dir` (never following symlinks), sorted bytewise by path (the
// manifest's order), for a caller that keeps the regular files (file:// sync): sockets, FIFOs and
// devices are listed as they are (their `st` says which), and symlink targets are read; names and
// symlink targets need not be UTF-8 (the caller checks the paths it keeps). Every step is
// relative to a directory handle, so any depth and path length the file system holds works, in
// time linear in the tree. Errors: ErrnoError naming a path that cannot be read.
Result<std::vector<ScannedEntry>> ScanDirectory(const std::filesystem::path& dir);

// Walks `dir` (never following symlinks) into sealed entries and seals them with SealEntries.
// Errors: InvalidArgument "path \"x\": is a socket|FIFO|device …" for other file types or names
// that are not valid UTF-8; InvalidArgument for a SealOptions::refused_dirs directory at, above
// or below `dir`: "directory \"D\": is <what><hint>", "… is inside <what><hint>", "path \"x\": is
// <what><hint>"; FailedPrecondition "file \"x\": changed while being pushed" when a
// file's size, mtime or ctime moves during the read; store errors.
Result<SealResult> SealDirectory(const std::filesystem::path& dir, const SealOptions& options,
                                 ChunkStore& store, TransferCounters* counters);

struct PushOptions {
  std::filesystem::path dir;
  std::string ns;
  std::string volume;
  std::vector<std::string> tags;
  std::string source_uri;
  std::optional<int64_t> expected_sequence;
  SealOptions seal;
  // A commit refused as "… is not stored" (IsNotStoredError: a replica that accepted chunks died
  // before they were durable) is followed by this many rounds of sealing again (storing what is
  // missing) and committing again.
  int max_commit_rounds = 3;
};

struct PushResult {
  PinnedRef ref;
  int64_t sequence = 0;
  bool head_updated = false;
  std::vector<std::string> tags_applied;
  VersionStats stats;
  // Uploads, counting those of later commit rounds too (chunks stored again after the store lost
  // them: a replica that died before they were durable).
  uint64_t chunks_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t chunks_reused = 0;
  uint64_t metadata_bytes_uploaded = 0;
  // The part of chunks_uploaded that later commit rounds stored again (0 in a push of one round).
  uint64_t chunks_uploaded_again = 0;
  bool unchanged = false;
  // The symlinks that point out of the version (SymlinksLeavingTheTree): it holds the links, not
  // what they point to, so the CLI warns.
  std::vector<Entry> symlinks_outside;
};

// The symlink entries of `m` whose target is absolute or, read as text from the link's
// directory ("." skipped, ".." one level up), climbs above the version's root: a mount or a pull
// of the version shows them dangling or pointing at whatever that path holds on the reader's
// machine (a Hugging Face cache snapshot pushed as it is: every file a link into ../../blobs).
// The text is judged, not the tree, so a link that goes through another link may be misjudged
// either way. In manifest order.
std::vector<Entry> SymlinksLeavingTheTree(const Manifest& m);

// Claims the volume, seals options.dir into `store`, makes the store durable, and commits the
// version with its tags in one registry transaction: the only point where it becomes visible.
// A commit refused as not stored is retried after sealing again (PushOptions::max_commit_rounds).
// Errors: Conflict "volume …: push in progress" when another push holds the claim; the errors of
// SealDirectory and Registry::Commit. On any error nothing is committed.
Result<PushResult> Push(const PushOptions& options, ChunkStore& store, Registry& registry,
                        TransferCounters* counters);

}  // namespace bdn
