// Tests for the origin over real HTTP on 127.0.0.1: chunk upload/download/Range/ETag/batch,
// commit preconditions, tags, push claims, keys, and the authentication/scope table.
#include "bdn/origin/origin.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "bdn/base/mutex.h"
#include "bdn/origin/raw_http_test_util.h"
#include "bdn/origin/request_json.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/store/local_chunk_store.h"
#include "bdn/store/store_test_util.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/volume/push.h"

namespace bdn::origin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A MemChunkStore that remembers what was put, so a sealed version can be uploaded blob by blob.
class RecordingStore : public MemChunkStore {
 public:
  // The seal puts from several threads at once.
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    {
      MutexLock lock(mu_);
      blobs[id] = std::string(reinterpret_cast<const char*>(data.data()), data.size());
    }
    return MemChunkStore::Put(id, data);
  }
  std::map<Digest, std::string> blobs;  // read only once the seal has returned

 private:
  Mutex mu_;
};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// One record of a POST /v1/chunks/batch answer.
struct BatchRecord {
  Digest id;
  uint8_t status;
  std::string bytes;
};

// The records of a batch answer (BDNB framing); fails the test on bad framing.
std::vector<BatchRecord> DecodeBatch(const std::string& body) {
  std::vector<BatchRecord> records;
  EXPECT_GE(body.size(), 4u);
  if (body.size() < 4) return records;
  EXPECT_EQ(body.substr(0, 4), "BDNB");
  size_t pos = 4;
  while (pos < body.size()) {
    EXPECT_LE(pos + 37, body.size());
    if (pos + 37 > body.size()) break;
    std::array<uint8_t, 32> raw;
    std::memcpy(raw.data(), body.data() + pos, 32);
    uint8_t status = static_cast<uint8_t>(body[pos + 32]);
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i)
      len |= static_cast<uint32_t>(static_cast<uint8_t>(body[pos + 33 + i])) << (8 * i);
    pos += 37;
    EXPECT_LE(pos + len, body.size());
    if (pos + len > body.size()) break;
    records.push_back({Digest(raw), status, body.substr(pos, len)});
    pos += len;
  }
  return records;
}

// A version sealed, uploaded by the admin key and committed: its digest and blobs.
struct Published {
  Digest digest;
  std::map<Digest, std::string> blobs;
  std::string ref;  // "bdn:ns/vol@b3:…", a Bdn-Version value
  // A data chunk of the version (the first over 1000 bytes that is not its manifest).
  Digest data_chunk() const {
    for (const auto& [id, bytes] : blobs) {
      if (id != digest && bytes.size() > 1000) return id;
    }
    return Digest();
  }
};

class OriginTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(AuthMode::kRequired); }

  void StartServer(AuthMode mode, http::ServerOptions server_options = {},
                   std::function<void(OriginOptions&)> tweak = nullptr) {
    char tmpl[] = "/tmp/bdn-origin-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = LocalChunkStore::Open(dir_ / "store", LocalChunkStore::Durability::kNone);
    ASSERT_TRUE(store) << store.error().ToString();
    store_ = std::move(*store);
    auto registry = SqliteRegistry::Open(dir_ / "registry.db");
    ASSERT_TRUE(registry) << registry.error().ToString();
    auto keys = SqliteKeyStore::Open(dir_ / "registry.db");
    ASSERT_TRUE(keys) << keys.error().ToString();
    keys_ = std::move(*keys);
    auto admin = BootstrapAdminKey(*keys_, dir_ / "admin.token");
    ASSERT_TRUE(admin && admin->has_value());
    admin_ = **admin;

    OriginOptions options;
    options.auth = mode;
    options.claim_ttl = std::chrono::milliseconds(400);
    options.clock = clock_;  // claims expire only when a test moves it
    // Namespace views refreshed at every question, so a commit is seen by the next request.
    options.namespace_index.refresh_interval = std::chrono::milliseconds(0);
    if (tweak) tweak(options);
    registry_ = std::move(*registry);
    origin_ = std::make_unique<Origin>(options, store_, registry_, keys_);
    server_options.listen = "127.0.0.1:0";
    server_options.threads = 8;
    server_ = std::make_unique<http::Server>(server_options);
    origin_->Register(*server_);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    // httplib's default 5 s read timeout is shorter than a commit's fdatasyncs can take on a
    // loaded machine (a failed Call reads as a wrong status, not as a timeout).
    client_->set_read_timeout(std::chrono::seconds(120));
  }

  void TearDown() override {
    client_.reset();
    if (server_) server_->Stop();
    server_.reset();
    origin_.reset();
    registry_.reset();
    keys_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  static httplib::Headers Auth(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
  }

  std::string Key(const std::string& ns, const std::string& scopes) {
    auto k = keys_->Create(ns, *ParseScopes(scopes));
    EXPECT_TRUE(k);
    return k->token;
  }

  // One request; `method` GET/POST/PUT/DELETE.
  httplib::Result Call(const std::string& method, const std::string& path, const std::string& token,
                       const std::string& body = "", httplib::Headers headers = {}) {
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    const char* type = "application/json";
    if (method == "GET") return client_->Get(path, headers);
    if (method == "POST") return client_->Post(path, headers, body, type);
    if (method == "PUT") {
      return client_->Put(path, headers, body,
                          path.starts_with("/v1/chunks/") ? "application/octet-stream" : type);
    }
    return client_->Delete(path, headers);
  }

  // Uploads every blob of `seal` (sealed_) but one data chunk, and returns that chunk's id.
  Digest UploadAllButOneDataChunk(const SealResult& seal) {
    Digest held_back;
    for (const auto& [id, bytes] : sealed_->blobs) {
      if (id != seal.digest && bytes.size() > 1000 && held_back == Digest()) {
        held_back = id;
        continue;
      }
      Upload(bytes);
    }
    return held_back;
  }

  void Upload(const std::string& bytes) {
    auto r = Call("PUT", "/v1/chunks/" + Digest::Of(bytes).Hex(), admin_, bytes);
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->status == 201 || r->status == 200) << r->status << " " << r->body;
  }

  // Seals a small tree (an empty file, a one-chunk file, a many-chunk file, a symlink) into a
  // client-side store and returns the seal; its blobs are in `sealed_`.
  SealResult Seal(uint32_t seed) {
    fs::path src = dir_ / ("src" + std::to_string(seed));
    fs::create_directories(src / "sub");
    std::ofstream(src / "empty");
    std::ofstream(src / "small.txt") << "hello " << seed;
    std::ofstream(src / "sub" / "big.bin", std::ios::binary) << RandomBytes(400 * 1024, seed);
    fs::create_symlink("small.txt", src / "link");
    sealed_ = std::make_unique<RecordingStore>();
    auto r = SealDirectory(src, SealOptions{}, *sealed_, nullptr);
    EXPECT_TRUE(r) << r.error().ToString();
    return *r;
  }

  // Seals tree `seed` (Seal), uploads its blobs with the admin key and commits it as
  // ns/`volume`.
  Published Publish(uint32_t seed, const std::string& ns, const std::string& volume = "model") {
    SealResult seal = Seal(seed);
    for (const auto& [id, bytes] : sealed_->blobs) Upload(bytes);
    auto r = Call("POST", "/v1/volumes/" + ns + "/" + volume + "/commit", admin_,
                  json{{"digest", seal.digest.Hex()}}.dump());
    EXPECT_EQ(r->status, 200) << r->body;
    return Published{seal.digest, sealed_->blobs,
                     "bdn:" + ns + "/" + volume + "@" + seal.digest.ToString()};
  }

  static json Body(const httplib::Result& r) { return json::parse(r->body); }

  fs::path dir_;
  std::shared_ptr<LocalChunkStore> store_;
  std::shared_ptr<SqliteKeyStore> keys_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<testutil::FakeClock> clock_ = std::make_shared<testutil::FakeClock>();
  std::unique_ptr<Origin> origin_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<httplib::Client> client_;
  std::unique_ptr<RecordingStore> sealed_;
  std::string admin_;
};

TEST_F(OriginTest, HealthzAndMetricsNeedNoAuth) {
  auto h = client_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "ok\n");
  Upload("some bytes");
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("bdn_http_requests_total{method=\"PUT\",route=\"/v1/chunks/{id}\","
                         "status=\"201\"} 1"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("bdn_chunk_bytes_received_total 10"), std::string::npos);
  EXPECT_NE(
      m->body.find("bdn_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"+Inf\"} 1"),
      std::string::npos);
  EXPECT_NE(m->body.find("# TYPE bdn_http_request_duration_seconds histogram"), std::string::npos);
}

// A resumed sync job waits out the claim its earlier run left live (its server killed), and takes
// a fresh one once it lapses; it never shares a live claim, and another job or a push conflicts
// at once. A stop ends the wait.
TEST_F(OriginTest, SyncClaimWaitsOutItsOwnJobsLeftoverClaimOnly) {
  auto left = origin_->claims().Acquire("w", "v", "sync job sync_1");
  ASSERT_TRUE(left) << left.error().ToString();
  auto other = origin_->ClaimForSync("w", "v", "sync_2");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message(),
            "volume bdn:w/v: push in progress (claimed by sync job sync_1, expires in 1 s); push "
            "again once it has ended");
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  Result<std::unique_ptr<PushClaim>> resumed = Err(InternalError("not run"));
  std::thread run([&] {
    resumed = origin_->ClaimForSync("w", "v", "sync_1", &stop);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done.load()) << "took the claim its earlier run left live";
  clock_->Advance(std::chrono::milliseconds(400));  // the leftover lapses
  run.join();
  ASSERT_TRUE(resumed) << resumed.error().ToString();
  // Its own claim, a new one: the leftover's id no longer commits.
  EXPECT_EQ(origin_->claims().CheckCommit("w", "v", *left).code(), StatusCode::kConflict);
  resumed->reset();

  // A stop while it waits ends the wait with the conflict.
  left = origin_->claims().Acquire("w", "v", "sync job sync_1");
  ASSERT_TRUE(left) << left.error().ToString();
  stop = true;
  auto stopped = origin_->ClaimForSync("w", "v", "sync_1", &stop);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code(), StatusCode::kConflict);
}

TEST_F(OriginTest, UploadVerifiesBytesAndNeverStoresBadOnes) {
  std::string good = "chunk payload";
  Digest id = Digest::Of(good);
  auto r = Call("PUT", "/v1/chunks/" + id.Hex(), admin_, good);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(Body(r)["stored"], true);
  r = Call("PUT", "/v1/chunks/" + id.Hex(), admin_, good);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["stored"], false);

  std::string claimed = "what the client says";
  Digest claimed_id = Digest::Of(claimed);
  r = Call("PUT", "/v1/chunks/" + claimed_id.Hex(), admin_, "other bytes");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(Body(r)["error"]["code"], "corruption");
  EXPECT_EQ(Body(r)["error"]["message"], "chunk " + claimed_id.ToString() +
                                             ": received bytes hash to " +
                                             Digest::Of("other bytes").ToString());
  EXPECT_FALSE(*store_->Contains(claimed_id));
  EXPECT_FALSE(store_->Locate(claimed_id)->has_value());
  EXPECT_FALSE(*store_->Contains(Digest::Of("other bytes")));

  r = Call("PUT", "/v1/chunks/xyz", admin_, good);
  EXPECT_EQ(r->status, 400);
}

// A POST /v1/chunks/upload body: "BDNU", the count, (id, length) per blob, then the bytes. `ids`
// overrides the id of a blob where given (a body whose bytes do not match).
std::string UploadBody(const std::vector<std::string>& blobs, std::vector<Digest> ids = {}) {
  auto u32 = [](uint64_t v) {
    std::string out(4, '\0');
    for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
    return out;
  };
  std::string body = "BDNU" + u32(blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    const Digest id = i < ids.size() ? ids[i] : Digest::Of(blobs[i]);
    body.append(reinterpret_cast<const char*>(id.data()), Digest::kSize);
    body += u32(blobs[i].size());
  }
  for (const std::string& b : blobs) body += b;
  return body;
}

TEST_F(OriginTest, UploadBatchStoresEveryBlobVerified) {
  const std::vector<std::string> blobs = {"", RandomBytes(300 * 1024, 1), "small", "small",
                                          RandomBytes(70000, 2)};
  auto r = Call("POST", "/v1/chunks/upload", admin_, UploadBody(blobs));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const uint64_t total = 300 * 1024 + 5 + 5 + 70000;
  EXPECT_EQ(Body(r), json({{"blobs", 5}, {"size_bytes", total}}));
  for (const std::string& b : blobs) {
    auto got = store_->Get(Digest::Of(b));
    ASSERT_TRUE(got) << got.error().ToString();
    EXPECT_EQ(std::string(got->begin(), got->end()), b);
  }
  // Again: nothing new, the same answer (blobs are content-addressed; a retry is harmless).
  r = Call("POST", "/v1/chunks/upload", admin_, UploadBody(blobs));
  EXPECT_EQ(r->status, 200);
  // No blobs at all.
  r = Call("POST", "/v1/chunks/upload", admin_, UploadBody({}));
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r), json({{"blobs", 0}, {"size_bytes", 0}}));
  auto m = client_->Get("/metrics");
  EXPECT_NE(m->body.find("bdn_chunks_received_total 10\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("bdn_chunk_bytes_received_total " + std::to_string(2 * total) + "\n"),
            std::string::npos);
  // A pull key may not upload; nothing is read from the body.
  r = Call("POST", "/v1/chunks/upload", Key("*", "pull"), UploadBody({"x"}));
  EXPECT_EQ(r->status, 403);
  EXPECT_FALSE(*store_->Contains(Digest::Of("x")));
}

TEST_F(OriginTest, UploadBatchRefusesBadFramingAndStoresNoBadBlob) {
  auto expect = [&](const std::string& body, int status, const std::string& message) {
    auto r = Call("POST", "/v1/chunks/upload", admin_, body);
    ASSERT_TRUE(r) << message;
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(Body(r)["error"]["message"], message) << r->body;
  };
  const std::string what = "POST /v1/chunks/upload: ";
  expect("", 400, what + "the body ends inside its table (0 bytes)");
  expect(std::string("BDNB\x01\0\0\0", 8), 400, what + "the body does not start with BDNU");
  expect(std::string("BDNU\x01\x04\0\0", 8), 400, what + "1025 blobs, at most 1024 per request");
  expect(std::string("BDNU\xff\xff\xff\xff", 8), 400,
         what + "4294967295 blobs, at most 1024 per request");
  const std::string a = RandomBytes(5000, 3), b = RandomBytes(6000, 4), c = RandomBytes(7000, 5);
  const std::string full = UploadBody({a, b});
  // Cut inside the table, then inside blob 1.
  expect(full.substr(0, 20), 400, what + "the body ends inside its table (20 bytes)");
  expect(full.substr(0, full.size() - 10), 400,
         what + "the body ends inside blob 1 (chunk " + Digest::Of(b).ToString() +
             ", 5990 of 6000 bytes)");
  EXPECT_TRUE(*store_->Contains(Digest::Of(a))) << "blob 0 was whole and verified";
  EXPECT_FALSE(*store_->Contains(Digest::Of(b)));
  expect(full + "x", 400, what + "the body goes on after the table's last blob");
  EXPECT_TRUE(*store_->Contains(Digest::Of(b))) << "both blobs were whole and verified";
  // A blob over the largest a blob may be, and a table adding up to more than the body limit.
  std::string big = UploadBody({"x"});
  big[8 + 32] = '\0';
  big[8 + 33] = '\0';
  big[8 + 34] = '\0';
  big[8 + 35] = '\x05';  // 80 MiB
  expect(big, 400,
         what + "blob 0 (chunk " + Digest::Of("x").ToString() + ") is 83886080 bytes, at most " +
             std::to_string(64 << 20));
  std::string two = UploadBody({"x", "y"});
  two[8 + 35] = '\x04';       // 64 MiB + 1
  two[8 + 36 + 35] = '\x04';  // and 64 MiB + 1
  two[8 + 32] = two[8 + 36 + 32] = '\0';
  two[8 + 33] = two[8 + 36 + 33] = '\0';
  two[8 + 34] = two[8 + 36 + 34] = '\0';
  expect(two, 400,
         what + "the table's blobs make a body of " + std::to_string(8 + 72 + (2ull << 26)) +
             " bytes, larger than " + std::to_string(UploadBodyLimit(1024, 64 << 20)) + " bytes");
  // Blob 1's bytes are not its id's: 422 naming it; blob 0 is stored, blob 2 never read.
  const Digest claimed = Digest::Of("what the client says");
  expect(UploadBody({a, b, c}, {Digest::Of(a), claimed}), 422,
         "chunk " + claimed.ToString() + ": received bytes hash to " + Digest::Of(b).ToString());
  EXPECT_FALSE(*store_->Contains(claimed));
  EXPECT_FALSE(*store_->Contains(Digest::Of(c)));
  // The server answers the next request (the connection that sent the bad body was closed).
  auto r = Call("POST", "/v1/chunks/upload", admin_, UploadBody({c}));
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(*store_->Contains(Digest::Of(c)));
}

// A namespace key's batch upload makes the blobs its own, as PUTs do: its commit of a version
// whose blobs another namespace stored first passes once it has uploaded them.
TEST_F(OriginTest, UploadBatchOfANamespaceKeyRecordsItsUploads) {
  SealResult theirs = Seal(41);
  std::vector<std::string> blobs;
  for (const auto& [id, bytes] : sealed_->blobs) blobs.push_back(bytes);
  ASSERT_EQ(Call("POST", "/v1/chunks/upload", admin_, UploadBody(blobs))->status, 200);
  ASSERT_EQ(Call("POST", "/v1/volumes/b/model/commit", admin_,
                 json{{"digest", theirs.digest.Hex()}}.dump())
                ->status,
            200);
  const std::string push_a = Key("a", "push");
  const json commit = {{"digest", theirs.digest.Hex()}};
  EXPECT_EQ(Call("POST", "/v1/volumes/a/copy/commit", push_a, commit.dump())->status, 412);
  auto r = Call("POST", "/v1/chunks/upload", push_a, UploadBody(blobs));
  ASSERT_EQ(r->status, 200) << r->body;
  r = Call("POST", "/v1/volumes/a/copy/commit", push_a, commit.dump());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(OriginTest, MissingQueryAnswersInInputOrder) {
  std::string a = "a", b = "b", c = "c";
  Upload(b);
  json req = {{"ids", {Digest::Of(c).Hex(), Digest::Of(b).Hex(), Digest::Of(a).Hex()}}};
  auto r = Call("POST", "/v1/chunks/missing", admin_, req.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["missing"], json({Digest::Of(c).Hex(), Digest::Of(a).Hex()}));

  json too_many = {{"ids", json::array()}};
  for (int i = 0; i < 4097; ++i) too_many["ids"].push_back(Digest::Of(std::to_string(i)).Hex());
  r = Call("POST", "/v1/chunks/missing", admin_, too_many.dump());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"], "ids: 4097 ids, at most 4096 per request");
  r = Call("POST", "/v1/chunks/missing", admin_, "not json");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"], "request body: not valid JSON");
}

// The JSON parser skipped a UTF-8 byte order mark, so a body had two spellings; every JSON body
// of the API is refused with one, naming it.
TEST_F(OriginTest, JsonBodiesWithAByteOrderMarkAreRefused) {
  const std::string bom = "\xEF\xBB\xBF";
  const json ids = {{"ids", {Digest::Of(std::string_view("a")).Hex()}}};
  struct Case {
    std::string path;
    json body;
    int ok;  // the status without the mark
  };
  for (const Case& c : std::vector<Case>{
           {"/v1/chunks/missing", ids, 200},
           {"/v1/chunks/sizes", ids, 200},
           {"/v1/keys", {{"namespace", "a"}, {"scopes", {"pull"}}}, 201},
       }) {
    auto r = Call("POST", c.path, admin_, bom + c.body.dump());
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.path;
    EXPECT_EQ(r->body,
              R"({"error":{"code":"invalid_argument","message":"request body: starts with a )"
              R"(byte order mark (EF BB BF); send JSON without one"}})")
        << c.path;
    r = Call("POST", c.path, admin_, c.body.dump());
    EXPECT_EQ(r->status, c.ok) << c.path << ": " << r->body;
  }
}

TEST_F(OriginTest, SizesQueryAnswersStoredLengthsInInputOrder) {
  std::string a = "a", b = "bbbbbb";
  Upload(b);
  json req = {{"ids", {Digest::Of(b).Hex(), Digest::Of(a).Hex(), Digest::Of(b).Hex()}}};
  auto r = Call("POST", "/v1/chunks/sizes", admin_, req.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r), json::parse(R"({"sizes": [6, null, 6]})"));

  json too_many = {{"ids", json::array()}};
  for (int i = 0; i < 4097; ++i) too_many["ids"].push_back(Digest::Of(std::to_string(i)).Hex());
  r = Call("POST", "/v1/chunks/sizes", admin_, too_many.dump());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"], "ids: 4097 ids, at most 4096 per request");
}

TEST_F(OriginTest, DownloadWithRangeEtagAndCacheHeaders) {
  std::string bytes = "0123456789";
  Upload(bytes);
  std::string path = "/v1/chunks/" + Digest::Of(bytes).Hex();
  std::string etag = "\"" + Digest::Of(bytes).Hex() + "\"";

  auto r = Call("GET", path, admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, bytes);
  EXPECT_EQ(r->get_header_value("ETag"), etag);
  // What a request may read depends on its key: no shared cache may keep it for others.
  EXPECT_EQ(r->get_header_value("Cache-Control"), "private, max-age=31536000, immutable");
  EXPECT_EQ(r->get_header_value("Content-Length"), "10");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");

  struct Case {
    std::string range;
    int status;
    std::string body;
    std::string content_range;
  };
  for (const Case& c : std::vector<Case>{{"bytes=2-5", 206, "2345", "bytes 2-5/10"},
                                         {"bytes=7-", 206, "789", "bytes 7-9/10"},
                                         {"bytes=8-100", 206, "89", "bytes 8-9/10"},
                                         {"bytes=-3", 206, "789", "bytes 7-9/10"},
                                         {"bytes=0-0", 206, "0", "bytes 0-0/10"},
                                         {"bytes=10-12", 416, "", "bytes */10"},
                                         {"bytes=0-1,4-5", 200, "0123456789", ""}}) {
    r = Call("GET", path, admin_, "", {{"Range", c.range}});
    ASSERT_TRUE(r) << c.range;
    EXPECT_EQ(r->status, c.status) << c.range;
    EXPECT_EQ(r->get_header_value("Content-Range"), c.content_range) << c.range;
    if (c.status != 416) {
      EXPECT_EQ(r->body, c.body) << c.range;
    } else {
      EXPECT_EQ(Body(r)["error"]["code"], "invalid_argument") << c.range;
    }
  }

  r = Call("GET", path, admin_, "", {{"If-None-Match", etag}});
  EXPECT_EQ(r->status, 304);
  EXPECT_EQ(r->body, "");
  EXPECT_EQ(r->get_header_value("ETag"), etag);
  r = Call("GET", path, admin_, "", {{"If-None-Match", "\"other\""}});
  EXPECT_EQ(r->status, 200);

  Digest absent = Digest::Of("absent");
  r = Call("GET", "/v1/chunks/" + absent.Hex(), admin_);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(r->get_header_value("Cache-Control"), "");

  // A stored copy that went bad is never served.
  ASSERT_TRUE(FlipStoredByte(*store_, Digest::Of(bytes), 9).ok());
  r = Call("GET", path, admin_);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(r->body.find("0123456780"), std::string::npos);
}

// Issue 7 item 10 and issue 14 item 7: Range per RFC 9110.
TEST_F(OriginTest, RangePerRfc9110) {
  std::string bytes = "0123456789";
  Upload(bytes);
  std::string path = "/v1/chunks/" + Digest::Of(bytes).Hex();
  std::string etag = "\"" + Digest::Of(bytes).Hex() + "\"";
  struct Case {
    httplib::Headers headers;
    int status;
    std::string body;
    std::string content_range;
  };
  std::vector<Case> cases = {
      // An unknown unit is ignored: the whole body.
      {{{"Range", "items=0-1"}}, 200, bytes, ""},
      // The unit is case-insensitive.
      {{{"Range", "Bytes=2-5"}}, 206, "2345", "bytes 2-5/10"},
      // A last byte past the end, up to 2^64-1, means "to the end".
      {{{"Range", "bytes=0-18446744073709551615"}}, 206, bytes, "bytes 0-9/10"},
      {{{"Range", "bytes=4-99999999999999999999999"}}, 206, "456789", "bytes 4-9/10"},
      // If-Range with the chunk's ETag applies the Range; any other validator ignores it.
      {{{"Range", "bytes=2-3"}, {"If-Range", etag}}, 206, "23", "bytes 2-3/10"},
      {{{"Range", "bytes=2-3"}, {"If-Range", "\"other\""}}, 200, bytes, ""},
      {{{"Range", "bytes=2-3"}, {"If-Range", "W/" + etag}}, 200, bytes, ""},
      {{{"Range", "bytes=2-3"}, {"If-Range", "Tue, 15 Nov 1994 08:12:31 GMT"}}, 200, bytes, ""},
      // A malformed or invalid Range, or several ranges, is ignored: the whole body.
      {{{"Range", "bytes=a-b"}}, 200, bytes, ""},
      {{{"Range", "bytes=5-2"}}, 200, bytes, ""},
      {{{"Range", "bytes"}}, 200, bytes, ""},
      {{{"Range", "bytes=0-1,4-5"}}, 200, bytes, ""},
      {{{"Range", "bytes=0-1,20-30"}}, 200, bytes, ""},
      // 416 only when unsatisfiable, with the size.
      {{{"Range", "bytes=10-"}}, 416, "", "bytes */10"},
      {{{"Range", "bytes=10-20,-0"}}, 416, "", "bytes */10"},
      {{{"Range", "bytes=99999999999999999999-"}}, 416, "", "bytes */10"},
  };
  for (const Case& c : cases) {
    std::string what = c.headers.begin()->second +
                       (c.headers.size() > 1 ? " + If-Range " + c.headers.rbegin()->second : "");
    auto r = Call("GET", path, admin_, "", c.headers);
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, c.status) << what;
    EXPECT_EQ(r->get_header_value("Content-Range"), c.content_range) << what;
    if (c.status == 416) {
      EXPECT_EQ(Body(r)["error"]["code"], "invalid_argument") << what;
    } else {
      EXPECT_EQ(r->body, c.body) << what;
    }
  }
}

TEST_F(OriginTest, BatchDownloadFraming) {
  std::string a = "first chunk", b = RandomBytes(300000, 7);
  Upload(a);
  Upload(b);
  Digest missing = Digest::Of("never uploaded");
  json req = {
      {"ids", {Digest::Of(a).Hex(), missing.Hex(), Digest::Of(b).Hex(), Digest::Of(a).Hex()}}};
  auto r = Call("POST", "/v1/chunks/batch", admin_, req.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
  std::vector<BatchRecord> records = DecodeBatch(r->body);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].id, Digest::Of(a));
  EXPECT_EQ(records[0].status, 0);
  EXPECT_EQ(records[0].bytes, a);
  EXPECT_EQ(records[1].id, missing);
  EXPECT_EQ(records[1].status, 1);
  EXPECT_EQ(records[1].bytes, "");
  EXPECT_EQ(records[2].bytes, b);
  EXPECT_EQ(records[3].bytes, a);

  json too_many = {{"ids", json::array()}};
  for (int i = 0; i < 1025; ++i) too_many["ids"].push_back(missing.Hex());
  EXPECT_EQ(Call("POST", "/v1/chunks/batch", admin_, too_many.dump())->status, 400);
}

TEST_F(OriginTest, ACommitMissingBlobsChecksAgainForCommitWaitBeforeAnswering412) {
  TearDown();
  StartServer(AuthMode::kRequired, {}, [](OriginOptions& o) {
    o.commit_wait = std::chrono::milliseconds(3000);
    o.commit_recheck_pause = std::chrono::milliseconds(250);
  });
  SealResult seal = Seal(2);
  const Digest held_back = UploadAllButOneDataChunk(seal);
  ASSERT_NE(held_back, Digest());
  const std::string path = "/v1/volumes/weights/model/commit";
  const std::string commit = json{{"digest", seal.digest.Hex()}}.dump();
  const int sleeps_before = clock_->sleeps();
  auto r = Call("POST", path, admin_, commit);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 412);
  EXPECT_EQ(Body(r)["error"]["message"], "version " + seal.digest.ToString() + ": chunk " +
                                             held_back.ToString() + " is not stored");
  // Checked again every 250 ms for 3 s (the fake clock's sleeps), then refused.
  const auto slept = clock_->sleep_durations();
  std::chrono::nanoseconds waited{0};
  for (size_t i = static_cast<size_t>(sleeps_before); i < slept.size(); ++i) waited += slept[i];
  EXPECT_EQ(clock_->sleeps() - sleeps_before, 12);
  EXPECT_EQ(waited, std::chrono::milliseconds(3000));
  // Once the blob is stored, the commit passes without waiting.
  Upload(sealed_->blobs[held_back]);
  r = Call("POST", path, admin_, commit);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(clock_->sleeps() - sleeps_before, 12);
}

// A commit that waited for its blobs while its claim moved on is refused once they are there,
// instead of landing over the new holder's version: here the push that sent it died (its
// client gone), and a push from the same machine took its claim over (the repeat of its claim
// request, which gets a new id).
TEST_F(OriginTest, ACommitWhoseClaimMovedOnWhileItWaitedForBlobsIsRefused) {
  TearDown();
  StartServer(AuthMode::kRequired, {}, [](OriginOptions& o) {
    o.clock = Clock::Real();
    o.claim_ttl = std::chrono::seconds(30);
    o.commit_wait = std::chrono::seconds(20);
    o.commit_recheck_pause = std::chrono::milliseconds(50);
  });
  SealResult seal = Seal(3);
  const Digest held_back = UploadAllButOneDataChunk(seal);
  ASSERT_NE(held_back, Digest());
  const std::string claims = "/v1/volumes/weights/model/claims";
  auto r = Call("POST", claims, admin_, "{}", {{"Idempotency-Key", "push-1"}});
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string first = Body(r)["claim"];
  std::optional<httplib::Result> answer;
  std::thread committing([&] {  // a client of its own: the test's client_ serves one call at once
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(std::chrono::seconds(60));
    answer.emplace(
        c.Post("/v1/volumes/weights/model/commit", {{"Authorization", "Bearer " + admin_}},
               json{{"digest", seal.digest.Hex()}, {"claim", first}}.dump(), "application/json"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it waits for the blob
  r = Call("POST", claims, admin_, "{}", {{"Idempotency-Key", "push-1"}});
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_NE(Body(r)["claim"], first);
  Upload(sealed_->blobs[held_back]);
  committing.join();
  ASSERT_TRUE(answer && *answer);
  EXPECT_EQ((*answer)->status, 409) << (*answer)->body;
  const std::string admin_id = admin_.substr(4, admin_.find('_', 4) - 4);
  EXPECT_EQ(Body(*answer)["error"]["message"],
            "volume bdn:weights/model: push in progress (claimed by key bdn_" + admin_id +
                ", expires in 30 s); push again once it has ended");
  EXPECT_EQ(Call("GET", "/v1/volumes/weights/model", admin_)->status, 404);
}

TEST_F(OriginTest, CommitRefusedUntilEveryBlobIsStored) {
  SealResult seal = Seal(1);
  std::string commit = json{{"digest", seal.digest.Hex()}, {"tags", {"prod"}}}.dump();
  const std::string path = "/v1/volumes/weights/model/commit";

  auto r = Call("POST", path, admin_, commit);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 412);
  EXPECT_EQ(Body(r)["error"]["message"],
            "version " + seal.digest.ToString() + ": manifest is not stored");

  // Upload everything except one data chunk.
  Digest held_back;
  for (const auto& [id, bytes] : sealed_->blobs) {
    bool is_data = id != seal.digest && bytes.size() > 1000;
    if (is_data && held_back == Digest()) {
      held_back = id;
      continue;
    }
    Upload(bytes);
  }
  ASSERT_NE(held_back, Digest());
  r = Call("POST", path, admin_, commit);
  EXPECT_EQ(r->status, 412);
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  EXPECT_EQ(Body(r)["error"]["message"], "version " + seal.digest.ToString() + ": chunk " +
                                             held_back.ToString() + " is not stored");
  EXPECT_EQ(Call("GET", "/v1/volumes/weights/model", admin_)->status, 404);

  Upload(sealed_->blobs[held_back]);
  r = Call("POST", path, admin_, commit);
  ASSERT_EQ(r->status, 200) << r->body;
  json result = Body(r);
  EXPECT_EQ(result["sequence"], 1);
  EXPECT_EQ(result["unchanged"], false);
  EXPECT_EQ(result["head_updated"], true);
  EXPECT_EQ(result["tags_applied"], json({"prod"}));

  r = Call("GET", "/v1/volumes/weights/model/versions/" + seal.digest.Hex(), admin_);
  ASSERT_EQ(r->status, 200);
  json v = Body(r);
  EXPECT_EQ(v["digest"], seal.digest.Hex());
  EXPECT_EQ(v["is_head"], true);
  EXPECT_EQ(v["lifecycle"], "ALIVE");
  // The server's stats (from the manifest) equal what the pusher computed.
  EXPECT_EQ(v["stats"]["files"], seal.stats.files);
  EXPECT_EQ(v["stats"]["bytes"], seal.stats.bytes);
  EXPECT_EQ(v["stats"]["chunks"], seal.stats.chunks);
  EXPECT_EQ(v["stats"]["entries"], seal.stats.entries);

  r = Call("GET", "/v1/volumes/weights/model", admin_);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["head"], seal.digest.Hex());
  EXPECT_EQ(Body(r)["tags"]["prod"], seal.digest.Hex());
  EXPECT_EQ(Body(r)["namespace"], "weights");
  EXPECT_EQ(Body(r)["volume"], "model");

  r = Call("GET", "/v1/volumes/weights/model/versions?include_deleted=1", admin_);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["versions"].size(), 1u);
  r = Call("GET", "/v1/volumes/weights/model/find?prefix=" + seal.digest.Hex().substr(0, 12),
           admin_);
  EXPECT_EQ(Body(r)["digests"], json({seal.digest.Hex()}));
  r = Call("GET", "/v1/namespaces", admin_);
  EXPECT_EQ(Body(r)["namespaces"], json({"weights"}));
  r = Call("GET", "/v1/namespaces/weights/volumes", admin_);
  EXPECT_EQ(Body(r)["volumes"][0]["volume"], "model");
  r = Call("GET", "/v1/volumes/Weights/model", admin_);
  EXPECT_EQ(r->status, 400);

  // Re-committing the same version changes nothing.
  r = Call("POST", path, admin_, commit);
  EXPECT_EQ(Body(r)["unchanged"], true);
}

TEST_F(OriginTest, TagsWithExpectedSequence) {
  SealResult seal = Seal(2);
  for (const auto& [id, bytes] : sealed_->blobs) Upload(bytes);
  auto r = Call("POST", "/v1/volumes/weights/model/commit", admin_,
                json{{"digest", seal.digest.Hex()}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  int64_t seq = Body(r)["sequence"];

  std::string tag_path = "/v1/volumes/weights/model/tags/candidate";
  r = Call("PUT", tag_path, admin_,
           json{{"digest", seal.digest.Hex()}, {"expected_sequence", seq + 5}}.dump());
  EXPECT_EQ(r->status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "conflict");
  r = Call("PUT", tag_path, admin_,
           json{{"digest", seal.digest.Hex()}, {"expected_sequence", seq}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["sequence"], seq + 1);

  r = Call("DELETE", tag_path + "?expected_sequence=" + std::to_string(seq), admin_);
  EXPECT_EQ(r->status, 409);
  r = Call("DELETE", tag_path + "?expected_sequence=" + std::to_string(seq + 1), admin_);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["sequence"], seq + 2);
  r = Call("DELETE", tag_path, admin_);
  EXPECT_EQ(r->status, 404);
  r = Call("PUT", "/v1/volumes/weights/model/tags/head", admin_,
           json{{"digest", seal.digest.Hex()}}.dump());
  EXPECT_EQ(r->status, 400);
  r = Call("PUT", "/v1/volumes/weights/model/tags/bad$tag", admin_,
           json{{"digest", seal.digest.Hex()}}.dump());
  EXPECT_EQ(r->status, 400);
}

TEST_F(OriginTest, PushClaimsConflictExpireAndRenew) {
  std::string pusher = Key("weights", "push");
  const std::string claims = "/v1/volumes/weights/model/claims";
  auto r = Call("POST", claims, admin_);
  ASSERT_EQ(r->status, 201) << r->body;
  std::string first = Body(r)["claim"];
  EXPECT_EQ(Body(r)["ttl_ms"], 400);

  r = Call("POST", claims, pusher);
  EXPECT_EQ(r->status, 409);
  std::string message = Body(r)["error"]["message"];
  std::string admin_id = admin_.substr(4, admin_.find('_', 4) - 4);
  EXPECT_EQ(message, "volume bdn:weights/model: push in progress (claimed by key bdn_" + admin_id +
                         ", expires in 1 s); push again once it has ended");

  // A commit without the live claim is refused with the same conflict.
  r = Call("POST", "/v1/volumes/weights/model/commit", pusher,
           json{{"digest", Digest::Of("x").Hex()}}.dump());
  EXPECT_EQ(r->status, 409);
  // With the claim it passes the claim check (and then fails on the missing manifest).
  r = Call("POST", "/v1/volumes/weights/model/commit", admin_,
           json{{"digest", Digest::Of("x").Hex()}, {"claim", first}}.dump());
  EXPECT_EQ(r->status, 412);

  // Renewing keeps it alive past the original expiry.
  for (int i = 0; i < 3; ++i) {
    clock_->Advance(std::chrono::milliseconds(300));
    r = Call("PUT", claims + "/" + first, admin_);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  clock_->Advance(std::chrono::milliseconds(399));
  EXPECT_EQ(Call("POST", claims, pusher)->status, 409) << "1 ms before it lapses";

  // Without renewal it lapses; then another client may claim.
  clock_->Advance(std::chrono::milliseconds(1));
  r = Call("POST", claims, pusher);
  ASSERT_EQ(r->status, 201);
  std::string second = Body(r)["claim"];
  r = Call("PUT", claims + "/" + first, admin_);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["error"]["message"],
            "claim " + first + " on bdn:weights/model: not found (expired or released)");
  r = Call("DELETE", claims + "/" + second, pusher);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Call("DELETE", claims + "/" + second, pusher)->status, 404);
  EXPECT_EQ(Call("POST", claims, admin_)->status, 201);
}

TEST_F(OriginTest, ARetriedCommitGetsTheFirstAnswerEvenOnceItsClaimIsGone) {
  SealResult seal = Seal(3);
  for (const auto& [id, bytes] : sealed_->blobs) Upload(bytes);
  std::string pusher = Key("weights", "push,tag");
  const std::string claims = "/v1/volumes/weights/model/claims";
  auto r = Call("POST", claims, admin_);
  ASSERT_EQ(r->status, 201) << r->body;
  std::string claim = Body(r)["claim"];
  const std::string path = "/v1/volumes/weights/model/commit";
  std::string commit = json{
      {"digest", seal.digest.Hex()},
      {"tags", {"prod"}},
      {"expected_sequence", 0},
      {"claim", claim}}.dump();
  const httplib::Headers key = {{"Idempotency-Key", "c0ffee"}};
  r = Call("POST", path, admin_, commit, key);
  ASSERT_EQ(r->status, 200) << r->body;
  const json first = Body(r);
  EXPECT_EQ(first, json({{"sequence", 1},
                         {"unchanged", false},
                         {"head_updated", true},
                         {"tags_applied", {"prod"}}}));

  // The claim is released and another pusher holds the volume now; the sequence is stale.
  ASSERT_EQ(Call("DELETE", claims + "/" + claim, admin_)->status, 200);
  ASSERT_EQ(Call("POST", claims, pusher)->status, 201);
  r = Call("POST", path, admin_, commit, key);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r), first);
  // The same body without the key is a new commit: refused by the other pusher's claim.
  r = Call("POST", path, admin_, commit);
  EXPECT_EQ(r->status, 409);
  // The key of another request is refused, without naming that request (it may be another
  // namespace's: a key holder of one namespace must learn nothing of another's commits).
  r = Call("POST", path, admin_, json{{"digest", seal.digest.Hex()}}.dump(), key);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"],
            "idempotency key \"c0ffee\": already used for another request");
  r = Call("GET", "/v1/volumes/weights/model", admin_);
  EXPECT_EQ(Body(r)["sequence"], 1);
}

TEST_F(OriginTest, RetriedTagWritesAndClaimsWithTheirKeyGetTheFirstAnswer) {
  SealResult seal = Seal(4);
  for (const auto& [id, bytes] : sealed_->blobs) Upload(bytes);
  auto r = Call("POST", "/v1/volumes/weights/model/commit", admin_,
                json{{"digest", seal.digest.Hex()}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string tag = "/v1/volumes/weights/model/tags/prod";
  const std::string set = json{{"digest", seal.digest.Hex()}, {"expected_sequence", 1}}.dump();
  for (int i = 0; i < 2; ++i) {
    r = Call("PUT", tag, admin_, set, {{"Idempotency-Key", "set-1"}});
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Body(r), json({{"sequence", 2}}));
  }
  // A tag set to where it points already changes nothing.
  r = Call("PUT", tag, admin_, json{{"digest", seal.digest.Hex()}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r), json({{"sequence", 2}}));
  for (int i = 0; i < 2; ++i) {
    r = Call("DELETE", tag + "?expected_sequence=2", admin_, "", {{"Idempotency-Key", "del-1"}});
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Body(r), json({{"sequence", 3}}));
  }

  // A claim request repeated with its key gets the claim under a new id (the old one stops
  // working); another client still conflicts.
  const std::string claims = "/v1/volumes/weights/model/claims";
  r = Call("POST", claims, admin_, "{}", {{"Idempotency-Key", "claim-1"}});
  ASSERT_EQ(r->status, 201) << r->body;
  std::string id = Body(r)["claim"];
  r = Call("POST", claims, admin_, "{}", {{"Idempotency-Key", "claim-1"}});
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_NE(Body(r)["claim"], id);
  EXPECT_EQ(Call("PUT", claims + "/" + id, admin_, "")->status, 404);
  EXPECT_EQ(Call("POST", claims, admin_, "{}", {{"Idempotency-Key", "claim-2"}})->status, 409);
  EXPECT_EQ(
      Call("POST", claims, Key("weights", "push"), "{}", {{"Idempotency-Key", "claim-1"}})->status,
      409)
      << "a key is only honoured for the holder that made the claim";
}

TEST_F(OriginTest, KeysEndpoints) {
  auto r = Call("POST", "/v1/keys", admin_,
                json{{"namespace", "weights"}, {"scopes", {"push", "pull"}}}.dump());
  ASSERT_EQ(r->status, 201) << r->body;
  json created = Body(r);
  std::string token = created["token"];
  EXPECT_TRUE(token.starts_with("bdn_" + created["id"].get<std::string>() + "_"));
  EXPECT_EQ(created["scopes"], json({"pull", "push"}));
  EXPECT_EQ(created["namespace"], "weights");

  r = Call("GET", "/v1/keys", admin_);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["keys"].size(), 2u);
  EXPECT_EQ(r->body.find(token.substr(token.rfind('_') + 1)), std::string::npos);

  r = Call("POST", "/v1/keys", admin_,
           json{{"namespace", "weights"}, {"scopes", {"write"}}}.dump());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"], "scope \"write\": must be one of pull, push, tag, admin");

  // A namespace admin manages only its namespace.
  std::string ns_admin = Key("weights", "admin");
  EXPECT_EQ(
      Call("POST", "/v1/keys", ns_admin, json{{"namespace", "*"}, {"scopes", {"pull"}}}.dump())
          ->status,
      403);
  EXPECT_EQ(Call("POST", "/v1/keys", ns_admin,
                 json{{"namespace", "weights"}, {"scopes", {"pull"}}}.dump())
                ->status,
            201);
  r = Call("GET", "/v1/keys", ns_admin);
  json listed = Body(r);
  for (const auto& k : listed["keys"]) EXPECT_EQ(k["namespace"], "weights");
  std::string admin_id = admin_.substr(4, admin_.find('_', 4) - 4);
  EXPECT_EQ(Call("DELETE", "/v1/keys/" + admin_id, ns_admin)->status, 403);

  r = Call("DELETE", "/v1/keys/bdn_" + created["id"].get<std::string>(), admin_);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["revoked"], true);
  EXPECT_EQ(Call("GET", "/v1/namespaces", token)->status, 401);
  EXPECT_EQ(Call("DELETE", "/v1/keys/00000000", admin_)->status, 404);

  // The last "*" admin key cannot be revoked; once there is another, it can.
  r = Call("DELETE", "/v1/keys/" + admin_id, admin_);
  EXPECT_EQ(r->status, 412);
  EXPECT_EQ(
      Body(r)["error"]["message"],
      "key bdn_" + admin_id +
          ": the last admin key for every namespace (\"*\"); create another before revoking it");
  std::string admin2 = Key("*", "admin");
  EXPECT_EQ(Call("DELETE", "/v1/keys/" + admin_id, admin2)->status, 200);
}

TEST_F(OriginTest, SecretsAreStoredHashed) {
  std::string token = Key("weights", "pull");
  std::string secret = token.substr(token.rfind('_') + 1);
  std::string admin_secret = admin_.substr(admin_.rfind('_') + 1);
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (!e.is_regular_file() || e.path().filename() == "admin.token") continue;
    std::string content = ReadAll(e.path());
    EXPECT_EQ(content.find(secret), std::string::npos) << e.path();
    EXPECT_EQ(content.find(admin_secret), std::string::npos) << e.path();
  }
  struct stat st;
  ASSERT_EQ(::stat((dir_ / "admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadAll(dir_ / "admin.token"), admin_ + "\n");
  // Only the first start creates a key.
  auto again = BootstrapAdminKey(*keys_, dir_ / "admin2.token");
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value());
  EXPECT_FALSE(fs::exists(dir_ / "admin2.token"));
}

// For every endpoint: no token and a revoked key get 401, a pull key gets 403 where it needs
// more than pull and a non-401/403 answer where pull is enough; none of the 401/403 responses
// carries anything but the error.
TEST_F(OriginTest, ScopeTable) {
  SealResult seal = Seal(3);
  for (const auto& [id, bytes] : sealed_->blobs) Upload(bytes);
  ASSERT_EQ(Call("POST", "/v1/volumes/weights/model/commit", admin_,
                 json{{"digest", seal.digest.Hex()}, {"tags", {"prod"}}}.dump())
                ->status,
            200);
  std::string chunk = "scope chunk";
  Upload(chunk);
  std::string chunk_hex = Digest::Of(chunk).Hex();

  std::string pull = Key("weights", "pull");
  // For each scope, a key of this namespace with every other scope but admin: the scope an
  // endpoint needs is not implied by the others (admin implies every scope).
  std::map<Scope, std::string> all_but = {{Scope::kPush, Key("weights", "pull,tag")},
                                          {Scope::kTag, Key("weights", "pull,push")},
                                          {Scope::kAdmin, Key("weights", "pull,push,tag")}};
  std::string other_ns_push = Key("other", "push,tag");
  std::string revoked = Key("*", "admin");
  ASSERT_TRUE(keys_->Revoke(SplitToken(revoked)->first));

  struct Endpoint {
    std::string method, path, body;
    Scope needs;
    bool namespaced;
    httplib::Headers headers;
  };
  std::string ids = json{{"ids", {chunk_hex}}}.dump();
  std::string d = seal.digest.Hex();
  // A pull key of one namespace reads the chunks of a version it names: here the manifest.
  const httplib::Headers version = {{"Bdn-Version", "bdn:weights/model@" + seal.digest.ToString()}};
  std::vector<Endpoint> table = {
      {"POST", "/v1/chunks/missing", ids, Scope::kPush, false},
      {"POST", "/v1/chunks/sizes", ids, Scope::kPush, false},
      {"PUT", "/v1/chunks/" + chunk_hex, chunk, Scope::kPush, false},
      {"GET", "/v1/chunks/" + d, "", Scope::kPull, false, version},
      {"POST", "/v1/chunks/batch", json{{"ids", {d}}}.dump(), Scope::kPull, false, version},
      {"GET", "/v1/namespaces", "", Scope::kPull, false},
      {"GET", "/v1/namespaces/weights/volumes", "", Scope::kPull, true},
      {"GET", "/v1/volumes/weights/model", "", Scope::kPull, true},
      {"GET", "/v1/volumes/weights/model/versions", "", Scope::kPull, true},
      {"GET", "/v1/volumes/weights/model/versions/" + d, "", Scope::kPull, true},
      {"GET", "/v1/volumes/weights/model/find?prefix=" + d.substr(0, 12), "", Scope::kPull, true},
      {"POST", "/v1/volumes/weights/model/commit", json{{"digest", d}}.dump(), Scope::kPush, true},
      {"PUT", "/v1/volumes/weights/model/tags/t1", json{{"digest", d}}.dump(), Scope::kTag, true},
      {"DELETE", "/v1/volumes/weights/model/tags/prod", "", Scope::kTag, true},
      {"POST", "/v1/volumes/weights/model/claims", "", Scope::kPush, true},
      {"PUT", "/v1/volumes/weights/model/claims/abc", "", Scope::kPush, true},
      {"DELETE", "/v1/volumes/weights/model/claims/abc", "", Scope::kPush, true},
      // Lifecycle (docs/http-api.md): a soft delete drops tags and lets the data go, so it needs
      // admin; a restore only brings a version back (without tags), so push is enough.
      {"DELETE", "/v1/volumes/weights/model/versions/" + d, "", Scope::kAdmin, true},
      {"DELETE", "/v1/volumes/weights/model/versions?all=1", "", Scope::kAdmin, true},
      {"POST", "/v1/volumes/weights/model/versions/" + d + "/restore", "{}", Scope::kPush, true},
      {"POST", "/v1/keys", json{{"namespace", "weights"}, {"scopes", {"pull"}}}.dump(),
       Scope::kAdmin, false},
      {"GET", "/v1/keys", "", Scope::kAdmin, false},
      {"DELETE", "/v1/keys/0000", "", Scope::kAdmin, false},
  };
  auto expect_only_error = [&](const httplib::Result& r, const std::string& what) {
    json j = Body(r);
    ASSERT_EQ(j.size(), 1u) << what;
    ASSERT_EQ(j["error"].size(), 2u) << what;
    EXPECT_EQ(r->body.find(chunk), std::string::npos) << what;
    EXPECT_EQ(r->body.find(d), std::string::npos) << what;
    EXPECT_EQ(r->get_header_value("ETag"), "") << what;
  };
  for (const Endpoint& e : table) {
    std::string what = e.method + " " + e.path;
    auto r = Call(e.method, e.path, "", e.body, e.headers);
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, 401) << what;
    EXPECT_EQ(Body(r)["error"]["code"], "unauthenticated") << what;
    EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer realm=\"bdn\"") << what;
    expect_only_error(r, what);

    r = Call(e.method, e.path, revoked, e.body, e.headers);
    EXPECT_EQ(r->status, 401) << what;
    EXPECT_EQ(Body(r)["error"]["message"], "key bdn_" + SplitToken(revoked)->first + ": revoked");
    expect_only_error(r, what);

    r = Call(e.method, e.path, "bdn_0123_4567", e.body, e.headers);
    EXPECT_EQ(r->status, 401) << what;

    r = Call(e.method, e.path, pull, e.body, e.headers);
    if (e.needs == Scope::kPull) {
      EXPECT_TRUE(r->status == 200 || r->status == 206)
          << what << ": " << r->status << " " << r->body;
    } else {
      EXPECT_EQ(r->status, 403) << what;
      EXPECT_EQ(Body(r)["error"]["code"], "permission_denied") << what;
      std::string where = e.namespaced ? "namespace \"weights\"" : "any namespace";
      EXPECT_EQ(Body(r)["error"]["message"], "key bdn_" + SplitToken(pull)->first + ": no \"" +
                                                 std::string(ScopeName(e.needs)) + "\" scope for " +
                                                 where)
          << what;
      expect_only_error(r, what);
    }
    if (e.needs != Scope::kPull) {
      const std::string& key = all_but.at(e.needs);
      r = Call(e.method, e.path, key, e.body);
      EXPECT_EQ(r->status, 403) << what << " with every scope but " << ScopeName(e.needs);
      std::string where = e.namespaced ? "namespace \"weights\"" : "any namespace";
      EXPECT_EQ(Body(r)["error"]["message"], "key bdn_" + SplitToken(key)->first + ": no \"" +
                                                 std::string(ScopeName(e.needs)) + "\" scope for " +
                                                 where)
          << what;
      expect_only_error(r, what);
    }
    if (e.namespaced) {
      r = Call(e.method, e.path, other_ns_push, e.body, e.headers);
      EXPECT_EQ(r->status, 403) << what;
      expect_only_error(r, what);
    }
  }
  // A key of another namespace does not see this one in the listing.
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces", other_ns_push))["namespaces"], json::array());
  // None of the refused deletes took effect: the version is live and still tagged.
  json record = Body(Call("GET", "/v1/volumes/weights/model/versions/" + d, pull));
  EXPECT_EQ(record["lifecycle"], "ALIVE") << record.dump();
  EXPECT_EQ(Body(Call("GET", "/v1/volumes/weights/model", pull))["tags"]["prod"], d);
}

// A commit that applies tags moves them like PUT .../tags/{tag}: it needs "tag" as well as
// "push", and a refused one commits nothing.
TEST_F(OriginTest, CommitWithTagsNeedsTagScope) {
  SealResult seal = Seal(5);
  std::string d = seal.digest.Hex();
  std::string push = Key("weights", "push");
  // Uploaded by the pusher (a key of one namespace commits only what that namespace uploaded or
  // already holds).
  for (const auto& [id, bytes] : sealed_->blobs) {
    ASSERT_EQ(Call("PUT", "/v1/chunks/" + id.Hex(), push, bytes)->status, 201);
  }
  auto r = Call("POST", "/v1/volumes/weights/model/commit", push,
                json{{"digest", d}, {"tags", {"prod"}}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Body(r)["error"]["code"], "permission_denied");
  EXPECT_EQ(Body(r)["error"]["message"],
            "key bdn_" + SplitToken(push)->first + ": no \"tag\" scope for namespace \"weights\"");
  EXPECT_EQ(Call("GET", "/v1/volumes/weights/model/versions", admin_)->status, 404)
      << "a refused commit committed a version";

  // Refused at the claim already when it names the tags, so that nothing is uploaded first.
  auto claim =
      Call("POST", "/v1/volumes/weights/model/claims", push, json{{"tags", {"prod"}}}.dump());
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->status, 403);
  EXPECT_EQ(Body(claim)["error"]["message"],
            "key bdn_" + SplitToken(push)->first +
                ": no \"tag\" scope for namespace \"weights\" (the push names tags: push without "
                "them, or with a key that has the tag scope); nothing was uploaded");
  claim =
      Call("POST", "/v1/volumes/weights/model/claims", push, json{{"tags", json::array()}}.dump());
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->status, 201) << claim->body;
  EXPECT_EQ(
      Call("DELETE", "/v1/volumes/weights/model/claims/" + Body(claim)["claim"].get<std::string>(),
           push)
          ->status,
      200);

  r = Call("POST", "/v1/volumes/weights/model/commit", push, json{{"digest", d}}.dump());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Call("GET", "/v1/volumes/weights/model", admin_)->status, 200);

  std::string push_tag = Key("weights", "push,tag");
  r = Call("POST", "/v1/volumes/weights/model/commit", push_tag,
           json{{"digest", d}, {"tags", {"prod"}}}.dump());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(Call("GET", "/v1/volumes/weights/model", admin_)->body.find("prod"), std::string::npos);
}

// "Authorization: Bearer  <token>" (two spaces) got 401: RFC 7235 §2.1 and RFC 6750 §2.1 allow
// one or more spaces (1*SP) between the scheme and the token; a tab is not one of them.
TEST_F(OriginTest, BearerTakesOneOrMoreSpacesBeforeTheToken) {
  const std::vector<std::string> good = {"Bearer " + admin_, "Bearer  " + admin_,
                                         "bearer    " + admin_, "BEARER " + admin_};
  for (size_t i = 0; i < good.size(); ++i) {
    auto r = Call("GET", "/v1/namespaces", "", "", {{"Authorization", good[i]}});
    ASSERT_TRUE(r) << "good " << i;
    EXPECT_EQ(r->status, 200) << "good " << i << ": " << r->body;
  }
  const std::vector<std::string> bad = {
      "Bearer\t" + admin_, "Bearer \t" + admin_, "Bearer" + admin_, "Basic " + admin_, "Bearer",
      "Bearer   "};
  for (size_t i = 0; i < bad.size(); ++i) {
    auto r = Call("GET", "/v1/namespaces", "", "", {{"Authorization", bad[i]}});
    ASSERT_TRUE(r) << "bad " << i;
    EXPECT_EQ(r->status, 401) << "bad " << i;
    EXPECT_EQ(r->body, R"({"error":{"code":"unauthenticated","message":"Authorization: expected )"
                       R"(\"Bearer bdn_<id>_<secret>\""}})")
        << "bad " << i;
  }
}

// Upper-case hex was accepted wherever the server parsed a digest from a request (a chunk id in
// the URL or a body, a version in the URL or in Bdn-Version), so one chunk or version had two
// names (cache keys, ETags, logs). Lower case is the one spelling; the error names the digest.
TEST_F(OriginTest, DigestsInUpperCaseAreRefusedNamingThem) {
  Published a = Publish(23, "a");
  const std::string chunk = a.data_chunk().Hex(), version = a.digest.Hex();
  const std::string pull_a = Key("a", "pull");
  auto upper = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  };
  // Digest::Parse's message for `text` (hex in upper case, "b3:" or not).
  auto refused = [](const std::string& text) {
    const char letter = *std::find_if(text.begin() + (text.starts_with("b3:") ? 3 : 0), text.end(),
                                      [](char c) { return c >= 'A' && c <= 'F'; });
    return "digest \"" + text + "\": '" + std::string(1, letter) +
           "' is upper case (a digest is lower-case hex)";
  };
  const httplib::Headers pinned = {{"Bdn-Version", a.ref}};
  struct Case {
    std::string method, path, token, body;
    httplib::Headers headers;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"GET", "/v1/chunks/" + upper(chunk), pull_a, "", pinned,
       "chunk id: " + refused(upper(chunk))},
      {"GET",
       "/v1/chunks/" + chunk,
       pull_a,
       "",
       {{"Bdn-Version", "bdn:a/model@b3:" + upper(version)}},
       "header Bdn-Version: " + refused("b3:" + upper(version))},
      // The names and the "b3:" have one spelling too (the ref parser folds typed refs).
      {"GET",
       "/v1/chunks/" + chunk,
       pull_a,
       "",
       {{"Bdn-Version", "bdn:A/Model@b3:" + version}},
       "header Bdn-Version: \"bdn:A/Model@b3:" + version + "\" is not written as \"" + a.ref +
           "\" (names in lower case, the digest after b3:)"},
      {"GET",
       "/v1/chunks/" + chunk,
       pull_a,
       "",
       {{"Bdn-Version", "bdn:a/model@" + version}},
       "header Bdn-Version: \"bdn:a/model@" + version + "\" is not written as \"" + a.ref +
           "\" (names in lower case, the digest after b3:)"},
      {"POST", "/v1/chunks/batch", pull_a, json{{"ids", {upper(chunk)}}}.dump(), pinned,
       "ids[0]: " + refused(upper(chunk))},
      {"POST",
       "/v1/chunks/missing",
       admin_,
       json{{"ids", {chunk, upper(chunk)}}}.dump(),
       {},
       "ids[1]: " + refused(upper(chunk))},
      {"GET",
       "/v1/volumes/a/model/versions/" + upper(version),
       pull_a,
       "",
       {},
       refused(upper(version))},
      {"PUT",
       "/v1/volumes/a/model/tags/t",
       admin_,
       json{{"digest", upper(version)}}.dump(),
       {},
       "digest: " + refused(upper(version))},
  };
  for (const Case& c : cases) {
    const std::string what = c.method + " " + c.path + " " + c.body;
    auto r = Call(c.method, c.path, c.token, c.body, c.headers);
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, 400) << what;
    EXPECT_EQ(r->body,
              json({{"error", {{"code", "invalid_argument"}, {"message", c.message}}}}).dump())
        << what;
  }
  // The same in lower case is served.
  auto r = Call("GET", "/v1/chunks/" + chunk, pull_a, "", pinned);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, a.blobs.at(a.data_chunk()));
}

// Issue 12 item 4: a pull key of one namespace reads only the blobs of a version of that
// namespace that its request names; nothing tells it whether another namespace's blob is stored.
TEST_F(OriginTest, ChunkReadsAreScopedToTheVersionTheyName) {
  Published a = Publish(21, "a"), b = Publish(22, "b");
  const Digest a_chunk = a.data_chunk(), b_chunk = b.data_chunk();
  ASSERT_NE(a_chunk, Digest());
  ASSERT_NE(b_chunk, Digest());
  ASSERT_FALSE(a.blobs.contains(b_chunk));
  const std::string pull_a = Key("a", "pull");
  const std::string key_a = "key bdn_" + SplitToken(pull_a)->first;
  auto get = [&](const Digest& id, const std::string& version, httplib::Headers h = {}) {
    if (!version.empty()) h.emplace("Bdn-Version", version);
    return Call("GET", "/v1/chunks/" + id.Hex(), pull_a, "", h);
  };

  // Its own version's blobs: the manifest, a chunk index, a data chunk, with Range and ETag.
  for (const auto& [id, bytes] : a.blobs) {
    auto r = get(id, a.ref);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->body, bytes);
    EXPECT_EQ(r->get_header_value("Cache-Control"), "private, max-age=31536000, immutable");
  }
  auto r = get(a_chunk, a.ref, {{"Range", "bytes=0-9"}});
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->body, a.blobs.at(a_chunk).substr(0, 10));

  // Without a version: refused, with the header it needs named.
  r = get(a_chunk, "");
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Body(r)["error"]["message"],
            key_a +
                ": a key for namespace \"a\" reads chunks of a version: send Bdn-Version: "
                "bdn:<ns>/<vol>@b3:<hex>");
  EXPECT_EQ(Body(r)["error"]["reason"], "version_required");
  // Another namespace's version: refused before anything is looked up.
  r = get(b_chunk, b.ref);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Body(r)["error"]["message"], key_a + ": no \"pull\" scope for namespace \"b\"");
  // Another namespace's chunk under its own version: 404 however it is asked, the same as for a
  // chunk no one stored, so the answer tells nothing of namespace b.
  const Digest nowhere = Digest::Of("stored nowhere");
  for (const Digest& id : {b_chunk, nowhere}) {
    for (const httplib::Headers& h :
         std::vector<httplib::Headers>{{},
                                       {{"Range", "bytes=0-9"}},
                                       {{"If-None-Match", "\"" + id.Hex() + "\""}},
                                       {{"If-None-Match", "*"}}}) {
      r = get(id, a.ref, h);
      EXPECT_EQ(r->status, 404) << id.ToString();
      EXPECT_EQ(Body(r)["error"]["message"], "chunk " + id.ToString() + ": not in " + a.ref);
      EXPECT_EQ(r->get_header_value("ETag"), "");
    }
    auto head = client_->Head("/v1/chunks/" + id.Hex(),
                              {{"Authorization", "Bearer " + pull_a}, {"Bdn-Version", a.ref}});
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 404);
  }
  // A version the registry does not hold, and a malformed header.
  const std::string unknown = "bdn:a/model@" + Digest::Of("no such version").ToString();
  r = get(a_chunk, unknown);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["error"]["message"], "version " + unknown + ": not found");
  r = get(a_chunk, "bdn:a/model:latest");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["error"]["message"],
            "header Bdn-Version: \"bdn:a/model:latest\" must name a version by its full digest "
            "(bdn:<ns>/<vol>@b3:<64 hex>)");

  // A batch: the version's blobs found, the others missing, in order.
  json ids = {{"ids", {a_chunk.Hex(), b_chunk.Hex(), a.digest.Hex(), nowhere.Hex()}}};
  r = Call("POST", "/v1/chunks/batch", pull_a, ids.dump(), {{"Bdn-Version", a.ref}});
  ASSERT_EQ(r->status, 200);
  std::vector<BatchRecord> records = DecodeBatch(r->body);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].status, 0);
  EXPECT_EQ(records[0].bytes, a.blobs.at(a_chunk));
  EXPECT_EQ(records[1].id, b_chunk);
  EXPECT_EQ(records[1].status, 1);
  EXPECT_EQ(records[1].bytes, "");
  EXPECT_EQ(records[2].bytes, a.blobs.at(a.digest));
  EXPECT_EQ(records[3].status, 1);
  r = Call("POST", "/v1/chunks/batch", pull_a, ids.dump());
  EXPECT_EQ(r->status, 403);
  r = Call("POST", "/v1/chunks/batch", pull_a, ids.dump(), {{"Bdn-Version", b.ref}});
  EXPECT_EQ(r->status, 403);

  // A chunk both versions hold is namespace a's as well.
  const std::string shared = "shared by both namespaces";
  fs::create_directories(dir_ / "shared");
  std::ofstream(dir_ / "shared" / "s.txt") << shared;
  RecordingStore sealed;
  auto s = SealDirectory(dir_ / "shared", SealOptions{}, sealed, nullptr);
  ASSERT_TRUE(s);
  for (const auto& [id, bytes] : sealed.blobs) Upload(bytes);
  for (const char* ns : {"a", "b"}) {
    ASSERT_EQ(Call("POST", std::string("/v1/volumes/") + ns + "/shared/commit", admin_,
                   json{{"digest", s->digest.Hex()}}.dump())
                  ->status,
              200);
  }
  r = get(Digest::Of(shared), "bdn:a/shared@" + s->digest.ToString());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, shared);

  // A key for every namespace reads without naming a version, and checks one it names.
  const std::string pull_all = Key("*", "pull");
  EXPECT_EQ(Call("GET", "/v1/chunks/" + b_chunk.Hex(), pull_all)->status, 200);
  EXPECT_EQ(
      Call("GET", "/v1/chunks/" + b_chunk.Hex(), pull_all, "", {{"Bdn-Version", a.ref}})->status,
      404);
}

// Issue 13: a chunk read admitted recently, of a chunk in the page cache, is answered on the I/O
// thread (counted in bdn_http_inline_requests_total) with the same bytes and headers; what the
// admission would refuse is still refused, and a key revoked through this server reads nothing
// more at once. With read_admission_ttl 0 nothing is answered there.
TEST_F(OriginTest, RepeatedChunkReadsAreAnsweredOnTheIoThreadUntilTheKeyIsRevoked) {
  const Published published = Publish(41, "a");
  const std::map<Digest, std::string>& blobs = published.blobs;
  const std::string& version = published.ref;
  const std::string pull_a = Key("a", "pull");
  auto get = [&](const Digest& id, httplib::Headers h = {}) {
    h.emplace("Bdn-Version", version);
    return Call("GET", "/v1/chunks/" + id.Hex(), pull_a, "", h);
  };
  auto answered_inline = [&] {
    return server_->metrics().Value("bdn_http_inline_requests_total",
                                    {{"route", "/v1/chunks/{id}"}});
  };
  for (const auto& [id, bytes] : blobs) {
    auto first = get(id);  // admitted on a worker; reads the chunk in
    ASSERT_EQ(first->status, 200) << first->body;
    const double before = answered_inline();
    auto again = get(id);
    ASSERT_EQ(again->status, 200) << again->body;
    EXPECT_EQ(answered_inline(), before + 1) << id.ToString();
    EXPECT_EQ(again->body, bytes);
    for (const char* h : {"ETag", "Cache-Control", "Accept-Ranges", "Content-Type"}) {
      EXPECT_EQ(again->get_header_value(h), first->get_header_value(h)) << h;
    }
  }
  const Digest chunk = published.data_chunk();
  double before = answered_inline();
  auto r = get(chunk, {{"Range", "bytes=5-14"}});
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->body, blobs.at(chunk).substr(5, 10));
  r = get(chunk, {{"Range", "bytes=999999999-"}});
  EXPECT_EQ(r->status, 416);
  EXPECT_EQ(answered_inline(), before + 2);
  // Revalidation, and a chunk the version does not hold: answered by a worker, as before.
  r = get(chunk, {{"If-None-Match", "\"" + chunk.Hex() + "\""}});
  EXPECT_EQ(r->status, 304);
  const Digest other = Digest::Of("not in the version");
  r = get(other);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["error"]["message"], "chunk " + other.ToString() + ": not in " + version);
  EXPECT_EQ(answered_inline(), before + 2);
  // Another caller's credentials are never served from this key's admission.
  r = Call("GET", "/v1/chunks/" + chunk.Hex(), pull_a + "x", "", {{"Bdn-Version", version}});
  EXPECT_EQ(r->status, 401);
  // Revoked through this server: refused at the next read.
  ASSERT_EQ(Call("DELETE", "/v1/keys/bdn_" + SplitToken(pull_a)->first, admin_)->status, 200);
  r = get(chunk);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Body(r)["error"]["message"], "key bdn_" + SplitToken(pull_a)->first + ": revoked");

  // Admissions not kept: every read goes through a worker.
  TearDown();
  StartServer(AuthMode::kRequired, {},
              [](OriginOptions& o) { o.read_admission_ttl = std::chrono::milliseconds(0); });
  const Published again = Publish(41, "a");
  const std::string pull = Key("a", "pull");
  for (int i = 0; i < 3; ++i) {
    r = Call("GET", "/v1/chunks/" + again.data_chunk().Hex(), pull, "",
             {{"Bdn-Version", again.ref}});
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, again.blobs.at(again.data_chunk()));
  }
  EXPECT_EQ(answered_inline(), 0);
}

// A key revoked on another replica (straight in the shared key store) reads for at most
// read_admission_ttl more.
TEST_F(OriginTest, AKeyRevokedElsewhereStopsReadingWithinTheAdmissionTtl) {
  TearDown();
  StartServer(AuthMode::kRequired, {},
              [](OriginOptions& o) { o.read_admission_ttl = std::chrono::milliseconds(300); });
  const std::string bytes = RandomBytes(5000, 7);
  Upload(bytes);
  const Digest id = Digest::Of(bytes);
  const std::string pull = Key("*", "pull");
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Call("GET", "/v1/chunks/" + id.Hex(), pull)->status, 200);
  }
  ASSERT_TRUE(keys_->Revoke(SplitToken(pull)->first));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto r = Call("GET", "/v1/chunks/" + id.Hex(), pull);
  EXPECT_EQ(r->status, 401);
}

// Issue 12 item 4: a key of one namespace pushes as if the store held only what that namespace
// may read: another namespace's blobs read as missing (so its uploads store nothing new), and it
// cannot commit a version naming a blob it neither may read nor uploaded.
TEST_F(OriginTest, PushKeysOfANamespaceSeeOnlyWhatItMayRead) {
  const Published theirs = Publish(31, "b");
  const std::map<Digest, std::string>& their_blobs = theirs.blobs;
  Digest their_chunk;
  for (const auto& [id, bytes] : their_blobs) {
    if (id != theirs.digest && bytes.size() > 1000) their_chunk = id;
  }
  ASSERT_NE(their_chunk, Digest());
  const std::string push_a = Key("a", "push");
  const std::string own = "uploaded by a";
  const Digest nowhere = Digest::Of("stored nowhere");
  auto r = Call("PUT", "/v1/chunks/" + Digest::Of(own).Hex(), push_a, own);
  EXPECT_EQ(r->status, 201);

  // Missing- and sizes-queries: namespace b's chunk reads as missing, a's own upload as stored.
  json ids = {{"ids", {their_chunk.Hex(), Digest::Of(own).Hex(), nowhere.Hex()}}};
  r = Call("POST", "/v1/chunks/missing", push_a, ids.dump());
  EXPECT_EQ(Body(r)["missing"], json({their_chunk.Hex(), nowhere.Hex()}));
  r = Call("POST", "/v1/chunks/sizes", push_a, ids.dump());
  EXPECT_EQ(Body(r), json({{"sizes", {nullptr, own.size(), nullptr}}}));
  // The admin key (every namespace) sees the store as it is.
  r = Call("POST", "/v1/chunks/missing", admin_, ids.dump());
  EXPECT_EQ(Body(r)["missing"], json({nowhere.Hex()}));

  // A commit naming b's blobs by digest alone (only the manifest uploaded) is refused as for
  // blobs never stored, and nothing is committed.
  r = Call("PUT", "/v1/chunks/" + theirs.digest.Hex(), push_a, their_blobs.at(theirs.digest));
  EXPECT_EQ(r->status, 201) << "the answer tells whether another namespace stored it";
  EXPECT_EQ(Body(r)["stored"], true);
  r = Call("POST", "/v1/volumes/a/copy/commit", push_a,
           json{{"digest", theirs.digest.Hex()}}.dump());
  EXPECT_EQ(r->status, 412);
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  EXPECT_TRUE(Body(r)["error"]["message"].get<std::string>().starts_with(
      "version " + theirs.digest.ToString() + ": chunk index "))
      << r->body;
  EXPECT_EQ(Call("GET", "/v1/volumes/a/copy", admin_)->status, 404);

  // Uploading the bytes (as a pusher that has them does) makes them a's: the commit passes, and
  // a pull key of a reads them through its version.
  for (const auto& [id, bytes] : their_blobs) {
    r = Call("PUT", "/v1/chunks/" + id.Hex(), push_a, bytes);
    EXPECT_EQ(r->status, id == theirs.digest ? 200 : 201) << "a uploaded only the manifest before";
  }
  r = Call("POST", "/v1/volumes/a/copy/commit", push_a,
           json{{"digest", theirs.digest.Hex()}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string pull_a = Key("a", "pull");
  r = Call("GET", "/v1/chunks/" + their_chunk.Hex(), pull_a, "",
           {{"Bdn-Version", "bdn:a/copy@" + theirs.digest.ToString()}});
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, their_blobs.at(their_chunk));

  // A version committed to namespace a by another key counts for a's pushers at once: its
  // blobs are a's without being uploaded by them.
  Publish(32, "a", "other");
  json mine_ids = {{"ids", json::array()}};
  for (const auto& [id, bytes] : sealed_->blobs) mine_ids["ids"].push_back(id.Hex());
  r = Call("POST", "/v1/chunks/missing", push_a, mine_ids.dump());
  EXPECT_EQ(Body(r)["missing"], json::array());
  const std::string push_c = Key("c", "push");
  r = Call("POST", "/v1/chunks/missing", push_c, mine_ids.dump());
  EXPECT_EQ(Body(r)["missing"].size(), sealed_->blobs.size());
}

// A cache node whose upstream is not a bdn origin (a web server that answers any POST with 200
// and a page, or with 204) lets nobody read: the access check needs a batch answer, and says
// what answered instead; so does the node's start-up check of its own key.
TEST(UpstreamReadAuthority, AnUpstreamThatIsNotABdnOriginAllowsNothing) {
  httplib::Server fake;
  std::atomic<int> status{200};
  fake.Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
    res.status = status.load();
    if (res.status == 200) res.set_content("<html>welcome</html>", "text/html");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  while (!fake.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto created = http::HttpClient::Create({.base_url = url});
  ASSERT_TRUE(created);
  std::shared_ptr<http::HttpClient> check = std::move(*created);
  ReadAuthority authority = UpstreamReadAuthority(check, std::chrono::hours(1));
  for (int answer : {200, 204}) {
    status = answer;
    const std::string said = "origin " + url + " answered " + std::to_string(answer) +
                             " to POST /v1/chunks/batch without a bdn batch (is it a bdn origin?)";
    AccessVerdict v = authority(ApiKey{}, "Bearer bdn_0123456789abcdef_0123", std::nullopt);
    EXPECT_EQ(v.status.code(), StatusCode::kUnavailable);
    EXPECT_EQ(v.status.message(), "cache node: cannot check access with the origin: " + said);
    Status own = CheckReadsEveryNamespace(*check);
    EXPECT_EQ(own.code(), StatusCode::kUnavailable);
    EXPECT_EQ(own.message(), said);
  }
  fake.stop();
  serving.join();
}

// A cache node's access checks have a breaker of their own: once the origin did not answer a
// check, a caller with a kept allowing verdict is served with it at once, and one without is
// refused at once, instead of each check waiting out the client's deadline (from an attacker with
// a stopped origin: 10 s each). An expired verdict is never served while the origin answers: a
// refusal then is the answer (from a second attacker: a revoked key kept reading).
TEST(UpstreamReadAuthority, AnOriginThatDoesNotAnswerIsNotAskedAgainAtOnce) {
  httplib::Server fake;
  std::atomic<bool> hang{false}, stopping{false};
  std::atomic<int> asked{0}, answer{200};
  fake.Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
    ++asked;
    for (int i = 0; hang && !stopping && i < 300; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    res.status = answer;
    if (answer == 200) {
      res.set_content(std::string(kBatchMagic, sizeof kBatchMagic), "application/octet-stream");
    } else {
      res.set_content(R"({"error": {"code": "permission_denied", "message": "key revoked"}})",
                      "application/json");
    }
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  while (!fake.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto created =
      http::HttpClient::Create({.base_url = url, .deadline = std::chrono::milliseconds(1000)});
  ASSERT_TRUE(created);
  // Verdicts are kept 1 s; waits of 1.1 s let them expire.
  const auto ttl = std::chrono::milliseconds(1000);
  const auto past = std::chrono::milliseconds(1100);
  ReadAuthority authority = UpstreamReadAuthority(std::move(*created), ttl);
  const std::string allowed = "Bearer bdn_0123456789abcdef_0123";
  EXPECT_TRUE(authority(ApiKey{}, allowed, std::nullopt).status.ok());
  EXPECT_EQ(asked, 1);
  // Revoked while the origin answers: the expired verdict is not served.
  answer = 403;
  std::this_thread::sleep_for(past);
  AccessVerdict v = authority(ApiKey{}, allowed, std::nullopt);
  EXPECT_EQ(v.status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(v.status.message(), "key revoked");
  EXPECT_EQ(asked, 2);
  answer = 200;
  std::this_thread::sleep_for(past);
  EXPECT_TRUE(authority(ApiKey{}, allowed, std::nullopt).status.ok());
  EXPECT_EQ(asked, 3);
  hang = true;
  std::this_thread::sleep_for(past);
  // The first check after the origin stopped answering waits for the deadline, then the kept
  // verdict serves (kept another ttl).
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(authority(ApiKey{}, allowed, std::nullopt).status.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_EQ(asked, 4);
  // The next ones do not ask: within ttl, and up to ttl past it while the breaker is open.
  start = std::chrono::steady_clock::now();
  EXPECT_TRUE(authority(ApiKey{}, allowed, std::nullopt).status.ok());
  AccessVerdict other = authority(ApiKey{}, "Bearer bdn_fedcba9876543210_3210", std::nullopt);
  EXPECT_EQ(other.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(other.status.message().starts_with(
      "cache node: cannot check access with the origin: the origin failed an access check 1s ago "
      "(origin " +
      url + ": POST /v1/chunks/batch: "))
      << other.status.message();
  EXPECT_NE(other.status.message().find("; not asked again for "), std::string::npos);
  std::this_thread::sleep_for(past);
  EXPECT_TRUE(authority(ApiKey{}, allowed, std::nullopt).status.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1800));
  EXPECT_EQ(asked, 4);
  // Revoked while the breaker is still open (another caller's check failed): once the kept
  // verdict is more than ttl past its expiry, this caller's own check asks, and is refused.
  answer = 403;
  hang = false;
  std::this_thread::sleep_for(past);
  v = authority(ApiKey{}, allowed, std::nullopt);
  EXPECT_EQ(v.status.code(), StatusCode::kPermissionDenied) << v.status.message();
  EXPECT_EQ(asked, 5);
  stopping = true;
  fake.stop();
  serving.join();
}

// From an attacker with two cache nodes in a chain: each kept its upstream's verdict for its own
// ttl, so a revoked key read through the outer one for twice as long. An upstream that says how
// long its verdict has left (a cache node's Bdn-Access-Max-Age-Ms) bounds how long it is kept.
TEST(UpstreamReadAuthority, KeepsAVerdictNoLongerThanTheUpstreamSaysItHasLeft) {
  httplib::Server fake;
  std::atomic<int> asked{0};
  std::string max_age = "300";  // set before each check, read by the server thread after
  std::mutex mu;
  fake.Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
    ++asked;
    std::lock_guard l(mu);
    if (!max_age.empty()) res.set_header("Bdn-Access-Max-Age-Ms", max_age);
    res.set_content(std::string(kBatchMagic, sizeof kBatchMagic), "application/octet-stream");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  while (!fake.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto created = http::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(created);
  ReadAuthority authority = UpstreamReadAuthority(std::move(*created), std::chrono::hours(1));
  const std::string caller = "Bearer bdn_0123456789abcdef_0123";
  auto check = [&](const std::string& age) {
    {
      std::lock_guard l(mu);
      max_age = age;
    }
    AccessVerdict v = authority(ApiKey{}, caller, std::nullopt);
    EXPECT_TRUE(v.status.ok()) << v.status.message();
    return v;
  };
  const auto before = std::chrono::steady_clock::now();
  AccessVerdict v = check("300");
  EXPECT_EQ(asked, 1);
  EXPECT_LE(v.valid_until - before, std::chrono::milliseconds(300) + std::chrono::seconds(1));
  check("300");
  EXPECT_EQ(asked, 1) << "kept within its 300 ms";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  check("0");
  EXPECT_EQ(asked, 2) << "asked again after 300 ms, not after the node's own hour";
  check("0");
  EXPECT_EQ(asked, 3) << "an upstream verdict with nothing left is not kept";
  // Malformed values are ignored (the node's own ttl then): each is asked about once.
  for (const std::string bad : {"-5", "+5", "1e3", "7 ms", "99999999999999", "0x10", ""}) {
    authority = UpstreamReadAuthority(
        std::move(
            *http::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)})),
        std::chrono::hours(1));
    const int was = asked;
    v = check(bad);
    EXPECT_GT(v.valid_until - std::chrono::steady_clock::now(), std::chrono::minutes(59)) << bad;
    check(bad);
    EXPECT_EQ(asked, was + 1) << bad;
  }
  fake.stop();
  serving.join();
}

// Issue 12 item 4 on the cache tier: a cache node (the cache role over a store that reads the
// origin with the node's own key for every namespace) answers each caller only what the origin
// would: it asks the origin once per caller and version (POST /v1/chunks/batch without ids,
// with the caller's credentials), then checks each chunk against the version's blobs itself.
TEST_F(OriginTest, ACacheNodeChecksEachCallerWithTheOrigin) {
  Published a = Publish(41, "a"), b = Publish(42, "b");
  const Digest a_chunk = a.data_chunk(), b_chunk = b.data_chunk();
  const std::string origin_url = "http://127.0.0.1:" + std::to_string(server_->port());

  // The node: its own key reads every namespace; callers are checked through a client without
  // a token. A long ttl: a verdict is reused for the whole test.
  auto node_client = http::HttpClient::Create({.base_url = origin_url, .token = Key("*", "pull")});
  ASSERT_TRUE(node_client);
  auto check_client = http::HttpClient::Create({.base_url = origin_url});
  ASSERT_TRUE(check_client);
  OriginOptions node_options;
  node_options.role = Role::kCache;
  node_options.read_authority =
      UpstreamReadAuthority(std::move(*check_client), std::chrono::hours(1));
  Origin node(node_options, std::make_shared<remote::RemoteChunkStore>(std::move(*node_client)),
              nullptr, nullptr);
  http::Server node_server({.listen = "127.0.0.1:0", .threads = 4});
  node.Register(node_server);
  ASSERT_TRUE(node_server.Start().ok());
  httplib::Client c("127.0.0.1", node_server.port());
  const std::string pull_a = Key("a", "pull");
  const std::string key_a = "key bdn_" + SplitToken(pull_a)->first;
  auto get = [&](const Digest& id, const std::string& token, const std::string& version) {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (!version.empty()) h.emplace("Bdn-Version", version);
    return c.Get("/v1/chunks/" + id.Hex(), h);
  };
  auto origin_checks = [&] {
    return server_->metrics().Value(
        "bdn_http_requests_total",
        {{"method", "POST"}, {"route", "/v1/chunks/batch"}, {"status", "200"}});
  };

  // Its version's blobs, each read through the node; the origin was asked once.
  const double checks0 = origin_checks();
  for (const auto& [id, bytes] : a.blobs) {
    auto r = get(id, pull_a, a.ref);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->body, bytes);
    EXPECT_EQ(r->get_header_value("Cache-Control"), "private, max-age=31536000, immutable");
  }
  EXPECT_EQ(origin_checks() - checks0, 1);

  // What the origin would refuse, the node refuses with the origin's words.
  auto r = get(b_chunk, pull_a, a.ref);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["message"],
            "chunk " + b_chunk.ToString() + ": not in " + a.ref);
  r = get(b_chunk, pull_a, b.ref);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(json::parse(r->body)["error"]["message"],
            key_a + ": no \"pull\" scope for namespace \"b\"");
  r = get(b_chunk, pull_a, "");
  EXPECT_EQ(r->status, 403);
  r = get(a_chunk, "", a.ref);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["message"],
            "request: no credentials (send Authorization: Bearer bdn_<id>_<secret>)");
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer realm=\"bdn\"");
  r = get(a_chunk, "bdn_0123456789abcdef_0123456789abcdef0123456789abcdef", a.ref);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["message"], "key bdn_0123456789abcdef: invalid token");

  // A batch: a's blobs found, b's missing (the node never fetched it for this caller).
  json ids = {{"ids", {a_chunk.Hex(), b_chunk.Hex()}}};
  auto batch =
      c.Post("/v1/chunks/batch", {{"Authorization", "Bearer " + pull_a}, {"Bdn-Version", a.ref}},
             ids.dump(), "application/json");
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->status, 200);
  auto records = DecodeBatch(batch->body);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].bytes, a.blobs.at(a_chunk));
  EXPECT_EQ(records[1].status, 1);
  // It says how long its verdict has left (its ttl, an hour, less the test so far), for a node
  // in front of it; the origin, which checks keys itself, says nothing of the kind.
  const std::string age = batch->get_header_value("Bdn-Access-Max-Age-Ms");
  ASSERT_FALSE(age.empty());
  EXPECT_LE(std::stoll(age), 3'600'000);
  EXPECT_GT(std::stoll(age), 3'000'000);
  auto at_origin =
      httplib::Client("127.0.0.1", server_->port())
          .Post("/v1/chunks/batch", {{"Authorization", "Bearer " + pull_a}, {"Bdn-Version", a.ref}},
                ids.dump(), "application/json");
  ASSERT_TRUE(at_origin);
  ASSERT_EQ(at_origin->status, 200);
  EXPECT_FALSE(at_origin->has_header("Bdn-Access-Max-Age-Ms"));

  // Revalidation through the node, whose key has pull only: 304, never the origin's refusal of
  // a push-side query made with the node's key.
  auto inm = c.Get("/v1/chunks/" + a_chunk.Hex(), {{"Authorization", "Bearer " + pull_a},
                                                   {"Bdn-Version", a.ref},
                                                   {"If-None-Match", "\"" + a_chunk.Hex() + "\""}});
  ASSERT_TRUE(inm);
  EXPECT_EQ(inm->status, 304) << inm->body;
  EXPECT_EQ(inm->get_header_value("ETag"), "\"" + a_chunk.Hex() + "\"");
  node_server.Stop();
}

TEST_F(OriginTest, ConcurrentUploadsAndDownloads) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_keep_alive(true);
      for (int i = 0; i < 10; ++i) {
        std::string bytes = RandomBytes(50000 + i, static_cast<uint32_t>(t * 100 + i));
        std::string path = "/v1/chunks/" + Digest::Of(bytes).Hex();
        auto put = c.Put(path, Auth(admin_), bytes, "application/octet-stream");
        auto get = c.Get(path, {{"Authorization", "Bearer " + admin_}, {"Range", "bytes=10-"}});
        if (!put || put->status != 201 || !get || get->status != 206 ||
            get->body != bytes.substr(10)) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_->metrics().Value("bdn_chunks_received_total", {}), 160);
}

TEST_F(OriginTest, UnmatchedRouteGetsJsonNotFound) {
  auto r = Call("GET", "/v1/nothing", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(Body(r)["error"]["message"], "GET /v1/nothing: no such endpoint");
}

TEST_F(OriginTest, InsecureModeNeedsNoToken) {
  TearDown();
  StartServer(AuthMode::kDisabled);
  EXPECT_EQ(Call("GET", "/v1/namespaces", "")->status, 200);
  Upload("x");
  auto r = Call("POST", "/v1/volumes/weights/model/claims", "");
  ASSERT_EQ(r->status, 201);
  r = Call("POST", "/v1/volumes/weights/model/claims", "");
  EXPECT_EQ(r->status, 409);
  EXPECT_NE(
      Body(r)["error"]["message"].get<std::string>().find("claimed by an unauthenticated client"),
      std::string::npos);
}

// Issue 7 item 2: an unauthenticated upload is answered 401 before its body is read, with one
// Connection: close, and the connection closes: an authenticated request placed inside the
// refused body is never answered.
TEST_F(OriginTest, ARequestSmuggledInARefusedUploadIsNeverAnswered) {
  std::string smuggled =
      "GET /v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ + "\r\n\r\n";
  for (size_t size : {size_t{1000}, size_t{100 * 1024}}) {
    std::string body = smuggled + std::string(size - smuggled.size(), 'x');
    std::string what = "upload of " + std::to_string(size) + " bytes";
    bdn::testing::RawConnection c(server_->port());
    ASSERT_TRUE(c.Send("PUT /v1/chunks/" + Digest::Of(body).Hex() +
                       " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n"));
    c.Send(body);
    std::string raw = c.ReadUntilClose();
    EXPECT_TRUE(c.eof()) << what;
    auto rs = bdn::testing::ParseResponses(raw);
    ASSERT_EQ(rs.size(), 1u) << what << ": " << raw;
    EXPECT_EQ(rs[0].status, 401) << what;
    EXPECT_EQ(rs[0].Count("connection"), 1u) << what;
    EXPECT_EQ(rs[0].Header("connection"), "close") << what;
    EXPECT_EQ(raw.find("namespaces\""), std::string::npos) << what << ": " << raw;
  }
  EXPECT_EQ(
      server_->metrics().Value("bdn_http_requests_total",
                               {{"method", "GET"}, {"route", "/v1/namespaces"}, {"status", "200"}}),
      0);
}

// Issue 13: 1,000 connections that send part of a header and then nothing hold no thread: a
// normal client's /healthz and chunk reads still answer within 1 s while they are open, and the
// header deadline closes them.
TEST_F(OriginTest, SlowHeaderConnectionsDoNotStopOtherClients) {
  TearDown();
  http::ServerOptions o;
  o.header_timeout = std::chrono::seconds(3);
  o.max_connections_per_client = 2000;
  StartServer(AuthMode::kRequired, o);
  std::string bytes = RandomBytes(64 * 1024, 5);
  Upload(bytes);
  std::string path = "/v1/chunks/" + Digest::Of(bytes).Hex();

  std::vector<std::unique_ptr<bdn::testing::RawConnection>> slow;
  for (int i = 0; i < 1000; ++i) {
    slow.push_back(std::make_unique<bdn::testing::RawConnection>(server_->port()));
    ASSERT_TRUE(slow.back()->connected()) << i;
    slow.back()->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n");  // and never the blank line
  }
  auto open = [&] {
    server_->metrics().Render();
    return server_->metrics().Value("bdn_http_connections", {});
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (open() < 1000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(open(), 1000);
  httplib::Client c("127.0.0.1", server_->port());
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto h = c.Get("/healthz");
    auto r = c.Get(path, Auth(admin_));
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(h && r);
    EXPECT_EQ(h->body, "ok\n");
    EXPECT_EQ(r->body, bytes);
    EXPECT_LT(took, 1.0) << "healthz and a 64 KiB chunk with 1000 slow connections open";
    if (i == 0)
      std::printf("healthz + chunk read with %.0f connections open: %.3f s\n", open(), took);
  }
  // The header deadline closes every slow connection.
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (open() > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LE(open(), 1);  // (the client's keep-alive connection may still be open)
  for (auto& s : slow) {
    s->ReadUntilClose(std::chrono::seconds(1));
    EXPECT_TRUE(s->eof());
  }
}

// The same class as fuzz/json_bodies_fuzz.cc found in api/records_json.cc: an expected_sequence
// past 2^63-1 was read as a negative number.
// ReadAdmissions: kept per exact pair of header values, for the TTL counted from the admission's
// start, never past the grant's valid_until, and not at all once a Clear came after its start.
TEST(ReadAdmissions, KeptForTheTtlFromTheStartAndNeverPastTheVerdict) {
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  ReadAdmissions kept(milliseconds(10'000), 16);
  ReadAdmissions::Entry entry{ApiKey{"k1", "a", {Scope::kPull}, 0, false}, ReadGrant{}};
  auto now = steady_clock::now();
  kept.Put("Bearer t", "bdn:a/v@b3:x", kept.generation(), now, entry);
  ASSERT_TRUE(kept.Find("Bearer t", "bdn:a/v@b3:x").has_value());
  EXPECT_EQ(kept.Find("Bearer t", "bdn:a/v@b3:x")->key.id, "k1");
  EXPECT_FALSE(kept.Find("Bearer t ", "bdn:a/v@b3:x").has_value());
  EXPECT_FALSE(kept.Find("Bearer t", "bdn:a/v@b3:y").has_value());
  // The split between the two values is part of the key.
  EXPECT_FALSE(kept.Find("Bearer tbdn:a/v@b3:", "x").has_value());
  // Begun longer ago than the TTL: not kept.
  kept.Put("Bearer old", "", kept.generation(), now - milliseconds(10'001), entry);
  EXPECT_FALSE(kept.Find("Bearer old", "").has_value());
  // A verdict valid for 100 ms more: kept for that long only.
  ReadAdmissions::Entry brief = entry;
  brief.grant.valid_until = steady_clock::now() + milliseconds(100);
  kept.Put("Bearer brief", "", kept.generation(), steady_clock::now(), brief);
  EXPECT_TRUE(kept.Find("Bearer brief", "").has_value());
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(kept.Find("Bearer brief", "").has_value());
  // Cleared: everything goes, and an admission begun before the Clear is not kept.
  const uint64_t before = kept.generation();
  kept.Clear();
  EXPECT_FALSE(kept.Find("Bearer t", "bdn:a/v@b3:x").has_value());
  kept.Put("Bearer t", "bdn:a/v@b3:x", before, steady_clock::now(), entry);
  EXPECT_FALSE(kept.Find("Bearer t", "bdn:a/v@b3:x").has_value());
  // A TTL of 0 keeps nothing.
  ReadAdmissions off(milliseconds(0), 16);
  off.Put("Bearer t", "", off.generation(), steady_clock::now(), entry);
  EXPECT_FALSE(off.Find("Bearer t", "").has_value());
}

TEST(RequestJson, AnIntegerPastInt64IsRefusedNotWrapped) {
  auto big =
      OptionalIntField(json{{"expected_sequence", 18446744073709551615ull}}, "expected_sequence");
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(big.error().message(), "expected_sequence: 18446744073709551615 is out of range");
  auto max =
      OptionalIntField(json{{"expected_sequence", 9223372036854775807ull}}, "expected_sequence");
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(**max, INT64_MAX);
  EXPECT_EQ(
      OptionalIntField(json{{"expected_sequence", 1.5}}, "expected_sequence").error().message(),
      "expected_sequence: must be an integer or null");
}

}  // namespace
}  // namespace bdn::origin
