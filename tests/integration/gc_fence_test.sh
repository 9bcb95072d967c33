#!/usr/bin/env bash
# GC across replicas whose lock is lost at the worst moment (docs/format.md, "Garbage
# collection": the fence). Two `bdn serve` replicas share one PostgreSQL and one bucket (s3rver);
# A collects every second with no grace, B commits. The lock between sweeps and commits is a
# PostgreSQL advisory lock, lost with its connection (pg_terminate_backend here, a database
# restart in life); a psql session holding a table lock widens the moment between a look at the
# lock and the act it guards. Without the fence each case lost a committed version's data.
# - The sweep has looked at its lock and is recording its packs deleted when it loses the lock;
#   B then commits the deleted version's digest to another volume. Exactly one of the two goes
#   ahead: here B's commit, whose blobs were checked before the sweep recorded the packs, is
#   refused with 503 naming the sweep, and no version is left without its data.
# - B's commit has looked at its lock and waits to write the registry when it loses the lock; the
#   sweep then takes the lock and decides. Here the commit lands, the sweep deletes nothing, and
#   the version verifies; the next collection keeps its blobs.
# After each case every version listed verifies and pulls back equal to its source (cmp).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_SHARED_CREDENTIALS_FILE=/dev/null

step "PostgreSQL, s3rver, and two replicas over them"
start_postgres
psql_c postgres "CREATE DATABASE bdn" >/dev/null
DB="$PG_URL_BASE/bdn"
start_s3rver
aws_direct s3 mb s3://weights >/dev/null

# replica NAME [ARGS...]: `bdn serve` over the shared database and bucket; sets URL and PID.
replica() {
  local name=$1
  shift
  start_bdn "$name" serve --listen 127.0.0.1:0 --data "$WORK/$name" --insecure-no-auth \
    --db "$DB" --store s3://weights/models --s3-endpoint "$S3" --s3-region us-east-1 \
    --retention 0s --idle-seal 50ms "$@"
  URL=$STARTED_URL
  PID=$STARTED_PID
}
# collector PHASE: replica A collecting every second without grace, stopping itself (SIGSTOP)
# when its run reaches PHASE (BDN_TEST_GC_STOP_AT); sets A_PID.
collector() {
  BDN_TEST_GC_STOP_AT=$1 replica "a$1" --gc-interval 1s --gc-grace 0s
  A_PID=$PID
}
replica b --gc-interval 0s
B=$URL
B_PID=$PID

# stopped_at PHASE LOG: waits (30 s at most) until the collector stopped itself at PHASE.
stopped_at() {
  for _ in $(seq 1 300); do
    grep -q "gc: stopped at $1" "$2" && [ "$(ps -o stat= -p "$A_PID" | cut -c1)" = T ] && return 0
    sleep 0.1
  done
  fail "the collector did not stop at $1: $(cat "$2")"
}
# lock_backends PID MODE: the PostgreSQL backends of the bdn process PID that hold an advisory
# lock in MODE (ExclusiveLock: a sweep's, and the run's own; ShareLock: a commit's), one a line.
lock_backends() {
  psql_c bdn "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.mode = '$2' AND
    a.application_name LIKE 'bdn pid $1 on %'"
}
# lose_locks PID MODE: ends those backends, as a database restart would.
lose_locks() {
  local pids
  pids=$(lock_backends "$1" "$2" | paste -sd, -)
  [ -n "$pids" ] || fail "process $1 holds no advisory lock in mode $2"
  psql_c bdn "SELECT pg_terminate_backend(pid) FROM unnest(ARRAY[$pids]) AS pid" >/dev/null
}
# hold_table_lock SQL: a psql session that runs SQL in an open transaction until release_table_lock.
hold_table_lock() {
  rm -f "$WORK/psql.in"
  mkfifo "$WORK/psql.in"
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d bdn \
    <"$WORK/psql.in" >"$WORK/psql.out" 2>&1 &
  PSQL_PID=$!
  PIDS+=("$PSQL_PID")
  exec 7>"$WORK/psql.in"
  echo "BEGIN; $1" >&7
  for _ in $(seq 1 300); do
    [ "$(psql_c bdn "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'psql' AND
      state = 'idle in transaction'")" != 0 ] && return 0
    sleep 0.1
  done
  fail "psql did not take its lock: $(cat "$WORK/psql.out")"
}
release_table_lock() {
  echo "COMMIT;" >&7
  exec 7>&-
  wait "$PSQL_PID" || fail "psql: $(cat "$WORK/psql.out")"
}
# lock_waits TEXT: how many backends whose statement holds TEXT wait for a lock (a table's or a
# row's).
lock_waits() {
  psql_c bdn "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND
    query LIKE '%$1%' AND pid <> pg_backend_pid()"
}
# waiting_or_done PID TEXT: waits (30 s at most) until process PID (none: "") has ended or a
# statement with TEXT waits for a lock.
waiting_or_done() {
  for _ in $(seq 1 300); do
    [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null && return 0
    [ "$(lock_waits "$2")" != 0 ] && return 0
    sleep 0.1
  done
  fail "no statement with [$2] came to wait for a lock${1:+, and process $1 did not end}"
}
waiting_on() { waiting_or_done "" "$1"; }
# wait_for_log LOG TEXT: waits (30 s at most) until LOG holds TEXT.
wait_for_log() {
  for _ in $(seq 1 300); do
    grep -qF "$2" "$1" && return 0
    sleep 0.1
  done
  fail "no [$2] in $1: $(cat "$1")"
}
# commit VOLUME DIGEST_HEX: POST .../commit through B in the background, its status code and body
# in $WORK/commit.code and $WORK/commit.body.
commit_in_background() {
  curl -s -o "$WORK/commit.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"digest\": \"$2\"}" "$B/v1/volumes/w/$1/commit" >"$WORK/commit.code" &
  COMMIT_PID=$!
}
# all_versions_whole: every live version of the volumes w/* verifies (each of its blobs read and
# checked against its digest); prints how many there are.
all_versions_whole() {
  local vol ref n=0
  for vol in $(BDN_REMOTE=$B "$BDN" volume ls bdn:w); do
    for ref in $(BDN_REMOTE=$B "$BDN" volume versions "$vol" --json | python3 -c '
import json, sys
for v in json.load(sys.stdin)["versions"]:
    if v["lifecycle"] == "ALIVE": print(v["version_ref"])'); do
      BDN_REMOTE=$B "$BDN" volume verify "$ref" >"$WORK/verify.out" 2>&1 \
        || fail "verify $ref: $(cat "$WORK/verify.out")"
      n=$((n + 1))
    done
  done
  echo "$n"
}
# doomed PHASE DIR VOLUME: a collector stopping at PHASE, DIR pushed through B as w/VOLUME and
# removed, and the collector's run stopped at PHASE with that version's packs in its doom; sets
# REF to the version's pinned ref.
doomed() {
  collector "$1"
  REF=$(BDN_REMOTE=$B "$BDN" volume push "$2" "bdn:w/$3" 2>/dev/null)
  BDN_REMOTE=$B "$BDN" volume rm "$REF" --yes >/dev/null 2>&1
  stopped_at "$1" "$WORK/a$1.log"
}

mkdir -p "$WORK/one" "$WORK/two"
random_file "$WORK/one/weights.bin" 3000000 1
random_file "$WORK/two/weights.bin" 3000000 2

step "a sweep that loses its lock while it records its packs deleted, and a commit of those packs"
doomed sweeping "$WORK/one" one
hold_table_lock "LOCK TABLE objstore_deleted_packs IN SHARE MODE;"
kill -CONT "$A_PID"
waiting_on "LOCK TABLE objstore_deleted_packs"
lose_locks "$A_PID" ExclusiveLock
commit_in_background again "${REF##*@b3:}"
# (bdn before the fence: the commit lands here, and the sweep then deletes its packs)
waiting_or_done "$COMMIT_PID" "UPDATE objstore_fence SET commits"
release_table_lock
wait "$COMMIT_PID" || true
assert_eq 503 "$(cat "$WORK/commit.code")" "status of the commit that raced the sweep ($(cat "$WORK/commit.body"))"
assert_contains "$(cat "$WORK/commit.body")" "commit: a gc sweep deleted packs since the version's blobs were checked"
wait_for_log "$WORK/asweeping.log" "gc: reclaimed"
rc=0
BDN_REMOTE=$B "$BDN" volume versions bdn:w/again >/dev/null 2>&1 || rc=$?
assert_eq 3 "$rc" "exit code of versions of the volume whose commit was refused"
assert_eq 0 "$(all_versions_whole)" "live versions (the one pushed was deleted and collected)"
kill "$A_PID"
wait "$A_PID" || true

step "a commit that loses its lock while it waits to write the registry, and a sweep of its packs"
doomed copied "$WORK/two" two
hold_table_lock "LOCK TABLE versions IN EXCLUSIVE MODE;"
commit_in_background kept "${REF##*@b3:}"
waiting_on "INSERT INTO versions"
lose_locks "$B_PID" ShareLock
kill -CONT "$A_PID"
waiting_on "UPDATE objstore_fence SET sweeps"
release_table_lock
wait "$COMMIT_PID" || true
wait_for_log "$WORK/acopied.log" "a commit, a restore or another gc reached the store since the second mark"
assert_eq 200 "$(cat "$WORK/commit.code")" "status of the commit that raced the sweep ($(cat "$WORK/commit.body"))"
BDN_REMOTE=$B "$BDN" volume pull "bdn:w/kept@${REF##*@}" "$WORK/kept" >/dev/null 2>&1 \
  || fail "pull of the committed version failed"
cmp "$WORK/two/weights.bin" "$WORK/kept/weights.bin" || fail "the committed version reads back different bytes"
assert_eq 1 "$(all_versions_whole)" "live versions (the one committed while the sweep ran)"
# The next collections (every second) keep what the committed version needs.
sleep 3
assert_eq 1 "$(all_versions_whole)" "live versions after later collections"
echo PASS
