#include "bdn/cli/mounts_config.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "bdn/base/text.h"

namespace bdn::cli {
namespace fs = std::filesystem;
namespace {

// A control byte (0x00-0x1f, 0x7f) in `s`: the kernel reads a path only up to a NUL, so two
// paths that compare unequal here could name one mountpoint.
bool HasControlByte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto b = static_cast<unsigned char>(c);
    return b < 0x20 || b == 0x7f;
  });
}

// "FILE:LINE: duplicate key ..." for the second of two equal string keys of the mapping `map`,
// named `in` in the message; other keys are left alone.
template <typename At>
Status CheckNoDuplicateKey(const YAML::Node& map, const std::string& key, const std::string& in,
                           const At& at) {
  bool seen = false;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
    if (seen) return at(it->first, "duplicate key \"" + key + "\"" + in).error();
    seen = true;
  }
  return Status::Ok();
}

// Where each document of a YAML stream starts (the rest of the events are ignored).
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

Result<std::vector<MountEntry>> ParseUnguarded(const std::string& file, const std::string& text) {
  auto at = [&](const YAML::Node& n, const std::string& why) -> Result<std::vector<MountEntry>> {
    return Err(InvalidArgumentError(file + ":" + std::to_string(n.Mark().line + 1) + ": " + why));
  };
  // A mapping key as text; a sequence or mapping used as a key is refused.
  auto key_of = [&](const YAML::Node& key, const std::string& in) -> Result<std::string> {
    if (!key.IsScalar()) return Err(at(key, "a key in " + in + " must be a string").error());
    return key.as<std::string>();
  };
  if (text.size() > kMaxMountsConfigBytes) {
    return Err(InvalidArgumentError(file + ": larger than " +
                                    std::to_string(kMaxMountsConfigBytes) + " bytes"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // yaml-cpp's Load reads the first document only: a second one would be ignored silently.
    // Not LoadAll: on some malformed text (", \n    snu]m") yaml-cpp 0.7's parser reports a
    // new document forever without moving on (a fuzzer found it), so the documents are
    // counted here, and a "document" that starts where the first did is a syntax error.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    if (parser.HandleNextDocument(starts) && parser.HandleNextDocument(starts) &&
        starts.marks.size() == 2) {
      const YAML::Mark& second = starts.marks[1];
      if (second.pos <= starts.marks[0].pos) {
        return Err(InvalidArgumentError(file + ":" + std::to_string(second.line + 1) +
                                        ": YAML syntax error: text the YAML parser cannot read"));
      }
      return Err(InvalidArgumentError(file + ":" + std::to_string(second.line + 1) +
                                      ": a second YAML document (---): the config is one"));
    }
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message is "bad file"; its limit counts parser recursion, not levels.
    return Err(InvalidArgumentError(file + ":" + std::to_string(e.mark.line + 1) +
                                    ": YAML nested too deeply"));
  } catch (const YAML::Exception& e) {
    return Err(InvalidArgumentError(file + ":" + std::to_string(e.mark.line + 1) +
                                    ": YAML syntax error: " + e.msg));
  }
  if (!root.IsMap() || !root["bdn"]) {
    return Err(InvalidArgumentError(file + ":1: no \"bdn:\" section"));
  }
  // Duplicate keys: yaml-cpp keeps both, and root["bdn"] would see only the first.
  BDN_RETURN_IF_ERROR(CheckNoDuplicateKey(root, "bdn", "", at));
  YAML::Node bdn = root["bdn"];
  if (!bdn.IsMap()) return at(bdn, "\"bdn\" must be a mapping");
  for (auto it = bdn.begin(); it != bdn.end(); ++it) {
    BDN_ASSIGN_OR_RETURN(std::string key, key_of(it->first, "bdn"));
    if (key != "mounts")
      return at(it->first, "unknown key \"" + key + "\" in bdn (allowed: mounts)");
  }
  BDN_RETURN_IF_ERROR(CheckNoDuplicateKey(bdn, "mounts", " in bdn", at));
  YAML::Node mounts = bdn["mounts"];
  if (!mounts) return at(bdn, "bdn.mounts is missing");
  if (!mounts.IsSequence()) return at(mounts, "bdn.mounts must be a list");
  std::vector<MountEntry> out;
  // Normalized paths seen so far, with their entries' indexes: each new path is checked against
  // its ancestors (one lookup per '/') and its descendants (one lower_bound), O(n log n) in all.
  std::map<std::string, size_t> seen_paths;
  size_t i = 0;
  for (auto entry = mounts.begin(); entry != mounts.end(); ++entry, ++i) {
    YAML::Node m = *entry;
    const std::string where = "mounts[" + std::to_string(i) + "]";
    if (!m.IsMap()) return at(m, where + " must be a mapping with source and path");
    std::map<std::string, int> keys;
    YAML::Mark source_key;
    for (auto it = m.begin(); it != m.end(); ++it) {
      BDN_ASSIGN_OR_RETURN(std::string key, key_of(it->first, where));
      if (key == "source") source_key = it->first.Mark();
      if (key != "source" && key != "path" && key != "allow_other") {
        return at(it->first, "unknown key \"" + key + "\" in " + where +
                                 " (allowed: source, path, allow_other)");
      }
      if (++keys[key] > 1) return at(it->first, "duplicate key \"" + key + "\" in " + where);
    }
    if (!m["source"] || !m["source"].IsScalar()) return at(m, where + ".source is missing");
    if (!m["path"] || !m["path"].IsScalar()) return at(m, where + ".path is missing");
    MountEntry e;
    const YAML::Mark value = m["source"].Mark();
    e.line = value.line + 1;
    e.column = value.column;
    // An alias (*name) has its anchor's place, which comes before the key: name the key's line.
    if (std::pair(value.line, value.column) < std::pair(source_key.line, source_key.column)) {
      e.source_aliased = true;
      e.line = source_key.line + 1;
    }
    e.source = m["source"].as<std::string>();
    e.path = m["path"].as<std::string>();
    if (HasControlByte(e.source)) {
      return at(m["source"], where + ".source \"" + EscapeName(e.source) +
                                 "\": control characters are not allowed");
    }
    if (HasControlByte(e.path)) {
      return at(m["path"],
                where + ".path \"" + EscapeName(e.path) + "\": control characters are not allowed");
    }
    auto ref = ParseRef(e.source);
    if (!ref) return at(m["source"], where + ".source: " + ref.error().message());
    if (!ref->path.empty())
      return at(m["source"], where + ".source \"" + e.source + "\": a mount source takes no path");
    e.ref = *ref;
    if (YAML::Node ao = m["allow_other"]) {
      // Only a plain true or false: yaml-cpp would also take "true" quoted, yes/no, on/off, y/n.
      const bool plain = ao.IsScalar() && ao.Tag() == "?";
      if (!plain || (ao.Scalar() != "true" && ao.Scalar() != "false")) {
        std::string shown = ao.IsScalar() ? " \"" + EscapeName(ao.Scalar()) + "\"" : "";
        // yaml-cpp tags a quoted scalar "!", an explicitly tagged one with its tag.
        std::string how;
        if (ao.IsScalar() && ao.Tag() == "!") how = ", not a quoted string";
        if (ao.IsScalar() && ao.Tag() != "!" && ao.Tag() != "?") {
          how = ", without a tag (" + EscapeName(ao.Tag()) + ")";
        }
        return at(ao, where + ".allow_other" + shown + ": must be true or false" + how);
      }
      e.allow_other = ao.Scalar() == "true";
      e.allow_other_line = ao.Mark().line + 1;
    }
    if (e.path.empty() || e.path[0] != '/') {
      return at(m["path"], where + ".path \"" + e.path + "\": must be absolute");
    }
    std::string norm = fs::path(e.path).lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
    if (norm == "/") return at(m["path"], where + ".path \"" + e.path + "\": cannot mount over /");
    auto nested = [&](const std::string& other, size_t j, const char* how) {
      return at(m["path"], where + ".path \"" + e.path + "\": " + how + " mounts[" +
                               std::to_string(j) + "].path \"" + other + "\"");
    };
    // Ancestors first, shortest first, then the first descendant in order: the report names the
    // same entry as comparing with every earlier path in sorted order would.
    for (size_t slash = norm.find('/', 1); slash != std::string::npos;
         slash = norm.find('/', slash + 1)) {
      auto found = seen_paths.find(norm.substr(0, slash));
      if (found != seen_paths.end()) return nested(found->first, found->second, "inside");
    }
    const std::string below = norm + "/";
    if (auto d = seen_paths.lower_bound(below);
        d != seen_paths.end() && d->first.starts_with(below)) {
      return nested(d->first, d->second, "contains");
    }
    auto [pos, inserted] = seen_paths.emplace(norm, i);
    if (!inserted) {
      return at(m["path"], where + ".path \"" + e.path + "\": duplicate of mounts[" +
                               std::to_string(pos->second) + "]");
    }
    e.path = norm;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

Result<std::vector<MountEntry>> ParseMountsConfig(const std::string& file, std::string_view text) {
  // Any other yaml-cpp exception (e.g. a bad conversion) becomes "FILE:LINE: <reason>".
  try {
    return ParseUnguarded(file, std::string(text));
  } catch (const YAML::Exception& e) {
    return Err(InvalidArgumentError(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg));
  }
}

Result<std::string> RewriteMountSources(const std::string& file, std::string_view text,
                                        std::vector<SourceRewrite> rewrites) {
  std::vector<std::string> lines;
  for (size_t start = 0; start <= text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  // From the end of the file backwards, so earlier columns stay valid.
  std::sort(rewrites.begin(), rewrites.end(), [](const auto& a, const auto& b) {
    return std::pair(a.entry->line, a.entry->column) > std::pair(b.entry->line, b.entry->column);
  });
  for (const auto& [e, to] : rewrites) {
    auto not_found = [&, e = e] {
      // Block scalars (| and >), a ref split over lines, escapes in quotes: the value's text is
      // not the ref as written. From a user: the message did not say what to change.
      return Err(InvalidArgumentError(
          file + ":" + std::to_string(e->line) +
          ": cannot find the source text to rewrite (write the ref on the line of source:, as a "
          "plain or quoted scalar, e.g. source: bdn:ns/vol:tag)"));
    };
    if (e->source_aliased) {
      return Err(InvalidArgumentError(
          file + ":" + std::to_string(e->line) +
          ": the source is a YAML alias (*name): cannot rewrite it; write the ref in its place"));
    }
    if (e->line < 1 || static_cast<size_t>(e->line) > lines.size() || e->column < 0) {
      return not_found();
    }
    std::string& line = lines[static_cast<size_t>(e->line - 1)];
    size_t at = static_cast<size_t>(e->column);
    // yaml-cpp counts columns of line 1 after a byte order mark.
    if (e->line == 1 && line.starts_with("\xEF\xBB\xBF")) at += 3;
    // A tag before the value ("!!str bdn:a/b"): the value starts after it and its spaces.
    if (at < line.size() && line[at] == '!') {
      while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    }
    if (at < line.size() && (line[at] == '"' || line[at] == '\'')) ++at;
    if (at > line.size() || line.compare(at, e->source.size(), e->source) != 0) return not_found();
    line.replace(at, e->source.size(), to);
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
}

Status RollbackError(const Status& failed, const std::vector<std::string>& unmounted,
                     const std::vector<Status>& not_unmounted) {
  std::string message = failed.message();
  for (size_t i = 0; i < unmounted.size(); ++i) {
    message += (i ? ", " : "; rolled back: unmounted ") + unmounted[i];
  }
  if (!unmounted.empty()) message += " again";
  for (size_t i = 0; i < not_unmounted.size(); ++i) {
    message += (i ? ", " : "; rollback failed, still mounted: ") + not_unmounted[i].message();
  }
  return Status(failed.code(), std::move(message));
}

}  // namespace bdn::cli
