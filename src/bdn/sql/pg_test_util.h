// SharedPgServer: the PostgreSQL server of a test binary (testing/pg_server.h), started at first
// use and stopped at exit, and a fresh schema of its own per test (NewDatabase). For the tests of
// every module whose stores live in PostgreSQL (sql/, registry/, objstore/). Header-only; for
// tests only.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "bdn/base/mutex.h"
#include "bdn/sql/postgres.h"
#include "bdn/testing/pg_server.h"

namespace bdn::testutil {

// The server of the binary's PostgreSQL tests, started at first use and stopped at exit.
class SharedPgServer {
 public:
  static SharedPgServer& Get() {
    static SharedPgServer s;  // stopped at exit
    return s;
  }
  PgServer* server() { return server_.get(); }
  const std::string& why() const { return why_; }
  // The URL of a fresh, empty schema of its own (as if a database of its own: its statements
  // find their tables through the search_path the URL sets; a schema is made at once, where a
  // database takes a second); "" when there is no server.
  std::string NewDatabase(std::string* why) {
    MutexLock lock(mu_);
    if (!server_) {
      *why = why_;
      return "";
    }
    auto admin = sql::PgPool::Open({.url = server_->Url("postgres")});
    if (!admin) {
      *why = admin.error().message();
      return "";
    }
    const std::string name = "t" + std::to_string(++count_);
    Status s = admin.value()->Use("test")->Write([&](sql::Session& session) {
      return sql::ToStatus(session.Exec("CREATE SCHEMA " + name));
    });
    if (!s.ok()) {
      *why = s.message();
      return "";
    }
    return server_->Url("postgres") + "?options=-csearch_path%3D" + name;
  }

 private:
  SharedPgServer() {
    auto s = PgServer::Start(&why_);
    server_.reset(s.release());
  }
  Mutex mu_;
  std::unique_ptr<PgServer> server_;  // set once, by the constructor
  std::string why_;
  int count_ GUARDED_BY(mu_) = 0;
};

}  // namespace bdn::testutil
