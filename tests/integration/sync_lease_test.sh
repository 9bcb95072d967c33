#!/usr/bin/env bash
# bdn serve --db: a sync job's lease is a PostgreSQL session advisory lock held by a connection
# of its own. When that connection ends behind the run's back (the backend terminated here; a
# restart of PostgreSQL likewise), the server drops the lock and another replica may take the job:
# - taken by another holder at once (a psql session stands in for another replica's runner): the
#   run stops within a second or two and leaves the job SYNCING (no outcome, no run counted, its
#   push claim released); once the holder lets go, the job is resumed to READY;
# - still free: the run takes the lease again and goes on to READY;
# - free again, but the job ended meanwhile (the origin stalled, and the job was cancelled through
#   another replica): the run stops, commits nothing, and that outcome stands.
# Before, the run went on without a lease in the first two cases (two runners of one job), and
# in the third committed a version under a CANCELED job.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

step "PostgreSQL, an origin over it, and a source that takes seconds to sync"
start_postgres
psql_c postgres "CREATE DATABASE bdn" >/dev/null
DB="$PG_URL_BASE/bdn"
mkdir -p "$WORK/src"
truncate -s 4G "$WORK/src/zeros.bin"  # sparse: seconds of chunking and hashing, one chunk stored
start_bdn e serve --listen 127.0.0.1:0 --data "$WORK/e" --db "$DB" --sync-file-root "$WORK/src"
E_PID=$STARTED_PID
E=$STARTED_URL
export BDN_REMOTE="$E"
BDN_TOKEN=$(cat "$WORK/e/admin.token")
export BDN_TOKEN

# start_job VOLUME: starts a sync of the source into bdn:w/VOLUME and waits until it runs;
# prints its id.
start_job() {
  local job state=""
  job=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest "bdn:w/$1" | json_field id)
  for _ in $(seq 1 200); do
    state=$(psql_c bdn "SELECT state FROM sync_jobs WHERE id = '$job'")
    [ "$state" = SYNCING ] && break
    sleep 0.02
  done
  [ "$state" = SYNCING ] || fail "job $job: $state, not SYNCING"
  echo "$job"
}
# lease_pid JOB: the backend that holds JOB's lease ("" if none).
lease_pid() {
  psql_c bdn "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND
    ((classid::bigint << 32) | objid::bigint) = hashtextextended('bdn/sync-$1', 0)"
}
# wait_state JOB STATE MS: waits until JOB is in STATE.
wait_state() {
  local state="" i
  for i in $(seq 1 $(($3 / 100))); do
    state=$(psql_c bdn "SELECT state FROM sync_jobs WHERE id = '$1'")
    [ "$state" = "$2" ] && return 0
    sleep 0.1
  done
  fail "job $1: $state after $3 ms, not $2 ($(cat "$WORK/e.log"))"
}

step "the lease's connection ends and another runner takes the lease: the run stops for it"
job=$(start_job taken)
pid=$(lease_pid "$job")
[ -n "$pid" ] || fail "no backend holds the lease of running job $job"
# The other runner asks for the lease first and waits behind the run: PostgreSQL grants a released
# lock to its waiters as it is released, so the run can never take it again in between. (Ended
# first and taken after, even in one statement, a loaded machine let the run take it again in the
# up to 100 ms that pg_terminate_backend's wait polls.)
"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d bdn \
  -c "SELECT pg_advisory_lock(hashtextextended('bdn/sync-$job', 0))" \
  -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
HOLDER=$!
PIDS+=("$HOLDER")
waiting=0
for _ in $(seq 1 200); do
  waiting=$(psql_c bdn "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND
    objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('bdn/sync-$job', 0)")
  [ "$waiting" = 1 ] && break
  sleep 0.05
done
assert_eq 1 "$waiting" "requests waiting for the lease of job $job"
assert_eq t "$(psql_c bdn "SELECT pg_terminate_backend($pid)")" "the lease's backend ended"
wait_for_log() {
  local i
  for i in $(seq 1 100); do
    grep -qF "$1" "$WORK/e.log" && return 0
    sleep 0.1
  done
  fail "not logged within 10 s: [$1]; log: $(cat "$WORK/e.log")"
}
wait_for_log "sync job $job: its lease was lost (its database connection ended)"
wait_for_log "sync job $job: another runner took the job; this run stops"
# Stopped: no outcome recorded, the run not counted, the volume's push claim released.
sleep 1
assert_eq "SYNCING|0" "$(psql_c bdn "SELECT state || '|' || runs FROM sync_jobs WHERE id = '$job'")" \
  "state and runs of the job its run left"
assert_eq 0 "$(psql_c bdn "SELECT count(*) FROM push_claims WHERE ns = 'w' AND volume = 'taken'")" \
  "push claims left on bdn:w/taken"
assert_eq 0 "$(psql_c bdn "SELECT count(*) FROM versions v JOIN volumes o ON o.id = v.volume_id WHERE o.ns = 'w' AND o.name = 'taken'")" \
  "versions of bdn:w/taken"
assert_absent "sync job $job: lease taken again" "a run whose lease another runner holds" "$WORK/e.log"
# The other runner goes away (its backend ended: psql's own end would leave the backend in its
# pg_sleep): the origin's poll (every 10 s) resumes the job.
holder=$(lease_pid "$job")
[ -n "$holder" ] || fail "nobody holds the lease of job $job"
assert_eq t "$(psql_c bdn "SELECT pg_terminate_backend($holder, 5000)")" "the other runner's backend ended"
wait "$HOLDER" 2>/dev/null || true
t0=$(now_ms)
wait_state "$job" READY 60000
echo "    READY after $(($(now_ms) - t0)) ms"
assert_eq 1 "$(psql_c bdn "SELECT count(*) FROM versions v JOIN volumes o ON o.id = v.volume_id WHERE o.ns = 'w' AND o.name = 'taken'")" \
  "versions of bdn:w/taken"

step "the lease's connection ends and nobody takes it: the run takes it again and goes on"
job=$(start_job free)
pid=$(lease_pid "$job")
[ -n "$pid" ] || fail "no backend holds the lease of running job $job"
assert_eq t "$(psql_c bdn "SELECT pg_terminate_backend($pid, 5000)")" "the lease's backend ended"
wait_for_log "sync job $job: its lease was lost (its database connection ended)"
wait_for_log "sync job $job: lease taken again; the run goes on"
[ -n "$(lease_pid "$job")" ] || fail "nobody holds the lease of job $job after it was taken again"
t0=$(now_ms)
wait_state "$job" READY 60000
echo "    READY after $(($(now_ms) - t0)) ms"
assert_eq "1" "$(psql_c bdn "SELECT runs FROM sync_jobs WHERE id = '$job'")" "runs of the job"
assert_absent "sync job $job: another runner took the job" "a run whose lease was free again" "$WORK/e.log"

step "the lease lost while the origin stalls, and the job cancelled through another replica: no commit"
# The stalled run came back, took the free lease again and committed a version under a job the
# API had reported CANCELED (or that another replica had ended FAILED). Replica f has no
# --sync-file-root: a poll of it that runs the job meanwhile fails it (file_not_allowed), which
# the run must respect the same way.
start_bdn f serve --listen 127.0.0.1:0 --data "$WORK/f" --db "$DB"
F_PID=$STARTED_PID
F=$STARTED_URL
job=$(start_job ended)
pid=$(lease_pid "$job")
[ -n "$pid" ] || fail "no backend holds the lease of running job $job"
kill -STOP "$E_PID"
assert_eq t "$(psql_c bdn "SELECT pg_terminate_backend($pid, 5000)")" "the lease's backend ended"
BDN_REMOTE="$F" "$BDN" volume sync cancel "$job" >"$WORK/cancel.out" 2>&1 || true
ended=$(psql_c bdn "SELECT state FROM sync_jobs WHERE id = '$job'")
case "$ended" in CANCELED | FAILED) ;; *) fail "job $job: $ended after the cancel ($(cat "$WORK/cancel.out"))" ;; esac
kill -CONT "$E_PID"
wait_for_log "sync job $job: $ended meanwhile (ended while its lease was lost); this run stops"
sleep 1
assert_eq "$ended" "$(psql_c bdn "SELECT state FROM sync_jobs WHERE id = '$job'")" "state of the job"
assert_eq 0 "$(psql_c bdn "SELECT count(*) FROM versions v JOIN volumes o ON o.id = v.volume_id WHERE o.ns = 'w' AND o.name = 'ended'")" \
  "versions of bdn:w/ended"
assert_eq 0 "$(psql_c bdn "SELECT count(*) FROM push_claims WHERE ns = 'w' AND volume = 'ended'")" \
  "push claims left on bdn:w/ended"

for pid in "$E_PID" "$F_PID"; do
  kill -TERM "$pid"
  wait "$pid" || fail "an origin did not stop cleanly: $(cat "$WORK/e.log" "$WORK/f.log")"
done
echo "PASS"
