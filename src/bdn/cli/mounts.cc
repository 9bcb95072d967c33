// bdn mounts apply|lock: the deployment config's bdn.mounts (SPEC §5), parsed with yaml-cpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bdn/cli/commands.h"
#include "bdn/cli/output.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/volume/resolve.h"

namespace bdn::cli {
namespace fs = std::filesystem;
namespace {

struct MountEntry {
  int line = 0;         // 1-based line of the entry's source value
  int column = 0;       // 0-based column where the source value starts (at its quote, if any)
  std::string source;   // as written
  Ref ref;
  std::string path;
  bool allow_other = false;
  int allow_other_line = 0;  // 1-based line of allow_other, if given
};

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err(ErrnoError("config " + path, errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses and validates bdn.mounts. Other top-level keys of the deployment config are left alone.
Result<std::vector<MountEntry>> ParseConfigUnguarded(const std::string& file,
                                                     const std::string& text) {
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
    if (key != "mounts") return at(it->first, "unknown key \"" + key + "\" in bdn (allowed: mounts)");
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
    if (!ref->path.empty()) return at(m["source"], where + ".source \"" + e.source + "\": a mount source takes no path");
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
        return at(m["path"], where + ".path \"" + e.path + "\": " +
                                 (inside ? "inside" : "contains") + " mounts[" +
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

// ParseConfigUnguarded with any other yaml-cpp exception turned into "FILE:LINE: <reason>".
Result<std::vector<MountEntry>> ParseConfig(const std::string& file, const std::string& text) {
  try {
    return ParseConfigUnguarded(file, text);
  } catch (const YAML::Exception& e) {
    return Err(InvalidArgumentError(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg));
  }
}

bool Pinned(const Ref& r) { return r.digest.has_value() && r.digest->size() == 64; }

}  // namespace

Status MountsApply(Context& ctx, const std::string& config_path) {
  BDN_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  BDN_ASSIGN_OR_RETURN(auto entries, ParseConfig(config_path, text));
  auto at_line = [&](int line) { return config_path + ":" + std::to_string(line); };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].allow_other) continue;
    if (Status s = CheckAllowOtherPermitted(); !s.ok()) {
      return s.WithPrefix(at_line(entries[i].allow_other_line) + ": mounts[" + std::to_string(i) +
                          "].allow_other");
    }
  }
  // Resolve every source once, before mounting anything.
  std::vector<PinnedRef> pinned;
  std::vector<int64_t> created_ms;  // each version's creation time: mtimes it does not record
  for (const auto& e : entries) {
    auto p = ResolveRef(*ctx.registry, e.ref);
    if (!p) return p.error().WithPrefix(at_line(e.line));
    pinned.push_back(*p);
    created_ms.push_back(VersionCreatedUnixMs(ctx, *p));
    if (!Pinned(e.ref)) {
      std::cerr << "warning: " << config_path << ":" << e.line << ": source " << e.source
                << " is not pinned to a digest; mounting " << p->ToString()
                << " (pin it with: bdn mounts lock -f " << config_path << ")\n";
    }
  }
  // What each mountpoint holds, before mounting anything. Applying a config again is a no-op
  // for the entries already mounted as it says; a mountpoint holding another version (or the
  // same one with another allow_other) is refused; a dead mount is mounted again.
  std::vector<bool> mounted(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    auto state = InspectMountpoint(e.path);
    if (!state) return state.error().WithPrefix(at_line(e.line));
    if (state->kind == MountpointState::Kind::kDead) {
      std::cerr << "warning: " << at_line(e.line) << ": mountpoint " << e.path << ": dead mount of "
                << (state->source.empty() ? state->type : state->source)
                << " (its daemon is gone); mounting again\n";
      continue;
    }
    if (state->kind != MountpointState::Kind::kLiveBdn) continue;
    const std::string unmount_first = "; unmount it first (bdn volume umount " + e.path + ")";
    if (state->source != pinned[i].ToString()) {
      return FailedPreconditionError(at_line(e.line) + ": mountpoint " + e.path +
                                     ": already a bdn mount of " + state->source + unmount_first);
    }
    if (state->allow_other != e.allow_other) {
      return FailedPreconditionError(
          at_line(e.line) + ": mountpoint " + e.path + ": already a bdn mount of " + state->source +
          (state->allow_other ? " with" : " without") +
          " allow_other, the config says allow_other: " + (e.allow_other ? "true" : "false") +
          unmount_first);
    }
    mounted[i] = true;
  }
  ctx.registry.reset();  // the mount daemons are forks of this process
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> done;
  for (size_t i = 0; i < entries.size(); ++i) {
    const MountEntry& e = entries[i];
    pid_t daemon_pid = -1;
    if (!mounted[i]) {
      MountArgs args;
      args.mountpoint = e.path;
      args.allow_other = e.allow_other;
      args.version_created_unix_ms = created_ms[i];
      Status s = MountPinned(ctx, pinned[i], args, &daemon_pid);
      if (!s.ok()) {
        for (const auto& m : done) (void)Unmount(m);
        return s.WithPrefix(at_line(e.line));
      }
      done.push_back(e.path);
    }
    nlohmann::json r = {{"source", e.source},
                        {"version_ref", pinned[i].ToString()},
                        {"path", e.path},
                        {"pinned", Pinned(e.ref)},
                        {"allow_other", e.allow_other},
                        {"already_mounted", mounted[i]}};
    if (!mounted[i]) r["daemon_pid"] = daemon_pid;
    results.push_back(std::move(r));
    if (!ctx.json) {
      std::cout << pinned[i].ToString() << (mounted[i] ? " already mounted at " : " mounted at ")
                << e.path << "\n";
    }
  }
  if (ctx.json) std::cout << JsonText({{"mounts", results}}) << std::endl;
  return Status::Ok();
}

Status MountsLock(Context& ctx, const std::string& config_path) {
  BDN_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  BDN_ASSIGN_OR_RETURN(auto entries, ParseConfig(config_path, text));
  std::vector<std::string> lines;
  {
    std::stringstream ss(text);
    std::string l;
    while (std::getline(ss, l)) lines.push_back(l);
  }
  nlohmann::json changes = nlohmann::json::array();
  std::vector<std::pair<const MountEntry*, std::string>> rewrites;  // entry, pinned ref
  for (const auto& e : entries) {
    auto p = ResolveRef(*ctx.registry, e.ref);
    if (!p) return p.error().WithPrefix(config_path + ":" + std::to_string(e.line));
    std::string pinned = p->ToString();
    if (e.source == pinned) continue;
    rewrites.emplace_back(&e, pinned);
    changes.push_back({{"line", e.line}, {"from", e.source}, {"to", pinned}});
    if (!ctx.json) std::cout << config_path << ":" << e.line << ": " << e.source << " -> " << pinned << "\n";
  }
  // Rewrite each value where the parser found it (the same text may appear elsewhere on the
  // line, in flow style), from the end of the file backwards so earlier columns stay valid.
  std::sort(rewrites.begin(), rewrites.end(), [](const auto& a, const auto& b) {
    return std::pair(a.first->line, a.first->column) > std::pair(b.first->line, b.first->column);
  });
  for (const auto& [e, pinned] : rewrites) {
    std::string& line = lines[static_cast<size_t>(e->line - 1)];
    size_t at = static_cast<size_t>(e->column);
    if (at < line.size() && (line[at] == '"' || line[at] == '\'')) ++at;
    if (line.compare(at, e->source.size(), e->source) != 0) {
      return InvalidArgumentError(config_path + ":" + std::to_string(e->line) +
                                  ": cannot find the source text to rewrite");
    }
    line.replace(at, e->source.size(), pinned);
  }
  if (!changes.empty()) {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    if (!text.empty() && text.back() != '\n') out.pop_back();
    // Replace the file a symlink points to (not the link), keeping its permission bits.
    std::error_code ec;
    fs::path target = fs::canonical(config_path, ec);
    if (ec) return ErrnoError("config " + config_path, ec.value());
    fs::path tmp = target.string() + ".bdn-lock.tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << out;
      if (!f.flush()) return ErrnoError("config " + tmp.string(), errno);
    }
    fs::permissions(tmp, fs::status(target).permissions(), ec);
    if (!ec) fs::rename(tmp, target, ec);
    if (ec) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      return ErrnoError("config " + target.string(), ec.value());
    }
  }
  if (ctx.json) {
    std::cout << JsonText({{"config", config_path}, {"changes", changes}}) << std::endl;
  } else if (changes.empty()) {
    std::cout << config_path << ": every source is already pinned\n";
  }
  return Status::Ok();
}

}  // namespace bdn::cli
