// Test helpers: an HTTP/1.1 client over a raw TCP socket, for protocol tests that a library
// client would not send (malformed framing, pipelining, slow or stalled peers), and a parser of
// what came back (responses in order, then whether the server closed the connection).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace bdn::testing {

struct RawResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  // How many header fields are named `name` (lower case).
  size_t Count(std::string_view name) const {
    size_t n = 0;
    for (const auto& [k, v] : headers) n += k == name;
    return n;
  }
  std::string Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return "";
  }
};

// Splits `data` into the whole responses it holds, in order (bodies framed by Content-Length or
// chunked coding; a response without either, and not 1xx/204/304, runs to the end). A trailing
// partial response is left out.
inline std::vector<RawResponse> ParseResponses(std::string_view data) {
  std::vector<RawResponse> out;
  while (!data.empty()) {
    size_t end = data.find("\r\n\r\n");
    if (end == std::string_view::npos) break;
    std::string_view head = data.substr(0, end);
    std::string_view rest = data.substr(end + 4);
    RawResponse r;
    size_t eol = head.find("\r\n");
    std::string_view status_line = head.substr(0, eol);
    if (!status_line.starts_with("HTTP/1.")) break;
    std::string_view code = status_line.substr(9, 3);
    std::from_chars(code.data(), code.data() + code.size(), r.status);
    while (eol != std::string_view::npos) {
      head.remove_prefix(eol + 2);
      eol = head.find("\r\n");
      std::string_view line = head.substr(0, eol);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string name(line.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      r.headers.emplace_back(std::move(name), std::string(value));
    }
    if (r.status == 100) {  // interim: not a response of its own
      data = rest;
      continue;
    }
    bool no_body = r.status == 204 || r.status == 304 || r.status < 200;
    if (no_body) {
      data = rest;
    } else if (!r.Header("content-length").empty()) {
      size_t n = std::stoull(r.Header("content-length"));
      if (rest.size() < n) break;
      r.body = std::string(rest.substr(0, n));
      data = rest.substr(n);
    } else if (r.Header("transfer-encoding") == "chunked") {
      bool complete = false;
      while (true) {
        size_t line_end = rest.find("\r\n");
        if (line_end == std::string_view::npos) break;
        size_t size = 0;
        std::from_chars(rest.data(), rest.data() + line_end, size, 16);
        if (rest.size() < line_end + 2 + size + 2) break;
        r.body.append(rest.substr(line_end + 2, size));
        rest.remove_prefix(line_end + 2 + size + 2);
        if (size == 0) {
          complete = true;
          break;
        }
      }
      if (!complete) break;
      data = rest;
    } else {
      r.body = std::string(rest);
      data = {};
    }
    out.push_back(std::move(r));
  }
  return out;
}

// One TCP connection to 127.0.0.1:port (optionally from another loopback source address, e.g.
// "127.0.0.2", to act as another client).
class RawConnection {
 public:
  explicit RawConnection(int port, const char* source = nullptr, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (source) {
      sockaddr_in s{};
      s.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &s.sin_addr);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&s), sizeof s);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // Writes all of `data`; false if the peer is gone.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until the server closes the connection (eof() then tells), a reset, or `timeout`.
  std::string ReadUntilClose(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return Read([](const std::string&) { return false; }, timeout);
  }

  // Reads until `n` whole responses arrived (see ParseResponses), or as ReadUntilClose.
  std::string ReadResponses(size_t n,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return Read([n](const std::string& got) { return ParseResponses(got).size() >= n; }, timeout);
  }

  bool eof() const { return eof_; }      // the server closed the connection (FIN)
  bool reset() const { return reset_; }  // the connection was reset

 private:
  template <typename Enough>
  std::string Read(Enough enough, std::chrono::milliseconds timeout) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    while (!enough(out)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof_ = n == 0;
        reset_ = n < 0;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  bool reset_ = false;
};

}  // namespace bdn::testing
