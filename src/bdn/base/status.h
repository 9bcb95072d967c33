// Status and Result<T>: errors as values with a small closed set of codes.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace bdn {

enum class StatusCode {
  kOk = 0,
  kNotFound,
  kAlreadyExists,
  kInvalidArgument,
  kFailedPrecondition,
  kConflict,
  kPermissionDenied,
  kUnavailable,
  kDeadlineExceeded,
  kCorruption,
  kInternal,
};

// Returns the lower-case name of `code`, e.g. "not found".
std::string_view StatusCodeName(StatusCode code);

// A success or an error code with a message. Messages name the object first, then the reason:
// "chunk b3:3fa9…: digest mismatch". [[nodiscard]]: a call whose Status is dropped does not
// compile (-Werror); where dropping it is right, say so with IgnoreError() and a comment.
// Immutable; thread-compatible.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "`prefix`: message" (the reason is kept).
  Status WithPrefix(std::string_view prefix) const;
  std::string ToString() const;

  // A machine-readable reason finer than the code, from a closed set its producer documents
  // (e.g. the stable error codes of sync jobs, docs/sync.md: "revision_not_found"); "" if none.
  const std::string& reason() const { return reason_; }
  // Returns a copy carrying `reason`.
  Status WithReason(std::string reason) const;

  // Drops this status on purpose (best-effort cleanup, a destructor): the one greppable way to
  // ignore an error. Each caller says in a comment why ignoring it is right.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
};

// The reason of an operation refused or ended because its client was shut down (a server
// stopping: HttpClient::Shutdown, S3Client::Shutdown, PgPool::Shutdown). No retry loop repeats
// it, and a server never sends it to its own clients (their retries must go on elsewhere).
inline constexpr std::string_view kShuttingDown = "shutting_down";

Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status InvalidArgumentError(std::string message);
Status FailedPreconditionError(std::string message);
Status ConflictError(std::string message);
Status PermissionDeniedError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status CorruptionError(std::string message);
Status InternalError(std::string message);
// An error from a failed system call: Internal (or NotFound for ENOENT, PermissionDenied for
// EACCES/EPERM, FailedPrecondition for ENOSPC), message "`what`: strerror(errnum)".
Status ErrnoError(std::string_view what, int errnum);

// A value or a Status. Result<void> holds only a Status. A std::expected in all but name: a
// class only so that it can be [[nodiscard]] (an alias cannot carry the attribute).
template <typename T>
class [[nodiscard]] Result : public std::expected<T, Status> {
 public:
  using Base = std::expected<T, Status>;
  using Base::Base;
  Result() = default;
  // From the std::expected that the monadic operations (and_then, transform, ...) return.
  Result(Base e) : Base(std::move(e)) {}

  // Drops this result on purpose; see Status::IgnoreError.
  void IgnoreError() const {}
};

// Lets `return SomeError(...)` work in functions returning Result<T>.
inline std::unexpected<Status> Err(Status s) { return std::unexpected<Status>(std::move(s)); }

namespace internal {
// What the BDN_* macros return: converts to Status or to any Result<T>.
struct Propagate {
  Status status;
  operator Status() const { return status; }
  template <typename T>
  operator Result<T>() const {
    return std::unexpected<Status>(status);
  }
};
}  // namespace internal

}  // namespace bdn

#define BDN_CONCAT_INNER(a, b) a##b
#define BDN_CONCAT(a, b) BDN_CONCAT_INNER(a, b)

// Returns early with the error of a Status-returning expression.
#define BDN_RETURN_IF_ERROR(expr)                                          \
  do {                                                                     \
    ::bdn::Status bdn_status_ = (expr);                                    \
    if (!bdn_status_.ok()) return ::bdn::internal::Propagate{bdn_status_}; \
  } while (0)

// `BDN_ASSIGN_OR_RETURN(auto x, F())`: x = *F(), or returns F()'s error.
#define BDN_ASSIGN_OR_RETURN(lhs, expr) \
  BDN_ASSIGN_OR_RETURN_IMPL(BDN_CONCAT(bdn_result_, __LINE__), lhs, expr)
#define BDN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                       \
  auto tmp = (expr);                                                    \
  if (!tmp.has_value()) return ::bdn::internal::Propagate{tmp.error()}; \
  lhs = std::move(*tmp)
