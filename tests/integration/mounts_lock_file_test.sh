#!/usr/bin/env bash
# bdn mounts lock and the file it rewrites: a temporary file nobody can plant, locks of one file
# taking turns, an edit made while it runs kept (it fails instead), the owner, group and mode kept,
# hard links refused, nothing claimed before it is written, and only a small regular file read.
# Needs no FUSE.
source "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/b"
printf 'beta\n' > "$WORK/b/f.txt"
rb=$("$BDN" volume push "$WORK/b" bdn:weights/b --tag prod)
cfg="$WORK/config.yaml"
write_config() {
  cat > "$cfg" <<YAML
# keep me
bdn:
  mounts:
    - source: bdn:weights/b:prod
      path: /mnt/b
YAML
}
locked="# keep me
bdn:
  mounts:
    - source: $rb
      path: /mnt/b"

step "a symlink planted at the old fixed temporary name is not written through"
write_config
printf 'victim\n' > "$WORK/victim"
chmod 0600 "$WORK/victim"
ln -s "$WORK/victim" "$cfg.bdn-lock.tmp"
out=$("$BDN" mounts lock -f "$cfg")
assert_eq "$cfg:4: bdn:weights/b:prod -> $rb" "$out" "lock output"
assert_eq "victim" "$(cat "$WORK/victim")" "victim's bytes"
assert_eq 600 "$(stat -c %a "$WORK/victim")" "victim's mode"
[ -f "$cfg" ] && [ ! -L "$cfg" ] || fail "the config is not a regular file any more"
assert_eq "$locked" "$(cat "$cfg")" "locked config"
rm "$cfg.bdn-lock.tmp"
assert_eq "config.yaml victim" "$(cd "$WORK" && echo config.yaml* victim)" "files left beside it"

step "a second lock of one file waits for the first, saying so"
write_config
# Held until the lock has said it waits (not for a fixed time: on a loaded machine the holder
# could take its lock after the second one had).
flock "$cfg" sh -c 'while [ ! -e "$1" ]; do sleep 0.02; done' sh "$WORK/release" &
holder=$!
PIDS+=("$holder")
until ! flock -n "$cfg" true; do sleep 0.01; done
"$BDN" mounts lock -f "$cfg" >"$WORK/out" 2>"$WORK/err" &
locker=$!
PIDS+=("$locker")
deadline=$(($(now_ms) + 10000))
until grep -q waiting "$WORK/err" || [ "$(now_ms)" -ge "$deadline" ]; do sleep 0.02; done
touch "$WORK/release"
wait "$locker" || fail "the lock that waited failed: $(cat "$WORK/err")"
wait "$holder"
untrack "$locker"
untrack "$holder"
assert_eq "config $cfg: another bdn mounts lock holds it; waiting" "$(cat "$WORK/err")" "waiting"
assert_eq "$cfg:4: bdn:weights/b:prod -> $rb" "$(cat "$WORK/out")" "lock after the wait"
assert_eq "$locked" "$(cat "$WORK/config.yaml")" "locked config"

step "concurrent locks of one file all succeed, and the file ends whole"
# They shared one temporary name: "rename ...: No such file or directory" and a 0-byte config.
for round in 1 2 3; do
  write_config
  pids=()
  for i in $(seq 1 8); do
    "$BDN" mounts lock -f "$cfg" >"$WORK/out.$i" 2>"$WORK/err.$i" &
    pids+=($!)
  done
  for i in $(seq 1 8); do
    wait "${pids[$((i - 1))]}" || fail "round $round: lock $i failed: $(cat "$WORK/err.$i")"
  done
  assert_eq "$locked" "$(cat "$cfg")" "round $round: config"
  assert_eq 1 "$(cat "$WORK"/out.* | grep -c -- ' -> ')" "round $round: locks that changed it"
  assert_eq 7 "$(cat "$WORK"/out.* | grep -c 'every source is already pinned')" "round $round: the rest"
  assert_eq "config.yaml" "$(cd "$WORK" && echo config.yaml*)" "round $round: files left"
done

step "an edit made while lock runs is not overwritten"
# held_in_fchmod STRACE_PID: waits until the bdn that strace runs is held in its first fchmod
# (the config read and its sources resolved), not for a fixed time.
held_in_fchmod() {
  local deadline=$(($(now_ms) + 10000)) child=""
  until [ -n "$child" ]; do
    child=$(pgrep -P "$1" -x bdn || true)
    [ "$(now_ms)" -lt "$deadline" ] || fail "strace (pid $1) started no bdn"
    [ -n "$child" ] || sleep 0.02
  done
  wait_blocked "$child" 91 "bdn mounts lock under strace" "t S D"
}
# strace holds the lock's first fchmod (its temporary file's mode, after it read the config and
# resolved the sources) for 2 s while the config is edited.
if strace -o /dev/null -e trace=none true 2>/dev/null; then
  write_config
  strace -f -o /dev/null -e trace=fchmod -e inject=fchmod:delay_enter=2000000:when=1 \
    "$BDN" mounts lock -f "$cfg" >"$WORK/out" 2>"$WORK/err" &
  lock_pid=$!
  held_in_fchmod "$lock_pid"
  printf '# edited meanwhile\n' >> "$cfg"
  rc=0; wait "$lock_pid" || rc=$?
  assert_eq 4 "$rc" "exit code of the lock"
  assert_eq "bdn: error: config $cfg: changed while being locked; nothing written; run it again" \
    "$(cat "$WORK/err")" "stderr"
  assert_eq "" "$(cat "$WORK/out")" "stdout"
  assert_eq "$(printf '# keep me\nbdn:\n  mounts:\n    - source: bdn:weights/b:prod\n      path: /mnt/b\n# edited meanwhile')" \
    "$(cat "$cfg")" "edit kept"
  write_config
  printf '# edited meanwhile\n' >> "$cfg"
  strace -f -o /dev/null -e trace=fchmod -e inject=fchmod:delay_enter=2000000:when=1 \
    "$BDN" mounts lock -f "$cfg" >"$WORK/out" 2>"$WORK/err" &
  lock_pid=$!
  held_in_fchmod "$lock_pid"
  # An editor's save: a new file renamed over the config.
  sed 's/# keep me/# renamed over/' "$cfg" > "$cfg.new" && mv "$cfg.new" "$cfg"
  rc=0; wait "$lock_pid" || rc=$?
  assert_eq 4 "$rc" "exit code of the lock (rename)"
  assert_eq "bdn: error: config $cfg: changed while being locked; nothing written; run it again" \
    "$(cat "$WORK/err")" "stderr (rename)"
  assert_eq "# renamed over" "$(head -1 "$cfg")" "renamed edit kept"
  assert_eq "config.yaml" "$(cd "$WORK" && echo config.yaml*)" "files left after the conflicts"
else
  no_strace=1  # the other steps still run; the test then counts as skipped, not passed
fi

step "lock keeps the owner, group and mode (set-id bits too) of the file"
if [ "$(id -u)" = 0 ]; then
  write_config
  chown nobody:nogroup "$cfg"
  chmod 2640 "$cfg"
  "$BDN" mounts lock -f "$cfg" >/dev/null
  assert_eq "nobody:nogroup 2640" "$(stat -c '%U:%G %a' "$cfg")" "owner and mode after lock"
  assert_eq "$locked" "$(cat "$cfg")" "locked config"
else
  echo "not root: the owner step is left out"
fi

step "a config with hard links is refused, not split from them"
write_config
ln "$cfg" "$WORK/other-name.yaml"
run_fails 8 "bdn: error: config $cfg: has 2 hard links, which replacing it would break; nothing written" \
  "$BDN" mounts lock -f "$cfg"
assert_eq 2 "$(stat -c %h "$cfg")" "links after the refusal"
rm "$WORK/other-name.yaml"

step "nothing is claimed changed when the rewrite fails"
cat > "$cfg" <<YAML
defaults: &src bdn:weights/b:prod
bdn:
  mounts:
    - source: *src
      path: /mnt/b
YAML
cp "$cfg" "$WORK/alias.orig"
run_fails 2 "bdn: error: $cfg:4: the source is a YAML alias (*name): cannot rewrite it; write the ref in its place" \
  "$BDN" mounts lock -f "$cfg"
out=$("$BDN" mounts lock -f "$cfg" 2>/dev/null) || true
assert_eq "" "$out" "stdout of the failed lock"
cmp "$cfg" "$WORK/alias.orig" || fail "the failed lock changed the config"

step "only a regular file of at most 1 MiB is read, by apply and lock alike"
mkfifo "$WORK/fifo.yaml"
mkdir "$WORK/dir.yaml"
{ printf 'bdn:\n  mounts: []\n#'; head -c 1048576 /dev/zero | tr '\0' x; } > "$WORK/big.yaml"
for cmd in apply lock; do
  run_fails 2 "bdn: error: config $WORK/dir.yaml: is a directory, not a file" "$BDN" mounts "$cmd" -f "$WORK/dir.yaml"
  run_fails 2 "bdn: error: config $WORK/fifo.yaml: not a regular file" timeout 10 "$BDN" mounts "$cmd" -f "$WORK/fifo.yaml"
  run_fails 2 "bdn: error: config /dev/zero: not a regular file" timeout 10 "$BDN" mounts "$cmd" -f /dev/zero
  run_fails 2 "bdn: error: config $WORK/big.yaml: larger than 1048576 bytes" "$BDN" mounts "$cmd" -f "$WORK/big.yaml"
done
if [ -n "${no_strace:-}" ]; then
  echo "SKIP: strace cannot trace here (scripts/setup.sh installs it): the edit-while-locking step did not run"
  exit 77
fi
echo "PASS"
