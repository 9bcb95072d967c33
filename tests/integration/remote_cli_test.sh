#!/usr/bin/env bash
# Every volume command through a real `bdn serve` origin (--remote): push, ls, stat, versions,
# tag, pull, cat, diff, verify, mount; bytes compared with b3sum/cmp; an unchanged re-push sends
# no chunk bytes (by its JSON and by the server's metrics); pull, cat and verify fetch chunks in
# batches (far fewer requests than chunks); a second concurrent pusher gets
# "push in progress"; errors read the same as the embedded store's.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

step "start the origin"
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
SERVER_PID=$STARTED_PID
URL=$STARTED_URL
export BDN_REMOTE="$URL"
unset BDN_TOKEN
# The embedded store must not be touched by remote commands.
export BDN_HOME="$WORK/home-unused"

# metric NAME: the value of an unlabelled counter from the origin's /metrics (0 if absent).
metric() {
  curl -sf "$URL/metrics" | awk -v n="$1" '$1 == n {print $2; found=1} END {if (!found) print 0}'
}

mkdir -p "$WORK/src/sub" "$WORK/src2"
python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(r.randbytes(12_000_000))' > "$WORK/src/big.bin"
printf 'hello remote\n' > "$WORK/src/sub/a.txt"
: > "$WORK/src/empty"
ln -s sub/a.txt "$WORK/src/link"
cp -r "$WORK/src/." "$WORK/src2/"
printf 'changed\n' > "$WORK/src2/sub/a.txt"

step "push through the origin"
out=$("$BDN" --json volume push "$WORK/src" bdn:test/remote --tag prod)
ref=$(json_field version_ref <<<"$out")
digest=$(json_field digest <<<"$out")
[[ "$ref" == bdn:test/remote@b3:* ]] || fail "push printed [$out]"
[ "$(json_field chunks_uploaded <<<"$out")" -gt 0 ] || fail "first push uploaded nothing"
assert_eq "false" "$(json_field unchanged <<<"$out")" "unchanged"
[ ! -e "$WORK/home-unused/registry.db" ] || fail "remote push touched the embedded store"

step "the same tree pushed embedded gives the same digest"
local_ref=$(BDN_REMOTE= BDN_HOME="$WORK/home-local" "$BDN" volume push "$WORK/src" bdn:test/remote)
assert_eq "$ref" "$local_ref" "digest of the same tree, remote vs embedded"

step "an unchanged re-push sends no chunk bytes"
before=$(metric bdn_chunk_bytes_received_total)
[ "$before" != 0 ] || fail "origin counted no received chunk bytes after a push"
out=$("$BDN" --json volume push "$WORK/src" bdn:test/remote)
assert_eq "$ref" "$(json_field version_ref <<<"$out")" "re-push ref"
assert_eq "0" "$(json_field chunks_uploaded <<<"$out")" "chunks_uploaded of a re-push"
assert_eq "0" "$(json_field bytes_uploaded <<<"$out")" "bytes_uploaded of a re-push"
assert_eq "true" "$(json_field unchanged <<<"$out")" "unchanged"
assert_eq "$before" "$(metric bdn_chunk_bytes_received_total)" "origin chunk bytes received by a re-push"

step "ls, stat, versions, cat"
assert_eq "test" "$("$BDN" volume ls)" "namespaces"
assert_contains "$("$BDN" volume ls bdn:test)" "remote"
listing=$("$BDN" volume ls bdn:test/remote:prod -R)
assert_contains "$listing" "big.bin"
assert_contains "$listing" "sub/a.txt"
stat_json=$("$BDN" --json volume stat "$ref")
assert_contains "$stat_json" "\"$digest\""
assert_eq "$(b3sum --no-names "$WORK/src/big.bin")" \
  "$("$BDN" --json volume stat "$ref/big.bin" | json_field digest | sed 's/^b3://')" "stat of a file"
versions=$("$BDN" volume versions bdn:test/remote)
assert_contains "$versions" "$digest"
"$BDN" volume cat bdn:test/remote:prod/big.bin | cmp - "$WORK/src/big.bin" || fail "cat big.bin"
assert_eq "hello remote" "$("$BDN" volume cat bdn:test/remote/sub/a.txt)" "cat a.txt"

step "a chunk corrupted on the origin's disk is never sent, and the origin reports it"
mkdir -p "$WORK/one"
echo "corrupt me on the origin" > "$WORK/one/one.txt"
cref=$("$BDN" volume push "$WORK/one" bdn:test/corrupted)
chex=$(b3sum --no-names "$WORK/one/one.txt")
read -r cpack _ cpayload _ < <(python3 "$(dirname "$0")/packs.py" find "$WORK/srv/store" "$chex") ||
  fail "no sealed pack of the origin holds chunk $chex"
printf 'X' | dd of="$cpack" bs=1 seek="$cpayload" conv=notrunc status=none
"$BDN" volume cat "$cref/one.txt" >/dev/null 2>&1 && fail "cat served a corrupt chunk"
assert_contains "$(cat "$WORK/serve.log")" "error chunk b3:$chex: digest mismatch"
assert_eq 1 "$(metric bdn_chunks_corrupt_total)" "bdn_chunks_corrupt_total"
"$BDN" volume push "$WORK/one" bdn:test/corrupted >/dev/null
assert_eq "corrupt me on the origin" "$("$BDN" volume cat "$cref/one.txt")" "cat after the re-push repaired it"

step "tags: set, move, delete; errors match the embedded store"
ref2=$("$BDN" volume push "$WORK/src2" bdn:test/remote)
"$BDN" volume tag set --volume-ref "$ref2" --tag candidate >/dev/null
assert_contains "$("$BDN" volume stat bdn:test/remote)" "candidate"
assert_eq "changed" "$("$BDN" volume cat bdn:test/remote:candidate/sub/a.txt)" "cat by moved tag"
"$BDN" volume tag delete --volume-ref bdn:test/remote --tag candidate >/dev/null
run_fails 3 "bdn: error: tag \"candidate\" of bdn:test/remote: not found; its tags: prod" \
  "$BDN" volume tag delete --volume-ref bdn:test/remote --tag candidate
run_fails 3 "bdn: error: volume bdn:test/nope: not found" "$BDN" volume stat bdn:test/nope
seq=$("$BDN" --json volume stat bdn:test/remote | json_field sequence)
rc=0; err=$("$BDN" volume tag set --volume-ref "$ref" --tag prod --expected-sequence 1 2>&1) || rc=$?
assert_eq 4 "$rc" "exit code of a stale --expected-sequence"
assert_contains "$err" ": sequence is $seq, expected 1"

step "diff"
diff_out=$("$BDN" volume diff "$ref" "$ref2")
assert_contains "$diff_out" "sub/a.txt"

step "pull, cat and verify of a 12 MB file read its chunks in batches: far fewer requests than chunks"
# requests: all requests the origin has answered (this scrape not included).
requests() {
  curl -sf "$URL/metrics" | awk '/^bdn_http_requests_total\{/ {s += $2} END {print s + 0}'
}
chunks=$("$BDN" --json volume stat "$ref/big.bin" | json_field chunks)
for op in pull cat verify; do
  r0=$(requests)
  case $op in
    pull) "$BDN" volume pull "$ref/big.bin" "$WORK/pulled-big" --strip-prefix >/dev/null
          cmp "$WORK/pulled-big/big.bin" "$WORK/src/big.bin" || fail "pull of big.bin" ;;
    cat) "$BDN" volume cat "$ref/big.bin" | cmp - "$WORK/src/big.bin" || fail "cat of big.bin" ;;
    verify) "$BDN" volume verify "$ref" >/dev/null ;;
  esac
  n=$(( $(requests) - r0 - 1 ))
  echo "$op of big.bin ($chunks chunks): $n origin requests"
  [ "$n" -lt $(( chunks / 8 )) ] || fail "$op made $n requests for $chunks chunks"
done

step "pull and verify"
"$BDN" volume pull bdn:test/remote:prod "$WORK/pulled" >/dev/null
[ "$(tree_listing "$WORK/src")" == "$(tree_listing "$WORK/pulled")" ] || fail "pulled tree differs"
"$BDN" volume pull "$ref/sub" "$WORK/pulled-sub" --strip-prefix >/dev/null
cmp "$WORK/pulled-sub/a.txt" "$WORK/src/sub/a.txt" || fail "pull of a subtree"
assert_contains "$("$BDN" volume verify "$ref")" "0 problems"

step "mount through the origin"
mount_volume bdn:test/remote:prod "$WORK/mnt"
(cd "$WORK/src" && b3sum big.bin sub/a.txt empty) > "$WORK/sums"
(cd "$WORK/mnt" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through the remote mount"
assert_eq "sub/a.txt" "$(readlink "$WORK/mnt/link")" "symlink through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "a second concurrent pusher gets push in progress"
mkdir -p "$WORK/huge"
python3 -c 'import random,sys; r=random.Random(9); sys.stdout.buffer.write(r.randbytes(256_000_000))' > "$WORK/huge/blob"
claims_201() {
  curl -sf "$URL/metrics" | awk '/^bdn_http_requests_total\{/ && /method="POST"/ && /claims"/ && /status="201"/ {s += $2} END {print s + 0}'
}
# push_claimed NAME VOLUME: pushes $WORK/huge to VOLUME in the background (output in
# $WORK/NAME.out and .err) and returns once the origin has granted its claim; the pid in PUSHED.
push_claimed() {
  local c0; c0=$(claims_201)
  "$BDN" volume push "$WORK/huge" "$2" >"$WORK/$1.out" 2>"$WORK/$1.err" &
  PUSHED=$!
  PIDS+=("$PUSHED")
  for _ in $(seq 1 200); do
    [ "$(claims_201)" -gt "$c0" ] && return 0
    sleep 0.05
  done
  fail "push $1 never claimed $2: $(cat "$WORK/$1.err")"
}
push_claimed push1 bdn:test/busy
push1=$PUSHED
err=$("$BDN" volume push "$WORK/src" bdn:test/busy 2>&1 >/dev/null) && fail "second pusher succeeded"
assert_contains "$err" "bdn: error: volume bdn:test/busy: push in progress"
wait "$push1" || fail "first push failed: $(cat "$WORK/push1.err")"
assert_eq "$(b3sum --no-names "$WORK/huge/blob")" \
  "$("$BDN" --json volume stat bdn:test/busy/blob | json_field digest | sed 's/^b3://')" "big push"
# The claim was released: pushing again works at once.
"$BDN" volume push "$WORK/src" bdn:test/busy >/dev/null || fail "push after release"
# claim_records: the push-claim records in BDN_HOME (each with an empty .lock file beside it).
claim_records() { find "$BDN_HOME/push-claims" -type f ! -name '*.lock'; }
[ -z "$(claim_records)" ] || fail "released claims left records: $(claim_records)"
# From attacking helper 120: a lock file was left for every volume ever pushed.
[ -z "$(find "$BDN_HOME/push-claims" -type f)" ] ||
  fail "released claims left lock files: $(find "$BDN_HOME/push-claims" -type f)"

step "a push ended by Ctrl-C or SIGTERM releases its claim: a push from another home goes on at once"
# From new-user helper 103: the claim stayed live for its TTL, and a push from another machine
# (or home) was refused "push in progress" for 30 s.
for how in INT TERM; do
  c0=$(claims_201)
  env --default-signal=INT "$BDN" volume push "$WORK/huge" "bdn:test/ctrl-$how" >/dev/null 2>"$WORK/ctrl.err" &
  pushed=$!
  PIDS+=("$pushed")
  for _ in $(seq 1 200); do [ "$(claims_201)" -gt "$c0" ] && break; sleep 0.05; done
  kill "-$how" "$pushed"
  rc=0; wait "$pushed" || rc=$?
  [ "$how" = INT ] && want=130 || want=143
  assert_eq "$want" "$rc" "exit status of a push ended by SIG$how"
  assert_eq "bdn: push interrupted; its claim on the volume was released, so the next push need not wait for it" \
    "$(tail -1 "$WORK/ctrl.err")" "stderr of a push ended by SIG$how"
  start=$(date +%s)
  BDN_HOME="$WORK/other-home" "$BDN" volume push "$WORK/src" "bdn:test/ctrl-$how" >/dev/null ||
    fail "a push from another home after SIG$how"
  [ $(( $(date +%s) - start )) -lt 20 ] || fail "the push after SIG$how waited out the claim"
done
[ -z "$(claim_records)" ] || fail "released claims left records: $(claim_records)"

step "a push killed with kill -9 is taken over at once by the next push from this machine"
# The killed push's claim lives on in the origin for its TTL (30 s); without the takeover the
# re-push fails with "push in progress" right away.
push_claimed push2 bdn:test/killed
push2=$PUSHED
# From attacking helper 122: a push refused meanwhile ("push in progress") removed the holder's
# record, and the re-push after the kill waited out the claim.
kill -STOP "$push2"
err=$("$BDN" volume push "$WORK/src" bdn:test/killed 2>&1 >/dev/null) && fail "a second pusher succeeded"
assert_contains "$err" "bdn: error: volume bdn:test/killed: push in progress"
kill -9 "$push2"
wait "$push2" 2>/dev/null || true
record=$(claim_records)
[ -n "$record" ] || fail "the killed push left no claim record"
grep -q "\"pid\":$push2," "$record" || fail "claim record: $(cat "$record")"
start=$(date +%s)
out=$("$BDN" --json volume push "$WORK/huge" bdn:test/killed) || fail "re-push after kill -9 failed"
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 25 ] || fail "re-push after kill -9 took ${elapsed} s (waited out the claim?)"
assert_eq "$(b3sum --no-names "$WORK/huge/blob")" \
  "$("$BDN" --json volume stat bdn:test/killed/blob | json_field digest | sed 's/^b3://')" "re-pushed blob"
[ -z "$(claim_records)" ] || fail "the re-push left a claim record"

step "an unreachable origin is a clear, quick error"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run_fails 7 "bdn: error: origin http://127.0.0.1:$port: connection refused (nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?)" \
  "$BDN" --remote "http://127.0.0.1:$port" volume ls
# From attacking helper 119: push, pull and cat (whose retries add "(gave up ...)") gave no hint,
# and through a proxy the refusal is the proxy's: no hint then.
hint="(nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?)"
run_fails 7 "bdn: error: origin http://127.0.0.1:$port: connection refused $hint (gave up after retrying for 1s; --retry-deadline 1s)" \
  "$BDN" --remote "http://127.0.0.1:$port" volume pull bdn:t/v "$WORK/pulled-refused" --retry-deadline 1s
rc=0; "$BDN" --remote "http://127.0.0.1:$port" volume push "$WORK/huge" bdn:t/v --retry-deadline 1s 2>"$WORK/refused.err" || rc=$?
assert_eq 7 "$rc" "exit code of a push to nothing"
assert_eq "bdn: error: origin http://127.0.0.1:$port: connection refused $hint (gave up after retrying for 1s; --retry-deadline 1s)" \
  "$(tail -n 1 "$WORK/refused.err")" "error of a push to nothing (after its progress lines)"
run_fails 7 "bdn: error: origin http://127.0.0.1:$port: connection refused" \
  env http_proxy="http://127.0.0.1:$port" "$BDN" --remote "http://127.0.0.1:$port" volume ls
run_fails 2 'bdn: error: --remote: url "http://": no host' "$BDN" --remote "http://" volume ls
run_fails 2 "bdn: error: --remote: url \"localhost:1\": must start with http:// or https://" \
  "$BDN" --remote "localhost:1" volume ls
# From attacking helper 121: credentials in a URL without "://" or with a "/" in the password were
# shown whole (a piece of it as the port), and BDN_REMOTE's errors named --remote.
run_fails 2 'bdn: error: BDN_REMOTE: url "***@127.0.0.1:1": must start with http:// or https://' \
  env BDN_REMOTE="u:SEKRET@127.0.0.1:1" "$BDN" volume ls
run_fails 2 'bdn: error: --remote: url "http://***@127.0.0.1:1": port "***": must be 1 to 65535' \
  "$BDN" --remote "http://u:SEK/RET@127.0.0.1:1" volume ls

step "BDN_SESSION: a header value or nothing; anything else is refused before a request"
session_err="bdn: error: BDN_SESSION: must be at most 128 visible ASCII characters (no space, control character or other byte)"
for bad in $'a\r\nX-Evil: 1' "a b" "$(printf 'x%.0s' $(seq 1 129))" $'caf\xc3\xa9'; do
  run_fails 2 "$session_err" env BDN_SESSION="$bad" "$BDN" --remote "http://127.0.0.1:$port" volume ls
done
for ok in "" "$(printf 'x%.0s' $(seq 1 128))" "team-a/job:42"; do
  BDN_SESSION="$ok" "$BDN" volume ls >/dev/null || fail "BDN_SESSION=\"$ok\" refused"
done
echo "PASS"
