// Tests for HttpClient and RemoteChunkStore against a fake origin (cpp-httplib) on 127.0.0.1:
// batching, verification of received bytes, retries, deadlines, transport errors, fork safety.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <set>

#include "bdn/remote/fake_origin_test_util.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::remote {
namespace {

using namespace std::chrono_literals;
using testing::FakeOrigin;
using testing::TestServer;

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

Digest IdOf(uint64_t i) { return Digest::Of(std::to_string(i)); }

std::shared_ptr<http::HttpClient> Client(const std::string& url, http::ClientOptions o = {}) {
  o.base_url = url;
  auto c = http::HttpClient::Create(o);
  EXPECT_TRUE(c.has_value()) << c.error().message();
  return std::shared_ptr<http::HttpClient>(std::move(*c));
}

// Fast retries so the tests do not sleep for long.
RemoteStoreOptions FastRetries() { return {.retry = {.attempts = 4, .initial_backoff = 5ms}}; }

TEST(HttpClient, RejectsMalformedUrls) {
  for (const char* url :
       {"", "ftp://x", "localhost:8440", "http://", "http:///x", "http://u:p@h", "http://h/?q"}) {
    auto c = http::HttpClient::Create({.base_url = url});
    ASSERT_FALSE(c.has_value()) << url;
    EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument) << url;
  }
  auto ok = http::HttpClient::Create({.base_url = "HTTP://127.0.0.1:1/"});
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ((*ok)->base_url(), "http://127.0.0.1:1");  // the scheme in lower case
}

TEST(HttpClient, ConnectionRefusedIsUnavailableNamingTheServer) {
  TestServer s;
  s.Start();
  std::string url = s.url();
  s.Stop();  // nothing listens on the port any more
  auto c = Client(url);
  auto r = c->Get("/healthz");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().message(), "origin " + url + ": connection refused");
}

TEST(HttpClient, SendsBearerTokenButNeverPutsItInMessages) {
  FakeOrigin origin;
  origin.SetFault([](const httplib::Request&, httplib::Response& res) {
    res.status = 502;  // not the API's error shape
    res.set_content("<html>bad gateway</html>", "text/html");
    return true;
  });
  origin.Start();
  auto c = Client(origin.url(), {.token = "bdn_k1_s3cret"});
  auto r = c->Get("/v1/chunks/" + IdOf(1).Hex());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(origin.LastAuthorization(), "Bearer bdn_k1_s3cret");
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().message(),
            "origin " + origin.url() + ": GET /v1/chunks/" + IdOf(1).Hex() + ": HTTP 502");
  EXPECT_EQ(r.error().message().find("s3cret"), std::string::npos);
}

TEST(HttpClient, SendsTheHeadersOfItsOptionsWithEveryRequest) {
  FakeOrigin origin;
  Mutex mu;
  std::vector<std::string> sessions;
  origin.SetFault([&](const httplib::Request& req, httplib::Response&) {
    MutexLock l(mu);
    sessions.push_back(req.has_header("Bdn-Session") ? req.get_header_value("Bdn-Session")
                                                     : "(none)");
    return false;  // answered as usual
  });
  origin.Start();
  auto c = Client(origin.url(), {.headers = {{"Bdn-Session", "0123abcd"}}});
  const std::string path = "/v1/chunks/" + IdOf(1).Hex();
  ASSERT_FALSE(c->Get(path).has_value());  // 404
  ASSERT_FALSE(c->Get(path).has_value());
  auto plain = Client(origin.url());
  ASSERT_FALSE(plain->Get(path).has_value());
  MutexLock l(mu);
  EXPECT_EQ(sessions, (std::vector<std::string>{"0123abcd", "0123abcd", "(none)"}));
}

TEST(HttpClient, RefusesHeadersThatCouldSplitARequest) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"Bdn-Session", "a\r\nX-Evil: 1"},
                                                        {"Bdn-Session", "a\nb"},
                                                        {"Bdn:Session", "a"},
                                                        {"", "a"},
                                                        {"Bdn Session", "a"},
                                                        {"Bdn-Session\r\n", "a"}}) {
    auto c =
        http::HttpClient::Create({.base_url = "http://127.0.0.1:1", .headers = {{name, value}}});
    ASSERT_FALSE(c.has_value()) << name;
    EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.error().message(),
              "header \"" + name +
                  "\": a name must be a non-empty token, and neither it nor its value may hold "
                  "control characters");
  }
}

// From an attacking helper: BDN_TOKEN with "\r\nX-Evil: 1" added a header to every request, and
// one ending in a newline was sent as it was (the origin answered 400 to every request).
TEST(HttpClient, RefusesATokenThatIsNoBearerTokenWithoutShowingIt) {
  const std::string suffix = " (RFC 6750: letters, digits, - . _ ~ + / and = at the end)";
  const std::string good = "bdn_0123456789abcdef_0123456789abcdef0123456789abcdef";
  for (const auto& [token, said] : std::vector<std::pair<std::string, std::string>>{
           {good + "\r\nX-Evil: 1", "byte 54 of 64 is a line break"},
           {good + "\n", "byte 54 of 54 is a line break"},
           {"bdn_a b", "byte 6 of 7 is a space"},
           {"bdn_a\tb", "byte 6 of 7 is a tab"},
           {std::string("bdn_a\x01"), "byte 6 of 6 is a control character"},
           {"bdn_\xc3\xa9", "byte 5 of 6 is a byte outside ASCII"},
           {"a=b", "byte 2 of 3 is an = before the end"},
           {"Bearer:x", "byte 7 of 8 is a character"}}) {
    auto c = http::HttpClient::Create({.base_url = "http://127.0.0.1:1", .token = token});
    ASSERT_FALSE(c.has_value()) << said;
    EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.error().message(),
              "token: " + said + ", which a bearer token cannot hold" + suffix);
  }
  for (const std::string& ok : {good, std::string("abc+/~-._=="), std::string("")}) {
    EXPECT_TRUE(http::HttpClient::Create({.base_url = "http://127.0.0.1:1", .token = ok})) << ok;
  }
}

TEST(HttpClient, ErrorBodyKeepsCodeAndMessageVerbatim) {
  TestServer s;
  s.http().Get("/v1/volumes/w/x", [](const httplib::Request&, httplib::Response& res) {
    testing::SendError(res, NotFoundError("volume bdn:w/x: not found"));
  });
  s.Start();
  auto r = Client(s.url())->Get("/v1/volumes/w/x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.error().message(), "volume bdn:w/x: not found");
}

TEST(HttpClient, ARejectedTokenNamesTheServerOnlyWhereAskedTo) {
  TestServer s;
  s.http().Get("/v1/volumes", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(
        http::ErrorBody(PermissionDeniedError("key bdn_0123456789abcdef: invalid token"),
                        http::Credentials::kRejected),
        "application/json");
  });
  s.http().Get("/v1/volumes/w/x", [](const httplib::Request&, httplib::Response& res) {
    testing::SendError(res, PermissionDeniedError("key bdn_0123456789abcdef may not pull w"));
  });
  s.Start();
  auto cli =
      Client(s.url(), {.token = "bdn_0123456789abcdef_secret", .name_server_in_rejections = true});
  auto r = cli->Get("/v1/volumes");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.error().message(), "origin " + s.url() + ": key bdn_0123456789abcdef: invalid token");
  // From a new user: without a token, the 401 was explained only in HTTP terms; it says what to
  // set.
  auto r_none = Client(s.url(), {.name_server_in_rejections = true})->Get("/v1/volumes");
  ASSERT_FALSE(r_none.has_value());
  EXPECT_EQ(r_none.error().message(),
            "origin " + s.url() +
                ": key bdn_0123456789abcdef: invalid token; no token was sent: set BDN_TOKEN to a "
                "key of this server (bdn key create makes one)");
  // A 403 (the token is good, the scope is not) is about the key, not the server: verbatim.
  r = cli->Get("/v1/volumes/w/x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "key bdn_0123456789abcdef may not pull w");
  // Off (a server relaying errors): the message as the server wrote it.
  r = Client(s.url())->Get("/v1/volumes");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "key bdn_0123456789abcdef: invalid token");
}

TEST(HttpClient, DeadlineExceededOnAServerThatSleeps) {
  TestServer s;
  s.http().Get("/slow", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(1500ms);
    res.set_content("late", "text/plain");
  });
  s.Start();
  auto c = Client(s.url(), {.deadline = 200ms});
  auto r = c->Get("/slow");
  // The server answers after 1.5 s: an error naming the 200 ms deadline means it ended the wait.
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(), "origin " + s.url() + ": GET /slow: no response within 200 ms");
}

// Shutdown ends a request that waits on a server that does not answer (a server stopping while
// its upstream hangs) within about a second, not at its deadline, and refuses every later one at
// once; the error is Unavailable with reason kShuttingDown, which no retry loop repeats.
TEST(HttpClient, ShutdownEndsARequestInFlightAndRefusesLaterOnes) {
  TestServer s;
  std::atomic<bool> release{false};
  s.http().Get("/hang", [&](const httplib::Request&, httplib::Response& res) {
    for (int i = 0; i < 300 && !release; ++i) std::this_thread::sleep_for(50ms);
    res.set_content("late", "text/plain");
  });
  s.Start();
  auto c = Client(s.url(), {.deadline = 60s});
  std::optional<Result<http::Response>> got;
  const auto start = std::chrono::steady_clock::now();
  std::thread waiter([&] { got.emplace(c->Get("/hang")); });
  std::this_thread::sleep_for(300ms);
  c->Shutdown();
  waiter.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  release = true;
  ASSERT_FALSE(got->has_value());
  EXPECT_STATUS(*got, kUnavailable, "origin " + s.url() + ": GET /hang: shutting down");
  EXPECT_EQ(got->error().reason(), http::kShuttingDown);
  EXPECT_FALSE(IsRetryable(got->error()));
  EXPECT_LT(waited, 10s);  // the server would have answered after 15 s, the deadline at 60 s
  auto later = c->Get("/hang");
  EXPECT_STATUS(later, kUnavailable, "origin " + s.url() + ": GET /hang: shutting down");
}

// A RemoteChunkStore over a client that was shut down fails its Get once, without retrying.
TEST(RemoteChunkStore, AGetAfterShutdownFailsAtOnceWithoutRetries) {
  FakeOrigin origin;
  origin.Start();
  auto data = RandomBytes(100, 5);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(origin.store.Put(id, data).ok());
  auto client = Client(origin.url());
  RemoteChunkStore store(client, FastRetries());
  client->Shutdown();
  auto r = store.Get(id);
  EXPECT_STATUS(r, kUnavailable,
                "origin " + origin.url() + ": GET /v1/chunks/" + id.Hex() + ": shutting down");
  EXPECT_EQ(origin.get_requests, 0);
}

// The same on a connection kept alive from an earlier request (no connect time of its own): the
// error is the response's deadline, not "connect timed out".
TEST(HttpClient, DeadlineExceededOnAReusedConnectionIsNotAConnectTimeout) {
  TestServer s;
  s.http().Get("/fast", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  s.http().Get("/slow", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(1500ms);
    res.set_content("late", "text/plain");
  });
  s.Start();
  auto c = Client(s.url(), {.deadline = 200ms});
  ASSERT_TRUE(c->Get("/fast").has_value());
  auto r = c->Get("/slow");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(), "origin " + s.url() + ": GET /slow: no response within 200 ms");
}

TEST(HttpClient, RefusesResponsesOverTheSizeLimit) {
  TestServer s;
  s.http().Get("/big", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(2 << 20, 'x'), "application/octet-stream");
  });
  s.Start();
  auto r = Client(s.url(), {.max_response_bytes = 1 << 20})->Get("/big");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
  EXPECT_EQ(r.error().message(),
            "origin " + s.url() + ": GET /big: response larger than 1048576 bytes");
  EXPECT_TRUE(Client(s.url())->Get("/big").has_value());
}

TEST(HttpClient, ConcurrentRequestsReuseConnections) {
  TestServer s;
  std::atomic<int> calls{0};
  std::mutex mu;
  std::set<std::string> peers;  // remote address:port of each request
  s.http().Get("/n", [&](const httplib::Request& req, httplib::Response& res) {
    ++calls;
    std::lock_guard lock(mu);
    peers.insert(req.remote_addr + ":" + std::to_string(req.remote_port));
    res.set_content("x", "text/plain");
  });
  s.Start();
  auto c = Client(s.url());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) ASSERT_TRUE(c->Get("/n").has_value());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 200);
  EXPECT_LE(peers.size(), 8u) << "connections are not kept alive";
}

TEST(HttpClient, ForkedChildOpensItsOwnConnections) {
  TestServer s;
  s.http().Get("/n", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("x", "text/plain");
  });
  s.Start();
  auto c = Client(s.url());
  ASSERT_TRUE(c->Get("/n").has_value());  // leaves a pooled keep-alive connection
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = true;
    for (int i = 0; i < 5; ++i) ok = ok && c->Get("/n").has_value();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(c->Get("/n").has_value()) << "the parent's connection still works";
}

TEST(RemoteChunkStore, PutGetContainsRoundTrip) {
  FakeOrigin origin;
  origin.Start();
  RemoteChunkStore store(Client(origin.url()));
  auto data = RandomBytes(300000, 1);
  Digest id = Digest::Of(data);
  EXPECT_FALSE(*store.Contains(id));
  ASSERT_TRUE(store.Put(id, data).ok());
  ASSERT_TRUE(store.Put(id, data).ok()) << "Put is idempotent";
  EXPECT_TRUE(*store.Contains(id));
  auto got = store.Get(id);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, data);
  auto empty = store.Put(Digest::Of(std::span<const uint8_t>()), {});
  EXPECT_TRUE(empty.ok()) << empty.message();
}

TEST(RemoteChunkStore, PutManySendsBatchesOfPutBatchBytes) {
  FakeOrigin origin;
  origin.Start();
  RemoteStoreOptions o;
  o.put_batch_bytes = 10000;
  o.put_batch_ids = 3;
  RemoteChunkStore store(Client(origin.url()), o);
  EXPECT_EQ(store.PutBatchBytes(), 10000u);
  // 4000-byte blobs: two per request by bytes; then one blob larger than a batch alone; then
  // five small ones: three per request by count.
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < 4; ++i) data.push_back(RandomBytes(4000, 10 + i));
  data.push_back(RandomBytes(25000, 20));
  for (int i = 0; i < 5; ++i) data.push_back(RandomBytes(10, 30 + i));
  std::vector<BlobPut> blobs;
  for (const auto& d : data) blobs.push_back({Digest::Of(d), d});
  ASSERT_OK(store.PutMany(blobs));
  EXPECT_EQ(origin.UploadSizes(), (std::vector<size_t>{2, 2, 1, 3, 2}));
  EXPECT_EQ(origin.put_requests, 0);
  for (const auto& d : data) EXPECT_EQ(*origin.store.Get(Digest::Of(d)), d);
  // A blob whose bytes are not its id's: the server's Corruption, naming it.
  const auto bad = RandomBytes(100, 40);
  std::vector<BlobPut> wrong = {{Digest::Of(data[0]), data[0]}, {IdOf(7), bad}};
  Status s = store.PutMany(wrong);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "chunk " + IdOf(7).ToString() + ": received bytes hash to " +
                             Digest::Of(bad).ToString());
}

TEST(RemoteChunkStore, PutManyToAServerWithoutBatchUploadsPutsEachBlob) {
  FakeOrigin origin;
  origin.accepts_uploads = false;
  origin.Start();
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < 5; ++i) data.push_back(RandomBytes(1000 + i, 50 + i));
  std::vector<BlobPut> blobs;
  for (const auto& d : data) blobs.push_back({Digest::Of(d), d});
  ASSERT_OK(store.PutMany(std::span(blobs).first(3)));
  ASSERT_OK(store.PutMany(std::span(blobs).subspan(3)));
  EXPECT_EQ(origin.upload_requests, 1) << "asked once, then PUT per blob";
  EXPECT_EQ(origin.put_requests, 5);
  for (const auto& d : data) EXPECT_EQ(*origin.store.Get(Digest::Of(d)), d);
}

TEST(RemoteChunkStore, PutOfMismatchedBytesIsRefusedByTheServer) {
  FakeOrigin origin;
  origin.Start();
  RemoteChunkStore store(Client(origin.url()));
  auto data = RandomBytes(1000, 2);
  Status s = store.Put(IdOf(7), data);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(origin.store.size(), 0u);
}

TEST(RemoteChunkStore, GetOfMissingChunkIsNotFoundAndNotRetried) {
  FakeOrigin origin;
  origin.Start();
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  auto r = store.Get(IdOf(1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.error().message(), "chunk " + IdOf(1).ToString() + ": not in store");
  EXPECT_EQ(origin.get_requests, 1);
}

TEST(RemoteChunkStore, GetVerifiesBytesAndNeverReturnsWrongOnes) {
  FakeOrigin origin;
  origin.Start();
  auto data = RandomBytes(5000, 3);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(origin.store.Put(id, data).ok());
  origin.wrong_bytes = true;
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  auto r = store.Get(id);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_TRUE(r.error().message().starts_with(
      "chunk " + id.ToString() + ": digest mismatch (bytes from origin http://127.0.0.1:"))
      << r.error().message();
  EXPECT_EQ(origin.get_requests, 1) << "Corruption is not retried";
}

TEST(RemoteChunkStore, RetriesUnavailableThenSucceeds) {
  FakeOrigin origin;
  std::atomic<int> failures{2};
  origin.SetFault([&](const httplib::Request&, httplib::Response& res) {
    if (failures-- <= 0) return false;
    testing::SendError(res, UnavailableError("origin: overloaded"));
    return true;
  });
  origin.Start();
  auto data = RandomBytes(100, 4);
  Digest id = Digest::Of(data);
  ASSERT_TRUE(origin.store.Put(id, data).ok());
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  auto r = store.Get(id);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(*r, data);
  EXPECT_EQ(origin.get_requests, 3);
}

TEST(RemoteChunkStore, AnUploadAnswered500IsRetriedNotFatal) {
  FakeOrigin origin;
  std::atomic<int> failures{2};
  origin.SetFault([&](const httplib::Request&, httplib::Response& res) {
    if (failures-- <= 0) return false;
    testing::SendError(res, InternalError("origin: disk hiccup"));  // 500 "internal"
    return true;
  });
  origin.Start();
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  auto data = RandomBytes(100, 9);
  Digest id = Digest::Of(data);
  Status s = store.Put(id, data);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(origin.put_requests, 3);
  EXPECT_TRUE(*origin.store.Contains(id));
}

TEST(RemoteChunkStore, ServerErrorsOfEveryKindAreRetriedButClientErrorsAreNot) {
  // 5xx answers (the API's JSON, or a proxy's page) are retried; 4xx answers are final.
  const std::pair<int, int> cases[] = {{500, 4}, {502, 4}, {503, 4}, {504, 4},
                                       {501, 1}, {400, 1}, {404, 1}, {409, 1}};
  for (auto [status, tries] : cases) {
    FakeOrigin origin;
    origin.SetFault([status](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content("<html>proxy says no</html>", "text/html");
      return true;
    });
    origin.Start();
    RemoteChunkStore store(Client(origin.url()), FastRetries());
    auto batch = store.GetMany(std::vector<Digest>{IdOf(1)});
    ASSERT_FALSE(batch.has_value()) << status;
    EXPECT_EQ(batch.error().message(),
              "origin " + origin.url() + ": POST /v1/chunks/batch: HTTP " + std::to_string(status));
    EXPECT_EQ(origin.batch_requests, tries) << status;
  }
}

TEST(RemoteChunkStore, GivesUpAfterBoundedRetries) {
  FakeOrigin origin;
  origin.SetFault([&](const httplib::Request&, httplib::Response& res) {
    testing::SendError(res, UnavailableError("origin: overloaded"));
    return true;
  });
  origin.Start();
  RemoteChunkStore store(Client(origin.url()), FastRetries());
  Status s = store.Put(Digest::Of(std::string_view("x")),
                       std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("x"), 1));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "origin: overloaded");
  EXPECT_EQ(origin.put_requests, 4);
}

TEST(RemoteChunkStore, FindMissingAndSizesBatchAt4096IdsInInputOrder) {
  FakeOrigin origin;
  origin.Start();
  std::vector<Digest> ids;
  std::vector<Digest> want_missing;
  BlobSizes want_sizes;
  for (uint64_t i = 0; i < 10000; ++i) {
    std::string s = std::to_string(i);
    Digest id = Digest::Of(s);
    ids.push_back(id);
    if (i % 3 == 0) {
      ASSERT_TRUE(origin.store
                      .Put(id, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                                        s.size()))
                      .ok());
      want_sizes.emplace_back(s.size());
    } else {
      want_missing.push_back(id);
      want_sizes.emplace_back(std::nullopt);
    }
  }
  RemoteChunkStore store(Client(origin.url()));
  auto missing = store.FindMissing(ids);
  ASSERT_TRUE(missing.has_value()) << missing.error().message();
  EXPECT_EQ(*missing, want_missing);
  EXPECT_EQ(origin.missing_requests, 3);  // 4096 + 4096 + 1808
  origin.missing_requests = 0;
  auto none = store.FindMissing({});
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(origin.missing_requests, 0);

  auto sizes = store.Sizes(ids);
  ASSERT_TRUE(sizes.has_value()) << sizes.error().message();
  EXPECT_EQ(*sizes, want_sizes);
  EXPECT_EQ(origin.sizes_requests, 3);
  EXPECT_TRUE(store.Sizes({})->empty());
  EXPECT_EQ(origin.sizes_requests, 3);
}

TEST(RemoteChunkStore, GetManyReturnsVerifiedBlobsAndMissingOnes) {
  FakeOrigin origin;
  origin.Start();
  std::vector<Digest> ids;
  std::vector<std::optional<std::vector<uint8_t>>> want;
  for (uint64_t i = 0; i < 2500; ++i) {
    auto data = RandomBytes(1 + i % 700, i);
    Digest id = Digest::Of(data);
    ids.push_back(id);
    if (i % 5 == 0) {
      want.emplace_back(std::nullopt);
    } else {
      ASSERT_TRUE(origin.store.Put(id, data).ok());
      want.emplace_back(data);
    }
  }
  RemoteChunkStore store(Client(origin.url()));
  auto got = store.GetMany(ids);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, want);
  EXPECT_EQ(origin.batch_requests, 3);  // 1024 + 1024 + 452

  origin.wrong_bytes = true;
  auto bad = store.GetMany(std::span<const Digest>(ids).subspan(1, 3));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kCorruption);
}

TEST(RemoteChunkStore, GetManyRejectsAMalformedAnswer) {
  TestServer s;
  s.http().Post("/v1/chunks/batch", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("BDNB\x01", "application/octet-stream");
  });
  s.Start();
  RemoteChunkStore store(Client(s.url()));
  Digest id = IdOf(1);
  auto r = store.GetMany(std::span<const Digest>(&id, 1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.error().message(),
            "origin " + s.url() + ": POST /v1/chunks/batch: truncated at chunk " + id.ToString());
}

TEST(RemoteChunkStore, GetManyNamesWhatIsWrongWithAnAnswer) {
  Digest id = IdOf(1);
  Digest other = IdOf(2);
  auto record = [](const Digest& d, uint8_t status, const std::string& bytes) {
    std::string r(reinterpret_cast<const char*>(d.data()), Digest::kSize);
    r += static_cast<char>(status);
    uint32_t n = static_cast<uint32_t>(bytes.size());
    for (int i = 0; i < 4; ++i) r += static_cast<char>((n >> (8 * i)) & 0xff);
    return r + bytes;
  };
  struct Case {
    std::string body;
    std::string why;
  };
  const std::string missing = record(id, 1, "");
  std::vector<Case> cases = {
      {"XXXX" + missing, "no BDNB header"},
      {"BD", "no BDNB header"},
      {"BDNB" + record(other, 1, ""), "records out of order at chunk " + id.ToString()},
      {"BDNB" + missing + "x", "trailing bytes"},
      {"BDNB" + record(id, 7, ""), "unknown record status 7"},
      {"BDNB" + record(id, 0, "abc").substr(0, 39), "truncated at chunk " + id.ToString()},
  };
  for (const Case& c : cases) {
    TestServer s;
    s.http().Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(c.body, "application/octet-stream");
    });
    s.Start();
    RemoteChunkStore store(Client(s.url()));
    auto r = store.GetMany(std::span<const Digest>(&id, 1));
    ASSERT_FALSE(r.has_value()) << c.why;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
    EXPECT_EQ(r.error().message(), "origin " + s.url() + ": POST /v1/chunks/batch: " + c.why);
  }
}

TEST(RemoteChunkStore, GetManyRefusesBytesThatDoNotMatchTheirId) {
  Digest id = IdOf(1);
  std::string body = "BDNB";
  body.append(reinterpret_cast<const char*>(id.data()), Digest::kSize);
  body += std::string("\0\3\0\0\0", 5) + "abc";
  TestServer s;
  s.http().Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/octet-stream");
  });
  s.Start();
  RemoteChunkStore store(Client(s.url()));
  auto r = store.GetMany(std::span<const Digest>(&id, 1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(),
            "chunk " + id.ToString() + ": digest mismatch (bytes from origin " + s.url() +
                " hash to " + Digest::Of(std::string_view("abc")).ToString() + ")");
}

TEST(RemoteChunkStore, AStalledBatchFailsAfterTheStallTimeoutNotTheDeadline) {
  TestServer s;
  std::atomic<bool> release{false};
  s.http().Post("/v1/chunks/batch", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/octet-stream",
                                     [&](size_t, httplib::DataSink& sink) {
                                       sink.write("BDNB", 4);
                                       while (!release) std::this_thread::sleep_for(10ms);
                                       return false;
                                     });
  });
  s.Start();
  RemoteStoreOptions o = {.retry = {.attempts = 1},
                          .batch_deadline = std::chrono::milliseconds(60'000),
                          .batch_stall_timeout = std::chrono::milliseconds(1000)};
  RemoteChunkStore store(Client(s.url()), o);
  Digest id = IdOf(1);
  auto r = store.GetMany(std::span<const Digest>(&id, 1));
  release = true;
  // The server never finishes the answer: the stall message (not the 60 s deadline's) shows
  // that the stall timeout ended the wait.
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(),
            "origin " + s.url() + ": POST /v1/chunks/batch: stalled: no bytes for 1000 ms");
}

TEST(RemoteChunkStore, ManyThreadsPutAndGetConcurrently) {
  FakeOrigin origin;
  origin.Start();
  RemoteChunkStore store(Client(origin.url()));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        auto data = RandomBytes(4096 + static_cast<size_t>(i), static_cast<uint64_t>(t * 1000 + i));
        Digest id = Digest::Of(data);
        if (!store.Put(id, data).ok()) ++errors;
        auto got = store.Get(id);
        if (!got || *got != data) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(origin.store.size(), 320u);
}

}  // namespace
}  // namespace bdn::remote
