#!/usr/bin/env bash
# `bdn cache serve --peers`: three cache nodes list each other (the same list on each, itself
# included). A cold FUSE mount that asks only node 1 still has each chunk fetched from the origin
# once in the cluster: node 1 reads the chunks another node owns from that node, which fetches
# them (the origin's bdn_chunk_bytes_sent_total stays ~1x the file, and nodes 2 and 3 fetched
# their shares); a second cold mount through node 2 alone costs the origin nothing more. Each
# node logs which URL is itself and which peers agree. A node whose list differs, and one whose
# list lacks it, read only from the origin, saying why; a killed peer is skipped (bytes still
# right through a node restarted empty; the origin sends about what it and the dead node owned).
# Auth on: mounts use a pull key of the namespace, nodes a key of their own.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
SIZE=$((48 * 1024 * 1024))

metric() { metric_at "$@"; }
ratio() { ratio_of "$1" "$SIZE"; }  # ratio BYTES: BYTES / SIZE
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_line LOG TEXT: waits up to 25 s (two rounds of the nodes' 10 s probes) for a line.
wait_line() {
  local t0
  t0=$(now_ms)
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    [ $(($(now_ms) - t0)) -lt 25000 ] || fail "$1: no line with [$2] after 25 s: $(cat "$1")"
    sleep 0.1
  done
}
# read_through NAME NODE_URL: a cold mount reading through that one node; fails on wrong bytes.
read_through() {
  "$BDN" volume mount "$REF" "$WORK/$1" --cluster-cache "$2" --cache-dir "$WORK/nc-$1" \
    --read-timeout 120 >/dev/null
  MOUNTS+=("$WORK/$1")
  (cd "$WORK/$1" && b3sum --check --quiet "$WORK/sums") || fail "mount $1 through $2 read wrong bytes"
  "$BDN" volume umount "$WORK/$1" >/dev/null
}

step "an origin with auth and three cache nodes that list each other"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv"; ORIGIN=$STARTED_URL
export BDN_REMOTE="$ORIGIN"
ADMIN=$(cat "$WORK/srv/admin.token")
PUSH=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace w --scope push)
PULL=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace w --scope pull)
NODE_KEY=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace '*' --scope pull)
PORTS=() URLS=() PIDS_N=()
for n in 1 2 3; do
  PORTS+=("$(free_port)")
  URLS+=("http://127.0.0.1:${PORTS[$((n - 1))]}")
done
PEERS=$(IFS=,; echo "${URLS[*]}")
export BDN_TOKEN="$NODE_KEY"
for n in 1 2 3; do
  start_bdn "node$n" cache serve --upstream "$ORIGIN" --listen "127.0.0.1:${PORTS[$((n - 1))]}" \
    --cache-dir "$WORK/node$n" --cache-size 1G --peers "$PEERS"
  PIDS_N+=("$STARTED_PID")
done
for n in 1 2 3; do
  wait_line "$WORK/node$n.log" "peer ${URLS[$((n - 1))]}: this node"
  for m in 1 2 3; do
    [ "$m" = "$n" ] && continue
    wait_line "$WORK/node$n.log" "peer ${URLS[$((m - 1))]}: cache node cache-"
    grep -qE "peer ${URLS[$((m - 1))]}: cache node cache-[0-9a-f]{12}, same --peers$" "$WORK/node$n.log" \
      || fail "node $n on node $m: $(grep "peer ${URLS[$((m - 1))]}" "$WORK/node$n.log")"
  done
done

step "push a 48 MiB file"
mkdir -p "$WORK/src"
random_file "$WORK/src/ckpt.bin" "$SIZE" 7
export BDN_TOKEN="$PUSH"
REF=$("$BDN" volume push "$WORK/src" bdn:w/ckpt)
(cd "$WORK/src" && b3sum ckpt.bin) > "$WORK/sums"
export BDN_TOKEN="$PULL"

step "a cold mount through node 1 alone: the peers fetch the chunks they own"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
read_through m1 "${URLS[0]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
echo "origin egress, one cold mount through node 1: $sent bytes = $(ratio "$sent")x the file"
at_most "$(ratio "$sent")" 1.05 "origin egress / file size"
# bdn_cache_fetched_bytes_total: what a node's cache fetched from its upstream, peers included.
# Node 1 fetched the whole file (a third from the origin, the rest from its peers); nodes 2 and 3
# each fetched the third they own, from the origin: without --peers they would have fetched none.
fetched=$(metric "${URLS[0]}" bdn_cache_fetched_bytes_total)
echo "node 1 fetched $(ratio "$fetched")x the file from its upstream and peers"
at_most 0.99 "$(ratio "$fetched")" "what node 1 fetched, at least the file"
for n in 2 3; do
  fetched=$(metric "${URLS[$((n - 1))]}" bdn_cache_fetched_bytes_total)
  echo "node $n fetched $(ratio "$fetched")x the file from the origin"
  python3 -c 'import sys; sys.exit(0 if 0.2 <= float(sys.argv[1]) <= 0.5 else 1)' "$(ratio "$fetched")" \
    || fail "node $n fetched $(ratio "$fetched")x the file, not about a third"
done

step "a second cold mount through node 2 alone costs the origin nothing more"
read_through m2 "${URLS[1]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
echo "origin egress after a second cold mount through node 2: $(ratio "$sent")x the file"
at_most "$(ratio "$sent")" 1.05 "origin egress / file size after two mounts through two nodes"

step "a node whose --peers differ, and one whose --peers lack it, read only from the origin"
export BDN_TOKEN="$NODE_KEY"
P4=$(free_port)
start_bdn node4 cache serve --upstream "$ORIGIN" --listen "127.0.0.1:$P4" --cache-dir "$WORK/node4" \
  --cache-size 1G --peers "${URLS[0]},http://127.0.0.1:$P4"
wait_line "$WORK/node4.log" "peer http://127.0.0.1:$P4: this node"
wait_line "$WORK/node4.log" "peer ${URLS[0]}: not read from: its --peers list differs (digest "
P5=$(free_port)
start_bdn node5 cache serve --upstream "$ORIGIN" --listen "127.0.0.1:$P5" --cache-dir "$WORK/node5" \
  --cache-size 1G --peers "$PEERS"
wait_line "$WORK/node5.log" "--peers: none of its URLs answered as this node (cache-"
export BDN_TOKEN="$PULL"
for n in 4 5; do
  before=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
  read_through "m$n" "http://127.0.0.1:$([ "$n" = 4 ] && echo "$P4" || echo "$P5")"
  sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - before ))
  echo "node $n: origin egress $(ratio "$sent")x the file (from the origin itself)"
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.95 else 1)' "$(ratio "$sent")" \
    || fail "node $n read $(ratio "$sent")x from the origin: it read from peers"
done

step "a killed peer is skipped"
kill -9 "${PIDS_N[2]}"
wait_line "$WORK/node2.log" "peer ${URLS[2]}: not read from until it answers: "
# Node 1 again, with an empty cache: its own share and about half of dead node 3's (those that
# rank it next) come from the origin, the rest from node 2, which kept what it served.
kill -9 "${PIDS_N[0]}"
export BDN_TOKEN="$NODE_KEY"
start_bdn node1b cache serve --upstream "$ORIGIN" --listen "127.0.0.1:${PORTS[0]}" \
  --cache-dir "$WORK/node1b" --cache-size 1G --peers "$PEERS"
wait_line "$WORK/node1b.log" "peer ${URLS[2]}: not read from until it answers: "
wait_line "$WORK/node1b.log" "peer ${URLS[1]}: cache node cache-"
export BDN_TOKEN="$PULL"
before=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
read_through m6 "${URLS[0]}"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - before ))
echo "with node 3 dead, a cold mount through a fresh node 1: origin egress $(ratio "$sent")x the file"
python3 -c 'import sys; sys.exit(0 if 0.3 <= float(sys.argv[1]) <= 0.75 else 1)' "$(ratio "$sent")" \
  || fail "origin egress with a dead peer: $(ratio "$sent")x the file, not about a half"
echo "PASS"
