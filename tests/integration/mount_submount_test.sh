#!/usr/bin/env bash
# A file system mounted below a bdn mount (a tmpfs on one of the version's directories): umount
# of the bdn mount refuses, naming it, both while the daemon answers and while it is stopped. A
# stopped daemon's mount was detached lazily (MNT_DETACH), which took the tmpfs and its data
# along.
source "$(dirname "$0")/lib.sh"
needs_fuse
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: mounting a tmpfs needs root; $TEST_NAME mounts one below a bdn mount"
  exit 77
fi
mkdir -p "$WORK/src/d"; printf 'alpha\n' > "$WORK/src/d/f.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:w/sub 2>/dev/null)
MP="$WORK/mnt"
pid=$("$BDN" volume mount "$ref" "$MP" --json | json_field daemon_pid)
MOUNTS+=("$MP"); PIDS+=("$pid")
mount -t tmpfs -o size=1m tmpfs "$MP/d"
cleanup_tmpfs() { umount "$MP/d" 2>/dev/null || true; }
trap 'cleanup_tmpfs; cleanup' EXIT
printf 'precious\n' > "$MP/d/data"
# The tmpfs, held open: a path through the bdn mount's root needs that root's attributes once
# they are a second old (default_permissions), which a stopped daemon never answers; the walk
# through this descriptor does not. (CI's run hung on `cat "$MP/d/data"` there under load.)
exec 3<"$MP/d"
below="bdn: error: mountpoint $MP: busy: $MP/d is mounted below it (unmount that first)"

step "umount with a daemon that answers names the mount below"
run_fails 8 "$below" "$BDN" volume umount "$MP"

step "umount with a stopped daemon refuses too, and the tmpfs keeps its data"
kill -STOP "$pid"
run_fails 8 "$below" timeout 60 "$BDN" volume umount "$MP"
assert_eq precious "$(cat /dev/fd/3/data)" "the tmpfs after the refused umount"
kill -CONT "$pid"
exec 3<&-

step "once the tmpfs is gone, umount works"
umount "$MP/d"
assert_eq "unmounted $MP" "$("$BDN" volume umount "$MP")" "umount"
assert_absent "$MP fuse.bdn" "mount table after the umount" /proc/self/mounts
echo "PASS"
