#!/usr/bin/env bash
# A full disk gives its space back (docs/format.md "Garbage collection", README "Full disks"): a
# push that fills the store's disk removes the partial packs it was writing, so the disk is as
# free as before it and the registry takes writes again; and bdn gc runs on a disk with no byte
# free (its doom goes into gc/doomed.reserve), reclaiming what no version needs; a gc that must
# also repack deletes the packs no version needs and removes its partial copies when the disk
# fills, and never writes through another name of its reserve.
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

step "gc on a full disk that must also repack: deletes the dead packs, leaves no partial pack"
umount "$small"
mount_small_tmpfs 40m
export BDN_HOME="$small/home"
mkdir -p "$WORK/r1" "$WORK/r2" "$WORK/dead"
for i in $(seq 10 49); do
  random_file "$WORK/r1/f$i" 300000 "$i"
  if [ $((i % 2)) = 0 ]; then cp "$WORK/r1/f$i" "$WORK/r2/f$i"; fi
done
random_file "$WORK/dead/z" 8000000 13
# r1's packs hold the files of r2 and as many others: with --max-repack-fraction 1 each is
# repacked (6 MB to copy, far more than the reserve gives back), and dead's packs are deleted.
"$BDN" volume push "$WORK/r1" bdn:f/r >/dev/null
r2=$("$BDN" volume push "$WORK/r2" bdn:f/r2 --json | json_field digest)
"$BDN" volume push "$WORK/dead" bdn:f/dead >/dev/null
"$BDN" volume rm --yes --recursive bdn:f/r >/dev/null
"$BDN" volume rm --yes --recursive bdn:f/dead >/dev/null
plan=$("$BDN" gc --grace 0s --max-repack-fraction 1 --dry-run --json)
# "<kind> <pack> <bytes> <needed bytes>" per action.
actions=$(python3 -c 'import json,sys
for a in json.load(sys.stdin)["actions"]:
  print(a["action"], a["pack"], a["bytes"], a["needed_bytes"])' <<<"$plan")
echo "$actions"
repacks=$(grep -c '^repack ' <<<"$actions") || true
deletes=$(grep -c '^delete ' <<<"$actions") || true
[ "$repacks" -ge 1 ] && [ "$deletes" -ge 1 ] || fail "not both to repack and to delete: $actions"
repack_ids=$(awk '$1 == "repack" {print $2}' <<<"$actions" | paste -sd '|')
to_copy=$(awk '$1 == "repack" {n += $4} END {print n}' <<<"$actions")
[ "$to_copy" -ge 4000000 ] || fail "only $to_copy bytes to copy: $actions"
dead_bytes=$(awk '$1 == "delete" {n += $3} END {print n}' <<<"$actions")
freed=$(python3 -c 'import sys; v = int(sys.argv[1]); u = 0
while v >= 1024 and u < 4: v /= 1024; u += 1
print("%.2f %s" % (v, ["B", "KiB", "MiB", "GiB", "TiB"][u]) if u else "%d B" % v)' "$dead_bytes")
kept_packs=$(ls "$BDN_HOME/store/packs" | grep -v -F -f <(awk '$1 == "delete" {print $2 ".pack"}' <<<"$actions"))
cat /dev/zero > "$small/filler" 2>/dev/null || true
assert_eq 0 "$(free_bytes)" "free bytes before gc"
rc=0; err=$("$BDN" gc --grace 0s --max-repack-fraction 1 2>&1 >/dev/null) || rc=$?
echo "$err"
assert_eq 8 "$rc" "exit code of a gc whose repack fills the disk"
deleted=$([ "$deletes" = 1 ] && echo "1 pack" || echo "$deletes packs")
kept=$([ "$repacks" = 1 ] && echo "1 pack to repack was" || echo "$repacks packs to repack were")
re='^bdn: error: gc: repack ('"$repack_ids"'): chunk b3:[0-9a-f]{64}: pack '"$BDN_HOME"'/store/packs/[0-9a-f]{16}\.open: write: No space left on device; the disk is full: deleted only the '"$deleted"' no version needs \('"$freed"' freed\); '"$kept"' kept \(the copies made were removed\): run gc again to repack$'
[[ "$err" =~ $re ]] || fail "the message of the gc that filled the disk: $err"
# The dead packs are gone, those to repack are there, no partial copy is left (sealed or not).
assert_eq "$kept_packs" "$(ls "$BDN_HOME/store/packs")" "the packs after the gc"
[ ! -e "$BDN_HOME/store/gc/doomed" ] || fail "gc left its doom behind"
[ ! -e "$BDN_HOME/store/gc/.doomed.tmp" ] || fail "gc left its temporary doom behind"
assert_eq 262144 "$(stat -c %s "$BDN_HOME/store/gc/doomed.reserve")" "the doom reserve, made again"
[ "$(free_bytes)" -ge $((dead_bytes - 262144 - 65536)) ] ||
  fail "gc freed only $(free_bytes) bytes of the dead packs' $dead_bytes"
"$BDN" volume verify "bdn:f/r2@$r2" >/dev/null || fail "r2 after the gc that filled the disk"
rm -f "$small/filler"
out=$("$BDN" gc --grace 0s --max-repack-fraction 1 --json) || fail "gc once space is back: $out"
assert_eq "$repacks" "$(json_field packs_repacked <<<"$out")" "packs repacked by the second gc"
assert_eq "$repacks" "$(json_field packs_deleted <<<"$out")" "packs deleted by the second gc"
[ -z "$(ls "$BDN_HOME/store/packs" | grep -E "$repack_ids")" ] || fail "a repacked pack is still there"
"$BDN" volume verify "bdn:f/r2@$r2" >/dev/null || fail "r2 after the repack"
"$BDN" fsck >/dev/null || fail "fsck after the repack: $("$BDN" fsck)"
plan=$("$BDN" gc --grace 0s --max-repack-fraction 1 --dry-run --json)
assert_eq "[]" "$(json_field actions <<<"$plan")" "what a third gc would do"

step "gc never writes through another name of its doom reserve (a hard link)"
random_file "$small/victim" 300000 14
cp "$small/victim" "$WORK/victim.orig"
rm "$BDN_HOME/store/gc/doomed.reserve"
ln "$small/victim" "$BDN_HOME/store/gc/doomed.reserve"
"$BDN" volume push "$WORK/dead" bdn:f/dead2 >/dev/null
"$BDN" volume rm --yes --recursive bdn:f/dead2 >/dev/null
out=$("$BDN" gc --grace 0s --json) || fail "gc with a hard-linked reserve: $out"
[ "$(json_field packs_deleted <<<"$out")" -ge 1 ] || fail "gc with a hard-linked reserve deleted nothing: $out"
cmp "$small/victim" "$WORK/victim.orig" || fail "gc wrote into the reserve's other name"
assert_eq 1 "$(stat -c %h "$small/victim")" "links of the other file after gc"
assert_eq "1 262144" "$(stat -c '%h %s' "$BDN_HOME/store/gc/doomed.reserve")" "the new reserve"
"$BDN" volume verify "bdn:f/r2@$r2" >/dev/null || fail "r2 after the last gc"
"$BDN" fsck >/dev/null || fail "fsck after the last gc: $("$BDN" fsck)"
echo PASS
