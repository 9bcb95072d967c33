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

// Whether the command line names the directory a store command works on (--data, migrate's
// --cache-dir, or main's --home): then --remote or BDN_REMOTE does not make it ambiguous (a node
// cache is converted where mounts through a server use it; a stopped server's --data is local).
bool NamesDataDir(const StoreArgs& args, const std::string& home) {
  return !args.data.empty() || !args.cache_dir.empty() || !home.empty();
}

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
    c->callback([&inv, &json, &home, args, fn, name] {
      if (!NamesDataDir(*args, home)) inv.local_only = std::string("bdn store ") + name;
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
    if (!NamesDataDir(*args, home)) inv.local_only = "bdn store migrate";
    inv.run_standalone = [&json, &home, args] {
      if (!args->cache_dir.empty()) return cli::StoreMigrateCache(args->cache_dir, json);
      return cli::StoreMigrate(DataDir(*args, home), json);
    };
  });
  add("rebuild-index", "rebuild the blob index from the pack footers", cli::StoreRebuildIndex);
  add("stats", "count the store's packs, blobs and bytes", cli::StoreStats);

  struct GcFlags {
    StoreArgs data;
    cli::GcArgs args;
  };
  auto gc = std::make_shared<GcFlags>();
  auto* c = app.add_subcommand(
      "gc", "reclaim the packs no live or restorable version (nor a push in flight) needs");
  c->add_option("--data", gc->data.data,
                "data directory holding store/ (default --home, $BDN_HOME or ~/.local/share/bdn; "
                "a stopped bdn serve's --data)");
  c->add_flag("--dry-run", gc->args.dry_run, "list what would be reclaimed; change nothing");
  c->add_option("--max-repack-fraction", gc->args.max_repack_fraction,
                "repack a pack whose needed bytes are below this fraction of it (0 to 1; 0 only "
                "deletes packs with nothing needed)")
      ->capture_default_str();
  c->add_option("--grace", gc->args.grace,
                "how long doomed packs stay readable before they are deleted (0s to 24h)")
      ->capture_default_str();
  c->callback([&inv, &json, &home, gc] {
    if (!NamesDataDir(gc->data, home)) inv.local_only = "bdn gc";
    inv.run_standalone = [&json, &home, gc] {
      return cli::Gc(DataDir(gc->data, home), gc->args, json);
    };
  });

  struct FsckFlags {
    StoreArgs data;
    bool repair = false;
  };
  auto fsck = std::make_shared<FsckFlags>();
  c = app.add_subcommand("fsck",
                         "check every pack, blob, index table and version of a store; report "
                         "each problem with the versions it affects");
  c->add_option("--data", fsck->data.data,
                "data directory holding store/ (default --home, $BDN_HOME or ~/.local/share/bdn; "
                "a stopped bdn serve's --data)");
  c->add_flag("--repair", fsck->repair,
              "set damaged copies aside and rebuild the index, so that pushing the data again "
              "restores it");
  c->callback([&inv, &json, &home, fsck] {
    if (!NamesDataDir(fsck->data, home)) inv.local_only = "bdn fsck";
    inv.run_standalone = [&json, &home, fsck] {
      return cli::Fsck(DataDir(fsck->data, home), fsck->repair, json);
    };
  });
}

}  // namespace bdn::app
