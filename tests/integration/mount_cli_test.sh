#!/usr/bin/env bash
# bdn volume mount/umount from the CLI: a pinned, read-only mount whose bytes match b3sum; odd
# offsets, chunk edges and EOF; concurrent and mmap readers; EROFS; clean umount; a mountpoint
# left dead by a killed daemon is cleaned by the next mount; the daemon's heap asks for huge pages
# where the kernel's THP mode is madvise, unless GLIBC_TUNABLES already says otherwise.
source "$(dirname "$0")/lib.sh"
needs_fuse
mkdir -p "$WORK/src/d"
python3 -c 'import random,sys; r=random.Random(1); sys.stdout.buffer.write(r.randbytes(20_000_000))' > "$WORK/src/big.bin"
printf 'small\n' > "$WORK/src/d/small.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:test/mnt --tag prod)

step "mount by tag pins the digest"
out=$("$BDN" volume mount bdn:test/mnt:prod "$WORK/mnt" --json); MOUNTS+=("$WORK/mnt")
assert_eq "$ref" "$(json_field version_ref <<<"$out")" "pinned ref"
grep -q " $WORK/mnt fuse" /proc/mounts || fail "not in /proc/mounts"
(cd "$WORK/src" && b3sum big.bin d/small.txt) > "$WORK/sums"
(cd "$WORK/mnt" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through the mount"

step "odd offsets, chunk edges, past EOF"
python3 - "$WORK/src/big.bin" "$WORK/mnt/big.bin" <<'PY'
import os, random, sys
a = open(sys.argv[1], 'rb').read()
fd = os.open(sys.argv[2], os.O_RDONLY)
r = random.Random(3)
size = len(a)
cases = [(0, 1), (1, 4095), (65535, 3), (size - 1, 10), (size, 100), (size + 5000, 10), (16383, 262145)]
cases += [(r.randrange(size), r.randrange(1, 3_000_000)) for _ in range(300)]
for off, n in cases:
    got = os.pread(fd, n, off)
    assert got == a[off:off + n], (off, n, len(got))
print("pread cases ok:", len(cases))
PY

step "concurrent and mmap readers"
for i in 1 2 3 4 5 6 7 8; do
  ( python3 - "$WORK/src/big.bin" "$WORK/mnt/big.bin" "$i" <<'PY'
import mmap, os, random, sys
a = open(sys.argv[1], 'rb').read()
seed = int(sys.argv[3])
with open(sys.argv[2], 'rb') as f:
    if seed % 2:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert m[:] == a
    else:
        r = random.Random(seed)
        for _ in range(200):
            off = r.randrange(len(a)); n = r.randrange(1, 1 << 20)
            f.seek(off); assert f.read(n) == a[off:off + n]
PY
  ) &
done
for job in $(jobs -p); do wait "$job" || fail "a concurrent reader saw wrong bytes"; done

step "writes fail with EROFS"
err=$( (printf x > "$WORK/mnt/new") 2>&1 ) && fail "create succeeded"; assert_contains "$err" "Read-only file system"
err=$( (printf x >> "$WORK/mnt/big.bin") 2>&1 ) && fail "append succeeded"; assert_contains "$err" "Read-only file system"
err=$(mkdir "$WORK/mnt/x" 2>&1) && fail "mkdir succeeded"; assert_contains "$err" "Read-only file system"
err=$(rm "$WORK/mnt/d/small.txt" 2>&1) && fail "unlink succeeded"; assert_contains "$err" "Read-only file system"

step "umount of a busy mount names the processes that hold it (a mapped file counts)"
python3 - "$WORK/mnt/big.bin" "$WORK/mapped" <<'PY' &
import mmap, os, sys, time
with open(sys.argv[1], 'rb') as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
open(sys.argv[2], 'w').close()  # the file is closed; only the mapping holds the mount
time.sleep(600)
PY
mapper=$!
(cd "$WORK/mnt/d" && exec sleep 600) &
sleeper=$!
PIDS+=("$mapper" "$sleeper")
for _ in $(seq 1 500); do [ -e "$WORK/mapped" ] && break; sleep 0.02; done
[ -e "$WORK/mapped" ] || fail "the mapping reader did not start"
holders="pid $mapper (python3), pid $sleeper (sleep)"  # /proc lists pids in ascending order
[ "$mapper" -lt "$sleeper" ] || holders="pid $sleeper (sleep), pid $mapper (python3)"
run_fails 8 "bdn: error: mountpoint $WORK/mnt: busy: $holders have files or directories open on it (close them or stop the processes, then unmount again)" \
  "$BDN" volume umount "$WORK/mnt"
kill "$sleeper"; wait "$sleeper" 2>/dev/null || true
run_fails 8 "bdn: error: mountpoint $WORK/mnt: busy: pid $mapper (python3) has files or directories open on it (close them or stop the processes, then unmount again)" \
  "$BDN" volume umount "$WORK/mnt"
kill "$mapper"; wait "$mapper" 2>/dev/null || true

step "umount is clean"
"$BDN" volume umount "$WORK/mnt" >/dev/null
grep -q " $WORK/mnt fuse" /proc/mounts && fail "still mounted"
assert_eq "" "$(ls -A "$WORK/mnt")" "mountpoint empty after umount"
run_fails 2 "bdn: error: mountpoint $WORK/mnt: not a bdn mount" "$BDN" volume umount "$WORK/mnt"
# (from a new user: a path that does not exist said "not a bdn mount", exit 2)
run_fails 3 "bdn: error: mountpoint $WORK/no-such-dir: no such file or directory" "$BDN" volume umount "$WORK/no-such-dir"

step "a mount over a directory that is not empty warns that its files are hidden until the umount"
mkdir -p "$WORK/full"; printf 'mine\n' > "$WORK/full/mine.txt"
err=$("$BDN" volume mount "$ref" "$WORK/full" 2>&1 >/dev/null); MOUNTS+=("$WORK/full")
assert_eq "warning: mountpoint $WORK/full is not empty: what it holds is hidden while the version is mounted there" "$err" "mount stderr"
assert_eq "big.bin d" "$(ls "$WORK/full" | paste -sd' ')" "the version is what shows"
"$BDN" volume umount "$WORK/full" >/dev/null
assert_eq "mine" "$(cat "$WORK/full/mine.txt")" "the hidden file after the umount"
err=$("$BDN" volume mount "$ref" "$WORK/mnt" 2>&1 >/dev/null)
assert_eq "" "$err" "no warning over an empty directory"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "a dead mount left by kill -9 is cleaned by the next mount"
pid=$("$BDN" volume mount "$ref" "$WORK/mnt" --json | json_field daemon_pid)
kill -9 "$pid"
wait_gone "$pid" 10000
err=$(ls "$WORK/mnt" 2>&1) && fail "dead mount still answered"
# (the root's attributes may still be cached for a second: then opendir is what fails)
assert_contains "$err" "Transport endpoint is not connected"
"$BDN" volume mount "$ref" "$WORK/mnt" >/dev/null
assert_eq "small" "$(cat "$WORK/mnt/d/small.txt")" "remounted"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "a mountpoint given as a symlink is the directory it names, for mount, the busy check and umount"
# The kernel mounted on the target while bdn knew the mount by the link: umount of the link said
# "not a bdn mount", and a second mount through the link stacked on the first.
mkdir -p "$WORK/real-mp"; ln -s "$WORK/real-mp" "$WORK/link-mp"; ln -s link-mp "$WORK/link2-mp"
# The node cache's flags on a mount of the embedded store are said to do nothing (from a new
# user: they were ignored without a word).
assert_eq "warning: --cache-dir and --cache-size apply to a mount from an origin (--remote or BDN_REMOTE) only: this one reads the embedded store's packs on this disk, with no node cache
$ref mounted at $WORK/real-mp" "$("$BDN" volume mount "$ref" "$WORK/link2-mp" --cache-dir "$WORK/ccc" --cache-size 1G 2>&1)" "mount through two links"
[ ! -e "$WORK/ccc" ] || fail "an embedded mount made its --cache-dir"
assert_eq "small" "$(cat "$WORK/real-mp/d/small.txt")" "read at the target"
# The same version again (a retry, a boot script run twice) is a no-op; another is refused.
assert_eq "$ref already mounted at $WORK/real-mp" "$("$BDN" volume mount "$ref" "$WORK/link-mp")" "a second mount of the version"
assert_eq "true" "$(jf "$("$BDN" --json volume mount "$ref" "$WORK/real-mp")" already_mounted)" "already_mounted"
assert_eq 1 "$(grep -c " $WORK/real-mp fuse.bdn " /proc/self/mounts)" "mounts at $WORK/real-mp"
# The same version asked with --allow-other, or in the foreground: refused saying why (it said
# only "already a bdn mount of" the same ref, and --foreground said "mounting" first).
run_fails 4 "bdn: error: mountpoint $WORK/real-mp: already a bdn mount of $ref without --allow-other, this mount asks it with; unmount it first (bdn volume umount $WORK/real-mp)" \
  "$BDN" volume mount "$ref" "$WORK/real-mp" --allow-other
run_fails 4 "bdn: error: mountpoint $WORK/real-mp: already a bdn mount of $ref; unmount it first (bdn volume umount $WORK/real-mp)" \
  "$BDN" volume mount "$ref" "$WORK/real-mp" --foreground
mkdir -p "$WORK/src2" && printf 'other\n' > "$WORK/src2/o.txt"
ref2=$("$BDN" volume push "$WORK/src2" bdn:test/other 2>/dev/null)
run_fails 4 "bdn: error: mountpoint $WORK/real-mp: already a bdn mount of $ref; unmount it first (bdn volume umount $WORK/real-mp)" \
  "$BDN" volume mount "$ref2" "$WORK/link-mp"
assert_eq "unmounted $WORK/real-mp" "$("$BDN" volume umount "$WORK/link-mp")" "umount through the link"
assert_absent "$WORK/real-mp fuse" "mount table after the umount" /proc/self/mounts
# ".." after a symlink is the parent of the link's target, as the kernel resolves it (it was
# resolved by name first: "jump/../real" mounted at the "real" beside jump).
mkdir -p "$WORK/far/deep" "$WORK/far/real"; ln -s "$WORK/far/deep" "$WORK/jump"; ln -s jump/../real "$WORK/tricky"
assert_eq "$ref mounted at $WORK/far/real" "$("$BDN" volume mount "$ref" "$WORK/jump/../real" 2>&1)" "mount at jump/../real"
assert_eq "small" "$(cat "$WORK/far/real/d/small.txt")" "read at jump/../real"
assert_eq "unmounted $WORK/far/real" "$("$BDN" volume umount "$WORK/tricky")" "umount through a link to jump/../real"
[ -e "$WORK/real" ] && fail "a directory was made at the lexical $WORK/real"

step "the daemon's heap asks for huge pages (madvise THP mode), unless the user said otherwise"
# huge_vmas PID: the daemon's mappings madvised MADV_HUGEPAGE ("hg" in VmFlags).
huge_vmas() { awk '/^VmFlags:/ && / hg/ { n++ } END { print n + 0 }' "/proc/$1/smaps"; }
# tunables PID: the daemon's GLIBC_TUNABLES. glibc parses it in place at start, writing a NUL over
# each ":", so the tunables after the first show as entries of their own in /proc/PID/environ.
tunables() {
  tr '\0' '\n' <"/proc/$1/environ" |
    awk '/^GLIBC_TUNABLES=/ { v = substr($0, 16); on = 1; next }
         on && /^glibc\./ { v = v ":" $0; next }
         { on = 0 }
         END { print v }'
}
mode=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo none)
pid=$(GLIBC_TUNABLES=glibc.malloc.arena_max=4 "$BDN" volume mount "$ref" "$WORK/mnt" --json | json_field daemon_pid)
cat "$WORK/mnt/big.bin" >/dev/null
if [[ "$mode" == *"[madvise]"* ]]; then
  assert_eq "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1" "$(tunables "$pid")" "daemon's GLIBC_TUNABLES"
  [ "$(huge_vmas "$pid")" -gt 0 ] || fail "no heap mapping of the daemon is madvised for huge pages"
  # re-executed through /proc/self/exe, it still goes by its own name (the kernel would say "exe")
  # and holds no descriptor of the file it read the THP mode from
  assert_eq "$(basename "$BDN")" "$(cat "/proc/$pid/comm")" "re-executed daemon's name"
  assert_eq "" "$(find "/proc/$pid/fd" -lname '*transparent_hugepage*' -printf '%l\n')" "daemon's descriptors of the THP mode file"
else
  # under "always" the heap gets huge pages without asking, under "never" it cannot: no re-exec
  assert_eq "glibc.malloc.arena_max=4" "$(tunables "$pid")" "daemon's GLIBC_TUNABLES (THP mode: $mode)"
fi
"$BDN" volume umount "$WORK/mnt" >/dev/null
pid=$(GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$BDN" volume mount "$ref" "$WORK/mnt" --json | json_field daemon_pid)
cat "$WORK/mnt/big.bin" >/dev/null
assert_eq "glibc.malloc.hugetlb=0" "$(tunables "$pid")" "daemon's GLIBC_TUNABLES, user's choice kept"
assert_eq 0 "$(huge_vmas "$pid")" "mappings madvised for huge pages with hugetlb=0"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "run through the dynamic loader by hand, a command that would re-execute still works"
# /proc/self/exe is the loader then, which would take the command's first word for the program
loader=$(readelf -l "$BDN" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
[ -x "$loader" ] || fail "no program interpreter found in $BDN: [$loader]"
"$loader" "$BDN" volume cat "$ref/big.bin" | cmp - "$WORK/src/big.bin" || fail "volume cat through $loader"

step "a mount that fails removes the mountpoint directory it made, and only that"
mkdir -p "$WORK/made"
: > "$WORK/made/keep"
run_fails 2 "bdn: error: --log-file $BDN_HOME/registry.db: inside the embedded store's home $BDN_HOME, among its own files (give a path outside it, or in its logs/)" \
  "$BDN" volume mount "$ref" "$WORK/made/new" --log-file "$BDN_HOME/registry.db"
[ ! -e "$WORK/made/new" ] || fail "the failed mount left the directory it made"
assert_eq "keep" "$(ls -A "$WORK/made")" "what the directory above holds"
mkdir "$WORK/made/there"
run_fails 2 "bdn: error: --log-file $BDN_HOME/registry.db: inside the embedded store's home $BDN_HOME, among its own files (give a path outside it, or in its logs/)" \
  "$BDN" volume mount "$ref" "$WORK/made/there" --log-file "$BDN_HOME/registry.db"
[ -d "$WORK/made/there" ] || fail "the failed mount removed a directory it did not make"
# A mount that fails after making the mountpoint and its parents (mkdir -p) removes all it made,
# and nothing above (it left the parents).
mkdir "$WORK/made/logdir"
run_fails 8 "bdn: error: log file $WORK/made/logdir: a directory is in the way (a log file is a regular file, or a character device such as /dev/null)" \
  "$BDN" volume mount "$ref" "$WORK/made/p1/p2/mp" --foreground --log-file "$WORK/made/logdir"
assert_eq "keep logdir there" "$(ls -A "$WORK/made" | tr '\n' ' ' | sed 's/ $//')" \
  "what the directory above holds after a mount that made p1/p2/mp failed"
echo "PASS"
