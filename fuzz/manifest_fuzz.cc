// Fuzzes DecodeManifest (format/manifest.h): any bytes either fail with Corruption "manifest: …"
// or decode to a manifest whose canonical encoding is exactly those bytes (the version digest
// is the BLAKE3 of the bytes, so two encodings of one manifest would be two versions).
#include "bdn/format/manifest.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  std::span<const uint8_t> in(data, size);
  auto m = DecodeManifest(in);
  if (!m) {
    FUZZ_CHECK(fuzz::IsError(m.error(), StatusCode::kCorruption, "manifest: "),
               m.error().ToString());
    return 0;
  }
  auto again = EncodeManifest(*m);
  FUZZ_CHECK(again.has_value(), again.error().ToString());
  FUZZ_CHECK(fuzz::Bytes(*again).size() == size &&
                 std::equal(in.begin(), in.end(), fuzz::Bytes(*again).begin()),
             "re-encoding differs from the input");
  for (const Entry& e : m->entries) {
    FUZZ_CHECK(ValidateEntryPath(e.path).ok(), e.path);
    FUZZ_CHECK(e.kind != EntryKind::kFile || e.layout != FileLayout::kEmpty || e.size_bytes == 0,
               e.path);
  }
  return 0;
}
