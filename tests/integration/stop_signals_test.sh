#!/usr/bin/env bash
# Every stop signal (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM: those whose
# default action ends a process, sent on purpose) stops bdn's long-running processes cleanly:
# a mount daemon unmounts (the mountpoint is a plain empty directory again, not a dead mount
# that says ENOTCONN) and logs "SIGx: unmounted"; `bdn serve` and `bdn cache serve` log
# "SIGx: shutting down" and exit 0. Before, SIGHUP ended `bdn cache serve` with exit 129 and
# SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM left a dead mount behind. A signal inherited as ignored
# (nohup's SIGHUP) stays ignored, and the others still stop the process cleanly. So do SIGVTALRM,
# SIGXCPU, SIGPWR, SIGSTKFLT, SIGIO and the real-time signals (logged as kill -l names them:
# "SIGRTMIN+3: unmounted"), which left a dead mount behind too.
source "$(dirname "$0")/lib.sh"
needs_fuse

SIGNALS="HUP INT QUIT TERM USR1 USR2 ALRM"
# The rarer ones (init's SIGPWR, a CPU-time limit's SIGXCPU, the real-time signals): each left a
# dead mount behind before. The servers are tried with two of them.
MORE_SIGNALS="VTALRM XCPU PWR STKFLT IO RTMIN RTMIN+3 RTMAX-1 RTMAX"
mkdir -p "$WORK/src"
random_file "$WORK/src/a.bin" 300000 7
ref=$("$BDN" volume push "$WORK/src" bdn:test/sig)

# mounted DIR: whether DIR is a mountpoint now.
mounted() { awk -v d="$1" '$5 == d {f = 1} END {exit !f}' /proc/self/mountinfo; }
# check_unmounted DIR WHAT: DIR is no mountpoint and lists as an empty directory.
check_unmounted() {
  ! mounted "$1" || fail "$2: $1 is still mounted"
  local listing
  listing=$(ls -A "$1" 2>&1) || fail "$2: ls $1: $listing"
  assert_eq "" "$listing" "$2: what $1 holds"
}

for sig in $SIGNALS $MORE_SIGNALS; do
  step "SIG$sig: a background mount daemon unmounts and logs it"
  mp="$WORK/m-$sig"
  mkdir -p "$mp"
  pid=$("$BDN" volume mount "$ref" "$mp" --log-file "$WORK/mount-$sig.log" --json |
    json_field daemon_pid)
  MOUNTS+=("$mp")
  cmp "$mp/a.bin" "$WORK/src/a.bin" || fail "a.bin through the mount"
  kill -s "$sig" "$pid"
  wait_gone "$pid" 5000
  check_unmounted "$mp" "SIG$sig"
  assert_contains "$(cat "$WORK/mount-$sig.log")" "SIG$sig: unmounted"
done

step "SIGUSR1: a foreground mount unmounts and exits 0"
mp="$WORK/m-fg"
mkdir -p "$mp"
"$BDN" volume mount "$ref" "$mp" --foreground 2>"$WORK/fg.log" &
fg=$!
PIDS+=("$fg")
MOUNTS+=("$mp")
for _ in $(seq 1 100); do mounted "$mp" && break; sleep 0.05; done
cmp "$mp/a.bin" "$WORK/src/a.bin" || fail "a.bin through the foreground mount"
kill -USR1 "$fg"
rc=0; wait "$fg" || rc=$?
untrack "$fg"
assert_eq 0 "$rc" "exit status of the foreground mount after SIGUSR1 ($(cat "$WORK/fg.log"))"
check_unmounted "$mp" "foreground SIGUSR1"
assert_contains "$(cat "$WORK/fg.log")" "SIGUSR1: unmounted"

step "a signal the daemon inherited as ignored stays ignored; the others still stop it cleanly"
# nohup's SIGHUP; a shell's `trap '' TERM` (libfuse then leaves SIGTERM alone, and SIGUSR1 must
# still stop the daemon cleanly).
mp="$WORK/m-ign"
mkdir -p "$mp"
pid=$(bash -c 'trap "" HUP TERM; exec "$0" "$@"' "$BDN" volume mount "$ref" "$mp" \
  --log-file "$WORK/mount-ign.log" --json | json_field daemon_pid)
MOUNTS+=("$mp")
assert_eq "$(printf '%x' $(( (1 << (1 - 1)) | (1 << (15 - 1)) | (1 << (13 - 1)) )))" \
  "$(awk '$1 == "SigIgn:" {sub(/^0+/, "", $2); print $2}' "/proc/$pid/status")" \
  "signals the daemon ignores (HUP, TERM, and PIPE)"
kill -HUP "$pid"
kill -TERM "$pid"
cmp "$mp/a.bin" "$WORK/src/a.bin" || fail "a.bin through the mount after the ignored signals"
kill -USR1 "$pid"
wait_gone "$pid" 5000
check_unmounted "$mp" "SIGUSR1 with SIGTERM ignored"
assert_contains "$(cat "$WORK/mount-ign.log")" "SIGUSR1: unmounted"

step "bdn serve under nohup: SIGHUP is ignored, SIGTERM stops it"
: >"$WORK/serve-nohup.log"
nohup "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv-nohup" --insecure-no-auth \
  >/dev/null 2>>"$WORK/serve-nohup.log" &
nohup_pid=$!
PIDS+=("$nohup_pid")
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/serve-nohup.log" && break; sleep 0.1; done
url=$(sed -n '/listening on http:/{s/.*listening on \(http:\/\/[^ ]*\).*/\1/p;q}' "$WORK/serve-nohup.log")
kill -HUP "$nohup_pid"
assert_eq ok "$(curl -sf "$url/healthz")" "/healthz of the server after SIGHUP under nohup"
kill -0 "$nohup_pid" || fail "SIGHUP ended bdn serve under nohup"
kill -TERM "$nohup_pid"
rc=0; wait "$nohup_pid" || rc=$?
untrack "$nohup_pid"
assert_eq 0 "$rc" "exit status of bdn serve after SIGTERM"
assert_contains "$(cat "$WORK/serve-nohup.log")" "SIGTERM: shutting down"

step "an origin that stopped answering holds neither a stopping cache node nor an unmounted daemon"
# Before, both waited for their fetch's deadline: the node exited 59 s after SIGTERM, the mount
# daemon lived on for 36-60 s after its unmount. Now their requests to the upstream end once the
# node's in-flight requests had their grace (5 s), and as soon as the mount's session is over.
# alive PID: PID runs (a zombie that init has not reaped yet has exited).
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
mkdir -p "$WORK/frozen-src"
random_file "$WORK/frozen-src/a.bin" 300000 8
random_file "$WORK/frozen-src/b.bin" 20000000 9
start_bdn frozen-origin serve --listen 127.0.0.1:0 --data "$WORK/srv-frozen" --insecure-no-auth
frozen_origin=$STARTED_PID
frozen_url=$STARTED_URL
frozen_ref=$(BDN_REMOTE=$frozen_url "$BDN" volume push "$WORK/frozen-src" bdn:test/frozen)
# The last chunk of a.bin: its chunk index is BDNI, version, count, then (32-byte id, u32 length)
# records; the node has not fetched it when only the index was read through it.
a_index=$(BDN_REMOTE=$frozen_url "$BDN" --json volume stat "$frozen_ref/a.bin" | json_field chunk_index)
a_index=${a_index#b3:}
a_last=$(curl -sf -H "Bdn-Version: $frozen_ref" "$frozen_url/v1/chunks/$a_index" |
  python3 -c 'import sys; b = sys.stdin.buffer.read(); assert b[:4] == b"BDNI"; print(b[-36:-4].hex())')
start_bdn frozen-node cache serve --upstream "$frozen_url" --listen 127.0.0.1:0 \
  --cache-dir "$WORK/cache-frozen"
frozen_node=$STARTED_PID
curl -sf -o /dev/null -H "Bdn-Version: $frozen_ref" "$STARTED_URL/v1/chunks/$a_index" ||
  fail "a.bin's chunk index through the node"
# --home with a remote origin: where the mount daemon's log goes (it went to $BDN_HOME).
frozen_daemon=$(BDN_REMOTE=$frozen_url "$BDN" --home "$WORK/remote-home" volume mount "$frozen_ref" \
  "$WORK/mnt-frozen" --cache-dir "$WORK/nc-frozen" --json | json_field daemon_pid)
compgen -G "$WORK/remote-home/logs/mount-mnt-frozen-*.log" >/dev/null ||
  fail "no mount daemon log under --home $WORK/remote-home: $(ls -R "$WORK/remote-home" 2>&1)"
MOUNTS+=("$WORK/mnt-frozen")
head -c 100000 "$WORK/mnt-frozen/b.bin" >/dev/null
kill -STOP "$frozen_origin"
curl -s -o /dev/null -H "Bdn-Version: $frozen_ref" "$STARTED_URL/v1/chunks/$a_last" &
frozen_curl=$!
cat "$WORK/mnt-frozen/b.bin" >/dev/null 2>&1 &
frozen_cat=$!
sleep 1
kill -9 "$frozen_cat"
wait "$frozen_cat" 2>/dev/null || true
"$BDN" volume umount "$WORK/mnt-frozen" >/dev/null
kill -TERM "$frozen_node"
for _ in $(seq 1 200); do
  alive "$frozen_daemon" || alive "$frozen_node" || break
  sleep 0.1
done
! alive "$frozen_daemon" || fail "the mount daemon still runs 20 s after its unmount"
! alive "$frozen_node" || fail "the cache node still runs 20 s after SIGTERM"
rc=0; wait "$frozen_node" || rc=$?
untrack "$frozen_node"
assert_eq 0 "$rc" "exit status of the cache node stopped while its fetch waited"
wait "$frozen_curl" || true

step "a stop signal during a cache node's start-up checks stops it at once"
# The checks (the upstream chain, then the node's key) each waited up to 10 s on an upstream that
# does not answer before the signal was taken (helper 87: 8.2 s, up to 20 s for both).
: >"$WORK/node-starting.log"
"$BDN" cache serve --upstream "$frozen_url" --listen 127.0.0.1:0 --cache-dir "$WORK/cache-starting" \
  2>>"$WORK/node-starting.log" &
starting=$!
PIDS+=("$starting")
for _ in $(seq 1 100); do grep -q "^.* info cache node " "$WORK/node-starting.log" && break; sleep 0.05; done
assert_contains "$(cat "$WORK/node-starting.log")" " info cache node "
start=$(date +%s%N)
kill -TERM "$starting"
rc=0; wait "$starting" || rc=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
untrack "$starting"
assert_eq 0 "$rc" "exit status of a node stopped during its start-up checks"
[ "$took_ms" -le 6000 ] || fail "the node took $took_ms ms to stop during its start-up checks"
assert_contains "$(cat "$WORK/node-starting.log")" "SIGTERM: shutting down"
assert_absent "listening on" "a node stopped during its start-up checks" "$WORK/node-starting.log"
kill -CONT "$frozen_origin"

# The servers below start in the background, where a non-interactive shell ignores SIGINT and
# SIGQUIT (and bdn keeps them ignored): put both back to their default action.
REAL_BDN=$BDN
BDN="$WORK/bdn-default-signals"
printf '#!/bin/sh\nexec env --default-signal=INT,QUIT "%s" "$@"\n' "$REAL_BDN" > "$BDN"
chmod +x "$BDN"
for sig in $SIGNALS PWR RTMIN+3; do
  step "SIG$sig: bdn serve and bdn cache serve shut down and exit 0"
  start_bdn "serve-$sig" serve --listen 127.0.0.1:0 --data "$WORK/srv-$sig" --insecure-no-auth
  origin=$STARTED_PID
  origin_url=$STARTED_URL
  start_bdn "cache-$sig" cache serve --upstream "$origin_url" --listen 127.0.0.1:0 \
    --cache-dir "$WORK/cache-$sig"
  cache=$STARTED_PID
  for p in "$cache" "$origin"; do
    kill -s "$sig" "$p"
    rc=0; wait "$p" || rc=$?
    untrack "$p"
    name=$([ "$p" = "$cache" ] && echo "cache-$sig" || echo "serve-$sig")
    assert_eq 0 "$rc" "exit status of $name after SIG$sig ($(tail -3 "$WORK/$name.log"))"
    assert_contains "$(cat "$WORK/$name.log")" "SIG$sig: shutting down"
  done
done
echo "PASS"
