// Flags of the deployment-config commands: bdn mounts apply|lock.
#include "flags.h"

namespace bdn::app {

void AddMountsFlags(CLI::App& app, Invocation& inv) {
  auto* mounts = app.add_subcommand("mounts", "mount or pin the volumes of a deployment config");
  mounts->require_subcommand(1);
  mounts->fallthrough();
  static std::string file;
  auto* c = mounts->add_subcommand("apply", "mount every entry of bdn.mounts");
  c->add_option("-f,--file", file, "deployment config (YAML)")->required();
  c->callback([&] { inv.run = [&](cli::Context& ctx) { return cli::MountsApply(ctx, file); }; });
  c = mounts->add_subcommand("lock", "rewrite tag/head sources to pinned digests");
  c->add_option("-f,--file", file, "deployment config (YAML)")->required();
  c->callback([&] { inv.run = [&](cli::Context& ctx) { return cli::MountsLock(ctx, file); }; });
}

}  // namespace bdn::app
