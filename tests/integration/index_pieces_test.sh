#!/usr/bin/env bash
# A large file's chunk index in pieces (docs/format.md, "Chunk index object", version 2), through
# the real binary: a second implementation (chunk_index.py) finds the index is exactly what the
# document says a writer makes; the same tree gives the same digest with 1, 2 or 7 threads and
# through bdn serve; a 4,099-byte insertion stores the manifest, the new version-2 object and only
# the pieces that changed; pull, cat, verify, diff and a mount read both versions byte for byte;
# gc (repacking everything) keeps the pieces the remaining version needs; fsck names a damaged
# piece; and a large file indexed by one version-1 object (as written before pieces) still reads.
source "$(dirname "$0")/lib.sh"
needs_fuse
: "${BDN_CRAFT:?BDN_CRAFT must point at the bdn_craft test tool}"
PACKS="python3 $(dirname "$0")/packs.py"
INDEX="python3 $(dirname "$0")/chunk_index.py"

# 100 MiB of random bytes: ~1,450 chunks of 64 KiB on average, so more than the 1,024 a
# version-1 index holds.
mkdir -p "$WORK/one" "$WORK/two"
random_file "$WORK/one/big.bin" 104857600 11
echo "config" > "$WORK/one/config.json"
python3 - "$WORK/one/big.bin" "$WORK/two/big.bin" <<'EOF'
import random, sys
data = open(sys.argv[1], "rb").read()
at = 1_000_003  # an odd offset, as ckpt-2 of bench/gen_checkpoints.py
open(sys.argv[2], "wb").write(data[:at] + random.Random(12).randbytes(4099) + data[at:])
EOF
cp "$WORK/one/config.json" "$WORK/two/config.json"

# index_of REF PATH: the chunk index digest (b3:…) of a file.
index_of() { "$BDN" volume stat "$1/$2" --json | json_field chunk_index; }
# check_index STORE ROOT SIZE: fetches the index ROOT and its pieces out of STORE's packs and has
# chunk_index.py check them; prints its JSON summary.
check_index() {
  local dir="$WORK/blobs"
  $PACKS blobs "$1" "$dir" "${2#b3:}" || fail "chunk index $2 is in no pack"
  # shellcheck disable=SC2046
  $PACKS blobs "$1" "$dir" $($INDEX pieces "$dir" "${2#b3:}") || fail "a piece of $2 is in no pack"
  $INDEX check "$dir" "${2#b3:}" "$3" || fail "chunk index $2 breaks docs/format.md"
}

step "push: the same digest with 1, 2 and 7 threads; the index is what docs/format.md says"
out1=$("$BDN" volume push "$WORK/one" bdn:ip/big --jobs 1 --json)
d1=$(json_field digest <<<"$out1")
assert_eq "$d1" "$("$BDN" volume push "$WORK/one" bdn:ip/big2 --jobs 2 --json | json_field digest)" "digest with 2 threads"
assert_eq "$d1" "$("$BDN" volume push "$WORK/one" bdn:ip/big7 --jobs 7 --json | json_field digest)" "digest with 7 threads"
root1=$(index_of "bdn:ip/big@$d1" big.bin)
summary1=$(check_index "$BDN_HOME/store" "$root1" 104857600)
read -r version1 chunks1 pieces1 <<<"$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(s["version"], s["chunks"], len(s["pieces"]))' "$summary1")"
assert_eq 2 "$version1" "chunk index version of a 100 MiB file"
[ "$chunks1" -gt 1024 ] || fail "only $chunks1 chunks"
[ "$pieces1" -ge 5 ] || fail "only $pieces1 pieces for $chunks1 chunks"
assert_eq "$chunks1" "$("$BDN" volume stat "bdn:ip/big@$d1/big.bin" --json | json_field chunks)" "chunks of big.bin (volume stat)"
# The first and last chunks are the file's bytes (the other chunks: verify, below).
read -r first_id first_len last_id last_len <<<"$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(*s["first"], *s["last"])' "$summary1")"
assert_eq "$first_id" "$(head -c "$first_len" "$WORK/one/big.bin" | b3sum --no-names)" "first chunk"
assert_eq "$last_id" "$(tail -c "$last_len" "$WORK/one/big.bin" | b3sum --no-names)" "last chunk"

step "a 4,099-byte insertion stores the manifest, the version-2 object and the changed pieces only"
out2=$("$BDN" volume push "$WORK/two" bdn:ip/big --json)
d2=$(json_field digest <<<"$out2")
root2=$(index_of "bdn:ip/big@$d2" big.bin)
summary2=$(check_index "$BDN_HOME/store" "$root2" 104861699)
$PACKS blobs "$BDN_HOME/store" "$WORK/blobs" "${d2#b3:}"
expected=$(python3 -c '
import json, os, sys
one, two = json.loads(sys.argv[1]), json.loads(sys.argv[2])
old = {p["id"] for p in one["pieces"]}
fresh = {p["id"]: 16 + 36 * p["chunks"] for p in two["pieces"] if p["id"] not in old}
print(os.path.getsize(sys.argv[3]) + two["root_bytes"] + sum(fresh.values()), len(fresh))' \
  "$summary1" "$summary2" "$WORK/blobs/${d2#b3:}")
read -r metadata fresh <<<"$expected"
assert_eq "$metadata" "$(json_field metadata_bytes_uploaded <<<"$out2")" "metadata bytes stored (manifest + index + new pieces)"
[ "$fresh" -ge 1 ] && [ "$fresh" -le 3 ] || fail "$fresh new pieces for one insertion"
[ "$metadata" -lt 20000 ] || fail "$metadata bytes of metadata for one insertion (a version-1 index is $((16 + 36 * chunks1)))"
new=$(json_field bytes_uploaded <<<"$out2")
echo "insertion: $new bytes stored, $metadata of them metadata ($fresh new pieces of $(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["pieces"]))' "$summary2"))"

step "pull, cat, verify, diff and a mount read both versions"
for v in one two; do
  d=$([ $v = one ] && echo "$d1" || echo "$d2")
  "$BDN" volume pull "bdn:ip/big@$d" "$WORK/pulled-$v" >/dev/null
  cmp "$WORK/$v/big.bin" "$WORK/pulled-$v/big.bin" || fail "pull of $v differs"
  "$BDN" volume cat "bdn:ip/big@$d/big.bin" > "$WORK/cat-$v"
  cmp "$WORK/$v/big.bin" "$WORK/cat-$v" || fail "cat of $v differs"
  "$BDN" volume verify "bdn:ip/big@$d" >/dev/null || fail "verify of $v"
done
diff_out=$("$BDN" volume diff "bdn:ip/big@$d1" "bdn:ip/big@$d2")
assert_contains "$diff_out" "big.bin"
mount_volume "bdn:ip/big@$d2" "$WORK/mnt"
cmp "$WORK/two/big.bin" "$WORK/mnt/big.bin" || fail "read through the mount differs"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "bdn serve: the same digests, the commit check on the server, the same bytes stored"
start_origin
r1=$("$BDN" volume push "$WORK/one" bdn:ip/big --json)
assert_eq "$d1" "$(json_field digest <<<"$r1")" "digest pushed to bdn serve"
r2=$("$BDN" volume push "$WORK/two" bdn:ip/big --json)
assert_eq "$d2" "$(json_field digest <<<"$r2")" "digest of the insertion pushed to bdn serve"
assert_eq "$metadata" "$(json_field metadata_bytes_uploaded <<<"$r2")" "metadata bytes sent to bdn serve"
"$BDN" volume pull "bdn:ip/big@$d2" "$WORK/pulled-remote" >/dev/null
cmp "$WORK/two/big.bin" "$WORK/pulled-remote/big.bin" || fail "pull from bdn serve differs"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
unset BDN_REMOTE

step "gc repacking everything keeps the pieces the remaining version needs"
# Past their retention at once, so that nothing but the version with the insertion is kept.
for v in big2 big7; do BDN_RETENTION=0s "$BDN" volume rm --yes --recursive "bdn:ip/$v" >/dev/null; done
BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:ip/big@$d1" >/dev/null
gc=$("$BDN" gc --grace 0s --max-repack-fraction 1 --json)
[ "$(json_field blobs_copied <<<"$gc")" -gt 0 ] || fail "gc repacked nothing: $gc"
"$BDN" volume verify "bdn:ip/big@$d2" >/dev/null || fail "verify after gc"
"$BDN" fsck >/dev/null || fail "fsck after gc"

step "fsck names a damaged piece and the file it belongs to"
piece=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["pieces"][2]["id"])' "$summary2")
row=$($PACKS find "$BDN_HOME/store" "$piece") || fail "piece $piece is in no pack"
read -r pack _ payload _ <<<"$row"
python3 -c 'import sys; f=open(sys.argv[1],"r+b"); o=int(sys.argv[2]); f.seek(o); b=f.read(1); f.seek(o); f.write(bytes([b[0]^0xff]))' "$pack" "$payload"
rc=0; out=$("$BDN" fsck) || rc=$?
assert_eq 5 "$rc" "exit code of fsck"
assert_contains "$out" "blob: blob b3:$piece: digest mismatch"
assert_contains "$out" "  affects bdn:ip/big@$d2 (file \"big.bin\")"
rc=0; err=$("$BDN" volume cat "bdn:ip/big@$d2/big.bin" 2>&1 >/dev/null) || rc=$?
assert_eq 5 "$rc" "exit code of cat with a damaged piece"
assert_contains "$err" "file \"big.bin\": chunk index piece: chunk b3:$piece: digest mismatch"

step "a large file indexed by one version-1 object (written before pieces) still reads"
$INDEX v1-version "$WORK/v1" "$WORK/one/big.bin" old.bin 40000 >/dev/null
ref=$("$BDN_CRAFT" "dir:$WORK/v1" --home "$BDN_HOME" --ref bdn:ip/old)
assert_eq "$(( (104857600 + 39999) / 40000 ))" "$("$BDN" volume stat "$ref/old.bin" --json | json_field chunks)" "chunks of the version-1 file"
"$BDN" volume verify "$ref" >/dev/null || fail "verify of the version-1 file"
"$BDN" volume cat "$ref/old.bin" > "$WORK/cat-old"
cmp "$WORK/one/big.bin" "$WORK/cat-old" || fail "cat of the version-1 file differs"
mount_volume "$ref" "$WORK/mnt-old"
cmp "$WORK/one/big.bin" "$WORK/mnt-old/old.bin" || fail "the version-1 file through the mount differs"
echo PASS
