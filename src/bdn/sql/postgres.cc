// PgPool and the Database over it: libpq connections, the error mapping, transactions with
// retries, advisory locks and migrations.
#include "bdn/sql/postgres.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "bdn/base/backoff.h"
#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/text.h"

namespace bdn::sql {

// ---- Names ----

namespace {

// libpq's messages span lines ("...failed: Connection refused\n\tIs the server running...");
// messages here are one line.
std::string OneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

struct ConninfoFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

// The `options` the connection would get from `url` (a URI or key=value string), else from
// $PGOPTIONS, libpq's default for it (which an `options` given with the URL replaces); "" when
// neither sets any or the URL cannot be parsed (PgPool::Open reports that).
std::string UrlOptions(const std::string& url) {
  std::unique_ptr<PQconninfoOption, ConninfoFree> opts(PQconninfoParse(url.c_str(), nullptr));
  for (PQconninfoOption* o = opts.get(); o && o->keyword; ++o) {
    if (o->val && std::string_view(o->keyword) == "options") return o->val;
  }
  const char* env = std::getenv("PGOPTIONS");
  return env ? env : "";
}

}  // namespace

Result<std::string> RedactedDatabaseName(const std::string& url) {
  // From attacking helper 124: libpq's reasons quote what they could not parse, and so the
  // password ("postgresql://u:PW%zz@h/db": `invalid percent-encoded token: "PW%zz"`, or the whole
  // URL after a typo in its scheme). A URL that is no postgresql:// one is refused first; in a
  // reason, a quoted text is shown only where it is one character or a query parameter's name.
  if (const size_t sep = url.find("://"); sep != std::string::npos && url.find('=') > sep &&
                                          !url.starts_with("postgresql://") &&
                                          !url.starts_with("postgres://")) {
    return Err(InvalidArgumentError(
        "--db: must be postgresql://[user[:password]@]host[:port]/dbname[?param=value] or "
        "libpq's key=value words (the value is not shown: it may hold a password)"));
  }
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoFree> opts(PQconninfoParse(url.c_str(), &err));
  if (!opts) {
    const std::string why = err ? OneLine(err) : "cannot be parsed";
    PQfreemem(err);
    std::string shown;
    for (size_t i = 0; i < why.size();) {
      const size_t open = why.find('"', i);
      const size_t close = open == std::string::npos ? open : why.find('"', open + 1);
      if (close == std::string::npos) {
        shown += why.substr(i);
        break;
      }
      const std::string quoted = why.substr(open + 1, close - open - 1);
      const bool param = url.find("?" + quoted + "=") != std::string::npos ||
                         url.find("&" + quoted + "=") != std::string::npos;
      shown +=
          why.substr(i, open - i) + "\"" + (quoted.size() <= 1 || param ? quoted : "***") + "\"";
      i = close + 1;
    }
    return Err(InvalidArgumentError("--db: " + shown));
  }
  std::string host, hostaddr, port, dbname;
  for (PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val) continue;
    std::string_view k = o->keyword;
    if (k == "host") host = o->val;
    if (k == "hostaddr") hostaddr = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") dbname = o->val;
  }
  if (host.empty()) host = hostaddr;
  // A port is digits (one per host: "5432,5433"); libpq would quote another when connecting.
  if (!std::ranges::all_of(port, [](char c) { return (c >= '0' && c <= '9') || c == ','; })) {
    return Err(InvalidArgumentError(
        "--db: its port must be a number (the value is not shown: it may hold a password)"));
  }
  // From attacking helper 125: "host=user:PW@db" was shown as postgresql://user:PW@db and quoted
  // by libpq's connect error; a dbname may hold anything ("x?password=PW"). A host is a name or
  // an address (or a socket directory), and a dbname of other characters is shown as "***".
  if (host.empty() || host[0] != '/') {
    if (!std::ranges::all_of(host, [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
                 c == ':' || c == ',' || c == '[' || c == ']';
        })) {
      return Err(InvalidArgumentError(
          "--db: a host must be a name or an address (the value is not shown: it may hold a "
          "password)"));
    }
  }
  if (!std::ranges::all_of(dbname, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
      })) {
    dbname = "***";
  }
  std::string out = "postgresql://";
  if (!host.empty() && host[0] == '/') {
    out += "/" + dbname + "?host=" + host;
    if (!port.empty()) out += "&port=" + port;
    return out;
  }
  out += host;
  if (!port.empty()) out += ":" + port;
  out += "/" + dbname;
  return out;
}

std::string PostgresParameters(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  char quote = 0;  // ' or " while inside one
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      if (end == std::string_view::npos) end = sql.size();
      out.append(sql.substr(i, end - i));
      i = end - 1;
    } else if (c == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      out += '$';
    } else {
      out += c;
    }
  }
  return out;
}

// ---- The pool ----

struct PgPool::Impl {
  PgOptions options;
  std::string name;
  std::string application_name;
  // libpq's `options` for every connection: the URL's own, then
  // "-c idle_in_transaction_session_timeout=<ms>" (PgOptions); "" for none.
  std::string startup_options;

  Mutex mu;
  std::condition_variable cv;
  std::vector<PGconn*> idle;
  size_t open = 0;  // idle plus in use
  // Shutdown: set, then `wake` (an eventfd every wait for the server polls) made readable for
  // good.
  std::atomic<bool> shut_down{false};
  UniqueFd wake{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};

  ~Impl() {
    for (PGconn* c : idle) PQfinish(c);
  }

  // "<what> <name>: [<op>: ]"
  std::string Prefix(std::string_view what, std::string_view op) const {
    std::string out = std::string(what) + " " + name + ": ";
    if (!op.empty()) out += std::string(op) + ": ";
    return out;
  }

  // A new connection (not counted in the pool). Errors: Unavailable with libpq's message.
  Result<PGconn*> Connect(std::string_view what, std::string_view op) const {
    const std::string timeout =
        std::to_string(std::max<int64_t>(2, options.connect_timeout.count()));
    // Defaults first: the URL's own settings, expanded from dbname, override them.
    const char* keys[] = {"connect_timeout",     "application_name", "keepalives_idle",
                          "keepalives_interval", "keepalives_count", "dbname",
                          "client_encoding",     "options",          nullptr};
    // client_encoding and options after dbname: text is UTF-8 whatever the URL or the server
    // say, and `startup_options` is the URL's options plus ours.
    const char* values[] = {timeout.c_str(),
                            application_name.c_str(),
                            "30",
                            "10",
                            "3",
                            options.url.c_str(),
                            "UTF8",
                            startup_options.empty() ? nullptr : startup_options.c_str(),
                            nullptr};
    PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (!conn) return Err(UnavailableError(Prefix(what, op) + "cannot connect: out of memory"));
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string why = OneLine(PQerrorMessage(conn));
      PQfinish(conn);
      return Err(UnavailableError(Prefix(what, op) + "cannot connect: " + why));
    }
    // NOTICEs ("relation ... already exists, skipping") are the server talking to a person.
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
    return conn;
  }

  // Unavailable "<what> <name>: [<op>: ]shutting down", reason kShuttingDown.
  Status ShuttingDown(std::string_view what, std::string_view op) const {
    return UnavailableError(Prefix(what, op) + "shutting down")
        .WithReason(std::string(kShuttingDown));
  }

  // Waits until `fd` (a connection's socket) is readable: true, or false once Shutdown was
  // called.
  bool WaitReadable(int fd) const {
    for (;;) {
      if (shut_down.load()) return false;
      struct pollfd p[2] = {{fd, POLLIN, 0}, {wake.get(), POLLIN, 0}};
      int n = ::poll(p, 2, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return true;  // let libpq meet (and report) what is wrong
      if (p[1].revents != 0) return false;
      if (p[0].revents != 0) return true;
    }
  }

  // A pooled connection: an idle one, a new one while fewer than max_connections are open, or
  // the next one released within acquire_timeout.
  Result<PGconn*> Acquire(std::string_view what, std::string_view op) {
    MutexLock lock(mu);
    if (shut_down.load()) return Err(ShuttingDown(what, op));
    if (!cv.wait_for(lock.native(), options.acquire_timeout, [&] {
          return shut_down.load() || !idle.empty() || open < options.max_connections;
        })) {
      return Err(UnavailableError(Prefix(what, op) + "all " +
                                  std::to_string(options.max_connections) +
                                  " database connections stayed busy"));
    }
    if (shut_down.load()) return Err(ShuttingDown(what, op));
    if (!idle.empty()) {
      PGconn* c = idle.back();
      idle.pop_back();
      return c;
    }
    ++open;
    lock.Unlock();
    auto c = Connect(what, op);
    if (!c) {
      lock.Lock();
      --open;
      cv.notify_one();
    }
    return c;
  }

  // Returns a connection to the pool. A broken one is closed, and so is every idle one: a
  // connection lost means the server restarted or failed over, which ended them all.
  void Release(PGconn* c, bool broken) {
    std::vector<PGconn*> close;
    {
      MutexLock lock(mu);
      if (broken || PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE) {
        close.push_back(c);
        --open;
        if (broken) {
          close.insert(close.end(), idle.begin(), idle.end());
          open -= idle.size();
          idle.clear();
        }
      } else {
        idle.push_back(c);
      }
    }
    cv.notify_all();
    for (PGconn* x : close) PQfinish(x);
  }
};

PgPool::PgPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PgPool::~PgPool() = default;

const std::string& PgPool::name() const { return impl_->name; }

Result<std::shared_ptr<PgPool>> PgPool::Open(PgOptions options) {
  auto impl = std::make_unique<Impl>();
  BDN_ASSIGN_OR_RETURN(impl->name, RedactedDatabaseName(options.url));
  if (options.max_connections == 0) options.max_connections = 1;
  impl->options = std::move(options);
  impl->startup_options = UrlOptions(impl->options.url);
  if (impl->options.idle_in_transaction_timeout.count() > 0) {
    if (!impl->startup_options.empty()) impl->startup_options += ' ';
    impl->startup_options += "-c idle_in_transaction_session_timeout=" +
                             std::to_string(impl->options.idle_in_transaction_timeout.count());
  }
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  impl->application_name = "bdn pid " + std::to_string(::getpid()) + " on " + host;
  BDN_ASSIGN_OR_RETURN(PGconn * first, impl->Acquire("database", ""));
  impl->Release(first, false);
  return std::shared_ptr<PgPool>(new PgPool(std::move(impl)));
}

// ---- Statements ----

namespace {

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultFree>;

// What an error means for the transaction that met it.
struct Failure {
  bool lost = false;          // the connection is gone
  bool rolled_back = false;   // ...and the server said it rolled the transaction back first
  bool retryable = false;     // serialization failure or deadlock: the transaction may run again
  bool lock_timeout = false;  // a lock was not granted within lock_timeout
};

class PgSession : public Session {
 public:
  PgSession(PgPool::Impl& pool, PGconn* conn, std::string_view what, std::string_view op)
      : pool_(pool), conn_(conn), what_(what), op_(op) {}

  Result<Rows> Query(std::string_view sql, const std::vector<Param>& params = {}) override {
    BDN_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    const int rows = PQntuples(r.get()), cols = PQnfields(r.get());
    Rows out(cols);
    for (int i = 0; i < rows; ++i) {
      for (int c = 0; c < cols; ++c) {
        if (PQgetisnull(r.get(), i, c)) {
          out.Add(std::nullopt);
        } else {
          out.Add(std::string(PQgetvalue(r.get(), i, c),
                              static_cast<size_t>(PQgetlength(r.get(), i, c))));
        }
      }
    }
    return out;
  }

  Result<int64_t> Exec(std::string_view sql, const std::vector<Param>& params = {}) override {
    BDN_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    const char* n = PQcmdTuples(r.get());
    return n && *n ? std::strtoll(n, nullptr, 10) : int64_t{0};
  }

  std::string_view ForUpdate() const override { return " FOR UPDATE"; }

  Status LockForTransaction(std::string_view name) override {
    return ToStatus(Query("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))",
                          {"bdn/" + std::string(name)}));
  }

  // A statement without parameters (BEGIN, COMMIT, a migration's SQL).
  Status Command(const char* sql) {
    BDN_ASSIGN_OR_RETURN(PgResult r, Await(PQsendQuery(conn_, sql) == 1));
    return Check(r);
  }

  const Failure& failure() const { return failure_; }
  std::string Prefix() const { return pool_.Prefix(what_, op_); }

 private:
  Result<PgResult> Run(std::string_view sql, const std::vector<Param>& params) {
    std::vector<std::string> ints;
    ints.reserve(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* t = std::get_if<std::string>(&params[i])) {
        if (t->find('\0') != std::string::npos || !IsValidUtf8(*t)) {
          return Err(InvalidArgumentError(Prefix() + "text is not valid UTF-8 without NUL bytes "
                                                     "(PostgreSQL stores text as UTF-8)"));
        }
        values[i] = t->c_str();
      } else if (const auto* v = std::get_if<int64_t>(&params[i])) {
        ints.push_back(std::to_string(*v));
        values[i] = ints.back().c_str();
      }
    }
    const std::string text = PostgresParameters(sql);
    BDN_ASSIGN_OR_RETURN(
        PgResult r, Await(PQsendQueryParams(conn_, text.c_str(), static_cast<int>(params.size()),
                                            nullptr, values.data(), nullptr, nullptr, 0) == 1));
    BDN_RETURN_IF_ERROR(Check(r));
    return r;
  }

  // The answer to the statement just sent (`sent`: its PQsend* call succeeded), as PQexec gives
  // it (the first error, else the last result; null when nothing could be sent, which Check
  // reports with libpq's message), waiting on the socket so that the pool's Shutdown ends the
  // wait: then Unavailable "... shutting down" and the connection counts as lost.
  Result<PgResult> Await(bool sent) {
    if (!sent) return PgResult();
    PgResult out;
    for (;;) {
      while (PQisBusy(conn_)) {
        if (!pool_.WaitReadable(PQsocket(conn_))) {
          failure_.lost = true;
          return Err(pool_.ShuttingDown(what_, op_));
        }
        if (PQconsumeInput(conn_) == 0) break;  // the connection failed: PQgetResult says so
      }
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) return out;
      if (out && PQresultStatus(out.get()) == PGRES_FATAL_ERROR) {
        PQclear(r);  // the first error is the one that counts
      } else {
        out.reset(r);
      }
    }
  }

  // The Status of a result (OK for commands and rows), noting what the failure means.
  Status Check(const PgResult& r) {
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
      return Status::Ok();
    }
    const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state ? state : "";
    const char* primary = r ? PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    const std::string msg = OneLine(primary ? primary : PQerrorMessage(conn_));
    const std::string prefix = Prefix();
    if (PQstatus(conn_) == CONNECTION_BAD || code.starts_with("08") || code == "57P01" ||
        code == "57P02" || code == "57P03" || code == "25P03") {
      failure_.lost = true;
      // 25P03: the session sat idle in its transaction past idle_in_transaction_session_timeout
      // (PgOptions), and the server ended it, transaction rolled back, before this statement.
      failure_.rolled_back = code == "25P03";
      return UnavailableError(prefix + "connection lost (" + msg + ")");
    }
    if (code == "40001" || code == "40P01") {
      failure_.retryable = true;
      return UnavailableError(prefix + msg);
    }
    if (code == "53100") return FailedPreconditionError(prefix + "no space left on device");
    if (code == "55P03") {  // lock_not_available: a lock_timeout ran out
      failure_.lock_timeout = true;
      return UnavailableError(prefix + msg);
    }
    if (code.starts_with("53") || code == "57014") return UnavailableError(prefix + msg);
    if (code == "25006" || code == "42501") {
      return PermissionDeniedError(prefix + "read-only (" + msg + ")");
    }
    if (code == "22021") return InvalidArgumentError(prefix + msg);
    return InternalError(prefix + msg);
  }

  PgPool::Impl& pool_;
  PGconn* conn_;
  const std::string_view what_, op_;
  Failure failure_;
};

// A session advisory lock, held by its own connection.
class PgLock : public HeldLock {
 public:
  PgLock(std::shared_ptr<PgPool::Impl> pool, PGconn* conn, std::string what, std::string op)
      : pool_(std::move(pool)), conn_(conn), what_(std::move(what)), op_(std::move(op)) {}
  // Unlocks before it closes: the server drops a closed session's locks only once its backend
  // has exited, after PQfinish returned, so a holder taking the lock right after this release
  // (the next lease of a sync job, a test's) found it still held. The answer is waited for 1 s
  // at most: a server that does not answer (stopped) gets the plain close.
  ~PgLock() override {
    if (!lost_ && PQsendQuery(conn_, "SELECT pg_advisory_unlock_all()") == 1) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      bool answered = false;
      while (!answered) {
        if (PQconsumeInput(conn_) != 1) break;
        if (!PQisBusy(conn_)) {
          answered = true;
          break;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        struct pollfd p = {PQsocket(conn_), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      }
      while (answered) {
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) break;
        PQclear(r);
        answered = !PQisBusy(conn_);
      }
    }
    PQfinish(conn_);
  }

  // Asks the lock's own connection whether its backend still holds an advisory lock (it holds
  // only this one): a lost connection means the server has dropped, or will drop, the lock.
  Result<bool> Held() override {
    if (lost_) return false;
    PgSession session(*pool_, conn_, what_, op_);
    auto held = session.Query(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
        "pid = pg_backend_pid()");
    if (held) return held->Text(0, 0) != "0";
    if (held.error().reason() == kShuttingDown) return Err(held.error());
    if (!session.failure().lost) return Err(held.error());
    lost_ = true;
    return false;
  }

 private:
  const std::shared_ptr<PgPool::Impl> pool_;
  PGconn* conn_;
  const std::string what_, op_;
  bool lost_ = false;
};

// How many times a transaction runs at most after serialization failures and deadlocks, and
// after lost connections (each of which also replaces the pool's connections).
constexpr int kMaxConflictTries = 8;
constexpr int kMaxLostTries = 2;

class PgDatabase : public Database {
 public:
  PgDatabase(std::shared_ptr<PgPool::Impl> pool, std::string what)
      : pool_(std::move(pool)), what_(std::move(what)) {}

  Engine engine() const override { return Engine::kPostgres; }
  const std::string& name() const override { return pool_->name; }
  const std::string& what() const override { return what_; }

  Status Read(const std::function<Status(Session&)>& body, Consistency consistency,
              std::string_view op) override {
    for (int attempt = 1;; ++attempt) {
      BDN_ASSIGN_OR_RETURN(PGconn * conn, pool_->Acquire(what_, op));
      PgSession session(*pool_, conn, what_, op);
      const bool tx = consistency == Consistency::kSnapshot;
      Status s =
          tx ? session.Command("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") : Status::Ok();
      if (s.ok()) s = body(session);
      if (tx && !session.failure().lost) {
        Status end = session.Command(s.ok() ? "COMMIT" : "ROLLBACK");
        if (s.ok()) s = end;
      }
      pool_->Release(conn, session.failure().lost);
      if (session.failure().lost && attempt < kMaxLostTries) continue;
      if (session.failure().retryable && attempt < kMaxConflictTries) continue;
      return s;
    }
  }

  Status Write(const std::function<Status(Session&)>& body, std::string_view op) override {
    int lost = 0;
    for (int attempt = 1;; ++attempt) {
      BDN_ASSIGN_OR_RETURN(PGconn * conn, pool_->Acquire(what_, op));
      PgSession session(*pool_, conn, what_, op);
      Status s = session.Command("BEGIN ISOLATION LEVEL READ COMMITTED");
      if (s.ok()) s = body(session);
      bool committing = false;
      if (s.ok()) {
        committing = true;
        s = session.Command("COMMIT");
        if (s.ok()) {
          pool_->Release(conn, false);
          return s;
        }
      }
      const Failure f = session.failure();
      if (!f.lost && !committing) {
        // The body's error is what counts; a ROLLBACK that fails leaves the connection outside
        // PQTRANS_IDLE, and Release closes such a one instead of pooling it.
        session.Command("ROLLBACK").IgnoreError();
      }
      // A session the server ended for idling says nothing about the pool's other connections.
      pool_->Release(conn, f.lost && !f.rolled_back);
      // A COMMIT the server refused because it had already ended the session for sitting idle
      // in the transaction (this process was stopped or cut off) applied nothing: run again.
      if (f.lost && committing && !f.rolled_back) {
        return UnavailableError(session.Prefix() +
                                "connection lost while committing; the write may or may not "
                                "have been applied (" +
                                s.message() + ")");
      }
      if (f.lost && ++lost < kMaxLostTries) continue;
      if (f.retryable && attempt < kMaxConflictTries) {
        std::this_thread::sleep_for(backoff::Jitter(std::chrono::milliseconds(5 << attempt)));
        continue;
      }
      return s;
    }
  }

  Result<LockAttempt> TryLock(std::string_view name) override {
    std::string key, op;
    BDN_ASSIGN_OR_RETURN(PGconn * conn, ConnectForLock(name, &key, &op));
    PgSession session(*pool_, conn, what_, op);
    auto taken = session.Query("SELECT pg_try_advisory_lock(hashtextextended(?1, 0))", {key});
    if (!taken) {
      PQfinish(conn);
      return Err(taken.error());
    }
    LockAttempt out;
    if (taken->Text(0, 0) == "t") {
      out.held = std::make_unique<PgLock>(pool_, conn, what_, op);
      return out;
    }
    auto holder = session.Query(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND "
        "((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(?1, 0)",
        {key});
    if (holder && !holder->empty()) out.holder = holder->Text(0, 0);
    PQfinish(conn);
    return out;
  }

  Result<std::unique_ptr<HeldLock>> Lock(std::string_view name, LockMode mode,
                                         std::chrono::milliseconds wait) override {
    std::string key, op;
    BDN_ASSIGN_OR_RETURN(PGconn * conn, ConnectForLock(name, &key, &op));
    PgSession session(*pool_, conn, what_, op);
    // lock_timeout 0 would mean "wait for ever": at least 1 ms.
    const std::string timeout =
        "SET lock_timeout = " + std::to_string(std::max<int64_t>(1, wait.count()));
    Status s = session.Command(timeout.c_str());
    if (s.ok()) {
      s = ToStatus(session.Query(mode == LockMode::kShared
                                     ? "SELECT pg_advisory_lock_shared(hashtextextended(?1, 0))"
                                     : "SELECT pg_advisory_lock(hashtextextended(?1, 0))",
                                 {key}));
    }
    if (!s.ok()) {
      const bool timed_out = session.failure().lock_timeout;
      PQfinish(conn);
      if (timed_out) {
        return Err(UnavailableError(session.Prefix() + "not granted within " +
                                    std::to_string(wait.count()) + " ms"));
      }
      return Err(s);
    }
    return std::unique_ptr<HeldLock>(std::make_unique<PgLock>(pool_, conn, what_, op));
  }

  Result<std::vector<std::string>> CheckIntegrity() override { return std::vector<std::string>(); }

 private:
  // A connection of its own for the session advisory lock `name`, which lives as long as it
  // does; sets the lock's `key` (hashed by the server) and the `op` messages name.
  Result<PGconn*> ConnectForLock(std::string_view name, std::string* key, std::string* op) {
    BDN_RETURN_IF_ERROR(CheckLockName(name));
    *key = "bdn/" + std::string(name);
    *op = "lock " + std::string(name);
    return pool_->Connect(what_, *op);
  }

  std::shared_ptr<PgPool::Impl> pool_;
  const std::string what_;
};

}  // namespace

void PgPool::Shutdown() {
  impl_->shut_down.store(true);
  const uint64_t one = 1;
  // An eventfd's counter only grows here: it stays readable, so every wait sees it.
  if (::write(impl_->wake.get(), &one, sizeof one) != sizeof one) {
    // Not expected (EAGAIN only at 2^64 - 1); the flag alone still stops waits that start later.
  }
  // Through the mutex: a caller of Acquire between its check of the flag and its wait would
  // otherwise miss the notification.
  { MutexLock lock(impl_->mu); }
  impl_->cv.notify_all();
}

std::shared_ptr<Database> PgPool::Use(std::string what) {
  return std::make_shared<PgDatabase>(impl_, std::move(what));
}

// ---- Migrations ----

Status PgPool::Migrate(std::string_view component, std::span<const Migration> migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i + 1)) {
      return InvalidArgumentError("migrations of " + std::string(component) + ": version " +
                                  std::to_string(migrations[i].version) + " at position " +
                                  std::to_string(i + 1) + " (expected 1, 2, ... without gaps)");
    }
  }
  const std::string what = "database";
  BDN_ASSIGN_OR_RETURN(PGconn * conn, impl_->Connect(what, ""));
  struct Close {
    PGconn* c;
    ~Close() { PQfinish(c); }  // also ends the advisory lock
  } close{conn};
  PgSession session(*impl_, conn, what, "");
  BDN_RETURN_IF_ERROR(
      ToStatus(session.Query("SELECT pg_advisory_lock(hashtextextended('bdn/migrate', 0))")));
  BDN_RETURN_IF_ERROR(session.Command(
      "CREATE TABLE IF NOT EXISTS bdn_schema_migrations("
      "component TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, "
      "applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY(component, version))"));
  BDN_ASSIGN_OR_RETURN(Rows rows,
                       session.Query("SELECT COALESCE(max(version), 0) FROM bdn_schema_migrations "
                                     "WHERE component = ?1",
                                     {std::string(component)}));
  const int64_t current = rows.Int(0, 0);
  const int64_t known = static_cast<int64_t>(migrations.size());
  if (current > known) {
    return FailedPreconditionError("database " + impl_->name + ": the " + std::string(component) +
                                   " schema is at version " + std::to_string(current) +
                                   ", newer than this bdn knows (" + std::to_string(known) +
                                   "); run a bdn at least as new as the one that migrated it");
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    Status s = session.Command("BEGIN");
    if (s.ok()) s = session.Command(m.sql.c_str());
    if (s.ok()) {
      s =
          ToStatus(session.Exec("INSERT INTO bdn_schema_migrations(component, version, name) "
                                "VALUES(?1, ?2, ?3)",
                                {std::string(component), int64_t{m.version}, m.name}));
    }
    if (s.ok()) s = session.Command("COMMIT");
    if (!s.ok()) {
      // The migration's error is what counts; this connection is closed on return either way.
      session.Command("ROLLBACK").IgnoreError();
      std::string why = s.message();
      const std::string prefix = session.Prefix();
      if (why.starts_with(prefix)) why = why.substr(prefix.size());
      Status failed(s.code() == StatusCode::kUnavailable ? s.code() : StatusCode::kInternal,
                    "database " + impl_->name + ": migration " + std::string(component) + " " +
                        std::to_string(m.version) + " (" + m.name + "): " + why);
      return failed;
    }
    log::Info("database " + impl_->name + ": applied migration " + std::string(component) + " " +
              std::to_string(m.version) + " (" + m.name + ")");
  }
  return Status::Ok();
}

}  // namespace bdn::sql
