// Flags of the `bdn volume` commands. Each command's flag values land in its own options struct,
// owned (through a shared_ptr) by the command's callback; flags given as text (durations, sizes)
// are parsed when the command runs, so that their errors name the flag.
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "bdn/base/log.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/cli/output.h"
#include "flags.h"

namespace bdn::app {
namespace {

// --retry-deadline of push and pull: 60s, or BDN_RETRY_DEADLINE when set and the flag is not
// given. Parse names whichever gave the value (an environment value's error said
// "--retry-deadline", a flag the user never typed), and so do the command's give-up notes.
struct RetryDeadlineFlag {
  std::string text = "60s";
  CLI::Option* option = nullptr;

  void Add(CLI::App* c, const std::string& what) {
    option = c->add_option("--retry-deadline", text,
                           "with --remote: give up (exit 7) once the origin has failed this long "
                           "(1s to 24h, e.g. 30s, 2m; default 60s, or BDN_RETRY_DEADLINE); all of "
                           "the " +
                               what + "'s requests share it");
  }
  // Sets *deadline and *name ("--retry-deadline" or "BDN_RETRY_DEADLINE"). Errors:
  // ParseDuration's, prefixed with *name.
  Status Parse(std::chrono::milliseconds* deadline, std::string* name) const {
    const char* env = std::getenv("BDN_RETRY_DEADLINE");
    const bool from_env = option->count() == 0 && env != nullptr && *env != '\0';
    *name = from_env ? "BDN_RETRY_DEADLINE" : "--retry-deadline";
    auto d = ParseDuration(from_env ? std::string(env) : text, std::chrono::seconds(1),
                           std::chrono::hours(24));
    if (!d) return d.error().WithPrefix(*name);
    *deadline = *d;
    return Status::Ok();
  }
};

struct PushFlags {
  cli::PushArgs args;
  int64_t expected_sequence = -1;  // -1: not given
  RetryDeadlineFlag retry_deadline;
};

struct TagFlags {
  cli::TagArgs args;
  int64_t expected_sequence = -1;  // -1: not given
};

struct VerifyFlags {
  std::string ref;
  int jobs = 0;
};

struct DiffFlags {
  std::string ref_a;
  std::string ref_b;
};

}  // namespace

Status ParseMountFlags(MountFlags& f) {
  if (!f.memory_cache.empty()) {
    auto n = ParseByteSize(f.memory_cache);
    if (!n) return n.error().WithPrefix("--memory-cache");
    f.args.memory_cache_bytes = *n;
  }
  if (!f.cache_size.empty()) {
    auto n = ParseByteSize(f.cache_size);
    if (!n) return n.error().WithPrefix("--cache-size");
    if (*n == 0) return InvalidArgumentError("--cache-size: must be more than 0");
    f.args.cache_size_bytes = *n;
  }
  if (!f.read_timeout.empty()) {
    auto d = ParseDuration(f.read_timeout, std::chrono::milliseconds(100),
                           std::chrono::milliseconds(3'600'000));
    if (!d) return d.error().WithPrefix("--read-timeout");
    f.args.read_timeout_ms = d->count();
  }
  auto level = log::ParseLevel(f.log_level);
  if (!level) return level.error().WithPrefix("--log-level");
  f.args.log_level = *level;
  return Status::Ok();
}

void AddMountTuningFlags(CLI::App& c, MountFlags& f) {
  // An empty value is refused, not read as the default (from an attacking helper: `--cache-size
  // ""` from an unset shell variable gave the 10G default without a word).
  c.add_option("--memory-cache", f.memory_cache, "in-memory chunk cache size (e.g. 256M)")
      ->check(NotEmpty());
  c.add_option("--cache-dir", f.args.cache_dir,
               "node cache directory, shared by the node's mounts (remote only; default "
               "$BDN_HOME/cache)")
      ->check(NotEmpty());
  c.add_option("--cache-size", f.cache_size, "node cache bound (e.g. 50G; default 10G)")
      ->check(NotEmpty());
  c.add_option("--cluster-cache", f.args.cluster_cache,
               "in-cluster cache node URLs, comma-separated (default $BDN_CLUSTER_CACHE)");
  c.add_option("--read-timeout", f.read_timeout,
               "how long a read waits for its bytes before failing with EIO (100ms to 1h, e.g. "
               "30s, 500ms, 2m; a plain number is seconds; default 55s: with the kernel's retry "
               "of a failed read, EIO comes within 60 s)")
      ->check(NotEmpty());
  c.add_option("--log-level", f.log_level,
               "the mount daemon's log: debug, info, warn, error or off")
      ->capture_default_str();
}

CLI::Validator IntInRange(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        long long value = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return "\"" + text + "\" is out of range";
        if (ec != std::errc() || ptr != end || text.empty()) {
          return "\"" + text + "\" is not a whole number";
        }
        if (value < min) return "must be at least " + std::to_string(min);
        if (value > max) return "must be at most " + std::to_string(max);
        return std::string();
      },
      max == std::numeric_limits<long long>::max()
          ? "INT>=" + std::to_string(min)
          : "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
}

CLI::Validator NotEmpty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("must not be empty") : std::string();
      },
      "");
}

void AddVolumeFlags(CLI::App& app, Invocation& inv) {
  auto* volume = app.add_subcommand("volume", "push, inspect, pull and mount volumes");
  volume->require_subcommand(1);
  volume->fallthrough();

  auto push = std::make_shared<PushFlags>();
  auto* c = volume->add_subcommand("push", "seal DIR as a new version of volume REF");
  c->add_option("DIR", push->args.dir, "directory to push")->required()->check(NotEmpty());
  c->add_option("REF", push->args.ref, "bdn:<namespace>/<volume>[:tag]")->required();
  c->add_option("--tag", push->args.tags, "tag to point at the new version (repeatable)");
  c->add_option("--source-uri", push->args.source_uri, "where the data came from (recorded)");
  c->add_option("--jobs", push->args.jobs, "hashing threads (default: all cores)")
      ->check(IntInRange(1, kMaxJobs));
  c->add_flag("--preserve-mtime", push->args.preserve_mtime,
              "record mtimes (they become part of the digest)");
  c->add_option("--expected-sequence", push->expected_sequence,
                "fail unless the volume sequence is N")
      ->check(IntInRange(0));
  push->retry_deadline.Add(c, "push");
  c->callback([&inv, push] {
    inv.needs = Needs::kStoreCreated;
    inv.huge_page_heap = true;
    if (push->expected_sequence >= 0) push->args.expected_sequence = push->expected_sequence;
    inv.check = [push]() -> Status {
      BDN_RETURN_IF_ERROR(
          push->retry_deadline.Parse(&push->args.retry_deadline, &push->args.retry_deadline_name));
      // Before the embedded store is made (a push makes it): a ref, tag or DIR push refuses
      // leaves nothing behind at a new home. The words are Push's own.
      return cli::CheckPushArgs(push->args);
    };
    inv.run = [push](cli::Context& ctx) { return cli::Push(ctx, push->args); };
  });

  auto ls = std::make_shared<cli::LsArgs>();
  c = volume->add_subcommand("ls",
                             "list namespaces, volumes of a namespace, or entries of a version");
  c->add_option("REF", ls->ref, "bdn:<ns> or bdn:<ns>/<vol>[:tag|@digest][/path]");
  c->add_flag("-R,--recursive", ls->recursive, "list subdirectories too");
  c->callback([&inv, ls] {
    inv.refs = [ls] { return std::vector<std::string>{ls->ref}; };
    inv.run = [ls](cli::Context& ctx) { return cli::Ls(ctx, *ls); };
  });

  auto stat_ref = std::make_shared<std::string>();
  c = volume->add_subcommand("stat", "describe a volume, a version, or an entry");
  c->add_option("REF", *stat_ref, "bdn:<namespace>/<volume>[:tag|@digest][/<path>]")->required();
  c->callback([&inv, stat_ref] {
    inv.refs = [stat_ref] { return std::vector<std::string>{*stat_ref}; };
    inv.run = [stat_ref](cli::Context& ctx) { return cli::Stat(ctx, *stat_ref); };
  });

  auto versions = std::make_shared<cli::VersionsArgs>();
  c = volume->add_subcommand("versions", "list versions, newest first");
  c->add_option("REF", versions->ref, "bdn:<namespace>/<volume>")->required();
  c->add_flag("--include-deleted", versions->include_deleted,
              "list deleted versions too (restorable within the retention)");
  c->callback([&inv, versions] {
    inv.refs = [versions] { return std::vector<std::string>{versions->ref}; };
    inv.run = [versions](cli::Context& ctx) { return cli::Versions(ctx, *versions); };
  });

  auto* tag = volume->add_subcommand("tag", "move or delete tags");
  tag->require_subcommand(1);
  tag->fallthrough();
  for (const bool is_set : {true, false}) {
    auto flags = std::make_shared<TagFlags>();
    c = tag->add_subcommand(
        is_set ? "set" : "delete",
        is_set ? "point a tag at the version REF selects" : "remove a tag; the version stays");
    c->add_option("--volume-ref", flags->args.volume_ref,
                  is_set ? "the version: bdn:<namespace>/<volume>[:tag|@digest]"
                         : "the volume: bdn:<namespace>/<volume>")
        ->required();
    c->add_option("--tag", flags->args.tag, "the tag's name")->required();
    c->add_option("--expected-sequence", flags->expected_sequence,
                  "refuse (exit 4) unless the volume's sequence is this")
        ->check(IntInRange(0));
    c->callback([&inv, flags, is_set] {
      inv.writes = true;
      inv.refs = [flags] { return std::vector<std::string>{flags->args.volume_ref}; };
      if (flags->expected_sequence >= 0) flags->args.expected_sequence = flags->expected_sequence;
      inv.run = [flags, is_set](cli::Context& ctx) {
        return is_set ? cli::TagSet(ctx, flags->args) : cli::TagDelete(ctx, flags->args);
      };
    });
  }

  struct RmFlags {
    cli::RmArgs args;
    int64_t expected_sequence = -1;  // -1: not given
  };
  auto rm = std::make_shared<RmFlags>();
  c = volume->add_subcommand(
      "rm",
      "soft-delete a version (REF@digest) or every live version (--recursive REF); tags "
      "are dropped; restorable until the printed delete_after");
  c->add_option("REF", rm->args.ref, "bdn:<ns>/<vol>@<digest>, or bdn:<ns>/<vol> with --recursive")
      ->required();
  c->add_flag("-r,--recursive", rm->args.recursive, "every live version of the volume");
  c->add_flag("-y,--yes", rm->args.yes, "do not ask (needed when stdin is not a terminal)");
  c->add_option("--expected-sequence", rm->expected_sequence,
                "fail unless the volume sequence is N")
      ->check(IntInRange(0));
  c->callback([&inv, rm] {
    inv.writes = true;
    inv.refs = [rm] { return std::vector<std::string>{rm->args.ref}; };
    if (rm->expected_sequence >= 0) rm->args.expected_sequence = rm->expected_sequence;
    inv.run = [rm](cli::Context& ctx) { return cli::Rm(ctx, rm->args); };
  });

  struct RestoreFlags {
    cli::RestoreArgs args;
    int64_t expected_sequence = -1;  // -1: not given
  };
  auto restore = std::make_shared<RestoreFlags>();
  c = volume->add_subcommand("restore",
                             "undelete a version within its retention window (tags are not "
                             "restored)");
  c->add_option("REF", restore->args.ref, "bdn:<ns>/<vol>@<digest>")->required();
  c->add_option("--expected-sequence", restore->expected_sequence,
                "fail unless the volume sequence is N")
      ->check(IntInRange(0));
  c->callback([&inv, restore] {
    inv.writes = true;
    inv.refs = [restore] { return std::vector<std::string>{restore->args.ref}; };
    if (restore->expected_sequence >= 0) {
      restore->args.expected_sequence = restore->expected_sequence;
    }
    inv.run = [restore](cli::Context& ctx) { return cli::Restore(ctx, restore->args); };
  });

  auto pull = std::make_shared<cli::PullArgs>();
  c = volume->add_subcommand("pull", "materialize a version or subtree into DIR");
  c->add_option("REF", pull->ref, "bdn:<namespace>/<volume>[:tag|@digest][/<path>]")->required();
  c->add_option("DIR", pull->dir, "directory to write the files into")
      ->required()
      ->check(NotEmpty());
  c->add_option("--include", pull->includes, "only this path (repeatable)");
  c->add_flag("--strip-prefix", pull->strip_prefix, "put the selected subtree directly in DIR");
  c->add_flag("--overwrite", pull->overwrite, "replace existing files that differ");
  c->add_option("--jobs", pull->jobs, "files written at once (default: all cores)")
      ->check(IntInRange(1, kMaxJobs));
  c->add_option("--writer-stall-time", pull->writer_stall_time,
                "how long to wait for another pull writing one of the files while it makes no "
                "progress (default 1m)")
      ->check(NotEmpty());
  auto pull_retry = std::make_shared<RetryDeadlineFlag>();
  pull_retry->Add(c, "pull");
  c->callback([&inv, pull, pull_retry] {
    inv.refs = [pull] { return std::vector<std::string>{pull->ref}; };
    inv.huge_page_heap = true;
    // Before the store is opened: a new user's home has none, and "REF DIR" is their first hint.
    inv.check = [pull, pull_retry]() -> Status {
      BDN_RETURN_IF_ERROR(pull_retry->Parse(&pull->retry_deadline, &pull->retry_deadline_name));
      return cli::CheckPullArgs(*pull);
    };
    inv.run = [pull](cli::Context& ctx) { return cli::Pull(ctx, *pull); };
  });

  auto cat_ref = std::make_shared<std::string>();
  c = volume->add_subcommand("cat", "write one file's bytes to stdout, verified");
  c->add_option("REF", *cat_ref, "bdn:<ns>/<vol>[:tag|@digest]/<path>")->required();
  c->callback([&inv, cat_ref] {
    inv.refs = [cat_ref] { return std::vector<std::string>{*cat_ref}; };
    inv.huge_page_heap = true;
    // Every error of cat's, --json's included, goes to stderr: its stdout is the file (from a
    // new user: a mistyped tag put {"error": ...} where a script wrote the file).
    cli::MarkStdoutAsData();
    inv.run = [cat_ref](cli::Context& ctx) { return cli::Cat(ctx, *cat_ref); };
  });

  auto diff = std::make_shared<DiffFlags>();
  c = volume->add_subcommand("diff", "files added, removed, changed between two versions");
  c->add_option("REF_A", diff->ref_a, "bdn:<namespace>/<volume>[:tag|@digest]")->required();
  c->add_option("REF_B", diff->ref_b, "bdn:<namespace>/<volume>[:tag|@digest]")->required();
  c->callback([&inv, diff] {
    inv.refs = [diff] { return std::vector<std::string>{diff->ref_a, diff->ref_b}; };
    inv.run = [diff](cli::Context& ctx) { return cli::Diff(ctx, diff->ref_a, diff->ref_b); };
  });

  auto verify = std::make_shared<VerifyFlags>();
  c = volume->add_subcommand("verify", "re-read and re-hash every chunk of a version");
  c->add_option("REF", verify->ref, "bdn:<namespace>/<volume>[:tag|@digest][/<path>]")->required();
  c->add_option("--jobs", verify->jobs, "chunks read and hashed at once (default: all cores)")
      ->check(IntInRange(1, kMaxJobs));
  c->callback([&inv, verify] {
    inv.refs = [verify] { return std::vector<std::string>{verify->ref}; };
    inv.huge_page_heap = true;
    inv.run = [verify](cli::Context& ctx) { return cli::Verify(ctx, verify->ref, verify->jobs); };
  });

  auto mount = std::make_shared<MountFlags>();
  c = volume->add_subcommand("mount", "read-only FUSE mount of the pinned version");
  c->add_option("REF", mount->args.ref, "bdn:<namespace>/<volume>[:tag|@digest]")->required();
  c->add_option("MOUNTPOINT", mount->args.mountpoint, "directory to mount at (made if missing)")
      ->required()
      ->check(NotEmpty());
  c->add_flag("--foreground", mount->args.foreground, "serve in this process until unmounted");
  AddMountTuningFlags(*c, *mount);
  c->add_flag("--allow-other", mount->args.allow_other,
              "let other users read the mount (file modes still apply; a user other than root "
              "needs user_allow_other in /etc/fuse.conf)");
  c->add_option("--log-file", mount->args.log_file,
                "the mount daemon's log file (default $BDN_HOME/logs/mount-<name>-<hash>.log; "
                "with --foreground, stderr)");
  c->callback([&inv, mount] {
    inv.refs = [mount] { return std::vector<std::string>{mount->args.ref}; };
    inv.huge_page_heap = true;
    inv.check = [mount]() -> Status {
      // From a new user: `mount DIR REF` said only that DIR does not start with "bdn:".
      const cli::MountArgs& a = mount->args;
      if (a.mountpoint.starts_with("bdn:") && !a.ref.starts_with("bdn:")) {
        return InvalidArgumentError("mount takes REF then MOUNTPOINT: \"" +
                                    EscapeName(a.mountpoint) + "\" is a ref (bdn volume mount " +
                                    EscapeName(a.mountpoint) + " " + EscapeName(a.ref) + ")");
      }
      return ParseMountFlags(*mount);
    };
    inv.run = [mount](cli::Context& ctx) { return cli::Mount(ctx, mount->args); };
  });

  auto umount_path = std::make_shared<std::string>();
  c = volume->add_subcommand("umount", "unmount cleanly");
  c->add_option("MOUNTPOINT", *umount_path, "where the version is mounted")
      ->required()
      ->check(NotEmpty());
  c->callback([&inv, umount_path] {
    inv.needs = Needs::kNothing;
    inv.run = [umount_path](cli::Context& ctx) { return cli::Umount(ctx, *umount_path); };
  });

  AddSyncFlags(*volume, inv);
}

}  // namespace bdn::app
