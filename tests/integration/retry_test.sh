#!/usr/bin/env bash
# Retries through a fault-injecting proxy (fault_proxy.py) in front of a real `bdn serve`:
# - a commit or tag write whose answer is lost is retried and reported exactly as if the answer
#   had arrived (same sequence, head_updated, tags_applied, unchanged=false), with and without
#   --expected-sequence, and the registry holds exactly one new version;
# - a push whose claim answers are all lost says its outcome is unknown, and a rerun from the same
#   machine takes its claim over at once;
# - a tag set to where the tag already points changes nothing (embedded and remote);
# - a 500 on a chunk upload is retried, not fatal;
# - with the origin gone right after the push claimed the volume, a push of 1,000 files fails
#   with exit 7 once --retry-deadline is spent, saying it was retrying and why;
# - an origin that accepts connections and never answers (stopped, or a proxy holding the
#   batches) fails a pull once at --retry-deadline too, not after each request's own timeout;
#   a commit slower than the deadline is waited for;
# - a push rides out an origin restart: it retries, claims the volume again and commits.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

step "start the origin"
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
ORIGIN=$STARTED_URL
unset BDN_TOKEN
export BDN_HOME="$WORK/home-unused"

# start_proxy NAME RULE...: a fault proxy in front of $UPSTREAM (default: the origin), with
# --gate $GATE if set; sets PROXY_URL.
start_proxy() {
  local name=$1; shift
  local args=()
  for r in "$@"; do args+=(--rule "$r"); done
  [ -z "${GATE:-}" ] || args+=(--gate "$GATE")
  start_fault_proxy "$name" "${UPSTREAM:-$ORIGIN}" "${args[@]}"
}
# proxied NAME PATTERN: how many requests the proxy NAME logged that match the grep PATTERN.
proxied() { grep -c -E "$2" "$WORK/$1.log" || true; }
# fails_at_deadline WHAT LIMIT_MS REGEX CMD...: CMD fails with exit 7 within LIMIT_MS, a line of
# its stderr (progress lines split at \r) matching REGEX.
fails_at_deadline() {
  local what=$1 limit=$2 re=$3 start elapsed rc=0
  shift 3
  start=$(now_ms)
  "$@" 2>"$WORK/deadline.err" >/dev/null || rc=$?
  elapsed=$(( $(now_ms) - start ))
  echo "$what: exit $rc after ${elapsed} ms"
  assert_eq 7 "$rc" "exit code: $what ($(cat "$WORK/deadline.err"))"
  [ "$elapsed" -lt "$limit" ] || fail "$what took ${elapsed} ms"
  grep -Eq "$re" <(tr '\r' '\n' < "$WORK/deadline.err") || fail "message: $what: $(cat "$WORK/deadline.err")"
}
# direct ARGS...: bdn against the origin itself, not through a proxy.
direct() { BDN_REMOTE="$ORIGIN" "$BDN" "$@"; }
# volume_field FIELD: a field of `volume stat bdn:t/a --json` read from the origin directly.
volume_field() { direct --json volume stat bdn:t/a | json_field "$1"; }
version_count() {
  direct --json volume versions bdn:t/a | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))'
}
# Drops the push's counters, keeping what the commit reported and what identifies the version.
commit_fields() {
  python3 -c 'import json,sys; j=json.load(sys.stdin); print(json.dumps({k: j[k] for k in ("version_ref","sequence","head_updated","tags_applied","unchanged")}, sort_keys=True))'
}

mkdir -p "$WORK/src1" "$WORK/src2" "$WORK/src3"
printf 'one\n' > "$WORK/src1/a.txt"
python3 -c 'import random,sys; sys.stdout.buffer.write(random.Random(3).randbytes(3_000_000))' > "$WORK/src1/big.bin"
printf 'two\n' > "$WORK/src2/a.txt"
python3 -c 'import random,sys; sys.stdout.buffer.write(random.Random(4).randbytes(3_000_000))' > "$WORK/src3/big.bin"
d1=$(BDN_REMOTE= BDN_HOME="$WORK/e1" "$BDN" volume push "$WORK/src1" bdn:t/a)
d2=$(BDN_REMOTE= BDN_HOME="$WORK/e1" "$BDN" volume push "$WORK/src2" bdn:t/a)

step "a push whose commit answer is lost reports the commit it made"
start_proxy p1 'POST ^/v1/volumes/t/a/commit$ drop 1'
# What the push prints when nothing is lost: the same push into a fresh embedded store.
want=$(BDN_REMOTE= BDN_HOME="$WORK/e2" "$BDN" --json volume push "$WORK/src1" bdn:t/a --tag prod)
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src1" bdn:t/a --tag prod)
assert_eq "$want" "$out" "push --json after a lost commit answer"
assert_eq '{"head_updated": true, "sequence": 1, "tags_applied": ["prod"], "unchanged": false, "version_ref": "'"$d1"'"}' \
  "$(commit_fields <<<"$out")" "commit result"
assert_eq 2 "$(proxied p1 '^POST /v1/volumes/t/a/commit ')" "commit requests (one answer dropped, one retry)"
assert_eq 1 "$(proxied p1 '^POST /v1/volumes/t/a/commit -> dropped')" "dropped commit answers"
assert_eq 1 "$(version_count)" "versions after the push"
assert_eq 1 "$(volume_field sequence)" "volume sequence"

step "with --expected-sequence, the retry is not a conflict with its own commit"
start_proxy p2 'POST ^/v1/volumes/t/a/commit$ drop 1'
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src2" bdn:t/a --expected-sequence 1)
assert_eq '{"head_updated": true, "sequence": 2, "tags_applied": [], "unchanged": false, "version_ref": "'"$d2"'"}' \
  "$(commit_fields <<<"$out")" "commit result with --expected-sequence"
assert_eq 1 "$(proxied p2 '^POST /v1/volumes/t/a/commit -> dropped')" "dropped commit answers"
assert_eq 2 "$(version_count)" "versions"
assert_eq 2 "$(volume_field sequence)" "volume sequence"
assert_eq "${d2#*@}" "$(volume_field head)" "head"

step "tag set and delete with --expected-sequence whose answers are lost"
start_proxy p3 'PUT ^/v1/volumes/t/a/tags/stable$ drop 1' 'DELETE ^/v1/volumes/t/a/tags/prod drop 1'
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume tag set --volume-ref "$d1" --tag stable --expected-sequence 2)
assert_eq '{"sequence":3,"tag":"stable","version_ref":"'"$d1"'"}' "$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True, separators=(",",":")))' <<<"$out")" "tag set --json"
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume tag delete --volume-ref bdn:t/a --tag prod --expected-sequence 3)
assert_eq 4 "$(json_field sequence <<<"$out")" "tag delete sequence"
assert_eq 2 "$(proxied p3 '^PUT /v1/volumes/t/a/tags/stable ')" "tag set requests"
assert_eq 2 "$(proxied p3 '^DELETE /v1/volumes/t/a/tags/prod')" "tag delete requests"
assert_eq 4 "$(volume_field sequence)" "volume sequence after the tag writes"
assert_eq '{"stable": "'"${d1#*@}"'"}' "$(direct --json volume stat bdn:t/a | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["tags"]))')" "tags"

step "a push whose claim answers are all lost says so, and its rerun takes the claim over at once"
# From an attacking helper: the rerun was refused "push in progress (... expires in 30 s)", the
# claim having been made under the first push's key, which only that push knew.
GATE="$WORK/claim-gate" start_proxy p3c 'POST ^/v1/volumes/t/claimed/claims$ drop-until-gate 1000'
rc=0
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src1" bdn:t/claimed --retry-deadline 2s 2>/dev/null) || rc=$?
assert_eq 7 "$rc" "exit code of the push whose claim answers were lost"
assert_eq "origin $PROXY_URL: POST /v1/volumes/t/claimed/claims: Empty reply from server (gave up after retrying for 2s; --retry-deadline 2s); no answer came, so whether the origin applied it is unknown" \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <<<"$out")" "error message"
[ "$(proxied p3c '^POST /v1/volumes/t/claimed/claims -> dropped')" -ge 2 ] || fail "claim answers dropped: $(cat "$WORK/p3c.log")"
touch "$WORK/claim-gate"
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src1" bdn:t/claimed)
assert_eq "bdn:t/claimed@${d1#*@}" "$(json_field version_ref <<<"$out")" "version pushed by the rerun"
assert_eq 1 "$(direct --json volume stat bdn:t/claimed | json_field sequence)" "sequence after the rerun"

step "a tag set to where it points changes nothing, remote and embedded"
out=$(direct --json volume tag set --volume-ref "$d1" --tag stable)
assert_eq 4 "$(json_field sequence <<<"$out")" "sequence of a no-op tag set (remote)"
out=$(direct --json volume tag set --volume-ref "$d1" --tag stable --expected-sequence 4)
assert_eq 4 "$(json_field sequence <<<"$out")" "sequence of a no-op tag set with --expected-sequence"
assert_eq 4 "$(volume_field sequence)" "volume sequence after no-op tag sets"
BDN_REMOTE= BDN_HOME="$WORK/e1" "$BDN" volume tag set --volume-ref "$d1" --tag x >/dev/null
out=$(BDN_REMOTE= BDN_HOME="$WORK/e1" "$BDN" --json volume tag set --volume-ref "$d1" --tag x)
assert_eq 3 "$(json_field sequence <<<"$out")" "sequence of a no-op tag set (embedded)"

step "a 500 on a batch of chunk uploads is retried"
start_proxy p4 'POST ^/v1/chunks/upload$ 500 1'
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src3" bdn:t/a)
assert_eq false "$(json_field unchanged <<<"$out")" "unchanged"
assert_eq 5 "$(json_field sequence <<<"$out")" "sequence"
assert_eq 1 "$(proxied p4 '^POST /v1/chunks/upload -> 500')" "injected 500s"
[ "$(proxied p4 '^POST /v1/chunks/upload -> forwarded')" -gt 0 ] || fail "no batch upload after the 500"
d3=$(json_field version_ref <<<"$out")
assert_eq 3 "$(version_count)" "versions"
direct volume cat "$d3/big.bin" | cmp - "$WORK/src3/big.bin" || fail "bytes of the pushed file"

step "--retry-deadline takes one duration syntax"
run_fails 2 'bdn: error: --retry-deadline: duration "0": must be between 1s and 24h' \
  env BDN_REMOTE="$ORIGIN" "$BDN" volume push "$WORK/src3" bdn:t/a --retry-deadline 0

step "the origin gone after the claim: a push of 1,000 files fails once, at the deadline"
mkdir -p "$WORK/many"
python3 -c '
import os, sys
for i in range(1000):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "w") as f:
        f.write("file %d\n" % i)
' "$WORK/many"
start_proxy p5 'POST ^/v1/volumes/t/many/claims$ die 1'
start_s=$(date +%s.%N)
rc=0
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/many" bdn:t/many --retry-deadline 3s 2>"$WORK/many.err") || rc=$?
elapsed=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start_s" "$(date +%s.%N)")
echo "push of 1,000 files with the origin gone: exit $rc after ${elapsed} s (--retry-deadline 3s)"
assert_eq 7 "$rc" "exit code"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)" "$elapsed" \
  || fail "push took ${elapsed} s with --retry-deadline 3s"
assert_eq unavailable "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "error code"
msg=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <<<"$out")
assert_eq "origin $PROXY_URL: connection refused (nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?) (gave up after retrying for 3s; --retry-deadline 3s)" "$msg" "error message"
progress=$(cat "$WORK/many.err")
assert_contains "$progress" "retrying for "
assert_contains "$progress" "(gives up at 3s): origin $PROXY_URL: connection refused"
assert_contains "$progress" "bdn: error: $msg"
run_fails 3 'bdn: error: volume bdn:t/many: not found' direct volume stat bdn:t/many

step "a push rides out an origin restart: it claims the volume again and commits"
# Its own origin, with a short claim TTL so that the pusher renews (and notices) within 1/3 s.
start_bdn serve2 serve --listen 127.0.0.1:0 --data "$WORK/srv2" --insecure-no-auth --claim-ttl 1s
ORIGIN2=$STARTED_URL
SERVE2_PID=$STARTED_PID
GATE="$WORK/gate"  # held chunk uploads go on once it exists
UPSTREAM="$ORIGIN2" start_proxy p6 '* ^/v1/chunks/(upload|[0-9a-f]{64})$ hold 1000000'
BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src1" bdn:t/restart >"$WORK/p6.out" 2>"$WORK/p6.err" &
PUSH_PID=$!
PIDS+=("$PUSH_PID")
for _ in $(seq 1 200); do
  [ "$(proxied p6 '^(PUT /v1/chunks/[0-9a-f]{64}|POST /v1/chunks/upload) -> held')" -gt 0 ] && break
  sleep 0.05
done
[ "$(proxied p6 '^(PUT /v1/chunks/[0-9a-f]{64}|POST /v1/chunks/upload) -> held')" -gt 0 ] || fail "the push uploaded nothing"
kill -9 "$SERVE2_PID"
wait "$SERVE2_PID" 2>/dev/null || true
start_bdn serve3 serve --listen "127.0.0.1:${ORIGIN2##*:}" --data "$WORK/srv2" --insecure-no-auth --claim-ttl 1s
# claims_201: claims the restarted origin granted (none but the pusher's new claim of the volume).
claims_201() {
  curl -sf "$ORIGIN2/metrics" | awk '/^bdn_http_requests_total\{/ && /method="POST"/ && /claims"/ && /status="201"/ {s += $2} END {print s + 0}'
}
# claim_ids: how many different claims the pusher renewed through the proxy.
claim_ids() {
  sed -n 's|^PUT /v1/volumes/t/restart/claims/\([0-9a-f]*\) .*|\1|p' "$WORK/p6.log" | sort -u | wc -l
}
for _ in $(seq 1 200); do
  [ "$(claim_ids)" -ge 2 ] && break
  sleep 0.05
done
assert_eq 2 "$(claim_ids)" "claims the pusher renewed (the first, then its new one)"
assert_eq 1 "$(claims_201)" "claims granted by the restarted origin"
touch "$GATE"
rc=0
wait "$PUSH_PID" || rc=$?
assert_eq 0 "$rc" "exit code of the push across the restart ($(cat "$WORK/p6.err"))"
out=$(cat "$WORK/p6.out")
assert_eq '{"head_updated": true, "sequence": 1, "tags_applied": [], "unchanged": false, "version_ref": "bdn:t/restart@'"${d1#*@}"'"}' \
  "$(commit_fields <<<"$out")" "commit result across the restart"
BDN_REMOTE="$ORIGIN2" "$BDN" volume cat bdn:t/restart/big.bin | cmp - "$WORK/src1/big.bin" \
  || fail "bytes pushed across the restart"
SERVE3_PID=$STARTED_PID

step "a pull rides out an origin restart, and without one fails once at --retry-deadline"
# From a user: a pull asked each chunk of a failed batch again alone, 4 tries each, froze for the
# whole outage and failed just as the origin came back. Its first batch is held at the proxy
# while the origin is killed, then forwarded to nothing; the origin comes back 2 s later.
GATE="$WORK/gate7"
UPSTREAM="$ORIGIN2" start_proxy p7 'POST ^/v1/chunks/batch$ hold 1'
BDN_REMOTE="$PROXY_URL" "$BDN" volume pull bdn:t/restart "$WORK/pulled7" >/dev/null 2>"$WORK/pull7.err" &
PULL_PID=$!
PIDS+=("$PULL_PID")
for _ in $(seq 1 200); do [ "$(proxied p7 '^POST /v1/chunks/batch -> held')" -gt 0 ] && break; sleep 0.05; done
[ "$(proxied p7 '^POST /v1/chunks/batch -> held')" -gt 0 ] || fail "the pull asked for no batch"
kill -9 "$SERVE3_PID"
wait "$SERVE3_PID" 2>/dev/null || true
touch "$GATE"
for _ in $(seq 1 200); do grep -q "retrying for" "$WORK/pull7.err" && break; sleep 0.05; done
sleep 2
start_bdn serve4 serve --listen "127.0.0.1:${ORIGIN2##*:}" --data "$WORK/srv2" --insecure-no-auth
SERVE4_PID=$STARTED_PID
rc=0
wait "$PULL_PID" || rc=$?
assert_eq 0 "$rc" "exit code of the pull across the restart ($(tr '\r' '\n' < "$WORK/pull7.err" | tail -3))"
cmp "$WORK/pulled7/big.bin" "$WORK/src1/big.bin" || fail "big.bin pulled across the restart"
grep -q "retrying for .* (gives up at 1m): " "$WORK/pull7.err" || fail "the pull did not say it was retrying: $(cat "$WORK/pull7.err")"
kill -9 "$SERVE4_PID"
wait "$SERVE4_PID" 2>/dev/null || true
start=$(now_ms)
run_fails 7 "bdn: error: origin $ORIGIN2: connection refused (nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?) (gave up after retrying for 2s; --retry-deadline 2s)" \
  env BDN_REMOTE="$ORIGIN2" "$BDN" volume pull bdn:t/restart "$WORK/pulled8" --retry-deadline 2s
[ $(( $(now_ms) - start )) -lt 10000 ] || fail "the pull with --retry-deadline 2s took $(( $(now_ms) - start )) ms"
# A deadline from the environment is named as the environment's.
run_fails 7 "bdn: error: origin $ORIGIN2: connection refused (nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?) (gave up after retrying for 2s; BDN_RETRY_DEADLINE 2s)" \
  env BDN_REMOTE="$ORIGIN2" BDN_RETRY_DEADLINE=2s "$BDN" volume pull bdn:t/restart "$WORK/pulled8"

step "an origin that accepts and never answers counts against --retry-deadline"
# From a user: with the origin stopped (SIGSTOP: the kernel still accepts connections) a pull
# with --retry-deadline 2s waited ~73 s, each request its own timeout, the last one final.
start_bdn serve5 serve --listen "127.0.0.1:${ORIGIN2##*:}" --data "$WORK/srv2" --insecure-no-auth
SERVE5_PID=$STARTED_PID
kill -STOP "$SERVE5_PID"
start=$(now_ms)
rc=0
BDN_REMOTE="$ORIGIN2" "$BDN" volume pull bdn:t/restart "$WORK/pulled9" --retry-deadline 2s 2>"$WORK/pull9.err" || rc=$?
elapsed=$(( $(now_ms) - start ))
kill -CONT "$SERVE5_PID"
echo "pull from a stopped origin: exit $rc after ${elapsed} ms (--retry-deadline 2s)"
assert_eq 7 "$rc" "exit code of the pull from a stopped origin ($(cat "$WORK/pull9.err"))"
[ "$elapsed" -lt 12000 ] || fail "the pull from a stopped origin took ${elapsed} ms with --retry-deadline 2s"
grep -Eq "^bdn: error: origin $ORIGIN2: GET /v1/[^ ]+: stalled: no bytes for 2000 ms \(gave up: no answer for 2s; --retry-deadline 2s\)$" "$WORK/pull9.err" \
  || fail "message of the pull from a stopped origin: $(cat "$WORK/pull9.err")"
# The same while the chunks are read: the proxy holds every batch and never answers.
GATE="$WORK/gate10"  # never made
UPSTREAM="$ORIGIN2" start_proxy p10 'POST ^/v1/chunks/batch$ hold 1000000'
fails_at_deadline "pull whose batches are never answered (--retry-deadline 3s)" 15000 \
  "^bdn: error: file \"(a.txt|big.bin)\": origin $PROXY_URL: POST /v1/chunks/batch: stalled: no bytes for 3000 ms \(gave up: no answer for 3s; --retry-deadline 3s\)$" \
  env BDN_REMOTE="$PROXY_URL" "$BDN" volume pull bdn:t/restart "$WORK/pulled10" --retry-deadline 3s

step "a commit slower than --retry-deadline is waited for, not reported as failed"
# From an attacker: with every read bounded by the deadline, a push whose commit took longer was
# told it failed (exit 7) while the commit moved the head. Writes keep their own timeouts.
GATE="$WORK/gate11"
UPSTREAM="$ORIGIN2" start_proxy p11 'POST /commit$ hold 1'
(sleep 6; touch "$GATE") &
start=$(now_ms)
rc=0
out=$(BDN_REMOTE="$PROXY_URL" "$BDN" --json volume push "$WORK/src1" bdn:t/slowcommit --retry-deadline 2s 2>"$WORK/p11.err") || rc=$?
echo "push whose commit is held 6 s: exit $rc after $(( $(now_ms) - start )) ms (--retry-deadline 2s)"
assert_eq 0 "$rc" "exit code of the push with a slow commit ($(cat "$WORK/p11.err"))"
assert_eq 1 "$(json_field sequence <<<"$out")" "sequence of the slow commit"
assert_eq 1 "$(proxied p11 '^POST /v1/volumes/t/slowcommit/commit -> forwarded')" "commits sent"
# From an attacker: its progress showed 100% and a falling rate, with no word of the commit.
assert_contains "$(cat "$WORK/p11.err")" "files 2/2  committing (3s)"

step "a claim that is never answered fails a push at --retry-deadline"
# From an attacking helper: a push with --retry-deadline 3s to a stopped origin waited the
# client's own 60 s at its claim, with no word.
GATE="$WORK/gate-claim"  # never made
UPSTREAM="$ORIGIN2" start_proxy p11c 'POST /claims$ hold 1000000'
fails_at_deadline "push whose claim is never answered" 6000 \
  "claims: no response within 2000 ms; no answer came, so whether the origin applied it is unknown$" \
  env BDN_REMOTE="$PROXY_URL" "$BDN" volume push "$WORK/src1" bdn:t/heldclaim --retry-deadline 2s

step "uploads that are never answered fail a push once at --retry-deadline"
# From an attacker: with writes kept to their own 60 s, a push to a stopped origin waited that
# long whatever its --retry-deadline. Uploads (content-addressed) are bounded as reads are.
GATE="$WORK/gate12"  # never made
UPSTREAM="$ORIGIN2" start_proxy p12 '* ^/v1/chunks/(upload|[0-9a-f]{64})$ hold 1000000'
head -c 3000000 /dev/urandom > "$WORK/up12.bin"
mkdir -p "$WORK/src12"; mv "$WORK/up12.bin" "$WORK/src12/"
fails_at_deadline "push whose uploads are never answered (--retry-deadline 3s)" 20000 \
  "origin $PROXY_URL: (POST /v1/chunks/upload|PUT /v1/chunks/[0-9a-f]{64}): stalled: no bytes for 3000 ms \(gave up: no answer for 3s; --retry-deadline 3s\)$" \
  env BDN_REMOTE="$PROXY_URL" "$BDN" volume push "$WORK/src12" bdn:t/held --retry-deadline 3s

echo "PASS"
