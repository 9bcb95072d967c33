#!/usr/bin/env bash
# The crash loop of the pack store: pushes are killed (kill -9) at random points until 20 kills
# have landed before the commit (at most 30 rounds), and after each
# the store is checked: it opens (a killed writer's open pack is sealed again from its whole
# records, a torn tail dropped), every pack has a valid footer, the killed push's version is not
# visible (unless it had committed), the versions committed before still verify, and the push run
# again completes storing only what is missing. Then the same with bdn serve's data directory:
# the origin is killed at random points during 8 pushes and started again.
source "$(dirname "$0")/lib.sh"
RANDOM=20251201  # the kill points are reproducible

# A base tree shared by every round, and 12 MB of new data per round (what its push writes).
mkdir -p "$WORK/base"
head -c 2000000 /dev/urandom > "$WORK/base/part.bin"
for i in $(seq 1 200); do printf 'file %d\n' "$i" > "$WORK/base/small-$i.txt"; done
base_bytes=$(du -sb --apparent-size "$WORK/base" | cut -f1)
new_bytes=0  # every round's own bytes
make_round() {  # make_round N: $WORK/round-N, the base tree plus its own two 6 MB files
  rm -rf "$WORK/round-$1"; cp -a "$WORK/base" "$WORK/round-$1"
  head -c 6000000 /dev/urandom > "$WORK/round-$1/own-a.bin"
  head -c 6000000 /dev/urandom > "$WORK/round-$1/own-b.bin"
  new_bytes=$((new_bytes + 12000000))
}

# check_store DATA: the store opens, is sealed and consistent: no open packs are left once it was
# opened, every sealed pack's footer is valid (stats reads them all). A pack still under its .new
# name (killed before its first record: nothing in it) is left to its writer until it is a minute
# old (its lock proves nothing sooner: LocalChunkStore's IsDeadWritersNewFile), then deleted by the
# next open; so a .new left here is under a minute old.
check_store() {
  "$BDN" store stats --data "$1" >/dev/null || fail "store stats after a kill"
  assert_eq "" "$(find "$1/store/packs" -name '*.open' -o -name '*.new' -mmin +1)" "packs left open after the store was opened"
  python3 "$(dirname "$0")/packs.py" list "$1/store" >/dev/null || fail "a pack with an invalid footer"
}

step "embedded"
base_chunks=$("$BDN" volume push "$WORK/base" bdn:test/base --json | json_field chunks)
make_round 0
"$BDN" volume push "$WORK/round-0" bdn:test/crash-0 >/dev/null
prev="bdn:test/crash-0"

killed_before_commit=0
round=0
while [ "$killed_before_commit" -lt 20 ]; do
  round=$((round + 1))
  [ "$round" -le 30 ] || fail "only $killed_before_commit of 30 kills came before the commit"
  make_round "$round"
  at=$(((RANDOM * 32768 + RANDOM) % 12500000))
  "$BDN" volume push "$WORK/round-$round" "bdn:test/crash-$round" --json > "$WORK/push.out" 2>/dev/null &
  pid=$!; PIDS+=("$pid")
  kill_when "$pid" "$BDN_HOME" "$at"
  check_store "$BDN_HOME"
  if "$BDN" volume versions "bdn:test/crash-$round" >/dev/null 2>&1; then
    # The kill came after the commit: the version is whole.
    "$BDN" volume verify "bdn:test/crash-$round" >/dev/null || fail "round $round: committed version does not verify"
    state=committed
  else
    run_fails 3 "bdn: error: volume bdn:test/crash-$round: not found" "$BDN" volume versions "bdn:test/crash-$round"
    killed_before_commit=$((killed_before_commit + 1))
    state="not visible"
  fi
  "$BDN" volume verify "$prev" >/dev/null || fail "round $round: the version committed before ($prev) does not verify"
  out=$("$BDN" volume push "$WORK/round-$round" "bdn:test/crash-$round" --json)
  uploaded=$(json_field chunks_uploaded <<<"$out"); chunks=$(json_field chunks <<<"$out")
  echo "round $round: killed after ${at} bytes ($state); the push again uploaded $uploaded of $chunks chunks"
  # The base tree is stored already: only this round's own files can be new.
  [ "$uploaded" -le $((chunks - base_chunks)) ] || fail "round $round: the push after the kill stored $uploaded chunks"
  "$BDN" volume verify "bdn:test/crash-$round" >/dev/null || fail "round $round: verify after the push again"
  rm -rf "$WORK/round-$((round - 1))"
  prev="bdn:test/crash-$round"
done
# Nothing was stored twice: the base tree once, every round's own files once, and metadata.
raw=$("$BDN" --json store stats | json_field raw_bytes)
echo "raw bytes stored: $raw for $((base_bytes + new_bytes)) bytes of distinct files"
[ "$raw" -lt $((base_bytes + new_bytes + 2000000)) ] || fail "the store holds $raw raw bytes: blobs stored twice"

step "bdn serve: the origin killed at random points during pushes"
unset BDN_HOME
export BDN_HOME="$WORK/client-home"
start_origin
"$BDN" volume push "$WORK/base" bdn:test/base >/dev/null
make_round 100
"$BDN" volume push "$WORK/round-100" bdn:test/served-0 >/dev/null
prev="bdn:test/served-0"
for round in $(seq 101 108); do
  make_round "$round"
  at=$(((RANDOM * 32768 + RANDOM) % 12500000))
  "$BDN" volume push "$WORK/round-$round" "bdn:test/served-$round" --retry-deadline 1s >/dev/null 2>&1 &
  client=$!; PIDS+=("$client")
  kill_when "$SERVER_PID" "$WORK/srv" "$at" "$client"
  kill -9 "$client" 2>/dev/null || true; wait "$client" 2>/dev/null || true
  check_store "$WORK/srv"
  start_origin
  if "$BDN" volume versions "bdn:test/served-$round" >/dev/null 2>&1; then
    state=committed
    "$BDN" volume verify "bdn:test/served-$round" >/dev/null || fail "served round $round: committed version does not verify"
  else
    state="not visible"
  fi
  "$BDN" volume verify "$prev" >/dev/null || fail "served round $round: $prev does not verify"
  out=$("$BDN" volume push "$WORK/round-$round" "bdn:test/served-$round" --json)
  uploaded=$(json_field chunks_uploaded <<<"$out"); chunks=$(json_field chunks <<<"$out")
  echo "served round $round: origin killed after ${at} bytes ($state); the push again uploaded $uploaded of $chunks chunks"
  [ "$uploaded" -le $((chunks - base_chunks)) ] || fail "served round $round: the push after the kill stored $uploaded chunks"
  "$BDN" volume verify "bdn:test/served-$round" >/dev/null || fail "served round $round: verify"
  rm -rf "$WORK/round-$((round - 1))"
  prev="bdn:test/served-$round"
done
echo "PASS"
