#!/usr/bin/env bash
# Names and paths as the file system has them.
# - Names and symlink targets must be UTF-8 (docs/format.md): push refuses others with exit 2
#   naming the path, with --json too (it said "internal" with a JSON-library message).
# - Text output escapes control bytes and bytes that are not UTF-8 in names and messages; JSON
#   carries names exactly.
# - A path longer than PATH_MAX (25 nested 200-byte directories; push failed with "File name too
#   long") works in push, pull and the mount.
# - A tree 2,000 directories deep pushes and pulls in time linear in its size (pull took 107 s).
# - The same through an origin (--remote).
source "$(dirname "$0")/lib.sh"

# chain_cat ROOT REL: the bytes of ROOT/REL, opened one directory at a time (REL may be longer
# than PATH_MAX); chain_readlink ROOT REL: its symlink target; chain_ls ROOT REL: the names in
# directory ROOT/REL, sorted, one per line.
chain() {
  python3 - "$@" <<'PY'
import os, sys
op, root, rel = sys.argv[1:4]
parts = [p for p in rel.split("/") if p]
last = parts.pop() if op in ("cat", "readlink") else None
fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
for p in parts:
    nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    os.close(fd)
    fd = nfd
if op == "readlink":
    sys.stdout.write(os.readlink(last, dir_fd=fd))
elif op == "cat":
    f = os.open(last, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    while True:
        b = os.read(f, 1 << 20)
        if not b:
            break
        sys.stdout.buffer.write(b)
else:
    sys.stdout.write("".join(n + "\n" for n in sorted(os.listdir(fd))))
PY
}
chain_cat() { chain cat "$@"; }
chain_ls() { chain ls "$@"; }
chain_readlink() { chain readlink "$@"; }

step "a name that is not UTF-8: exit 2 naming the path (escaped), also with --json"
mkdir -p "$WORK/bad/sub"
printf 'x' > "$WORK/bad/sub/a"$'\xff'"b"
run_fails 2 "bdn: error: path \"$WORK/bad/sub/a\\xffb\": name is not valid UTF-8" \
  "$BDN" volume push "$WORK/bad" bdn:test/bad
rc=0; out=$("$BDN" volume push "$WORK/bad" bdn:test/bad --json 2>/dev/null) || rc=$?
assert_eq 2 "$rc" "exit code of push --json"
assert_eq "invalid_argument|2|path \"$WORK/bad/sub/a\\xffb\": name is not valid UTF-8" \
  "$(python3 -c 'import json,sys; e=json.load(sys.stdin)["error"]; print(e["code"], e["exit_code"], e["message"], sep="|")' <<<"$out")" \
  "JSON error"

step "a symlink target that is not UTF-8: exit 2 naming the symlink and the target"
rm -rf "$WORK/bad"; mkdir -p "$WORK/bad"
ln -s "to"$'\xfe'"where" "$WORK/bad/link"
run_fails 2 "bdn: error: symlink \"$WORK/bad/link\": target \"to\\xfewhere\" is not valid UTF-8" \
  "$BDN" volume push "$WORK/bad" bdn:test/bad
run_fails 3 'bdn: error: volume bdn:test/bad: not found' "$BDN" volume versions bdn:test/bad

step "control characters in names: text escapes them, JSON carries them exactly"
mkdir -p "$WORK/names"
before=$("$BDN" volume push "$WORK/names" bdn:test/names)
printf 'r' > "$WORK/names/"$'\x1b[31mred'
printf 't' > "$WORK/names/"$'tab\there'
printf 'u' > "$WORK/names/ünï"
ln -s $'\x1b]0;title\x07' "$WORK/names/esc-link"
ref=$("$BDN" volume push "$WORK/names" bdn:test/names)
assert_eq "$(printf '%s\n' '\x1b[31mred' 'esc-link -> \x1b]0;title\x07' 'tab\there' 'ünï')" \
  "$("$BDN" volume ls "$ref" 2>/dev/null | cut -c 25-)" "ls text"
python3 - "$("$BDN" volume ls "$ref" --json)" <<'PY' || fail "ls --json names"
import json, sys
entries = {e["path"]: e.get("target") for e in json.loads(sys.argv[1])["entries"]}
assert entries == {"\x1b[31mred": None, "esc-link": "\x1b]0;title\x07", "tab\there": None,
                   "ünï": None}, entries
PY
assert_contains "$("$BDN" volume stat "$ref/"$'\x1b[31mred')" 'path: \x1b[31mred'
assert_eq "$(printf '%s\n' 'A \x1b[31mred' 'A esc-link' 'A tab\there' 'A ünï')" \
  "$("$BDN" volume diff "$before" "$ref" | sed -n 's/^\(A .*\)$/\1/p')" "diff text"
run_fails 3 "bdn: error: path \"missing\\x1b\": not in version ${ref#*@}" \
  "$BDN" volume cat "$ref/missing"$'\x1b'
run_fails 2 "bdn: error: path \"\\xff\": not valid UTF-8" \
  "$BDN" volume pull "$ref" "$WORK/p" --include $'\xff'

step "a path longer than PATH_MAX: push, pull, mount"
rel=""
for i in $(seq 1 25); do rel="$rel$(printf 'n%.0s' $(seq 1 199))$((i % 10))/"; done
python3 - "$WORK/long" "$rel" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDONLY)
for p in sys.argv[2].strip("/").split("/"):
    os.mkdir(p, dir_fd=fd)
    n = os.open(p, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = n
f = os.open("leaf.bin", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
os.write(f, os.urandom(200000)); os.close(f)
os.symlink("leaf.bin", "link", dir_fd=fd)
PY
[ ${#rel} -gt 4096 ] || fail "the path is only ${#rel} bytes"
ref=$("$BDN" volume push "$WORK/long" bdn:test/long)
want=$(chain_cat "$WORK/long" "${rel}leaf.bin" | b3sum --no-names)
"$BDN" volume pull "$ref" "$WORK/long-pulled" >/dev/null
assert_eq "$want" "$(chain_cat "$WORK/long-pulled" "${rel}leaf.bin" | b3sum --no-names)" "pulled leaf"
assert_eq "$(printf 'leaf.bin\nlink')" "$(chain_ls "$WORK/long-pulled" "$rel")" "pulled listing"
assert_eq "leaf.bin" "$(chain_readlink "$WORK/long-pulled" "${rel}link")" "pulled symlink"
mount_volume "$ref" "$WORK/long-mnt"
assert_eq "$(printf 'leaf.bin\nlink')" "$(chain_ls "$WORK/long-mnt" "$rel")" "mounted listing"
assert_eq "$want" "$(chain_cat "$WORK/long-mnt" "${rel}leaf.bin" | b3sum --no-names)" "mounted leaf"
assert_eq "leaf.bin" "$(chain_readlink "$WORK/long-mnt" "${rel}link")" "mounted symlink"

step "a tree 2,000 directories deep: push, pull in linear time, mount"
python3 - "$WORK/deep" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(2000):
    os.mkdir("d", dir_fd=fd)
    n = os.open("d", os.O_RDONLY, dir_fd=fd); os.close(fd); fd = n
f = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(f, b"at the bottom\n"); os.close(f)
PY
deep_rel=$(printf 'd/%.0s' $(seq 1 2000))
ref=$("$BDN" volume push "$WORK/deep" bdn:test/deep)
assert_eq 2001 "$("$BDN" volume stat "$ref" --json | json_field entries)" "entries"
start=$(date +%s.%N)
"$BDN" volume pull "$ref" "$WORK/deep-pulled" >/dev/null
seconds=$(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.2f}")' "$start" "$(date +%s.%N)")
echo "pull of 2,000 nested directories: $seconds s"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 5 else 1)' "$seconds" \
  || fail "pull of 2,000 nested directories took $seconds s (limit 5 s)"
assert_eq "at the bottom" "$(chain_cat "$WORK/deep-pulled" "${deep_rel}leaf")" "deepest file"
mount_volume "$ref" "$WORK/deep-mnt"
assert_eq "at the bottom" "$(chain_cat "$WORK/deep-mnt" "${deep_rel}leaf")" "deepest file in the mount"
assert_eq "leaf" "$(chain_ls "$WORK/deep-mnt" "$deep_rel")" "deepest directory in the mount"
step "through an origin (--remote): the same refusals and the long path"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
export BDN_REMOTE="$STARTED_URL"
run_fails 2 "bdn: error: symlink \"$WORK/bad/link\": target \"to\\xfewhere\" is not valid UTF-8" \
  "$BDN" volume push "$WORK/bad" bdn:test/bad
rc=0; out=$("$BDN" --json volume push "$WORK/bad" bdn:test/bad 2>/dev/null) || rc=$?
assert_eq 2 "$rc" "exit code of a remote push --json"
assert_eq invalid_argument "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])' <<<"$out")" "remote JSON error code"
ref=$("$BDN" volume push "$WORK/long" bdn:test/long)
"$BDN" volume pull "$ref" "$WORK/long-remote" >/dev/null
assert_eq "$want" "$(chain_cat "$WORK/long-remote" "${rel}leaf.bin" | b3sum --no-names)" "leaf pulled through the origin"
ref=$("$BDN" volume push "$WORK/names" bdn:test/names)
assert_eq "$(printf '%s\n' '\x1b[31mred' 'esc-link -> \x1b]0;title\x07' 'tab\there' 'ünï')" \
  "$("$BDN" volume ls "$ref" 2>/dev/null | cut -c 25-)" "ls text through the origin"

step "a tree of more files than the descriptor limit: push and file:// sync close each file"
# Each file's descriptor stayed open until the whole tree was sealed: 1,100 files failed with
# "Too many open files" under the default limit of 1024.
mkdir -p "$WORK/many"
python3 -c 'import sys
for i in range(1500): open(f"{sys.argv[1]}/f{i}", "w").write(str(i))' "$WORK/many"
many=$(ulimit -n 128; env -u BDN_REMOTE "$BDN" volume push "$WORK/many" bdn:test/many 2>"$WORK/err") ||
  fail "push of 1,500 files under ulimit -n 128: $(cat "$WORK/err")"
out=$(ulimit -n 128; env -u BDN_REMOTE "$BDN" --json volume sync start --source "file://$WORK/many" \
  --dest bdn:test/many-sync) || fail "sync of 1,500 files under ulimit -n 128: $out"
assert_eq "${many##*@}" "$(jf "$out" version)" "digest of the synced tree"
(ulimit -n 128; "$BDN" volume push "$WORK/many" bdn:test/many >/dev/null 2>"$WORK/err") ||
  fail "push of 1,500 files through the origin under ulimit -n 128: $(cat "$WORK/err")"
echo "PASS"
