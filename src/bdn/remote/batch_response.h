// The decoder of a POST /v1/chunks/batch answer (docs/http-api.md, "Chunks"): fed the body
// piece by piece as it arrives, it verifies every blob against its id and keeps no more than one
// blob beyond its result.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/chunk_store.h"

namespace bdn::remote {

// Decodes "BDNB", then per requested id, in order: id (32 raw bytes) | status (u8: 0 found,
// 1 missing) | length (u32 LE; 0 for missing) | bytes[length].
//
// Memory: the blobs decoded so far plus the one in progress; a record's stated length is never
// reserved up front beyond kReserveLimitBytes, so a lying length costs only the bytes that
// actually arrive.
// Not thread-safe: one decoder per response, fed by one thread.
class BatchResponseDecoder {
 public:
  // The most bytes reserved for one blob before its bytes arrive (more than the default
  // chunker's largest chunk, 256 KiB; a larger blob grows as it comes).
  static constexpr size_t kReserveLimitBytes = 1024 * 1024;
  // The longest record taken: what one GET of a blob may answer (http::ClientOptions'
  // max_response_bytes). A longer length is refused at its header instead of buffered up to
  // 4 GiB per record (a lying cache node grew a mount daemon by 400 MiB per batch in flight).
  static constexpr size_t kMaxRecordBytes = size_t{1} << 30;

  // `ids` are the requested ids, in request order; they must outlive the decoder. `source`
  // names the server in messages (e.g. "origin http://host:8440").
  BatchResponseDecoder(std::span<const Digest> ids, std::string source);

  // Consumes the next piece of the body (any size, including empty). Returns false once the
  // body is malformed or a blob does not match its id (then error() says why); later calls do
  // nothing and return false.
  bool Feed(std::span<const uint8_t> piece);

  // The blobs, one per requested id in order (nullopt for missing), once the whole body was
  // fed. Errors (all Corruption):
  //   "<source>: POST /v1/chunks/batch: no BDNB header"
  //   "<source>: POST /v1/chunks/batch: records out of order at chunk b3:…"
  //   "<source>: POST /v1/chunks/batch: unknown record status N"
  //   "<source>: POST /v1/chunks/batch: missing chunk b3:… has length N"
  //   "<source>: POST /v1/chunks/batch: chunk b3:… has length N, more than 1073741824 bytes"
  //   "<source>: POST /v1/chunks/batch: trailing bytes"
  //   "<source>: POST /v1/chunks/batch: truncated at chunk b3:…" (or "truncated" for no ids)
  //   "chunk b3:…: digest mismatch (bytes from <source> hash to b3:…)"
  Result<BlobBatch> Finish() &&;

  // The first error found so far, if any.
  const std::optional<Status>& error() const { return error_; }

 private:
  enum class State { kMagic, kHeader, kBlob };
  static constexpr size_t kRecordHeader = Digest::kSize + 5;

  void Fail(const std::string& why);
  void FinishMagic();
  void FinishHeader();
  void FinishBlob();

  std::span<const Digest> ids_;
  std::string source_;
  State state_ = State::kMagic;
  std::vector<uint8_t> head_;
  std::vector<uint8_t> blob_;
  size_t want_ = 0;
  BlobBatch out_;
  std::optional<Status> error_;
};

}  // namespace bdn::remote
