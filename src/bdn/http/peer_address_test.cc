// NonPublicKind: which peer addresses PeerAddresses::kPublicOnly refuses, table-driven over both
// families and the IPv6 forms that carry an IPv4 address.
#include "bdn/http/peer_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>

namespace bdn::http {
namespace {

// NonPublicKind of the address `text` as a sockaddr (what libcurl hands the socket callback).
std::string KindOf(const std::string& text) {
  sockaddr_storage ss = {};
  if (text.find(':') == std::string::npos) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    v4->sin_family = AF_INET;
    EXPECT_EQ(1, inet_pton(AF_INET, text.c_str(), &v4->sin_addr)) << text;
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    v6->sin6_family = AF_INET6;
    EXPECT_EQ(1, inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr)) << text;
  }
  auto kind = NonPublicKind(reinterpret_cast<sockaddr*>(&ss));
  return kind ? std::string(*kind) : "public";
}

TEST(NonPublicKind, NamesEveryRangeAServerMustNotBeSteeredAt) {
  struct Case {
    const char* address;
    const char* kind;
  } cases[] = {
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"10.0.0.1", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "link-local"},  // cloud metadata
      {"100.64.0.1", "shared (carrier-grade NAT)"},
      {"100.127.255.255", "shared (carrier-grade NAT)"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"192.0.0.170", "reserved"},
      {"198.18.0.1", "reserved"},
      {"255.255.255.255", "reserved"},
      {"224.0.0.1", "multicast"},
      {"::", "unspecified"},
      {"::1", "loopback"},
      {"fe80::1", "link-local"},
      {"fd00:ec2::254", "private"},  // AWS's IPv6 metadata endpoint
      {"fc00::1", "private"},
      {"fec0::1", "private"},
      {"ff02::1", "multicast"},
      {"::ffff:127.0.0.1", "loopback"},  // IPv4-mapped
      {"::ffff:169.254.169.254", "link-local"},
      {"::10.1.2.3", "private"},           // IPv4-compatible
      {"64:ff9b::7f00:1", "loopback"},     // NAT64 of 127.0.0.1
      {"2002:a9fe:a9fe::", "link-local"},  // 6to4 of 169.254.169.254
      // Public: the neighbours of each range.
      {"8.8.8.8", "public"},
      {"11.0.0.1", "public"},
      {"172.15.255.255", "public"},
      {"172.32.0.0", "public"},
      {"169.253.255.255", "public"},
      {"100.63.255.255", "public"},
      {"100.128.0.0", "public"},
      {"192.169.0.1", "public"},
      {"198.20.0.1", "public"},
      {"223.255.255.255", "public"},
      {"2606:4700::1111", "public"},
      {"::ffff:8.8.8.8", "public"},
      {"64:ff9b::808:808", "public"},
      {"2002:808:808::", "public"},
  };
  for (const Case& c : cases) EXPECT_EQ(c.kind, KindOf(c.address)) << c.address;
}

TEST(NonPublicKind, OtherFamiliesAreNotIp) {
  sockaddr unix_addr = {};
  unix_addr.sa_family = AF_UNIX;
  EXPECT_EQ("not IP", NonPublicKind(&unix_addr).value_or("public"));
}

TEST(NonPublicKindOfLiteral, JudgesIpLiteralsAndLeavesNamesToTheConnection) {
  EXPECT_EQ("loopback", NonPublicKindOfLiteral("127.0.0.1").value_or("-"));
  EXPECT_EQ("loopback", NonPublicKindOfLiteral("[::1]").value_or("-"));
  EXPECT_EQ("link-local", NonPublicKindOfLiteral("[fe80::1%eth0]").value_or("-"));
  EXPECT_EQ("link-local", NonPublicKindOfLiteral("169.254.169.254").value_or("-"));
  EXPECT_EQ("-", NonPublicKindOfLiteral("8.8.8.8").value_or("-"));
  EXPECT_EQ("-", NonPublicKindOfLiteral("localhost").value_or("-"));
  EXPECT_EQ("-", NonPublicKindOfLiteral("2130706433").value_or("-"));  // for the resolver
  EXPECT_EQ("-", NonPublicKindOfLiteral("").value_or("-"));
}

TEST(AddressText, IsTheNumericForm) {
  sockaddr_in6 v6 = {};
  v6.sin6_family = AF_INET6;
  ASSERT_EQ(1, inet_pton(AF_INET6, "fe80::1", &v6.sin6_addr));
  EXPECT_EQ("fe80::1", AddressText(reinterpret_cast<sockaddr*>(&v6)));
  sockaddr_in v4 = {};
  v4.sin_family = AF_INET;
  ASSERT_EQ(1, inet_pton(AF_INET, "10.1.2.3", &v4.sin_addr));
  EXPECT_EQ("10.1.2.3", AddressText(reinterpret_cast<sockaddr*>(&v4)));
}

}  // namespace
}  // namespace bdn::http
