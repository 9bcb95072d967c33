#!/usr/bin/env bash
# Embedded-store benchmark (issue 2): push throughput vs b3sum and casync, dedup of a checkpoint
# series vs the tensor-level ideal and casync, mount time, and reads through the mount vs cat.
# Usage: bench/run_embedded.sh [WORKDIR]   (~6 GiB of free disk; "cold" drops the page cache with
# drop_caches as root, else evicts the files involved with posix_fadvise(DONTNEED))
# Prints a markdown report to stdout. The bdn binary is build/apps/bdn/bdn (scripts/build.sh).
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench}
export BDN_HOME="$work/home"
mnt="$work/mnt"
trap '"$bdn" volume umount "$mnt" >/dev/null 2>&1 || true; release_workdir' EXIT
claim_workdir "$work"
mkdir -p "$mnt"

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
# drop PATH...: the page cache dropped (all of it as root, else the pages of the files under PATHs).
drop() {
  sync
  if ! { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
    python3 "$repo/bench/evict.py" "$@"
  fi
}
warm() { cat "$@" > /dev/null; }
mib_s() { python3 -c "print(f'{$1 / $2 / 1048576:.0f}')"; }
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" >/dev/null
c0="$work/gen/ckpt-0/model.safetensors"; size=$(stat -c %s "$c0")
ideal1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ideal_new_bytes_ckpt1"])' "$work/gen/manifest.json")
ins2=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["inserted_tensor_bytes"])' "$work/gen/manifest.json")

echo "## Embedded store benchmark"
echo
echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/ {print $2}') GiB RAM, kernel $(uname -r), $(df -h "$work" | awk 'NR==2 {print $1}') disk"
echo "- input: bench/gen_checkpoints.py seed 42: ckpt-0 $size bytes, 200 tensors"
echo

# --- push vs b3sum vs casync (input warm) ---
warm "$c0"; warm "$c0"
t0=$(now); b3sum "$c0" >/dev/null; t1=$(now); b3=$(secs $t0 $t1)
t0=$(now); b3sum --num-threads 1 "$c0" >/dev/null; t1=$(now); b3one=$(secs $t0 $t1)
t0=$(now); out0=$("$bdn" volume push "$work/gen/ckpt-0" bdn:bench/ckpt --json); t1=$(now); push=$(secs $t0 $t1)
mkdir -p "$work/casync"
t0=$(now); casync make --store="$work/casync/store" "$work/casync/c0.caibx" "$c0" >/dev/null 2>&1; t1=$(now); cas=$(secs $t0 $t1)
cas0=$(du -sb "$work/casync/store" | cut -f1)
echo "### Push of ckpt-0 (input warm in page cache)"
echo
echo "| tool | seconds | MiB/s | ratio vs b3sum (default threads) |"
echo "|---|---|---|---|"
echo "| b3sum (default threads) | $b3 | $(mib_s $size $b3) | 1.00 |"
echo "| b3sum --num-threads 1 | $b3one | $(mib_s $size $b3one) | $(ratio $b3 $b3one) |"
echo "| bdn volume push (into a fresh store, durable) | $push | $(mib_s $size $push) | **$(ratio $b3 $push)** (target ≥ 0.25) |"
echo "| casync make (fresh store) | $cas | $(mib_s $size $cas) | $(ratio $b3 $cas) |"
echo

# --- dedup of the series ---
out1=$("$bdn" volume push "$work/gen/ckpt-1" bdn:bench/ckpt --json)
out2=$("$bdn" volume push "$work/gen/ckpt-2" bdn:bench/ckpt --json)
new1=$(json bytes_uploaded <<<"$out1"); new2=$(json bytes_uploaded <<<"$out2")
casync make --store="$work/casync/store" "$work/casync/c1.caibx" "$work/gen/ckpt-1/model.safetensors" >/dev/null 2>&1
cas1=$(du -sb "$work/casync/store" | cut -f1)
casync make --store="$work/casync/store" "$work/casync/c2.caibx" "$work/gen/ckpt-2/model.safetensors" >/dev/null 2>&1
cas2=$(du -sb "$work/casync/store" | cut -f1)
echo "### Bytes newly stored by each push"
echo
echo "| push | bdn bytes stored | tensor-level ideal | bdn / ideal | casync store growth (compressed) |"
echo "|---|---|---|---|---|"
echo "| ckpt-0 | $(json bytes_uploaded <<<"$out0") | $size | $(ratio $(json bytes_uploaded <<<"$out0") $size) | $cas0 |"
echo "| ckpt-1 (10% of tensors changed) | $new1 | $ideal1 | **$(ratio $new1 $ideal1)** (target ≤ 1.02) | $((cas1 - cas0)) |"
echo "| ckpt-2 (4,099-byte tensor inserted, odd shift) | $new2 | $ins2 inserted | **$((new2 - ins2)) bytes beyond the insert** (target ≤ 300 KB) | $((cas2 - cas1)) |"
echo
stats=$("$bdn" store stats --json)
files=$(find "$BDN_HOME/store" -type f | wc -l)
stored_gib=$(du -sb "$BDN_HOME/store" | awk '{print $1 / 2^30}')
echo "Store after the three pushes: $files files for $(printf '%.2f' "$stored_gib") GiB = **$(python3 -c "print(f'{$files / $stored_gib:.1f}')") files per GiB** (target ≤ 64); zstd: $(json zstd_blobs <<<"$stats") of $(json blobs <<<"$stats") blobs, raw $(json raw_bytes <<<"$stats") → stored $(json stored_bytes <<<"$stats") bytes ($(python3 -c "r=$(json raw_bytes <<<"$stats"); s=$(json stored_bytes <<<"$stats"); print(f'{(r - s) / r * 100:.2f}')") % saved)."
echo

# --- mount and reads ---
ref0=$(json version_ref <<<"$out0")
t0=$(now); "$bdn" volume mount "$ref0" "$mnt" >/dev/null; t1=$(now); mount_s=$(secs $t0 $t1)
f="$mnt/model.safetensors"
drop "$c0" "$BDN_HOME/store"; t0=$(now); cat "$c0" >/dev/null; t1=$(now); cold_cat=$(secs $t0 $t1)
drop "$c0" "$BDN_HOME/store"; t0=$(now); cat "$f" >/dev/null; t1=$(now); cold_mnt=$(secs $t0 $t1)
"$bdn" volume umount "$mnt" >/dev/null
# 4 KiB random reads, page cache dropped: the source file, then a fresh mount.
drop "$c0" "$BDN_HOME/store"; rnd_src=$(python3 "$repo/bench/random_reads.py" "$c0")
"$bdn" volume mount "$ref0" "$mnt" >/dev/null
drop "$c0" "$BDN_HOME/store"; rnd_mnt=$(python3 "$repo/bench/random_reads.py" "$f")
"$bdn" volume umount "$mnt" >/dev/null
# Store warm: read every pack once so the store is in the page cache, then a fresh mount.
find "$BDN_HOME/store/packs" -type f -print0 | xargs -0 cat > /dev/null
warm "$c0"; t0=$(now); cat "$c0" >/dev/null; t1=$(now); warm_cat=$(secs $t0 $t1)
"$bdn" volume mount "$ref0" "$mnt" >/dev/null
t0=$(now); cat "$f" >/dev/null; t1=$(now); first_mnt=$(secs $t0 $t1)
t0=$(now); cat "$f" >/dev/null; t1=$(now); rere_mnt=$(secs $t0 $t1)
"$bdn" volume umount "$mnt" >/dev/null
echo "### Mount and reads of the 1 GiB file"
echo
echo "| measurement | bdn | reference | ratio (reference time / bdn time) | target |"
echo "|---|---|---|---|---|"
echo "| mount ready (command returns) | ${mount_s} s | — | — | < 1 s |"
echo "| cold sequential read (page cache dropped) | ${cold_mnt} s ($(mib_s $size $cold_mnt) MiB/s) | cold cat ${cold_cat} s ($(mib_s $size $cold_cat) MiB/s) | **$(ratio $cold_cat $cold_mnt)** | ≥ 0.7 |"
echo "| 4 KiB random reads, page cache dropped (IOPS, 1 thread) | $rnd_mnt | source file $rnd_src | **$(ratio $rnd_mnt $rnd_src)** (bdn / reference IOPS) | ≥ 0.3 |"
echo "| first read, fresh mount, store chunks in page cache | ${first_mnt} s ($(mib_s $size $first_mnt) MiB/s) | warm cat ${warm_cat} s ($(mib_s $size $warm_cat) MiB/s) | **$(ratio $warm_cat $first_mnt)** | ≥ 0.4 |"
echo "| warm re-read through the mount | ${rere_mnt} s ($(mib_s $size $rere_mnt) MiB/s) | warm cat ${warm_cat} s | **$(ratio $warm_cat $rere_mnt)** | ≥ 0.9 |"
