#!/usr/bin/env bash
# Command-line flags shared by many commands: bdn --version (version and git commit, "unknown"
# outside a git checkout), and the one duration syntax of every duration flag (--read-timeout,
# --claim-ttl, --retry-deadline (push, and BDN_RETRY_DEADLINE, also cat's; sync start),
# --header-timeout, --idle-timeout, --write-timeout), checked before anything is opened or
# created: 500ms, 30s, 2m, 1h, a plain number of seconds, with the same errors.
source "$(dirname "$0")/lib.sh"
needs_fuse
SRC_DIR=$(cd "$(dirname "$0")/../.." && pwd)

step "bdn --version prints the version and the commit it was built from"
out=$("$BDN" --version)
[[ "$out" =~ ^bdn\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ ([0-9a-f]{12}(-dirty)?|unknown)\)$ ]] \
  || fail "bdn --version printed [$out]"
if git -C "$SRC_DIR" rev-parse --show-toplevel >/dev/null 2>&1; then
  head=$(git -C "$SRC_DIR" rev-parse --short=12 HEAD)
  [[ "$out" == *"(commit $head)" || "$out" == *"(commit $head-dirty)" ]] \
    || fail "bdn --version says [$out], the source tree is at $head (rebuild after committing)"
fi
assert_eq "$out" "$("$BDN" --version volume ls)" "--version before a subcommand"
# From new-user helper 103: --json printed the text line.
json_out=$("$BDN" --version --json)
assert_eq "$out" "bdn $(json_field version <<<"$json_out") (commit $(json_field commit <<<"$json_out"))" "--version --json"

step "outside a git checkout (a source tarball) the commit is unknown; the header is rewritten only when it changes"
mkdir -p "$WORK/tarball"
cmake -DSOURCE_DIR="$WORK/tarball" -DOUTPUT="$WORK/info.h" -DVERSION=9.8.7 -P "$SRC_DIR/cmake/build_info.cmake"
assert_contains "$(cat "$WORK/info.h")" '#define BDN_GIT_COMMIT "unknown"'
assert_contains "$(cat "$WORK/info.h")" '#define BDN_VERSION "9.8.7"'
touch -d '2001-01-01' "$WORK/info.h"
cmake -DSOURCE_DIR="$WORK/tarball" -DOUTPUT="$WORK/info.h" -DVERSION=9.8.7 -P "$SRC_DIR/cmake/build_info.cmake"
assert_eq 2001 "$(date -r "$WORK/info.h" +%Y)" "mtime of an unchanged build info header"
cmake -DSOURCE_DIR="$WORK/tarball" -DOUTPUT="$WORK/info.h" -DVERSION=9.8.7 -DCOMMIT=0123456789ab \
  -P "$SRC_DIR/cmake/build_info.cmake"
assert_contains "$(cat "$WORK/info.h")" '#define BDN_GIT_COMMIT "0123456789ab"'

step "every duration flag refuses what the one parser refuses, with the same message"
mkdir -p "$WORK/mnt"
for bad in 0 -1s 10x 1e3 nan inf '1 s' 5w 5d; do
  case "$bad" in
    0|5d) why='must be between 100ms and 1h' ;;
    *) why='expected a number and a unit such as 500ms, 30s, 2m, 1h, 7d (a plain number is seconds)' ;;
  esac
  run_fails 2 "bdn: error: --read-timeout: duration \"$bad\": $why" \
    "$BDN" volume mount bdn:x/y@b3:0123456789abcdef "$WORK/mnt" --read-timeout "$bad"
done
run_fails 2 'bdn: error: --read-timeout: duration "61m": must be between 100ms and 1h' \
  "$BDN" volume mount bdn:x/y@b3:0123456789abcdef "$WORK/mnt" --read-timeout 61m
run_fails 2 'bdn: error: --claim-ttl: duration "30 s": expected a number and a unit such as 500ms, 30s, 2m, 1h, 7d (a plain number is seconds)' \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --claim-ttl '30 s'
run_fails 2 'bdn: error: --claim-ttl: duration "50ms": must be between 100ms and 24h' \
  "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" --claim-ttl 50ms
MALFORMED='expected a number and a unit such as 500ms, 30s, 2m, 1h, 7d (a plain number is seconds)'
for flag in --header-timeout --idle-timeout --write-timeout; do
  run_fails 2 "bdn: error: $flag: duration \"2 m\": $MALFORMED" \
    "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/srv" "$flag" '2 m'
  run_fails 2 "bdn: error: $flag: duration \"2 m\": $MALFORMED" \
    "$BDN" cache serve --upstream http://127.0.0.1:9 --listen 127.0.0.1:0 --cache-dir "$WORK/cn" "$flag" '2 m'
done
mkdir -p "$WORK/data"; printf 'x\n' > "$WORK/data/f"
run_fails 2 "bdn: error: --retry-deadline: duration \"2 m\": $MALFORMED" \
  "$BDN" volume push "$WORK/data" bdn:t/v --retry-deadline '2 m'
# A value from BDN_RETRY_DEADLINE is named as such (it was called "--retry-deadline", a flag the
# user never gave); the flag, when given, wins over the variable.
run_fails 2 "bdn: error: BDN_RETRY_DEADLINE: duration \"1e3\": $MALFORMED" \
  env BDN_RETRY_DEADLINE=1e3 "$BDN" volume push "$WORK/data" bdn:t/v
run_fails 2 "bdn: error: BDN_RETRY_DEADLINE: duration \"abc\": $MALFORMED" \
  env BDN_RETRY_DEADLINE=abc "$BDN" volume pull bdn:t/v "$WORK/pulled-env"
run_fails 2 'bdn: error: --retry-deadline: duration "500ms": must be between 1s and 24h' \
  env BDN_RETRY_DEADLINE=5s "$BDN" volume pull bdn:t/v "$WORK/pulled-env" --retry-deadline 500ms
env BDN_RETRY_DEADLINE=abc "$BDN" volume push "$WORK/data" bdn:t/env --retry-deadline 5s >/dev/null 2>&1 ||
  fail "push --retry-deadline 5s with BDN_RETRY_DEADLINE=abc"
run_fails 2 'bdn: error: --retry-deadline: duration "500ms": must be between 1s and 24h' \
  "$BDN" volume push "$WORK/data" bdn:t/v --retry-deadline 500ms
# cat has no flag for it; a bad BDN_RETRY_DEADLINE was taken for 60 s without a word.
"$BDN" volume push "$WORK/data" bdn:t/cat >/dev/null 2>&1
run_fails 2 "bdn: error: BDN_RETRY_DEADLINE: duration \"1e3\": $MALFORMED" \
  env BDN_RETRY_DEADLINE=1e3 "$BDN" volume cat bdn:t/cat/f
assert_eq x "$(BDN_RETRY_DEADLINE=5s "$BDN" volume cat bdn:t/cat/f)" "cat with a valid BDN_RETRY_DEADLINE"
for bad in '2 m' 500ms; do
  case "$bad" in
    500ms) why='must be between 1s and 24h' ;;
    *) why=$MALFORMED ;;
  esac
  run_fails 2 "bdn: error: --retry-deadline: duration \"$bad\": $why" \
    env BDN_HOME="$WORK/home-sync" "$BDN" volume sync start --source "file://$WORK/data" --dest bdn:t/s --retry-deadline "$bad"
  run_fails 2 "bdn: error: --read-timeout: duration \"0\": must be between 100ms and 1h" \
    env BDN_HOME="$WORK/home-mount" "$BDN" volume mount bdn:x/y@b3:0123456789abcdef "$WORK/mnt" --read-timeout 0
  run_fails 2 "bdn: error: --retry-deadline: duration \"$bad\": $why" \
    env BDN_HOME="$WORK/home-push" "$BDN" volume push "$WORK/data" bdn:t/v --retry-deadline "$bad"
done
for h in home-sync home-mount home-push; do
  [ ! -e "$WORK/$h" ] || fail "a command refused for a flag value created its store ($h)"
done
[ ! -e "$WORK/srv" ] || fail "a refused serve created its data directory"
[ ! -e "$WORK/cn" ] || fail "a refused cache serve created its cache directory"

step "the accepted forms start the commands they belong to"
for ttl in 1.5s 2m 45 250ms; do
  start_bdn "serve-$ttl" serve --listen 127.0.0.1:0 --data "$WORK/srv-$ttl" --claim-ttl "$ttl" --insecure-no-auth
  kill -TERM "$STARTED_PID"; wait "$STARTED_PID" || fail "serve --claim-ttl $ttl did not stop cleanly"
done
ref=$("$BDN" volume push "$WORK/data" bdn:t/v --retry-deadline 1.5m 2>/dev/null)
"$BDN" volume sync start --source "file://$WORK/data" --dest bdn:t/synced --retry-deadline 90s >/dev/null 2>&1 \
  || fail "sync start --retry-deadline 90s"
assert_eq x "$("$BDN" volume cat bdn:t/synced/f)" "the file synced with --retry-deadline 90s"
for t in 500ms 2.5 1m; do
  "$BDN" volume mount "$ref" "$WORK/mnt" --read-timeout "$t" >/dev/null
  MOUNTS+=("$WORK/mnt")
  assert_eq x "$(cat "$WORK/mnt/f")" "read through a mount with --read-timeout $t"
  "$BDN" volume umount "$WORK/mnt" >/dev/null
  MOUNTS=()
done

step "counts and empty paths are refused with exit 2 and a clear message; --json reports syntax errors as JSON"
hint="Run with --help for more information."
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--jobs: must be at least 1' "$hint")" "$BDN" volume push "$WORK/data" bdn:t/v --jobs 0
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--jobs: "abc" is not a whole number' "$hint")" "$BDN" volume push "$WORK/data" bdn:t/v --jobs abc
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--jobs: "99999999999999999999" is out of range' "$hint")" \
  "$BDN" volume pull "$ref" "$WORK/out" --jobs 99999999999999999999
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--jobs: must be at least 1' "$hint")" "$BDN" volume verify "$ref" --jobs 0
# each job is a thread: a count the flag's int cannot hold, or just many, is refused up front
for n in 1025 2147483648; do
  run_fails 2 "$(printf 'bdn: error: %s\n%s' '--jobs: must be at most 1024' "$hint")" "$BDN" volume verify "$ref" --jobs "$n"
done
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--expected-sequence: must be at least 0' "$hint")" \
  "$BDN" volume push "$WORK/data" bdn:t/v --expected-sequence -1
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'DIR: must not be empty' "$hint")" "$BDN" volume push "" bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'DIR: must not be empty' "$hint")" "$BDN" volume pull "$ref" ""
run_fails 2 "$(printf 'bdn: error: %s\n%s' '--writer-stall-time: must not be empty' "$hint")" "$BDN" volume pull "$ref" "$WORK/o" --writer-stall-time ""
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'MOUNTPOINT: must not be empty' "$hint")" "$BDN" volume mount "$ref" ""
for flag in --cache-size --cache-dir --memory-cache --read-timeout; do
  run_fails 2 "$(printf 'bdn: error: %s\n%s' "$flag: must not be empty" "$hint")" "$BDN" volume mount "$ref" "$WORK/m" "$flag" ""
done
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'MOUNTPOINT: must not be empty' "$hint")" "$BDN" volume umount ""
# From a new user: a mistyped command said "A subcommand is required", with no "bdn: error:".
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "volme" (bdn has: cache, fsck, gc, key, mounts, secret, serve, store, volume); did you mean "bdn volume"?' "$hint")" \
  "$BDN" volme push "$WORK/data" bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "bogus" (bdn volume has: cat, diff, ls, mount, pull, push, restore, rm, stat, sync, tag, umount, verify, versions)' "$hint")" \
  "$BDN" --home "$WORK/h" volume bogus
# From attacking helper 104: a transposition and upper case got no suggestion.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "verison" (bdn volume has: cat, diff, ls, mount, pull, push, restore, rm, stat, sync, tag, umount, verify, versions); did you mean "bdn volume versions"?' "$hint")" \
  "$BDN" volume verison bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "VOLUME" (bdn has: cache, fsck, gc, key, mounts, secret, serve, store, volume); did you mean "bdn volume"?' "$hint")" \
  "$BDN" VOLUME ls
# From a new user: `bdn push` (the volume commands sit under `volume`) named no way on.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "push" (bdn has: cache, fsck, gc, key, mounts, secret, serve, store, volume); did you mean "bdn volume push"?' "$hint")" \
  "$BDN" push "$WORK/data" bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "mout" (bdn volume has: cat, diff, ls, mount, pull, push, restore, rm, stat, sync, tag, umount, verify, versions); did you mean "bdn volume mount" or "bdn volume umount"?' "$hint")" \
  "$BDN" volume mout "$ref" "$WORK/m"
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume: a command is required (bdn volume has: cat, diff, ls, mount, pull, push, restore, rm, stat, sync, tag, umount, verify, versions)' "$hint")" \
  "$BDN" volume
# From an attacking helper: an unknown option before the command said "A subcommand is required".
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "--bogus" (bdn --help lists them)' "$hint")" "$BDN" --bogus
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "-x" (bdn --help lists them)' "$hint")" "$BDN" -x
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "--bogus" (bdn volume --help lists them)' "$hint")" "$BDN" volume --bogus
# From a new user: a mistyped option said "The following arguments were not expected: x --tags",
# and `tag set REF --tag t` said only "--volume-ref is required".
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "--tags" (bdn volume push --help lists them); did you mean "--tag"?' "$hint")" \
  "$BDN" --home "$WORK/h" volume push "$WORK/data" bdn:t/v --tags x
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "--jsn" (bdn volume ls --help lists them); did you mean "--json"?' "$hint")" \
  "$BDN" --home "$WORK/h" volume ls --jsn=1 bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume tag set takes no argument "bdn:t/v" (bdn volume tag set --help lists what it takes); did you mean "--volume-ref bdn:t/v"?' "$hint")" \
  "$BDN" --home "$WORK/h" volume tag set bdn:t/v --tag t
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume mount takes 2 arguments; one too many: "extra" (bdn volume mount --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume mount bdn:t/v "$WORK/m" extra
# From attacking helper 118: a stray word after a repeatable option became its value (a tag
# "extra" was applied); a valid cluster of short flags was called unknown; a word taken as the
# value of --home was not said.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume push takes 2 arguments; one too many: "extra" (bdn volume push --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume push "$WORK/data" bdn:t/v --tag x extra
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "--tagz" (bdn volume push --help lists them); did you mean "--tag"?' "$hint")" \
  "$BDN" --home "$WORK/h" volume push --tag x "$WORK/data" bdn:t/v --tagz
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume rm takes 1 argument; one too many: "extra" (bdn volume rm --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume rm -ry bdn:t/v extra
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown command "push" (bdn has: cache, fsck, gc, key, mounts, secret, serve, store, volume); "volume" was taken as the value of --home (give --home a value)' "$hint")" \
  "$BDN" --home volume push "$WORK/data" bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume tag set takes no argument "bdn:c/d" (bdn volume tag set --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume tag set --volume-ref bdn:t/v bdn:c/d --tag t
# From attacking helper 119: the unknown letter of a cluster is named; a secret given on a refused
# command line is never repeated, however it was written; a 100 KB word is cut.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "-q" in "-rq" (bdn volume rm --help lists them)' "$hint")" \
  "$BDN" --home "$WORK/h" volume rm -rq bdn:t/v
# From attacking helper 124: a word of letters that are no options was quoted whole.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "-S" (bdn volume rm --help lists them)' "$hint")" \
  "$BDN" --home "$WORK/h" volume rm -SEKRET bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "-S" in "-rS..." (bdn volume rm --help lists them)' "$hint")" \
  "$BDN" --home "$WORK/h" volume rm -rSEKRET bdn:t/v
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'unknown option "-s3-secret-access-key" (bdn serve --help lists them)' "$hint")" \
  "$BDN" serve -s3-secret-access-key=SEKRET4
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn serve takes no argument "***" (bdn serve --help lists what it takes)' "$hint")" \
  "$BDN" serve --s3-region --s3-secret-access-key SEKRET10
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn serve takes no argument "--s3-secret-access-key" (bdn serve --help lists what it takes)' "$hint")" \
  "$BDN" serve -- --s3-secret-access-key SEKRET3
# From attacking helper 119: the words after a "--" that the command has no room for were taken as
# the options of the command above (--home X: the store X was opened) or as a command.
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume versions takes 1 argument; one too many: "--home" (bdn volume versions --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume versions bdn:t/v -- --home "$WORK/elsewhere"
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume push takes 2 arguments; one too many: "--tag" (bdn volume push --help lists what it takes)' "$hint")" \
  "$BDN" --home "$WORK/h" volume push "$WORK/data" bdn:t/v -- --tag x
run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn volume: a command is required before "--" (a word after it is an argument: "versions")' "$hint")" \
  "$BDN" --home "$WORK/h" volume -- versions bdn:t/v
[ ! -e "$WORK/elsewhere" ] || fail "a word after -- was taken as --home"
# From attacking helper 122: a "--json" after "--" switched the error to JSON, and a secret given
# to `secret set` as a word was repeated in its error.
rc=0; out=$("$BDN" --home "$WORK/h" volume versions bdn:t/v -- --json 2>"$WORK/err") || rc=$?
assert_eq 2 "$rc" "exit code of versions REF -- --json"
assert_eq "" "$out" "stdout of versions REF -- --json"
assert_eq 'bdn: error: bdn volume versions takes 1 argument; one too many: "--json" (bdn volume versions --help lists what it takes)' \
  "$(head -1 "$WORK/err")" "stderr of versions REF -- --json"
for args in "tok hf_SEKRETVALUE123" "tok -- hf_SEKRETVALUE123"; do
  run_fails 2 "$(printf 'bdn: error: %s\n%s' 'bdn secret set takes 1 argument; one too many: "***" (bdn secret set --help lists what it takes; a secret is read from stdin)' "$hint")" \
    "$BDN" --home "$WORK/h" secret set $args
done
# From attacking helper 123: a secret's name and value pasted as one word, and a sync endpoint
# whose port is a password, were quoted whole.
rule="must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
for cmd in set rm; do
  run_fails 2 "bdn: error: secret name \"tok\" then \"=\" and 17 more characters (not shown): $rule" \
    "$BDN" --home "$WORK/h" secret "$cmd" tok=hf_SEKRETVALUE123 </dev/null
done
run_fails 2 'bdn: error: source "s3://b/p": --endpoint "http://h:***#***": must be http(s)://host[:port][/path] without credentials or query' \
  "$BDN" --home "$WORK/h" volume sync start --source s3://b/p --dest bdn:t/s --endpoint 'http://h:SEKRET#x'
rc=0; out=$("$BDN" --json serve -- --s3-password=SEKRET5 2>&1) || rc=$?
assert_eq 2 "$rc" "exit code of a refused secret after --"
case "$out" in *SEKRET*) fail "a refused command line repeats its secret: $out" ;; esac
run_fails 2 "$(printf 'bdn: error: %s\n%s' "bdn volume push takes 2 arguments; one too many: \"$(printf 'x%.0s' $(seq 1 200))...\" (bdn volume push --help lists what it takes)" "$hint")" \
  "$BDN" --home "$WORK/h" volume push "$WORK/data" bdn:t/v "$(python3 -c 'print("x" * 100000)')"
for args in "--json volume push $WORK/data" "--json=false --json=on volume push" \
  "--json=true volume push $WORK/data bdn:t/v --bogus" "volume push $WORK/data bdn:t/v --json --bogus"; do
  rc=0; out=$("$BDN" $args 2>"$WORK/err") || rc=$?
  assert_eq 2 "$rc" "exit code of bdn $args"
  assert_eq invalid_argument "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "JSON error code of bdn $args"
  assert_eq "bdn: error: $(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"])' <<<"$out")" "$(cat "$WORK/err")" "stderr of bdn $args"
done
assert_contains "$(cat "$WORK/err")" "--bogus"
# --json=false (the last word) keeps CLI11's text and prints nothing on stdout
rc=0; out=$("$BDN" --json --json=false volume push "$WORK/data" 2>"$WORK/err") || rc=$?
assert_eq 2 "$rc" "exit code with --json=false"
assert_eq "" "$out" "stdout with --json=false"
assert_contains "$(cat "$WORK/err")" "REF is required"

step "a push of a directory that holds the embedded store is refused (it sealed the store's own packs)"
mkdir -p "$WORK/selfsrc/data"; printf 'x' > "$WORK/selfsrc/data/f"
"$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/selfsrc/data" bdn:t/self >/dev/null 2>&1 || fail "push of a sibling of the home"
hint="(push a directory outside it, or give --home elsewhere)"
run_fails 2 "bdn: error: path \"$WORK/selfsrc/home\": is the embedded store $WORK/selfsrc/home $hint" \
  "$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/selfsrc" bdn:t/self
run_fails 2 "bdn: error: path \"$WORK/selfsrc/./home\": is the embedded store $WORK/selfsrc/home $hint" \
  env BDN_HOME="$WORK/selfsrc/home" "$BDN" volume push "$WORK/selfsrc/." bdn:t/self
# Known by inode: the store itself, a directory in it, and the store through a bind mount.
run_fails 2 "bdn: error: directory \"$WORK/selfsrc/home/store\": is the store/ directory of the embedded store $WORK/selfsrc/home $hint" \
  "$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/selfsrc/home/store" bdn:t/self
run_fails 2 "bdn: error: directory \"$WORK/selfsrc/home/store/packs\": is inside the store/ directory of the embedded store $WORK/selfsrc/home $hint" \
  "$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/selfsrc/home/store/packs" bdn:t/self
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$WORK/bound"; mount --bind "$WORK/selfsrc" "$WORK/bound"
  rc=0; err=$("$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/bound" bdn:t/self 2>&1 >/dev/null) || rc=$?
  umount "$WORK/bound"
  assert_eq 2 "$rc" "exit code of a push of the store's directory through a bind mount"
  assert_eq "bdn: error: path \"$WORK/bound/home\": is the embedded store $WORK/selfsrc/home $hint" "$err" "stderr"
fi
step "a pull into the embedded store (or anywhere in its home) is refused, as push refuses to read it"
run_fails 2 "bdn: error: directory \"$WORK/selfsrc/home/store\": inside the embedded store $WORK/selfsrc/home (pull into a directory outside it, or give --home elsewhere)" \
  "$BDN" --home "$WORK/selfsrc/home" volume pull bdn:t/self "$WORK/selfsrc/home/store"
run_fails 2 "bdn: error: directory \"$WORK/selfsrc/home\": inside the embedded store $WORK/selfsrc/home (pull into a directory outside it, or give --home elsewhere)" \
  env BDN_HOME="$WORK/selfsrc/home" "$BDN" volume pull bdn:t/self "$WORK/selfsrc/home"
[ ! -e "$WORK/selfsrc/home/store/f" ] || fail "the pull wrote into the store"
# From an attacking helper: only the walk to DIR was checked, so a version holding
# home/store/packs/zz.txt pulled into the home's parent wrote zz.txt among the packs and gave
# home/, store/ and packs/ the version's modes (0700 -> 0755). Every directory the pull enters or
# sets modes on is checked before anything is written.
mkdir -p "$WORK/evil/home/store/packs"
printf 'EVIL\n' > "$WORK/evil/home/store/packs/zz.txt"
printf 'top\n' > "$WORK/evil/top.txt"
chmod 0755 "$WORK/evil/home" "$WORK/evil/home/store" "$WORK/evil/home/store/packs"
"$BDN" --home "$WORK/selfsrc/home" volume push "$WORK/evil" bdn:t/evil --tag p >/dev/null 2>&1 || fail "push of evil"
# (the first open of the store after a push may write an index table: done here, before the listing)
"$BDN" --home "$WORK/selfsrc/home" volume cat bdn:t/evil:p/top.txt >/dev/null || fail "cat of evil"
home_listing() { find "$WORK/selfsrc/home" -printf '%P %m %s\n' | LC_ALL=C sort; }
home_before=$(home_listing)
for flags in "" --overwrite; do
  # shellcheck disable=SC2086
  run_fails 2 "bdn: error: directory \"$WORK/selfsrc/home\": inside the embedded store $WORK/selfsrc/home (pull into a directory outside it, or give --home elsewhere)" \
    "$BDN" --home "$WORK/selfsrc/home" volume pull $flags bdn:t/evil:p "$WORK/selfsrc"
done
assert_eq "$home_before" "$(home_listing)" "the home after the refused pulls"
[ ! -e "$WORK/selfsrc/top.txt" ] || fail "the refused pull wrote top.txt"
"$BDN" --home "$WORK/selfsrc/home" volume pull bdn:t/self "$WORK/selfsrc/out" >/dev/null 2>&1 || fail "pull beside the home"
# From an attacking helper: with home/store root's own symlink to another disk (the store opens
# through it), the store's directories there were not among those refused: a pull into the real
# packs/, or of home/store/packs/zz.txt into the disk's root, wrote among the packs (rc 0).
mkdir -m 0700 "$WORK/disk" "$WORK/disk/store" "$WORK/linkhome"
ln -s "$WORK/disk/store" "$WORK/linkhome/store"
mkdir -p "$WORK/evil2/store/packs"
printf 'EVIL\n' > "$WORK/evil2/store/packs/zz.txt"
chmod 0755 "$WORK/evil2/store" "$WORK/evil2/store/packs"
"$BDN" --home "$WORK/linkhome" volume push "$WORK/evil2" bdn:t/evil2 --tag p >/dev/null 2>&1 || fail "push into the linked home"
"$BDN" --home "$WORK/linkhome" volume cat bdn:t/evil2:p/store/packs/zz.txt >/dev/null || fail "cat of evil2"
disk_listing() { find "$WORK/disk" -printf '%P %m %s\n' | LC_ALL=C sort; }
disk_before=$(disk_listing)
run_fails 2 "bdn: error: directory \"$WORK/disk/store/packs\": inside the embedded store $WORK/linkhome (pull into a directory outside it, or give --home elsewhere)" \
  "$BDN" --home "$WORK/linkhome" volume pull bdn:t/evil2:p "$WORK/disk/store/packs"
run_fails 2 "bdn: error: directory \"$WORK/disk/store\": inside the embedded store $WORK/linkhome (pull into a directory outside it, or give --home elsewhere)" \
  "$BDN" --home "$WORK/linkhome" volume pull --overwrite bdn:t/evil2:p "$WORK/disk"
assert_eq "$disk_before" "$(disk_listing)" "the linked store after the refused pulls"
"$BDN" --home "$WORK/linkhome" volume verify bdn:t/evil2:p >/dev/null 2>&1 || fail "verify of the linked store"

step "a mount over the embedded store's home, inside it or over a directory holding it is refused; umount needs no store"
# From a new user: a mount over BDN_HOME was made (a "not empty" warning only), and then every
# command failed on the read-only store it hid, the umount that would undo it included.
for mp in "$WORK/selfsrc/home" "$WORK/selfsrc/home/store/packs" "$WORK/selfsrc"; do
  run_fails 2 "bdn: error: mountpoint $mp: would hide the embedded store $WORK/selfsrc/home (mount elsewhere, or give --home elsewhere)" \
    "$BDN" --home "$WORK/selfsrc/home" volume mount bdn:t/self "$mp"
done
# ... and, from an attacking helper, a mountpoint to be made inside the home is refused before
# any directory is made there.
home_before=$(cd "$WORK/selfsrc/home" && find . -printf '%p %m\n' | sort)
for mp in "$WORK/selfsrc/home/newmp" "$WORK/selfsrc/home/store/x/y"; do
  run_fails 2 "bdn: error: mountpoint $mp: would hide the embedded store $WORK/selfsrc/home (mount elsewhere, or give --home elsewhere)" \
    "$BDN" --home "$WORK/selfsrc/home" volume mount bdn:t/self "$mp"
done
# A mount's --log-file inside the home but for its logs/ (where mounts log by default) is refused:
# from an attacking helper, the daemon's log went into a pack of the store.
pack=$(find "$WORK/selfsrc/home/store/packs" -name '*.pack' -print -quit)
mkdir -p "$WORK/lmp"
run_fails 2 "bdn: error: --log-file $pack: inside the embedded store's home $WORK/selfsrc/home, among its own files (give a path outside it, or in its logs/)" \
  "$BDN" --home "$WORK/selfsrc/home" volume mount bdn:t/self "$WORK/lmp" --log-file "$pack"
assert_eq "$home_before" "$(cd "$WORK/selfsrc/home" && find . -printf '%p %m\n' | sort)" "the home after the refused mounts"
assert_eq "" "$(awk -v p="$WORK/selfsrc" 'index($2, p) == 1 {print $2}' /proc/self/mounts)" "mounts below selfsrc"
mkdir "$WORK/um"
"$BDN" --home "$WORK/selfsrc/home" volume mount bdn:t/self "$WORK/um" >/dev/null 2>&1 || fail "mount beside the home"
MOUNTS+=("$WORK/um")
assert_eq "unmounted $WORK/um" "$("$BDN" --home /proc/no-bdn-home volume umount "$WORK/um")" "umount with a home that cannot be opened"
MOUNTS=()

step "text output escapes a mountpoint's control bytes; without HOME the default home is the user's own"
odd="$WORK/m"$'\n'"x"$'\xff'
mkdir "$odd"
out=$("$BDN" volume mount "$ref" "$odd")
MOUNTS+=("$odd")
assert_eq "$ref mounted at $WORK/m\\nx\\xff" "$out" "mount's text output"
assert_eq x "$(cat "$odd/f")" "read through the oddly named mountpoint"
# --json: "mountpoint" shows the byte that is not UTF-8 as U+FFFD, and "mountpoint_hex" carries
# the path exactly (from attacking helper 117: a script could not unmount what mounts ls gave it).
hex=$(printf '%s' "$odd" | od -An -tx1 | tr -d ' \n')
mine=$("$BDN" --json mounts ls | python3 -c '
import json, sys
for m in json.load(sys.stdin)["mounts"]:
    if m.get("mountpoint_hex") == sys.argv[1]:
        print(m["mountpoint"].encode("utf-8").hex(), m["state"])' "$hex")
assert_eq "$(printf '%s' "$WORK/m"$'\n'"x" | od -An -tx1 | tr -d ' \n')efbfbd serving" "$mine" "mounts ls --json of the oddly named mountpoint"
assert_eq "$odd" "$(python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$hex")" "the path from mountpoint_hex"
# rm --json names it the same way: mounted_at, and mounted_at_hex with its exact bytes.
ref_rm=$("$BDN" volume push "$WORK/data" bdn:t/oddrm 2>/dev/null)
odd2="$WORK/m2"$'\xfe'
mkdir "$odd2"
"$BDN" volume mount "$ref_rm" "$odd2" >/dev/null
MOUNTS+=("$odd2")
hex2=$(printf '%s' "$odd2" | od -An -tx1 | tr -d ' \n')
assert_eq "[\"$hex2\"]" "$("$BDN" --json volume rm --yes "$ref_rm" 2>/dev/null | python3 -c '
import json, sys
print(json.dumps(json.load(sys.stdin)["deleted"][0]["mounted_at_hex"]))')" "rm --json mounted_at_hex"
"$BDN" volume umount "$odd2" >/dev/null
MOUNTS=("$odd")
assert_eq "unmounted $WORK/m\\nx\\xff" "$("$BDN" volume umount "$odd")" "umount's text output"
MOUNTS=()
run_fails 2 "bdn: error: mountpoint /: not over the root directory" "$BDN" volume mount "$ref" /
# "." and ".." steps and a trailing "/" are not part of the name a mount is known by
mkdir "$WORK/dot"
assert_eq "$ref mounted at $WORK/dot" "$(cd "$WORK/dot" && "$BDN" volume mount "$ref" .)" "mount . prints"
MOUNTS+=("$WORK/dot")
assert_eq x "$(cat "$WORK/dot/f")" "read through the mount made as ."
assert_eq "unmounted $WORK/dot" "$("$BDN" volume umount "$WORK/dot/../dot/")" "umount of a path with .. and a trailing /"
MOUNTS=()
# ".." after a name the mount does not hold is resolved by name: no trailing "/" either
"$BDN" volume mount "$ref" "$WORK/dot" >/dev/null
MOUNTS+=("$WORK/dot")
assert_eq "unmounted $WORK/dot" "$("$BDN" volume umount "$WORK/dot/nosuch/..")" "umount of dir/nosuch/.."
MOUNTS=()
# A symlink to a directory inside the mount, then "..": named as resolved before the unmount (it
# printed the symlink's own directory, $WORK, once the mount was gone)
mkdir -p "$WORK/data-sub/sub" && printf 'y\n' > "$WORK/data-sub/sub/g"
"$BDN" volume mount "$("$BDN" volume push "$WORK/data-sub" bdn:t/sub 2>/dev/null)" "$WORK/dot" >/dev/null
MOUNTS+=("$WORK/dot")
mkdir -p "$WORK/linkdir" && ln -s "$WORK/dot/sub" "$WORK/linkdir/into"
assert_eq "unmounted $WORK/dot" "$("$BDN" volume umount "$WORK/linkdir/into/..")" "umount of into-the-mount/.."
MOUNTS=()
if [ "$(id -u)" = 0 ]; then
  nobody_home=$(getent passwd 65534 | cut -d: -f6)
  rc=0; err=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i "$BDN" volume ls 2>&1) || rc=$?
  assert_contains "$err" "embedded store $nobody_home/.local/share/bdn: no store there"
  pub=$(mktemp -d) && chmod 0755 "$pub"  # a directory that user can read
  rc=0; err=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i "$BDN" volume push "$pub" bdn:t/v 2>&1) || rc=$?
  rmdir "$pub"
  assert_contains "$err" "embedded store $nobody_home/.local/share/bdn"
else
  echo "(not root: the default home of another user without HOME is not checked)"
fi
echo "PASS"
