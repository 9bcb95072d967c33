#!/usr/bin/env bash
# Sync jobs of one namespace cannot hold every runner of bdn serve (docs/sync.md, "Jobs"): with
# the default --sync-runners 2 (so at most 1 per namespace), two jobs of namespace "a" against a
# source that states its size and then drips a byte every half second hold one runner; the second
# of them stays PENDING while a job of namespace "b" runs on the other runner and ends READY.
# Cancelling a's running job frees its slot, and a's waiting job starts. With
# --sync-max-unfinished-per-namespace 2, a third job of namespace "a" is refused while two are
# unfinished (409, exit 4, an exact message; a push key made 2000 jobs in 2.3 s, each kept and
# polled), and taken once they ended. Also: bdn serve refuses
# a --sync-runners-per-namespace outside 1..64, and a --sync-min-source-rate or
# --sync-source-stall-time it cannot parse, and a --sync-job-retention under a minute (but 0).
source "$(dirname "$0")/lib.sh"

jf() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v,list) else v[k]
print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$@"; }

step "bdn serve refuses bad fairness and source-rate flags"
run_fails 2 "bdn: error: --sync-runners-per-namespace: Value 0 not in range 1 to 64
Run with --help for more information." \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/bad" --insecure-no-auth --sync-runners-per-namespace 0
run_fails 2 "bdn: error: --sync-min-source-rate: size \"fast\": expected a number with an optional unit (K, M, G, T)" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/bad" --insecure-no-auth --sync-min-source-rate fast
run_fails 2 "bdn: error: --sync-source-stall-time: duration \"0s\": must be between 1s and 1h" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/bad" --insecure-no-auth --sync-source-stall-time 0s
# A job deleted as it ends would vanish under `sync start --wait`: 0 (forever) or at least a minute.
run_fails 2 "bdn: error: --sync-job-retention \"5s\": must be 0 (keep forever) or at least 1m" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/bad" --insecure-no-auth --sync-job-retention 5s

step "a source on 127.0.0.1 that answers HEAD with a size, then drips the body"
cat >"$WORK/drip.py" <<'EOF'
import http.server, socketserver, sys, time
SIZE = 100000
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("%s %s\n" % (self.command, self.path)); sys.stderr.flush()
    def head(self):
        self.send_response(200)
        self.send_header("Content-Length", str(SIZE))
        self.send_header("ETag", '"e1"')
        self.end_headers()
    def do_HEAD(self):
        self.head()
    def do_GET(self):
        self.head()
        try:
            for _ in range(SIZE):
                self.wfile.write(b"x"); self.wfile.flush(); time.sleep(0.5)
        except OSError:
            pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
python3 "$WORK/drip.py" "$WORK/drip.port" 2>"$WORK/drip.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/drip.port" ] && break; sleep 0.05; done
[ -s "$WORK/drip.port" ] || fail "the drip server did not start: $(cat "$WORK/drip.log")"
DRIP="http://127.0.0.1:$(cat "$WORK/drip.port")"

mkdir -p "$WORK/files"
printf 'b data\n' >"$WORK/files/b.txt"
start_origin --sync-allow-private-addresses --sync-file-root "$WORK/files" \
  --sync-max-unfinished-per-namespace 2

step "two jobs of namespace a against the dripping source: one runs, one waits"
a1=$(jf "$("$BDN" --json volume sync start --source "$DRIP/a1.bin" --dest bdn:a/one)" id)
out=$(wait_sync_job "$a1" SYNCING)
assert_eq "SYNCING" "$(jf "$out" state)" "state of a's first job"
a2=$(jf "$("$BDN" --json volume sync start --source "$DRIP/a2.bin" --dest bdn:a/two)" id)

step "a job of namespace b finishes while a's jobs still run"
b=$(jf "$("$BDN" --json volume sync start --source "file://$WORK/files" --dest bdn:b/files)" id)
out=$(wait_sync_job "$b" READY)
assert_eq "READY" "$(jf "$out" state)" "state of b's job (a's jobs held every runner)"
assert_eq "SYNCING" "$(jf "$("$BDN" --json volume sync describe "$a1")" state)" "state of a's first job"
assert_eq "PENDING" "$(jf "$("$BDN" --json volume sync describe "$a2")" state)" "state of a's second job"
[[ "$(cat "$WORK/drip.log")" != *"GET /a2.bin"* ]] || fail "a's second job read its source while a's first ran"

step "a third unfinished job of namespace a is refused; starting a's second job again resumes it"
run_fails 4 "bdn: error: namespace \"a\": 2 sync jobs unfinished; wait for some or cancel them" \
  "$BDN" volume sync start --source "$DRIP/a3.bin" --dest bdn:a/three
status=$(curl -s -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data '{"source": "'"$DRIP"'/a3.bin", "namespace": "a", "volume": "three"}' "$URL/v1/sync/jobs")
assert_eq "409" "$status" "HTTP status of a third unfinished job of a"
assert_eq "namespace \"a\": 2 sync jobs unfinished; wait for some or cancel them" \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <"$WORK/body")" \
  "the 409's message"
# The same spec again resumes its job rather than counting as a new one.
assert_eq "$a2" "$(jf "$("$BDN" --json volume sync start --source "$DRIP/a2.bin" --dest bdn:a/two)" id)" \
  "the job a second start of a2's spec returns"
assert_eq "2" "$(jf "$("$BDN" --json volume sync list --dest bdn:a)" jobs | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
  "jobs of namespace a"

step "cancelling a's running job starts its waiting one"
out=$("$BDN" --json volume sync cancel "$a1" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state of a's first job after cancel"
out=$(wait_sync_job "$a2" SYNCING)
assert_eq "SYNCING" "$(jf "$out" state)" "state of a's second job once a slot of a was free"
out=$("$BDN" --json volume sync cancel "$a2" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state of a's second job after cancel"

step "once a's jobs ended, a new job of a is taken"
a3=$(jf "$("$BDN" --json volume sync start --source "$DRIP/a3.bin" --dest bdn:a/three)" id)
out=$(wait_sync_job "$a3" SYNCING)
assert_eq "SYNCING" "$(jf "$out" state)" "state of a's third job"
out=$("$BDN" --json volume sync cancel "$a3" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state of a's third job after cancel"
echo "PASS"
