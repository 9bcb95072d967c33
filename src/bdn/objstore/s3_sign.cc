#include "bdn/objstore/s3_sign.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bdn/base/text.h"

namespace bdn::objstore {
namespace {

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

std::string Sha256Hex(std::span<const uint8_t> data) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

Result<std::string> Md5Base64(std::span<const uint8_t> data) {
  unsigned char md[16];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), md, &n, EVP_md5(), nullptr) != 1 || n != sizeof md) {
    return Err(InternalError("MD5 is not available (OpenSSL refused it: FIPS mode?)"));
  }
  unsigned char b64[32];  // 4 * ceil(16 / 3) + NUL
  const int len = EVP_EncodeBlock(b64, md, static_cast<int>(n));
  return std::string(reinterpret_cast<const char*>(b64), static_cast<size_t>(len));
}

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [k, v] : params) {
    k = PercentEncode(k);
    v = PercentEncode(v);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : "&") + k + "=" + v;
  return out;
}

void SignS3Request(http::Request& req, const AwsCredentials& creds, const std::string& region,
                   std::string_view payload_sha256) {
  // libcurl 7.88 does not add the payload's hash; S3 refuses a request without it.
  req.headers.emplace_back("x-amz-content-sha256", std::string(payload_sha256));
  if (!creds.session_token.empty()) {
    req.headers.emplace_back("x-amz-security-token", creds.session_token);
  }
  req.aws_sigv4 = http::Request::AwsSigV4{"aws:amz:" + region + ":s3", creds.access_key_id,
                                          creds.secret_access_key};
}

Result<AwsCredentials> AwsCredentialsFromEnvironment(const CredentialSources& sources) {
  auto env = [&](const char* name) -> std::string {
    const char* v = sources.getenv ? sources.getenv(name) : std::getenv(name);
    return v ? std::string(v) : std::string();
  };
  AwsCredentials c;
  c.access_key_id = env("AWS_ACCESS_KEY_ID");
  c.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
  if (!c.access_key_id.empty() || !c.secret_access_key.empty()) {
    if (c.secret_access_key.empty()) {
      return Err(InvalidArgumentError("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY"));
    }
    if (c.access_key_id.empty()) {
      return Err(InvalidArgumentError("AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID"));
    }
    c.session_token = env("AWS_SESSION_TOKEN");
    return c;
  }
  std::string file = env("AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty() && !env("HOME").empty()) file = env("HOME") + "/.aws/credentials";
  const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
  auto none = [&] {
    return Err(NotFoundError(
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put a [" +
        profile + "] profile in " + (file.empty() ? "~/.aws/credentials" : file)));
  };
  if (file.empty()) return none();
  std::ifstream in(file);
  if (!in) return none();
  std::string line, section;
  bool found = false;
  while (std::getline(in, line)) {
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      if (section.starts_with("profile ")) section = Trim(section.substr(8));
      found = found || section == profile;
      continue;
    }
    if (section != profile) continue;
    size_t eq = t.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = Trim(std::string_view(t).substr(0, eq));
    const std::string value = Trim(std::string_view(t).substr(eq + 1));
    if (key == "aws_access_key_id") c.access_key_id = value;
    if (key == "aws_secret_access_key") c.secret_access_key = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  const std::string where = EscapeName(file) + ": profile \"" + EscapeName(profile) + "\"";
  if (!found) {
    if (env("AWS_PROFILE").empty()) return none();
    return Err(InvalidArgumentError(EscapeName(file) + ": no profile \"" + EscapeName(profile) +
                                    "\" (AWS_PROFILE)"));
  }
  if (c.access_key_id.empty()) return Err(InvalidArgumentError(where + ": no aws_access_key_id"));
  if (c.secret_access_key.empty()) {
    return Err(InvalidArgumentError(where + ": no aws_secret_access_key"));
  }
  return c;
}

}  // namespace bdn::objstore
