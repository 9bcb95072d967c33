// Tests for the JSON codec of sync jobs and secrets: a job survives a round trip with every field,
// derived fields (dest, version_ref) are written and not read, and malformed input fails naming
// the field.
#include "bdn/api/sync_json.h"

#include <gtest/gtest.h>

namespace bdn::api {
namespace {

using nlohmann::json;

SyncJobRecord AJob() {
  SyncJobRecord job;
  job.id = "sync_0123456789abcdef";
  job.spec = {.source_uri = "hf://org/repo@main",
              .ns = "w",
              .volume = "v",
              .tag = "prod",
              .includes = {"*.json", "*.safetensors"},
              .excludes = {"tmp/*"},
              .auth_secret_name = "hf",
              .retry_deadline_ms = 60'000};
  job.state = SyncState::kFailed;
  job.cancel_requested = true;
  job.source_revision = "abc123";
  job.listing_digest = Digest::Of(std::string_view("listing"));
  job.progress = {.objects_total = 3,
                  .objects_done = 2,
                  .bytes_total = 30,
                  .bytes_done = 20,
                  .bytes_fetched = 25,
                  .objects_left_out = 4};
  job.version = Digest::Of(std::string_view("version"));
  job.error_code = "source_not_found";
  job.error_message = "404 from the source";
  job.created_unix_ms = 1;
  job.updated_unix_ms = 2;
  job.started_unix_ms = 3;
  job.finished_unix_ms = 4;
  job.runs = 2;
  return job;
}

TEST(SyncJson, AJobRoundTripsWithEveryField) {
  const SyncJobRecord job = AJob();
  const json j = SyncJobToJson(job);
  EXPECT_EQ(j["dest"], "bdn:w/v:prod");
  EXPECT_EQ(j["version_ref"], "bdn:w/v@" + job.version->ToString());
  EXPECT_EQ(j["error"]["code"], "source_not_found");
  auto back = SyncJobFromJson(j);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(SyncJobToJson(*back), j);
  EXPECT_EQ(back->spec, job.spec);
  EXPECT_EQ(back->listing_digest, job.listing_digest);
  EXPECT_EQ(back->progress.bytes_fetched, 25u);
  EXPECT_EQ(back->progress.objects_left_out, 4u);
  EXPECT_EQ(back->runs, 2);
}

TEST(SyncJson, AJobWithoutErrorOrVersionWritesNulls) {
  SyncJobRecord job = AJob();
  job.error_code.clear();
  job.error_message.clear();
  job.version.reset();
  job.listing_digest.reset();
  const json j = SyncJobToJson(job);
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_TRUE(j["version"].is_null());
  EXPECT_TRUE(j["version_ref"].is_null());
  EXPECT_TRUE(j["listing_digest"].is_null());
  auto back = SyncJobFromJson(j);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(SyncJobToJson(*back), j);
}

// Found by fuzz/json_bodies_fuzz.cc once it covered the sync records: an error object with an
// empty code read as "no error", and "" read as a missing digest, so a client could show a job
// without the error the server reported. Each is refused, naming the field.
TEST(SyncJson, MalformedJobsFailNamingTheField) {
  const json good = SyncJobToJson(AJob());
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"error code empty", [](json& j) { j["error"]["code"] = ""; }, "error: code is empty"},
      {"error an empty object", [](json& j) { j["error"] = json::object(); }, "code: missing"},
      {"error a string", [](json& j) { j["error"] = "boom"; }, "error: not an object"},
      {"error without message", [](json& j) { j["error"].erase("message"); }, "message: missing"},
      {"listing digest empty", [](json& j) { j["listing_digest"] = ""; },
       "listing_digest: digest \"\": expected 64 hex characters, got 0"},
      {"version a number", [](json& j) { j["version"] = 5; }, "version: "},
      {"progress a list", [](json& j) { j["progress"] = json::array(); },
       "progress: not an object"},
      {"unknown state", [](json& j) { j["state"] = "DONE"; }, "state: "},
      {"runs a float", [](json& j) { j["runs"] = 1.5; }, "runs: not an integer"},
      {"source missing", [](json& j) { j.erase("source"); }, "source: missing"},
  };
  for (const auto& c : cases) {
    json j = good;
    c.edit(j);
    auto r = SyncJobFromJson(j);
    ASSERT_FALSE(r.has_value()) << c.name;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_TRUE(r.error().message().starts_with(c.message))
        << c.name << ": " << r.error().message();
  }
}

TEST(SyncJson, SecretInfoRoundTripsAndNeverCarriesAValue) {
  const SecretInfo info{
      .name = "hf", .created_unix_ms = 5, .updated_unix_ms = 6, .namespaces = {"a", "b"}};
  const json j = SecretInfoToJson(info);
  EXPECT_EQ(j, (json{{"name", "hf"},
                     {"created_unix_ms", 5},
                     {"updated_unix_ms", 6},
                     {"namespaces", {"a", "b"}}}));
  auto back = SecretInfoFromJson(j);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(SecretInfoToJson(*back), j);
  // A server from before secrets had namespaces lists none.
  auto old = SecretInfoFromJson(json{{"name", "hf"}});
  ASSERT_TRUE(old.has_value()) << old.error().message();
  EXPECT_TRUE(old->namespaces.empty());
}

TEST(SyncJson, SecretPutTakesAValueAndOptionalNamespaces) {
  auto put = SecretPutFromJson(json{{"value", "v"}, {"namespaces", {"b", "a"}}});
  ASSERT_TRUE(put.has_value()) << put.error().message();
  EXPECT_EQ(put->value, "v");
  EXPECT_EQ(put->namespaces, (std::vector<std::string>{"b", "a"}));
  put = SecretPutFromJson(json{{"value", "v"}});
  ASSERT_TRUE(put.has_value()) << put.error().message();
  EXPECT_TRUE(put->namespaces.empty());
  for (const json& bad : {json{{"namespaces", {"a"}}}, json{{"value", 1}}}) {
    auto r = SecretPutFromJson(bad);
    ASSERT_FALSE(r.has_value()) << bad.dump();
    EXPECT_EQ(r.error().message(), "value: missing (the secret, as a JSON string)");
  }
  auto r = SecretPutFromJson(json{{"value", "v"}, {"namespaces", "a"}});
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().message().starts_with("namespaces: ")) << r.error().message();
}

}  // namespace
}  // namespace bdn::api
