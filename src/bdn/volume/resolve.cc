#include "bdn/volume/resolve.h"

namespace bdn {

Result<PinnedRef> ResolveRef(Registry& registry, const Ref& ref) {
  PinnedRef pinned{ref.ns, ref.volume, Digest()};
  if (ref.digest) {
    BDN_ASSIGN_OR_RETURN(auto found, registry.FindVersions(ref.ns, ref.volume, *ref.digest));
    if (found.empty()) {
      return Err(
          NotFoundError("version " + ref.VolumeString() + "@b3:" + *ref.digest + ": not found"));
    }
    if (found.size() > 1) {
      std::string names;
      for (const auto& d : found) names += (names.empty() ? "" : ", ") + d.ToString();
      return Err(InvalidArgumentError("digest prefix \"" + *ref.digest + "\" of " +
                                      ref.VolumeString() + " is ambiguous: matches " + names));
    }
    pinned.digest = found[0];
    return pinned;
  }
  BDN_ASSIGN_OR_RETURN(VolumeRecord vol, registry.GetVolume(ref.ns, ref.volume));
  if (ref.tag && *ref.tag != kHeadTag) {
    auto it = vol.tags.find(*ref.tag);
    if (it == vol.tags.end()) {
      std::vector<std::string> tags;
      for (const auto& [name, digest] : vol.tags) tags.push_back(name);
      return Err(NotFoundError(TagNotFoundMessage(ref.VolumeString(), *ref.tag, tags)));
    }
    pinned.digest = it->second;
    return pinned;
  }
  if (!vol.head) return Err(NotFoundError("volume " + ref.VolumeString() + ": has no head"));
  pinned.digest = *vol.head;
  return pinned;
}

}  // namespace bdn
