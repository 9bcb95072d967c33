// Fuzzes http::ParseRange (http/message.h). Input: 8 bytes of resource size (little-endian; the
// first byte's top bit picks a small size 0..127 instead, so ranges can be satisfiable), then the
// header value. It either fails with InvalidArgument "range \"<value>\": not satisfiable …" (and
// then a whole-resource range "bytes=0-" is refused too only for an empty resource), is ignored
// (nullopt), or gives a non-empty range inside the resource, which its canonical
// "bytes=FIRST-LAST" form gives again.
#include "bdn/http/message.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  if (size < 8) return 0;
  uint64_t size_bytes = 0;
  for (int i = 7; i >= 0; --i) size_bytes = size_bytes << 8 | data[i];
  if (data[0] & 0x80) size_bytes = data[1] & 0x7f;
  const std::string_view value = fuzz::Text(data + 8, size - 8);

  auto parsed = http::ParseRange(value, size_bytes);
  if (!parsed) {
    FUZZ_CHECK(fuzz::IsError(parsed.error(), StatusCode::kInvalidArgument,
                             "range \"" + std::string(value) + "\": not satisfiable for size "),
               parsed.error().ToString());
    return 0;
  }
  if (!*parsed) return 0;  // ignored: the whole resource is sent
  const http::ByteRange* r = &**parsed;
  const std::string got = std::to_string(r->offset) + "+" + std::to_string(r->length) + " of " +
                          std::to_string(size_bytes);
  FUZZ_CHECK(r->length > 0, got);
  FUZZ_CHECK(r->offset < size_bytes, got);
  FUZZ_CHECK(r->length <= size_bytes - r->offset, got);
  const std::string canonical =
      "bytes=" + std::to_string(r->offset) + "-" + std::to_string(r->offset + r->length - 1);
  auto again = http::ParseRange(canonical, size_bytes);
  FUZZ_CHECK(again && *again && (*again)->offset == r->offset && (*again)->length == r->length,
             canonical + " vs " + got);
  return 0;
}
