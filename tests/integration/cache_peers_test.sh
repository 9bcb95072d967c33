#!/usr/bin/env bash
# `bdn cache serve --peers`: three cache nodes started with the same list of the cluster's nodes
# answer it to GET /v1/peers, and a mount given only one node reads from all three by rendezvous
# hashing, so the origin sends each chunk to the cluster once (its bdn_chunk_bytes_sent_total
# stays ~1x the file, each node fetched about a third); a second cold mount given another node
# costs the origin nothing more. Nodes never read from each other (no loops, no node key sent to a
# listed address). A mount given a dead node first asks the next; a node without --peers is used
# alone; bad --peers values are refused; a node reached over TLS whose list names a plain-HTTP
# node is used alone (the key never goes out in the clear). Auth on: mounts use a pull key of the
# namespace, nodes a key of their own.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
SIZE=$((48 * 1024 * 1024))
metric() { metric_at "$@"; }
ratio() { ratio_of "$1" "$SIZE"; }  # ratio BYTES: BYTES / SIZE
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# read_through NAME NODES: a cold mount given only NODES; fails on wrong bytes.
read_through() {
  "$BDN" volume mount "$REF" "$WORK/$1" --cluster-cache "$2" --cache-dir "$WORK/nc-$1" \
    --read-timeout 120 >/dev/null 2>"$WORK/$1.err" || fail "mount $1: $(cat "$WORK/$1.err")"
  MOUNTS+=("$WORK/$1")
  (cd "$WORK/$1" && b3sum --check --quiet "$WORK/sums") || fail "mount $1 through $2 read wrong bytes"
  "$BDN" volume umount "$WORK/$1" >/dev/null
}
# about_a_third WHAT BYTES
about_a_third() {
  python3 -c 'import sys; sys.exit(0 if 0.2 <= float(sys.argv[1]) <= 0.5 else 1)' "$(ratio "$2")" \
    || fail "$1: $(ratio "$2")x the file, not about a third"
}

step "an origin with auth and three cache nodes started with the same --peers"
start_origin_with_keys
PORTS=() URLS=() NODE_PIDS=()
for n in 1 2 3; do
  PORTS+=("$(free_port)")
  URLS+=("http://127.0.0.1:${PORTS[$((n - 1))]}")
done
# (a trailing / and blanks are dropped from what nodes answer)
PEERS="${URLS[0]}/, ${URLS[1]},${URLS[2]}"
export BDN_TOKEN="$NODE_KEY"
for n in 1 2 3; do
  start_bdn "node$n" cache serve --upstream "$ORIGIN" --listen "127.0.0.1:${PORTS[$((n - 1))]}" \
    --cache-dir "$WORK/node$n" --cache-size 1G --peers "$PEERS"
  NODE_PIDS+=("$STARTED_PID")
done
assert_eq "{\"peers\": [\"${URLS[0]}\", \"${URLS[1]}\", \"${URLS[2]}\"]}" \
  "$(curl -sf "${URLS[1]}/v1/peers" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')" \
  "GET /v1/peers (no credentials needed)"

step "bad --peers values are refused before the node starts"
run_fails 2 "$(printf 'bdn: error: --peers: must not be empty\nRun with --help for more information.')" \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" --peers ""
run_fails 2 'bdn: error: --peers: no URL in " , "' \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" --peers " , "
run_fails 2 "bdn: error: --peers: ${URLS[0]} is listed twice" \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" --peers "${URLS[0]},${URLS[0]}/"
rc=0; err=$("$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" \
  --peers "${URLS[0]},ftp://x:1" 2>&1) || rc=$?
assert_eq 2 "$rc" "exit code of --peers with an ftp URL ($err)"
assert_contains "$err" "bdn: error: --peers: "
# From attacking helpers 115 and 117: ports 0 and 99999 were accepted, and a bad test setting was
# refused only after the cache directory had been made.
run_fails 2 'bdn: error: --peers: url "http://127.0.0.1:99999": port "99999": must be 1 to 65535' \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" --peers "${URLS[0]},http://127.0.0.1:99999"
run_fails 2 'bdn: error: --peers: url "http://127.0.0.1:0": port "0": must be 1 to 65535' \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad" --peers "http://127.0.0.1:0"
BDN_TEST_SCOPE_TTL_MS=0 run_fails 2 'bdn: error: BDN_TEST_SCOPE_TTL_MS: "0": not 1 to 600000' \
  "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/bad"
[ ! -e "$WORK/bad" ] || fail "a refused cache serve made its cache directory: $(ls -la "$WORK/bad")"

step "push a 48 MiB file"
mkdir -p "$WORK/src"
random_file "$WORK/src/ckpt.bin" "$SIZE" 7
export BDN_TOKEN="$PUSH"
REF=$("$BDN" volume push "$WORK/src" bdn:w/ckpt)
(cd "$WORK/src" && b3sum ckpt.bin) > "$WORK/sums"
export BDN_TOKEN="$PULL"

step "a cold mount given node 1 alone reads from all three"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
read_through m1 "${URLS[0]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
echo "origin egress, one cold mount given node 1: $sent bytes = $(ratio "$sent")x the file"
assert_eq "cache nodes from the --peers of ${URLS[0]}: 3" "$(cat "$WORK/m1.err")" "what the mount says of the list"
at_most "$(ratio "$sent")" 1.05 "origin egress / file size"
for n in 1 2 3; do
  fetched=$(metric "${URLS[$((n - 1))]}" bdn_cache_fetched_bytes_total)
  echo "node $n fetched $(ratio "$fetched")x the file from the origin"
  about_a_third "what node $n fetched" "$fetched"
done

step "a second cold mount given node 2 alone costs the origin nothing more"
read_through m2 "${URLS[1]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
echo "origin egress after a second cold mount given node 2: $(ratio "$sent")x the file"
at_most "$(ratio "$sent")" 1.05 "origin egress / file size after two mounts given two nodes"

step "a mount given a dead node first asks the next for the list; the dead node is skipped"
kill -9 "${NODE_PIDS[2]}"
before=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
read_through m3 "${URLS[2]},${URLS[0]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - before ))
echo "with node 3 dead: origin egress $(ratio "$sent")x the file"
# Node 3's third goes to the next node by weight, which fetches it once.
about_a_third "origin egress with node 3 dead" "$sent"

step "a node without --peers is used alone"
export BDN_TOKEN="$NODE_KEY"
start_bdn node4 cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/node4" --cache-size 1G
NODE4=$STARTED_URL
assert_eq '{"peers": []}' "$(curl -sf "$NODE4/v1/peers" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')" \
  "GET /v1/peers of a node without --peers"
export BDN_TOKEN="$PULL"
read_through m4 "$NODE4"
fetched=$(metric "$NODE4" bdn_cache_fetched_bytes_total)
at_most 0.99 "$(ratio "$fetched")" "what node 4 fetched, the whole file"

step "a node reached over TLS whose list names a plain-HTTP node is used alone, however its scheme is written"
# From attacking helper 119: given as HTTPS://, the check that compares the scheme's text took the
# node for plain HTTP, and the pull key went to the listed node in the clear.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -days 2 \
  -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>"$WORK/openssl.log"
python3 "$(dirname "$0")/tls_peers.py" "$WORK/tls.crt" "$WORK/tls.key" "$WORK/tls.ports" 2>"$WORK/tls.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/tls.ports" ] && break; sleep 0.05; done
[ -s "$WORK/tls.ports" ] || fail "the TLS node did not start: $(cat "$WORK/tls.log")"
read -r TLS_PORT _ <"$WORK/tls.ports"
for scheme in https HTTPS; do
  SSL_CERT_FILE="$WORK/tls.crt" "$BDN" volume mount "$REF" "$WORK/m5$scheme" --cache-dir "$WORK/nc-m5$scheme" \
    --cluster-cache "$scheme://127.0.0.1:$TLS_PORT" >/dev/null 2>"$WORK/m5.err" || fail "mount over TLS: $(cat "$WORK/m5.err")"
  MOUNTS+=("$WORK/m5$scheme")
  cmp <(head -c 1048576 "$WORK/m5$scheme/ckpt.bin") <(head -c 1048576 "$WORK/src/ckpt.bin") || fail "bytes read with $scheme://"
  "$BDN" volume umount "$WORK/m5$scheme" >/dev/null
  assert_eq "" "$(cat "$WORK/m5.err")" "what the mount given $scheme:// says"
  [ "$(grep -c '^tls GET /v1/peers ' "$WORK/tls.log")" -ge 1 ] || fail "the TLS node was not asked for its list"
  assert_eq 0 "$(grep -c '^plain ' "$WORK/tls.log" || true)" "requests to the plain-HTTP node listed by the TLS node ($scheme://)"
done

echo "PASS"
