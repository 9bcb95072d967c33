#include "bdn/sync/listing.h"

#include <algorithm>
#include <set>

#include "bdn/base/text.h"        // EscapeName
#include "bdn/format/manifest.h"  // ValidateEntryPath
#include "bdn/sync/retry.h"       // CanceledError

namespace bdn::sync {

Result<std::vector<SourceObject>> Select(const SourceListing& listing, const PathFilter& filter,
                                         const std::string& source,
                                         const std::atomic<bool>* cancel) {
  std::vector<SourceObject> out;
  std::vector<std::string_view> paths;
  paths.reserve(listing.objects.size());
  for (const SourceObject& o : listing.objects) {
    // Up to kMaxGlobs patterns against a million objects: seconds a cancel should not wait.
    if (cancel && paths.size() % 1024 == 0 && cancel->load()) {
      return Err(CanceledError(source));
    }
    paths.push_back(o.path);
    if (filter.Selects(o.path)) out.push_back(o);
  }
  std::vector<std::string> unmatched = filter.UnmatchedIncludes(paths);
  if (!unmatched.empty()) {
    std::string names;
    for (const auto& p : unmatched)
      names += (names.empty() ? "" : ", ") + ("\"" + EscapeName(p) + "\"");
    const std::string at = source + (listing.revision.empty() ? "" : " at " + listing.revision) +
                           " (" + std::to_string(listing.objects.size()) + " objects)";
    return Err(
        WithCode(NotFoundError("--include " + names + ": " +
                               (unmatched.size() == 1 ? "matches" : "match") + " nothing in " + at),
                 kIncludeMatchedNothing));
  }
  return out;
}

Digest ListingDigest(const std::string& identity, const std::string& revision,
                     const std::vector<SourceObject>& objects) {
  Blake3Hasher h;
  // Each field as <decimal length>:<bytes>, so that no name, however odd, can end its field
  // early and make two listings' texts equal.
  auto field = [&](std::string_view s) {
    const std::string len = std::to_string(s.size()) + ":";
    h.Update(len.data(), len.size());
    h.Update(s.data(), s.size());
  };
  constexpr std::string_view kMagic = "bdn sync listing v2\n";
  h.Update(kMagic.data(), kMagic.size());
  field(identity);
  field(revision);
  for (const SourceObject& o : objects) {
    field(o.path);
    field(std::to_string(o.size_bytes));
    field(o.etag);
  }
  return h.Finalize();
}

namespace {

// The longest segment a version's path may have and still be pulled or mounted: the longest
// file name Linux file systems take (NAME_MAX). A push never reads a longer one.
constexpr size_t kMaxSegmentBytes = 255;

// The length of the longest '/'-separated segment of `path`.
size_t LongestSegment(std::string_view path) {
  size_t longest = 0;
  while (true) {
    const size_t slash = path.find('/');
    longest = std::max(longest, std::min(slash, path.size()));
    if (slash == std::string_view::npos) return longest;
    path.remove_prefix(slash + 1);
  }
}

}  // namespace

Result<std::vector<SealItem>> ItemsOf(const std::vector<SourceObject>& objects,
                                      const std::string& source) {
  std::set<std::string> dirs;
  std::set<std::string_view> files;
  uint64_t total_bytes = 0;
  for (const SourceObject& o : objects) {
    if (Status s = ValidateEntryPath(o.path); !s.ok()) {
      return Err(WithCode(InvalidArgumentError(source + ": object \"" + EscapeName(o.path) +
                                               "\": cannot be a file of a version (" + s.message() +
                                               "); --exclude it"),
                          kInvalidObject));
    }
    if (const size_t longest = LongestSegment(o.path); longest > kMaxSegmentBytes) {
      return Err(WithCode(
          InvalidArgumentError(source + ": object \"" + EscapeName(o.path) +
                               "\": cannot be a file of a version (a path segment of " +
                               std::to_string(longest) + " bytes; a file system takes at most " +
                               std::to_string(kMaxSegmentBytes) + "); --exclude it"),
          kInvalidObject));
    }
    if (o.size_bytes > kMaxFileBytes) {
      return Err(WithCode(InvalidArgumentError(
                              source + ": object \"" + EscapeName(o.path) +
                              "\": cannot be a file of a version (" + std::to_string(o.size_bytes) +
                              " bytes; a version's file holds at most 2^63-1); --exclude it"),
                          kInvalidObject));
    }
    total_bytes += o.size_bytes;  // each at most 2^63-1: the sum of two cannot wrap
    if (total_bytes > kMaxFileBytes) {
      return Err(
          WithCode(InvalidArgumentError(source + ": the objects add up to more than 2^63-1 bytes, "
                                                 "the most a version holds; --include less"),
                   kInvalidObject));
    }
    if (std::ranges::any_of(
            o.etag, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return Err(WithCode(
          InvalidArgumentError(source + ": object \"" + EscapeName(o.path) + "\": its etag \"" +
                               EscapeName(o.etag) + "\" holds control characters; --exclude it"),
          kInvalidObject));
    }
    files.insert(o.path);
    for (size_t slash = o.path.find('/'); slash != std::string::npos;
         slash = o.path.find('/', slash + 1)) {
      dirs.insert(o.path.substr(0, slash));
    }
  }
  std::vector<SealItem> items;
  items.reserve(objects.size() + dirs.size());
  for (const std::string& d : dirs) {
    if (files.contains(d)) {
      return Err(WithCode(InvalidArgumentError(source + ": object \"" + EscapeName(d) +
                                               "\": is also a directory of other objects; a "
                                               "version cannot hold both (--exclude one)"),
                          kInvalidObject));
    }
    items.push_back({.path = d, .kind = EntryKind::kDirectory, .mode = 0755});
  }
  for (const SourceObject& o : objects) {
    items.push_back({.path = o.path,
                     .kind = EntryKind::kFile,
                     .mode = static_cast<uint16_t>(o.mode & 0777),
                     .size_bytes = o.size_bytes});
  }
  std::sort(items.begin(), items.end(),
            [](const SealItem& a, const SealItem& b) { return a.path < b.path; });
  return items;
}

}  // namespace bdn::sync
