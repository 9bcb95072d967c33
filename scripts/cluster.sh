#!/usr/bin/env bash
# A scaled-out bdn on this machine, for trying it (README, "Scaled out"): PostgreSQL (Debian's
# postgresql), s3rver (tests/npm, pinned by its package-lock.json; scripts/setup.sh installs it),
# two `bdn serve --db … --store s3://…` origins, HAProxy (Debian's haproxy) in front of them
# (round-robin, health-checked on GET /healthz) and one cache node (`bdn cache serve`), all on
# 127.0.0.1, everything under one state directory.
#
#   scripts/cluster.sh up       start what is not running; prints the load balancer's URL, the
#                               admin token file and the lines that point bdn at it
#   scripts/cluster.sh down     stop everything it started (its pid files); the data stays
#   scripts/cluster.sh status   what runs, and whether it answers
#   scripts/cluster.sh haproxy-cfg LB_PORT STATS_PORT CHECK_INTERVAL HOST:PORT...
#                               print the HAProxy configuration it uses (the tests use it too)
#
# State directory: $BDN_CLUSTER_DIR, default work/cluster in the repository (ports in ports.env,
# a pid file and a log per process, each component's data). The bdn binary: $BDN, default
# build/apps/bdn/bdn, else `bdn` on PATH. Ports are chosen free at the first `up` and kept.
# When run as root, PostgreSQL runs as Debian's postgres user, which must be able to reach the
# state directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${BDN_CLUSTER_DIR:-$ROOT/work/cluster}"
BUCKET=bdn
# s3rver's own key pair (it checks requests' SigV4 signatures against it).
S3_KEY=S3RVER
S3_SECRET=S3RVER

die() { echo "cluster: error: $*" >&2; exit 1; }
say() { echo "cluster: $*" >&2; }

find_bdn() {
  if [ -n "${BDN:-}" ]; then
    [ -x "$BDN" ] || die "BDN=$BDN is not an executable"
  elif [ -x "$ROOT/build/apps/bdn/bdn" ]; then
    BDN="$ROOT/build/apps/bdn/bdn"
  elif command -v bdn >/dev/null; then
    BDN=$(command -v bdn)
  else
    die "no bdn binary: build it (scripts/build.sh) or set BDN"
  fi
}

find_pg() {
  PG_BIN=""
  local d
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && PG_BIN=$d; done
  [ -n "$PG_BIN" ] || die "PostgreSQL is not installed (Debian package postgresql: scripts/setup.sh)"
}

# pg_as CMD...: as the postgres OS user when root (PostgreSQL refuses to run as root).
pg_as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# alive NAME: the process of $STATE/NAME.pid runs, and its command line names the state
# directory (so a pid reused by another program is never taken for ours).
alive() {
  local pid
  [ -f "$STATE/$1.pid" ] || return 1
  pid=$(cat "$STATE/$1.pid")
  [ -r "/proc/$pid/cmdline" ] || return 1
  [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" == *"$STATE"* ]]
}

pg_running() { [ -n "${PG_BIN:-}" ] && [ -f "$STATE/postgres/data/postmaster.pid" ] && pg_as "$PG_BIN/pg_ctl" -D "$STATE/postgres/data" status >/dev/null 2>&1; }

# spawn NAME CMD...: CMD in its own session, detached from this shell, output in $STATE/NAME.log,
# its pid in $STATE/NAME.pid.
spawn() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

# wait_http NAME URL: until URL answers 200 (at most 30 s) while NAME runs.
wait_http() {
  for _ in $(seq 1 300); do
    curl -sf -o /dev/null "$2" && return 0
    alive "$1" || die "$1 exited: $(tail -n 20 "$STATE/$1.log")"
    sleep 0.1
  done
  die "$1 does not answer $2: $(tail -n 20 "$STATE/$1.log")"
}

# haproxy_cfg LB_PORT STATS_PORT CHECK_INTERVAL ORIGIN...: HAProxy's configuration: 127.0.0.1:LB_PORT
# balances requests round-robin over the ORIGINs (HOST:PORT, named a, b, ... in the stats), each
# checked with GET /healthz every CHECK_INTERVAL (down after 2 failed checks, up after 1 good);
# a request whose connection to a dead origin fails is sent to another one (redispatch); the
# stats page (CSV: /stats;csv) on 127.0.0.1:STATS_PORT.
haproxy_cfg() {
  local lb=$1 stats=$2 inter=$3 names=(a b c d e f g h) i=0 o; shift 3
  cat <<EOF
# written by scripts/cluster.sh
global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 2
  option redispatch
frontend bdn
  bind 127.0.0.1:$lb
  default_backend origins
backend origins
  balance roundrobin
  option httpchk GET /healthz
  http-check expect status 200
  default-server inter $inter fall 2 rise 1
EOF
  for o in "$@"; do echo "  server ${names[$i]} $o check"; i=$((i + 1)); done
  cat <<EOF
listen stats
  bind 127.0.0.1:$stats
  stats enable
  stats uri /stats
EOF
}

load_ports() {
  if [ ! -f "$STATE/ports.env" ]; then
    {
      echo "PG_PORT=$(free_port)"
      echo "S3_PORT=$(free_port)"
      echo "ORIGIN_A_PORT=$(free_port)"
      echo "ORIGIN_B_PORT=$(free_port)"
      echo "LB_PORT=$(free_port)"
      echo "LB_STATS_PORT=$(free_port)"
      echo "CACHE_PORT=$(free_port)"
    } >"$STATE/ports.env"
  fi
  # shellcheck disable=SC1091
  source "$STATE/ports.env"
  LB="http://127.0.0.1:$LB_PORT"
  DB="postgresql://postgres@127.0.0.1:$PG_PORT/bdn"
}

up() {
  find_bdn
  find_pg
  local haproxy=/usr/sbin/haproxy s3js="$ROOT/tests/npm/node_modules/s3rver/bin/s3rver.js"
  [ -x "$haproxy" ] || die "$haproxy is missing (Debian package haproxy: scripts/setup.sh)"
  [ -f "$s3js" ] || die "s3rver is not installed: run scripts/setup.sh (npm ci in tests/npm)"
  command -v node >/dev/null || die "node is missing (Debian package nodejs: scripts/setup.sh)"
  mkdir -p "$STATE"
  STATE="$(cd "$STATE" && pwd)"
  load_ports

  # PostgreSQL: its own cluster in $STATE/postgres, TCP on 127.0.0.1 only, trust authentication
  # (local trial: anyone on this machine can connect).
  if ! pg_running; then
    mkdir -p "$STATE/postgres"
    if [ "$(id -u)" = 0 ]; then
      id postgres >/dev/null 2>&1 || die "no postgres OS user (Debian's postgresql package creates it)"
      chown postgres: "$STATE/postgres"
      runuser -u postgres -- test -x "$STATE/postgres" ||
        die "the postgres OS user cannot reach $STATE: set BDN_CLUSTER_DIR to a directory it can traverse"
    fi
    if [ ! -f "$STATE/postgres/data/PG_VERSION" ]; then
      say "PostgreSQL: initdb in $STATE/postgres/data"
      pg_as "$PG_BIN/initdb" -D "$STATE/postgres/data" -U postgres --auth=trust -E UTF8 --locale=C \
        >"$STATE/postgres/initdb.log" 2>&1 || die "initdb failed: $(cat "$STATE/postgres/initdb.log")"
    fi
    pg_as "$PG_BIN/pg_ctl" -D "$STATE/postgres/data" -l "$STATE/postgres/log" -w -t 60 \
      -o "-p $PG_PORT -h 127.0.0.1 -c unix_socket_directories=''" start >/dev/null ||
      die "PostgreSQL did not start: $(tail -n 20 "$STATE/postgres/log")"
    say "PostgreSQL on 127.0.0.1:$PG_PORT"
  fi
  if [ -z "$("$PG_BIN/psql" -X -t -A -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres \
      -c "SELECT 1 FROM pg_database WHERE datname = 'bdn'")" ]; then
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE bdn" ||
      die "cannot create the database bdn"
  fi

  # s3rver with the bucket; its data in $STATE/s3rver. Node 17+ needs the legacy OpenSSL provider
  # for s3rver's paginated listings.
  if ! alive s3rver; then
    mkdir -p "$STATE/s3rver"
    spawn s3rver node --openssl-legacy-provider "$s3js" -d "$STATE/s3rver" -a 127.0.0.1 \
      -p "$S3_PORT" -s --no-vhost-buckets --configure-bucket "$BUCKET"
    for _ in $(seq 1 300); do
      python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$S3_PORT" 2>/dev/null && break
      alive s3rver || die "s3rver exited: $(tail -n 20 "$STATE/s3rver.log")"
      sleep 0.1
    done
    say "s3rver on http://127.0.0.1:$S3_PORT (bucket $BUCKET)"
  fi

  # Two origins over the one database and bucket.
  local r port
  for r in a b; do
    port=ORIGIN_${r^^}_PORT
    port=${!port}
    alive "origin-$r" && continue
    AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_SHARED_CREDENTIALS_FILE=/dev/null \
      spawn "origin-$r" "$BDN" serve --listen "127.0.0.1:$port" --data "$STATE/origin-$r" \
      --db "$DB" --store "s3://$BUCKET/cluster" --s3-endpoint "http://127.0.0.1:$S3_PORT" --s3-region us-east-1
  done
  for r in a b; do
    port=ORIGIN_${r^^}_PORT
    wait_http "origin-$r" "http://127.0.0.1:${!port}/healthz"
    say "origin $r on http://127.0.0.1:${!port}"
  done
  # Exactly one origin created the admin key (the first start only); keep a copy beside the state.
  if [ ! -f "$STATE/admin.token" ]; then
    for r in a b; do
      [ -f "$STATE/origin-$r/admin.token" ] && (umask 077 && cp "$STATE/origin-$r/admin.token" "$STATE/admin.token")
    done
    [ -f "$STATE/admin.token" ] || die "neither origin wrote admin.token (a database of another cluster?)"
  fi

  if ! alive haproxy; then
    haproxy_cfg "$LB_PORT" "$LB_STATS_PORT" 1s "127.0.0.1:$ORIGIN_A_PORT" "127.0.0.1:$ORIGIN_B_PORT" \
      >"$STATE/haproxy.cfg"
    "$haproxy" -c -q -f "$STATE/haproxy.cfg" || die "haproxy refused $STATE/haproxy.cfg"
    spawn haproxy "$haproxy" -db -f "$STATE/haproxy.cfg"
    wait_http haproxy "$LB/healthz"
    say "HAProxy on $LB (stats: http://127.0.0.1:$LB_STATS_PORT/stats)"
  fi

  # The cache node reads from the origins through HAProxy with its own key: pull on every
  # namespace (docs/http-api.md, "Cache nodes").
  if ! alive cache-node; then
    if [ ! -f "$STATE/cache-node.token" ]; then
      local key
      key=$(BDN_REMOTE="$LB" BDN_TOKEN="$(cat "$STATE/admin.token")" "$BDN" key create --namespace '*' --scope pull) ||
        die "cannot create the cache node's key"
      (umask 077 && printf '%s\n' "$key" >"$STATE/cache-node.token")
    fi
    BDN_TOKEN="$(cat "$STATE/cache-node.token")" spawn cache-node "$BDN" cache serve --upstream "$LB" \
      --listen "127.0.0.1:$CACHE_PORT" --cache-dir "$STATE/cache-node" --cache-size 2G
    wait_http cache-node "http://127.0.0.1:$CACHE_PORT/healthz"
    say "cache node on http://127.0.0.1:$CACHE_PORT"
  fi

  cat >"$STATE/env" <<EOF
export BDN_REMOTE=$LB
export BDN_TOKEN=\$(cat $STATE/admin.token)
export BDN_CLUSTER_CACHE=http://127.0.0.1:$CACHE_PORT
EOF
  echo "load balancer: $LB"
  echo "admin token:   $STATE/admin.token"
  echo "to use it (or: source $STATE/env):"
  cat "$STATE/env"
}

# stop NAME: SIGTERM, then SIGKILL after 10 s; removes the pid file.
stop() {
  local pid
  if alive "$1"; then
    pid=$(cat "$STATE/$1.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      [ -d "/proc/$pid" ] || break
      [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
      say "$1 (pid $pid) did not stop within 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped $1 (pid $pid)"
  fi
  rm -f "$STATE/$1.pid"
}

down() {
  [ -d "$STATE" ] || { say "nothing to stop: no $STATE"; return 0; }
  STATE="$(cd "$STATE" && pwd)"
  local n
  for n in cache-node haproxy origin-a origin-b s3rver; do stop "$n"; done
  find_pg
  if pg_running; then
    pg_as "$PG_BIN/pg_ctl" -D "$STATE/postgres/data" -m fast -w -t 60 stop >/dev/null || die "pg_ctl stop failed"
    say "stopped PostgreSQL"
  fi
}

status() {
  [ -d "$STATE" ] || { echo "no cluster: $STATE does not exist"; return 3; }
  STATE="$(cd "$STATE" && pwd)"
  [ -f "$STATE/ports.env" ] || { echo "no cluster: $STATE/ports.env does not exist"; return 3; }
  load_ports
  find_pg
  local n running=0 url
  if pg_running; then echo "postgres    running  127.0.0.1:$PG_PORT"; running=$((running + 1))
  else echo "postgres    stopped"; fi
  for n in s3rver origin-a origin-b haproxy cache-node; do
    case $n in
      s3rver) url="http://127.0.0.1:$S3_PORT" ;;
      origin-a) url="http://127.0.0.1:$ORIGIN_A_PORT" ;;
      origin-b) url="http://127.0.0.1:$ORIGIN_B_PORT" ;;
      haproxy) url=$LB ;;
      cache-node) url="http://127.0.0.1:$CACHE_PORT" ;;
    esac
    if alive "$n"; then
      local health=""
      [ "$n" != s3rver ] && { curl -sf -o /dev/null "$url/healthz" && health=" healthy" || health=" not answering /healthz"; }
      printf '%-11s running  %s (pid %s)%s\n' "$n" "$url" "$(cat "$STATE/$n.pid")" "$health"
      running=$((running + 1))
    else
      printf '%-11s stopped\n' "$n"
    fi
  done
  echo "$running of 6 running; state in $STATE"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  haproxy-cfg) shift; haproxy_cfg "$@" ;;  # for tests/integration/cluster_ha_test.sh
  *) echo "usage: $0 up|down|status   (state: \$BDN_CLUSTER_DIR, default work/cluster)" >&2; exit 2 ;;
esac
