#include "bdn/sync/secrets.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "bdn/base/fd.h"
#include "bdn/base/private_files.h"
#include "bdn/store/atomic_file.h"
#include "bdn/sync/source.h"  // kSecretNotFound

namespace bdn::sync {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr char kFormat = 1;  // sealed value: format byte, nonce, ciphertext, tag

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const unsigned char* U(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// Links followed or not: a server's own <data>/secrets.key is never a link; a shared key file
// given by flag often is (a mounted Kubernetes secret).
enum class Links { kFollow, kRefuse };

Result<std::string> ReadKeyFile(const std::filesystem::path& path, Links links = Links::kRefuse) {
  const std::string what = "secret key file " + path.string();
  UniqueFd fd(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (links == Links::kRefuse ? O_NOFOLLOW : 0)));
  if (!fd) return Err(ErrnoError(what, errno));
  std::string key(kKeyBytes + 1, '\0');
  BDN_ASSIGN_OR_RETURN(
      size_t n, ReadFull(fd.get(), {reinterpret_cast<uint8_t*>(key.data()), key.size()}, what));
  if (n != kKeyBytes) {
    return Err(InternalError("secret key file " + path.string() + ": must hold exactly 32 bytes"));
  }
  key.resize(kKeyBytes);
  return key;
}

}  // namespace

SecretVault::SecretVault(std::shared_ptr<SecretStore> store, std::string key)
    : store_(std::move(store)), key_(std::move(key)) {}

Result<std::shared_ptr<SecretVault>> SecretVault::Open(std::shared_ptr<SecretStore> store,
                                                       const std::filesystem::path& key_path) {
  struct stat st;
  if (::lstat(key_path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Err(ErrnoError("secret key file " + key_path.string(), errno));
    std::string key(kKeyBytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeyBytes) != 1) {
      return Err(InternalError("secret key file " + key_path.string() + ": no random bytes"));
    }
    // Never replaces: when two processes create the key at once, the first one wins and the
    // other reads it.
    auto written =
        WriteFileAtomically(key_path, AsBytes(key), "secret key file " + key_path.string(),
                            {.existing = ExistingFile::kKeep, .sync = FileSync::kAll});
    if (!written) return Err(written.error());
  } else {
    BDN_RETURN_IF_ERROR(CheckPrivateFile(key_path, "secret key file"));
  }
  BDN_ASSIGN_OR_RETURN(std::string key, ReadKeyFile(key_path));
  return std::shared_ptr<SecretVault>(new SecretVault(std::move(store), std::move(key)));
}

Result<std::shared_ptr<SecretVault>> SecretVault::OpenShared(
    std::shared_ptr<SecretStore> store, const std::filesystem::path& key_path) {
  struct stat st;
  if (::stat(key_path.c_str(), &st) != 0 && errno == ENOENT) {
    return Err(NotFoundError("secret key file " + key_path.string() +
                             ": not found (create it once, e.g. head -c 32 /dev/urandom > " +
                             key_path.string() + ", and give every server the same file)"));
  }
  BDN_ASSIGN_OR_RETURN(std::string key, ReadKeyFile(key_path, Links::kFollow));
  return std::shared_ptr<SecretVault>(new SecretVault(std::move(store), std::move(key)));
}

Status SecretVault::Set(const std::string& name, const std::string& value,
                        std::vector<std::string> namespaces) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  BDN_RETURN_IF_ERROR(NormalizeSecretNamespaces(namespaces));
  if (value.empty()) return InvalidArgumentError("secret \"" + name + "\": the value is empty");
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    return InternalError("secret \"" + name + "\": no random bytes");
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  std::string out(1 + kNonceBytes + value.size() + kTagBytes, '\0');
  out[0] = kFormat;
  out.replace(1, kNonceBytes, nonce);
  auto* cipher = reinterpret_cast<unsigned char*>(out.data() + 1 + kNonceBytes);
  int len = 0, fin = 0;
  bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key_), U(nonce)) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, U(name), static_cast<int>(name.size())) == 1 &&
      EVP_EncryptUpdate(ctx.get(), cipher, &len, U(value), static_cast<int>(value.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), cipher + len, &fin) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, cipher + value.size()) == 1;
  if (!ok) return InternalError("secret \"" + name + "\": encryption failed");
  return store_->Put(name, out, std::move(namespaces));
}

namespace {

Status SecretNotFound(const std::string& name) {
  return WithCode(NotFoundError("secret \"" + name + "\": not found"), kSecretNotFound);
}

// Whether a job into `ns` whose key gave it `use` may use the secret `info`.
bool MayUse(const SecretInfo& info, const std::string& ns, SecretUse use) {
  if (use == SecretUse::kAny) return true;
  return std::ranges::any_of(
      info.namespaces, [&](const std::string& n) { return n == kSecretAllNamespaces || n == ns; });
}

}  // namespace

// Each lookup checks the name first: one that cannot be is not quoted whole in "not found" (it
// may be a value pasted with it: "tok=hf_…"; from attacking helper 123).
Status SecretVault::CheckUse(const std::string& name, const std::string& ns, SecretUse use) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  auto info = store_->Info(name);
  if (!info) {
    return info.error().code() == StatusCode::kNotFound ? SecretNotFound(name) : info.error();
  }
  return MayUse(*info, ns, use) ? Status::Ok() : SecretNotFound(name);
}

Result<std::string> SecretVault::RevealFor(const std::string& name, const std::string& ns,
                                           SecretUse use) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  auto got = store_->GetWithInfo(name);
  if (!got) {
    return Err(got.error().code() == StatusCode::kNotFound ? SecretNotFound(name) : got.error());
  }
  if (!MayUse(got->first, ns, use)) return Err(SecretNotFound(name));
  return Unseal(name, got->second);
}

Result<std::string> SecretVault::Reveal(const std::string& name) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  auto sealed = store_->Get(name);
  if (!sealed) {
    if (sealed.error().code() == StatusCode::kNotFound) {
      return Err(sealed.error().WithReason(std::string(kSecretNotFound)));
    }
    return Err(sealed.error());
  }
  return Unseal(name, *sealed);
}

Result<std::string> SecretVault::Unseal(const std::string& name, const std::string& s) {
  auto corrupt = [&] {
    return Err(CorruptionError("secret \"" + name +
                               "\": cannot be decrypted (wrong key file, or altered)"));
  };
  if (s.size() < 1 + kNonceBytes + kTagBytes || s[0] != kFormat) return corrupt();
  const size_t n = s.size() - 1 - kNonceBytes - kTagBytes;
  const auto* nonce = U(s) + 1;
  const auto* cipher = nonce + kNonceBytes;
  std::string tag = s.substr(1 + kNonceBytes + n);
  std::string plain(n, '\0');
  Ctx ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key_), nonce) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, U(name), static_cast<int>(name.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len, cipher,
                        static_cast<int>(n)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &fin) ==
          1;
  if (!ok) return corrupt();
  return plain;
}

Result<std::vector<SecretInfo>> SecretVault::List() { return store_->List(); }

Status SecretVault::Remove(const std::string& name) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  return store_->Remove(name);
}

}  // namespace bdn::sync
