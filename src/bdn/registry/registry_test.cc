// Tests for SqlRegistry on SQLite and PostgreSQL (the same typed suite): commits, head, tags, the
// volume sequence and compare-and-swap, lookups, push claims, persistence across reopening, and
// two servers writing one volume at once; then SQLite's own open errors.
#include "bdn/registry/registry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bdn/registry/backends_test_util.h"
#include "bdn/registry/push_claims.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

// A digest whose hex starts with `prefix_hex` (even length) followed by `fill` bytes.
Digest MakeDigest(const std::string& prefix_hex, uint8_t fill) {
  std::array<uint8_t, Digest::kSize> b;
  b.fill(fill);
  for (size_t i = 0; i + 1 < prefix_hex.size() && i / 2 < b.size(); i += 2) {
    b[i / 2] = static_cast<uint8_t>(std::stoi(prefix_hex.substr(i, 2), nullptr, 16));
  }
  return Digest(b);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename Backend>
class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    Reopen();
  }
  void Reopen() {
    reg_.reset();
    auto r = backend_.OpenRegistry();
    ASSERT_TRUE(r.has_value()) << r.error().message();
    reg_ = std::move(*r);
  }

  CommitRequest Request(const Digest& d, std::vector<std::string> tags = {}) {
    CommitRequest req;
    req.ns = "weights";
    req.volume = "qwen3-8b";
    req.digest = d;
    req.stats = {3, 1000, 7, 5};
    req.source_uri = "file:///src";
    req.tags = std::move(tags);
    return req;
  }

  CommitResult MustCommit(const CommitRequest& req) {
    auto r = reg_->Commit(req);
    EXPECT_TRUE(r.has_value()) << r.error().message();
    return r.value_or(CommitResult{});
  }

  int64_t Sequence() {
    auto v = reg_->GetVolume("weights", "qwen3-8b");
    EXPECT_TRUE(v.has_value()) << v.error().message();
    return v ? v->sequence : -1;
  }

  Backend backend_;
  std::unique_ptr<Registry> reg_;
  const Digest d1_ = MakeDigest("abcd01", 0x11);
  const Digest d2_ = MakeDigest("abce02", 0x22);
  const Digest d3_ = MakeDigest("ff", 0x33);
};

TYPED_TEST_SUITE(RegistryTest, testutil::Backends, testutil::BackendName);

TYPED_TEST(RegistryTest, FirstCommitCreatesNamespaceVolumeAndVersion) {
  const int64_t before = NowMs();
  CommitResult c = this->MustCommit(this->Request(this->d1_, {"prod", "candidate"}));
  EXPECT_EQ(c.sequence, 1);
  EXPECT_FALSE(c.unchanged);
  EXPECT_TRUE(c.head_updated);
  EXPECT_EQ(c.tags_applied, (std::vector<std::string>{"prod", "candidate"}));

  auto namespaces = this->reg_->ListNamespaces();
  ASSERT_TRUE(namespaces.has_value()) << namespaces.error().message();
  EXPECT_EQ(*namespaces, std::vector<std::string>{"weights"});

  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  ASSERT_TRUE(vol.has_value()) << vol.error().message();
  EXPECT_EQ(vol->ns, "weights");
  EXPECT_EQ(vol->name, "qwen3-8b");
  EXPECT_EQ(vol->head, this->d1_);
  EXPECT_EQ(vol->sequence, 1);
  EXPECT_EQ(vol->tags,
            (std::map<std::string, Digest>{{"candidate", this->d1_}, {"prod", this->d1_}}));
  EXPECT_EQ(vol->live_versions, 1u);
  EXPECT_EQ(vol->deleted_versions, 0u);
  EXPECT_GE(vol->created_unix_ms, before);
  EXPECT_LE(vol->created_unix_ms, NowMs());

  auto vols = this->reg_->ListVolumes("weights");
  ASSERT_TRUE(vols.has_value()) << vols.error().message();
  ASSERT_EQ(vols->size(), 1u);
  EXPECT_EQ((*vols)[0].name, "qwen3-8b");

  auto v = this->reg_->GetVersion("weights", "qwen3-8b", this->d1_);
  ASSERT_TRUE(v.has_value()) << v.error().message();
  EXPECT_EQ(v->ns, "weights");
  EXPECT_EQ(v->volume, "qwen3-8b");
  EXPECT_EQ(v->digest, this->d1_);
  EXPECT_EQ(v->sequence, 1);
  EXPECT_EQ(v->lifecycle, Lifecycle::kAlive);
  EXPECT_EQ(LifecycleName(v->lifecycle), "ALIVE");
  EXPECT_FALSE(v->deleted_unix_ms.has_value());
  EXPECT_FALSE(v->delete_after_unix_ms.has_value());
  EXPECT_EQ(v->stats.files, 3u);
  EXPECT_EQ(v->stats.bytes, 1000u);
  EXPECT_EQ(v->stats.chunks, 7u);
  EXPECT_EQ(v->stats.entries, 5u);
  EXPECT_EQ(v->source_uri, "file:///src");
  EXPECT_EQ(v->tags, (std::vector<std::string>{"candidate", "prod"}));  // sorted
  EXPECT_TRUE(v->is_head);
  EXPECT_GE(v->created_unix_ms, before);
}

TYPED_TEST(RegistryTest, RecommittingTheSameDigestChangesNothing) {
  this->MustCommit(this->Request(this->d1_, {"prod"}));
  CommitResult again = this->MustCommit(this->Request(this->d1_, {"prod"}));
  EXPECT_TRUE(again.unchanged);
  EXPECT_FALSE(again.head_updated);
  EXPECT_EQ(again.sequence, 1);
  EXPECT_EQ(again.tags_applied, std::vector<std::string>{"prod"});
  EXPECT_EQ(this->Sequence(), 1);

  CommitResult no_tags = this->MustCommit(this->Request(this->d1_));
  EXPECT_TRUE(no_tags.unchanged);
  EXPECT_EQ(no_tags.sequence, 1);

  auto versions = this->reg_->ListVersions("weights", "qwen3-8b", false);
  ASSERT_TRUE(versions.has_value()) << versions.error().message();
  EXPECT_EQ(versions->size(), 1u);
}

TYPED_TEST(RegistryTest, RecommitWithANewTagBumpsTheSequenceOnce) {
  this->MustCommit(this->Request(this->d1_));
  CommitResult tagged = this->MustCommit(this->Request(this->d1_, {"new"}));
  EXPECT_TRUE(tagged.unchanged);
  EXPECT_FALSE(tagged.head_updated);
  EXPECT_EQ(tagged.sequence, 2);
  EXPECT_EQ(tagged.tags_applied, std::vector<std::string>{"new"});
  // The version keeps the sequence it was committed at.
  EXPECT_EQ(this->reg_->GetVersion("weights", "qwen3-8b", this->d1_)->sequence, 1);
}

TYPED_TEST(RegistryTest, SecondVersionIsListedFirstAndBecomesHead) {
  this->MustCommit(this->Request(this->d1_, {"prod"}));
  CommitResult c2 = this->MustCommit(this->Request(this->d2_));
  EXPECT_FALSE(c2.unchanged);
  EXPECT_TRUE(c2.head_updated);
  EXPECT_EQ(c2.sequence, 2);

  auto versions = this->reg_->ListVersions("weights", "qwen3-8b", false);
  ASSERT_TRUE(versions.has_value()) << versions.error().message();
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].digest, this->d2_);
  EXPECT_EQ((*versions)[0].sequence, 2);
  EXPECT_TRUE((*versions)[0].is_head);
  EXPECT_TRUE((*versions)[0].tags.empty());
  EXPECT_EQ((*versions)[1].digest, this->d1_);
  EXPECT_EQ((*versions)[1].sequence, 1);
  EXPECT_FALSE((*versions)[1].is_head);
  EXPECT_EQ((*versions)[1].tags, std::vector<std::string>{"prod"});
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->live_versions, 2u);

  // Re-committing the older version moves head back without a new version.
  CommitResult back = this->MustCommit(this->Request(this->d1_));
  EXPECT_TRUE(back.unchanged);
  EXPECT_TRUE(back.head_updated);
  EXPECT_EQ(back.sequence, 3);
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->head, this->d1_);
  versions = this->reg_->ListVersions("weights", "qwen3-8b", true);
  ASSERT_TRUE(versions.has_value());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].digest, this->d2_);  // still ordered by commit sequence
  EXPECT_TRUE((*versions)[1].is_head);
}

TYPED_TEST(RegistryTest, SetTagAndDeleteTagBumpTheSequence) {
  this->MustCommit(this->Request(this->d1_));
  this->MustCommit(this->Request(this->d2_));
  ASSERT_EQ(this->Sequence(), 2);

  auto s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, std::nullopt);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 3);
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->tags.at("prod"), this->d1_);

  // Moving the tag is one atomic update.
  s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d2_, 3);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 4);
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->tags.at("prod"), this->d2_);
  EXPECT_TRUE(this->reg_->GetVersion("weights", "qwen3-8b", this->d1_)->tags.empty());
  EXPECT_EQ(this->reg_->GetVersion("weights", "qwen3-8b", this->d2_)->tags,
            std::vector<std::string>{"prod"});

  // Tags are case-sensitive.
  s = this->reg_->SetTag("weights", "qwen3-8b", "Prod", this->d1_, std::nullopt);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 5);
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->tags.size(), 2u);

  auto d = this->reg_->DeleteTag("weights", "qwen3-8b", "prod", std::nullopt);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(*d, 6);
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  EXPECT_FALSE(vol->tags.contains("prod"));
  EXPECT_TRUE(vol->tags.contains("Prod"));
  // The version stays.
  EXPECT_TRUE(this->reg_->GetVersion("weights", "qwen3-8b", this->d2_).has_value());

  d = this->reg_->DeleteTag("weights", "qwen3-8b", "prod", std::nullopt);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.error().message(), "tag \"prod\" of bdn:weights/qwen3-8b: not found; its tags: Prod");
  EXPECT_EQ(this->Sequence(), 6);
}

TYPED_TEST(RegistryTest, ATagSetToTheVersionItPointsAtChangesNothing) {
  this->MustCommit(this->Request(this->d1_, {"prod"}));
  ASSERT_EQ(this->Sequence(), 1);
  auto s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, std::nullopt);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 1);
  s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 1);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 1);
  EXPECT_EQ(this->Sequence(), 1);
  // A stale expected_sequence is still a conflict, no-op or not.
  s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 0);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().message(), "volume bdn:weights/qwen3-8b: sequence is 1, expected 0");
}

TYPED_TEST(RegistryTest, ARetriedCommitWithItsKeyReturnsTheFirstResult) {
  this->MustCommit(this->Request(this->d1_));
  CommitRequest req = this->Request(this->d2_, {"prod"});
  req.expected_sequence = 1;
  req.idempotency_key = "0123456789abcdef0123456789abcdef";
  auto before = this->reg_->FindCommit(req);
  ASSERT_TRUE(before.has_value()) << before.error().message();
  EXPECT_FALSE(before->has_value());

  CommitResult first = this->MustCommit(req);
  EXPECT_EQ(first.sequence, 2);
  EXPECT_FALSE(first.unchanged);
  EXPECT_TRUE(first.head_updated);
  EXPECT_EQ(first.tags_applied, std::vector<std::string>{"prod"});

  // The retry: expected_sequence 1 is stale now, and d2 already is head, yet it reports what the
  // first try did and changes nothing.
  for (int i = 0; i < 2; ++i) {
    CommitResult again = this->MustCommit(req);
    EXPECT_EQ(again.sequence, 2);
    EXPECT_FALSE(again.unchanged);
    EXPECT_TRUE(again.head_updated);
    EXPECT_EQ(again.tags_applied, std::vector<std::string>{"prod"});
  }
  auto found = this->reg_->FindCommit(req);
  ASSERT_TRUE(found.has_value() && found->has_value());
  EXPECT_EQ((*found)->sequence, 2);
  EXPECT_TRUE((*found)->head_updated);
  EXPECT_EQ(this->Sequence(), 2);
  EXPECT_EQ(this->reg_->ListVersions("weights", "qwen3-8b", false)->size(), 2u);

  // Also after other writes moved the volume on, and after a restart.
  ASSERT_TRUE(
      this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, std::nullopt).has_value());
  this->Reopen();
  CommitResult later = this->MustCommit(req);
  EXPECT_EQ(later.sequence, 2);
  EXPECT_TRUE(later.head_updated);
  EXPECT_EQ(this->Sequence(), 3);
  EXPECT_EQ(this->reg_->GetVolume("weights", "qwen3-8b")->tags.at("prod"), this->d1_)
      << "a replay applies nothing";

  // Without the key the same request is a new write: a conflict on the stale sequence.
  req.idempotency_key.clear();
  auto r = this->reg_->Commit(req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
}

TYPED_TEST(RegistryTest, IdempotencyKeysAreScopedByNamespace) {
  CommitRequest req = this->Request(this->d1_);
  req.idempotency_key = "shared-key";
  CommitResult first = this->MustCommit(req);
  EXPECT_EQ(first.sequence, 1);

  // Another namespace's write with the same key is its own write: applied, not refused as
  // "already used", and not answered with the first namespace's result.
  CommitRequest other = req;
  other.ns = "other-team";
  other.digest = this->d2_;
  CommitResult theirs = this->MustCommit(other);
  EXPECT_EQ(theirs.sequence, 1);
  EXPECT_FALSE(theirs.unchanged);
  EXPECT_EQ(this->reg_->GetVolume("other-team", "qwen3-8b")->head, this->d2_);
  auto tag = this->reg_->SetTag("third", "qwen3-8b", "prod", this->d1_, std::nullopt, "shared-key");
  ASSERT_FALSE(tag.has_value());
  EXPECT_EQ(tag.error().code(), StatusCode::kNotFound) << tag.error().message();

  // Each namespace's retry still gets its own recorded answer.
  CommitResult again = this->MustCommit(req);
  EXPECT_EQ(again.sequence, first.sequence);
  CommitResult theirs_again = this->MustCommit(other);
  EXPECT_EQ(theirs_again.sequence, theirs.sequence);
  EXPECT_EQ(this->Sequence(), 1);
  EXPECT_EQ(this->reg_->GetVolume("other-team", "qwen3-8b")->sequence, 1);
}

TYPED_TEST(RegistryTest, AnIdempotencyKeyIsBoundToItsRequest) {
  CommitRequest req = this->Request(this->d1_);
  req.idempotency_key = "k-1";
  this->MustCommit(req);
  CommitRequest other = this->Request(this->d2_);
  other.idempotency_key = "k-1";
  auto r = this->reg_->Commit(other);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "idempotency key \"k-1\": already used for another request");
  auto t = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, std::nullopt, "k-1");
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(this->Sequence(), 1);

  for (const std::string& bad :
       std::vector<std::string>{"has space", "slash/", std::string(65, 'a'), "\xff"}) {
    CommitRequest b = this->Request(this->d2_);
    b.idempotency_key = bad;
    auto br = this->reg_->Commit(b);
    ASSERT_FALSE(br.has_value()) << bad;
    EXPECT_EQ(br.error().message(),
              "idempotency key \"" + bad +
                  "\": must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_'");
  }
  EXPECT_EQ(this->Sequence(), 1);
}

TYPED_TEST(RegistryTest, RetriedTagWritesWithTheirKeyReturnTheFirstSequence) {
  this->MustCommit(this->Request(this->d1_));
  this->MustCommit(this->Request(this->d2_));
  ASSERT_EQ(this->Sequence(), 2);
  auto s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 2, "set-1");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 3);
  s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 2, "set-1");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 3) << "not a conflict against its own move";
  auto d = this->reg_->DeleteTag("weights", "qwen3-8b", "prod", 3, "del-1");
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(*d, 4);
  d = this->reg_->DeleteTag("weights", "qwen3-8b", "prod", 3, "del-1");
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(*d, 4) << "not NotFound for its own delete";
  EXPECT_EQ(this->Sequence(), 4);
  EXPECT_FALSE(this->reg_->GetVolume("weights", "qwen3-8b")->tags.contains("prod"));
}

TYPED_TEST(RegistryTest, SetTagNeedsAnExistingVolumeAndVersion) {
  this->MustCommit(this->Request(this->d1_));
  auto s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d3_, std::nullopt);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.error().message(),
            "version bdn:weights/qwen3-8b@" + this->d3_.ToString() + ": not found");

  s = this->reg_->SetTag("weights", "other", "prod", this->d1_, std::nullopt);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.error().message(), "volume bdn:weights/other: not found");

  auto d = this->reg_->DeleteTag("nope", "qwen3-8b", "prod", std::nullopt);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(), "volume bdn:nope/qwen3-8b: not found");
  EXPECT_EQ(this->Sequence(), 1);
}

TYPED_TEST(RegistryTest, StaleExpectedSequenceIsAConflict) {
  this->MustCommit(this->Request(this->d1_));
  this->MustCommit(this->Request(this->d2_));

  auto s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 1);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kConflict);
  EXPECT_EQ(s.error().message(), "volume bdn:weights/qwen3-8b: sequence is 2, expected 1");
  EXPECT_FALSE(this->reg_->GetVolume("weights", "qwen3-8b")->tags.contains("prod"));

  s = this->reg_->SetTag("weights", "qwen3-8b", "prod", this->d1_, 2);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(*s, 3);

  auto d = this->reg_->DeleteTag("weights", "qwen3-8b", "prod", 2);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kConflict);
  EXPECT_EQ(d.error().message(), "volume bdn:weights/qwen3-8b: sequence is 3, expected 2");
  EXPECT_TRUE(this->reg_->GetVolume("weights", "qwen3-8b")->tags.contains("prod"));

  CommitRequest req = this->Request(this->d3_, {"next"});
  req.expected_sequence = 2;
  auto c = this->reg_->Commit(req);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kConflict);
  EXPECT_EQ(c.error().message(), "volume bdn:weights/qwen3-8b: sequence is 3, expected 2");
  // The failed commit left nothing behind.
  EXPECT_EQ(this->reg_->GetVersion("weights", "qwen3-8b", this->d3_).error().code(),
            StatusCode::kNotFound);
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  EXPECT_EQ(vol->head, this->d2_);
  EXPECT_EQ(vol->sequence, 3);
  EXPECT_FALSE(vol->tags.contains("next"));

  req.expected_sequence = 3;
  CommitResult ok = this->MustCommit(req);
  EXPECT_EQ(ok.sequence, 4);
}

TYPED_TEST(RegistryTest, ConflictingFirstCommitCreatesNoVolume) {
  CommitRequest req = this->Request(this->d1_);
  req.expected_sequence = 5;
  auto c = this->reg_->Commit(req);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kConflict);
  EXPECT_EQ(c.error().message(), "volume bdn:weights/qwen3-8b: sequence is 0, expected 5");
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  ASSERT_FALSE(vol.has_value());
  EXPECT_EQ(vol.error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(this->reg_->ListNamespaces()->empty());

  // Expecting 0 for a volume that does not exist yet is the create-only-if-absent form.
  req.expected_sequence = 0;
  EXPECT_EQ(this->MustCommit(req).sequence, 1);
}

TYPED_TEST(RegistryTest, HeadTagIsReserved) {
  this->MustCommit(this->Request(this->d1_));
  auto s = this->reg_->SetTag("weights", "qwen3-8b", "head", this->d1_, std::nullopt);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(), "tag \"head\": reserved; head moves only with a push or sync");
  auto d = this->reg_->DeleteTag("weights", "qwen3-8b", "head", std::nullopt);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.error().message(), "tag \"head\": reserved; it cannot be deleted");
  EXPECT_EQ(this->Sequence(), 1);
  EXPECT_TRUE(this->reg_->GetVolume("weights", "qwen3-8b")->tags.empty());
}

TYPED_TEST(RegistryTest, CommitRefusesTheHeadTag) {
  // A "head" tag row would show up in VolumeRecord::tags, which never lists head, and could not
  // be deleted (DeleteTag refuses "head").
  this->MustCommit(this->Request(this->d1_));
  auto c = this->reg_->Commit(this->Request(this->d2_, {"prod", "head"}));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.error().message(), "tag \"head\": reserved; head moves only with a push or sync");
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  EXPECT_EQ(vol->sequence, 1);
  EXPECT_EQ(vol->head, this->d1_);
  EXPECT_TRUE(vol->tags.empty());
  EXPECT_EQ(this->reg_->GetVersion("weights", "qwen3-8b", this->d2_).error().code(),
            StatusCode::kNotFound);
}

TYPED_TEST(RegistryTest, FindVersionsByHexPrefix) {
  this->MustCommit(this->Request(this->d1_));
  this->MustCommit(this->Request(this->d2_));
  this->MustCommit(this->Request(this->d3_));
  auto all = this->reg_->FindVersions("weights", "qwen3-8b", "");
  ASSERT_TRUE(all.has_value()) << all.error().message();
  EXPECT_EQ(*all, (std::vector<Digest>{this->d1_, this->d2_, this->d3_}));  // ordered by digest

  auto abc = this->reg_->FindVersions("weights", "qwen3-8b", "abc");
  ASSERT_TRUE(abc.has_value());
  EXPECT_EQ(*abc, (std::vector<Digest>{this->d1_, this->d2_}));

  auto one = this->reg_->FindVersions("weights", "qwen3-8b", this->d1_.ShortHex(12));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(*one, std::vector<Digest>{this->d1_});

  auto full = this->reg_->FindVersions("weights", "qwen3-8b", this->d3_.Hex());
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(*full, std::vector<Digest>{this->d3_});

  auto none = this->reg_->FindVersions("weights", "qwen3-8b", "0000");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());

  auto missing = this->reg_->FindVersions("weights", "nope", "ab");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.error().message(), "volume bdn:weights/nope: not found");
}

TYPED_TEST(RegistryTest, LookupsOfMissingThingsAreNotFound) {
  this->MustCommit(this->Request(this->d1_));
  auto v = this->reg_->GetVersion("weights", "qwen3-8b", this->d2_);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(v.error().message(),
            "version bdn:weights/qwen3-8b@" + this->d2_.ToString() + ": not found");

  v = this->reg_->GetVersion("weights", "nope", this->d1_);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().message(), "volume bdn:weights/nope: not found");

  auto vol = this->reg_->GetVolume("other", "qwen3-8b");
  ASSERT_FALSE(vol.has_value());
  EXPECT_EQ(vol.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(vol.error().message(), "volume bdn:other/qwen3-8b: not found");

  auto vols = this->reg_->ListVolumes("other");
  ASSERT_FALSE(vols.has_value());
  EXPECT_EQ(vols.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(vols.error().message(), "namespace \"other\": not found");

  auto versions = this->reg_->ListVersions("weights", "nope", true);
  ASSERT_FALSE(versions.has_value());
  EXPECT_EQ(versions.error().message(), "volume bdn:weights/nope: not found");
}

TYPED_TEST(RegistryTest, NamespacesAndVolumesAreListedInOrder) {
  for (const char* ns : {"zeta", "alpha"}) {
    for (const char* vol : {"b", "a"}) {
      CommitRequest req = this->Request(this->d1_);
      req.ns = ns;
      req.volume = vol;
      this->MustCommit(req);
    }
  }
  EXPECT_EQ(*this->reg_->ListNamespaces(), (std::vector<std::string>{"alpha", "zeta"}));
  auto vols = this->reg_->ListVolumes("zeta");
  ASSERT_TRUE(vols.has_value()) << vols.error().message();
  ASSERT_EQ(vols->size(), 2u);
  EXPECT_EQ((*vols)[0].name, "a");
  EXPECT_EQ((*vols)[1].name, "b");
  // Each volume has its own sequence.
  EXPECT_EQ((*vols)[0].sequence, 1);
  EXPECT_EQ((*vols)[1].sequence, 1);
}

TYPED_TEST(RegistryTest, DataPersistsAfterReopening) {
  this->MustCommit(this->Request(this->d1_, {"prod"}));
  this->MustCommit(this->Request(this->d2_));
  ASSERT_TRUE(
      this->reg_->SetTag("weights", "qwen3-8b", "stable", this->d1_, std::nullopt).has_value());
  this->Reopen();
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  ASSERT_TRUE(vol.has_value()) << vol.error().message();
  EXPECT_EQ(vol->head, this->d2_);
  EXPECT_EQ(vol->sequence, 3);
  EXPECT_EQ(vol->tags, (std::map<std::string, Digest>{{"prod", this->d1_}, {"stable", this->d1_}}));
  auto versions = this->reg_->ListVersions("weights", "qwen3-8b", false);
  ASSERT_TRUE(versions.has_value()) << versions.error().message();
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].digest, this->d2_);
  EXPECT_EQ((*versions)[1].digest, this->d1_);
  EXPECT_EQ((*versions)[1].tags, (std::vector<std::string>{"prod", "stable"}));
  EXPECT_EQ((*versions)[1].source_uri, "file:///src");
  // And it keeps working after reopening.
  EXPECT_EQ(this->MustCommit(this->Request(this->d3_)).sequence, 4);
}

TYPED_TEST(RegistryTest, TwoHandlesOnOneDatabaseSeeEachOther) {
  auto other = this->backend_.OpenRegistry();
  ASSERT_TRUE(other.has_value()) << other.error().message();
  this->MustCommit(this->Request(this->d1_));
  auto vol = (*other)->GetVolume("weights", "qwen3-8b");
  ASSERT_TRUE(vol.has_value()) << vol.error().message();
  EXPECT_EQ(vol->head, this->d1_);
  auto s = (*other)->SetTag("weights", "qwen3-8b", "prod", this->d1_, 1);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(this->Sequence(), 2);
}

TYPED_TEST(RegistryTest, PushClaimIsExclusiveUntilReleased) {
  auto first = this->reg_->ClaimPush("weights", "qwen3-8b");
  ASSERT_TRUE(first.has_value()) << first.error().message();
  auto second = this->reg_->ClaimPush("weights", "qwen3-8b");
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kConflict);
  EXPECT_TRUE(second.error().message().starts_with("volume bdn:weights/qwen3-8b: push in progress"))
      << second.error().message();
  // Another volume is independent.
  auto elsewhere = this->reg_->ClaimPush("weights", "other");
  EXPECT_TRUE(elsewhere.has_value());
  first->reset();
  auto third = this->reg_->ClaimPush("weights", "qwen3-8b");
  EXPECT_TRUE(third.has_value()) << third.error().message();
}

// Two servers (two handles: two SQLite connections, two PostgreSQL pools) committing new
// versions to one volume at once: every commit succeeds, each with a sequence of its own, and
// the volume ends with all of them.
TYPED_TEST(RegistryTest, ConcurrentCommitsToOneVolumeGetDistinctSequences) {
  auto other = this->backend_.OpenRegistry();
  ASSERT_TRUE(other.has_value()) << other.error().message();
  Registry* handles[] = {this->reg_.get(), other->get()};
  constexpr int kThreads = 8, kEach = 10;
  std::mutex mu;
  std::map<int64_t, Digest> by_sequence;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const Digest d = MakeDigest("", static_cast<uint8_t>(t * kEach + i + 1));
        auto r = handles[t % 2]->Commit(this->Request(d));
        std::lock_guard lock(mu);
        if (!r) {
          errors.push_back(r.error().ToString());
        } else if (!by_sequence.emplace(r->sequence, d).second) {
          errors.push_back("sequence " + std::to_string(r->sequence) + " given twice");
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, std::vector<std::string>{});
  ASSERT_EQ(by_sequence.size(), size_t{kThreads * kEach});
  EXPECT_EQ(by_sequence.begin()->first, 1);
  EXPECT_EQ(by_sequence.rbegin()->first, kThreads * kEach);
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  ASSERT_TRUE(vol.has_value()) << vol.error().message();
  EXPECT_EQ(vol->sequence, kThreads * kEach);
  EXPECT_EQ(vol->live_versions, uint64_t{kThreads * kEach});
  EXPECT_EQ(vol->head, by_sequence.rbegin()->second);  // the last commit's version
  auto versions = this->reg_->ListVersions("weights", "qwen3-8b", false);
  ASSERT_TRUE(versions.has_value()) << versions.error().message();
  for (const VersionRecord& v : *versions) EXPECT_EQ(by_sequence.at(v.sequence), v.digest);
}

// Commits that all expect the sequence they last read: exactly one of each race wins, the others
// get a clean Conflict, and the sequence counts exactly the winners (no lost update).
TYPED_TEST(RegistryTest, RacingExpectedSequencesGiveOneWinnerAndCleanConflicts) {
  auto other = this->backend_.OpenRegistry();
  ASSERT_TRUE(other.has_value()) << other.error().message();
  Registry* handles[] = {this->reg_.get(), other->get()};
  this->MustCommit(this->Request(this->d1_));
  constexpr int kThreads = 6, kWins = 5;
  std::atomic<int> wins{0}, conflicts{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Registry& reg = *handles[t % 2];
      for (int won = 0, n = 0; won < kWins; ++n) {
        auto vol = reg.GetVolume("weights", "qwen3-8b");
        if (!vol) {
          std::lock_guard lock(mu);
          errors.push_back(vol.error().ToString());
          return;
        }
        CommitRequest req = this->Request(MakeDigest("", static_cast<uint8_t>(100 + t)),
                                          {"t" + std::to_string(t) + "-" + std::to_string(n)});
        req.expected_sequence = vol->sequence;
        auto r = reg.Commit(req);
        if (r) {
          EXPECT_EQ(r->sequence, vol->sequence + 1);
          ++won;
          ++wins;
        } else if (r.error().code() == StatusCode::kConflict) {
          EXPECT_TRUE(r.error().message().starts_with("volume bdn:weights/qwen3-8b: sequence is "))
              << r.error().message();
          ++conflicts;
        } else {
          std::lock_guard lock(mu);
          errors.push_back(r.error().ToString());
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, std::vector<std::string>{});
  EXPECT_EQ(wins.load(), kThreads * kWins);
  EXPECT_EQ(this->Sequence(), 1 + kThreads * kWins);
  auto vol = this->reg_->GetVolume("weights", "qwen3-8b");
  ASSERT_TRUE(vol.has_value());
  EXPECT_EQ(vol->tags.size(), size_t{kThreads * kWins});  // every winner's tag is there
}

// A retry sent to another server while the first try still runs (the same idempotency key):
// applied once, and both get the same answer.
TYPED_TEST(RegistryTest, ARetryRacingItsFirstTryIsAppliedOnce) {
  auto other = this->backend_.OpenRegistry();
  ASSERT_TRUE(other.has_value()) << other.error().message();
  for (int round = 0; round < 10; ++round) {
    CommitRequest req = this->Request(MakeDigest("", static_cast<uint8_t>(round + 1)),
                                      {"r" + std::to_string(round)});
    req.idempotency_key = "retry-" + std::to_string(round);
    Result<CommitResult> a, b;
    std::thread t1([&] { a = this->reg_->Commit(req); });
    std::thread t2([&] { b = (*other)->Commit(req); });
    t1.join();
    t2.join();
    ASSERT_TRUE(a.has_value()) << a.error().message();
    ASSERT_TRUE(b.has_value()) << b.error().message();
    EXPECT_EQ(a->sequence, b->sequence);
    EXPECT_EQ(a->unchanged, b->unchanged);
    EXPECT_EQ(this->Sequence(), round + 1);
  }
}

TEST(SqliteRegistry, OpenFailsForAnUnwritableLocation) {
  auto r = SqliteRegistry::Open("/nonexistent-dir-for-bdn-test/sub/registry.db");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
  EXPECT_TRUE(
      r.error().message().starts_with("registry /nonexistent-dir-for-bdn-test/sub/registry.db: "))
      << r.error().message();
}

size_t OpenFileDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(SqliteRegistry, FailedOpenOfANonDatabaseFileLeaksNoDescriptor) {
  std::string t = (fs::temp_directory_path() / "bdn_registry_test.XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  const fs::path db = fs::path(t) / "registry.db";
  {
    FILE* f = std::fopen(db.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::string junk(8192, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  const size_t before = OpenFileDescriptors();
  for (int i = 0; i < 5; ++i) {
    auto r = SqliteRegistry::Open(db);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kInternal);
    EXPECT_EQ(r.error().message(), "registry " + db.string() + ": file is not a database");
  }
  EXPECT_EQ(OpenFileDescriptors(), before);
  fs::remove_all(t);
}

// A new registry appears at its path whole, its schema in it: never the empty file a reader
// beside its first open took for "a truncated copy" (from an attacking helper: a gc run beside
// the first push into a new home). A watcher looks at the path as often as it can while it is
// made, and nothing but the database is left beside it.
TEST(SqliteRegistry, ANewRegistryAppearsWhole) {
  std::string t = (fs::temp_directory_path() / "bdn_registry_test.XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  for (int round = 0; round < 20; ++round) {
    const fs::path dir = fs::path(t) / std::to_string(round);
    fs::create_directory(dir);
    const fs::path db = dir / "registry.db";
    std::atomic<bool> done{false};
    std::atomic<int64_t> smallest{-1};
    std::thread watcher([&] {
      for (;;) {
        const bool finished = done.load();  // one more look once the open has returned
        struct stat st;
        if (::stat(db.c_str(), &st) == 0) {
          smallest = st.st_size;
          return;
        }
        if (finished) return;
      }
    });
    {
      auto r = SqliteRegistry::Open(db);
      ASSERT_TRUE(r) << r.error().message();
    }
    done = true;
    watcher.join();
    EXPECT_GE(smallest.load(), 512)
        << "round " << round << ": registry.db appeared with " << smallest.load() << " bytes";
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      EXPECT_TRUE(n == "registry.db" || n == "registry.db-wal" || n == "registry.db-shm" ||
                  n == "locks")
          << n;
    }
  }
  fs::remove_all(t);
}

// What a creation killed midway left beside the database (its temporary file and journal) is
// removed by a later open once it is 10 minutes old; a young one (another creation in progress)
// is left alone.
TEST(SqliteRegistry, AKilledCreationsTemporaryFilesGoOnceOld) {
  std::string t = (fs::temp_directory_path() / "bdn_registry_test.XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  const fs::path db = fs::path(t) / "registry.db";
  for (const char* name :
       {"registry.db.new-00aa", "registry.db.new-00aa-journal", "registry.db.new-00bb"}) {
    std::FILE* f = std::fopen((fs::path(t) / name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(11);
  fs::last_write_time(fs::path(t) / "registry.db.new-00aa", old);
  fs::last_write_time(fs::path(t) / "registry.db.new-00aa-journal", old);
  {
    auto r = SqliteRegistry::Open(db);
    ASSERT_TRUE(r) << r.error().message();
  }
  EXPECT_FALSE(fs::exists(fs::path(t) / "registry.db.new-00aa"));
  EXPECT_FALSE(fs::exists(fs::path(t) / "registry.db.new-00aa-journal"));
  EXPECT_TRUE(fs::exists(fs::path(t) / "registry.db.new-00bb"));
  fs::remove_all(t);
}

// A commit or a restore whose store fence changes no row (objstore's PgCatalog: a GC sweep
// deleted packs since the version's blobs were checked, its lock having been lost) writes
// nothing and says why; one whose fence passes is written, the fence run in its transaction.
TEST(RegistryStoreFence, ACommitOrRestoreWhoseFenceChangesNoRowWritesNothing) {
  testutil::PostgresBackend backend;
  const std::string why = backend.Prepare();
  if (!why.empty()) GTEST_SKIP() << why;
  auto pool = backend.Pool();
  ASSERT_TRUE(pool) << pool.error().message();
  auto db = (*pool)->Use("test");
  ASSERT_TRUE(db->Write([](sql::Session& s) -> Status {
                  BDN_RETURN_IF_ERROR(sql::ToStatus(
                      s.Exec("CREATE TABLE fence_t (sweeps BIGINT, commits BIGINT)")));
                  return sql::ToStatus(s.Exec("INSERT INTO fence_t VALUES (1, 0)"));
                }).ok());
  auto commits = [&] {
    auto r = sql::ReadValue<sql::Rows>(
        *db, [](sql::Session& s) { return s.Query("SELECT commits FROM fence_t"); });
    return r ? r->Int(0, 0) : -1;
  };
  auto reg = backend.OpenRegistry();
  ASSERT_TRUE(reg) << reg.error().message();
  const std::string passes = "UPDATE fence_t SET commits = commits + 1 WHERE sweeps = 1";
  const std::string moved = "UPDATE fence_t SET commits = commits + 1 WHERE sweeps = 0";
  const std::string said =
      ": a gc sweep deleted packs since the version's blobs were checked (the lock between them "
      "was lost: its database connection ended); nothing was written: retry, which checks the "
      "blobs again";
  const Digest d = MakeDigest("abcd01", 0x11);
  CommitRequest req;
  req.ns = "w";
  req.volume = "v";
  req.digest = d;
  req.store_fence = moved;
  auto r = (*reg)->Commit(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().message(), "commit" + said);
  EXPECT_EQ((*reg)->GetVersion("w", "v", d).error().code(), StatusCode::kNotFound);
  req.store_fence = passes;
  ASSERT_TRUE((*reg)->Commit(req));
  EXPECT_EQ(commits(), 1);

  ASSERT_TRUE((*reg)->DeleteVersions("w", "v", d, std::nullopt));
  auto restored = (*reg)->RestoreVersion("w", "v", d, std::nullopt, "", moved);
  ASSERT_FALSE(restored);
  EXPECT_EQ(restored.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(restored.error().message(), "restore" + said);
  EXPECT_EQ((*reg)->GetVersion("w", "v", d)->lifecycle, Lifecycle::kDeleted);
  ASSERT_TRUE((*reg)->RestoreVersion("w", "v", d, std::nullopt, "", passes));
  EXPECT_EQ((*reg)->GetVersion("w", "v", d)->lifecycle, Lifecycle::kAlive);
  EXPECT_EQ(commits(), 2);
}

// A commit whose push claim moved on (a repeated claim request gave it a new id: a push from
// the same machine took over the claim of a process that died with this commit on its way) is
// refused inside the registry's transaction, where claims live in its database; one under the
// live claim is written.
TEST(RegistryPushClaim, ACommitUnderAClaimThatMovedOnWritesNothing) {
  testutil::PostgresBackend backend;
  const std::string why = backend.Prepare();
  if (!why.empty()) GTEST_SKIP() << why;
  auto pool = backend.Pool();
  ASSERT_TRUE(pool) << pool.error().message();
  PgPushClaims claims((*pool)->Use("push claims"), std::chrono::seconds(30));
  ASSERT_TRUE(claims.InRegistryDatabase());
  auto first = claims.Acquire("w", "v", "key bdn_aa", "push-1");
  ASSERT_TRUE(first) << first.error().message();
  auto taken_over = claims.Acquire("w", "v", "key bdn_aa", "push-1");
  ASSERT_TRUE(taken_over) << taken_over.error().message();
  auto reg = backend.OpenRegistry();
  ASSERT_TRUE(reg) << reg.error().message();
  CommitRequest req;
  req.ns = "w";
  req.volume = "v";
  req.digest = MakeDigest("abcd01", 0x11);
  req.check_push_claim = true;
  req.push_claim = *first;
  auto r = (*reg)->Commit(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
  EXPECT_EQ(
      r.error().message(),
      "volume bdn:w/v: push in progress (claimed by key bdn_aa, expires in 30 s); push again once "
      "it has ended");
  EXPECT_EQ((*reg)->GetVersion("w", "v", req.digest).error().code(), StatusCode::kNotFound);
  req.push_claim.reset();  // no claim at all while one is live: refused too
  EXPECT_EQ((*reg)->Commit(req).error().code(), StatusCode::kConflict);
  req.push_claim = *taken_over;
  auto ok = (*reg)->Commit(req);
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->sequence, 1);
}

}  // namespace
}  // namespace bdn
