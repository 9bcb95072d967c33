#!/usr/bin/env bash
# Edges of serving (issues 7 and 14): a server that cannot bind creates nothing on disk; error
# bodies never show the server's directories (the server's log keeps them); a full data disk is
# failed_precondition (412, exit 8) for key create, tag set and push; a node cache on a read-only file
# system is left out with a warning and the mount still reads; verify and stat through --remote
# exit 5 for a corrupt manifest.
source "$(dirname "$0")/lib.sh"
needs_fuse
PACKS="$(dirname "$0")/packs.py"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE

# http_get PATH [TOKEN]: prints the HTTP status; the body goes to $WORK/body.
http_get() {
  local auth=()
  [ -n "${2:-}" ] && auth=(-H "Authorization: Bearer $2")
  curl -s -o "$WORK/body" -w '%{http_code}' "${auth[@]}" "$URL$1"
}
mkdir -p "$WORK/src"
printf 'small file\n' > "$WORK/src/a.txt"
python3 -c 'import random,sys; r=random.Random(5); sys.stdout.buffer.write(r.randbytes(2_000_000))' > "$WORK/src/w.bin"

step "origin"
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv"
SERVE_PID=$STARTED_PID; URL=$STARTED_URL; PORT=${URL##*:}
ADMIN=$(cat "$WORK/srv/admin.token")
export BDN_REMOTE="$URL" BDN_TOKEN="$ADMIN"
ref=$("$BDN" volume push "$WORK/src" bdn:t/v 2>/dev/null)

step "bdn serve and bdn cache serve on a busy port create nothing"
run_fails 7 "bdn: error: listen 127.0.0.1:$PORT: cannot bind: Address already in use" \
  "$BDN" serve --listen "127.0.0.1:$PORT" --data "$WORK/new/srv"
[ ! -e "$WORK/new" ] || fail "serve on a busy port created $(find "$WORK/new")"
mkdir "$WORK/empty-data"
run_fails 7 "bdn: error: listen 127.0.0.1:$PORT: cannot bind: Address already in use" \
  "$BDN" serve --listen "127.0.0.1:$PORT" --data "$WORK/empty-data"
assert_eq "" "$(ls -A "$WORK/empty-data")" "data directory after serve on a busy port"
run_fails 7 "bdn: error: listen 127.0.0.1:$PORT: cannot bind: Address already in use" \
  "$BDN" cache serve --upstream "$URL" --listen "127.0.0.1:$PORT" --cache-dir "$WORK/new/cache"
[ ! -e "$WORK/new" ] || fail "cache serve on a busy port created $(find "$WORK/new")"
run_fails 7 "bdn: error: listen 127.0.0.1:$PORT: cannot bind: Address already in use" \
  env BDN_HOME="$WORK/new/home" "$BDN" serve --listen "127.0.0.1:$PORT"
[ ! -e "$WORK/new" ] || fail "serve with the default --data on a busy port created $(find "$WORK/new")"

step "error bodies show <data>, never the server's directory; the server's log keeps the path"
id=$(b3sum --no-names "$WORK/src/a.txt")
# Damage the chunk's bytes in its pack (found by packs.py, a second reader of the format).
read -r pack _ payload stored _ _ _ < <(python3 "$PACKS" find "$WORK/srv/store" "$id")
head -c "$stored" /dev/zero | tr '\0' 'r' | dd of="$pack" bs=1 seek="$payload" conv=notrunc status=none
assert_eq 422 "$(http_get "/v1/chunks/$id" "$ADMIN")" "GET of a corrupt chunk"
body=$(cat "$WORK/body")
assert_contains "$body" "in pack <data>/store/packs/$(basename "$pack") at offset $((payload - 64)); set aside"
[[ "$body" != *"$WORK"* ]] || fail "an error body shows the server's directory: $body"
assert_contains "$(cat "$WORK/serve.log")" "in pack $pack at offset $((payload - 64)); set aside"
err=$("$BDN" volume cat "$ref/a.txt" 2>&1 >/dev/null) && fail "cat of a chunk moved aside passed"
[[ "$err" != *"$WORK/srv"* ]] || fail "a client error shows the server's directory: $err"
"$BDN" volume push "$WORK/src" bdn:t/v >/dev/null 2>&1  # repairs the chunk

step "verify and stat through --remote exit 5 when the version's manifest is corrupt"
mkdir -p "$WORK/src2"; printf 'another version\n' > "$WORK/src2/b.txt"
mref=$("$BDN" volume push "$WORK/src2" bdn:t/manifest 2>/dev/null)
mhex=${mref#*@b3:}
read -r mpack _ mpayload mstored _ _ _ < <(python3 "$PACKS" find "$WORK/srv/store" "$mhex")
head -c "$mstored" /dev/zero | tr '\0' 'g' | dd of="$mpack" bs=1 seek="$mpayload" conv=notrunc status=none
for cmd in verify stat verify stat; do  # the first read moves the bad copy aside: then missing
  rc=0; err=$("$BDN" volume "$cmd" "$mref" 2>&1 >/dev/null) || rc=$?
  assert_eq 5 "$rc" "exit code of $cmd through --remote with a corrupt manifest ($err)"
  assert_contains "$err" "bdn: error: manifest b3:$mhex: "
  [[ "$err" != *"$WORK/srv"* ]] || fail "$cmd shows the server's directory: $err"
done

step "a node cache on a read-only file system is left out with a warning; the mount still reads"
mkdir -p "$WORK/ro" "$WORK/mnt"
mount -t tmpfs -o ro,size=1m tmpfs "$WORK/ro"; MOUNTS+=("$WORK/ro")
err=$("$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/ro/cache" 2>&1 >/dev/null) \
  || fail "mount with a read-only --cache-dir failed: $err"
MOUNTS+=("$WORK/mnt")
assert_eq "warning: node cache $WORK/ro/cache: Read-only file system; mounting without the node cache (every read goes to the origin)" "$err" "mount warning"
cmp "$WORK/src/w.bin" "$WORK/mnt/w.bin" || fail "bytes through a mount without its node cache"
"$BDN" volume umount "$WORK/mnt" >/dev/null
# An existing node cache (filled by a mount) on a read-only bind mount: the same.
mkdir -p "$WORK/robind"
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/rw/cache" >/dev/null
head -c 1000 "$WORK/mnt/w.bin" >/dev/null
"$BDN" volume umount "$WORK/mnt" >/dev/null
mount --bind "$WORK/rw" "$WORK/robind"; MOUNTS+=("$WORK/robind")
mount -o remount,bind,ro "$WORK/robind"
err=$("$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/robind/cache" 2>&1 >/dev/null) \
  || fail "mount with a read-only bind-mounted --cache-dir failed: $err"
assert_eq "warning: node cache $WORK/robind/cache: Read-only file system; mounting without the node cache (every read goes to the origin)" "$err" "mount warning (bind)"
cmp "$WORK/src/w.bin" "$WORK/mnt/w.bin" || fail "bytes through a mount on a read-only bind mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null
# mounts apply takes volume mount's tuning flags, for every entry (it had only -f: every
# deployment got $BDN_HOME/cache at 10G): the same warning, through the config.
printf 'bdn:\n  mounts:\n    - source: %s\n      path: %s\n' "$ref" "$WORK/mnt" > "$WORK/deploy.yaml"
run_fails 2 "bdn: error: --cache-size: must be more than 0" \
  "$BDN" mounts apply -f "$WORK/deploy.yaml" --cache-size 0
assert_absent "$WORK/mnt fuse" "mount table after a refused apply" /proc/self/mounts
err=$("$BDN" mounts apply -f "$WORK/deploy.yaml" --cache-dir "$WORK/robind/cache" --read-timeout 30s 2>&1 >/dev/null) \
  || fail "mounts apply with a read-only --cache-dir failed: $err"
MOUNTS+=("$WORK/mnt")
assert_eq "warning: node cache $WORK/robind/cache: Read-only file system; mounting without the node cache (every read goes to the origin)" "$err" "mounts apply warning"
cmp "$WORK/src/w.bin" "$WORK/mnt/w.bin" || fail "bytes through a mount of mounts apply"
# Applied again, the entry already mounted keeps its options, and that is said.
assert_eq "warning: $WORK/deploy.yaml: 1 entry already mounted as the config says keep the options they were mounted with; --cache-size and --memory-cache apply to the mounts this run makes (unmount the others and apply again to change theirs)" \
  "$("$BDN" mounts apply -f "$WORK/deploy.yaml" --cache-size 1G --memory-cache 64M 2>&1 >/dev/null)" "apply again with tuning flags"
# A fleet's pull-only key rolls a deployment to another version with --replace (from an
# operator: its check of the old version asked the store a question that needed push).
PULL_ONLY=$("$BDN" key create --namespace t --scope pull)
mkdir -p "$WORK/roll" && printf 'rolled\n' > "$WORK/roll/r.txt"
rref=$("$BDN" volume push "$WORK/roll" bdn:t/roll 2>/dev/null)
printf 'bdn:\n  mounts:\n    - source: %s\n      path: %s\n' "$rref" "$WORK/mnt" > "$WORK/deploy2.yaml"
assert_eq "$rref mounted at $WORK/mnt (replacing $ref)" \
  "$(BDN_TOKEN="$PULL_ONLY" "$BDN" mounts apply -f "$WORK/deploy2.yaml" --replace 2>/dev/null)" "apply --replace with a pull key"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "a full data disk: key create, tag set and push get failed_precondition (412, exit 8), no server path"
kill -TERM "$SERVE_PID"; wait "$SERVE_PID" || fail "serve did not stop cleanly"
mkdir -p "$WORK/full"
mount -t tmpfs -o size=2m tmpfs "$WORK/full"; MOUNTS+=("$WORK/full")
start_bdn full serve --listen 127.0.0.1:0 --data "$WORK/full/srv"
URL=$STARTED_URL; export BDN_REMOTE="$URL" BDN_TOKEN
BDN_TOKEN=$(cat "$WORK/full/srv/admin.token")
FULL_REF=$("$BDN" volume push "$WORK/src2" bdn:t/tags 2>/dev/null)
dd if=/dev/zero of="$WORK/full/filler" bs=64k status=none 2>/dev/null || true  # ENOSPC ends it
rc=0
for _ in $(seq 1 200); do  # SQLite may still have room in pages it holds: until a write needs more
  err=$("$BDN" key create --namespace t --scope pull 2>&1 >/dev/null) || { rc=$?; break; }
done
assert_eq 8 "$rc" "exit code of key create on a full data disk ($err)"
assert_eq "bdn: error: key store <data>/registry.db: create key: no space left on device" "$err" "key create on a full disk"
out=$("$BDN" --json key create --namespace t --scope pull 2>/dev/null) && fail "key create passed on a full disk"
assert_eq failed_precondition "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "--json error code"
assert_eq 412 "$(curl -s -o "$WORK/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $BDN_TOKEN" \
  -H 'Content-Type: application/json' --data '{"namespace":"t","scopes":["pull"]}' "$URL/v1/keys")" "POST /v1/keys on a full disk"
assert_eq '{"error":{"code":"failed_precondition","message":"key store <data>/registry.db: create key: no space left on device"}}' "$(cat "$WORK/body")" "error body"
# Registry writes too: new tags until one needs space the database does not have.
rc=0
for i in $(seq 1 200); do
  err=$("$BDN" volume tag set --volume-ref "$FULL_REF" --tag "t$i" 2>&1 >/dev/null) || { rc=$?; break; }
done
assert_eq 8 "$rc" "exit code of tag set on a full data disk ($err)"
assert_eq "bdn: error: registry <data>/registry.db: no space left on device" "$err" "tag set on a full disk"
rc=0; err=$("$BDN" volume push "$WORK/src" bdn:t/full 2>&1 >/dev/null) || rc=$?
assert_eq 8 "$rc" "exit code of push to a full data disk ($err)"
assert_contains "$err" "No space left on device"
[[ "$err" != *"$WORK"* ]] || fail "push error shows the server's directory: $err"
echo "PASS"
