// Fuzzes remote::ParseNodeList (remote/cluster_chunk_store.h): any text splits into items that
// are non-empty, hold no ',' and no blanks at either end, and that the list written back with
// "," or " , " between them gives again.
#include <cctype>

#include "bdn/remote/cluster_chunk_store.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  const std::string_view text = fuzz::Text(data, size);
  auto items = remote::ParseNodeList(text);
  std::string joined, spaced;
  for (const std::string& item : items) {
    FUZZ_CHECK(!item.empty(), std::string(text));
    FUZZ_CHECK(item.find(',') == std::string::npos, item);
    FUZZ_CHECK(!std::isspace(static_cast<unsigned char>(item.front())) &&
                   !std::isspace(static_cast<unsigned char>(item.back())),
               item);
    if (!joined.empty()) {
      joined += ",";
      spaced += " , ";
    }
    joined += item;
    spaced += item;
  }
  FUZZ_CHECK(remote::ParseNodeList(joined) == items, joined);
  FUZZ_CHECK(remote::ParseNodeList(spaced) == items, spaced);
  return 0;
}
