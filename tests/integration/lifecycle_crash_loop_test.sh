#!/usr/bin/env bash
# The lifecycle crash loop (issue 11 item 4, docs/spec.md §8): at least 50 kill -9s, at random
# points, of push, commit, tag set, tag delete, volume rm, restore, repack and gc, on the
# embedded store and against bdn serve (where the client or the server is killed). Kills inside
# gc and repack land at exact phases: BDN_TEST_GC_STOP_AT makes the gc (bdn gc, or bdn serve's
# periodic one) stop itself there, and the test kills it, or lets it go on and kills it a random
# moment later. After every kill: bdn fsck finds no problem (every blob of every version present
# and hashing right), the registry agrees with a model of what must exist (lifecycle_model.py:
# every live and restorable version still there, in the state the killed command left it or the
# one it had before, never a version the model does not allow), and bdn volume verify passes on
# every live and restorable version. The seed is printed; BDN_CRASH_SEED=N runs the same kills.
source "$(dirname "$0")/lib.sh"
# The interpreter itself, not a version manager's shim in front of it: this test runs python
# hundreds of times (lib.sh's helpers included), and a shim costs up to seconds a call under load.
PY=$(command -v /usr/bin/python3 || command -v python3)
python3() { "$PY" "$@"; }
MODEL_PY="$(dirname "$0")/lifecycle_model.py"
SEED=${BDN_CRASH_SEED:-$(( $(date +%s%N) % 1000000000 ))}
RANDOM=$SEED
echo "seed $SEED (run again with BDN_CRASH_SEED=$SEED)"
# rnd N: RND is a number in [0, N); pick WORD...: PICKED is one of the words. Not in a subshell
# ($(...)): the parent's RANDOM would not move on, and bash reseeds subshells, so the kills would
# not follow from the seed.
rnd() { RND=$((RANDOM % $1)); }
pick() { local a=("$@"); PICKED=${a[$((RANDOM % ${#a[@]}))]}; }

# The test hook refuses a phase it does not know, before anything is opened.
run_fails 2 'bdn: error: BDN_TEST_GC_STOP_AT "copied,later": "later" is not a gc phase (planned, doomed, copied, sweeping, deleted, swept)' \
  env BDN_TEST_GC_STOP_AT=copied,later "$BDN" gc --data "$WORK/none"
[ ! -e "$WORK/none" ] || fail "gc with a bad BDN_TEST_GC_STOP_AT created its data directory"

# ---- trees ----
mkdir -p "$WORK/trees"
random_file "$WORK/common.bin" 300000 7
TREES=0
# new_tree: TREE is a new tree of its own (1.5 MB no other tree has, plus the common file).
# (Not in a subshell: TREES counts.)
new_tree() {
  TREES=$((TREES + 1))
  TREE="$WORK/trees/t$TREES"
  mkdir -p "$TREE"
  random_file "$TREE/own.bin" 1500000 $((SEED + TREES))
  cp "$WORK/common.bin" "$TREE/"
  echo "tree $TREES" > "$TREE/note.txt"
}
# commit_tree: TREE is the common file and a new small file: its push stores almost nothing, so
# a kill lands in the commit (the check of every blob, the registry write).
commit_tree() {
  TREES=$((TREES + 1))
  TREE="$WORK/trees/t$TREES"
  mkdir -p "$TREE"
  cp "$WORK/common.bin" "$TREE/"
  echo "commit tree $TREES" > "$TREE/note.txt"
}

# ---- processes ----
# proc_state PID: the state letter of /proc/PID/stat (T: stopped), or "gone".
proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo gone; }
# wait_stopped PID LOG: waits until PID has stopped itself (BDN_TEST_GC_STOP_AT); fails if it
# exits first or takes over 60 s.
wait_stopped() {
  local t0 s; t0=$(now_ms)
  while :; do
    s=$(proc_state "$1")
    [ "$s" = T ] && return 0
    { [ "$s" = gone ] || [ "$s" = Z ]; } && fail "pid $1 ended before it stopped at its gc phase: $(cat "$2")"
    [ $(($(now_ms) - t0)) -lt 60000 ] || fail "pid $1 did not stop at its gc phase in 60 s: $(cat "$2")"
    sleep 0.01
  done
}
# sleep_ms N
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
# reap PID: waits for PID; LANDED=1 if kill -9 ended it, else 0 (it had exited by itself: RC).
reap() {
  RC=0; wait "$1" 2>/dev/null || RC=$?
  untrack "$1"
  if [ "$RC" -eq 137 ]; then LANDED=1; else LANDED=0; fi
}
# kill_after PID MS: kill -9 PID after MS milliseconds (if it is still running), then reap it.
kill_after() {
  sleep_ms "$2"
  kill -9 "$1" 2>/dev/null || true
  reap "$1"
}
# stop_server: ends the server (SIGTERM) if it runs.
stop_server() {
  if [ -n "${SERVER_PID:-}" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    untrack "$SERVER_PID"
    SERVER_PID=""
  fi
  unset BDN_REMOTE  # gc and fsck act on a local directory: they refuse a BDN_REMOTE
}
# serve NAME ARGS...: bdn serve on $WORK/srv with ARGS (BDN_REMOTE points at it).
serve() {
  local name=$1; shift
  start_bdn "$name" serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth --claim-ttl 2s "$@"
  SERVER_PID=$STARTED_PID
  export BDN_REMOTE=$STARTED_URL
}

# ---- the model ----
# check_model OP_JSON [--no-verify]: fsck (embedded, or of the stopped server's directory) is
# clean, and the registry and the data agree with the model; NEW_DIGEST is what the op committed.
check_model() {
  local out
  out=$(python3 "$MODEL_PY" check "$WORK/model.json" "$@") || fail "after $1 (round $ROUND)"
  NEW_DIGEST=$(sed -n 's/^new //p' <<<"$out")
  VERIFIED=$(sed -n 's/^verified //p' <<<"$out")
}
fsck_clean() {  # fsck_clean [--data DIR]
  local out rc=0
  out=$("$BDN" fsck "$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || fail "round $ROUND: bdn fsck $* after the kill (exit $rc): $out"
}
versions_in() { python3 "$MODEL_PY" list "$WORK/model.json" "$1" "$2"; }
tags_of() { python3 "$MODEL_PY" tags "$WORK/model.json" "$1"; }

# ---- the count ----
declare -A LANDED_COUNT MISSED_COUNT WANT
OPS=(push commit tag_set tag_delete rm restore repack gc)
for op in "${OPS[@]}"; do
  WANT[embedded:$op]=3; WANT[server:$op]=3
  LANDED_COUNT[embedded:$op]=0; LANDED_COUNT[server:$op]=0
  MISSED_COUNT[embedded:$op]=0; MISSED_COUNT[server:$op]=0
done
WANT[embedded:gc]=5; WANT[embedded:repack]=4; WANT[server:gc]=4
declare -A DELAY  # the random delay's upper bound per op (ms), lowered after each miss
for op in "${OPS[@]}"; do DELAY[$op]=80; done
DELAY[commit]=400
ROUND=0
count() {  # count MODE OP WHAT
  if [ "$LANDED" -eq 1 ]; then
    LANDED_COUNT[$1:$2]=$((LANDED_COUNT[$1:$2] + 1))
  else
    MISSED_COUNT[$1:$2]=$((MISSED_COUNT[$1:$2] + 1))
    # It ended before the kill: aim earlier next time.
    DELAY[$2]=$((DELAY[$2] * 2 / 3 + 1))
  fi
  echo "round $ROUND $1 $2: $3; $([ "$LANDED" -eq 1 ] && echo killed || echo "ended before the kill (exit $RC)")"
}
next_op() {  # next_op MODE: OP is an op whose kills have not reached their number, at random
  local left=() o
  OP=""
  for o in "${OPS[@]}"; do
    if [ "${LANDED_COUNT[$1:$o]}" -lt "${WANT[$1:$o]}" ]; then left+=("$o"); fi
  done
  if [ ${#left[@]} -gt 0 ]; then pick "${left[@]}"; OP=$PICKED; fi
}

# ---- preparing what an op needs (not killed) ----
# quiet CMD...: runs CMD (not killed) with its output kept unless it fails.
quiet() { "$@" >"$WORK/prep.out" 2>&1 || fail "round $ROUND: $* failed: $(cat "$WORK/prep.out")"; }
VOLS=(a b)
# cap MODE: at most 3 live and 2 restorable versions a volume, so that each check stays short:
# the extra ones are deleted past their retention (garbage for the gc rounds).
cap() {
  local v d live restorable
  for v in "${VOLS[@]}"; do
    mapfile -t restorable < <(versions_in "$v" restorable)
    while [ ${#restorable[@]} -gt 2 ]; do
      d=${restorable[0]}; restorable=("${restorable[@]:1}")
      quiet "$BDN" volume restore "bdn:crash/$v@$d"
      check_model "{\"op\":\"restore\",\"volume\":\"$v\",\"digest\":\"$d\"}" --no-verify
    done
    mapfile -t live < <(versions_in "$v" live)
    while [ ${#live[@]} -gt 3 ]; do
      d=${live[0]}; live=("${live[@]:1}")
      expire_rm "$v" "$d"
    done
  done
}
# expire_rm VOL DIGEST: rm past the retention at once (embedded: BDN_RETENTION=0s; server: the
# running one was started with --retention 0s).
expire_rm() {
  quiet env BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:crash/$1@$2"
  check_model "{\"op\":\"rm\",\"volume\":\"$1\",\"digest\":\"$2\",\"expire\":true}" --no-verify
}
push_new() {  # push_new VOL DIR [PUSH_ARGS...]: pushes, not killed
  quiet "$BDN" volume push "$2" "bdn:crash/$1" "${@:3}"
  check_model "{\"op\":\"push\",\"volume\":\"$1\",\"tags\":[]}" --no-verify
}
ensure_live() {  # ensure_live VOL: at least one live version
  [ -n "$(versions_in "$1" live)" ] && return 0
  new_tree
  push_new "$1" "$TREE"
}
ensure_restorable() {  # ensure_restorable VOL (needs a server with the default retention)
  local d
  [ -n "$(versions_in "$1" restorable)" ] && return 0
  ensure_live "$1"
  pick $(versions_in "$1" live); d=$PICKED
  quiet "$BDN" volume rm --yes "bdn:crash/$1@$d"
  check_model "{\"op\":\"rm\",\"volume\":\"$1\",\"digest\":\"$d\",\"expire\":false}" --no-verify
}
ensure_tag() {  # ensure_tag VOL
  local d
  [ -n "$(tags_of "$1")" ] && return 0
  ensure_live "$1"
  pick $(versions_in "$1" live); d=$PICKED
  quiet "$BDN" volume tag set --volume-ref "bdn:crash/$1@$d" --tag prod
  check_model "{\"op\":\"tag_set\",\"volume\":\"$1\",\"tag\":\"prod\",\"digest\":\"$d\"}" --no-verify
}
# prepare_repack: a pack mostly garbage that holds a blob still needed: a tree of a big and a
# small file pushed to a, the small file alone to b, then a's version deleted past its retention.
prepare_repack() {
  TREES=$((TREES + 1))
  local mix="$WORK/trees/t$TREES" keep="$WORK/trees/t$TREES-keep" d
  mkdir -p "$mix" "$keep"
  random_file "$mix/big.bin" 1500000 $((SEED + TREES))
  random_file "$mix/keep.bin" 200000 $((SEED + TREES + 500000))
  cp "$mix/keep.bin" "$keep/"
  # One hashing thread, so that the two files share a pack (a fresh-clone CI run, loaded, put
  # them in packs of their own: "no pack to repack after the mixed version expired").
  push_new a "$mix" --jobs 1; d=$NEW_DIGEST
  push_new b "$keep"
  expire_rm a "$d"
}
prepare_garbage() {  # a version with data of its own, past its retention
  local v d before
  pick "${VOLS[@]}"; v=$PICKED
  # A new version, not one of the live ones: a commit_tree version owns only a note of a few
  # bytes, which in a pack mostly holding live blobs leaves nothing to reclaim (seed 354737944,
  # round 50, failed "nothing to reclaim after a version expired").
  before=" $(versions_in "$v" live | tr '\n' ' ') "
  new_tree
  push_new "$v" "$TREE"
  for d in $(versions_in "$v" live); do [[ "$before" == *" $d "* ]] || break; done
  [[ "$before" != *" $d "* ]] || fail "prepare_garbage: the new version of $v is not live"
  expire_rm "$v" "$d"
}
# plan DATA_ARGS...: what a gc would do now: PLAN_REPACKS, PLAN_DELETES.
plan() {
  local out
  out=$("$BDN" gc "$@" --dry-run --max-repack-fraction 0.9 --json)
  PLAN_REPACKS=$(python3 -c 'import json,sys; print(sum(a["action"]=="repack" for a in json.load(sys.stdin)["actions"]))' <<<"$out")
  PLAN_DELETES=$(python3 -c 'import json,sys; print(sum(a["action"]=="delete" for a in json.load(sys.stdin)["actions"]))' <<<"$out")
}

# ---- one round ----
# run_op MODE OP: runs OP with its preparation and kills it (embedded: the command; server:
# the client or the server, at random); sets OP_JSON and the count.
run_op() {
  local mode=$1 op=$2 v d t tree target pid log="$WORK/op.log" at
  pick "${VOLS[@]}"; v=$PICKED
  target=client
  if [ "$mode" = server ]; then pick client server; target=$PICKED; fi
  OP_JSON='{"op":"none"}'
  case $op in
    push|commit)
      if [ "$op" = push ]; then new_tree; else commit_tree; fi
      tree=$TREE
      pick "" prod stable; t=$PICKED
      local tags_json=""
      if [ -n "$t" ]; then tags_json="\"$t\""; fi
      OP_JSON="{\"op\":\"push\",\"volume\":\"$v\",\"tags\":[$tags_json]}"
      "$BDN" volume push "$tree" "bdn:crash/$v" ${t:+--tag "$t"} --retry-deadline 1s >"$log" 2>&1 &
      pid=$!; PIDS+=("$pid")
      if [ "$op" = push ]; then
        # Of the tree's 1.5 MB of new data (the kill comes a poll later: aim short of its end).
        at=$(( (RANDOM * 32768 + RANDOM) % 1000000 ))
        local data="$BDN_HOME"; [ "$mode" = server ] && data="$WORK/srv"
        if [ "$target" = server ]; then
          kill_when "$SERVER_PID" "$data" "$at" "$pid"
          SERVER_PID=""
          reap_client "$pid"
          LANDED=$KILL_LANDED
        else
          kill_when "$pid" "$data" "$at"
          RC=$KILL_RC; LANDED=0
          if [ "$RC" -eq 137 ]; then LANDED=1; fi
        fi
        count "$mode" "$op" "$target killed after $at bytes of packs"
      else
        rnd "${DELAY[$op]}"; at=$RND
        kill_target "$target" "$pid" "$at"
        count "$mode" "$op" "$target killed after $at ms"
      fi
      ;;
    tag_set|tag_delete|rm|restore)
      case $op in
        tag_set)
          ensure_live "$v"; pick $(versions_in "$v" live); d=$PICKED; pick prod stable canary; t=$PICKED
          OP_JSON="{\"op\":\"tag_set\",\"volume\":\"$v\",\"tag\":\"$t\",\"digest\":\"$d\"}"
          set -- volume tag set --volume-ref "bdn:crash/$v@$d" --tag "$t" ;;
        tag_delete)
          ensure_tag "$v"; pick $(tags_of "$v"); t=$PICKED
          OP_JSON="{\"op\":\"tag_delete\",\"volume\":\"$v\",\"tag\":\"$t\"}"
          set -- volume tag delete --volume-ref "bdn:crash/$v" --tag "$t" ;;
        rm)
          ensure_live "$v"; pick $(versions_in "$v" live); d=$PICKED
          OP_JSON="{\"op\":\"rm\",\"volume\":\"$v\",\"digest\":\"$d\",\"expire\":$RM_EXPIRES}"
          set -- volume rm --yes "bdn:crash/$v@$d" ;;
        restore)
          ensure_restorable "$v"; pick $(versions_in "$v" restorable); d=$PICKED
          OP_JSON="{\"op\":\"restore\",\"volume\":\"$v\",\"digest\":\"$d\"}"
          set -- volume restore "bdn:crash/$v@$d" ;;
      esac
      rnd "${DELAY[$op]}"; at=$RND
      if [ "$RM_EXPIRES" = true ]; then
        BDN_RETENTION=0s "$BDN" "$@" >"$log" 2>&1 &
      else
        "$BDN" "$@" >"$log" 2>&1 &
      fi
      pid=$!; PIDS+=("$pid")
      kill_target "$target" "$pid" "$at"
      count "$mode" "$op" "$target killed after $at ms"
      ;;
  esac
  return 0
}
# kill_target client|server PID MS: kills the client PID, or the server, MS ms from now; LANDED
# says whether the one killed was still running (a server's kill always lands; the client must
# still have been waiting for it).
kill_target() {
  if [ "$1" = client ]; then
    kill_after "$2" "$3"
  else
    sleep_ms "$3"
    local alive=0; [ "$(proc_state "$2")" != gone ] && [ "$(proc_state "$2")" != Z ] && alive=1
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    untrack "$SERVER_PID"
    SERVER_PID=""
    reap_client "$2"
    LANDED=$alive
  fi
}
# reap_client PID: the client of a killed server ends by itself (its retries give up) or is
# killed after 5 s.
reap_client() {
  local t0; t0=$(now_ms)
  while [ "$(proc_state "$1")" != gone ] && [ "$(proc_state "$1")" != Z ] && [ $(($(now_ms) - t0)) -lt 5000 ]; do sleep 0.01; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  untrack "$1"
}

# gc_round MODE OP: prepares a repack or garbage, checks the plan has it, and kills the gc
# (bdn gc, or bdn serve's) at a phase, or a random moment after it.
gc_round() {
  local mode=$1 op=$2 phase cont at pid log="$WORK/gc.log"
  if [ "$op" = repack ]; then
    pick doomed copied; phase=$PICKED
  else
    pick planned sweeping deleted swept; phase=$PICKED
  fi
  pick no yes; cont=$PICKED  # yes: let it go on from the phase and kill it a random moment later
  # Nothing is left to land in after these.
  if [ "$phase" = swept ] || { [ "$op" = repack ] && [ "$phase" = copied ]; }; then cont=no; fi
  : >"$log"
  if [ "$mode" = embedded ]; then
    BDN_TEST_GC_STOP_AT=$phase "$BDN" gc --grace 0s --max-repack-fraction 0.9 >"$log" 2>&1 &
    pid=$!; PIDS+=("$pid")
  else
    # Not start_bdn: the server may stop itself before it prints its address.
    log="$WORK/gcserve.log"
    BDN_TEST_GC_STOP_AT=$phase "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth \
      --gc-interval 50ms --gc-grace 0s --gc-max-repack-fraction 0.9 >"$log" 2>&1 &
    pid=$!; PIDS+=("$pid")
  fi
  wait_stopped "$pid" "$log"
  at=0
  if [ "$cont" = yes ]; then
    rnd 12; at=$RND
    kill -CONT "$pid"
    sleep_ms "$at"
  fi
  kill -9 "$pid" 2>/dev/null || true
  reap "$pid"
  # bdn serve lives on after its gc: whether the run had ended is in its log.
  if [ "$mode" = server ] && [ -n "$(sed -n '/ info gc: reclaimed/p' "$log")" ]; then LANDED=0; fi
  OP_JSON='{"op":"gc"}'
  local what="bdn gc"
  [ "$mode" = server ] && what="bdn serve"
  what+=" stopped at $phase"
  [ "$cont" = yes ] && what+=", killed $at ms after it went on"
  count "$mode" "$op" "$what"
}

# ---- embedded ----
step "embedded"
export BDN_HOME="$WORK/emb"
python3 "$MODEL_PY" init "$WORK/model.json" "${VOLS[@]}"
for v in "${VOLS[@]}"; do new_tree; push_new "$v" "$TREE"; done
RM_EXPIRES=false
while next_op embedded && op=$OP && [ -n "$op" ]; do
  ROUND=$((ROUND + 1))
  [ "$ROUND" -le 120 ] || fail "the embedded kills did not all land in 120 rounds"
  cap
  pick false true; RM_EXPIRES=$PICKED
  [ "$op" = restore ] && RM_EXPIRES=false
  case $op in
    repack|gc)
      if [ "$op" = repack ]; then prepare_repack; else prepare_garbage; fi
      plan
      [ "$op" = gc ] && [ $((PLAN_DELETES + PLAN_REPACKS)) -eq 0 ] && fail "round $ROUND: nothing to reclaim after a version expired"
      [ "$op" = repack ] && [ "$PLAN_REPACKS" -eq 0 ] && fail "round $ROUND: no pack to repack after the mixed version expired"
      gc_round embedded "$op" ;;
    *) run_op embedded "$op" ;;
  esac
  fsck_clean
  check_model "$OP_JSON"
  echo "  $(python3 "$MODEL_PY" summary "$WORK/model.json"); $VERIFIED versions verified; fsck clean"
  rm -rf "$WORK/trees"; mkdir -p "$WORK/trees"
done
# A last gc completes, and everything still verifies.
quiet "$BDN" gc --grace 0s
fsck_clean
check_model '{"op":"gc"}'

# ---- bdn serve ----
step "bdn serve: the client or the server killed"
export BDN_HOME="$WORK/client"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN BDN_RETENTION
python3 "$MODEL_PY" init "$WORK/model.json" "${VOLS[@]}"
# Between the ops, a server whose rm expires at once: it checks the model after one op and
# prepares the next (neither deletes anything it is not asked to); each op has its own server.
serve setup --gc-interval 0s --retention 0s
for v in "${VOLS[@]}"; do new_tree; push_new "$v" "$TREE"; done
while next_op server && op=$OP && [ -n "$op" ]; do
  ROUND=$((ROUND + 1))
  [ "$ROUND" -le 240 ] || fail "the server kills did not all land by round 240"
  cap
  case $op in
    repack) prepare_repack ;;
    gc) prepare_garbage ;;
  esac
  stop_server
  pick false true; RM_EXPIRES=$PICKED
  [ "$op" = restore ] && RM_EXPIRES=false  # its preparation may delete a version to restore
  case $op in
    repack|gc)
      plan --data "$WORK/srv"
      [ "$op" = gc ] && [ $((PLAN_DELETES + PLAN_REPACKS)) -eq 0 ] && fail "round $ROUND: nothing to reclaim after a version expired"
      [ "$op" = repack ] && [ "$PLAN_REPACKS" -eq 0 ] && fail "round $ROUND: no pack to repack after the mixed version expired"
      gc_round server "$op" ;;
    *)
      if [ "$RM_EXPIRES" = true ]; then serve op --gc-interval 0s --retention 0s; else serve op --gc-interval 0s; fi
      run_op server "$op"
      stop_server ;;
  esac
  fsck_clean --data "$WORK/srv"
  serve check --gc-interval 0s --retention 0s
  check_model "$OP_JSON"
  echo "  $(python3 "$MODEL_PY" summary "$WORK/model.json"); $VERIFIED versions verified; fsck clean"
  rm -rf "$WORK/trees"; mkdir -p "$WORK/trees"
done
stop_server

# ---- the count ----
total=0
printf '%-8s %-10s %7s %7s\n' mode op killed missed
for mode in embedded server; do
  for op in "${OPS[@]}"; do
    printf '%-8s %-10s %7d %7d\n' "$mode" "$op" "${LANDED_COUNT[$mode:$op]}" "${MISSED_COUNT[$mode:$op]}"
    total=$((total + LANDED_COUNT[$mode:$op]))
  done
done
echo "$total kills landed in $ROUND rounds (seed $SEED): no version lost, none with a missing blob, fsck clean after each"
[ "$total" -ge 50 ] || fail "only $total kills landed"
echo PASS
