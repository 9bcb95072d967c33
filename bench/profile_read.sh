#!/usr/bin/env bash
# Where the CPU goes (issue 9 item 3): `perf record -g` of a durable push of ckpt-0
# (bench/gen_checkpoints.py seed 42, 1 GiB) into a fresh embedded store, then of the mount daemon
# during the first read of a fresh mount with the packs in page cache, `strace -c -f` of the
# daemon during the same read, and a system-wide `perf record` of it (kernel side included).
# Usage: bench/profile_read.sh [WORKDIR] [OUTDIR]   (needs perf and strace; ~3 GiB of free disk)
# Writes OUTDIR/perf_push.txt, perf_first_read.txt, perf_sys_first_read.txt (perf report, by
# symbol), strace_first_read.txt and info.txt (the timings); OUTDIR defaults to WORKDIR/out.
# WORKDIR/run (the store, the mount): missing, empty or one a bench run made (bench/lib.sh
# claim_workdir), one run at a time; deleted at the end unless BDN_BENCH_KEEP=1.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
w=${1:-/tmp/bdn-profile}
out=${2:-$w/out}
export BDN_HOME="$w/run/home"
mnt="$w/run/mnt"
trap '"$bdn" volume umount "$mnt" >/dev/null 2>&1 || true; release_workdir' EXIT
claim_workdir "$w/run"
mkdir -p "$w/run/mnt" "$out"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
# report DATA SORT: the 40 heaviest lines of `perf report` (awk reads to the end: no SIGPIPE).
report() {
  perf report -i "$1" --no-children --sort "$2" --stdio -g none 2>/dev/null |
    awk '/^ +[0-9.]+%/ && ++n <= 40'
}
# mount_ref: mounts $ref on $mnt; prints the daemon's pid.
mount_ref() {
  "$bdn" volume mount "$ref" "$mnt" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon_pid"])'
}

python3 "$repo/bench/gen_checkpoints.py" --out "$w/run/gen" >/dev/null
mkdir -p "$w/run/dir" && mv "$w/run/gen/ckpt-0/model.safetensors" "$w/run/dir/" && rm -rf "$w/run/gen"
cat "$w/run/dir/model.safetensors" >/dev/null
: >"$out/info.txt"

# 1. the push
t0=$(now)
perf record -F 999 -g -o "$out/perf_push.data" -- "$bdn" volume push "$w/run/dir" bdn:prof/v --json \
  >"$w/run/push.json" 2>/dev/null
t1=$(now)
echo "push (perf attached): $(secs $t0 $t1) s" >>"$out/info.txt"
{ report "$out/perf_push.data" dso; echo; report "$out/perf_push.data" symbol; } >"$out/perf_push.txt"
ref=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version_ref"])' "$w/run/push.json")
find "$BDN_HOME/store" -type f -print0 | xargs -0 cat >/dev/null

# 2. the first read, perf attached to the daemon
pid=$(mount_ref)
perf record -F 999 -g -p "$pid" -o "$out/perf_first_read.data" -- sleep 8 >/dev/null 2>&1 &
pp=$!; sleep 0.5
t0=$(now); cat "$mnt/model.safetensors" >/dev/null; t1=$(now)
echo "first read (perf attached to the daemon): $(secs $t0 $t1) s" >>"$out/info.txt"
wait $pp
"$bdn" volume umount "$mnt" >/dev/null
{ report "$out/perf_first_read.data" dso; echo; report "$out/perf_first_read.data" symbol; } >"$out/perf_first_read.txt"

# 3. the same read, strace -c -f attached
pid=$(mount_ref)
timeout 120 strace -c -f -p "$pid" -o "$out/strace_first_read.txt" &
sp=$!; sleep 1
t0=$(now); cat "$mnt/model.safetensors" >/dev/null; t1=$(now)
echo "first read (strace attached): $(secs $t0 $t1) s" >>"$out/info.txt"
kill -INT $sp; wait $sp
"$bdn" volume umount "$mnt" >/dev/null

# 4. system-wide, kernel included
mount_ref >/dev/null
perf record -F 999 -a -g -o "$out/perf_sys.data" -- cat "$mnt/model.safetensors" >/dev/null 2>&1
"$bdn" volume umount "$mnt" >/dev/null
report "$out/perf_sys.data" comm,dso,symbol >"$out/perf_sys_first_read.txt"
release_workdir
cat "$out/info.txt"
