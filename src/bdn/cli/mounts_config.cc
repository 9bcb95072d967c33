#include "bdn/cli/mounts_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace bdn::cli {
namespace fs = std::filesystem;
namespace {

Result<std::vector<MountEntry>> ParseUnguarded(const std::string& file, const std::string& text) {
  auto at = [&](const YAML::Node& n, const std::string& why) {
    return Err(InvalidArgumentError(file + ":" + std::to_string(n.Mark().line + 1) + ": " + why));
  };
  // A mapping key as text; a sequence or mapping used as a key is refused.
  auto key_of = [&](const YAML::Node& key, const std::string& in) -> Result<std::string> {
    if (!key.IsScalar()) return at(key, "a key in " + in + " must be a string");
    return key.as<std::string>();
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Err(InvalidArgumentError(file + ":" + std::to_string(e.mark.line + 1) +
                                    ": YAML syntax error: " + e.msg));
  }
  if (!root.IsMap() || !root["bdn"]) {
    return Err(InvalidArgumentError(file + ":1: no \"bdn:\" section"));
  }
  YAML::Node bdn = root["bdn"];
  if (!bdn.IsMap()) return at(bdn, "\"bdn\" must be a mapping");
  for (auto it = bdn.begin(); it != bdn.end(); ++it) {
    BDN_ASSIGN_OR_RETURN(std::string key, key_of(it->first, "bdn"));
    if (key != "mounts")
      return at(it->first, "unknown key \"" + key + "\" in bdn (allowed: mounts)");
  }
  YAML::Node mounts = bdn["mounts"];
  if (!mounts) return at(bdn, "bdn.mounts is missing");
  if (!mounts.IsSequence()) return at(mounts, "bdn.mounts must be a list");
  std::vector<MountEntry> out;
  std::map<std::string, size_t> seen_paths;
  for (size_t i = 0; i < mounts.size(); ++i) {
    YAML::Node m = mounts[i];
    const std::string where = "mounts[" + std::to_string(i) + "]";
    if (!m.IsMap()) return at(m, where + " must be a mapping with source and path");
    std::map<std::string, int> keys;
    for (auto it = m.begin(); it != m.end(); ++it) {
      BDN_ASSIGN_OR_RETURN(std::string key, key_of(it->first, where));
      if (key != "source" && key != "path" && key != "allow_other") {
        return at(it->first, "unknown key \"" + key + "\" in " + where +
                                 " (allowed: source, path, allow_other)");
      }
      if (++keys[key] > 1) return at(it->first, "duplicate key \"" + key + "\" in " + where);
    }
    if (!m["source"] || !m["source"].IsScalar()) return at(m, where + ".source is missing");
    if (!m["path"] || !m["path"].IsScalar()) return at(m, where + ".path is missing");
    MountEntry e;
    e.line = m["source"].Mark().line + 1;
    e.column = m["source"].Mark().column;
    e.source = m["source"].as<std::string>();
    e.path = m["path"].as<std::string>();
    auto ref = ParseRef(e.source);
    if (!ref) return at(m["source"], where + ".source: " + ref.error().message());
    if (!ref->path.empty())
      return at(m["source"], where + ".source \"" + e.source + "\": a mount source takes no path");
    e.ref = *ref;
    if (YAML::Node ao = m["allow_other"]) {
      bool value = false;
      if (!ao.IsScalar() || !YAML::convert<bool>::decode(ao, value)) {
        std::string shown = ao.IsScalar() ? " \"" + ao.Scalar() + "\"" : "";
        return at(ao, where + ".allow_other" + shown + ": must be true or false");
      }
      e.allow_other = value;
      e.allow_other_line = ao.Mark().line + 1;
    }
    if (e.path.empty() || e.path[0] != '/') {
      return at(m["path"], where + ".path \"" + e.path + "\": must be absolute");
    }
    std::string norm = fs::path(e.path).lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
    if (norm == "/") return at(m["path"], where + ".path \"" + e.path + "\": cannot mount over /");
    for (const auto& [other, j] : seen_paths) {
      bool inside = norm.starts_with(other + "/");
      bool contains = other.starts_with(norm + "/");
      if (inside || contains) {
        return at(m["path"], where + ".path \"" + e.path +
                                 "\": " + (inside ? "inside" : "contains") + " mounts[" +
                                 std::to_string(j) + "].path \"" + other + "\"");
      }
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
      return Err(InvalidArgumentError(file + ":" + std::to_string(e->line) +
                                      ": cannot find the source text to rewrite"));
    };
    if (e->line < 1 || static_cast<size_t>(e->line) > lines.size() || e->column < 0) {
      return not_found();
    }
    std::string& line = lines[static_cast<size_t>(e->line - 1)];
    size_t at = static_cast<size_t>(e->column);
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

}  // namespace bdn::cli
