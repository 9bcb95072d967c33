// Flags of the `bdn volume` commands.
#include "bdn/base/units.h"
#include "flags.h"

#include <chrono>

namespace bdn::app {

void AddVolumeFlags(CLI::App& app, Invocation& inv) {
  auto* volume = app.add_subcommand("volume", "push, inspect, pull and mount volumes");
  volume->require_subcommand(1);
  volume->fallthrough();

  static bdn::cli::PushArgs push;
  static int64_t push_expected = -1;
  auto* c = volume->add_subcommand("push", "seal DIR as a new version of volume REF");
  c->add_option("DIR", push.dir, "directory to push")->required();
  c->add_option("REF", push.ref, "bdn:<namespace>/<volume>[:tag]")->required();
  c->add_option("--tag", push.tags, "tag to point at the new version (repeatable)");
  c->add_option("--source-uri", push.source_uri, "where the data came from (recorded)");
  c->add_option("--jobs", push.jobs, "hashing threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  c->add_flag("--preserve-mtime", push.preserve_mtime,
              "record mtimes (they become part of the digest)");
  c->add_option("--expected-sequence", push_expected, "fail unless the volume sequence is N")
      ->check(CLI::NonNegativeNumber);
  static std::string push_retry_deadline = "60s";
  c->add_option("--retry-deadline", push_retry_deadline,
                "with --remote: give up (exit 7) once the origin has failed this long (1s to "
                "24h, e.g. 30s, 2m); all of the push's requests share it")
      ->envname("BDN_RETRY_DEADLINE")
      ->capture_default_str();
  c->callback([&] {
    if (push_expected >= 0) push.expected_sequence = push_expected;
    inv.run = [&](bdn::cli::Context& ctx) -> bdn::Status {
      auto deadline = bdn::ParseDuration(push_retry_deadline, std::chrono::seconds(1),
                                         std::chrono::hours(24));
      if (!deadline) return deadline.error().WithPrefix("--retry-deadline");
      push.retry_deadline = *deadline;
      return bdn::cli::Push(ctx, push);
    };
  });

  static bdn::cli::LsArgs ls;
  c = volume->add_subcommand("ls",
                             "list namespaces, volumes of a namespace, or entries of a version");
  c->add_option("REF", ls.ref, "bdn:<ns> or bdn:<ns>/<vol>[:tag|@digest][/path]");
  c->add_flag("-R,--recursive", ls.recursive, "list subdirectories too");
  c->callback([&] { inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Ls(ctx, ls); }; });

  static std::string stat_ref;
  c = volume->add_subcommand("stat", "describe a volume, a version, or an entry");
  c->add_option("REF", stat_ref)->required();
  c->callback(
      [&] { inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Stat(ctx, stat_ref); }; });

  static bdn::cli::VersionsArgs versions;
  c = volume->add_subcommand("versions", "list versions, newest first");
  c->add_option("REF", versions.ref)->required();
  c->add_flag("--include-deleted", versions.include_deleted);
  c->callback(
      [&] { inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Versions(ctx, versions); }; });

  auto* tag = volume->add_subcommand("tag", "move or delete tags");
  tag->require_subcommand(1);
  tag->fallthrough();
  static bdn::cli::TagArgs tag_args;
  static int64_t tag_expected = -1;
  for (const char* verb : {"set", "delete"}) {
    c = tag->add_subcommand(verb, std::string(verb) == "set"
                                      ? "point a tag at the version REF selects"
                                      : "remove a tag; the version stays");
    c->add_option("--volume-ref", tag_args.volume_ref)->required();
    c->add_option("--tag", tag_args.tag)->required();
    c->add_option("--expected-sequence", tag_expected)->check(CLI::NonNegativeNumber);
    bool is_set = std::string(verb) == "set";
    c->callback([&, is_set] {
      if (tag_expected >= 0) tag_args.expected_sequence = tag_expected;
      inv.run = [&, is_set](bdn::cli::Context& ctx) {
        return is_set ? bdn::cli::TagSet(ctx, tag_args) : bdn::cli::TagDelete(ctx, tag_args);
      };
    });
  }

  static bdn::cli::PullArgs pull;
  c = volume->add_subcommand("pull", "materialize a version or subtree into DIR");
  c->add_option("REF", pull.ref)->required();
  c->add_option("DIR", pull.dir)->required();
  c->add_option("--include", pull.includes, "only this path (repeatable)");
  c->add_flag("--strip-prefix", pull.strip_prefix, "put the selected subtree directly in DIR");
  c->add_flag("--overwrite", pull.overwrite, "replace existing files that differ");
  c->add_option("--jobs", pull.jobs)->check(CLI::PositiveNumber);
  c->callback([&] { inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Pull(ctx, pull); }; });

  static std::string cat_ref;
  c = volume->add_subcommand("cat", "write one file's bytes to stdout, verified");
  c->add_option("REF", cat_ref, "bdn:<ns>/<vol>[:tag|@digest]/<path>")->required();
  c->callback(
      [&] { inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Cat(ctx, cat_ref); }; });

  static std::string diff_a, diff_b;
  c = volume->add_subcommand("diff", "files added, removed, changed between two versions");
  c->add_option("REF_A", diff_a)->required();
  c->add_option("REF_B", diff_b)->required();
  c->callback([&] {
    inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Diff(ctx, diff_a, diff_b); };
  });

  static std::string verify_ref;
  static int verify_jobs = 0;
  c = volume->add_subcommand("verify", "re-read and re-hash every chunk of a version");
  c->add_option("REF", verify_ref)->required();
  c->add_option("--jobs", verify_jobs)->check(CLI::PositiveNumber);
  c->callback([&] {
    inv.run = [&](bdn::cli::Context& ctx) {
      return bdn::cli::Verify(ctx, verify_ref, verify_jobs);
    };
  });

  static bdn::cli::MountArgs mount;
  static std::string mount_cache;
  static std::string mount_cache_size;
  static std::string mount_read_timeout;  // "": not given (MountOptions' default)
  c = volume->add_subcommand("mount", "read-only FUSE mount of the pinned version");
  c->add_option("REF", mount.ref)->required();
  c->add_option("MOUNTPOINT", mount.mountpoint)->required();
  c->add_flag("--foreground", mount.foreground, "serve in this process until unmounted");
  c->add_option("--memory-cache", mount_cache, "in-memory chunk cache size (e.g. 256M)");
  c->add_option("--cache-dir", mount.cache_dir,
                "node cache directory, shared by the node's mounts (remote only; default "
                "$BDN_HOME/cache)");
  c->add_option("--cache-size", mount_cache_size, "node cache bound (e.g. 50G; default 10G)");
  c->add_option("--cluster-cache", mount.cluster_cache,
                "in-cluster cache node URLs, comma-separated (default $BDN_CLUSTER_CACHE)");
  c->add_flag("--allow-other", mount.allow_other,
              "let other users read the mount (file modes still apply; a user other than root "
              "needs user_allow_other in /etc/fuse.conf)");
  c->add_option("--read-timeout", mount_read_timeout,
                "how long a read waits for its bytes before failing with EIO (100ms to 1h, e.g. "
                "30s, 500ms, 2m; a plain number is seconds; default 55s: with the kernel's retry "
                "of a failed read, EIO comes within 60 s)");
  c->callback([&] {
    inv.run = [&](bdn::cli::Context& ctx) -> bdn::Status {
      if (!mount_cache.empty()) {
        auto n = bdn::ParseByteSize(mount_cache);
        if (!n) return n.error().WithPrefix("--memory-cache");
        mount.memory_cache_bytes = *n;
      }
      if (!mount_cache_size.empty()) {
        auto n = bdn::ParseByteSize(mount_cache_size);
        if (!n) return n.error().WithPrefix("--cache-size");
        if (*n == 0) return bdn::InvalidArgumentError("--cache-size: must be more than 0");
        mount.cache_size_bytes = *n;
      }
      if (!mount_read_timeout.empty()) {
        auto d = bdn::ParseDuration(mount_read_timeout, std::chrono::milliseconds(100),
                                    std::chrono::milliseconds(3'600'000));
        if (!d) return d.error().WithPrefix("--read-timeout");
        mount.read_timeout_ms = d->count();
      }
      return bdn::cli::Mount(ctx, mount);
    };
  });

  static std::string umount_path;
  c = volume->add_subcommand("umount", "unmount cleanly");
  c->add_option("MOUNTPOINT", umount_path)->required();
  c->callback([&] {
    inv.run = [&](bdn::cli::Context& ctx) { return bdn::cli::Umount(ctx, umount_path); };
  });

  AddSyncFlags(*volume, inv);
}

}  // namespace bdn::app
