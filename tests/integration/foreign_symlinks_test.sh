#!/usr/bin/env bash
# From an attacking helper (root runs bdn; mallory, uid 1001, attacks; fs.protected_symlinks=0):
# root's pull wrote into whatever directory mallory's symlink in a shared directory named (a
# trailing slash, or her link before the last component, got past the check of the last
# component), root's push sealed the root-only directory her link named, and a --cache-dir
# pointed at a chunk store evicted the store's packs as cache regions (at a copy of its packs/,
# too; at a directory with a tmp/ and a state of its own, those were deleted). Each is refused with
# the exact message, and what the links name is left as it was.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE
if [ "$(id -u)" != 0 ] || ! id mallory >/dev/null 2>&1; then
  echo "SKIP: needs root and the user mallory (another user's symlinks)"
  exit 77
fi
chmod 0755 "$WORK"  # mallory must reach the shared directory
shared="$WORK/shared"
mkdir -m 1777 "$shared"  # like /tmp
as_mallory() { runuser -u mallory -- "$@"; }
mallory="uid $(id -u mallory) (mallory)"
# listing DIR: every path below DIR with its type, mode, owner, size and mtime.
listing() { find "$1" -printf '%P %y %m %u %s %T@\n' | LC_ALL=C sort; }

# Root's private directory, holding names the version has too (a file and a directory).
victim="$WORK/victim"
mkdir -m 0700 "$victim" "$victim/sub"
printf 'root only\n' > "$victim/a.txt"
printf 'root only too\n' > "$victim/sub/b.txt"
chmod 0600 "$victim/a.txt" "$victim/sub/b.txt"
before=$(listing "$victim")
mkdir -p "$WORK/src/sub"
printf 'version\n' > "$WORK/src/a.txt"
printf 'version too\n' > "$WORK/src/sub/b.txt"
chmod 0755 "$WORK/src/sub"
"$BDN" volume push "$WORK/src" bdn:t/m --tag prod >/dev/null 2>&1

step "pull: mallory's symlink as the destination with a trailing slash is refused"
as_mallory ln -s "$victim" "$shared/models"
for flags in "" --overwrite; do
  # shellcheck disable=SC2086
  run_fails 8 "bdn: error: directory \"$shared/models/\": $shared/models is a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is where the files go" \
    "$BDN" volume pull bdn:t/m:prod "$shared/models/" $flags
  run_fails 8 "bdn: error: directory \"$shared/models\": a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is where the files go" \
    "$BDN" volume pull bdn:t/m:prod "$shared/models" $flags
done
assert_eq "$before" "$(listing "$victim")" "the victim directory after the pulls"

step "pull: mallory's symlink before the last component is refused, nothing made there"
for below in x sub; do
  run_fails 8 "bdn: error: directory \"$shared/models/$below\": $shared/models is a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is where the files go" \
    "$BDN" volume pull bdn:t/m:prod "$shared/models/$below" --overwrite
done
assert_eq "$before" "$(listing "$victim")" "the victim directory after the pulls below the link"

step "pull: root's own symlink in the shared directory is followed"
mkdir -m 0700 "$WORK/mine"
ln -s "$WORK/mine" "$shared/roots"
"$BDN" volume pull bdn:t/m:prod "$shared/roots/" >/dev/null 2>&1
cmp "$WORK/src/a.txt" "$WORK/mine/a.txt" || fail "pull through root's own symlink"
"$BDN" volume pull bdn:t/m:prod "$shared/roots/deeper" >/dev/null 2>&1
cmp "$WORK/src/sub/b.txt" "$WORK/mine/deeper/sub/b.txt" || fail "pull below root's own symlink"

step "push: mallory's symlink to a root-only directory is refused, nothing sealed"
as_mallory ln -s "$victim" "$shared/model"
run_fails 8 "bdn: error: directory \"$shared/model\": a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is the one you mean" \
  "$BDN" volume push "$shared/model" bdn:t/stolen
run_fails 8 "bdn: error: directory \"$shared/model/\": $shared/model is a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is the one you mean" \
  "$BDN" volume push "$shared/model/" bdn:t/stolen
assert_eq "$before" "$(listing "$victim")" "the victim directory after the pushes"
assert_eq "bdn:t/m" "$("$BDN" volume ls bdn:t)" "volumes of t"

step "a --cache-dir that is a chunk store's directory is refused, the store left whole"
store="$BDN_HOME/store"
store_before=$(listing "$store")
# (cache serve opens its cache before it asks the upstream anything)
run_fails 8 "bdn: error: node cache $store: holds gc, which is not the node cache's; give an empty directory or one the node cache made" \
  "$BDN" cache serve --upstream http://127.0.0.1:9 --listen 127.0.0.1:0 --cache-dir "$store" --cache-size 64K
run_fails 8 "bdn: error: node cache $BDN_HOME: holds locks, which is not the node cache's; give an empty directory or one the node cache made" \
  "$BDN" cache serve --upstream http://127.0.0.1:9 --listen 127.0.0.1:0 --cache-dir "$BDN_HOME" --cache-size 64K
assert_eq "$store_before" "$(listing "$store")" "the store after the refused caches"
"$BDN" volume pull bdn:t/m:prod "$WORK/again" >/dev/null 2>&1
cmp "$WORK/src/a.txt" "$WORK/again/a.txt" || fail "the store still serves"

step "a --cache-dir of someone's work (lost+found, tmp/, state) or a copy of a store's packs/ is refused, left as it was"
someones="$WORK/someones"
mkdir -m 0755 "$someones" "$someones/lost+found" "$someones/tmp" "$someones/tmp/project"
printf 'a,b\n1,2\n' > "$someones/tmp/project/results.csv"
printf 'running\n' > "$someones/state"
backup="$WORK/backup"
mkdir -m 0755 "$backup"
cp -a "$store/packs" "$backup/packs"
chmod 0755 "$backup/packs"
for dir in "$someones" "$backup"; do
  dir_before=$(listing "$dir"); sums_before=$(cd "$dir" && find . -type f -exec b3sum {} + | LC_ALL=C sort)
  [ "$dir" = "$someones" ] && name=state || name=packs
  run_fails 8 "bdn: error: node cache $dir: holds $name, which is not the node cache's; give an empty directory or one the node cache made" \
    "$BDN" cache serve --upstream http://127.0.0.1:9 --listen 127.0.0.1:0 --cache-dir "$dir" --cache-size 64K
  assert_eq "$dir_before" "$(listing "$dir")" "$dir after the refused cache"
  assert_eq "$sums_before" "$(cd "$dir" && find . -type f -exec b3sum {} + | LC_ALL=C sort)" "the bytes in $dir"
done

step "mount: mallory's symlink as the mountpoint or before it is refused, nothing mounted"
needs_fuse
# (a version mounted over root's directory would hide what is in it until the umount)
MOUNTS+=("$victim" "$victim/sub")  # unmounted at exit should a refusal fail
for mp in "$shared/models" "$shared/models/" "$shared/models/sub"; do
  if [ "$mp" = "$shared/models" ]; then
    what="a symlink owned by $mallory"
  else
    what="$shared/models is a symlink owned by $mallory"
  fi
  run_fails 8 "bdn: error: mountpoint $mp: $what, not by this user or root; give the directory it names (\"$victim\") if that is where to mount" \
    "$BDN" volume mount bdn:t/m:prod "$mp"
done
assert_absent "bdn:t/m" "mounts" /proc/self/mounts
assert_eq "$before" "$(listing "$victim")" "the victim directory after the mounts"
as_mallory ln -s "$victim" "$shared/mnt-root"
run_fails 8 "bdn: error: mountpoint $shared/mnt-root/new/deep: $shared/mnt-root is a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is where to mount" \
  "$BDN" volume mount bdn:t/m:prod "$shared/mnt-root/new/deep"
[ ! -e "$victim/new" ] || fail "the mount made $victim/new through mallory's link"
step "mount: root's own symlink in the shared directory is followed, missing directories made"
"$BDN" volume mount bdn:t/m:prod "$shared/roots/mnt/deep" >/dev/null 2>&1
MOUNTS+=("$WORK/mine/mnt/deep")
cmp "$WORK/src/a.txt" "$WORK/mine/mnt/deep/a.txt" || fail "mount through root's own symlink"
"$BDN" volume umount "$shared/roots/mnt/deep" >/dev/null
echo "PASS"
