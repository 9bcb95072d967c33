#!/usr/bin/env bash
# A remote mount through the node cache: a volume larger than --cache-size reads correctly and
# the cache stays within its bound. Then, with a cache that holds what was read: while the origin
# hangs (SIGSTOP) or is gone (SIGKILL), ls and stat answer at once, cached bytes stay readable,
# and an uncached read fails with EIO within --read-timeout instead of hanging; once the origin
# is back, the same read succeeds without a remount.
source "$(dirname "$0")/lib.sh"
needs_fuse

step "start the origin and push"
start_origin
mkdir -p "$WORK/src"
random_file "$WORK/src/big.bin" 12000000 11
random_file "$WORK/src/cold.bin" 3000000 12
printf 'cached bytes\n' > "$WORK/src/small.txt"
ref=$("$BDN" volume push "$WORK/src" bdn:test/cached)

step "mount with a node cache smaller than the volume"
NC="$WORK/nodecache"
mkdir -p "$WORK/mnt"
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$NC" --cache-size 4M --memory-cache 1M \
  --read-timeout 3 >/dev/null 2>"$WORK/mount.err"
MOUNTS+=("$WORK/mnt")
# Said at mount time: each read of all of it fetches again what the last one evicted.
assert_eq "warning: this version's files hold 14.31 MiB, more than the node cache (--cache-size 4.00 MiB): reading all of it evicts what was read first, and the next read of that fetches it again from the cache nodes or the origin; --cache-size 15M or more holds it" \
  "$(cat "$WORK/mount.err")" "mount warning"
(cd "$WORK/src" && b3sum big.bin small.txt) > "$WORK/sums"
(cd "$WORK/mnt" && b3sum --check --quiet "$WORK/sums") || fail "b3sum through the mount"
[ -d "$NC/packs" ] || fail "no node cache at $NC"
# The bytes of its region files (sealed, and the one being filled).
usage=$(python3 - "$NC" <<'PY'
import os, sys
d = os.path.join(sys.argv[1], "packs")
print(sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
          if f.endswith(".pack") or f.endswith(".open")))
PY
)
[ "$usage" -gt 0 ] || fail "the node cache holds nothing"
[ "$usage" -le $((4 * 1024 * 1024)) ] || fail "node cache holds $usage bytes, over its 4 MiB bound"
"$BDN" volume umount "$WORK/mnt" >/dev/null
MOUNTS=()

step "mount again with a node cache that holds what is read"
"$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nodecache2" --cache-size 64M \
  --memory-cache 1M --read-timeout 3 >/dev/null 2>"$WORK/mount2.err"
[ ! -s "$WORK/mount2.err" ] || fail "mount with a cache that holds the version: $(cat "$WORK/mount2.err")"
MOUNTS+=("$WORK/mnt")
head -c 2000000 "$WORK/mnt/big.bin" | cmp - <(head -c 2000000 "$WORK/src/big.bin") \
  || fail "head of big.bin through the second mount"
assert_eq "cached bytes" "$(cat "$WORK/mnt/small.txt")" "small.txt"

# direct_read FILE OFFSET: 64 KiB at OFFSET with O_DIRECT (the daemon answers, not the page
# cache) to stdout; fails as dd does.
direct_read() { dd if="$1" bs=65536 skip=$(($2 / 65536)) count=1 iflag=direct status=none; }
want_cold=$(python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.stdout.write(d[1048576:1048576+65536].hex())' "$WORK/src/cold.bin")

want_big=$(python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.stdout.write(d[65536:131072].hex())' "$WORK/src/big.bin")
# direct_hex FILE OFFSET: direct_read as hex.
direct_hex() { direct_read "$1" "$2" | python3 -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().hex())'; }

step "the origin hangs (SIGSTOP): metadata answers, cached bytes read, uncached fail in time"
kill -STOP "$SERVER_PID"
t0=$(now_ms)
timeout 5 ls -la "$WORK/mnt" >/dev/null || fail "ls of the mount with the origin stopped"
timeout 5 stat "$WORK/mnt/cold.bin" >/dev/null || fail "stat with the origin stopped"
took=$(($(now_ms) - t0))
[ "$took" -lt 1500 ] || fail "ls and stat took $took ms with the origin stopped"
assert_eq "cached bytes" "$(timeout 10 cat "$WORK/mnt/small.txt")" "cached small.txt"
assert_eq "cached bytes" "$(direct_read "$WORK/mnt/small.txt" 0)" "cached small.txt (O_DIRECT)"
assert_eq "$want_big" "$(direct_hex "$WORK/mnt/big.bin" 65536)" "cached big.bin [64 KiB, 128 KiB)"
t0=$(now_ms)
err=$(timeout 20 dd if="$WORK/mnt/cold.bin" bs=65536 skip=16 count=1 iflag=direct status=none 2>&1 >/dev/null) \
  && fail "an uncached read succeeded with the origin stopped"
took=$(($(now_ms) - t0))
assert_contains "$err" "Input/output error"
[ "$took" -ge 2500 ] && [ "$took" -lt 6000 ] || fail "uncached read failed after $took ms (read timeout 3 s)"

step "the origin resumes: the same read succeeds, no remount"
kill -CONT "$SERVER_PID"
got=$(timeout 30 bash -c "$(declare -f direct_read direct_hex); direct_hex '$WORK/mnt/cold.bin' 1048576") \
  || fail "read after the origin resumed"
assert_eq "$want_cold" "$got" "cold.bin [1 MiB, +64 KiB) after the origin resumed"

step "the origin is gone (SIGKILL): cached bytes still read, uncached fail in time"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
assert_eq "cached bytes" "$(direct_read "$WORK/mnt/small.txt" 0)" "small.txt with the origin gone"
assert_eq "$want_big" "$(direct_hex "$WORK/mnt/big.bin" 65536)" "big.bin with the origin gone"
t0=$(now_ms)
# Offset 0: before anything read or prefetched (prefetch runs ahead of reads only).
timeout 20 dd if="$WORK/mnt/cold.bin" bs=65536 skip=0 count=1 iflag=direct status=none >/dev/null 2>&1 \
  && fail "an uncached read succeeded with the origin gone"
took=$(($(now_ms) - t0))
[ "$took" -lt 6000 ] || fail "uncached read failed after $took ms (read timeout 3 s)"
# A buffered read: the kernel retries a failed readahead with the read itself; the retry must
# not wait a whole read timeout again.
t0=$(now_ms)
timeout 20 dd if="$WORK/mnt/cold.bin" bs=4096 skip=100 count=1 status=none >/dev/null 2>&1 \
  && fail "an uncached buffered read succeeded with the origin gone"
took=$(($(now_ms) - t0))
[ "$took" -ge 2500 ] && [ "$took" -lt 5000 ] || fail "uncached buffered read failed after $took ms (read timeout 3 s)"
timeout 5 ls "$WORK/mnt" >/dev/null || fail "ls with the origin gone"

step "with the origin gone, a pinned ref mounts again from the node cache (a node restarting during an outage)"
"$BDN" volume umount "$WORK/mnt" >/dev/null
err=$("$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nodecache2" --read-timeout 3 2>&1 >/dev/null) \
  || fail "pinned mount with the origin gone: $err"
assert_contains "$err" "from the node cache without checking the registry"
assert_eq "cached bytes" "$(direct_read "$WORK/mnt/small.txt" 0)" "small.txt after the remount"
run_fails 7 "bdn: error: origin $URL: connection refused (nothing listens there: is bdn serve running, and is --remote or BDN_REMOTE the right URL?)" \
  "$BDN" volume mount bdn:test/cached "$WORK/mnt2"

step "with an origin that never answers, a pinned ref mounts from the node cache too"
# It failed after the request's 60 s with "no response within 60000 ms", exit 7.
"$BDN" volume umount "$WORK/mnt" >/dev/null
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True); time.sleep(600)' > "$WORK/silent.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/silent.port" ] && break; sleep 0.05; done
silent="http://127.0.0.1:$(cat "$WORK/silent.port")"
err=$(BDN_REMOTE="$silent" timeout 100 "$BDN" volume mount "$ref" "$WORK/mnt" --cache-dir "$WORK/nodecache2" \
  --read-timeout 3 2>&1 >/dev/null) || fail "pinned mount with a silent origin: $err"
assert_eq "warning: origin $silent: GET /v1/volumes/test/cached/find?prefix=${ref##*@b3:}: no response within 60000 ms; mounting $ref from the node cache without checking the registry" "$err" "mount's warning"
assert_eq "cached bytes" "$(direct_read "$WORK/mnt/small.txt" 0)" "small.txt with a silent origin"

step "umount"
"$BDN" volume umount "$WORK/mnt" >/dev/null
MOUNTS=()
echo "PASS"
