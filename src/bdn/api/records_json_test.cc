// Tests for the JSON codec of the API's records: every record survives a round trip, the shapes
// are those of docs/http-api.md, and malformed input fails with a message naming the field.
#include "bdn/api/records_json.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace bdn::api {
namespace {

using nlohmann::json;

Digest D(int i) { return Digest::Of("version " + std::to_string(i)); }

VersionRecord AVersion() {
  return {.ns = "w",
          .volume = "x",
          .digest = D(1),
          .sequence = 4,
          .lifecycle = Lifecycle::kDeleted,
          .created_unix_ms = 10,
          .deleted_unix_ms = 20,
          .delete_after_unix_ms = 30,
          .stats = {1, 2, 3, 4},
          .source_uri = "hf://a/b",
          .tags = {"prod"},
          .is_head = true};
}

VolumeRecord AVolume() {
  return {.ns = "w",
          .name = "x",
          .head = D(2),
          .sequence = 7,
          .tags = {{"a", D(3)}},
          .live_versions = 2,
          .deleted_versions = 1,
          .created_unix_ms = 5};
}

TEST(RecordsJson, RecordsRoundTrip) {
  VersionRecord v = AVersion();
  auto v2 = VersionFromJson(VersionToJson(v));
  ASSERT_TRUE(v2.has_value()) << v2.error().message();
  EXPECT_EQ(VersionToJson(*v2), VersionToJson(v));

  VolumeRecord vol = AVolume();
  auto vol2 = VolumeFromJson(VolumeToJson(vol));
  ASSERT_TRUE(vol2.has_value()) << vol2.error().message();
  EXPECT_EQ(VolumeToJson(*vol2), VolumeToJson(vol));

  VersionStats stats{1, 2, 3, 4};
  auto stats2 = StatsFromJson(StatsToJson(stats));
  ASSERT_TRUE(stats2.has_value()) << stats2.error().message();
  EXPECT_EQ(StatsToJson(*stats2), StatsToJson(stats));

  CommitResult r{.sequence = 9, .unchanged = false, .head_updated = true, .tags_applied = {"a"}};
  auto r2 = CommitResultFromJson(CommitResultToJson(r));
  ASSERT_TRUE(r2.has_value()) << r2.error().message();
  EXPECT_EQ(CommitResultToJson(*r2), CommitResultToJson(r));
}

TEST(RecordsJson, CommitRequestRoundTripsWithAndWithoutAClaim) {
  CommitRequest req{.ns = "w",
                    .volume = "x",
                    .digest = D(4),
                    .stats = {5, 6, 7, 8},
                    .source_uri = "file:///src",
                    .tags = {"prod", "v1"},
                    .expected_sequence = 3};
  for (std::optional<std::string> claim :
       {std::optional<std::string>("c1"), std::optional<std::string>()}) {
    std::optional<std::string> got_claim = "stale";
    auto req2 = CommitRequestFromJson(CommitRequestToJson(req, claim), &got_claim);
    ASSERT_TRUE(req2.has_value()) << req2.error().message();
    EXPECT_EQ(got_claim, claim);
    EXPECT_EQ(req2->ns, "") << "ns and volume travel in the URL";
    EXPECT_EQ(req2->volume, "");
    EXPECT_EQ(CommitRequestToJson(*req2, claim), CommitRequestToJson(req, claim));
  }
}

TEST(RecordsJson, ShapesAreThoseOfTheApi) {
  VersionRecord v = AVersion();
  EXPECT_EQ(VersionToJson(v),
            json::parse(R"({"namespace": "w", "volume": "x", "digest": ")" + D(1).Hex() + R"(",
                "sequence": 4, "lifecycle": "DELETED", "created_unix_ms": 10,
                "deleted_unix_ms": 20, "delete_after_unix_ms": 30,
                "stats": {"files": 1, "bytes": 2, "chunks": 3, "entries": 4},
                "source_uri": "hf://a/b", "tags": ["prod"], "is_head": true})"));
  v.deleted_unix_ms.reset();
  v.delete_after_unix_ms.reset();
  EXPECT_FALSE(VersionToJson(v).contains("deleted_unix_ms")) << "absent, not null";
  EXPECT_FALSE(VersionToJson(v).contains("delete_after_unix_ms"));

  VolumeRecord vol = AVolume();
  EXPECT_EQ(VolumeToJson(vol)["head"], D(2).Hex()) << "digests are bare hex";
  EXPECT_EQ(VolumeToJson(vol)["tags"], json({{"a", D(3).Hex()}}));
  vol.head.reset();
  EXPECT_TRUE(VolumeToJson(vol)["head"].is_null());

  ApiKey k{.id = "ab12",
           .ns = "*",
           .scopes = {Scope::kPull, Scope::kAdmin},
           .created_unix_ms = 77,
           .revoked = true};
  EXPECT_EQ(KeyToJson(k), json::parse(R"({"id": "ab12", "namespace": "*",
      "scopes": ["pull", "admin"], "created_unix_ms": 77, "revoked": true})"));
}

TEST(RecordsJson, KeysRoundTripAndTheCreatedKeyCarriesItsToken) {
  ApiKey k{.id = "ab12",
           .ns = "weights",
           .scopes = {Scope::kPull, Scope::kPush},
           .created_unix_ms = 1700000000123,
           .revoked = false};
  auto back = KeyFromJson(KeyToJson(k));
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ(KeyToJson(*back), KeyToJson(k));
  json created = KeyToJson(k);
  created["token"] = "bdn_ab12_ff00";
  auto c = CreatedKeyFromJson(created);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->token, "bdn_ab12_ff00");
  EXPECT_EQ(c->key.ns, "weights");
  EXPECT_EQ(CreatedKeyFromJson(KeyToJson(k)).error().message(), "token: missing");
  json bad = KeyToJson(k);
  bad["scopes"] = {"pull", "write"};
  EXPECT_EQ(KeyFromJson(bad).error().message(),
            "scope \"write\": must be one of pull, push, tag, admin");
  bad = KeyToJson(k);
  bad.erase("revoked");
  EXPECT_FALSE(KeyFromJson(bad)->revoked) << "revoked defaults to false";
  bad.erase("id");
  EXPECT_EQ(KeyFromJson(bad).error().message(), "id: missing");
}

TEST(RecordsJson, OptionalFieldsTakeTheirDefaults) {
  auto vol = VolumeFromJson(json{{"namespace", "w"}, {"volume", "x"}, {"sequence", 1}});
  ASSERT_TRUE(vol.has_value()) << vol.error().message();
  EXPECT_FALSE(vol->head.has_value());
  EXPECT_TRUE(vol->tags.empty());
  EXPECT_EQ(vol->live_versions, 0u);

  auto req = CommitRequestFromJson(json{{"digest", D(1).Hex()}}, nullptr);
  ASSERT_TRUE(req.has_value()) << req.error().message();
  EXPECT_EQ(req->stats.files, 0u);
  EXPECT_FALSE(req->expected_sequence.has_value());

  auto r = CommitResultFromJson(json{{"sequence", 3}});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_FALSE(r->unchanged);
  EXPECT_TRUE(r->tags_applied.empty());
}

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r ? Status::Ok() : r.error();
}

// Each decoder reduced to its status, so that one table covers them all.
using Decoder = std::function<Status(const json&)>;
const Decoder kVersion = [](const json& j) { return StatusOf(VersionFromJson(j)); };
const Decoder kVolume = [](const json& j) { return StatusOf(VolumeFromJson(j)); };
const Decoder kCommitRequest = [](const json& j) {
  std::optional<std::string> claim;
  return StatusOf(CommitRequestFromJson(j, &claim));
};
const Decoder kCommitResult = [](const json& j) { return StatusOf(CommitResultFromJson(j)); };

// `edit` applied to a valid record's JSON.
json Edited(json j, const std::function<void(json&)>& edit) {
  edit(j);
  return j;
}

// A decoder, an input it must refuse, and the exact message.
struct Case {
  const char* what;
  Decoder decode;
  json input;
  std::string message;
};

void ExpectRefused(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    Status s = c.decode(c.input);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(s.message(), c.message) << c.what;
  }
}

TEST(RecordsJson, MalformedRecordsFailNamingTheField) {
  const json version = VersionToJson(AVersion());
  const json volume = VolumeToJson(AVolume());
  ExpectRefused({
      {"version without volume", kVersion, json{{"namespace", "w"}}, "volume: missing"},
      {"unknown lifecycle", kVersion, Edited(version, [](json& j) { j["lifecycle"] = "GONE"; }),
       "lifecycle: unknown value \"GONE\""},
      {"short digest", kVersion, Edited(version, [](json& j) { j["digest"] = "abc"; }),
       "digest: digest \"abc\": expected 64 hex characters, got 3"},
      {"version without stats", kVersion, Edited(version, [](json& j) { j.erase("stats"); }),
       "stats: missing"},
      {"stats without entries", kVersion,
       Edited(version, [](json& j) { j["stats"].erase("entries"); }), "entries: missing"},
      {"deleted time not an integer", kVersion,
       Edited(version, [](json& j) { j["deleted_unix_ms"] = "soon"; }),
       "deleted_unix_ms: not an integer"},
      {"volume not an object", kVolume, json::array(), "namespace: parent is not an object"},
      {"volume tags a list", kVolume, Edited(volume, [](json& j) { j["tags"] = json::array(); }),
       "tags: not an object"},
      {"bad tag digest", kVolume, Edited(volume, [](json& j) { j["tags"]["a"] = "zz"; }),
       "a: digest \"zz\": expected 64 hex characters, got 2"},
      {"bad head", kVolume, Edited(volume, [](json& j) { j["head"] = "xyz"; }),
       "head: digest \"xyz\": expected 64 hex characters, got 3"},
      {"commit without digest", kCommitRequest, json::object(), "digest: missing"},
      {"expected sequence a string", kCommitRequest,
       json{{"digest", D(1).Hex()}, {"expected_sequence", "7"}},
       "expected_sequence: not an integer"},
      {"commit result without sequence", kCommitResult, json::object(), "sequence: missing"},
  });
}

// Found by fuzz/json_bodies_fuzz.cc (input fuzz/corpus/json_bodies/crash-sequence-wraps): a
// commit result's sequence of 2^64-1 was read as -1; a float was cast (1e300: undefined
// behaviour), so a client could act on a number the server never sent.
TEST(RecordsJson, NumbersAreIntegersTheirFieldHoldsNeverCastOrWrapped) {
  const json version = VersionToJson(AVersion());
  const json volume = VolumeToJson(AVolume());
  ExpectRefused({
      {"sequence past int64", kCommitResult, json{{"sequence", 18446744073709551615ull}},
       "sequence: 18446744073709551615 is out of range"},
      {"sequence a float", kCommitResult, json{{"sequence", 1e300}}, "sequence: not an integer"},
      {"sequence a fraction", kCommitResult, json{{"sequence", 2.5}}, "sequence: not an integer"},
      {"negative file count", kVersion, Edited(version, [](json& j) { j["stats"]["files"] = -1; }),
       "files: -1 is out of range"},
      {"bytes a float", kVersion, Edited(version, [](json& j) { j["stats"]["bytes"] = 1e300; }),
       "bytes: not an integer"},
      {"deleted time past int64", kVersion,
       Edited(version, [](json& j) { j["deleted_unix_ms"] = 9223372036854775808ull; }),
       "deleted_unix_ms: 9223372036854775808 is out of range"},
      {"live versions negative", kVolume, Edited(volume, [](json& j) { j["live_versions"] = -5; }),
       "live_versions: -5 is out of range"},
      {"expected sequence past int64", kCommitRequest,
       json{{"digest", D(1).Hex()}, {"expected_sequence", 18446744073709551615ull}},
       "expected_sequence: 18446744073709551615 is out of range"},
  });
  // The extremes that fit are kept exactly.
  auto r = CommitResultFromJson(json{{"sequence", INT64_MAX}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence, INT64_MAX);
  json stats = StatsToJson({.files = UINT64_MAX, .bytes = 0, .chunks = 1, .entries = 2});
  auto s = StatsFromJson(stats);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->files, UINT64_MAX);
}

// Found by fuzz/json_bodies_fuzz.cc in CI (input fuzz/corpus/json_bodies/crash-stats-array): a
// commit request whose "stats" was [] committed as if it had no stats. A field that holds an
// object is refused when it holds anything else, in every record.
TEST(RecordsJson, AnObjectFieldHoldingAnythingElseIsRefused) {
  const json version = VersionToJson(AVersion());
  const json commit{{"digest", D(1).Hex()}};
  ExpectRefused({
      {"commit stats empty list", kCommitRequest,
       Edited(commit, [](json& j) { j["stats"] = json::array(); }), "stats: not an object"},
      {"commit stats a string", kCommitRequest, Edited(commit, [](json& j) { j["stats"] = ""; }),
       "stats: not an object"},
      {"commit stats a number", kCommitRequest, Edited(commit, [](json& j) { j["stats"] = 0; }),
       "stats: not an object"},
      {"version stats a list", kVersion,
       Edited(version, [](json& j) { j["stats"] = json::array(); }), "stats: not an object"},
  });
  // A null or missing optional object reads as its default.
  auto r = CommitRequestFromJson(Edited(commit, [](json& j) { j["stats"] = nullptr; }), nullptr);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->stats.files, 0u);
}

TEST(RecordsJson, AWrongTypeNamesTheField) {
  json j = VersionToJson(AVersion());
  j["sequence"] = "four";
  Status s = kVersion(j);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.message().starts_with("sequence: ")) << s.message();
}

}  // namespace
}  // namespace bdn::api
