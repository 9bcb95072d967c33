#!/usr/bin/env bash
# Secrets scoped to namespaces on bdn serve with keys (docs/sync.md, "Secrets"): a push key of one
# namespace could make the server send another team's stored token to the Hub and mirror that
# team's private repo into its own namespace, and learn which secret names exist.
# - A job may name a secret only if its namespace is in the secret's list ("*": all), or its key
#   is an admin key for every namespace. Any other secret (another team's, one with no namespaces,
#   one of the wrong format) gets exactly the answer of a secret that does not exist (404
#   secret_not_found), no job is made, and no request reaches the source.
# - `bdn secret set --namespace` (repeatable, or comma-separated), PUT /v1/secrets with
#   "namespaces", GET /v1/secrets and `bdn secret ls` show them; setting a secret again replaces
#   its namespaces. The embedded CLI uses its secrets as before.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

step "a Hub on 127.0.0.1 with a private repo per team, each readable only with its team's token"
cat > "$WORK/hub.json" <<'EOF'
{"tokens": {"hf_team_a_value": ["teama/model"], "hf_team_b_value": ["teamb/private-model"]},
 "repos": {
  "teamb/private-model": {"private": true, "refs": {"main": "2222222222222222222222222222222222222222"},
   "commits": {"2222222222222222222222222222222222222222": {"files": {
     "weights.txt": {"text": "team b only\n"}}}}},
  "teama/model": {"private": true, "refs": {"main": "1111111111111111111111111111111111111111"},
   "commits": {"1111111111111111111111111111111111111111": {"files": {
     "weights.txt": {"text": "team a\n"}}}}}}}
EOF
start_hub "$WORK/hub.json"
hub_requests() { curl -sf "$HUB/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

step "bdn serve with authentication; keys of namespaces a and b"
HF_ENDPOINT="$HUB" start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --sync-allow-private-addresses
URL=$STARTED_URL
ADMIN=$(cat "$WORK/srv/admin.token")
export BDN_REMOTE="$URL" BDN_TOKEN="$ADMIN" BDN_HOME="$WORK/home-unused"
PUSH_A=$("$BDN" key create --namespace a --scope push,pull)
PUSH_B=$("$BDN" key create --namespace b --scope push,pull)
as() { local token=$1; shift; env BDN_TOKEN="$token" "$BDN" "$@"; }
# http_status METHOD PATH TOKEN [BODY]: prints the HTTP status; the body goes to $WORK/body.
http_status() {
  local data=()
  [ -n "${4:-}" ] && data=(-H 'Content-Type: application/json' --data "$4")
  curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3" "${data[@]}" "$URL$2"
}
jobs_in() { python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["jobs"]))' "$("$BDN" --json volume sync list --dest "bdn:$1")"; }

step "secret set --namespace (repeatable or comma-separated); GET /v1/secrets and secret ls show them"
printf 'hf_team_b_value' | "$BDN" secret set team-b-hf-token --namespace b
printf 'hf_team_a_value' | "$BDN" secret set team-a-hf-token --namespace a
printf 'hf_team_b_value' | "$BDN" secret set admins-only
printf 'not json' | "$BDN" secret set team-b-aws --namespace b,c
printf 'hf_team_a_value' | "$BDN" secret set both --namespace c --namespace a,c
printf 'hf_team_a_value' | "$BDN" secret set shared --namespace '*'
assert_eq 200 "$(http_status GET /v1/secrets "$ADMIN")" "GET /v1/secrets"
assert_eq '[["admins-only", []], ["both", ["a", "c"]], ["shared", ["*"]], ["team-a-hf-token", ["a"]], ["team-b-aws", ["b", "c"]], ["team-b-hf-token", ["b"]]]' \
  "$(python3 -c 'import json,sys; print(json.dumps([[s["name"], s["namespaces"]] for s in json.load(sys.stdin)["secrets"]]))' <"$WORK/body")" \
  "names and namespaces of GET /v1/secrets"
assert_eq "admins-only - both a,c shared * team-a-hf-token a team-b-aws b,c team-b-hf-token b" \
  "$("$BDN" secret ls | awk 'NR > 1 {printf "%s%s %s", (NR > 2 ? " " : ""), $1, $NF}')" "secret ls: names and namespaces"
assert_eq "NAMESPACES" "$("$BDN" secret ls | awk 'NR == 1 {print $NF}')" "secret ls: the column"
run_fails 2 "bdn: error: --namespace: namespace \"Team\": invalid character 'T' (allowed: a-z 0-9 . _ -)" \
  "$BDN" secret set bad --namespace Team <<<"v"
assert_eq 400 "$(http_status PUT /v1/secrets/bad "$ADMIN" '{"value": "v", "namespaces": ["*", "a"]}')" "PUT with * and a namespace"
assert_eq 'namespaces: "*" (every namespace) stands alone; give it or a list of namespaces' \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <"$WORK/body")" "message of the 400"
assert_eq 400 "$(http_status PUT /v1/secrets/bad "$ADMIN" '{"value": "v", "namespaces": "a"}')" "PUT with namespaces not a list"
assert_eq 404 "$(http_status DELETE /v1/secrets/bad "$ADMIN")" "no secret stored by the refused PUTs"

step "a push key of a naming a secret a may not use: the answer of a missing secret, no job, no request"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
# not_found SECRET SOURCE: POST /v1/sync/jobs and sync start with the push key of a.
not_found() {
  local body="{\"source\": \"$2\", \"namespace\": \"a\", \"volume\": \"stolen\", \"auth_secret_name\": \"$1\"}"
  assert_eq 404 "$(http_status POST /v1/sync/jobs "$PUSH_A" "$body")" "POST /v1/sync/jobs naming $1"
  assert_eq "{\"error\": {\"code\": \"not_found\", \"message\": \"secret \\\"$1\\\": not found\", \"reason\": \"secret_not_found\"}}" \
    "$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))' <"$WORK/body")" "body of the 404 naming $1"
  run_fails 3 "bdn: error: secret \"$1\": not found" \
    as "$PUSH_A" volume sync start --source "$2" --dest bdn:a/stolen --auth-secret-name "$1"
}
not_found no-such-secret hf://teamb/private-model
not_found team-b-hf-token hf://teamb/private-model
not_found admins-only hf://teamb/private-model
# A secret of the wrong format says nothing of its format to a key that may not use it.
not_found team-b-aws s3://teamb-bucket/models
not_found team-b-aws gs://teamb-bucket/models
assert_eq 0 "$(jobs_in a)" "jobs in namespace a after the refused starts"
assert_eq 1 "$(hub_requests)" "requests that reached the Hub (this read of its stats)"

step "a secret scoped to the job's namespace (or *) works for its push key"
ref=$(as "$PUSH_A" volume sync start --source hf://teama/model --dest bdn:a/own --auth-secret-name team-a-hf-token --wait 2>/dev/null)
assert_eq "team a" "$(as "$PUSH_A" volume cat "$ref/weights.txt")" "team a's repo, synced with its own token"
ref=$(as "$PUSH_A" volume sync start --source hf://teama/model --dest bdn:a/both --auth-secret-name both --wait 2>/dev/null)
assert_eq "team a" "$(as "$PUSH_A" volume cat "$ref/weights.txt")" "synced with a secret of namespaces a and c"
ref=$(as "$PUSH_A" volume sync start --source hf://teama/model --dest bdn:a/shared --auth-secret-name shared --wait 2>/dev/null)
assert_eq "team a" "$(as "$PUSH_A" volume cat "$ref/weights.txt")" "synced with a secret for every namespace"
ref=$(as "$PUSH_B" volume sync start --source hf://teamb/private-model --dest bdn:b/own --auth-secret-name team-b-hf-token --wait 2>/dev/null)
assert_eq "team b only" "$(as "$PUSH_B" volume cat "$ref/weights.txt")" "team b's repo, synced by team b"

step "an admin key for every namespace may name any secret, into any namespace"
ref=$("$BDN" volume sync start --source hf://teamb/private-model --dest bdn:a/by-admin --auth-secret-name admins-only --wait 2>/dev/null)
assert_eq "team b only" "$("$BDN" volume cat "$ref/weights.txt")" "synced by the admin with a secret of no namespace"
ref=$("$BDN" volume sync start --source hf://teamb/private-model --dest bdn:a/by-admin2 --auth-secret-name team-b-hf-token --wait 2>/dev/null)
assert_eq "team b only" "$("$BDN" volume cat "$ref/weights.txt")" "synced by the admin with team b's secret into a"

step "setting a secret again replaces its namespaces: without --namespace, none"
printf 'hf_team_b_value' | "$BDN" secret set team-b-hf-token
assert_eq '[]' "$(jf "$("$BDN" --json secret ls)" secrets 5 namespaces)" "team-b-hf-token's namespaces after a set without --namespace"
run_fails 3 "bdn: error: secret \"team-b-hf-token\": not found" \
  as "$PUSH_B" volume sync start --source hf://teamb/private-model --dest bdn:b/again --auth-secret-name team-b-hf-token

step "a job's secret is checked again when it runs: set again for another namespace meanwhile, it is not used"
# The namespace's one runner (--sync-runners 2: one per namespace) is held on the Hub by a first
# job, so the second waits PENDING while an admin removes its secret and sets it again for b.
printf 'hf_team_a_value' | "$BDN" secret set swap --namespace a
curl -sf -X POST "$HUB/_faults" -H 'Content-Type: application/json' \
  --data '[{"kind": "revision", "path": "teama/model", "count": 1, "hold": true}]' >/dev/null
first=$(as "$PUSH_A" volume sync start --source hf://teama/model --dest bdn:a/held --auth-secret-name team-a-hf-token 2>/dev/null)
for _ in $(seq 1 100); do
  [ "$(curl -sf "$HUB/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["held"])')" -ge 1 ] && break
  sleep 0.1
done
second=$(as "$PUSH_A" volume sync start --source hf://teamb/private-model --dest bdn:a/swapped --auth-secret-name swap 2>/dev/null)
assert_eq PENDING "$(jf "$(as "$PUSH_A" --json volume sync describe "$second")" state)" "the second job waits"
"$BDN" secret rm swap >/dev/null
printf 'hf_team_b_value' | "$BDN" secret set swap --namespace b
curl -sf -X POST "$HUB/_release" >/dev/null
for _ in $(seq 1 100); do
  state=$(jf "$(as "$PUSH_A" --json volume sync describe "$second")" state)
  [ "$state" = PENDING ] || [ "$state" = SYNCING ] || break
  sleep 0.1
done
job=$(as "$PUSH_A" --json volume sync describe "$second")
assert_eq FAILED "$(jf "$job" state)" "a's job after its secret was set again for b"
assert_eq secret_not_found "$(jf "$job" error code)" "its error code"
assert_eq "sync job $second: secret \"swap\": not found" "$(jf "$job" error message)" "its error message"
assert_eq READY "$(jf "$(as "$PUSH_A" --json volume sync describe "$first")" state)" "the first job"
run_fails 3 "bdn: error: volume bdn:a/swapped: not found" as "$PUSH_A" volume cat bdn:a/swapped/weights.txt

step "embedded (no server, no keys): a secret without namespaces works as before"
unset BDN_REMOTE BDN_TOKEN
export BDN_HOME="$WORK/home"
printf 'hf_team_b_value' | "$BDN" secret set mine
ref=$(HF_ENDPOINT="$HUB" "$BDN" volume sync start --source hf://teamb/private-model --dest bdn:x/mine --auth-secret-name mine 2>/dev/null)
assert_eq "team b only" "$("$BDN" volume cat "$ref/weights.txt")" "an embedded sync with a secret of no namespace"
echo PASS
