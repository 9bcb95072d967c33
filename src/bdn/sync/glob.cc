#include "bdn/sync/glob.h"

#include <fnmatch.h>

#include <utility>

namespace bdn::sync {

bool GlobMatches(std::string_view pattern, std::string_view path) {
  // fnmatch needs NUL-terminated strings; ValidateGlob and manifest paths exclude NUL bytes.
  return ::fnmatch(std::string(pattern).c_str(), std::string(path).c_str(), 0) == 0;
}

Status ValidateGlob(std::string_view flag, const std::string& pattern) {
  auto bad = [&](const char* why) {
    return InvalidArgumentError(std::string(flag) + " \"" + pattern + "\": " + why);
  };
  if (pattern.empty()) return bad("empty pattern");
  if (pattern.find('\n') != std::string::npos) return bad("a pattern cannot hold a newline");
  if (pattern.find('\0') != std::string::npos) return bad("a pattern cannot hold a NUL byte");
  return Status::Ok();
}

Result<PathFilter> PathFilter::Create(std::vector<std::string> includes,
                                      std::vector<std::string> excludes) {
  for (const auto& [flag, list] : {std::pair{"--include", &includes}, {"--exclude", &excludes}}) {
    if (list->size() > kMaxGlobs) {
      return Err(InvalidArgumentError(std::string(flag) + ": " + std::to_string(list->size()) +
                                      " patterns, at most " + std::to_string(kMaxGlobs) +
                                      " (each object is matched against every one)"));
    }
  }
  for (const auto& p : includes) BDN_RETURN_IF_ERROR(ValidateGlob("--include", p));
  for (const auto& p : excludes) BDN_RETURN_IF_ERROR(ValidateGlob("--exclude", p));
  PathFilter f;
  f.includes_ = std::move(includes);
  f.excludes_ = std::move(excludes);
  return f;
}

bool PathFilter::Selects(std::string_view path) const {
  for (const auto& e : excludes_) {
    if (GlobMatches(e, path)) return false;
  }
  if (includes_.empty()) return true;
  for (const auto& i : includes_) {
    if (GlobMatches(i, path)) return true;
  }
  return false;
}

std::vector<std::string> PathFilter::UnmatchedIncludes(
    const std::vector<std::string_view>& paths) const {
  std::vector<std::string> out;
  for (const auto& i : includes_) {
    bool any = false;
    for (std::string_view p : paths) {
      if (GlobMatches(i, p)) {
        any = true;
        break;
      }
    }
    if (!any) out.push_back(i);
  }
  return out;
}

}  // namespace bdn::sync
