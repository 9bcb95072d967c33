// The selection of a sync and its identity without a source: PathFilter (--include/--exclude as
// docs/sync.md documents them), Select's failure naming an include that matches nothing, and
// ListingDigest (the metadata check), pinned to a b3sum of its documented text.
#include "bdn/sync/listing.h"

#include <gtest/gtest.h>

#include "bdn/sync/glob.h"
#include "bdn/sync/http_fetch.h"  // CheckObjectSize
#include "bdn/testing/status_matchers.h"

namespace bdn::sync {
namespace {

PathFilter Filter(std::vector<std::string> includes, std::vector<std::string> excludes = {}) {
  auto f = PathFilter::Create(std::move(includes), std::move(excludes));
  EXPECT_OK(f);
  return *f;
}

TEST(GlobMatches, StarAndQuestionMarkCrossSlashesAndDots) {
  struct Case {
    const char* pattern;
    const char* path;
    bool matches;
  } cases[] = {
      {"*.json", "config.json", true},
      {"*.json", "tokenizer/vocab.json", true},  // * also matches '/'
      {"*.json", "config.json.bak", false},      // the whole path must match
      {"*", ".hidden/x", true},                  // and a leading '.'
      {"tokenizer/*", "tokenizer/a/b.txt", true},
      {"tokenizer/*", "other/tokenizer/a", false},
      {"model-?????.safetensors", "model-00001.safetensors", true},
      {"model-?????.safetensors", "model-0001.safetensors", false},
      {"a?b", "a/b", true},
      {"shard-[0-3].bin", "shard-2.bin", true},
      {"shard-[0-3].bin", "shard-7.bin", false},
      {"shard-[!0-3].bin", "shard-7.bin", true},
      {"[abc]*", "b/x", true},
      {"\\*.bin", "*.bin", true},  // '\' quotes the next character
      {"\\*.bin", "x.bin", false},
      {"README*", "README.md", true},
      {"README*", "docs/README.md", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.matches, GlobMatches(c.pattern, c.path)) << c.pattern << " vs " << c.path;
  }
}

TEST(PathFilter, TakesAnyIncludeAndNoExcludeAndExcludeWins) {
  EXPECT_TRUE(Filter({}).Selects("anything/at/all"));
  PathFilter f = Filter({"*.safetensors", "*.json"}, {"tokenizer/*", "*.bak.json"});
  EXPECT_TRUE(f.Selects("model-00001.safetensors"));
  EXPECT_TRUE(f.Selects("config.json"));
  EXPECT_TRUE(f.Selects("sub/config.json"));
  EXPECT_FALSE(f.Selects("tokenizer/vocab.json"));  // included, and excluded: exclude wins
  EXPECT_FALSE(f.Selects("old.bak.json"));
  EXPECT_FALSE(f.Selects("README.md"));  // matches no include
  PathFilter only_excludes = Filter({}, {"*.bin", "original/*"});
  EXPECT_TRUE(only_excludes.Selects("model.safetensors"));
  EXPECT_FALSE(only_excludes.Selects("pytorch_model.bin"));
  EXPECT_FALSE(only_excludes.Selects("original/consolidated.pth"));
}

TEST(PathFilter, UnmatchedIncludesInTheOrderGiven) {
  PathFilter f = Filter({"*.gguf", "*.json", "*.onnx"});
  std::vector<std::string_view> paths = {"config.json", "model.safetensors"};
  EXPECT_EQ((std::vector<std::string>{"*.gguf", "*.onnx"}), f.UnmatchedIncludes(paths));
  EXPECT_EQ(std::vector<std::string>{}, Filter({}).UnmatchedIncludes(paths));
}

TEST(PathFilter, RefusesPatternsNoFlagCanMean) {
  EXPECT_STATUS(PathFilter::Create({""}, {}), kInvalidArgument, "--include \"\": empty pattern");
  EXPECT_STATUS(PathFilter::Create({}, {"a\nb"}), kInvalidArgument,
                "--exclude \"a\nb\": a pattern cannot hold a newline");
  EXPECT_STATUS(PathFilter::Create({std::string("a\0b", 3)}, {}), kInvalidArgument,
                "--include \"a");
}

SourceListing Listing() {
  SourceListing l;
  l.revision = "1111111111111111111111111111111111111111";
  l.objects = {{"README.md", 8, "r1"}, {"config.json", 12, "abc"}, {"w/model.bin", 0, ""}};
  return l;
}

TEST(Select, KeepsListingOrderAndNamesEveryIncludeThatMatchesNothing) {
  auto picked = Select(Listing(), Filter({"*.json", "w/*"}), "hf://org/repo");
  ASSERT_OK(picked);
  ASSERT_EQ(2u, picked->size());
  EXPECT_EQ("config.json", (*picked)[0].path);
  EXPECT_EQ("w/model.bin", (*picked)[1].path);

  auto one = Select(Listing(), Filter({"*.gguf", "*.json"}), "hf://org/repo");
  EXPECT_STATUS(one, kNotFound,
                "--include \"*.gguf\": matches nothing in hf://org/repo at "
                "1111111111111111111111111111111111111111 (3 objects)");
  EXPECT_EQ("include_matched_nothing", one.error().reason());
  SourceListing files = Listing();
  files.revision.clear();
  auto two = Select(files, Filter({"*.gguf", "*.onnx"}), "file:///d");
  EXPECT_STATUS(two, kNotFound,
                "--include \"*.gguf\", \"*.onnx\": match nothing in file:///d (3 objects)");
}

// 16k includes (a 64 KiB body) against a million objects ran for minutes, deaf to a cancel.
TEST(Select, StopsWhenCanceledAndTakesAtMostAThousandPatterns) {
  std::atomic<bool> cancel{true};
  auto r = Select(Listing(), Filter({"*.json"}), "hf://org/repo", &cancel);
  EXPECT_STATUS(r, kConflict, "hf://org/repo: canceled");
  EXPECT_EQ("canceled", r.error().reason());
  cancel = false;
  EXPECT_OK(Select(Listing(), Filter({"*.json"}), "hf://org/repo", &cancel));

  std::vector<std::string> many(kMaxGlobs, "*.json");
  EXPECT_OK(PathFilter::Create(many, many));
  many.push_back("*.bin");
  EXPECT_STATUS(PathFilter::Create(many, {}), kInvalidArgument,
                "--include: 1001 patterns, at most 1000 (each object is matched against every "
                "one)");
  EXPECT_STATUS(PathFilter::Create({}, many), kInvalidArgument,
                "--exclude: 1001 patterns, at most 1000 (each object is matched against every "
                "one)");
}

TEST(ListingDigest, IsTheBlake3OfTheDocumentedText) {
  // printf 'bdn sync listing
  // v2\n13:hf://org/repo40:1111…11:config.json2:123:abc11:w/model.bin1:00:' | b3sum
  std::vector<SourceObject> objects = {{"config.json", 12, "abc"}, {"w/model.bin", 0, ""}};
  EXPECT_EQ(
      "b77ee497723fe00c2658029f558936a4c70073a58231dd3db98a404384ff53bd",
      ListingDigest("hf://org/repo", "1111111111111111111111111111111111111111", objects).Hex());
  // printf 'bdn sync listing v2\n9:file:///d0:' | b3sum
  EXPECT_EQ("48aa33b6863af9f2ccfa18e31ce5696817236f2064012e20689955b238cb04d5",
            ListingDigest("file:///d", "", {}).Hex());
}

// v1 joined path\tsize\tetag\n: a key holding a TAB and a LF could spell two objects, and a
// different bucket was "already mirrored".
TEST(ListingDigest, NamesHoldingSeparatorsCannotSpellAnotherListing) {
  const std::vector<SourceObject> two = {{"a", 1, "x"}, {"b", 2, "y"}};
  const std::vector<SourceObject> one = {{"a", 1, "x\nb\t2\ty"}};
  const std::vector<SourceObject> other = {{"a\t1\tx\nb", 2, "y"}};
  const Digest d = ListingDigest("s3://b/p", "", two);
  EXPECT_NE(d, ListingDigest("s3://b/p", "", one));
  EXPECT_NE(d, ListingDigest("s3://b/p", "", other));
  EXPECT_NE(ListingDigest("s3://b/p\n", "", {}), ListingDigest("s3://b/p", "\n", {}));
}

TEST(ItemsOf, RefusesAnEtagWithControlCharacters) {
  auto r = ItemsOf({{"ok", 1, "e"}, {"w/a.bin", 1, "\"e\"\r\nX-Injected: 1"}}, "s3://b/p");
  EXPECT_STATUS(r, kInvalidArgument,
                "s3://b/p: object \"w/a.bin\": its etag \"\"e\"\\r\\nX-Injected: 1\" holds "
                "control characters; --exclude it");
  EXPECT_EQ(
      "s3://b/p: object \"w/a.bin\": its etag \"\"e\"\\r\\nX-Injected: 1\" holds control "
      "characters; --exclude it",
      r.error().message());
  EXPECT_EQ("invalid_object", r.error().reason());
}

// A name no version can hold was quoted raw in the first part of the message and escaped in the
// second: a NUL byte (a JSON listing's \u0000) or a byte that is not UTF-8 went as it was into
// the job's message, its JSON and the terminal. Every part now shows it as EscapeName does.
TEST(ItemsOf, QuotesNamesEscapedEverywhereInTheMessage) {
  struct Case {
    std::string name;
    std::string message;
  };
  const std::vector<Case> cases = {
      {std::string("\0x", 2),
       "hf://org/repo: object \"\\x00x\": cannot be a file of a version (path \"\\x00x\": "
       "contains a NUL byte); --exclude it"},
      {"\xffx",
       "hf://org/repo: object \"\\xffx\": cannot be a file of a version (path \"\\xffx\": not "
       "valid UTF-8); --exclude it"},
      {"a\n/../b",
       "hf://org/repo: object \"a\\n/../b\": cannot be a file of a version (path \"a\\n/../b\": "
       "\"..\" segment not allowed); --exclude it"},
  };
  for (const Case& c : cases) {
    auto r = ItemsOf({{"ok", 1, "e"}, {c.name, 1, "e"}}, "hf://org/repo");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(c.message, r.error().message());
    EXPECT_EQ("invalid_object", r.error().reason());
  }
  // A file that is also a folder: the folder's name, a newline and all.
  auto r = ItemsOf({{"a\nb", 1, "e"}, {"a\nb/c", 1, "e"}}, "s3://b/p");
  EXPECT_STATUS(r, kInvalidArgument,
                "s3://b/p: object \"a\\nb\": is also a directory of other objects; a version "
                "cannot hold both (--exclude one)");
}

// The same for an object that changed while it was read: its name went into the message raw.
TEST(CheckObjectSize, QuotesTheNameEscaped) {
  const SourceObject o{std::string("a\n\xff\0", 4), 10, ""};
  Status s = CheckObjectSize("s3://b/p", o, 200, {{"content-length", "11"}});
  EXPECT_EQ(
      "s3://b/p: object \"a\\n\\xff\\x00\": changed during the sync (10 bytes listed, 11 now)",
      s.message());
  EXPECT_EQ("source_changed", s.reason());
}

// Segments of 300 and 4000 bytes were sealed, and then no file system could pull them ("File
// name too long").
TEST(ItemsOf, RefusesASegmentLongerThanAFileSystemTakes) {
  const std::string name255(255, 'n');
  ASSERT_OK(ItemsOf({{"d/" + name255, 1, "e"}, {name255, 1, "e"}}, "hf://org/repo"));
  for (const std::string& path : {std::string(300, 'a'), "d/" + std::string(4000, 'n') + "/f"}) {
    auto r = ItemsOf({{"ok", 1, "e"}, {path, 1, "e"}}, "hf://org/repo");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ("hf://org/repo: object \"" + path +
                  "\": cannot be a file of a version (a path segment of " +
                  std::to_string(path.size() > 300 ? 4000 : 300) +
                  " bytes; a file system takes at most 255); --exclude it",
              r.error().message());
    EXPECT_EQ("invalid_object", r.error().reason());
  }
}

// A size of 2^63 was taken and downloaded forever; two of them added up to a bytes_total of 0.
TEST(ItemsOf, RefusesSizesNoVersionCanHold) {
  constexpr uint64_t k2to63 = uint64_t{1} << 63;
  ASSERT_OK(ItemsOf({{"a", k2to63 - 1, "e"}}, "s3://b/p"));
  auto r = ItemsOf({{"a", 1, "e"}, {"b", k2to63, "e"}}, "s3://b/p");
  EXPECT_STATUS(r, kInvalidArgument,
                "s3://b/p: object \"b\": cannot be a file of a version (9223372036854775808 bytes; "
                "a version's file holds at most 2^63-1); --exclude it");
  EXPECT_EQ("invalid_object", r.error().reason());
  r = ItemsOf({{"a", UINT64_MAX, "e"}}, "s3://b/p");
  EXPECT_EQ("invalid_object", r.error().reason());
  for (const std::vector<SourceObject>& objects :
       {std::vector<SourceObject>{{"a", k2to63 - 1, "e"}, {"b", 1, "e"}},
        std::vector<SourceObject>{{"a", k2to63 - 1, "e"}, {"b", k2to63 - 1, "e"}}}) {
    r = ItemsOf(objects, "s3://b/p");
    EXPECT_STATUS(r, kInvalidArgument,
                  "s3://b/p: the objects add up to more than 2^63-1 bytes, the most a version "
                  "holds; --include less");
    EXPECT_EQ("invalid_object", r.error().reason());
  }
}

TEST(ListingDigest, ChangesWithEveryFieldThatNamesContent) {
  const std::vector<SourceObject> base = {{"a.bin", 5, "e1"}, {"b.bin", 7, "e2"}};
  const Digest d = ListingDigest("s3://b/p", "", base);
  EXPECT_EQ(d, ListingDigest("s3://b/p", "", base));
  EXPECT_NE(d, ListingDigest("s3://b/q", "", base));     // another source
  EXPECT_NE(d, ListingDigest("s3://b/p", "rev", base));  // another revision
  auto changed = base;
  changed[1].etag = "e3";
  EXPECT_NE(d, ListingDigest("s3://b/p", "", changed));  // an etag
  changed = base;
  changed[0].size_bytes = 6;
  EXPECT_NE(d, ListingDigest("s3://b/p", "", changed));  // a size
  changed = base;
  changed[0].path = "c.bin";
  EXPECT_NE(d, ListingDigest("s3://b/p", "", changed));    // a path
  EXPECT_NE(d, ListingDigest("s3://b/p", "", {base[0]}));  // one object fewer
}

}  // namespace
}  // namespace bdn::sync
