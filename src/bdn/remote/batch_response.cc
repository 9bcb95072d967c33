#include "bdn/remote/batch_response.h"

#include <algorithm>
#include <cstring>

namespace bdn::remote {

BatchResponseDecoder::BatchResponseDecoder(std::span<const Digest> ids, std::string source)
    : ids_(ids), source_(std::move(source)) {
  out_.reserve(ids.size());
}

bool BatchResponseDecoder::Feed(std::span<const uint8_t> in) {
  while (!in.empty() && !error_) {
    if (state_ == State::kBlob) {
      size_t take = std::min(in.size(), want_ - blob_.size());
      blob_.insert(blob_.end(), in.begin(), in.begin() + take);
      in = in.subspan(take);
      if (blob_.size() == want_) FinishBlob();
      continue;
    }
    if (state_ == State::kHeader && out_.size() == ids_.size()) {
      Fail("trailing bytes");
      break;
    }
    size_t need = (state_ == State::kMagic ? 4 : kRecordHeader) - head_.size();
    size_t take = std::min(in.size(), need);
    head_.insert(head_.end(), in.begin(), in.begin() + take);
    in = in.subspan(take);
    if (take == need) state_ == State::kMagic ? FinishMagic() : FinishHeader();
  }
  return !error_;
}

Result<BlobBatch> BatchResponseDecoder::Finish() && {
  if (!error_ && state_ == State::kMagic) Fail("no BDNB header");
  if (!error_ && (state_ != State::kHeader || !head_.empty() || out_.size() != ids_.size())) {
    Fail(out_.size() < ids_.size() ? "truncated at chunk " + ids_[out_.size()].ToString()
                                   : std::string("truncated"));
  }
  if (error_) return Err(*error_);
  return std::move(out_);
}

void BatchResponseDecoder::Fail(const std::string& why) {
  error_ = CorruptionError(source_ + ": POST /v1/chunks/batch: " + why);
}

void BatchResponseDecoder::FinishMagic() {
  if (std::memcmp(head_.data(), "BDNB", 4) != 0) return Fail("no BDNB header");
  head_.clear();
  state_ = State::kHeader;
}

void BatchResponseDecoder::FinishHeader() {
  const Digest& id = ids_[out_.size()];
  if (std::memcmp(head_.data(), id.data(), Digest::kSize) != 0) {
    return Fail("records out of order at chunk " + id.ToString());
  }
  uint8_t status = head_[Digest::kSize];
  const uint8_t* l = head_.data() + Digest::kSize + 1;
  want_ = static_cast<uint32_t>(l[0]) | static_cast<uint32_t>(l[1]) << 8 |
          static_cast<uint32_t>(l[2]) << 16 | static_cast<uint32_t>(l[3]) << 24;
  head_.clear();
  if (status == 1) {
    if (want_ != 0) {
      return Fail("missing chunk " + id.ToString() + " has length " + std::to_string(want_));
    }
    out_.emplace_back(std::nullopt);
  } else if (status != 0) {
    Fail("unknown record status " + std::to_string(status));
  } else if (want_ > kMaxRecordBytes) {
    Fail("chunk " + id.ToString() + " has length " + std::to_string(want_) + ", more than " +
         std::to_string(kMaxRecordBytes) + " bytes");
  } else if (want_ == 0) {
    FinishBlob();
  } else {
    blob_.clear();
    // The length is the server's word: reserve at most kReserveLimitBytes before the bytes
    // arrive (a blob larger than that grows as it comes).
    blob_.reserve(std::min(want_, kReserveLimitBytes));
    state_ = State::kBlob;
  }
}

void BatchResponseDecoder::FinishBlob() {
  const Digest& id = ids_[out_.size()];
  Digest got = Digest::Of(blob_);
  if (got != id) {
    error_ = CorruptionError("chunk " + id.ToString() + ": digest mismatch (bytes from " + source_ +
                             " hash to " + got.ToString() + ")");
    return;
  }
  out_.emplace_back(std::move(blob_));
  blob_ = {};
  state_ = State::kHeader;
}

}  // namespace bdn::remote
