#include "bdn/cache/upstream_breaker.h"

namespace bdn {
namespace {

// Whether `s` says the upstream did not answer (rather than answering with an error).
bool IsNoAnswer(const Status& s) {
  if (s.code() == StatusCode::kDeadlineExceeded) return true;
  return s.code() == StatusCode::kUnavailable && s.reason() != kShuttingDown;
}

}  // namespace

Result<std::vector<uint8_t>> UpstreamBreaker::Get(const Digest& id) {
  bool probe = false;
  if (Status s = breaker_->Admit(probe, "a read"); !s.ok()) return Err(s);
  Result<std::vector<uint8_t>> got = upstream_->Get(id);
  const Status s = got ? Status::Ok() : got.error();
  breaker_->Record(!IsNoAnswer(s), s, probe);
  return got;
}

Result<BlobBatch> UpstreamBreaker::GetMany(std::span<const Digest> ids) {
  bool probe = false;
  if (Status s = breaker_->Admit(probe, "a read"); !s.ok()) return Err(s);
  Result<BlobBatch> got = upstream_->GetMany(ids);
  const Status s = got ? Status::Ok() : got.error();
  breaker_->Record(!IsNoAnswer(s), s, probe);
  return got;
}

}  // namespace bdn
