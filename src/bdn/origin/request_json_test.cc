// Table tests of the origin's request-body parsing: the bounds it keeps while parsing (nesting
// depth, the number of ids) and its messages.
#include "bdn/origin/request_json.h"

#include <gtest/gtest.h>

namespace bdn::origin {
namespace {

std::string Ids(size_t n, const std::string& extra = "") {
  std::string out = "{\"ids\": [";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += "\"" + Digest::Of(std::to_string(i)).Hex() + "\"";
  }
  return out + extra + "]}";
}

TEST(RequestJson, ParseBodyTable) {
  struct Bad {
    std::string body;
    std::string message;
  };
  std::vector<Bad> bad = {
      {"not json", "request body: not valid JSON"},
      {"{\"a\": 1", "request body: not valid JSON"},
      {"[1, 2]", "request body: must be a JSON object"},
      {"", "request body: not valid JSON"},
      {"{\"a\": " + std::string(32, '[') + std::string(32, ']') + "}",
       "request body: nested deeper than 32 levels"},
      // 40 MB of brackets would be refused by the body limit before this; the parser alone
      // stops at the 33rd level without building anything.
      {std::string(1 << 20, '['), "request body: nested deeper than 32 levels"},
      {std::string(1 << 20, '{'), "request body: not valid JSON"},
      // The last of two equal keys won: {"source": "hf://a", "source": "hf://b"} synced hf://b.
      {R"({"a": 1, "a": 2})", "request body: field \"a\" appears twice"},
      {R"({"a": {"b": 1, "c": {"b": 2}, "b": 3}})", "request body: field \"b\" appears twice"},
      {R"({"ids": [], "ids": ["x"]})", "request body: field \"ids\" appears twice"},
      // nlohmann skipped a UTF-8 byte order mark, so {"a": 1} had two spellings.
      {"\xEF\xBB\xBF{\"a\": 1}",
       "request body: starts with a byte order mark (EF BB BF); send JSON without one"},
      {"\xEF\xBB\xBF",
       "request body: starts with a byte order mark (EF BB BF); send JSON without one"},
  };
  for (const Bad& c : bad) {
    auto r = ParseBody(c.body);
    ASSERT_FALSE(r) << c.body.substr(0, 40);
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.error().message(), c.message) << c.body.substr(0, 40);
  }
  auto ok = ParseBody("{\"a\": " + std::string(31, '[') + std::string(31, ']') + ", \"b\": \"x\"}");
  ASSERT_TRUE(ok) << ok.error().ToString();
  EXPECT_EQ((*ok)["b"], "x");
}

// POST /v1/sync/jobs took {"include": ["*.json"]} (for "includes") and mirrored everything.
TEST(RequestJson, KnownFieldsRefusesOthersNamingThem) {
  auto body = ParseBody(R"({"source": "hf://a/b", "include": ["*.json"]})");
  ASSERT_TRUE(body) << body.error().ToString();
  Status s = KnownFields(*body, {"source", "includes", "excludes"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "request body: unknown field \"include\" (the fields are source, includes, excludes)");
  EXPECT_TRUE(KnownFields(*body, {"source", "include"}).ok());
  // Siblings in separate objects may share a name: only one object's keys must differ.
  EXPECT_TRUE(ParseBody(R"({"a": {"x": 1}, "b": {"x": 2}, "x": [{"x": 1}, {"x": 2}]})"));
}

TEST(RequestJson, IdsAreCountedWhileParsing) {
  auto r = ParseIdsBody(Ids(3), 4);
  ASSERT_TRUE(r) << r.error().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[2], Digest::Of("2"));
  r = ParseIdsBody(Ids(4), 4);
  ASSERT_TRUE(r);

  struct Bad {
    std::string body;
    std::string message;
  };
  std::vector<Bad> bad = {
      {Ids(5), "ids: 5 ids, at most 4 per request"},
      {Ids(100000), "ids: 100000 ids, at most 4 per request"},
      {Ids(4, ", {\"x\": [1]}"), "ids[4]: must be a string"},
      {Ids(2, ", 7"), "ids[2]: must be a string"},
      {"{\"ids\": \"x\"}", "ids: must be a list of chunk ids"},
      {"{\"other\": [1, 2, 3, 4, 5, 6]}", "ids: must be a list of chunk ids"},
      {"{\"ids\": [\"zz\"]}", "ids[0]: digest \"zz\": expected 64 hex characters, got 2"},
  };
  for (const Bad& c : bad) {
    auto e = ParseIdsBody(c.body, 4);
    ASSERT_FALSE(e) << c.body.substr(0, 60);
    EXPECT_EQ(e.error().message(), c.message) << c.body.substr(0, 60);
  }
}

}  // namespace
}  // namespace bdn::origin
