// The commit check: a version may become visible only when its manifest, every chunk index it
// names and every chunk those list are stored, and every length it gives agrees with the stored
// bytes. bdn serve runs it on every commit; the embedded store runs it through
// CommitCheckingRegistry, so a version can never describe bytes it does not have.
#pragma once

#include <memory>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/registry/registry.h"
#include "bdn/store/chunk_store.h"

namespace bdn {

// Checks that version `digest` is complete and consistent in `store` and returns its stats,
// computed from the manifest (files, bytes, chunk references, entries: as push computes them).
// Reads the manifest and every chunk index with its pieces (ReadFileChunkIndex, each distinct
// piece of a file once); learns each distinct chunk's stored length with ChunkStore::Sizes
// (4096 ids per call), reading no chunk.
// Checks, in this order: the manifest decodes (docs/format.md, "Rules a reader enforces");
// the files' sizes add up to at most 2^63-1 bytes; for each file in path order, its chunk
// index and every piece of it are stored and decode, the pieces' lengths add up to the file's
// size and each lists what the index says, each chunk is 1 to chunker-maximum bytes and the
// chunks add up to the file's size (ReadFileChunkIndex), and no two files give one chunk two
// lengths; then that each chunk is stored with exactly the length the version gives it
// (single-chunk files included).
// Errors (each names the version first, "version b3:…: ", then the file where there is one):
//  - Corruption (HTTP 422): the manifest does not decode ("manifest: …"); "file \"p\": the
//    files' sizes add up to more than 2^63-1 bytes"; "file \"p\": chunk index: …"; "file
//    \"p\": chunks add up to N bytes, the file has M"; "file \"p\": chunk b3:… of N bytes is
//    longer than the chunker maximum M"; "file \"p\": chunk b3:…: the version says N bytes
//    here and M in file \"q\""; "file \"p\": chunk b3:…: is N bytes, the version says M"
//    (the stored length differs: reported before any missing chunk); a stored manifest or
//    index that fails verification.
//    Version-2 chunk indexes add "file \"p\": chunk index pieces add up to N bytes, the file has
//    M", "file \"p\": chunk index piece b3:…: …" (ReadFileChunkIndex).
//  - FailedPrecondition (HTTP 412): "manifest is not stored", "chunk index b3:… of \"p\" is not
//    stored", "chunk index piece b3:… of \"p\" is not stored", "chunk b3:… is not stored"
//    (plus " (N chunks are missing)" when several are).
//  - Internal/Unavailable from the store.
// Thread-safe if `store` is.
Result<VersionStats> CheckVersionStored(ChunkStore& store, const Digest& digest);

// Whether `s` is CheckVersionStored's (and so a commit's) FailedPrecondition "… is not stored":
// blobs the version needs are missing, and storing them and committing again may succeed (as
// opposed to, say, 412 "is deleted").
bool IsNotStoredError(const Status& s);

// A Registry whose Commit first runs CheckVersionStored(store, req.digest) and records the
// stats it computes (the request's are ignored, as bdn serve does); every other call goes to
// `inner` unchanged. The embedded store's registry, so that a version committed without a
// server is held to the same rule. Errors of Commit: those of CheckVersionStored, then
// inner's. Thread-safe if `inner` and `store` are.
class CommitCheckingRegistry : public Registry {
 public:
  // `clock` tells whether a deleted version is past its retention (the inner registry's error
  // then comes first); it should be the inner registry's clock.
  CommitCheckingRegistry(std::shared_ptr<Registry> inner, std::shared_ptr<ChunkStore> store,
                         std::shared_ptr<Clock> clock = Clock::Real())
      : inner_(std::move(inner)), store_(std::move(store)), clock_(std::move(clock)) {}

  // A commit already applied under req.idempotency_key (FindCommit) is answered as recorded,
  // without the check (as bdn serve answers a retried commit).
  Result<CommitResult> Commit(const CommitRequest& req) override;
  Result<std::optional<CommitResult>> FindCommit(const CommitRequest& req) override {
    return inner_->FindCommit(req);
  }

  Result<std::vector<std::string>> ListNamespaces() override { return inner_->ListNamespaces(); }
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) override {
    return inner_->ListVolumes(ns);
  }
  Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) override {
    return inner_->GetVolume(ns, volume);
  }
  Result<std::vector<VersionRecord>> ListVersions(const std::string& ns, const std::string& volume,
                                                  bool include_deleted) override {
    return inner_->ListVersions(ns, volume, include_deleted);
  }
  Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                   const Digest& digest) override {
    return inner_->GetVersion(ns, volume, digest);
  }
  Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                           const std::string& hex_prefix) override {
    return inner_->FindVersions(ns, volume, hex_prefix);
  }
  Result<int64_t> SetTag(const std::string& ns, const std::string& volume, const std::string& tag,
                         const Digest& digest, std::optional<int64_t> expected_sequence,
                         const std::string& idempotency_key = "") override {
    return inner_->SetTag(ns, volume, tag, digest, expected_sequence, idempotency_key);
  }
  Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                            const std::string& tag, std::optional<int64_t> expected_sequence,
                            const std::string& idempotency_key = "") override {
    return inner_->DeleteTag(ns, volume, tag, expected_sequence, idempotency_key);
  }
  Result<std::unique_ptr<PushClaim>> ClaimPush(const std::string& ns, const std::string& volume,
                                               const std::vector<std::string>& tags = {}) override {
    return inner_->ClaimPush(ns, volume, tags);
  }
  Result<DeleteResult> DeleteVersions(const std::string& ns, const std::string& volume,
                                      const std::optional<Digest>& digest,
                                      std::optional<int64_t> expected_sequence,
                                      const std::string& idempotency_key = "") override {
    return inner_->DeleteVersions(ns, volume, digest, expected_sequence, idempotency_key);
  }
  // Runs CheckVersionStored first: a version is made visible again only if its blobs are all
  // still stored (GC keeps them while it is restorable; this also holds when the clock moved).
  // Errors: those of CheckVersionStored, then inner's. The hold's fence (StoreHold::CommitFence)
  // goes to inner (a `store_fence` given here is ignored: the hold's is the one that counts).
  Result<RestoreResult> RestoreVersion(const std::string& ns, const std::string& volume,
                                       const Digest& digest,
                                       std::optional<int64_t> expected_sequence,
                                       const std::string& idempotency_key = "",
                                       const std::string& store_fence = "") override;
  Result<std::vector<VersionRecord>> ListRetainedVersions() override {
    return inner_->ListRetainedVersions();
  }
  Result<std::vector<std::string>> CheckConsistency() override {
    return inner_->CheckConsistency();
  }

 private:
  std::shared_ptr<Registry> inner_;
  std::shared_ptr<ChunkStore> store_;
  std::shared_ptr<Clock> clock_;
};

}  // namespace bdn
