#!/usr/bin/env bash
# Pull of trees full of identical content with --jobs > 1, 20 runs each: copies of one file in one
# directory, empty files, hardlinks, and hardlinks pulled with --include (each then a file of its
# own). Regression: partial files were named by the content digest, so three copies of a 4 MiB
# file failed every time ("another pull is writing it", exit 4), ten empty files failed about one
# run in four ("No such file or directory", exit 3), and --include of hardlinks at random.
# A partial file held by another process that does not change is waited for --writer-stall-time,
# then a conflict (exit 4) naming the file and the holder; a
# partial file with garbage after a right beginning is resumed into exactly the file. The same
# through an origin (--remote).
source "$(dirname "$0")/lib.sh"

src="$WORK/src"
mkdir -p "$src/copies" "$src/empty" "$src/links/sub"
head -c 4194304 /dev/urandom > "$src/copies/a"
cp "$src/copies/a" "$src/copies/b"; cp "$src/copies/a" "$src/copies/c"; cp "$src/copies/a" "$src/links/sub/d"
for i in $(seq 1 10); do : > "$src/empty/e$i"; done
head -c 300000 /dev/urandom > "$src/links/f"
ln "$src/links/f" "$src/links/h1"; ln "$src/links/f" "$src/links/h2"; ln "$src/links/f" "$src/links/sub/h3"
ref=$("$BDN" volume push "$src" bdn:test/same)
expected=$(tree_listing "$src")
expected_links=$(hardlink_groups "$src")
want_f=$(b3sum --no-names "$src/links/f")

step "20 pulls of the whole tree with --jobs 8"
for run in $(seq 1 20); do
  out="$WORK/out-$run"
  "$BDN" volume pull "$ref" "$out" --jobs 8 2>"$WORK/err" >/dev/null || fail "run $run: $(cat "$WORK/err")"
  assert_eq "$expected" "$(tree_listing "$out")" "run $run: pulled tree"
  assert_eq "$expected_links" "$(hardlink_groups "$out")" "run $run: hardlinks"
  rm -rf "$out"
done

step "20 pulls of the hardlinks alone (--include, without the file they link to)"
for run in $(seq 1 20); do
  out="$WORK/links-$run"
  "$BDN" volume pull "$ref/links" "$out" --strip-prefix --include h1 --include h2 --include sub/h3 \
    --jobs 8 2>"$WORK/err" >/dev/null || fail "run $run: $(cat "$WORK/err")"
  for f in h1 h2 sub/h3; do
    assert_eq "$want_f" "$(b3sum --no-names "$out/$f")" "run $run: $f"
    assert_eq 1 "$(stat -c %h "$out/$f")" "run $run: links of $f"
  done
  assert_eq "" "$(find "$out" -name '.bdn-partial-*')" "run $run: partial files left"
  rm -rf "$out"
done

step "a partial file held by another process, unchanged: exit 4 naming the file and the holder; then the pull works"
out="$WORK/held"
mkdir -p "$out/copies"
partial="$out/copies/.bdn-partial-$(printf '%s' b | b3sum --no-names | cut -c1-32)"
python3 - "$partial" "$WORK/locked" <<'PY' &
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(60)
PY
holder=$!
PIDS+=("$holder")
for _ in $(seq 1 100); do [ -e "$WORK/locked" ] && break; sleep 0.05; done
[ -e "$WORK/locked" ] || fail "the lock holder did not start"
# The holder is no bdn process: named "another process" (a pull's would be "another pull").
run_fails 4 "bdn: error: file \"$out/copies/b\": another process is writing it (pid $holder, \"python3\") and its partial file ${partial##*/} has not changed for 1s (stopped? pull again once it has ended)" \
  "$BDN" volume pull "$ref" "$out" --jobs 8 --writer-stall-time 1s
kill "$holder"; wait "$holder" 2>/dev/null || true
"$BDN" volume pull "$ref" "$out" --jobs 8 >/dev/null
assert_eq "$expected" "$(tree_listing "$out")" "pulled tree after the holder left"
step "a resumed partial file is verified whole: garbage in it never reaches the file"
out="$WORK/resume"
mkdir -p "$out/copies"
partial="$out/copies/.bdn-partial-$(printf '%s' a | b3sum --no-names | cut -c1-32)"
head -c 1000000 "$src/copies/a" > "$partial"             # a right beginning,
head -c 5000000 /dev/urandom >> "$partial"               # then garbage past the file's end
"$BDN" volume pull "$ref" "$out" --jobs 8 >/dev/null
cmp "$src/copies/a" "$out/copies/a" || fail "resumed file differs"
assert_eq "" "$(find "$out" -name '.bdn-partial-*')" "partial files left after the resume"

step "through an origin (--remote): 20 pulls of the whole tree with --jobs 8"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
remote_ref=$("$BDN" --remote "$STARTED_URL" volume push "$src" bdn:test/same 2>/dev/null)
assert_eq "$ref" "$remote_ref" "digest through the origin"
for run in $(seq 1 20); do
  out="$WORK/remote-$run"
  "$BDN" --remote "$STARTED_URL" volume pull "$ref" "$out" --jobs 8 2>"$WORK/err" >/dev/null \
    || fail "remote run $run: $(cat "$WORK/err")"
  assert_eq "$expected" "$(tree_listing "$out")" "remote run $run: pulled tree"
  assert_eq "$expected_links" "$(hardlink_groups "$out")" "remote run $run: hardlinks"
  rm -rf "$out"
done
echo "PASS"
