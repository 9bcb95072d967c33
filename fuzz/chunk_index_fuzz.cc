// Fuzzes DecodeChunkIndex (format/manifest.h): any bytes either fail with Corruption
// "chunk index: …" or decode to chunks (none empty) whose encoding is exactly those bytes.
#include "bdn/format/manifest.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  std::span<const uint8_t> in(data, size);
  auto chunks = DecodeChunkIndex(in);
  if (!chunks) {
    FUZZ_CHECK(fuzz::IsError(chunks.error(), StatusCode::kCorruption, "chunk index: "),
               chunks.error().ToString());
    return 0;
  }
  for (const ChunkRef& c : *chunks) FUZZ_CHECK(c.size_bytes > 0, c.id.ToString());
  std::string again = EncodeChunkIndex(*chunks);
  FUZZ_CHECK(again.size() == size && std::equal(in.begin(), in.end(), fuzz::Bytes(again).begin()),
             "re-encoding differs from the input");
  return 0;
}
