// How the SQL stores keep a list of names in one text column (both engines read it alike).
// Header-only; for registry/ only.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace bdn::internal {

// `items` joined by `separator`, which no item may hold.
inline std::string JoinList(const std::vector<std::string>& items, char separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

// The inverse: "" is no items, and a trailing separator ends the last item ("a,b," is {a, b}).
inline std::vector<std::string> SplitList(std::string_view text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.find(separator, start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace bdn::internal
