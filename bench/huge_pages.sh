#!/usr/bin/env bash
# Huge pages under the heap (issue 9): the first read of a fresh mount with the packs in page
# cache, and a durable push into a fresh store, of the 1 GiB ckpt-0 file, ROUNDS rounds alternating
# between GLIBC_TUNABLES=glibc.malloc.hugetlb=0 (glibc's default heap of 4 KiB pages) and bdn's
# default (where the kernel's THP mode is madvise, bdn re-executes itself with
# glibc.malloc.hugetlb=1: base/memory.h ReexecWithHugePageHeap). For each: wall seconds, the CPU
# seconds of the process (the mount daemon's, from /proc/PID/stat; the push's, from /usr/bin/time)
# and its anonymous huge pages (mount daemon). Warm `cat` of the source and `b3sum` in the same
# rounds, as the references.
# Usage: bench/huge_pages.sh [WORKDIR] [ROUNDS]   (default /tmp/bdn-bench-huge, 5 rounds; ~3 GiB of
# free disk). Prints a markdown report to stdout. The bdn binary is build/apps/bdn/bdn (BDN=
# overrides).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-huge}
rounds=${2:-5}
export BDN_HOME="$work/home"
mnt="$work/mnt"
trap '"$bdn" volume umount "$mnt" >/dev/null 2>&1 || true; release_workdir' EXIT
claim_workdir "$work"
mkdir -p "$mnt" "$work/dir"

python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" >/dev/null
mv "$work/gen/ckpt-0/model.safetensors" "$work/dir/"
rm -rf "$work/gen"
src="$work/dir/model.safetensors"
ref=$("$bdn" volume push "$work/dir" bdn:bench/huge:v0)

now() { date +%s.%N; }
# first_read TUNABLES: mounts $ref with GLIBC_TUNABLES=TUNABLES (unset when empty), reads the file
# once; prints "wall cpu anon_huge_kib".
first_read() {
  local pid t0 t1 cpu huge
  pid=$(env ${1:+GLIBC_TUNABLES=$1} "$bdn" volume mount "$ref" "$mnt" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon_pid"])')
  t0=$(now)
  cat "$mnt/model.safetensors" >/dev/null
  t1=$(now)
  cpu=$(awk '{ print ($14 + $15) / 100 }' "/proc/$pid/stat")
  huge=$(awk '/^AnonHugePages:/ { print $2 }' "/proc/$pid/smaps_rollup")
  "$bdn" volume umount "$mnt" >/dev/null
  python3 -c "print(f'{$t1 - $t0:.3f} $cpu $huge')"
}
# push TUNABLES: a durable push of $work/dir into a fresh store; prints "wall cpu".
push() {
  rm -rf "$work/push-home"
  env ${1:+GLIBC_TUNABLES=$1} BDN_HOME="$work/push-home" /usr/bin/time -f "%e %U %S" -o "$work/time" \
    "$bdn" volume push "$work/dir" bdn:bench/huge:p >/dev/null
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$work/time"
}
# timed CMD...: wall seconds of CMD, output dropped.
timed() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null
  t1=$(now)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

find "$BDN_HOME/store" -type f -print0 | xargs -0 cat >/dev/null
cat "$src" >/dev/null
echo "## Huge pages under the heap ($(nproc) CPUs, kernel $(uname -r), THP mode: $(cat /sys/kernel/mm/transparent_hugepage/enabled), $rounds rounds)"
echo
echo "| round | heap | first read, s | daemon CPU, s | daemon AnonHugePages, KiB | push, s | push CPU, s | warm cat, s | b3sum, s |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  for heap in glibc.malloc.hugetlb=0 ""; do
    read -r fw fc fh < <(first_read "$heap")
    read -r pw pc < <(push "$heap")
    cw=$(timed cat "$src")
    bw=$(timed b3sum "$src")
    echo "| $r | ${heap:-bdn default} | $fw | $fc | $fh | $pw | $pc | $cw | $bw |"
  done
done
