#!/usr/bin/env bash
# The object pack store's index against s3rver (tests/npm) and, for comparison, the same lookups
# as a PostgreSQL table (Debian's postgresql-15, a throwaway cluster on a Unix socket): what a
# lookup, a cold open and finding another replica's pack cost with per-pack footers plus local
# index tables, against one query per batch of 64 ids on a table of the same blobs.
# Usage: bench/objstore_index.sh [WORKDIR]   PACKS (default 2000), PER_PACK (default 64),
# PG_SECONDS (how long pgbench runs, default 10).
# Prints the measurements to stdout (for docs/benchmarks.md; not yet measured at full size).
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bin=${OBJSTORE_INDEX:-$repo/build/bench/objstore_index}
work=${1:-/tmp/bdn-objstore-index-bench}
packs=${PACKS:-2000}
per_pack=${PER_PACK:-64}
pg_seconds=${PG_SECONDS:-10}
pids=()
# PostgreSQL refuses to run as root: as root, its commands run as Debian's postgres user.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
trap 'for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; [ -n "${pgdata:-}" ] && as_pg /usr/lib/postgresql/15/bin/pg_ctl -D "$pgdata" -m immediate stop >/dev/null 2>&1; release_workdir; true' EXIT
claim_workdir "$work"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/s3rver"
node --openssl-legacy-provider "$repo/tests/npm/node_modules/s3rver/bin/s3rver.js" -d "$work/s3rver" \
  -a 127.0.0.1 -p "$port" -s --allow-mismatched-signatures --no-vhost-buckets >"$work/s3rver.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
curl -sf -X PUT "http://127.0.0.1:$port/index-bench" >/dev/null
echo "## footers + local index tables (s3rver on 127.0.0.1, $packs packs of $per_pack blobs)"
AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER "$bin" --endpoint "http://127.0.0.1:$port" \
  --bucket index-bench --packs "$packs" --blobs-per-pack "$per_pack" --dir "$work/store"

echo "## the same lookups as a PostgreSQL 15 table (one query per batch of 64 ids)"
pg="$work/pg"  # the cluster, its socket and its log, owned by whoever runs PostgreSQL
mkdir -p "$pg"
[ "$(id -u)" = 0 ] && chown postgres: "$pg"
pgdata="$pg/data"
as_pg /usr/lib/postgresql/15/bin/initdb -D "$pgdata" -A trust -U bench >/dev/null
as_pg /usr/lib/postgresql/15/bin/pg_ctl -D "$pgdata" -o "-k $pg -c listen_addresses=''" -l "$pg/log" start >/dev/null
psql_() { psql -h "$pg" -U bench -d postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
blobs=$((packs * per_pack))
psql_ -c "CREATE TABLE pack_blobs (digest bytea PRIMARY KEY, pack bigint NOT NULL, record_offset bigint NOT NULL, stored bigint NOT NULL, raw bigint NOT NULL, codec smallint NOT NULL);
  INSERT INTO pack_blobs SELECT decode(md5(i::text) || md5((-i)::text), 'hex'), i / $per_pack, 16 + (i % $per_pack) * 4160, 4096, 4096, 0 FROM generate_series(1, $blobs) i;
  ANALYZE pack_blobs;"
cat >"$work/lookup.sql" <<SQL
\set base random(1, $((blobs > 64 ? blobs - 64 : 1)))
SELECT pack, record_offset, stored, raw, codec FROM pack_blobs WHERE digest = ANY (ARRAY(SELECT decode(md5(i::text) || md5((-i)::text), 'hex') FROM generate_series(:base, :base + 63) i));
SQL
pgbench -h "$pg" -U bench -n -f "$work/lookup.sql" -c 1 -T "$pg_seconds" postgres 2>/dev/null | grep -E "latency average|tps"
