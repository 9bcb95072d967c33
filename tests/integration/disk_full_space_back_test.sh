#!/usr/bin/env bash
# A full disk gives its space back (docs/format.md "Garbage collection", README "Full disks"): a
# push that fills the store's disk removes the partial packs it was writing, so the disk is as
# free as before it and the registry takes writes again; and bdn gc runs on a disk with no byte
# free (its doom goes into gc/doomed.reserve), reclaiming what no version needs.
source "$(dirname "$0")/lib.sh"

mount_small_tmpfs 24m
trap 'rc=$?; umount -l "$small" 2>/dev/null || true; (exit $rc); cleanup' EXIT

export BDN_HOME="$small/home"
export BDN_RETENTION=0s
free_bytes() { local n; n=$(df -B1 --output=avail "$small" | tail -n 1); echo $((n)); }
mkdir -p "$WORK/fits" "$WORK/big" "$WORK/gone"
random_file "$WORK/fits/a.bin" 6000000 1
random_file "$WORK/big/b.bin" 40000000 2   # more than the tmpfs holds
random_file "$WORK/gone/g.bin" 5000000 3

step "a push that fills the disk removes its partial packs and says what to do"
fits=$("$BDN" volume push "$WORK/fits" bdn:df/fits --json | json_field digest)
packs_before=$(ls "$BDN_HOME/store/packs")
free_before=$(free_bytes)
rc=0; err=$("$BDN" volume push "$WORK/big" bdn:df/big 2>&1 >/dev/null) || rc=$?
echo "$err"
assert_eq 8 "$rc" "exit code of a push that fills the disk"
re='^bdn: error: chunk b3:[0-9a-f]{64}: pack '"$BDN_HOME"'/store/packs/[0-9a-f]{16}\.open: write: No space left on device; the push'"'"'s ([0-9]+ partial packs were|partial pack was) removed; free space \(bdn gc reclaims unreferenced packs\) and push again$'
[[ "$err" =~ $re ]] || fail "the message of the failed push: $err"
assert_eq "$packs_before" "$(ls "$BDN_HOME/store/packs")" "the packs after the failed push"
free_after=$(free_bytes)
# What the failed push took is back (the registry's journal may keep a page or two).
[ "$free_after" -ge $((free_before - 65536)) ] ||
  fail "the failed push kept $((free_before - free_after)) bytes of $free_before"
"$BDN" volume tag set --volume-ref "bdn:df/fits@$fits" --tag t1 >/dev/null ||
  fail "a registry write after the failed push"
"$BDN" volume verify bdn:df/fits:t1 >/dev/null || fail "the version before does not verify"
"$BDN" fsck >/dev/null || fail "fsck after the failed push: $("$BDN" fsck)"

step "gc reclaims unreferenced packs on a disk with no byte free"
gone=$("$BDN" volume push "$WORK/gone" bdn:df/gone --json | json_field digest)
"$BDN" volume rm --yes --recursive bdn:df/gone >/dev/null
cat /dev/zero > "$small/filler" 2>/dev/null || true
assert_eq 0 "$(free_bytes)" "free bytes before gc"
out=$("$BDN" gc --grace 0s --json) || fail "gc on a full disk: $out"
[ "$(json_field packs_deleted <<<"$out")" -ge 1 ] || fail "gc deleted nothing: $out"
[ "$(free_bytes)" -ge 4000000 ] || fail "gc freed only $(free_bytes) bytes: $out"
[ ! -e "$BDN_HOME/store/gc/doomed" ] || fail "gc left its doom behind"
[ ! -e "$BDN_HOME/store/gc/.doomed.tmp" ] || fail "gc left its temporary doom behind"
"$BDN" volume verify "bdn:df/fits@$fits" >/dev/null || fail "fits after gc"
rm -f "$small/filler"
"$BDN" fsck >/dev/null || fail "fsck after gc: $("$BDN" fsck)"
[ -f "$BDN_HOME/store/gc/doomed.reserve" ] || fail "no doom reserve for the next gc"
echo "(the version $gone was reclaimed)"
echo PASS
