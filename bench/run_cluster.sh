#!/usr/bin/env bash
# Scale-out benchmark (issue 12 item 8), one run on one machine over loopback, with the real
# components of scripts/cluster.sh (PostgreSQL, s3rver, two `bdn serve` origins on the object
# store, HAProxy):
#  - push of ckpt-0 through the load balancer to the two origins vs the same push to one
#    `bdn serve --data DIR` (the single-server data directory), input warm, both durable;
#  - cold read of the pushed file through mount -> node cache -> load balancer -> origin ->
#    object store (origins restarted so that nothing is in their memory, page cache dropped) vs
#    `aws s3 cp --recursive` of the packs from the same s3rver (page cache dropped);
#  - requests to the object store per GiB written (the push) and read (the cold read), from the
#    origins' bdn_objstore_requests_total.
# Usage: bench/run_cluster.sh [WORKDIR]   (BDN_BENCH_SIZE_MIB=32 for a quick check that it runs;
# ~4 GiB of free disk; "cold" drops the page cache as root, else evicts the files involved with
# posix_fadvise(DONTNEED)). Needs scripts/setup.sh (PostgreSQL, HAProxy, awscli, s3rver).
# Prints a markdown report to stdout. The bdn binary is $BDN, else build/apps/bdn/bdn.
# WORKDIR (default /tmp/bdn-bench-cluster) must be missing, empty or one a bench run made
# (bench/lib.sh claim_workdir); one run at a time uses it. A cluster a killed run left there is
# reset first. WORKDIR is deleted at the end (cluster reset, ~5 GiB freed) unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
export BDN=${BDN:-$repo/build/apps/bdn/bdn}
bdn=$BDN
work=${1:-/tmp/bdn-bench-cluster}
cluster="$work/cluster"
mnt="$work/mnt"
server_pid=""
# cluster_sh ARGS...: scripts/cluster.sh on this run's cluster, without the work directory's lock
# (the services it starts must not hold it: after a killed run, the next one resets them).
cluster_sh() { "$repo/scripts/cluster.sh" --dir "$cluster" "$@" {BENCH_LOCK_FD}>&-; }
# stop_leftovers: stops what a run (this one, or a killed one) leaves in $work: its mount, its
# cluster (reset: PostgreSQL's directory is outside $work). Fails if the reset fails.
stop_leftovers() {
  if [ -d "$mnt" ]; then "$bdn" volume umount "$mnt" >/dev/null 2>&1 || true; fi
  if [ -f "$cluster/cluster.env" ] && [ -d "$cluster/pids" ]; then
    cluster_sh reset >/dev/null || { echo "bench: could not reset the cluster in $cluster" >&2; return 1; }
  fi
}
cleanup() {
  [ "${BENCH_WORKDIR:-}" = "$work" ] || return 0  # refused $work: nothing there is this run's
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  if [ "${BDN_BENCH_KEEP:-0}" = 1 ]; then
    "$bdn" volume umount "$mnt" >/dev/null 2>&1 || true
    if [ -f "$cluster/cluster.env" ]; then cluster_sh down >/dev/null || true; fi
    release_workdir  # says where it is
  elif stop_leftovers; then
    release_workdir
  else
    echo "bench: $work kept: reset its cluster with scripts/cluster.sh --dir $cluster reset" >&2
  fi
}
trap cleanup EXIT
stop_leftovers_or_exit() { stop_leftovers || exit 1; }
claim_workdir "$work" stop_leftovers_or_exit
chmod 700 "$work"  # the cluster's admin token is in it
mkdir -p "$mnt"

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
mib_s() { python3 -c "print(f'{$1 / $2 / 1048576:.0f}')"; }
per_gib() { python3 -c "print(f'{$1 / ($2 / 2**30):.1f}')"; }
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
drop() {
  sync
  if ! { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
    python3 "$repo/bench/evict.py" "$@"
  fi
}
# CPU accounting: clock ticks (user + system) used so far by processes, from /proc/PID/stat
# (fields 14-17: the process's own and its waited-for children's; 0 for a PID that is gone).
hz=$(getconf CLK_TCK)
ticks() {
  local s=0 p t
  for p in "$@"; do
    t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$p/stat" 2>/dev/null) || t=0
    s=$((s + ${t:-0}))
  done
  echo "$s"
}
# component_pids NAME: the processes of one part of the cluster (origins; s3rver; haproxy: master
# and workers; postgres: postmaster and backends; mount: the daemon serving $mnt).
component_pids() {
  local m p
  case $1 in
    origins) cat "$cluster/pids/origin1.pid" "$cluster/pids/origin2.pid" ;;
    s3rver) cat "$cluster/pids/s3rver.pid" ;;
    haproxy) m=$(cat "$cluster/pids/haproxy.pid"); echo "$m"; pgrep -P "$m" || true ;;
    postgres) m=$(sed -n 1p "$(cat "$cluster/pg.dir")/data/postmaster.pid"); echo "$m"; pgrep -P "$m" || true ;;
    mount)
      for p in $(pgrep -x bdn || true); do
        if tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -Fx -- "$mnt" >/dev/null; then echo "$p"; fi
      done ;;
  esac
}
# cpu_mark NAME...: remembers the ticks of each component now; cpu_since NAME: CPU seconds it has
# used since its mark. The client (the shell's children) is read from bash's `times`, which must run in
# this shell: mark_client / client_since.
declare -A cpu0
cpu_mark() { local c; for c in "$@"; do cpu0[$c]=$(ticks $(component_pids "$c")); done; }
cpu_since() { python3 -c "print(f'{($(ticks $(component_pids "$1")) - ${cpu0[$1]}) / $hz:.2f}')"; }
client_secs() { awk 'NR == 2 {split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2]}' "$1"; }

# metric NAME: the sum of NAME over both origins' /metrics. Exits 1 (the run with it: `x=$(metric
# NAME)` fails) if an origin's /metrics cannot be read or has no NAME line, rather than count 0.
metric() {
  local sum=0 u page v
  for u in "$BDN_CLUSTER_ORIGIN1" "$BDN_CLUSTER_ORIGIN2"; do
    page=$(curl -sSf --max-time 30 "$u/metrics") || { echo "bench: cannot read $u/metrics" >&2; exit 1; }
    v=$(awk -v m="$1" '$1 == m {s += $NF; n++} END {if (!n) exit 1; printf "%d\n", s}' <<<"$page") \
      || { echo "bench: $u/metrics has no $1 line" >&2; exit 1; }
    sum=$((sum + v))
  done
  echo "$sum"
}

python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" --size-mib "${BDN_BENCH_SIZE_MIB:-1024}" >/dev/null
src="$work/gen/ckpt-0"; c0="$src/model.safetensors"; size=$(du -sb "$src" | awk '{print $1}')
want=$(b3sum --no-names "$c0")

echo "## Scale-out benchmark"
echo
echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/ {print $2}') GiB RAM, kernel $(uname -r); PostgreSQL, s3rver, two origins, HAProxy, client and mount on one machine over loopback"
echo "- input: bench/gen_checkpoints.py seed 42: ckpt-0, $size bytes"
echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# --- single server: `bdn serve --data DIR` ---
BDN_HOME="$work/server-home" "$bdn" serve --listen 127.0.0.1:0 --data "$work/origin" \
  --insecure-no-auth 2>"$work/origin.log" &
server_pid=$!
url=$(wait_listening "$work/origin.log")
cat "$c0" >/dev/null; cat "$c0" >/dev/null
single0=$(ticks "$server_pid"); times >"$work/times0"
t0=$(now)
BDN_REMOTE="$url" BDN_HOME="$work/client-single" "$bdn" volume push "$src" bdn:bench/ckpt --json >/dev/null
t1=$(now); push_single=$(secs $t0 $t1)
times >"$work/times1"; single_server_cpu=$(python3 -c "print(f'{($(ticks "$server_pid") - $single0) / $hz:.2f}')")
single_client_cpu=$(python3 -c "print(f'{$(client_secs "$work/times1") - $(client_secs "$work/times0"):.2f}')")
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
rm -rf "$work/origin"

# --- the cluster ---
cluster_sh up >"$work/cluster-up.log" 2>&1 \
  || { cat "$work/cluster-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$cluster/cluster.env"
# shellcheck disable=SC1091
source "$cluster/aws.env"
export BDN_REMOTE="$BDN_CLUSTER_LB" BDN_HOME="$work/client-cluster"
BDN_TOKEN=$(cat "$cluster/admin.token"); export BDN_TOKEN
aws() { AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true AWS_PAGER="" /usr/bin/aws --endpoint-url "$BDN_CLUSTER_S3" "$@"; }

cat "$c0" >/dev/null
w0=$(metric bdn_objstore_requests_total); p0=$(metric bdn_objstore_put_requests_total)
cpu_mark origins s3rver postgres haproxy; times >"$work/times0"
t0=$(now); "$bdn" volume push "$src" bdn:bench/ckpt --json >"$work/push.json"; t1=$(now)
push_cluster=$(secs $t0 $t1)
times >"$work/times1"; out=$(cat "$work/push.json")
declare -A push_cpu
for c in origins s3rver postgres haproxy; do push_cpu[$c]=$(cpu_since "$c"); done
push_cpu[client]=$(python3 -c "print(f'{$(client_secs "$work/times1") - $(client_secs "$work/times0"):.2f}')")
w1=$(metric bdn_objstore_requests_total); p1=$(metric bdn_objstore_put_requests_total)
ref=$(json version_ref <<<"$out")
stored=$(aws s3 ls --recursive "s3://bdn/cluster/packs/" | awk '{s += $3; n++} END {printf "%d %d\n", s, n}')
packs_bytes=${stored% *}; packs=${stored#* }

# --- cold read: origins restarted (nothing in their memory), page cache dropped ---
for o in origin1 origin2; do
  cluster_sh stop "$o" >/dev/null
  cluster_sh start "$o" >/dev/null
done
for _ in $(seq 1 100); do  # HAProxy marks both up again (checks every 500 ms)
  curl -sf "$BDN_CLUSTER_LB/healthz" >/dev/null && curl -sf "$BDN_CLUSTER_LB/healthz" >/dev/null && break
  sleep 0.1
done
cache="$work/node-cache"
"$bdn" volume mount "$ref" "$mnt" --cache-dir "$cache" --cache-size 4G >/dev/null
sleep 1  # the mount loads every chunk index in the background; not part of the read
drop "$cluster" "$cache" "$c0"
r0=$(metric bdn_objstore_requests_total); g0=$(metric bdn_objstore_get_requests_total)
b0=$(metric bdn_objstore_received_bytes_total)
cpu_mark origins s3rver postgres haproxy mount
t0=$(now); cat "$mnt/model.safetensors" >/dev/null; t1=$(now); cold_mnt=$(secs $t0 $t1)
declare -A read_cpu
for c in origins s3rver postgres haproxy mount; do read_cpu[$c]=$(cpu_since "$c"); done
r1=$(metric bdn_objstore_requests_total); g1=$(metric bdn_objstore_get_requests_total)
b1=$(metric bdn_objstore_received_bytes_total)
got=$(b3sum --no-names "$mnt/model.safetensors")
[ "$got" = "$want" ] || { echo "the mount served wrong bytes: $got, want $want" >&2; exit 1; }
"$bdn" volume umount "$mnt" >/dev/null
file_size=$(stat -c %s "$c0")

# --- the reference: aws s3 cp of the packs from the same server ---
drop "$cluster" "$cache" "$c0"
cpu_mark s3rver; times >"$work/times0"
t0=$(now); aws s3 cp --quiet --recursive "s3://bdn/cluster/packs/" "$work/awscp"; t1=$(now)
aws_s=$(secs $t0 $t1)
times >"$work/times1"; aws_s3rver_cpu=$(cpu_since s3rver)
aws_cpu=$(python3 -c "print(f'{$(client_secs "$work/times1") - $(client_secs "$work/times0"):.2f}')")
aws_bytes=$(du -sb "$work/awscp" | awk '{print $1}')

echo "### Push of ckpt-0 (input warm in page cache; both durable)"
echo
echo "| push | seconds | MiB/s | ratio (single-server time / this time) | target |"
echo "|---|---|---|---|---|"
echo "| \`bdn volume push\` to one \`bdn serve --data DIR\` | $push_single | $(mib_s $size $push_single) | 1.00 | |"
echo "| \`bdn volume push\` through HAProxy to two origins on s3rver + PostgreSQL | $push_cluster | $(mib_s $size $push_cluster) | **$(ratio $push_single $push_cluster)** | ≥ 0.7 |"
echo
echo "### Cold read of the $file_size-byte file"
echo
echo "| read | seconds | MiB/s of the file | bytes from the object store | ratio (aws time / this time) | target |"
echo "|---|---|---|---|---|---|"
echo "| \`aws s3 cp --recursive\` of the $packs packs | $aws_s | $(mib_s $file_size $aws_s) | $aws_bytes | 1.00 | |"
echo "| \`cat\` through the mount → node cache → HAProxy → origin → s3rver | $cold_mnt | $(mib_s $file_size $cold_mnt) | $((b1 - b0)) | **$(ratio $aws_s $cold_mnt)** | ≥ 0.7 |"
echo
echo "### Object-store requests"
echo
echo "| direction | requests | of which PUT / GET | per GiB | target |"
echo "|---|---|---|---|---|"
echo "| written (the push; $packs packs, $packs_bytes bytes stored) | $((w1 - w0)) | $((p1 - p0)) PUT | **$(per_gib $((w1 - w0)) $size)** | ≤ 64 |"
echo "| read (the cold read) | $((r1 - r0)) | $((g1 - g0)) GET | **$(per_gib $((r1 - r0)) $file_size)** | ≤ 64 |"
echo
echo "### CPU seconds (user + system) of each process, over each measured span"
echo
echo "All of them share the machine's $(nproc) cores: a span's wall time is at least its CPU seconds / $(nproc)."
echo
total() { python3 -c "print(f'{sum([$(IFS=,; echo "$*")]):.2f}')"; }
echo "| span | wall s | client | origin(s) | s3rver | PostgreSQL | HAProxy | total |"
echo "|---|---|---|---|---|---|---|---|"
echo "| push to one \`bdn serve --data DIR\` | $push_single | $single_client_cpu | $single_server_cpu | | | | $(total "$single_client_cpu" "$single_server_cpu") |"
echo "| push through HAProxy to two origins | $push_cluster | ${push_cpu[client]} | ${push_cpu[origins]} | ${push_cpu[s3rver]} | ${push_cpu[postgres]} | ${push_cpu[haproxy]} | $(total "${push_cpu[client]}" "${push_cpu[origins]}" "${push_cpu[s3rver]}" "${push_cpu[postgres]}" "${push_cpu[haproxy]}") |"
echo "| cold read (client: the mount's daemon) | $cold_mnt | ${read_cpu[mount]} | ${read_cpu[origins]} | ${read_cpu[s3rver]} | ${read_cpu[postgres]} | ${read_cpu[haproxy]} | $(total "${read_cpu[mount]}" "${read_cpu[origins]}" "${read_cpu[s3rver]}" "${read_cpu[postgres]}" "${read_cpu[haproxy]}") |"
echo "| \`aws s3 cp\` (client: aws) | $aws_s | $aws_cpu | | $aws_s3rver_cpu | | | $(total "$aws_cpu" "$aws_s3rver_cpu") |"
echo
echo "b3sum of the file read through the mount matched the source ($want)."
