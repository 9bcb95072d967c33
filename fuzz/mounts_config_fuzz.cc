// Fuzzes the deployment config parser and its rewriter (cli/mounts_config.h). Any text either
// fails with InvalidArgument "c.yaml:LINE: …" or gives entries with valid volume refs and
// absolute, normal, distinct, non-nested paths. Rewriting every source to a pinned ref (what
// `bdn mounts lock` does) either fails with "cannot find the source text to rewrite" (or "the
// source is a YAML alias") or gives a
// config that parses to the same entries at the same places with the new sources, and that a
// second rewrite to the same refs leaves as it is.
#include <filesystem>

#include "bdn/cli/mounts_config.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;
using cli::MountEntry;

const std::string kFile = "c.yaml";

std::string PinnedFor(const MountEntry& e) {
  return "bdn:" + e.ref.ns + "/" + e.ref.volume + "@b3:" + std::string(64, 'a');
}

void CheckEntries(std::string_view text, const std::vector<MountEntry>& entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    auto ref = ParseRef(e.source);
    FUZZ_CHECK(ref && ref->HasVolume() && ref->path.empty(), e.source);
    FUZZ_CHECK(e.ref.ns == ref->ns && e.ref.volume == ref->volume, e.source);
    FUZZ_CHECK(e.path.size() > 1 && e.path.front() == '/' && e.path.back() != '/', e.path);
    FUZZ_CHECK(std::filesystem::path(e.path).lexically_normal().string() == e.path, e.path);
    FUZZ_CHECK(e.line >= 1 && e.column >= 0, std::string(text));
    for (size_t j = 0; j < i; ++j) {
      const std::string& o = entries[j].path;
      FUZZ_CHECK(o != e.path && !o.starts_with(e.path + "/") && !e.path.starts_with(o + "/"),
                 o + " and " + e.path);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);
  auto entries = cli::ParseMountsConfig(kFile, text);
  if (!entries) {
    FUZZ_CHECK(fuzz::IsError(entries.error(), StatusCode::kInvalidArgument, kFile + ":"),
               entries.error().ToString());
    return 0;
  }
  CheckEntries(text, *entries);

  std::vector<cli::SourceRewrite> rewrites;
  for (const MountEntry& e : *entries) rewrites.push_back({&e, PinnedFor(e)});
  auto locked = cli::RewriteMountSources(kFile, text, rewrites);
  if (!locked) {
    const std::string& m = locked.error().message();
    FUZZ_CHECK(fuzz::IsError(locked.error(), StatusCode::kInvalidArgument, kFile + ":") &&
                   (m.ends_with(": cannot find the source text to rewrite (write the ref on the "
                                "line of source:, as a plain or quoted scalar, e.g. source: "
                                "bdn:ns/vol:tag)") ||
                    m.ends_with(": the source is a YAML alias (*name): cannot rewrite it; write "
                                "the ref in its place")),
               locked.error().ToString());
    return 0;
  }
  auto again = cli::ParseMountsConfig(kFile, *locked);
  FUZZ_CHECK(again.has_value(), "the rewritten config does not parse: " + again.error().ToString() +
                                    "\n--- rewritten:\n" + *locked);
  FUZZ_CHECK(again->size() == entries->size(), *locked);
  for (size_t i = 0; i < again->size(); ++i) {
    const MountEntry& a = (*entries)[i];
    const MountEntry& b = (*again)[i];
    // Sources rewritten earlier on the same line (flow style) move this one along.
    int column = a.column;
    for (const MountEntry& o : *entries) {
      if (o.line == a.line && o.column < a.column) {
        column += static_cast<int>(PinnedFor(o).size()) - static_cast<int>(o.source.size());
      }
    }
    FUZZ_CHECK(
        b.source == PinnedFor(a) && b.path == a.path && b.line == a.line && b.column == column,
        "entry " + std::to_string(i) + " changed: " + b.source + " at " + b.path +
            "\n--- rewritten:\n" + *locked);
  }
  std::vector<cli::SourceRewrite> same;
  for (const MountEntry& e : *again) same.push_back({&e, e.source});
  auto twice = cli::RewriteMountSources(kFile, *locked, same);
  FUZZ_CHECK(twice && *twice == *locked, "a rewrite to the same sources changed the text");
  return 0;
}
