#include "bdn/sync/crypto.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <memory>
#include <span>

#include "bdn/base/hex.h"

namespace bdn::sync {
namespace {

const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), U(data), data.size(), md, &n);
  return std::string(reinterpret_cast<const char*>(md), n);
}

std::string Base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), U(data),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Base64UrlEncode(std::string_view data) {
  std::string out = Base64Encode(data);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  auto bad = [] { return Err(InvalidArgumentError("not base64")); };
  if (text.size() % 4 != 0) return bad();
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/';
    if (c == '=') {
      if (i + 2 < text.size()) return bad();  // padding only in the last two places
      ++pad;
    } else if (!alnum || pad > 0) {
      return bad();
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), U(text),
                          static_cast<int>(text.size()));
  if (n < 0) return bad();
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts the padding as zeros
  return out;
}

Result<std::string> Rs256Sign(std::string_view pem_key, std::string_view data) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem_key.data(), static_cast<int>(pem_key.size())), BIO_free);
  if (!bio) return Err(InternalError("RS256: cannot allocate"));
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) {
    return Err(InvalidArgumentError("not a PEM RSA private key"));
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, U(data), data.size()) != 1) {
    return Err(InternalError("RS256: cannot sign"));
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, U(data),
                     data.size()) != 1) {
    return Err(InternalError("RS256: cannot sign"));
  }
  sig.resize(len);
  return sig;
}

}  // namespace bdn::sync
