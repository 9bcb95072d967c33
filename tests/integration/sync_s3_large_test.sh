#!/usr/bin/env bash
# A 2 GiB object synced from s3rver (uploaded by Debian's awscli, multipart) is streamed through
# the chunker as ranged GETs, four in flight, never held or staged: the sync's peak RSS stays
# under 320 MiB (a sixth of the object; it keeps 199-263 MiB of freed memory, by machine load),
# it runs with a file size limit of 512 MiB (ulimit -f: a process that writes past it is killed
# by SIGXFSZ), so no copy of the object can be written anywhere, and the sealed file's digest is
# the b3sum of the uploaded file. The object is sparse with random blocks (zeros elsewhere), so
# it costs little disk locally.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"

step "a 2 GiB object in s3rver"
start_s3rver
aws_direct s3 mb s3://big >/dev/null
truncate -s 2G "$WORK/ckpt.bin"
for off in 0 1 700 1024 1500 2047; do  # random MiB blocks here and there, the last one at the end
  head -c 1048576 /dev/urandom | dd of="$WORK/ckpt.bin" bs=1M seek="$off" conv=notrunc status=none
done
aws_direct s3 cp --quiet "$WORK/ckpt.bin" s3://big/run/ckpt.bin
want=$(b3sum --no-names "$WORK/ckpt.bin")
rm "$WORK/ckpt.bin"
printf '{"access_key_id": "S3RVER", "secret_access_key": "S3RVER"}' | "$BDN" secret set s3

step "sync it under a 512 MiB file size limit; peak RSS under 320 MiB"
(
  ulimit -f $((512 * 1024))  # 1 KiB blocks
  # The limit is in force: a 600 MiB file cannot be written under it.
  if dd if=/dev/zero of="$WORK/probe" bs=1M count=600 status=none 2>/dev/null; then
    fail "a 600 MiB file was written under ulimit -f 512 MiB"
  fi
  rm -f "$WORK/probe"
  exec python3 - "$WORK/rss" "$WORK/rc" "$BDN" --json volume sync start --source s3://big/run \
    --endpoint "$S3" --auth-secret-name s3 --dest bdn:big/ckpt >"$WORK/out.json" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[3:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
open(sys.argv[2], "w").write(str(r.returncode))
PY
)
rc=$(cat "$WORK/rc")
[ "$rc" != "-25" ] || fail "the sync wrote a file past 512 MiB (killed by SIGXFSZ): a staging copy?"
assert_eq "0" "$rc" "exit status of the sync"
out=$(cat "$WORK/out.json")
assert_eq "READY" "$(jf "$out" state)" "state ($(jf "$out" error))"
rss_kib=$(cat "$WORK/rss")
echo "peak RSS of the sync: $((rss_kib / 1024)) MiB"
[ "$rss_kib" -lt $((320 * 1024)) ] || fail "peak RSS $((rss_kib / 1024)) MiB is not under 320 MiB"
assert_eq "2147483648" "$(jf "$out" progress bytes_total)" "bytes_total"
assert_eq "2147483648" "$(jf "$out" progress bytes_fetched)" "bytes fetched (each byte once)"
stat_out=$("$BDN" --json volume stat "$(jf "$out" version_ref)/ckpt.bin")
assert_eq "b3:$want" "$(jf "$stat_out" digest)" "digest of the sealed file (b3sum of the upload)"
echo PASS
