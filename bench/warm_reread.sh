#!/usr/bin/env bash
# Warm re-read (issue 9): the 1 GiB ckpt-0 file read with `cat` through a bdn mount whose page
# cache holds it, against the same bytes on the source file system (ext4 here) and on tmpfs
# (/dev/shm, a page cache of 4 KiB pages unless shmem huge pages are on), ROUNDS rounds
# alternating, minimum and median of each; then the FUSE requests one re-read sends (strace -c of
# the mount's daemon, when strace is installed).
# Usage: bench/warm_reread.sh [WORKDIR] [ROUNDS]   (default /tmp/bdn-bench-reread, 15 rounds;
# ~3.5 GiB of free disk and 1 GiB of /dev/shm)
# Prints a markdown report to stdout. The bdn binary is build/apps/bdn/bdn (BDN= overrides).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-reread}
rounds=${2:-15}
export BDN_HOME="$work/home"
mnt="$work/mnt"
shm=/dev/shm/bdn-bench-reread.$$
trap '"$bdn" volume umount "$mnt" >/dev/null 2>&1 || true; rm -f "$shm"; release_workdir' EXIT
claim_workdir "$work"
mkdir -p "$mnt"

python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" >/dev/null
src="$work/gen/ckpt-0/model.safetensors"
"$bdn" volume push "$work/gen/ckpt-0" bdn:bench/reread:v0 >/dev/null 2>"$work/push.log"
"$bdn" volume mount bdn:bench/reread:v0 "$mnt" >/dev/null
cp "$src" "$shm"
# The source file's pages as a reader finds them after reading it from disk (the generator's
# writes leave it cached in small folios, which read slower): written back, evicted, read again.
sync
python3 "$repo/bench/evict.py" "$src"
for f in "$mnt/model.safetensors" "$src" "$shm"; do cat "$f" > /dev/null; cat "$f" > /dev/null; done

echo "## Warm re-read ($(nproc) CPUs, kernel $(uname -r), $rounds rounds)"
echo
python3 - "$rounds" "$mnt/model.safetensors" "$src" "$shm" <<'PYEOF'
import statistics, subprocess, sys, time
rounds, paths = int(sys.argv[1]), sys.argv[2:]
names = ["bdn mount (FUSE page cache)", "source file (" + subprocess.run(
    ["stat", "-f", "-c", "%T", paths[1]], capture_output=True, text=True).stdout.strip() + ")",
    "tmpfs copy (/dev/shm)"]
times = {p: [] for p in paths}
for _ in range(rounds):
    for p in paths:
        t0 = time.perf_counter()
        subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
        times[p].append(time.perf_counter() - t0)
ref = statistics.median(times[paths[1]])
print("| read | min | median | source median / this median |")
print("|---|---|---|---|")
for name, p in zip(names, paths):
    med = statistics.median(times[p])
    print(f"| {name} | {min(times[p]):.4f} s | {med:.4f} s | **{ref / med:.2f}** |")
PYEOF
if command -v strace >/dev/null; then
  daemon=$(ps -eo pid=,args= | awk -v m="$mnt" 'index($0, m) && /volume mount/ {print $1; exit}')
  if [ -n "$daemon" ]; then
    strace -q -c -f -p "$daemon" -o "$work/strace.txt" 2>/dev/null & tracer=$!
    sleep 1
    cat "$mnt/model.safetensors" > /dev/null
    sleep 1
    kill -INT "$tracer"; wait "$tracer" || true
    echo
    echo "Syscalls of the mount's daemon during one re-read (each FUSE request is one read and one writev):"
    echo
    echo '```'
    grep -E "^ *[0-9].* (read|writev)$" "$work/strace.txt" || echo "(none)"
    echo '```'
  fi
fi
