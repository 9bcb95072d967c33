// Tests for SqliteKeyStore and the scope rules: create, authenticate, revoke, listing,
// persistence, and that the database never holds a secret.
#include "bdn/registry/key_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace bdn {
namespace {
namespace fs = std::filesystem;

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/bdn-keystore-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto s = SqliteKeyStore::Open(dir_ / "keys.db");
    ASSERT_TRUE(s) << s.error().ToString();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir_;
  std::unique_ptr<SqliteKeyStore> store_;
};

TEST(Scopes, ParseTable) {
  EXPECT_EQ(*ParseScopes("push,pull,push"), (std::vector<Scope>{Scope::kPull, Scope::kPush}));
  EXPECT_EQ(*ParseScopes("admin"), std::vector<Scope>{Scope::kAdmin});
  EXPECT_EQ(ParseScopes("").error().message(), "scopes: at least one is required");
  EXPECT_EQ(ParseScopes("pull,write").error().message(),
            "scope \"write\": must be one of pull, push, tag, admin");
  EXPECT_FALSE(ParseScopes("pull,"));
}

TEST(Scopes, ImplicationAndNamespace) {
  ApiKey pull{"a", "weights", {Scope::kPull}, 0, false};
  EXPECT_TRUE(pull.Allows(Scope::kPull, "weights"));
  EXPECT_FALSE(pull.Allows(Scope::kPull, "other"));
  EXPECT_TRUE(pull.Allows(Scope::kPull, std::nullopt));
  EXPECT_FALSE(pull.Allows(Scope::kPush, "weights"));
  ApiKey push{"b", "weights", {Scope::kPush}, 0, false};
  EXPECT_TRUE(push.Allows(Scope::kPull, "weights"));
  EXPECT_TRUE(push.Allows(Scope::kPush, std::nullopt));
  EXPECT_FALSE(push.Allows(Scope::kTag, "weights"));
  ApiKey tag{"c", "*", {Scope::kTag}, 0, false};
  EXPECT_TRUE(tag.Allows(Scope::kTag, "anything"));
  EXPECT_TRUE(tag.Allows(Scope::kPull, "anything"));
  EXPECT_FALSE(tag.Allows(Scope::kPush, "anything"));
  ApiKey admin{"d", "weights", {Scope::kAdmin}, 0, false};
  EXPECT_TRUE(admin.Allows(Scope::kPush, "weights"));
  EXPECT_FALSE(admin.Allows(Scope::kAdmin, "other"));
  admin.revoked = true;
  EXPECT_FALSE(admin.Allows(Scope::kPull, "weights"));
}

TEST(Tokens, SplitTable) {
  auto ok = SplitToken("bdn_0123abcd_deadbeef");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "0123abcd");
  EXPECT_EQ(ok->second, "deadbeef");
  for (const char* bad : {"", "bdn_", "bdn_abc", "xyz_ab_cd", "bdn__cd", "bdn_ab_", "bdn_AB_cd",
                          "bdn_ab_cd_ef", "Bearer bdn_ab_cd"}) {
    auto r = SplitToken(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message(), "token: malformed (expected bdn_<id>_<secret>)");
  }
}

TEST_F(KeyStoreTest, CreateAuthenticateRevoke) {
  auto k = store_->Create("weights", {Scope::kPush, Scope::kPull, Scope::kPull});
  ASSERT_TRUE(k) << k.error().ToString();
  EXPECT_EQ(k->key.scopes, (std::vector<Scope>{Scope::kPull, Scope::kPush}));
  EXPECT_TRUE(k->token.starts_with("bdn_" + k->key.id + "_"));
  auto a = store_->Authenticate(k->token);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->ns, "weights");
  EXPECT_FALSE(a->revoked);

  std::string wrong = k->token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  auto w = store_->Authenticate(wrong);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(w.error().message(), "key " + k->key.Name() + ": invalid token");
  EXPECT_EQ(store_->Authenticate("bdn_0000000000000000_00").error().message(),
            "key bdn_0000000000000000: invalid token");
  EXPECT_EQ(store_->Authenticate("nonsense").error().code(), StatusCode::kPermissionDenied);

  ASSERT_TRUE(store_->Revoke(k->key.id));
  ASSERT_TRUE(store_->Revoke(k->key.id));  // idempotent
  auto r = store_->Authenticate(k->token);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "key " + k->key.Name() + ": revoked");
  EXPECT_EQ(store_->Revoke("ffff").error().code(), StatusCode::kNotFound);
}

TEST_F(KeyStoreTest, RejectsBadNamespaceAndNoScopes) {
  EXPECT_EQ(store_->Create("Weights", {Scope::kPull}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create("weights", {}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->Create("*", {Scope::kAdmin}));
}

TEST_F(KeyStoreTest, ListsOldestFirstAndPersists) {
  auto a = store_->Create("*", {Scope::kAdmin});
  auto b = store_->Create("weights", {Scope::kPull});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(store_->Revoke(b->key.id));
  store_.reset();
  auto reopened = SqliteKeyStore::Open(dir_ / "keys.db");
  ASSERT_TRUE(reopened);
  auto keys = (*reopened)->List();
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].ns, "*");
  EXPECT_EQ((*keys)[1].ns, "weights");
  EXPECT_TRUE((*keys)[1].revoked);
  EXPECT_TRUE((*reopened)->Authenticate(a->token));
}

TEST_F(KeyStoreTest, SecretNeverStored) {
  auto k = store_->Create("*", {Scope::kAdmin});
  ASSERT_TRUE(k);
  std::string secret = SplitToken(k->token)->second;
  store_.reset();  // checkpoints the WAL into the main file
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(ReadAll(e.path()).find(secret), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace bdn
