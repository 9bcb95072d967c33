#!/usr/bin/env bash
# Chains of cache nodes (GET /v1/chain): a cache node whose --upstream is another cache node
# learns the chain to the origin; one whose --upstream leads back to itself, directly or through
# another node, refuses to run and says which nodes loop, instead of passing every miss around the
# loop until the callers' deadlines. All real processes on 127.0.0.1.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

node_id() {  # node_id LOG: the id a cache node's start-up line names
  sed -n 's/.* info cache node \(cache-[0-9a-f]*\): upstream http.*/\1/p' "$1"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "origin -> cache node A -> cache node B: each answers its chain"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth; ORIGIN=$STARTED_URL
assert_eq '{"chain":[]}' "$(curl -sf "$ORIGIN/v1/chain")" "the origin's chain"
start_bdn a cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/ca"; A=$STARTED_URL
start_bdn b cache serve --upstream "$A" --listen 127.0.0.1:0 --cache-dir "$WORK/cb"; B=$STARTED_URL
ida=$(node_id "$WORK/a.log"); idb=$(node_id "$WORK/b.log")
[[ "$ida" =~ ^cache-[0-9a-f]{12}$ && "$idb" =~ ^cache-[0-9a-f]{12}$ ]] || fail "node ids [$ida] [$idb]"
[ "$ida" != "$idb" ] || fail "two nodes have one id"
assert_eq "{\"chain\":[\"$ida\"]}" "$(curl -sf "$A/v1/chain")" "A's chain"
assert_eq "{\"chain\":[\"$idb\",\"$ida\"]}" "$(curl -sf "$B/v1/chain")" "B's chain"
assert_contains "$(cat "$WORK/b.log")" "info cache node $idb: upstream cache nodes $ida -> origin"
assert_absent "could not check" "a warning from A" "$WORK/a.log"

# The origin checks no keys: a node's access log names no key, whatever token a caller sends.
hex=$(printf 'x' | b3sum --no-names)
curl -s -o /dev/null -H 'Authorization: Bearer bdn_aaaaaaaaaaaaaaaa_00' "$A/v1/chunks/$hex"
wait_log "$WORK/a.log" "GET /v1/chunks/$hex "
assert_contains "$(grep -F "GET /v1/chunks/$hex " "$WORK/a.log")" " key=-"
assert_absent "key=bdn_aaaaaaaaaaaaaaaa" "a key the origin never verified, in a node's log" "$WORK/a.log"

step "a malformed or overlong Bdn-Chain header is refused"
out=$(curl -s -w ' %{http_code}' -H 'Bdn-Chain: cache-000000000000, ../etc' "$A/v1/chain")
assert_eq '{"error":{"code":"invalid_argument","message":"Bdn-Chain: \"../etc\" is not a cache node id (cache-<12 hex digits>)"}} 400' "$out" "bad header"
long=$(python3 -c 'print(", ".join("cache-%012x" % i for i in range(16)))')
out=$(curl -s -w ' %{http_code}' -H "Bdn-Chain: $long" "$A/v1/chain")
assert_contains "$out" "cache node $ida: a request passed 16 cache nodes (cache-000000000000 -> cache-000000000001 -> "
assert_contains "$out" " -> cache-00000000000f); a chain that long is taken for a loop\",\"reason\":\"loop_detected\"}} 508"

step "a cache node whose --upstream is itself refuses to run"
port=$(free_port)
rc=0; "$BDN" cache serve --upstream "http://127.0.0.1:$port" --listen "127.0.0.1:$port" --cache-dir "$WORK/cs" 2>"$WORK/self.log" || rc=$?
ids=$(node_id "$WORK/self.log")
assert_eq 8 "$rc" "exit code of a cache node in a loop"
assert_contains "$(cat "$WORK/self.log")" "bdn: error: --upstream http://127.0.0.1:$port: does not lead to an origin: cache node $ids: a request came back to it through $ids -> $ids: its --upstream leads back to it; point --upstream at the origin, or at a cache node nearer to it"

step "two cache nodes pointed at each other: the second one started refuses, naming both"
pd=$(free_port)
start_bdn c cache serve --upstream "http://127.0.0.1:$pd" --listen 127.0.0.1:0 --cache-dir "$WORK/cc"; C=$STARTED_URL
idc=$(node_id "$WORK/c.log")
# D is not up yet: C cannot tell, says so and serves.
assert_contains "$(cat "$WORK/c.log")" "warning --upstream http://127.0.0.1:$pd: could not check that it leads to an origin: "
rc=0; "$BDN" cache serve --upstream "$C" --listen "127.0.0.1:$pd" --cache-dir "$WORK/cd" 2>"$WORK/d.log" || rc=$?
idd=$(node_id "$WORK/d.log")
assert_eq 8 "$rc" "exit code of the second node of a loop"
assert_contains "$(cat "$WORK/d.log")" "bdn: error: --upstream $C: does not lead to an origin: cache node $idd: a request came back to it through $idd -> $idc -> $idd: its --upstream leads back to it; point --upstream at the origin"
# C still answers: its chain check now fails quickly (nothing listens on D's port any more).
out=$(curl -s -w ' %{http_code}' "$C/v1/chain")
assert_eq "{\"error\":{\"code\":\"unavailable\",\"message\":\"cache node $idc: its upstream did not answer the chain check (unavailable)\"}} 502" "$out" "C's chain with D gone"

step "callers of a cache node whose upstream is down are not told the upstream's address"
out=$(curl -s -w ' %{http_code}' "$C/v1/chunks/$hex")
assert_eq '{"error":{"code":"unavailable","message":"cache node: cannot check access with the origin: origin <upstream>: connection refused"}} 503' "$out" "chunk read through C with D gone"
echo PASS
