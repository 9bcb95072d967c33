// The server commands: `bdn serve` (the origin over embedded storage) and `bdn cache serve` (an
// in-cluster cache node over an origin). Each runs until one of the stop signals (StopSignals,
// base/signals.h: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, ...), logs
// "SIGHUP: shutting down" naming it, stops cleanly and returns Ok (exit 0).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bdn/base/status.h"

namespace bdn::cli {

// The flags every HTTP server command shares, as given (texts are parsed by the command, so that
// its errors name the flag): the address, the threads, and the limits and deadlines of
// docs/http-api.md, "Limits and deadlines".
struct HttpServerArgs {
  std::string listen;          // HOST:PORT; port 0 picks a free one
  std::string metrics_listen;  // "": /metrics on `listen`
  int threads = 64;
  int io_threads = 0;  // 0: one per core, 1 to 4
  std::string header_timeout = "10s";
  std::string idle_timeout = "60s";
  std::string write_timeout = "30s";
  std::string min_body_rate = "1K";
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;
  std::string max_header_size = "8K";
  std::string batch_readahead = "256M";
  std::string log_level = "info";  // log::ParseLevel
  std::string log_file;            // "": stderr
};

struct ServeArgs {
  HttpServerArgs http{.listen = "127.0.0.1:8440"};
  std::string data;  // "": <home>/server
  // Where chunks live: "" for the pack store in <data>/store; "s3://bucket[/prefix]" for packs
  // in an S3-compatible object store (docs/format.md, "Packs in an object store"; its local
  // spool and index in <data>/objstore), reached at `s3_endpoint` ("": AWS S3 in `s3_region`)
  // with the standard AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
  // AWS_SESSION_TOKEN, or the shared credentials file), never a flag.
  std::string store;
  std::string s3_endpoint;
  std::string s3_region = "us-east-1";
  // With --store s3:// only ("" elsewhere: the defaults). idle_seal: an open spool pack no
  // writer has touched this long is sealed and uploaded (ObjectPackStoreOptions::idle_seal;
  // 10ms to 1m). commit_wait: how long a commit whose blobs are not all in the object store looks
  // again for packs other replicas upload before it answers 412 (OriginOptions::commit_wait; 0s
  // to 1m).
  std::string idle_seal;
  std::string commit_wait;
  bool insecure_no_auth = false;
  std::string claim_ttl = "30s";
  std::string retention = "7d";  // deleted versions stay restorable this long
  int sync_runners = 2;          // sync jobs run at once
  // Sync jobs of one namespace run at once, at most (sync::SchedulerOptions); 0: max(1,
  // sync_runners / 2).
  int sync_runners_per_namespace = 0;
  // New sync jobs into a namespace that has this many PENDING or SYNCING are refused (409).
  int sync_max_unfinished_per_namespace = 100;
  // Finished sync jobs (READY, FAILED, CANCELED) are deleted this long after they end
  // (sync::SchedulerOptions::job_retention); "0": kept forever.
  std::string sync_job_retention = "30d";
  // The slowest a sync source's object body may arrive (sync::SourceOptions): a transfer below
  // sync_min_source_rate bytes per second ("0": only one that moves no byte) for
  // sync_source_stall_time fails as stalled and is resumed within the job's retry deadline.
  std::string sync_min_source_rate = "16K";
  std::string sync_source_stall_time = "60s";
  // What sync jobs may read (docs/sync.md, "Sources on a server"): file:// sources only under
  // these directories (none: file:// is refused), never in the data directory; http(s) sources
  // and --endpoint hosts only at public addresses unless sync_allow_private_addresses.
  std::vector<std::string> sync_file_roots;
  bool sync_allow_private_addresses = false;
  // Periodic garbage collection (RunGc) in the server: every gc_interval ("0s": never), with
  // gc_grace between the doom and the sweep, repacking packs needed below the fraction.
  std::string gc_interval = "1h";
  std::string gc_grace = "10m";
  double gc_max_repack_fraction = 0.5;
  // The metadata (registry, keys, sync jobs, secrets, push claims) in PostgreSQL instead of
  // <data>/registry.db: a libpq URL ("postgresql://user@host:5432/bdn"; "": SQLite). Replicas
  // given the same URL serve one registry (docs/postgresql.md).
  std::string db;
  int db_connections = 16;  // the pool of connections to --db
  // The AES-256 key that seals sync secrets: a file of 32 bytes, never created by the server
  // (replicas must share one). "": <data>/secrets.key, created at first use, and with --db no
  // secrets at all.
  std::string secrets_key_file;
};

// bdn serve: binds the address, then takes the data directory (created private, 0700; locked
// against a second server), opens its store (the local pack store, or packs in an object store
// with --store s3://), registry and key table (with --db: connects to
// PostgreSQL and applies its migrations instead, and keeps push claims there), creates the first
// admin key (printed once and written to <data>/admin.token, 0600) unless keys exist or auth is
// off (with --db: by exactly one of the replicas starting at once), and serves until
// a stop signal, collecting garbage every --gc-interval on its own thread (bdn_gc_* metrics;
// with --db a run is skipped while another replica's holds the database lock "gc").
// `home` is the --home flag ("": DefaultHome()).
// Errors: InvalidArgument naming the flag for a malformed value ("--claim-ttl: duration ...",
// "--sync-file-root \"D\": not a directory", "--sync-file-root \"D\": inside the data
// directory ..."); NotFound "--sync-file-root \"D\": No such file or directory";
// Unavailable "listen H:P: cannot bind ..." (nothing is created then); FailedPrecondition
// "--data D: in use by another bdn serve (pid N); ..."; InvalidArgument "--db: ..." for a
// malformed URL; Unavailable "database postgresql://...: cannot connect: ..."; InvalidArgument
// "--store \"x\": ..." and "--s3-endpoint: needs --store s3://..." (also --idle-seal,
// --commit-wait); those of finding AWS
// credentials (objstore::AwsCredentialsFromEnvironment) and of opening
// the store, registry and key store, and of the migrations. Not thread-safe (one per process: it
// blocks the stop signals in every thread).
Status Serve(const ServeArgs& args, const std::string& home);

struct CacheServeArgs {
  std::string upstream;  // the origin URL; required
  HttpServerArgs http{.listen = "127.0.0.1:8441"};
  std::string cache_dir;  // "": <home>/cache-node
  std::string cache_size = "10G";
  // --peers "URL,URL,...": every cache node of this node's cluster, this one included, as clients
  // reach them, answered to GET /v1/peers (remote::DiscoverPeers); empty: none.
  std::string peers;
};

// bdn cache serve: serves chunk GET and batch from a NodeCache over the origin `upstream`
// (BDN_TOKEN, if set, authenticates it there): each chunk is fetched from the origin once
// (concurrent misses share one fetch) and kept on disk within --cache-size; bdn_cache_* metrics.
// Errors: InvalidArgument for a missing --upstream or a malformed value; Unavailable when the
// address cannot be bound; those of NodeCache::Open. Not thread-safe, as Serve.
Status CacheServe(const CacheServeArgs& args, const std::string& home);

}  // namespace bdn::cli
