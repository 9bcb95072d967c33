#include "bdn/http/peer_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>

namespace bdn::http {
namespace {

// `ip` in host byte order.
std::optional<std::string_view> KindOfV4(uint32_t ip) {
  auto in = [ip](uint32_t net, int bits) {
    const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
    return (ip & mask) == net;
  };
  if (in(0x00000000, 8)) return "unspecified";
  if (in(0x7F000000, 8)) return "loopback";
  if (in(0x0A000000, 8) || in(0xAC100000, 12) || in(0xC0A80000, 16)) return "private";
  if (in(0xA9FE0000, 16)) return "link-local";
  if (in(0x64400000, 10)) return "shared (carrier-grade NAT)";
  if (in(0xE0000000, 4)) return "multicast";
  if (in(0xC0000000, 24) || in(0xC6120000, 15) || in(0xF0000000, 4)) return "reserved";
  return std::nullopt;
}

uint32_t V4At(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

std::optional<std::string_view> KindOfV6(const uint8_t* b) {
  static constexpr uint8_t kZero[16] = {};
  const bool first_80_zero = std::memcmp(b, kZero, 10) == 0;
  if (std::memcmp(b, kZero, 16) == 0) return "unspecified";
  if (std::memcmp(b, kZero, 15) == 0 && b[15] == 1) return "loopback";
  if (first_80_zero && b[10] == 0xFF && b[11] == 0xFF) return KindOfV4(V4At(b + 12));  // mapped
  if (first_80_zero && b[10] == 0 && b[11] == 0) return KindOfV4(V4At(b + 12));        // compatible
  static constexpr uint8_t kNat64[12] = {0x00, 0x64, 0xFF, 0x9B};
  if (std::memcmp(b, kNat64, 12) == 0) return KindOfV4(V4At(b + 12));
  if (b[0] == 0x20 && b[1] == 0x02) return KindOfV4(V4At(b + 2));  // 6to4
  if ((b[0] & 0xFE) == 0xFC) return "private";                     // unique local
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) return "link-local";
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) return "private";  // site-local (deprecated)
  if (b[0] == 0xFF) return "multicast";
  return std::nullopt;
}

}  // namespace

std::optional<std::string_view> NonPublicKind(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(addr);
    return KindOfV4(ntohl(v4->sin_addr.s_addr));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(addr);
    return KindOfV6(v6->sin6_addr.s6_addr);
  }
  return "not IP";
}

std::optional<std::string_view> NonPublicKindOfLiteral(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string text(host.substr(0, host.find('%')));  // an IPv6 zone id: the address only
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return KindOfV4(ntohl(v4.s_addr));
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return KindOfV6(v6.s6_addr);
  return std::nullopt;
}

std::string AddressText(const sockaddr* addr) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, buf, sizeof buf);
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, buf, sizeof buf);
  } else {
    return "?";
  }
  return buf;
}

}  // namespace bdn::http
