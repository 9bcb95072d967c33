#!/usr/bin/env bash
# Readers opened before a garbage collection keep reading the right bytes across a repack and a
# pack deletion (issue 11 item 2; docs/format.md "Garbage collection", readers). Two FUSE mounts
# and two pulls in progress (bdn volume cat, which reads a chunk at a time as its pipe drains,
# held after the first MiB) are opened before `bdn gc`; the gc is stopped in its grace (doom
# published, copies made, nothing deleted: BDN_TEST_GC_STOP_AT=copied) and after its sweep
# (packs deleted: swept). In the grace every reader, and a new one, reads everything. After the
# sweep the readers opened before read on (the repacked data, and even the collected version,
# whose pack they hold open); a reader started after the sweep reads the repacked data from its
# new pack and finds the collected version gone (exit 3, "gc collected its data").
source "$(dirname "$0")/lib.sh"
needs_fuse

MiB=1048576
# The interpreter itself, not a version manager's shim in front of it (seconds a call under load).
PY=$(command -v /usr/bin/python3 || command -v python3)
python3() { "$PY" "$@"; }
mkdir -p "$WORK/mix" "$WORK/keep" "$WORK/dead"
random_file "$WORK/mix/keep.bin" $((6 * MiB)) 1
random_file "$WORK/mix/big.bin" $((6 * MiB)) 2
cp "$WORK/mix/keep.bin" "$WORK/keep/"
random_file "$WORK/dead/dead.bin" $((6 * MiB)) 3

mix=$("$BDN" volume push "$WORK/mix" bdn:g/mix --json | json_field digest)
keep=$("$BDN" volume push "$WORK/keep" bdn:g/keep --json | json_field digest)
dead=$("$BDN" volume push "$WORK/dead" bdn:g/dead --json | json_field digest)
BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:g/mix@$mix" >/dev/null

# range_ok FILE WANT OFFSET LENGTH: bytes [OFFSET, OFFSET+LENGTH) of FILE are those of WANT.
range_ok() { cmp -i "$3:$3" -n "$4" "$1" "$2" || fail "$1 [$3, $3+$4) differs from $2"; }

# hold_cat NAME REF FIRST: bdn volume cat REF into a reader that takes its FIRST bytes, then
# waits for $WORK/NAME.go before it reads the rest into $WORK/NAME.out. Sets CAT_PID and
# READER_PID.
hold_cat() {
  mkfifo "$WORK/$1.fifo"
  "$BDN" volume cat "$2" >"$WORK/$1.fifo" 2>"$WORK/$1.err" &
  CAT_PID=$!; PIDS+=("$CAT_PID")
  python3 -c '
import os, sys, time
out, first = sys.argv[1], int(sys.argv[2])
src = sys.stdin.buffer
with open(out, "wb") as f:
    got = 0
    while got < first:
        b = src.read1(min(1 << 16, first - got))
        if not b:
            break
        f.write(b)
        got += len(b)
    f.flush()
    open(out + ".ready", "w").close()
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.01)
    for b in iter(lambda: src.read1(1 << 20), b""):
        f.write(b)
' "$WORK/$1.out" "$3" "$WORK/$1.go" <"$WORK/$1.fifo" &
  READER_PID=$!; PIDS+=("$READER_PID")
  local t0; t0=$(now_ms)
  until [ -e "$WORK/$1.out.ready" ]; do
    kill -0 "$READER_PID" 2>/dev/null || fail "the reader of $2 ended early: $(cat "$WORK/$1.err")"
    [ $(($(now_ms) - t0)) -lt 30000 ] || fail "the reader of $2 did not get $3 bytes in 30 s"
    sleep 0.01
  done
}
# finish_cat NAME CAT_PID READER_PID WANT: lets the reader go on; the cat must succeed and its
# bytes be WANT.
finish_cat() {
  : >"$WORK/$1.go"
  wait "$3" || fail "the reader $1 failed"
  wait "$2" || fail "bdn volume cat ($1) failed after the gc: $(cat "$WORK/$1.err")"
  untrack "$2"; untrack "$3"
  cmp "$WORK/$1.out" "$4" || fail "bdn volume cat ($1) read other bytes than $4"
}
# wait_gc_stop PHASE: the gc has stopped itself at PHASE.
wait_gc_stop() {
  local t0; t0=$(now_ms)
  until [[ "$(cat "$WORK/gc.err")" == *"gc: stopped at $1 (BDN_TEST_GC_STOP_AT)"* ]] &&
        [ "$(awk '{print $3}' "/proc/$GC_PID/stat" 2>/dev/null)" = T ]; do
    kill -0 "$GC_PID" 2>/dev/null || fail "gc ended before it stopped at $1: $(cat "$WORK/gc.err")"
    [ $(($(now_ms) - t0)) -lt 60000 ] || fail "gc did not stop at $1 in 60 s: $(cat "$WORK/gc.err")"
    sleep 0.01
  done
}

step "readers open before the gc: two mounts and two pulls in progress"
# A small memory cache, so that what the mounts read later comes from the store, not from memory.
for m in keep dead; do
  mkdir -p "$WORK/mnt-$m"
  ref="bdn:g/$m@$keep"; [ "$m" = dead ] && ref="bdn:g/$m@$dead"
  "$BDN" volume mount --memory-cache 1M "$ref" "$WORK/mnt-$m" >/dev/null
  MOUNTS+=("$WORK/mnt-$m")
done
# The readers of the dead version read most of it first: a push spreads its chunks over a few
# packs (one per upload thread), and a reader that has read some 64 chunks has each of them open.
range_ok "$WORK/mnt-keep/keep.bin" "$WORK/keep/keep.bin" 0 $MiB
range_ok "$WORK/mnt-dead/dead.bin" "$WORK/dead/dead.bin" 0 $((4 * MiB))
hold_cat keep "bdn:g/keep@$keep/keep.bin" $MiB; keep_cat=$CAT_PID; keep_reader=$READER_PID
hold_cat dead "bdn:g/dead@$dead/dead.bin" $((5 * MiB)); dead_cat=$CAT_PID; dead_reader=$READER_PID
# Only now is the dead version deleted past its retention: its readers opened it while it lived.
# rm says where the version is still mounted (from a new user: it said nothing), in text and JSON.
BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:g/dead@$dead" >/dev/null 2>"$WORK/rm.err"
assert_eq "warning: it is mounted at $WORK/mnt-dead: if that mount reads from this store, it reads on until gc collects the version and then fails (bdn volume umount unmounts it)" \
  "$(head -n 1 "$WORK/rm.err")" "rm of a mounted version"
# A new mount of it, past its retention and not yet collected, mounts and says so (from an
# attacking helper: it said nothing, and failed only once a gc had run).
deleted_at=$("$BDN" volume stat "bdn:g/dead@$dead" --json | json_field deleted)
ended=$("$BDN" volume stat "bdn:g/dead@$dead" --json | json_field delete_after)
mkdir -p "$WORK/mnt-dead2"
"$BDN" volume mount "bdn:g/dead@$dead" "$WORK/mnt-dead2" >/dev/null 2>"$WORK/mount.err" ||
  fail "mount of a deleted, uncollected version: $(cat "$WORK/mount.err")"
MOUNTS+=("$WORK/mnt-dead2")
assert_eq "warning: version bdn:g/dead@$dead was deleted $deleted_at; its retention ended $ended: gc may collect its data at any time" \
  "$(cat "$WORK/mount.err")" "mount of a deleted version past its retention"
"$BDN" volume umount "$WORK/mnt-dead2" >/dev/null

plan=$("$BDN" gc --dry-run --max-repack-fraction 0.9 --json)
repacked=$(python3 -c 'import json,sys; print(" ".join(a["pack"] for a in json.load(sys.stdin)["actions"] if a["action"]=="repack"))' <<<"$plan")
deleted=$(python3 -c 'import json,sys; print(" ".join(a["pack"] for a in json.load(sys.stdin)["actions"] if a["action"]=="delete"))' <<<"$plan")
[ -n "$repacked" ] || fail "the plan repacks no pack (the mixed version's): $plan"
[ -n "$deleted" ] || fail "the plan deletes no pack (the dead version's): $plan"
actions=$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["actions"]))' <<<"$plan")

step "in the grace (doomed, copied, nothing deleted) every reader reads every byte"
BDN_TEST_GC_STOP_AT=copied,swept "$BDN" gc --grace 0s --max-repack-fraction 0.9 --json >"$WORK/gc.json" 2>"$WORK/gc.err" &
GC_PID=$!; PIDS+=("$GC_PID")
wait_gc_stop copied
[ -e "$BDN_HOME/store/gc/doomed" ] || fail "no doom published while the gc is in its grace"
for p in $repacked $deleted; do [ -e "$BDN_HOME/store/packs/$p.pack" ] || fail "pack $p deleted before the sweep"; done
range_ok "$WORK/mnt-keep/keep.bin" "$WORK/keep/keep.bin" $MiB $((2 * MiB))
range_ok "$WORK/mnt-dead/dead.bin" "$WORK/dead/dead.bin" $((4 * MiB)) $MiB
"$BDN" volume cat "bdn:g/dead@$dead/dead.bin" | cmp - "$WORK/dead/dead.bin" || fail "a new reader of the doomed version in the grace"
"$BDN" volume cat "bdn:g/keep@$keep/keep.bin" | cmp - "$WORK/keep/keep.bin" || fail "a new reader of the repacked data in the grace"

step "after the sweep (packs deleted): the readers opened before read on"
kill -CONT "$GC_PID"
wait_gc_stop swept
for p in $repacked $deleted; do [ ! -e "$BDN_HOME/store/packs/$p.pack" ] || fail "pack $p still there after the sweep"; done
range_ok "$WORK/mnt-keep/keep.bin" "$WORK/keep/keep.bin" $((3 * MiB)) $((3 * MiB))
range_ok "$WORK/mnt-dead/dead.bin" "$WORK/dead/dead.bin" $((5 * MiB)) $MiB
finish_cat keep "$keep_cat" "$keep_reader" "$WORK/keep/keep.bin"
finish_cat dead "$dead_cat" "$dead_reader" "$WORK/dead/dead.bin"
echo "mounts and pulls opened before the gc read every byte after their packs were deleted"

step "a reader started after the sweep: the repacked data from its new pack; the collected version is gone"
"$BDN" volume cat "bdn:g/keep@$keep/keep.bin" | cmp - "$WORK/keep/keep.bin" || fail "a new reader of the repacked data after the sweep"
rc=0; err=$("$BDN" volume cat "bdn:g/dead@$dead/dead.bin" 2>&1 >/dev/null) || rc=$?
assert_eq 3 "$rc" "exit code of a new reader of the collected version"
assert_contains "$err" "bdn: error: version bdn:g/dead@$dead: deleted "
assert_contains "$err" " and gc collected its data: it can be neither read nor restored"
kill -CONT "$GC_PID"
wait "$GC_PID" || fail "gc failed: $(cat "$WORK/gc.err")"
untrack "$GC_PID"
assert_eq "$(wc -w <<<"$repacked")" "$(json_field packs_repacked <"$WORK/gc.json")" "packs repacked"
assert_eq "$actions" "$(json_field packs_deleted <"$WORK/gc.json")" "packs deleted"
"$BDN" volume umount "$WORK/mnt-keep" >/dev/null
"$BDN" volume umount "$WORK/mnt-dead" >/dev/null
out=$("$BDN" fsck) || fail "fsck after the gc: $out"
"$BDN" volume verify "bdn:g/keep@$keep" >/dev/null || fail "keep does not verify after the gc"
echo PASS
