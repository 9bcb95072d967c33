// Sync sources (docs/spec.md §6): where a sync job reads the objects it mirrors. A Source resolves
// its revision, lists its objects (following pagination) and opens each object as a ByteStream that
// starts at any offset (a ranged read). Every source classifies its failures into the stable error
// codes of docs/sync.md (Status::reason), and retries transient ones with back-off
// (WithSourceRetries) before it reports them.
//
// Adding a source (s3://, gs://, azure://, ...): implement Source, parse its URI in ParseSource
// and construct it in OpenSource (source.cc); use HttpFetcher (http_fetch.h) for HTTP requests
// (redirects, credentials kept to their host, classification, retries) and HttpObjectStream for
// object bodies (streamed through a bounded buffer, resumed with a Range request after a
// transient failure, checked against the listed size and etag).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bdn/base/clock.h"
#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/volume/push.h"  // ByteStream

namespace bdn {
struct SyncProgress;  // registry/sync_job_store.h
}  // namespace bdn

namespace bdn::sync {

// ---- Stable error codes (docs/sync.md, "Error codes"), carried as Status::reason ----
inline constexpr std::string_view kSourceNotFound = "source_not_found";      // repo, bucket, path
inline constexpr std::string_view kRevisionNotFound = "revision_not_found";  // branch, tag, commit
inline constexpr std::string_view kAccessDenied = "access_denied";      // private, gated, forbidden
inline constexpr std::string_view kBadCredentials = "bad_credentials";  // the secret is refused
inline constexpr std::string_view kSourceUnavailable = "source_unavailable";  // retries ran out
inline constexpr std::string_view kSourceChanged = "source_changed";  // size/etag moved mid-sync
inline constexpr std::string_view kIncludeMatchedNothing = "include_matched_nothing";
inline constexpr std::string_view kInvalidObject = "invalid_object";  // a name no version can hold
inline constexpr std::string_view kSecretNotFound = "secret_not_found";
inline constexpr std::string_view kInvalidSecret = "invalid_secret";  // not the provider's format
inline constexpr std::string_view kCanceled = "canceled";
inline constexpr std::string_view kVolumeBusy = "volume_busy";    // another push or sync holds it
inline constexpr std::string_view kStoreFailed = "store_failed";  // storing or committing failed
// A listing past one of ListingLimits, or one that would never end (a repeating next-page link,
// token or marker; pages in a row that list nothing).
inline constexpr std::string_view kListingTooLarge = "listing_too_large";
// The source answered with something its API does not define (a malformed listing).
inline constexpr std::string_view kInvalidAnswer = "invalid_answer";
inline constexpr std::string_view kInternal = "internal";
// Refused by the server's source access rules (SourceAccess): a file:// path outside its
// --sync-file-root directories or in its data directory, and a host that is not public.
inline constexpr std::string_view kFileNotAllowed = "file_not_allowed";
inline constexpr std::string_view kAddressNotAllowed = "address_not_allowed";  // = http::'s
// Refused on a server: a job that would send its secret to a host the caller chooses
// (SecretHostChosenByCaller) started with a key that may not read secrets.
inline constexpr std::string_view kSecretNotAllowed = "secret_not_allowed";

// `s` with `reason` (Status::WithReason), for one-line construction in sources.
inline Status WithCode(Status s, std::string_view reason) {
  return s.WithReason(std::string(reason));
}

// The stable code a job records for the failure `s`: its reason if it has one, else one derived
// from its StatusCode (NotFound: source_not_found, PermissionDenied: access_denied,
// Unavailable/DeadlineExceeded: source_unavailable, others: store_failed or internal).
std::string ErrorCodeOf(const Status& s);

// ---- Objects and listings ----

// One object of a source.
struct SourceObject {
  // Relative to the source's root, '/'-separated UTF-8: the path the file gets in the version.
  std::string path;
  uint64_t size_bytes = 0;
  // What identifies this content at the source, changing whenever the content does: the Hub's
  // LFS sha256 or git blob id, an S3/Azure ETag, a GCS generation, a local file's
  // size-mtime-inode-mode-ctime. Recorded in the listing digest; a stream refuses other content.
  std::string etag;
  uint16_t mode = 0644;  // permission bits the file gets in the version
  // The source gave `etag` as a weak entity-tag (W/"..."): answers are compared with it weakly,
  // and it is never sent in If-Match, which a store compares strongly (RFC 9110 §13.1.1).
  bool etag_weak = false;
};

struct SourceListing {
  // What the source's ref resolved to, pinned for the whole job (an HF commit); "" for sources
  // without revisions.
  std::string revision;
  // Every object, sorted bytewise by path, without duplicates.
  std::vector<SourceObject> objects;
  // The paths of entries the source has that no version of it holds (file://: symlinks, FIFOs,
  // sockets and devices; a sync seals regular files only), so that a job can say how many it
  // left out. Empty for the other sources.
  std::vector<std::string> left_out;
};

// ---- Retries ----

class RetryWatch;

struct RetryOptions {
  // Where the calls' retries are told, for a progress line (RetryWatch); may be null.
  std::shared_ptr<RetryWatch> watch;
  // How long a call keeps retrying transient failures before it fails with source_unavailable.
  std::chrono::milliseconds deadline{300'000};
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  // The time of the deadline and the waits (base/clock.h: tests run retries on a FakeClock
  // without waiting). Waits are slept in steps of at most 50 ms, so a cancel ends them at once.
  // Null: Clock::Real().
  std::shared_ptr<Clock> clock;
};

// What a job's source calls are going through, for a progress line (from an attacking helper: a
// sync of an unreachable Hub printed "0 B/0 B  files 0/0" for its whole 5-minute retry deadline,
// with no word of why): the calls waiting to try again, since when some call has been, and the
// last transient error. Thread-safe.
class RetryWatch {
 public:
  explicit RetryWatch(std::shared_ptr<Clock> clock = nullptr);
  // A call failed transiently and will be tried again (the first of its stretch: `first`).
  void Retrying(const Status& error, bool first);
  // A call that was retrying ended (succeeded, or failed for good).
  void Ended();
  // "retrying for 12s (gives up at 5m): <last error>" while some call is retrying, else "".
  // `deadline` is the job's --retry-deadline.
  std::string Note(std::chrono::milliseconds deadline) const;
  // The same as fields, for a job's progress record: for how long some call has been retrying
  // (0 when none is) and the last transient error.
  void Fill(SyncProgress& progress) const;

 private:
  std::shared_ptr<Clock> clock_;
  mutable Mutex mu_;
  int retrying_ GUARDED_BY(mu_) = 0;
  SteadyTime since_ GUARDED_BY(mu_);
  std::string last_error_ GUARDED_BY(mu_);
};

// "retrying for 12s (gives up at 5m): <error>", the note of RetryWatch::Note, from a job's
// progress record (SyncProgress::retrying_ms, retry_error); "" when it is not retrying.
std::string RetryNote(const SyncProgress& progress, std::chrono::milliseconds deadline);

// What one try tells the retry loop beyond its result.
struct Attempt {
  int number = 1;
  bool transient = false;  // the failure may pass if repeated (5xx, 429, reset, timeout)
  std::optional<std::chrono::milliseconds> retry_after;  // the server's Retry-After
  // The try moved the call forward before it failed (HttpObjectStream: 64 KiB or more of a body
  // delivered at min_body_bytes_per_second or faster over the whole try): the retry deadline
  // and the back-off start again, so that a long transfer that breaks now and then is not
  // given up for the time its earlier tries took.
  bool progressed = false;
};

// ---- Listing limits ----

// Bounds on one List, so that a source that lists without end (a next-page link or token that
// never runs out, pages that list nothing, keys of 60 KB each) fails the job with a message
// naming the limit instead of exhausting the memory of the process that runs it
// (docs/sync.md, "Listing limits").
struct ListingLimits {
  size_t max_objects = 1'000'000;            // objects (files) listed
  uint64_t max_bytes = uint64_t{256} << 20;  // listing answers' bytes, every page together
  // One page's answer (real ones: a Hub tree page of 1,000 entries ~300 KB, S3 and GCS pages of
  // 1,000 keys 0.1-1.2 MB, an Azure page of 5,000 blobs up to ~13 MB with 1 KiB names): a larger
  // one ends the listing before it is parsed, which costs many times its size.
  uint64_t max_page_bytes = uint64_t{32} << 20;
  int max_empty_pages = 100;                      // pages in a row that list no entry at all
  std::chrono::milliseconds deadline{3'600'000};  // from the listing's first request to its end
};

// ---- Access ----

// Where the sources of a job may read from. The defaults (anywhere) are the embedded CLI's: the
// job runs as the user who asked for it. bdn serve narrows them (docs/sync.md, "Sources on a
// server"), as its jobs run with the server's rights for a client that has only a key.
struct SourceAccess {
  // file:// sources are taken only at or under one of these directories (absolute, symlinks
  // resolved; bdn serve --sync-file-root); nullopt: anywhere.
  std::optional<std::vector<std::string>> file_roots;
  // file:// sources at, under or above one of these directories (absolute, symlinks resolved:
  // the server's data directory, with its database and secrets key) are refused, whatever
  // file_roots says.
  std::vector<std::string> forbidden_dirs;
  // HTTP(S) sources, endpoints and everything they redirect to are reached only at public
  // addresses (http::PeerAddresses::kPublicOnly); bdn serve without
  // --sync-allow-private-addresses.
  bool public_addresses_only = false;
};

// The directory file:///`path` is read from under `access`: `path` itself when file:// is not
// restricted, else its canonical form (symlinks resolved, as far as the path exists), which
// must lie at or under a file root and neither at, under nor above a forbidden directory.
// Errors: PermissionDenied, reason file_not_allowed, "source \"<uri>\": ..." naming the rule
// (file:// not allowed on this server, outside the --sync-file-root directories, the server's
// data directory).
Result<std::string> CheckFileAccess(const std::string& uri, const std::string& path,
                                    const SourceAccess& access);

// What a job's source and endpoint may reach, checked before the job is created or run, without
// network I/O: a file:// URI by CheckFileAccess; an http(s):// URI or `endpoint` whose host is
// an IP literal that is not public (127.0.0.1, [::1], 169.254.169.254, 10.0.0.1) when
// public_addresses_only. Host names are judged when a connection is opened (the job then fails
// with the same code). Errors: PermissionDenied with reason file_not_allowed or
// address_not_allowed, e.g. "source \"http://169.254.169.254/x\": 169.254.169.254 is a
// link-local address; this server syncs only from public addresses (bdn serve
// --sync-allow-private-addresses allows others)".
Status CheckSourceAccess(const std::string& uri, const std::string& endpoint,
                         const SourceAccess& access);

// Why a job of `uri` (and `endpoint`) with a secret would send that secret, or a credential
// made from it, to a host its caller chooses rather than to the provider's own: "an http(s)://
// source names its host", "--endpoint names the host", "an azure:// source names the storage
// account, and so the host". nullopt when the secret goes only to a host the caller cannot
// choose: hf:// (the Hub at the server's HF_ENDPOINT), s3://, r2://, cw:// (signed with SigV4 for
// the provider's host: the secret key never leaves the server) and gs:// without --endpoint
// (Google's), file://. On a server such a job needs a key that may read every secret anyway
// (docs/sync.md, "Sources on a server"). No I/O; `uri` must be valid (ValidateSourceUri).
std::optional<std::string> SecretHostChosenByCaller(const std::string& uri,
                                                    const std::string& endpoint);

// ---- Sources ----

// What every source gets from the job that opens it.
struct SourceOptions {
  // The plaintext value of the job's secret (docs/sync.md, "Secrets"), "" for none. Sources
  // never put it in a message or a log.
  std::string secret;
  std::string secret_name;  // how messages name the secret
  // A resumed job's pinned revision: List resolves to it instead of the URI's ref.
  std::string pinned_revision;
  // `sync start --endpoint`: the object store's URL instead of the provider's (an S3-compatible
  // store, an emulator); "" for the provider's own. See docs/sync.md, "Endpoints".
  std::string endpoint;
  // `sync start --region`: the region requests are signed for (S3); "" for the default.
  std::string region;
  // Where the source may read from (file paths, peer addresses).
  SourceAccess access;
  RetryOptions retry;
  // The bounds of List (the deadline runs on retry.clock).
  ListingLimits listing;
  // The slowest an object body may arrive: a transfer whose rate (libcurl's, over its last ~5 s)
  // stays below min_body_bytes_per_second for body_stall_timeout fails as stalled
  // (DeadlineExceeded "...: stalled: slower than 16.00 KiB/s for 60000 ms"; with 1 B/s or 0, "no
  // bytes"), a transient failure that is resumed with Range within the retry deadline like any
  // other (docs/sync.md, "Slow sources"), so that a source dripping a byte a second cannot hold
  // a runner for days. body_stall_timeout counts whole seconds, at least 1.
  uint64_t min_body_bytes_per_second = 16 * 1024;
  std::chrono::milliseconds body_stall_timeout{60'000};
  // Counts object bytes received from the source (all tries); may be null.
  std::atomic<uint64_t>* bytes_fetched = nullptr;
  // When set, reads, requests and retry waits stop with a `canceled` error; may be null.
  const std::atomic<bool>* cancel = nullptr;
};

// A place to mirror from. List and Open may be called from several threads at once.
class Source {
 public:
  virtual ~Source() = default;
  // The URI as messages name the source (as given, never with credentials).
  virtual const std::string& uri() const = 0;
  // The source without its revision, as the listing digest records it (hf://org/repo for
  // hf://org/repo@main), so that two spellings of one revision are recognized as the same.
  virtual std::string Identity() const = 0;
  // Resolves the revision (or takes the pinned one) and lists every object, following
  // pagination. Errors (reason): source_not_found, revision_not_found, access_denied,
  // bad_credentials, invalid_secret, source_unavailable (after retries), canceled.
  virtual Result<SourceListing> List() = 0;
  // Opens `object` (as List returned it) for reading from byte `offset` to its end. The stream
  // connects at its first Read and fails with source_changed (FailedPrecondition) when the
  // source now holds other content (size or etag differ); transient failures mid-stream are
  // retried by resuming at the offset reached. Errors: as List, plus source_changed.
  virtual Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) = 0;
};

// Counts one List's pages against SourceOptions::listing. Page() after each answer; its errors
// end the listing: FailedPrecondition, reason listing_too_large, "<uri>: the listing exceeds N
// objects (the most one sync takes); sync a narrower prefix or --include less", "<uri>: the
// listing's answers exceed 256.00 MiB
// (...)", "<uri>: N listing pages in a row listed nothing (the listing would never end)";
// FailedPrecondition, reason invalid_answer, "<uri>: the listing names \"p\" twice" (a page that
// repeats an earlier one under a new link or token ends here, at its first repeated path); and
// DeadlineExceeded (source_unavailable) "<uri>: listing took longer than 1h (the most one
// listing may take)". Not thread-safe: one per List.
class ListingBudget {
 public:
  ListingBudget(std::string uri, const SourceOptions& options);
  // One page: `page_bytes` of answer that listed `entries` entries (folders and markers too),
  // after which the listing holds `objects`: the same vector at every call, only appended to.
  Status Page(uint64_t page_bytes, size_t entries, const std::vector<SourceObject>& objects);
  // The objects alone (a listing without pages: a directory scanned whole).
  Status Objects(size_t objects) const;

 private:
  const std::string uri_;
  const ListingLimits limits_;
  const std::shared_ptr<Clock> clock_;
  const SteadyTime start_;
  uint64_t bytes_ = 0;
  int empty_pages_ = 0;
  // Each path checked so far, by hash, as its index in the objects.
  std::unordered_multimap<uint64_t, size_t> paths_;
  size_t checked_ = 0;  // objects whose path is in paths_
};

// Checks the syntax of a source URI without any I/O, so `sync start` can refuse a malformed one
// before a job exists: hf://org/repo[@revision] (also hf://datasets/… and hf://spaces/…),
// s3://bucket[/prefix], r2://account_id.bucket[/prefix], cw://bucket[/prefix],
// gs://bucket[/prefix], azure://account/container[/prefix], file:///abs/path,
// https://host/path (and http://). Errors: InvalidArgument "source \"uri\":
// <what is wrong>".
Status ValidateSourceUri(const std::string& uri);

// Opens the source `uri` (validated as above). Errors: those of ValidateSourceUri.
Result<std::unique_ptr<Source>> OpenSource(const std::string& uri, const SourceOptions& options);

}  // namespace bdn::sync
