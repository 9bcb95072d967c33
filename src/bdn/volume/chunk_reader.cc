#include "bdn/volume/chunk_reader.h"

#include <algorithm>
#include <exception>

namespace bdn {
namespace {

// The store verified the bytes against the id; the chunk list's length is checked here, so a
// sink never sees bytes that a lying index would place at the wrong offsets.
Result<std::vector<uint8_t>> CheckedLength(const ChunkRef& ref, Result<std::vector<uint8_t>> bytes) {
  if (bytes) BDN_RETURN_IF_ERROR(CheckChunkLength(ref, bytes->size()));
  return bytes;
}

}  // namespace

// A run of consecutive chunks of one Read, fetched together (possibly with other Reads' parts).
struct ChunkReader::Part {
  std::vector<Digest> ids;
  uint64_t bytes = 0;  // reserved of max_pending_bytes
  // Guarded by mu_:
  bool started = false;
  bool done = false;
  Result<BlobBatch> result;  // when done: ids.size() entries, or the GetMany error
};

ChunkReader::ChunkReader(ChunkStore& store, ChunkReaderOptions options)
    : store_(store), options_(options), batched_(store.PrefersBatches()) {
  if (!batched_) return;
  for (int i = 0; i < std::max(1, options_.fetch_threads); ++i) {
    threads_.emplace_back([this] { FetchLoop(); });
  }
}

ChunkReader::~ChunkReader() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ChunkReader::FetchLoop() {
  const size_t max_chunks = std::max<size_t>(1, options_.max_batch_chunks);
  for (;;) {
    std::vector<std::shared_ptr<Part>> group;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      // Parts queued while every thread was busy go out together, within the batch bounds.
      uint64_t bytes = 0;
      size_t chunks = 0;
      while (!queue_.empty()) {
        Part& next = *queue_.front();
        if (!group.empty() && (bytes + next.bytes > options_.max_batch_bytes ||
                               chunks + next.ids.size() > max_chunks)) {
          break;
        }
        bytes += next.bytes;
        chunks += next.ids.size();
        next.started = true;
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<Digest> joined;
    std::span<const Digest> ids = group[0]->ids;
    if (group.size() > 1) {
      for (const auto& part : group)
        joined.insert(joined.end(), part->ids.begin(), part->ids.end());
      ids = joined;
    }
    Result<BlobBatch> got;
    try {
      got = store_.GetMany(ids);
    } catch (const std::exception& e) {
      got = Err(InternalError("chunk batch of " + std::to_string(ids.size()) + ": " + e.what()));
    }
    if (got && got->size() != ids.size()) {
      got = Err(InternalError("chunk batch of " + std::to_string(ids.size()) + ": " +
                              std::to_string(got->size()) + " answers"));
    }
    {
      std::lock_guard lock(mu_);
      size_t k = 0;
      for (const auto& part : group) {
        if (!got) {
          part->result = Err(got.error());
        } else {
          BlobBatch mine;
          mine.reserve(part->ids.size());
          for (size_t j = 0; j < part->ids.size(); ++j) mine.push_back(std::move((*got)[k + j]));
          part->result = std::move(mine);
        }
        k += part->ids.size();
        part->done = true;
      }
    }
    done_cv_.notify_all();
  }
}

bool ChunkReader::Reserve(uint64_t bytes, bool wait) {
  std::unique_lock lock(mu_);
  // One part always fits when nothing is pending, so an oversized part cannot wait forever.
  auto fits = [&] {
    return pending_bytes_ == 0 || pending_bytes_ + bytes <= options_.max_pending_bytes;
  };
  if (!wait) {
    if (waiting_for_room_ > 0 || !fits()) return false;
  } else {
    ++waiting_for_room_;
    room_cv_.wait(lock, fits);
    --waiting_for_room_;
  }
  pending_bytes_ += bytes;
  return true;
}

void ChunkReader::ReleaseLocked(uint64_t bytes) {
  pending_bytes_ -= bytes;
  room_cv_.notify_all();
}

void ChunkReader::Abandon(const std::shared_ptr<Part>& part) {
  std::unique_lock lock(mu_);
  if (!part->started) {
    auto it = std::find(queue_.begin(), queue_.end(), part);
    if (it != queue_.end()) queue_.erase(it);
  } else {
    done_cv_.wait(lock, [&] { return part->done; });
  }
  ReleaseLocked(part->bytes);
}

Status ChunkReader::Read(std::span<const ChunkRef> chunks, const Sink& sink) {
  if (!batched_) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      BDN_RETURN_IF_ERROR(sink(i, CheckedLength(chunks[i], store_.Get(chunks[i].id))));
    }
    return Status::Ok();
  }
  const size_t max_chunks = std::max<size_t>(1, options_.max_batch_chunks);
  std::deque<std::shared_ptr<Part>> mine;  // this Read's parts in flight, in chunk order
  size_t next = 0;                         // first chunk not yet in a part
  size_t consumed = 0;                     // first chunk not yet given to the sink
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
      auto part = std::make_shared<Part>();
      part->bytes = bytes;
      part->ids.reserve(end - next);
      for (size_t i = next; i < end; ++i) part->ids.push_back(chunks[i].id);
      {
        std::lock_guard lock(mu_);
        queue_.push_back(part);
      }
      work_cv_.notify_one();
      mine.push_back(std::move(part));
      next = end;
    }
    std::shared_ptr<Part> part = std::move(mine.front());
    mine.pop_front();
    {
      std::unique_lock lock(mu_);
      done_cv_.wait(lock, [&] { return part->done; });
    }
    auto take = [&](size_t j) -> Result<std::vector<uint8_t>> {
      if (part->result && (*part->result)[j]) return std::move(*(*part->result)[j]);
      // Not delivered (missing, or the batch failed): Get gives this chunk's own answer.
      return store_.Get(part->ids[j]);
    };
    for (size_t j = 0; j < part->ids.size() && status.ok(); ++j) {
      status = sink(consumed + j, CheckedLength(chunks[consumed + j], take(j)));
    }
    consumed += part->ids.size();
    {
      std::lock_guard lock(mu_);
      ReleaseLocked(part->bytes);
    }
    if (!status.ok()) break;
  }
  for (const auto& rest : mine) Abandon(rest);
  return status;
}

}  // namespace bdn
