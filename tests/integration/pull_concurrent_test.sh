#!/usr/bin/env bash
# Several pulls of one version into one directory at once (pods of a fleet pulling into a shared
# directory at start-up): every one exits 0 and the directory is the version, byte for byte.
# Regression: a pull that found a file another pull was writing failed at once with exit 4
# ("another pull is writing it"); with two pulls, one or both failed, however right the
# directory ended. Now a pull waits for the other to finish the file, then keeps it.
# A writer that makes no progress (stopped with SIGSTOP) is waited for --writer-stall-time, then
# named in a conflict (exit 4); continued in time, both pulls end well. Two different versions
# pulled into one directory at once never both succeed: at least one reports a conflict, and one
# that succeeds leaves exactly its version. The same through an origin (--remote).
source "$(dirname "$0")/lib.sh"

src="$WORK/src"
mkdir -p "$src/big" "$src/small/a/b" "$src/small/c"
for i in 1 2 3; do head -c $((24 * 1048576 + i * 4099)) /dev/urandom > "$src/big/b$i"; done
for i in $(seq 1 40); do
  head -c $((i * 3001)) /dev/urandom > "$src/small/f$i"
  head -c $((i * 101)) /dev/urandom > "$src/small/a/b/g$i"
done
: > "$src/small/c/empty"
ln -s ../f1 "$src/small/c/link"
ln "$src/small/f2" "$src/small/c/hard"
ref=$("$BDN" volume push "$src" bdn:t/big3)
expected=$(tree_listing "$src")
expected_links=$(hardlink_groups "$src")

# check_tree DIR WHAT: DIR is the version: the listing (b3sum of every file), cmp of every file,
# its hardlinks, and no partial file left.
check_tree() {
  assert_eq "$expected" "$(tree_listing "$1")" "$2: pulled tree"
  assert_eq "$expected_links" "$(hardlink_groups "$1")" "$2: hardlinks"
  (cd "$src" && find . -type f -print0) | while IFS= read -r -d '' f; do
    cmp "$src/$f" "$1/$f" || fail "$2: $f differs"
  done
  assert_eq "" "$(find "$1" -name '.bdn-partial-*')" "$2: partial files left"
}

# pull_at_once N DIR WHAT [bdn args...]: N pulls of $ref into DIR at once; each must exit 0.
pull_at_once() {
  local n=$1 dir=$2 what=$3 i rc; shift 3
  local pids=()
  for i in $(seq 1 "$n"); do
    "$BDN" "$@" volume pull "$ref" "$dir" --jobs 4 >/dev/null 2>"$WORK/err-$i" &
    pids+=("$!")
    PIDS+=("$!")
  done
  for i in $(seq 1 "$n"); do
    rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    assert_eq 0 "$rc" "$what: exit code of pull $i ($(cat "$WORK/err-$i"))"
  done
}

step "4 pulls of one version into one directory at once, 3 rounds"
for round in 1 2 3; do
  out="$WORK/out-$round"
  pull_at_once 4 "$out" "round $round"
  check_tree "$out" "round $round"
done

step "into a directory half pulled already (partial files left by a killed pull): 3 at once"
# The pull is killed once one of its partial files is seen. It takes about 0.5 s, its partial
# files are there for a fraction of that, and on a loaded machine it ended before the kill landed
# ("kill: (pid) - No such process", the test failed) or left nothing to resume from. A pull that
# ended first is pulled again into an empty directory until a killed one leaves partial files.
out="$WORK/resumed"
left=""
for _ in $(seq 1 20); do
  rm -rf "$out"
  "$BDN" volume pull "$ref" "$out" --jobs 4 >/dev/null 2>&1 &
  killed=$!
  PIDS+=("$killed")
  for _ in $(seq 1 500); do
    [ -z "$(find "$out" -name '.bdn-partial-*' 2>/dev/null)" ] && kill -0 "$killed" 2>/dev/null || break
    sleep 0.01
  done
  kill -9 "$killed" 2>/dev/null || true
  wait "$killed" 2>/dev/null || true
  untrack "$killed"
  left=$(find "$out" -name '.bdn-partial-*' 2>/dev/null || true)
  [ -z "$left" ] || break
done
[ -n "$left" ] || fail "20 pulls each ended before they were killed: no partial file to resume from"
pull_at_once 3 "$out" "resumed"
check_tree "$out" "resumed"

step "a stopped writer: waited for --writer-stall-time, then named (exit 4)"
out="$WORK/stuck"
partial="$out/big/.bdn-partial-$(printf '%s' b1 | b3sum --no-names | cut -c1-32)"
# The same race: a pull of one 24 MiB file can end before the STOP lands on a loaded machine, or
# be stopped between the creation of its partial file and its lock (flock -n then takes it); it
# is then pulled again into an empty directory until one is stopped holding big/b1's partial file.
for _ in $(seq 1 20); do
  rm -rf "$out"
  "$BDN" volume pull "$ref" "$out" --include big/b1 >/dev/null 2>"$WORK/err-stopped" &
  stopped=$!
  PIDS+=("$stopped")
  deadline=$((SECONDS + 20))
  until [ -e "$partial" ] || ! kill -0 "$stopped" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; do :; done
  kill -STOP "$stopped" 2>/dev/null || true
  if [ -e "$partial" ] && [ ! -e "$out/big/b1" ] && ! flock -n "$partial" true; then break; fi
  kill -9 "$stopped" 2>/dev/null || true
  wait "$stopped" 2>/dev/null || true
  untrack "$stopped"
done
[ -e "$partial" ] && [ ! -e "$out/big/b1" ] || fail "the first pull was not stopped while it wrote big/b1 (20 tries)"
start=$(date +%s%N)
run_fails 4 "bdn: error: file \"$out/big/b1\": another pull is writing it (pid $stopped, \"bdn\") and its partial file ${partial##*/} has not changed for 1s (stopped? pull again once it has ended)" \
  "$BDN" volume pull "$ref" "$out" --include big/b1 --writer-stall-time 1s
waited_ms=$((($(date +%s%N) - start) / 1000000))
[ "$waited_ms" -ge 1000 ] || fail "the second pull waited ${waited_ms} ms, not 1s"

step "the stopped writer continued while the second pull waits: both exit 0"
"$BDN" volume pull "$ref" "$out" --include big/b1 >"$WORK/out-waiter" 2>&1 &
waiter=$!
PIDS+=("$waiter")
sleep 2
kill -0 "$waiter" 2>/dev/null || fail "the second pull did not wait: $(cat "$WORK/out-waiter")"
kill -CONT "$stopped"
rc=0; wait "$stopped" || rc=$?
assert_eq 0 "$rc" "exit code of the continued pull ($(cat "$WORK/err-stopped"))"
rc=0; wait "$waiter" || rc=$?
assert_eq 0 "$rc" "exit code of the waiting pull ($(cat "$WORK/out-waiter"))"
assert_contains "$(cat "$WORK/out-waiter")" "pulled 0 files (0 B), 1 already present"
cmp "$src/big/b1" "$out/big/b1" || fail "big/b1 differs"
assert_eq "" "$(find "$out" -name '.bdn-partial-*')" "partial files left after the stopped writer"

step "two different versions into one directory at once: never both exit 0, never a silent mix"
src2="$WORK/src2"
cp -a "$src" "$src2"
(cd "$src2" && find . -type f -print0) | while IFS= read -r -d '' f; do printf 'v2' >> "$src2/$f"; done
ref2=$("$BDN" volume push "$src2" bdn:t/big3)
expected2=$(tree_listing "$src2")
for round in 1 2 3; do
  out="$WORK/mixed-$round"
  "$BDN" volume pull "$ref" "$out" --jobs 4 >/dev/null 2>"$WORK/err-v1" &
  p1=$!
  "$BDN" volume pull "$ref2" "$out" --jobs 4 >/dev/null 2>"$WORK/err-v2" &
  p2=$!
  PIDS+=("$p1" "$p2")
  rc1=0; wait "$p1" || rc1=$?
  rc2=0; wait "$p2" || rc2=$?
  [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ] || fail "round $round: both versions pulled into one directory exited 0"
  for rc in "$rc1" "$rc2"; do
    [ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || fail "round $round: exit $rc ($(cat "$WORK/err-v1" "$WORK/err-v2"))"
  done
  [ "$rc1" -ne 0 ] || assert_eq "$expected" "$(tree_listing "$out")" "round $round: v1 exited 0"
  [ "$rc2" -ne 0 ] || assert_eq "$expected2" "$(tree_listing "$out")" "round $round: v2 exited 0"
done

step "through an origin (--remote): 3 pulls into one directory at once"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
remote_ref=$("$BDN" --remote "$STARTED_URL" volume push "$src" bdn:t/big3 2>/dev/null)
assert_eq "$ref" "$remote_ref" "digest through the origin"
for round in 1 2; do
  out="$WORK/remote-$round"
  pull_at_once 3 "$out" "remote round $round" --remote "$STARTED_URL"
  check_tree "$out" "remote round $round"
done
echo "PASS"
