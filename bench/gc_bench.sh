#!/usr/bin/env bash
# Garbage collection benchmark (issue 11): 10 versions of the checkpoint series
# (bench/gen_checkpoints.py: ckpt-0, -1, -2 of seeds 1 to 4, the first 10) pushed into an embedded
# store, 5 of them deleted with no retention, then `bdn gc --grace 0s --max-repack-fraction F`:
# GC time, GC peak memory (max RSS), bytes reclaimed, against the exact garbage size: the store's
# record bytes less those of a fresh store holding only the 5 versions kept (pushed there on their
# own, so the figure does not come from the GC being measured).
# Usage: bench/gc_bench.sh [WORKDIR]   BDN_BENCH_SIZE_MIB (default 1024) sizes each checkpoint,
# GC_FRACTION (default 0.5) is --max-repack-fraction. Prints a markdown report to stdout.
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-gc-bench}
size=${BDN_BENCH_SIZE_MIB:-1024}
fraction=${GC_FRACTION:-0.5}
trap release_workdir EXIT
claim_workdir "$work"
export BDN_RETENTION=0s

# record_bytes HOME: bytes of every blob record (64-byte header + stored bytes) in HOME's packs.
record_bytes() {
  python3 "$repo/tests/integration/packs.py" list "$1/store" | awk '{s += 64 + $4} END {print s + 0}'
}
pack_bytes() { find "$1/store/packs" -name '*.pack' -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

trees=()
for seed in 1 2 3 4; do
  python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen-$seed" --seed "$seed" --size-mib "$size" >/dev/null
  for c in 0 1 2; do trees+=("$work/gen-$seed/ckpt-$c"); done
done
trees=("${trees[@]:0:10}")

export BDN_HOME="$work/home"
digests=()
for i in "${!trees[@]}"; do
  digests+=("$("$bdn" volume push "${trees[$i]}" bdn:bench/ckpt --json | json digest)")
done
kept=()
for i in "${!digests[@]}"; do
  if [ $((i % 2)) -eq 0 ]; then
    "$bdn" volume rm --yes "bdn:bench/ckpt@${digests[$i]}" >/dev/null
  else
    kept+=("${trees[$i]}")
  fi
done
before_records=$(record_bytes "$BDN_HOME"); before_packs=$(pack_bytes "$BDN_HOME")

# The exact garbage: what a store of the kept versions alone does not hold.
BDN_HOME="$work/fresh" bash -c 'for t in "$@"; do "'"$bdn"'" volume push "$t" bdn:bench/ckpt >/dev/null; done' _ "${kept[@]}"
needed_records=$(record_bytes "$work/fresh")
garbage=$((before_records - needed_records))

sync
result=$(python3 - "$bdn" "$fraction" <<'PY'
import json, resource, subprocess, sys, time
t0 = time.monotonic()
out = subprocess.run([sys.argv[1], "--json", "gc", "--grace", "0s", "--max-repack-fraction", sys.argv[2]],
                     check=True, capture_output=True, text=True).stdout
secs = time.monotonic() - t0
r = json.loads(out)
r["wall_s"] = secs
r["max_rss_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps(r))
PY
)
after_records=$(record_bytes "$BDN_HOME"); after_packs=$(pack_bytes "$BDN_HOME")
for i in "${!digests[@]}"; do
  [ $((i % 2)) -eq 1 ] || continue
  "$bdn" volume verify "bdn:bench/ckpt@${digests[$i]}" >/dev/null || { echo "kept version $i does not verify" >&2; exit 1; }
done

r() { json "$1" <<<"$result"; }
echo "## GC: 10 checkpoint versions, 5 deleted ($size MiB each, --max-repack-fraction $fraction)"
echo
echo "| measure | value |"
echo "|---|---|"
echo "| GC wall time | $(python3 -c "print(f'{$(r wall_s):.2f} s')") |"
echo "| GC peak memory (max RSS) | $(( $(r max_rss_kib) / 1024 )) MiB |"
echo "| packs before / deleted / repacked | $(r packs) / $(r packs_deleted) / $(r packs_repacked) |"
echo "| pack bytes before -> after | $before_packs -> $after_packs |"
echo "| bytes reclaimed (gc) | $(r bytes_reclaimed) |"
echo "| record bytes before -> after | $before_records -> $after_records |"
echo "| exact garbage (records not needed by the kept versions) | $garbage |"
echo "| garbage left after gc (record bytes after - needed) | $((after_records - needed_records)) |"
echo "| reclaimed / exact garbage | $(python3 -c "print(f'{($before_records - $after_records) / max($garbage, 1):.3f}')") |"
