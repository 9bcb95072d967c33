// Signing S3 requests (AWS Signature Version 4), shared by the object-store sync sources
// (sync/s3_source.cc) and the object pack store's client (s3_client.h): libcurl's
// CURLOPT_AWS_SIGV4 computes the signature (http::Request::aws_sigv4); this adds what libcurl 7.88
// leaves to the caller (the query in canonical order and encoding, x-amz-content-sha256, the
// session token), and finds credentials the way the AWS tools do.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/http/client.h"

namespace bdn::objstore {

// SHA-256 of the empty payload: the x-amz-content-sha256 of a GET, HEAD, DELETE or list request.
inline constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// SHA-256 of `data` as 64 lower-case hex digits (OpenSSL). Thread-safe.
std::string Sha256Hex(std::span<const uint8_t> data);
inline std::string Sha256Hex(std::string_view data) {
  return Sha256Hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

// MD5 of `data` in base64 (OpenSSL): the Content-MD5 header S3 requires on DeleteObjects.
// Errors: Internal "MD5 is not available (OpenSSL refused it: FIPS mode?)".
Result<std::string> Md5Base64(std::span<const uint8_t> data);

// The query string of a SigV4-signed request in canonical form: every name and value
// percent-encoded (RFC 3986 unreserved characters kept, '/' too encoded), sorted by name then
// value, joined with '&' and '='. libcurl 7.88 signs the query as it is sent, so sending this form
// is what makes its signature the one S3 computes.
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);

// An AWS-style key pair.
struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" for long-term keys
  std::string region;         // "" = not given
};

// Signs `req` for S3 in `region` (service "s3"): x-amz-content-sha256 set to `payload_sha256`
// (Sha256Hex of the body; kEmptySha256 without one), x-amz-security-token when the credentials
// carry a session token, and Request::aws_sigv4 so that libcurl adds x-amz-date and the
// Authorization header. The query in req.path must already be canonical (CanonicalQuery).
void SignS3Request(http::Request& req, const AwsCredentials& creds, const std::string& region,
                   std::string_view payload_sha256 = kEmptySha256);

// Where the standard AWS credentials are read from (AwsCredentialsFromEnvironment); tests point it
// elsewhere.
struct CredentialSources {
  // The environment variables: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
  // AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE, HOME. Null: getenv.
  std::function<const char*(const char*)> getenv;
};

// The credentials the AWS CLI and SDKs would use, from the first of:
//  1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN if set);
//  2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials), profile
//     AWS_PROFILE or "default": aws_access_key_id, aws_secret_access_key, aws_session_token.
// Never from a flag, so keys stay out of process listings and shell history.
// Errors: InvalidArgument "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY" (or the
// reverse); NotFound "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or
// put a [default] profile in ~/.aws/credentials"; InvalidArgument "<file>: profile \"p\": no
// aws_secret_access_key" for an incomplete profile, and "<file>: no profile \"p\"" when the
// file exists but lacks the profile AWS_PROFILE names. No key's value appears in a message.
Result<AwsCredentials> AwsCredentialsFromEnvironment(const CredentialSources& sources = {});

}  // namespace bdn::objstore
