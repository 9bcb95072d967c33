#!/usr/bin/env bash
# Every odd-file case round-trips push -> pull and push -> mount: empty files and directories,
# symlinks (recorded, never followed), hardlinks, executable bits, unicode and shell-hostile names,
# deep paths, and a sparse file over 4 GiB. Sockets and FIFOs are refused naming the path.
source "$(dirname "$0")/lib.sh"

src="$WORK/src"
mkdir -p "$src/empty-dir" "$src/sub/inner"
: > "$src/empty-file"
printf 'hello\n' > "$src/hello.txt"
head -c 300000 /dev/urandom > "$src/sub/random.bin"
printf '#!/bin/sh\necho run\n' > "$src/run.sh"; chmod 755 "$src/run.sh"
chmod 600 "$src/hello.txt"
chmod 700 "$src/sub/inner"
ln -s hello.txt "$src/link-to-hello"
ln -s ../../outside/of/tree "$src/sub/link-outside"
ln -s /etc/passwd "$src/abs-link"
ln -s does-not-exist "$src/dangling"
ln -s sub "$src/dir-link"
ln "$src/sub/random.bin" "$src/hard-a"
ln "$src/sub/random.bin" "$src/sub/inner/hard-b"
printf 'unicode\n' > "$src/模型-权重 ünïcødé.txt"
printf 'spaces\n' > "$src/name with  spaces"
printf 'quotes\n' > "$src/it's \"quoted\""
printf 'dollar\n' > "$src/\$(echo pwned) \`x\` ;&|<>"
printf 'dash\n' > "$src/-rf"
printf 'newline\n' > "$src/new
line"
printf 'star\n' > "$src/*?[a]"
deep="$src"; for i in $(seq 1 40); do deep="$deep/d$i"; done
mkdir -p "$deep"; printf 'deep\n' > "$deep/leaf.txt"
truncate -s 4G "$src/sparse-4g"
printf 'tail-after-4GiB' | dd of="$src/sparse-4g" bs=1 seek=$((4*1024*1024*1024 + 12345)) conv=notrunc status=none
head -c 70000 /dev/urandom | dd of="$src/sparse-4g" bs=1 seek=1000000 conv=notrunc status=none

step "push"
out=$("$BDN" volume push "$src" bdn:test/odd --json 2>"$WORK/push.err")
# Links out of the tree are kept as they are, and said: the version holds the links only.
assert_eq 2 "$(json_field symlinks_outside <<<"$out")" "symlinks pointing outside"
assert_eq "warning: 2 symlinks point outside $src (\"abs-link\" -> \"/etc/passwd\", …): the version holds the links, not what they point to; to hold the files, push a copy with the links resolved (cp -rL)" \
  "$(grep '^warning: ' "$WORK/push.err")" "push warning"
ref=$(json_field version_ref <<<"$out")
digest=$(json_field digest <<<"$out")
[[ "$ref" == "bdn:test/odd@b3:"* ]] || fail "bad ref $ref"
assert_eq "$(find "$src" -type f -printf . | wc -c)" "$(( $(json_field files <<<"$out") + 2 ))" "files (2 hardlinks not counted)"

expected=$(tree_listing "$src")
expected_links=$(hardlink_groups "$src")

step "pull"
"$BDN" volume pull "$ref" "$WORK/pulled" >/dev/null
assert_eq "$expected" "$(tree_listing "$WORK/pulled")" "pulled tree"
assert_eq "$expected_links" "$(hardlink_groups "$WORK/pulled")" "pulled hardlinks"
cmp "$src/sparse-4g" "$WORK/pulled/sparse-4g" || fail "sparse file differs"
used=$(du -k "$WORK/pulled/sparse-4g" | cut -f1)
[ "$used" -lt 1048576 ] || fail "pulled sparse file is not sparse (${used} KiB used)"

step "cat follows links inside the version and names those it cannot; pull counts links"
assert_eq "hello" "$("$BDN" volume cat "$ref/link-to-hello")" "cat of a link"
cmp <("$BDN" volume cat "$ref/dir-link/random.bin") "$src/sub/random.bin" || fail "cat through a directory link differs"
run_fails 2 "bdn: error: path \"abs-link\": symlink \"abs-link\" points to \"/etc/passwd\", outside the version" \
  "$BDN" volume cat "$ref/abs-link"
run_fails 3 "bdn: error: path \"dangling\": \"does-not-exist\" is not in version $digest (through symlink \"dangling\" -> \"does-not-exist\")" \
  "$BDN" volume cat "$ref/dangling"
"$BDN" volume pull "$ref/link-to-hello" "$WORK/one-link" 2>"$WORK/one-link.err" >/dev/null
assert_eq "pulled 0 files (0 B) and 1 symlink, 0 already present" "$(cat "$WORK/one-link.err")" "pull of one link"
assert_eq "hello.txt" "$(readlink "$WORK/one-link/link-to-hello")" "the pulled link"

# verify of a path checks the files hardlinks there link to, and follows a link to a directory
# (from attacking helper 104: both checked nothing and said "0 problems").
assert_eq 1 "$("$BDN" volume verify --json "$ref/sub/inner" | json_field files)" "files verify checks below sub/inner (a hardlink)"
assert_eq "$("$BDN" volume verify --json "$ref/sub" | json_field files)" "$("$BDN" volume verify --json "$ref/dir-link" | json_field files)" "files verify checks through dir-link"

step "pull again resumes (nothing rewritten)"
out=$("$BDN" volume pull "$ref" "$WORK/pulled" --json)
assert_eq 0 "$(json_field files_written <<<"$out")" "files rewritten"

step "mount"
mount_volume "$ref" "$WORK/mnt"
assert_eq "$expected" "$(tree_listing "$WORK/mnt")" "mounted tree"
assert_eq "$expected_links" "$(hardlink_groups "$WORK/mnt")" "mounted hardlinks"
assert_eq "tail-after-4GiB" "$(tail -c 15 "$WORK/mnt/sparse-4g")" "bytes past 4 GiB"
cmp <(dd if="$src/sparse-4g" bs=1M skip=4095 status=none) <(dd if="$WORK/mnt/sparse-4g" bs=1M skip=4095 status=none) \
  || fail "last MiB of sparse file differs through the mount"
cmp <(head -c 2000000 "$src/sparse-4g") <(head -c 2000000 "$WORK/mnt/sparse-4g") || fail "sparse head differs"
[ ! -e "$WORK/outside" ] || fail "a symlink was followed"

step "refused file types name the path"
mkfifo "$src/a-fifo"
run_fails 2 "bdn: error: path \"$src/a-fifo\": is a FIFO; only regular files, directories and symlinks can be pushed" \
  "$BDN" volume push "$src" bdn:test/odd
rm "$src/a-fifo"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$src/sub/a-socket"
run_fails 2 "bdn: error: path \"$src/sub/a-socket\": is a socket; only regular files, directories and symlinks can be pushed" \
  "$BDN" volume push "$src" bdn:test/odd
rm "$src/sub/a-socket"

step "nothing was sealed by the refused pushes"
assert_eq 1 "$("$BDN" volume versions bdn:test/odd --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')" "version count"
echo "PASS"
