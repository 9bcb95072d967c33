// Tests for RemoteRegistry, against a fake origin whose registry endpoints forward to a real
// SqliteRegistry: records round-trip through the API, errors arrive verbatim, and push claims are
// renewed, released, and refuse a second pusher. The JSON codec itself: api/records_json_test.cc.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "bdn/api/records_json.h"
#include "bdn/base/mutex.h"
#include "bdn/remote/fake_origin_test_util.h"
#include "bdn/remote/remote_registry.h"

namespace bdn::remote {
namespace {

using namespace std::chrono_literals;
using api::CommitRequestFromJson;
using api::CommitResultToJson;
using api::VersionToJson;
using api::VolumeToJson;
using nlohmann::json;
using testing::SendError;
using testing::TestServer;
namespace fs = std::filesystem;

// The registry routes of docs/http-api.md over a SqliteRegistry, with in-memory claims.
class FakeRegistryServer {
 public:
  std::atomic<int> renewals{0}, releases{0}, claim_posts{0}, claim_conflicts{0};
  std::atomic<int> ttl_ms{30000};
  std::string last_commit_claim;
  // Writes (commit, tag set) to apply and then answer with a 503, as if the answer were lost.
  std::atomic<int> lose_write_answers{0};
  std::atomic<int> writes{0};
  std::vector<std::string> write_keys;  // the Idempotency-Key of each write, in order

  FakeRegistryServer() {
    std::string t = (fs::temp_directory_path() / "bdn_remote_registry_test.XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    registry_ = std::move(*SqliteRegistry::Open(dir_ / "registry.db"));
    Install();
    server_.Start();
  }
  ~FakeRegistryServer() {
    server_.Stop();
    fs::remove_all(dir_);
  }
  std::string url() const { return server_.url(); }
  SqliteRegistry& registry() { return *registry_; }
  // The id of the last claim renewal (whether the claim was known or not).
  std::string LastRenewed() {
    MutexLock lock(mu_);
    return last_renewed_;
  }
  // Forgets every claim, as if they had expired.
  void ExpireClaims() {
    MutexLock lock(mu_);
    claims_.clear();
  }
  // Lets the claim on ns/vol lapse and another client take the volume, in one step.
  void GiveClaimToAnother(const std::string& ns_vol) {
    MutexLock lock(mu_);
    claims_[ns_vol] = "other";
  }

 private:
  template <typename T, typename F>
  static void Answer(httplib::Response& res, const Result<T>& r, F to_json, int status = 200) {
    if (!r) return SendError(res, r.error());
    res.status = status;
    res.set_content(to_json(*r).dump(), "application/json");
  }

  void Install() {
    auto& s = server_.http();
    const std::string vol = R"(/v1/volumes/([a-z0-9._-]+)/([a-z0-9._-]+))";
    s.Get("/v1/namespaces", [this](const httplib::Request&, httplib::Response& res) {
      Answer(res, registry_->ListNamespaces(), [](const auto& v) {
        return json{{"namespaces", v}};
      });
    });
    s.Get(R"(/v1/namespaces/([a-z0-9._-]+)/volumes)",
          [this](const httplib::Request& req, httplib::Response& res) {
            Answer(res, registry_->ListVolumes(req.matches[1]), [](const auto& v) {
              json a = json::array();
              for (const auto& x : v) a.push_back(VolumeToJson(x));
              return json{{"volumes", a}};
            });
          });
    s.Get(vol, [this](const httplib::Request& req, httplib::Response& res) {
      Answer(res, registry_->GetVolume(req.matches[1], req.matches[2]), VolumeToJson);
    });
    s.Get(vol + "/versions", [this](const httplib::Request& req, httplib::Response& res) {
      bool deleted = req.get_param_value("include_deleted") == "1";
      Answer(res, registry_->ListVersions(req.matches[1], req.matches[2], deleted),
             [](const auto& v) {
               json a = json::array();
               for (const auto& x : v) a.push_back(VersionToJson(x));
               return json{{"versions", a}};
             });
    });
    s.Get(vol + "/versions/([0-9a-f]{64})",
          [this](const httplib::Request& req, httplib::Response& res) {
            Answer(res,
                   registry_->GetVersion(req.matches[1], req.matches[2],
                                         *Digest::Parse(req.matches[3].str())),
                   VersionToJson);
          });
    s.Get(vol + "/find", [this](const httplib::Request& req, httplib::Response& res) {
      Answer(res,
             registry_->FindVersions(req.matches[1], req.matches[2], req.get_param_value("prefix")),
             [](const auto& v) {
               json a = json::array();
               for (const auto& d : v) a.push_back(d.Hex());
               return json{{"digests", a}};
             });
    });
    s.Post(vol + "/commit", [this](const httplib::Request& req, httplib::Response& res) {
      std::optional<std::string> claim;
      auto cr = CommitRequestFromJson(json::parse(req.body), &claim);
      if (!cr) return SendError(res, cr.error());
      cr->ns = req.matches[1];
      cr->volume = req.matches[2];
      cr->idempotency_key = req.get_header_value("Idempotency-Key");
      {
        MutexLock lock(mu_);
        last_commit_claim = claim.value_or("");
        write_keys.push_back(cr->idempotency_key);
        auto it = claims_.find(cr->ns + "/" + cr->volume);
        if (it != claims_.end() && it->second != claim.value_or("")) {
          return SendError(
              res, ConflictError("volume bdn:" + cr->ns + "/" + cr->volume + ": push in progress"));
        }
      }
      ++writes;
      auto result = registry_->Commit(*cr);
      if (LoseAnswer()) return SendError(res, UnavailableError("fake: answer lost"));
      Answer(res, result, CommitResultToJson);
    });
    s.Put(vol + "/tags/([A-Za-z0-9_.-]+)", [this](const httplib::Request& req,
                                                  httplib::Response& res) {
      json in = json::parse(req.body);
      std::optional<int64_t> expected;
      if (!in["expected_sequence"].is_null()) expected = in["expected_sequence"].get<int64_t>();
      std::string key = req.get_header_value("Idempotency-Key");
      {
        MutexLock lock(mu_);
        write_keys.push_back(key);
      }
      ++writes;
      auto seq = registry_->SetTag(req.matches[1], req.matches[2], req.matches[3],
                                   *Digest::Parse(in["digest"].get<std::string>()), expected, key);
      if (LoseAnswer()) return SendError(res, UnavailableError("fake: answer lost"));
      Answer(res, seq, [](int64_t s) { return json{{"sequence", s}}; });
    });
    s.Delete(vol + "/tags/([A-Za-z0-9_.-]+)", [this](const httplib::Request& req,
                                                     httplib::Response& res) {
      std::optional<int64_t> expected;
      if (req.has_param("expected_sequence"))
        expected = std::stoll(req.get_param_value("expected_sequence"));
      Answer(res, registry_->DeleteTag(req.matches[1], req.matches[2], req.matches[3], expected),
             [](int64_t seq) {
               return json{{"sequence", seq}};
             });
    });
    s.Post(vol + "/claims", [this](const httplib::Request& req, httplib::Response& res) {
      std::string key = req.matches[1].str() + "/" + req.matches[2].str();
      MutexLock lock(mu_);
      ++claim_posts;
      if (claims_.contains(key)) {
        ++claim_conflicts;
        return SendError(
            res, ConflictError("volume bdn:" + key +
                               ": push in progress (claimed by key bdn_test, expires in 30 s)"));
      }
      std::string id = "claim" + std::to_string(++next_claim_);
      claims_[key] = id;
      res.status = 201;
      res.set_content(json{{"claim", id}, {"ttl_ms", ttl_ms.load()}}.dump(), "application/json");
    });
    s.Put(vol + "/claims/([a-z0-9]+)", [this](const httplib::Request& req, httplib::Response& res) {
      ++renewals;
      MutexLock lock(mu_);
      last_renewed_ = req.matches[3];
      auto it = claims_.find(req.matches[1].str() + "/" + req.matches[2].str());
      if (it == claims_.end() || it->second != req.matches[3]) {
        return SendError(res, NotFoundError("claim " + req.matches[3].str() + ": not found"));
      }
      res.set_content("{}", "application/json");
    });
    s.Delete(vol + "/claims/([a-z0-9]+)",
             [this](const httplib::Request& req, httplib::Response& res) {
               ++releases;
               MutexLock lock(mu_);
               auto it = claims_.find(req.matches[1].str() + "/" + req.matches[2].str());
               if (it != claims_.end() && it->second == req.matches[3]) claims_.erase(it);
               res.set_content("{}", "application/json");
             });
  }

  // Whether to answer the write just applied with a 503 instead (its answer is "lost").
  bool LoseAnswer() {
    if (lose_write_answers.fetch_sub(1) > 0) return true;
    ++lose_write_answers;
    return false;
  }

  fs::path dir_;
  std::unique_ptr<SqliteRegistry> registry_;
  TestServer server_;
  Mutex mu_;
  std::map<std::string, std::string> claims_ GUARDED_BY(mu_);
  std::string last_renewed_ GUARDED_BY(mu_);
  int next_claim_ GUARDED_BY(mu_) = 0;
};

std::unique_ptr<RemoteRegistry> Connect(const std::string& url) {
  auto c = http::HttpClient::Create({.base_url = url});
  return std::make_unique<RemoteRegistry>(std::shared_ptr<http::HttpClient>(std::move(*c)));
}

Digest D(int i) { return Digest::Of("version " + std::to_string(i)); }

CommitRequest Req(int i, std::vector<std::string> tags = {}) {
  return {.ns = "weights",
          .volume = "qwen",
          .digest = D(i),
          .stats = {3, 300, 9, 5},
          .source_uri = "file:///src",
          .tags = std::move(tags)};
}

TEST(RemoteRegistry, CommitsAndReadsBackThroughTheApi) {
  FakeRegistryServer server;
  auto reg = Connect(server.url());
  auto c1 = reg->Commit(Req(1, {"prod"}));
  ASSERT_TRUE(c1.has_value()) << c1.error().message();
  EXPECT_TRUE(c1->head_updated);
  EXPECT_EQ(c1->tags_applied, std::vector<std::string>{"prod"});
  auto again = reg->Commit(Req(1));
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->unchanged);
  ASSERT_TRUE(reg->Commit(Req(2)).has_value());

  EXPECT_EQ(*reg->ListNamespaces(), std::vector<std::string>{"weights"});
  auto vols = reg->ListVolumes("weights");
  ASSERT_TRUE(vols.has_value());
  ASSERT_EQ(vols->size(), 1u);
  auto vol = reg->GetVolume("weights", "qwen");
  ASSERT_TRUE(vol.has_value());
  auto local = server.registry().GetVolume("weights", "qwen");
  EXPECT_EQ(VolumeToJson(*vol), VolumeToJson(*local));
  auto versions = reg->ListVersions("weights", "qwen", false);
  ASSERT_TRUE(versions.has_value());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].digest, D(2));
  EXPECT_TRUE((*versions)[0].is_head);
  auto v1 = reg->GetVersion("weights", "qwen", D(1));
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->tags, std::vector<std::string>{"prod"});
  EXPECT_EQ(v1->stats.chunks, 9u);
  auto found = reg->FindVersions("weights", "qwen", D(1).Hex().substr(0, 12));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, std::vector<Digest>{D(1)});

  auto seq = reg->SetTag("weights", "qwen", "candidate", D(2), std::nullopt);
  ASSERT_TRUE(seq.has_value()) << seq.error().message();
  auto del = reg->DeleteTag("weights", "qwen", "candidate", *seq);
  ASSERT_TRUE(del.has_value()) << del.error().message();
  EXPECT_GT(*del, *seq);
}

TEST(RemoteRegistry, ErrorsAreTheEmbeddedRegistrysVerbatim) {
  FakeRegistryServer server;
  auto reg = Connect(server.url());
  ASSERT_TRUE(reg->Commit(Req(1)).has_value());
  auto expect_same = [](const Status& remote, const Status& local) {
    EXPECT_EQ(remote.code(), local.code());
    EXPECT_EQ(remote.message(), local.message());
    EXPECT_FALSE(local.ok());
  };
  SqliteRegistry& local = server.registry();
  expect_same(reg->GetVolume("weights", "nope").error(),
              local.GetVolume("weights", "nope").error());
  expect_same(reg->ListVolumes("nope").error(), local.ListVolumes("nope").error());
  expect_same(reg->GetVersion("weights", "qwen", D(9)).error(),
              local.GetVersion("weights", "qwen", D(9)).error());
  expect_same(reg->SetTag("weights", "qwen", "t", D(1), 999).error(),
              local.SetTag("weights", "qwen", "t", D(1), 999).error());
  expect_same(reg->DeleteTag("weights", "qwen", "t", std::nullopt).error(),
              local.DeleteTag("weights", "qwen", "t", std::nullopt).error());
  expect_same(reg->SetTag("weights", "qwen", "head", D(1), std::nullopt).error(),
              local.SetTag("weights", "qwen", "head", D(1), std::nullopt).error());
}

TEST(RemoteRegistry, ClaimIsExclusiveRenewedSentWithCommitAndReleased) {
  FakeRegistryServer server;
  server.ttl_ms = 150;  // renew every 50 ms
  auto reg = Connect(server.url());
  auto other = Connect(server.url());
  {
    auto claim = reg->ClaimPush("weights", "qwen");
    ASSERT_TRUE(claim.has_value()) << claim.error().message();
    auto second = other->ClaimPush("weights", "qwen");
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code(), StatusCode::kConflict);
    EXPECT_TRUE(second.error().message().starts_with("volume bdn:weights/qwen: push in progress"));
    // Renewed in the background (every 50 ms): poll, since a loaded machine can delay the
    // renewer past any fixed sleep (a 300 ms sleep saw 1 renewal with the load average at 19).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (server.renewals < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_GE(server.renewals, 2);
    ASSERT_TRUE(reg->Commit(Req(1)).has_value());
    EXPECT_EQ(server.last_commit_claim, "claim1");
  }
  EXPECT_EQ(server.releases, 1);
  auto after = other->ClaimPush("weights", "qwen");
  EXPECT_TRUE(after.has_value()) << "released claims can be taken";
  after->reset();
  ASSERT_TRUE(reg->Commit(Req(2)).has_value());
  EXPECT_EQ(server.last_commit_claim, "") << "no claim held, none sent";
}

// Polls `done` every few ms for up to 5 s.
template <typename F>
bool WaitFor(F done) {
  for (auto end = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

TEST(RemoteRegistry, AClaimTheOriginForgotIsTakenAgainAndCommitSendsTheNewId) {
  // An origin that restarted (or let the claim lapse while it was unreachable) no longer knows
  // the claim: the pusher claims the volume again and carries on.
  FakeRegistryServer server;
  server.ttl_ms = 90;
  auto reg = Connect(server.url());
  auto claim = reg->ClaimPush("weights", "qwen");
  ASSERT_TRUE(claim.has_value());
  server.ExpireClaims();
  ASSERT_TRUE(WaitFor([&] { return server.LastRenewed() == "claim2"; }))
      << "the pusher claims the volume again and renews that claim";
  auto r = reg->Commit(Req(1));
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(server.last_commit_claim, "claim2");
  EXPECT_EQ(server.claim_conflicts, 0);
}

TEST(RemoteRegistry, AClaimLostToAnotherPusherFailsTheCommit) {
  FakeRegistryServer server;
  server.ttl_ms = 90;
  auto reg = Connect(server.url());
  auto claim = reg->ClaimPush("weights", "qwen");
  ASSERT_TRUE(claim.has_value());
  server.GiveClaimToAnother("weights/qwen");
  // The renewal thread handles one answer before it sends the next request: once the server has
  // refused a second re-claim, the client has recorded the first refusal (the claim is lost).
  ASSERT_TRUE(WaitFor([&] { return server.claim_conflicts >= 2; }))
      << "the first pusher tries to claim the volume again";
  auto r = reg->Commit(Req(1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
  EXPECT_EQ(r.error().message(),
            "volume bdn:weights/qwen: push claim lost (claim claim1: not found; volume "
            "bdn:weights/qwen: push in progress (claimed by key bdn_test, expires in 30 s))");
  EXPECT_EQ(server.registry().ListVolumes("weights").error().code(), StatusCode::kNotFound)
      << "nothing committed";
}

TEST(RemoteRegistry, AWriteWhoseAnswerIsLostIsRetriedWithItsKeyAndReportedOnce) {
  FakeRegistryServer server;
  auto reg = Connect(server.url());
  ASSERT_TRUE(reg->Commit(Req(1)).has_value());
  server.lose_write_answers = 1;
  CommitRequest req = Req(2, {"prod"});
  req.expected_sequence = 1;
  auto r = reg->Commit(req);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->sequence, 2);
  EXPECT_FALSE(r->unchanged);
  EXPECT_TRUE(r->head_updated);
  EXPECT_EQ(r->tags_applied, std::vector<std::string>{"prod"});
  EXPECT_EQ(server.writes, 3);
  ASSERT_EQ(server.write_keys.size(), 3u);
  EXPECT_EQ(server.write_keys[1].size(), 32u);
  EXPECT_EQ(server.write_keys[1], server.write_keys[2]) << "a retry sends the same key";
  EXPECT_NE(server.write_keys[0], server.write_keys[1]) << "each write has its own key";
  EXPECT_EQ(server.registry().ListVersions("weights", "qwen", false)->size(), 2u);

  server.lose_write_answers = 2;
  auto seq = reg->SetTag("weights", "qwen", "stable", D(1), 2);
  ASSERT_TRUE(seq.has_value()) << seq.error().message();
  EXPECT_EQ(*seq, 3);
  EXPECT_EQ(server.writes, 6);
  EXPECT_EQ(server.registry().GetVolume("weights", "qwen")->sequence, 3);
}

}  // namespace
}  // namespace bdn::remote
