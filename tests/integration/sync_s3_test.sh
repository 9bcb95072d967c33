#!/usr/bin/env bash
# s3:// (and r2://, cw://, gs:// with HMAC keys through --endpoint) against s3rver 3.7.1 behind a
# SigV4-checking proxy (tests/fixtures/s3_proxy.py), populated with Debian's awscli: the proxy's
# verifier accepts awscli's own signed requests (a listing with a continuation token and a
# prefix with special characters) and refuses a wrong key, and then every request bdn sends
# (libcurl's CURLOPT_AWS_SIGV4 with the sorted query and x-amz-content-sha256 bdn adds) must pass
# it too. Cases: keys with spaces, +, %, #, ? and unicode pulled back byte for byte; empty
# objects; nested prefixes and a prefix that is also a key; a prefix that names one object; 1,100
# objects (two listing pages); include/exclude; the metadata check with zero object GETs at the
# proxy; --region is the region every request is signed for (the proxy records the scopes it
# verified), and a bucket in another region is named; missing bucket and prefix, access denied,
# bad credentials with their codes; transient
# 503s retried; an object rewritten mid-sync fails the job; cancel and resume after kill -9 of
# a server.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"

# The secret key bdn gets: a value no log, database or /metrics may ever show.
SECRET_VALUE="bdn-s3-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"

step "start s3rver and the proxy; populate with awscli"
start_s3rver
start_s3_proxy "{\"upstream\": \"$S3\", \"keys\": {\"S3RVER\": \"S3RVER\", \"AKIDBDNTEST\": \"$SECRET_VALUE\"},
  \"regions\": [\"us-east-1\", \"auto\", \"eu-west-1\"], \"deny\": [\"locked\"]}"
aws_direct s3 mb s3://models >/dev/null
aws_direct s3 mb s3://locked >/dev/null
SRC="$WORK/src"
mkdir -p "$SRC/qwen/tokenizer" "$SRC/qwen/odd" "$SRC/qwen/nested/deeper/deepest" "$SRC/many"
random_file "$SRC/qwen/model.safetensors" 3000000 1
random_file "$SRC/qwen/nested/deeper/deepest/shard.bin" 700000 2
printf '{"hidden": 64}\n' >"$SRC/qwen/config.json"
printf '{"a": 0}\n' >"$SRC/qwen/tokenizer/vocab.json"
: >"$SRC/qwen/empty.txt"
ODD=("a b+c%d#e?f.bin" "日本語 ü.txt" "100%.txt" "q?x=1&y=2" "#hash" "plus+plus")
for i in "${!ODD[@]}"; do printf 'odd %s\n' "$i" >"$SRC/qwen/odd/${ODD[$i]}"; done
for i in $(seq 1 1100); do printf '%s\n' "$i" >"$SRC/many/obj-$(printf %05d "$i").txt"; done
aws_direct s3 sync --quiet "$SRC" s3://models/
# A prefix that is also a key, and a "folder" marker object.
printf 'i am a key\n' | aws_direct s3 cp --quiet - s3://models/qwen
aws_direct s3api put-object --bucket models --key qwen/folder/ >/dev/null
# A prefix with special characters.
printf 'special\n' | aws_direct s3 cp --quiet - "s3://models/sp é+%#?/x.txt"
printf 'locked\n' | aws_direct s3 cp --quiet - s3://locked/a.txt

step "the proxy's SigV4 check accepts awscli's requests (continuation tokens, special prefixes) and refuses a wrong key"
aws_proxy() { AWS_ACCESS_KEY_ID=$1 AWS_SECRET_ACCESS_KEY=$2 AWS_DEFAULT_REGION=us-east-1 "$AWS" --endpoint-url "$PROXY" "${@:3}"; }
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
n=$(aws_proxy S3RVER S3RVER s3api list-objects-v2 --bucket models --prefix many/ --page-size 400 \
      --query 'length(Contents)' --output text | awk '{s += $1} END {print s}')
assert_eq "1100" "$n" "objects awscli listed through the proxy"
n=$(aws_proxy S3RVER S3RVER s3api list-objects-v2 --bucket models --prefix "sp é+%#?/" \
      --query 'length(Contents)' --output text)
assert_eq "1" "$n" "objects under the special prefix"
assert_eq "0" "$(proxy_stat refused)" "awscli requests the proxy refused"
queries=$(proxy_stat list_queries)
assert_contains "$queries" "continuation-token="
rc=0; aws_proxy S3RVER wrong-secret s3api list-objects-v2 --bucket models --prefix many/ \
  >/dev/null 2>"$WORK/aws.err" || rc=$?
[ "$rc" -ne 0 ] || fail "awscli with a wrong secret passed the proxy"
assert_contains "$(cat "$WORK/aws.err")" "SignatureDoesNotMatch"

printf '{"access_key_id": "AKIDBDNTEST", "secret_access_key": "%s"}' "$SECRET_VALUE" | "$BDN" secret set s3
printf '{"access_key_id": "AKIDBDNTEST", "secret_access_key": "not-the-secret"}' | "$BDN" secret set s3-bad-secret
printf '{"access_key_id": "AKIDUNKNOWN", "secret_access_key": "x"}' | "$BDN" secret set s3-unknown
printf 'S3RVER:S3RVER' | "$BDN" secret set s3-malformed
printf '{"access_id": "AKIDBDNTEST", "secret": "%s"}' "$SECRET_VALUE" | "$BDN" secret set gcs-hmac
SYNC=sync_s3
sync_s3() { "$BDN" --json volume sync start --endpoint "$PROXY" "$@" 2>>"$WORK/bdn-stderr.log"; }

step "embedded: s3:// mirrors a prefix; every file pulls back byte for byte; every request passed the SigV4 check"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source s3://models/qwen --dest bdn:s3/qwen:prod --auth-secret-name s3)
assert_eq "READY" "$(jf "$out" state)" "state"
assert_eq "0" "$(proxy_stat refused)" "bdn requests the proxy refused ($(proxy_stat refusals))"
[ "$(proxy_stat verified)" -gt 0 ] || fail "no request was verified"
ref=$(jf "$out" version_ref)
mkdir -p "$WORK/pull"
"$BDN" volume pull "$ref" "$WORK/pull" >/dev/null
same_files "$SRC/qwen" "$WORK/pull"
assert_eq "0" "$(stat -c %s "$WORK/pull/empty.txt")" "size of the empty object"
[ ! -e "$WORK/pull/folder" ] || fail "the folder marker qwen/folder/ became an entry"
assert_eq "$(wc -l <"$WORK/want.list")" "$(jf "$out" progress objects_total)" "objects_total"

step "embedded: the same listing again resolves by metadata: zero object GETs at the server"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source s3://models/qwen --dest bdn:s3/qwen --auth-secret-name s3)
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "0" "$(proxy_stat object_gets)" "object GETs of the re-sync"
assert_eq "0" "$(jf "$out" progress bytes_fetched)" "bytes fetched by the re-sync"

step "embedded: 1,100 objects over two signed listing pages"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source s3://models/many/ --dest bdn:s3/many --auth-secret-name s3)
assert_eq "1100" "$(jf "$out" progress objects_total)" "objects_total"
assert_eq "2" "$(proxy_stat list_requests)" "listing pages"
assert_contains "$(proxy_stat list_queries)" "continuation-token="
assert_eq "0" "$(proxy_stat refused)" "refused requests"
assert_eq "1100" "$("$BDN" volume cat "$(jf "$out" version_ref)/obj-01100.txt")" "last object"

step "embedded: a prefix with special characters; a prefix naming one object; include/exclude"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source "s3://models/sp é+%#?" --dest bdn:s3/special --auth-secret-name s3)
assert_eq "special" "$("$BDN" volume cat "$(jf "$out" version_ref)/x.txt")" "file under the special prefix"
out=$(sync_s3 --source "s3://models/qwen/odd/a b+c%d#e?f.bin" --dest bdn:s3/single --auth-secret-name s3)
assert_eq "odd 0" "$("$BDN" volume cat "$(jf "$out" version_ref)/a b+c%d#e?f.bin")" "the one object"
assert_eq "0" "$(proxy_stat refused)" "refused requests"
out=$(sync_s3 --source s3://models/qwen --dest bdn:s3/json --auth-secret-name s3 \
  --include '*.json' --exclude 'tokenizer/*')
assert_eq "config.json" "$("$BDN" volume ls -R "$(jf "$out" version_ref)" | grep -o '[^ ]*\.json$' | tr '\n' ' ' | sed 's/ $//')" "selected files"

step "r2://, cw:// and gs:// (HMAC) map onto the same API through --endpoint"
for src in r2://0123abcd.models/qwen cw://models/qwen; do
  curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
  out=$(sync_s3 --source "$src" --dest bdn:s3/other --auth-secret-name s3)
  assert_eq "READY" "$(jf "$out" state)" "state of $src"
  want_region='["us-east-1"]'
  if [[ $src == r2://* ]]; then want_region='["auto"]'; fi
  assert_eq "$want_region" "$(proxy_stat signed_regions)" "regions $src signed for"
  assert_eq "$(b3sum --no-names "$SRC/qwen/model.safetensors")" \
    "$("$BDN" volume cat "$(jf "$out" version_ref)/model.safetensors" | b3sum --no-names)" "model of $src"
done
out=$(sync_s3 --source gs://models/qwen --dest bdn:s3/gs --auth-secret-name gcs-hmac)
assert_eq "READY" "$(jf "$out" state)" "state of gs:// with HMAC keys"
assert_eq "0" "$(proxy_stat refused)" "refused requests ($(proxy_stat refusals))"

step "--region is the region every request is signed for; a bucket in another region is named"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source s3://models/qwen --region eu-west-1 --dest bdn:s3/region --auth-secret-name s3)
assert_eq "READY" "$(jf "$out" state)" "state with --region eu-west-1"
assert_eq '["eu-west-1"]' "$(proxy_stat signed_regions)" "regions signed for with --region eu-west-1"
assert_eq "0" "$(proxy_stat refused)" "refused requests ($(proxy_stat refusals))"
[ "$(proxy_stat object_gets)" -gt 0 ] || fail "no object GET was signed for eu-west-1"
assert_eq "${ref#*@}" "$(jf "$out" version)" "the version synced with --region (the same tree)"
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
out=$(sync_s3 --source s3://models/qwen --dest bdn:s3/region --auth-secret-name s3)
assert_eq '["us-east-1"]' "$(proxy_stat signed_regions)" "regions signed for without --region"
expect_failed source_not_found 3 's3://models/qwen: bucket "models" is in region us-east-1, not ap-south-1: give --region us-east-1' \
  --source s3://models/qwen --region ap-south-1 --dest bdn:s3/f0 --auth-secret-name s3

step "failures end FAILED with stable codes naming the source"
expect_failed source_not_found 3 's3://nobucket/x: bucket "nobucket" not found (NoSuchBucket' \
  --source s3://nobucket/x --dest bdn:s3/f1 --auth-secret-name s3
expect_failed source_not_found 3 's3://models/no/such: no objects under the prefix "no/such/"' \
  --source s3://models/no/such --dest bdn:s3/f2 --auth-secret-name s3
expect_failed bad_credentials 6 'the credentials in secret "s3-bad-secret" were refused (SignatureDoesNotMatch' \
  --source s3://models/qwen --dest bdn:s3/f3 --auth-secret-name s3-bad-secret
expect_failed bad_credentials 6 'the credentials in secret "s3-unknown" were refused (InvalidAccessKeyId' \
  --source s3://models/qwen --dest bdn:s3/f4 --auth-secret-name s3-unknown
expect_failed access_denied 6 'access denied (AccessDenied' \
  --source s3://locked/ --dest bdn:s3/f5 --auth-secret-name s3
expect_failed access_denied 6 '(anonymous: give a key pair with --auth-secret-name)' \
  --source s3://models/qwen --dest bdn:s3/f6
expect_failed invalid_secret 2 'secret "s3-malformed": not a JSON object' \
  --source s3://models/qwen --dest bdn:s3/f7 --auth-secret-name s3-malformed

step "transient 503s (with Retry-After) are retried; persistent ones fail source_unavailable"
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "list", "count": 2, "status": 503, "retry_after": 1},
  {"kind": "get", "path": "config.json", "count": 1, "status": 500},
  {"kind": "get", "path": "model.safetensors", "count": 1, "drop_after": 100000}]' >/dev/null
out=$(sync_s3 --source s3://models/qwen --dest bdn:s3/retried --auth-secret-name s3)
assert_eq "READY" "$(jf "$out" state)" "state after transient errors"
assert_eq "$ref" "bdn:s3/qwen@$(jf "$out" version)" "the version of a retried sync is the same tree"
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "list", "count": 100, "status": 503}]' >/dev/null
expect_failed source_unavailable 7 "HTTP 503" \
  --source s3://models/qwen --dest bdn:s3/f8 --auth-secret-name s3 --retry-deadline 2s
curl -sf -X POST "$PROXY/_faults" -d '[]' >/dev/null

step "an object rewritten during the sync fails the job (source_changed), sealing nothing"
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "get", "path": "qwen/config.json", "count": 1, "hold": true}]' >/dev/null
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
sync_s3 --source s3://models/qwen --dest bdn:s3/changed --auth-secret-name s3 >"$WORK/changed.json" 2>/dev/null &
sync_pid=$!
for _ in $(seq 1 200); do [ "$(proxy_stat object_gets)" -ge 1 ] && break; sleep 0.05; done
printf '{"hidden": 128}\n' | aws_direct s3 cp --quiet - s3://models/qwen/config.json
curl -sf -X POST "$PROXY/_release" >/dev/null
rc=0; wait "$sync_pid" || rc=$?
assert_eq "8" "$rc" "exit code of a sync whose object changed"
out=$(cat "$WORK/changed.json")
assert_eq "source_changed" "$(jf "$out" error code)" "code"
assert_contains "$(jf "$out" error message)" 's3://models/qwen: object "config.json": changed during the sync'
run_fails 3 'bdn: error: volume bdn:s3/changed: not found' "$BDN" volume versions bdn:s3/changed

step "remote: cancel a job held at the source; resume after kill -9 of the server"
start_origin --sync-allow-private-addresses  # the proxy listens on 127.0.0.1
export BDN_HOME="$WORK/home-remote"
printf '{"access_key_id": "AKIDBDNTEST", "secret_access_key": "%s"}' "$SECRET_VALUE" | "$BDN" secret set s3
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "get", "path": "", "count": 1, "hold": true}]' >/dev/null
id=$("$BDN" volume sync start --source s3://models/qwen --endpoint "$PROXY" --dest bdn:s3/cancel --auth-secret-name s3 2>/dev/null)
[[ "$id" == sync_* ]] || fail "sync start printed [$id]"
out=$("$BDN" --json volume sync cancel "$id" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state after cancel"
curl -sf -X POST "$PROXY/_release" >/dev/null

# Every object but model.safetensors is sealed and recorded while that one is held; the server
# is killed then, and its next start resumes the job, fetching only the one object.
curl -sf -X POST "$PROXY/_faults" -d '[{"kind": "get", "path": "model.safetensors", "count": 1, "hold": true}]' >/dev/null
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
id=$("$BDN" volume sync start --source s3://models/qwen --endpoint "$PROXY" --dest bdn:s3/resumed --auth-secret-name s3 2>/dev/null)
total=$(wc -l <"$WORK/want.list")
for _ in $(seq 1 400); do
  done_now=$("$BDN" --json volume sync describe "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["progress"]["objects_done"])')
  [ "$done_now" -ge $((total - 1)) ] && break
  sleep 0.05
done
assert_eq "$((total - 1))" "$done_now" "objects sealed before the kill"
kill -9 "$SERVER_PID"
wait_gone "$SERVER_PID" 5000
curl -sf -X POST "$PROXY/_faults" -d '[]' >/dev/null
curl -sf -X POST "$PROXY/_release" >/dev/null
curl -sf -X POST "$PROXY/_stats/reset" >/dev/null
start_bdn serve2 serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth --sync-allow-private-addresses
export BDN_REMOTE="$STARTED_URL"
out=$(wait_sync_job "$id" READY)
assert_eq "READY" "$(jf "$out" state)" "state of the resumed job"
assert_eq "1" "$(proxy_stat object_gets)" "object GETs after the restart (only the object not sealed before)"
rref=$(jf "$out" version_ref)
assert_eq "$(b3sum --no-names "$SRC/qwen/model.safetensors")" "$("$BDN" volume cat "$rref/model.safetensors" | b3sum --no-names)" "b3sum of the object fetched after the restart"
assert_eq '{"hidden": 128}' "$("$BDN" volume cat "$rref/config.json")" "an object sealed before the kill"

step "the secret's value is in no log, no database and not in /metrics"
metrics=$(curl -sf "$STARTED_URL/metrics") || fail "GET /metrics failed"
[[ $metrics != *"$SECRET_VALUE"* ]] || fail "a secret's value is in /metrics"
for f in "$WORK"/bdn-stderr.log "$WORK"/serve*.log "$WORK"/changed.json; do  # (proxy.json holds it: the proxy checks signatures)
  [ -f "$f" ] || continue
  assert_absent "$SECRET_VALUE" "the secret's value is in $f" "$f"
done
assert_absent "$SECRET_VALUE" "the secret's value is stored in plaintext" "$WORK/srv" "$WORK/home"
echo PASS
