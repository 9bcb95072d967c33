// Tests for RemoteSyncService against a fake origin: what the server sends about a job is checked
// before the CLI prints it.
#include "bdn/remote/remote_sync.h"

#include <gtest/gtest.h>

#include "bdn/api/sync_json.h"
#include "bdn/remote/fake_origin_test_util.h"

namespace bdn::remote {
namespace {

using nlohmann::json;
using testing::TestServer;

SyncJobRecord AJob(std::string id) {
  SyncJobRecord job;
  job.id = std::move(id);
  job.spec = {.source_uri = "hf://org/repo", .ns = "w", .volume = "v"};
  job.state = SyncState::kSyncing;
  return job;
}

// A server that answers every sync route with `jobs` (one job, or a list for GET /v1/sync/jobs).
class FakeSyncServer {
 public:
  explicit FakeSyncServer(std::string id) : job_(api::SyncJobToJson(AJob(std::move(id)))) {
    server_.http().Post("/v1/sync/jobs", [this](const httplib::Request&, httplib::Response& res) {
      json j = job_;
      j["created"] = true;
      res.set_content(j.dump(), "application/json");
    });
    server_.http().Get("/v1/sync/jobs", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"jobs", {job_}}};
      if (!truncated_.is_null()) j["truncated"] = truncated_;
      res.set_content(j.dump(), "application/json");
    });
    server_.http().Get(R"(/v1/sync/jobs/([a-z0-9_]+))",
                       [this](const httplib::Request&, httplib::Response& res) {
                         res.set_content(job_.dump(), "application/json");
                       });
    server_.http().Post(R"(/v1/sync/jobs/([a-z0-9_]+)/cancel)",
                        [this](const httplib::Request&, httplib::Response& res) {
                          res.set_content(job_.dump(), "application/json");
                        });
    server_.Start();
  }
  RemoteSyncService Connect() {
    auto c = http::HttpClient::Create({.base_url = server_.url()});
    return RemoteSyncService(std::shared_ptr<http::HttpClient>(std::move(*c)));
  }
  std::string url() const { return server_.url(); }
  // The "truncated" field of the job list (null: none sent, as by an origin from before it).
  void SetTruncated(json value) { truncated_ = std::move(value); }

 private:
  json job_;
  json truncated_;
  TestServer server_;
};

TEST(RemoteSync, AJobWithAGoodIdIsTakenAsSent) {
  FakeSyncServer server("sync_00ff");
  RemoteSyncService service = server.Connect();
  auto started = service.Start(AJob("").spec, sync::SecretUse::kAny);
  ASSERT_TRUE(started.has_value()) << started.error().message();
  EXPECT_EQ(started->job.id, "sync_00ff");
  EXPECT_TRUE(started->created);
  auto got = service.Get("sync_00ff");
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->id, "sync_00ff");
}

// Found by review: `sync start` printed the id the server sent as it was, so a hostile or broken
// origin could write terminal escapes (or a second line) to the user's terminal and scripts.
TEST(RemoteSync, AJobIdThatIsNotOneIsRefusedOnEveryRoute) {
  FakeSyncServer server("sync_1\x1b]0;owned\x07\nsync_2");
  RemoteSyncService service = server.Connect();
  const std::string want = "origin " + server.url() +
                           ": sent a sync job whose id \"sync_1\\x1b]0;owned\\x07\\nsync_2\" is "
                           "not a job id (sync_<hex>)";
  auto started = service.Start(AJob("").spec, sync::SecretUse::kAny);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().message(), want);
  auto got = service.Get("sync_1");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(), want);
  auto listed = service.List("", "");
  ASSERT_FALSE(listed.has_value());
  EXPECT_EQ(listed.error().message(), want);
  auto cancelled = service.Cancel("sync_1");
  ASSERT_FALSE(cancelled.has_value());
  EXPECT_EQ(cancelled.error().message(), want);
}

// The job list's "truncated": false when the origin sends none, as sent when it is true or
// false, and refused when it is anything else.
TEST(RemoteSync, AListSaysWhetherTheOriginCutIt) {
  FakeSyncServer server("sync_00ff");
  RemoteSyncService service = server.Connect();
  auto old_origin = service.List("", "");
  ASSERT_TRUE(old_origin.has_value()) << old_origin.error().message();
  EXPECT_EQ(old_origin->jobs.size(), 1u);
  EXPECT_FALSE(old_origin->truncated);
  for (bool cut : {true, false}) {
    server.SetTruncated(cut);
    auto listed = service.List("w", "");
    ASSERT_TRUE(listed.has_value()) << listed.error().message();
    EXPECT_EQ(listed->truncated, cut);
  }
  server.SetTruncated("yes");
  auto bad = service.List("", "");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(),
            "origin " + server.url() + ": GET /v1/sync/jobs: \"truncated\" is not true or false");
}

TEST(RemoteSync, AnIdFromTheUserThatIsNotOneIsRefusedBeforeAnyRequest) {
  FakeSyncServer server("sync_00ff");
  RemoteSyncService service = server.Connect();
  auto got = service.Get("../keys\n");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(), "sync job \"../keys\\n\": not a job id (sync_<hex>)");
}

}  // namespace
}  // namespace bdn::remote
