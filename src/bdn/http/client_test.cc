// HttpClient's stall bound (Request::stall_timeout) against raw sockets on 127.0.0.1: a server
// that never answers, and one that answers one byte at a time.
#include "bdn/http/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bdn::http {
namespace {

using namespace std::chrono_literals;

// A listening socket on 127.0.0.1 (connections wait in its backlog unless accepted).
struct Listener {
  int fd = -1;
  std::string url;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd, 16), 0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~Listener() { ::close(fd); }
};

// From an attacker: libcurl's low-speed limit, whose speed is an average over ~5 s, noticed a
// cache node's 1 s stall after 7 s, past the mount's read deadline. The client compares the
// byte counts itself now: the stall is noticed within about a second of its bound.
// The one split and port check of every URL bdn takes (HttpClient::Create, IsAuthority, a sync
// --endpoint): the port is all after the host's first ":", digits only, 1 to 65535.
TEST(SplitAuthority, CutsAtTheHostsFirstColonOrAfterTheBracket) {
  auto parts = SplitAuthority("u:SEKRET:8080");
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->host, "u");
  EXPECT_EQ(parts->port, "SEKRET:8080");
  parts = SplitAuthority("[::1]:8080");
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->host, "[::1]");
  EXPECT_EQ(parts->port, "8080");
  parts = SplitAuthority("h:");
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->port, "");
  parts = SplitAuthority("h");
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->host, "h");
  EXPECT_FALSE(parts->port.has_value());
  EXPECT_FALSE(SplitAuthority("[::1").has_value());
  EXPECT_FALSE(SplitAuthority("[::1]x").has_value());
  EXPECT_FALSE(SplitAuthority("[::1]8080").has_value());
}

TEST(ParsePort, TakesOnlyDigitsFrom1To65535) {
  EXPECT_EQ(ParsePort("1"), 1);
  EXPECT_EQ(ParsePort("8080"), 8080);
  EXPECT_EQ(ParsePort("65535"), 65535);
  EXPECT_EQ(ParsePort("00080"), 80);
  EXPECT_EQ(ParsePort("041517"), 41517);  // from attacking helper 127: refused past 5 characters
  EXPECT_EQ(ParsePort("00000000000000000000080"), 80);
  for (const std::string_view bad : {"", "0", "000", "65536", "099999", "+80", "-1", " 80", "80 ",
                                     "8080x", "0x50", "SEKRET", "18446744073709551697"}) {
    EXPECT_FALSE(ParsePort(bad).has_value()) << bad;
  }
}

TEST(HttpClient, AStallIsNoticedWithinASecondOfItsBound) {
  Listener server;
  auto client = HttpClient::Create({.base_url = server.url, .deadline = 30s});
  ASSERT_TRUE(client.has_value());
  const std::string body = "{\"ids\": []}";
  Request req{.method = Method::kPost,
              .path = "/v1/chunks/batch",
              .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
              .stall_timeout = 1000ms};
  const auto start = std::chrono::steady_clock::now();
  auto r = (*client)->Send(req);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(),
            "origin " + server.url + ": POST /v1/chunks/batch: stalled: no bytes for 1000 ms");
  EXPECT_GE(took, 1000ms);
  EXPECT_LT(took, 3500ms) << "libcurl's average noticed it after ~6 s";
}

// A body that keeps moving, however slowly, is no stall.
TEST(HttpClient, ABodyThatKeepsMovingIsNoStall) {
  Listener server;
  std::thread answer([&] {
    const int c = ::accept(server.fd, nullptr, nullptr);
    ASSERT_GE(c, 0);
    char buf[4096];
    (void)::recv(c, buf, sizeof buf, 0);  // the request (small: one read)
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n";
    ASSERT_EQ(::send(c, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    for (char ch : std::string("abcdefgh")) {
      std::this_thread::sleep_for(400ms);
      ASSERT_EQ(::send(c, &ch, 1, MSG_NOSIGNAL), 1);
    }
    ::close(c);
  });
  auto client = HttpClient::Create({.base_url = server.url, .deadline = 30s});
  ASSERT_TRUE(client.has_value());
  auto r = (*client)->Send({.method = Method::kGet, .path = "/slow", .stall_timeout = 1000ms});
  answer.join();
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(std::string(r->body.begin(), r->body.end()), "abcdefgh");
}

// From attacking helper 121: a node sending above the rate floor until the request's deadline
// was reported "stalled: slower than 1.00 KiB/s" (curl's deadline fired a millisecond early),
// and so skipped as a drip. A deadline is a deadline.
TEST(HttpClient, AnAnswerCutByTheDeadlineIsNoStall) {
  Listener server;
  std::atomic<bool> done{false};
  std::thread answer([&] {
    const int c = ::accept(server.fd, nullptr, nullptr);
    ASSERT_GE(c, 0);
    char buf[4096];
    (void)::recv(c, buf, sizeof buf, 0);
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
    ASSERT_EQ(::send(c, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    const std::string piece(400, 'x');  // 4 KiB/s, four times the floor
    while (!done && ::send(c, piece.data(), piece.size(), MSG_NOSIGNAL) > 0) {
      std::this_thread::sleep_for(100ms);
    }
    ::close(c);
  });
  auto client = HttpClient::Create({.base_url = server.url, .deadline = 30s});
  ASSERT_TRUE(client.has_value());
  auto r = (*client)->Send({.method = Method::kGet,
                            .path = "/batch",
                            .deadline = 1700ms,
                            .stall_timeout = 500ms,
                            .stall_bytes_per_second = 1024});
  done = true;
  answer.join();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(),
            "origin " + server.url + ": GET /batch: answer not complete within 1700 ms");
  EXPECT_FALSE(IsTooSlow(r.error()));
}

// From an attacker: ":0" and ":99999" were accepted as ports (as --peers and anywhere a URL is
// taken), and every request to them failed later.
TEST(HttpClient, APortIsOneTo65535) {
  for (const char* good :
       {"http://h:1", "http://h:65535/p", "https://[::1]:8441", "http://[::1]", "http://h"}) {
    EXPECT_TRUE(HttpClient::Create({.base_url = good}).has_value()) << good;
  }
  // A port that is no number is not quoted, in the URL either: it may be a password.
  for (const auto& [url, shown, port] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"http://h:0", "http://h:0", "0"},
           {"http://h:99999", "http://h:99999", "99999"},
           {"http://h:65536/x", "http://h:65536/x", "65536"},
           {"http://h:", "http://h:", ""},
           {"http://h:-1", "http://h:***", "***"},
           {"http://h:8a", "http://h:***", "***"},
           {"http://[::1]:0", "http://[::1]:0", "0"},
           {"http://h:1:2", "http://h:***", "***"}}) {
    auto c = HttpClient::Create({.base_url = url});
    ASSERT_FALSE(c.has_value()) << url;
    EXPECT_EQ(c.error().message(),
              "url \"" + shown + "\": port \"" + port + "\": must be 1 to 65535");
  }
  // From attacking helper 118: hosts that are neither a name nor a bracketed IPv6 address.
  // (What follows "]" other than ":port", and all after a "[" without "]", is not quoted: it may
  // be a password.)
  for (const auto& [url, shown, authority] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"http://[::1", "http://[***", "[***"},
           {"http://[::1]x:80", "http://[::1]:***", "[::1]:***"},
           {"http://[]:80", "http://[]:80", "[]:80"},
           {"http://[::1]]:80", "http://[::1]:***", "[::1]:***"},
           {"http://[:::80/p", "http://[***/p", "[***"},
           {"http://h]:80", "http://h]:80", "h]:80"},
           {"http://[h]:80", "http://[h]:80", "[h]:80"}}) {
    auto c = HttpClient::Create({.base_url = url});
    ASSERT_FALSE(c.has_value()) << url;
    EXPECT_EQ(c.error().message(), "url \"" + shown + "\": malformed host \"" + authority + "\"");
  }
  // An "@" in the path is no credentials.
  EXPECT_TRUE(HttpClient::Create({.base_url = "http://h:1/a@b"}).has_value());
}

// From attacking helper 119: "HTTPS://" passed as TLS to the check that compares the text, hosts
// that are no address ("[1]", a backslash, a control character, non-ASCII, 70,000 bytes) were
// accepted and failed at request time, an IPv6 zone was refused, and a password was repeated.
TEST(HttpClient, TheSchemeIsLowerCasedAndAHostIsAnAddressOrAName) {
  auto c = HttpClient::Create({.base_url = "HTTPS://Node.Example:8441/p/"});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ((*c)->base_url(), "https://node.example:8441/p");
  // One spelling per address (the cache nodes' rendezvous hashing, --peers' check for twins and
  // GET /v1/chain's loop check compare URLs): host in lower case, the default port dropped, a
  // port without leading zeros, an IPv6 zone (an interface name) as given, the path as given.
  for (const auto& [url, want] : std::vector<std::pair<std::string, std::string>>{
           {"http://Node:80/", "http://node"},
           {"https://NODE:443/P/", "https://node/P"},
           {"http://node:443", "http://node:443"},
           {"https://node:80", "https://node:80"},
           {"http://h:08441", "http://h:8441"},
           {"http://[FE80::1%25Eth0]:80/x", "http://[fe80::1%25Eth0]/x"},
           {"http://[::1]:8441", "http://[::1]:8441"},
       }) {
    auto n = HttpClient::Create({.base_url = url});
    ASSERT_TRUE(n.has_value()) << url << ": " << n.error().message();
    EXPECT_EQ((*n)->base_url(), want) << url;
  }
  for (const char* good : {"http://[fe80::1%25lo]:8441", "http://[::ffff:127.0.0.1]",
                           "http://my_host.internal", "http://10.0.0.1:80", "HtTp://h"}) {
    EXPECT_TRUE(HttpClient::Create({.base_url = good}).has_value()) << good;
  }
  for (const auto& [url, why] : std::vector<std::pair<std::string, std::string>>{
           {"http://[1]:80", "malformed host \"[1]:80\""},
           {"http://[:]:80", "malformed host \"[:]:80\""},
           {"http://[.]:80", "malformed host \"[.]:80\""},
           {"http://[fe80::1%25]:80", "malformed host \"[fe80::1%25]:80\""},
           {"http://\xc3\xbcn.example:80", "malformed host \"\xc3\xbcn.example:80\""},

           {"http://127.0.0.1\\:80", "holds a control character or a backslash"},
           {"http://127.0.0.1\x01:80", "holds a control character or a backslash"},
           {"http://h:80/a\tb", "holds a control character or a backslash"}}) {
    auto r = HttpClient::Create({.base_url = url});
    ASSERT_FALSE(r.has_value()) << url;
    EXPECT_EQ(r.error().message(), "url \"" + url + "\": " + why);
  }
  // A host with a "%" is not quoted: it may be a percent-encoded password ("u%3APW%40h").
  EXPECT_EQ(HttpClient::Create({.base_url = "http://h%41:80"}).error().message(),
            "url \"http://***\": malformed host \"***\"");
  EXPECT_TRUE(HttpClient::Create({.base_url = "http://" + std::string(253, 'a')}).has_value());
  EXPECT_FALSE(HttpClient::Create({.base_url = "http://" + std::string(254, 'a')}).has_value());
  auto long_host = HttpClient::Create({.base_url = "http://" + std::string(70000, 'a')});
  ASSERT_FALSE(long_host.has_value());
  EXPECT_EQ(long_host.error().message(),
            "url \"http://" + std::string(193, 'a') + "...\": host of 70000 bytes, at most 253");
  // A query may hold a credential too (from attacking helper 120: a presigned signature).
  EXPECT_EQ(ShownUrl("http://h:1/p?X-Amz-Signature=SECRETSIG"), "http://h:1/p?***");
  EXPECT_EQ(ShownUrl("http://u:pw@h:1#frag"), "http://***@h:1#***");
  // From attacking helper 121: credentials in a URL without "://", or with a "/" or "?" in the
  // password, were shown whole, and a part of the password was quoted as the port.
  EXPECT_EQ(ShownUrl("u:SEKRET@127.0.0.1:1"), "***@127.0.0.1:1");
  EXPECT_EQ(ShownUrl("http:/u:SEKRET@h:1"), "***@h:1");
  EXPECT_EQ(ShownUrl("//u:SEKRET@h:1"), "***@h:1");
  EXPECT_EQ(ShownUrl("http://u:SEK/RET@h:1/p"), "http://***@h:1/p");
  EXPECT_EQ(ShownUrl("http://u:SEK?RET@h:1/p"), "http://***@h:1/p");
  EXPECT_EQ(ShownUrl("http://h:1/p?a=b@c"), "http://***@c");
  // From attacking helper 123: a port that is no number may be a password.
  EXPECT_EQ(ShownUrl("http://h:SEKRET#x"), "http://h:***#***");
  EXPECT_EQ(ShownUrl("ftp://h:SEKRET/p"), "ftp://h:***/p");
  EXPECT_EQ(ShownUrl("h:SEKRET x"), "h:***");
  EXPECT_EQ(ShownUrl("http://u:p@h:SEKRET/p"), "http://***@h:***/p");
  EXPECT_EQ(ShownUrl("http://[::1]:8080/p?q"), "http://[::1]:8080/p?***");
  EXPECT_EQ(ShownUrl("http://[::1]/p"), "http://[::1]/p");
  EXPECT_EQ(ShownUrl("http://h:/p"), "http://h:/p");
  // From attacking helper 124: a user and password without "@" ("u:PW:port"), a "]" after the
  // colon, a percent-encoded "@", and URLs whose "//" or host is missing.
  EXPECT_EQ(ShownUrl("http://u:SEKRET:8080"), "http://u:***");
  EXPECT_EQ(ShownUrl("http://u:SEKRET:8080/p?q"), "http://u:***/p?***");
  EXPECT_EQ(ShownUrl("http://h:SEKRET]"), "http://h:***");
  EXPECT_EQ(ShownUrl("http://[::1]:SEKRET:1/p"), "http://[::1]:***/p");
  EXPECT_EQ(ShownUrl("http://[::1]SEKRET/p"), "http://[::1]:***/p");
  EXPECT_EQ(ShownUrl("http://u%3ASEKRET%40h/p"), "http://***");
  EXPECT_EQ(ShownUrl("http:/u:SEKRET"), "http:***");
  EXPECT_EQ(ShownUrl("http:///u:SEKRET"), "http://***");
  EXPECT_EQ(ShownUrl("u%3ASEKRET%40h"), "***");
  EXPECT_EQ(ShownUrl("localhost:8080/p"), "localhost:8080/p");
  EXPECT_EQ(ShownUrl("http://"), "http://");
  // From attacking helper 125: an unclosed "[" and a "://" inside a path.
  EXPECT_EQ(ShownUrl("http://[u:SEKRET"), "http://[***");
  EXPECT_EQ(ShownUrl("u:SEKRET/a://b"), "u:***");
  EXPECT_TRUE(IsAuthority("h:1"));
  EXPECT_TRUE(IsAuthority("[fe80::1%25eth0]:8080"));
  EXPECT_FALSE(IsAuthority("u:SEKRET:8080"));
  EXPECT_FALSE(IsAuthority("[u:SEKRET"));
  EXPECT_FALSE(IsAuthority("h:0"));
  for (const std::string url :
       {"http://u:SEKRET:8080", "http://h:SEKRET]", "http://[::1]:SEKRET:1", "http:/u:SEKRET",
        "http:///u:SEKRET", "http://u%3ASEKRET%40h", "HTTP://u:SEKRET:1/x"}) {
    auto r = HttpClient::Create({.base_url = url});
    ASSERT_FALSE(r.has_value()) << url;
    EXPECT_EQ(r.error().message().find("SEKRET"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(HttpClient::Create({.base_url = "http://h:SEKRET"}).error().message(),
            "url \"http://h:***\": port \"***\": must be 1 to 65535");
  EXPECT_EQ(HttpClient::Create({.base_url = "http://h:SEKRET#x"}).error().message(),
            "url \"http://h:***#***\": must be scheme://host[:port][/prefix], without "
            "credentials, query or fragment");
  EXPECT_EQ(HttpClient::Create({.base_url = "http://h:99999"}).error().message(),
            "url \"http://h:99999\": port \"99999\": must be 1 to 65535");
  for (const std::string url :
       {"u:SEKRET@127.0.0.1:1", "http://u:SEKRET/x@127.0.0.1:1", "http://[u:SEKRET/x@h",
        "http://u:SEKRET:1/x@h", "HTTP://u:SEKRET/x@h:1"}) {
    auto r = HttpClient::Create({.base_url = url});
    ASSERT_FALSE(r.has_value()) << url;
    EXPECT_EQ(r.error().message().find("SEKRET"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(HttpClient::Create({.base_url = "http://u:SEKRET/x@127.0.0.1:1"}).error().message(),
            "url \"http://***@127.0.0.1:1\": port \"***\": must be 1 to 65535");
  // Credentials are refused without being repeated.
  auto secret = HttpClient::Create({.base_url = "http://u:SEKRET@h:80/p"});
  ASSERT_FALSE(secret.has_value());
  EXPECT_EQ(secret.error().message(),
            "url \"http://***@h:80/p\": must be scheme://host[:port][/prefix], without "
            "credentials, query or fragment");
}

}  // namespace
}  // namespace bdn::http
