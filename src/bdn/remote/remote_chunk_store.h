// RemoteChunkStore: the ChunkStore of a bdn serve origin (or a cache node) over its HTTP API
// (docs/http-api.md, "Chunks"). Every blob read is verified here against its id.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "bdn/http/client.h"
#include "bdn/remote/retry.h"
#include "bdn/store/chunk_store.h"

namespace bdn::remote {

struct RemoteStoreOptions {
  RetryPolicy retry;
  // If set, every call retries under this shared budget (one per operation, e.g. a push; shared
  // with its RemoteRegistry) instead of retry.attempts per call.
  std::shared_ptr<RetryBudget> budget;
  size_t missing_batch_ids = 4096;  // ids per POST /v1/chunks/missing and /sizes (the API's max)
  size_t get_batch_ids = 1024;      // ids per POST /v1/chunks/batch (the API's maximum)
  size_t put_batch_ids = 1024;      // blobs per POST /v1/chunks/upload (the API's maximum)
  // Blob bytes per POST /v1/chunks/upload (a larger blob goes alone); PutBatchBytes.
  size_t put_batch_bytes = 1 << 20;
  // A batch read may carry tens of MiB, more than a slow link moves within the client's
  // whole-request deadline: it gets this deadline instead, and fails early only if no byte
  // arrives for batch_stall_timeout.
  std::chrono::milliseconds batch_deadline{600'000};
  std::chrono::milliseconds batch_stall_timeout{30'000};
  // Above 1: a batch read that moves fewer than this many bytes per second over a
  // batch_stall_timeout counts as stalled too (http::Request::stall_bytes_per_second), so that a
  // server dripping its answer fails as one that sends nothing does. 1: only no bytes at all.
  uint64_t batch_min_bytes_per_second = 1;
  // The version the reads belong to, "bdn:<ns>/<vol>@b3:<hex>" (PinnedRef::ToString), sent as
  // the Bdn-Version header of every GET and batch request: a key scoped to a namespace may read
  // only the blobs of a version it names (docs/http-api.md, "Chunks"). Empty: none sent (a key
  // for every namespace).
  std::string read_version;
};

// Each call is one or a few HTTP requests on the shared client. Idempotent calls (all of them:
// blobs are content-addressed) are retried on Unavailable and on HTTP 500/502/503/504, per
// options.retry or under options.budget; NotFound and Corruption are returned at once, and
// DeadlineExceeded too unless under a budget (RetryBudget::StallTimeout). Error messages are the
// server's for HTTP errors, and "<label> <url>: ..." for transport failures (see HttpClient::Send).
// Thread-safe; keeps no threads of its own (safe to use in a forked mount daemon).
class RemoteChunkStore : public ChunkStore {
 public:
  explicit RemoteChunkStore(std::shared_ptr<http::HttpClient> client,
                            RemoteStoreOptions options = {});

  // Replaces options.batch_stall_timeout for the batch reads that start from now on (a cache node
  // sets it once it knows its place in a chain of cache nodes). Thread-safe.
  void SetBatchStallTimeout(std::chrono::milliseconds stall) { batch_stall_ms_ = stall.count(); }

  // POST /v1/chunks/missing with one id (needs a key with push scope).
  Result<bool> Contains(const Digest& id) override;
  // POST /v1/chunks/missing, ceil(n / 4096) sequential requests. Result in input order.
  // Errors: transport/HTTP errors; Internal for a malformed response.
  Result<std::vector<Digest>> FindMissing(std::span<const Digest> ids) override;
  // POST /v1/chunks/sizes (push scope), ceil(n / 4096) sequential requests. Result in input
  // order. Errors: transport/HTTP errors; Internal for a malformed response.
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override;
  // PUT /v1/chunks/<hex>. The bytes are not re-hashed here: the server hashes what it receives
  // and refuses a mismatch with Corruption "chunk b3:…: received bytes hash to b3:…".
  Status Put(const Digest& id, std::span<const uint8_t> data) override;
  // POST /v1/chunks/upload, one request per options.put_batch_bytes of blobs (or
  // put_batch_ids), sent one after another; each retried whole (blobs are content-addressed). A
  // server without that endpoint (404: an older bdn) gets a PUT per blob, from then on. Errors:
  // as Put; the server's Corruption names the first blob whose bytes do not match its id.
  Status PutMany(std::span<const BlobPut> blobs) override;
  size_t PutBatchBytes() const override { return options_.put_batch_bytes; }
  // GET /v1/chunks/<hex> (with options.read_version), then verified. Errors: NotFound (the server's
  // message); Corruption "chunk b3:…: digest mismatch (bytes from <label> <url> hash to b3:…)" —
  // bad bytes are never returned; transport errors.
  Result<std::vector<uint8_t>> Get(const Digest& id) override;
  // The server makes every blob durable before it answers a PUT: nothing to do.
  Status Sync() override { return Status::Ok(); }

  // Reads many blobs with POST /v1/chunks/batch (ceil(n / 1024) sequential requests). Every
  // blob is verified; one that does not match its id fails the whole call with Corruption (as
  // does a malformed response: wrong magic, ids out of order, truncated record). The answer is
  // decoded as it arrives; memory: the blobs of the call. Each request may take up to
  // options.batch_deadline, but fails (DeadlineExceeded) once no byte came for
  // options.batch_stall_timeout (or the budget's StallTimeout, if shorter).
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override;
  bool PrefersBatches() const override { return true; }

  http::HttpClient& client() { return *client_; }
  const std::shared_ptr<http::HttpClient>& shared_client() const { return client_; }

 private:
  Result<BlobBatch> GetManyOnce(std::span<const Digest> ids, Try& t);
  // The batch stall time as set, bounded by the budget's (RetryBudget::StallTimeout).
  std::chrono::milliseconds BatchStallTimeout() const;
  // The stall time of a query or an upload under the budget (its StallTimeout); nullopt without
  // one (the client's deadline alone). Commits and other registry writes are not bounded so.
  std::optional<std::chrono::milliseconds> BudgetStall() const;
  // POSTs {"ids": [...]} to `path` in parts of options_.missing_batch_ids (one request each,
  // retried per options_.retry or the budget) and gives each part's parsed answer (discarded if not
  // JSON) to `take`, in order. Errors: transport/HTTP errors; the first error of `take`.
  Status PostIds(const std::string& path, std::span<const Digest> ids,
                 const std::function<Status(const nlohmann::json&)>& take);

  // One POST /v1/chunks/upload of `blobs`.
  Status Upload(std::span<const BlobPut> blobs);

  std::shared_ptr<http::HttpClient> client_;
  RemoteStoreOptions options_;
  std::atomic<int64_t> batch_stall_ms_;       // options_.batch_stall_timeout, or as set since
  std::atomic<bool> no_upload_route_{false};  // the server answered 404 to /v1/chunks/upload
};

}  // namespace bdn::remote
