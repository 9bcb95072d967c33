#!/usr/bin/env bash
# HTTP load benchmark of `bdn serve` (issue 13 item 7), one run on one machine over loopback,
# against a previous build in the same run: wrk with 16, 256 and 2,000 keep-alive connections
# fetching random 64 KiB chunks (GET /v1/chunks/<id>) and POST /v1/chunks/batch of 64 random
# chunks, each alone and with 1,000 slow-header connections held open (bench/slow_headers.py).
# Requests per second, MB/s, p50 and p99 latency, errors (connect/read/write/timeout/non-2xx).
# Both servers serve the same data directory, one after the other, with authentication on.
#
# Usage: bench/http_load.sh PREVIOUS_BDN [WORKDIR]   (needs wrk and python3; ~10 minutes)
#   PREVIOUS_BDN: a bdn binary built from an earlier commit (e.g. the last before the
#   asynchronous server), or "" to measure only this build (build/apps/bdn/bdn, or $BDN).
# Then the same connection counts at one fixed offered load (RATE requests/s in all, BATCH_RATE
# for batches; bench/wrk_chunks.lua spaces each connection's requests), so p99 at 2,000
# connections is compared with p99 at 16 under the same load.
# Env: DURATION (seconds per GET run, default 10), BATCH_DURATION (batch runs, default 30),
# CONNS (default "16 256 2000"), WRK_THREADS (2), RATE (default 1000), BATCH_RATE (default 20),
# MODES (default "closed fixed": which of the two tables), KINDS (default "get batch").
# At a fixed load each connection waits CONNS/RATE seconds between requests (100 s for batches
# at 2,000 connections), longer than the servers' idle deadlines: this build is started with
# --header-timeout and --idle-timeout of 600s for those runs, so that the deadlines do not
# close the waiting connections; the previous server has no such flags.
# Prints a markdown report to stdout.
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
prev=${1:-}
work=${2:-/tmp/bdn-bench-http}
duration=${DURATION:-10}
batch_duration=${BATCH_DURATION:-30}
rate=${RATE:-1000}
batch_rate=${BATCH_RATE:-20}
conns=${CONNS:-16 256 2000}
modes=${MODES:-closed fixed}
kinds=${KINDS:-get batch}
batches=""
for k in $kinds; do
  case $k in get) batches+=" 0" ;; batch) batches+=" 64" ;; *) echo "KINDS: get or batch, not $k" >&2; exit 2 ;; esac
done
wrk_threads=${WRK_THREADS:-2}
server_pid=""; slow_pid=""
cleanup() {
  [ -n "$slow_pid" ] && kill "$slow_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  release_workdir
}
trap cleanup EXIT
claim_workdir "$work"
ulimit -n 65536 2>/dev/null || true

# start_server BIN NAME [flags]: serves $work/data-NAME on a free port; sets url and server_pid.
# Each server has a data directory of its own, filled by itself (populate): the store's layout
# changed between builds (packs, issue 9), and a server reads only its own.
start_server() {
  local bin=$1 name=$2; shift 2
  "$bin" serve --listen 127.0.0.1:0 --data "$work/data-$name" "$@" 2>"$work/$name.log" &
  server_pid=$!
  url=""
  for _ in $(seq 1 100); do
    url=$(sed -n '/listening on http:/{s/.*listening on \(http:\/\/[^ ]*\).*/\1/p;q}' "$work/$name.log")
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "server $name did not start: $(cat "$work/$name.log")" >&2; exit 1
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }

# --- data: 2,048 random 64 KiB chunks (128 MiB, warm in the page cache), a pull key ---
python3 - "$work/chunks" "$work/ids" <<'EOF'
import os, subprocess, sys
chunks, ids_file = sys.argv[1:3]
os.makedirs(chunks)
ids = []
for i in range(2048):
    tmp = os.path.join(chunks, "tmp")
    open(tmp, "wb").write(os.urandom(64 << 10))
    digest = subprocess.run(["b3sum", "--no-names", tmp], capture_output=True, text=True,
                            check=True).stdout.strip()
    os.rename(tmp, os.path.join(chunks, digest))
    ids.append(digest)
open(ids_file, "w").write("\n".join(ids) + "\n")
EOF
# populate BIN NAME: the chunks uploaded through server BIN into its own data directory, and a
# pull key of that server in $work/pull-NAME.
populate() {
  start_server "$1" "$2"
  local token; token=$(cat "$work/data-$2/admin.token")
  python3 - "$url" "$token" "$work/chunks" "$work/ids" <<'EOF'
import os, sys, urllib.request
url, token, chunks, ids_file = sys.argv[1:5]
for digest in open(ids_file).read().split():
    data = open(os.path.join(chunks, digest), "rb").read()
    req = urllib.request.Request(f"{url}/v1/chunks/{digest}", data=data, method="PUT",
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req).read()
EOF
  BDN_REMOTE="$url" BDN_TOKEN="$token" "$1" key create --namespace '*' --scope pull >"$work/pull-$2"
  stop_server
}
populate "$bdn" new
[ -z "$prev" ] || populate "$prev" previous
rm -rf "$work/chunks"

echo "## HTTP load benchmark"
echo
echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/ {print $2}') GiB RAM, kernel $(uname -r); server, wrk (${wrk_threads} threads) and the slow-header client on one machine over loopback"
echo "- data: 2,048 random 64 KiB chunks (128 MiB, in the page cache); a pull key on every request"
echo "- each run: \`wrk -t${wrk_threads} -c<N> -d<T> --timeout 10s -s bench/wrk_chunks.lua\` (T = ${duration}s for GET, ${batch_duration}s for batch); GET: a random chunk per request; batch: 64 random ids per request (4 MiB answers)"
echo "- servers: this build ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'))${prev:+, and the previous server: $prev}"
echo

# run NAME BDN_BATCH CONNS SLOW [RATE]: one wrk run against the running server; prints a table
# row. With RATE, the connections together offer about RATE requests per second.
run() {
  local name=$1 batch=$2 c=$3 slow=$4 r=${5:-0} out d=$duration
  [ "$batch" = 0 ] || d=$batch_duration
  if [ "$slow" = yes ]; then
    python3 "$repo/bench/slow_headers.py" 127.0.0.1 "${url##*:}" 1000 >"$work/slow.log" 2>&1 &
    slow_pid=$!
    sleep 2
  fi
  out=$(BDN_IDS="$work/ids" BDN_TOKEN="$(cat "$work/pull-$name")" BDN_BATCH="$batch" BDN_RATE="$r" BDN_CONNS="$c" BDN_WRK_THREADS="$wrk_threads" \
        wrk -t"$wrk_threads" -c"$c" -d"${d}s" --timeout 10s \
        -s "$repo/bench/wrk_chunks.lua" "$url" 2>&1 | grep '^RESULT' || true)
  if [ -n "$slow_pid" ]; then kill "$slow_pid" 2>/dev/null || true; wait "$slow_pid" 2>/dev/null || true; slow_pid=""; fi
  if [ -z "$out" ]; then
    echo "| $name | $( [ "$batch" = 0 ] && echo GET || echo batch ) | $c | $slow | (wrk failed) | | | | |"
    return
  fi
  python3 - "$out" "$name" "$batch" "$c" "$slow" <<'EOF'
import sys
fields = dict(kv.split("=") for kv in sys.argv[1].split()[1:])
name, batch, c, slow = sys.argv[2:6]
secs = int(fields["duration_us"]) / 1e6
rps = int(fields["requests"]) / secs
mbs = int(fields["bytes"]) / secs / 1e6
kind = "GET 64 KiB" if batch == "0" else f"batch of {batch}"
print(f"| {name} | {kind} | {c} | {slow} | {rps:,.0f} | {mbs:,.0f} | "
      f"{int(fields['p50_us']) / 1000:.2f} | {int(fields['p99_us']) / 1000:.2f} | {fields['errors']} |")
EOF
}

# start NAME BIN [flags]: starts that server with the benchmark's connection limits; flags go to
# this build only.
start() {
  if [ "$1" = new ]; then
    # Every wrk connection comes from 127.0.0.1: allow them all from one address.
    start_server "$2" "$1" --max-connections 8192 --max-connections-per-client 8192 "${@:3}"
  else
    start_server "$2" "$1"
  fi
}

servers=("new:$bdn")
[ -n "$prev" ] && servers+=("previous:$prev")
if [[ " $modes " == *" closed "* ]]; then
echo "### Closed loop: each connection sends its next request when the last is answered"
echo
echo "| server | requests | connections | 1,000 slow-header conns | req/s | MB/s | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for batch in $batches; do
  for slow in no yes; do
    for c in $conns; do
      for entry in "${servers[@]}"; do
        name=${entry%%:*}; bin=${entry#*:}
        start "$name" "$bin"
        run "$name" "$batch" "$c" "$slow"
        stop_server
      done
    done
  done
done

echo
fi

if [[ " $modes " == *" fixed "* ]]; then
echo "### Fixed offered load: about $rate GET/s or $batch_rate batches/s in all, whatever the connection count"
echo
echo "| server | requests | connections | 1,000 slow-header conns | req/s | MB/s | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for batch in $batches; do
  r=$rate; [ "$batch" = 0 ] || r=$batch_rate
  for c in $conns; do
    for entry in "${servers[@]}"; do
      name=${entry%%:*}; bin=${entry#*:}
      start "$name" "$bin" --header-timeout 600s --idle-timeout 600s
      run "$name" "$batch" "$c" no "$r"
      stop_server
    done
  done
done
fi
