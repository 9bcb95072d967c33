#!/usr/bin/env bash
# A local scaled-out bdn deployment for trying it (README, "Scaled out"; SPEC §7), on 127.0.0.1
# with free ports:
#   PostgreSQL (Debian's, initdb'd here)      the registry, keys and push claims (--db)
#   s3rver (tests/npm, pinned)                the packs (--store s3://bdn/cluster)
#   two `bdn serve` origins over both         stateless replicas (periodic GC, hourly, runs on one
#                                             at a time: README, "Scaled out")
#   HAProxy (Debian's)                        the one address clients use (reads of one version
#                                             go to one origin, the rest round robin)
#   one `bdn cache serve` node                a cache tier in front of HAProxy
#
#   scripts/cluster.sh up       start everything, print the addresses and the admin token's file
#   scripts/cluster.sh status   what runs (exit 1 if something that should run does not; after an
#                               `up` that failed half-way, what it had started)
#   scripts/cluster.sh stop originN / start originN
#                               stop one origin (SIGTERM), or start it again on its address (to try
#                               a replica going away and coming back behind HAProxy)
#   scripts/cluster.sh down     stop everything (the state is kept: the next `up` starts it again)
#   scripts/cluster.sh reset    down, then delete the state: DIR and the PostgreSQL directory
#
# State (logs, data, pid files, addresses in cluster.env) goes to --dir DIR, else $BDN_CLUSTER_DIR,
# else /tmp/bdn-cluster-$USER. The bdn binary is $BDN, else build/apps/bdn/bdn of this checkout.
# DIR must be the caller's own, named by its real path (no symbolic link in any component, no
# control character), and new, empty or one `up` made (cluster.env and pids/): every command but
# `up` refuses any other directory. PostgreSQL's directory (/tmp/bdn-cluster-pg.*, named in
# DIR/pg.dir) holds bdn-cluster-owner naming DIR: no command starts, stops or deletes one that
# does not. A pid file's process counts as this cluster's only if it runs as the caller and its
# arguments hold the exact pair this script gave it (--data DIR/originN, -f DIR/haproxy.cfg,
# -d DIR/s3rver, --cache-dir DIR/cache).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: $0 [--dir DIR] up|status|down|reset|stop originN|start originN" >&2; exit 2; }
DIR="${BDN_CLUSTER_DIR:-/tmp/bdn-cluster-${USER:-$(id -un)}}"
CMD=""
TARGET=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || usage; DIR=$2; shift 2 ;;
    --dir=*) DIR=${1#--dir=}; shift ;;
    up|down|status|reset) [ -z "$CMD" ] || usage; CMD=$1; shift ;;
    start|stop)
      { [ -z "$CMD" ] && [ $# -ge 2 ]; } || usage
      case "$2" in
        origin1|origin2) ;;
        *) echo "cluster: $1 takes origin1 or origin2, not \"$2\"" >&2; exit 2 ;;
      esac
      CMD=$1; TARGET=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$CMD" ] || usage
# A control character (a newline, say) in DIR would end up in files that are sourced and parsed.
if [ -z "$DIR" ] || [[ "$DIR" == *[[:cntrl:]]* ]]; then
  echo "cluster: --dir $(printf '%q' "$DIR"): empty or holds a control character: use a plain path" >&2; exit 2
fi
# No symbolic link anywhere in DIR: not the last component (with or without trailing slashes),
# not a parent one. A link could send `reset` or the services' data elsewhere.
while [[ "$DIR" == */ && "$DIR" != / ]]; do DIR=${DIR%/}; done
[ ! -L "$DIR" ] || { echo "cluster: --dir $DIR is a symbolic link: name the directory itself" >&2; exit 2; }
LEX=$(realpath -s -m -- "$DIR")  # absolute, "." and ".." folded, no link followed
# The deepest part of it that exists (all of it, but for an `up` that creates DIR) has no link.
EXISTING=$LEX
while [ ! -e "$EXISTING" ] && [ ! -L "$EXISTING" ]; do EXISTING=$(dirname "$EXISTING"); done
if [ -L "$EXISTING" ] || { [ -d "$EXISTING" ] && [ "$(cd "$EXISTING" && pwd -P)" != "$EXISTING" ]; }; then
  echo "cluster: --dir $DIR goes through a symbolic link ($EXISTING is $(realpath -m -- "$EXISTING")): name the directory by its real path" >&2
  exit 2
fi
DIR=$LEX  # the real path: ownership checks compare it with command lines
[ "$DIR" != / ] || { echo "cluster: --dir /: use a directory of the cluster's own" >&2; exit 2; }
if [ ! -d "$DIR" ]; then
  [ ! -e "$DIR" ] || { echo "cluster: $DIR is not a directory" >&2; exit 2; }
  [ "$CMD" = up ] || { echo "cluster: never started in $DIR"; [ "$CMD" = down ] || [ "$CMD" = reset ]; exit; }
  mkdir -p "$DIR"
  chmod 700 "$DIR"  # it holds the admin token and every replica's data
fi
# Another user's directory (say one made in /tmp before this user's first `up`) could feed this
# script files to source and links to write through: only the caller's own is used.
[ -O "$DIR" ] || { echo "cluster: $DIR belongs to another user: use a directory of your own" >&2; exit 2; }
for sub in logs pids; do
  if [ -e "$DIR/$sub" ] || [ -L "$DIR/$sub" ]; then
    { [ -d "$DIR/$sub" ] && [ ! -L "$DIR/$sub" ] && [ -O "$DIR/$sub" ]; } \
      || { echo "cluster: $DIR/$sub is not a directory of this user's" >&2; exit 2; }
  fi
done
# A cluster's directory: what `up` made (cluster.env), or empty before the first `up`. reset
# deletes it, so it refuses any other directory.
is_cluster_dir() {
  [ -f "$DIR/cluster.env" ] && [ ! -L "$DIR/cluster.env" ] && [ -O "$DIR/cluster.env" ] && [ -d "$DIR/pids" ]
}
has_other_files() {
  local f
  for f in "$DIR"/* "$DIR"/.[!.]* "$DIR"/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "$f" = "$DIR/.lock" ] || return 0
  done
  return 1
}
# Only `up` makes a cluster directory; every other command (reset deletes one, down and stop kill
# the processes its pid files name, start and status source its cluster.env) refuses any other
# directory, and says "never started" of an empty one.
if ! is_cluster_dir; then
  if has_other_files; then
    case "$CMD" in
      up) echo "cluster: $DIR is not empty and holds no cluster: use a new or empty directory" >&2 ;;
      reset) echo "cluster: $DIR holds no cluster (no cluster.env and pids/): not deleting it" >&2 ;;
      *) echo "cluster: $DIR holds no cluster (no cluster.env and pids/): not using it" >&2 ;;
    esac
    exit 2
  fi
  [ "$CMD" = up ] || { echo "cluster: never started in $DIR"; [ "$CMD" = down ] || [ "$CMD" = reset ]; exit; }
fi
# One command at a time per cluster (two `start origin1` at once would both start one).
exec 9>>"$DIR/.lock"
flock -n 9 || { echo "cluster: another $0 is running on $DIR; try again when it ends" >&2; exit 1; }
BDN="${BDN:-$ROOT/build/apps/bdn/bdn}"
SERVICES=(s3rver origin1 origin2 haproxy cache)
BUCKET=bdn
PREFIX=cluster
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
# The addresses come from this cluster's cluster.env only, never from another one's sourced in the
# caller's shell.
unset BDN_CLUSTER_LB BDN_CLUSTER_ORIGIN1 BDN_CLUSTER_ORIGIN2 BDN_CLUSTER_CACHE_NODE BDN_CLUSTER_S3 \
  BDN_CLUSTER_DB BDN_CLUSTER_PG_DIR BDN_CLUSTER_PG_BIN

die() { echo "cluster: $*" >&2; exit 1; }
# env_add NAME VALUE: records an address in cluster.env as soon as it is known (so that status
# can say what a failed `up` had started).
env_add() { printf 'export %s=%q\n' "$1" "$2" >>"$DIR/cluster.env"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_port PORT NAME: until something accepts on 127.0.0.1:PORT while the process NAME's pid file
# names runs as NAME (owned: another program on the port is not NAME listening), 60 s by the
# clock, else dies with NAME's log; dies at once if that process has exited.
wait_port() {
  local deadline=$((SECONDS + 60)) pid
  pid=$(cat "$DIR/pids/$2.pid")
  while [ "$SECONDS" -lt "$deadline" ]; do
    alive "$pid" || die "$2 exited: see $DIR/logs/$2.log"
    # (owned is false for the moment between fork and exec: not an exit)
    if owned "$2" "$pid" \
      && python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$1" 2>/dev/null; then
      owned "$2" "$pid" || die "$2 exited: see $DIR/logs/$2.log"
      return 0
    fi
    sleep 0.1
  done
  die "$2 did not start listening on 127.0.0.1:$1: see $DIR/logs/$2.log"
}
# alive PID: whether PID exists and is not a zombie (a service just spawned: whatever it runs).
alive() {
  local state
  [[ "$1" =~ ^[1-9][0-9]*$ ]] || return 1
  state=$(awk '$1 == "State:" {print $2}' "/proc/$1/status" 2>/dev/null) && [ -n "$state" ] && [ "$state" != Z ]
}
# owned NAME PID: whether PID is alive, runs as the caller, and its arguments (/proc/PID/cmdline,
# split on NUL) hold, as two exact arguments in a row, the pair this script started NAME with. A
# pid file left behind may name an unrelated process by now, one whose command line merely
# mentions DIR included.
owned() {
  local flag val i args=()
  case "$1" in
    s3rver) flag=-d; val=$DIR/s3rver ;;
    origin1|origin2) flag=--data; val=$DIR/$1 ;;
    haproxy) flag=-f; val=$DIR/haproxy.cfg ;;
    cache) flag=--cache-dir; val=$DIR/cache ;;
    *) return 1 ;;
  esac
  [[ "$2" =~ ^[1-9][0-9]*$ ]] && kill -0 "$2" 2>/dev/null && [ -O "/proc/$2" ] || return 1
  mapfile -d '' -t args 2>/dev/null <"/proc/$2/cmdline" || return 1
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[i]}" = "$flag" ] && [ "${args[i + 1]}" = "$val" ] && return 0
  done
  return 1
}
# running NAME: whether the process of NAME's pid file runs and is this cluster's NAME (owned).
running() {
  [ -s "$DIR/pids/$1.pid" ] && [ ! -L "$DIR/pids/$1.pid" ] || return 1
  owned "$1" "$(cat "$DIR/pids/$1.pid")"
}
pg_bin() {
  local d found=""
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && found=$d; done
  [ -n "$found" ] || die "PostgreSQL is not installed (scripts/setup.sh: Debian package postgresql)"
  echo "$found"
}
# pg_as CMD...: as the postgres OS user when run as root (PostgreSQL refuses root).
pg_as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
PG_OWNER_FILE=bdn-cluster-owner
# pg_dir_ours PGDIR: whether PGDIR is the PostgreSQL directory `up` made for this cluster: a name
# mktemp gave (/tmp/bdn-cluster-pg.XXXXXX: no "..", not a link), owned by whoever runs PostgreSQL
# (the caller, or postgres when the caller is root: pg_as), holding the caller's bdn-cluster-owner
# (not a link) that names DIR. Another cluster's is not started, stopped or deleted by this one.
pg_dir_ours() {
  local uid=$UID
  [ "$uid" != 0 ] || uid=$(id -u postgres 2>/dev/null) || return 1
  [[ "$1" =~ ^/tmp/bdn-cluster-pg\.[A-Za-z0-9]{6}$ ]] && [ -d "$1" ] && [ ! -L "$1" ] || return 1
  [ "$(stat -c %u -- "$1")" = "$uid" ] || return 1
  [ -f "$1/$PG_OWNER_FILE" ] && [ ! -L "$1/$PG_OWNER_FILE" ] && [ -O "$1/$PG_OWNER_FILE" ] || return 1
  [ "$(cat -- "$1/$PG_OWNER_FILE")" = "$DIR" ]
}
# pg_dir: prints the PostgreSQL directory DIR/pg.dir names; returns 0 if it is this cluster's
# (pg_dir_ours), 1 if pg.dir names none or one that is gone, 2 if it names one that is not.
pg_dir() {
  local d
  [ -s "$DIR/pg.dir" ] && [ ! -L "$DIR/pg.dir" ] || return 1
  d=$(cat "$DIR/pg.dir")
  echo "$d"
  pg_dir_ours "$d" && return 0
  { [ -e "$d" ] || [ -L "$d" ]; } && return 2
  return 1
}
not_ours() { echo "$DIR/pg.dir names $1, which is not this cluster's PostgreSQL directory (no $PG_OWNER_FILE naming $DIR in it, or not its owner's)"; }
haproxy_bin() { command -v haproxy || { [ -x /usr/sbin/haproxy ] && echo /usr/sbin/haproxy; } || die "HAProxy is not installed (scripts/setup.sh: Debian package haproxy)"; }

up() {
  [ -x "$BDN" ] || die "no bdn binary at $BDN (build it, or set BDN)"
  local js="$ROOT/tests/npm/node_modules/s3rver/bin/s3rver.js"
  [ -f "$js" ] || die "s3rver is not installed: run scripts/setup.sh (npm ci in tests/npm)"
  [ -x /usr/bin/aws ] || die "/usr/bin/aws is missing: run scripts/setup.sh (Debian package awscli)"
  local haproxy; haproxy=$(haproxy_bin)
  local s; for s in "${SERVICES[@]}"; do running "$s" && die "$s is running already ($DIR): $0 down first"; done
  [ -z "$(find "$DIR" -maxdepth 0 -perm /077)" ] \
    || die "$DIR is open to other users and would hold the admin token: use a private directory (chmod 700) or a new one"
  mkdir -p "$DIR/logs" "$DIR/pids"
  printf '# source this file: the cluster addresses (%q)\n' "$DIR" >"$DIR/cluster.env"

  # PostgreSQL: in a directory of its own the postgres user may enter (DIR may be private).
  local pgbin pgdir pgport
  pgbin=$(pg_bin)
  # The one pg.dir names if it is this cluster's (pg_dir_ours); a new one if pg.dir names none or
  # a directory that is gone; never another one.
  local rc=0
  pgdir=$(pg_dir) || rc=$?
  [ "$rc" != 2 ] || die "$(not_ours "$pgdir"): remove $DIR/pg.dir for a new one"
  [ "$rc" = 0 ] || pgdir=""
  if [ -z "$pgdir" ]; then
    pgdir=$(mktemp -d /tmp/bdn-cluster-pg.XXXXXX)
    printf '%s\n' "$DIR" >"$pgdir/$PG_OWNER_FILE"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$pgdir"; fi
    echo "$pgdir" >"$DIR/pg.dir"  # before initdb: reset deletes it even if initdb fails
  fi
  if [ ! -d "$pgdir/data" ]; then
    pg_as "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 --locale=C \
      >"$DIR/logs/initdb.log" 2>&1 || die "initdb failed: see $DIR/logs/initdb.log"
  fi
  pg_as "$pgbin/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1 \
    && die "PostgreSQL of this cluster is running already (after an up that failed?): $0 down first"
  pgport=$(free_port)
  env_add BDN_CLUSTER_PG_DIR "$pgdir"
  env_add BDN_CLUSTER_PG_BIN "$pgbin"
  pg_as "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -t 60 \
    -o "-p $pgport -k $pgdir -h 127.0.0.1 -c max_connections=200" start >/dev/null 9>&- \
    || die "PostgreSQL did not start: see $pgdir/log"
  "$pgbin/psql" -X -q -t -A -h 127.0.0.1 -p "$pgport" -U postgres -d postgres \
    -c "SELECT 1 FROM pg_database WHERE datname='bdn'" >"$DIR/logs/psql.out"
  if [ ! -s "$DIR/logs/psql.out" ]; then
    "$pgbin/psql" -X -q -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -c "CREATE DATABASE bdn" >/dev/null
  fi
  local db="postgresql://postgres@127.0.0.1:$pgport/bdn"
  env_add BDN_CLUSTER_DB "$db"

  # s3rver, and the bucket.
  local s3port; s3port=$(free_port)
  mkdir -p "$DIR/s3rver"
  node --openssl-legacy-provider "$js" -d "$DIR/s3rver" -a 127.0.0.1 -p "$s3port" -s \
    --no-vhost-buckets </dev/null >"$DIR/logs/s3rver.log" 2>&1 9>&- &
  echo $! >"$DIR/pids/s3rver.pid"
  wait_port "$s3port" s3rver
  local s3="http://127.0.0.1:$s3port"
  env_add BDN_CLUSTER_S3 "$s3"
  cat >"$DIR/aws.env" <<EOF
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
EOF
  # shellcheck disable=SC1091
  source "$DIR/aws.env"
  local mb=0
  AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true AWS_PAGER="" \
    /usr/bin/aws --endpoint-url "$s3" s3 mb "s3://$BUCKET" >"$DIR/logs/aws.log" 2>&1 || mb=$?
  if [ "$mb" -ne 0 ] && [[ "$(cat "$DIR/logs/aws.log")" != *BucketAlreadyOwnedByYou* && "$(cat "$DIR/logs/aws.log")" != *BucketAlreadyExists* ]]; then
    die "creating the bucket failed: see $DIR/logs/aws.log"
  fi

  # Two origins at once (the first admin key is created exactly once, through the database).
  local p1 p2 n
  p1=$(free_port); p2=$(free_port)
  env_add BDN_CLUSTER_ORIGIN1 "http://127.0.0.1:$p1"
  env_add BDN_CLUSTER_ORIGIN2 "http://127.0.0.1:$p2"
  spawn_origin 1 "$p1" "$db" "$s3"
  spawn_origin 2 "$p2" "$db" "$s3"
  for n in 1 2; do wait_origin "$n"; done

  # HAProxy: reads of one version (the Bdn-Version header a mount or pull sends) go to one
  # origin, chosen by a consistent hash of the version, so that the object store sends each pack
  # once: an origin reads a pack whole for a bulk batch and serves the batches that follow from
  # memory, which only works if they come to it. Other requests are hashed by the Bdn-Session
  # header the CLI sends (one random id per invocation), so that a push's uploads and its commit
  # reach one origin: the commit then finds every blob in that origin's own spool and uploads it
  # itself, instead of waiting for the other origin's packs (or storing them again after a 412).
  # (req.fhdr: the whole value; req.hdr would hash only what follows its last comma.) Requests
  # with neither header go round robin. /healthz checks every 500 ms; a request whose
  # connection to a replica fails goes to the other one, and what hashed to a replica that is
  # down moves to the other one.
  local lbport; lbport=$(free_port)
  cat >"$DIR/haproxy.cfg" <<EOF
global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 300s
  timeout server 300s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
frontend bdn
  bind 127.0.0.1:$lbport
  default_backend origins
backend origins
  http-request set-var(txn.route) req.fhdr(Bdn-Version)
  http-request set-var(txn.route) req.fhdr(Bdn-Session) unless { var(txn.route) -m found }
  balance hash var(txn.route)
  hash-type consistent
  option httpchk GET /healthz
  default-server inter 500ms fall 2 rise 1
  server origin1 127.0.0.1:$p1 check
  server origin2 127.0.0.1:$p2 check
EOF
  "$haproxy" -c -q -f "$DIR/haproxy.cfg" >"$DIR/logs/haproxy.log" 2>&1 \
    || die "HAProxy refused its configuration: see $DIR/logs/haproxy.log"
  "$haproxy" -W -db -f "$DIR/haproxy.cfg" </dev/null >>"$DIR/logs/haproxy.log" 2>&1 9>&- &
  echo $! >"$DIR/pids/haproxy.pid"
  wait_port "$lbport" haproxy
  local lb="http://127.0.0.1:$lbport"
  env_add BDN_CLUSTER_LB "$lb"

  # The admin token: written by whichever origin created the first key (the first `up` only).
  for n in 1 2; do
    [ -s "$DIR/origin$n/admin.token" ] && install -m 600 "$DIR/origin$n/admin.token" "$DIR/admin.token"
  done
  [ -s "$DIR/admin.token" ] || die "no admin token in $DIR/origin1 or $DIR/origin2"
  # The cache node's own key, pull on every namespace (kept across restarts).
  if [ ! -s "$DIR/cache.token" ]; then
    BDN_REMOTE=$lb BDN_TOKEN=$(cat "$DIR/admin.token") BDN_HOME="$DIR/home" \
      "$BDN" --json key create --namespace '*' --scope pull >"$DIR/logs/cache-key.json" \
      || die "creating the cache node's key failed"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' \
      "$DIR/logs/cache-key.json" >"$DIR/cache.token.tmp"
    chmod 600 "$DIR/cache.token.tmp"
    mv "$DIR/cache.token.tmp" "$DIR/cache.token"
    rm -f "$DIR/logs/cache-key.json"
  fi

  # One cache node in front of the load balancer.
  local cport; cport=$(free_port)
  BDN_TOKEN=$(cat "$DIR/cache.token") BDN_HOME="$DIR/home" "$BDN" cache serve --upstream "$lb" --listen "127.0.0.1:$cport" --cache-dir "$DIR/cache" \
    --cache-size 2G </dev/null >>"$DIR/logs/cache.log" 2>&1 9>&- &
  env_add BDN_CLUSTER_CACHE_NODE "http://127.0.0.1:$cport"
  echo $! >"$DIR/pids/cache.pid"
  wait_port "$cport" cache

  status
  echo
  echo "Try it:"
  echo "  export BDN_REMOTE=$lb BDN_TOKEN=\"\$(cat $(printf '%q' "$DIR/admin.token"))\""
  echo "  bdn volume push ./some-dir bdn:team/model:v1"
  echo "  BDN_CLUSTER_CACHE=http://127.0.0.1:$cport bdn volume mount bdn:team/model:v1 /mnt/model"
}

# spawn_origin N PORT DB S3: starts origin N (`bdn serve` over the database and the bucket) on
# 127.0.0.1:PORT. wait_origin N: until it says "listening on" (bound, and past the
# first-admin-key bootstrap), else dies naming its log.
spawn_origin() {
  [ -f "$DIR/logs/origin$1.log" ] && mv "$DIR/logs/origin$1.log" "$DIR/logs/origin$1.log.prev"
  "$BDN" serve --listen "127.0.0.1:$2" --data "$DIR/origin$1" --db "$3" \
    --store "s3://$BUCKET/$PREFIX" --s3-endpoint "$4" --s3-region us-east-1 \
    </dev/null >>"$DIR/logs/origin$1.log" 2>&1 9>&- &
  echo $! >"$DIR/pids/origin$1.pid"
}
wait_origin() {
  local pid; pid=$(cat "$DIR/pids/origin$1.pid")
  for _ in $(seq 1 600); do
    grep -qs "listening on http:" "$DIR/logs/origin$1.log" && owned "origin$1" "$pid" && return 0
    alive "$pid" || die "origin$1 exited: see $DIR/logs/origin$1.log"
    sleep 0.1
  done
  die "origin$1 did not start: see $DIR/logs/origin$1.log"
}

# stop_service NAME: SIGTERM if it runs and is this cluster's; SIGKILL after 10 s only if that
# same process still runs and is still this cluster's (its pid may be another process's by then).
stop_service() {
  local pid
  if running "$1"; then
    pid=$(cat "$DIR/pids/$1.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do owned "$1" "$pid" || break; sleep 0.1; done
    if owned "$1" "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$DIR/pids/$1.pid"
}

# start_one: origin $TARGET again, on its address, over the running database and bucket.
start_one() {
  [ -s "$DIR/cluster.env" ] || die "never started in $DIR: $0 up first"
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
  running "$TARGET" && die "$TARGET is running already"
  running s3rver || die "s3rver is not running: $0 up"
  local n=${TARGET#origin} url
  url=BDN_CLUSTER_ORIGIN$n
  url=${!url:-}
  { [ -n "$url" ] && [ -n "${BDN_CLUSTER_DB:-}" ]; } || die "$TARGET never started in $DIR: $0 up"
  [ -x "$BDN" ] || die "no bdn binary at $BDN (build it, or set BDN)"
  # shellcheck disable=SC1091
  source "$DIR/aws.env"
  spawn_origin "$n" "${url##*:}" "$BDN_CLUSTER_DB" "$BDN_CLUSTER_S3"
  wait_origin "$n"
  echo "cluster: $TARGET started on $url"
}

status() {
  [ -s "$DIR/cluster.env" ] || { echo "cluster: never started in $DIR"; return 1; }
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
  # After an `up` that failed half-way, the addresses it never got are shown as "-".
  : "${BDN_CLUSTER_S3:=-}" "${BDN_CLUSTER_ORIGIN1:=-}" "${BDN_CLUSTER_ORIGIN2:=-}"
  : "${BDN_CLUSTER_LB:=-}" "${BDN_CLUSTER_CACHE_NODE:=-}" "${BDN_CLUSTER_DB:=-}"
  local bad=0 s pid state
  printf '%-9s %-8s %-7s %s\n' SERVICE STATE PID ADDRESS
  for s in "${SERVICES[@]}"; do
    pid=$(cat "$DIR/pids/$s.pid" 2>/dev/null || echo -)
    state=stopped; running "$s" && state=running
    [ "$state" = running ] || bad=1
    local addr=""
    case "$s" in
      s3rver) addr="$BDN_CLUSTER_S3 (bucket s3://$BUCKET/$PREFIX)" ;;
      origin1) addr=$BDN_CLUSTER_ORIGIN1 ;;
      origin2) addr=$BDN_CLUSTER_ORIGIN2 ;;
      haproxy) addr="$BDN_CLUSTER_LB (over origin1, origin2: use this one)" ;;
      cache) addr="$BDN_CLUSTER_CACHE_NODE (cache node over the load balancer)" ;;
    esac
    [[ "$addr" != "- "* ]] || addr=-  # never started: no address, nothing to say about it
    printf '%-9s %-8s %-7s %s\n' "$s" "$state" "$pid" "$addr"
  done
  state=stopped
  if [ -n "${BDN_CLUSTER_PG_BIN:-}" ]; then
    # shellcheck disable=SC2153  # set by cluster.env with BDN_CLUSTER_PG_BIN
    pg_as "$BDN_CLUSTER_PG_BIN/pg_ctl" -D "$BDN_CLUSTER_PG_DIR/data" status >/dev/null 2>&1 && state=running
  fi
  [ "$state" = running ] || bad=1
  printf '%-9s %-8s %-7s %s\n' postgres "$state" - "$BDN_CLUSTER_DB"
  echo "admin token: $DIR/admin.token"
  echo "addresses:   $DIR/cluster.env; logs: $DIR/logs/"
  return $bad
}

down() {
  local s
  for s in cache haproxy origin1 origin2 s3rver; do stop_service "$s"; done
  local pgdir rc=0
  pgdir=$(pg_dir) || rc=$?
  if [ "$rc" = 0 ] && [ -d "$pgdir/data" ]; then
    pg_as "$(pg_bin)/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  elif [ "$rc" = 2 ]; then
    echo "cluster: $(not_ours "$pgdir"): not stopping or deleting it" >&2
  fi
  echo "cluster: stopped ($DIR kept)"
}

reset() {
  down >/dev/null
  # Only the directory up made for this cluster (pg_dir_ours), never one a pg.dir edited by hand
  # or copied from another cluster names (down has said so).
  local pgdir
  if pgdir=$(pg_dir); then rm -rf --one-file-system "$pgdir"; fi
  rm -rf --one-file-system "$DIR"
  echo "cluster: stopped; $DIR and its PostgreSQL directory deleted"
}

case "$CMD" in
  up) up ;;
  status) status ;;
  down) down ;;
  reset) reset ;;
  stop) stop_service "$TARGET"; echo "cluster: $TARGET stopped" ;;
  start) start_one ;;
esac
