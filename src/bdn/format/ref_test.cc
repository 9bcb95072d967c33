// Table-driven tests for ParseRef (docs/spec.md §2) and the tag and name validators.
#include "bdn/format/ref.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace bdn {
namespace {

const std::string kHex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct ValidCase {
  std::string text;
  RefForm form;
  std::string ns;
  std::string volume;
  std::optional<std::string> tag;
  std::optional<std::string> digest;
  std::string path;
  std::string canonical;  // Ref::ToString()
};

TEST(ParseRef, ValidRefs) {
  const std::vector<ValidCase> cases = {
      {"bdn:weights/qwen3-8b", RefForm::kVolume, "weights", "qwen3-8b", std::nullopt, std::nullopt,
       "", "bdn:weights/qwen3-8b"},
      {"bdn:Weights/Qwen3-8B:Prod", RefForm::kVolume, "weights", "qwen3-8b", "Prod", std::nullopt,
       "", "bdn:weights/qwen3-8b:Prod"},
      {"bdn:w/v@b3:" + kHex64, RefForm::kVolume, "w", "v", std::nullopt, kHex64, "",
       "bdn:w/v@b3:" + kHex64},
      {"bdn:w/v@" + kHex64, RefForm::kVolume, "w", "v", std::nullopt, kHex64, "",
       "bdn:w/v@b3:" + kHex64},
      {"bdn:w/v@0123456789AB", RefForm::kVolume, "w", "v", std::nullopt, "0123456789ab", "",
       "bdn:w/v@b3:0123456789ab"},
      {"bdn:w/v@0123456789ab/path/to/file", RefForm::kVolume, "w", "v", std::nullopt,
       "0123456789ab", "path/to/file", "bdn:w/v@b3:0123456789ab/path/to/file"},
      {"bdn:w/v@b3:0123456789ab/x", RefForm::kVolume, "w", "v", std::nullopt, "0123456789ab", "x",
       "bdn:w/v@b3:0123456789ab/x"},
      {"bdn:w/v:t/a/b", RefForm::kVolume, "w", "v", "t", std::nullopt, "a/b", "bdn:w/v:t/a/b"},
      {"bdn:w/v/a/b.json", RefForm::kVolume, "w", "v", std::nullopt, std::nullopt, "a/b.json",
       "bdn:w/v/a/b.json"},
      {"bdn:w/v/模型/权重.bin", RefForm::kVolume, "w", "v", std::nullopt, std::nullopt,
       "模型/权重.bin", "bdn:w/v/模型/权重.bin"},
      {"bdn:w/v:_a.B-1", RefForm::kVolume, "w", "v", "_a.B-1", std::nullopt, "", "bdn:w/v:_a.B-1"},
      {"bdn:my.ns_1/vol-2.x_y", RefForm::kVolume, "my.ns_1", "vol-2.x_y", std::nullopt,
       std::nullopt, "", "bdn:my.ns_1/vol-2.x_y"},
      // ':' after the volume's path separator belongs to the path.
      {"bdn:w/v/a:b", RefForm::kVolume, "w", "v", std::nullopt, std::nullopt, "a:b", "bdn:w/v/a:b"},
      {"bdn:weights", RefForm::kNamespace, "weights", "", std::nullopt, std::nullopt, "",
       "bdn:weights"},
      {"bdn:WEIGHTS", RefForm::kNamespace, "weights", "", std::nullopt, std::nullopt, "",
       "bdn:weights"},
      // kNamespace still accepts a full volume ref.
      {"bdn:weights/x:prod", RefForm::kNamespace, "weights", "x", "prod", std::nullopt, "",
       "bdn:weights/x:prod"},
      {"bdn:" + std::string(128, 'n') + "/" + std::string(128, 'v') + ":" + std::string(128, 'T'),
       RefForm::kVolume, std::string(128, 'n'), std::string(128, 'v'), std::string(128, 'T'),
       std::nullopt, "",
       "bdn:" + std::string(128, 'n') + "/" + std::string(128, 'v') + ":" + std::string(128, 'T')},
  };
  for (const ValidCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = ParseRef(c.text, c.form);
    ASSERT_TRUE(r.has_value()) << r.error().message();
    EXPECT_EQ(r->ns, c.ns);
    EXPECT_EQ(r->volume, c.volume);
    EXPECT_EQ(r->tag, c.tag);
    EXPECT_EQ(r->digest, c.digest);
    EXPECT_EQ(r->path, c.path);
    EXPECT_EQ(r->HasVolume(), !c.volume.empty());
    EXPECT_EQ(r->ToString(), c.canonical);
    if (r->HasVolume()) {
      EXPECT_EQ(r->VolumeString(), "bdn:" + c.ns + "/" + c.volume);
    }
    // The canonical text parses to the same ref.
    auto again = ParseRef(r->ToString(), c.form);
    ASSERT_TRUE(again.has_value()) << again.error().message();
    EXPECT_EQ(again->ToString(), r->ToString());
  }
}

struct InvalidCase {
  std::string text;
  std::string message;
  RefForm form = RefForm::kVolume;
};

TEST(ParseRef, InvalidRefsWithExactMessages) {
  auto msg = [](const std::string& text, const std::string& why) {
    return "ref \"" + text + "\": " + why;
  };
  const std::string names = " (allowed: a-z 0-9 . _ -)";
  const std::string tags = " (allowed: A-Z a-z 0-9 . _ -)";
  const std::vector<InvalidCase> cases = {
      {"weights/x", msg("weights/x", "must start with \"bdn:\"")},
      {"", msg("", "must start with \"bdn:\"")},
      {"BDN:weights/x", msg("BDN:weights/x", "must start with \"bdn:\"")},
      {"bdn:/x", msg("bdn:/x", "namespace is empty")},
      {"bdn:", msg("bdn:", "namespace is empty"), RefForm::kNamespace},
      {"bdn:we$ghts/x",
       msg("bdn:we$ghts/x", "namespace \"we$ghts\": invalid character '$'" + names)},
      {"bdn:we ights/x",
       msg("bdn:we ights/x", "namespace \"we ights\": invalid character ' '" + names)},
      {"bdn:-w/x", msg("bdn:-w/x", "namespace \"-w\": must start with a letter or digit")},
      {"bdn:" + std::string(129, 'n') + "/x",
       msg("bdn:" + std::string(129, 'n') + "/x",
           "namespace \"" + std::string(129, 'n') + "\": longer than 128 characters")},
      {"bdn:weights", msg("bdn:weights", "volume is missing (expected bdn:<namespace>/<volume>)")},
      {"bdn:weights/", msg("bdn:weights/", "volume is empty")},
      {"bdn:weights/:tag", msg("bdn:weights/:tag", "volume is empty")},
      {"bdn:weights/@0123456789ab", msg("bdn:weights/@0123456789ab", "volume is empty")},
      {"bdn:weights/", msg("bdn:weights/", "volume is empty"), RefForm::kNamespace},
      {"bdn:weights/Qw$n",
       msg("bdn:weights/Qw$n", "volume \"qw$n\": invalid character '$'" + names)},
      {"bdn:weights/.x", msg("bdn:weights/.x", "volume \".x\": must start with a letter or digit")},
      {"bdn:w/v\x01", msg("bdn:w/v\x01", "volume \"v\x01\": invalid character 0x01" + names)},
      {"bdn:w/v:pr*d", msg("bdn:w/v:pr*d", "tag \"pr*d\": invalid character '*'" + tags)},
      {"bdn:w/v:-prod",
       msg("bdn:w/v:-prod", "tag \"-prod\": must start with a letter, digit or '_'")},
      {"bdn:w/v:.prod",
       msg("bdn:w/v:.prod", "tag \".prod\": must start with a letter, digit or '_'")},
      {"bdn:w/v:", msg("bdn:w/v:", "tag is empty")},
      {"bdn:w/v:/a", msg("bdn:w/v:/a", "tag is empty")},
      {"bdn:w/v:" + std::string(129, 't'),
       msg("bdn:w/v:" + std::string(129, 't'),
           "tag \"" + std::string(129, 't') + "\": longer than 128 characters")},
      {"bdn:w/v@", msg("bdn:w/v@", "digest is empty")},
      {"bdn:w/v@b3:", msg("bdn:w/v@b3:", "digest is empty")},
      {"bdn:w/v@0123456789a",
       msg("bdn:w/v@0123456789a",
           "digest \"0123456789a\": too short, need at least 12 hex characters")},
      {"bdn:w/v@b3:abc",
       msg("bdn:w/v@b3:abc", "digest \"b3:abc\": too short, need at least 12 hex characters")},
      {"bdn:w/v@0123456789xy",
       msg("bdn:w/v@0123456789xy",
           "digest \"0123456789xy\": invalid character 'x' (expected hex)")},
      {"bdn:w/v@b3:" + kHex64 + "0",
       msg("bdn:w/v@b3:" + kHex64 + "0",
           "digest \"b3:" + kHex64 + "0\": longer than 64 hex characters")},
      {"bdn:w/v:prod@b3:" + kHex64,
       msg("bdn:w/v:prod@b3:" + kHex64, "a ref takes a tag or a digest, not both")},
      {"bdn:w/v@0123456789ab:prod",
       msg("bdn:w/v@0123456789ab:prod",
           "digest \"0123456789ab:prod\": invalid character ':' (expected hex)")},
      {"bdn:w/v/", msg("bdn:w/v/", "path is empty after '/'")},
      {"bdn:w/v/a//b", msg("bdn:w/v/a//b", "path \"a//b\": empty segment")},
      {"bdn:w/v/a/../b", msg("bdn:w/v/a/../b", "path \"a/../b\": \"..\" segment not allowed")},
      {"bdn:w/v/..", msg("bdn:w/v/..", "path \"..\": \"..\" segment not allowed")},
      {"bdn:w/v/./a", msg("bdn:w/v/./a", "path \"./a\": \".\" segment not allowed")},
      {"bdn:w/v/a/",
       msg("bdn:w/v/a/", "path \"a/\": ends with '/' (name the entry without it: bdn:w/v/a)")},
      {"bdn:w/v:t/a/b/",
       msg("bdn:w/v:t/a/b/",
           "path \"a/b/\": ends with '/' (name the entry without it: bdn:w/v:t/a/b)")},
      {"bdn:w/v/a//", msg("bdn:w/v/a//", "path \"a//\": empty segment")},
      {"bdn:w/v/../", msg("bdn:w/v/../", "path \"../\": \"..\" segment not allowed")},
      {"bdn:w/v//a", msg("bdn:w/v//a", "path \"/a\": must be relative")},
  };
  for (const InvalidCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = ParseRef(c.text, c.form);
    ASSERT_FALSE(r.has_value()) << r->ToString();
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.error().message(), c.message);
  }
}

TEST(ValidateTag, AcceptsAndRejects) {
  for (std::string_view t : {"prod", "Prod", "_x", "v1.2.3", "a-b_c.D", "0", "head"}) {
    EXPECT_TRUE(ValidateTag(t).ok()) << t << ": " << ValidateTag(t).message();
  }
  EXPECT_EQ(ValidateTag("").message(), "tag is empty");
  EXPECT_EQ(ValidateTag("a/b").message(),
            "tag \"a/b\": invalid character '/' (allowed: A-Z a-z 0-9 . _ -)");
  EXPECT_EQ(ValidateTag("a\tb").message(),
            "tag \"a\tb\": invalid character 0x09 (allowed: A-Z a-z 0-9 . _ -)");
  EXPECT_EQ(ValidateTag(std::string(128, 'a')).code(), StatusCode::kOk);
  EXPECT_EQ(ValidateTag(std::string(129, 'a')).code(), StatusCode::kInvalidArgument);
}

TEST(ValidateName, AcceptsAndRejects) {
  for (std::string_view n : {"a", "0", "qwen3-8b", "a.b_c-d", "9lives"}) {
    EXPECT_TRUE(ValidateName("volume", n).ok()) << n;
  }
  EXPECT_EQ(ValidateName("volume", "").message(), "volume is empty");
  EXPECT_EQ(ValidateName("namespace", "").message(), "namespace is empty");
  // Names are checked after folding; an upper-case letter here is invalid.
  EXPECT_EQ(ValidateName("volume", "Qwen").message(),
            "volume \"Qwen\": invalid character 'Q' (allowed: a-z 0-9 . _ -)");
  EXPECT_EQ(ValidateName("namespace", "_x").message(),
            "namespace \"_x\": must start with a letter or digit");
}

TEST(PinnedRef, PrintsTheFullDigest) {
  PinnedRef p{"weights", "qwen3-8b", Digest::Of(std::string_view())};
  EXPECT_EQ(p.ToString(),
            "bdn:weights/qwen3-8b@b3:"
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
  EXPECT_EQ(kHeadTag, "head");
}

}  // namespace
}  // namespace bdn
