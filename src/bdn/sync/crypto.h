// The few primitives the cloud sources' authentication needs, over OpenSSL's EVP API (SHA-256
// is objstore/s3_sign.h's Sha256Hex): HMAC-SHA256 (Azure Shared Key), base64 and base64url (RFC
// 4648), and RS256 signatures (RFC 7518 §3.3: RSASSA-PKCS1-v1_5 with SHA-256) for the OAuth2 JWT
// bearer flow of GCS service accounts.
#pragma once

#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn::sync {

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

// Standard base64 with padding (RFC 4648 §4).
std::string Base64Encode(std::string_view data);
// base64url without padding (RFC 4648 §5), as JWTs use.
std::string Base64UrlEncode(std::string_view data);
// Decodes standard base64 (padding required, no whitespace). Errors: InvalidArgument "not
// base64" for any other character, a wrong length or bad padding.
Result<std::string> Base64Decode(std::string_view text);

// The RS256 signature of `data` under the PEM private key `pem_key` (PKCS#8 "BEGIN PRIVATE KEY"
// as Google issues service-account keys, or PKCS#1 "BEGIN RSA PRIVATE KEY"): raw signature
// bytes. Errors: InvalidArgument "not a PEM RSA private key" (the key's bytes are never put in
// the message); Internal when OpenSSL fails to sign.
Result<std::string> Rs256Sign(std::string_view pem_key, std::string_view data);

}  // namespace bdn::sync
