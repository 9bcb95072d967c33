// The bdn commands as plain functions: each parses nothing, takes its arguments as a struct,
// prints its result to stdout (text or JSON) and returns a Status that main maps to an exit code.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/status.h"
#include "bdn/format/ref.h"
#include "bdn/http/client.h"
#include "bdn/maintenance/gc.h"
#include "bdn/registry/registry.h"
#include "bdn/remote/retry.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/local_chunk_store.h"

namespace bdn::cli {

// Where data lives and how to print. One per process.
struct Context {
  std::filesystem::path home;  // $BDN_HOME or ~/.local/share/bdn
  bool json = false;
  std::shared_ptr<ChunkStore> store;
  std::shared_ptr<Registry> registry;
  // The client of the `bdn serve` origin that store and registry talk to (OpenRemote); null for
  // the embedded store. Whether a command works against an origin is this, never the store's type.
  std::shared_ptr<http::HttpClient> origin;
  // The bearer token of `origin` (may be empty), also sent to cache nodes, which check with the
  // origin what it may read.
  std::string token;
  // The retry budget the store and registry share, in a context made by UnderRetryBudget.
  std::shared_ptr<remote::RetryBudget> retry_budget;
};

// Options of the local pack store of the data directory `data` (data/store: the embedded store's
// home, or bdn serve's --data): BDN_SYNC=0 turns fdatasync off (scratch stores, benchmarks);
// BDN_ZSTD_MIN_SAVING (a fraction in [0, 1], default 0.1; 1 stores every blob raw) is the least
// saving for which a blob is stored zstd-compressed; an old layout is refused naming
// `bdn store migrate --data <data>`; writers record their claims in gc/claims
// (ClaimMode::kProcessFile; bdn serve keeps them in memory).
// Errors: InvalidArgument "BDN_ZSTD_MIN_SAVING \"…\": …" for a value that is not such a number.
Result<LocalChunkStore::Options> LocalStoreOptions(const std::filesystem::path& data);

// The pid a bdn serve wrote at the start of its serve.lock, open as `fd` (LockDataDir, serve.cc):
// the leading decimal digits of its first 31 bytes, "" where there are none.
std::string ServeLockPid(int fd);

// <data>/serve.lock, opened without following a symlink or waiting on a FIFO (read-only, or
// read-write and made 0600 if missing with `create`); an invalid descriptor where it is missing
// (and not `create`). Errors: FailedPrecondition "<flag> <data>: <data>/serve.lock is a symlink,
// not the regular file bdn serve locks; remove it" for anything but a regular file; I/O errors.
Result<UniqueFd> OpenServeLock(const std::filesystem::path& data, std::string_view flag,
                               bool create);

// What HoldNotServed holds: a shared flock on the data directory and one on its serve.lock.
struct NotServedHold {
  UniqueFd dir;
  UniqueFd file;
};

// Refuses the data directory `data` while a bdn serve holds it (an exclusive flock on the
// directory and on <data>/serve.lock: LockDataDir, serve.cc), and otherwise holds a shared flock
// on both for as long as the returned hold lives, which a bdn serve started meanwhile finds: it
// then refuses to start. serve.lock is made (OpenServeLock) only with `create` (once the
// directory is known to be this user's own: OpenEmbedded's checks); before that, a serve.lock
// that cannot be had is left for those checks. Nothing is held where the directory is missing,
// nor on a file system without flock.
// Errors: FailedPrecondition "<flag> <data>: in use by bdn serve (pid N); <command>", where
// `command` says what to do ("stop it first") and `flag` how the command line named it; with
// `create`, OpenServeLock's.
Result<NotServedHold> HoldNotServed(const std::filesystem::path& data, const char* command,
                                    std::string_view flag = "--data", bool create = true);

// Whether OpenEmbedded makes a store where there is none.
enum class EmbeddedOpen {
  kCreateIfMissing,  // commands that add to it (push, sync start, secret set)
  kExisting,         // every other: a mistyped --home or BDN_HOME creates nothing
};

// What of a store a command needs (CheckStoreExists).
enum class StoreNeeds {
  kPacks,     // its store/ directory (store stats, rebuild-index, migrate)
  kRegistry,  // its registry.db too: what decides which versions live (reads, gc, fsck)
};

// InvalidArgument "<what> <dir>: not a directory" for a file there;
// NotFound "<what> <dir>: no store there (nothing was pushed to it)" unless `dir` holds a store
// (a registry.db, or with StoreNeeds::kPacks a store/ directory), so that a command that reads
// or maintains one creates nothing at a mistyped path. With kRegistry, a store/ directory of
// packs without a registry.db beside it (the --data of a `bdn serve --db`, whose registry is in
// PostgreSQL: gc with an empty registry would delete every pack) is FailedPrecondition "<what>
// <dir>: its store has no registry.db beside it (a bdn serve --db keeps its registry in
// PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done".
// `what`: how the command names the directory ("--data", "embedded store").
Status CheckStoreExists(const std::filesystem::path& dir, std::string_view what,
                        StoreNeeds needs = StoreNeeds::kRegistry);

// The first of `refs` (those not empty) that is not a well-formed ref of a namespace, volume,
// version or entry (ParseRef, RefForm::kNamespace): its InvalidArgument; OK when all are. No I/O.
Status CheckRefSyntax(const std::vector<std::string>& refs);

// What push says first of a DIR that cannot be pushed, before anything is opened: ErrnoError
// "directory \"DIR\"" when it cannot be stat'ed (ENOENT → NotFound), InvalidArgument
// "directory \"DIR\": not a directory". No error for a directory.
Status CheckPushDirectory(const std::string& dir);

struct PushArgs;
// Every check of Push's arguments that needs no store, in Push's words, so that a refused push
// makes nothing at a new home: the ref (ParseWriteRef: a volume, no digest or path), each tag
// (ValidateTag, not head), --source-uri (UTF-8), then CheckPushDirectory.
Status CheckPushArgs(const PushArgs& args);

// Opens the embedded store under `home`: home/store (packs) and home/registry.db, all private
// to the owner (directories 0700, files 0600; existing ones with group or other bits are
// tightened with a warning); its commits run the commit check (CommitCheckingRegistry).
// Errors: CheckStoreExists's (kExisting, naming --home and BDN_HOME); Internal/PermissionDenied
// naming the path.
Result<Context> OpenEmbedded(const std::filesystem::path& home, bool json,
                             EmbeddedOpen mode = EmbeddedOpen::kCreateIfMissing);

// $BDN_TOKEN without the spaces, tabs and line breaks around it (a token read from a file or a
// Kubernetes secret often ends in a newline); "" when unset. What remains is checked where it is
// used (http::CheckBearerToken: "BDN_TOKEN: byte N of M is ...").
std::string TokenFromEnvironment();

// Connects to a `bdn serve` origin at `url` with `token` (may be empty): remote store and
// registry behind the same interfaces; each request is retried on its own (a few tries).
// `session`: sent as the Bdn-Session header of every request, which a load balancer in front of
// several replicas may hash so that one invocation's requests (a push's uploads and its commit)
// reach one replica (docs/http-api.md, "Sessions"); nullopt: 16 random bytes in hex, new for each
// process; empty: no header.
// `home`: where this machine keeps what remote commands leave here (the default node cache, the
// mount daemons' logs, push claims): --home if given, else DefaultHome().
// `named_by`: what gave the URL, which its errors name ("--remote", or "BDN_REMOTE" where only
// the variable did: from an attacking helper, BDN_REMOTE's errors blamed a --remote not given).
// Errors: InvalidArgument for a malformed URL ("--remote: url ..."), or a session of more than 128
// characters or one holding anything but visible ASCII.
Result<Context> OpenRemote(const std::string& url, const std::string& token, bool json,
                           const std::filesystem::path& home,
                           std::optional<std::string> session = std::nullopt,
                           const std::string& named_by = "--remote");

// The context of one long operation (a push): for a remote origin, a store and registry over
// the same connections whose requests all share one new RetryBudget of `deadline` (set as
// result.retry_budget), so that a dead origin fails the operation once, after that deadline,
// however many requests are pending; an embedded context as it is. Its messages name the
// deadline by `flag` (cat, which has no flag: "BDN_RETRY_DEADLINE").
Context UnderRetryBudget(const Context& ctx, std::chrono::milliseconds deadline,
                         const std::string& flag = "--retry-deadline");

// The store that reads the blobs of version `pinned`: for an origin, a RemoteChunkStore over
// ctx.origin (and ctx.retry_budget) whose reads name the version (Bdn-Version), which a key
// scoped to a namespace needs (docs/http-api.md, "Chunks"); the embedded store as it is.
std::shared_ptr<ChunkStore> ReadStore(const Context& ctx, const PinnedRef& pinned);

// Whether a command already printed its JSON result (e.g. verify, which then fails): main prints
// a JSON error only when it did not.
bool ResultPrinted();

// The default $BDN_HOME: $BDN_HOME, else $XDG_DATA_HOME/bdn, else ~/.local/share/bdn (~: $HOME,
// else the user's home in the password database).
std::filesystem::path DefaultHome();

// bdn store migrate|rebuild-index|stats: maintenance of the local pack store of the data
// directory `data` (an embedded store's home, or bdn serve's --data). Text or JSON on stdout.
// Migrate converts a store of the old one-file-per-chunk layout (MigrateOldLayout), with a
// progress display on stderr; rebuild-index rewrites the index from the pack footers; stats
// counts packs, blobs and bytes (reads every footer).
// Errors: those of LocalChunkStore::Open (an old layout, except for migrate), MigrateOldLayout,
// RebuildIndex and Stats.
Status StoreMigrate(const std::filesystem::path& data, bool json);
// Converts a node cache directory (--cache-dir of mounts and cache serve) of the old
// one-file-per-chunk layout into regions, in place, as StoreMigrate does for a store. Only a
// directory a node cache made (JudgeCacheDir) is touched; an empty one is marked as the cache's.
// Errors: NotFound "node cache <dir>: no such directory"; those of OpenPrivateDirectory,
// JudgeCacheDir (FailedPrecondition "node cache <dir>: holds <name>, which is not the node
// cache's; ..."), MarkCacheDir and MigrateOldLayout.
Status StoreMigrateCache(const std::filesystem::path& cache_dir, bool json);
Status StoreRebuildIndex(const std::filesystem::path& data, bool json);
Status StoreStats(const std::filesystem::path& data, bool json);

// ---- Garbage collection and checks (maintenance_commands.cc) ----

struct GcArgs {
  bool dry_run = false;
  double max_repack_fraction = 0.5;  // GcOptions::max_repack_fraction
  std::string grace = "1m";          // GcOptions::grace (a duration)
};
// bdn gc: one garbage collection (RunGc) of the local pack store of the data directory `data`
// (the embedded store's home, or a stopped bdn serve's --data) against its registry; prints
// what it reclaimed (bytes, packs deleted and repacked) or, with dry_run, what it would.
// Errors: InvalidArgument for --max-repack-fraction outside [0, 1] or a bad --grace;
// FailedPrecondition "--data D: in use by bdn serve (pid N); its GC runs inside it
// (--gc-interval)"; those of opening the store and registry and of RunGc.
Status Gc(const std::filesystem::path& data, const GcArgs& args, bool json);

// For tests that kill a GC at an exact point (tests/integration/lifecycle_crash_loop_test.sh):
// with BDN_TEST_GC_STOP_AT set to phases as GcPhaseName spells them, comma-separated (e.g.
// "doomed" or "copied,swept"), the returned hook calls `hook` and, at each of those phases,
// writes "gc: stopped at <phase> (BDN_TEST_GC_STOP_AT)" to stderr and stops the whole process
// (SIGSTOP), so that the test kills it there or lets it go on (SIGCONT). Unset or empty: `hook`
// itself. Used by bdn gc and bdn serve's periodic GC.
// Errors: InvalidArgument "BDN_TEST_GC_STOP_AT \"…\": \"x\" is not a gc phase (planned, …)".
Result<std::function<void(GcPhase)>> WithGcStopFromEnvironment(std::function<void(GcPhase)> hook);

// bdn fsck [--repair]: RunFsck of the data directory `data` (the embedded store's home, or a
// stopped bdn serve's --data); prints each problem with the versions it affects (and, with
// repair, what was done). Errors: Corruption "fsck: N problems" when any were found (exit 5;
// with repair too: the data is back only once pushed again); FailedPrecondition for a directory
// bdn serve holds; those of opening the registry and of RunFsck.
Status Fsck(const std::filesystem::path& data, bool repair, bool json);

// The reason of a command a stop signal (Ctrl-C, kill, a closed terminal) ended cleanly.
inline constexpr std::string_view kInterruptedReason = "interrupted";

// Exit code for a Status: 0 ok, 2 invalid argument, 3 not found, 4 conflict/already exists,
// 5 corruption, 6 permission denied, 7 unavailable/deadline, 8 failed precondition, 130
// interrupted (kInterruptedReason, as a shell reports Ctrl-C), 1 other. Takes the code
// AsReported gives.
int ExitCode(const Status& s);

// The Status as the CLI reports it (exit code, the JSON error's "code"): a chunk that the store
// lost to corruption (NotFound with reason kSetAsideCorrupt: its only copy was set aside) is
// Corruption, as the read that found it was; any other Status as it is.
Status AsReported(const Status& s);

// Parses `text` as the target of a write: bdn:ns/vol or bdn:ns/vol:tag, no digest and no path
// (push's REF, volume sync start's --dest). `what` starts the messages, e.g. "ref \"<text>\":
// push" or "--dest \"<text>\":". Errors: those of ParseRef; InvalidArgument "<what> takes a
// volume, not a digest" and "<what> takes no path".
Result<Ref> ParseWriteRef(const std::string& text, const std::string& what);

// Every command below prints its result on stdout: text for people, or with ctx.json one JSON
// object (JsonText) whose keys are named at each command; progress and notes go to stderr.
// Besides the errors named, each returns those of parsing its refs (InvalidArgument, ParseRef)
// and resolving them (ResolveRef: NotFound "volume bdn:ns/vol: not found", "tag …", "version
// …"), and those of the store and registry it reads (Unavailable, Corruption, Internal).

struct PushArgs {
  std::string dir;
  std::string ref;
  std::vector<std::string> tags;
  std::string source_uri;
  int jobs = 0;
  bool preserve_mtime = false;
  std::optional<int64_t> expected_sequence;
  // With a remote origin, the push fails (Unavailable, exit 7) once the origin has failed
  // continuously this long (RetryBudget).
  std::chrono::milliseconds retry_deadline{60000};
  // What gave retry_deadline, as its messages name it: "--retry-deadline" or "BDN_RETRY_DEADLINE".
  std::string retry_deadline_name = "--retry-deadline";
};
// bdn volume push DIR REF: seals args.dir (SealDirectory) and commits it to REF's volume, moving
// head and setting REF's tag and args.tags, with a progress display on stderr. Prints the
// pinned ref (stderr: "sealed: N files, SIZE, C chunks (U new, B stored)", or "unchanged: …"
// when the version was already head); JSON: version_ref, digest, sequence, head_updated,
// tags_applied, files, bytes, chunks, chunks_uploaded, bytes_uploaded, chunks_reused,
// metadata_bytes_uploaded, unchanged.
// Errors: ParseWriteRef's ("ref \"…\": push takes …"); InvalidArgument for a tag that is not
// valid (ValidateTag), "tag \"head\": reserved; push always moves head", "--source-uri \"…\":
// not valid UTF-8"; those of bdn::Push (the directory's: NotFound, PermissionDenied; Conflict
// "…: sequence is N, expected M" with expected_sequence); Unavailable once a remote origin has
// failed for retry_deadline ("… (gave up after retrying for 1m; --retry-deadline 1m)").
Status Push(Context& ctx, const PushArgs& args);

struct LsArgs {
  std::string ref;  // "" lists namespaces
  bool recursive = false;
};
// bdn ls [REF]: with no ref the namespaces (JSON: namespaces: [name]); "bdn:ns" its volumes
// (JSON: volumes: [{volume, head, versions}]); a volume or version ref with an optional path the
// entries of that directory, in path order (all below it with `recursive`; the entry itself for
// a file): text "<mode> <size> <path>" ("/" after directories, "-> target" after symlinks,
// "=> target" after hardlinks; names escaped, EscapeName) with the pinned ref on stderr; JSON:
// version_ref, entries: [{path, kind, mode, size, digest, target, mtime_ns}].
// Errors: NotFound "path \"p\": not in bdn:…@b3:…".
Status Ls(Context& ctx, const LsArgs& args);

// bdn volume stat REF: a volume (no tag, digest or path: head, sequence, tags, live and deleted
// version counts, created; JSON: volume, head, head_ref, sequence, tags {name: digest},
// versions, deleted_versions, created), a version (its record and chunker; JSON as `volume
// versions` plus chunker) or an entry of a version (REF with a path: path, kind, mode, size,
// digest, target, mtime_ns, version_ref, and for a file chunks and chunk_index when it has one;
// text "key: value" lines, the mode in octal).
// Errors: NotFound "path \"p\": not in bdn:…"; those of loading the file's chunk list.
Status Stat(Context& ctx, const std::string& ref);

struct VersionsArgs {
  std::string ref;
  bool include_deleted = false;
};
// bdn volume versions REF: the volume's versions, newest first (Registry::ListVersions), deleted
// ones too with include_deleted: a table SEQUENCE DIGEST SIZE LIFECYCLE HEAD CREATED
// [DELETE_AFTER] TAGS; JSON: volume, versions: [{version_ref, digest, sequence, lifecycle,
// head, tags, created, files, bytes, chunks, entries, source_uri, delete_after}].
// Errors: InvalidArgument for a ref with a tag, digest or path; NotFound "volume bdn:ns/vol:
// not found".
Status Versions(Context& ctx, const VersionsArgs& args);

struct TagArgs {
  std::string volume_ref;
  std::string tag;
  std::optional<int64_t> expected_sequence;
};
// bdn volume tag set --volume-ref REF --tag T: points tag T of REF's volume at the version REF
// resolves to (head when it names none). Prints "bdn:ns/vol:T -> <pinned ref>"; JSON: tag,
// version_ref, sequence (the volume's, after the change; unchanged if T already named it).
// Errors: InvalidArgument for a tag that is not valid (ValidateTag) or "head" (reserved);
// FailedPrecondition "version …: is deleted"; Conflict "…: sequence is N, expected M" when
// expected_sequence is given and stale.
Status TagSet(Context& ctx, const TagArgs& args);
// bdn volume tag delete --volume-ref REF --tag T: removes tag T of REF's volume. Prints
// "deleted tag T of bdn:ns/vol"; JSON: tag, volume, sequence.
// Errors: InvalidArgument as TagSet; NotFound "tag \"T\" of bdn:ns/vol: not found"; Conflict as
// TagSet.
Status TagDelete(Context& ctx, const TagArgs& args);

// bdn volume rm REF@digest | --recursive REF (docs/spec.md §8): soft-deletes one version, or
// every live version of the volume, in one registry transaction; their tags are dropped and the
// time until which each stays restorable (delete_after) is printed. Asks on the terminal unless
// `yes`. Errors: InvalidArgument "bdn volume rm: stdin is not a terminal; give --yes to delete
// without asking" (before anything is read), "ref \"…\": rm takes REF@digest (or --recursive
// REF)"; FailedPrecondition "bdn volume rm: not confirmed; nothing was deleted"; the
// registry's (Conflict "version …: already deleted …", NotFound).
struct RmArgs {
  std::string ref;
  bool recursive = false;
  bool yes = false;
  std::optional<int64_t> expected_sequence;
};
Status Rm(Context& ctx, const RmArgs& args);

// bdn volume restore REF@digest: a deleted version alive again within its retention (tags are
// not restored; head moves back to it only if it is newer than head). Errors: InvalidArgument
// for a ref without a digest; the registry's (Conflict "…: is not deleted", FailedPrecondition
// "…: its retention ended …"); the commit check's when blobs are missing.
struct RestoreArgs {
  std::string ref;
  std::optional<int64_t> expected_sequence;
};
Status Restore(Context& ctx, const RestoreArgs& args);

// The retention of the embedded registry: $BDN_RETENTION (a duration, 0s to 3650d), else 7 days.
// Errors: InvalidArgument "BDN_RETENTION: duration …".
Result<std::chrono::milliseconds> EmbeddedRetention();

struct PullArgs {
  std::string ref;
  std::string dir;
  std::vector<std::string> includes;
  bool strip_prefix = false;
  bool overwrite = false;
  int jobs = 0;
  std::string writer_stall_time;  // --writer-stall-time ("": PullOptions' default, 1m)
  // From an origin: how long its reads may fail (refused, reset, 5xx) before the pull gives up;
  // all of its requests share it (remote::RetryBudget), as a push's do.
  std::chrono::milliseconds retry_deadline{60000};
  std::string retry_deadline_name = "--retry-deadline";  // as PushArgs'
};
// Pull's checks that need no store: InvalidArgument "pull takes REF then DIR: \"bdn:…\" is a ref
// (bdn volume pull REF DIR)" for the two given the other way round.
Status CheckPullArgs(const PullArgs& args);
// bdn volume pull REF DIR: bdn::Pull of REF's version (or REF's path in it) into args.dir, with
// a progress display on stderr. Each include has trailing slashes dropped and must be a valid
// entry path. writer_stall_time: PullOptions::writer_stall_time, a duration from 100ms to 24h
// (InvalidArgument "--writer-stall-time: duration …" otherwise). Prints the pinned ref (stderr:
// "pulled N files (SIZE), M already present"); JSON: version_ref, files_written, files_skipped,
// bytes_written. Errors: InvalidArgument for an include that is not a valid path
// (ValidateEntryPath); those of bdn::Pull (volume/pull.h: NotFound, AlreadyExists without
// overwrite, Conflict, Corruption).
Status Pull(Context& ctx, const PullArgs& args);

// bdn volume cat REF/path: the file's bytes on stdout, each chunk verified before it is written
// (CatFile). Errors: InvalidArgument "ref \"…\": cat needs a file path"; those of CatFile
// (NotFound, InvalidArgument for a non-file, Corruption "…(the bytes written are not the
// file's)").
Status Cat(Context& ctx, const std::string& ref);
// bdn volume diff A B: the paths added, removed and changed from version A to B (DiffVersions)
// and what moving from A to B fetches. Text: "--- A" and "+++ B", then "A path", "D path", "M
// path" lines and a summary; JSON: from, to, added, removed, changed, fetch_bytes,
// fetch_chunks. Errors: InvalidArgument for a ref with a path (checked before either is
// resolved); those of resolving and reading the versions.
Status Diff(Context& ctx, const std::string& ref_a, const std::string& ref_b);
// bdn volume verify REF: reads and checks every chunk and file of the version (VerifyVersion,
// `jobs` at once; 0 = all cores), or with REF/path that file or the files below that directory.
// Prints each problem ("<code>: file \"p\": <message>") and a summary; JSON: version_ref, path
// (when given), files, chunks, bytes, ok, problems: [{path, chunk, error, message}]. Errors:
// NotFound "path \"p\": not in version b3:…"; Corruption "version bdn:…: N problems" when any were
// found (exit 5; the result is printed first).
Status Verify(Context& ctx, const std::string& ref, int jobs);

struct MountArgs {
  std::string ref;
  std::string mountpoint;
  bool foreground = false;
  uint64_t memory_cache_bytes = 0;  // 0 = default
  // With a remote origin only (the embedded store is already on local disk): the node cache
  // directory ("" = $BDN_HOME/cache; one that cannot be written, e.g. on a read-only file
  // system, is left out with a warning) and its bound (0 = 10 GiB), and the in-cluster cache
  // nodes (URLs, each may hold a comma-separated list, remote::ParseNodeList; none =
  // $BDN_CLUSTER_CACHE, same format).
  std::string cache_dir;
  uint64_t cache_size_bytes = 0;
  std::vector<std::string> cluster_cache;
  int64_t read_timeout_ms = 0;  // a read that cannot get its bytes fails after this; 0 = 55 s
  // Other users may read the mount (file modes apply); see MountOptions::allow_other.
  bool allow_other = false;
  // When the version was created (VersionCreatedUnixMs): the mtime shown for entries whose
  // manifest records none. 0 = unknown (the origin could not be asked): the time of mounting.
  int64_t version_created_unix_ms = 0;
  // Said on stderr once the version's manifest is read (Mount: that the version is deleted).
  std::string warn_on_open;
  // The mount daemon's log (MountLogFile): "" = <home>/logs/mount-<name>-<12 hex>.log; in the
  // foreground "" = stderr. Lines of log_level and above.
  std::string log_file;
  log::Level log_level = log::Level::kInfo;
};
// For a mount of the embedded store (no ctx.origin): warns on stderr, once, naming those of
// --cache-dir, --cache-size and --cluster-cache that `args` gives, which only a mount from an
// origin uses (from a new user: they were ignored without a word).
void WarnRemoteOnlyMountFlags(const Context& ctx, const MountArgs& args);
// The tuning flags `args` gives, as "--cache-dir, --cache-size and --cluster-cache" ("" for
// none): the node cache's and the cluster's only, or also --memory-cache, --read-timeout and a
// --log-level other than info.
std::string GivenTuningFlags(const MountArgs& args, bool node_cache_only);
// The default log file of a mount daemon for `mountpoint` (absolute): <home>/logs/
// mount-<last path component>-<first 12 hex of BLAKE3 of the path>.log, one per mountpoint.
std::filesystem::path MountLogFile(const std::filesystem::path& home,
                                   const std::filesystem::path& mountpoint);
// From an attacking helper (a serve's --log-file naming its own secrets.key or a pack: log lines
// appended to them): InvalidArgument "--log-file <file>: inside <what> <dir>, among its own files
// (give a path outside it)" when `log_file` (as the kernel would resolve it: symlinks followed,
// missing components taken as they are) is `dir` or below it, but for <dir>/logs/... when
// `logs_allowed` (the embedded home, where mount daemons log by default). "" and a `dir` that
// does not exist pass, and so do paths below /dev and /proc (descriptors: OpenLogFile's rules).
// No descriptor is opened.
Status CheckLogFileOutside(const std::string& log_file, const std::filesystem::path& dir,
                           const std::string& what, bool logs_allowed);
// bdn volume mount. The same version already mounted at the mountpoint with the same
// allow_other is a no-op ("<ref> already mounted at <dir>"; JSON already_mounted: true, no
// daemon_pid). Errors: PermissionDenied "--allow-other: allow_other: ..." before anything
// else when args.allow_other is not permitted (CheckAllowOtherPermitted); then those of
// resolving the ref and of MountPinned (AlreadyExists for another version mounted there).
Status Mount(Context& ctx, const MountArgs& args);
// When the version `pinned` was created, from ctx.registry; 0 when the registry cannot say (no
// registry, or it failed: the caller mounts anyway).
int64_t VersionCreatedUnixMs(Context& ctx, const PinnedRef& pinned);
// Mounts the version `pinned` at args.mountpoint (created if missing, and removed again, if still
// empty, when the mount then fails; walked by OpenDirectoryPath
// so another user's symlink on it is refused: FailedPrecondition "mountpoint P: ... is a symlink
// owned by ..."; and a path another user could change before the mount is made: PermissionDenied
// "mountpoint P: owned by uid 1001 (mallory), ..." or CheckAncestor's errors for a directory on
// it); args.ref is ignored.
// In the background unless args.foreground (then `daemon_pid`, if not null, gets the daemon's
// pid). Prints nothing. The caller closes ctx.registry first if it will not need it (the daemon
// is a fork). `made`, if not null, gets the directories a background mount made for its
// mountpoint (it and its parents, as mkdir -p, in the order made), for a caller that may have to
// take the mount back (mounts apply).
Status MountPinned(Context& ctx, const PinnedRef& pinned, const MountArgs& args,
                   pid_t* daemon_pid = nullptr, std::vector<std::string>* made = nullptr);

// Delivers a stop signal that `mounts apply` held back while it replaced mounts, once the
// command's result (or error) is printed: the process then ends by that signal, as it would have
// without the hold. Nothing when none came. Call last, from main.
void DeliverHeldStopSignals();

// bdn mounts apply -f FILE: validates the deployment config's bdn.mounts, resolves every source
// once, inspects every mountpoint (InspectMountpoint), then mounts each entry at its path,
// prints the pinned refs and warns for every tag/head source. An entry whose path already holds
// a live bdn mount of its version (with the same allow_other) is left alone; a dead mount (its
// daemon was killed) is detached and mounted again, with a warning.
// Errors: InvalidArgument "FILE:LINE: <reason>" for an invalid config (unknown keys, missing or
// relative or duplicate paths, malformed refs, allow_other not a boolean); PermissionDenied
// "FILE:LINE: mounts[i].allow_other: ..." if allow_other is not permitted; FailedPrecondition
// "FILE:LINE: mountpoint P: already a bdn mount of REF ..." (another version, or another
// allow_other), all before anything is mounted; InvalidArgument "config FILE: is a directory,
// not a file" / "not a regular file" / "larger than 1048576 bytes"; the first mount error, after
// the mounts already made by this call are unmounted again, as RollbackError (mounts_config.h)
// says. The "REF mounted at P" lines are printed once every entry is mounted. `tuning`: how
// every entry is read (its caches, cache nodes, read timeout, log level: volume mount's flags);
// its ref, mountpoint, allow_other and log_file are the entry's own. With OtherMount::kReplace,
// a mountpoint holding another version (or the same one with another allow_other) is unmounted
// just before its entry is mounted ("REF mounted at P (replacing OLD)"; JSON "replaced"); one in
// use is not (Unmount's FailedPrecondition naming the process, "FILE:LINE: replacing OLD: …",
// and this run's mounts rolled back); a mount that then fails says OLD was unmounted.
enum class OtherMount { kRefuse, kReplace };
// MountsApply's first step alone: reads and validates the config, with its errors, opening
// nothing else (so that they come before those of the store).
Status CheckMountsConfig(const std::string& config_path);
Status MountsApply(Context& ctx, const std::string& config_path, const MountArgs& tuning = {},
                   OtherMount other = OtherMount::kRefuse);
// bdn mounts lock -f FILE: rewrites every tag/head source in the config to its pinned digest ref,
// changing only those values (comments and layout kept).
// An exclusive flock(2) on the config is held from its read to its replacement (a second lock
// of the file waits, saying so on stderr). The file is rewritten through a temporary file with a
// unique random name beside it (AtomicFileWriter: O_EXCL|O_NOFOLLOW), given the config's owner,
// group and permission bits, and renamed into place; a symlink is followed and its target
// replaced. Prints each change "FILE:LINE: SOURCE -> PINNED" once the file holds it (or that
// every source is already pinned); JSON: config, changes: [{line, from, to}]. Errors:
// InvalidArgument "FILE:LINE: …" and "config FILE: …" as MountsApply, and those of
// RewriteMountSources; those of resolving each source (prefixed "FILE:LINE"); Conflict "config
// FILE: changed while being locked; nothing written; run it again" when the file's bytes or the
// file at its name changed since it was read; FailedPrecondition "config FILE: has N hard links,
// which replacing it would break; nothing written"; ErrnoError "config FILE: cannot keep its
// owner U:G (run as its owner or root); nothing written: fchown"; ErrnoError "config FILE" for
// reading or writing it. Nothing is written on any error.
Status MountsLock(Context& ctx, const std::string& config_path);
// bdn mounts ls: every bdn mount of this machine (ListBdnMounts: this mount namespace) and
// whether its daemon serves it: "MOUNTPOINT  STATE  VERSION" lines (names escaped as EscapeName
// writes them; "  (allow_other)" after a mount made with it), or "no bdn mounts on this machine"
// on stderr. JSON: mounts: [{mountpoint, version_ref, state, allow_other, uid}]. States:
// serving, dead (bdn volume umount cleans it up), not answering (stopped or hung daemon), no
// access (another user's mount), covered (another mount at or above its path), unreachable (its
// path gives another error). Waits at most 5 s in all.
Status MountsList(Context& ctx);
// bdn volume umount MOUNTPOINT: Unmount (mount_table.h) of the absolute path. Prints
// "unmounted P"; JSON: mountpoint, unmounted. Errors: those of Unmount (InvalidArgument "…: not a
// bdn mount", FailedPrecondition "…: busy (…)").
Status Umount(Context& ctx, const std::string& mountpoint);

// ---- Sync jobs and secrets (docs/spec.md §6, docs/sync.md; sync_commands.cc) ----

struct SyncStartArgs {
  std::string source;  // hf://..., file:///..., https://...
  std::string dest;    // bdn:ns/vol[:tag]
  std::vector<std::string> includes, excludes;
  std::string auth_secret_name;
  std::string endpoint;  // --endpoint: the object store's URL instead of the provider's
  std::string region;    // --region: the region S3 requests are signed for
  bool wait = false;
  // How long transient source errors are retried before the job fails.
  std::chrono::milliseconds retry_deadline{300'000};
};
// bdn volume sync start. With a remote origin the job runs there: prints its id (without
// --wait), or polls it with a progress bar and prints the pinned ref on READY (--wait).
// Embedded, the job runs in this process to its end (--wait or not), and running the same
// command again resumes an interrupted one. Errors: InvalidArgument for the source, dest,
// globs, secret name; a FAILED or CANCELED job's error with its code (sync::JobStatus) and the
// message "sync job <id>: FAILED (<code>): <message>"; Ctrl-C: Internal (reason kInterruptedReason,
// exit 130) "sync job <id>: stopped waiting; the job goes on ..." (remote) or "...: interrupted
// ...; run the same command again to resume it ..." (embedded).
Status SyncStart(Context& ctx, const SyncStartArgs& args);
// SyncStart's checks that need no store (the --dest ref, sync::ValidateSpec), in its words, so
// that a refused sync start makes nothing at a new home.
Status CheckSyncStartArgs(const SyncStartArgs& args);
// bdn volume sync describe ID. Errors: NotFound "sync job <id>: not found".
Status SyncDescribe(Context& ctx, const std::string& id);
// bdn volume sync list [--dest bdn:ns[/vol]]: newest first.
Status SyncList(Context& ctx, const std::string& dest);
// bdn volume sync cancel ID [--wait]: asks the job to stop; with `wait`, until it is terminal.
// Errors: NotFound; FailedPrecondition "sync job <id>: already READY" (FAILED, CANCELED).
Status SyncCancel(Context& ctx, const std::string& id, bool wait);
// bdn secret set NAME [--namespace NS]...: the value is read from stdin (one trailing newline
// dropped), never from the command line; `namespaces` are those whose jobs may use it on a
// server ("*" for all; none: only jobs started with an admin key for every namespace), replacing
// the secret's old list. Errors: InvalidArgument for the name, a namespace ("--namespace:
// namespace \"X\": ...") or an empty value.
Status SecretSet(Context& ctx, const std::string& name, std::vector<std::string> namespaces);
// bdn secret ls: names, times and namespaces, never values.
Status SecretList(Context& ctx);
// bdn secret rm NAME. Errors: NotFound "secret \"name\": not found".
Status SecretRemove(Context& ctx, const std::string& name);

}  // namespace bdn::cli
