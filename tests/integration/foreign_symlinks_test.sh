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

# From an attacking helper: `bdn serve --log-file` accepted a log directory whoever owned it, then
# opened the file again by its path, so mallory swapping a directory on it for her symlink
# (renameat2 RENAME_EXCHANGE in a loop) had root chmod a root-only file 0600 and append its log
# to it; a FIFO of hers at the path took root's log (or blocked serve with no message).
step "serve --log-file: a FIFO is refused naming it, at once"
as_mallory mkfifo "$shared/f.log"
run_fails 8 "bdn: error: log file $shared/f.log: a FIFO is in the way (a log file is a regular file, or a character device such as /dev/null)" \
  timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --log-file "$shared/f.log"
owned_by_mallory="is owned by $mallory, not by this user (uid 0) or root, who could replace what is in it; use a directory of your own"

step "serve --log-file: a log directory of mallory's (or one above it) is refused naming it"
as_mallory mkdir -m 0755 "$shared/m"
for f in "$shared/m/rc" "$shared/m/sub/rc"; do
  run_fails 6 "bdn: error: log file $f: $shared/m, a directory above it, $owned_by_mallory" \
    timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --log-file "$f"
done
[ ! -e "$shared/m/rc" ] && [ ! -e "$shared/m/sub" ] || fail "root made a log file below mallory's directory"

step "serve --log-file: mallory swapping a directory on the path for her symlink touches no root file"
mkdir -m 0700 "$WORK/rootonly"
printf 'root only\n' > "$WORK/rootonly/rc"
chmod 0644 "$WORK/rootonly/rc"
rc_before=$(listing "$WORK/rootonly")
as_mallory mkdir "$shared/m/sub"
as_mallory ln -s "$WORK/rootonly" "$shared/m/link"
# (setpriv execs python itself, so that $! is the swapper, and kill stops it)
setpriv --reuid=mallory --regid=mallory --clear-groups /usr/bin/python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
end = time.monotonic() + 30
while time.monotonic() < end:
    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
' "$shared/m/sub" "$shared/m/link" &
swapper=$!
PIDS+=("$swapper")
deadline=$((SECONDS + 20))
for try in $(seq 1 200); do
  [ "$SECONDS" -lt "$deadline" ] || break
  run_fails 6 "bdn: error: log file $shared/m/sub/rc: $shared/m, a directory above it, $owned_by_mallory" \
    timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --log-file "$shared/m/sub/rc"
done
kill -0 "$swapper" 2>/dev/null || fail "mallory's swapper was not running"
kill "$swapper"; wait "$swapper" || true
echo "($try tries, each refused)"
assert_eq "$rc_before" "$(listing "$WORK/rootonly")" "root's file after the swaps"

step "serve --log-file: a file in /tmp, and /dev/null, still work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# serve_answers FILE: bdn serve logging to FILE answers /healthz, then is stopped; stderr in
# $WORK/serve-log.err.
serve_answers() {
  local port pid answered=""; port=$(free_port)
  "$BDN" serve --listen "127.0.0.1:$port" --data "$WORK/srv" --log-file "$1" 2>"$WORK/serve-log.err" &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 100); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; then answered=1; break; fi
    sleep 0.1
  done
  kill -TERM "$pid"; wait "$pid" || true
  [ -n "$answered" ] || fail "serve --log-file $1 did not answer: $(cat "$WORK/serve-log.err")"
  SERVED_PORT=$port
}
tmp_log=$(mktemp -u /tmp/bdn-log-XXXXXX)
serve_answers "$tmp_log"
assert_contains "$(cat "$tmp_log")" " info listening on http://127.0.0.1:$SERVED_PORT"
assert_eq "600 root" "$(stat -c '%a %U' "$tmp_log")" "mode and owner of $tmp_log"
assert_eq 1777 "$(stat -c %a /tmp)" "mode of /tmp"
rm -f "$tmp_log"
null_mode=$(stat -c %a /dev/null)
serve_answers /dev/null
assert_eq "" "$(cat "$WORK/serve-log.err")" "stderr of serve --log-file /dev/null"
assert_eq "$null_mode" "$(stat -c %a /dev/null)" "mode of /dev/null"

step "serve --log-file inside the server's own directory is refused, its files untouched"
# From an attacking helper: serve appended its log to its registry, its secret key or a pack
# (every later start then failed on the key's length; fsck found the pack's trailer gone).
cp "$WORK/srv/registry.db" "$WORK/registry.before"
for f in "$WORK/srv/registry.db" "$WORK/srv/store/new.log"; do
  run_fails 2 "bdn: error: --log-file $f: inside the data directory $WORK/srv, among its own files (give a path outside it)" \
    timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --log-file "$f"
done
cmp "$WORK/srv/registry.db" "$WORK/registry.before" || fail "the registry was written"
[ ! -e "$WORK/srv/store/new.log" ] || fail "a log file was made in the store"

step "pull into the embedded store through a bind mount of it elsewhere is refused, nothing made"
mkdir "$WORK/bind"
mount --bind "$BDN_HOME/store" "$WORK/bind"
MOUNTS+=("$WORK/bind")  # unmounted at exit should a check fail
store_before=$(listing "$BDN_HOME/store")
for dest in "$WORK/bind" "$WORK/bind/packs" "$WORK/bind/packs/new" "$WORK/bind/../bind/index/"; do
  run_fails 2 "bdn: error: directory \"$dest\": inside the embedded store $BDN_HOME (pull into a directory outside it, or give --home elsewhere)" \
    "$BDN" volume pull bdn:t/m:prod "$dest"
done
umount "$WORK/bind"; MOUNTS=()
assert_eq "$store_before" "$(listing "$BDN_HOME/store")" "the store after the refused pulls"

step "mount: mallory's symlink as the mountpoint or before it is refused, nothing mounted"
needs_fuse
# mounts_under DIR: the mountpoints at or below DIR (another test's mounts elsewhere do not count).
mounts_under() { awk -v p="$1" 'index($2, p) == 1 {print $2}' /proc/self/mounts; }
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
assert_eq "" "$(mounts_under "$WORK")" "mounts below $WORK"
assert_eq "$before" "$(listing "$victim")" "the victim directory after the mounts"
as_mallory ln -s "$victim" "$shared/mnt-root"
run_fails 8 "bdn: error: mountpoint $shared/mnt-root/new/deep: $shared/mnt-root is a symlink owned by $mallory, not by this user or root; give the directory it names (\"$victim\") if that is where to mount" \
  "$BDN" volume mount bdn:t/m:prod "$shared/mnt-root/new/deep"
[ ! -e "$victim/new" ] || fail "the mount made $victim/new through mallory's link"

step "mount: a mountpoint mallory owns, or one below a directory of hers, is refused"
# (mounted by path after the check, so she could swap either for her symlink in between: an
# attacking helper got root's mount over root's directory in 3 tries that way)
as_mallory mkdir -m 0755 "$shared/hers" "$shared/hers/below"
run_fails 6 "bdn: error: mountpoint $shared/hers: owned by $mallory, not by this user (uid 0) or root, who could replace it meanwhile; use a directory of your own" \
  "$BDN" volume mount bdn:t/m:prod "$shared/hers"
for mp in "$shared/hers/below" "$shared/hers/new"; do
  run_fails 6 "bdn: error: mountpoint $mp: $shared/hers, a directory above it, is owned by $mallory, not by this user (uid 0) or root, who could replace what is in it; use a directory of your own" \
    "$BDN" volume mount bdn:t/m:prod "$mp"
done
[ ! -e "$shared/hers/new" ] || fail "the mount made $shared/hers/new"
mkdir -m 0777 "$WORK/open"
run_fails 6 "bdn: error: mountpoint $WORK/open/mnt: $WORK/open, a directory above it, is writable by other users (mode 0777, no sticky bit), who could replace what is in it; use a directory of your own" \
  "$BDN" volume mount bdn:t/m:prod "$WORK/open/mnt"
assert_eq "" "$(mounts_under "$WORK")" "mounts below $WORK"

step "mount over a dead mount: the directory holding it is checked too"
# (the check of the mountpoint itself ran only where nothing was mounted: over a dead mount below
# a directory of mallory's, her renameat2 swap won the first try)
mkdir -m 0755 "$shared/d"
pid=$("$BDN" --json volume mount bdn:t/m:prod "$shared/d/mp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon_pid"])')
MOUNTS+=("$shared/d/mp")
kill -9 "$pid"
wait_gone "$pid" 10000
chown mallory "$shared/d"
run_fails 6 "bdn: error: mountpoint $shared/d/mp: $shared/d, a directory above it, is owned by $mallory, not by this user (uid 0) or root, who could replace what is in it; use a directory of your own" \
  "$BDN" volume mount bdn:t/m:prod "$shared/d/mp"
chown root "$shared/d"
chmod 1777 "$shared/d"
run_fails 6 "bdn: error: mountpoint $shared/d/mp: $shared/d, the directory holding it, may be written by other users (mode 1777); with a mount there its own owner cannot be checked: unmount it first, or use a directory of your own" \
  "$BDN" volume mount bdn:t/m:prod "$shared/d/mp"
chmod 0755 "$shared/d"
# From an attacking helper: with a trailing "/." the path as given was not checked, so mallory's
# symlink (in her directory) to root's dead mount decided where root's mount went.
mkdir -m 0755 "$shared/mal"; chown mallory "$shared/mal"
as_mallory ln -s "$shared/d/mp" "$shared/mal/l"
for p in "$shared/mal/l" "$shared/mal/l/." "$shared/mal/l/./"; do
  run_fails 6 "bdn: error: mountpoint $p: $shared/mal, a directory above it, is owned by $mallory, not by this user (uid 0) or root, who could replace what is in it; use a directory of your own" \
    "$BDN" volume mount bdn:t/m:prod "$p"
done
# A path below a dead mount names the mount to unmount (it was "detach dead mount: Transport
# endpoint is not connected", exit 1).
ref_m=$("$BDN" --json volume stat bdn:t/m | json_field head_ref)
run_fails 8 "bdn: error: mountpoint $shared/d/mp/sub: below $shared/d/mp, the fuse.bdn mount of $ref_m whose daemon is gone (Transport endpoint is not connected); unmount it first (bdn volume umount $shared/d/mp)" \
  "$BDN" volume mount bdn:t/m:prod "$shared/d/mp/sub"
"$BDN" volume mount bdn:t/m:prod "$shared/d/mp" >/dev/null 2>&1
cmp "$WORK/src/a.txt" "$shared/d/mp/a.txt" || fail "the mount over the dead mount"
"$BDN" volume umount "$shared/d/mp" >/dev/null
assert_eq "" "$(mounts_under "$WORK")" "mounts below $WORK"

step "mount over a dead mount: a group-writable directory counts as others' when another user has the group"
# From an attacking helper: this check took a group-writable directory as safe whenever the group
# was root's effective one, though mallory has it as her primary group and may write there.
mgid=$(id -g mallory)
as_egid() { setpriv --regid="$mgid" --clear-groups "$@"; }
mkdir -m 0755 "$shared/g"
pid=$(as_egid "$BDN" --json volume mount bdn:t/m:prod "$shared/g/mp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon_pid"])')
MOUNTS+=("$shared/g/mp")
kill -9 "$pid"
wait_gone "$pid" 10000
chgrp "$mgid" "$shared/g"; chmod 1775 "$shared/g"
run_fails 6 "bdn: error: mountpoint $shared/g/mp: $shared/g, the directory holding it, may be written by other users (mode 1775); with a mount there its own owner cannot be checked: unmount it first, or use a directory of your own" \
  as_egid "$BDN" volume mount bdn:t/m:prod "$shared/g/mp"
# Root with another group is kept out of that mount by FUSE: said so (it was a bare EACCES).
run_fails 6 "bdn: error: mountpoint $shared/g/mp: the fuse.bdn mount there of $ref_m does not let this user in (a FUSE mount admits only the user who made it, unless made with allow_other); unmount it first (bdn volume umount $shared/g/mp)" \
  "$BDN" volume mount bdn:t/m:prod "$shared/g/mp"
umount -l "$shared/g/mp"
assert_eq "" "$(mounts_under "$WORK")" "mounts below $WORK"
echo "PASS"

step "mount: root's own symlink in the shared directory is followed, missing directories made"
"$BDN" volume mount bdn:t/m:prod "$shared/roots/mnt/deep" >/dev/null 2>&1
MOUNTS+=("$WORK/mine/mnt/deep")
cmp "$WORK/src/a.txt" "$WORK/mine/mnt/deep/a.txt" || fail "mount through root's own symlink"
"$BDN" volume umount "$shared/roots/mnt/deep" >/dev/null

step "mount --log-file: a FIFO or a directory of mallory's is refused with a warning; the mount logs nowhere"
for f in "$shared/f.log" "$shared/m/sub/mount.log"; do
  if [ "$f" = "$shared/f.log" ]; then
    why="a FIFO is in the way (a log file is a regular file, or a character device such as /dev/null)"
  else
    why="$shared/m, a directory above it, $owned_by_mallory"
  fi
  err=$(timeout 60 "$BDN" volume mount bdn:t/m:prod "$WORK/mnt-log" --log-file "$f" 2>&1 >/dev/null)
  MOUNTS+=("$WORK/mnt-log")
  assert_contains "$err" "warning: log file $f: $why; the mount daemon logs nowhere"
  cmp "$WORK/src/a.txt" "$WORK/mnt-log/a.txt" || fail "the mount with a refused --log-file"
  "$BDN" volume umount "$WORK/mnt-log" >/dev/null; MOUNTS=()
done
# From an attacking helper: /dev/fd/7, not opened by the shell, was whatever bdn had open as 7 by
# then (the store's gc/ directory): only a descriptor bdn started with is taken.
err=$(timeout 60 "$BDN" volume mount bdn:t/m:prod "$WORK/mnt-log" --log-file /dev/fd/7 2>&1 >/dev/null)
MOUNTS+=("$WORK/mnt-log")
assert_contains "$err" "warning: log file /dev/fd/7: descriptor 7 was not open when bdn started (open it in the shell, e.g. 9>>bdn.log, or give a file); the mount daemon logs nowhere"
"$BDN" volume umount "$WORK/mnt-log" >/dev/null; MOUNTS=()
# One the shell opened is taken, with no warning.
err=$(timeout 60 "$BDN" volume mount bdn:t/m:prod "$WORK/mnt-log" --log-file /dev/fd/7 7>>"$WORK/fd7.log" 2>&1 >/dev/null)
MOUNTS+=("$WORK/mnt-log")
assert_eq "" "$err" "mount with --log-file /dev/fd/7 opened by the shell"
cmp "$WORK/src/a.txt" "$WORK/mnt-log/a.txt" || fail "the mount logging to descriptor 7"
"$BDN" volume umount "$WORK/mnt-log" >/dev/null; MOUNTS=()
echo "PASS"
