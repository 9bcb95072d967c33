// Tests for the deployment config's bdn.mounts parsed and rewritten as text (mounts_config.h);
// tests/integration/mounts_config_test.sh covers apply and lock through the CLI.
#include "bdn/cli/mounts_config.h"

#include <gtest/gtest.h>

#include <chrono>

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
      // A NUL ended the path for the kernel but not for the duplicate check: two entries stacked
      // on one mountpoint, and every apply stacked more.
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m}\n  - {source: bdn:w/v, path: "
       "\"/m\\0x\"}\n",
       "c.yaml:4: mounts[1].path \"/m\\x00x\": control characters are not allowed"},
      {"bdn:\n  mounts:\n  - source: \"bdn:w/v\\t\"\n    path: /m\n",
       "c.yaml:3: mounts[0].source \"bdn:w/v\\t\": control characters are not allowed"},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: \"/m\\x7f\"}\n",
       "c.yaml:3: mounts[0].path \"/m\\x7f\": control characters are not allowed"},
      // Duplicate keys and further documents were read as the first one said, silently.
      {"bdn:\n  mounts: []\nbdn:\n  mounts:\n  - {source: bdn:w/v, path: /m}\n",
       "c.yaml:3: duplicate key \"bdn\""},
      {"bdn:\n  mounts: []\n  mounts:\n  - {source: bdn:w/v, path: /m}\n",
       "c.yaml:3: duplicate key \"mounts\" in bdn"},
      {"bdn:\n  mounts: []\n---\nbdn:\n  mounts:\n  - {source: bdn:w/v, path: /m}\n",
       "c.yaml:3: a second YAML document (---): the config is one"},
      // yaml-cpp's LoadAll reported a new document here forever (the fuzzer's timeout).
      {", \n    snu]m\v", "c.yaml:1: YAML syntax error: text the YAML parser cannot read"},
      // yaml-cpp's booleans also took "true" quoted, yes/no, on/off, y/n.
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m, allow_other: \"true\"}\n",
       "c.yaml:3: mounts[0].allow_other \"true\": must be true or false, not a quoted string"},
      // Was ", not a quoted string".
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m, allow_other: !!bool true}\n",
       "c.yaml:3: mounts[0].allow_other \"true\": must be true or false, without a tag "
       "(tag:yaml.org,2002:bool)"},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m, allow_other: on}\n",
       "c.yaml:3: mounts[0].allow_other \"on\": must be true or false"},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m, allow_other: Yes}\n",
       "c.yaml:3: mounts[0].allow_other \"Yes\": must be true or false"},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /m, allow_other: n}\n",
       "c.yaml:3: mounts[0].allow_other \"n\": must be true or false"},
      // Was "YAML syntax error: bad file".
      {"x: " + std::string(3000, '[') + std::string(3000, ']') + "\nbdn: {mounts: []}\n",
       "c.yaml:1: YAML nested too deeply"},
      {"bdn: {mounts: []}\n#" + std::string(kMaxMountsConfigBytes, 'x') + "\n",
       "c.yaml: larger than 1048576 bytes"},
      // The nested-path check, by lookups of ancestors and the first descendant: the same entry
      // named as when every earlier path was compared in order.
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /a}\n  - {source: bdn:w/v, path: /a!x}\n"
       "  - {source: bdn:w/v, path: /a/b/c}\n",
       "c.yaml:5: mounts[2].path \"/a/b/c\": inside mounts[0].path \"/a\""},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /a/c}\n  - {source: bdn:w/v, path: /a!x}\n"
       "  - {source: bdn:w/v, path: /a/b}\n  - {source: bdn:w/v, path: /a}\n",
       "c.yaml:6: mounts[3].path \"/a\": contains mounts[2].path \"/a/b\""},
      {"bdn:\n  mounts:\n  - {source: bdn:w/v, path: /a/b}\n  - {source: bdn:w/v, path: /a/b/}\n",
       "c.yaml:4: mounts[1].path \"/a/b/\": duplicate of mounts[0]"},
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

// A byte order mark before a source on line 1, and a tag before a source, made "cannot find the
// source text to rewrite" of a config that parses.
TEST(MountsConfig, RewriteFindsASourceAfterAByteOrderMarkOrATag) {
  for (const std::string& text :
       {std::string("\xEF\xBB\xBF{bdn: {mounts: [{source: bdn:a/b, path: /m/a}]}}\n"),
        std::string("bdn:\n  mounts:\n  - source: !!str bdn:a/b\n    path: /m/a\n"),
        std::string("bdn:\n  mounts:\n  - {path: /m/a, source: !custom  'bdn:a/b'}\n"),
        std::string("bdn: {mounts: [{path: /m/\xC3\xA9\xC3\xA9, source: bdn:a/b}]}\n")}) {
    auto entries = ParseMountsConfig("c.yaml", text);
    ASSERT_TRUE(entries.has_value()) << entries.error().message();
    ASSERT_EQ(entries->size(), 1u);
    auto out = RewriteMountSources("c.yaml", text, {{&(*entries)[0], "bdn:a/b@b3:" + kHex}});
    ASSERT_TRUE(out.has_value()) << text << ": " << out.error().message();
    std::string want = text;
    want.replace(want.find("bdn:a/b"), 7, "bdn:a/b@b3:" + kHex);
    EXPECT_EQ(*out, want);
  }
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
              "c.yaml:" + std::to_string(line) +
                  ": cannot find the source text to rewrite (write the ref on the line of "
                  "source:, as a plain or quoted scalar, e.g. source: bdn:ns/vol:tag)");
  }
}

// A source written as a block scalar (from a user: apply took it, lock refused it without saying
// what to change) is refused saying how to write it.
TEST(MountsConfig, RewriteOfABlockScalarSourceSaysHowToWriteIt) {
  const std::string text = "bdn:\n  mounts:\n    - source: >-\n        bdn:a/b\n      path: /m\n";
  auto entries = ParseMountsConfig("c.yaml", text);
  ASSERT_TRUE(entries.has_value()) << entries.error().message();
  ASSERT_EQ(entries->size(), 1u);
  auto out = RewriteMountSources("c.yaml", text, {{&(*entries)[0], "bdn:a/b@b3:" + kHex}});
  ASSERT_FALSE(out.has_value());
  EXPECT_TRUE(out.error().message().ends_with(
      ": cannot find the source text to rewrite (write the ref on the line of source:, as a plain "
      "or quoted scalar, e.g. source: bdn:ns/vol:tag)"))
      << out.error().message();
}

// The nested-path check compared each path with every earlier one: 20,000 entries took 27 s.
TEST(MountsConfig, ManyEntriesParseInLinearithmicTime) {
  std::string text = "bdn:\n  mounts:\n";
  for (int i = 0; i < 20000; ++i) {
    text += "  - {source: bdn:w/v, path: /m/" + std::to_string(i) + "/x}\n";
  }
  text += "  - {source: bdn:w/v, path: /m/19999}\n";
  const auto start = std::chrono::steady_clock::now();
  auto entries = ParseMountsConfig("c.yaml", text);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(entries.has_value());
  EXPECT_EQ(entries.error().message(),
            "c.yaml:20003: mounts[20000].path \"/m/19999\": contains mounts[19999].path "
            "\"/m/19999/x\"");
  EXPECT_LT(took, std::chrono::seconds(10));
}

// An aliased source has its anchor's place: messages named the anchor's line, and lock printed
// a change it then could not make.
TEST(MountsConfig, AnAliasedSourceIsNamedByItsKeyAndNotRewritten) {
  const std::string text =
      "defaults: &src bdn:a/b:x\n"
      "bdn:\n"
      "  mounts:\n"
      "    - source: *src\n"
      "      path: /m\n";
  auto entries = ParseMountsConfig("c.yaml", text);
  ASSERT_TRUE(entries.has_value()) << entries.error().message();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].line, 4);
  EXPECT_TRUE((*entries)[0].source_aliased);
  auto out = RewriteMountSources("c.yaml", text, {{&(*entries)[0], "bdn:a/b@b3:" + kHex}});
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().message(),
            "c.yaml:4: the source is a YAML alias (*name): cannot rewrite it; write the ref in its "
            "place");
}

// A failed rollback left a mount behind silently, and a successful one was not mentioned.
TEST(MountsConfig, RollbackErrorSaysWhatWasUnmountedAndWhatIsStillMounted) {
  const Status failed = InternalError("c.yaml:9: mount /m/c: boom");
  EXPECT_EQ(RollbackError(failed, {}, {}).message(), "c.yaml:9: mount /m/c: boom");
  Status s = RollbackError(failed, {"/m/b", "/m/a"},
                           {FailedPreconditionError("mountpoint /m/x: busy (files or directories "
                                                    "are open on it)")});
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "c.yaml:9: mount /m/c: boom; rolled back: unmounted /m/b, /m/a again; rollback "
            "failed, still mounted: mountpoint /m/x: busy (files or directories are open on it)");
}

}  // namespace
}  // namespace bdn::cli
