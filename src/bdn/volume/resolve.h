// Resolving refs: a tag, head or digest prefix pinned once to a full version digest (docs/spec.md
// §2).
#pragma once

#include "bdn/base/status.h"
#include "bdn/format/ref.h"
#include "bdn/registry/registry.h"

namespace bdn {

// Resolves `ref` to the digest of one version: "@<prefix>" must match exactly one version
// (alive or deleted) of the volume; ":tag" looks up the tag; no selector means head.
// Errors: NotFound for an unknown volume, tag, or digest; InvalidArgument
// "digest prefix \"…\" of bdn:ns/vol is ambiguous: matches b3:…, b3:…" for a shared prefix;
// NotFound "volume bdn:ns/vol: has no head" for a volume without versions.
Result<PinnedRef> ResolveRef(Registry& registry, const Ref& ref);

}  // namespace bdn
