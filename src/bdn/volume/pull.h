// Pull and cat: materialize a version (or a subtree) into a local directory, or stream one file.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/status.h"
#include "bdn/volume/chunk_reader.h"
#include "bdn/volume/push.h"
#include "bdn/volume/version_view.h"

namespace bdn {

struct PullOptions {
  std::string path;                   // subtree or file to pull ("" = whole version)
  std::vector<std::string> includes;  // if non-empty, only these paths (and their subtrees)
  enum class Layout { kFullPaths, kStripPrefix } layout = Layout::kFullPaths;
  enum class Existing { kRefuse, kOverwrite } existing = Existing::kRefuse;
  int jobs = 0;              // files written at once; 0 = all cores
  ChunkReaderOptions reads;  // batching of chunk reads from a store that prefers batches
  // How long a pull waits for another pull that is writing one of its files (holding its partial
  // file's lock) while that partial file does not change (size, blocks, times): the wait goes on
  // as long as the other pull makes progress, and fails after this long without any (a stopped
  // or hung process). --writer-stall-time.
  std::chrono::milliseconds writer_stall_time = std::chrono::minutes(1);
  std::shared_ptr<Clock> clock = Clock::Real();  // of that wait (tests: testutil::FakeClock)
  // Called with the stat of every directory the walk to `dest` looks a name up in, before it
  // does (and so before it makes a missing directory there), then of `dest` itself and of each
  // directory above it as the kernel sees them (".." from its descriptor, up to "/"), all with
  // `dir` = dest as given; then, while the pull plans (before anything is written), of every
  // directory already there below dest that the pull enters or where a directory of the version
  // goes (its modes and times are set on it), with `dir` naming it (dest/a/b); and again of such
  // a directory made meanwhile, and of each just before its mode and times are set. An error ends
  // the pull (the CLI refuses the embedded store's directories by device and inode, whatever path
  // reaches them, a directory of the pulled tree too). Empty: none.
  std::function<Status(const struct stat& st, const std::string& dir)> check_directory;
};

struct PullResult {
  uint64_t files_written = 0;
  uint64_t files_skipped = 0;  // already present with the right content (resumed pull)
  uint64_t bytes_written = 0;
  uint64_t symlinks = 0;  // symlinks made (not those already there with their target)
};

// Writes the selected entries under `dest` (created if missing): directories, files, symlinks
// (target verbatim, never followed) and hardlinks; then permission bits, and the mtimes the
// manifest records (--preserve-mtime; of files, symlinks and directories; atime left alone;
// without them files keep the time they were written); modes and mtimes already right are not
// set again, so a pull with nothing to do changes nothing. Each file is assembled
// in its partial file (PartialFileName, in the same directory; all-zero chunks left as holes) and
// renamed into place only once its size and whole-file BLAKE3 are the entry's. A file already at
// its place with the right size and BLAKE3 is kept, so an interrupted pull resumes (the leading
// chunks of its partial file that hash to their ids are kept too, and count in the whole-file
// check). Only files of this user's whose every name is one the version gives them here (told by
// inode: the file's own path and its pulled hardlinks) are kept or given a mode (where it differs;
// every check and change of a kept file goes through one descriptor opened without following a
// symlink, so a name swapped for a symlink meanwhile is never followed), and only partial files
// with one link are resumed from: an identical file with other names or another user's is replaced
// by a copy of its own, and anything else at a partial file's name is removed first, so a pull
// never writes, chmods or renames a file that has a name outside the destination. --overwrite
// (kOverwrite) replaces files and symlinks in the way, and directories only when empty. Several
// pulls of one version into one directory at once all succeed: each file is written by one of
// them (the holder of its partial file's lock, which it keeps until the file is renamed into
// place) and kept by the others, and directories, symlinks and hardlinks made meanwhile by another
// pull are taken as already there. Up to
// options.jobs files are written at once; from a store that prefers batches (a remote tier) their
// chunks are read in batches (ChunkReader, bounded by options.reads), else one Get per chunk. Every
// file-system step is relative to a directory handle (base/dir_fd.h): paths longer than PATH_MAX
// work, and the time is linear in the tree whatever its depth. Layout kFullPaths puts entry "a/b"
// at dest/a/b; kStripPrefix drops options.path from the front. Errors: NotFound "path \"p\": not in
// bdn:…"; FailedPrecondition "directory \"dest\": exists and is not a directory" (or "…: a
// symlink to \"t\", which is not a directory" / "which does not exist"; a symlink's target is
// not made); AlreadyExists "file \"dest/x\": exists with other content (use --overwrite)" (without
// kOverwrite), or for another kind of thing there "file \"dest/x\": a FIFO is in the way (use
// --overwrite)" (a socket, a character or block device, a directory, a symlink; "path \"dest/l\":
// a file is in the way …" where a symlink goes; only a regular file is ever opened, without
// blocking); FailedPrecondition "path \"dest/x\": a directory that is not empty is in the way
// (…)" and (not as root) "file \"dest/x\": another user's file in a sticky directory is in the
// way and cannot be replaced (…)" (what --overwrite cannot replace either; these come first),
// FailedPrecondition "directory \"dest/x\": another user's (uid N); a pull writes into no other
// user's directory below DIR (…)" (a directory below dest must be this user's or root's).
// All of these are found before anything is written, so a refused pull changes nothing; more
// than one: "…; also in the way: \"dest/y\", … (N in all)". FailedPrecondition "path \"dest/x\":
// not a directory (a symlink or file is in the way)" (put there meanwhile; never written
// through); FailedPrecondition "file \"dest/x\" (its partial file .bdn-partial-…): a directory is
// in the way; remove it"; Conflict "file \"dest/x\": another pull is writing it (pid N, \"bdn\")
// and its partial file .bdn-partial-… has not changed for 1m (stopped? pull again once it has
// ended)" (another process holds its partial file's lock and the file has not changed for
// options.writer_stall_time; while it changes the pull waits, then judges what that pull put in
// place as any file already there: the version's content is kept); Conflict "file \"dest/x\":
// another pull put other content there while this one ran (a pull of another version into the
// same directory?)" (with kOverwrite too: pulls of two versions never mix without an error);
// in a shared directory, another user's partial file is removed only while this pull holds its
// lock: one another user's pull is writing is waited for as above (Conflict "file \"dest/x\":
// another user's pull (uid U) is writing it (…) and its partial file … has not changed for 1m
// (…)" when it stalls), or, when this pull cannot open it, Conflict "…: another user's pull (uid
// U) is writing it (pid N, \"bdn\") through its partial file .bdn-partial-…; pull again once it
// has ended" ("another user's process (uid U)" when the holder is no bdn process, a lock taken
// by `flock`, say); FailedPrecondition "file \"dest/x\" (its partial file …): a file with N names
// is in the way, locked by another process (pid N, \"x\"); remove it, or pull elsewhere";
// Corruption "file \"x\": its chunks hold N bytes, not its size M" or
// "file \"x\": content does not match its digest b3:…" (nothing is put in place and the partial
// file is removed); FailedPrecondition "file \"dest/x\" (its partial file …): No space left on
// device (the partial file is kept, so that the next pull resumes from it; …)" (also EDQUOT);
// store errors (Corruption naming the chunk and file); options.check_directory's errors (those
// for the walk to dest and for the directories already below it come before anything is
// written).
Result<PullResult> Pull(const VersionView& view, const std::filesystem::path& dest,
                        const PullOptions& options, TransferCounters* counters);

// The name of a partial file in which Pull assembles the file `name` (one path component), in
// the same directory: ".bdn-partial-" and the first 32 hex digits of BLAKE3(name) (attempt 0),
// else of BLAKE3(name, NUL, attempt in decimal). Pull takes the first attempt that is the name of
// no entry the version has in that directory, pulled or not, and no other file's partial file
// there (a version may hold names like these too). Every name of the version is avoided, not only
// those a pull with --include or a path writes: an earlier pull may have put any of them there,
// and what stands at a partial file's name is resumed from and renamed over the file, or removed
// (PullNeverTouchesAnEntryNamedLikeAPartialFileOutsideItsIncludes). A file there cannot be told
// apart from a partial file by what it holds (a partial file is a plain file of the puller's,
// like any other; a mark such as an xattr is not kept by every file system), so names keep them
// apart: a partial file never takes a name the version gives anything, and the choice depends
// only on the version's names, not on what a pull selects: one per file, the same in every pull
// of the version, so a later pull of the same path (with or without --include) resumes from it.
// Partial files stay beside their files rather than in a directory of their own, as resuming
// needs a name that the next pull finds again and the rename into place needs the same file
// system.
std::string PartialFileName(std::string_view name, int attempt = 0);

// Writes one file's bytes (hardlinks and symlinks inside the version followed,
// VersionView::FindFollowing) to `fd`, verified chunk by chunk (digest and
// length) before each is written; from a store that prefers batches, the chunks are read in
// batches a few ahead of the writes (bounded by `reads`). At the end the whole content's BLAKE3
// is checked against the entry's digest.
// Errors: FindFollowing's, InvalidArgument for a non-file, store errors and Corruption "file
// \"path\": chunk b3:…: is N bytes, the version says M" (prefixed "file
// \"path\"", naming the chunk; nothing of that chunk is written); Corruption "file \"path\":
// content does not match its digest b3:… (the bytes written are not the file's)" after all
// bytes were written.
Status CatFile(const VersionView& view, const std::string& path, int fd,
               const ChunkReaderOptions& reads = {});

}  // namespace bdn
