#!/usr/bin/env bash
# Stateless origins behind a real load balancer (issue 12 item 3; README "Scaled out"), started
# by scripts/cluster.sh: PostgreSQL, s3rver, two `bdn serve --store s3:// --db postgresql://`
# replicas, HAProxy in front of them and one cache node. Everything goes through
# HAProxy:
# - both replicas started at once create exactly one admin key (one row, one admin.token, the
#   token works on both);
# - a push whose chunk uploads land on both replicas and whose commit lands on either one
#   succeeds; pull (and a mount through the cache node, where FUSE works) give the same bytes
#   (cmp, b3sum); tags move; `bdn volume verify` passes;
# - two concurrent pushers to one volume: each succeeds or gets a clean "push in progress"
#   conflict, and once the loser pushes again both versions are there with distinct sequences;
#   two pushers to two volumes at once both succeed;
# - `kill -9` of one replica in the middle of a push: the client's retries go to the other
#   replica, the push completes, the version pulls back whole, `bdn volume verify` passes for
#   every version listed (nothing half-visible);
# - a GC on one replica (restarted collecting every 2 s) deletes the packs of a removed version;
#   a push of the same data through the other replica stores it again and verifies (the other
#   replica must not answer from an index that still names the deleted packs);
# - cluster.sh's guards: only a cluster directory of the caller's own, named without a link in
#   any component or a control character, is used (every command but up refuses another one);
#   a pid file's process is the cluster's only with the exact arguments cluster.sh gave it; a
#   PostgreSQL directory is started, stopped or deleted only if its bdn-cluster-owner names this
#   cluster; bench/run_cluster.sh claims its work directory (bench/lib.sh claim_workdir: not a
#   directory of other files, not while another run holds it), resets a cluster a killed run left
#   there first, and deletes the directory at the end.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE
CLUSTER="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster.sh"
[ -f "$(dirname "$0")/../npm/node_modules/s3rver/bin/s3rver.js" ] \
  || fail "s3rver is not installed: run scripts/setup.sh (npm ci in tests/npm)"
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] \
  || fail "HAProxy is not installed: run scripts/setup.sh (Debian package haproxy)"
CDIR="$WORK/cluster"
export BDN_CLUSTER_DIR="$CDIR"

# The cluster goes down (and its PostgreSQL directory away) before lib.sh's cleanup.
ha_cleanup() {
  local rc=$?
  BDN_CLUSTER_DIR="$WORK/cluster-bad" bash "$CLUSTER" reset >/dev/null 2>&1 || true
  BDN_CLUSTER_DIR="$WORK/cluster-dead" bash "$CLUSTER" reset >/dev/null 2>&1 || true
  bash "$CLUSTER" down >/dev/null 2>&1 || true
  rm -rf "${OTHERPG:-}" "${BWPG:-}"
  if [ -s "$CDIR/pg.dir" ]; then
    cp "$(cat "$CDIR/pg.dir")/log" "$WORK/postgres.log" 2>/dev/null || true
    rm -rf "$(cat "$CDIR/pg.dir")"
  fi
  (exit "$rc")
  cleanup
}
trap ha_cleanup EXIT

step "scripts/cluster.sh up: both replicas start at once, exactly one admin key"
bash "$CLUSTER" up >"$WORK/up.out" 2>&1 || fail "cluster.sh up: $(cat "$WORK/up.out")"
# shellcheck disable=SC1091
source "$CDIR/cluster.env"
assert_eq "# source this file: the cluster addresses ($(printf '%q' "$CDIR"))" "$(sed -n 1p "$CDIR/cluster.env")" \
  "cluster.env's first line"
LB=$BDN_CLUSTER_LB
O1=$BDN_CLUSTER_ORIGIN1
O2=$BDN_CLUSTER_ORIGIN2
status_out=$(bash "$CLUSTER" status) || fail "cluster.sh status: $status_out"
for s in s3rver origin1 origin2 haproxy cache postgres; do
  [[ "$status_out" =~ (^|$'\n')"$s"\ +running ]] || fail "$s is not running: $status_out"
done
psql_ha() { "$BDN_CLUSTER_PG_BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 "$BDN_CLUSTER_DB" -c "$1"; }
# The admin key, and the cache node's pull key that cluster.sh created with it.
assert_eq 1 "$(psql_ha "SELECT count(*) FROM api_keys WHERE scopes LIKE '%admin%'")" "admin keys in the database"
assert_eq "admin pull" "$(psql_ha "SELECT string_agg(CASE WHEN scopes LIKE '%admin%' THEN 'admin' ELSE scopes END, ' ' ORDER BY rowid) FROM api_keys")" \
  "keys in the database"
created=0
for n in 1 2; do
  if [ -f "$CDIR/origin$n/admin.token" ]; then
    created=$((created + 1))
    assert_contains "$(cat "$CDIR/logs/origin$n.log")" "created the first admin key"
  fi
done
assert_eq 1 "$created" "replicas that created the first admin key"
TOKEN=$(cat "$CDIR/admin.token")
for url in "$O1" "$O2" "$LB"; do
  assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$url/v1/keys")" \
    "the admin token on $url"
done
export BDN_TOKEN="$TOKEN" BDN_REMOTE="$LB"

# puts N: chunk uploads (one chunk each, or a batch of chunks) origin N has logged so far.
puts() { grep -c -E '(PUT /v1/chunks/[0-9a-f]{64}|POST /v1/chunks/upload) 20[01]' "$CDIR/logs/origin$1.log" || true; }
# commits N: commits origin N has answered 200.
commits() { grep -c -E 'POST /v1/volumes/[^ ]+/commit 200' "$CDIR/logs/origin$1.log" || true; }
# same_tree A B: every file of A is in B with the same bytes (cmp) and digest (b3sum), and B has no
# other file.
same_tree() {
  local f
  assert_eq "$(cd "$1" && find . -type f | sort)" "$(cd "$2" && find . -type f | sort)" "files of $2"
  while IFS= read -r f; do
    cmp "$1/$f" "$2/$f" || fail "$2/$f differs from $1/$f"
    assert_eq "$(b3sum --no-names "$1/$f")" "$(b3sum --no-names "$2/$f")" "b3sum of $2/$f"
  done < <(cd "$1" && find . -type f)
}
# verify_all REF: `bdn volume verify` passes for every version of REF.
verify_all() {
  local d
  for d in $("$BDN" volume versions "$1" --json | python3 -c 'import json,sys; print(" ".join(v["digest"] for v in json.load(sys.stdin)["versions"]))'); do
    "$BDN" volume verify "$1@$d" >/dev/null 2>"$WORK/verify.err" || fail "verify $1@$d: $(cat "$WORK/verify.err")"
  done
}

step "push through HAProxy without a session: uploads on both replicas, one commit"
mkdir -p "$WORK/src/sub"
random_file "$WORK/src/model.bin" $((24 << 20)) 1
random_file "$WORK/src/sub/shard.bin" $((6 << 20)) 2
printf '{"hidden": 64}\n' >"$WORK/src/config.json"
p1=$(puts 1) p2=$(puts 2) c1=$(commits 1) c2=$(commits 2)
# BDN_SESSION= sends no Bdn-Session: HAProxy spreads the push over both replicas, and the commit
# needs the other replica's packs.
ref=$(BDN_SESSION= "$BDN" volume push "$WORK/src" bdn:ha/model --tag prod 2>"$WORK/push1.err") \
  || fail "push: $(cat "$WORK/push1.err")"
[ "$(puts 1)" -gt "$p1" ] || fail "no chunk upload went to origin1"
[ "$(puts 2)" -gt "$p2" ] || fail "no chunk upload went to origin2"
assert_eq 1 $(($(commits 1) + $(commits 2) - c1 - c2)) "commits answered 200"

step "a push's session keeps its uploads and its commit on one replica"
mkdir -p "$WORK/sess"
random_file "$WORK/sess/model.bin" $((12 << 20)) 3
p1=$(puts 1) p2=$(puts 2) c1=$(commits 1) c2=$(commits 2)
"$BDN" volume push "$WORK/sess" bdn:ha/session >/dev/null 2>"$WORK/sess.err" \
  || fail "push: $(cat "$WORK/sess.err")"
d1=$(($(puts 1) - p1)) d2=$(($(puts 2) - p2))
{ [ "$d1" -gt 0 ] && [ "$d2" = 0 ]; } || { [ "$d1" = 0 ] && [ "$d2" -gt 0 ]; } \
  || fail "uploads of one push went to both replicas: $d1 to origin1, $d2 to origin2"
on=1 c_on=$c1
if [ "$d2" -gt 0 ]; then on=2 c_on=$c2; fi
assert_eq 1 $(($(commits "$on") - c_on)) "commits on origin$on, the replica of the uploads"
assert_eq $((c1 + c2 + 1)) $(($(commits 1) + $(commits 2))) "commits answered 200"
assert_eq 0 "$(grep -c "storing what is missing again" "$WORK/sess.err" || true)" \
  "rounds of storing again ($(cat "$WORK/sess.err"))"

step "pull and verify through HAProxy; the tag moves"
"$BDN" volume pull bdn:ha/model:prod "$WORK/pulled" >/dev/null
same_tree "$WORK/src" "$WORK/pulled"
"$BDN" volume verify bdn:ha/model:prod >/dev/null
"$BDN" volume tag set --volume-ref "$ref" --tag stable >/dev/null
for url in "$O1" "$O2"; do
  assert_eq "${ref#*@}" "$(BDN_REMOTE="$url" "$BDN" --json volume stat bdn:ha/model:stable | json_field digest)" \
    "tag stable through $url"
done

if [ -c /dev/fuse ] && { : <>/dev/fuse; } 2>/dev/null && command -v fusermount3 >/dev/null; then
  step "mount through the cache node, in front of HAProxy"
  BDN_CLUSTER_CACHE=$BDN_CLUSTER_CACHE_NODE mount_volume bdn:ha/model:stable "$WORK/mnt"
  same_tree "$WORK/src" "$WORK/mnt"
  "$BDN" volume umount "$WORK/mnt" >/dev/null
else
  step "no FUSE here: the mount is left out"
fi

step "two pushers to one volume at once: one may lose the claim cleanly, then both versions land"
for i in 1 2; do
  mkdir -p "$WORK/c$i"
  random_file "$WORK/c$i/w.bin" $((5 << 20)) $((10 + i))
done
"$BDN" --json volume push "$WORK/c1" bdn:ha/shared >"$WORK/c1.out" 2>"$WORK/c1.err" &
P1=$!
"$BDN" --json volume push "$WORK/c2" bdn:ha/shared >"$WORK/c2.out" 2>"$WORK/c2.err" &
P2=$!
r1=0; wait "$P1" || r1=$?
r2=0; wait "$P2" || r2=$?
for i in 1 2; do
  rc=$r1; [ "$i" = 2 ] && rc=$r2
  if [ "$rc" -ne 0 ]; then
    assert_eq 4 "$rc" "exit code of pusher $i ($(cat "$WORK/c$i.err"))"
    assert_contains "$(cat "$WORK/c$i.err")" "push in progress"
    for _ in $(seq 1 100); do
      rc=0
      "$BDN" --json volume push "$WORK/c$i" bdn:ha/shared >"$WORK/c$i.out" 2>"$WORK/c$i.err" || rc=$?
      [ "$rc" -ne 4 ] && break
      sleep 0.2
    done
    assert_eq 0 "$rc" "pusher $i pushing again ($(cat "$WORK/c$i.err"))"
  fi
done
s1=$(json_field sequence <"$WORK/c1.out")
s2=$(json_field sequence <"$WORK/c2.out")
[ "$s1" != "$s2" ] || fail "both pushes got sequence $s1"
assert_eq 2 "$("$BDN" volume versions bdn:ha/shared --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')" \
  "versions of bdn:ha/shared"
verify_all bdn:ha/shared

step "two pushers to two volumes at once"
"$BDN" volume push "$WORK/c1" bdn:ha/one >"$WORK/one.out" 2>"$WORK/one.err" &
P1=$!
"$BDN" volume push "$WORK/c2" bdn:ha/two >"$WORK/two.out" 2>"$WORK/two.err" &
P2=$!
wait "$P1" || fail "push to bdn:ha/one: $(cat "$WORK/one.err")"
wait "$P2" || fail "push to bdn:ha/two: $(cat "$WORK/two.err")"
"$BDN" volume pull bdn:ha/one "$WORK/one" >/dev/null
same_tree "$WORK/c1" "$WORK/one"
"$BDN" volume pull bdn:ha/two "$WORK/two" >/dev/null
same_tree "$WORK/c2" "$WORK/two"

step "kill -9 of one replica in the middle of a push: the push completes through the other"
mkdir -p "$WORK/big"
for i in 1 2 3 4; do random_file "$WORK/big/part$i.bin" $((16 << 20)) $((20 + i)); done
# A session HAProxy sends to origin1, the replica killed: found by asking with a few ids. An
# origin logs a request once its answer is written, which may be after the client has exited:
# wait for the probe's line on either origin before judging.
requests() { grep -c ' access .* /v1/' "$CDIR/logs/origin$1.log" || true; }
session=""
for k in $(seq 1 64); do
  r1=$(requests 1) r2=$(requests 2)
  BDN_SESSION="ha-$k" "$BDN" volume versions bdn:ha/model >/dev/null
  for _ in $(seq 1 250); do
    [ $(($(requests 1) + $(requests 2))) -gt $((r1 + r2)) ] && break
    sleep 0.02
  done
  sleep 0.2  # the probe's other requests, if any
  if [ "$(requests 1)" -gt "$r1" ] && [ "$(requests 2)" = "$r2" ]; then session="ha-$k"; break; fi
done
[ -n "$session" ] || fail "no session of 64 was sent to origin1"
VICTIM_PID=$(cat "$CDIR/pids/origin1.pid")
before=$(puts 1) before2=$(puts 2)
BDN_SESSION=$session "$BDN" volume push "$WORK/big" bdn:ha/big --tag prod >"$WORK/big.out" 2>"$WORK/big.err" &
PUSH=$!
PIDS+=("$PUSH")
# Once origin1 has taken a few of this push's uploads (and while the push still runs).
landed=0
for _ in $(seq 1 3000); do
  kill -0 "$PUSH" 2>/dev/null || break
  if [ "$(puts 1)" -ge $((before + 3)) ]; then landed=1; break; fi
  sleep 0.01
done
assert_eq 1 "$landed" "origin1 took uploads while the push ran ($(cat "$WORK/big.err"))"
assert_eq "$before2" "$(puts 2)" "uploads of the push on origin2 before the kill"
kill -9 "$VICTIM_PID"
wait_gone "$VICTIM_PID" 10000
rc=0; wait "$PUSH" || rc=$?
untrack "$PUSH"
assert_eq 0 "$rc" "exit code of the push that lost a replica ($(cat "$WORK/big.err"))"
[ "$(puts 2)" -gt "$before2" ] || fail "no upload of the push went to origin2 after the kill"
rounds=$(grep -c "storing what is missing again" "$WORK/big.err" || true)
echo "the push committed after $rounds round(s) of storing what the killed replica had not uploaded"
# Its summary counts chunks stored again apart: "N new" never exceeds the version's chunks.
summary=$(sed -n '/^sealed: /p' "$WORK/big.err")
read -r nchunks nnew <<<"$(sed -n 's/^sealed: .*, \([0-9]*\) chunks (\([0-9]*\) new, .*/\1 \2/p' <<<"$summary")"
[ -n "$nnew" ] && [ "$nnew" -le "$nchunks" ] || fail "push summary: $summary"
bigref=$(cat "$WORK/big.out")
"$BDN" volume verify "$bigref" >/dev/null
"$BDN" volume pull bdn:ha/big:prod "$WORK/bigpulled" >/dev/null
same_tree "$WORK/big" "$WORK/bigpulled"
assert_eq 1 "$("$BDN" volume versions bdn:ha/big --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')" \
  "versions of bdn:ha/big"
verify_all bdn:ha/big
verify_all bdn:ha/model
status_out=$(bash "$CLUSTER" status) && fail "status says all is well with origin1 killed: $status_out"
[[ "$status_out" =~ (^|$'\n')origin1\ +stopped ]] || fail "status after the kill: $status_out"
[[ "$status_out" =~ (^|$'\n')origin2\ +running ]] || fail "status after the kill: $status_out"

step "a GC on one replica deletes packs; a push of that data through the other stores it again"
# origin1 again, collecting every 2 s with nothing retained (cluster.sh's origins collect hourly).
# shellcheck disable=SC1091
source "$CDIR/aws.env"
"$BDN" serve --listen "${O1#http://}" --data "$CDIR/origin1" --db "$BDN_CLUSTER_DB" \
  --store s3://bdn/cluster --s3-endpoint "$BDN_CLUSTER_S3" --s3-region us-east-1 \
  --gc-interval 2s --gc-grace 1s --retention 0s </dev/null >>"$CDIR/logs/origin1.log" 2>&1 &
echo $! >"$CDIR/pids/origin1.pid"  # cluster.sh down stops it
up=0
for _ in $(seq 1 300); do
  if curl -sf "$O1/healthz" >/dev/null; then up=1; break; fi
  sleep 0.1
done
assert_eq 1 "$up" "origin1 restarted"
mkdir -p "$WORK/gc1" "$WORK/gc2"
random_file "$WORK/gc1/A.bin" $((12 << 20)) 41
random_file "$WORK/gc2/tail" $((1 << 20)) 42
cat "$WORK/gc1/A.bin" "$WORK/gc2/tail" >"$WORK/gc2/A.bin"  # the same chunks, and one more
rm "$WORK/gc2/tail"
# Pushed through origin2 only, so that origin2's index is the one that knows these packs.
gcref=$(BDN_REMOTE=$O2 "$BDN" volume push "$WORK/gc1" bdn:ha/gc 2>"$WORK/gc1.err") \
  || fail "push of gc1: $(cat "$WORK/gc1.err")"
# The bytes reclaimed so far: after the rm, at least the removed version's 12 MiB of random data
# (no other volume shares it), over one collection or several (a pack still in use is repacked,
# and the orphans of the killed push may go in the same runs).
reclaimed() { sed -n 's/.*gc: reclaimed \([0-9]*\) bytes.*/\1/p' "$CDIR/logs/origin1.log" | awk '{s += $1} END {print s + 0}'; }
before=$(reclaimed)
BDN_REMOTE=$O1 "$BDN" volume rm "$gcref" --yes >/dev/null
collected=0
for _ in $(seq 1 600); do
  if [ $(($(reclaimed) - before)) -ge $((12 << 20)) ]; then collected=1; break; fi
  sleep 0.1
done
assert_eq 1 "$collected" "origin1's GC reclaimed the removed version's packs"
# origin2 must not answer from its index that the collected chunks are stored.
gcref2=$(BDN_REMOTE=$O2 "$BDN" volume push "$WORK/gc2" bdn:ha/gc 2>"$WORK/gc2.err") \
  || fail "push of gc2 through origin2: $(cat "$WORK/gc2.err")"
for url in "$O2" "$O1"; do
  BDN_REMOTE=$url "$BDN" volume verify "$gcref2" >/dev/null 2>"$WORK/verify.err" \
    || fail "verify $gcref2 through $url: $(cat "$WORK/verify.err")"
done
BDN_REMOTE=$O2 "$BDN" volume pull "$gcref2" "$WORK/gc2pulled" >/dev/null
same_tree "$WORK/gc2" "$WORK/gc2pulled"
# What the collections repacked on origin1 stays whole through both replicas.
for url in "$O1" "$O2"; do
  BDN_REMOTE=$url verify_all bdn:ha/big
  BDN_REMOTE=$url verify_all bdn:ha/model
done

step "cluster.sh stop origin2 / start origin2: one replica away and back on its address"
out=$(bash "$CLUSTER" stop origin2) || fail "cluster.sh stop origin2: $out"
assert_eq "cluster: origin2 stopped" "$out" "stop's answer"
status_out=$(bash "$CLUSTER" status) && fail "status says all is well with origin2 stopped: $status_out"
[[ "$status_out" =~ (^|$'\n')origin2\ +stopped ]] || fail "status after stop origin2: $status_out"
curl -s --max-time 2 "$O2/healthz" >/dev/null && fail "origin2 still answers after stop"
BDN_REMOTE=$LB verify_all bdn:ha/model  # through HAProxy, on origin1 alone
out=$(bash "$CLUSTER" start origin2 2>&1) || fail "cluster.sh start origin2: $out"
assert_eq "cluster: origin2 started on $O2" "$out" "start's answer"
status_out=$(bash "$CLUSTER" status) || fail "status after start origin2: $status_out"
BDN_REMOTE=$O2 verify_all bdn:ha/model
run_fails 1 "cluster: origin2 is running already" bash "$CLUSTER" start origin2
run_fails 2 'cluster: stop takes origin1 or origin2, not "haproxy"' bash "$CLUSTER" stop haproxy

step "cluster.sh down stops everything; reset deletes the state"
bash "$CLUSTER" down >/dev/null
status_out=$(bash "$CLUSTER" status) && fail "status after down: $status_out"
[[ "$status_out" != *running* ]] || fail "still running after down: $status_out"
# A pid file left behind that names an unrelated process by now: not reported, not killed.
sleep 600 &
DECOY=$!
PIDS+=("$DECOY")
echo "$DECOY" >"$CDIR/pids/origin2.pid"
status_out=$(bash "$CLUSTER" status) && fail "status with a stale pid file: $status_out"
[[ "$status_out" =~ (^|$'\n')origin2\ +stopped ]] || fail "status with a stale pid file: $status_out"
# Nor one whose arguments merely mention the cluster's directory, or a near miss of the exact pair
# cluster.sh gave the service (--data DIR/origin1, -f DIR/haproxy.cfg).
python3 -c 'import time; time.sleep(600)' --data "$CDIR/origin1x" -f "$CDIR/" "$CDIR/haproxy.cfg" &
DECOY2=$!
PIDS+=("$DECOY2")
echo "$DECOY2" >"$CDIR/pids/origin1.pid"
echo "$DECOY2" >"$CDIR/pids/haproxy.pid"
status_out=$(bash "$CLUSTER" status) && fail "status with pid files of near misses: $status_out"
[[ "$status_out" =~ (^|$'\n')origin1\ +stopped ]] || fail "status with a near-miss pid file: $status_out"
[[ "$status_out" =~ (^|$'\n')haproxy\ +stopped ]] || fail "status with a near-miss pid file: $status_out"
bash "$CLUSTER" down >/dev/null
kill -0 "$DECOY" 2>/dev/null || fail "cluster.sh down killed pid $DECOY, which was not the cluster's"
kill -0 "$DECOY2" 2>/dev/null || fail "cluster.sh down killed pid $DECOY2, whose arguments only mention $CDIR"
pgdir=$(cat "$CDIR/pg.dir")
[ -d "$pgdir/data" ] || fail "no PostgreSQL directory at $pgdir"
out=$(bash "$CLUSTER" reset) || fail "cluster.sh reset: $out"
[ ! -e "$CDIR" ] || fail "reset left $CDIR"
[ ! -e "$pgdir" ] || fail "reset left $pgdir"
assert_eq "cluster: never started in $CDIR" "$(bash "$CLUSTER" status)" "status after reset"

step "an up that fails half-way: status says what it started, reset stops and deletes it"
BAD="$WORK/cluster-bad"
run_fails 1 "cluster: origin1 exited: see $BAD/logs/origin1.log" \
  env BDN_CLUSTER_DIR="$BAD" BDN=/bin/false bash "$CLUSTER" up
status_out=$(BDN_CLUSTER_DIR="$BAD" bash "$CLUSTER" status) && fail "status after a failed up: $status_out"
[[ "$status_out" =~ (^|$'\n')s3rver\ +running\ +[0-9]+\ +http://127 ]] || fail "status after a failed up: $status_out"
[[ "$status_out" =~ (^|$'\n')origin1\ +stopped ]] || fail "status after a failed up: $status_out"
[[ "$status_out" =~ (^|$'\n')haproxy\ +stopped\ +-\ +-($'\n') ]] || fail "status after a failed up: $status_out"
[[ "$status_out" =~ (^|$'\n')postgres\ +running ]] || fail "status after a failed up: $status_out"
run_fails 1 "cluster: s3rver is running already ($BAD): $CLUSTER down first" \
  env BDN_CLUSTER_DIR="$BAD" bash "$CLUSTER" up
s3pid=$(cat "$BAD/pids/s3rver.pid")
kill "$s3pid"
run_fails 1 "cluster: PostgreSQL of this cluster is running already (after an up that failed?): $CLUSTER down first" \
  env BDN_CLUSTER_DIR="$BAD" bash "$CLUSTER" up
badpg=$(cat "$BAD/pg.dir")
BDN_CLUSTER_DIR="$BAD" bash "$CLUSTER" reset >/dev/null
[ ! -e "$BAD" ] && [ ! -e "$badpg" ] || fail "reset left $BAD or $badpg"

step "cluster.sh deletes and writes only a cluster directory of the caller's own"
# A directory that holds no cluster is not deleted, nor used by up, nor named through a link.
PRECIOUS="$WORK/precious"
mkdir -p "$PRECIOUS/data"; echo keep >"$PRECIOUS/data/f"
run_fails 2 "cluster: $PRECIOUS holds no cluster (no cluster.env and pids/): not deleting it" \
  bash "$CLUSTER" --dir "$PRECIOUS" reset
run_fails 2 "cluster: $PRECIOUS is not empty and holds no cluster: use a new or empty directory" \
  bash "$CLUSTER" --dir "$PRECIOUS" up
for cmd in down status "stop origin1" "start origin1"; do
  # shellcheck disable=SC2086  # cmd is one or two words
  run_fails 2 "cluster: $PRECIOUS holds no cluster (no cluster.env and pids/): not using it" \
    bash "$CLUSTER" --dir "$PRECIOUS" $cmd
done
[ ! -e "$PRECIOUS/.lock" ] || fail "cluster.sh wrote $PRECIOUS/.lock in a directory that holds no cluster"
ln -s "$PRECIOUS" "$WORK/link"
run_fails 2 "cluster: --dir $WORK/link is a symbolic link: name the directory itself" \
  bash "$CLUSTER" --dir "$WORK/link" reset
# Nor with a trailing slash, nor through a link in a parent component (an up there would create
# the directory in the link's target).
for d in "$WORK/link/" "$WORK/link//"; do
  run_fails 2 "cluster: --dir $WORK/link is a symbolic link: name the directory itself" bash "$CLUSTER" --dir "$d" reset
done
run_fails 2 "cluster: --dir $WORK/link/data goes through a symbolic link ($WORK/link/data is $PRECIOUS/data): name the directory by its real path" \
  bash "$CLUSTER" --dir "$WORK/link/data" down
run_fails 2 "cluster: --dir $WORK/link/new goes through a symbolic link ($WORK/link is $PRECIOUS): name the directory by its real path" \
  bash "$CLUSTER" --dir "$WORK/link/new" up
[ ! -e "$PRECIOUS/new" ] || fail "up through $WORK/link created $PRECIOUS/new"
assert_eq keep "$(cat "$PRECIOUS/data/f")" "the unrelated directory's file"
# A control character in the directory (a newline would inject commands into cluster.env).
NL_DIR="$WORK/a"$'\n'"touch $WORK/injected"
run_fails 2 "cluster: --dir $(printf '%q' "$NL_DIR"): empty or holds a control character: use a plain path" \
  bash "$CLUSTER" --dir "$NL_DIR" up
run_fails 2 "cluster: --dir $(printf '%q' "$WORK/t"$'\t'"ab"): empty or holds a control character: use a plain path" \
  env BDN_CLUSTER_DIR="$WORK/t"$'\t'"ab" bash "$CLUSTER" status
[ ! -e "$WORK/a" ] || fail "up made $WORK/a for a directory with a newline in its name"
# A pg.dir naming a directory outside what up made ("..") is not deleted by reset.
FAKE="$WORK/fake-cluster"
mkdir -p "$FAKE/pids" "$WORK/victim"; chmod 700 "$FAKE"; touch "$FAKE/cluster.env"
mkdir "/tmp/bdn-cluster-pg.x$$"  # so that the path resolves
echo "/tmp/bdn-cluster-pg.x$$/../${WORK#/tmp/}/victim" >"$FAKE/pg.dir"
bash "$CLUSTER" --dir "$FAKE" reset >/dev/null 2>&1
rmdir "/tmp/bdn-cluster-pg.x$$"
[ -d "$WORK/victim" ] || fail "reset followed a pg.dir with .. to $WORK/victim"
[ ! -e "$FAKE" ] || fail "reset left $FAKE"
# Another cluster's PostgreSQL directory (a name up made, but its bdn-cluster-owner names that
# cluster) is not deleted by reset nor started by up: pg.dir copied from elsewhere or edited.
# Whoever runs PostgreSQL owns the directory (postgres when root); the owner file is the caller's.
pg_owned_dir() {
  local d; d=$(mktemp -d /tmp/bdn-cluster-pg.XXXXXX)
  echo "$1" >"$d/bdn-cluster-owner"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$d"; fi
  echo "$d"
}
OTHERPG=$(pg_owned_dir "$WORK/some-other-cluster")
mkdir -p "$FAKE/pids"; chmod 700 "$FAKE"; touch "$FAKE/cluster.env"
echo "$OTHERPG" >"$FAKE/pg.dir"
run_fails 1 "cluster: $FAKE/pg.dir names $OTHERPG, which is not this cluster's PostgreSQL directory (no bdn-cluster-owner naming $FAKE in it, or not its owner's): remove $FAKE/pg.dir for a new one" \
  bash "$CLUSTER" --dir "$FAKE" up
out=$(bash "$CLUSTER" --dir "$FAKE" reset 2>&1 >/dev/null) || fail "reset of $FAKE: $out"
assert_eq "cluster: $FAKE/pg.dir names $OTHERPG, which is not this cluster's PostgreSQL directory (no bdn-cluster-owner naming $FAKE in it, or not its owner's): not stopping or deleting it" \
  "$out" "reset's word on another cluster's PostgreSQL directory"
[ -f "$OTHERPG/bdn-cluster-owner" ] || fail "reset of $FAKE deleted $OTHERPG, another cluster's"
[ ! -e "$FAKE" ] || fail "reset left $FAKE"
rm -rf "$OTHERPG"
# One command at a time per cluster directory.
mkdir -p "$FAKE/pids"; chmod 700 "$FAKE"; touch "$FAKE/cluster.env"
exec 8>>"$FAKE/.lock"; flock 8
run_fails 1 "cluster: another $CLUSTER is running on $FAKE; try again when it ends" \
  bash "$CLUSTER" --dir "$FAKE" status
exec 8>&-
# A service that exits at once is reported at once, not after the 60 s wait.
mkdir -p "$WORK/fakebin"; printf '#!/bin/sh\nexit 3\n' >"$WORK/fakebin/node"; chmod +x "$WORK/fakebin/node"
DEAD="$WORK/cluster-dead"
run_fails 1 "cluster: s3rver exited: see $DEAD/logs/s3rver.log" \
  env PATH="$WORK/fakebin:$PATH" bash "$CLUSTER" --dir "$DEAD" up
bash "$CLUSTER" --dir "$DEAD" reset >/dev/null
[ ! -e "$DEAD" ] || fail "reset left $DEAD"

step "bench/run_cluster.sh claims its work directory, resets what a killed run left, deletes it"
RUN_CLUSTER="$(dirname "$CLUSTER")/../bench/run_cluster.sh"
run_fails 2 "bench: work directory $PRECIOUS is not empty and no bench run made it (no .bdn-bench): name a new or empty directory" \
  bash "$RUN_CLUSTER" "$PRECIOUS"
run_fails 2 "bench: work directory $WORK/link is a symbolic link: name the directory itself" \
  bash "$RUN_CLUSTER" "$WORK/link/"
assert_eq keep "$(cat "$PRECIOUS/data/f")" "the unrelated directory's file"
# What a killed run leaves: its work directory with a cluster in it, whose PostgreSQL directory
# is outside. Another run on it at the same time is refused; the next one resets that cluster
# (its PostgreSQL directory goes) and deletes the directory at the end (here: at once, the
# checkpoint generator refusing the size).
BW="$WORK/bench-work"
mkdir -p "$BW/cluster/pids" "$BW/gen"; chmod 700 "$BW/cluster"; touch "$BW/.bdn-bench" "$BW/cluster/cluster.env"
BWPG=$(pg_owned_dir "$BW/cluster")
echo "$BWPG" >"$BW/cluster/pg.dir"
exec 8>>"$BW/.bdn-bench"; flock 8
run_fails 1 "bench: work directory $BW is in use by another run (or by a process one left running: fuser -v $BW/.bdn-bench)" \
  bash "$RUN_CLUSTER" "$BW"
exec 8>&-
[ -d "$BW/gen" ] && [ -d "$BWPG" ] || fail "a refused run of bench/run_cluster.sh deleted $BW/gen or $BWPG"
rc=0; BDN_BENCH_SIZE_MIB=none bash "$RUN_CLUSTER" "$BW" >/dev/null 2>"$WORK/bench.err" || rc=$?
[ "$rc" -ne 0 ] || fail "bench/run_cluster.sh with BDN_BENCH_SIZE_MIB=none succeeded"
[ ! -e "$BWPG" ] || fail "bench/run_cluster.sh did not reset the cluster left in $BW (its $BWPG is there)"
[ ! -e "$BW" ] || fail "bench/run_cluster.sh left $BW: $(cat "$WORK/bench.err")"
# Another user's directory (one made in /tmp before this user's first up) is refused.
if [ "$(id -u)" = 0 ]; then
  chown nobody "$FAKE"
  run_fails 2 "cluster: $FAKE belongs to another user: use a directory of your own" \
    bash "$CLUSTER" --dir "$FAKE" up
  chown root "$FAKE"
fi
echo "PASS"
