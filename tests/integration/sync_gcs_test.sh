#!/usr/bin/env bash
# gs:// over the JSON API against the GCS fixture (tests/fixtures/gcs_fake.py) with a
# service-account key: bdn signs a JWT (RS256, OpenSSL) that the fixture's token endpoint checks
# with `openssl dgst -verify`, then lists (1,100 objects over three pages) and reads each object
# at its listed generation; the files pull back byte for byte (keys with spaces, +, %, #, ? and
# unicode, an empty object, nested prefixes); a re-sync resolves by metadata with zero object
# GETs at the fixture; an object rewritten mid-sync fails source_changed; a key the token
# endpoint refuses is bad_credentials, a denied bucket access_denied, a missing bucket
# source_not_found; the key's value is in no output.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"

step "keys and the fixture"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/sa.pem" 2>/dev/null
openssl pkey -in "$WORK/sa.pem" -pubout -out "$WORK/sa.pub"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/other.pem" 2>/dev/null
python3 - "$WORK" <<'PY'
import json, random, sys
work = sys.argv[1]
objs = {"qwen/config.json": '{"layers": 28}\n', "qwen/empty.txt": "",
        "qwen/model.safetensors": {"gen": [3000000, 5]},
        "qwen/nested/deeper/shard.bin": {"gen": [400000, 6]},
        "qwen/odd/a b+c%d#e?f.bin": "odd 0\n", "qwen/odd/日本語 ü.txt": "odd 1\n",
        "qwen": "a key named like the prefix\n", "qwen/folder/": ""}
for i in range(1, 1101):
    objs[f"many/o-{i:05d}"] = f"{i}\n"
cfg = {"page_size": 500,
       "accounts": {"reader@bdn-test.iam.gserviceaccount.com": f"{work}/sa.pub"},
       "deny": {"reader@bdn-test.iam.gserviceaccount.com": ["secret-bucket"]},
       "buckets": {"models": {"objects": objs}, "secret-bucket": {"objects": {"a": "x"}}}}
json.dump(cfg, open(f"{work}/gcs.json", "w"))
PY
python3 "$FIXTURES/gcs_fake.py" "$WORK/gcs.json" "$WORK/gcs.port" 2>"$WORK/gcs.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/gcs.port" ] && break; sleep 0.05; done
[ -s "$WORK/gcs.port" ] || fail "the GCS fixture did not start: $(cat "$WORK/gcs.log")"
GCS="http://127.0.0.1:$(cat "$WORK/gcs.port")"
sa_json() {  # sa_json PEM: a service-account key file as Google issues it
  python3 -c 'import json,sys; print(json.dumps({"type": "service_account", "project_id": "bdn-test",
    "private_key_id": "0123", "private_key": open(sys.argv[1]).read(),
    "client_email": "reader@bdn-test.iam.gserviceaccount.com", "client_id": "1",
    "token_uri": sys.argv[2] + "/token"}))' "$1" "$GCS"
}
sa_json "$WORK/sa.pem" | "$BDN" secret set gcs-sa
sa_json "$WORK/other.pem" | "$BDN" secret set gcs-other
gcs_stat() { curl -sf "$GCS/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
SYNC=sync_gs
sync_gs() { "$BDN" --json volume sync start --endpoint "$GCS" "$@" 2>>"$WORK/bdn-stderr.log"; }

step "a service-account key: the JWT bearer flow, then every object pulls back byte for byte"
out=$(sync_gs --source gs://models/qwen --dest bdn:gs/qwen:prod --auth-secret-name gcs-sa)
assert_eq "READY" "$(jf "$out" state)" "state ($(jf "$out" error))"
assert_eq "1" "$(gcs_stat token_requests)" "token requests (one token for the whole job)"
ref=$(jf "$out" version_ref)
mkdir -p "$WORK/pull"
"$BDN" volume pull "$ref" "$WORK/pull" >/dev/null
(cd "$WORK/pull" && find . -type f | sort) >"$WORK/got.list"
printf '%s\n' ./config.json ./empty.txt ./model.safetensors ./nested/deeper/shard.bin \
  "./odd/a b+c%d#e?f.bin" "./odd/日本語 ü.txt" | sort >"$WORK/want.list"
cmp "$WORK/want.list" "$WORK/got.list" || fail "files differ: $(diff "$WORK/want.list" "$WORK/got.list")"
python3 - "$WORK/pull" <<'PY' || fail "bytes differ"
import random, sys
p = sys.argv[1]
want = {"config.json": b'{"layers": 28}\n', "empty.txt": b"",
        "model.safetensors": random.Random(5).randbytes(3000000),
        "nested/deeper/shard.bin": random.Random(6).randbytes(400000),
        "odd/a b+c%d#e?f.bin": b"odd 0\n", "odd/日本語 ü.txt": b"odd 1\n"}
for name, data in want.items():
    if open(f"{p}/{name}", "rb").read() != data:
        sys.exit(f"{name} differs")
PY

step "a re-sync resolves by metadata: zero object GETs"
curl -sf -X POST "$GCS/_stats/reset" >/dev/null
out=$(sync_gs --source gs://models/qwen --dest bdn:gs/qwen --auth-secret-name gcs-sa)
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version"
assert_eq "0" "$(gcs_stat object_gets)" "object GETs of the re-sync"

step "1,100 objects over three pages"
curl -sf -X POST "$GCS/_stats/reset" >/dev/null
out=$(sync_gs --source gs://models/many --dest bdn:gs/many --auth-secret-name gcs-sa)
assert_eq "1100" "$(jf "$out" progress objects_total)" "objects_total"
assert_eq "3" "$(gcs_stat list_requests)" "listing pages"

step "an object rewritten between the listing and its GET fails the job (its generation is gone)"
curl -sf -X POST "$GCS/_mutate_after_list" -d '{"bucket": "models", "name": "qwen/config.json", "text": "{\"layers\": 32}\n"}' >/dev/null
rc=0; out=$(sync_gs --source gs://models/qwen --dest bdn:gs/changed --auth-secret-name gcs-sa) || rc=$?
assert_eq "8" "$rc" "exit code"
assert_eq "source_changed" "$(jf "$out" error code)" "code"
assert_contains "$(jf "$out" error message)" 'gs://models/qwen: object "config.json": changed or removed during the sync (generation'

step "failures with stable codes"
expect_failed bad_credentials 6 'the credentials in secret "gcs-other" (service account reader@bdn-test.iam.gserviceaccount.com) were refused by' \
  --source gs://models/qwen --dest bdn:gs/f1 --auth-secret-name gcs-other
expect_failed access_denied 6 'access denied' \
  --source gs://secret-bucket --dest bdn:gs/f2 --auth-secret-name gcs-sa
expect_failed source_not_found 3 'gs://nobucket/x: bucket "nobucket" not found (The specified bucket does not exist.)' \
  --source gs://nobucket/x --dest bdn:gs/f3 --auth-secret-name gcs-sa
expect_failed access_denied 6 '(anonymous: give a service-account key with --auth-secret-name)' \
  --source gs://models/qwen --dest bdn:gs/f4
printf '{"type": "service_account", "client_email": "x@y", "private_key": "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----\\n"}' | "$BDN" secret set gcs-junk
expect_failed invalid_secret 2 "secret \"gcs-junk\": the service-account key's private_key: not a PEM RSA private key" \
  --source gs://models/qwen --dest bdn:gs/f5 --auth-secret-name gcs-junk
key_line=$(sed -n 2p "$WORK/sa.pem")
for f in "$WORK"/bdn-stderr.log "$WORK"/gcs.log; do
  assert_absent "$key_line" "the private key is in $f" "$f"
done
assert_absent "$key_line" "the private key is stored in plaintext" "$WORK/home"
echo PASS
