#!/usr/bin/env bash
# A scaled-out deployment, every component real and started here: PostgreSQL (lib.sh
# start_postgres), s3rver behind the SigV4-checking, fault-injecting proxy, two `bdn serve --db …
# --store s3://…` replicas (each its own --data) and HAProxy (Debian's haproxy) in front,
# round-robin, health-checked on GET /healthz. Through the load balancer, with the CLI in remote
# mode (BDN_REMOTE, BDN_TOKEN):
# - the replicas started at once create exactly one admin key;
# - a 64 MiB tree (several files, one a duplicate of another) pushed with a tag, pulled (cmp,
#   b3sum of the tree), tagged (tag set, the tags in stat), mounted and read (cmp); both
#   replicas took part in the push;
# - two pushes to one volume through the two replicas at once: each succeeds with its own
#   sequence or gets a clean "push in progress" conflict; `bdn volume versions` lists exactly the
#   versions that succeeded (no lost update);
# - a replica killed (kill -9) while a push sends it bytes: the push completes through the other
#   one, `bdn volume verify` passes, the pulled bytes match, one version is visible;
# - the object store answering 503 SlowDown for a while: a push and a pull wait it out;
# - a pack deleted behind bdn's back: `bdn volume verify` exits 5 (corruption) naming the version.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"
needs_fuse
unset BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE
HAPROXY=/usr/sbin/haproxy
if [ ! -x "$HAPROXY" ]; then
  echo "SKIP: $HAPROXY is missing (Debian package haproxy: scripts/setup.sh); $TEST_NAME needs it"
  exit 77
fi

BUCKET=weights
PREFIX=cluster
SECRET="bdn-cluster-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"

step "PostgreSQL, s3rver and the SigV4-checking proxy"
start_postgres
psql_c postgres "CREATE DATABASE bdn" >/dev/null
DB="$PG_URL_BASE/bdn"
start_s3rver
start_s3_proxy "{\"upstream\": \"$S3\", \"keys\": {\"AKIDCLUSTER\": \"$SECRET\"}, \"regions\": [\"eu-west-1\"]}"
aws_direct s3 mb "s3://$BUCKET" >/dev/null
export AWS_ACCESS_KEY_ID=AKIDCLUSTER AWS_SECRET_ACCESS_KEY="$SECRET"

# Fixed ports: HAProxy's configuration names them, and a replica restarted after its kill takes
# its own again.
PORT_A=$(free_port)
PORT_B=$(free_port)
A="http://127.0.0.1:$PORT_A"
B="http://127.0.0.1:$PORT_B"

# start_replica NAME PORT: `bdn serve` on 127.0.0.1:PORT with its data in $WORK/NAME, the registry
# in PostgreSQL and the packs in the bucket (through the proxy), periodic GC off; log appended to
# $WORK/NAME.log; sets REPLICA_PID (not waited for).
start_replica() {
  touch "$WORK/$1.log"
  "$BDN" serve --listen "127.0.0.1:$2" --data "$WORK/$1" --db "$DB" --gc-interval 0s \
    --store "s3://$BUCKET/$PREFIX" --s3-endpoint "$PROXY" --s3-region eu-west-1 2>>"$WORK/$1.log" &
  REPLICA_PID=$!
  PIDS+=("$REPLICA_PID")
}
# wait_listening NAME PID: until the log of replica NAME says it listens.
wait_listening() {
  for _ in $(seq 1 300); do
    grep -q "listening on http://" "$WORK/$1.log" && return 0
    kill -0 "$2" 2>/dev/null || fail "replica $1 exited: $(cat "$WORK/$1.log")"
    sleep 0.1
  done
  fail "replica $1 did not start: $(cat "$WORK/$1.log")"
}

step "two replicas started at once create exactly one admin key"
start_replica a "$PORT_A"
A_PID=$REPLICA_PID
start_replica b "$PORT_B"
B_PID=$REPLICA_PID
wait_listening a "$A_PID"
wait_listening b "$B_PID"
assert_eq 1 "$(psql_c bdn "SELECT count(*) FROM api_keys")" "keys in the database"
tokens=()
for r in a b; do [ -f "$WORK/$r/admin.token" ] && tokens+=("$WORK/$r/admin.token"); done
assert_eq 1 "${#tokens[@]}" "replicas that wrote an admin.token"
TOKEN=$(cat "${tokens[0]}")

step "HAProxy in front: round-robin, health-checked on GET /healthz"
LB_PORT=$(free_port)
STATS_PORT=$(free_port)
"$(dirname "$0")/../../scripts/cluster.sh" haproxy-cfg "$LB_PORT" "$STATS_PORT" 200ms \
  "127.0.0.1:$PORT_A" "127.0.0.1:$PORT_B" >"$WORK/haproxy.cfg"
"$HAPROXY" -c -q -f "$WORK/haproxy.cfg" || fail "haproxy refused its configuration"
touch "$WORK/haproxy.log"
"$HAPROXY" -db -f "$WORK/haproxy.cfg" >>"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
LB="http://127.0.0.1:$LB_PORT"
# lb_status SERVER: HAProxy's health state of SERVER (UP, DOWN, …) from its stats CSV.
lb_status() {
  curl -sf "http://127.0.0.1:$STATS_PORT/stats;csv" |
    awk -F, -v s="$1" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "status") c = i}
                       $1 == "origins" && $2 == s {print $c}'
}
# wait_lb SERVER STATE: until HAProxy reports SERVER in STATE (at most 15 s).
wait_lb() {
  local st=""
  for _ in $(seq 1 150); do
    st=$(lb_status "$1" || true)
    [ "$st" = "$2" ] && return 0
    sleep 0.1
  done
  fail "HAProxy reports server $1 as [$st], expected $2: $(cat "$WORK/haproxy.log")"
}
wait_lb a UP
wait_lb b UP
assert_eq "ok" "$(curl -sf "$LB/healthz")" "GET /healthz through the load balancer"
export BDN_REMOTE="$LB" BDN_TOKEN="$TOKEN"

# metric URL NAME: an unlabelled counter of a replica's /metrics.
metric() { curl -sf "$1/metrics" | awk -v n="$2" '$1 == n {print $2; found=1} END {if (!found) print 0}'; }
# version_digests VOLUME: the digests `bdn volume versions` lists, newest first, one a line.
version_digests() {
  "$BDN" volume versions "$1" --json |
    python3 -c 'import json,sys; print("\n".join(v["digest"] for v in json.load(sys.stdin)["versions"]))'
}
# same_tree WANT GOT: the same entries, modes, sizes and b3sums, and every file the same bytes.
same_tree() {
  assert_eq "$(tree_listing "$1")" "$(tree_listing "$2")" "the tree in $2 (modes, sizes, b3sum)"
  while IFS= read -r f; do cmp "$1/$f" "$2/$f" || fail "$2/$f differs"; done < <(cd "$1" && find . -type f)
}

step "push a 64 MiB tree through the load balancer, pull it, tag it, mount it"
mkdir -p "$WORK/src/tokenizer"
random_file "$WORK/src/model-00001.safetensors" $((36 << 20)) 1
random_file "$WORK/src/model-00002.safetensors" $((20 << 20)) 2
random_file "$WORK/src/tokenizer/vocab.bin" $((4 << 20)) 3
cp "$WORK/src/tokenizer/vocab.bin" "$WORK/src/vocab-copy.bin"
printf '{"hidden": 4096}\n' >"$WORK/src/config.json"
recv_a=$(metric "$A" bdn_chunk_bytes_received_total)
recv_b=$(metric "$B" bdn_chunk_bytes_received_total)
ref=$("$BDN" volume push "$WORK/src" bdn:w/model --tag prod)
[[ "$ref" =~ ^bdn:w/model@b3:[0-9a-f]{64}$ ]] || fail "push printed [$ref]"
got_a=$(( $(metric "$A" bdn_chunk_bytes_received_total) - recv_a ))
got_b=$(( $(metric "$B" bdn_chunk_bytes_received_total) - recv_b ))
echo "    chunk bytes received: replica a $got_a, replica b $got_b"
[ "$got_a" -gt 0 ] && [ "$got_b" -gt 0 ] || fail "round-robin: a received $got_a bytes, b $got_b"
# The duplicate file's chunks travel once.
[ $((got_a + got_b)) -le $(( (60 << 20) + 4096 )) ] || fail "$((got_a + got_b)) chunk bytes sent for 60 MiB of distinct content"
"$BDN" volume pull bdn:w/model:prod "$WORK/pull" >/dev/null
same_tree "$WORK/src" "$WORK/pull"
"$BDN" volume tag set --volume-ref "$ref" --tag stable >/dev/null
digest=${ref#*@}
assert_eq "$digest" "$("$BDN" volume stat bdn:w/model:stable --json | json_field digest)" "the tag stable"
assert_eq '["prod", "stable"]' "$("$BDN" volume stat "$ref" --json | python3 -c 'import json,sys; print(json.dumps(sorted(json.load(sys.stdin)["tags"])))')" \
  "the tags of the version"
mount_volume bdn:w/model:stable "$WORK/mnt"
for f in model-00001.safetensors model-00002.safetensors tokenizer/vocab.bin vocab-copy.bin config.json; do
  cmp "$WORK/src/$f" "$WORK/mnt/$f" || fail "$f through the mount"
done
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "two pushes to one volume through the two replicas at once: no lost update"
for i in 1 2; do
  mkdir -p "$WORK/race$i"
  random_file "$WORK/race$i/weights.bin" $((3 << 20)) $((10 + i))
done
BDN_REMOTE="$A" "$BDN" volume push "$WORK/race1" bdn:w/race >"$WORK/race1.out" 2>"$WORK/race1.err" &
P1=$!
BDN_REMOTE="$B" "$BDN" volume push "$WORK/race2" bdn:w/race >"$WORK/race2.out" 2>"$WORK/race2.err" &
P2=$!
rc1=0 rc2=0
wait "$P1" || rc1=$?
wait "$P2" || rc2=$?
echo "    exit codes: $rc1 $rc2"
won=()
for i in 1 2; do
  rc=$rc1; [ "$i" -eq 2 ] && rc=$rc2
  if [ "$rc" -eq 0 ]; then
    won+=("$(cat "$WORK/race$i.out")")
  else
    assert_eq 4 "$rc" "exit code of the losing push $i ($(cat "$WORK/race$i.err"))"
    [[ "$(cat "$WORK/race$i.err")" =~ ^"bdn: error: volume bdn:w/race: push in progress (claimed by key bdn_"[0-9a-z]+", expires in "[0-9]+" s)"$ ]] \
      || fail "the losing push's error: $(cat "$WORK/race$i.err")"
  fi
done
[ "${#won[@]}" -ge 1 ] || fail "neither push succeeded: $(cat "$WORK/race1.err" "$WORK/race2.err")"
listed=$(version_digests bdn:w/race | sort)
assert_eq "$(printf '%s\n' "${won[@]#*@}" | sort)" "$listed" "versions of bdn:w/race (the pushes that succeeded)"
assert_eq "${#won[@]}" "$("$BDN" volume stat bdn:w/race --json | json_field sequence)" "sequence of bdn:w/race"

step "kill -9 of a replica while a push sends it bytes: the push completes through the other"
mkdir -p "$WORK/kill"
random_file "$WORK/kill/shard-1.bin" $((40 << 20)) 21
random_file "$WORK/kill/shard-2.bin" $((24 << 20)) 22
start_recv=$(metric "$A" bdn_chunk_bytes_received_total)
"$BDN" --json volume push "$WORK/kill" bdn:w/killed >"$WORK/kill.out" 2>"$WORK/kill.err" &
PUSH=$!
PIDS+=("$PUSH")
while kill -0 "$PUSH" 2>/dev/null &&
      [ $(( $(metric "$A" bdn_chunk_bytes_received_total) - start_recv )) -lt $((4 << 20)) ]; do
  sleep 0.01
done
got=$(( $(metric "$A" bdn_chunk_bytes_received_total) - start_recv ))
kill -0 "$PUSH" 2>/dev/null || fail "the push ended before replica a received 4 MiB: $(cat "$WORK/kill.err")"
kill -9 "$A_PID"
wait "$A_PID" 2>/dev/null || true
untrack "$A_PID"
echo "    killed replica a once it had received $got chunk bytes of the push"
rc=0
wait "$PUSH" || rc=$?
untrack "$PUSH"
assert_eq 0 "$rc" "exit code of the push across the kill ($(cat "$WORK/kill.err"))"
kref=$(json_field version_ref <"$WORK/kill.out")
wait_lb a DOWN
assert_eq "${kref#*@}" "$(version_digests bdn:w/killed)" "the versions of bdn:w/killed"
"$BDN" volume verify "$kref" >"$WORK/verify.out" || fail "verify after the kill: $(cat "$WORK/verify.out")"
"$BDN" volume pull "$kref" "$WORK/kill-pull" >/dev/null
same_tree "$WORK/kill" "$WORK/kill-pull"

step "replica a restarted on its port: HAProxy sends it requests again"
start_replica a "$PORT_A"
A_PID=$REPLICA_PID
wait_listening a "$A_PID"
wait_lb a UP
"$BDN" volume verify "$kref" >/dev/null || fail "verify with replica a back"

step "the object store answers 503 SlowDown for a while: a push and a pull wait it out"
mkdir -p "$WORK/slow"
random_file "$WORK/slow/delta.bin" $((6 << 20)) 31
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "put", "count": 6, "status": 503}]' >/dev/null
sref=$("$BDN" volume push "$WORK/slow" bdn:w/slow)
assert_eq 6 "$(proxy_stat refused)" "uploads answered 503"
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "get", "count": 6, "status": 503}]' >/dev/null
"$BDN" volume pull "$sref" "$WORK/slow-pull" >/dev/null
cmp "$WORK/slow/delta.bin" "$WORK/slow-pull/delta.bin" || fail "delta.bin after the 503s"
assert_eq 12 "$(proxy_stat refused)" "requests answered 503 (uploads and reads)"

step "a pack deleted behind bdn's back: verify reports corruption naming the version"
# pack_keys: every object under the prefix, one a line, sorted.
pack_keys() { aws_direct s3api list-objects-v2 --bucket "$BUCKET" --prefix "$PREFIX/" --query 'Contents[].Key' --output text | tr '\t' '\n' | sed '/^None$/d' | sort; }
mkdir -p "$WORK/lost"
random_file "$WORK/lost/lost.bin" 300000 41
pack_keys >"$WORK/keys.before"
lref=$("$BDN" volume push "$WORK/lost" bdn:w/lost)
pack_keys >"$WORK/keys.after"
mapfile -t new_packs < <(comm -13 "$WORK/keys.before" "$WORK/keys.after")
[ "${#new_packs[@]}" -ge 1 ] || fail "the push made no new pack"
for k in "${new_packs[@]}"; do aws_direct s3 rm --quiet "s3://$BUCKET/$k"; done
rc=0
"$BDN" volume verify "$lref" >"$WORK/lost.out" 2>"$WORK/lost.err" || rc=$?
echo "    verify said: $(cat "$WORK/lost.out" "$WORK/lost.err")"
assert_eq 5 "$rc" "exit code of verify with a pack missing"
assert_contains "$(cat "$WORK/lost.out" "$WORK/lost.err")" "$lref"
assert_contains "$(cat "$WORK/lost.out" "$WORK/lost.err")" "is missing from the object store"
echo "PASS"
