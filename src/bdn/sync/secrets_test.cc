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
  Status Put(const std::string& name, const std::string& sealed,
             std::vector<std::string> namespaces) override {
    BDN_RETURN_IF_ERROR(NormalizeSecretNamespaces(namespaces));
    MutexLock lock(mu_);
    sealed_[name] = sealed;
    namespaces_[name] = std::move(namespaces);
    return Status::Ok();
  }
  Result<SecretInfo> Info(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = namespaces_.find(name);
    if (it == namespaces_.end()) return Err(NotFoundError("secret \"" + name + "\": not found"));
    return SecretInfo{name, 1, 2, it->second};
  }
  Result<std::string> Get(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = sealed_.find(name);
    if (it == sealed_.end()) return Err(NotFoundError("secret \"" + name + "\": not found"));
    return it->second;
  }
  Result<std::pair<SecretInfo, std::string>> GetWithInfo(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = sealed_.find(name);
    if (it == sealed_.end()) return Err(NotFoundError("secret \"" + name + "\": not found"));
    return std::make_pair(SecretInfo{name, 1, 2, namespaces_[name]}, it->second);
  }
  Result<std::vector<SecretInfo>> List() override {
    MutexLock lock(mu_);
    std::vector<SecretInfo> out;
    for (const auto& [name, namespaces] : namespaces_) out.push_back({name, 1, 2, namespaces});
    return out;
  }
  Status Remove(const std::string& name) override {
    MutexLock lock(mu_);
    namespaces_.erase(name);
    if (sealed_.erase(name) == 0) return NotFoundError("secret \"" + name + "\": not found");
    return Status::Ok();
  }
  std::map<std::string, std::string> sealed_;
  std::map<std::string, std::vector<std::string>> namespaces_;

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
                "secret name \"-\" and 3 more characters (not shown): must be 1 to 128");
  EXPECT_TRUE(f.store->sealed_.empty());
  EXPECT_STATUS(vault->Remove("nope"), kNotFound, "secret \"nope\": not found");
  // From attacking helper 123: a name and its value pasted as one word were quoted whole.
  const std::string rule =
      ": must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter "
      "or digit";
  EXPECT_EQ(vault->Set("tok=hf_SEKRET", "v").message(),
            "secret name \"tok\" then \"=\" and 9 more characters (not shown)" + rule);
  EXPECT_EQ(vault->Set("tok ", "v").message(), "secret name \"tok\" then \" \"" + rule);
  EXPECT_EQ(vault->Set(".hf_SEKRET", "v").message(),
            "secret name \".\" and 9 more characters (not shown)" + rule);
  EXPECT_EQ(vault->Set("", "v").message(), "secret name \"\"" + rule);
  EXPECT_EQ(vault->Set(std::string(129, 'S'), "v").message(),
            "secret name of 129 characters (not shown)" + rule);
  EXPECT_EQ(vault->Remove("tok=hf_SEKRET").message(),
            "secret name \"tok\" then \"=\" and 9 more characters (not shown)" + rule);
  EXPECT_EQ(vault->Reveal("x\nSEKRET").error().message(),
            "secret name \"x\" then \"\\n\" and 6 more characters (not shown)" + rule);
  EXPECT_TRUE(f.store->sealed_.empty());
}

// A job may name a secret set for its namespace or for "*"; any other, for a key that is not an
// admin key for every namespace, reads exactly as a secret that does not exist, so a caller
// learns neither other namespaces' secret names nor anything of their values.
TEST(SecretVault, AJobNamespaceUsesOnlyItsOwnSecretsAndOthersReadAsMissing) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  ASSERT_OK(vault->Set("team-a", "hf_a", {"a"}));
  ASSERT_OK(vault->Set("team-b", "not json", {"b", "c"}));
  ASSERT_OK(vault->Set("shared", "hf_s", {"*"}));
  ASSERT_OK(vault->Set("admins", "hf_x"));  // no namespaces
  EXPECT_OK(vault->CheckUse("team-a", "a", SecretUse::kJobNamespace));
  EXPECT_OK(vault->CheckUse("team-b", "c", SecretUse::kJobNamespace));
  EXPECT_OK(vault->CheckUse("shared", "a", SecretUse::kJobNamespace));
  for (const std::string name : {"team-b", "admins", "nope"}) {
    Status s = vault->CheckUse(name, "a", SecretUse::kJobNamespace);
    EXPECT_STATUS(s, kNotFound, "secret \"" + name + "\": not found");
    EXPECT_EQ("secret \"" + name + "\": not found", s.message());
    EXPECT_EQ("secret_not_found", s.reason()) << name;
  }
  // An admin key for every namespace (and the embedded CLI) may name any secret that exists.
  for (const std::string name : {"team-a", "team-b", "shared", "admins"}) {
    EXPECT_OK(vault->CheckUse(name, "a", SecretUse::kAny));
  }
  Status missing = vault->CheckUse("nope", "a", SecretUse::kAny);
  EXPECT_EQ("secret \"nope\": not found", missing.message());
  EXPECT_EQ("secret_not_found", missing.reason());
  // Setting the value again replaces the namespaces: "a" no longer may use team-a.
  ASSERT_OK(vault->Set("team-a", "hf_a2", {"d"}));
  EXPECT_STATUS(vault->CheckUse("team-a", "a", SecretUse::kJobNamespace), kNotFound,
                "secret \"team-a\": not found");
  EXPECT_STATUS(vault->Set("bad-ns", "v", {"A B"}), kInvalidArgument, "namespace \"A B\"");
  EXPECT_STATUS(vault->Set("bad-ns", "v", {"*", "a"}), kInvalidArgument,
                "namespaces: \"*\" (every namespace) stands alone");
  EXPECT_FALSE(f.store->sealed_.contains("bad-ns"));
}

// A job's run reveals its secret only as the use recorded with the job allows, on the value it
// reads: the answer for a secret it may not use is that of a missing one. A job recorded before
// jobs kept their use (kLegacyJob) may use only what a namespace's key may: an attacking helper
// had a job that key-a started on the release before run with a secret an admin then set again
// for admins alone (no namespaces).
TEST(SecretVault, RevealForChecksTheJobsUseOnTheValueItReveals) {
  Fixture f;
  auto vault = OpenVault(f.store, f.key);
  ASSERT_OK(vault->Set("team-a", "hf_a", {"a"}));
  ASSERT_OK(vault->Set("team-b", "hf_b", {"b"}));
  ASSERT_OK(vault->Set("shared", "hf_s", {"*"}));
  ASSERT_OK(vault->Set("admins", "hf_x"));
  struct Case {
    std::string name;
    SecretUse use;
    std::string value;  // "": not found
  };
  const std::vector<Case> cases = {
      {"team-a", SecretUse::kJobNamespace, "hf_a"},
      {"team-a", SecretUse::kLegacyJob, "hf_a"},
      {"team-a", SecretUse::kAny, "hf_a"},
      {"shared", SecretUse::kJobNamespace, "hf_s"},
      {"team-b", SecretUse::kJobNamespace, ""},
      {"team-b", SecretUse::kLegacyJob, ""},
      {"team-b", SecretUse::kAny, "hf_b"},
      {"admins", SecretUse::kJobNamespace, ""},
      {"admins", SecretUse::kLegacyJob, ""},
      {"admins", SecretUse::kAny, "hf_x"},
      {"nope", SecretUse::kAny, ""},
  };
  for (const Case& c : cases) {
    auto value = vault->RevealFor(c.name, "a", c.use);
    if (!c.value.empty()) {
      ASSERT_OK(value);
      EXPECT_EQ(c.value, *value) << c.name;
      continue;
    }
    EXPECT_STATUS(value, kNotFound, "secret \"" + c.name + "\": not found");
    ASSERT_FALSE(value.has_value());
    EXPECT_EQ("secret \"" + c.name + "\": not found", value.error().message());
    EXPECT_EQ("secret_not_found", value.error().reason()) << c.name;
  }
  // Removed, and set again for another namespace only: a's job no longer uses it.
  ASSERT_OK(vault->Remove("team-a"));
  ASSERT_OK(vault->Set("team-a", "hf_b", {"b"}));
  EXPECT_STATUS(vault->RevealFor("team-a", "a", SecretUse::kJobNamespace), kNotFound,
                "secret \"team-a\": not found");
}

}  // namespace
}  // namespace bdn::sync
