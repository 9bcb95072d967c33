// Fuzzes the POST /v1/chunks/batch answer decoder (remote/batch_response.h). Input: a byte
// n (0..4 requested ids), a byte p (piece size 1..64), n ids of 32 bytes, then the body. The
// body is decoded whole and again fed in pieces of p bytes (with empty pieces between): both
// must give the same result, every error is Corruption naming the batch or a chunk, and a
// decoded batch holds one entry per id, each blob hashing to its id.
#include "bdn/remote/batch_response.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;

Result<BlobBatch> Decode(std::span<const Digest> ids, std::span<const uint8_t> body, size_t piece) {
  remote::BatchResponseDecoder d(ids, "origin http://fuzz");
  bool fed = true;
  for (size_t at = 0; at < body.size(); at += piece) {
    fed = d.Feed(body.subspan(at, std::min(piece, body.size() - at)));
    FUZZ_CHECK(fed == !d.error().has_value(), "Feed's answer disagrees with error()");
    if (!fed) break;
    FUZZ_CHECK(d.Feed({}) == fed, "an empty piece changed the outcome");
  }
  return std::move(d).Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = data[0] % 5;
  const size_t piece = 1 + data[1] % 64;
  std::span<const uint8_t> rest(data + 2, size - 2);
  if (rest.size() < n * Digest::kSize) return 0;
  std::vector<Digest> ids;
  for (size_t i = 0; i < n; ++i) {
    std::array<uint8_t, Digest::kSize> a;
    std::copy_n(rest.begin() + i * Digest::kSize, a.size(), a.begin());
    ids.emplace_back(a);
  }
  std::span<const uint8_t> body = rest.subspan(n * Digest::kSize);

  auto whole = Decode(ids, body, std::max<size_t>(body.size(), 1));
  auto pieces = Decode(ids, body, piece);
  FUZZ_CHECK(whole.has_value() == pieces.has_value(), "piece size changes the outcome");
  if (!whole) {
    FUZZ_CHECK(whole.error().ToString() == pieces.error().ToString(),
               whole.error().ToString() + " vs " + pieces.error().ToString());
    const Status& s = whole.error();
    FUZZ_CHECK(
        fuzz::IsError(s, StatusCode::kCorruption, "origin http://fuzz: POST /v1/chunks/batch: ") ||
            fuzz::IsError(s, StatusCode::kCorruption, "chunk b3:"),
        s.ToString());
    return 0;
  }
  FUZZ_CHECK(*whole == *pieces, "piece size changes the blobs");
  FUZZ_CHECK(whole->size() == ids.size(), std::to_string(whole->size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*whole)[i]) FUZZ_CHECK(Digest::Of(*(*whole)[i]) == ids[i], ids[i].ToString());
  }
  return 0;
}
