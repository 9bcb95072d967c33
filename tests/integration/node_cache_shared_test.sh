#!/usr/bin/env bash
# Remote mounts sharing one --cache-dir read each other's cached chunks: a live mount of a version
# another live mount has read fetches no chunk from the origin (its bdn_chunks_sent_total stays
# put); with the origin gone, a mount reads what another running mount cached in the region it
# is still filling, a mount started after the origin stopped does too, and every mount seals its
# region as it exits (no .open region is left behind), so each chunk a mount cached stays
# readable by the others. (Before: the second mount fetched every chunk again, its reads with
# the origin gone failed with EIO after the read timeout, and the daemons left by _exit with
# their regions unsealed, unseen by mounts already running.)
source "$(dirname "$0")/lib.sh"
needs_fuse

step "start the origin and push two versions sharing w2.bin"
start_origin
mkdir -p "$WORK/v1" "$WORK/v2"
random_file "$WORK/v1/w1.bin" 3000000 21
random_file "$WORK/v1/w2.bin" 3000000 22
cp "$WORK/v1/w2.bin" "$WORK/v2/w2.bin"
printf 'v2 only\n' > "$WORK/v2/readme.txt"
ref1=$("$BDN" volume push "$WORK/v1" bdn:test/shared)
ref2=$("$BDN" volume push "$WORK/v2" bdn:test/shared)
(cd "$WORK/v1" && b3sum w1.bin w2.bin) > "$WORK/sums1"
(cd "$WORK/v2" && b3sum w2.bin) > "$WORK/sums2"

NC="$WORK/nodecache"
# mount_shared REF DIR: a mount through the node cache $NC, failing a read after 3 s.
mount_shared() {
  mkdir -p "$2"
  "$BDN" volume mount "$1" "$2" --cache-dir "$NC" --memory-cache 1M --read-timeout 3 \
    >/dev/null 2>>"$WORK/mount.err"
  MOUNTS+=("$2")
}
# open_regions: the names of the regions being filled in $NC, one a line.
open_regions() { find "$NC/packs" -name '*.open' -printf '%f\n'; }

# chunks_sent: the chunks the origin has sent so far (its bdn_chunks_sent_total).
chunks_sent() { curl -sf "$URL/metrics" | awk '/^bdn_chunks_sent_total/ {print $2}'; }

step "mount v1 twice and v2 on one node cache; m1 reads every file"
mount_shared "$ref1" "$WORK/m1"
mount_shared "$ref1" "$WORK/m1b"
mount_shared "$ref2" "$WORK/m2"
assert_eq "v2 only" "$(cat "$WORK/m2/readme.txt")" "readme.txt through m2"
before=$(chunks_sent)
(cd "$WORK/m1" && b3sum --check --quiet "$WORK/sums1") || fail "b3sum through m1"
[ -n "$(open_regions)" ] || fail "no region being filled in $NC after the reads"
sent=$(chunks_sent)
[ "$sent" -gt "$before" ] || fail "m1's reads sent no chunk from the origin ($before, then $sent)"

step "m1b, a live mount of the same version, reads it all without asking the origin"
(cd "$WORK/m1b" && b3sum --check --quiet "$WORK/sums1") || fail "b3sum through m1b"
assert_eq "$sent" "$(chunks_sent)" "chunks the origin sent after m1b read v1"

step "the origin is gone: m2 reads w2.bin from the region m1 is still filling"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
t0=$(now_ms)
(cd "$WORK/m2" && timeout 30 b3sum --check --quiet "$WORK/sums2") \
  || fail "b3sum of w2.bin through m2 with the origin gone"
took=$(($(now_ms) - t0))
[ "$took" -lt 2500 ] || fail "reading w2.bin through m2 took $took ms: it waited for the origin"

step "a mount started after the origin stopped reads v1 from the same regions"
mount_shared "$ref1" "$WORK/m3"
(cd "$WORK/m3" && timeout 30 b3sum --check --quiet "$WORK/sums1") \
  || fail "b3sum through m3 (started with the origin gone)"

step "every mount seals its region as it exits"
for m in m1 m1b m2 m3; do "$BDN" volume umount "$WORK/$m" >/dev/null; done
MOUNTS=()
# umount returns once the kernel lets go; each daemon seals its region just after.
for _ in $(seq 1 100); do [ -z "$(open_regions)" ] && break; sleep 0.1; done
assert_eq "" "$(open_regions)" "regions left being filled 10 s after every mount was unmounted"

step "a mount started now reads everything from the sealed regions"
mount_shared "$ref1" "$WORK/m4"
(cd "$WORK/m4" && timeout 30 b3sum --check --quiet "$WORK/sums1") || fail "b3sum through m4"
"$BDN" volume umount "$WORK/m4" >/dev/null
MOUNTS=()
echo "PASS"
