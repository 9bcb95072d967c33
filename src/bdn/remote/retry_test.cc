// Tests for the retry loop and the shared RetryBudget (circuit breaker) on a fake clock: no test
// here waits in real time but one (a write that times out, 300 ms).
#include "bdn/remote/retry.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bdn/testing/fake_clock.h"

namespace bdn::remote {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Time stands still until someone sleeps: SleepFor(d) moves it on by d and returns at once.
using testutil::FakeClock;

// The fake clock's steady time in milliseconds (for differences).
int64_t NowMs(const FakeClock& clock) {
  return std::chrono::duration_cast<milliseconds>(clock.SteadyNow().time_since_epoch()).count();
}

// The sleeps of the loops under test, in milliseconds.
std::vector<milliseconds> Sleeps(const FakeClock& clock) {
  std::vector<milliseconds> out;
  for (auto d : clock.sleep_durations()) out.push_back(std::chrono::ceil<milliseconds>(d));
  return out;
}

const Status kRefused = UnavailableError("origin http://127.0.0.1:9: connection refused");

TEST(WithRetries, BoundedAttemptsWithDoublingJitteredBackoff) {
  auto clock = std::make_shared<FakeClock>();
  RetryPolicy policy{.attempts = 4, .initial_backoff = 100ms, .max_backoff = 300ms, .clock = clock};
  int tries = 0;
  Status s = WithRetries(policy, nullptr, [&] {
    ++tries;
    return kRefused;
  });
  EXPECT_EQ(s.message(), kRefused.message());
  EXPECT_EQ(tries, 4);
  auto sleeps = Sleeps(*clock);
  ASSERT_EQ(sleeps.size(), 3u);
  const milliseconds caps[] = {100ms, 200ms, 300ms};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GE(sleeps[i], caps[i] / 2) << i;
    EXPECT_LE(sleeps[i], caps[i]) << i;
  }
}

TEST(WithRetries, FinalErrorsAreNotRetried) {
  auto clock = std::make_shared<FakeClock>();
  RetryPolicy policy{.clock = clock};
  for (const Status& final :
       {NotFoundError("chunk: not found"), CorruptionError("chunk: bad"),
        DeadlineExceededError("GET /x: no response within 60000 ms"), InternalError("boom")}) {
    int tries = 0;
    Result<int> r = WithRetries(policy, nullptr, [&]() -> Result<int> {
      ++tries;
      return Err(final);
    });
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().message(), final.message());
    EXPECT_EQ(tries, 1) << final.message();
  }
  EXPECT_TRUE(Sleeps(*clock).empty());
}

TEST(WithRetries, ATryMarkedTransientIsRetriedWhateverItsCode) {
  auto clock = std::make_shared<FakeClock>();
  RetryPolicy policy{.attempts = 3, .clock = clock};
  int tries = 0;
  Result<int> r = WithRetries(policy, nullptr, [&](Try& t) -> Result<int> {
    EXPECT_EQ(t.number, tries + 1);
    if (++tries < 3) {
      t.transient = true;  // say, an HTTP 500
      return Err(InternalError("origin: HTTP 500"));
    }
    return 7;
  });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(tries, 3);
}

TEST(RetryBudget, ADeadOriginFailsTheCallAtTheDeadlineThenEveryCallAtOnce) {
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 60s, .clock = clock});
  const int64_t start = NowMs(*clock);
  int tries = 0;
  Status s = WithRetries(RetryPolicy{}, &budget, [&] {
    ++tries;
    return kRefused;
  });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "origin http://127.0.0.1:9: connection refused (gave up after retrying for 1m; "
            "--retry-deadline 1m)");
  EXPECT_EQ(NowMs(*clock) - start, 60'000) << "sleeps stop exactly at the deadline";
  EXPECT_GT(tries, 30) << "backoff is capped at 2 s, so ~30 tries fit in 60 s";
  EXPECT_LT(tries, 80);
  ASSERT_TRUE(budget.Tripped().has_value());

  int later = 0;
  Status again = WithRetries(RetryPolicy{}, &budget, [&] {
    ++later;
    return Status::Ok();
  });
  EXPECT_EQ(again.message(), s.message());
  EXPECT_EQ(later, 0) << "a tripped budget fails a call before its first try";
  auto outage = budget.CurrentOutage();
  ASSERT_TRUE(outage.has_value());
  EXPECT_TRUE(outage->tripped);
}

// From a user: a pull with --retry-deadline 2s from an origin that accepted connections and
// never answered (stopped with SIGSTOP) waited for each request's own timeout (~73 s in all), and
// a timed-out request was final however long the budget had left.
TEST(RetryBudget, ATryThatTimesOutIsRetriedAndItsOutageStartsWhenItWasSent) {
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 60s, .clock = clock});
  const Status kStalled = DeadlineExceededError(
      "origin http://127.0.0.1:9: POST /v1/chunks/batch: stalled: no bytes for 30000 ms");
  int tries = 0;
  Status s = WithRetries(RetryPolicy{}, &budget, [&] {
    ++tries;
    clock->SleepFor(30s);  // the request waited its stall time for a byte
    return kStalled;
  });
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            kStalled.message() + " (gave up after retrying for 1m; --retry-deadline 1m)");
  EXPECT_EQ(tries, 2) << "the second stall ends 60 s after the first try was sent";
  ASSERT_TRUE(budget.Tripped().has_value());

  // A budget no longer than one stall gives up after the first.
  RetryBudget short_budget({.deadline = 30s, .clock = clock});
  tries = 0;
  s = WithRetries(RetryPolicy{}, &short_budget, [&] {
    ++tries;
    clock->SleepFor(30s);
    return kStalled;
  });
  EXPECT_EQ(tries, 1);
  EXPECT_EQ(s.message(),
            kStalled.message() + " (gave up: no answer for 30s; --retry-deadline 30s)");
}

// From an attacker: a commit that the origin held past the client's own deadline (60 s) was
// retried by the push's budget and then reported "gave up: no answer for 3s; --retry-deadline
// 3s", and its version appeared once the origin went on. A write with no stall bound of its own
// that times out now fails at once, saying that whether it was applied is unknown. (Real time:
// one request to a socket that never answers, 300 ms.)
TEST(CallWithRetries, AWriteThatGetsNoAnswerFailsOnceSayingItsOutcomeIsUnknown) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // connections wait in the backlog, never answered
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto client = http::HttpClient::Create({.base_url = url, .deadline = 300ms});
  ASSERT_TRUE(client.has_value());
  const std::string body = "{}";
  // A commit under a push's budget; and (from attacking helper 117) a tag set, an rm and a
  // restore, which have no budget and failed after 60 s with no word that they may have been
  // applied.
  struct Case {
    http::Method method;
    std::string name, path;
    bool budget;
  };
  for (const Case& c :
       {Case{http::Method::kPost, "POST", "/v1/volumes/p/v/commit", true},
        Case{http::Method::kPut, "PUT", "/v1/volumes/p/v/tags/t", false},
        Case{http::Method::kDelete, "DELETE", "/v1/volumes/p/v/versions/x", false},
        Case{http::Method::kPost, "POST", "/v1/volumes/p/v/versions/x/restore", false},
        Case{http::Method::kPost, "POST", "/v1/keys", false}}) {
    SCOPED_TRACE(c.path);
    auto clock = std::make_shared<FakeClock>();
    RetryBudget budget({.deadline = 10s, .clock = clock});
    http::Request write{.method = c.method,
                        .path = c.path,
                        .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()}};
    auto r =
        CallWithRetries(**client, write, RetryPolicy{.clock = clock}, c.budget ? &budget : nullptr);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kDeadlineExceeded);
    // Of a write that is not a volume's, without the volume's advice.
    EXPECT_EQ(r.error().message(),
              "origin " + url + ": " + c.name + " " + c.path +
                  ": no response within 300 ms; no answer came, so whether the origin applied it "
                  "is unknown" +
                  (c.path.starts_with("/v1/volumes/")
                       ? ": bdn volume versions shows whether it did (running the command again "
                         "is safe: it is applied at most once, and a rerun of one that was applied "
                         "may be refused as done already or as a sequence conflict)"
                       : ""));
    EXPECT_TRUE(Sleeps(*clock).empty()) << "retried";
    EXPECT_FALSE(budget.Tripped().has_value());
  }
  ::close(fd);
}

// A listening socket on 127.0.0.1 whose connections are closed as soon as a request arrives: every
// request is sent and gets an empty reply. `Url` names it.
class EmptyReplyServer {
 public:
  EmptyReplyServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len)) {
      ADD_FAILURE() << "cannot listen";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        char buf[4096];
        (void)::read(c, buf, sizeof buf);  // the request's first bytes: it was sent
        accepted_.fetch_add(1);            // before the close its client sees
        ::close(c);
      }
    });
  }
  ~EmptyReplyServer() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// From an attacking helper: a push claim whose every answer was lost (an empty reply) failed
// "Empty reply from server (gave up ...)" with no word that it may have been applied, and it had
// been. A write refused before it was sent says nothing of the kind.
TEST(CallWithRetries, AWriteWhoseAnswersWereAllLostSaysItsOutcomeIsUnknown) {
  EmptyReplyServer server;
  auto client = http::HttpClient::Create({.base_url = server.Url()});
  ASSERT_TRUE(client.has_value());
  const std::string body = "{}";
  for (const std::string path : {"/v1/volumes/p/v/tags/t", "/v1/volumes/p/v/claims"}) {
    SCOPED_TRACE(path);
    auto clock = std::make_shared<FakeClock>();
    http::Request write{.method = http::Method::kPut,
                        .path = path,
                        .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()}};
    auto r = CallWithRetries(**client, write, RetryPolicy{.attempts = 3, .clock = clock}, nullptr);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
    // A claim is no version: no advice to look at the versions.
    EXPECT_EQ(r.error().message(),
              "origin " + server.Url() + ": PUT " + path +
                  ": Empty reply from server; no answer came, so whether the origin applied it "
                  "is unknown" +
                  (path.ends_with("/claims")
                       ? ""
                       : ": bdn volume versions shows whether it did (running the command again "
                         "is safe: it is applied at most once, and a rerun of one that was applied "
                         "may be refused as done already or as a sequence conflict)"));
    EXPECT_EQ(Sleeps(*clock).size(), 2u) << "tries";
  }
  EXPECT_EQ(server.accepted(), 6);

  // Nothing listens: refused before it was sent, so it was not applied.
  auto clock = std::make_shared<FakeClock>();
  std::string url;
  {
    EmptyReplyServer gone;
    url = gone.Url();
  }
  auto refused = http::HttpClient::Create({.base_url = url});
  ASSERT_TRUE(refused.has_value());
  http::Request write{.method = http::Method::kPut,
                      .path = "/v1/volumes/p/v/tags/t",
                      .body = {reinterpret_cast<const uint8_t*>(body.data()), body.size()}};
  auto r = CallWithRetries(**refused, write, RetryPolicy{.attempts = 2, .clock = clock}, nullptr);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "origin " + url + ": connection refused");
}

TEST(RetryBudget, BoundsHowLongOneRequestWaitsForAByte) {
  auto clock = std::make_shared<FakeClock>();
  EXPECT_EQ(RetryBudget({.deadline = 60s, .clock = clock}).StallTimeout(30s), 30s);
  EXPECT_EQ(RetryBudget({.deadline = 60s, .clock = clock}).StallTimeout(std::nullopt), 60s);
  EXPECT_EQ(RetryBudget({.deadline = 2s, .clock = clock}).StallTimeout(30s), 2s);
  // http::Request::stall_timeout counts whole seconds: a deadline between them rounds up.
  EXPECT_EQ(RetryBudget({.deadline = 1500ms, .clock = clock}).StallTimeout(std::nullopt), 2s);
}

TEST(RetryBudget, AnAnswerEndsTheOutage) {
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 10s, .clock = clock});
  // 8 s of refusals, then an answer: the budget is whole again.
  const int64_t begin = NowMs(*clock);
  Status first = WithRetries(RetryPolicy{}, &budget, [&] {
    return NowMs(*clock) < begin + 8'000 ? kRefused : Status::Ok();
  });
  EXPECT_TRUE(first.ok()) << first.message();
  EXPECT_FALSE(budget.CurrentOutage().has_value());
  // A 404 is an answer too: the origin is up.
  clock->Advance(1s);
  int tries = 0;
  Status nf = WithRetries(RetryPolicy{}, &budget, [&] {
    return ++tries < 3 ? kRefused : NotFoundError("chunk: not found");
  });
  EXPECT_EQ(nf.code(), StatusCode::kNotFound);
  EXPECT_FALSE(budget.CurrentOutage().has_value());
  // So a new outage gets the whole deadline again.
  const int64_t start = NowMs(*clock);
  Status s = WithRetries(RetryPolicy{}, &budget, [&] { return kRefused; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(NowMs(*clock) - start, 10'000);
}

TEST(RetryBudget, OneCallFailingWhileOthersAreAnsweredGivesUpAfterItsOwnDeadline) {
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 5s, .clock = clock});
  const int64_t start = NowMs(*clock);
  Status s = WithRetries(RetryPolicy{}, &budget, [&](Try& t) {
    budget.OnAnswer();  // another request of the same push got through just now
    t.transient = true;
    return InternalError("chunk b3:ab: HTTP 500");
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "chunk b3:ab: HTTP 500 (gave up after retrying for 5s; --retry-deadline 5s)");
  EXPECT_EQ(NowMs(*clock) - start, 5'000);
  EXPECT_FALSE(budget.Tripped().has_value()) << "the origin answers: only this call gave up";
}

TEST(RetryBudget, ReportsTheOngoingOutageForProgressDisplays) {
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 60s, .clock = clock});
  EXPECT_FALSE(budget.CurrentOutage().has_value());
  auto v = budget.OnTransientFailure(kRefused, clock->SteadyNow());
  EXPECT_FALSE(v.give_up.has_value());
  EXPECT_EQ(v.wait_cap, 60s);
  clock->Advance(12s);
  auto o = budget.CurrentOutage();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->elapsed, 12s);
  EXPECT_EQ(o->deadline, 60s);
  EXPECT_EQ(o->last_error.message(), kRefused.message());
  EXPECT_FALSE(o->tripped);
}

TEST(RetryBudget, ManyConcurrentCallsShareOneDeadline) {
  // 1,000 uploads against a dead origin: together they wait one deadline, not one each.
  auto clock = std::make_shared<FakeClock>();
  RetryBudget budget({.deadline = 60s, .clock = clock});
  const int64_t start = NowMs(*clock);
  std::atomic<int> failed{0}, tries{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000 / 16 + 1; ++i) {
        Status s = WithRetries(RetryPolicy{}, &budget, [&] {
          ++tries;
          return kRefused;
        });
        if (s.code() == StatusCode::kUnavailable) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, 16 * (1000 / 16 + 1));
  // Each sleep moves the shared fake clock, so 16 sleepers make it run up to 16x fast; what
  // counts is that the budget tripped once and every later call failed without a try.
  EXPECT_LT(tries, 16 * 80);
  EXPECT_GE(NowMs(*clock) - start, 60'000);
  ASSERT_TRUE(budget.Tripped().has_value());
}

}  // namespace
}  // namespace bdn::remote
