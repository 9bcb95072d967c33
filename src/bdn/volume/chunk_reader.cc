#include "bdn/volume/chunk_reader.h"

#include <algorithm>
#include <deque>

namespace bdn {
namespace {

// The store verified the bytes against the id; the chunk list's length is checked here, so a
// sink never sees bytes that a lying index would place at the wrong offsets.
Status Deliver(const ChunkReader::Sink& sink, size_t index, const ChunkRef& ref,
               Result<std::span<const uint8_t>> bytes) {
  if (bytes) {
    if (Status s = CheckChunkLength(ref, bytes->size()); !s.ok()) return sink(index, Err(s));
  }
  return sink(index, std::move(bytes));
}

}  // namespace

ChunkReader::ChunkReader(ChunkStore& store, ChunkReaderOptions options)
    : store_(store), options_(options) {
  if (!store.PrefersBatches()) return;
  FetchCore::Options core;
  core.name = "chunk reader";
  core.demand_threads = std::max(1, options_.fetch_threads);
  core.max_batch_chunks = std::max<size_t>(1, options_.max_batch_chunks);
  core.max_batch_bytes = options_.max_batch_bytes;
  core_ = std::make_unique<FetchCore>(
      [this](std::span<const Digest> ids) {
        // A batch that failed for want of an answer (Unavailable, DeadlineExceeded) fails each of
        // its chunks: asked again one by one, each would wait its own tries (from a user: a pull
        // froze for minutes while the origin was down).
        return ReadBlobs(store_, ids, BatchFailure::kReadEachAloneUnlessTransient);
      },
      std::move(core));
}

ChunkReader::~ChunkReader() = default;

bool ChunkReader::Reserve(uint64_t bytes, bool wait) {
  MutexLock lock(mu_);
  // One part always fits when nothing is pending, so an oversized part cannot wait forever.
  auto fits = [&]() REQUIRES(mu_) {
    return pending_bytes_ == 0 || pending_bytes_ + bytes <= options_.max_pending_bytes;
  };
  if (!wait) {
    if (waiting_for_room_ > 0 || !fits()) return false;
  } else {
    ++waiting_for_room_;
    room_cv_.wait(lock.native(), fits);
    --waiting_for_room_;
  }
  pending_bytes_ += bytes;
  return true;
}

void ChunkReader::Release(uint64_t bytes) {
  {
    MutexLock lock(mu_);
    pending_bytes_ -= bytes;
  }
  room_cv_.notify_all();
}

Status ChunkReader::Read(std::span<const ChunkRef> chunks, const Sink& sink) {
  if (core_ == nullptr) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      auto bytes = store_.Get(chunks[i].id);
      Status s = bytes ? Deliver(sink, i, chunks[i], std::span<const uint8_t>(*bytes))
                       : sink(i, Err(bytes.error()));
      BDN_RETURN_IF_ERROR(s);
    }
    return Status::Ok();
  }
  // A run of consecutive chunks queued together, with the bytes it reserved.
  struct Part {
    size_t first = 0;
    uint64_t bytes = 0;
    std::vector<FetchCore::Ticket> tickets;
  };
  const size_t max_chunks = std::max<size_t>(1, options_.max_batch_chunks);
  std::deque<Part> mine;  // this Read's parts in flight, in chunk order
  size_t next = 0;        // first chunk not yet in a part
  size_t consumed = 0;    // first chunk not yet given to the sink
  Status status;
  while (consumed < chunks.size()) {
    // Queue parts while there is room; wait for room only when nothing of ours is in flight
    // (a Read that holds bytes never waits for them, so the bound cannot deadlock).
    while (next < chunks.size()) {
      size_t end = next;
      uint64_t bytes = 0;
      while (end < chunks.size() && end - next < max_chunks &&
             (end == next || bytes + chunks[end].size_bytes <= options_.max_batch_bytes)) {
        bytes += chunks[end].size_bytes;
        ++end;
      }
      if (!Reserve(bytes, /*wait=*/mine.empty())) break;
      std::vector<FetchCore::Item> items;
      items.reserve(end - next);
      for (size_t i = next; i < end; ++i) items.push_back({chunks[i].id, chunks[i].size_bytes});
      mine.push_back({next, bytes, core_->Hold(items)});
      next = end;
    }
    Part& part = mine.front();
    for (size_t j = 0; j < part.tickets.size() && status.ok(); ++j) {
      const size_t i = part.first + j;
      FetchCore::Answer got = core_->Await(part.tickets[j]);
      status = got.bytes ? Deliver(sink, i, chunks[i], std::span<const uint8_t>(**got.bytes))
                         : sink(i, Err(got.bytes.error()));
      part.tickets[j] = {};  // its bytes are spent
    }
    consumed += part.tickets.size();
    core_->Release(part.tickets);
    Release(part.bytes);
    mine.pop_front();
    if (!status.ok()) break;
  }
  // What is still queued for this Read is dropped; what is being fetched is waited for, so the
  // bytes in flight stay within the bound.
  for (Part& rest : mine) {
    core_->Release(rest.tickets);
    Release(rest.bytes);
  }
  return status;
}

}  // namespace bdn
