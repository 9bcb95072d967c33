// Status <-> HTTP error mapping (docs/http-api.md, "Errors").
#include "bdn/http/errors.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "bdn/base/log.h"
#include "bdn/http/client.h"  // kShuttingDown

namespace bdn::http {
namespace {

constexpr std::pair<StatusCode, std::string_view> kNames[] = {
    {StatusCode::kOk, "ok"},
    {StatusCode::kNotFound, "not_found"},
    {StatusCode::kAlreadyExists, "already_exists"},
    {StatusCode::kInvalidArgument, "invalid_argument"},
    {StatusCode::kFailedPrecondition, "failed_precondition"},
    {StatusCode::kConflict, "conflict"},
    {StatusCode::kPermissionDenied, "permission_denied"},
    {StatusCode::kUnavailable, "unavailable"},
    {StatusCode::kDeadlineExceeded, "deadline_exceeded"},
    {StatusCode::kCorruption, "corruption"},
    {StatusCode::kInternal, "internal"},
};

constexpr std::string_view kUnauthenticated = "unauthenticated";

bool IsRejected(const Status& s, Credentials credentials) {
  return credentials == Credentials::kRejected && s.code() == StatusCode::kPermissionDenied;
}

// HideServerPath's directories (without a trailing '/') and their placeholders, longest first.
Mutex g_hidden_mu;
std::vector<std::pair<std::string, std::string>> g_hidden;

// Whether `c` may continue a file name, so that "/srv/bdn" is not found inside "/srv/bdn2".
bool ContinuesName(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '~' || c == '+' || c == '@';
}

// Adds `text` to g_hidden (once), keeping it longest first. Requires g_hidden_mu.
void AddHidden(std::string text, const std::string& shown_as) REQUIRES(g_hidden_mu) {
  if (std::find(g_hidden.begin(), g_hidden.end(), std::pair(text, shown_as)) != g_hidden.end()) {
    return;
  }
  g_hidden.emplace_back(std::move(text), shown_as);
  std::sort(g_hidden.begin(), g_hidden.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

}  // namespace

void HideServerPath(const std::filesystem::path& dir, const std::string& shown_as) {
  std::error_code ec;
  std::vector<std::filesystem::path> forms = {dir, std::filesystem::absolute(dir, ec)};
  forms.push_back(std::filesystem::weakly_canonical(dir, ec));
  MutexLock lock(g_hidden_mu);
  for (const auto& form : forms) {
    std::string text = form.lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    // Only absolute paths: a relative one ("srv") could be any word of a message.
    if (text.size() < 2 || text[0] != '/') continue;
    AddHidden(std::move(text), shown_as);
  }
}

void HideServerAddress(std::string_view url, const std::string& shown_as) {
  std::string text(url);
  while (!text.empty() && text.back() == '/') text.pop_back();
  if (text.find("://") == std::string::npos) return;  // only a whole URL, never a bare word
  MutexLock lock(g_hidden_mu);
  AddHidden(std::move(text), shown_as);
}

std::string ClientMessage(std::string_view message) {
  std::string out(message);
  bool changed = false;
  {
    MutexLock lock(g_hidden_mu);
    for (const auto& [dir, shown_as] : g_hidden) {
      for (size_t at = out.find(dir); at != std::string::npos; at = out.find(dir, at)) {
        size_t end = at + dir.size();
        // A '.' ending a sentence does not continue the name; one before a name character does.
        size_t next = end < out.size() && out[end] == '.' ? end + 1 : end;
        if (next < out.size() && ContinuesName(out[next])) {
          at = end;
          continue;
        }
        out.replace(at, dir.size(), shown_as);
        at += shown_as.size();
        changed = true;
      }
    }
  }
  if (changed) {
    log::Debug("error sent without server paths: " + std::string(message));
  }
  return out;
}

int HttpStatusFor(const Status& s, Credentials credentials) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kPermissionDenied:
      return IsRejected(s, credentials) ? 401 : 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kConflict:
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 412;
    case StatusCode::kCorruption:
      return 422;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
  }
  return 500;
}

std::string ErrorCodeName(StatusCode code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return std::string(name);
  }
  return "internal";
}

StatusCode StatusCodeFromName(std::string_view name) {
  if (name == kUnauthenticated) return StatusCode::kPermissionDenied;
  for (const auto& [c, n] : kNames) {
    if (n == name) return c;
  }
  return StatusCode::kInternal;
}

StatusCode StatusCodeForHttp(int http_status) {
  switch (http_status) {
    case 400:
    case 411:
    case 413:
    case 416:
      return StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kConflict;
    case 412:
      return StatusCode::kFailedPrecondition;
    case 422:
      return StatusCode::kCorruption;
    case 429:
    case 502:
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      return StatusCode::kInternal;
  }
}

std::string ErrorBody(const Status& s, Credentials credentials) {
  nlohmann::json j;
  j["error"]["code"] =
      IsRejected(s, credentials) ? std::string(kUnauthenticated) : ErrorCodeName(s.code());
  j["error"]["message"] = ClientMessage(s.message());
  if (!s.reason().empty() && s.reason() != kShuttingDown) j["error"]["reason"] = s.reason();
  // Replace invalid UTF-8 (a message may quote a client's bytes) instead of throwing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Status> ParseErrorBody(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto err = j.find("error");
  if (err == j.end() || !err->is_object()) return std::nullopt;
  auto code = err->find("code");
  if (code == err->end() || !code->is_string()) return std::nullopt;
  auto message = err->find("message");
  std::string text =
      message != err->end() && message->is_string() ? message->get<std::string>() : std::string();
  StatusCode c = StatusCodeFromName(code->get<std::string>());
  if (c == StatusCode::kOk) c = StatusCode::kInternal;
  Status out(c, std::move(text));
  auto reason = err->find("reason");
  if (reason != err->end() && reason->is_string()) out = out.WithReason(reason->get<std::string>());
  return out;
}

Status StatusFromErrorBody(int http_status, std::string_view body) {
  if (auto s = ParseErrorBody(body)) return *s;
  return Status(StatusCodeForHttp(http_status), "HTTP " + std::to_string(http_status));
}

}  // namespace bdn::http
