// Test helpers: a cpp-httplib server on 127.0.0.1 (ephemeral port) and a fake origin / cache
// node serving the chunk endpoints of docs/http-api.md from a MemChunkStore, with fault
// injection (error statuses, delays, wrong bytes) and request counters.
#pragma once

#include <httplib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "bdn/base/mutex.h"
#include "bdn/http/errors.h"
#include "bdn/store/chunk_store.h"

namespace bdn::remote::testing {

// Register handlers on http(), then Start(). Stop() (or the destructor) shuts it down.
class TestServer {
 public:
  TestServer() {  // configured as bdn's server
    server_.set_keep_alive_max_count(1000);
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_timeout(1);  // Stop() waits for idle keep-alive connections
  }
  ~TestServer() { Stop(); }
  httplib::Server& http() { return server_; }
  // Binds `port` (0: any free one) and serves on a background thread.
  void Start(int port = 0) {
    port_ = port == 0 ? server_.bind_to_any_port("127.0.0.1")
                      : (server_.bind_to_port("127.0.0.1", port) ? port : -1);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void Stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
};

inline void SendError(httplib::Response& res, const Status& s) {
  res.status = http::HttpStatusFor(s);
  res.set_content(http::ErrorBody(s), "application/json");
}

// The chunk routes over a MemChunkStore. Fault hooks run first and may answer instead.
class FakeOrigin {
 public:
  // Returns true if it answered the request itself (an injected fault).
  using Fault = std::function<bool(const httplib::Request&, httplib::Response&)>;

  MemChunkStore store;
  std::atomic<int> missing_requests{0}, sizes_requests{0}, put_requests{0}, get_requests{0},
      batch_requests{0}, health_requests{0}, upload_requests{0};
  // false: POST /v1/chunks/upload answers 404, as a server older than that endpoint does.
  std::atomic<bool> accepts_uploads{true};
  std::atomic<bool> healthy{true};
  std::atomic<bool> wrong_bytes{false};  // GET/batch answer with one byte flipped
  std::atomic<int> delay_ms{0};          // sleep before answering chunk reads

  FakeOrigin() { Install(); }
  void Start(int port = 0) { server_.Start(port); }
  void Stop() { server_.Stop(); }
  std::string url() const { return server_.url(); }
  int port() const { return server_.port(); }
  httplib::Server& http() { return server_.http(); }
  // The Authorization header of the last chunk request.
  std::string LastAuthorization() {
    MutexLock lock(mu_);
    return last_authorization_;
  }
  std::vector<size_t> UploadSizes() {
    MutexLock lock(mu_);
    return upload_sizes;
  }
  void SetFault(Fault f) {
    MutexLock lock(mu_);
    fault_ = std::move(f);
  }

 private:
  bool Faulted(const httplib::Request& req, httplib::Response& res) {
    {
      MutexLock lock(mu_);
      last_authorization_ = req.get_header_value("Authorization");
    }
    Fault f;
    {
      MutexLock lock(mu_);
      f = fault_;
    }
    return f && f(req, res);
  }

  void Install() {
    using nlohmann::json;
    auto& s = server_.http();
    s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      ++health_requests;
      if (healthy) {
        res.set_content("ok\n", "text/plain");
      } else {
        SendError(res, UnavailableError("node: down"));
      }
    });
    s.Post("/v1/chunks/missing", [this](const httplib::Request& req, httplib::Response& res) {
      ++missing_requests;
      if (Faulted(req, res)) return;
      json in = json::parse(req.body);
      if (in["ids"].size() > 4096)
        return SendError(res, InvalidArgumentError("ids: more than 4096"));
      json missing = json::array();
      for (const auto& hex : in["ids"]) {
        if (!*store.Contains(*Digest::Parse(hex.get<std::string>()))) missing.push_back(hex);
      }
      res.set_content(json{{"missing", missing}}.dump(), "application/json");
    });
    s.Post("/v1/chunks/sizes", [this](const httplib::Request& req, httplib::Response& res) {
      ++sizes_requests;
      if (Faulted(req, res)) return;
      json in = json::parse(req.body);
      if (in["ids"].size() > 4096)
        return SendError(res, InvalidArgumentError("ids: more than 4096"));
      json sizes = json::array();
      for (const auto& hex : in["ids"]) {
        auto n = store.Sizes(std::vector<Digest>{*Digest::Parse(hex.get<std::string>())});
        sizes.push_back((*n)[0] ? json(*(*n)[0]) : json(nullptr));
      }
      res.set_content(json{{"sizes", sizes}}.dump(), "application/json");
    });
    s.Put(R"(/v1/chunks/([0-9a-f]{64}))",
          [this](const httplib::Request& req, httplib::Response& res) {
            ++put_requests;
            if (Faulted(req, res)) return;
            Digest id = *Digest::Parse(req.matches[1].str());
            std::span<const uint8_t> body(reinterpret_cast<const uint8_t*>(req.body.data()),
                                          req.body.size());
            if (Digest::Of(body) != id) {
              return SendError(
                  res, CorruptionError("chunk " + id.ToString() + ": received bytes hash to " +
                                       Digest::Of(body).ToString()));
            }
            bool had = *store.Contains(id);
            if (Status put = store.Put(id, body); !put.ok()) return SendError(res, put);
            res.status = had ? 200 : 201;
          });
    // BDNU framing (docs/http-api.md); the whole body parsed at once, each blob verified.
    s.Post("/v1/chunks/upload", [this](const httplib::Request& req, httplib::Response& res) {
      ++upload_requests;
      if (!accepts_uploads) {
        return SendError(res, NotFoundError("no route POST /v1/chunks/upload"));
      }
      if (Faulted(req, res)) return;
      const std::string& b = req.body;
      auto u32 = [&](size_t at) {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(b[at + i])} << (8 * i);
        return v;
      };
      if (b.size() < 8 || b.compare(0, 4, "BDNU") != 0)
        return SendError(res, InvalidArgumentError("upload: bad prefix"));
      const size_t n = u32(4);
      if (b.size() < 8 + 36 * n) return SendError(res, InvalidArgumentError("upload: short"));
      size_t at = 8 + 36 * n;
      for (size_t i = 0; i < n; ++i) {
        std::array<uint8_t, Digest::kSize> raw;
        std::memcpy(raw.data(), b.data() + 8 + 36 * i, Digest::kSize);
        const Digest id(raw);
        const size_t len = u32(8 + 36 * i + 32);
        if (b.size() < at + len) return SendError(res, InvalidArgumentError("upload: short"));
        std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(b.data()) + at, len);
        if (Digest::Of(bytes) != id) {
          return SendError(res,
                           CorruptionError("chunk " + id.ToString() + ": received bytes hash to " +
                                           Digest::Of(bytes).ToString()));
        }
        if (Status put = store.Put(id, bytes); !put.ok()) return SendError(res, put);
        at += len;
      }
      if (at != b.size()) return SendError(res, InvalidArgumentError("upload: trailing bytes"));
      {
        MutexLock lock(mu_);
        upload_sizes.push_back(n);
      }
      res.set_content(json{{"blobs", n}, {"size_bytes", at - 8 - 36 * n}}.dump(),
                      "application/json");
    });
    s.Get(R"(/v1/chunks/([0-9a-f]{64}))",
          [this](const httplib::Request& req, httplib::Response& res) {
            ++get_requests;
            if (Faulted(req, res)) return;
            if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
            Digest id = *Digest::Parse(req.matches[1].str());
            auto bytes = store.Get(id);
            if (!bytes)
              return SendError(res, NotFoundError("chunk " + id.ToString() + ": not in store"));
            if (wrong_bytes && !bytes->empty()) (*bytes)[0] ^= 1;
            res.set_content(std::string(bytes->begin(), bytes->end()), "application/octet-stream");
          });
    s.Post("/v1/chunks/batch", [this](const httplib::Request& req, httplib::Response& res) {
      ++batch_requests;
      if (Faulted(req, res)) return;
      if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
      json in = json::parse(req.body);
      if (in["ids"].size() > 1024)
        return SendError(res, InvalidArgumentError("ids: more than 1024"));
      std::string out = "BDNB";
      for (const auto& hex : in["ids"]) {
        Digest id = *Digest::Parse(hex.get<std::string>());
        auto bytes = store.Get(id);
        out.append(reinterpret_cast<const char*>(id.data()), Digest::kSize);
        if (!bytes) {
          out.push_back(1);
          out.append(4, '\0');
          continue;
        }
        if (wrong_bytes && !bytes->empty()) (*bytes)[0] ^= 1;
        out.push_back(0);
        uint32_t n = static_cast<uint32_t>(bytes->size());
        for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((n >> (8 * k)) & 0xff));
        out.append(bytes->begin(), bytes->end());
      }
      res.set_content(out, "application/octet-stream");
    });
  }

  TestServer server_;
  Mutex mu_;
  Fault fault_ GUARDED_BY(mu_);
  std::string last_authorization_ GUARDED_BY(mu_);
  // Blob counts of each POST /v1/chunks/upload answered 200, in order.
  std::vector<size_t> upload_sizes GUARDED_BY(mu_);
};

}  // namespace bdn::remote::testing
