#!/usr/bin/env bash
# scripts/cluster.sh: `up` starts PostgreSQL, s3rver, two origins, HAProxy and a cache node and
# prints the load balancer's URL and the env lines; a small file pushed through it (with those
# lines) pulls back the same bytes (cmp) and lands as a pack in s3rver's bucket; `status` says
# what runs; `down` stops every process it started (each pid gone, no port answering) and
# `status` then says so.
source "$(dirname "$0")/lib.sh"
unset BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
CLUSTER="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster.sh"
for need in /usr/sbin/haproxy "$(dirname "$0")/../npm/node_modules/s3rver/bin/s3rver.js"; do
  if [ ! -e "$need" ]; then echo "SKIP: $need is missing (scripts/setup.sh); $TEST_NAME needs it"; exit 77; fi
done
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
  echo "SKIP: PostgreSQL is not installed (scripts/setup.sh); $TEST_NAME needs it"
  exit 77
fi

# The state directory lies outside $WORK (which only its owner may enter): PostgreSQL runs as the
# postgres OS user when this runs as root. lib.sh's cleanup stops that PostgreSQL (PG_DIR) and
# kills the other processes (PIDS) should the test fail before `down`.
STATE=$(mktemp -d "/tmp/bdn-cluster-script.XXXXXX")
chmod 755 "$STATE"
export BDN_CLUSTER_DIR="$STATE"

step "cluster.sh up"
BDN="$BDN" "$CLUSTER" up >"$WORK/up.out" 2>"$WORK/up.err" || fail "cluster.sh up: $(cat "$WORK/up.out" "$WORK/up.err")"
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && PG_BIN=$d; done
PG_DIR="$STATE/postgres"
started=()
for n in s3rver origin-a origin-b haproxy cache-node; do
  [ -f "$STATE/$n.pid" ] || fail "no pid file for $n: $(cat "$WORK/up.err")"
  started+=("$(cat "$STATE/$n.pid")")
  PIDS+=("$(cat "$STATE/$n.pid")")
done
cat "$WORK/up.out"
source "$STATE/ports.env"
assert_eq "load balancer: http://127.0.0.1:$LB_PORT" "$(sed -n 1p "$WORK/up.out")" "first line of up"
assert_eq "admin token:   $STATE/admin.token" "$(sed -n 2p "$WORK/up.out")" "second line of up"
assert_contains "$(cat "$WORK/up.out")" "export BDN_REMOTE=http://127.0.0.1:$LB_PORT"
assert_contains "$(cat "$WORK/up.out")" "export BDN_CLUSTER_CACHE=http://127.0.0.1:$CACHE_PORT"
BDN="$BDN" "$CLUSTER" status >"$WORK/status.out"
assert_eq "6 of 6 running; state in $STATE" "$(tail -n 1 "$WORK/status.out")" "status after up ($(cat "$WORK/status.out"))"
assert_contains "$(cat "$WORK/status.out")" "haproxy     running  http://127.0.0.1:$LB_PORT (pid ${started[3]}) healthy"

step "push and pull one small file through the load balancer"
mkdir -p "$WORK/src"
random_file "$WORK/src/weights.bin" 200000 7
ref=$(source "$STATE/env" && "$BDN" volume push "$WORK/src" bdn:try/small)
[[ "$ref" =~ ^bdn:try/small@b3:[0-9a-f]{64}$ ]] || fail "push printed [$ref]"
(source "$STATE/env" && "$BDN" volume pull "$ref" "$WORK/pull" >/dev/null) || fail "pull through the cluster"
cmp "$WORK/src/weights.bin" "$WORK/pull/weights.bin" || fail "weights.bin pulled through the cluster"
packs=$(find "$STATE/s3rver/bdn" -name '*.pack*' | wc -l)
[ "$packs" -ge 1 ] || fail "no pack in s3rver's bucket: $(find "$STATE/s3rver")"

step "cluster.sh down stops everything"
BDN="$BDN" "$CLUSTER" down 2>"$WORK/down.err" || fail "cluster.sh down: $(cat "$WORK/down.err")"
for p in "${started[@]}"; do wait_gone "$p" 1000; untrack "$p"; done
for port in "$PG_PORT" "$S3_PORT" "$ORIGIN_A_PORT" "$ORIGIN_B_PORT" "$LB_PORT" "$CACHE_PORT"; do
  if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' "$port" 2>/dev/null; then
    fail "port $port still answers after down"
  fi
done
[ ! -e "$STATE/postgres/data/postmaster.pid" ] || fail "PostgreSQL's postmaster.pid is still there"
rc=0
BDN="$BDN" "$CLUSTER" status >"$WORK/status.out" || rc=$?
assert_eq 0 "$rc" "exit code of status after down"
assert_eq "0 of 6 running; state in $STATE" "$(tail -n 1 "$WORK/status.out")" "status after down"
PG_DIR=""
rm -rf "$STATE"
echo "PASS"
