// Flags of the server commands: `bdn serve`, `bdn cache serve` (cli/serve.h) and
// `bdn key create|ls|revoke` (cli/keys.h). Each command's flag values land in its own options
// struct, owned by the command's callback.
#include <memory>
#include <string>

#include "bdn/cli/keys.h"
#include "bdn/cli/serve.h"
#include "flags.h"

namespace bdn::app {
namespace {

// The value of a global option of `app` (given or from its environment variable), or "".
std::string GlobalOption(CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  return opt && opt->count() > 0 ? opt->as<std::string>() : std::string();
}

void AddHttpServerFlags(CLI::App* c, cli::HttpServerArgs& a) {
  c->add_option("--listen", a.listen, "HOST:PORT to listen on; port 0 picks a free one")
      ->capture_default_str();
  c->add_option("--metrics-listen", a.metrics_listen,
                "serve GET /metrics only on this HOST:PORT (e.g. an internal interface) instead "
                "of on --listen");
  c->add_option("--threads", a.threads, "worker threads that run requests (disk, hashing)")
      ->capture_default_str();
  c->add_option("--io-threads", a.io_threads,
                "threads that own the connections; 0: one per core, 1 to 4")
      ->capture_default_str();
  c->add_option("--header-timeout", a.header_timeout,
                "a request line and header must arrive within this, else the connection closes")
      ->capture_default_str();
  c->add_option("--idle-timeout", a.idle_timeout,
                "a keep-alive connection idle this long between requests is closed")
      ->capture_default_str();
  c->add_option("--write-timeout", a.write_timeout,
                "each write of a response must complete within this (a client that stops "
                "reading is dropped)")
      ->capture_default_str();
  c->add_option("--min-body-rate", a.min_body_rate,
                "request bodies must arrive at this average rate per second at least (after a "
                "grace of --header-timeout), e.g. 1K")
      ->capture_default_str();
  c->add_option("--max-connections", a.max_connections,
                "connections open at once; more get 503 with Retry-After")
      ->capture_default_str();
  c->add_option("--max-connections-per-client", a.max_connections_per_client,
                "connections open at once from one IP address; more get 503 with Retry-After")
      ->capture_default_str();
  c->add_option("--max-header-size", a.max_header_size,
                "request line plus header fields; larger gets 414 or 431")
      ->capture_default_str();
  c->add_option("--batch-readahead", a.batch_readahead,
                "chunks that batch responses read ahead of their clients, server-wide")
      ->capture_default_str();
  c->add_option("--log-level", a.log_level,
                "debug, info (an access line per request), warn, error or off")
      ->capture_default_str();
  c->add_option("--log-file", a.log_file, "append the log to this file instead of stderr");
}

}  // namespace

void AddServerFlags(CLI::App& app, Invocation& inv) {
  auto serve = std::make_shared<cli::ServeArgs>();
  auto* c = app.add_subcommand("serve", "run the origin server (docs/http-api.md)");
  AddHttpServerFlags(c, serve->http);
  c->add_option("--data", serve->data, "data directory (default $BDN_HOME/server)");
  c->add_option("--store", serve->store,
                "keep chunks in packs in an S3-compatible object store: s3://bucket[/prefix] "
                "(credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                "~/.aws/credentials); default: <data>/store");
  c->add_option("--s3-endpoint", serve->s3_endpoint,
                "the object store's URL, http(s)://host[:port] (MinIO, Ceph RGW, R2, s3rver); "
                "default: AWS S3");
  c->add_option("--s3-region", serve->s3_region, "the bucket's region (signs requests)")
      ->capture_default_str();
  c->add_option("--idle-seal", serve->idle_seal,
                "with --store s3://: upload an open spool pack no writer has touched for this "
                "long (10ms to 1m; default 500ms)");
  c->add_option("--commit-wait", serve->commit_wait,
                "with --store s3://: a commit whose blobs are not all in the object store looks "
                "for other replicas' packs this long before it answers 412 (0s to 1m; default "
                "3s)");
  c->add_flag("--insecure-no-auth", serve->insecure_no_auth,
              "disable authentication (local experiments only)");
  c->add_option("--claim-ttl", serve->claim_ttl,
                "push claims lapse unless renewed within this duration (100ms to 24h; e.g. "
                "30s, 2m)")
      ->capture_default_str();
  c->add_option("--retention", serve->retention,
                "how long a deleted version stays restorable (0s to 3650d, e.g. 7d, 12h)")
      ->capture_default_str();
  c->add_option("--gc-interval", serve->gc_interval,
                "run garbage collection this often (0s: never; e.g. 1h, 30m)")
      ->capture_default_str();
  c->add_option("--gc-grace", serve->gc_grace,
                "how long doomed packs stay readable before a GC deletes them (0s to 24h)")
      ->capture_default_str();
  c->add_option("--gc-max-repack-fraction", serve->gc_max_repack_fraction,
                "repack a pack whose needed bytes are below this fraction of it (0 to 1)")
      ->capture_default_str();
  c->add_option("--sync-runners", serve->sync_runners, "sync jobs that run at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c->add_option("--sync-runners-per-namespace", serve->sync_runners_per_namespace,
                "sync jobs of one namespace that run at once, at most (1 to 64, taken as at most "
                "--sync-runners); a namespace's further jobs stay PENDING while other namespaces' "
                "jobs run (default: half of --sync-runners, at least 1)")
      ->check(CLI::Range(1, 64));
  c->add_option("--sync-max-unfinished-per-namespace", serve->sync_max_unfinished_per_namespace,
                "sync jobs one namespace may have PENDING or SYNCING; a new one past it is "
                "refused (409) until some end (1 to 100000)")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  c->add_option("--sync-job-retention", serve->sync_job_retention,
                "finished sync jobs (READY, FAILED, CANCELED) are deleted this long after they "
                "end (0: kept forever; else 1m to 3650d)")
      ->capture_default_str();
  c->add_option("--sync-min-source-rate", serve->sync_min_source_rate,
                "a sync source's object body arriving slower than this many bytes per second "
                "for --sync-source-stall-time fails as stalled and is resumed (0: only one that "
                "moves no byte)")
      ->capture_default_str();
  c->add_option("--sync-source-stall-time", serve->sync_source_stall_time,
                "how long a sync source's body may stay below --sync-min-source-rate (1s to 1h)")
      ->capture_default_str();
  c->add_option("--sync-file-root", serve->sync_file_roots,
                "a directory whose files sync jobs may read as file:// sources (repeatable; "
                "none: file:// sources are refused; never the data directory)");
  c->add_flag("--sync-allow-private-addresses", serve->sync_allow_private_addresses,
              "let sync jobs reach loopback, private and link-local addresses (by default "
              "http(s) sources and endpoints must be public)");
  c->add_option("--db", serve->db,
                "keep the registry, keys, sync jobs, secrets and push claims in PostgreSQL "
                "(postgresql://user@host:5432/dbname; the password in PGPASSWORD or ~/.pgpass) "
                "instead of <data>/registry.db; replicas given the same URL share them")
      ->envname("BDN_DB");
  c->add_option("--db-connections", serve->db_connections,
                "connections to --db this server keeps at most")
      ->capture_default_str();
  c->add_option("--secrets-key-file", serve->secrets_key_file,
                "the 32-byte key that seals sync secrets (the same file on every replica; "
                "never created by the server); default <data>/secrets.key, and with --db none")
      ->envname("BDN_SECRETS_KEY_FILE");
  c->callback([&app, &inv, serve] {
    inv.huge_page_heap = true;
    inv.run_standalone = [&app, serve] { return cli::Serve(*serve, GlobalOption(app, "--home")); };
  });

  auto cache_serve = std::make_shared<cli::CacheServeArgs>();
  auto* cache = app.add_subcommand("cache", "in-cluster cache node");
  cache->require_subcommand(1);
  cache->fallthrough();
  c = cache->add_subcommand("serve", "serve chunks from a bounded disk cache over an origin");
  c->add_option("--upstream", cache_serve->upstream, "origin URL (bdn serve)")->required();
  AddHttpServerFlags(c, cache_serve->http);
  c->add_option("--cache-dir", cache_serve->cache_dir, "default $BDN_HOME/cache-node");
  c->add_option("--cache-size", cache_serve->cache_size, "bound of the disk cache")
      ->capture_default_str();
  c->add_option("--peers", cache_serve->peers,
                "URL,URL,...: every cache node of this cluster, this one included, as clients "
                "reach them; told to clients (GET /v1/peers), which then read each chunk from "
                "its owner among them, so the cluster fetches it from the origin once")
      ->check(NotEmpty());
  c->callback([&app, &inv, cache_serve] {
    inv.huge_page_heap = true;
    inv.run_standalone = [&app, cache_serve] {
      return cli::CacheServe(*cache_serve, GlobalOption(app, "--home"));
    };
  });

  auto* key =
      app.add_subcommand("key", "manage API keys on the origin (--remote/BDN_REMOTE, BDN_TOKEN)");
  key->require_subcommand(1);
  key->fallthrough();
  auto create = std::make_shared<cli::KeyCreateArgs>();
  c = key->add_subcommand("create", "create a key; prints its token once");
  c->add_option("--namespace", create->ns, "a namespace, or \"*\" for all")->required();
  c->add_option("--scope", create->scopes, "comma-separated: pull,push,tag,admin")->required();
  c->callback([&inv, create] {
    inv.needs = Needs::kOrigin;
    inv.run = [create](cli::Context& ctx) { return cli::KeyCreate(ctx, *create); };
  });
  c = key->add_subcommand("ls", "list keys (never their tokens)");
  c->callback([&inv] {
    inv.needs = Needs::kOrigin;
    inv.run = [](cli::Context& ctx) { return cli::KeyList(ctx); };
  });
  auto revoke_id = std::make_shared<std::string>();
  c = key->add_subcommand("revoke", "revoke a key at once");
  c->add_option("ID", *revoke_id, "key id (bdn_<id> or <id>)")->required();
  c->callback([&inv, revoke_id] {
    inv.needs = Needs::kOrigin;
    inv.run = [revoke_id](cli::Context& ctx) { return cli::KeyRevoke(ctx, *revoke_id); };
  });
}

}  // namespace bdn::app
