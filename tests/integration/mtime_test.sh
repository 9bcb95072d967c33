#!/usr/bin/env bash
# Modification times: a version pushed without --preserve-mtime shows its creation time in a
# mount (every entry and the root; was 1970-01-01), through volume mount, mounts apply and an
# origin; a version pushed with --preserve-mtime is pulled with the recorded mtimes of files,
# symlinks and directories (also when the files were already there), and shows them mounted.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_REMOTE

mkdir -p "$WORK/src/dir"
printf 'one\n' > "$WORK/src/dir/a.txt"
printf 'two\n' > "$WORK/src/b.txt"
ln -s dir/a.txt "$WORK/src/link"
# mtimes_of DIR: "mtime path" for every entry below DIR (symlinks themselves), sorted.
mtimes_of() { (cd "$1" && find . -mindepth 1 -printf '%T@ %p\n' | sort -k2); }
# created_s REF: the version's creation time in whole seconds.
created_s() { date -d "$("$BDN" --json volume stat "$1" | json_field created)" +%s; }
# assert_all_mtimes DIR SECONDS WHAT: DIR and every entry below it show SECONDS.
assert_all_mtimes() {
  local want
  want=$( (cd "$1" && find . -printf "$2 %p\n" | sort -k2) )
  assert_eq "$want" "$( (cd "$1" && find . -printf '%T@ %p\n' | sed 's/\.[0-9]* / /' | sort -k2) )" "$3"
}

step "without --preserve-mtime a mount shows the version's creation time, not 1970"
ref=$("$BDN" volume push "$WORK/src" bdn:t/plain 2>/dev/null)
created=$(created_s "$ref")
[ "$created" -gt 1600000000 ] || fail "creation time $created"
mount_volume "$ref" "$WORK/mnt"
assert_all_mtimes "$WORK/mnt" "$created" "mtimes in a mount of a version without mtimes"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()

step "the same through mounts apply"
cat > "$WORK/config.yaml" <<YAML
bdn:
  mounts:
    - source: $ref
      path: $WORK/mnt-cfg
YAML
"$BDN" mounts apply -f "$WORK/config.yaml" >/dev/null
MOUNTS+=("$WORK/mnt-cfg")
assert_all_mtimes "$WORK/mnt-cfg" "$created" "mtimes in a mount made by mounts apply"
"$BDN" volume umount "$WORK/mnt-cfg" >/dev/null; MOUNTS=()

step "with --preserve-mtime, pull restores the recorded mtimes of files, symlinks and directories"
touch -d '2001-02-03 04:05:06.123456789' "$WORK/src/dir/a.txt"
touch -d '2002-03-04 05:06:07.5' "$WORK/src/b.txt"
touch -h -d '2003-04-05 06:07:08' "$WORK/src/link"
touch -d '1999-12-31 23:59:59.25' "$WORK/src/dir"
want=$(mtimes_of "$WORK/src")
mref=$("$BDN" volume push "$WORK/src" bdn:t/mtimes --preserve-mtime 2>/dev/null)
"$BDN" volume pull "$mref" "$WORK/out" >/dev/null 2>&1
assert_eq "$want" "$(mtimes_of "$WORK/out")" "mtimes after pull"
# Files already in place (a resumed pull) get their recorded mtimes back too.
touch "$WORK/out/b.txt" "$WORK/out/dir/a.txt"; touch -h "$WORK/out/link"
"$BDN" volume pull "$mref" "$WORK/out" >/dev/null 2>&1
assert_eq "$want" "$(mtimes_of "$WORK/out")" "mtimes after pulling over the same files"
mount_volume "$mref" "$WORK/mnt"
assert_eq "$want" "$(mtimes_of "$WORK/mnt")" "recorded mtimes in a mount"
"$BDN" volume umount "$WORK/mnt" >/dev/null; MOUNTS=()

step "through an origin: creation time in a remote mount, recorded mtimes in a remote pull"
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
export BDN_REMOTE=$STARTED_URL
rref=$("$BDN" volume push "$WORK/src" bdn:t/remote 2>/dev/null)
rcreated=$(created_s "$rref")
"$BDN" volume mount "$rref" "$WORK/rmnt" --cache-dir "$WORK/nc" >/dev/null
MOUNTS+=("$WORK/rmnt")
assert_all_mtimes "$WORK/rmnt" "$rcreated" "mtimes in a remote mount of a version without mtimes"
"$BDN" volume umount "$WORK/rmnt" >/dev/null; MOUNTS=()
rmref=$("$BDN" volume push "$WORK/src" bdn:t/remote-mtimes --preserve-mtime 2>/dev/null)
"$BDN" volume pull "$rmref" "$WORK/rout" >/dev/null 2>&1
assert_eq "$want" "$(mtimes_of "$WORK/rout")" "mtimes after a remote pull"
echo "PASS"
