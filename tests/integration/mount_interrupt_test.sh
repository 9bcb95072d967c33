#!/usr/bin/env bash
# FUSE interrupts: with the origin stopped (SIGSTOP), a reader killed with kill -9 while its
# O_DIRECT read waits for bytes, an opener killed while the file's chunk index is fetched, and a
# buffered reader killed while its page is fetched all end within 1 s (the kernel interrupts
# their requests and the mount answers EINTR at once), not at the read deadline. Once the origin
# resumes, the same files read correctly without a remount.
source "$(dirname "$0")/lib.sh"

step "start the origin and push"
start_origin
mkdir -p "$WORK/src"
random_file "$WORK/src/cold.bin" 6000000 21
random_file "$WORK/src/late.bin" 3000000 22
ref=$("$BDN" volume push "$WORK/src" bdn:test/interrupts)

# late.bin's chunk index is kept from the origin until the origin is stopped, so the mount
# (which loads chunk indexes in the background) cannot have it when late.bin is opened.
index=$("$BDN" volume stat "$ref/late.bin" --json | json_field chunk_index)
hex=${index#b3:}
blob=$(find "$WORK/srv" -type f -name "$hex")
[ -n "$blob" ] || fail "chunk index $index not found under $WORK/srv"
mv "$blob" "$WORK/late.index"

step "mount; stop the origin"
mkdir -p "$WORK/mnt"
# The default read timeout (55 s): a reader that is not let go stays far past the 1 s asserted.
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nodecache" >/dev/null
MOUNTS+=("$WORK/mnt")
# Opening cold.bin loads its chunk index (and reads no bytes), so its reads below wait for bytes.
python3 -c 'import sys; open(sys.argv[1], "rb")' "$WORK/mnt/cold.bin"
kill -STOP "$SERVER_PID"
mv "$WORK/late.index" "$blob"

# wait_blocked PID SYSCALL WHAT: polls until PID sleeps (state S or D) inside syscall number
# SYSCALL (x86-64: 0 read, 257 openat), i.e. it waits for the daemon.
wait_blocked() {
  local deadline=$(($(now_ms) + 10000)) sc state
  while :; do
    sc=$(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null) || sc=""
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || state=""
    [ "$sc" = "$2" ] && { [ "$state" = S ] || [ "$state" = D ]; } && return 0
    [ "$(now_ms)" -lt "$deadline" ] || fail "$3 (pid $1) is not waiting in syscall $2 (syscall [$sc], state [$state])"
    sleep 0.02
  done
}
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

step "metadata still answers; the origin resumes and the same files read, no remount"
timeout 5 ls -l "$WORK/mnt" >/dev/null || fail "ls with the origin stopped"
kill -CONT "$SERVER_PID"
(cd "$WORK/src" && b3sum cold.bin late.bin) > "$WORK/sums"
(cd "$WORK/mnt" && timeout 60 b3sum --check --quiet "$WORK/sums") || fail "b3sum through the mount after the origin resumed"

step "umount"
"$BDN" volume umount "$WORK/mnt" >/dev/null
MOUNTS=()
echo "PASS"
