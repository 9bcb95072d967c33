// The one mapping between Status and HTTP error responses, shared by the server and the client
// (docs/http-api.md, "Errors"): HTTP status codes, the JSON error body, and its parsing.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn::http {

// Whether the request's credentials were accepted. bdn has no Unauthenticated StatusCode:
// missing, unknown or revoked credentials are a PermissionDenied Status like a missing scope,
// and the HTTP layer presents them as 401 "unauthenticated" (kRejected) instead of
// 403 "permission_denied" (kAccepted). A client maps both back to PermissionDenied.
enum class Credentials { kAccepted, kRejected };

// The HTTP status of an error (docs/http-api.md table): InvalidArgument 400, PermissionDenied
// 403 (401 with Credentials::kRejected), NotFound 404, Conflict/AlreadyExists 409,
// FailedPrecondition 412, Corruption 422, Internal 500, Unavailable 503, DeadlineExceeded 504.
// An ok Status gives 200.
int HttpStatusFor(const Status& s, Credentials credentials = Credentials::kAccepted);

// The wire name of a code: "not_found", "already_exists", ... ("ok" for kOk).
std::string ErrorCodeName(StatusCode code);

// The inverse of ErrorCodeName; "unauthenticated" gives kPermissionDenied; an unknown name
// gives kInternal.
StatusCode StatusCodeFromName(std::string_view name);

// The StatusCode an HTTP status implies when a response carries no JSON error body (from a
// proxy, say): 400/411/413/416 InvalidArgument, 401/403 PermissionDenied, 404 NotFound, 409
// Conflict, 412 FailedPrecondition, 422 Corruption, 429/502/503 Unavailable, 504 DeadlineExceeded,
// anything else Internal.
StatusCode StatusCodeForHttp(int http_status);

// Keeps a server's directory out of what clients see: a server calls this once per directory
// it works in (bdn serve: its --data; bdn cache serve: its cache directory), before it starts
// serving. From then on ClientMessage writes `dir` (and its absolute and canonical forms), where
// a message shows it as a path (followed by '/', the end, or a character that cannot continue
// a file name), as `shown_as`, e.g. "<data>". Thread-safe.
void HideServerPath(const std::filesystem::path& dir, const std::string& shown_as);

// The same for an upstream server's address: `url` ("http://10.0.0.5:8080"; a trailing '/' is
// dropped) is shown as `shown_as` (e.g. "<upstream>") wherever it is not followed by a character
// that could continue it. A cache node hides its --upstream so that callers, who may not even
// hold a key, do not learn the cluster's internal addresses. Thread-safe.
void HideServerAddress(std::string_view url, const std::string& shown_as);

// `message` as a client may see it: every directory given to HideServerPath replaced by its
// placeholder ("chunk b3:…: moved to <data>/store/corrupt/…"). When something was replaced,
// the full message is written to stderr ("bdn serve: error sent without server paths: …"), so
// the server's own log keeps it. Thread-safe.
std::string ClientMessage(std::string_view message);

// The JSON error body: {"error": {"code": "<name>", "message": "<message>"}}, plus "reason" when
// the Status has one (Status::reason, e.g. a sync error code), except kShuttingDown (client.h):
// a handler's upstream ended by this server's own stop is, to its client, a 503 like any other,
// to retry (on another replica); the code is
// "unauthenticated" for PermissionDenied with Credentials::kRejected; the message as
// ClientMessage gives it (no server file-system paths).
std::string ErrorBody(const Status& s, Credentials credentials = Credentials::kAccepted);

// Parses a JSON error body into its Status (with its reason, if any), keeping the message
// verbatim. nullopt when `body`
// does not have the error shape (not JSON, no "error" object, or no string "code").
std::optional<Status> ParseErrorBody(std::string_view body);

// The Status of an error response: ParseErrorBody(body) when it has the error shape, else
// StatusCodeForHttp(http_status) with the message "HTTP <status>". Never returns an ok Status
// (a 2xx status with no error body gives Internal).
Status StatusFromErrorBody(int http_status, std::string_view body);

}  // namespace bdn::http
