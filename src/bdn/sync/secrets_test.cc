// SecretVault over an in-memory SecretStore that shows what would be stored: values sealed with
// AES-256-GCM (never in plaintext, a fresh nonce each time), bound to their names, opened only
// with the key file that sealed them; the key file made once, 32 bytes, mode 0600.
#include "bdn/sync/secrets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <mutex>

#include "bdn/base/mutex.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn::sync {
namespace {

// The sealed bytes by name, as a database would hold them.
class MemorySecretStore : public SecretStore {
 public:
  Status Put(const std::string& name, const std::string& sealed) override {
    MutexLock lock(mu_);
    sealed_[name] = sealed;
    return Status::Ok();
  }
  Result<std::string> Get(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = sealed_.find(name);
    if (it == sealed_.end()) return Err(NotFoundError("secret \"" + name + "\": not found"));
    return it->second;
  }
  Result<std::vector<SecretInfo>> List() override {
    MutexLock lock(mu_);
    std::vector<SecretInfo> out;
    for (const auto& [name, _] : sealed_) out.push_back({name, 1, 2});
    return out;
  }
  Status Remove(const std::string& name) override {
    MutexLock lock(mu_);
    if (sealed_.erase(name) == 0) return NotFoundError("secret \"" + name + "\": not found");
    return Status::Ok();
  }
  std::map<std::string, std::string> sealed_;

 private:
  Mutex mu_;
};

struct Fixture {
  testutil::TempDir dir{"bdn_vault"};
  std::shared_ptr<MemorySecretStore> store = std::make_shared<MemorySecretStore>();
  std::filesystem::path key = dir.path() / "secrets.key";
};

std::shared_ptr<SecretVault> OpenVault(std::shared_ptr<SecretStore> store,
                                       const std::filesystem::path& key) {
  auto v = SecretVault::Open(std::move(store), key);
  EXPECT_OK(v);
  return v ? *v : nullptr;
}

TEST(SecretVault, SealsValuesAndRevealsThemWithTheSameKeyFile) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  const std::string value = "hf_TopSecretTokenValue";
  ASSERT_OK(vault->Set("hf-token", value));
  const std::string sealed = f.store->sealed_.at("hf-token");
  // Format byte, 12-byte nonce, ciphertext as long as the value, 16-byte tag.
  EXPECT_EQ(1 + 12 + value.size() + 16, sealed.size());
  EXPECT_EQ('\x01', sealed[0]);
  EXPECT_EQ(std::string::npos, sealed.find(value));
  EXPECT_EQ(std::string::npos, sealed.find("TopSecret"));
  auto revealed = vault->Reveal("hf-token");
  ASSERT_OK(revealed);
  EXPECT_EQ(value, *revealed);

  // A second vault over the same key file (a restarted server) opens it.
  auto again = OpenVault(f.store, f.key);
  revealed = again->Reveal("hf-token");
  ASSERT_OK(revealed);
  EXPECT_EQ(value, *revealed);
}

TEST(SecretVault, EachSealUsesAFreshNonce) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  ASSERT_OK(vault->Set("a", "same value"));
  const std::string first = f.store->sealed_.at("a");
  ASSERT_OK(vault->Set("a", "same value"));
  EXPECT_NE(first, f.store->sealed_.at("a"));
  EXPECT_NE(first.substr(1, 12), f.store->sealed_.at("a").substr(1, 12));
}

TEST(SecretVault, AValueMovedToAnotherNameOrAlteredDoesNotOpen) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  ASSERT_OK(vault->Set("aws-prod", "{\"access_key_id\": \"AKIA\", \"secret_access_key\": \"s\"}"));
  ASSERT_OK(vault->Set("aws-dev", "dev"));
  f.store->sealed_["aws-dev"] = f.store->sealed_.at("aws-prod");  // bound to its name
  EXPECT_STATUS(vault->Reveal("aws-dev"), kCorruption,
                "secret \"aws-dev\": cannot be decrypted (wrong key file, or altered)");
  std::string& sealed = f.store->sealed_.at("aws-prod");
  for (size_t at : {size_t{5}, sealed.size() / 2, sealed.size() - 1}) {  // nonce, body, tag
    std::string saved = sealed;
    sealed[at] ^= 0x01;
    EXPECT_STATUS(vault->Reveal("aws-prod"), kCorruption,
                  "secret \"aws-prod\": cannot be decrypted (wrong key file, or altered)");
    sealed = saved;
  }
  sealed.resize(20);  // shorter than nonce and tag
  EXPECT_STATUS(vault->Reveal("aws-prod"), kCorruption, "secret \"aws-prod\": cannot be decrypted");
}

TEST(SecretVault, AnotherKeyFileCannotOpenTheValues) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  ASSERT_OK(vault->Set("s3", "value"));
  auto other = OpenVault(f.store, f.dir.path() / "other.key");
  EXPECT_STATUS(other->Reveal("s3"), kCorruption,
                "secret \"s3\": cannot be decrypted (wrong key file, or altered)");
}

TEST(SecretVault, KeyFileIs32BytesMode0600AndTightenedWhenOpen) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  struct stat st;
  ASSERT_EQ(0, ::stat(f.key.c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
  EXPECT_EQ(32, st.st_size);
  ASSERT_EQ(0, ::chmod(f.key.c_str(), 0644));
  OpenVault(f.store, f.key);
  ASSERT_EQ(0, ::stat(f.key.c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
  // Nothing but the key file is left beside it (its temporary name is gone).
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(f.dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(1u, entries);
}

TEST(SecretVault, RefusesAKeyFileOfAnotherSize) {
  Fixture f;
  std::ofstream(f.key) << "too short";
  auto v = SecretVault::Open(f.store, f.key);
  EXPECT_STATUS(v, kInternal, "secret key file " + f.key.string() + ": must hold exactly 32 bytes");
}

TEST(SecretVault, ErrorsNameTheSecret) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  auto missing = vault->Reveal("nope");
  EXPECT_STATUS(missing, kNotFound, "secret \"nope\": not found");
  EXPECT_EQ("secret_not_found", missing.error().reason());
  EXPECT_STATUS(vault->Set("empty", ""), kInvalidArgument, "secret \"empty\": the value is empty");
  EXPECT_STATUS(vault->Set("-bad", "v"), kInvalidArgument,
                "secret name \"-bad\": must be 1 to 128");
  EXPECT_TRUE(f.store->sealed_.empty());
  EXPECT_STATUS(vault->Remove("nope"), kNotFound, "secret \"nope\": not found");
}

}  // namespace
}  // namespace bdn::sync
