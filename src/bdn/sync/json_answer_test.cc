// ParseJsonAnswer: the bounds hold while the parser runs (a deep or huge answer is stopped, not
// built), skipped containers read as null, and text that is not JSON is a discarded value.
#include "bdn/sync/json_answer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bdn/testing/status_matchers.h"

namespace bdn::sync {
namespace {

using nlohmann::json;

TEST(ParseJsonAnswer, Table) {
  struct Case {
    std::string text;
    JsonAnswerLimits limits;
    std::string want;  // the dump of the document, "discarded", or "error: <message> [reason]"
  };
  JsonAnswerLimits small;
  small.max_values = 4;
  JsonAnswerLimits top;
  top.keep_depth = 1;
  const std::vector<Case> cases = {
      {R"([{"type": "file", "path": "a", "size": 1}])",
       {},
       R"([{"path":"a","size":1,"type":"file"}])"},
      {std::string(16, '[') + std::string(16, ']'),
       {},
       std::string(16, '[') + std::string(16, ']')},
      {std::string(17, '[') + std::string(17, ']'),
       {},
       "error: the answer nests deeper than 16 levels [invalid_answer]"},
      // A 200 MB [[[…]]] cost 7.5 GB: it stops at level 17, having read 17 bytes.
      {std::string(100'000, '['),
       {},
       "error: the answer nests deeper than 16 levels [invalid_answer]"},
      {"[1, 2, 3]", small, "[1,2,3]"},
      {"[1, 2, 3, 4]", small,
       "error: the answer holds more than 4 JSON values (the most one answer may hold) "
       "[listing_too_large]"},
      {R"([{}, {}, {}, {}])", small,
       "error: the answer holds more than 4 JSON values (the most one answer may hold) "
       "[listing_too_large]"},
      {R"({"sha": "abc", "gated": false, "siblings": [{"rfilename": "a"}, {"rfilename": "b"}],
          "cardData": {"x": {"y": 1}}})",
       top, R"({"cardData":null,"gated":false,"sha":"abc","siblings":null})"},
      // Skipped containers are still bounded in depth, and cost no values.
      {R"({"sha": "abc", "siblings": )" + std::string(17, '[') + std::string(17, ']') + "}", top,
       "error: the answer nests deeper than 16 levels [invalid_answer]"},
      {"not json", {}, "discarded"},
      {"[1, 2", {}, "discarded"},
      {"", {}, "discarded"},
  };
  for (const Case& c : cases) {
    auto r = ParseJsonAnswer(c.text, c.limits);
    std::string got = !r ? "error: " + r.error().message() + " [" + r.error().reason() + "]"
                      : r->is_discarded() ? "discarded"
                                          : r->dump();
    EXPECT_EQ(c.want, got) << c.text.substr(0, 80);
  }
}

TEST(ParseJsonAnswer, ManyValuesUnderTheLimitAreKept) {
  std::string text = "[";
  for (int i = 0; i < 100'000; ++i) text += (i ? ",{}" : "{}");
  text += "]";
  auto r = ParseJsonAnswer(text);
  ASSERT_OK(r);
  EXPECT_EQ(100'000u, r->size());
}

}  // namespace
}  // namespace bdn::sync
