// Tests for the deployment config's bdn.mounts parsed and rewritten as text (mounts_config.h);
// tests/integration/mounts_config_test.sh covers apply and lock through the CLI.
#include "bdn/cli/mounts_config.h"

#include <gtest/gtest.h>

namespace bdn::cli {
namespace {

const std::string kHex(64, 'a');

TEST(MountsConfig, ParsesEntriesWithTheirPlaces) {
  const std::string text =
      "other: {keep: me}\n"
      "bdn:\n"
      "  mounts:\n"
      "    - source: bdn:Weights/qwen3-8b@b3:9f3c1a2b4c5d   # pinned\n"
      "      path: /mnt/weights//qwen3-8b/\n"
      "    - path: /mnt/tok\n"
      "      source: \"bdn:weights/tok:prod\"\n";
  auto entries = ParseMountsConfig("c.yaml", text);
  ASSERT_TRUE(entries.has_value()) << entries.error().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].line, 4);
  EXPECT_EQ((*entries)[0].column, 14);
  EXPECT_EQ((*entries)[0].source, "bdn:Weights/qwen3-8b@b3:9f3c1a2b4c5d");
  EXPECT_EQ((*entries)[0].ref.ns, "weights");
  EXPECT_EQ((*entries)[0].path, "/mnt/weights/qwen3-8b");
  EXPECT_EQ((*entries)[1].line, 7);
  EXPECT_EQ((*entries)[1].column, 14);
  EXPECT_EQ((*entries)[1].ref.tag, "prod");
  EXPECT_EQ((*entries)[1].path, "/mnt/tok");
}

TEST(MountsConfig, RefusesABadConfigNamingTheLine) {
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"", "c.yaml:1: no \"bdn:\" section"},
      {"bdn: [\n", "c.yaml:2: YAML syntax error: end of sequence flow not found"},
      {"bdn:\n  mount: []\n", "c.yaml:2: unknown key \"mount\" in bdn (allowed: mounts)"},
      {"bdn:\n  mounts:\n  - source: bdn:w/v\n    path: /m\n  - source: bdn:w/x\n    path: /m/n\n",
       "c.yaml:6: mounts[1].path \"/m/n\": inside mounts[0].path \"/m\""},
      {"bdn:\n  mounts:\n  - source: bdn:w/v/p\n    path: /m\n",
       "c.yaml:3: mounts[0].source \"bdn:w/v/p\": a mount source takes no path"},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /a/..}\n",
       "c.yaml:3: mounts[0].path \"/a/..\": cannot mount over /"},
  };
  for (const Case& c : cases) {
    auto entries = ParseMountsConfig("c.yaml", c.text);
    ASSERT_FALSE(entries.has_value()) << c.text;
    EXPECT_EQ(entries.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(entries.error().message(), c.message);
  }
}

TEST(MountsConfig, RewriteChangesOnlyTheSourcesEvenSeveralOnOneLine) {
  const std::string text =
      "# keep\n"
      "bdn: {mounts: [{source: 'bdn:a/b:x', path: /m/a}, {path: /m/b, source: \"bdn:a/c\"}]}";
  auto entries = ParseMountsConfig("c.yaml", text);
  ASSERT_TRUE(entries.has_value()) << entries.error().message();
  ASSERT_EQ(entries->size(), 2u);
  auto out = RewriteMountSources(
      "c.yaml", text,
      {{&(*entries)[0], "bdn:a/b@b3:" + kHex}, {&(*entries)[1], "bdn:a/c@b3:" + kHex}});
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ(*out, "# keep\nbdn: {mounts: [{source: 'bdn:a/b@b3:" + kHex +
                      "', path: /m/a}, {path: /m/b, source: \"bdn:a/c@b3:" + kHex + "\"}]}");
}

// Where an entry's place does not hold its source text, the rewrite says so; a column past the
// end of its line threw std::out_of_range from std::string::compare.
TEST(MountsConfig, RewriteRefusesAPlaceThatDoesNotHoldTheSource) {
  MountEntry e;
  e.source = "bdn:a/b";
  for (auto [line, column] :
       {std::pair(1, 40), std::pair(3, 0), std::pair(0, 0), std::pair(1, 2)}) {
    e.line = line;
    e.column = column;
    auto out = RewriteMountSources("c.yaml", "x: bdn:a/b\n", {{&e, "bdn:a/b@b3:" + kHex}});
    ASSERT_FALSE(out.has_value()) << line << ":" << column;
    EXPECT_EQ(out.error().message(),
              "c.yaml:" + std::to_string(line) + ": cannot find the source text to rewrite");
  }
}

}  // namespace
}  // namespace bdn::cli
