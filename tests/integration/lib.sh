# Shared helpers for the integration tests: a private work dir and BDN_HOME per test, cleanup of
# mounts and processes on exit, and assertions that print what differed.
set -euo pipefail
: "${BDN:?BDN must point at the bdn binary}"
TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "/tmp/bdn-${TEST_NAME}.XXXXXX")
export BDN_HOME="$WORK/home"
# Each test's own runtime directory: `mounts apply` runs of one user take turns through a lock
# there, and tests running at once are not one deployment.
export BDN_RUNTIME_DIR="$WORK/run"
mkdir -m 700 "$BDN_RUNTIME_DIR"
MOUNTS=()
PIDS=()

cleanup() {
  local rc=$?
  # Newest first: a later mount may sit on top of (or above) an earlier one.
  local i m
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    m=${MOUNTS[$i]}
    [ -n "$m" ] || continue
    "$BDN" volume umount "$m" >/dev/null 2>&1 || fusermount3 -u -z "$m" >/dev/null 2>&1 || umount -l "$m" >/dev/null 2>&1 || true
  done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  if [ -n "${PG_DIR:-}" ]; then
    pg_signal CONT 2>/dev/null || true  # a server a failed test left frozen (pg_signal STOP)
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    cp "$PG_DIR/log" "$WORK/postgres.log" 2>/dev/null || true
    rm -rf "$PG_DIR"
  fi
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then rm -rf "$WORK"; else echo "FAILED: work dir kept at $WORK" >&2; fi
  exit $rc
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# needs_fuse: ends a test that mounts as skipped (exit 77, which ctest counts as skipped, never as
# passed) when this machine cannot mount FUSE: no /dev/fuse to open, or no fusermount3.
needs_fuse() {
  local why=""
  if [ ! -c /dev/fuse ]; then
    why="/dev/fuse is missing"
  elif ! { : <>/dev/fuse; } 2>/dev/null; then
    why="/dev/fuse cannot be opened for reading and writing"
  elif ! command -v fusermount3 >/dev/null; then
    why="fusermount3 is not installed (Debian package fuse3)"
  fi
  if [ -n "$why" ]; then
    echo "SKIP: $why; $TEST_NAME mounts volumes"
    exit 77
  fi
}
# Mounts a tmpfs of size $1 (e.g. 24m) at $WORK/small, named by $small, for a full-disk test;
# exits 77 (skip) where that cannot be done (not root, no tmpfs). The caller unmounts it.
mount_small_tmpfs() {
  if [ "$(id -u)" != 0 ]; then echo "SKIP: mounting a tmpfs needs root"; exit 77; fi
  small="$WORK/small"
  mkdir -p "$small"
  if ! mount -t tmpfs -o size="$1" tmpfs "$small" 2>"$WORK/mount.err"; then
    echo "SKIP: cannot mount a tmpfs here: $(cat "$WORK/mount.err")"; exit 77
  fi
}

step() { echo "--- $*"; }

# assert_eq EXPECTED ACTUAL [what]
assert_eq() { [ "$1" == "$2" ] || fail "${3:-value}: expected [$1], got [$2]"; }
# assert_contains HAYSTACK NEEDLE
# assert_absent TEXT WHAT PATH...: fails unless every PATH exists and no file under them holds TEXT
# (grep's "not found" exactly: a missing path or a read error is a failure, not a pass).
assert_absent() {
  local text=$1 what=$2 rc=0; shift 2
  local p; for p in "$@"; do [ -e "$p" ] || fail "$what: $p does not exist"; done
  grep -rqaF -- "$text" "$@" || rc=$?
  [ "$rc" -eq 1 ] || fail "$what (grep exit $rc in $*)"
}
assert_contains() { [[ "$1" == *"$2"* ]] || fail "expected output to contain [$2], got [$1]"; }

# run_fails EXPECTED_EXIT EXPECTED_STDERR cmd...: the command must fail with that exit code and
# exactly that stderr.
run_fails() {
  local want_rc=$1 want_err=$2; shift 2
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -ne 0 ] || fail "expected failure from: $*"
  assert_eq "$want_rc" "$rc" "exit code of $*"
  assert_eq "$want_err" "$err" "stderr of $*"
}

# json_field FIELD < json
json_field() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(json.dumps(v) if isinstance(v,(list,dict,bool)) else v)' "$1"; }

# tree_listing DIR: one line per entry, sorted: type, mode, size, b3sum or link target, path.
# Hardlinks show as files with the same content; the inode groups are listed separately.
tree_listing() {
  (cd "$1" && find . -mindepth 1 -print0 | sort -z | while IFS= read -r -d '' p; do
    if [ -L "$p" ]; then
      printf 'l %s\n' "$(printf '%q' "$p") -> $(printf '%q' "$(readlink "$p")")"
    elif [ -d "$p" ]; then
      printf 'd %s %q\n' "$(stat -c %a "$p")" "$p"
    else
      printf 'f %s %s %s %q\n' "$(stat -c %a "$p")" "$(stat -c %s "$p")" "$(b3sum --no-names "$p")" "$p"
    fi
  done)
}

# hardlink_groups DIR: groups of paths sharing an inode (only groups of 2+).
hardlink_groups() {
  (cd "$1" && find . -type f -links +1 -printf '%i %p\n' | sort | awk '{g[$1]=g[$1] " " $2} END {for (k in g) print g[k]}' | sort)
}

mount_volume() {  # mount_volume REF DIR
  mkdir -p "$2"
  "$BDN" volume mount "$1" "$2" >/dev/null
  MOUNTS+=("$2")
}

# start_bdn NAME ARGS...: runs `bdn ARGS` (a server) in the background with stderr in
# $WORK/NAME.log, waits for its "listening on URL" line, and sets STARTED_URL and STARTED_PID
# (no subshell, so the process is tracked in PIDS and killed on exit).
start_bdn() {
  local name=$1; shift
  # Created here: the background child opens it only after the fork, and reading a log that does
  # not exist yet would end the test under set -e.
  : >"$WORK/$name.log"
  "$BDN" "$@" 2>>"$WORK/$name.log" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  STARTED_URL=""
  for _ in $(seq 1 100); do
    STARTED_URL=$(sed -n '/listening on http:/{s/.*listening on \(http:\/\/[^ ]*\).*/\1/p;q}' "$WORK/$name.log")
    [ -n "$STARTED_URL" ] && return 0
    kill -0 "$STARTED_PID" 2>/dev/null || fail "$name exited: $(cat "$WORK/$name.log")"
    sleep 0.1
  done
  fail "no 'listening on' line from $name: $(cat "$WORK/$name.log")"
}

# random_file PATH SIZE SEED: SIZE pseudo-random bytes, the same for the same SEED.
random_file() {
  python3 -c 'import random,sys; sys.stdout.buffer.write(random.Random(int(sys.argv[2])).randbytes(int(sys.argv[1])))' "$2" "$3" > "$1"
}

# metric_at URL NAME: the value of an unlabelled metric on URL's /metrics (0 when absent).
metric_at() {
  curl -sf "$1/metrics" | awk -v n="$2" '$1 == n {print $2; found=1} END {if (!found) print 0}'
}
# ratio_of BYTES TOTAL: BYTES / TOTAL with 3 decimals.
ratio_of() { python3 -c 'import sys; print(f"{int(float(sys.argv[1])) / int(sys.argv[2]):.3f}")' "$1" "$2"; }
# at_most VALUE LIMIT WHAT: fails unless VALUE <= LIMIT (numbers with decimals).
at_most() {
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$1" "$2" \
    || fail "$3: $1, above $2"
}

# start_origin [ARGS...]: `bdn serve` without authentication on a free port with its data in
# $WORK/srv (and ARGS, e.g. --sync-allow-private-addresses for sync tests whose sources listen on
# 127.0.0.1), for the remote commands of this test: sets SERVER_PID and URL, exports BDN_REMOTE,
# and unsets BDN_TOKEN, BDN_CLUSTER_CACHE and the proxy variables.
start_origin() {
  unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
  start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth "$@"
  SERVER_PID=$STARTED_PID
  URL=$STARTED_URL
  export BDN_REMOTE="$URL"
}

# start_origin_with_keys: `bdn serve` with authentication on a free port, its data in $WORK/srv,
# and keys for a cache tier: sets ORIGIN, ADMIN (the admin token), PUSH and PULL (keys of
# namespace w) and NODE_KEY (pull in every namespace, a cache node's own key); exports
# BDN_REMOTE.
start_origin_with_keys() {
  start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv"
  ORIGIN=$STARTED_URL
  export BDN_REMOTE="$ORIGIN"
  ADMIN=$(cat "$WORK/srv/admin.token")
  PUSH=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace w --scope push)
  PULL=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace w --scope pull)
  NODE_KEY=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace '*' --scope pull)
}

# start_hub CONFIG: the Hub stand-in (tests/fixtures/hf_hub.py) on 127.0.0.1 serving CONFIG (a
# JSON file), its log in $WORK/hub.log; waits until it listens and sets HUB (its URL).
start_hub() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/../fixtures/hf_hub.py" "$1" "$WORK/hub.port" 2>"$WORK/hub.log" &
  PIDS+=("$!")
  for _ in $(seq 1 100); do [ -s "$WORK/hub.port" ] && break; sleep 0.05; done
  [ -s "$WORK/hub.port" ] || fail "the Hub fixture did not start: $(cat "$WORK/hub.log")"
  HUB="http://127.0.0.1:$(cat "$WORK/hub.port")"
}

# jf JSON KEY...: the value at KEY... (a list index or an object key, in turn) of JSON, printed as
# text, or as JSON when it is a list, object, bool or null.
jf() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v,list) else v[k]
print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$@"; }

# start_fault_proxy NAME UPSTREAM ARGS...: fault_proxy.py (--rule, --gate: see there) in front of
# UPSTREAM, its log in $WORK/NAME.log; waits until it listens and sets PROXY_URL.
start_fault_proxy() {
  local name=$1 upstream=$2; shift 2
  : >"$WORK/$name.log"  # before the child opens it: the loop below reads it at once
  python3 "$(dirname "${BASH_SOURCE[0]}")/fault_proxy.py" --upstream "$upstream" "$@" 2>>"$WORK/$name.log" &
  PIDS+=("$!")
  PROXY_URL=""
  for _ in $(seq 1 100); do
    PROXY_URL=$(sed -n 's/^fault_proxy listening on \(http:\/\/[^ ]*\)$/\1/p' "$WORK/$name.log")
    [ -n "$PROXY_URL" ] && return 0
    sleep 0.1
  done
  fail "no 'listening on' line from $name: $(cat "$WORK/$name.log")"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_sync_job ID STATE: polls `bdn --json volume sync describe ID` (up to 20 s) until the job is
# in STATE, and prints its JSON as last read (the caller asserts the state it holds).
wait_sync_job() {
  local out="" state=""
  for _ in $(seq 1 400); do
    out=$("$BDN" --json volume sync describe "$1")
    state=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["state"])' "$out")
    [ "$state" = "$2" ] && break
    sleep 0.05
  done
  printf '%s\n' "$out"
}

# wait_blocked PID SYSCALL WHAT [STATES]: polls (up to 10 s) until PID is stopped inside
# syscall number SYSCALL (x86-64: 0 read, 17 pread64, 91 fchmod, 257 openat, 332 statx) in one
# of STATES (default "S D": sleeping there, e.g. waiting for a FUSE daemon; "t" for a syscall
# held by a tracer such as strace's delay injection); fails naming WHAT otherwise.
wait_blocked() {
  local deadline=$(($(now_ms) + 10000)) sc state
  while :; do
    sc=$(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null) || sc=""
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || state=""
    [ "$sc" = "$2" ] && [ -n "$state" ] && [[ " ${4:-S D} " == *" $state "* ]] && return 0
    [ "$(now_ms)" -lt "$deadline" ] || fail "$3 (pid $1) is not waiting in syscall $2 (syscall [$sc], state [$state])"
    sleep 0.02
  done
}

# wait_gone PID LIMIT_MS: polls until process PID has exited (no /proc entry, or a zombie left
# for its parent to reap); fails if it is still running after LIMIT_MS.
wait_gone() {
  local t0 state
  t0=$(now_ms)
  while :; do
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || state=gone
    { [ "$state" = gone ] || [ "$state" = Z ]; } && return 0
    [ $(($(now_ms) - t0)) -lt "$2" ] || fail "pid $1 still there after $2 ms (state $state, wchan $(cat "/proc/$1/wchan" 2>/dev/null))"
    sleep 0.01
  done
}

# wait_log FILE TEXT: polls until FILE holds a line with TEXT (a fixed string); fails after 10 s.
# A server writes a request's access-log line after its answer, so a client that has its answer
# may look before the line is there.
wait_log() {
  local t0
  t0=$(now_ms)
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    [ $(($(now_ms) - t0)) -lt 10000 ] || fail "$1: no line with [$2] after 10 s"
    sleep 0.02
  done
}

# pack_bytes DATA: bytes of the pack files (open or sealed) of the store in DATA.
pack_bytes() { (find "$1/store/packs" -type f -printf '%s\n' 2>/dev/null || true) | awk '{s += $1} END {print s + 0}'; }

# kill_when PID DATA BYTES [CLIENT]: kills PID (kill -9) once the packs of DATA have grown by
# BYTES since the call, or once PID or the push CLIENT (when given: PID is then the server it
# writes to) has ended by itself: the kill lands while the push writes, at a random place in its
# data, in its sync, or after its commit. Without the CLIENT check, a push that ended before
# writing BYTES left the server running and this loop waiting for bytes that never came.
# Sets KILL_LANDED (1 if PID and CLIENT were both still running when PID was killed) and KILL_RC
# (PID's exit status: 137 when the kill ended it).
kill_when() {
  local start; start=$(pack_bytes "$2")
  local client=${4:-$1}
  while kill -0 "$1" 2>/dev/null && kill -0 "$client" 2>/dev/null &&
        [ "$(pack_bytes "$2")" -lt $((start + $3)) ]; do sleep 0.002; done
  KILL_LANDED=0
  if kill -0 "$1" 2>/dev/null && kill -0 "$client" 2>/dev/null; then KILL_LANDED=1; fi
  kill -9 "$1" 2>/dev/null || true
  KILL_RC=0; wait "$1" 2>/dev/null || KILL_RC=$?
  untrack "$1"
}

# untrack PID: PID was reaped (wait): it leaves PIDS, so that the cleanup never kills another
# process that got its number since (a test that runs many processes).
untrack() {
  local p keep=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

# ---- PostgreSQL (bdn serve --db) ----
# The server of a test runs from its own directory outside $WORK (which only its owner may
# enter), as the postgres OS user when the test runs as root (PostgreSQL refuses root; Debian's
# postgresql package creates that user), on a free port of 127.0.0.1 with trust authentication
# and fsync off. Stopped and removed on exit (its log kept in $WORK/postgres.log).

# pg_as CMD...: runs CMD as the server's user.
pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# start_postgres: initdb and start; sets PG_BIN, PG_DIR, PG_PORT and PG_URL_BASE
# (postgresql://postgres@127.0.0.1:PORT). Skips the test (exit 77) when PostgreSQL is missing.
start_postgres() {
  PG_BIN=""
  local d
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/postgres" ] && PG_BIN=$d; done
  if [ -z "$PG_BIN" ]; then
    echo "SKIP: PostgreSQL is not installed (apt-get install postgresql); $TEST_NAME needs it"
    exit 77
  fi
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "SKIP: no postgres OS user to run PostgreSQL as (apt-get install postgresql creates it)"
    exit 77
  fi
  PG_DIR=$(mktemp -d "/tmp/bdn-pg-${TEST_NAME}.XXXXXX")
  [ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR"
  pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust --no-sync -E UTF8 \
    --locale=C >"$WORK/initdb.log" 2>&1 || fail "initdb: $(cat "$WORK/initdb.log")"
  PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  PG_URL_BASE="postgresql://postgres@127.0.0.1:$PG_PORT"
  pg_start
}

# pg_start, pg_stop: start (waiting until it accepts connections) and stop (fast shutdown: every
# connection ended) the test's server.
pg_start() {
  pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 60 \
    -o "-p $PG_PORT -k $PG_DIR -h 127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null \
    || fail "postgres did not start: $(cat "$PG_DIR/log")"
}
pg_stop() {
  pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 60 stop >/dev/null || fail "pg_ctl stop failed"
}

# pg_signal SIG: sends SIG to the test's server and every process of it (postmaster and
# backends): pg_signal STOP makes a server whose connections stay up but that never answers (a
# frozen or partitioned database), pg_signal CONT lets it go on.
pg_signal() {
  local pm
  pm=$(head -1 "$PG_DIR/data/postmaster.pid")
  # shellcheck disable=SC2046 # one pid per word
  kill -"$1" "$pm" $(ps -o pid= --ppid "$pm")
}

# psql_c DB SQL: runs SQL on database DB and prints the result unaligned, without headers.
psql_c() {
  "$PG_BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$1" -c "$2"
}
