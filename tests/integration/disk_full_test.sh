#!/usr/bin/env bash
# A full disk (docs/spec.md §8): a store on a small tmpfs that the test mounts. A push that does
# not fit fails with exit 8 and "no space left on device", leaves the store consistent (fsck
# clean, every version verifies, reads and mounts keep working), and the same push succeeds once
# space is freed. The same for bdn serve's data directory (a mount of the server reads while its
# disk is full), and for a gc that runs out of space
# while it repacks (nothing is deleted; after freeing space it completes).
source "$(dirname "$0")/lib.sh"

mount_small_tmpfs 24m
# Unmounted first (lazily: a killed server may still hold files there), then lib.sh's cleanup.
trap 'rc=$?; for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; umount -l "$small" 2>/dev/null || true; (exit $rc); cleanup' EXIT
cleanup_mounts() { umount -l "$small" 2>/dev/null || true; }

export BDN_HOME="$small/home"
export BDN_RETENTION=0s
mkdir -p "$WORK/fits" "$WORK/big"
random_file "$WORK/fits/a.bin" 3000000 1
random_file "$WORK/big/b.bin" 30000000 2   # more than the tmpfs holds

step "embedded: a push that does not fit fails cleanly and the store stays whole"
head -c 8000000 /dev/zero > "$small/filler"   # what the test frees later
fits=$("$BDN" volume push "$WORK/fits" bdn:df/fits --json | json_field digest)
rc=0; err=$("$BDN" volume push "$WORK/big" bdn:df/big 2>&1 >/dev/null) || rc=$?
echo "$err"
assert_eq 8 "$rc" "exit code of a push into a full store"
assert_contains "${err,,}" "no space left on device"
run_fails 3 "bdn: error: volume bdn:df/big: not found" "$BDN" volume versions bdn:df/big
"$BDN" volume verify "bdn:df/fits@$fits" >/dev/null || fail "the version before does not verify"
"$BDN" volume cat "bdn:df/fits@$fits/a.bin" | cmp - "$WORK/fits/a.bin" || fail "cat from a full store"
"$BDN" fsck >/dev/null || fail "fsck of the store after the failed push: $("$BDN" fsck)"
# A registry write on a full disk says so (exit 8), not "read-only" (exit 6): from a user, the
# registry was opened read-only when the disk had no room for its write-ahead files.
cat /dev/zero > "$small/filler3" 2>/dev/null || true
run_fails 8 "bdn: error: registry $small/home/registry.db: no space left on device" \
  "$BDN" volume tag set --volume-ref "bdn:df/fits@$fits" --tag c2
rm -f "$small/filler3"
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
  mount_volume "bdn:df/fits@$fits" "$WORK/mnt"
  cmp "$WORK/mnt/a.bin" "$WORK/fits/a.bin" || fail "a mount of a full store"
  "$BDN" volume umount "$WORK/mnt" >/dev/null
else
  echo "(no FUSE here: the mount step is left out)"
fi
# Free space (the filler), and let gc reclaim what the failed push stored.
rm -f "$small/filler"
"$BDN" gc --grace 0s >/dev/null || fail "gc after the failed push"
df -B1 --output=avail "$small" | tail -n 1
mkdir -p "$WORK/mid"; random_file "$WORK/mid/m.bin" 12000000 3
"$BDN" volume push "$WORK/mid" bdn:df/mid >/dev/null || fail "a push that fits after freeing space"
"$BDN" volume verify bdn:df/mid >/dev/null || fail "the push after freeing space does not verify"

step "gc that runs out of space while it repacks deletes nothing and completes once there is room"
# A version whose pack is mostly garbage after the delete: its small file must be copied out.
mkdir -p "$WORK/mix"; random_file "$WORK/mix/keep.bin" 2000000 4; random_file "$WORK/mix/drop.bin" 3000000 5
# One hashing thread: with more, keep.bin and drop.bin may go into packs of their own (a pack per
# writer), and then nothing needs a repack (a loaded CI machine: gc exited 0).
"$BDN" volume push "$WORK/mix" bdn:df/mix --jobs 1 >/dev/null
mkdir -p "$WORK/keep"; cp "$WORK/mix/keep.bin" "$WORK/keep/"
keep=$("$BDN" volume push "$WORK/keep" bdn:df/keep --json | json_field digest)
mix=$("$BDN" volume versions bdn:df/mix --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["versions"][0]["digest"])')
"$BDN" volume rm --yes "bdn:df/mix@$mix" >/dev/null
"$BDN" volume rm --yes --recursive bdn:df/mid >/dev/null
# Fill the disk so that the 2 MB of keep.bin cannot be copied.
avail=$(df -B1 --output=avail "$small" | tail -n 1)
head -c $((avail - 200000)) /dev/zero > "$small/filler" 2>/dev/null || true
plan=$("$BDN" gc --grace 0s --max-repack-fraction 0.9 --dry-run --json)
python3 -c 'import json,sys; sys.exit(0 if any(a["action"] == "repack" for a in json.load(sys.stdin)["actions"]) else 1)' <<<"$plan" ||
  fail "gc plans no repack (the test needs one): $plan"
rc=0; err=$("$BDN" gc --grace 0s --max-repack-fraction 0.9 2>&1 >/dev/null) || rc=$?
echo "$err"
assert_eq 8 "$rc" "exit code of gc out of space"
assert_contains "${err,,}" "no space left on device"
[ ! -e "$BDN_HOME/store/gc/doomed" ] || fail "the doom of a failed gc is left behind"
"$BDN" volume verify "bdn:df/keep@$keep" >/dev/null || fail "keep after the failed gc"
rm -f "$small/filler"
out=$("$BDN" gc --grace 0s --max-repack-fraction 0.9 --json) || fail "gc once there is room"
[ "$(json_field packs_repacked <<<"$out")" -ge 1 ] || fail "gc repacked nothing: $out"
"$BDN" volume verify "bdn:df/keep@$keep" >/dev/null || fail "keep after gc"
"$BDN" fsck >/dev/null || fail "fsck after gc"

step "bdn serve: a full data directory answers 412, keeps serving reads, and takes the push once there is room"
rm -rf "$BDN_HOME"
export BDN_HOME="$WORK/client"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
head -c 8000000 /dev/zero > "$small/filler"
start_bdn serve serve --listen 127.0.0.1:0 --data "$small/srv" --insecure-no-auth --gc-interval 0s
SERVER_PID=$STARTED_PID; export BDN_REMOTE=$STARTED_URL
fits=$("$BDN" volume push "$WORK/fits" bdn:df/fits --json | json_field digest)
# A mount of the server, opened before the disk fills; it reads nothing yet (its node cache is in
# the client's home, not on the full disk, so each byte it reads later comes from the server).
have_fuse=0
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
  have_fuse=1
  mount_volume "bdn:df/fits@$fits" "$WORK/srv-mnt"
fi
free_bytes() { local n; n=$(df -B1 --output=avail "$small" | tail -n 1); echo $((n)); }
srv_packs_before=$(ls "$small/srv/store/packs")
srv_free_before=$(free_bytes)
rc=0; err=$("$BDN" volume push "$WORK/big" bdn:df/big --retry-deadline 2s 2>&1 >/dev/null) || rc=$?
echo "$err"
assert_eq 8 "$rc" "exit code of a push into a full server"
assert_contains "${err,,}" "no space left on device"
# From a new user: the partial packs of the failed push stayed until the server's gc (an hour by
# default), and every push failed meanwhile. The server removes them within a second or two.
for _ in $(seq 1 50); do
  [ "$(ls "$small/srv/store/packs")" = "$srv_packs_before" ] && break
  sleep 0.2
done
assert_eq "$srv_packs_before" "$(ls "$small/srv/store/packs")" "the server's packs after the failed push"
[ "$(free_bytes)" -ge $((srv_free_before - 65536)) ] ||
  fail "the failed push kept $((srv_free_before - $(free_bytes))) bytes of $srv_free_before on the server"
mkdir -p "$WORK/after"; random_file "$WORK/after/f.bin" 2000000 8
"$BDN" volume push "$WORK/after" bdn:df/after >/dev/null || fail "a push that fits after the failed one"
"$BDN" volume verify bdn:df/after >/dev/null || fail "the push after the failed one does not verify"
# Whatever the failed push left free is filled too: the reads below run on a disk with no byte free.
cat /dev/zero > "$small/filler2" 2>/dev/null || true
assert_eq 0 "$(free_bytes)" "free bytes on the server's disk"
# The mount first: nothing of a.bin is in the client's node cache yet.
if [ "$have_fuse" = 1 ]; then
  cmp "$WORK/srv-mnt/a.bin" "$WORK/fits/a.bin" || fail "a mount reading from the full server"
  assert_eq 0 "$(free_bytes)" "free bytes after the mount read"
  "$BDN" volume umount "$WORK/srv-mnt" >/dev/null
else
  echo "(no FUSE here: the mount of the full server is left out)"
fi
"$BDN" volume cat "bdn:df/fits@$fits/a.bin" | cmp - "$WORK/fits/a.bin" || fail "a read from the full server"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
unset BDN_REMOTE
rm -f "$small/filler" "$small/filler2"
"$BDN" gc --data "$small/srv" --grace 0s >/dev/null || fail "gc of the server's directory"
"$BDN" fsck --data "$small/srv" >/dev/null || fail "fsck of the server's directory: $("$BDN" fsck --data "$small/srv")"
start_bdn serve2 serve --listen 127.0.0.1:0 --data "$small/srv" --insecure-no-auth --gc-interval 0s
SERVER_PID=$STARTED_PID; export BDN_REMOTE=$STARTED_URL
"$BDN" volume push "$WORK/mid" bdn:df/mid >/dev/null || fail "a push to the server after freeing space"
"$BDN" volume verify bdn:df/mid >/dev/null || fail "that push does not verify"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
unset BDN_REMOTE

step "a pull into a full disk keeps its partial file for the next pull, and says so"
export BDN_HOME="$WORK/home-pull"
mkdir -p "$WORK/pullsrc"; random_file "$WORK/pullsrc/p.bin" 12000000 7
"$BDN" volume push "$WORK/pullsrc" bdn:df/p >/dev/null
rm -rf "${small:?}"/*
head -c 16000000 /dev/zero > "$small/filler"
rc=0; err=$("$BDN" volume pull bdn:df/p "$small/out" 2>&1 >/dev/null) || rc=$?
assert_eq 8 "$rc" "exit code of a pull into a full disk"
assert_contains "$err" "No space left on device (the partial file is kept, so that the next pull resumes from it; remove it to free the space)"
partials=("$small/out"/.bdn-partial-*)
[ -f "${partials[0]}" ] || fail "no partial file kept: $(ls -a "$small/out")"
rm -f "$small/filler"
"$BDN" volume pull bdn:df/p "$small/out" >/dev/null || fail "the pull after freeing space"
cmp "$small/out/p.bin" "$WORK/pullsrc/p.bin" || fail "the resumed pull's bytes"

step "a new store's registry on a full disk: nothing left that a later command takes for damage"
# From an attacking helper: an empty registry.db was left, and every later command refused the
# directory ("registry.db is empty (a truncated copy?)") even once space was back.
rm -rf "${small:?}"/*
mkdir -p "$small/new-home"
head -c 30000000 /dev/zero > "$small/filler" 2>/dev/null || true
rc=0; err=$("$BDN" --home "$small/new-home" volume push "$WORK/fits" bdn:df/new 2>&1 >/dev/null) || rc=$?
assert_eq 8 "$rc" "exit code of a first push into a new store on a full disk ($err)"
assert_contains "$err" "no space left on device"
[ ! -e "$small/new-home/registry.db" ] || fail "a registry.db was left: $(ls -la "$small/new-home")"
run_fails 3 "bdn: error: embedded store $small/new-home: no store there (nothing was pushed to it); --home or BDN_HOME names another" \
  "$BDN" --home "$small/new-home" volume versions bdn:df/new
rm -f "$small/filler"
"$BDN" --home "$small/new-home" volume push "$WORK/fits" bdn:df/new >/dev/null || fail "the first push once there is room"
"$BDN" --home "$small/new-home" volume verify bdn:df/new >/dev/null || fail "verify of that push"
leftovers=$(find "$small/new-home" -maxdepth 1 -name 'registry.db.new-*' -print -quit)
[ -z "$leftovers" ] || fail "temporary registry files left: $leftovers"
cleanup_mounts
echo PASS
