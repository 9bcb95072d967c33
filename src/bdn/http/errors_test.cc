// The Status <-> HTTP error mapping: error bodies never show a server's directories.
#include "bdn/http/errors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bdn/http/client.h"

namespace bdn::http {
namespace {

std::string MessageOf(const std::string& body) {
  return nlohmann::json::parse(body)["error"]["message"].get<std::string>();
}

TEST(ErrorBody, ReplacesHiddenServerDirectoriesWhereverAMessageShowsThem) {
  HideServerPath("/srv/bdn-data", "<data>");
  HideServerPath("/var/cache/node/", "<cache-dir>");
  struct Case {
    std::string message, client_sees;
  } cases[] = {
      {"chunk b3:ab: digest mismatch; moved to /srv/bdn-data/store/corrupt/ab, push again",
       "chunk b3:ab: digest mismatch; moved to <data>/store/corrupt/ab, push again"},
      {"key store /srv/bdn-data/registry.db: create key: no space left on device",
       "key store <data>/registry.db: create key: no space left on device"},
      {"--data /srv/bdn-data: in use", "--data <data>: in use"},
      {"path \"/srv/bdn-data\"", "path \"<data>\""},
      {"a /srv/bdn-data/x and /srv/bdn-data/y", "a <data>/x and <data>/y"},
      {"cannot write /srv/bdn-data.", "cannot write <data>."},
      {"node cache /var/cache/node/chunks/ab: Input/output error",
       "node cache <cache-dir>/chunks/ab: Input/output error"},
      // Other paths, and names that only start like a hidden directory, stay.
      {"GET /v1/nothing: no such endpoint", "GET /v1/nothing: no such endpoint"},
      {"file /srv/bdn-data2/x", "file /srv/bdn-data2/x"},
      {"file /srv/bdn-data.old/x", "file /srv/bdn-data.old/x"},
      {"/srv/bdn-dat", "/srv/bdn-dat"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MessageOf(ErrorBody(InternalError(c.message))), c.client_sees) << c.message;
    EXPECT_EQ(ClientMessage(c.message), c.client_sees);
  }
}

TEST(ErrorBody, HidesTheAbsoluteFormOfARelativeDirectory) {
  auto cwd = std::filesystem::current_path();
  HideServerPath("some-data-dir", "<data>");
  EXPECT_EQ(ClientMessage("open " + (cwd / "some-data-dir" / "store").string() + ": EIO"),
            "open <data>/store: EIO");
  // The relative form itself could be any word of a message: left alone.
  EXPECT_EQ(ClientMessage("some-data-dir"), "some-data-dir");
}

TEST(ErrorBody, KeepsCodeAndMessageWithNothingHidden) {
  EXPECT_EQ(ErrorBody(NotFoundError("volume bdn:a/b: not found")),
            R"({"error":{"code":"not_found","message":"volume bdn:a/b: not found"}})");
  EXPECT_EQ(ErrorBody(PermissionDeniedError("request: no credentials"), Credentials::kRejected),
            R"({"error":{"code":"unauthenticated","message":"request: no credentials"}})");
}

// A reason goes to the client, except that of a request this server's own stop ended: to the
// client that is a 503 like any other, which it retries (on another replica).
TEST(ErrorBody, KeepsAReasonButNotThatOfTheServersOwnStop) {
  EXPECT_EQ(
      ErrorBody(NotFoundError("secret \"x\": not found").WithReason("secret_not_found")),
      R"({"error":{"code":"not_found","message":"secret \"x\": not found","reason":"secret_not_found"}})");
  EXPECT_EQ(
      ErrorBody(UnavailableError("origin <upstream>: GET /v1/chunks/ab: shutting down")
                    .WithReason(std::string(kShuttingDown))),
      R"({"error":{"code":"unavailable","message":"origin <upstream>: GET /v1/chunks/ab: shutting down"}})");
}

}  // namespace
}  // namespace bdn::http
