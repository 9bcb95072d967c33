// JobStatus: the StatusCode (and so the CLI's exit status) of every stable error code, as the
// table in docs/sync.md, "Error codes", documents them.
#include "bdn/sync/job_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace bdn::sync {
namespace {

SyncJobRecord Failed(const std::string& code) {
  SyncJobRecord job;
  job.state = SyncState::kFailed;
  job.error_code = code;
  job.error_message = "hf://org/repo: what went wrong";
  return job;
}

TEST(JobStatus, EveryStableCodeHasTheDocumentedStatus) {
  // docs/sync.md: code | exit (2 InvalidArgument, 3 NotFound, 4 Conflict, 6 PermissionDenied,
  // 7 Unavailable, 8 FailedPrecondition, 1 Internal).
  const std::vector<std::pair<std::string_view, StatusCode>> table = {
      {kSourceNotFound, StatusCode::kNotFound},
      {kRevisionNotFound, StatusCode::kNotFound},
      {kIncludeMatchedNothing, StatusCode::kNotFound},
      {kSecretNotFound, StatusCode::kNotFound},
      {kAccessDenied, StatusCode::kPermissionDenied},
      {kFileNotAllowed, StatusCode::kPermissionDenied},
      {kAddressNotAllowed, StatusCode::kPermissionDenied},
      {kSecretNotAllowed, StatusCode::kPermissionDenied},
      {kBadCredentials, StatusCode::kPermissionDenied},
      {kSourceUnavailable, StatusCode::kUnavailable},
      {kSourceChanged, StatusCode::kFailedPrecondition},
      {kStoreFailed, StatusCode::kFailedPrecondition},
      {kListingTooLarge, StatusCode::kFailedPrecondition},
      {kInvalidAnswer, StatusCode::kFailedPrecondition},
      {kInvalidObject, StatusCode::kInvalidArgument},
      {kInvalidSecret, StatusCode::kInvalidArgument},
      {kCanceled, StatusCode::kConflict},
      {kVolumeBusy, StatusCode::kConflict},
      {kInternal, StatusCode::kInternal},
  };
  for (const auto& [code, want] : table) {
    Status s = JobStatus(Failed(std::string(code)));
    EXPECT_EQ(want, s.code()) << code;
    EXPECT_EQ(std::string(code), s.reason());
    EXPECT_EQ("hf://org/repo: what went wrong", s.message());
  }
  SyncJobRecord ready;
  ready.state = SyncState::kReady;
  EXPECT_TRUE(JobStatus(ready).ok());
}

}  // namespace
}  // namespace bdn::sync
