// The SigV4 pieces bdn adds to libcurl's signing, and where credentials come from.
#include "bdn/objstore/s3_sign.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn::objstore {
namespace {

TEST(Sha256Hex, PublishedTestVectors) {
  // FIPS 180-2.
  EXPECT_EQ("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Sha256Hex(""));
  EXPECT_EQ(kEmptySha256, Sha256Hex(""));
  EXPECT_EQ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", Sha256Hex("abc"));
}

TEST(CanonicalQuery, EncodesEveryNameAndValueAndSortsThem) {
  // The SigV4 canonical query: RFC 3986 unreserved characters kept, everything else %XX
  // (upper-case), '/' and '=' in a continuation token too, sorted by name.
  EXPECT_EQ(
      "continuation-token=1ue%2Fabc%2B%3D&list-type=2&prefix=a%20b%2Bc%25d%23e%3Ff%2F%E6%97%A5",
      CanonicalQuery(
          {{"prefix", "a b+c%d#e?f/日"}, {"list-type", "2"}, {"continuation-token", "1ue/abc+="}}));
  EXPECT_EQ("", CanonicalQuery({}));
  EXPECT_EQ("a=&b=1", CanonicalQuery({{"b", "1"}, {"a", ""}}));
  EXPECT_EQ("partNumber=2&uploadId=a%2Fb",
            CanonicalQuery({{"uploadId", "a/b"}, {"partNumber", "2"}}));
}

TEST(SignS3Request, AddsThePayloadHashTheTokenAndTheSigner) {
  http::Request req;
  SignS3Request(req, {"AKID", "secret", "token", ""}, "eu-west-1", Sha256Hex("abc"));
  ASSERT_EQ(2u, req.headers.size());
  EXPECT_EQ((std::pair<std::string, std::string>("x-amz-content-sha256", Sha256Hex("abc"))),
            req.headers[0]);
  EXPECT_EQ((std::pair<std::string, std::string>("x-amz-security-token", "token")), req.headers[1]);
  ASSERT_TRUE(req.aws_sigv4.has_value());
  EXPECT_EQ("aws:amz:eu-west-1:s3", req.aws_sigv4->provider);
  EXPECT_EQ("AKID", req.aws_sigv4->access_key_id);
  EXPECT_EQ("secret", req.aws_sigv4->secret_access_key);
  http::Request plain;
  SignS3Request(plain, {"AKID", "secret", "", ""}, "us-east-1");
  ASSERT_EQ(1u, plain.headers.size());
  EXPECT_EQ(kEmptySha256, plain.headers[0].second);
}

// The environment a test gives AwsCredentialsFromEnvironment.
CredentialSources Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return {[shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  }};
}

TEST(AwsCredentialsFromEnvironment, TheVariablesComeFirst) {
  auto c = AwsCredentialsFromEnvironment(Env({{"AWS_ACCESS_KEY_ID", "AKID"},
                                              {"AWS_SECRET_ACCESS_KEY", "s"},
                                              {"AWS_SESSION_TOKEN", "t"},
                                              {"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"}}));
  ASSERT_OK(c);
  EXPECT_EQ("AKID", c->access_key_id);
  EXPECT_EQ("s", c->secret_access_key);
  EXPECT_EQ("t", c->session_token);
  auto half = AwsCredentialsFromEnvironment(Env({{"AWS_ACCESS_KEY_ID", "AKID"}}));
  EXPECT_STATUS(half, kInvalidArgument, "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY");
  auto other_half = AwsCredentialsFromEnvironment(Env({{"AWS_SECRET_ACCESS_KEY", "topsecret"}}));
  EXPECT_STATUS(other_half, kInvalidArgument,
                "AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID");
}

TEST(AwsCredentialsFromEnvironment, ThenTheSharedCredentialsFile) {
  testutil::TempDir dir("bdn_aws_credentials");
  const std::string file = (dir.path() / "credentials").string();
  std::ofstream(file) << "# comment\n[default]\naws_access_key_id = AKDEFAULT\n"
                         "aws_secret_access_key=sdefault\n\n[team]\n; another comment\n"
                         "aws_access_key_id = AKTEAM \naws_secret_access_key = steam\n"
                         "aws_session_token = tteam\n[broken]\naws_access_key_id = AKB\n";
  auto d = AwsCredentialsFromEnvironment(Env({{"AWS_SHARED_CREDENTIALS_FILE", file}}));
  ASSERT_OK(d);
  EXPECT_EQ("AKDEFAULT", d->access_key_id);
  EXPECT_EQ("sdefault", d->secret_access_key);
  EXPECT_EQ("", d->session_token);
  auto team = AwsCredentialsFromEnvironment(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "team"}}));
  ASSERT_OK(team);
  EXPECT_EQ("AKTEAM", team->access_key_id);
  EXPECT_EQ("tteam", team->session_token);
  auto broken = AwsCredentialsFromEnvironment(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "broken"}}));
  EXPECT_STATUS(broken, kInvalidArgument, file + ": profile \"broken\": no aws_secret_access_key");
  auto missing = AwsCredentialsFromEnvironment(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "nope"}}));
  EXPECT_STATUS(missing, kInvalidArgument, file + ": no profile \"nope\" (AWS_PROFILE)");
  // ~/.aws/credentials by default.
  std::filesystem::create_directories(dir.path() / "home" / ".aws");
  std::filesystem::copy_file(file, dir.path() / "home" / ".aws" / "credentials");
  auto home = AwsCredentialsFromEnvironment(Env({{"HOME", (dir.path() / "home").string()}}));
  ASSERT_OK(home);
  EXPECT_EQ("AKDEFAULT", home->access_key_id);
}

TEST(AwsCredentialsFromEnvironment, NoneIsNotFound) {
  auto none = AwsCredentialsFromEnvironment(Env({{"HOME", "/nonexistent"}}));
  EXPECT_STATUS(none, kNotFound,
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put a "
                "[default] profile in /nonexistent/.aws/credentials");
}

}  // namespace
}  // namespace bdn::objstore
