// Which peers an HttpClient may connect to: every address, or public ones only (not loopback,
// private, link-local, ...), so that a server that fetches URLs its clients name (bdn serve's sync
// jobs) cannot be steered at its own host, its network or a cloud metadata service.
#pragma once

#include <sys/socket.h>

#include <optional>
#include <string>
#include <string_view>

namespace bdn::http {

enum class PeerAddresses {
  kAny,         // connect wherever the name resolves
  kPublicOnly,  // refuse every address NonPublicKind names
};

// The stable code (Status::reason) of a connection refused under PeerAddresses::kPublicOnly.
inline constexpr std::string_view kAddressNotAllowed = "address_not_allowed";

// What makes `addr` (AF_INET or AF_INET6) not a public address, in words: "loopback" (127/8,
// ::1), "private" (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10), "link-local" (169.254/16,
// fe80::/10: also cloud metadata services at 169.254.169.254), "shared (carrier-grade NAT)"
// (100.64/10), "unspecified" (0/8, ::), "reserved" (192.0.0/24, 198.18/15, 240/4 and the
// broadcast address), "multicast" (224/4, ff00::/8); nullopt for a public address. An IPv6
// address that carries an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
// NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by that IPv4 address. Other families: "not IP".
std::optional<std::string_view> NonPublicKind(const sockaddr* addr);

// NonPublicKind of an IP address written as text ("127.0.0.1", "::1", "[::1]"); nullopt for a
// public address and for text that is not an IP address in the standard notation (a host
// name, or forms such as "2130706433" that only the resolver reads: those are judged when the
// client connects).
std::optional<std::string_view> NonPublicKindOfLiteral(std::string_view host);

// The numeric form of `addr` ("127.0.0.1", "::1"); "?" for other families.
std::string AddressText(const sockaddr* addr);

}  // namespace bdn::http
