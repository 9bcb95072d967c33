#!/usr/bin/env bash
# A corrupted chunk in the store is reported as corruption naming the chunk and the file, and is
# never served: not by cat, pull or the mount; verify lists it.
source "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/src"
head -c 3000000 /dev/urandom > "$WORK/src/weights.bin"
printf 'fine\n' > "$WORK/src/ok.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:test/corrupt)

# Find the chunk holding byte 1,000,000 of weights.bin by reading the version's chunk list.
chunk=$(python3 - "$BDN_HOME/store/chunks" "$WORK/src/weights.bin" <<'PY'
import os, sys, subprocess
root, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
# A chunk file whose bytes occur in weights.bin at an offset covering 1,000,000.
for d in os.listdir(root):
    for name in os.listdir(os.path.join(root, d)):
        blob = open(os.path.join(root, d, name), 'rb').read()
        if len(blob) < 1000 or blob[:4] in (b'BDNM', b'BDNI'):
            continue
        off = data.find(blob[:4096])
        if off != -1 and off <= 1_000_000 < off + len(blob):
            print(name); sys.exit(0)
sys.exit(1)
PY
)
file="$BDN_HOME/store/chunks/${chunk:0:2}/$chunk"
printf '\x00\x01' | dd of="$file" bs=1 seek=100 conv=notrunc status=none

err=$("$BDN" volume cat "$ref/weights.bin" 2>&1 >/dev/null) && fail "cat served a corrupt chunk"
assert_contains "$err" "bdn: error: file \"weights.bin\": chunk b3:$chunk: digest mismatch"
assert_eq "fine" "$("$BDN" volume cat "$ref/ok.txt")" "other file still readable"

out=$("$BDN" volume verify "$ref" --json) && fail "verify passed with a corrupt chunk"
assert_eq false "$(json_field ok <<<"$out")" "verify ok"
assert_contains "$(json_field problems <<<"$out")" "\"chunk\": \"b3:$chunk\""
assert_contains "$(json_field problems <<<"$out")" "\"path\": \"weights.bin\""

[ -f "$BDN_HOME/store/corrupt/$chunk" ] || fail "the corrupt copy was not moved aside"
err=$("$BDN" volume pull "$ref" "$WORK/out" 2>&1 >/dev/null) && fail "pull wrote a corrupt file"
assert_contains "$err" "chunk b3:$chunk: not in store"
[ ! -e "$WORK/out/weights.bin" ] || fail "a corrupt file was materialized"

mount_volume "$ref" "$WORK/mnt"
dd if="$WORK/mnt/weights.bin" of=/dev/null bs=1M 2>"$WORK/dd.err" && fail "mount served a corrupt chunk"
assert_contains "$(cat "$WORK/dd.err")" "Input/output error"
cmp <(head -c 500000 "$WORK/src/weights.bin") <(head -c 500000 "$WORK/mnt/weights.bin") || fail "bytes before the corrupt chunk"
assert_eq "fine" "$(cat "$WORK/mnt/ok.txt")" "other file through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "pushing the data again repairs the store"
out=$("$BDN" volume push "$WORK/src" bdn:test/corrupt --json)
assert_eq 1 "$(json_field chunks_uploaded <<<"$out")" "chunks re-stored"
"$BDN" volume verify "$ref" >/dev/null || fail "verify after repair"
cmp "$WORK/src/weights.bin" <("$BDN" volume cat "$ref/weights.bin") || fail "bytes after repair"
echo "PASS"
