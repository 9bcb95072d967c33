#!/usr/bin/env bash
# bdn volume sync and bdn secret (docs/spec.md §6), embedded and through a real `bdn serve`: a
# file:// source synced embedded gives the bytes of the directory (b3sum of every file after a
# pull); --include/--exclude select as documented; secrets are set from stdin, listed by name only
# and removed; an hf:// source on the Hub fixture (tests/fixtures/hf_hub.py) synced on the server
# with --wait prints the pinned ref, and its files pull back byte for byte; a re-sync of the same
# commit is READY by the metadata check with zero object GETs at the Hub; failures end FAILED with
# their stable codes and exit codes; cancel ends a held job CANCELED.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
FIXTURES="$(cd "$(dirname "$0")/../fixtures" && pwd)"

# job_json_field JSON FIELD...: a nested field of a job's JSON (fields as path steps).
jf() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v,list) else v[k]
print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$@"; }

step "embedded: sync a file:// directory"
mkdir -p "$WORK/src/sub/deeper" "$WORK/pull1"
random_file "$WORK/src/model.safetensors" 3000000 1
printf '{"a": 1}\n' > "$WORK/src/config.json"
printf '{"b": 2}\n' > "$WORK/src/sub/deeper/tok.json"
printf 'readme\n' > "$WORK/src/README.md"
: > "$WORK/src/sub/empty.txt"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/files:prod)
assert_eq "READY" "$(jf "$out" state)" "state"
ref=$(jf "$out" version_ref)
[[ "$ref" == bdn:mirror/files@b3:* ]] || fail "sync printed [$out]"
assert_eq "5" "$(jf "$out" progress objects_total)" "objects_total"
"$BDN" volume pull bdn:mirror/files:prod "$WORK/pull1" >/dev/null
for f in model.safetensors config.json sub/deeper/tok.json README.md sub/empty.txt; do
  assert_eq "$(b3sum --no-names "$WORK/src/$f")" "$(b3sum --no-names "$WORK/pull1/$f")" "b3sum of $f"
done
id=$(jf "$out" id)
desc=$("$BDN" volume sync describe "$id")
assert_contains "$desc" "state: READY"
assert_contains "$desc" "version: $ref"
list=$("$BDN" --json volume sync list --dest bdn:mirror)
assert_eq "$id" "$(jf "$list" jobs 0 id)" "listed job"

step "embedded: the same source again resolves by metadata (unchanged)"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/files)
assert_eq "READY" "$(jf "$out" state)" "state"
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "0" "$(jf "$out" progress bytes_fetched)" "bytes fetched by the re-sync"

step "embedded: --include/--exclude (* also matches /, exclude wins)"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/json \
  --include '*.json' --exclude 'sub/*')
ls_out=$("$BDN" volume ls -R "$(jf "$out" version_ref)")
assert_eq "config.json" "$(grep -o '[^ ]*\.json$' <<<"$ls_out" | tr '\n' ' ' | sed 's/ $//')" "selected files"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/json \
  --include '*.safetensors' --include 'README*')
assert_eq "bdn:mirror/json@$(jf "$out" version)" "$(jf "$out" version_ref)" "ref"
rc=0; "$BDN" volume sync start --source "file://$WORK/src" --dest bdn:mirror/none --include '*.gguf' \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of an include that matches nothing"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (include_matched_nothing): --include \"*.gguf\": matches nothing in file://$WORK/src (5 objects)"$ ]] ||
  fail "stderr of an include that matches nothing: $(cat "$WORK/err")"

step "embedded: secrets from stdin, listed by name only, removed"
printf 'hf_topsecretvalue\n' | "$BDN" secret set hf-token
ls_out=$("$BDN" secret ls)
assert_contains "$ls_out" "hf-token"
[[ "$ls_out" != *topsecret* ]] || fail "secret ls printed the value"
! grep -rqa topsecret "$BDN_HOME" || fail "the secret's value is stored in plaintext under BDN_HOME"
assert_eq "600" "$(stat -c %a "$BDN_HOME/secrets.key")" "mode of secrets.key"
"$BDN" secret rm hf-token 2>/dev/null
run_fails 3 'bdn: error: secret "hf-token": not found' "$BDN" secret rm hf-token
run_fails 3 'bdn: error: secret "nope": not found' \
  "$BDN" volume sync start --source "file://$WORK/src" --dest bdn:mirror/x --auth-secret-name nope
run_fails 2 'bdn: error: secret "hf-token": empty value on stdin' \
  "$BDN" secret set hf-token </dev/null

step "start the Hub fixture and the origin"
cat > "$WORK/hub.json" <<'EOF'
{"page_size": 2,
 "tokens": {"hf_good": ["org/private"]},
 "repos": {
  "org/model": {"refs": {"main": "1111111111111111111111111111111111111111"},
    "commits": {"1111111111111111111111111111111111111111": {"files": {
      "config.json": {"text": "{\"hidden\": 64}\n"},
      "model-00001.safetensors": {"gen": {"size": 5000000, "seed": 1}, "lfs": true},
      "model-00002.safetensors": {"gen": {"size": 3000000, "seed": 2}, "lfs": true},
      "tokenizer/vocab.json": {"text": "{\"a\": 0}\n"},
      "README.md": {"text": "# model\n"}}}}},
  "org/private": {"private": true, "refs": {"main": "2222222222222222222222222222222222222222"},
    "commits": {"2222222222222222222222222222222222222222": {"files": {
      "weights.bin": {"text": "private weights\n"}}}}}
 }}
EOF
python3 "$FIXTURES/hf_hub.py" "$WORK/hub.json" "$WORK/hub.port" 2>"$WORK/hub.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/hub.port" ] && break; sleep 0.05; done
[ -s "$WORK/hub.port" ] || fail "the Hub fixture did not start: $(cat "$WORK/hub.log")"
HUB="http://127.0.0.1:$(cat "$WORK/hub.port")"
export HF_ENDPOINT="$HUB"
start_origin
export BDN_HOME="$WORK/home-unused"
hub_stat() { curl -sf "$HUB/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

step "remote: hf:// with --wait prints the pinned ref; the files pull back byte for byte"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
ref=$("$BDN" volume sync start --source hf://org/model --dest bdn:hf/model:prod --wait 2>"$WORK/wait.err")
[[ "$ref" == bdn:hf/model@b3:* ]] || fail "sync --wait printed [$ref] ($(cat "$WORK/wait.err"))"
assert_eq "5" "$(hub_stat object_gets)" "object GETs of the first sync (one per file)"
mkdir -p "$WORK/pull2"
"$BDN" volume pull bdn:hf/model:prod "$WORK/pull2" >/dev/null
for f in model-00001.safetensors model-00002.safetensors config.json tokenizer/vocab.json README.md; do
  want=$(curl -sfL "$HUB/org/model/resolve/main/$f" | b3sum --no-names)
  assert_eq "$want" "$(b3sum --no-names "$WORK/pull2/$f")" "b3sum of $f"
done
jobs=$("$BDN" --json volume sync list --dest bdn:hf/model)
id=$(jf "$jobs" jobs 0 id)
desc=$("$BDN" --json volume sync describe "$id")
assert_eq "READY" "$(jf "$desc" state)" "state"
assert_eq "1111111111111111111111111111111111111111" "$(jf "$desc" source_revision)" "revision"
assert_eq "$ref" "$(jf "$desc" version_ref)" "version_ref"

step "remote: a re-sync of the same commit fetches no object byte (metadata check)"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
out=$("$BDN" --json volume sync start --source hf://org/model@main --dest bdn:hf/model --wait)
assert_eq "READY" "$(jf "$out" state)" "state"
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "0" "$(hub_stat object_gets)" "object GETs of the re-sync"
assert_eq "0" "$(hub_stat object_bytes)" "object bytes of the re-sync"

step "remote: failures end FAILED with stable codes"
out=$("$BDN" --json volume sync start --source hf://org/missing --dest bdn:hf/missing --wait) && fail "missing repo: exit 0"
assert_eq "FAILED" "$(jf "$out" state)" "state"
assert_eq "source_not_found" "$(jf "$out" error code)" "code of a missing repo"
rc=0; "$BDN" volume sync start --source hf://org/model@nope --dest bdn:hf/model --wait >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of a missing revision"
assert_contains "$(cat "$WORK/err")" "FAILED (revision_not_found): hf://org/model@nope"
out=$("$BDN" --json volume sync start --source hf://org/private --dest bdn:hf/private --wait) && fail "private repo: exit 0"
assert_eq "source_not_found" "$(jf "$out" error code)" "code of a private repo without a token"

step "remote: secrets on the server; a private repo with its token"
printf 'hf_good' | "$BDN" secret set hf-good
printf 'hf_bad' | "$BDN" secret set hf-bad
assert_eq "hf-bad hf-good" "$("$BDN" --json secret ls | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["secrets"]))')" "secret names"
ref=$("$BDN" volume sync start --source hf://org/private --dest bdn:hf/private --auth-secret-name hf-good --wait 2>/dev/null)
assert_eq "private weights" "$("$BDN" volume cat "$ref/weights.bin")" "bytes of a private file"
out=$("$BDN" --json volume sync start --source hf://org/private --dest bdn:hf/private2 --auth-secret-name hf-bad --wait) && fail "bad token: exit 0"
assert_eq "bad_credentials" "$(jf "$out" error code)" "code of a bad token"
"$BDN" secret rm hf-bad 2>/dev/null
! grep -qa 'hf_good\|hf_bad' "$WORK/serve.log" "$WORK/srv/registry.db" || fail "a secret's value is in the server's log or database"
metrics=$(curl -sf "$URL/metrics") || fail "GET /metrics failed"
[[ $metrics != *hf_good* ]] || fail "a secret's value is in /metrics"

step "remote: cancel a job that waits on the source"
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "cdn", "path": "", "count": 1, "hold": true}]' >/dev/null
id=$("$BDN" volume sync start --source hf://org/model --dest bdn:hf/cancel 2>/dev/null)
[[ "$id" == sync_* ]] || fail "sync start printed [$id]"
out=$("$BDN" --json volume sync cancel "$id" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state after cancel"
assert_eq "canceled" "$(jf "$out" error code)" "code after cancel"
curl -sf -X POST "$HUB/_release" >/dev/null
run_fails 8 "bdn: error: sync job $id: already CANCELED" "$BDN" volume sync cancel "$id"
run_fails 3 "bdn: error: sync job sync_0000000000000000: not found" "$BDN" volume sync describe sync_0000000000000000
echo PASS
