#!/usr/bin/env bash
# FUSE interrupts: with the origin stopped (SIGSTOP), a reader killed with kill -9 while its
# O_DIRECT read waits for bytes, an opener killed while the file's chunk index is fetched, and a
# buffered reader killed while its page is fetched all end within 1 s (the kernel interrupts
# their requests and the mount answers EINTR at once), not at the read deadline. A reader and an
# opener that get signals they handle (SA_RESTART) while they wait are not failed: once the
# origin resumes, their calls return the right bytes, never EINTR; one killed after handling a
# signal still ends within 1 s. Once the origin resumes, the same files read correctly without a
# remount. An umount while they wait names both: the reader's open file and the opener's openat.
source "$(dirname "$0")/lib.sh"
needs_fuse
SIGNAL_READER="$(dirname "$0")/signal_reader.py"

step "start the origin and push"
start_origin
mkdir -p "$WORK/src"
random_file "$WORK/src/cold.bin" 6000000 21
random_file "$WORK/src/late.bin" 3000000 22
random_file "$WORK/src/signals.bin" 4000000 23
random_file "$WORK/src/late2.bin" 3000000 24
ref=$("$BDN" volume push "$WORK/src" bdn:test/interrupts)

# The chunk indexes of late.bin and late2.bin are kept from the origin until the origin is
# stopped, so the mount (which loads chunk indexes in the background) cannot have them when
# those files are opened: with the origin shut down, each is moved out of the origin's packs into
# a pack of its own (packs.py), and the origin started again without them.
late_index=$("$BDN" volume stat "$ref/late.bin" --json | json_field chunk_index)
late2_index=$("$BDN" volume stat "$ref/late2.bin" --json | json_field chunk_index)
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
hide_index() {  # hide_index INDEX PACK: moves the chunk index blob INDEX into $WORK/PACK.pack
  python3 "$(dirname "$0")/packs.py" extract "$WORK/srv/store" "${1#b3:}" "$WORK/$2.pack" ||
    fail "chunk index $1 not found in the packs under $WORK/srv"
}
hide_index "$late_index" 00000000000000bb
hide_index "$late2_index" 00000000000000bc
start_origin

step "mount; stop the origin"
mkdir -p "$WORK/mnt"
# The default read timeout (55 s): a reader that is not let go stays far past the 1 s asserted.
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nodecache" >/dev/null
MOUNTS+=("$WORK/mnt")
# Opening cold.bin and signals.bin loads their chunk indexes (and reads no bytes), so their
# reads below wait for bytes.
python3 -c 'import sys; open(sys.argv[1], "rb"); open(sys.argv[2], "rb")' "$WORK/mnt/cold.bin" "$WORK/mnt/signals.bin"
kill -STOP "$SERVER_PID"
mv "$WORK/00000000000000bb.pack" "$WORK/00000000000000bc.pack" "$WORK/srv/store/packs/"

# gone_within_1s PID WHAT: after kill -9, PID must have exited within 1 s.
gone_within_1s() {
  local t0
  t0=$(now_ms)
  kill -9 "$1"
  wait_gone "$1" 1000 || fail "$2 killed with -9 is still there after 1 s"
  echo "$2 gone $(($(now_ms) - t0)) ms after kill -9"
  wait "$1" 2>/dev/null || true
}

step "a reader killed during dd iflag=direct ends at once"
dd if="$WORK/mnt/cold.bin" of=/dev/null bs=1M skip=2 count=1 iflag=direct status=none &
DD=$!
PIDS+=("$DD")
wait_blocked "$DD" 0 "dd iflag=direct"
gone_within_1s "$DD" "dd iflag=direct"

step "an opener killed while the chunk index is fetched ends at once"
python3 -c 'import sys; open(sys.argv[1], "rb")' "$WORK/mnt/late.bin" &
OPENER=$!
PIDS+=("$OPENER")
wait_blocked "$OPENER" 257 "open of late.bin"
gone_within_1s "$OPENER" "open of late.bin"

step "a buffered reader killed while its page is fetched ends at once"
dd if="$WORK/mnt/cold.bin" of=/dev/null bs=64k skip=64 count=1 status=none &
BUF=$!
PIDS+=("$BUF")
# It waits for a page the kernel's readahead asked for (state D, killable).
wait_blocked "$BUF" 0 "buffered dd"
gone_within_1s "$BUF" "buffered dd"

step "a reader and an opener that handle SIGUSR1 (SA_RESTART) are signalled while they wait"
python3 "$SIGNAL_READER" read "$WORK/mnt/signals.bin" 1048576 1048576 "$WORK/got.bin" 2>"$WORK/reader.err" &
READER=$!
PIDS+=("$READER")
python3 "$SIGNAL_READER" open "$WORK/mnt/late2.bin" 2>"$WORK/opener.err" &
OPENER2=$!
PIDS+=("$OPENER2")
wait_blocked "$READER" 17 "pread of signals.bin"
wait_blocked "$OPENER2" 257 "open of late2.bin"
# Signals keep coming while they wait (the kernel interrupts each request at the first one).
for _ in $(seq 1 20); do
  kill -USR1 "$READER" "$OPENER2" 2>/dev/null || break  # one has ended: said below
  sleep 0.05
done
# Still waiting (an EINTR would have ended them, and nothing else can while the origin is
# stopped); their results are checked once the origin resumes.
for p in "$READER" "$OPENER2"; do
  state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || state=gone
  [ "$state" = S ] || [ "$state" = D ] || fail "signalled pid $p no longer waits (state $state): $(cat "$WORK/reader.err" "$WORK/opener.err" | tr '\n' ' ')"
done

step "umount while they wait: busy, naming the reader (an open file) and the openers (in openat)"
# The openers have no descriptor yet: only their system calls (openat, a path under the mount)
# hold the mount, which /proc/PID/task/TID/syscall and the process's memory show to root: also
# for a worker thread's open, through a symlink to the mount (late.bin's chunk index is still
# being fetched for the opener killed above).
ln -s "$WORK/mnt" "$WORK/lnk"
python3 -c 'import sys, threading; t = threading.Thread(target=lambda: open(sys.argv[1], "rb")); t.start(); t.join()' "$WORK/lnk/late.bin" &
THREADED=$!
PIDS+=("$THREADED")
worker=""
for _ in $(seq 1 250); do
  for t in /proc/"$THREADED"/task/*; do
    [ "${t##*/}" = "$THREADED" ] || worker=${t##*/}
  done
  [ -n "$worker" ] && break
  sleep 0.02
done
[ -n "$worker" ] || fail "the threaded opener started no thread"
wait_blocked "$worker" 257 "a worker thread's open of late.bin through a symlink"
run_fails 8 "bdn: error: mountpoint $WORK/mnt: busy: pid $READER (python3) has files or directories open on it; pid $OPENER2 (python3, in openat), pid $THREADED (python3, in openat) are in a system call on a path under it, which its daemon has not answered yet (close them or stop the processes, then unmount again)" \
  "$BDN" volume umount "$WORK/mnt"
gone_within_1s "$THREADED" "threaded opener"

step "a reader killed after it handled a signal ends at once"
python3 "$SIGNAL_READER" read "$WORK/mnt/signals.bin" 3145728 65536 "$WORK/killed.bin" &
KILLED=$!
PIDS+=("$KILLED")
wait_blocked "$KILLED" 17 "pread of signals.bin"
kill -USR1 "$KILLED"
sleep 0.3  # past the mount's quick re-checks of an interrupted caller: the kill comes later
gone_within_1s "$KILLED" "reader killed after SIGUSR1"

step "metadata still answers; the origin resumes and the same files read, no remount"
timeout 5 ls -l "$WORK/mnt" >/dev/null || fail "ls with the origin stopped"
kill -CONT "$SERVER_PID"

step "the signalled reader and opener got their bytes, no EINTR"
rc=0
wait "$READER" || rc=$?
assert_eq 0 "$rc" "exit code of the signalled reader ($(cat "$WORK/reader.err"))"
assert_eq "signals handled: 1" "$(cat "$WORK/reader.err")" "the reader's stderr"
dd if="$WORK/src/signals.bin" of="$WORK/want.bin" bs=1M skip=1 count=1 status=none
cmp "$WORK/want.bin" "$WORK/got.bin" || fail "the signalled reader's bytes differ from signals.bin [1 MiB, 2 MiB)"
rc=0
wait "$OPENER2" || rc=$?
assert_eq 0 "$rc" "exit code of the signalled opener ($(cat "$WORK/opener.err"))"
assert_eq "signals handled: 1" "$(cat "$WORK/opener.err")" "the opener's stderr"

step "every file reads whole through the mount"
(cd "$WORK/src" && b3sum cold.bin late.bin signals.bin late2.bin) > "$WORK/sums"
(cd "$WORK/mnt" && timeout 60 b3sum --check --quiet "$WORK/sums") || fail "b3sum through the mount after the origin resumed"

step "umount"
"$BDN" volume umount "$WORK/mnt" >/dev/null
MOUNTS=()
echo "PASS"
