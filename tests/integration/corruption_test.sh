#!/usr/bin/env bash
# A corrupted chunk in the store's packs is reported as corruption naming the chunk, the file and
# the pack, and is never served: not by cat, pull or the mount; verify lists it; it is set aside
# and a push of the same data repairs it.
source "$(dirname "$0")/lib.sh"
PACKS="$(dirname "$0")/packs.py"
mkdir -p "$WORK/src"
head -c 3000000 /dev/urandom > "$WORK/src/weights.bin"
printf 'fine\n' > "$WORK/src/ok.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:test/corrupt)

# Find the chunk holding byte 1,000,000 of weights.bin by reading the store's pack footers (with
# packs.py, an independent reader of the pack format) and damage two bytes of it in its pack.
read -r pack payload chunk < <(python3 - "$PACKS" "$BDN_HOME/store" "$WORK/src/weights.bin" <<'PY'
import subprocess, sys
packs, store, path = sys.argv[1:]
data = open(path, 'rb').read()
rows = subprocess.run([sys.executable, packs, 'list', store], capture_output=True, text=True, check=True).stdout
for row in rows.splitlines():
    pack, _, payload, stored, raw, codec, hexid = row.split()
    if codec != 'none' or int(raw) < 4096:
        continue
    with open(pack, 'rb') as f:
        f.seek(int(payload)); blob = f.read(int(stored))
    off = data.find(blob[:4096])
    if off != -1 and off <= 1_000_000 < off + len(blob):
        print(pack, payload, hexid); sys.exit(0)
sys.exit(1)
PY
)
printf '\x00\x01' | dd of="$pack" bs=1 seek=$((payload + 100)) conv=notrunc status=none

err=$("$BDN" volume cat "$ref/weights.bin" 2>&1 >/dev/null) && fail "cat served a corrupt chunk"
assert_contains "$err" "bdn: error: file \"weights.bin\": chunk b3:$chunk: digest mismatch"
assert_eq "fine" "$("$BDN" volume cat "$ref/ok.txt")" "other file still readable"

out=$("$BDN" volume verify "$ref" --json) && fail "verify passed with a corrupt chunk"
assert_eq false "$(json_field ok <<<"$out")" "verify ok"
assert_contains "$(json_field problems <<<"$out")" "\"chunk\": \"b3:$chunk\""
assert_contains "$(json_field problems <<<"$out")" "\"path\": \"weights.bin\""

assert_contains "$(cat "$BDN_HOME/store/quarantine")" " $chunk" "the corrupt copy is set aside"
rc=0; "$BDN" volume pull "$ref" "$WORK/out" >/dev/null 2>"$WORK/err" || rc=$?
assert_contains "$(cat "$WORK/err")" "chunk b3:$chunk: not in store (a copy found corrupt was set aside; push the data again to repair)"
# The store lost the chunk to corruption: exit 5, as the read that found it (was 3, "not found").
assert_eq 5 "$rc" "exit code of a pull after the corrupt copy was set aside"
rc=0; "$BDN" volume cat "$ref/weights.bin" >/dev/null 2>"$WORK/err" || rc=$?
assert_eq 5 "$rc" "exit code of a cat after the corrupt copy was set aside ($(cat "$WORK/err"))"
# With --json the error's JSON goes to stderr: stdout is the file's bytes, the error never after
# them (from a user: a script saved the file with the JSON appended).
rc=0; "$BDN" --json volume cat "$ref/weights.bin" >"$WORK/cat.out" 2>"$WORK/cat.err" || rc=$?
assert_eq 5 "$rc" "exit code of a --json cat after the corrupt copy was set aside"
assert_eq 5 "$(grep -ao '"exit_code": *[0-9]*' "$WORK/cat.err" | grep -o '[0-9]*$')" \
  "exit_code in the JSON error (stderr) of a cat after the corrupt copy was set aside"
assert_absent '"exit_code"' "the JSON error after the bytes on stdout" "$WORK/cat.out"
cmp -n "$(stat -c %s "$WORK/cat.out")" "$WORK/cat.out" "$WORK/src/weights.bin" \
  || fail "what cat wrote before the lost chunk is not the file's start"
[ ! -e "$WORK/out/weights.bin" ] || fail "a corrupt file was materialized"
# So does every other error of cat's (from a new user: a mistyped tag or volume, or a syntax
# error, put the JSON error on stdout, where a script wrote the file).
for args in "${ref%@*}:no-such-tag/weights.bin 3" "bdn:c/no-such-volume/weights.bin 3" \
            "$ref/weights.bin/ 2" "--no-such-flag $ref/weights.bin 2"; do
  rc=0; read -r -a words <<<"${args% *}"
  "$BDN" --json volume cat "${words[@]}" >"$WORK/cat.out" 2>"$WORK/cat.err" || rc=$?
  assert_eq "${args##* }" "$rc" "exit code of a --json cat ${args% *}"
  assert_eq 0 "$(stat -c %s "$WORK/cat.out")" "bytes on stdout of a --json cat ${args% *}"
  assert_eq "${args##* }" "$(grep -ao '"exit_code": *[0-9]*' "$WORK/cat.err" | grep -o '[0-9]*$')" \
    "exit_code in the JSON error (stderr) of a --json cat ${args% *}"
done

# Through an origin serving a copy of this store: the same exit 5 and message (its batch answer
# said only "missing", and the client said "not in store", exit 3).
cp -a "$BDN_HOME" "$WORK/srv-copy"
start_bdn origin-copy serve --listen 127.0.0.1:0 --data "$WORK/srv-copy" --insecure-no-auth
rc=0; BDN_REMOTE=$STARTED_URL "$BDN" volume cat "$ref/weights.bin" >/dev/null 2>"$WORK/err" || rc=$?
assert_eq 5 "$rc" "exit code of a cat through an origin after the corrupt copy was set aside"
assert_contains "$(cat "$WORK/err")" "chunk b3:$chunk: not in store (a copy found corrupt was set aside; push the data again to repair)"
kill "$STARTED_PID"; wait "$STARTED_PID" || true; untrack "$STARTED_PID"

mount_volume "$ref" "$WORK/mnt"
dd if="$WORK/mnt/weights.bin" of=/dev/null bs=1M 2>"$WORK/dd.err" && fail "mount served a corrupt chunk"
assert_contains "$(cat "$WORK/dd.err")" "Input/output error"
cmp <(head -c 500000 "$WORK/src/weights.bin") <(head -c 500000 "$WORK/mnt/weights.bin") || fail "bytes before the corrupt chunk"
assert_eq "fine" "$(cat "$WORK/mnt/ok.txt")" "other file through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null
# The daemon logs the failed read to its file: $BDN_HOME/logs/mount-<name>-<12 hex>.log, 0600.
mlog="$BDN_HOME/logs/mount-mnt-$(printf '%s' "$WORK/mnt" | b3sum --no-names | cut -c1-12).log"
[ -f "$mlog" ] || fail "no mount daemon log at $mlog: $(ls -la "$BDN_HOME/logs" 2>&1)"
assert_eq 600 "$(stat -c %a "$mlog")" "mode of the mount daemon's log"
assert_contains "$(cat "$mlog")" "Z warning mount $WORK/mnt: file \"weights.bin\" [0, 1048576): chunk b3:$chunk: not in store (a copy found corrupt was set aside; push the data again to repair)"

step "pushing the data again repairs the store"
"$BDN" volume push "$WORK/src" bdn:test/corrupt >/dev/null 2>"$WORK/repair.err"
said=$(cat "$WORK/repair.err")
assert_contains "$said" "unchanged, repaired: 2 files, "
assert_contains "$said" " (1 new, "
out=$("$BDN" volume push "$WORK/src" bdn:test/corrupt --json)
assert_eq 0 "$(json_field chunks_uploaded <<<"$out")" "chunks stored by a push after the repair"
"$BDN" volume verify "$ref" >/dev/null || fail "verify after repair"
cmp "$WORK/src/weights.bin" <("$BDN" volume cat "$ref/weights.bin") || fail "bytes after repair"
step "a version whose manifest is corrupt: verify and stat exit 5, also once the bad copy is set aside"
mkdir -p "$WORK/m"; printf 'manifest\n' > "$WORK/m/f"
mref=$("$BDN" volume push "$WORK/m" bdn:test/manifest 2>/dev/null)
mhex=${mref#*@b3:}
read -r mpack _ mpayload mstored _ mcodec _ < <(python3 "$PACKS" find "$BDN_HOME/store" "$mhex")
assert_eq none "$mcodec" "codec of the small manifest"
head -c "$mstored" /dev/zero | tr '\0' 'g' > "$WORK/garbage"
dd if="$WORK/garbage" of="$mpack" bs=1 seek="$mpayload" conv=notrunc status=none
run_fails 5 "bdn: error: manifest b3:$mhex: chunk b3:$mhex: digest mismatch (stored bytes hash to b3:$(b3sum --no-names "$WORK/garbage")) in pack $mpack at offset $((mpayload - 64)); set aside, push the data again to repair" \
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
# A pack written by packs.py: bdn reads packs it did not write.
python3 "$PACKS" write "$BDN_HOME/store/packs/00000000000000aa.pack" "$WORK/bad-manifest"
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
