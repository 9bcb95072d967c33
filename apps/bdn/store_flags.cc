// Flags of the `bdn store` commands: maintenance of a local pack store.
#include "flags.h"

namespace bdn::app {

void AddStoreFlags(CLI::App& app, Invocation& inv, const std::string& home, const bool& json) {
  auto* store = app.add_subcommand("store", "maintain a local store (embedded, or bdn serve's)");
  store->require_subcommand(1);
  store->fallthrough();
  static std::string data;
  auto data_dir = [&home] {
    if (!data.empty()) return std::filesystem::path(data);
    return home.empty() ? cli::DefaultHome() : std::filesystem::path(home);
  };
  auto add = [&](const char* name, const char* help, Status (*fn)(const std::filesystem::path&, bool)) {
    auto* c = store->add_subcommand(name, help);
    c->add_option("--data", data,
                  "data directory holding store/ (default --home, $BDN_HOME or "
                  "~/.local/share/bdn; bdn serve's --data)");
    c->callback([&inv, &json, data_dir, fn] { inv.run_standalone = [&json, data_dir, fn] { return fn(data_dir(), json); }; });
  };
  add("migrate", "convert a store of the old one-file-per-chunk layout into packs, in place",
      cli::StoreMigrate);
  // A node cache directory instead of a store: --cache-dir.
  static std::string cache_dir;
  auto* migrate = store->get_subcommand("migrate");
  migrate->add_option("--cache-dir", cache_dir,
                      "a node cache directory (mounts' and cache serve's --cache-dir) to convert "
                      "into regions instead of a store");
  migrate->callback([&inv, &json, data_dir] {
    inv.run_standalone = [&json, data_dir] {
      if (!cache_dir.empty()) return cli::StoreMigrateCache(cache_dir, json);
      return cli::StoreMigrate(data_dir(), json);
    };
  });
  add("rebuild-index", "rebuild the blob index from the pack footers", cli::StoreRebuildIndex);
  add("stats", "count the store's packs, blobs and bytes", cli::StoreStats);
}

}  // namespace bdn::app
