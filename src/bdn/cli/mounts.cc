// bdn mounts apply|lock: the deployment config's bdn.mounts (docs/spec.md §5; parsed in
// mounts_config.cc).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bdn/cli/commands.h"
#include "bdn/cli/mounts_config.h"
#include "bdn/cli/output.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/store/atomic_file.h"
#include "bdn/volume/resolve.h"

namespace bdn::cli {
namespace fs = std::filesystem;
namespace {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err(ErrnoError("config " + path, errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Pinned(const Ref& r) { return r.digest.has_value() && r.digest->size() == 64; }

}  // namespace

Status MountsApply(Context& ctx, const std::string& config_path) {
  BDN_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  BDN_ASSIGN_OR_RETURN(auto entries, ParseMountsConfig(config_path, text));
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
        // Best-effort rollback of this run's mounts: the error that stopped it is what counts.
        for (const auto& m : done) Unmount(m).IgnoreError();
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
  BDN_ASSIGN_OR_RETURN(auto entries, ParseMountsConfig(config_path, text));
  nlohmann::json changes = nlohmann::json::array();
  std::vector<SourceRewrite> rewrites;
  for (const auto& e : entries) {
    auto p = ResolveRef(*ctx.registry, e.ref);
    if (!p) return p.error().WithPrefix(config_path + ":" + std::to_string(e.line));
    std::string pinned = p->ToString();
    if (e.source == pinned) continue;
    rewrites.push_back({&e, pinned});
    changes.push_back({{"line", e.line}, {"from", e.source}, {"to", pinned}});
    if (!ctx.json)
      std::cout << config_path << ":" << e.line << ": " << e.source << " -> " << pinned << "\n";
  }
  if (!changes.empty()) {
    BDN_ASSIGN_OR_RETURN(std::string out,
                         RewriteMountSources(config_path, text, std::move(rewrites)));
    // Replace the file a symlink points to (not the link), keeping its permission bits.
    std::error_code ec;
    fs::path target = fs::canonical(config_path, ec);
    if (ec) return ErrnoError("config " + config_path, ec.value());
    const fs::perms perms = fs::status(target, ec).permissions();
    if (ec) return ErrnoError("config " + target.string(), ec.value());
    auto written = WriteFileAtomically(target, AsBytes(out), "config " + target.string(),
                                       {.tmp_name = target.filename().string() + ".bdn-lock.tmp",
                                        .mode = static_cast<unsigned>(perms & fs::perms::mask)});
    if (!written) return written.error();
  }
  if (ctx.json) {
    std::cout << JsonText({{"config", config_path}, {"changes", changes}}) << std::endl;
  } else if (changes.empty()) {
    std::cout << config_path << ": every source is already pinned\n";
  }
  return Status::Ok();
}

}  // namespace bdn::cli
