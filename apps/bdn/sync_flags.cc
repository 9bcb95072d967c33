// Flags of `bdn volume sync` and `bdn secret` (docs/spec.md §6, docs/sync.md). Each command's flag
// values land in its own options struct, owned by the command's callback.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bdn/base/units.h"
#include "flags.h"

namespace bdn::app {

void AddSyncFlags(CLI::App& volume, Invocation& inv) {
  auto* sync = volume.add_subcommand(
      "sync", "mirror a Hugging Face repo, bucket, directory or file into a sealed version");
  sync->require_subcommand(1);
  sync->fallthrough();

  struct StartArgs {
    bdn::cli::SyncStartArgs start;
    std::string retry_deadline = "5m";
  };
  auto start_args = std::make_shared<StartArgs>();
  auto& start = start_args->start;
  auto* c = sync->add_subcommand("start", "start (or resume) a sync job");
  c->add_option("--source", start.source,
                "hf://org/repo[@revision], s3://bucket/prefix, gs://bucket/prefix, "
                "azure://account/container/prefix, r2://account_id.bucket/prefix, "
                "cw://bucket/prefix, file:///abs/path or https://host/path")
      ->required();
  c->add_option("--dest", start.dest, "bdn:<namespace>/<volume>[:tag]")->required();
  c->add_option("--include", start.includes,
                "take only paths matching this glob (repeatable; * also matches /)");
  c->add_option("--exclude", start.excludes, "leave out paths matching this glob (repeatable)");
  c->add_option("--auth-secret-name", start.auth_secret_name,
                "the secret (bdn secret set) holding the source's credentials");
  c->add_option("--endpoint", start.endpoint,
                "the object store's URL instead of the provider's (an S3-compatible store, an "
                "emulator); {bucket} in it asks for virtual-hosted addressing");
  c->add_option("--region", start.region,
                "the region S3 requests are signed for (default: the secret's, else us-east-1; "
                "auto for r2:// and gs://)");
  c->add_flag("--wait", start.wait,
              "with --remote: wait for the job, showing progress, and print the pinned ref "
              "(embedded, the job always runs in this process)");
  c->add_option("--retry-deadline", start_args->retry_deadline,
                "fail the job once the source has failed transiently this long (1s to 24h)")
      ->capture_default_str();
  c->callback([&inv, start_args] {
    // An embedded sync of 1 GiB from s3rver: 4.4 CPU-s with glibc's defaults, 3.7-3.9 keeping
    // 128 MiB (docs/benchmarks.md, "Sync from S3"); peak RSS of sync_s3_large_test 136 -> 200 MiB.
    inv.keep_freed_bytes = size_t{128} << 20;
    inv.huge_page_heap = true;
    inv.needs = bdn::app::Needs::kStoreCreated;
    inv.check = [start_args]() -> bdn::Status {
      // Before the embedded store is made (a sync makes it), as the job would say it.
      auto deadline = bdn::ParseDuration(start_args->retry_deadline, std::chrono::seconds(1),
                                         std::chrono::hours(24));
      if (!deadline) return deadline.error().WithPrefix("--retry-deadline");
      start_args->start.retry_deadline = *deadline;
      return bdn::cli::CheckSyncStartArgs(start_args->start);
    };
    inv.run = [start_args](bdn::cli::Context& ctx) {
      return bdn::cli::SyncStart(ctx, start_args->start);
    };
  });

  auto describe_id = std::make_shared<std::string>();
  c = sync->add_subcommand("describe", "show a sync job: state, progress, version or error");
  c->add_option("ID", *describe_id, "job id (sync_<hex>)")->required();
  c->callback([&inv, describe_id] {
    inv.run = [describe_id](bdn::cli::Context& ctx) {
      return bdn::cli::SyncDescribe(ctx, *describe_id);
    };
  });

  auto list_dest = std::make_shared<std::string>();
  c = sync->add_subcommand("list", "list sync jobs, newest first");
  c->add_option("--dest", *list_dest, "only jobs into bdn:<namespace>[/<volume>]");
  c->callback([&inv, list_dest] {
    inv.run = [list_dest](bdn::cli::Context& ctx) { return bdn::cli::SyncList(ctx, *list_dest); };
  });

  struct CancelArgs {
    std::string id;
    bool wait = false;
  };
  auto cancel = std::make_shared<CancelArgs>();
  c = sync->add_subcommand("cancel", "stop a sync job (it ends CANCELED)");
  c->add_option("ID", cancel->id, "job id (sync_<hex>)")->required();
  c->add_flag("--wait", cancel->wait, "wait until the job has stopped");
  c->callback([&inv, cancel] {
    inv.writes = true;
    inv.run = [cancel](bdn::cli::Context& ctx) {
      return bdn::cli::SyncCancel(ctx, cancel->id, cancel->wait);
    };
  });
}

void AddSecretFlags(CLI::App& app, Invocation& inv) {
  auto* secret = app.add_subcommand(
      "secret", "credentials for sync sources (embedded, or on the origin with --remote)");
  secret->require_subcommand(1);
  secret->fallthrough();
  struct SetArgs {
    std::string name;
    std::vector<std::string> namespaces;
  };
  auto set = std::make_shared<SetArgs>();
  auto* c = secret->add_subcommand("set", "store a secret; the value is read from stdin");
  c->add_option("NAME", set->name, "the secret's name, as sync jobs name it")->required();
  c->add_option("--namespace", set->namespaces,
                "a namespace whose jobs may use the secret on a server, or \"*\" for all "
                "(repeatable, or comma-separated; none: only jobs of admin keys for \"*\")")
      ->delimiter(',');
  c->callback([&inv, set] {
    inv.needs = bdn::app::Needs::kStoreCreated;
    inv.run = [set](bdn::cli::Context& ctx) {
      return bdn::cli::SecretSet(ctx, set->name, set->namespaces);
    };
  });
  c = secret->add_subcommand("ls", "list secrets: names, times and namespaces, never values");
  c->callback(
      [&inv] { inv.run = [](bdn::cli::Context& ctx) { return bdn::cli::SecretList(ctx); }; });
  auto rm_name = std::make_shared<std::string>();
  c = secret->add_subcommand("rm", "remove a secret");
  c->add_option("NAME", *rm_name, "the secret's name")->required();
  c->callback([&inv, rm_name] {
    inv.writes = true;
    inv.run = [rm_name](bdn::cli::Context& ctx) { return bdn::cli::SecretRemove(ctx, *rm_name); };
  });
}

}  // namespace bdn::app
