// Tests for the test kit's status assertions: they pass on OK, and a failure prints the status.
#include "bdn/testing/status_matchers.h"

#include <gtest/gtest-spi.h>

#include "bdn/testing/test_util.h"

namespace bdn::testutil {
namespace {

Result<int> Seven() { return 7; }
Result<int> Missing() { return Err(NotFoundError("chunk b3:00 is not in the store")); }

TEST(StatusMatchers, PassOnOkAndOnAValue) {
  EXPECT_OK(Status::Ok());
  ASSERT_OK(Seven());
  EXPECT_STATUS(Missing(), kNotFound, "chunk b3:00");
}

TEST(StatusMatchers, AFailurePrintsTheStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Missing()),
                          "Missing() is not found: chunk b3:00 is not in the store");
  EXPECT_NONFATAL_FAILURE(EXPECT_STATUS(Seven(), kNotFound, "x"),
                          "Seven() is OK, expected code not found and a message starting \"x\"");
  EXPECT_NONFATAL_FAILURE(EXPECT_STATUS(Missing(), kNotFound, "blob"), "expected code not found");
  EXPECT_FATAL_FAILURE(ASSERT_OK(InternalError("boom")), "is internal: boom");
}

TEST(StatusMatchers, EvaluatesItsArgumentOnce) {
  int calls = 0;
  auto counted = [&calls] {
    ++calls;
    return Status::Ok();
  };
  EXPECT_OK(counted());
  EXPECT_EQ(calls, 1);
}

TEST(TestUtil, RandomBytesAreTheSameForTheSameSeed) {
  EXPECT_EQ(RandomBytes(1000, 7), RandomBytes(1000, 7));
  EXPECT_NE(RandomBytes(1000, 7), RandomBytes(1000, 8));
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_TRUE(std::filesystem::is_directory(dir.path()));
}

}  // namespace
}  // namespace bdn::testutil
