// The names of the registry's vocabulary (docs/spec.md §2): namespaces, volumes and tags, and the
// reserved tag "head". Here, at the bottom, so that every layer that checks a name (format's ref
// parser, the registry, the key store) uses the one rule.
#pragma once

#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn {

// The reserved tag that names the version the last push or sync sealed.
inline constexpr std::string_view kHeadTag = "head";

// Checks a tag name: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. Errors: InvalidArgument "tag \"t\": ...".
Status ValidateTag(std::string_view tag);
// Checks (already lower-cased) namespace/volume names: [a-z0-9][a-z0-9._-]{0,127}.
// `what` is "namespace" or "volume". Errors: InvalidArgument "<what> \"n\": <why>".
Status ValidateName(std::string_view what, std::string_view name);

// How a name's offending character is shown in an error: 'c' when printable, else 0xNN.
std::string QuoteChar(char c);

}  // namespace bdn
