#!/usr/bin/env bash
# Issue 10 item 8: `bdn volume sync` of one object (ckpt-0, 1 GiB of random bytes by default) from
# s3rver vs `aws s3 cp` (Debian's awscli) of the same object from the same server, in the same run,
# as a ratio (aws time / sync time: >= 1.0 means the sync is at least as fast, which it can be
# since it writes no staging copy), and the sync's peak RSS. Each side runs RUNS times (default 3)
# and the best time counts. Needs scripts/setup.sh (s3rver from tests/npm, awscli).
# Usage: bench/sync_s3.sh [WORKDIR]   env: BENCH_BYTES (default 1073741824), RUNS, BENCH_INPUT
# (a file to upload instead of random bytes, e.g. the model.safetensors of bench/gen_checkpoints.py's
# ckpt-0, whose bytes zstd compresses by ~20 %; BENCH_BYTES is then its size)
# Prints a markdown report to stdout.
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-sync}
bytes=${BENCH_BYTES:-1073741824}
runs=${RUNS:-3}
pids=()
trap 'for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; release_workdir' EXIT
claim_workdir "$work"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY AWS_PROFILE
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
aws=/usr/bin/aws

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
node --openssl-legacy-provider "$repo/tests/npm/node_modules/s3rver/bin/s3rver.js" \
  -d "$work/s3rver" -a 127.0.0.1 -p "$port" -s --allow-mismatched-signatures --no-vhost-buckets &
pids+=($!)
s3="http://127.0.0.1:$port"
for _ in $(seq 1 100); do curl -s "$s3" >/dev/null && break; sleep 0.1; done
if [ -n "${BENCH_INPUT:-}" ]; then
  input=$BENCH_INPUT
  bytes=$(stat -c %s "$input")
else
  input=$work/ckpt-0
  python3 -c 'import os,sys; f=open(sys.argv[1],"wb"); n=int(sys.argv[2])
while n > 0:
    k = min(n, 1 << 24); f.write(os.urandom(k)); n -= k' "$input" "$bytes"
fi
$aws --endpoint-url "$s3" s3 mb s3://bench >/dev/null
$aws --endpoint-url "$s3" s3 cp --quiet "$input" s3://bench/ckpt-0
want=$(b3sum --no-names "$input")
[ -n "${BENCH_INPUT:-}" ] || rm "$input"

now() { date +%s.%N; }
# CPU seconds (user + system) s3rver has used so far, from /proc/PID/stat.
s3rver_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/${pids[0]}/stat"; }
# rusage CMD...: runs CMD, stdout discarded; prints "maxrss_kib cpu_seconds" of it.
rusage() {
  python3 -c 'import resource,subprocess,sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_maxrss, u.ru_utime + u.ru_stime); sys.exit(r.returncode)' "$@"
}
best_aws=""; best_sync=""; rss=0; cpu_aws=""; cpu_sync=""; s3_aws=""; s3_sync=""
for i in $(seq 1 "$runs"); do
  rm -f "$work/copy"
  c0=$(s3rver_cpu)
  t0=$(now); u=$(rusage $aws --endpoint-url "$s3" s3 cp --quiet s3://bench/ckpt-0 "$work/copy"); t1=$(now)
  c1=$(s3rver_cpu)
  [ "$(b3sum --no-names "$work/copy")" = "$want" ] || { echo "aws s3 cp: wrong bytes" >&2; exit 1; }
  rm -f "$work/copy"
  t=$(python3 -c "print($t1 - $t0)")
  if [ -z "$best_aws" ] || python3 -c "import sys; sys.exit(0 if $t < $best_aws else 1)"; then
    cpu_aws=${u#* }; s3_aws=$(python3 -c "print(round($c1 - $c0, 2))")
  fi
  best_aws=$(python3 -c "print(min(x for x in [$t, ${best_aws:-$t}]))")
  rm -rf "$work/home"
  c0=$(s3rver_cpu)
  t0=$(now)
  u=$(BDN_HOME="$work/home" rusage "$bdn" volume sync start --source s3://bench/ckpt-0 \
      --endpoint "$s3" --dest bdn:bench/ckpt)
  t1=$(now)
  c1=$(s3rver_cpu)
  r=${u% *}
  t=$(python3 -c "print($t1 - $t0)")
  if [ -z "$best_sync" ] || python3 -c "import sys; sys.exit(0 if $t < $best_sync else 1)"; then
    cpu_sync=${u#* }; s3_sync=$(python3 -c "print(round($c1 - $c0, 2))")
  fi
  best_sync=$(python3 -c "print(min(x for x in [$t, ${best_sync:-$t}]))")
  rss=$(python3 -c "print(max($rss, $r))")
done
digest=$(BDN_HOME="$work/home" "$bdn" --json volume stat bdn:bench/ckpt/ckpt-0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
[ "$digest" = "b3:$want" ] || { echo "sync: wrong digest $digest" >&2; exit 1; }
mib=$(python3 -c "print(f'{$bytes / 1048576:.0f}')")
cat <<MD
| ${mib} MiB object from s3rver (best of $runs) | seconds | MiB/s | CPU seconds of the tool | CPU seconds of s3rver meanwhile |
|---|---|---|---|---|
| \`aws s3 cp\` | $(python3 -c "print(f'{$best_aws:.2f}')") | $(python3 -c "print(f'{$bytes / 1048576 / $best_aws:.0f}')") | $(python3 -c "print(f'{$cpu_aws:.2f}')") | $s3_aws |
| \`bdn volume sync\` (embedded) | $(python3 -c "print(f'{$best_sync:.2f}')") | $(python3 -c "print(f'{$bytes / 1048576 / $best_sync:.0f}')") | $(python3 -c "print(f'{$cpu_sync:.2f}')") | $s3_sync |

ratio (aws time / sync time): $(python3 -c "print(f'{$best_aws / $best_sync:.2f}')") (target >= 1.0); sync peak RSS: $(python3 -c "print(f'{$rss / 1024:.0f}')") MiB
MD
