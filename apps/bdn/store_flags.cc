// Flags of the `bdn store` commands: maintenance of a local pack store. Each command's flag
// values land in its own options struct, owned by the command's callback.
#include <memory>

#include "flags.h"

namespace bdn::app {
namespace {

struct StoreArgs {
  std::string data;       // --data: the data directory holding store/
  std::string cache_dir;  // migrate --cache-dir: a node cache directory instead of a store
};

// The data directory a store command works on: --data, else main's --home, else the default.
std::filesystem::path DataDir(const StoreArgs& args, const std::string& home) {
  if (!args.data.empty()) return args.data;
  return home.empty() ? cli::DefaultHome() : std::filesystem::path(home);
}

}  // namespace

void AddStoreFlags(CLI::App& app, Invocation& inv, const std::string& home, const bool& json) {
  auto* store = app.add_subcommand("store", "maintain a local store (embedded, or bdn serve's)");
  store->require_subcommand(1);
  store->fallthrough();
  auto add = [&](const char* name, const char* help,
                 Status (*fn)(const std::filesystem::path&, bool)) {
    auto args = std::make_shared<StoreArgs>();
    auto* c = store->add_subcommand(name, help);
    c->add_option("--data", args->data,
                  "data directory holding store/ (default --home, $BDN_HOME or "
                  "~/.local/share/bdn; bdn serve's --data)");
    c->callback([&inv, &json, &home, args, fn] {
      inv.run_standalone = [&json, &home, args, fn] { return fn(DataDir(*args, home), json); };
    });
    return std::make_pair(c, args);
  };
  auto [migrate, migrate_args] =
      add("migrate", "convert a store of the old one-file-per-chunk layout into packs, in place",
          cli::StoreMigrate);
  migrate->add_option("--cache-dir", migrate_args->cache_dir,
                      "a node cache directory (mounts' and cache serve's --cache-dir) to convert "
                      "into regions instead of a store");
  migrate->callback([&inv, &json, &home, args = migrate_args] {
    inv.run_standalone = [&json, &home, args] {
      if (!args->cache_dir.empty()) return cli::StoreMigrateCache(args->cache_dir, json);
      return cli::StoreMigrate(DataDir(*args, home), json);
    };
  });
  add("rebuild-index", "rebuild the blob index from the pack footers", cli::StoreRebuildIndex);
  add("stats", "count the store's packs, blobs and bytes", cli::StoreStats);
}

}  // namespace bdn::app
