// ChunkReader: reads the chunks of a file in order, for pull, cat and verify. From a store that
// prefers batches (a remote tier) it fetches them through a FetchCore (store/fetch_core.h) as
// batches of bounded bytes, a few at a time in parallel, so that a file costs one request per
// batch rather than one per chunk; from any other store it reads one chunk at a time with Get on
// the calling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/base/status.h"
#include "bdn/format/manifest.h"
#include "bdn/store/chunk_store.h"
#include "bdn/store/fetch_core.h"

namespace bdn {

struct ChunkReaderOptions {
  // Bounds of one ChunkStore::GetMany call (a batch holds at least one chunk, however large).
  uint64_t max_batch_bytes = 16ull << 20;
  size_t max_batch_chunks = 1024;  // the batch API's maximum ids per request
  // GetMany calls in flight at once.
  int fetch_threads = 4;
  // Bytes of chunks asked for but not yet handed to their sinks, all Reads together (memory).
  // A Read always gets one batch in flight, even one larger than this.
  uint64_t max_pending_bytes = 64ull << 20;
};

// Reads chunks for whole-file consumers. If store.PrefersBatches(), a Read splits its chunks into
// parts of at most max_batch_bytes / max_batch_chunks and queues as many as max_pending_bytes
// allows on a FetchCore; its `fetch_threads` threads take the queued chunks (those of several
// Reads together, up to the batch bounds, when the threads were busy; a chunk two Reads want at
// once is fetched once) and fetch each batch with one GetMany. A batch whose GetMany failed, for
// any reason, is read again chunk by chunk with Get, so every chunk's outcome (bytes, or an
// error naming the chunk) is what store.Get returns for it (BatchFailure::kReadEachAlone; a chunk
// the batch lacks is NotFound "chunk b3:…: not in store"), then checked against the chunk's
// length.
// Thread-safe: several threads may Read at once, sharing the fetch threads and the byte bound.
class ChunkReader {
 public:
  // Called for each chunk, in order, with its verified bytes (valid during the call only) or the
  // error for it: the store's, or Corruption "chunk b3:…: is N bytes, the version says M"
  // (CheckChunkLength) when the verified bytes are not as long as the ChunkRef says, so a sink
  // may rely on the length. Its argument `index` is the chunk's position in the span given to
  // Read. A non-ok Status stops the Read, which returns it.
  using Sink = std::function<Status(size_t index, Result<std::span<const uint8_t>> bytes)>;

  explicit ChunkReader(ChunkStore& store, ChunkReaderOptions options = {});
  ~ChunkReader();  // every Read must have returned
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Reads `chunks` (in order) into `sink`. Returns the first non-ok Status of `sink`, after
  // waiting for this Read's batches still in flight; Ok once every chunk went to `sink`.
  Status Read(std::span<const ChunkRef> chunks, const Sink& sink);

  // Whether Reads are batched (the store prefers batches).
  bool batched() const { return core_ != nullptr; }

 private:
  // Reserves `bytes` of max_pending_bytes: waits for room if `wait`, else fails at once when
  // there is none or another Read is waiting for room (so one Read cannot starve the others).
  bool Reserve(uint64_t bytes, bool wait);
  void Release(uint64_t bytes);

  ChunkStore& store_;
  const ChunkReaderOptions options_;
  std::unique_ptr<FetchCore> core_;  // null if the store does not prefer batches

  Mutex mu_;
  std::condition_variable room_cv_;  // pending_bytes_ went down
  uint64_t pending_bytes_ GUARDED_BY(mu_) = 0;
  int waiting_for_room_ GUARDED_BY(mu_) = 0;
};

}  // namespace bdn
