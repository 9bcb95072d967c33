#!/usr/bin/env bash
# Origin + two in-cluster cache nodes + a mount, all real processes on 127.0.0.1: bytes read back
# equal b3sum; a cache node's /metrics counts its hits and misses; the origin serves each chunk
# to the cluster about once; a chunk corrupted on a cache node's disk is never served (the reader
# still gets correct bytes); a dead cache node is skipped for the origin.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

metric() {  # metric URL NAME
  curl -sf "$1/metrics" | awk -v n="$2" '$1 == n {print $2; found=1} END {if (!found) print 0}'
}

step "origin and two cache nodes"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth; ORIGIN=$STARTED_URL; ORIGIN_PID=$STARTED_PID
start_bdn cache1 cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/c1" --cache-size 1G; C1=$STARTED_URL; CACHE1_PID=$STARTED_PID
start_bdn cache2 cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/c2" --cache-size 1G; C2=$STARTED_URL
assert_eq ok "$(curl -sf "$C1/healthz" | tr -d '\n')" "cache node health"
export BDN_REMOTE="$ORIGIN"

mkdir -p "$WORK/src"
python3 -c 'import random,sys; r=random.Random(21); sys.stdout.buffer.write(r.randbytes(24_000_000))' > "$WORK/src/w.bin"
printf 'config\n' > "$WORK/src/config.json"
ref=$("$BDN" volume push "$WORK/src" bdn:test/cluster)
(cd "$WORK/src" && b3sum w.bin config.json) > "$WORK/sums"

step "a cache node's /metrics counts its node cache: a chunk read twice is one miss, then one hit"
id=$(b3sum --no-names "$WORK/src/config.json")  # a one-chunk file: its digest is its chunk's id
h0=$(metric "$C1" bdn_cache_hits_total); m0=$(metric "$C1" bdn_cache_misses_total)
f0=$(metric "$C1" bdn_cache_upstream_fetches_total)
for _ in 1 2; do
  curl -sf "$C1/v1/chunks/$id" | cmp - "$WORK/src/config.json" || fail "chunk from cache node 1"
done
assert_eq 1 "$(( $(metric "$C1" bdn_cache_misses_total) - m0 ))" "cache misses after two reads"
assert_eq 1 "$(( $(metric "$C1" bdn_cache_hits_total) - h0 ))" "cache hits after two reads"
assert_eq 1 "$(( $(metric "$C1" bdn_cache_upstream_fetches_total) - f0 ))" "upstream fetches"
assert_eq 7 "$(metric "$C1" bdn_cache_hit_bytes_total)" "hit bytes"
# The cache is region files (packs): its bytes are at least the chunk's 7 and its record.
cache_bytes=$(metric "$C1" bdn_cache_bytes)
[ "$cache_bytes" -ge 7 ] || fail "bdn_cache_bytes ($cache_bytes) does not count the chunk"
[ "$(metric "$C1" bdn_cache_regions)" -ge 1 ] || fail "bdn_cache_regions counts no region"
assert_eq 1073741824 "$(metric "$C1" bdn_cache_capacity_bytes)" "bdn_cache_capacity_bytes"
# (not `curl | grep -q`: under pipefail, grep exiting at the first match fails curl with SIGPIPE)
[[ $'\n'"$(curl -sf "$C1/metrics")"$'\n' == *$'\n# TYPE bdn_cache_bytes gauge\n'* ]] || fail "bdn_cache_bytes is not a gauge"

step "mount through the cluster: bytes match, the origin serves each chunk about once"
sent0=$(metric "$ORIGIN" bdn_chunk_bytes_sent_total)
c1_hits0=$(metric "$C1" bdn_cache_hits_total)
# Blanks around the listed URLs are dropped (the one node-list parser, ParseNodeList; the CLI
# once kept " http://..." as a URL and refused it).
"$BDN" volume mount "$ref" "$WORK/mnt1" --cluster-cache "$C1, $C2" --cache-dir "$WORK/nc1" >/dev/null
MOUNTS+=("$WORK/mnt1")
(cd "$WORK/mnt1" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through mount 1"
# A second node (its own node cache) reads the same bytes: served by the cache nodes. Its node
# list comes from BDN_CLUSTER_CACHE, parsed the same way.
BDN_CLUSTER_CACHE=" $C1 ,, $C2 " "$BDN" volume mount "$ref" "$WORK/mnt2" --cache-dir "$WORK/nc2" >/dev/null
MOUNTS+=("$WORK/mnt2")
(cd "$WORK/mnt2" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through mount 2"
sent=$(( $(metric "$ORIGIN" bdn_chunk_bytes_sent_total) - sent0 ))
echo "origin sent $sent chunk bytes for two mounts of a 24 MB volume"
[ "$sent" -lt 26500000 ] || fail "origin sent $sent bytes: the cache tier did not absorb the second mount"
hits=$(( $(metric "$C1" bdn_cache_hits_total) + $(metric "$C2" bdn_cache_hits_total) ))
echo "cache node hits: $hits"
# Both listed nodes own chunks and served the second mount some of them.
[ $(( $(metric "$C1" bdn_cache_hits_total) - c1_hits0 )) -gt 0 ] || fail "cache node 1 served no hits"
[ "$(metric "$C2" bdn_cache_hits_total)" -gt 0 ] || fail "cache node 2 served no hits"
[ "$hits" -gt 100 ] || fail "the cache nodes counted $hits hits for the second mount's reads"
"$BDN" volume umount "$WORK/mnt1" >/dev/null; "$BDN" volume umount "$WORK/mnt2" >/dev/null
# From attacking helper 119: a list of commas mounted with no node and no word, and
# BDN_CLUSTER_CACHE's errors named --cluster-cache.
run_fails 2 'bdn: error: --cluster-cache ",,,": names no cache node (URLs separated by commas)' \
  "$BDN" volume mount "$ref" "$WORK/mnt1" --cluster-cache ",,," --cache-dir "$WORK/nc1"
run_fails 2 'bdn: error: BDN_CLUSTER_CACHE " , ": names no cache node (URLs separated by commas)' \
  env BDN_CLUSTER_CACHE=" , " "$BDN" volume mount "$ref" "$WORK/mnt1" --cache-dir "$WORK/nc1"
run_fails 2 'bdn: error: BDN_CLUSTER_CACHE: url "ftp://node": must start with http:// or https://' \
  env BDN_CLUSTER_CACHE="ftp://node" "$BDN" volume mount "$ref" "$WORK/mnt1" --cache-dir "$WORK/nc1"
mountpoint -q "$WORK/mnt1" && fail "a refused node list mounted"

step "a chunk corrupted on a cache node's disk is never served"
# Every whole record in the nodes' region files gets its first payload byte flipped (found by
# packs.py, a second reader of the format).
n=$(( $(python3 "$(dirname "$0")/packs.py" corrupt "$WORK/c1") + $(python3 "$(dirname "$0")/packs.py" corrupt "$WORK/c2") ))
[ "$n" -gt 100 ] || fail "cache nodes hold $n chunks to damage"
echo "damaged $n chunks on the cache nodes' disks"
"$BDN" volume mount "$ref" "$WORK/mnt3" --cluster-cache "$C1,$C2" --cache-dir "$WORK/nc3" >/dev/null
MOUNTS+=("$WORK/mnt3")
(cd "$WORK/mnt3" && b3sum --check --quiet "$WORK/sums") || fail "b3sum with corrupted cache-node chunks"
"$BDN" volume umount "$WORK/mnt3" >/dev/null

step "a dead cache node is skipped"
kill -9 "$CACHE1_PID"
"$BDN" volume mount "$ref" "$WORK/mnt4" --cluster-cache "$C1,$C2" --cache-dir "$WORK/nc4" --read-timeout 20 >/dev/null
MOUNTS+=("$WORK/mnt4")
start=$(date +%s)
(cd "$WORK/mnt4" && b3sum --check --quiet "$WORK/sums") || fail "b3sum with a dead cache node"
echo "read with a dead cache node in $(( $(date +%s) - start )) s"
"$BDN" volume umount "$WORK/mnt4" >/dev/null

step "with the origin down, what a node holds stays readable after a read of what it does not"
# From an operator: a batch holding one chunk the node lacked ended the node's whole answer
# (its upstream refused), the mount set the node aside, and chunks the node held went unread.
# The surviving node holds all of w.bin now (it took the dead node's share).
mkdir -p "$WORK/src2" && cp "$WORK/src/w.bin" "$WORK/src/config.json" "$WORK/src2/"
python3 -c 'import random,sys; r=random.Random(22); sys.stdout.buffer.write(r.randbytes(3_000_000))' > "$WORK/src2/extra.bin"
ref2=$("$BDN" volume push "$WORK/src2" bdn:test/cluster 2>/dev/null)
"$BDN" volume mount "$ref2" "$WORK/mnt5" --cluster-cache "$C2" --cache-dir "$WORK/nc5" --read-timeout 5 >/dev/null
MOUNTS+=("$WORK/mnt5")
kill -TERM "$ORIGIN_PID"; wait "$ORIGIN_PID" 2>/dev/null || true
# extra.bin, which no node holds, is being read (and failing) while w.bin is read.
cat "$WORK/mnt5/extra.bin" > /dev/null 2>&1 & extra=$!
sleep 1
start=$(date +%s)
(cd "$WORK/mnt5" && b3sum --check --quiet "$WORK/sums") || fail "b3sum of what the node holds, with the origin down"
echo "read what the node holds, origin down, in $(( $(date +%s) - start )) s"
wait "$extra" && fail "read extra.bin with the origin down and no node holding it"
# The node was never set aside (it was, for each failed answer, and what it held was asked of the
# dead origin until it was tried again).
assert_absent "not used for" "the mount's log: a cache node set aside" "$BDN_HOME"/logs/mount-mnt5-*.log
"$BDN" volume umount "$WORK/mnt5" >/dev/null
echo "PASS"
