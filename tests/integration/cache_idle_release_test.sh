#!/usr/bin/env bash
# Node cache regions another process evicts are let go by a process that sits idle: a mount
# daemon that reads nothing, and a `bdn cache serve` node that gets no request, close the
# evicted regions they held open within seconds (their disk space returns), where before they
# kept them until their next read. Both still read correctly afterwards.
source "$(dirname "$0")/lib.sh"
needs_fuse

# held PID DIR: how many descriptors of PID are open on region files of the node cache DIR;
# held_deleted PID DIR: how many of them are on files with no name left (evicted).
held() { find "/proc/$1/fd" -lname "$2/packs/*" 2>/dev/null | wc -l; }
held_deleted() { find "/proc/$1/fd" -lname "$2/packs/* (deleted)" 2>/dev/null | wc -l; }
# wait_released PID DIR WHAT: fails unless PID holds no evicted region of DIR within 10 s.
wait_released() {
  for _ in $(seq 1 100); do
    [ "$(held_deleted "$1" "$2")" -eq 0 ] && return 0
    sleep 0.1
  done
  fail "$3 still holds $(held_deleted "$1" "$2") evicted regions of $2 after 10 s idle:
$(find "/proc/$1/fd" -lname "$2/packs/*" -printf '%l\n' 2>/dev/null)"
}

step "start the origin and push two files, each larger than the node caches"
start_origin
mkdir -p "$WORK/src" "$WORK/m1" "$WORK/m2" "$WORK/m3" "$WORK/m4"
random_file "$WORK/src/a.bin" 6000000 31
random_file "$WORK/src/b.bin" 6000000 32
ref=$("$BDN" volume push "$WORK/src" bdn:test/idle)

step "an idle mount lets go of the regions another mount evicts"
NC="$WORK/nc"
pid1=$("$BDN" volume mount "$ref" "$WORK/m1" --cache-dir "$NC" --cache-size 4M \
  --memory-cache 1M --json | json_field daemon_pid)
MOUNTS+=("$WORK/m1")
cmp "$WORK/m1/a.bin" "$WORK/src/a.bin" || fail "a.bin through the first mount"
[ "$(held "$pid1" "$NC")" -gt 0 ] || fail "the first mount's daemon holds no region of $NC"
"$BDN" volume mount "$ref" "$WORK/m2" --cache-dir "$NC" --cache-size 4M --memory-cache 1M \
  >/dev/null
MOUNTS+=("$WORK/m2")
# 6 MB through a 4 MiB cache: every region the first daemon read from is evicted.
cmp "$WORK/m2/b.bin" "$WORK/src/b.bin" || fail "b.bin through the second mount"
wait_released "$pid1" "$NC" "the idle first mount"
# What it forgot is fetched again (O_DIRECT: the daemon answers, not the page cache).
dd if="$WORK/m1/a.bin" bs=1M iflag=direct status=none | cmp - "$WORK/src/a.bin" \
  || fail "a.bin through the first mount after"
(cd "$WORK/src" && b3sum a.bin b.bin) > "$WORK/sums"

step "an idle mount lets go of a region it followed while another mount filled it, once evicted"
# From an attacking helper: a region another process is filling is followed (read as it grows)
# through a descriptor of its own, which the idle check did not close.
NF="$WORK/nf"
mkdir -p "$WORK/m5" "$WORK/m6"
pid5=$("$BDN" volume mount "$ref" "$WORK/m5" --cache-dir "$NF" --cache-size 4M \
  --memory-cache 1M --json | json_field daemon_pid)
MOUNTS+=("$WORK/m5")
"$BDN" volume mount "$ref" "$WORK/m6" --cache-dir "$NF" --cache-size 4M --memory-cache 1M \
  >/dev/null
MOUNTS+=("$WORK/m6")
dd if="$WORK/m6/b.bin" of=/dev/null bs=4k count=1 iflag=direct status=none  # m6 starts a region
# By name only (compgen): m6's read-ahead may fill the region, seal it (its name loses .open) and
# start the next while this looks; an `ls` of a name the glob found could fail in between.
compgen -G "$NF/packs/*.open" >/dev/null || fail "no region being filled in $NF"
# A miss in m5: it looks again, and follows m6's region.
dd if="$WORK/m5/a.bin" bs=4k count=1 skip=500 iflag=direct status=none |
  cmp - <(dd if="$WORK/src/a.bin" bs=4k count=1 skip=500 status=none) || fail "4 KiB of a.bin"
cmp "$WORK/m6/b.bin" "$WORK/src/b.bin" || fail "b.bin through m6"
wait_released "$pid5" "$NF" "the idle mount that followed a region"
dd if="$WORK/m5/a.bin" bs=1M iflag=direct status=none | cmp - "$WORK/src/a.bin" \
  || fail "a.bin through m5 after"

step "an idle cache node lets go of the regions a mount sharing its directory evicts"
CS="$WORK/cs"
start_bdn cache cache serve --upstream "$URL" --listen 127.0.0.1:0 --cache-dir "$CS" \
  --cache-size 4M
CACHE_URL=$STARTED_URL; CACHE_PID=$STARTED_PID
"$BDN" volume mount "$ref" "$WORK/m3" --cluster-cache "$CACHE_URL" --cache-dir "$WORK/nc3" \
  --cache-size 64M --memory-cache 1M >/dev/null
MOUNTS+=("$WORK/m3")
cmp "$WORK/m3/a.bin" "$WORK/src/a.bin" || fail "a.bin through the cache node"
[ "$(held "$CACHE_PID" "$CS")" -gt 0 ] || fail "the cache node holds no region of $CS"
"$BDN" volume mount "$ref" "$WORK/m4" --cache-dir "$CS" --cache-size 4M --memory-cache 1M \
  >/dev/null
MOUNTS+=("$WORK/m4")
cmp "$WORK/m4/b.bin" "$WORK/src/b.bin" || fail "b.bin through the mount sharing $CS"
wait_released "$CACHE_PID" "$CS" "the idle cache node"
# Through a fresh node cache, so that the cache node serves every chunk again.
"$BDN" volume umount "$WORK/m3" >/dev/null
"$BDN" volume mount "$ref" "$WORK/m3" --cluster-cache "$CACHE_URL" --cache-dir "$WORK/nc6" \
  --cache-size 64M --memory-cache 1M >/dev/null
(cd "$WORK/m3" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through the cache node after"

step "umount"
for m in m1 m2 m3 m4 m5 m6; do "$BDN" volume umount "$WORK/$m" >/dev/null; done
MOUNTS=()
