// The --include/--exclude filter of sync (docs/spec.md §6): shell globs over source-relative paths
// where `*` also matches `/`, so `*.json` matches config.json and a/b/config.json.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"

namespace bdn::sync {

// Whether `path` matches the glob `pattern`: fnmatch(3) without FNM_PATHNAME or FNM_PERIOD, so
// `*` and `?` match any characters including `/` and a leading `.`, `[abc]`/`[!abc]` match a
// class, and `\` quotes the next character. The whole path must match.
bool GlobMatches(std::string_view pattern, std::string_view path);

// Checks a glob given to --include or --exclude. Errors: InvalidArgument "--include \"p\": <why>"
// for an empty pattern or one holding a newline or a NUL byte (`flag` names the option).
Status ValidateGlob(std::string_view flag, const std::string& pattern);

// The most patterns of each kind one sync takes: every object is matched against each of them.
inline constexpr size_t kMaxGlobs = 1000;

// The selection of a sync: a path is taken if it matches any include (or no includes are given)
// and no exclude. Exclude wins. Immutable; thread-safe.
class PathFilter {
 public:
  // Errors: those of ValidateGlob for any pattern; InvalidArgument "--include: 1001 patterns, at
  // most 1000 (each object is matched against every one)" past kMaxGlobs (--exclude alike).
  static Result<PathFilter> Create(std::vector<std::string> includes,
                                   std::vector<std::string> excludes);
  bool Selects(std::string_view path) const;

  // After filtering a whole listing: the includes that matched no path of `paths` (in the order
  // given), so the job can fail naming them.
  std::vector<std::string> UnmatchedIncludes(const std::vector<std::string_view>& paths) const;

  const std::vector<std::string>& includes() const { return includes_; }
  const std::vector<std::string>& excludes() const { return excludes_; }

 private:
  std::vector<std::string> includes_;
  std::vector<std::string> excludes_;
};

}  // namespace bdn::sync
