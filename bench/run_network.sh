#!/usr/bin/env bash
# Delivery-network benchmark (issue 3), one run on one machine over loopback:
#  - push of the 1 GiB checkpoint to a `bdn serve` origin vs the embedded push;
#  - cold sequential read through mount -> node cache -> origin vs curl downloading the same
#    chunks from the origin (POST /v1/chunks/batch, 1024 ids per request), page cache dropped;
#  - HTTP requests the origin answered per GiB read (its /metrics);
#  - a second mount reading the file from the node cache (page cache dropped) vs cold cat.
# Usage: bench/run_network.sh [WORKDIR]   (BDN_BENCH_SIZE_MIB=32 for a quick check that it runs;
# ~5 GiB of free disk; "cold" drops the page cache with
# drop_caches as root, else evicts the files involved with posix_fadvise(DONTNEED))
# Prints a markdown report to stdout. The bdn binary is build/apps/bdn/bdn (scripts/build.sh).
# WORKDIR: missing, empty or one a bench run made (bench/lib.sh claim_workdir), one run at a time;
# deleted at the end unless BDN_BENCH_KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
bdn=${BDN:-$repo/build/apps/bdn/bdn}
work=${1:-/tmp/bdn-bench-net}
mnt="$work/mnt"
server_pid=""
cleanup() {
  "$bdn" volume umount "$mnt" >/dev/null 2>&1 || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  release_workdir
}
trap cleanup EXIT
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
mib_s() { python3 -c "print(f'{$1 / $2 / 1048576:.0f}')"; }
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# Sum of the origin's bdn_http_requests_total over every label set.
requests() {
  curl -s "$url/metrics" | awk '/^bdn_http_requests_total/ {s += $NF} END {printf "%d\n", s}'
}

python3 "$repo/bench/gen_checkpoints.py" --out "$work/gen" --size-mib "${BDN_BENCH_SIZE_MIB:-1024}" >/dev/null
src="$work/gen/ckpt-0"; c0="$src/model.safetensors"; size=$(stat -c %s "$c0")

echo "## Delivery network benchmark"
echo
echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/ {print $2}') GiB RAM, kernel $(uname -r), $(df -h "$work" | awk 'NR==2 {print $1}') disk; origin, client and mount on one machine over loopback"
echo "- input: bench/gen_checkpoints.py seed 42: ckpt-0 $size bytes"
echo

# --- embedded push vs push to the origin (input warm, both durable) ---
cat "$c0" >/dev/null; cat "$c0" >/dev/null
t0=$(now); BDN_HOME="$work/embedded" "$bdn" volume push "$src" bdn:bench/ckpt --json >/dev/null 2>&1
t1=$(now); push_local=$(secs $t0 $t1)
rm -rf "$work/embedded"

BDN_HOME="$work/server-home" "$bdn" serve --listen 127.0.0.1:0 --data "$work/origin" \
  --insecure-no-auth 2>"$work/origin.log" &
server_pid=$!
url=$(wait_listening "$work/origin.log")
export BDN_REMOTE="$url"
export BDN_HOME="$work/client-home"

cat "$c0" >/dev/null
t0=$(now); out=$("$bdn" volume push "$src" bdn:bench/ckpt --json 2>/dev/null); t1=$(now)
push_remote=$(secs $t0 $t1)
ref=$(json version_ref <<<"$out")
echo "### Push of ckpt-0 (input warm in page cache; both stores durable)"
echo
echo "| push | seconds | MiB/s | ratio (embedded time / this time) | target |"
echo "|---|---|---|---|---|"
echo "| \`bdn volume push\`, embedded store | $push_local | $(mib_s $size $push_local) | 1.00 | |"
echo "| \`bdn volume push\` to \`bdn serve\` over loopback | $push_remote | $(mib_s $size $push_remote) | **$(ratio $push_local $push_remote)** | ≥ 0.7 |"
echo

# --- the reference: curl downloading the file's chunks from the origin ---
index=$("$bdn" volume stat "$ref/model.safetensors" --json | json chunk_index)
curl -sf "$url/v1/chunks/${index#b3:}" -o "$work/index.bdni"
python3 - "$work/index.bdni" "$work/bodies" "$url" <<'EOF'
# docs/format.md "Chunk index object": version 1 lists the chunks (id, length); version 2 lists
# pieces (id, chunk count, bytes), each a version-1 object listing its chunks.
import json, os, struct, sys, urllib.request
def decode(data):
    assert data[:4] == b"BDNI", "not a chunk index"
    version, count = struct.unpack_from("<IQ", data, 4)
    width = {1: 36, 2: 48}[version]
    return version, [data[16 + k * width:16 + k * width + 32].hex() for k in range(count)]
version, listed = decode(open(sys.argv[1], "rb").read())
ids = listed
if version == 2:
    ids = []
    for piece in listed:
        with urllib.request.urlopen(f"{sys.argv[3]}/v1/chunks/{piece}") as r:
            ids += decode(r.read())[1]
os.makedirs(sys.argv[2])
for n, start in enumerate(range(0, len(ids), 1024)):
    with open(os.path.join(sys.argv[2], f"{n:04d}.json"), "w") as f:
        json.dump({"ids": ids[start:start + 1024]}, f)
EOF
drop "$work/origin" "$c0"
t0=$(now)
for body in "$work"/bodies/*.json; do
  curl -sf -X POST -H 'Content-Type: application/json' --data-binary @"$body" \
    "$url/v1/chunks/batch" -o /dev/null
done
t1=$(now); curl_s=$(secs $t0 $t1)
curl_requests=$(ls "$work/bodies" | wc -l)

# --- cold read through mount -> node cache -> origin ---
cache="$work/node-cache"
"$bdn" volume mount "$ref" "$mnt" --cache-dir "$cache" --cache-size 4G >/dev/null
sleep 1  # the mount loads every chunk index in the background; not part of the read
drop "$work/origin" "$c0" "$cache"
r0=$(requests)
t0=$(now); cat "$mnt/model.safetensors" >/dev/null; t1=$(now); cold_mnt=$(secs $t0 $t1)
r1=$(requests)
read_requests=$((r1 - r0 - 1))  # minus the /metrics scrape of r1 itself
per_gib=$(python3 -c "print(f'{$read_requests / ($size / 2**30):.1f}')")
want=$(b3sum --no-names "$c0")
got=$(b3sum --no-names "$mnt/model.safetensors")
[ "$want" = "$got" ] || { echo "mount served wrong bytes: $got, want $want" >&2; exit 1; }
"$bdn" volume umount "$mnt" >/dev/null

# --- a second mount: the file from the node cache, page cache dropped ---
"$bdn" volume mount "$ref" "$mnt" --cache-dir "$cache" --cache-size 4G >/dev/null
sleep 1
drop "$work/origin" "$c0" "$cache"; t0=$(now); cat "$c0" >/dev/null; t1=$(now); cold_cat=$(secs $t0 $t1)
drop "$work/origin" "$c0" "$cache"
r0=$(requests)
t0=$(now); cat "$mnt/model.safetensors" >/dev/null; t1=$(now); cache_mnt=$(secs $t0 $t1)
r1=$(requests)
cache_requests=$((r1 - r0 - 1))
"$bdn" volume umount "$mnt" >/dev/null
cache_files=$(find "$cache" -type f | wc -l)
cache_gib=$(du -sb "$cache" | awk '{print $1 / 2^30}')

echo "### Reads of the 1 GiB file through the mount"
echo
echo "| measurement | bdn | reference | ratio (reference time / bdn time) | target |"
echo "|---|---|---|---|---|"
echo "| cold sequential read, mount → node cache → origin (page cache dropped) | ${cold_mnt} s ($(mib_s $size $cold_mnt) MiB/s) | curl, $curl_requests batch requests: ${curl_s} s ($(mib_s $size $curl_s) MiB/s) | **$(ratio $curl_s $cold_mnt)** | ≥ 0.8 |"
echo "| HTTP requests the origin answered for that read | $read_requests ($per_gib per GiB) | curl: $curl_requests | — | ≤ 64 per GiB |"
echo "| second mount, read from the node cache (page cache dropped; $cache_requests origin requests) | ${cache_mnt} s ($(mib_s $size $cache_mnt) MiB/s) | cold cat ${cold_cat} s ($(mib_s $size $cold_cat) MiB/s) | **$(ratio $cold_cat $cache_mnt)** | ≥ 0.9 |"
echo "| node cache files per GiB | $cache_files files for $(printf '%.2f' "$cache_gib") GiB: **$(python3 -c "print(f'{$cache_files / $cache_gib:.1f}')")** | — | — | ≤ 64 |"
echo
echo "b3sum of the file read through the mount matched the source ($want)."
