#!/usr/bin/env bash
# kill -9 during a push leaves no visible version; rerunning the push completes and stores only
# the chunks that were missing. A file that changes during a push fails it and seals nothing.
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/src"
for i in 1 2 3 4 5 6; do head -c 100000000 /dev/urandom > "$WORK/src/part-$i.bin"; done

step "kill -9 mid-push"
"$BDN" volume push "$WORK/src" bdn:test/crash --jobs 1 >/dev/null 2>&1 &
pid=$!
PIDS+=("$pid")
# Bytes in the store's pack files (open or sealed); 0 before the store exists.
pack_bytes() { (find "$BDN_HOME/store/packs" -type f -printf '%s\n' 2>/dev/null || true) | awk '{s += $1} END {print s + 0}'; }
# Wait until some 36 MB of chunks are stored, then kill.
for _ in $(seq 1 200); do
  [ "$(pack_bytes)" -gt 36000000 ] && break
  sleep 0.05
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
stored=$(pack_bytes)
[ "$stored" -gt 0 ] || fail "the push stored nothing before it was killed"
[ -n "$(find "$BDN_HOME/store/packs" -name '*.open')" ] || fail "the killed push left no open pack"
run_fails 3 'bdn: error: volume bdn:test/crash: not found' "$BDN" volume versions bdn:test/crash

step "rerun completes, uploading only missing chunks"
out=$("$BDN" volume push "$WORK/src" bdn:test/crash --json)
chunks=$(json_field chunks <<<"$out"); uploaded=$(json_field chunks_uploaded <<<"$out"); reused=$(json_field chunks_reused <<<"$out")
echo "chunks=$chunks uploaded=$uploaded reused=$reused pack-bytes-before=$stored"
[ "$reused" -gt 0 ] || fail "nothing reused after the crash"
[ "$uploaded" -lt "$chunks" ] || fail "every chunk uploaded again"
"$BDN" volume verify bdn:test/crash >/dev/null || fail "verify after resume"
# The killed writer's pack was sealed by the next open; nothing is left half-written (a .new
# pack, killed before its first record, is left to its writer until a minute old: pack_crash_loop_test).
assert_eq "" "$(find "$BDN_HOME/store/packs" -name '*.open' -o -name '*.new' -mmin +1)" "packs left open"

step "Ctrl-C mid-push says what it left, and the rerun reuses it"
# From new-user helper 116: an embedded push ended by Ctrl-C said nothing (a push to an origin
# said it released its claim).
int_home="$WORK/home-int"
env --default-signal=INT BDN_HOME="$int_home" "$BDN" volume push "$WORK/src" bdn:test/int --jobs 1 \
  >/dev/null 2>"$WORK/int.err" &
pid=$!
PIDS+=("$pid")
for _ in $(seq 1 200); do
  [ "$(BDN_HOME="$int_home" pack_bytes)" -gt 36000000 ] && break
  sleep 0.05
done
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
assert_eq 130 "$rc" "exit status of a push ended by Ctrl-C"
assert_eq "bdn: push interrupted; run it again to finish: it reuses the chunks this one stored (bdn gc reclaims them otherwise)" \
  "$(tail -1 "$WORK/int.err")" "stderr of a push ended by Ctrl-C"
run_fails 3 'bdn: error: volume bdn:test/int: not found' env BDN_HOME="$int_home" "$BDN" volume versions bdn:test/int
out=$(BDN_HOME="$int_home" "$BDN" volume push "$WORK/src" bdn:test/int --json)
[ "$(json_field chunks_reused <<<"$out")" -gt 0 ] || fail "nothing reused after Ctrl-C: $out"

step "a file that grows during the push fails it"
head -c 300000000 /dev/urandom > "$WORK/src/growing.bin"
( for _ in $(seq 1 400); do printf 'x' >> "$WORK/src/growing.bin"; sleep 0.01; done ) &
PIDS+=("$!")
err=$("$BDN" volume push "$WORK/src" bdn:test/changing 2>&1 >/dev/null) && fail "push of a changing file succeeded"
assert_contains "$err" "bdn: error: file \"$WORK/src/growing.bin\": changed while being pushed"
run_fails 3 'bdn: error: volume bdn:test/changing: not found' "$BDN" volume versions bdn:test/changing

step "a file replaced by a FIFO during the push fails it (the push never waits on the FIFO)"
rm -f "$WORK/src/growing.bin"
mkdir -p "$WORK/fifo"; head -c 300000000 /dev/urandom > "$WORK/fifo/a.bin"; echo small > "$WORK/fifo/z.txt"
before=$(pack_bytes)
timeout 120 "$BDN" volume push "$WORK/fifo" bdn:test/fifo --jobs 1 2>"$WORK/fifo.err" >/dev/null &
pid=$!; PIDS+=("$pid")
# Once a.bin's chunks are being stored, the walk is over: z.txt is opened only after a.bin.
for _ in $(seq 1 600); do [ "$(pack_bytes)" -gt $((before + 20000000)) ] && break; sleep 0.05; done
rm "$WORK/fifo/z.txt"; mkfifo "$WORK/fifo/z.txt"
rc=0; wait "$pid" || rc=$?
assert_eq 8 "$rc" "exit code of a push whose file became a FIFO (124: it hung)"
assert_contains "$(cat "$WORK/fifo.err")" "bdn: error: file \"$WORK/fifo/z.txt\": changed while being pushed (it is no longer a regular file)"
echo "PASS"
