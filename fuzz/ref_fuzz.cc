// Fuzzes ParseRef (format/ref.h) in both forms: text either fails with InvalidArgument
// "ref \"<text>\": …" or parses to valid parts whose canonical text parses back to the same ref.
// The first byte picks the form; the rest is the text.
#include "bdn/format/manifest.h"
#include "bdn/format/ref.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;

bool SameRef(const Ref& a, const Ref& b) {
  return a.ns == b.ns && a.volume == b.volume && a.tag == b.tag && a.digest == b.digest &&
         a.path == b.path;
}

bool LowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RefForm form = data[0] & 1 ? RefForm::kNamespace : RefForm::kVolume;
  const std::string_view text = fuzz::Text(data + 1, size - 1);
  // The validators on their own take any text: only that they return is checked here.
  ValidateTag(text).IgnoreError();
  ValidateName("volume", text).IgnoreError();

  auto ref = ParseRef(text, form);
  if (!ref) {
    FUZZ_CHECK(fuzz::IsError(ref.error(), StatusCode::kInvalidArgument,
                             "ref \"" + std::string(text) + "\": "),
               ref.error().ToString());
    return 0;
  }
  FUZZ_CHECK(ValidateName("namespace", ref->ns).ok(), ref->ns);
  FUZZ_CHECK(ref->HasVolume() || form == RefForm::kNamespace, std::string(text));
  if (ref->HasVolume()) FUZZ_CHECK(ValidateName("volume", ref->volume).ok(), ref->volume);
  FUZZ_CHECK(!(ref->tag && ref->digest), std::string(text));
  if (ref->tag) FUZZ_CHECK(ValidateTag(*ref->tag).ok(), *ref->tag);
  if (ref->digest) {
    FUZZ_CHECK(ref->digest->size() >= 12 && ref->digest->size() <= 64 && LowerHex(*ref->digest),
               *ref->digest);
  }
  if (!ref->path.empty()) FUZZ_CHECK(ValidateEntryPath(ref->path).ok(), ref->path);
  FUZZ_CHECK(ref->HasVolume() || (!ref->tag && !ref->digest && ref->path.empty()),
             std::string(text));

  const std::string canonical = ref->ToString();
  auto again = ParseRef(canonical, form);
  FUZZ_CHECK(again.has_value(), canonical + " does not parse: " + again.error().ToString());
  FUZZ_CHECK(SameRef(*ref, *again), std::string(text) + " -> " + canonical);
  FUZZ_CHECK(again->ToString() == canonical, canonical);
  return 0;
}
