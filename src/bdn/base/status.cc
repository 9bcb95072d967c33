#include "bdn/base/status.h"

#include <cerrno>
#include <cstring>

namespace bdn {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kConflict:
      return "conflict";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDeadlineExceeded:
      return "deadline exceeded";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Status Status::WithPrefix(std::string_view prefix) const {
  if (ok()) return *this;
  Status out(code_, std::string(prefix) + ": " + message_);
  out.reason_ = reason_;
  return out;
}

Status Status::WithReason(std::string reason) const {
  Status out = *this;
  out.reason_ = std::move(reason);
  return out;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status AlreadyExistsError(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
Status ConflictError(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
Status CorruptionError(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

Status ErrnoError(std::string_view what, int errnum) {
  std::string msg = std::string(what) + ": " + std::strerror(errnum);
  switch (errnum) {
    case ENOENT:
      return NotFoundError(std::move(msg));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return FailedPreconditionError(std::move(msg));
    case EEXIST:
      return AlreadyExistsError(std::move(msg));
    default:
      return InternalError(std::move(msg));
  }
}

}  // namespace bdn
