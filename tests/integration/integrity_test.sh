#!/usr/bin/env bash
# A version can never describe bytes it does not have (issue 7 item 1, issue 14 item 6). Crafted
# versions (tests/tools/bdn_craft) whose manifest or chunk index lies about lengths, sizes or the
# file digest are refused at commit by `bdn serve` with 422 naming the file; one already in a
# store (written before the check, or behind the registry's back) is refused by every reader:
# verify, cat and pull exit 5 naming the file and chunk, pull writes nothing, a mount answers EIO
# and never crashes, embedded and through --remote.
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
: "${BDN_CRAFT:?BDN_CRAFT must point at the bdn_craft test tool}"

HELLO="b3:$(printf 'hello\n' | b3sum --no-names)"
too_long() { echo "file \"f.bin\": chunk $HELLO: is 6 bytes, the version says $1"; }
WRONG="b3:$(printf 'something else' | b3sum --no-names)"
MISMATCH="file \"f.bin\": content does not match its digest $WRONG"

# run_cmd NAME cmd...: runs it with stdout in $WORK/NAME.out, stderr in $WORK/NAME.err; sets RC.
run_cmd() {
  local name=$1; shift
  RC=0
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
}

# readers_refuse REF: verify, cat and pull of each crafted version REF_<case> exit 5 with exact
# messages; the honest file of each still reads.
readers_refuse() {
  local overlong=$1 single=$2 wrong=$3 short=$4

  step "verify reports each lying chunk and the wrong digest"
  run_cmd verify "$BDN" volume verify "$overlong"
  assert_eq 5 "$RC" "verify exit code (overlong chunks)"
  assert_eq "corruption: file \"f.bin\": chunk $HELLO: is 6 bytes, the version says 10
corruption: file \"f.bin\": chunk $HELLO: is 6 bytes, the version says 10" "$(head -n 2 "$WORK/verify.out")" "verify problems"
  assert_contains "$(tail -n 1 "$WORK/verify.out")" ": 2 files, 1 chunk, 5 B checked, 2 problems"
  run_cmd verify "$BDN" volume verify "$single" --json
  assert_eq 5 "$RC" "verify exit code (overlong single chunk)"
  assert_eq "chunk $HELLO: is 6 bytes, the version says 999" \
    "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["problems"][0]["message"])' < "$WORK/verify.out")" "verify --json message"
  run_cmd verify "$BDN" volume verify "$wrong"
  assert_eq 5 "$RC" "verify exit code (wrong digest)"
  assert_eq "corruption: file \"f.bin\": content does not match its digest $WRONG" "$(head -n 1 "$WORK/verify.out")" "verify digest problem"
  run_cmd verify "$BDN" volume verify "$short"
  assert_eq 5 "$RC" "verify exit code (chunk index short of the file)"
  assert_eq "corruption: file \"f.bin\": chunks add up to 6 bytes, the file has 12" "$(head -n 1 "$WORK/verify.out")" "verify chunk list problem"
  assert_eq "bdn: error: version $short: 1 problem" "$(cat "$WORK/verify.err")" "verify stderr"

  step "cat exits 5: nothing of a lying chunk is written; a wrong digest is said after the bytes"
  run_cmd cat "$BDN" volume cat "$overlong/f.bin"
  assert_eq 5 "$RC" "cat exit code (overlong chunks)"
  assert_eq "bdn: error: $(too_long 10)" "$(cat "$WORK/cat.err")" "cat stderr"
  assert_eq 0 "$(stat -c %s "$WORK/cat.out")" "cat stdout bytes"
  run_cmd cat "$BDN" volume cat "$single/f.bin"
  assert_eq 5 "$RC" "cat exit code (overlong single chunk)"
  assert_eq "bdn: error: $(too_long 999)" "$(cat "$WORK/cat.err")" "cat stderr"
  run_cmd cat "$BDN" volume cat "$wrong/f.bin"
  assert_eq 5 "$RC" "cat exit code (wrong digest)"
  assert_eq "bdn: error: $MISMATCH (the bytes written are not the file's)" "$(cat "$WORK/cat.err")" "cat stderr"
  cmp "$WORK/cat.out" <(printf 'hello\nworld\n') || fail "cat bytes of the wrong-digest file"
  assert_eq "fine" "$("$BDN" volume cat "$overlong/ok.txt")" "the honest file still reads"

  step "pull exits 5 and writes no lying file"
  rm -rf "$WORK/out"
  run_cmd pull "$BDN" volume pull "$overlong" "$WORK/out"
  assert_eq 5 "$RC" "pull exit code (overlong chunks)"
  assert_eq "bdn: error: $(too_long 10)" "$(cat "$WORK/pull.err")" "pull stderr"
  run_cmd pull "$BDN" volume pull "$single" "$WORK/out"
  assert_eq 5 "$RC" "pull exit code (overlong single chunk)"
  assert_eq "bdn: error: $(too_long 999)" "$(cat "$WORK/pull.err")" "pull stderr"
  run_cmd pull "$BDN" volume pull "$wrong" "$WORK/out"
  assert_eq 5 "$RC" "pull exit code (wrong digest)"
  assert_eq "bdn: error: $MISMATCH" "$(cat "$WORK/pull.err")" "pull stderr"
  [ ! -e "$WORK/out/f.bin" ] || fail "pull wrote a file it had not verified: $(stat -c %s "$WORK/out/f.bin") bytes"
  assert_eq "ok.txt" "$(ls -A "$WORK/out")" "what pull left in its directory (no partial file)"
  # A chunk list that does not cover its file left an empty .bdn-partial-… file behind.
  rm -rf "$WORK/out"
  run_cmd pull "$BDN" volume pull "$short" "$WORK/out"
  assert_eq 5 "$RC" "pull exit code (chunk index short of the file)"
  assert_eq "bdn: error: file \"f.bin\": chunks add up to 6 bytes, the file has 12" "$(cat "$WORK/pull.err")" "pull stderr"
  assert_eq "ok.txt" "$(ls -A "$WORK/out")" "what pull left in its directory"
}

# mount_refuses REF_OVERLONG REF_HUGE: reading the lying file through a mount is EIO (and the
# daemon lives on); a version declaring a 4 GiB single chunk does not mount.
mount_refuses() {
  step "mount: EIO for the lying file, the honest one reads, the daemon survives"
  mount_volume "$1" "$WORK/mnt"
  run_cmd dd dd if="$WORK/mnt/f.bin" of=/dev/null bs=64k
  [ "$RC" -ne 0 ] || fail "the mount served the lying file"
  assert_contains "$(cat "$WORK/dd.err")" "Input/output error"
  assert_eq "fine" "$(cat "$WORK/mnt/ok.txt")" "honest file through the mount"
  run_cmd dd dd if="$WORK/mnt/f.bin" of=/dev/null bs=1 skip=15 count=1
  assert_contains "$(cat "$WORK/dd.err")" "Input/output error"
  assert_eq "fine" "$(cat "$WORK/mnt/ok.txt")" "the mount still answers"
  "$BDN" volume umount "$WORK/mnt" >/dev/null

  step "a version declaring a 4 GiB single chunk does not mount"
  mkdir -p "$WORK/mnt2"
  run_cmd mount "$BDN" volume mount "$2" "$WORK/mnt2"
  assert_eq 5 "$RC" "mount exit code"
  assert_eq "bdn: error: version ${2#*@}: manifest: path \"f.bin\": single-chunk file of 4294967296 bytes is longer than the chunker maximum 262144" \
    "$(cat "$WORK/mount.err")" "mount stderr"
  ! mountpoint -q "$WORK/mnt2" || fail "mounted a version no reader can hold"
}

step "embedded store holding crafted versions"
for c in overlong-chunks overlong-single wrong-digest short-index huge-single; do
  declare "REF_${c//-/_}=$("$BDN_CRAFT" "$c" --home "$BDN_HOME" --ref "bdn:t/$c")"
done
readers_refuse "$REF_overlong_chunks" "$REF_overlong_single" "$REF_wrong_digest" "$REF_short_index"
mount_refuses "$REF_overlong_chunks" "$REF_huge_single"

step "a stored version with a name that is not UTF-8: every reader exits 5 naming it escaped, --json stays JSON"
REF_nu=$("$BDN_CRAFT" non-utf8-name --home "$BDN_HOME" --ref bdn:t/non-utf8)
NU_MSG="version ${REF_nu#*@}: manifest: path \"caf\\xe9.txt\": not valid UTF-8"
for cmd in "volume ls $REF_nu" "volume stat $REF_nu" "volume verify $REF_nu" "volume pull $REF_nu $WORK/nu-out"; do
  run_cmd nu $BDN $cmd --json
  assert_eq 5 "$RC" "exit code of $cmd --json"
  assert_eq "corruption: $NU_MSG" "$(python3 -c 'import json,sys; e=json.load(sys.stdin)["error"]; print(e["code"] + ": " + e["message"])' < "$WORK/nu.out")" "$cmd --json error"
  run_cmd nu $BDN $cmd
  assert_eq 5 "$RC" "exit code of $cmd"
  assert_eq "bdn: error: $NU_MSG" "$(cat "$WORK/nu.err")" "$cmd stderr"
done
[ ! -e "$WORK/nu-out/caf"* ] || fail "pull wrote a file of a version that does not decode"

step "bdn serve refuses crafted commits with 422 naming the file"
DATA="$WORK/data"
mkdir -p "$DATA"
# Crafted versions already in the origin's store, for the --remote readers below.
for c in overlong-chunks overlong-single wrong-digest short-index huge-single; do
  declare "RREF_${c//-/_}=$("$BDN_CRAFT" "$c" --home "$DATA" --ref "bdn:old/$c")"
done
start_bdn serve serve --listen 127.0.0.1:0 --data "$DATA"
URL=$STARTED_URL
TOKEN=$(cat "$DATA/admin.token")

# commit CASE: uploads CASE's blobs and commits its version to bdn:t/CASE; sets VERSION (b3:<hex>)
# and STATUS (the HTTP status), and leaves the body in $WORK/body.
commit() {
  local dir="$WORK/blobs-$1" id last
  for id in $("$BDN_CRAFT" "$1" --blobs "$dir"); do
    curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/octet-stream' --data-binary "@$dir/$id" "$URL/v1/chunks/$id" ||
      fail "upload of blob $id of $1"
    last=$id
  done
  VERSION="b3:$last"
  STATUS=$(curl -s -o "$WORK/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --data "{\"digest\": \"$last\"}" "$URL/v1/volumes/t/$1/commit")
}
error_of() { python3 -c 'import json,sys; e=json.load(sys.stdin)["error"]; print(e["code"] + ": " + e["message"])' < "$WORK/body"; }

commit overlong-chunks
assert_eq 422 "$STATUS" "commit status (overlong chunks)"
assert_eq "corruption: version $VERSION: $(too_long 10)" "$(error_of)" "commit error"
commit overlong-single
assert_eq 422 "$STATUS" "commit status (overlong single chunk)"
assert_eq "corruption: version $VERSION: $(too_long 999)" "$(error_of)" "commit error"
commit short-index
assert_eq 422 "$STATUS" "commit status (chunk index short of the file)"
assert_eq "corruption: version $VERSION: file \"f.bin\": chunks add up to 6 bytes, the file has 12" "$(error_of)" "commit error"
commit huge-pair
assert_eq 422 "$STATUS" "commit status (two files of 2^64-1 bytes)"
assert_eq "corruption: version $VERSION: manifest: path \"a.bin\": file size 18446744073709551615 is over 2^63-1 bytes" "$(error_of)" "commit error"
commit huge-total
assert_eq 422 "$STATUS" "commit status (sizes adding up past 2^63-1)"
assert_eq "corruption: version $VERSION: file \"b.bin\": the files' sizes add up to more than 2^63-1 bytes" "$(error_of)" "commit error"
commit huge-single
assert_eq 422 "$STATUS" "commit status (4 GiB single chunk)"
assert_eq "corruption: version $VERSION: manifest: path \"f.bin\": single-chunk file of 4294967296 bytes is longer than the chunker maximum 262144" "$(error_of)" "commit error"
commit non-utf8-name
assert_eq 422 "$STATUS" "commit status (a name that is not UTF-8)"
assert_eq "corruption: version $VERSION: manifest: path \"caf\\xe9.txt\": not valid UTF-8" "$(error_of)" "commit error"
commit good
assert_eq 200 "$STATUS" "commit status of an honest version"

export BDN_REMOTE="$URL" BDN_TOKEN="$TOKEN"
run_cmd versions "$BDN" volume versions bdn:t/huge-pair
assert_eq 3 "$RC" "a refused version is not there"

step "--remote: the same readers refuse the crafted versions already in the origin's store"
readers_refuse "$RREF_overlong_chunks" "$RREF_overlong_single" "$RREF_wrong_digest" "$RREF_short_index"
step "--remote mount through the node cache"
export BDN_HOME="$WORK/client-home"
mount_refuses "$RREF_overlong_chunks" "$RREF_huge_single"
echo "PASS"
