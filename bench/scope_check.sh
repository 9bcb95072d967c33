#!/usr/bin/env bash
# What the namespace scope of chunk reads costs a `bdn serve` origin (docs/http-api.md, "Chunks:
# scoped to namespaces"), one run on one machine over loopback: wrk fetching random chunks of a
# 128 MiB version (GET of one 64 KiB-average chunk, and batches of 64) with a pull key for every
# namespace and no Bdn-Version (no check), then with a pull key of the version's namespace naming
# it (key scope, cached registry lookup, blob-set lookup per chunk). Each pair is run twice,
# alternating, 16 connections, DURATION seconds each. Also prints the first scoped request's time
# (the registry lookup and the blob set built from the manifest and chunk index).
#
# Usage: bench/scope_check.sh [WORKDIR]   (needs wrk, curl, b3sum, python3; ~2 minutes)
# Env: BDN (default build/apps/bdn/bdn), DURATION (default 10), CONNS (default 16).
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-scope}
duration=${DURATION:-10}
conns=${CONNS:-16}
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; release_workdir' EXIT
claim_workdir "$work"
mkdir -p "$work/src"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE

"$bdn" serve --listen 127.0.0.1:0 --data "$work/data" 2>"$work/serve.log" &
server_pid=$!
url=$(wait_listening "$work/serve.log")
export BDN_REMOTE="$url"
admin=$(cat "$work/data/admin.token")
head -c $((128 << 20)) /dev/urandom > "$work/src/w.bin"
ref=$(BDN_TOKEN="$admin" "$bdn" volume push "$work/src" bdn:w/bench)
all=$(BDN_TOKEN="$admin" "$bdn" key create --namespace '*' --scope pull 2>/dev/null)
ns=$(BDN_TOKEN="$admin" "$bdn" key create --namespace w --scope pull 2>/dev/null)
index=$(BDN_TOKEN="$admin" "$bdn" --json volume stat "$ref/w.bin" | python3 -c 'import json,sys; print(json.load(sys.stdin)["chunk_index"][3:])')
curl -sf -H "Authorization: Bearer $admin" "$url/v1/chunks/$index" | python3 -c '
import sys
b = sys.stdin.buffer.read()
n = int.from_bytes(b[8:16], "little")
for k in range(n):
    print(b[16 + 36 * k:48 + 36 * k].hex())' > "$work/ids"
chunk=$(head -1 "$work/ids")
first=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $ns" -H "Bdn-Version: $ref" "$url/v1/chunks/$chunk")
again=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $ns" -H "Bdn-Version: $ref" "$url/v1/chunks/$chunk")
echo "## Namespace scope of chunk reads: cost at the origin"
echo
echo "- machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); wrk -t2 -c$conns -d${duration}s over loopback"
echo "- version: 128 MiB, $(wc -l < "$work/ids") chunks; first scoped GET $first s (registry lookup + blob set), the next $again s"
echo
echo "| reads | key | req/s | MB/s | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|---|"
run() {  # run BATCH LABEL TOKEN VERSION
  local out
  out=$(BDN_IDS="$work/ids" BDN_TOKEN="$3" BDN_VERSION="$4" BDN_BATCH="$1" \
        wrk -t2 -c"$conns" -d"${duration}s" --timeout 10s -s "$repo/bench/wrk_chunks.lua" "$url" 2>&1 | sed -n 's/^RESULT //p')
  python3 - "$out" "$1" "$2" <<'PY'
import sys
f = dict(kv.split("=") for kv in sys.argv[1].split())
secs = int(f["duration_us"]) / 1e6
kind = "GET" if sys.argv[2] == "0" else f"batch of {sys.argv[2]}"
print(f"| {kind} | {sys.argv[3]} | {int(f['requests']) / secs:,.0f} | {int(f['bytes']) / secs / 1e6:,.0f} | "
      f"{int(f['p50_us']) / 1000:.2f} | {int(f['p99_us']) / 1000:.2f} | {f['errors']} |")
PY
}
for batch in 0 64; do
  for _ in 1 2; do
    run "$batch" "pull on *, no Bdn-Version (no check)" "$all" ""
    run "$batch" "pull on w, Bdn-Version (checked)" "$ns" "$ref"
  done
done
