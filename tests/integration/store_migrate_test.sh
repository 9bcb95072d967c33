#!/usr/bin/env bash
# Stores of the old one-file-per-chunk layout: every command on one (embedded, and bdn serve's
# data directory) fails naming `bdn store migrate`; the migration converts it in place and every
# version reads back byte for byte. The old-layout fixture is written by packs.py unpack from a
# store pushed by bdn (each blob as store/chunks/<2 hex>/<64 hex>, raw, exactly as the store
# before packs wrote it). Also: `bdn store rebuild-index` after the index is deleted, and
# `bdn store stats`.
source "$(dirname "$0")/lib.sh"
needs_fuse
PACKS="$(dirname "$0")/packs.py"

step "two versions pushed, then the store rewritten in the old layout"
mkdir -p "$WORK/v1/sub" "$WORK/v2"
head -c 5000000 /dev/urandom > "$WORK/v1/weights.bin"
python3 -c 'import sys; sys.stdout.write("{\"layer\": 1}\n" * 20000)' > "$WORK/v1/config.json"
printf 'small\n' > "$WORK/v1/sub/small.txt"
: > "$WORK/v1/sub/empty"
cp -a "$WORK/v1/." "$WORK/v2/"
head -c 2000000 /dev/urandom >> "$WORK/v2/weights.bin"
ref1=$("$BDN" volume push "$WORK/v1" bdn:test/migrate)
ref2=$("$BDN" volume push "$WORK/v2" bdn:test/migrate)
python3 "$PACKS" unpack "$BDN_HOME/store"
[ -d "$BDN_HOME/store/chunks" ] && [ ! -e "$BDN_HOME/store/packs" ] || fail "no old layout written"
old_files=$(find "$BDN_HOME/store/chunks" -type f | wc -l)

step "every command refuses the old layout, naming the command that converts it"
want="bdn: error: chunk store $BDN_HOME/store: in the old one-file-per-chunk layout (chunks/); convert it with: bdn store migrate --data $BDN_HOME"
run_fails 8 "$want" "$BDN" volume ls bdn:test/migrate
run_fails 8 "$want" "$BDN" volume verify "$ref1"
run_fails 8 "$want" "$BDN" volume push "$WORK/v1" bdn:test/other
run_fails 8 "$want" "$BDN" volume mount "$ref1" "$WORK/mnt"
run_fails 8 "$want" "$BDN" store rebuild-index
run_fails 8 "$want" "$BDN" store stats
out=$("$BDN" --json volume ls bdn:test/migrate 2>/dev/null) && fail "ls --json passed"
assert_eq failed_precondition "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "JSON error code"

step "bdn store migrate converts it in place; every version reads back"
out=$("$BDN" store migrate 2>/dev/null)
assert_contains "$out" "store $BDN_HOME/store: $old_files chunk files ("
assert_contains "$out" ") moved into packs"
[ ! -e "$BDN_HOME/store/chunks" ] || fail "chunks/ left behind"
[ -n "$(find "$BDN_HOME/store/packs" -name '*.pack')" ] || fail "no packs written"
for ref in "$ref1" "$ref2"; do "$BDN" volume verify "$ref" >/dev/null || fail "verify $ref"; done
"$BDN" volume pull "$ref1" "$WORK/out1" >/dev/null
"$BDN" volume pull "$ref2" "$WORK/out2" >/dev/null
assert_eq "$(tree_listing "$WORK/v1")" "$(tree_listing "$WORK/out1")" "version 1 after migration"
assert_eq "$(tree_listing "$WORK/v2")" "$(tree_listing "$WORK/out2")" "version 2 after migration"
out=$("$BDN" store migrate)
assert_eq "store $BDN_HOME/store: already in the pack layout, nothing to migrate" "$out" "second migrate"
assert_eq false "$("$BDN" --json store migrate | json_field migrated)" "second migrate --json"

step "rebuild-index after the index is deleted; stats"
stats=$("$BDN" --json store stats)
blobs=$(json_field blobs <<<"$stats")
assert_eq "$old_files" "$blobs" "blobs in packs"
[ "$(json_field zstd_blobs <<<"$stats")" -ge 1 ] || fail "config.json was not compressed"
rm -rf "$BDN_HOME/store/index"
out=$("$BDN" --json store rebuild-index)
assert_eq "$blobs" "$(json_field blobs <<<"$out")" "blobs indexed"
assert_eq "$(json_field packs <<<"$stats")" "$(json_field packs <<<"$out")" "packs indexed"
for ref in "$ref1" "$ref2"; do "$BDN" volume verify "$ref" >/dev/null || fail "verify $ref after rebuild"; done

step "bdn serve refuses an old-layout data directory, and serves it once migrated"
start_origin
pinned=$("$BDN" volume push "$WORK/v1" bdn:test/served)
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
python3 "$PACKS" unpack "$WORK/srv/store"
unset BDN_REMOTE
run_fails 8 "bdn: error: chunk store $WORK/srv/store: in the old one-file-per-chunk layout (chunks/); convert it with: bdn store migrate --data $WORK/srv" \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
"$BDN" store migrate --data "$WORK/srv" >/dev/null 2>&1
start_origin
"$BDN" volume pull bdn:test/served "$WORK/out3" >/dev/null
assert_eq "$(tree_listing "$WORK/v1")" "$(tree_listing "$WORK/out3")" "served version after migration"

step "migrate --cache-dir touches only a node cache's directory"
# A work directory with a chunks/ of its own (what the old layout's files look like, and a note):
# migrating it would move the 64-hex files into packs and delete them.
mkdir -p "$WORK/project/chunks/ab" "$WORK/project/tmp"
hex=$(printf 'x' | b3sum --no-names)
printf 'x' >"$WORK/project/chunks/ab/$hex"
echo notes >"$WORK/project/notes.txt"
before=$(cd "$WORK/project" && find . -printf '%p %m %s\n' | sort)
run_fails 8 "bdn: error: node cache $WORK/project: holds notes.txt, which is not the node cache's; give an empty directory or one the node cache made" \
  "$BDN" store migrate --cache-dir "$WORK/project"
assert_eq "$before" "$(cd "$WORK/project" && find . -printf '%p %m %s\n' | sort)" "the refused directory"
run_fails 3 "bdn: error: node cache $WORK/nothing-here: no such directory" \
  "$BDN" store migrate --cache-dir "$WORK/nothing-here"
[ ! -e "$WORK/nothing-here" ] || fail "migrate made the directory it was given"
# An empty directory becomes a node cache that a mount then uses.
mkdir -m 0700 "$WORK/empty-nc"
assert_eq "store $WORK/empty-nc: already in the pack layout, nothing to migrate" \
  "$("$BDN" store migrate --cache-dir "$WORK/empty-nc")" "migrate of an empty directory"
assert_eq "bdn node cache, format 1" "$(cat "$WORK/empty-nc/bdn-node-cache")" "its marker"
err=$("$BDN" volume mount "$pinned" "$WORK/mnt" --cache-dir "$WORK/empty-nc" 2>&1 >/dev/null) \
  || fail "mount: $err"
MOUNTS+=("$WORK/mnt")
assert_eq "" "$err" "mount with the migrated empty directory as its node cache"
cmp "$WORK/v1/weights.bin" "$WORK/mnt/weights.bin" || fail "bytes through that mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
[ -n "$(find "$WORK/empty-nc/packs" -type f)" ] || fail "the node cache kept nothing"

step "a node cache of the old layout: left out naming migrate --cache-dir; converted, it serves what it held"
NC="$WORK/nodecache"
"$BDN" volume mount "$pinned" "$WORK/mnt" --cache-dir "$NC" >/dev/null
MOUNTS+=("$WORK/mnt")
# Every file read once, so the cache holds every chunk of the version (it holds only what was read).
assert_eq "$(tree_listing "$WORK/v1")" "$(tree_listing "$WORK/mnt")" "tree through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
assert_eq "store $NC: already in the pack layout, nothing to migrate" "$("$BDN" store migrate --cache-dir "$NC")" "migrate of a new cache"
# The region the mount daemon was filling is left .open at its exit; the next opener of the cache
# (another mount) seals it, so that the fixture below holds every chunk the cache held.
"$BDN" volume mount "$pinned" "$WORK/mnt" --cache-dir "$NC" >/dev/null; MOUNTS+=("$WORK/mnt")
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
[ -z "$(find "$NC/packs" -name '*.open')" ] || fail "a region left open: $(ls "$NC/packs")"
python3 "$PACKS" unpack-cache "$NC"
old_nc=$(find "$NC/chunks" -type f | wc -l)
[ "$old_nc" -gt 0 ] || fail "no old-layout node cache written"
# A mount still works, without its node cache, and says which command converts it.
err=$("$BDN" volume mount "$pinned" "$WORK/mnt" --cache-dir "$NC" 2>&1 >/dev/null) || fail "mount: $err"
MOUNTS+=("$WORK/mnt")
assert_eq "warning: chunk store $NC: in the old one-file-per-chunk layout (chunks/); convert it with: bdn store migrate --cache-dir $NC; mounting without the node cache (every read goes to the origin)" "$err" "mount warning"
cmp "$WORK/v1/weights.bin" "$WORK/mnt/weights.bin" || fail "bytes through a mount without its node cache"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
[ -n "$(find "$NC/chunks" -type f)" ] || fail "the old-layout cache was changed"
out=$("$BDN" store migrate --cache-dir "$NC" 2>/dev/null)
assert_contains "$out" "store $NC: "
assert_contains "$out" ") moved into packs"
[ ! -e "$NC/chunks" ] || fail "the cache's chunks/ left behind"
# Every chunk file of the old cache is now a record of one of its regions.
assert_eq "$old_nc" "$(python3 "$PACKS" list "$NC" | wc -l)" "blobs in the converted cache's regions"
# ...and serves what it held with the origin gone: the mount reads every byte from the regions
# (a file the cache never held would be EIO here: the node cache holds only what was read).
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
err=$("$BDN" volume mount "$pinned" "$WORK/mnt" --cache-dir "$NC" 2>&1 >/dev/null) || fail "mount: $err"
MOUNTS+=("$WORK/mnt")
assert_contains "$err" "connection refused; mounting $pinned from the node cache without checking the registry"
for f in weights.bin config.json; do
  cmp "$WORK/v1/$f" "$WORK/mnt/$f" || fail "$f through the converted node cache, origin stopped"
done
assert_eq "$(tree_listing "$WORK/v1")" "$(tree_listing "$WORK/mnt")" "tree through the converted cache"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()

step "damaged chunk files: migrate names the versions that need them and exits 5, every run, until a push repairs them"
# From an attacking helper: the migration said it had set them aside and exited 0.
unset BDN_REMOTE
export BDN_HOME="$WORK/damaged"
ref3=$("$BDN" volume push "$WORK/v1" bdn:test/damaged)
ref4=$("$BDN" volume push "$WORK/v1/sub" bdn:test/intact)
python3 "$PACKS" unpack "$BDN_HOME/store"
# A chunk of weights.bin or config.json (only $ref3 has them): a flipped byte.
bad=$(find "$BDN_HOME/store/chunks" -type f -size +100k -print -quit)
[ -n "$bad" ] || fail "no chunk file of weights.bin"
python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 1; open(p, "wb").write(b)' "$bad"
advice="push those trees again to repair them (a deleted version's into another volume: its own refuses it until it is restored, which needs it whole) (bdn fsck lists every problem)"
want="bdn: error: store migrate: 1 version cannot be read: $ref3: chunk b3:$(basename "$bad") is not stored; 1 chunk file in $BDN_HOME/store/corrupt did not match its digest; $advice"
rc=0; out=$("$BDN" store migrate 2>"$WORK/migrate.err") || rc=$?
assert_eq 5 "$rc" "exit code of a migration that set a needed chunk aside"
assert_contains "$out" "1 chunk files did not match their digest and were moved to $BDN_HOME/store/corrupt"
assert_eq "$want" "$(cat "$WORK/migrate.err")" "stderr of that migration"
run_fails 5 "$want" "$BDN" store migrate
json=$("$BDN" --json store migrate 2>/dev/null) && fail "migrate --json passed"
assert_eq "[\"$ref3: chunk b3:$(basename "$bad") is not stored\"]" "$(json_field damaged_versions <<<"$json")" "damaged_versions"
"$BDN" volume verify "$ref4" >/dev/null || fail "the intact version"
# The same tree pushed again stores the chunk; migrate then has nothing to say.
"$BDN" volume push "$WORK/v1" bdn:test/damaged >/dev/null
assert_eq "store $BDN_HOME/store: already in the pack layout, nothing to migrate" "$("$BDN" store migrate)" "migrate after the repair"
"$BDN" volume verify "$ref3" >/dev/null || fail "verify after the repair"
# A chunk file the old store had lost already (nothing set aside): the same, without the count.
export BDN_HOME="$WORK/lost"
ref5=$("$BDN" volume push "$WORK/v2" bdn:test/lost)
python3 "$PACKS" unpack "$BDN_HOME/store"
gone=$(find "$BDN_HOME/store/chunks" -type f -size +100k -print -quit)
rm "$gone"
run_fails 5 "bdn: error: store migrate: 1 version cannot be read: $ref5: chunk b3:$(basename "$gone") is not stored; $advice" \
  "$BDN" store migrate
echo "PASS"
