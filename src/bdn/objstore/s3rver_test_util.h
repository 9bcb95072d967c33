// A real S3-compatible server for the object-store tests: s3rver (pinned in tests/npm, installed
// by scripts/setup.sh) behind the SigV4-checking proxy (tests/fixtures/s3_proxy.py), each started
// on a free port of 127.0.0.1 for the test and stopped after it. Test-only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bdn/http/client.h"
#include "bdn/objstore/s3_client.h"

#ifndef BDN_SOURCE_DIR
#error "BDN_SOURCE_DIR must name the source tree (tests/npm, tests/fixtures)"
#endif

extern char** environ;

namespace bdn::objstore::testutil {

// The key pair the proxy knows (it checks signatures; s3rver takes anything).
inline constexpr char kAccessKey[] = "AKIDBDNOBJSTORE";
inline constexpr char kSecretKey[] = "bdn-objstore-test-secret";

class S3rver {
 public:
  // Starts both under `dir` (a fresh private directory). Fails the test (ADD_FAILURE) when
  // node, s3rver or python3 is missing; ok() then says so.
  explicit S3rver(const std::filesystem::path& dir) : dir_(dir) {
    const std::filesystem::path src = BDN_SOURCE_DIR;
    const std::string js = (src / "tests/npm/node_modules/s3rver/bin/s3rver.js").string();
    if (!std::filesystem::exists(js)) {
      ADD_FAILURE() << js << " is missing: run scripts/setup.sh (npm ci in tests/npm)";
      return;
    }
    const int port = FreePort();
    std::filesystem::create_directories(dir_ / "s3rver");
    s3rver_pid_ = Spawn({"node", "--openssl-legacy-provider", js, "-d", (dir_ / "s3rver").string(),
                         "-a", "127.0.0.1", "-p", std::to_string(port), "-s",
                         "--allow-mismatched-signatures", "--no-vhost-buckets"},
                        dir_ / "s3rver.log");
    s3rver_url_ = "http://127.0.0.1:" + std::to_string(port);
    if (!WaitForPort(port)) {
      ADD_FAILURE() << "s3rver did not start: " << Slurp(dir_ / "s3rver.log");
      return;
    }
    std::ofstream(dir_ / "proxy.json") << nlohmann::json{
        {"upstream", s3rver_url_},
        {"keys", {{kAccessKey, kSecretKey}}},
        {"regions",
         {"us-east-1", "eu-west-1"}}}.dump();
    proxy_pid_ = Spawn({"python3", (src / "tests/fixtures/s3_proxy.py").string(),
                        (dir_ / "proxy.json").string(), (dir_ / "proxy.port").string()},
                       dir_ / "proxy.log");
    for (int i = 0; i < 600 && !std::filesystem::exists(dir_ / "proxy.port"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!std::filesystem::exists(dir_ / "proxy.port")) {
      ADD_FAILURE() << "the proxy did not start: " << Slurp(dir_ / "proxy.log");
      return;
    }
    proxy_url_ = "http://127.0.0.1:" + Slurp(dir_ / "proxy.port");
    ok_ = true;
  }
  ~S3rver() {
    // A failed test shows what the servers said (tracebacks, a crash), which is gone with `dir`.
    if (::testing::Test::HasFailure()) {
      for (const char* log : {"proxy.log", "s3rver.log"}) {
        std::string text = Slurp(dir_ / log);
        if (text.size() > 8192) text = "..." + text.substr(text.size() - 8192);
        if (!text.empty()) std::cerr << "---- " << log << " ----\n" << text << "\n";
      }
    }
    for (pid_t pid : {proxy_pid_, s3rver_pid_}) {
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  bool ok() const { return ok_; }
  // The proxy (what the store under test talks to) and s3rver itself (for the test's own
  // unsigned requests: making buckets, damaging objects behind the store's back).
  const std::string& url() const { return proxy_url_; }
  const std::string& direct_url() const { return s3rver_url_; }

  // Creates `bucket` (directly on s3rver). Fails the test on an error.
  void MakeBucket(const std::string& bucket) {
    auto r = Direct().Call({.method = http::Method::kPut, .path = "/" + bucket});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
  }
  // The bytes of `bucket`/`key`, directly; nullopt when it does not exist.
  std::optional<std::vector<uint8_t>> GetObject(const std::string& bucket, const std::string& key) {
    auto r = Direct().Send({.method = http::Method::kGet, .path = "/" + bucket + "/" + key});
    if (!r || r->status != 200) return std::nullopt;
    return std::move(r->body);
  }
  void PutObject(const std::string& bucket, const std::string& key, std::span<const uint8_t> data) {
    auto r = Direct().Call({.method = http::Method::kPut,
                            .path = "/" + bucket + "/" + key,
                            .body = data,
                            .content_type = "application/octet-stream"});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
  }
  void DeleteObject(const std::string& bucket, const std::string& key) {
    auto r = Direct().Call({.method = http::Method::kDelete, .path = "/" + bucket + "/" + key});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
  }
  // Every key of `bucket` (one page: the tests keep fewer than 1,000).
  std::vector<std::string> Keys(const std::string& bucket) {
    auto r = Direct().Call({.path = "/" + bucket + "?list-type=2"});
    std::vector<std::string> keys;
    if (!r) return keys;
    auto page = ParseS3ListPage(r->text());
    if (!page) return keys;
    for (const auto& o : page->objects) keys.push_back(o.key);
    return keys;
  }

  // The proxy's counters (tests/fixtures/s3_proxy.py /_stats) and faults (/_faults).
  nlohmann::json Stats() {
    auto r = Proxy().Call({.path = "/_stats"});
    return r ? nlohmann::json::parse(r->text()) : nlohmann::json::object();
  }
  void ResetStats() {
    auto reset = Proxy().Call({.method = http::Method::kPost, .path = "/_stats/reset"});
    // The counts a test reads next would be wrong.
    if (!reset) ADD_FAILURE() << "s3rver: resetting its stats: " << reset.error().ToString();
  }
  void SetFaults(const nlohmann::json& rules) {
    const std::string body = rules.dump();
    auto r = Proxy().Call({.method = http::Method::kPost,
                           .path = "/_faults",
                           .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()}});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
  }

  // Lets requests held by a "hold" or "hold_after" fault go on.
  void Release() {
    auto r = Proxy().Call({.method = http::Method::kPost, .path = "/_release"});
    if (!r) ADD_FAILURE() << "s3rver: releasing held requests: " << r.error().ToString();
  }

  // Client options for `bucket`/`prefix` through the proxy with the proxy's key pair.
  S3ClientOptions ClientOptions(const std::string& bucket, const std::string& prefix = "") const {
    S3ClientOptions o;
    o.location.bucket = bucket;
    o.location.prefix = prefix;
    o.location.endpoint = proxy_url_;
    o.location.region = "us-east-1";
    o.credentials = {kAccessKey, kSecretKey, "", ""};
    o.initial_backoff = std::chrono::milliseconds(10);
    o.max_backoff = std::chrono::milliseconds(200);
    return o;
  }

 private:
  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  static bool WaitForPort(int port) {
    for (int i = 0; i < 600; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Runs `argv` under `setpriv --pdeathsig KILL` (util-linux, in every Debian): a test that dies
  // without its destructor running (an abort, a timeout's SIGKILL) takes its servers with it.
  static pid_t Spawn(std::vector<std::string> argv, const std::filesystem::path& log) {
    argv.insert(argv.begin(), {"setpriv", "--pdeathsig", "KILL", "--"});
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
  }
  static std::string Slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  http::HttpClient& Direct() {
    if (!direct_) direct_ = std::move(*http::HttpClient::Create({.base_url = s3rver_url_}));
    return *direct_;
  }
  http::HttpClient& Proxy() {
    if (!proxy_) proxy_ = std::move(*http::HttpClient::Create({.base_url = proxy_url_}));
    return *proxy_;
  }

  std::filesystem::path dir_;
  pid_t s3rver_pid_ = -1, proxy_pid_ = -1;
  std::string s3rver_url_, proxy_url_;
  bool ok_ = false;
  std::unique_ptr<http::HttpClient> direct_, proxy_;
};

}  // namespace bdn::objstore::testutil
