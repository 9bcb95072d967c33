#!/usr/bin/env bash
# bdn fsck: each kind of damage made once in an embedded store (a chunk's bytes, a manifest's, a
# chunk index's, a pack footer, an index table, a blob taken out of the store, a tag naming no
# version) is reported on its own line with the versions it affects, and fsck exits 5; --repair
# sets the damaged copies aside and rebuilds the index, pushing the trees again restores every
# version, and fsck then exits 0. The same check runs on a bdn serve --data directory.
source "$(dirname "$0")/lib.sh"
PACKS="python3 $(dirname "$0")/packs.py"

# Four trees, each its own version (and its own pack: every push seals its packs).
for i in 1 2 3 4 5; do
  mkdir -p "$WORK/t$i"
  random_file "$WORK/t$i/big.bin" 1500000 "$i"   # several chunks: an indexed file
  echo "tree $i" > "$WORK/t$i/small.txt"          # one chunk
done
declare -A D
for i in 1 2 3 4 5; do
  D[$i]=$("$BDN" volume push "$WORK/t$i" "bdn:fs/v$i" --json | json_field digest)
done
ref() { echo "bdn:fs/v$1@${D[$1]}"; }
"$BDN" fsck >/dev/null || fail "fsck of a sound store"

# hex_of FILE: the b3:… id of a file's bytes as one chunk (small files are single-chunk).
chunk_of_small() { echo "b3:$(b3sum --no-names "$WORK/t$1/small.txt")"; }
index_of_big() { "$BDN" volume stat "$(ref "$1")/big.bin" --json | json_field chunk_index; }
# flip_payload HEX: flips the first payload byte of blob HEX in its pack.
flip_payload() {
  local row; row=$($PACKS find "$BDN_HOME/store" "${1#b3:}") || fail "blob $1 is in no pack"
  read -r pack _ payload _ <<<"$row"
  python3 -c 'import sys; f=open(sys.argv[1],"r+b"); o=int(sys.argv[2]); f.seek(o); b=f.read(1); f.seek(o); f.write(bytes([b[0]^0xff]))' "$pack" "$payload"
}

step "damage each kind of object once"
small1=$(chunk_of_small 1); flip_payload "$small1"                 # a chunk of v1
flip_payload "${D[2]}"                                              # the manifest of v2
index3=$(index_of_big 3); flip_payload "$index3"                   # the chunk index of v3
# v4: a blob taken out of the store (its pack rewritten without it, out of the store's reach).
small4=$(chunk_of_small 4)
mkdir -p "$WORK/aside"; $PACKS extract "$BDN_HOME/store" "${small4#b3:}" "$WORK/aside/0000000000000001.pack" >/dev/null
"$BDN" store rebuild-index >/dev/null                               # extract dropped the index
# v5's pack: its footer checksum.
row=$($PACKS find "$BDN_HOME/store" "${D[5]#b3:}"); pack5=${row%% *}
python3 -c 'import sys,os; f=open(sys.argv[1],"r+b"); f.seek(-1, os.SEEK_END); b=f.read(1); f.seek(-1, os.SEEK_END); f.write(bytes([b[0]^0xff]))' "$pack5"
# An index table.
table=$(find "$BDN_HOME/store/index" -name '*.idx' -print -quit)
[ -n "$table" ] || fail "no index table"
python3 -c 'import sys,os; f=open(sys.argv[1],"r+b"); f.seek(-40, os.SEEK_END); b=f.read(1); f.seek(-40, os.SEEK_END); f.write(bytes([b[0]^0xff]))' "$table"
# An index table that is not one at all (its open fails, not its checksum).
printf 'not a table' > "$BDN_HOME/store/index/00000000000000ff.idx"
# The registry: a tag naming no version.
sqlite3 "$BDN_HOME/registry.db" "INSERT INTO tags(volume_id, name, digest) SELECT id, 'ghost', '$(printf 'ab%.0s' $(seq 32))' FROM volumes WHERE name='v1'"

step "fsck reports each problem with the versions it affects"
rc=0; out=$("$BDN" fsck) || rc=$?
echo "$out"
assert_eq 5 "$rc" "exit code of fsck with problems"
assert_contains "$out" "blob: blob $small1: digest mismatch"
assert_contains "$out" "missing: blob $small1: no good copy is stored (only damaged ones)
  affects $(ref 1) (file \"small.txt\")"
assert_contains "$out" "blob: blob ${D[2]}: digest mismatch"
assert_contains "$out" "  affects $(ref 2) (its manifest)"
assert_contains "$out" "blob: blob $index3: digest mismatch"
assert_contains "$out" "  affects $(ref 3) (file \"big.bin\")"
assert_contains "$out" "missing: blob $small4: not stored
  affects $(ref 4) (file \"small.txt\")"
assert_contains "$out" "pack: pack $pack5: footer"
assert_contains "$out" "index: index table $table: "
garbage="$BDN_HOME/store/index/00000000000000ff.idx"
assert_contains "$out" "index: index table $garbage: "
[[ "$out" != *"index table $table: index table"* && "$out" != *"index table $garbage: index table"* ]] \
  || fail "an index table named twice: $out"
assert_contains "$out" "registry: registry.db: tag \"ghost\" of bdn:fs/v1 names b3:abab"
"$BDN" fsck --json > "$WORK/fsck.json" || true
kinds=$(python3 -c 'import json,sys; print(" ".join(sorted({p["kind"] for p in json.load(open(sys.argv[1]))["problems"]})))' "$WORK/fsck.json")
assert_eq "blob index missing pack registry" "$kinds" "kinds of problems in --json"

step "fsck --repair sets damage aside and rebuilds the index; pushing again restores every version"
rc=0; out=$("$BDN" fsck --repair) || rc=$?
assert_eq 5 "$rc" "exit code of fsck --repair (data still missing)"
assert_contains "$out" "repaired: set aside (quarantine); push or sync the data again to store a good copy"
assert_contains "$out" "repaired: index rebuilt from the packs"
[ "$(wc -l < "$BDN_HOME/store/quarantine")" -ge 3 ] || fail "quarantine: $(cat "$BDN_HOME/store/quarantine")"
sqlite3 "$BDN_HOME/registry.db" "DELETE FROM tags WHERE name='ghost'"
for i in 1 2 3 4 5; do
  out=$("$BDN" volume push "$WORK/t$i" "bdn:fs/v$i" --json)
  assert_eq "${D[$i]}" "$(json_field digest <<<"$out")" "digest of t$i pushed again"
done
out=$("$BDN" fsck) || fail "fsck after the repair and the pushes: $out"
for i in 1 2 3 4 5; do "$BDN" volume verify "$(ref "$i")" >/dev/null || fail "$(ref "$i") does not verify"; done
echo "$out"

step "bdn serve --data: fsck of a stopped server's directory; fsck and store migrate refused while it serves"
export BDN_HOME="$WORK/client"
start_origin
"$BDN" volume push "$WORK/t1" bdn:fs/served >/dev/null
run_fails 8 "bdn: error: --data $WORK/srv: in use by bdn serve (pid $SERVER_PID); stop it first" \
  "$BDN" fsck --data "$WORK/srv"
run_fails 8 "bdn: error: --data $WORK/srv: in use by bdn serve (pid $SERVER_PID); stop it first" \
  "$BDN" store migrate --data "$WORK/srv"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
unset BDN_REMOTE
"$BDN" fsck --data "$WORK/srv" >/dev/null || fail "fsck of a sound server directory"
# On a read-only file system (a snapshot, a read-only bind mount) fsck and gc --dry-run need
# nothing written (from an attacking helper: both failed on making serve.lock, exit 6). Root
# only: a bind mount is made for it.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$WORK/srv-ro"
  mount --bind "$WORK/srv" "$WORK/srv-ro" && MOUNTS+=("$WORK/srv-ro")
  mount -o remount,bind,ro "$WORK/srv-ro"
  "$BDN" fsck --data "$WORK/srv-ro" >/dev/null || fail "fsck of a read-only server directory"
  "$BDN" gc --dry-run --data "$WORK/srv-ro" >/dev/null || fail "gc --dry-run of a read-only server directory"
  run_fails 6 "bdn: error: --data $WORK/srv-ro: --repair writes to $WORK/srv-ro/store, which is read-only here (Read-only file system); run fsck without it to check" \
    "$BDN" fsck --repair --data "$WORK/srv-ro"
  # A write-ahead log whose changes a read-only open cannot read without registry.db-shm is not
  # read past (from an attacking helper: the registry as it was before them, and gc --dry-run
  # planned to delete the packs of the versions it did not see).
  umount "$WORK/srv-ro"
  cp -a "$WORK/srv" "$WORK/srv-copy"
  python3 - "$WORK/srv-copy/registry.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE IF NOT EXISTS test_marker(x)")
c.commit()
import shutil, os
d = os.path.dirname(sys.argv[1])
shutil.copy(sys.argv[1] + "-wal", d + "/kept-wal")
PY
  mv "$WORK/srv-copy/kept-wal" "$WORK/srv-copy/registry.db-wal"; rm -f "$WORK/srv-copy/registry.db-shm"
  mount --bind "$WORK/srv-copy" "$WORK/srv-ro"
  mount -o remount,bind,ro "$WORK/srv-ro"
  rc=0; err=$("$BDN" fsck --data "$WORK/srv-ro" 2>&1 >/dev/null) || rc=$?
  assert_eq 8 "$rc" "exit code of fsck of a read-only view whose WAL cannot be read ($err)"
  assert_contains "$err" "registry.db-wal holds changes that a read-only open can read only with $WORK/srv-ro/registry.db-shm beside it"
  umount "$WORK/srv-ro"
fi
# The directory of a bdn serve --store s3://… (its objstore/ spool) holds no store: refused, and
# nothing is created in it.
mkdir -p "$WORK/replica/objstore"
for cmd in fsck gc; do
  run_fails 8 "bdn: error: --data $WORK/replica: the spool of a bdn serve --store s3://…, whose packs are in the object store: its GC runs inside it (bdn serve --gc-interval); check its versions with bdn volume verify" \
    "$BDN" "$cmd" --data "$WORK/replica"
done
assert_eq "objstore" "$(ls "$WORK/replica")" "files in the replica's directory after fsck and gc"
flip_payload_in() { local row; row=$($PACKS find "$1/store" "${2#b3:}"); read -r p _ o _ <<<"$row"
  python3 -c 'import sys; f=open(sys.argv[1],"r+b"); o=int(sys.argv[2]); f.seek(o); b=f.read(1); f.seek(o); f.write(bytes([b[0]^0xff]))' "$p" "$o"; }
flip_payload_in "$WORK/srv" "$small1"
rc=0; out=$("$BDN" fsck --data "$WORK/srv") || rc=$?
assert_eq 5 "$rc" "exit code of fsck of a damaged server directory"
assert_contains "$out" "  affects bdn:fs/served@${D[1]} (file \"small.txt\")"
echo PASS
