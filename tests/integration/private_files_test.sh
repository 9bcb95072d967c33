#!/usr/bin/env bash
# Local exposure (issue 14 item 4): the embedded store ($BDN_HOME), a bdn serve --data directory
# and the node caches (mount --cache-dir, cache serve --cache-dir) are created private to their
# owner, directories 0700 and files 0600 whatever the umask, so no other local user can read a
# chunk or the key table; existing ones with group/other bits are tightened on start with a
# warning naming the path, and then whatever another user planted in them is refused, as are a
# path through another user's symlink and one below a directory another user may change.
# "Other user" is nobody, via setpriv.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
# mktemp -d made WORK 0700, which alone would hide everything below it from other users.
chmod 0755 "$WORK"
umask 000  # the modes must not come from the umask

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# readable_by_nobody DIR: every path under DIR (DIR included) that nobody can read, one a line.
readable_by_nobody() {
  local paths
  mapfile -d '' paths < <(find "$1" -print0)
  as_nobody bash -c 'for p in "$@"; do [ -r "$p" ] && printf "%s\n" "$p"; done; true' _ "${paths[@]}"
}
# not_private DIR: paths under DIR that are not exactly 0700 (directories) or 0600 (files).
not_private() {
  find "$1" \( -type d ! -perm 0700 \) -printf 'd %m %p\n' -o \( -type f ! -perm 0600 \) -printf 'f %m %p\n'
}
# assert_private DIR WHAT
assert_private() {
  assert_eq "" "$(not_private "$1")" "modes under $2"
  assert_eq "" "$(readable_by_nobody "$1")" "paths under $2 that nobody can read"
}

mkdir -p "$WORK/src/sub"
python3 -c 'import random,sys; r=random.Random(3); sys.stdout.buffer.write(r.randbytes(3_000_000))' > "$WORK/src/w.bin"
printf 'hello\n' > "$WORK/src/sub/a.txt"
region_of() {  # region_of NODE_CACHE_DIR: one region file of it (sealed or being filled)
  find "$1/packs" -type f \( -name '*.pack' -o -name '*.open' \) -print -quit
}
pack_of() {  # pack_of STORE_DIR: one sealed pack of the store
  find "$1/packs" -type f -name '*.pack' -print -quit
}

step "the check itself: files left readable are seen as readable by nobody"
mkdir -p "$WORK/probe/d"; printf x > "$WORK/probe/d/f"; chmod -R go+rX "$WORK/probe"
assert_eq "$(printf '%s\n' "$WORK/probe" "$WORK/probe/d" "$WORK/probe/d/f")" "$(readable_by_nobody "$WORK/probe")" "probe"

step "embedded store: BDN_HOME, store, packs, index and registry are 0700/0600"
"$BDN" volume push "$WORK/src" bdn:t/v --tag prod >/dev/null 2>&1
[ -n "$(pack_of "$BDN_HOME/store")" ] || fail "no pack in the embedded store"
rm -rf "$BDN_HOME/store/index"; "$BDN" volume ls >/dev/null  # an index table is written again
[ -n "$(find "$BDN_HOME/store/index" -name '*.idx')" ] || fail "no index table"
assert_private "$BDN_HOME" BDN_HOME
as_nobody cat "$(pack_of "$BDN_HOME/store")" >/dev/null 2>&1 && fail "nobody read a pack"
as_nobody cat "$BDN_HOME/registry.db" >/dev/null 2>&1 && fail "nobody read the registry"
# From new-user helper 103: another user's home said "no store there" (reads) and a C++
# exception naming a path that is not there (fsck, gc); each says whose it is now.
owner="owned by uid 0 ($(id -un 0))"
run_fails 6 "bdn: error: embedded store $BDN_HOME: permission denied ($owner); a store is private to the user who made it; --home or BDN_HOME names another" \
  as_nobody "$BDN" --home "$BDN_HOME" volume versions bdn:t/v
# A push there said only "Permission denied" (from user helper 108).
run_fails 6 "bdn: error: embedded store $BDN_HOME: permission denied ($owner); a store is private to the user who made it; --home or BDN_HOME names another" \
  as_nobody "$BDN" --home "$BDN_HOME" volume push /tmp bdn:t/other
for cmd in fsck "gc --dry-run"; do
  # shellcheck disable=SC2086
  run_fails 6 "bdn: error: --data $BDN_HOME: permission denied ($owner); a store is private to the user who made it" \
    as_nobody "$BDN" $cmd --data "$BDN_HOME"
done

step "an existing home readable by others is tightened on start, with a warning naming it"
chmod -R go+rX "$BDN_HOME"
[ -n "$(readable_by_nobody "$BDN_HOME")" ] || fail "the loosened home is not readable"
err=$("$BDN" volume ls 2>&1 >/dev/null)
assert_contains "$err" "warning: embedded store $BDN_HOME: was readable by other users (mode 0755); changed to 0700"
assert_contains "$err" "warning: registry $BDN_HOME/registry.db: was readable by other users (mode 0644); changed to 0600"
assert_eq "" "$(readable_by_nobody "$BDN_HOME")" "paths under the tightened home that nobody can read"
assert_eq 700 "$(stat -c %a "$BDN_HOME")" "mode of the tightened home"
assert_eq "" "$("$BDN" volume ls 2>&1 >/dev/null)" "stderr once the home is private"

step "bdn serve --data: data dir, store, registry and admin.token are private"
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv"
SERVE_PID=$STARTED_PID; URL=$STARTED_URL
export BDN_REMOTE="$URL" BDN_TOKEN
BDN_TOKEN=$(cat "$WORK/srv/admin.token")
"$BDN" volume push "$WORK/src" bdn:t/v --tag prod >/dev/null 2>&1
"$BDN" key create --namespace t --scope pull >/dev/null 2>&1
[ -n "$(pack_of "$WORK/srv/store")" ] || fail "no pack in the server store"
assert_private "$WORK/srv" "serve --data"

step "a remote mount's node cache (--cache-dir) is private"
ref=$("$BDN" volume stat bdn:t/v:prod --json | json_field version_ref)
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nc/node" >/dev/null
MOUNTS+=("$WORK/mnt")
cmp "$WORK/src/w.bin" "$WORK/mnt/w.bin" || fail "bytes through the mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
[ -n "$(region_of "$WORK/nc/node")" ] || fail "the node cache holds no region"
as_nobody cat "$(region_of "$WORK/nc/node")" >/dev/null 2>&1 && fail "nobody read a node cache region"
assert_private "$WORK/nc" "mount --cache-dir (and the parent it created)"

step "bdn cache serve --cache-dir is private"
start_bdn cache cache serve --upstream "$URL" --listen 127.0.0.1:0 --cache-dir "$WORK/cn"
CACHE_URL=$STARTED_URL
id=$(b3sum --no-names "$WORK/src/sub/a.txt")
# (a cache node answers only callers the origin lets read the chunk: the admin key here)
assert_eq hello "$(curl -sf -H "Authorization: Bearer $BDN_TOKEN" "$CACHE_URL/v1/chunks/$id")" "chunk through the cache node"
[ -n "$(region_of "$WORK/cn")" ] || fail "the cache node holds no region"
assert_private "$WORK/cn" "cache serve --cache-dir"

step "a loosened cache serve --cache-dir and mount --cache-dir are tightened on start, with a warning"
kill -TERM "$STARTED_PID"; wait "$STARTED_PID" || fail "cache serve did not stop cleanly"
chmod -R go+rX "$WORK/cn" "$WORK/nc"
[ -n "$(readable_by_nobody "$WORK/cn")" ] || fail "the loosened cache directory is not readable"
start_bdn cache2 cache serve --upstream "$URL" --listen 127.0.0.1:0 --cache-dir "$WORK/cn"
assert_contains "$(cat "$WORK/cache2.log")" "warning: node cache $WORK/cn: was readable by other users (mode 0755); changed to 0700"
assert_eq "" "$(readable_by_nobody "$WORK/cn")" "paths under the tightened cache serve --cache-dir that nobody can read"
assert_eq hello "$(curl -sf -H "Authorization: Bearer $BDN_TOKEN" "$STARTED_URL/v1/chunks/$id")" "the tightened cache node still serves"
err=$("$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nc/node" 2>&1 >/dev/null)
MOUNTS+=("$WORK/mnt")
assert_contains "$err" "warning: node cache $WORK/nc/node: was readable by other users (mode 0755); changed to 0700"
cmp "$WORK/src/w.bin" "$WORK/mnt/w.bin" || fail "bytes through the mount over the tightened cache"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
assert_eq "" "$(readable_by_nobody "$WORK/nc/node")" "paths under the tightened mount --cache-dir that nobody can read"

step "a loosened serve --data is tightened on restart, with a warning"
kill -TERM "$SERVE_PID"; wait "$SERVE_PID" || fail "serve did not stop cleanly"
chmod -R go+rX "$WORK/srv"
start_bdn serve2 serve --listen 127.0.0.1:0 --data "$WORK/srv"
assert_contains "$(cat "$WORK/serve2.log")" "warning: --data $WORK/srv: was readable by other users (mode 0755); changed to 0700"
assert_eq "" "$(readable_by_nobody "$WORK/srv")" "paths under the tightened --data that nobody can read"
if [ "$(id -u)" = 0 ]; then
  token=$BDN_TOKEN; unset BDN_REMOTE BDN_TOKEN  # the embedded store again
  # From an attacking helper: root's BDN_HOME left 0777 was only tightened, and the registry.db
  # symlink another user had planted in it was followed (root's registry went where it pointed).
  step "what another user planted in a home open to others is refused, its target untouched"
  H="$WORK/home2"
  mkdir -m 0777 "$H"
  printf 'root only\n' > "$WORK/victim"
  ln -s "$WORK/victim" "$H/registry.db"
  chown -h nobody "$H/registry.db"
  nobody_uid="uid $(id -u nobody) (nobody)"
  BDN_HOME="$H" run_fails 6 "warning: embedded store $H: was readable by other users (mode 0777); changed to 0700
bdn: error: embedded store $H/registry.db: a symlink owned by $nobody_uid, not by this user (uid 0); use a directory of your own" \
    "$BDN" volume push "$WORK/src" bdn:t/v
  assert_eq "root only" "$(cat "$WORK/victim")" "the symlink's target"
  [ ! -e "$H/store" ] || fail "a store was created in the refused home"
  # Once tightened the directory is not looked through again; the registry's own check refuses it.
  BDN_HOME="$H" run_fails 6 "bdn: error: registry $H/registry.db: a symlink owned by $nobody_uid, not by this user (uid 0); use a directory of your own" \
    "$BDN" volume push "$WORK/src" bdn:t/v
  assert_eq "root only" "$(cat "$WORK/victim")" "the symlink's target"

  step "BDN_HOME through another user's symlink, or below another user's directory, is refused"
  mkdir -m 0755 "$WORK/etc"
  ln -s "$WORK/etc" "$WORK/link"
  chown -h nobody "$WORK/link"
  BDN_HOME="$WORK/link" run_fails 6 "bdn: error: embedded store $WORK/link: $WORK/link is a symlink owned by $nobody_uid, not by this user (uid 0) or root; use a path of your own" \
    "$BDN" volume push "$WORK/etc" bdn:w/v
  # A command that only reads finds no store there, and makes none.
  BDN_HOME="$WORK/link" run_fails 3 "bdn: error: embedded store $WORK/link: no store there (nothing was pushed to it); --home or BDN_HOME names another" \
    "$BDN" volume ls
  assert_eq "" "$(ls -A "$WORK/etc")" "what a read through the symlink made in the directory it names"
  assert_eq 755 "$(stat -c %a "$WORK/etc")" "mode of the directory the symlink names"
  mkdir "$WORK/theirs"; chown nobody "$WORK/theirs"
  # (a node cache that cannot be used costs speed, not the mount)
  err=$(env BDN_REMOTE="$STARTED_URL" BDN_TOKEN="$token" "$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/theirs/nc" 2>&1 >/dev/null)
  MOUNTS+=("$WORK/mnt")
  assert_eq "warning: node cache $WORK/theirs/nc: $WORK/theirs, a directory above it, is owned by $nobody_uid, not by this user (uid 0) or root, who could replace what is in it; use a directory of your own; mounting without the node cache (every read goes to the origin)" "$err" "mount warning"
  "$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()
  [ ! -e "$WORK/theirs/nc" ] || fail "a node cache was created below another user's directory"
fi
echo "PASS"
