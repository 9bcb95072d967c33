// Flags of the deployment-config commands: bdn mounts apply|lock.
#include <memory>
#include <string>

#include "flags.h"

namespace bdn::app {

void AddMountsFlags(CLI::App& app, Invocation& inv) {
  auto* mounts = app.add_subcommand("mounts", "mount or pin the volumes of a deployment config");
  mounts->require_subcommand(1);
  mounts->fallthrough();
  auto apply_file = std::make_shared<std::string>();
  auto* c = mounts->add_subcommand("apply", "mount every entry of bdn.mounts");
  c->add_option("-f,--file", *apply_file, "deployment config (YAML)")->required();
  c->callback([&inv, apply_file] {
    inv.huge_page_heap = true;
    inv.run = [apply_file](cli::Context& ctx) { return cli::MountsApply(ctx, *apply_file); };
  });
  auto lock_file = std::make_shared<std::string>();
  c = mounts->add_subcommand("lock", "rewrite tag/head sources to pinned digests");
  c->add_option("-f,--file", *lock_file, "deployment config (YAML)")->required();
  c->callback([&inv, lock_file] {
    inv.run = [lock_file](cli::Context& ctx) { return cli::MountsLock(ctx, *lock_file); };
  });
}

}  // namespace bdn::app
