#!/usr/bin/env bash
# Other users and a mount: without --allow-other, a user other than the mounting one (nobody)
# cannot read anything; with it (volume mount --allow-other, or allow_other: true in bdn.mounts,
# embedded and through --remote) nobody reads a 0644 file and gets EACCES on a 0600 one. A user
# other than root without user_allow_other in /etc/fuse.conf is told exactly that.
source "$(dirname "$0")/lib.sh"
needs_fuse
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mounts as root, reads as nobody)"; exit 77; }

# as_nobody CMD...: runs CMD as nobody:nogroup with no supplementary groups.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# nobody reads the mount, so every directory above it must be traversable by nobody.
chmod 0755 "$WORK"

mkdir -p "$WORK/src/sub"
printf 'for everyone\n' > "$WORK/src/public.txt"
printf 'owner only\n' > "$WORK/src/secret.txt"
printf 'nested\n' > "$WORK/src/sub/n.txt"
chmod 0755 "$WORK/src" "$WORK/src/sub"
chmod 0644 "$WORK/src/public.txt" "$WORK/src/sub/n.txt"
chmod 0600 "$WORK/src/secret.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:test/shared)

# check_shared DIR: nobody reads the 0644 files and is refused the 0600 one.
check_shared() {
  assert_eq "for everyone" "$(as_nobody cat "$1/public.txt")" "public.txt as nobody"
  assert_eq "nested" "$(as_nobody cat "$1/sub/n.txt")" "sub/n.txt as nobody"
  run_fails 1 "cat: $1/secret.txt: Permission denied" as_nobody cat "$1/secret.txt"
  assert_eq "owner only" "$(cat "$1/secret.txt")" "secret.txt as root"
  assert_eq "$(printf 'public.txt\nsecret.txt\nsub')" "$(as_nobody ls "$1")" "ls as nobody"
}
# fuse_options DIR: the super options of the mount at DIR (allow_other shows there).
fuse_options() { findmnt -n -o FS-OPTIONS --mountpoint "$1"; }

step "without --allow-other nobody cannot read at all"
mount_volume "$ref" "$WORK/mnt/plain"
assert_eq "for everyone" "$(cat "$WORK/mnt/plain/public.txt")" "public.txt as root"
run_fails 1 "cat: $WORK/mnt/plain/public.txt: Permission denied" as_nobody cat "$WORK/mnt/plain/public.txt"
run_fails 2 "ls: cannot access '$WORK/mnt/plain': Permission denied" as_nobody ls "$WORK/mnt/plain"
[[ ",$(fuse_options "$WORK/mnt/plain")," != *,allow_other,* ]] || fail "plain mount has allow_other"

step "volume mount --allow-other: 0644 readable by nobody, 0600 not"
out=$("$BDN" volume mount "$ref" "$WORK/mnt/shared" --allow-other --json)
MOUNTS+=("$WORK/mnt/shared")
assert_eq true "$(json_field allow_other <<<"$out")" "allow_other in --json"
check_shared "$WORK/mnt/shared"
[[ ",$(fuse_options "$WORK/mnt/shared")," == *,default_permissions,*allow_other,* ]] \
  || fail "shared mount options: $(fuse_options "$WORK/mnt/shared")"

step "another user's umount of root's mounts is refused, naming whose they are; they stay"
for m in shared plain; do
  run_fails 6 "bdn: error: mountpoint $WORK/mnt/$m: mounted by uid 0 (root), not by this user (uid 65534 (nobody)): only that user or root can unmount it" \
    as_nobody env -u BDN_HOME "$BDN" volume umount "$WORK/mnt/$m"
  assert_eq "for everyone" "$(cat "$WORK/mnt/$m/public.txt")" "public.txt of $m after nobody's umount"
done
"$BDN" volume umount "$WORK/mnt/shared" >/dev/null
"$BDN" volume umount "$WORK/mnt/plain" >/dev/null
MOUNTS=()

step "mounts apply with allow_other: true, through --remote"
start_origin
rref=$("$BDN" volume push "$WORK/src" bdn:test/shared)
cat > "$WORK/config.yaml" <<YAML
bdn:
  mounts:
    - source: $rref
      path: $WORK/mnt/cfg
      allow_other: true
    - source: $rref
      path: $WORK/mnt/cfg-plain
      allow_other: false
YAML
chmod 0644 "$WORK/config.yaml"
out=$("$BDN" mounts apply -f "$WORK/config.yaml")
MOUNTS+=("$WORK/mnt/cfg" "$WORK/mnt/cfg-plain")
assert_eq "$(printf '%s mounted at %s\n%s mounted at %s' "$rref" "$WORK/mnt/cfg" "$rref" "$WORK/mnt/cfg-plain")" "$out" "apply output"
check_shared "$WORK/mnt/cfg"
run_fails 1 "cat: $WORK/mnt/cfg-plain/public.txt: Permission denied" as_nobody cat "$WORK/mnt/cfg-plain/public.txt"
out=$("$BDN" mounts apply -f "$WORK/config.yaml")
assert_eq "$(printf '%s already mounted at %s\n%s already mounted at %s' "$rref" "$WORK/mnt/cfg" "$rref" "$WORK/mnt/cfg-plain")" "$out" "second apply"

step "a mount whose allow_other differs from the config is refused, before anything is mounted"
cat > "$WORK/flip.yaml" <<YAML
bdn:
  mounts:
    - source: $rref
      path: $WORK/mnt/new
    - source: $rref
      path: $WORK/mnt/cfg
YAML
run_fails 8 "bdn: error: $WORK/flip.yaml:5: mountpoint $WORK/mnt/cfg: already a bdn mount of $rref with allow_other, the config says allow_other: false; unmount it first (bdn volume umount $WORK/mnt/cfg), or apply with --replace" \
  "$BDN" mounts apply -f "$WORK/flip.yaml"
[ -z "$(findmnt -n --mountpoint "$WORK/mnt/new")" ] || fail "a refused apply mounted $WORK/mnt/new"
# With --replace the same version is mounted again without allow_other, and said so (it said
# "(replacing" the very ref it printed).
assert_eq "$(printf '%s mounted at %s\n%s mounted at %s (replacing its mount with allow_other)' "$rref" "$WORK/mnt/new" "$rref" "$WORK/mnt/cfg")" \
  "$("$BDN" mounts apply -f "$WORK/flip.yaml" --replace)" "apply --replace of allow_other alone"
[[ "$(findmnt -n -o OPTIONS --mountpoint "$WORK/mnt/cfg")" != *allow_other* ]] || fail "allow_other still on after --replace"
"$BDN" volume umount "$WORK/mnt/new" >/dev/null

step "allow_other must be a boolean"
cat > "$WORK/bad.yaml" <<YAML
bdn:
  mounts:
    - source: $rref
      path: $WORK/mnt/x
      allow_other: sometimes
YAML
run_fails 2 "bdn: error: $WORK/bad.yaml:5: mounts[0].allow_other \"sometimes\": must be true or false" \
  "$BDN" mounts apply -f "$WORK/bad.yaml"
"$BDN" volume umount "$WORK/mnt/cfg" >/dev/null
"$BDN" volume umount "$WORK/mnt/cfg-plain" >/dev/null
MOUNTS=()

step "as a user other than root, allow_other needs user_allow_other in /etc/fuse.conf"
mkdir -p "$WORK/nobody-home" "$WORK/mnt/by-nobody"
chown nobody:nogroup "$WORK/nobody-home" "$WORK/mnt/by-nobody"
# fusermount3's rule: a line that is user_allow_other once comments and blanks are dropped.
allowed=$(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' /etc/fuse.conf 2>/dev/null | grep -cx user_allow_other || true)
if [ "$allowed" != 0 ] && ! as_nobody test -r /dev/fuse -a -w /dev/fuse; then
  echo "note: /etc/fuse.conf has user_allow_other here, but nobody cannot open /dev/fuse: no check"
elif [ "$allowed" != 0 ]; then
  echo "note: /etc/fuse.conf has user_allow_other here; checking that nobody may use it"
  BDN_HOME="$WORK/nobody-home" as_nobody "$BDN" volume mount "$rref" "$WORK/mnt/by-nobody" --allow-other >/dev/null
  MOUNTS+=("$WORK/mnt/by-nobody")
  assert_eq "for everyone" "$(cat "$WORK/mnt/by-nobody/public.txt")" "root reads nobody's mount"
  BDN_HOME="$WORK/nobody-home" as_nobody "$BDN" volume umount "$WORK/mnt/by-nobody" >/dev/null
  MOUNTS=()
else
  uid=$(id -u nobody)
  BDN_HOME="$WORK/nobody-home" run_fails 6 \
    "bdn: error: --allow-other: allow_other: not permitted for uid $uid: /etc/fuse.conf has no user_allow_other line (needed when not mounting as root)" \
    as_nobody "$BDN" volume mount "$rref" "$WORK/mnt/by-nobody" --allow-other
  BDN_HOME="$WORK/nobody-home" run_fails 6 \
    "bdn: error: $WORK/config.yaml:5: mounts[0].allow_other: allow_other: not permitted for uid $uid: /etc/fuse.conf has no user_allow_other line (needed when not mounting as root)" \
    as_nobody "$BDN" mounts apply -f "$WORK/config.yaml"
  [ -z "$(findmnt -n --mountpoint "$WORK/mnt/by-nobody")" ] || fail "nobody mounted something"
fi

step "a user who cannot open /dev/fuse is told so, with the permission exit code (6)"
# In a private mount namespace, /dev/fuse is covered by a copy of the device node only root may
# open, whatever the machine's own /dev/fuse allows.
mknod "$WORK/fuse-root-only" c 10 229
chmod 0600 "$WORK/fuse-root-only"
mkdir -m 0777 "$WORK/mnt-denied"
mkdir "$WORK/denied-home"
chown nobody "$WORK/denied-home"
chmod 0700 "$WORK/denied-home"
mkdir -m 0755 "$WORK/denied-src"
printf 'x\n' > "$WORK/denied-src/f"
chmod 0644 "$WORK/denied-src/f"
BDN_HOME="$WORK/denied-home" as_nobody "$BDN" volume push "$WORK/denied-src" bdn:test/denied >/dev/null 2>&1
rc=0
err=$(unshare -m --propagation private sh -c 'mount --bind "$1" /dev/fuse && shift && exec "$@"' sh \
  "$WORK/fuse-root-only" env BDN_HOME="$WORK/denied-home" setpriv --reuid=nobody --regid=nogroup \
  --clear-groups "$BDN" volume mount bdn:test/denied "$WORK/mnt-denied" 2>&1) || rc=$?
assert_eq 6 "$rc" "exit code of a mount without access to /dev/fuse"
assert_eq "bdn: error: mountpoint $WORK/mnt-denied: mount failed: fuse: failed to open /dev/fuse: Permission denied" \
  "$err" "stderr of a mount without access to /dev/fuse"
echo "PASS"
