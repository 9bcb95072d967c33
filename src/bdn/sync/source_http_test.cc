// The HTTP sources (hf://, s3://, https://) against fake servers in this process (http::Server on
// 127.0.0.1): answers that are hostile or broken end the listing or the stream with a message
// naming the source and what was wrong, never with a crash, a loop without end or other bytes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bdn/http/server.h"
#include "bdn/sync/hf_source.h"
#include "bdn/sync/http_fetch.h"
#include "bdn/sync/source.h"
#include "bdn/testing/fake_clock.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::sync {
namespace {

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";

// One fake server answering every GET (and HEAD) with `handler`; counts the requests.
class FakeServer {
 public:
  using Handler = std::function<void(const http::ServerRequest&, http::ServerResponse&)>;
  explicit FakeServer(Handler handler)
      : handler_(std::move(handler)),
        server_(http::ServerOptions{.listen = "127.0.0.1:0", .threads = 8, .io_threads = 1}) {
    server_.Get(".*", "any", [this](const http::ServerRequest& req, http::ServerResponse& res) {
      requests_++;
      handler_(req, res);
    });
    EXPECT_OK(server_.Start());
  }
  std::string url() const { return server_.url(); }
  int requests() const { return requests_.load(); }

 private:
  Handler handler_;
  http::Server server_;
  std::atomic<int> requests_{0};
};

// A server that answers every request with `response` as it is: headers http::Server would not
// send (a Content-Length that is not the body's).
class RawServer {
 public:
  explicit RawServer(std::string response) : response_(std::move(response)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(0, ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a));
    EXPECT_EQ(0, ::listen(fd_, 8));
    EXPECT_EQ(0, ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len));
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string request;
        char buf[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::read(c, buf, sizeof buf);
          if (n <= 0) break;
          request.append(buf, static_cast<size_t>(n));
        }
        EXPECT_EQ(static_cast<ssize_t>(response_.size()),
                  ::write(c, response_.data(), response_.size()));
        ::close(c);
      }
    });
  }
  ~RawServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  const std::string response_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Options that fail fast: no retry waits, a fake clock.
SourceOptions FastOptions(std::shared_ptr<testutil::FakeClock> clock = nullptr) {
  SourceOptions o;
  o.retry.deadline = std::chrono::milliseconds(1);
  o.retry.clock = clock ? clock : std::make_shared<testutil::FakeClock>();
  return o;
}

// A Hub whose revision resolves to kCommit and whose tree pages `tree` answers.
FakeServer::Handler Hub(FakeServer::Handler tree) {
  return [tree](const http::ServerRequest& req, http::ServerResponse& res) {
    if (req.path.starts_with("/api/models/org/repo/revision/")) {
      res.set_content(std::string(R"({"sha": ")") + kCommit + R"("})", "application/json");
      return;
    }
    if (req.path.starts_with("/api/models/org/repo/tree/")) return tree(req, res);
    res.status = 404;
  };
}

Result<SourceListing> ListHf(const FakeServer& hub, const SourceOptions& options) {
  ::setenv("HF_ENDPOINT", hub.url().c_str(), 1);
  BDN_ASSIGN_OR_RETURN(auto source, OpenSource("hf://org/repo", options));
  return source->List();
}

Result<SourceListing> ListS3(const FakeServer& store, SourceOptions options) {
  options.endpoint = store.url();
  BDN_ASSIGN_OR_RETURN(auto source, OpenSource("s3://bucket/p", options));
  return source->List();
}

std::string S3Page(const std::string& contents, const std::string& next_token) {
  return "<ListBucketResult>" + contents + "<IsTruncated>" +
         (next_token.empty() ? "false" : "true") + "</IsTruncated>" +
         (next_token.empty()
              ? ""
              : "<NextContinuationToken>" + next_token + "</NextContinuationToken>") +
         "</ListBucketResult>";
}

std::string S3Object(const std::string& key, uint64_t size, const std::string& etag) {
  return "<Contents><Key>" + key + "</Key><Size>" + std::to_string(size) + "</Size><ETag>" + etag +
         "</ETag></Contents>";
}

// ---- Listing limits ----

TEST(HfListing, ANextLinkBackToAPageEndsTheListing) {
  FakeServer hub(Hub([](const http::ServerRequest& req, http::ServerResponse& res) {
    res.set_header("Link", "<" + req.path + "?cursor=1>; rel=\"next\"");
    res.set_content("[]", "application/json");
  }));
  auto r = ListHf(hub, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(
      "hf://org/repo: unexpected answer from the Hub: the tree listing's next-page link "
      "repeats (the listing would never end)",
      r.error().message());
  EXPECT_EQ("listing_too_large", r.error().reason());
  EXPECT_EQ(3, hub.requests());  // revision, the first page, the page of cursor 1
}

TEST(HfListing, EverNewLinksStopAtTheObjectLimit) {
  std::atomic<int> page{0};
  FakeServer hub(Hub([&](const http::ServerRequest& req, http::ServerResponse& res) {
    const int n = page++;
    res.set_header("Link", "<" + req.path + "?cursor=" + std::to_string(n + 1) + ">; rel=\"next\"");
    res.set_content(R"([{"type": "file", "path": "f)" + std::to_string(n) +
                        R"(", "size": 1, "oid": "0123456789abcdef0123456789abcdef01234567"}])",
                    "application/json");
  }));
  SourceOptions o = FastOptions();
  o.listing.max_objects = 5;
  auto r = ListHf(hub, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(
      "hf://org/repo: the listing exceeds 5 objects (the most one sync takes); sync a narrower "
      "prefix or --include less",
      r.error().message());
  EXPECT_EQ("listing_too_large", r.error().reason());
  EXPECT_EQ(6, page.load());
}

TEST(HfListing, TakesNoLongerThanItsDeadline) {
  auto clock = std::make_shared<testutil::FakeClock>();
  std::atomic<int> n{0};
  FakeServer hub(Hub([&](const http::ServerRequest& req, http::ServerResponse& res) {
    clock->Advance(std::chrono::minutes(1));
    res.set_header("Link", "<" + req.path + "?c=" + std::to_string(++n) + ">; rel=\"next\"");
    res.set_content(R"([{"type": "directory", "path": "d"}])", "application/json");
  }));
  SourceOptions o = FastOptions(clock);
  o.listing.deadline = std::chrono::minutes(10);
  auto r = ListHf(hub, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("hf://org/repo: listing took longer than 10m (the most one listing may take)",
            r.error().message());
  EXPECT_EQ("source_unavailable", r.error().reason());
}

// The same one-file page forever, each under a new link, ran for the whole hour of the listing
// deadline (or to a million objects), holding a runner.
TEST(HfListing, APageRepeatedUnderANewLinkEndsTheListingAtOnce) {
  std::atomic<int> page{0};
  FakeServer hub(Hub([&](const http::ServerRequest& req, http::ServerResponse& res) {
    const int n = ++page;
    res.set_header("Link", "<" + req.path + "?cursor=" + std::to_string(n) + ">; rel=\"next\"");
    res.set_content(
        R"([{"type": "file", "path": "f", "size": 1, "oid": "0123456789abcdef0123456789abcdef01234567"}])",
        "application/json");
  }));
  auto r = ListHf(hub, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("hf://org/repo: the listing names \"f\" twice", r.error().message());
  EXPECT_EQ("invalid_answer", r.error().reason());
  EXPECT_EQ(2, page.load());
}

TEST(S3Listing, APageRepeatedUnderANewTokenEndsTheListingAtOnce) {
  std::atomic<int> n{0};
  FakeServer store([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(S3Page(S3Object("p/a", 1, "\"e\"") + S3Object("p/b", 1, "\"e\""),
                           "t" + std::to_string(++n)),
                    "application/xml");
  });
  auto r = ListS3(store, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("s3://bucket/p: the listing names \"a\" twice", r.error().message());
  EXPECT_EQ("invalid_answer", r.error().reason());
  EXPECT_EQ(2, n.load());
}

// One 250 MB page of tiny entries cost 4 GB to parse (17 times its size) and got the server
// OOM-killed: a page past max_page_bytes is refused while it arrives, before it is parsed.
TEST(HfListing, APagePastThePageLimitIsRefusedBeforeItIsParsed) {
  std::string big = "[";
  const std::string entry = R"({"type":"file","path":"a","size":0},)";
  while (big.size() < (2u << 20)) big += entry;
  big.back() = ']';
  FakeServer hub(Hub([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(big, "application/json");
  }));
  SourceOptions o = FastOptions();
  o.listing.max_page_bytes = 1 << 20;
  auto r = ListHf(hub, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(std::string("hf://org/repo: GET /api/models/org/repo/tree/") + kCommit +
                "?recursive=true&expand=false: the answer exceeds 1.00 MiB (the most one listing "
                "page may hold)",
            r.error().message());
  EXPECT_EQ("listing_too_large", r.error().reason());
  EXPECT_EQ(2, hub.requests());  // revision, one page: never retried
}

// 200 MB of [[[…]]] cost 7.5 GB; the Hub's revision info was parsed whole, "siblings" and all.
TEST(HfListing, DeepJsonStopsTheParserAtSixteenLevels) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  FakeServer hub(Hub([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(deep, "application/json");
  }));
  auto r = ListHf(hub, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(
      "hf://org/repo: unexpected answer from the Hub: tree listing: the answer nests deeper than "
      "16 levels",
      r.error().message());
  EXPECT_EQ("invalid_answer", r.error().reason());

  FakeServer deep_info([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(std::string(R"({"sha": ")") + kCommit + R"(", "siblings": )" + deep + "}",
                    "application/json");
  });
  r = ListHf(deep_info, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(
      "hf://org/repo: unexpected answer from the Hub: revision info: the answer nests deeper "
      "than 16 levels",
      r.error().message());
}

TEST(S3Listing, EmptyPagesWithEverNewTokensEnd) {
  std::atomic<int> n{0};
  FakeServer store([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(S3Page("", "t" + std::to_string(++n)), "application/xml");
  });
  SourceOptions o = FastOptions();
  o.listing.max_empty_pages = 4;
  auto r = ListS3(store, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("s3://bucket/p: 4 listing pages in a row listed nothing (the listing would never end)",
            r.error().message());
  EXPECT_EQ("listing_too_large", r.error().reason());
  EXPECT_EQ(4, n.load());
}

TEST(S3Listing, LongKeysStopAtTheByteLimit) {
  std::atomic<int> n{0};
  const std::string long_name(60'000, 'k');
  FakeServer store([&](const http::ServerRequest&, http::ServerResponse& res) {
    const int i = ++n;
    res.set_content(
        S3Page(S3Object("p/" + long_name + std::to_string(i), 1, "\"e\""), "t" + std::to_string(i)),
        "application/xml");
  });
  SourceOptions o = FastOptions();
  o.listing.max_bytes = 1 << 20;
  auto r = ListS3(store, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(
      "s3://bucket/p: the listing's answers exceed 1.00 MiB (the most one sync reads); sync a "
      "narrower prefix",
      r.error().message());
  EXPECT_EQ("listing_too_large", r.error().reason());
  EXPECT_EQ(18, n.load());  // 17 pages of 60 KB fit in 1 MiB
}

TEST(HttpFetcher, NeverSendsAHeaderWithControlCharacters) {
  FakeServer server([](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content("x", "text/plain");
  });
  HttpFetcher fetcher(FetcherOptions{.source = "s3://b/p", .source_options = FastOptions()});
  auto r = fetcher.Fetch(
      {.url = server.url() + "/b/p/a", .headers = {{"If-Match", "\"e\"\r\nX-Injected: 1"}}});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("s3://b/p: header \"If-Match\" holds control characters; not sent",
            r.error().message());
  EXPECT_EQ(0, server.requests());
}

// 18446744073709551621 was added up digit by digit and wrapped to 5.
TEST(HttpsListing, RefusesAContentLengthPast64Bits) {
  RawServer server(
      "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551621\r\nConnection: close\r\n\r\n");
  const std::string uri = server.url() + "/f.bin";
  auto source = OpenSource(uri, FastOptions());
  ASSERT_OK(source);
  auto r = (*source)->List();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(uri +
                ": HEAD: bad Content-Length \"18446744073709551621\" (expected a byte count of at "
                "most 19 digits)",
            r.error().message());
}

// Reads `stream` to its end: the bytes, or the first error.
Result<std::string> ReadAll(ByteStream& stream) {
  std::string out;
  uint8_t buf[65536];
  while (true) {
    BDN_ASSIGN_OR_RETURN(size_t n, stream.Read(buf));
    if (n == 0) break;
    out.append(reinterpret_cast<const char*>(buf), n);
  }
  BDN_RETURN_IF_ERROR(stream.Finish());
  return out;
}

// A junk tree (entries that are not objects, other types, nothing at all) sealed an empty version
// and moved the tag.
TEST(HfListing, RefusesJunkEntriesAndAnEmptyTree) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([{"type": "directory", "path": "d"}, 1])",
       "hf://org/repo: unexpected answer from the Hub: tree entry #2 is not an object"},
      {R"(["a.bin"])",
       "hf://org/repo: unexpected answer from the Hub: tree entry #1 is not an object"},
      {R"([{"type": "symlink", "path": "a", "size": 1}])",
       "hf://org/repo: unexpected answer from the Hub: tree entry #1 has type \"symlink\", not "
       "\"file\" or \"directory\""},
      {R"([{"path": "a", "size": 1}])",
       "hf://org/repo: unexpected answer from the Hub: tree entry #1 has type (none), not "
       "\"file\" or \"directory\""},
      {R"([{"type": "file", "path": "a", "size": -1}])",
       "hf://org/repo: unexpected answer from the Hub: tree entry #1 is a file without a path or "
       "size"},
  };
  for (const auto& [tree, message] : cases) {
    FakeServer hub(Hub([&](const http::ServerRequest&, http::ServerResponse& res) {
      res.set_content(tree, "application/json");
    }));
    auto r = ListHf(hub, FastOptions());
    ASSERT_FALSE(r.has_value()) << tree;
    EXPECT_EQ(message, r.error().message()) << tree;
    EXPECT_EQ("invalid_answer", r.error().reason()) << tree;
  }
  for (const std::string tree : {"[]", R"([{"type": "directory", "path": "d"}])"}) {
    FakeServer hub(Hub([&](const http::ServerRequest&, http::ServerResponse& res) {
      res.set_content(tree, "application/json");
    }));
    auto r = ListHf(hub, FastOptions());
    ASSERT_FALSE(r.has_value()) << tree;
    EXPECT_EQ(std::string("hf://org/repo: the repository has no files at commit ") + kCommit,
              r.error().message());
    EXPECT_EQ("source_not_found", r.error().reason());
  }
}

// Two entries of one path were merged (either kept), then blamed as "changed during the sync".
TEST(HfListing, RefusesAPathListedTwice) {
  FakeServer hub(Hub([](const http::ServerRequest&, http::ServerResponse& res) {
    const std::string oid = "0123456789abcdef0123456789abcdef0123456";
    res.set_content(R"([{"type": "file", "path": "a", "size": 1, "oid": ")" + oid + R"(1"},
                        {"type": "file", "path": "b", "size": 1, "oid": ")" +
                        oid + R"(2"},
                        {"type": "file", "path": "a", "size": 2, "oid": ")" +
                        oid + R"(3"}])",
                    "application/json");
  }));
  auto r = ListHf(hub, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("hf://org/repo: the listing names \"a\" twice", r.error().message());
}

// The LFS sha256 was never checked: a CDN serving other bytes under the right headers was sealed.
TEST(HfObject, BytesThatAreNotTheListedLfsSha256Fail) {
  // printf good | sha256sum
  const std::string good_sha = "770e607624d689265ca6c44884d0807d9b054d23c473c106c72be9de08b7376c";
  std::atomic<bool> evil{true};
  auto tree = [&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(R"([{"type": "file", "path": "w.bin", "size": 4, "oid": "x",
                         "lfs": {"oid": ")" +
                        good_sha + R"(", "size": 4}}])",
                    "application/json");
  };
  auto hub = Hub(tree);
  FakeServer server([&](const http::ServerRequest& req, http::ServerResponse& res) {
    if (!req.path.starts_with("/org/repo/resolve/")) return hub(req, res);
    res.set_header("ETag", "\"" + good_sha + "\"");
    res.set_content(evil ? "evil" : "good", "application/octet-stream");
  });
  ::setenv("HF_ENDPOINT", server.url().c_str(), 1);
  auto source = OpenSource("hf://org/repo", FastOptions());
  ASSERT_OK(source);
  auto listing = (*source)->List();
  ASSERT_OK(listing);
  ASSERT_EQ(1u, listing->objects.size());
  EXPECT_EQ(good_sha, listing->objects[0].etag);
  auto stream = (*source)->Open(listing->objects[0], 0);
  ASSERT_OK(stream);
  auto bytes = ReadAll(**stream);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(
      "hf://org/repo: file \"w.bin\": its bytes have SHA-256 "
      "b5c1fb2efc6d6b4674c2fdcc48ce01b43a3b7c03763c0c3355de0099ee0f8c73, not the " +
          good_sha + " the Hub lists (lfs.oid)",
      bytes.error().message());
  EXPECT_EQ("source_changed", bytes.error().reason());
  evil = false;
  stream = (*source)->Open(listing->objects[0], 0);
  ASSERT_OK(stream);
  bytes = ReadAll(**stream);
  ASSERT_OK(bytes);
  EXPECT_EQ("good", *bytes);
}

constexpr char kGoodSha256[] = "770e607624d689265ca6c44884d0807d9b054d23c473c106c72be9de08b7376c";
constexpr char kGoodBlob[] = "476e93d5714117cb50143dbe653f4b2b5a1d4b18";  // git blob id of "good"

// A Hub listing `tree`, whose file requests (/org/repo/resolve/..., /cdn/...) `files` answers.
FakeServer::Handler HubFiles(std::string tree, FakeServer::Handler files) {
  auto hub = Hub([tree](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(tree, "application/json");
  });
  return [hub, files](const http::ServerRequest& req, http::ServerResponse& res) {
    if (req.path.starts_with("/org/repo/resolve/") || req.path.starts_with("/cdn/")) {
      return files(req, res);
    }
    hub(req, res);
  };
}

// Lists hf://org/repo at `hub` and reads its only file from `offset`.
Result<std::string> ReadHfFile(const FakeServer& hub, uint64_t offset = 0,
                               SourceOptions options = FastOptions()) {
  ::setenv("HF_ENDPOINT", hub.url().c_str(), 1);
  BDN_ASSIGN_OR_RETURN(auto source, OpenSource("hf://org/repo", options));
  BDN_ASSIGN_OR_RETURN(SourceListing listing, source->List());
  if (listing.objects.size() != 1) return Err(InternalError("not one file"));
  BDN_ASSIGN_OR_RETURN(auto stream, source->Open(listing.objects[0], offset));
  return ReadAll(*stream);
}

// An lfs.oid in upper case or as "sha256:<hex>" was not 64 lower-case hex digits, so the bytes
// were never hashed: a CDN serving other bytes was sealed.
TEST(HfObject, AnLfsOidInAnotherSpellingIsStillChecked) {
  std::string upper = kGoodSha256;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& oid : {upper, "sha256:" + std::string(kGoodSha256)}) {
    const std::string tree = R"([{"type": "file", "path": "w.bin", "size": 4, "oid": "x",
                                  "lfs": {"oid": ")" +
                             oid + R"(", "size": 4}}])";
    FakeServer hub(HubFiles(tree, [&](const http::ServerRequest& req, http::ServerResponse& res) {
      if (req.path.starts_with("/cdn/")) return res.set_content("evil", "application/x");
      res.status = 302;
      res.set_header("Location", "/cdn/w.bin");
      res.set_header("X-Linked-Etag", "\"" + oid + "\"");
      res.set_header("X-Linked-Size", "4");
    }));
    ::setenv("HF_ENDPOINT", hub.url().c_str(), 1);
    auto listing = ListHf(hub, FastOptions());
    ASSERT_OK(listing);
    EXPECT_EQ(kGoodSha256, listing->objects[0].etag) << oid;
    auto bytes = ReadHfFile(hub);
    ASSERT_FALSE(bytes.has_value()) << oid;
    EXPECT_EQ(
        "hf://org/repo: file \"w.bin\": its bytes have SHA-256 "
        "b5c1fb2efc6d6b4674c2fdcc48ce01b43a3b7c03763c0c3355de0099ee0f8c73, not the " +
            std::string(kGoodSha256) + " the Hub lists (lfs.oid)",
        bytes.error().message());
    EXPECT_EQ("source_changed", bytes.error().reason());
  }
}

// Ids no check can use would leave the bytes unchecked: they are refused.
TEST(HfListing, RefusesAFileWhoseIdCannotCheckItsBytes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "file", "path": "a", "size": 1, "oid": "x", "lfs": {"oid": "abc", "size": 1}})",
       "tree entry #1 (\"a\") has lfs.oid \"abc\", not a SHA-256 (64 hex digits)"},
      {R"({"type": "file", "path": "a", "size": 1, "oid": "x", "lfs": {"size": 1}})",
       "tree entry #1 (\"a\") has lfs.oid \"\", not a SHA-256 (64 hex digits)"},
      {R"({"type": "file", "path": "a", "size": 1, "oid": "md5:0123"})",
       "tree entry #1 (\"a\") has oid \"md5:0123\", not a git blob id (40 hex digits)"},
      {R"({"type": "file", "path": "a", "size": 1})",
       "tree entry #1 (\"a\") has oid \"\", not a git blob id (40 hex digits)"},
  };
  for (const auto& [entry, message] : cases) {
    FakeServer hub(Hub([&](const http::ServerRequest&, http::ServerResponse& res) {
      res.set_content("[" + entry + "]", "application/json");
    }));
    auto r = ListHf(hub, FastOptions());
    ASSERT_FALSE(r.has_value()) << entry;
    EXPECT_EQ("hf://org/repo: unexpected answer from the Hub: " + message, r.error().message());
    EXPECT_EQ("invalid_answer", r.error().reason());
  }
}

// A plain file's bytes were never checked against its git blob id: a Hub answering other bytes
// under ETag = the listed oid was sealed.
TEST(HfObject, BytesThatAreNotTheListedGitBlobFail) {
  const std::string tree = std::string(R"([{"type": "file", "path": "config.json", "size": 4,
                                           "oid": ")") +
                           kGoodBlob + R"("}])";
  std::atomic<bool> evil{true};
  FakeServer hub(HubFiles(tree, [&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_header("ETag", std::string("\"") + kGoodBlob + "\"");
    res.set_content(evil ? "evil" : "good", "application/x");
  }));
  auto bytes = ReadHfFile(hub);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(
      "hf://org/repo: file \"config.json\": its bytes have git blob id "
      "e3d35f18560c0f2a1125f8c8ba9a8210c6321ccf, not the " +
          std::string(kGoodBlob) + " the Hub lists (oid)",
      bytes.error().message());
  EXPECT_EQ("source_changed", bytes.error().reason());
  // Opened mid-file, the bytes before the offset are read and hashed too.
  bytes = ReadHfFile(hub, 2);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ("source_changed", bytes.error().reason());
  evil = false;
  EXPECT_EQ("good", ReadHfFile(hub).value_or("(failed)"));
  EXPECT_EQ("od", ReadHfFile(hub, 2).value_or("(failed)"));
}

// A body cut off and resumed: the first try's redirect stated the right id, the retry's none,
// and the retry's answer (another ETag, other bytes) was never compared, as a flag of the first
// try said "checked".
TEST(HfObject, EachResumptionChecksItsOwnAnswer) {
  const std::string good_blob = "549021c3d03adf664046806d67f0c19f5588b538";   // "good-bytes"
  const std::string other_blob = "0be425b3eef0d8494fa8f0ee3582118c491e1130";  // "evil-bytes"
  const std::string tree =
      R"([{"type": "file", "path": "w.bin", "size": 10, "oid": ")" + good_blob + R"("}])";
  std::atomic<int> resolves{0};
  FakeServer hub(HubFiles(tree, [&](const http::ServerRequest& req, http::ServerResponse& res) {
    if (req.path.starts_with("/org/repo/resolve/")) {
      res.status = 302;
      res.set_header("Location", "/cdn/w.bin");
      if (++resolves == 1) res.set_header("X-Linked-Etag", "\"" + good_blob + "\"");
      return;
    }
    if (resolves == 1) {  // "good" and then the connection breaks
      res.set_chunked_content_provider("application/x", [](size_t offset, http::DataSink& sink) {
        return offset == 0 && sink.write("good", 4);
      });
      return;
    }
    res.status = 206;
    res.set_header("Content-Range", "bytes 4-9/10");
    res.set_header("ETag", "\"" + other_blob + "\"");
    res.set_content("-BYTES", "application/x");
  }));
  SourceOptions o = FastOptions();
  o.retry.deadline = std::chrono::milliseconds(60'000);
  o.retry.initial_backoff = std::chrono::milliseconds(0);
  auto bytes = ReadHfFile(hub, 0, o);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ("hf://org/repo: file \"w.bin\": changed during the sync (etag " + good_blob +
                " listed, " + other_blob + " now)",
            bytes.error().message());
  EXPECT_EQ("source_changed", bytes.error().reason());
  EXPECT_EQ(2, resolves.load());
}

// A server answering every ranged GET of a part with 200 and the whole object had each part read
// from byte 0 (a 72 MiB object: 360 MiB fetched).
TEST(RangedObjectStream, AServerIgnoringRangeIsReadOnce) {
  std::string body(64 * 1024, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + i / 251);
  std::atomic<int> ranged{0};
  FakeServer server([&](const http::ServerRequest& req, http::ServerResponse& res) {
    if (req.has_header("Range")) ranged++;
    res.set_content(body, "application/octet-stream");  // the whole object, whatever was asked
  });
  std::atomic<uint64_t> fetched{0};
  SourceOptions o = FastOptions();
  o.bytes_fetched = &fetched;
  auto fetcher =
      std::make_shared<HttpFetcher>(FetcherOptions{.source = "s3://b/p", .source_options = o});
  ObjectRequest req;
  req.url = server.url() + "/b/p/big.bin";
  req.object = {"big.bin", body.size(), ""};
  RangedObjectStream stream(fetcher, req, 4096, 4);
  auto bytes = ReadAll(stream);
  ASSERT_OK(bytes);
  EXPECT_TRUE(*bytes == body);
  EXPECT_EQ(body.size(), fetched.load());  // the parts stop at the 200's header
  EXPECT_LE(ranged.load(), 4);
  EXPECT_EQ(ranged.load() + 1, server.requests());
}

// Serves `size` bytes of "version n" for the n-th GET (ranged or whole), under ETag "v<n>": a
// store answering each request from another version of one object.
FakeServer::Handler Versioned(uint64_t size, std::atomic<int>& gets) {
  return [size, &gets](const http::ServerRequest& req, http::ServerResponse& res) {
    if (req.path.ends_with("/bucket")) {  // the listing: no ETag
      res.set_content(S3Page("<Contents><Key>p/big.bin</Key><Size>" + std::to_string(size) +
                                 "</Size></Contents>",
                             ""),
                      "application/xml");
      return;
    }
    const int n = ++gets;
    uint64_t first = 0, last = size - 1;
    if (req.has_header("Range")) {
      auto range = http::ParseRange(req.get_header_value("Range"), size);
      first = (*range)->offset;
      last = first + (*range)->length - 1;
      res.status = 206;
      res.set_header("Content-Range", "bytes " + std::to_string(first) + "-" +
                                          std::to_string(last) + "/" + std::to_string(size));
    }
    res.set_header("ETag", "\"v" + std::to_string(n) + "\"");
    res.set_content(std::string(last - first + 1, static_cast<char>('a' + n)),
                    "application/octet-stream");
  };
}

// An object listed without an ETag was sealed from 10 versions: each 8 MiB part of it answered
// another ETag and other bytes, and was compared only with the listing's (empty) etag.
TEST(RangedObjectStream, PartsFromAnotherVersionThanTheFirstFail) {
  std::atomic<int> gets{0};
  FakeServer server(Versioned(64 * 1024, gets));
  auto fetcher = std::make_shared<HttpFetcher>(
      FetcherOptions{.source = "s3://b/p", .source_options = FastOptions()});
  ObjectRequest req;
  req.url = server.url() + "/bucket/p/big.bin";
  req.object = {"big.bin", 64 * 1024, ""};
  req.pin = std::make_shared<ValidatorPin>();
  RangedObjectStream stream(fetcher, req, 4096, 4);
  auto bytes = ReadAll(stream);
  ASSERT_FALSE(bytes.has_value());
  // Which part answers first is a race; any one of them pins the others.
  EXPECT_TRUE(bytes.error().message().starts_with(
      "s3://b/p: object \"big.bin\": changed during the sync (its first answer had ETag \"v"))
      << bytes.error().message();
  EXPECT_EQ("source_changed", bytes.error().reason());
}

// The same through an S3 source: a body cut off mid-object was resumed from another version.
TEST(S3Object, AResumptionFromAnotherVersionFails) {
  std::atomic<int> gets{0};
  auto versioned = Versioned(100'000, gets);
  FakeServer server([&](const http::ServerRequest& req, http::ServerResponse& res) {
    versioned(req, res);
    if (gets.load() == 1 && !req.path.ends_with("/bucket")) {
      // The first GET breaks off after 1000 bytes.
      std::string head = res.body.substr(0, 1000);
      res.body.clear();
      res.set_chunked_content_provider("application/octet-stream",
                                       [head](size_t offset, http::DataSink& sink) {
                                         if (offset > 0) return false;
                                         return sink.write(head.data(), head.size());
                                       });
    }
  });
  SourceOptions o = FastOptions();
  o.retry.deadline = std::chrono::milliseconds(60'000);
  o.retry.initial_backoff = std::chrono::milliseconds(0);
  auto listing = ListS3(server, o);
  ASSERT_OK(listing);
  ASSERT_EQ(1u, listing->objects.size());
  o.endpoint = server.url();
  auto source = OpenSource("s3://bucket/p", o);
  ASSERT_OK(source);
  auto stream = (*source)->Open(listing->objects[0], 0);
  ASSERT_OK(stream);
  auto bytes = ReadAll(**stream);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(
      "s3://bucket/p: object \"big.bin\": changed during the sync (its first answer had ETag "
      "\"v1\", this one ETag \"v2\")",
      bytes.error().message());
  EXPECT_EQ("source_changed", bytes.error().reason());
  EXPECT_EQ(2, gets.load());
}

// A password in HF_ENDPOINT was echoed into the job's stored error.
TEST(HfEndpoint, RefusesCredentialsWithoutShowingThem) {
  ::setenv("HF_ENDPOINT", "http://user:hunter2@127.0.0.1:1/", 1);
  const std::string message =
      "HF_ENDPOINT \"http://***@127.0.0.1:1\": credentials in the URL are refused (give a token "
      "with --auth-secret-name)";
  EXPECT_STATUS(HfEndpoint(), kInvalidArgument, message);
  auto source = OpenSource("hf://org/repo", FastOptions());
  ASSERT_FALSE(source.has_value());
  EXPECT_EQ(message, source.error().message());
  ::setenv("HF_ENDPOINT", "ftp://user:hunter2@h", 1);
  EXPECT_EQ("HF_ENDPOINT \"ftp://***@h\": must be http:// or https://",
            HfEndpoint().error().message());
  ::unsetenv("HF_ENDPOINT");
  EXPECT_EQ("https://huggingface.co", HfEndpoint().value_or(""));
}

TEST(HttpFetcher, ARedirectToAUrlWithCredentialsIsRefusedWithoutShowingThem) {
  FakeServer server([](const http::ServerRequest&, http::ServerResponse& res) {
    res.status = 302;
    res.set_header("Location", "http://user:hunter2@127.0.0.1:1/x");
  });
  const std::string uri = server.url() + "/f.bin";
  auto source = OpenSource(uri, FastOptions());
  ASSERT_OK(source);
  auto r = (*source)->List();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(uri + ": http://***@127.0.0.1:1/x: a URL with credentials (user:password@) is refused",
            r.error().message());
  EXPECT_EQ("http://***@b", http::ShownUrl("http://u:p@h:1/p?q=a@b"));
  // From attacking helper 122: a signature in a request's query was repeated in the job's error
  // (a listing's other parameters still show).
  EXPECT_EQ("/f?X-Amz-Signature=***&recursive=true&sig=***&token=***#***",
            http::WithoutSecretParams("/f?X-Amz-Signature=S1&recursive=true&sig=S2&token=S3#frag"));
  EXPECT_EQ("/tree?recursive=true&expand=false",
            http::WithoutSecretParams("/tree?recursive=true&expand=false"));
}

// An https:// source's secret goes to the source's host alone: a redirect to another host (a CDN,
// or a server the first one names) gets neither the token nor anything made from it.
TEST(HttpsSource, TheSecretNeverFollowsARedirectToAnotherHost) {
  std::mutex mu;
  std::vector<std::string> cdn_auth;
  FakeServer cdn([&](const http::ServerRequest& req, http::ServerResponse& res) {
    {
      std::lock_guard lock(mu);
      cdn_auth.push_back(req.get_header_value("Authorization"));
    }
    res.set_header("ETag", "\"e1\"");
    res.set_content("bytes", "application/octet-stream");
  });
  std::vector<std::string> origin_auth;
  FakeServer origin([&](const http::ServerRequest& req, http::ServerResponse& res) {
    {
      std::lock_guard lock(mu);
      origin_auth.push_back(req.get_header_value("Authorization"));
    }
    res.status = 302;
    res.set_header("Location", cdn.url() + "/blob");
  });
  SourceOptions options = FastOptions();
  options.secret = "tok_SECRET";
  auto source = OpenSource(origin.url() + "/f.bin", options);
  ASSERT_OK(source);
  auto listing = (*source)->List();
  ASSERT_OK(listing);
  ASSERT_EQ(1u, listing->objects.size());
  auto stream = (*source)->Open(listing->objects[0], 0);
  ASSERT_OK(stream);
  std::vector<uint8_t> buf(64);
  auto n = (*stream)->Read(buf);
  ASSERT_OK(n);
  EXPECT_EQ("bytes", std::string(buf.begin(), buf.begin() + static_cast<long>(*n)));
  std::lock_guard lock(mu);
  ASSERT_EQ(2u, origin_auth.size());  // the HEAD and the GET
  for (const auto& a : origin_auth) EXPECT_EQ("Bearer tok_SECRET", a);
  ASSERT_EQ(2u, cdn_auth.size());
  for (const auto& a : cdn_auth) EXPECT_EQ("", a);
}

// A redirect to file:// failed with "url \"file:///etc/passwd\": must be http:// or https://",
// naming neither the source nor the redirect.
TEST(HttpFetcher, ARedirectToAnotherSchemeIsNamed) {
  for (const std::string location : {"file:///etc/passwd", "gopher://h:70/x"}) {
    FakeServer server([&](const http::ServerRequest&, http::ServerResponse& res) {
      res.status = 302;
      res.set_header("Location", location);
    });
    const std::string uri = server.url() + "/f.bin";
    auto source = OpenSource(uri, FastOptions());
    ASSERT_OK(source);
    auto r = (*source)->List();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(uri + ": HEAD /f.bin: redirected to \"" + location +
                  "\", which is not an http:// or https:// URL",
              r.error().message());
  }
}

// "not XML: reference to invalid character number" named neither the request nor a way out.
TEST(S3Listing, AKeyXmlCannotCarryNamesThePageAndAWayOut) {
  FakeServer store([&](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_content(S3Page(S3Object("p/a&#1;b", 1, "\"e\""), ""), "application/xml");
  });
  auto r = ListS3(store, FastOptions());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("s3://bucket/p: unexpected listing from " + store.url() +
                "/bucket: page 1 (GET /bucket?list-type=2&prefix=p%2F): not XML: reference to "
                "invalid character number at line 1; a key there may hold a character XML "
                "cannot carry (a control character): sync a prefix that leaves it out",
            r.error().message());
  EXPECT_EQ("invalid_answer", r.error().reason());
}

TEST(ListingLimits, DefaultsAreDocumented) {
  ListingLimits l;
  EXPECT_EQ(1'000'000u, l.max_objects);
  EXPECT_EQ(uint64_t{256} << 20, l.max_bytes);
  EXPECT_EQ(uint64_t{32} << 20, l.max_page_bytes);
  EXPECT_EQ(100, l.max_empty_pages);
  EXPECT_EQ(std::chrono::hours(1), l.deadline);
}

// The object w.bin of `size` bytes of https://files.example, read from `server` whole through
// one HttpObjectStream under `o`.
Result<std::string> ReadWholeBody(const FakeServer& server, uint64_t size, const SourceOptions& o) {
  auto fetcher = std::make_shared<HttpFetcher>(
      FetcherOptions{.source = "https://files.example/w.bin", .source_options = o});
  ObjectRequest req;
  req.url = server.url() + "/w.bin";
  req.object = {"w.bin", size, ""};
  HttpObjectStream stream(fetcher, req);
  return ReadAll(stream);
}

// A source that answered with a size and then sent its body a byte a second held its job's
// runner for as long as it went on (a stall was only a second without a byte): one namespace's
// jobs could keep every other namespace's waiting. A body slower than the floor now fails as a
// stall, which the retry loop treats like any other.
TEST(HttpObjectStream, ABodySlowerThanTheFloorFailsAsStalled) {
  constexpr size_t kSize = 2000;  // 20 bytes a second: 100 s without the floor
  FakeServer server([](const http::ServerRequest&, http::ServerResponse& res) {
    res.set_chunked_content_provider("application/octet-stream",
                                     [](size_t offset, http::DataSink& sink) {
                                       if (offset == kSize) {
                                         sink.done();
                                         return true;
                                       }
                                       std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                       return sink.write("x", 1);
                                     });
  });
  SourceOptions o = FastOptions();
  o.min_body_bytes_per_second = 1024;
  o.body_stall_timeout = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  auto bytes = ReadWholeBody(server, kSize, o);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ("https://files.example/w.bin " + server.url() +
                ": GET /w.bin: stalled: slower than 1.00 KiB/s for 1000 ms (retried for 0s)",
            bytes.error().message());
  EXPECT_EQ(StatusCode::kDeadlineExceeded, bytes.error().code());
  EXPECT_EQ("source_unavailable", bytes.error().reason());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A source that declared a size, then sent 64 KiB and stalled on every request held its job for
// as long as it went on: each try counted as progress and started the retry deadline over,
// although it moved a few hundred bytes a second once the stall was counted. Progress now needs
// the floor's rate over the whole try; such a source fails at the deadline.
TEST(HttpObjectStream, ASourceThatStallsAfterEvery64KiBFailsAtTheDeadline) {
  static constexpr uint64_t kPiece = 65 * 1024;
  static constexpr uint64_t kSize = 40 * kPiece;  // read whole after 40 tries without the fix
  std::atomic<int> gets{0};
  FakeServer server([&gets](const http::ServerRequest& req, http::ServerResponse& res) {
    ++gets;
    uint64_t first = 0;
    if (req.has_header("Range")) {
      auto range = http::ParseRange(req.get_header_value("Range"), kSize);
      first = (*range)->offset;
      res.status = 206;
      res.set_header("Content-Range", "bytes " + std::to_string(first) + "-" +
                                          std::to_string(kSize - 1) + "/" + std::to_string(kSize));
    }
    res.set_chunked_content_provider(
        "application/octet-stream", [first](size_t offset, http::DataSink& sink) {
          if (offset >= kPiece) {  // this request's piece is sent: stall past the floor's time
            std::this_thread::sleep_for(std::chrono::milliseconds(2500));
            return false;
          }
          const std::string piece(std::min<uint64_t>(kPiece, kSize - first), 'p');
          return sink.write(piece.data(), piece.size());
        });
  });
  SourceOptions o = FastOptions();
  o.retry.clock = nullptr;  // real time: the deadline must pass while the tries go on
  o.retry.deadline = std::chrono::seconds(4);
  o.retry.initial_backoff = std::chrono::milliseconds(10);
  o.retry.max_backoff = std::chrono::milliseconds(20);
  o.min_body_bytes_per_second = 256 * 1024;
  o.body_stall_timeout = std::chrono::seconds(1);
  auto bytes = ReadWholeBody(server, kSize, o);
  ASSERT_FALSE(bytes.has_value()) << gets.load() << " requests";
  EXPECT_TRUE(bytes.error().message().starts_with("https://files.example/w.bin " + server.url() +
                                                  ": GET /w.bin: stalled: slower than 256.00 "
                                                  "KiB/s for 1000 ms (retried for "))
      << bytes.error().message();
  EXPECT_EQ("source_unavailable", bytes.error().reason());
  EXPECT_LE(gets.load(), 6);  // about one try a second until the 4 s deadline
}

TEST(SourceOptions, TheBodyFloorDefaultsAreDocumented) {
  SourceOptions o;
  EXPECT_EQ(16u * 1024, o.min_body_bytes_per_second);  // docs/sync.md, "Slow sources"
  EXPECT_EQ(std::chrono::seconds(60), o.body_stall_timeout);
}

}  // namespace
}  // namespace bdn::sync
