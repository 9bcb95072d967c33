// RemoteRegistry: the Registry of a bdn serve origin over its HTTP API (docs/http-api.md,
// "Registry" and "Push claims"). The server forwards its registry's error messages, so a remote
// command prints the same errors as an embedded one.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "bdn/http/client.h"
#include "bdn/registry/registry.h"
#include "bdn/remote/claim_journal.h"
#include "bdn/remote/retry.h"

namespace bdn::remote {

namespace internal {
struct ClaimTable;  // the claims this process holds, by volume
}  // namespace internal

// Every call is retried on Unavailable and on HTTP 500/502/503/504, per `retry` or, if `budget`
// is set, under that shared budget (one per operation, shared with its RemoteChunkStore). Writes
// (commit, tag set and delete, claim) carry an Idempotency-Key header (the request's own key if
// it has one, else a fresh one per call) that stays the same across their retries, so the server
// answers a repeat of an applied write with its first result instead of applying it twice
// (docs/http-api.md, "Retries").
// Errors: those of the server's registry, code and message verbatim; transport errors of
// HttpClient; Internal "<label> <url>: <METHOD> <path>: malformed response: …".
//
// Claims: ClaimPush returns a PushClaim that renews the server claim every TTL/3 on its own
// thread and releases it (DELETE) when destroyed. While it lives, Commit for that volume sends
// its id. If the origin no longer knows the claim (a renewal answered 404: the origin restarted,
// or the claim lapsed while it was unreachable), the volume is claimed again and Commit sends the
// new id; if another client holds the volume by then, the claim is lost and Commit fails with
// Conflict "volume bdn:ns/vol: push claim lost (…)" instead of committing a push that was not
// exclusive. The registry must outlive its claims. With a ClaimJournal (SetClaimJournal; the CLI
// sets BDN_HOME/push-claims), the claim's Idempotency-Key is recorded while it is held, and a
// claim whose recorded holder process is gone is taken over at once (claim_journal.h).
// Thread-safe.
class RemoteRegistry : public Registry {
 public:
  explicit RemoteRegistry(std::shared_ptr<http::HttpClient> client, RetryPolicy retry = {},
                          std::shared_ptr<RetryBudget> budget = nullptr);
  ~RemoteRegistry() override;

  Result<std::vector<std::string>> ListNamespaces() override;
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) override;
  Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) override;
  Result<std::vector<VersionRecord>> ListVersions(const std::string& ns, const std::string& volume,
                                                  bool include_deleted) override;
  Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                   const Digest& digest) override;
  Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                           const std::string& hex_prefix) override;
  Result<CommitResult> Commit(const CommitRequest& req) override;
  // A client cannot ask the server's record without committing: always nullopt.
  Result<std::optional<CommitResult>> FindCommit(const CommitRequest&) override {
    return std::optional<CommitResult>();
  }
  Result<int64_t> SetTag(const std::string& ns, const std::string& volume, const std::string& tag,
                         const Digest& digest, std::optional<int64_t> expected_sequence,
                         const std::string& idempotency_key = "") override;
  Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                            const std::string& tag, std::optional<int64_t> expected_sequence,
                            const std::string& idempotency_key = "") override;
  // DELETE /v1/volumes/<ns>/<vol>/versions/<hex> (or .../versions?all=1 for nullopt).
  Result<DeleteResult> DeleteVersions(const std::string& ns, const std::string& volume,
                                      const std::optional<Digest>& digest,
                                      std::optional<int64_t> expected_sequence,
                                      const std::string& idempotency_key = "") override;
  // POST /v1/volumes/<ns>/<vol>/versions/<hex>/restore. `store_fence` is not sent: the origin
  // fences its own restore.
  Result<RestoreResult> RestoreVersion(const std::string& ns, const std::string& volume,
                                       const Digest& digest,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key = "",
                                       const std::string& store_fence = "") override;
  // FailedPrecondition: garbage collection runs in the server (bdn serve --gc-interval).
  Result<std::vector<VersionRecord>> ListRetainedVersions() override;
  // POST /v1/volumes/<ns>/<vol>/claims. Errors: Conflict "volume bdn:ns/vol: push in progress
  // (claimed by …)" from the server when another client holds the claim.
  // The body names `tags` ({"tags": [...]}): the server refuses a key without the tag scope.
  Result<std::unique_ptr<PushClaim>> ClaimPush(const std::string& ns, const std::string& volume,
                                               const std::vector<std::string>& tags = {}) override;
  // Claims made after this call use `journal` (see above). Not thread-safe with ClaimPush.
  void SetClaimJournal(std::shared_ptr<const ClaimJournal> journal) {
    journal_ = std::move(journal);
  }

 private:
  std::shared_ptr<http::HttpClient> client_;
  RetryPolicy retry_;
  std::shared_ptr<RetryBudget> budget_;
  std::shared_ptr<internal::ClaimTable> claims_;
  std::shared_ptr<const ClaimJournal> journal_;
};

// Releases every push claim this process holds on a server (one DELETE each, 2 s at most) and
// says how many it held and how many the server released (or no longer knew): for a push that a
// stop signal (Ctrl-C) is about to end, so that the volume is free at once rather than after the
// claim's TTL (a new user's Ctrl-C'd push left the next push from another home refused for 30 s).
// Safe from any thread; a claim destroyed meanwhile waits for it.
struct ClaimsReleased {
  size_t held = 0;
  size_t released = 0;
};
ClaimsReleased ReleaseHeldClaimsNow();

}  // namespace bdn::remote
