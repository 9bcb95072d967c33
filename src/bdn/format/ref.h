// Volume references: bdn:<namespace>/<volume>[:<tag> | @<digest>][/<path>] (docs/spec.md §2).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bdn/base/names.h"
#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn {

// A parsed reference. Names are folded to lower case; the tag keeps its case; the digest is a
// lower-case hex prefix of 12..64 characters without "b3:".
struct Ref {
  std::string ns;
  std::string volume;                 // empty for a namespace-only ref ("bdn:weights")
  std::optional<std::string> tag;     // set by ":tag"
  std::optional<std::string> digest;  // set by "@b3:..." or "@..."
  std::string path;                   // "" or a relative path "a/b"

  bool HasVolume() const { return !volume.empty(); }
  // "bdn:ns/vol" (no selector or path).
  std::string VolumeString() const { return "bdn:" + ns + "/" + volume; }
  // Canonical text of the whole ref.
  std::string ToString() const;
};

enum class RefForm {
  kVolume,     // needs namespace and volume
  kNamespace,  // "bdn:ns" also allowed (namespace-only)
};

// Parses `text` per docs/spec.md §2. Fails before any I/O, naming the part that is wrong, e.g.
//   ref "weights/x": must start with "bdn:"
//   ref "bdn:weights/Qw$n": volume "qw$n": invalid character '$' (allowed: a-z 0-9 . _ -)
// Errors: InvalidArgument.
Result<Ref> ParseRef(std::string_view text, RefForm form = RefForm::kVolume);

// ValidateName, ValidateTag and kHeadTag: bdn/base/names.h.

// A ref resolved once to a digest: every command works from this.
struct PinnedRef {
  std::string ns;
  std::string volume;
  Digest digest;
  // "bdn:ns/vol@b3:<64 hex>".
  std::string ToString() const { return "bdn:" + ns + "/" + volume + "@" + digest.ToString(); }
};

}  // namespace bdn
