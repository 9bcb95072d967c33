// Flags of the deployment-config commands: bdn mounts apply|lock, and bdn mounts ls.
#include <memory>
#include <string>

#include "flags.h"

namespace bdn::app {

void AddMountsFlags(CLI::App& app, Invocation& inv) {
  auto* mounts = app.add_subcommand("mounts", "mount or pin the volumes of a deployment config");
  mounts->require_subcommand(1);
  mounts->fallthrough();
  struct ApplyFlags {
    std::string file;
    MountFlags mount;  // for every entry
    bool replace = false;
  };
  auto apply = std::make_shared<ApplyFlags>();
  auto* c = mounts->add_subcommand("apply", "mount every entry of bdn.mounts");
  c->add_option("-f,--file", apply->file, "deployment config (YAML)")->required();
  AddMountTuningFlags(*c, apply->mount);
  c->add_flag("--replace", apply->replace,
              "unmount another version mounted at an entry's path and mount the config's (a "
              "mount in use is refused); without it, exit 8");
  c->callback([&inv, apply] {
    inv.huge_page_heap = true;
    inv.check = [apply]() -> Status {
      BDN_RETURN_IF_ERROR(ParseMountFlags(apply->mount));
      return cli::CheckMountsConfig(apply->file);
    };
    inv.run = [apply](cli::Context& ctx) {
      return cli::MountsApply(
          ctx, apply->file, apply->mount.args,
          apply->replace ? cli::OtherMount::kReplace : cli::OtherMount::kRefuse);
    };
  });
  c = mounts->add_subcommand("ls", "list this machine's bdn mounts and whether each is served");
  c->callback([&inv] {
    inv.needs = Needs::kNothing;
    inv.run = [](cli::Context& ctx) { return cli::MountsList(ctx); };
  });
  auto lock_file = std::make_shared<std::string>();
  c = mounts->add_subcommand("lock", "rewrite tag/head sources to pinned digests");
  c->add_option("-f,--file", *lock_file, "deployment config (YAML)")->required();
  c->callback([&inv, lock_file] {
    inv.run = [lock_file](cli::Context& ctx) { return cli::MountsLock(ctx, *lock_file); };
  });
}

}  // namespace bdn::app
