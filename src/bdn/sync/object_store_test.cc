// The object-store sources' pieces without a server: URIs, the canonical query of SigV4, the
// secrets' formats, and the crypto primitives against published test vectors.
#include <gtest/gtest.h>

#include "bdn/sync/crypto.h"
#include "bdn/sync/object_store_internal.h"
#include "bdn/sync/object_store_sources.h"
#include "bdn/sync/source_uri.h"
#include "bdn/testing/status_matchers.h"

namespace bdn::sync {
namespace {

std::string Hex(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

TEST(ParseSourceUri, BucketsAndContainers) {
  auto s3 = ParseSourceUri("s3://my-bucket/models/qwen 3/a+b%c#d?e");
  ASSERT_OK(s3);
  const auto& b = std::get<BucketUri>(*s3);
  EXPECT_EQ("s3", b.scheme);
  EXPECT_EQ("my-bucket", b.bucket);
  EXPECT_EQ("models/qwen 3/a+b%c#d?e", b.prefix);  // literal: no decoding, '?' and '#' kept

  auto whole = ParseSourceUri("gs://bucket_1");
  ASSERT_OK(whole);
  EXPECT_EQ("", std::get<BucketUri>(*whole).prefix);

  auto r2 = ParseSourceUri("r2://0123abcd.weights/ckpt/");
  ASSERT_OK(r2);
  EXPECT_EQ("0123abcd", std::get<BucketUri>(*r2).account);
  EXPECT_EQ("weights", std::get<BucketUri>(*r2).bucket);
  EXPECT_EQ("ckpt/", std::get<BucketUri>(*r2).prefix);

  auto az = ParseSourceUri("azure://devstoreaccount1/models/llama/7b");
  ASSERT_OK(az);
  EXPECT_EQ("devstoreaccount1", std::get<AzureUri>(*az).account);
  EXPECT_EQ("models", std::get<AzureUri>(*az).container);
  EXPECT_EQ("llama/7b", std::get<AzureUri>(*az).prefix);
}

TEST(ParseSourceUri, RefusesMalformedBucketUris) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"s3://",
       "source \"s3://\": expected s3://bucket[/prefix] (a bucket name of letters, "
       "digits, '.', '-' and '_')"},
      {"s3:///prefix",
       "source \"s3:///prefix\": expected s3://bucket[/prefix] (a bucket name of "
       "letters, digits, '.', '-' and '_')"},
      {"cw://b@d/x",
       "source \"cw://***@d/x\": expected cw://bucket[/prefix] (a bucket name of "
       "letters, digits, '.', '-' and '_')"},
      {"r2://bucket/x", "source \"r2://bucket/x\": expected r2://account_id.bucket[/prefix]"},
      {"r2://.bucket/x", "source \"r2://.bucket/x\": expected r2://account_id.bucket[/prefix]"},
      {"azure://acct",
       "source \"azure://acct\": expected azure://account/container[/prefix] (an "
       "account of lower-case letters and digits, a container of lower-case "
       "letters, digits and '-')"},
      {"azure://Acct/c",
       "source \"azure://Acct/c\": expected azure://account/container[/prefix] "
       "(an account of lower-case letters and digits, a container of "
       "lower-case letters, digits and '-')"},
      {"ftp://x/y",
       "source \"ftp://x/y\": unknown scheme (expected hf://, s3://, gs://, "
       "azure://, r2://, cw://, file://, https:// or http://)"},
  };
  for (const auto& [uri, message] : cases) {
    auto r = ParseSourceUri(uri);
    ASSERT_FALSE(r.has_value()) << uri;
    EXPECT_EQ(message, r.error().message());
  }
}

// From attacking helper 121: "http://u:PW/x@h" (a password holding a "/") passed as a host "u"
// with a path, and the job's errors showed the password as the port.
TEST(CheckEndpoint, AnAtSignAnywhereIsRefusedWithoutShowingTheCredentials) {
  EXPECT_EQ(*CheckEndpoint("s3://b", "http://127.0.0.1:9000/"), "http://127.0.0.1:9000");
  for (const std::string endpoint : {"http://u:SEKRET/x@127.0.0.1:1", "http://u:SEKRET@127.0.0.1:1",
                                     "http://h:1/p@q", "http://[::1]SEKRET"}) {
    auto r = CheckEndpoint("source \"s3://b\"", endpoint);
    ASSERT_FALSE(r.has_value()) << endpoint;
    EXPECT_EQ(r.error().message().find("SEKRET"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("must be http(s)://host[:port][/path] without credentials"),
              std::string::npos)
        << r.error().message();
  }
  for (const std::string endpoint :
       {"http://h:SEKRET", "http://h:0/p", "http://h:70000", "http://h:", "http://u:SEKRET:8080",
        "http://[::1]:SEKRET:1"}) {
    auto r = CheckEndpoint("source \"s3://b\"", endpoint);
    ASSERT_FALSE(r.has_value()) << endpoint;
    EXPECT_EQ(r.error().message(), "source \"s3://b\": --endpoint: its port must be 1 to 65535");
  }
  // From attacking helper 123: a value refused for anything else was quoted with its port (a
  // password, here).
  for (const auto& [endpoint, shown] :
       std::vector<std::pair<std::string, std::string>>{{"http://h:SEKRET#x", "http://h:***#***"},
                                                        {"http://h:SEKRET?a=1", "http://h:***?***"},
                                                        {"http://h:SEKRET x", "http://h:***"},
                                                        {"ftp://h:SEKRET", "ftp://h:***"},
                                                        {"h:SEKRET/p", "h:***"},
                                                        {"http:/u:SEKRET", "http:***"}}) {
    auto r = CheckEndpoint("source \"s3://b\"", endpoint);
    ASSERT_FALSE(r.has_value()) << endpoint;
    EXPECT_EQ(r.error().message(), "source \"s3://b\": --endpoint \"" + shown +
                                       "\": must be http(s)://host[:port][/path] without "
                                       "credentials or query");
  }
  EXPECT_TRUE(CheckEndpoint("s3://b", "http://[::1]:9000/x").has_value());
  EXPECT_TRUE(CheckEndpoint("s3://b", "http://{bucket}.h:9000").has_value());
  // A presigned source's query is not shown either.
  EXPECT_EQ(ShownSource("https://h/w.bin?X-Amz-Signature=S"), "https://h/w.bin?***");
  EXPECT_EQ(ShownSource("HTTPS://u:p@h/w.bin"), "HTTPS://***@h/w.bin");
  EXPECT_EQ(ShownSource("hf://org/repo@main"), "hf://org/repo@main");
  EXPECT_EQ(ShownSource("http://h:1/d/f.txt?sig=S&x=@y"), "http://h:1/d/f.txt?***");
  EXPECT_EQ(ShownSource("http://h:1/d/f.txt#a@b"), "http://h:1/d/f.txt#***");
  EXPECT_EQ(ShownSource("http://u:p?x@h/f"), "http://***@h/f");
  EXPECT_EQ(ShownSource("s3://b/p"), "s3://b/p");
  // From attacking helper 124: a query or credentials of the other schemes, a port that is no
  // number, and refused sources were shown whole.
  for (const auto& [uri, shown] : std::vector<std::pair<std::string, std::string>>{
           {"azure://acct/cont/p?sv=1&sig=SEK", "azure://acct/cont/p?***"},
           {"s3://bucket/p?X-Amz-Signature=SEK", "s3://bucket/p?***"},
           {"gs://bucket/p#SEK", "gs://bucket/p#***"},
           {"file:///tmp/x?SEK", "file:///tmp/x?***"},
           {"s3://u:SEK@bucket/p", "s3://***@bucket/p"},
           {"r2://u:SEK@acct.bucket/p", "r2://***@acct.bucket/p"},
           {"file://u:SEK@h/x", "file://***@h/x"},
           {"hf://u:SEK@org/repo", "hf://***@org/repo"},
           {"hf://org/repo?token=SEK", "hf://org/repo?***"},
           {"hf://datasets/org/repo@refs/pr/1", "hf://datasets/org/repo@refs/pr/1"},
           {"hf://org@main", "hf://org@main"},
           {"https://h:SEK/x", "https://h:***/x"},
           {"https://h:SEK/x?a=1", "https://h:***/x?***"},
           {"https://[::1]:SEK/x", "https://[::1]:***/x"},
           {"ftp://u:SEK@h/x", "ftp://***@h/x"},
           {"u:SEK@h/x", "***@h/x"},
           {" https://u:SEK@h/x", " https://***@h/x"},
           {"https:/u:SEK@h/x", "***@h/x"},
           {"az://acct/c?sig=SEK", "az://acct/c?***"},
           // From attacking helper 125.
           {"http://127.0.0.1:1/a@b/w.bin", "http://127.0.0.1:1/a@b/w.bin"},
           {"https://h/a:b/c@d?sig=SEK", "https://h/a:b/c@d?***"},
           {"http://[u:SEK/f", "http://[***/f"},
           {"http://u:SEK:8080/f", "http://u:***/f"},
           {"s3://bucket:SEK/p", "s3://bucket:***/p"},
           {"azure://acct:SEK/cont/p", "azure://acct:***/cont/p"},
           {"hf://hf_SEKabcdefghijklmnopqrstuvwxyz@org/repo", "hf://***@org/repo"},
           {"hf://gpt2@main", "hf://gpt2@main"},
           // From attacking helper 126: a token where an org, a repo or a revision goes.
           {"hf://org/hf_SEKabcdefghijklmnopqrstuvwxyz", "hf://org/***"},
           {"hf://datasets/hf_SEKabcdefghijklmnopqrstuvwxyz/x", "hf://datasets/***/x"},
           {"hf://org/repo@hf_SEKabcdefghijklmnopqrstuvwxyz", "hf://org/repo@***"},
           {"hf://org/repo@refs/hf_SEKabcdefghijklmnopqrstuvwxyz?x#y",
            "hf://org/repo@refs/***?***"},
           {"hf://org/repo@hf_short", "hf://org/repo@hf_short"},
           {"u:SEK/a://b", "u:***"}}) {
    EXPECT_EQ(ShownSource(uri), shown) << uri;
    if (auto r = ParseSourceUri(uri); !r) {
      EXPECT_EQ(r.error().message().find("SEK"), std::string::npos) << r.error().message();
    }
  }
  EXPECT_EQ(ParseSourceUri("http://u:SEK:8080/f").error().message(),
            "source \"http://u:***/f\": the host must be host[:port] (a name, an IPv4 address or "
            "a bracketed IPv6 one; a port of 1 to 65535)");
  EXPECT_TRUE(ParseSourceUri("http://[fe80::1%25eth0]:8080/f").has_value());
  EXPECT_EQ(ParseSourceUri("hf://hf_SEKabcdefghijklmnopqrstuvwxyz@org/repo").error().message(),
            "source \"hf://***@org/repo\": names a Hugging Face token where an org, a repo or a "
            "revision goes; a token is given as a secret (bdn secret set NAME, then "
            "--auth-secret-name NAME)");
  for (const std::string uri : {"hf://org/hf_SEKabcdefghijklmnopqrstuvwxyz",
                                "hf://datasets/hf_SEKabcdefghijklmnopqrstuvwxyz/x",
                                "hf://org/repo@hf_SEKabcdefghijklmnopqrstuvwxyz"}) {
    auto r = ParseSourceUri(uri);
    ASSERT_FALSE(r.has_value()) << uri;
    EXPECT_NE(r.error().message().find("names a Hugging Face token where"), std::string::npos)
        << r.error().message();
  }
  // From attacking helper 126: a known scheme in upper case was an "unknown scheme".
  EXPECT_EQ(ParseSourceUri("HTTP://u:SEK@h/f").error().message(),
            "source \"HTTP://***@h/f\": the scheme is written in lower case: http://");
  EXPECT_EQ(ParseSourceUri("Hf://org/repo").error().message(),
            "source \"Hf://org/repo\": the scheme is written in lower case: hf://");
  // Whole, not cut at 200 bytes as an error's URL is.
  const std::string long_source = "https://h/" + std::string(300, 'a');
  EXPECT_EQ(ShownSource(long_source), long_source);
}

TEST(FolderPrefix, APrefixNamesAFolder) {
  EXPECT_EQ("", FolderPrefix(""));
  EXPECT_EQ("models/", FolderPrefix("models"));
  EXPECT_EQ("models/", FolderPrefix("models/"));
}

TEST(ParseAwsSecret, KeyPairsInEverySpelling) {
  auto c = ParseAwsSecret(R"({"access_key_id": "AKIDEXAMPLE", "secret_access_key": "wJalr/K7MDENG",
                             "region": "eu-west-1"})",
                          "aws");
  ASSERT_OK(c);
  EXPECT_EQ("AKIDEXAMPLE", c->access_key_id);
  EXPECT_EQ("wJalr/K7MDENG", c->secret_access_key);
  EXPECT_EQ("eu-west-1", c->region);
  auto exported = ParseAwsSecret(
      R"({"Version": 1, "AccessKeyId": "ASIA1", "SecretAccessKey": "s", "SessionToken": "t"})",
      "x");
  ASSERT_OK(exported);
  EXPECT_EQ("t", exported->session_token);
  auto hmac = ParseAwsSecret(R"({"access_id": "GOOG1E", "secret": "bGoa+V7g"})", "gcs-hmac");
  ASSERT_OK(hmac);
  EXPECT_EQ("GOOG1E", hmac->access_key_id);
}

TEST(ParseAwsSecret, RefusesOtherShapesWithoutShowingTheValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"AKIDEXAMPLE:topsecret",
       "secret \"aws\": not a JSON object (expected {\"access_key_id\": ..., "
       "\"secret_access_key\": ...})"},
      {R"({"secret_access_key": "topsecret"})", "secret \"aws\": no \"access_key_id\""},
      {R"({"access_key_id": "AKID"})", "secret \"aws\": no \"secret_access_key\""},
      {R"({"access_key_id": "AKID", "secret_access_key": "top secret"})",
       "secret \"aws\": a key holds spaces or control characters"},
  };
  for (const auto& [value, message] : cases) {
    auto r = ParseAwsSecret(value, "aws");
    ASSERT_FALSE(r.has_value()) << value;
    EXPECT_EQ(message, r.error().message());
    EXPECT_EQ("invalid_secret", r.error().reason());
    EXPECT_EQ(std::string::npos, r.error().message().find("topsecret"));
  }
}

// A listed etag "e"\r\nX-Injected: 1 went into If-Match as it was: headers of the listing's
// choosing.
TEST(EtagCheckedRequest, SendsOnlyAValidEntityTagInIfMatch) {
  auto ok = EtagCheckedRequest("s3://b/p", "http://h/b/p/a",
                               {"a", 1, "9b2cf535f27731c974343645a3985328"}, 0);
  ASSERT_EQ(1u, ok.headers.size());
  EXPECT_EQ("If-Match", ok.headers[0].first);
  EXPECT_EQ("\"9b2cf535f27731c974343645a3985328\"", ok.headers[0].second);
  for (const char* bad : {"e\"\r\nX-Injected: 1", "a b", "a\"b", "", "e\x7f"}) {
    EXPECT_TRUE(EtagCheckedRequest("s3://b/p", "http://h/b/p/a", {"a", 1, bad}, 0).headers.empty())
        << bad;
  }
}

// A weak ETag W/"abc" was sent as If-Match: "abc", which a store compares strongly (RFC 9110
// §13.1.1): every GET of an unchanged object got 412 and the job failed source_changed. Blanks
// around a listed ETag (" \"abc\" ") were kept in the etag and never matched the answer's.
TEST(EtagCheckedRequest, AWeakOrBlankEtagIsNormalizedAndWeakOnesAreNotSent) {
  const SourceObject weak = StoreObject("a", 5, "W/\"abc\"");
  EXPECT_EQ("abc", weak.etag);
  EXPECT_TRUE(weak.etag_weak);
  EXPECT_TRUE(EtagCheckedRequest("s3://b/p", "http://h/b/p/a", weak, 0).headers.empty());
  const SourceObject spaced = StoreObject("a", 5, " \"abc\" \t");
  EXPECT_EQ("abc", spaced.etag);
  EXPECT_FALSE(spaced.etag_weak);
  auto req = EtagCheckedRequest("s3://b/p", "http://h/b/p/a", spaced, 0);
  ASSERT_EQ(1u, req.headers.size());
  EXPECT_EQ("\"abc\"", req.headers[0].second);
  // Answers are compared weakly, whatever the listing's strength.
  for (const SourceObject& o : {weak, spaced}) {
    auto check = EtagCheckedRequest("s3://b/p", "http://h/b/p/a", o, 0).check;
    EXPECT_OK(check(200, {{"etag", "W/\"abc\""}, {"content-length", "5"}}));
    EXPECT_OK(check(200, {{"etag", "\"abc\""}, {"content-length", "5"}}));
    EXPECT_EQ("s3://b/p: object \"a\": changed during the sync (etag abc listed, abd now)",
              check(200, {{"etag", "W/\"abd\""}}).message());
  }
}

TEST(Crypto, PublishedTestVectors) {
  // RFC 4231 test case 2 / RFC 4648 §10.
  EXPECT_EQ("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            Hex(HmacSha256("Jefe", "what do ya want for nothing?")));
  const std::vector<std::pair<std::string, std::string>> b64 = {{"", ""},
                                                                {"f", "Zg=="},
                                                                {"fo", "Zm8="},
                                                                {"foo", "Zm9v"},
                                                                {"foob", "Zm9vYg=="},
                                                                {"fooba", "Zm9vYmE="},
                                                                {"foobar", "Zm9vYmFy"}};
  for (const auto& [raw, text] : b64) {
    EXPECT_EQ(text, Base64Encode(raw));
    auto back = Base64Decode(text);
    ASSERT_OK(back);
    EXPECT_EQ(raw, *back);
  }
  EXPECT_EQ("-_8", Base64UrlEncode("\xfb\xff"));
  for (const char* bad : {"Zg=", "Zg=a", "Z===", "Zm9v!A==", "Zm 9v", "=Zm9"}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
}

TEST(Crypto, Rs256SignRefusesWhatIsNotAKey) {
  auto r = Rs256Sign("-----BEGIN PRIVATE KEY-----\nnotakey\n-----END PRIVATE KEY-----\n", "data");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ("not a PEM RSA private key", r.error().message());
}

}  // namespace
}  // namespace bdn::sync
