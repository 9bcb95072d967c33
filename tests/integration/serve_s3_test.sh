#!/usr/bin/env bash
# bdn serve --store s3://bucket/prefix: chunks in packs in an S3-compatible object store (s3rver
# 3.7.1 behind the SigV4-checking proxy, which also checks every body against its
# x-amz-content-sha256), credentials from the AWS environment variables or the shared credentials
# file (no flag takes a secret). Push, pull and mount through the origin, bytes compared with cmp
# and digests with b3sum; every object in the bucket is a whole pack, at most 64 per GiB stored;
# object-store requests per GiB written and per GiB read, counted at the proxy, at most 64; the
# origin restarted without its local index (credentials from the file this time) rebuilds it from
# the packs' footers and serves the version whole again; the object store answering 503
# SlowDown (and closing connections) for a while: a push and a pull wait it out; a pack deleted
# behind bdn's back: reads fail with corruption naming the pack, the server's log names the
# version, verify fails, and a push of the same data repairs it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"
needs_fuse

SECRET="bdn-serve-s3-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BUCKET=weights
PREFIX=team/prod
GIB=1073741824

step "start s3rver and the SigV4-checking proxy"
start_s3rver
start_s3_proxy "{\"upstream\": \"$S3\", \"keys\": {\"AKIDBDNSERVE\": \"$SECRET\"}, \"regions\": [\"eu-west-1\"]}"
PROXY_PID=${PIDS[-1]}
aws_direct s3 mb "s3://$BUCKET" >/dev/null

# serve_s3 NAME DATA: `bdn serve --store s3://weights/team/prod` through the proxy, without
# authentication, periodic GC off; sets URL and exports BDN_REMOTE.
serve_s3() {
  start_bdn "$1" serve --listen 127.0.0.1:0 --data "$2" --insecure-no-auth --gc-interval 0s \
    --store "s3://$BUCKET/$PREFIX" --s3-endpoint "$PROXY" --s3-region eu-west-1
  URL=$STARTED_URL
  export BDN_REMOTE="$URL"
}
# metric NAME: an unlabelled counter of the origin's /metrics.
metric() { curl -sf "$URL/metrics" | awk -v n="$1" '$1 == n {print $2; found=1} END {if (!found) print 0}'; }
# requests: every request that passed the proxy's checks since its last reset.
requests() { proxy_stat verified; }
# pack_keys: every key under the store's prefix (all of them packs), one a line, sorted.
pack_keys() { aws_direct s3api list-objects-v2 --bucket "$BUCKET" --prefix "$PREFIX/" --query 'Contents[].Key' --output text | tr '\t' '\n' | grep -v '^None$' | sort || true; }
# per_gib COUNT BYTES: COUNT scaled to one GiB (rounded up).
per_gib() { python3 -c 'import math,sys; print(math.ceil(int(sys.argv[1]) * int(sys.argv[2]) / int(sys.argv[3])))' "$1" "$GIB" "$2"; }

step "credentials come from the environment, never a flag; the proxy refuses a wrong key"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
rc=0
HOME="$WORK/no-home" "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/nocreds" --insecure-no-auth \
  --store "s3://$BUCKET/$PREFIX" --s3-endpoint "$PROXY" 2>"$WORK/nocreds.err" || rc=$?
assert_eq 3 "$rc" "exit code without credentials"
assert_contains "$(cat "$WORK/nocreds.err")" "bdn: error: --store s3://$BUCKET/$PREFIX: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put a [default] profile in /dev/null"
rc=0
AWS_ACCESS_KEY_ID=AKIDBDNSERVE AWS_SECRET_ACCESS_KEY=wrong "$BDN" serve --listen 127.0.0.1:0 \
  --data "$WORK/badcreds" --insecure-no-auth --store "s3://$BUCKET/$PREFIX" --s3-endpoint "$PROXY" \
  --s3-region eu-west-1 2>"$WORK/badcreds.err" || rc=$?
assert_eq 6 "$rc" "exit code with a wrong secret"
assert_contains "$(cat "$WORK/badcreds.err")" "bdn: error: s3://$BUCKET/$PREFIX: LIST packs/: HTTP 403 (SignatureDoesNotMatch"
flags=$("$BDN" serve --help | awk '$1 ~ /^--/ {print $1}')
assert_contains "$flags" "--s3-region"
# (a flag naming a file that holds a key, such as --secrets-key-file, takes a path, not a secret)
assert_eq "" "$(awk '/secret|access-key|credential|token|password/ && !/-file$/' <<<"$flags")" "bdn serve flags that would take a secret"
rc=0
err=$("$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" --store "s3://$BUCKET/$PREFIX" \
  --s3-secret-access-key "$SECRET" 2>&1) || rc=$?
assert_eq 2 "$rc" "exit code with --s3-secret-access-key"
assert_contains "$err" 'bdn: error: unknown option "--s3-secret-access-key" (bdn serve --help lists them)'
case "$err" in *"$SECRET"*) fail "the refused command line's error repeats the secret: $err" ;; esac
[ ! -e "$WORK/noflag" ] || fail "a refused command line created the data directory"
# From attacking helper 119: a password in --s3-endpoint was repeated, and the HTTP client's own
# refusal did not name the flag.
run_fails 2 "bdn: error: --s3-endpoint \"http://***@127.0.0.1:9\": must be http(s)://host[:port][/path] without credentials or query" \
  env AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" \
  --store "s3://$BUCKET/$PREFIX" --s3-endpoint http://u:SEKRETS3@127.0.0.1:9 --s3-region us-east-1
run_fails 2 "bdn: error: --s3-endpoint: url \"http://127.0.0.1:0\": port \"0\": must be 1 to 65535" \
  env AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" \
  --store "s3://$BUCKET/$PREFIX" --s3-endpoint http://127.0.0.1:0 --s3-region us-east-1
run_fails 2 "bdn: error: --s3-endpoint: needs --store s3://bucket[/prefix]" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" --s3-endpoint "$PROXY"
run_fails 2 "bdn: error: --store \"gs://$BUCKET\": must be s3://bucket[/prefix]" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" --store "gs://$BUCKET"
# From attacking helper 124: credentials or a signature in --store were quoted whole.
run_fails 2 "bdn: error: --store \"s3://***@$BUCKET\": the bucket name: must be 3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" --store "s3://u:SEKRET@$BUCKET"
run_fails 2 "bdn: error: --store \"s3://$BUCKET/p?***\": must be s3://bucket[/prefix], without a query or fragment" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag" --store "s3://$BUCKET/p?X-Amz-Signature=SEKRET"
for flag in --idle-seal --commit-wait; do
  run_fails 2 "bdn: error: $flag: needs --store s3://bucket[/prefix]" \
    "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/noflag-$flag" "$flag" 1s
done
export AWS_ACCESS_KEY_ID=AKIDBDNSERVE AWS_SECRET_ACCESS_KEY="$SECRET"
run_fails 2 "bdn: error: --idle-seal: duration \"5ms\": must be between 10ms and 1m" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/badidle" --store "s3://$BUCKET/$PREFIX" \
  --s3-endpoint "$PROXY" --idle-seal 5ms
run_fails 2 "bdn: error: --commit-wait: duration \"2m\": must be between 0s and 1m" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/badwait" --store "s3://$BUCKET/$PREFIX" \
  --s3-endpoint "$PROXY" --commit-wait 2m

serve_s3 serve "$WORK/srv"

step "push 256 MiB through the origin: whole packs, at most 64 requests per GiB written"
mkdir -p "$WORK/src/sub"
random_file "$WORK/src/model.safetensors" $((224 << 20)) 1
random_file "$WORK/src/sub/shard.bin" $((32 << 20)) 2
printf '{"hidden": 64}\n' >"$WORK/src/config.json"
written=$(( (256 << 20) + 15 ))
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
counted_before=$(metric bdn_objstore_requests_total)
out=$("$BDN" --json volume push "$WORK/src" bdn:test/model --tag prod)
ref=$(json_field version_ref <<<"$out")
assert_eq 0 "$(proxy_stat refused)" "requests the proxy refused ($(proxy_stat refusals))"
put_requests=$(requests)
echo "object-store requests for the push: $put_requests ($(per_gib "$put_requests" "$written") per GiB written)"
[ "$(per_gib "$put_requests" "$written")" -le 64 ] || fail "$put_requests requests for $written bytes: more than 64 per GiB"
mapfile -t packs < <(pack_keys)
[ "${#packs[@]}" -ge 3 ] || fail "expected the push in at least 3 packs, got ${packs[*]}"
stored=0
for k in "${packs[@]}"; do
  [[ "$k" =~ ^$PREFIX/packs/[0-9a-f]{16}\.pack$ ]] || fail "unexpected key $k"
  aws_direct s3 cp --quiet "s3://$BUCKET/$k" "$WORK/pack.obj"
  assert_eq "BDNPACK" "$(head -c 7 "$WORK/pack.obj")" "the first bytes of $k"
  stored=$((stored + $(stat -c %s "$WORK/pack.obj")))
done
echo "objects stored: ${#packs[@]} for $stored bytes ($(per_gib "${#packs[@]}" "$stored") per GiB stored)"
[ "$(per_gib "${#packs[@]}" "$stored")" -le 64 ] || fail "${#packs[@]} objects for $stored bytes"
assert_eq "$put_requests" "$(( $(metric bdn_objstore_requests_total) - counted_before ))" "the origin's count of its requests"

step "pull through the origin: the same bytes, at most 64 requests per GiB read"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
"$BDN" volume pull "$ref" "$WORK/pull" >/dev/null
cmp "$WORK/src/model.safetensors" "$WORK/pull/model.safetensors" || fail "model.safetensors differs"
cmp "$WORK/src/sub/shard.bin" "$WORK/pull/sub/shard.bin" || fail "shard.bin differs"
src_listing=$(tree_listing "$WORK/src")
assert_eq "$src_listing" "$(tree_listing "$WORK/pull")" "the pulled tree (modes, sizes, b3sum)"
get_requests=$(requests)
echo "object-store requests for the pull: $get_requests ($(per_gib "$get_requests" "$written") per GiB read)"
[ "$(per_gib "$get_requests" "$written")" -le 64 ] || fail "$get_requests requests to read $written bytes: $(proxy_stat get_ranges)"
assert_eq 0 "$(proxy_stat refused)" "requests of the pull the proxy refused ($(proxy_stat refusals))"

step "mount through the origin"
mount_volume bdn:test/model:prod "$WORK/mnt"
cmp "$WORK/src/sub/shard.bin" "$WORK/mnt/sub/shard.bin" || fail "shard.bin through the mount"
assert_eq "$(b3sum --no-names "$WORK/src/model.safetensors")" "$(b3sum --no-names "$WORK/mnt/model.safetensors")" "b3sum of model.safetensors through the mount"
assert_eq '{"hidden": 64}' "$(cat "$WORK/mnt/config.json")" "config.json through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "restarted without its local index (and its listing answered 503 twice), credentials from a file, the origin rebuilds the index from the footers: one GET per pack"
kill "$STARTED_PID"
wait_gone "$STARTED_PID" 20000
rm -rf "$WORK/srv/objstore"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "list", "count": 2, "status": 503}]' >/dev/null
printf '[default]\naws_access_key_id = AKIDBDNSERVE\naws_secret_access_key = %s\n' "$SECRET" >"$WORK/aws-credentials"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
AWS_SHARED_CREDENTIALS_FILE="$WORK/aws-credentials" serve_s3 serve2 "$WORK/srv"
export AWS_ACCESS_KEY_ID=AKIDBDNSERVE AWS_SECRET_ACCESS_KEY="$SECRET"
assert_eq "${#packs[@]}" "$(proxy_stat object_gets)" "footer reads at start"
assert_eq 3 "$(proxy_stat list_requests)" "listings at start (two answered 503)"
assert_eq 2 "$(metric bdn_objstore_retries_total)" "retries at start"
"$BDN" volume cat "$ref/sub/shard.bin" | cmp - "$WORK/src/sub/shard.bin" || fail "shard.bin after the restart"
"$BDN" volume pull bdn:test/model:prod "$WORK/pull-restarted" >/dev/null
assert_eq "$src_listing" "$(tree_listing "$WORK/pull-restarted")" "the tree pulled after the restart (b3sum)"

step "the object store answers 503 SlowDown and drops connections for a while: push and pull wait it out"
mkdir -p "$WORK/src2"
random_file "$WORK/src2/delta.bin" $((6 << 20)) 3
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
curl -sf -X POST "$PROXY/_faults" -d '[
  {"kind": "put", "count": 4, "status": 503},
  {"kind": "put", "count": 1, "reset": true},
  {"kind": "get", "count": 4, "status": 503, "retry_after": 1},
  {"kind": "get", "count": 1, "drop_after": 10}]' >/dev/null
retries_before=$(metric bdn_objstore_retries_total)
ref2=$("$BDN" volume push "$WORK/src2" bdn:test/delta)
rm -rf "$WORK/pull2"
BDN_REMOTE="$URL" "$BDN" volume pull "$ref2" "$WORK/pull2" >/dev/null
cmp "$WORK/src2/delta.bin" "$WORK/pull2/delta.bin" || fail "delta.bin after the faults"
"$BDN" volume cat "$ref/config.json" >/dev/null
assert_eq 8 "$(proxy_stat refused)" "503 answers given ($(proxy_stat refusals))"
retries=$(( $(metric bdn_objstore_retries_total) - retries_before ))
# The eight 503s and the cut-off body; the closed connection too, unless libcurl itself sent that
# request again (it does once when a connection it reused turns out closed).
[ "$retries" -ge 9 ] && [ "$retries" -le 10 ] || fail "$retries retries counted for 10 injected faults"

step "a pack deleted behind bdn's back: corruption naming the pack; the log names the version; a push repairs it"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
mkdir -p "$WORK/src3"
random_file "$WORK/src3/lost.bin" 300000 4
before=$(pack_keys)
ref3=$("$BDN" volume push "$WORK/src3" bdn:test/lost)
mapfile -t new_packs < <(comm -13 <(printf '%s\n' "$before") <(pack_keys))
[ "${#new_packs[@]}" -ge 1 ] || fail "the push made no new pack"
for k in "${new_packs[@]}"; do aws_direct s3 rm --quiet "s3://$BUCKET/$k"; done
rc=0
err=$("$BDN" volume cat "$ref3/lost.bin" 2>&1 >/dev/null) || rc=$?
assert_eq 5 "$rc" "exit code of cat"
assert_contains "$err" "is missing from the object store (deleted outside bdn?)"
# The push may have made more than one pack (all deleted): the error names one of them.
named=""
for k in "${new_packs[@]}"; do [[ "$err" == *"pack s3://$BUCKET/$k "* ]] && named=$k; done
[ -n "$named" ] || fail "the error names none of the deleted packs (${new_packs[*]}): $err"
rc=0
"$BDN" volume verify "$ref3" >/dev/null 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "verify passed with a pack missing"
# The origin names the versions that need the pack's blobs (found on its own thread).
for _ in $(seq 1 200); do
  grep -q "versions cannot be read whole: bdn:test/lost@" "$WORK/serve2.log" && break
  sleep 0.05
done
assert_contains "$(cat "$WORK/serve2.log")" "object store: pack s3://$BUCKET/$PREFIX/packs/"
assert_contains "$(cat "$WORK/serve2.log")" "is missing; 1 version cannot be read whole: $ref3 (push it again to repair)"
assert_contains "$(cat "$WORK/serve2.log")" "pack s3://$BUCKET/$named"
"$BDN" volume push "$WORK/src3" bdn:test/lost >/dev/null
"$BDN" volume cat "$ref3/lost.bin" | cmp - "$WORK/src3/lost.bin" || fail "lost.bin after the repair"
"$BDN" volume verify "$ref3" >/dev/null || fail "verify after the repair"
assert_eq "[]" "$(proxy_stat refusals)" "requests the proxy refused since the faults"

step "an object store that stops answering holds a stopping origin for its 5 s grace, not for its retries"
# Before, SIGTERM took 119 s here: the handler's GET of a pack, and its retries, ran to the end.
# Restarted without its local index, so that the read goes to the object store.
kill "$STARTED_PID"
wait "$STARTED_PID" || true
untrack "$STARTED_PID"
rm -rf "$WORK/srv/objstore"
serve_s3 serve3 "$WORK/srv"
origin3=$STARTED_PID
kill -STOP "$PROXY_PID"
"$BDN" volume cat "$ref3/lost.bin" >/dev/null 2>&1 &
reader=$!
sleep 1  # the read reaches the origin, which waits on the stopped proxy (checked below)
start=$(date +%s)
kill -TERM "$origin3"
rc=0; wait "$origin3" || rc=$?
took=$(($(date +%s) - start))
untrack "$origin3"
kill -CONT "$PROXY_PID"
kill "$reader" 2>/dev/null || true
wait "$reader" 2>/dev/null || true
assert_eq 0 "$rc" "exit status of the origin stopped while the object store did not answer"
[ "$took" -le 20 ] || fail "the origin took $took s to stop"
# The read was in flight and was ended by the stop, not answered.
assert_contains "$(cat "$WORK/serve3.log")" ": shutting down\"}}"
echo "PASS"
