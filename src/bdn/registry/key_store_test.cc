// Tests for SqlKeyStore on SQLite and PostgreSQL and the scope rules: create, authenticate,
// revoke, listing, persistence, the first key created once by servers starting at once, and that
// the database never holds a secret.
#include "bdn/registry/key_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "bdn/registry/backends_test_util.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

template <typename Backend>
class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    auto s = backend_.OpenKeys();
    ASSERT_TRUE(s) << s.error().ToString();
    store_ = std::move(*s);
  }
  Backend backend_;
  std::unique_ptr<KeyStore> store_;
};

TYPED_TEST_SUITE(KeyStoreTest, testutil::Backends, testutil::BackendName);

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

TYPED_TEST(KeyStoreTest, CreateAuthenticateRevoke) {
  auto k = this->store_->Create("weights", {Scope::kPush, Scope::kPull, Scope::kPull});
  ASSERT_TRUE(k) << k.error().ToString();
  EXPECT_EQ(k->key.scopes, (std::vector<Scope>{Scope::kPull, Scope::kPush}));
  EXPECT_TRUE(k->token.starts_with("bdn_" + k->key.id + "_"));
  auto a = this->store_->Authenticate(k->token);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->ns, "weights");
  EXPECT_FALSE(a->revoked);

  std::string wrong = k->token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  auto w = this->store_->Authenticate(wrong);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(w.error().message(), "key " + k->key.Name() + ": invalid token");
  EXPECT_EQ(this->store_->Authenticate("bdn_0000000000000000_00").error().message(),
            "key bdn_0000000000000000: invalid token");
  EXPECT_EQ(this->store_->Authenticate("nonsense").error().code(), StatusCode::kPermissionDenied);

  ASSERT_TRUE(this->store_->Revoke(k->key.id));
  ASSERT_TRUE(this->store_->Revoke(k->key.id));  // idempotent
  auto r = this->store_->Authenticate(k->token);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "key " + k->key.Name() + ": revoked");
  EXPECT_EQ(this->store_->Revoke("ffff").error().code(), StatusCode::kNotFound);
}

TYPED_TEST(KeyStoreTest, RejectsBadNamespaceAndNoScopes) {
  EXPECT_EQ(this->store_->Create("Weights", {Scope::kPull}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Create("weights", {}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(this->store_->Create("*", {Scope::kAdmin}));
}

TYPED_TEST(KeyStoreTest, ListsOldestFirstAndPersists) {
  auto a = this->store_->Create("*", {Scope::kAdmin});
  auto b = this->store_->Create("weights", {Scope::kPull});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(this->store_->Revoke(b->key.id));
  this->store_.reset();
  auto reopened = this->backend_.OpenKeys();
  ASSERT_TRUE(reopened);
  auto keys = (*reopened)->List();
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].ns, "*");
  EXPECT_EQ((*keys)[1].ns, "weights");
  EXPECT_TRUE((*keys)[1].revoked);
  EXPECT_TRUE((*reopened)->Authenticate(a->token));
}

// Of several servers starting at once over one key store, exactly one creates the first key.
TYPED_TEST(KeyStoreTest, CreateIfNoneCreatesExactlyOneKeyAcrossConcurrentServers) {
  constexpr int kServers = 8;
  std::vector<std::unique_ptr<KeyStore>> servers;
  for (int i = 0; i < kServers; ++i) {
    auto s = this->backend_.OpenKeys();
    ASSERT_TRUE(s) << s.error().ToString();
    servers.push_back(std::move(*s));
  }
  std::atomic<int> created{0};
  std::vector<std::string> errors(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      auto r = servers[i]->CreateIfNone("*", {Scope::kAdmin});
      if (!r) {
        errors[i] = r.error().ToString();
      } else if (*r) {
        ++created;
        EXPECT_TRUE((*r)->token.starts_with("bdn_" + (*r)->key.id + "_"));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, std::vector<std::string>(kServers));
  EXPECT_EQ(created.load(), 1);
  auto keys = this->store_->List();
  ASSERT_TRUE(keys) << keys.error().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].ns, "*");
  EXPECT_EQ((*keys)[0].scopes, std::vector<Scope>{Scope::kAdmin});
  // Keys exist (a revoked one counts too): never again.
  ASSERT_TRUE(this->store_->Revoke((*keys)[0].id));
  auto again = this->store_->CreateIfNone("*", {Scope::kAdmin});
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_FALSE(again->has_value());
}

TYPED_TEST(KeyStoreTest, CreateIfNoneChecksItsArguments) {
  EXPECT_EQ(this->store_->CreateIfNone("Weights", {Scope::kPull}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(this->store_->CreateIfNone("*", {}).error().code(), StatusCode::kInvalidArgument);
}

TEST(SqliteKeyStore, SecretNeverStored) {
  testutil::SqliteBackend backend;
  auto store = backend.OpenKeys();
  ASSERT_TRUE(store) << store.error().ToString();
  auto k = (*store)->Create("*", {Scope::kAdmin});
  ASSERT_TRUE(k);
  std::string secret = SplitToken(k->token)->second;
  store->reset();  // checkpoints the WAL into the main file
  for (const auto& e : fs::directory_iterator(backend.file().parent_path())) {
    EXPECT_EQ(ReadAll(e.path()).find(secret), std::string::npos) << e.path();
  }
}

TEST(PgKeyStore, SecretNeverStored) {
  testutil::PostgresBackend backend;
  std::string why = backend.Prepare();
  if (!why.empty()) GTEST_SKIP() << why;
  auto store = backend.OpenKeys();
  ASSERT_TRUE(store) << store.error().ToString();
  auto k = (*store)->Create("*", {Scope::kAdmin});
  ASSERT_TRUE(k);
  const std::string secret = SplitToken(k->token)->second;
  auto pool = backend.Pool();
  ASSERT_TRUE(pool) << pool.error().ToString();
  // Every column of the table, as text.
  auto rows = sql::ReadValue<sql::Rows>(*(*pool)->Use("test"), [](sql::Session& s) {
    return s.Query("SELECT CAST(k AS text) FROM api_keys k");
  });
  ASSERT_TRUE(rows) << rows.error().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_NE(rows->Text(0, 0).find(k->key.id), std::string::npos) << rows->Text(0, 0);
  EXPECT_EQ(rows->Text(0, 0).find(secret), std::string::npos) << rows->Text(0, 0);
}

}  // namespace
}  // namespace bdn
