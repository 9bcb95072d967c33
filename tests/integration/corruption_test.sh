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
step "a version whose manifest is corrupt: verify and stat exit 5, also once the bad copy is moved aside"
mkdir -p "$WORK/m"; printf 'manifest\n' > "$WORK/m/f"
mref=$("$BDN" volume push "$WORK/m" bdn:test/manifest 2>/dev/null)
mhex=${mref#*@b3:}
printf 'garbage' > "$BDN_HOME/store/chunks/${mhex:0:2}/$mhex"
run_fails 5 "bdn: error: manifest b3:$mhex: chunk b3:$mhex: digest mismatch (stored bytes hash to b3:$(printf garbage | b3sum --no-names)); moved to $BDN_HOME/store/corrupt/$mhex, push the data again to repair" \
  "$BDN" volume verify "$mref"
for cmd in verify stat; do
  run_fails 5 "bdn: error: manifest b3:$mhex: not in the store (the version's data is lost; push it again to repair)" \
    "$BDN" volume "$cmd" "$mref"
  out=$("$BDN" --json volume "$cmd" "$mref" 2>/dev/null) && fail "$cmd --json passed with a lost manifest"
  assert_eq corruption "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "$cmd --json error code"
done
run_fails 5 "bdn: error: manifest b3:$mhex: not in the store (the version's data is lost; push it again to repair)" \
  "$BDN" volume stat "$mref/f"

step "a manifest blob that is intact but does not decode: exit 5"
printf 'not a manifest' > "$WORK/bad-manifest"
bhex=$(b3sum --no-names "$WORK/bad-manifest")
mkdir -p "$BDN_HOME/store/chunks/${bhex:0:2}"
cp "$WORK/bad-manifest" "$BDN_HOME/store/chunks/${bhex:0:2}/$bhex"
python3 - "$BDN_HOME/registry.db" "$mhex" "$bhex" <<'PY'
import sqlite3, sys
db, old, new = sys.argv[1:]
c = sqlite3.connect(db)
c.execute("UPDATE versions SET digest=? WHERE digest=?", (new, old))
c.execute("UPDATE volumes SET head=? WHERE head=?", (new, old))
c.commit()
PY
for cmd in verify stat; do
  err=$("$BDN" volume "$cmd" "bdn:test/manifest@b3:$bhex" 2>&1 >/dev/null) && fail "$cmd of an undecodable manifest passed"
  rc=0; "$BDN" volume "$cmd" "bdn:test/manifest@b3:$bhex" >/dev/null 2>&1 || rc=$?
  assert_eq 5 "$rc" "exit code of $cmd with an undecodable manifest"
  assert_contains "$err" "bdn: error: version b3:$bhex: manifest: "
done
echo "PASS"
