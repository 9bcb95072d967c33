// The deployment config's bdn.mounts section (docs/spec.md §5): parsed and validated from text, and
// rewritten in place (bdn mounts lock), with no file or mount I/O, so both are unit-tested and
// fuzzed (fuzz/mounts_config_fuzz.cc).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/format/ref.h"

namespace bdn::cli {

// One entry of bdn.mounts.
struct MountEntry {
  int line = 0;    // 1-based line of the entry's source value (of its "source" key for an alias)
  int column = 0;  // 0-based column where the source value starts (at its quote, if any)
  bool source_aliased = false;  // the source is a YAML alias (*name): line/column are not its own
  std::string source;           // as written
  Ref ref;                      // the parsed source: a volume ref without a path
  std::string path;             // absolute, lexically normal, no trailing '/'; never "/"
  bool allow_other = false;
  int allow_other_line = 0;  // 1-based line of allow_other, if given
};

// The largest config ParseMountsConfig reads (a deployment config is a few KiB; yaml-cpp holds
// a node tree of some hundred times the text's size).
inline constexpr size_t kMaxMountsConfigBytes = 1 << 20;

// Parses and validates bdn.mounts from `text` (YAML, one document); other top-level keys are left
// alone. Entries come back in file order; no two paths are equal or nested. `file` names the
// config in messages. Errors: InvalidArgument "FILE: larger than 1048576 bytes" (see
// kMaxMountsConfigBytes); InvalidArgument "FILE:LINE: <reason>" for YAML syntax, YAML nested
// too deeply, a second YAML document, a missing "bdn:" section or bdn.mounts, unknown or
// duplicate keys (within an entry, in bdn, and "bdn" itself), keys that are not strings, a
// missing source or path, control characters (0x00-0x1f, 0x7f) in a source or path, a malformed
// source ref or one with a path, an allow_other that is not a plain (unquoted) true or false, a
// relative path, "/", and duplicate or nested paths. O(n log n) in the entries. Thread-safe.
Result<std::vector<MountEntry>> ParseMountsConfig(const std::string& file, std::string_view text);

// A source value to replace: an entry as ParseMountsConfig returned it for the same text, and
// its new text (a ref without characters that need YAML quoting, e.g. a pinned ref).
struct SourceRewrite {
  const MountEntry* entry = nullptr;
  std::string to;
};

// Returns `text` with each rewrite's source value replaced where the parser found it (the same
// text may appear elsewhere on the line), and nothing else changed. Errors: InvalidArgument
// "FILE:LINE: cannot find the source text to rewrite (write the ref on the line of source:, ...)"
// when an entry's line and column do not
// hold its source text (e.g. a source written as a multi-line or escaped YAML scalar, or with an
// anchor); InvalidArgument "FILE:LINE: the source is a YAML alias (*name): cannot rewrite it;
// write the ref in its place" for an aliased source (rewriting the anchor would change the other
// values that share it).
// Thread-safe.
Result<std::string> RewriteMountSources(const std::string& file, std::string_view text,
                                        std::vector<SourceRewrite> rewrites);

// The error of a `bdn mounts apply` stopped by `failed` after it mounted some entries and tried
// to unmount them again: `failed` (its code kept) with "; rolled back: unmounted P1, P2 again"
// when `unmounted` is not empty and "; rollback failed, still mounted: <message>, ..." with the
// message of each failed unmount. Thread-safe.
Status RollbackError(const Status& failed, const std::vector<std::string>& unmounted,
                     const std::vector<Status>& not_unmounted);

}  // namespace bdn::cli
