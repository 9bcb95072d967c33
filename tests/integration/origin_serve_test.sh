#!/usr/bin/env bash
# bdn serve end to end: starts on a free port, first-start admin key (0600 file), /healthz and
# /metrics, key create/ls/revoke over HTTP, 401 and 403 without data, clean SIGTERM shutdown.
source "$(dirname "$0")/lib.sh"

SRV="$WORK/srv"
LOG="$WORK/serve.log"

# start_server [extra flags]: starts bdn serve in the background and sets PORT and URL.
start_server() {
  "$BDN" serve --listen 127.0.0.1:0 --data "$SRV" "$@" 2>"$LOG" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  PORT=""
  for _ in $(seq 1 100); do
    PORT=$(sed -n 's|^[0-9T:.-]*Z info listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$LOG")
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "bdn serve exited: $(cat "$LOG")"
    sleep 0.1
  done
  [ -n "$PORT" ] || fail "bdn serve did not report its port: $(cat "$LOG")"
  URL="http://127.0.0.1:$PORT"
}

stop_server() {
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  assert_eq 0 "$rc" "exit code of bdn serve after SIGTERM"
}

# http_status METHOD PATH [TOKEN]: prints the HTTP status; the body goes to $WORK/body.
http_status() {
  local auth=()
  [ -n "${3:-}" ] && auth=(-H "Authorization: Bearer $3")
  curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" "${auth[@]}" "$URL$2"
}

# body_code: the "code" of the JSON error in $WORK/body.
body_code() { python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' < "$WORK/body"; }

step "first start creates the admin key"
start_server
[ -f "$SRV/admin.token" ] || fail "no admin.token"
assert_eq 600 "$(stat -c %a "$SRV/admin.token")" "mode of admin.token"
ADMIN=$(cat "$SRV/admin.token")
[[ "$ADMIN" =~ ^bdn_[0-9a-f]+_[0-9a-f]+$ ]] || fail "admin token has an unexpected shape: $ADMIN"
assert_contains "$(cat "$LOG")" "$ADMIN"

step "healthz and metrics need no key"
assert_eq ok "$(curl -sf "$URL/healthz")" "/healthz"
METRICS=$(curl -sf "$URL/metrics")
assert_contains "$METRICS" 'bdn_http_requests_total{method="GET",route="/healthz",status="200"} 1'
assert_contains "$METRICS" "# TYPE bdn_http_request_duration_seconds histogram"
assert_contains "$METRICS" "bdn_chunk_bytes_sent_total 0"

step "key create / ls over HTTP"
export BDN_REMOTE="$URL" BDN_TOKEN="$ADMIN"
PULL=$("$BDN" key create --namespace weights --scope pull)
[[ "$PULL" =~ ^bdn_[0-9a-f]+_[0-9a-f]+$ ]] || fail "key create printed: $PULL"
PULL_ID=$(echo "$PULL" | cut -d_ -f2)
LS=$("$BDN" key ls)
assert_contains "$LS" "bdn_$PULL_ID"
assert_contains "$LS" "weights"
[[ "$LS" != *"${PULL##*_}"* ]] || fail "key ls shows a secret"
JSON=$("$BDN" --json key ls)
assert_eq 2 "$(echo "$JSON" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["keys"]))')" "keys listed"

step "401 without or with a bad key, 403 out of scope, 200 in scope; no data on refusals"
CHUNK_HEX=$(printf 'some chunk' | b3sum --no-names)
assert_eq 201 "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $ADMIN" \
  --data-binary 'some chunk' -H 'Content-Type: application/octet-stream' "$URL/v1/chunks/$CHUNK_HEX")" "upload"
assert_eq 401 "$(http_status GET "/v1/chunks/$CHUNK_HEX")" "no token"
assert_eq unauthenticated "$(body_code)" "401 error code"
[[ "$(cat "$WORK/body")" != *"some chunk"* ]] || fail "401 leaked data"
assert_eq 401 "$(http_status GET "/v1/chunks/$CHUNK_HEX" bdn_0123_4567)" "unknown key"
# A key of one namespace reads the chunks of a version of it, which its reads name
# (docs/http-api.md, "Chunks: scoped to namespaces"): here a one-chunk file holding the chunk.
mkdir -p "$WORK/one"
printf 'some chunk' > "$WORK/one/c.txt"
ONE=$("$BDN" volume push "$WORK/one" bdn:weights/one)
assert_eq 403 "$(http_status GET "/v1/chunks/$CHUNK_HEX" "$PULL")" "pull key reads a chunk without a version"
assert_contains "$(cat "$WORK/body")" "key bdn_$PULL_ID: a key for namespace \\\"weights\\\" reads chunks of a version"
assert_eq 200 "$(curl -s -o "$WORK/body" -w '%{http_code}' -H "Authorization: Bearer $PULL" -H "Bdn-Version: $ONE" "$URL/v1/chunks/$CHUNK_HEX")" "pull key reads a chunk of its version"
assert_eq "some chunk" "$(cat "$WORK/body")" "chunk bytes"
assert_eq 403 "$(http_status POST /v1/volumes/weights/model/claims "$PULL")" "pull key claims"
assert_eq permission_denied "$(body_code)" "403 error code"
assert_contains "$(cat "$WORK/body")" "key bdn_$PULL_ID: no \\\"push\\\" scope for namespace \\\"weights\\\""
assert_eq 403 "$(http_status GET /v1/keys "$PULL")" "pull key lists keys"
assert_eq 403 "$(http_status GET /v1/volumes/other/model "$PULL")" "pull key of another namespace"

step "an unauthenticated upload is refused before its body is read"
python3 -c 'import sys; sys.stdout.buffer.write(b"\0" * (60 << 20))' > "$WORK/big"
BIG_HEX=$(b3sum --no-names "$WORK/big")
bytes_in() {
  curl -sf "$URL/metrics" | awk '/^bdn_http_request_bytes_total\{/ {s += $2} END {print s + 0}'
}
before=$(bytes_in)
for expect in "Expect: 100-continue" "Expect:"; do  # with and without "Expect: 100-continue"
  code=$(curl -s -o "$WORK/body" -w '%{http_code}' -X PUT -H "$expect" --data-binary @"$WORK/big" \
    -H 'Content-Type: application/octet-stream' "$URL/v1/chunks/$BIG_HEX" || true)
  assert_eq 401 "$code" "unauthenticated 60 MiB PUT ($expect)"
  assert_eq unauthenticated "$(body_code)" "401 error code of a large PUT"
done
after=$(bytes_in)
[ $((after - before)) -lt $((1 << 20)) ] || fail "the server received $((after - before)) body bytes of refused uploads"
assert_eq 401 "$(http_status GET "/v1/chunks/$BIG_HEX" "")" "refused upload stored nothing (no token)"
assert_eq 404 "$(http_status GET "/v1/chunks/$BIG_HEX" "$ADMIN")" "refused upload stored nothing"

step "a commit that applies tags needs the tag scope"
PUSH=$("$BDN" key create --namespace weights --scope push,pull)
PUSH_ID=$(echo "$PUSH" | cut -d_ -f2)
mkdir -p "$WORK/tree"
printf 'tagged\n' > "$WORK/tree/a.txt"
# From new-user helper 103: refused at the claim, before anything is uploaded (the push uploaded
# all its data and was refused at the commit).
head -c 3000000 /dev/urandom > "$WORK/tree/w.bin"
w_hex=$(b3sum --no-names "$WORK/tree/w.bin")
run_fails 6 "bdn: error: key bdn_$PUSH_ID: no \"tag\" scope for namespace \"weights\" (the push names tags: push without them, or with a key that has the tag scope); nothing was uploaded" \
  env BDN_TOKEN="$PUSH" "$BDN" volume push "$WORK/tree" bdn:weights/m1 --tag prod
assert_eq 404 "$(http_status GET "/v1/chunks/$w_hex" "$ADMIN")" "the data of a push refused at its claim"
assert_eq 404 "$(http_status GET /v1/volumes/weights/m1 "$ADMIN")" "volume after a refused push --tag"
env BDN_TOKEN="$PUSH" "$BDN" volume push "$WORK/tree" bdn:weights/m1 >/dev/null
assert_eq 200 "$(http_status GET /v1/volumes/weights/m1 "$ADMIN")" "volume after push without --tag"
assert_eq 403 "$(http_status PUT /v1/volumes/weights/m1/tags/prod "$PUSH")" "tag set with a push key"

step "key create --json: the created key's record and its token"
# Typed as a person types it: folded as refs are ("Weights" is weights, "Tag, PULL" is tag,pull).
CREATED=$("$BDN" --json key create --namespace Weights --scope 'Tag, PULL')
TAG_TOKEN=$(echo "$CREATED" | json_field token)
TAG_ID=$(echo "$CREATED" | json_field id)
assert_eq "bdn_${TAG_ID}_" "${TAG_TOKEN%_*}_" "token of the created key names its id"
assert_eq weights "$(echo "$CREATED" | json_field namespace)" "namespace of the created key"
assert_eq '["pull", "tag"]' "$(echo "$CREATED" | json_field scopes)" "scopes of the created key"
assert_eq false "$(echo "$CREATED" | json_field revoked)" "revoked of the created key"
assert_eq 200 "$(http_status GET /v1/volumes/weights/m1 "$TAG_TOKEN")" "the created key works"

step "key commands without an origin fail before opening anything local"
run_fails 2 'bdn: error: bdn key: no origin: give --remote URL or set BDN_REMOTE (keys live on a bdn serve origin)' \
  env -u BDN_REMOTE BDN_HOME="$WORK/nohome" "$BDN" key ls
run_fails 2 'bdn: error: scope "write": must be one of pull, push, tag, admin' \
  env -u BDN_REMOTE BDN_HOME="$WORK/nohome" "$BDN" key create --namespace weights --scope write
[ ! -e "$WORK/nohome" ] || fail "a key command without an origin created the embedded store"

step "key create fails clearly without scope, and with a pull key"
run_fails 6 "bdn: error: key bdn_$PULL_ID: no \"admin\" scope for any namespace" \
  env BDN_TOKEN="$PULL" "$BDN" key create --namespace weights --scope pull
run_fails 2 'bdn: error: scope "write": must be one of pull, push, tag, admin' \
  "$BDN" key create --namespace weights --scope write

step "revoke: the key stops working at once"
# A whole token is refused without its secret in the message; a malformed id is quoted as given.
run_fails 2 "bdn: error: that is a token, not a key id: its key id is bdn_$PULL_ID (the part after it is the secret)" \
  "$BDN" key revoke "$PULL"
run_fails 2 'bdn: error: key "bdn_nothex": expected a key id such as bdn_0123456789abcdef' \
  "$BDN" key revoke bdn_nothex
# A token mangled in the paste (upper case), or anything as long as one: nothing of it shown.
run_fails 2 'bdn: error: not a key id (it holds a second "_" or is over 64 characters, as a token would; nothing of it is shown): a key id is bdn_ and hex digits, such as bdn_0123456789abcdef' \
  "$BDN" key revoke "$(tr a-f A-F <<<"$PULL")"
run_fails 2 'bdn: error: not a key id (it holds a second "_" or is over 64 characters, as a token would; nothing of it is shown): a key id is bdn_ and hex digits, such as bdn_0123456789abcdef' \
  "$BDN" key revoke "bdn_$(printf 'a%.0s' $(seq 1 100))"
assert_eq "revoked key bdn_$PULL_ID" "$("$BDN" key revoke "bdn_$PULL_ID")" "revoke output"
assert_eq "key bdn_$PULL_ID: already revoked (nothing changed)" "$("$BDN" key revoke "$PULL_ID")" \
  "output of a second revoke"
assert_eq 401 "$(http_status GET "/v1/chunks/$CHUNK_HEX" "$PULL")" "revoked key"
assert_contains "$(cat "$WORK/body")" "key bdn_$PULL_ID: revoked"

step "a second bdn serve on the same --data refuses to start; the first keeps serving"
rc=0
err=$("$BDN" serve --listen 127.0.0.1:0 --data "$SRV" 2>&1) || rc=$?
assert_eq 8 "$rc" "exit code of a second bdn serve"
assert_eq "bdn: error: --data $SRV: in use by another bdn serve (pid $SERVER_PID); stop it or give another --data directory" \
  "$err" "stderr of a second bdn serve"
assert_eq 200 "$(http_status GET /v1/keys "$ADMIN")" "first server after a second one was refused"

step "embedded commands that change a served data directory are refused; reads are not"
# From an attacking helper: `volume rm --home <served --data>` deleted with the embedded 7-day
# retention instead of the server's, and without its keys.
M1=$(env -u BDN_REMOTE "$BDN" --home "$SRV" --json volume stat bdn:weights/m1 | json_field head)
served="in use by bdn serve (pid $SERVER_PID); change what it serves through it (--remote URL), where its retention, keys and gc apply"
run_fails 8 "bdn: error: --home $SRV: $served" \
  env -u BDN_REMOTE "$BDN" --home "$SRV" volume rm "bdn:weights/m1@${M1#b3:}" --yes
run_fails 8 "bdn: error: BDN_HOME $SRV: $served" \
  env -u BDN_REMOTE BDN_HOME="$SRV" "$BDN" volume tag set --volume-ref "bdn:weights/m1@${M1#b3:}" --tag x
run_fails 8 "bdn: error: --home $SRV/: $served" \
  env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$SRV/" volume push "$WORK/tree" bdn:weights/m2
run_fails 8 "bdn: error: --data $SRV: in use by bdn serve (pid $SERVER_PID); stop it first (it rebuilds its index itself when it is missing)" \
  env -u BDN_REMOTE "$BDN" store rebuild-index --data "$SRV"
assert_eq ALIVE "$(env -u BDN_REMOTE "$BDN" --home "$SRV" --json volume stat "bdn:weights/m1@${M1#b3:}" | json_field lifecycle)" "the version after the refused rm"
assert_eq 404 "$(http_status GET /v1/volumes/weights/m2 "$ADMIN")" "the volume of the refused push"
# ...and a server does not start under an embedded push in progress (from an attacking helper: it
# did, and the push then committed into the served store).
EMB="$WORK/emb"
mkdir -p "$WORK/sparse-tree"
truncate -s 2G "$WORK/sparse-tree/sparse.bin"
env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$EMB" volume push "$WORK/tree" bdn:e/first >/dev/null
env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$EMB" volume push "$WORK/sparse-tree" bdn:e/big >/dev/null 2>&1 &
EPUSH=$!
inode=none
for _ in $(seq 1 100); do
  inode=$(stat -c %i "$EMB/serve.lock" 2>/dev/null || echo none)
  grep -Eq "FLOCK +ADVISORY +READ +$EPUSH +[0-9a-f:]+:$inode " /proc/locks && break
  sleep 0.05
done
grep -Eq "FLOCK +ADVISORY +READ +$EPUSH +[0-9a-f:]+:$inode " /proc/locks || fail "the push holds no shared lock on $EMB/serve.lock: $(cat /proc/locks)"
kill -STOP "$EPUSH"
run_fails 8 "bdn: error: --data $EMB: an embedded bdn command (push, rm, gc, ...) is writing to it; start the server once it has ended" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
kill -CONT "$EPUSH"
wait "$EPUSH" || fail "the embedded push"
env -u BDN_REMOTE "$BDN" --home "$EMB" volume verify bdn:e/big >/dev/null || fail "verify of the embedded push"
# The server holds the directory itself too: serve.lock deleted under it (someone tidying "stale
# lock files") does not let an embedded write or a second server in (from an attacking helper:
# a push then committed into the served store).
start_bdn emb-serve serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
EMB_SERVER=$STARTED_PID
rm "$EMB/serve.lock"
run_fails 8 "bdn: error: --home $EMB: in use by bdn serve; change what it serves through it (--remote URL), where its retention, keys and gc apply" \
  env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$EMB" volume push "$WORK/tree" bdn:e/under-server
run_fails 8 "bdn: error: --data $EMB: in use by bdn serve; its GC runs inside it (bdn serve --gc-interval)" \
  env -u BDN_REMOTE "$BDN" gc --data "$EMB"
run_fails 8 "bdn: error: --data $EMB: in use by another bdn serve; stop it or give another --data directory" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
[ ! -e "$EMB/serve.lock" ] || fail "a refused command made serve.lock again"
kill "$EMB_SERVER"; wait "$EMB_SERVER" 2>/dev/null || true
# A serve.lock that is not a regular file is refused by both sides, at once and naming it: a
# symlink (whose target the server wrote its pid into, while embedded writes went on without a
# lock) and a FIFO (whose open hung every embedded write).
echo "someone else's file" >"$WORK/victim"
ln -s "$WORK/victim" "$EMB/serve.lock"
run_fails 8 "bdn: error: --data $EMB: $EMB/serve.lock is a symlink, not the regular file bdn serve locks; remove it" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
run_fails 8 "bdn: error: --home $EMB: $EMB/serve.lock is a symlink, not the regular file bdn serve locks; remove it" \
  env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$EMB" volume push "$WORK/tree" bdn:e/over-symlink
assert_eq "someone else's file" "$(cat "$WORK/victim")" "the symlink's target after bdn serve was refused"
rm "$EMB/serve.lock"; ln "$WORK/victim" "$EMB/serve.lock"
run_fails 8 "bdn: error: --data $EMB: $EMB/serve.lock is a hard link (the file has 2 names), not the regular file bdn serve locks; remove it" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
assert_eq "someone else's file" "$(cat "$WORK/victim")" "the hard link's file after bdn serve was refused"
rm "$EMB/serve.lock"; mkfifo "$EMB/serve.lock"
run_fails 8 "bdn: error: --home $EMB: $EMB/serve.lock is a FIFO, not the regular file bdn serve locks; remove it" \
  timeout 20 env -u BDN_REMOTE -u BDN_TOKEN "$BDN" --home "$EMB" volume rm --yes --recursive bdn:e/first
run_fails 8 "bdn: error: --data $EMB: $EMB/serve.lock is a FIFO, not the regular file bdn serve locks; remove it" \
  timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$EMB" --insecure-no-auth
env -u BDN_REMOTE "$BDN" --home "$EMB" volume verify bdn:e/first >/dev/null || fail "a read with serve.lock a FIFO"
rm "$EMB/serve.lock"

step "a server that cannot bind creates no admin key"
rc=0
err=$("$BDN" serve --listen "127.0.0.1:$PORT" --data "$WORK/srv2" 2>&1) || rc=$?
assert_eq 7 "$rc" "exit code of bdn serve on a taken port"
assert_contains "$err" "listen 127.0.0.1:$PORT: cannot bind"
[[ "$err" != *"created the first admin key"* ]] || fail "a server that could not bind printed a key: $err"
[ ! -e "$WORK/srv2/admin.token" ] || fail "a server that could not bind wrote admin.token"

step "the log: an access line per request naming the key, never a token"
# A path that would write the rest of a line of its own choosing (spaces, a forged key, U+0085
# NEL, which some readers split lines at) is percent-encoded, one word of the line.
forged='/v1/x%20200%2012345%20B%200.1%20ms%20key=bdn_forged%C2%85next%E2%80%AEend%25'
assert_eq 404 "$(http_status GET "$forged")" "status of a path with spaces and a NEL"
# Each segment is cut after its first space, control byte or "=" (what follows may be a value
# pasted with a name).
for _ in $(seq 1 50); do grep -q -F "GET /v1/x%20*** 404 " "$LOG" && break; sleep 0.1; done
assert_contains "$(cat "$LOG")" " access 127.0.0.1 GET /v1/x%20*** 404 "
assert_eq 0 "$(grep -c -F 'GET /v1/x 200' "$LOG" || true)" "access lines with the forged fields"
assert_eq 0 "$(grep -c -F 'bdn_forged' "$LOG" || true)" "access lines with the forged key"
# From attacking helper 124: a secret's name and value pasted as one word, and a query encoded
# into the path, were logged whole (the answers hid them).
assert_eq 400 "$(http_status PUT "/v1/secrets/tok=SEKRET4" "$ADMIN")" "status of a secret name with its value"
assert_eq 404 "$(http_status GET "/v1/nope%3Ftoken=SEKRET5")" "status of a query encoded into the path"
assert_eq "GET /v1/nope?token=***: no such endpoint" \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <"$WORK/body")" "message of a query encoded into the path"
for _ in $(seq 1 50); do grep -q -F "GET /v1/nope?token=*** 404 " "$LOG" && break; sleep 0.1; done
assert_contains "$(cat "$LOG")" " access 127.0.0.1 PUT /v1/secrets/tok=*** 400 "
assert_contains "$(cat "$LOG")" " access 127.0.0.1 GET /v1/nope?token=*** 404 "
assert_eq 0 "$(grep -c -F 'SEKRET' "$LOG" || true)" "lines of the log holding a pasted secret"
CHUNK_LINE=$(grep -m 1 " access 127.0.0.1 GET /v1/chunks/$CHUNK_HEX 200 " "$LOG")
[[ "$CHUNK_LINE" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\ info\ access\ 127\.0\.0\.1\ GET\ /v1/chunks/[0-9a-f]{64}\ 200\ [0-9]+\ B\ [0-9.]+\ ms\ key=bdn_[0-9a-f]+$ ]] \
  || fail "access line of a chunk read: [$CHUNK_LINE] in $(cat "$LOG")"
assert_contains "$(cat "$LOG")" " access 127.0.0.1 GET /v1/chunks/$CHUNK_HEX 401 "
assert_contains "$(cat "$LOG")" " key=-"
# Each token appears only in the one line that announced the admin key at the first start.
assert_eq 1 "$(grep -c -F "$ADMIN" "$LOG")" "lines of the log holding the admin token"
assert_eq 0 "$(grep -c -F "${PULL#bdn_}" "$LOG" || true)" "lines of the log holding the pull token"

step "SIGTERM shuts down cleanly; a restart keeps keys and creates no new admin key"
stop_server
start_server
assert_eq "$ADMIN" "$(cat "$SRV/admin.token")" "admin.token after restart"
[[ "$(cat "$LOG")" != *"created the first admin key"* ]] || fail "restart created another admin key"
assert_eq 200 "$(http_status GET /v1/keys "$ADMIN")" "admin key after restart"
assert_eq 401 "$(http_status GET "/v1/chunks/$CHUNK_HEX" "$PULL")" "revoked key after restart"
stop_server

step "--log-file writes the log there (stderr stays empty); --log-level warn drops access lines; a bad level is refused"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# serve_logging LEVEL FILE: bdn serve with --log-level LEVEL --log-file FILE, one chunk read
# answered, then stopped; stderr in $WORK/logging.err.
serve_logging() {
  local port; port=$(free_port)
  "$BDN" serve --listen "127.0.0.1:$port" --data "$SRV" --log-level "$1" --log-file "$2" 2>"$WORK/logging.err" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
  curl -sf -o /dev/null -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$port/v1/chunks/$CHUNK_HEX" \
    || fail "chunk read from the server logging to $2"
  stop_server
}
serve_logging info "$WORK/logs/info.log"
assert_contains "$(cat "$WORK/logs/info.log")" " info listening on http://127.0.0.1:"
assert_contains "$(cat "$WORK/logs/info.log")" " access 127.0.0.1 GET /v1/chunks/$CHUNK_HEX 200 "
assert_eq 600 "$(stat -c %a "$WORK/logs/info.log")" "mode of the log file"
assert_eq "" "$(cat "$WORK/logging.err")" "stderr of a server logging to a file"
serve_logging warn "$WORK/logs/warn.log"
assert_eq "" "$(cat "$WORK/logs/warn.log")" "the log at --log-level warn of a quiet start"
run_fails 2 'bdn: error: --log-level: log level "loud": expected debug, info, warn, error or off' \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv3" --log-level loud
run_fails 2 'bdn: error: --log-level: log level "loud": expected debug, info, warn, error or off' \
  "$BDN" volume mount bdn:x/y@b3:0123456789abcdef "$WORK/mnt-x" --log-level loud

step "--insecure-no-auth says so and needs no key"
start_server --insecure-no-auth
assert_contains "$(cat "$LOG")" "authentication is OFF; anyone who can reach $URL can read"
assert_eq 200 "$(http_status GET "/v1/chunks/$CHUNK_HEX")" "no token, auth off"
stop_server

step "--metrics-listen: /metrics only on the metrics address, for bdn serve and bdn cache serve"
# metrics_url LOG: the address the "metrics on" line of LOG names.
metrics_url() { sed -n 's|^[0-9T:.-]*Z info metrics on \(http://[^ ]*\)/metrics$|\1|p' "$1"; }
start_server --metrics-listen 127.0.0.1:0
MURL=$(metrics_url "$LOG")
[ -n "$MURL" ] || fail "no 'metrics on' line: $(cat "$LOG")"
[ "$MURL" != "$URL" ] || fail "the metrics address is the main one"
assert_eq 404 "$(http_status GET /metrics)" "/metrics on the main address"
assert_eq 200 "$(http_status GET /healthz)" "/healthz on the main address"
assert_contains "$(curl -sf "$MURL/metrics")" 'bdn_http_requests_total{method="GET",route="/healthz",status="200"} 1'
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$MURL/v1/keys")" "the API on the metrics address"
start_bdn cache cache serve --upstream "$URL" --listen 127.0.0.1:0 --cache-dir "$WORK/cache" --metrics-listen 127.0.0.1:0
CMURL=$(metrics_url "$WORK/cache.log")
[ -n "$CMURL" ] || fail "no 'metrics on' line from cache serve: $(cat "$WORK/cache.log")"
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' "$STARTED_URL/metrics")" "cache node /metrics on its main address"
assert_contains "$(curl -sf "$CMURL/metrics")" "bdn_cache_"
kill -TERM "$STARTED_PID"
wait "$STARTED_PID" || true
stop_server
echo PASS
