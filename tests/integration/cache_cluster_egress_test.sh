#!/usr/bin/env bash
# One origin fetch per chunk per cluster under concurrency (issue 12 item 5): 8 cold FUSE mounts
# of a 256 MiB file read at once through 3 `bdn cache serve` nodes make the origin send at most
# 1.05x the file (bdn_chunk_bytes_sent_total on its /metrics; the ratio is printed), every mount
# reading correct bytes; then with one node killed (-9) two more cold mounts read correctly, the
# dead node skipped, and the origin sends only the dead node's share again; a node whose upstream
# is another origin costs no more than a dead one. Auth is on: the
# mounts use a pull key of the namespace, the nodes a key of their own.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
SIZE=$((256 * 1024 * 1024))
MOUNTS_AT_ONCE=8

metric() { metric_at "$@"; }
ratio() { ratio_of "$1" "$SIZE"; }  # ratio BYTES: BYTES / SIZE
# read_all PREFIX N...: mounts N cold mounts (each its own node cache) and hashes the file in all
# of them at once; fails naming a mount whose bytes differ.
read_all() {
  local prefix=$1; shift
  local pids=() i
  for i in "$@"; do
    "$BDN" volume mount "$REF" "$WORK/$prefix$i" --cluster-cache "$NODES" \
      --cache-dir "$WORK/nc-$prefix$i" --read-timeout 120 >/dev/null
    MOUNTS+=("$WORK/$prefix$i")
  done
  for i in "$@"; do
    (cd "$WORK/$prefix$i" && b3sum --check --quiet "$WORK/sums") >"$WORK/check-$prefix$i.log" 2>&1 &
    pids+=($!)
  done
  local k=0
  for i in "$@"; do
    wait "${pids[$k]}" || fail "mount $prefix$i read wrong bytes: $(cat "$WORK/check-$prefix$i.log")"
    k=$((k + 1))
  done
  for i in "$@"; do "$BDN" volume umount "$WORK/$prefix$i" >/dev/null; done
}

step "an origin with auth and three cache nodes"
start_origin_with_keys
export BDN_TOKEN="$NODE_KEY"
NODE_URLS=() NODE_PIDS=()
for n in 1 2 3; do
  start_bdn "node$n" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/node$n" --cache-size 1G
  NODE_URLS+=("$STARTED_URL"); NODE_PIDS+=("$STARTED_PID")
done
NODES=$(IFS=,; echo "${NODE_URLS[*]}")

step "push a 256 MiB file"
mkdir -p "$WORK/src"
# (in 16 MiB pieces: one randbytes call cannot make 256 MiB)
python3 -c '
import random, sys
r, n = random.Random(12), int(sys.argv[1])
while n > 0:
    k = min(n, 16 << 20); sys.stdout.buffer.write(r.randbytes(k)); n -= k' "$SIZE" > "$WORK/src/ckpt.bin"
export BDN_TOKEN="$PUSH"
REF=$("$BDN" volume push "$WORK/src" bdn:w/ckpt)
(cd "$WORK/src" && b3sum ckpt.bin) > "$WORK/sums"
export BDN_TOKEN="$PULL"

step "$MOUNTS_AT_ONCE cold mounts read the file at once through the three nodes"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
start=$(date +%s)
read_all m $(seq 1 "$MOUNTS_AT_ONCE")
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
r=$(ratio "$sent")
echo "origin egress for $MOUNTS_AT_ONCE concurrent cold mounts: $sent bytes = ${r}x the file ($(( $(date +%s) - start )) s)"
for n in 0 1 2; do
  echo "node $((n + 1)): fetched $(metric "${NODE_URLS[$n]}" bdn_cache_fetched_bytes_total) bytes from the origin, served $(metric "${NODE_URLS[$n]}" bdn_cache_hit_bytes_total) from its cache"
  [ "$(metric "${NODE_URLS[$n]}" bdn_cache_hits_total)" -gt 0 ] || fail "node $((n + 1)) served no hits"
done
# The issue's bound is 1.1; every chunk once plus each node's read of the manifest and chunk
# index is ~1.002, and the lost race of concurrent misses in a node's cache (fixed) cost ~1.09:
# 1.05 tells the two apart.
at_most "$r" 1.05 "origin egress / file size"

step "a dead node is skipped: two more cold mounts with one node killed"
kill -9 "${NODE_PIDS[0]}"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
start=$(date +%s)
read_all d 1 2
took=$(( $(date +%s) - start ))
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
r=$(ratio "$sent")
echo "with node 1 dead: origin egress $sent bytes = ${r}x the file (node 1 owned ~1/3), read in $took s"
# Node 1's chunks go to the next node by weight, which fetches each once: about a third.
at_most "$r" 0.45 "origin egress with a dead node / file size"
at_most "$took" 120 "seconds to read with a dead node"

step "a node whose --upstream is another origin is left alone after 32 chunks it lacked"
# From an attacking helper: such a node answers 404 for every chunk, and every mount fetched that
# node's share from the origin itself (2.6x over 6 mounts). Now it is left alone like a dead
# node: its chunks go to the next node by weight, which fetches each once.
start_bdn other serve --listen 127.0.0.1:0 --data "$WORK/other-srv" --insecure-no-auth
BDN_TOKEN= start_bdn wrong cache serve --upstream "$STARTED_URL" --listen 127.0.0.1:0 \
  --cache-dir "$WORK/node-wrong" --cache-size 1G
NODES="${NODE_URLS[1]},${NODE_URLS[2]},$STARTED_URL"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
read_all w 1 2
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
r=$(ratio "$sent")
echo "with a node of another origin: origin egress $sent bytes = ${r}x the file (that node owned ~1/3)"
# Each mount fetching the wrong node's share itself: ~0.67. Here the other nodes hold the whole
# file already, so what the origin sends is what the mounts read from it before the node was left
# alone: 0.008 (a batch's part that the node lacked went to the origin first: 0.06 to 0.64).
at_most "$r" 0.15 "origin egress with a node of another origin / file size"
echo "PASS"
