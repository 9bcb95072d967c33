#!/usr/bin/env bash
# bdn serve with authentication on, as deployments run it: who may manage secrets and sync jobs,
# and what a server's sync jobs may read (docs/sync.md, "Sources on a server").
# - Secrets need an admin key for every namespace: a pull key and an admin key of one namespace
#   get 403 with exact messages, and nothing is stored or removed.
# - Starting a job needs push (and tag with a tag) on its namespace, reading it pull, cancelling it
#   push: a pull key and a push key of another namespace get exact 403s, and no job is made.
# - file:// is read only under --sync-file-root, never in the data directory (also through a
#   symlink, "..", or a root that holds it); bdn serve refuses a root inside its data directory.
# - http(s) sources, endpoints and HF_ENDPOINT reach only public addresses: a non-public IP literal
#   is refused at start, a name that resolves to loopback (and the Hub at 127.0.0.1) when the job
#   connects; no request reaches the server behind them. --sync-allow-private-addresses lets the
#   same sources through.
# - A job that would send its secret to a host its caller chooses (http(s)://, --endpoint,
#   azure://) needs an admin key for every namespace: a push key gets 403 secret_not_allowed.
# - A job's body with an unknown or repeated field is refused (400), naming it.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

step "a web and Hub server on 127.0.0.1 (tests/fixtures/hf_hub.py)"
cat > "$WORK/hub.json" <<'EOF'
{"files": {"w.bin": {"text": "weights\n"}},
 "tokens": {"hf_admin_value": ["*"]},
 "repos": {"org/model": {"refs": {"main": "1111111111111111111111111111111111111111"},
   "commits": {"1111111111111111111111111111111111111111": {"files": {
     "config.json": {"text": "{\"hidden\": 64}\n"}}}}}}}
EOF
start_hub "$WORK/hub.json"
PORT=${HUB##*:}
# hub_requests: requests the fixture has answered since its last reset, this read of /_stats
# included.
hub_requests() { curl -sf "$HUB/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

mkdir -p "$WORK/allowed/run"
printf 'checkpoint\n' >"$WORK/allowed/run/ckpt.bin"
ln -s /etc "$WORK/allowed/etc-link"
ln -s "$WORK/srv" "$WORK/allowed/data-link"

step "bdn serve refuses a --sync-file-root that is missing, not a directory, or in its data directory"
run_fails 3 "bdn: error: --sync-file-root \"$WORK/nope\": No such file or directory" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-file-root "$WORK/nope"
run_fails 2 "bdn: error: --sync-file-root \"$WORK/allowed/run/ckpt.bin\": not a directory" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-file-root "$WORK/allowed/run/ckpt.bin"
mkdir -p "$WORK/srv/inner"
run_fails 2 "bdn: error: --sync-file-root \"$WORK/srv/inner\": inside the data directory (--data $WORK/srv), which is never a sync source" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-file-root "$WORK/srv/inner"
rmdir "$WORK/srv/inner"
[ ! -e "$WORK/srv/registry.db" ] || fail "a server that refused its flags opened its data directory"

step "bdn serve with authentication, its file root holding its data directory, HF_ENDPOINT on 127.0.0.1"
HF_ENDPOINT="$HUB" start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-file-root "$WORK"
SERVER_PID=$STARTED_PID
URL=$STARTED_URL
ADMIN=$(cat "$WORK/srv/admin.token")
export BDN_REMOTE="$URL" BDN_TOKEN="$ADMIN" BDN_HOME="$WORK/home-unused"
key_id() { echo "$1" | cut -d_ -f2; }
PULL=$("$BDN" key create --namespace weights --scope pull)
PUSH=$("$BDN" key create --namespace weights --scope push,pull)
OTHER=$("$BDN" key create --namespace other --scope push,pull,tag)
NSADMIN=$("$BDN" key create --namespace weights --scope admin,push,pull)
PULL_ID=$(key_id "$PULL") PUSH_ID=$(key_id "$PUSH") OTHER_ID=$(key_id "$OTHER") NSADMIN_ID=$(key_id "$NSADMIN")
as() { local token=$1; shift; env BDN_TOKEN="$token" "$BDN" "$@"; }

# http_status METHOD PATH TOKEN [BODY]: prints the HTTP status; the body goes to $WORK/body.
http_status() {
  local data=()
  [ -n "${4:-}" ] && data=(-H 'Content-Type: application/json' --data "$4")
  curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3" "${data[@]}" "$URL$2"
}
body_message() { python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <"$WORK/body"; }

step "secrets: a pull key and an admin key of one namespace get 403; nothing is stored or removed"
run_fails 6 "bdn: error: key bdn_$PULL_ID: no \"admin\" scope for any namespace" \
  as "$PULL" secret set hf-token <<<"hf_pulled"
run_fails 6 "bdn: error: key bdn_$PULL_ID: no \"admin\" scope for any namespace" as "$PULL" secret ls
run_fails 6 "bdn: error: key bdn_$NSADMIN_ID: secrets need the \"admin\" scope for every namespace (\"*\")" \
  as "$NSADMIN" secret set hf-token <<<"hf_nsadmin"
run_fails 6 "bdn: error: key bdn_$NSADMIN_ID: secrets need the \"admin\" scope for every namespace (\"*\")" \
  as "$NSADMIN" secret ls
for key in PULL PUSH NSADMIN; do
  token=${!key}
  assert_eq 403 "$(http_status PUT /v1/secrets/s1 "$token" '{"value": "v"}')" "PUT /v1/secrets with $key"
  assert_eq 403 "$(http_status GET /v1/secrets "$token")" "GET /v1/secrets with $key"
  assert_eq 403 "$(http_status DELETE /v1/secrets/s1 "$token")" "DELETE /v1/secrets with $key"
done
assert_eq '[]' "$(jf "$("$BDN" --json secret ls)" secrets)" "secrets after refused sets"
# For the jobs of namespace weights: a push key may name only a secret set for its namespace
# (sync_secret_namespaces_test.sh).
printf 'hf_admin_value' | "$BDN" secret set hf-token --namespace weights
run_fails 6 "bdn: error: key bdn_$NSADMIN_ID: secrets need the \"admin\" scope for every namespace (\"*\")" \
  as "$NSADMIN" secret rm hf-token
assert_eq "hf-token" "$(jf "$("$BDN" --json secret ls)" secrets 0 name)" "the secret after a refused rm"

step "sync jobs: push (and tag) on the namespace to start, pull to read, push to cancel"
SRC="file://$WORK/allowed/run"
run_fails 6 "bdn: error: key bdn_$OTHER_ID: no \"push\" scope for namespace \"weights\"" \
  as "$OTHER" volume sync start --source "$SRC" --dest bdn:weights/ckpt
run_fails 6 "bdn: error: key bdn_$PULL_ID: no \"push\" scope for namespace \"weights\"" \
  as "$PULL" volume sync start --source "$SRC" --dest bdn:weights/ckpt
run_fails 6 "bdn: error: key bdn_$PUSH_ID: no \"tag\" scope for namespace \"weights\"" \
  as "$PUSH" volume sync start --source "$SRC" --dest bdn:weights/ckpt:prod
assert_eq 403 "$(http_status POST /v1/sync/jobs "$OTHER" "{\"source\": \"$SRC\", \"namespace\": \"weights\", \"volume\": \"ckpt\"}")" "POST /v1/sync/jobs with a push key of another namespace"
assert_eq "key bdn_$OTHER_ID: no \"push\" scope for namespace \"weights\"" "$(body_message)" "message of the 403"
assert_eq '[]' "$(jf "$("$BDN" --json volume sync list)" jobs)" "jobs after refused starts"
ref=$(as "$PUSH" volume sync start --source "$SRC" --dest bdn:weights/ckpt --wait 2>/dev/null)
assert_eq "checkpoint" "$(as "$PULL" volume cat "$ref/ckpt.bin")" "the file synced under the file root"
id=$(jf "$("$BDN" --json volume sync list)" jobs 0 id)
# The list says whether it was cut at 1000 jobs: not here, on the wire and in the CLI's JSON.
assert_eq 200 "$(http_status GET /v1/sync/jobs "$PULL")" "GET /v1/sync/jobs with a pull key"
assert_eq "1 false" "$(python3 -c 'import json,sys; j=json.load(sys.stdin); print(len(j["jobs"]), json.dumps(j["truncated"]))' <"$WORK/body")" "jobs and truncated on the wire"
assert_eq false "$(jf "$(as "$PULL" --json volume sync list)" truncated)" "truncated in sync list --json"
run_fails 6 "bdn: error: key bdn_$OTHER_ID: no \"pull\" scope for namespace \"weights\"" \
  as "$OTHER" volume sync describe "$id"
assert_eq '[]' "$(jf "$(as "$OTHER" --json volume sync list)" jobs)" "jobs another namespace's key lists"
run_fails 6 "bdn: error: key bdn_$PULL_ID: no \"push\" scope for namespace \"weights\"" \
  as "$PULL" volume sync cancel "$id"
assert_eq "READY" "$(jf "$(as "$PULL" --json volume sync describe "$id")" state)" "state read with a pull key"

step "file://: outside the root, through a symlink or '..', and the data directory are refused; no job"
refused_file() {  # refused_file URI_PATH MESSAGE
  run_fails 6 "bdn: error: source \"file://$1\": $2" \
    as "$PUSH" volume sync start --source "file://$1" --dest bdn:weights/refused
}
refused_file /etc "/etc is outside the directories bdn serve --sync-file-root allows (symlinks are resolved first)"
refused_file "$WORK/allowed/etc-link" "$WORK/allowed/etc-link is outside the directories bdn serve --sync-file-root allows (symlinks are resolved first)"
refused_file "$WORK/allowed/../../etc" "$WORK/allowed/../../etc is outside the directories bdn serve --sync-file-root allows (symlinks are resolved first)"
# The server's own paths are shown as <data> (docs/http-api.md, "Errors").
run_fails 6 "bdn: error: source \"file://<data>/secrets.key\": the server's data directory is never a sync source" \
  as "$PUSH" volume sync start --source "file://$WORK/srv/secrets.key" --dest bdn:weights/refused
run_fails 6 "bdn: error: source \"file://<data>\": the server's data directory is never a sync source" \
  as "$PUSH" volume sync start --source "file://$WORK/srv" --dest bdn:weights/refused
refused_file "$WORK/allowed/data-link" "the server's data directory is never a sync source"
refused_file "$WORK/allowed/../srv/registry.db" "the server's data directory is never a sync source"
refused_file "$WORK" "holds the server's data directory, which is never a sync source"
assert_eq 1 "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")" "jobs after refused file:// starts"

step "http(s) and endpoints: a non-public IP literal is refused at start; no job, no request"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
refused_addr() {  # refused_addr MESSAGE ARGS...
  local msg=$1; shift
  run_fails 6 "bdn: error: $msg; this server syncs only from public addresses (bdn serve --sync-allow-private-addresses allows others)" \
    as "$PUSH" volume sync start --dest bdn:weights/refused "$@"
}
refused_addr 'source "http://169.254.169.254/latest/meta-data/iam/security-credentials/admin": 169.254.169.254 is a link-local address' \
  --source http://169.254.169.254/latest/meta-data/iam/security-credentials/admin
refused_addr "source \"$HUB/files/w.bin\": 127.0.0.1 is a loopback address" --source "$HUB/files/w.bin"
refused_addr 'source "https://[::1]:8443/admin": [::1] is a loopback address' --source "https://[::1]:8443/admin"
refused_addr 'source "http://10.1.2.3/w.bin": 10.1.2.3 is a private address' --source http://10.1.2.3/w.bin
refused_addr "source \"s3://models/x\": --endpoint \"$HUB\": 127.0.0.1 is a loopback address" \
  --source s3://models/x --endpoint "$HUB"
assert_eq 1 "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")" "jobs after refused starts"
assert_eq 1 "$(hub_requests)" "requests that reached the web server (this read of its stats)"

step "a name that resolves to loopback, and the Hub at HF_ENDPOINT=127.0.0.1: refused when the job connects"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
rc=0; out=$(as "$PUSH" --json volume sync start --source "http://localhost:$PORT/files/w.bin" --dest bdn:weights/web --wait) || rc=$?
assert_eq 6 "$rc" "exit code of a job whose host resolves to loopback"
assert_eq "FAILED" "$(jf "$out" state)" "state"
assert_eq "address_not_allowed" "$(jf "$out" error code)" "code"
msg=$(jf "$out" error message)
[[ "$msg" =~ ^"http://localhost:$PORT/files/w.bin http://localhost:$PORT: HEAD /files/w.bin: connecting to "(127\.0\.0\.1|::1)" refused (loopback address; only public addresses are allowed); bdn serve --sync-allow-private-addresses allows others"$ ]] ||
  fail "message of a job whose host resolves to loopback: $msg"
rc=0; out=$(as "$PUSH" --json volume sync start --source hf://org/model --dest bdn:weights/hf --wait) || rc=$?
assert_eq 6 "$rc" "exit code of an hf:// job with HF_ENDPOINT on 127.0.0.1"
assert_eq "address_not_allowed" "$(jf "$out" error code)" "code"
assert_eq "hf://org/model $HUB: GET /api/models/org/model/revision/main: connecting to 127.0.0.1 refused (loopback address; only public addresses are allowed); bdn serve --sync-allow-private-addresses allows others" \
  "$(jf "$out" error message)" "message"
assert_eq 1 "$(hub_requests)" "requests that reached the web server (this read of its stats)"

step "--sync-allow-private-addresses lets the same sources through"
kill -TERM "$SERVER_PID"
wait_gone "$SERVER_PID" 10000
HF_ENDPOINT="$HUB" start_bdn serve2 serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-file-root "$WORK" \
  --sync-allow-private-addresses
export BDN_REMOTE="$STARTED_URL"
ref=$(as "$PUSH" volume sync start --source "$HUB/files/w.bin" --dest bdn:weights/web --wait 2>/dev/null)
assert_eq "weights" "$(as "$PULL" volume cat "$ref/w.bin")" "bytes of the web file"
ref=$(as "$PUSH" volume sync start --source hf://org/model --dest bdn:weights/hf --wait 2>/dev/null)
assert_eq '{"hidden": 64}' "$(as "$PULL" volume cat "$ref/config.json")" "bytes of the Hub file"
run_fails 6 "bdn: error: source \"file:///etc\": /etc is outside the directories bdn serve --sync-file-root allows (symlinks are resolved first)" \
  as "$PUSH" volume sync start --source file:///etc --dest bdn:weights/refused

step "a secret goes to a host the job names only with an admin key for every namespace"
# A push key sent the admin's hf-token as a Bearer token to the URL it named (here the web server
# on 127.0.0.1 would have logged it), and an OAuth token or SAS to its --endpoint or Azure account.
URL=$BDN_REMOTE  # the server started again above
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
jobs_before=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")
refused_secret() {  # refused_secret KEY_VAR WHY ARGS...
  local key=$1 why=$2; shift 2
  local id; id=$(key_id "${!key}")
  run_fails 6 "bdn: error: key bdn_$id: secret \"hf-token\" would be sent to a host the job chooses ($why); such a job needs the \"admin\" scope for every namespace (\"*\"), as secrets do" \
    as "${!key}" volume sync start --dest bdn:weights/steal --auth-secret-name hf-token "$@"
}
refused_secret PUSH "an http(s):// source names its host" --source "$HUB/files/w.bin"
refused_secret NSADMIN "an http(s):// source names its host" --source "$HUB/files/w.bin"
refused_secret PUSH "--endpoint names the host" --source s3://models/x --endpoint "$HUB"
refused_secret PUSH "--endpoint names the host" --source gs://models/x --endpoint "$HUB"
refused_secret PUSH "an azure:// source names the storage account, and so the host" --source azure://attacker/c
assert_eq 403 "$(http_status POST /v1/sync/jobs "$PUSH" "{\"source\": \"$HUB/files/w.bin\", \"namespace\": \"weights\", \"volume\": \"steal\", \"auth_secret_name\": \"hf-token\"}")" "POST /v1/sync/jobs of an https:// source with a secret, push key"
assert_eq secret_not_allowed "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["reason"])' <"$WORK/body")" "reason of the 403"
assert_eq "$jobs_before" "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")" "jobs after refused secret starts"
assert_eq 1 "$(hub_requests)" "requests that reached the web server (this read of its stats)"
# The secret goes to the Hub at the server's HF_ENDPOINT, which no caller chooses: a push key of a
# namespace the secret is set for may.
ref=$(as "$PUSH" volume sync start --source hf://org/model --dest bdn:weights/hf-auth --auth-secret-name hf-token --wait 2>/dev/null)
assert_eq '{"hidden": 64}' "$(as "$PULL" volume cat "$ref/config.json")" "bytes of the Hub file synced with the secret by a push key"
# The admin may send its own secret where it chooses.
ref=$("$BDN" volume sync start --source "$HUB/files/w.bin" --dest bdn:weights/web-auth --auth-secret-name hf-token --wait 2>/dev/null)
assert_eq "weights" "$(as "$PULL" volume cat "$ref/w.bin")" "bytes of the web file synced with the secret by the admin"

step "POST /v1/sync/jobs refuses unknown and repeated fields, naming them; no job"
# {"include": [...]} (for "includes") mirrored everything; of two "source" keys the last won.
jobs_before=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")
assert_eq 400 "$(http_status POST /v1/sync/jobs "$ADMIN" "{\"source\": \"$HUB/files/w.bin\", \"namespace\": \"weights\", \"volume\": \"typo\", \"include\": [\"*.json\"]}")" "a misspelt field"
assert_eq 'request body: unknown field "include" (the fields are source, namespace, volume, tag, includes, excludes, auth_secret_name, retry_deadline_ms, endpoint, region)' "$(body_message)" "message of the 400"
assert_eq 400 "$(http_status POST /v1/sync/jobs "$ADMIN" "{\"source\": \"$HUB/files/w.bin\", \"namespace\": \"weights\", \"volume\": \"dup\", \"source\": \"file:///etc\"}")" "a field given twice"
assert_eq 'request body: field "source" appears twice' "$(body_message)" "message of the 400"
assert_eq "$jobs_before" "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list)")" "jobs after refused bodies"
echo PASS
