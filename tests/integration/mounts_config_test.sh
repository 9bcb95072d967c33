#!/usr/bin/env bash
# bdn mounts apply|lock with the seed's deployment config shape: pinned mounts, warnings for tag
# sources, lock rewriting only the source values, and invalid configs refused with line and reason.
source "$(dirname "$0")/lib.sh"
needs_fuse
mkdir -p "$WORK/a" "$WORK/b"
printf 'alpha\n' > "$WORK/a/f.txt"; printf 'beta\n' > "$WORK/b/f.txt"
ra=$("$BDN" volume push "$WORK/a" bdn:weights/a --tag prod)
rb=$("$BDN" volume push "$WORK/b" bdn:weights/b)

cat > "$WORK/config.yaml" <<YAML
model_name: demo   # other deployment keys are left alone
resources:
  accelerator: H100
bdn:
  mounts:
    - source: $ra
      path: $WORK/mnt/a
    # a tag source: mounted, with a warning
    - source: bdn:weights/b
      path: $WORK/mnt/b
YAML
cp "$WORK/config.yaml" "$WORK/config.orig"

step "apply mounts every entry and warns for the unpinned one"
out=$("$BDN" mounts apply -f "$WORK/config.yaml" 2>"$WORK/err")
MOUNTS+=("$WORK/mnt/a" "$WORK/mnt/b")
assert_eq "$(printf '%s mounted at %s\n%s mounted at %s' "$ra" "$WORK/mnt/a" "$rb" "$WORK/mnt/b")" "$out" "apply output"
assert_eq "warning: $WORK/config.yaml:9: source bdn:weights/b is not pinned to a digest; mounting $rb (pin it with: bdn mounts lock -f $WORK/config.yaml)" "$(cat "$WORK/err")" "warning"
assert_eq alpha "$(cat "$WORK/mnt/a/f.txt")" "mount a"

step "a source named by a digest prefix is mounted with a warning that says so"
short="${ra%@*}@${ra#*@}"; short="${short:0:$(( ${#short} - 52 ))}"  # b3: and 12 hex digits
printf 'bdn:\n  mounts:\n    - source: %s\n      path: %s\n' "$short" "$WORK/mnt/short" > "$WORK/short.yaml"
out=$("$BDN" mounts apply -f "$WORK/short.yaml" 2>"$WORK/err")
MOUNTS+=("$WORK/mnt/short")
assert_eq "$ra mounted at $WORK/mnt/short" "$out" "apply output (digest prefix)"
assert_eq "warning: $WORK/short.yaml:3: source $short names its version by a 12-digit digest prefix, not the whole digest; mounting $ra (pin it with: bdn mounts lock -f $WORK/short.yaml)" "$(cat "$WORK/err")" "warning (digest prefix)"
"$BDN" volume umount "$WORK/mnt/short" >/dev/null
assert_eq beta "$(cat "$WORK/mnt/b/f.txt")" "mount b"

step "apply again is a no-op for what is mounted as the config says"
out=$("$BDN" mounts apply -f "$WORK/config.yaml" 2>"$WORK/err")
assert_eq "$(printf '%s already mounted at %s\n%s already mounted at %s' "$ra" "$WORK/mnt/a" "$rb" "$WORK/mnt/b")" "$out" "second apply"
# The unpinned entry is warned about without "mounting": this run leaves it as it is.
assert_eq "warning: $WORK/config.yaml:9: source bdn:weights/b is not pinned to a digest; already mounted as $rb (pin it with: bdn mounts lock -f $WORK/config.yaml)" \
  "$(cat "$WORK/err")" "stderr of the second apply"

step "apply mounts again where the mount daemon was killed (a dead mount)"
"$BDN" volume umount "$WORK/mnt/a" >/dev/null
out=$("$BDN" mounts apply -f "$WORK/config.yaml" --json 2>/dev/null)
pid=$(python3 -c 'import json,sys; m=json.load(sys.stdin)["mounts"]; print(m[0]["daemon_pid"]); assert not m[0]["already_mounted"] and m[1]["already_mounted"] and "daemon_pid" not in m[1]' <<<"$out")
kill -9 "$pid"
wait_gone "$pid" 10000
err=$(cat "$WORK/mnt/a/f.txt" 2>&1) && fail "the dead mount still answered"
assert_eq "cat: $WORK/mnt/a/f.txt: Transport endpoint is not connected" "$err" "read of the dead mount"
out=$("$BDN" mounts apply -f "$WORK/config.yaml" 2>"$WORK/err")
assert_eq "$(printf '%s mounted at %s\n%s already mounted at %s' "$ra" "$WORK/mnt/a" "$rb" "$WORK/mnt/b")" "$out" "apply over the dead mount"
assert_eq "warning: $WORK/config.yaml:6: mountpoint $WORK/mnt/a: dead mount of $ra (its daemon is gone); mounting again
warning: $WORK/config.yaml:9: source bdn:weights/b is not pinned to a digest; already mounted as $rb (pin it with: bdn mounts lock -f $WORK/config.yaml)" "$(cat "$WORK/err")" "apply warnings"
assert_eq alpha "$(cat "$WORK/mnt/a/f.txt")" "mount a after apply"
assert_eq 1 "$(grep -c " $WORK/mnt/a fuse.bdn " /proc/self/mounts)" "mounts at $WORK/mnt/a"
"$BDN" volume umount "$WORK/mnt/b" >/dev/null
cat > "$WORK/other.yaml" <<YAML
bdn:
  mounts:
    - source: $rb
      path: $WORK/mnt/a
YAML
run_fails 8 "bdn: error: $WORK/other.yaml:3: mountpoint $WORK/mnt/a: already a bdn mount of $ra; unmount it first (bdn volume umount $WORK/mnt/a), or apply with --replace" "$BDN" mounts apply -f "$WORK/other.yaml"

step "apply --replace rolls a mountpoint to the config's version, never one in use"
sleep 600 < "$WORK/mnt/a/f.txt" & holder=$!
run_fails 8 "bdn: error: $WORK/other.yaml:3: replacing $ra: mountpoint $WORK/mnt/a: busy: pid $holder (sleep) has files or directories open on it (close them or stop the processes, then unmount again)" \
  "$BDN" mounts apply -f "$WORK/other.yaml" --replace
assert_eq alpha "$(cat "$WORK/mnt/a/f.txt")" "mount a after a refused --replace"
kill "$holder"; wait "$holder" 2>/dev/null || true
assert_eq "$rb mounted at $WORK/mnt/a (replacing $ra)" "$("$BDN" mounts apply -f "$WORK/other.yaml" --replace)" "apply --replace"
assert_eq beta "$(cat "$WORK/mnt/a/f.txt")" "mount a after --replace"
assert_eq 1 "$(grep -c " $WORK/mnt/a fuse.bdn " /proc/self/mounts)" "mounts at $WORK/mnt/a after --replace"
assert_eq "$rb already mounted at $WORK/mnt/a" "$("$BDN" mounts apply -f "$WORK/other.yaml" --replace)" "apply --replace again"
# Two entries, the second in use: every replaced mount is taken down before anything is mounted,
# and the first is mounted again (it was left empty behind "rolled back").
"$BDN" volume mount "$rb" "$WORK/mnt/c" >/dev/null
cat > "$WORK/two.yaml" <<YAML
bdn:
  mounts:
    - source: $ra
      path: $WORK/mnt/a
    - source: $ra
      path: $WORK/mnt/c
YAML
sleep 600 < "$WORK/mnt/c/f.txt" & holder=$!
run_fails 8 "bdn: error: $WORK/two.yaml:5: replacing $rb: mountpoint $WORK/mnt/c: busy: pid $holder (sleep) has files or directories open on it (close them or stop the processes, then unmount again); mounted again what --replace had unmounted: $rb at $WORK/mnt/a" \
  "$BDN" mounts apply -f "$WORK/two.yaml" --replace
kill "$holder"; wait "$holder" 2>/dev/null || true
assert_eq beta "$(cat "$WORK/mnt/a/f.txt")" "the first entry's old mount, mounted again"
assert_eq beta "$(cat "$WORK/mnt/c/f.txt")" "the second entry's mount, left alone"
"$BDN" volume umount "$WORK/mnt/a" >/dev/null
"$BDN" volume umount "$WORK/mnt/c" >/dev/null
# Two entries naming one directory through a symlink: refused before anything is mounted.
ln -s "$WORK/mnt/a" "$WORK/alias"
cat > "$WORK/alias.yaml" <<YAML
bdn:
  mounts:
    - source: $ra
      path: $WORK/mnt/a
    - source: $rb
      path: $WORK/alias
YAML
run_fails 2 "bdn: error: $WORK/alias.yaml:5: path $WORK/alias: the same directory as line 3's $WORK/mnt/a (through a symlink)" \
  "$BDN" mounts apply -f "$WORK/alias.yaml" --replace
assert_absent "$WORK/mnt/a fuse" "mount table after the alias config" /proc/self/mounts
# One entry inside another through a symlink (from attacking helper 102: the inner mount was
# hidden under the outer one, and both said mounted): refused either way round.
cat > "$WORK/nest.yaml" <<YAML
bdn:
  mounts:
    - source: $rb
      path: $WORK/alias/sub
    - source: $ra
      path: $WORK/mnt/a
YAML
run_fails 2 "bdn: error: $WORK/nest.yaml:5: path $WORK/mnt/a: a directory holding line 3's $WORK/alias/sub (through a symlink)" \
  "$BDN" mounts apply -f "$WORK/nest.yaml"
assert_absent "$WORK/mnt/a" "mount table after the nested config" /proc/self/mounts

step "one mounts apply at a time; --replace keeps to this store and finishes before a stop signal"
# From attacking helper 102: two --replace runs at once unmounted each other's mounts in their
# rollbacks, and the one that exited 0 had printed a version its mountpoint no longer held.
cat > "$WORK/three.yaml" <<YAML
bdn:
  mounts:
    - source: $ra
      path: $WORK/mnt/t1
    - source: $ra
      path: $WORK/mnt/t2
    - source: $ra
      path: $WORK/mnt/t3
YAML
sed "s|$ra|$rb|" "$WORK/three.yaml" > "$WORK/three-b.yaml"
MOUNTS+=("$WORK/mnt/t1" "$WORK/mnt/t2" "$WORK/mnt/t3")
# One place per user ($BDN_RUNTIME_DIR, which lib.sh makes per test), not per home: runs of
# two homes took no turns.
lock_dir=$BDN_RUNTIME_DIR/bdn
mkdir -p -m 700 "$lock_dir"
python3 -c 'import fcntl,os,sys,time; f=open(sys.argv[1],"a"); fcntl.lockf(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)' \
  "$lock_dir/mounts-apply.lock" > "$WORK/holder.out" & lock_holder=$!
for _ in $(seq 1 200); do grep -q held "$WORK/holder.out" && break; sleep 0.05; done
"$BDN" mounts apply -f "$WORK/three.yaml" > "$WORK/waiting.out" 2> "$WORK/waiting.err" & applier=$!
for _ in $(seq 1 200); do grep -q "waiting for it" "$WORK/waiting.err" && break; sleep 0.05; done
assert_eq "another bdn mounts apply (pid $lock_holder) of this user is running; waiting for it" "$(cat "$WORK/waiting.err")" "apply waiting"
assert_absent "$WORK/mnt/t1" "mount table while apply waits for the lock" /proc/self/mounts
kill "$lock_holder"; wait "$lock_holder" 2>/dev/null || true
wait "$applier" || fail "apply after the lock was freed: $(cat "$WORK/waiting.err")"
assert_eq alpha "$(cat "$WORK/mnt/t3/f.txt")" "t3 after apply"
# BDN_RUNTIME_DIR gets a directory of bdn's own: nothing else in it is touched (from an attacking
# helper: the directory it named was made private, every directory below it too). A relative one
# is refused, not ignored.
mkdir -p "$WORK/shared/sub" && chmod 755 "$WORK/shared" "$WORK/shared/sub"
BDN_RUNTIME_DIR="$WORK/shared" "$BDN" mounts apply -f "$WORK/three.yaml" >/dev/null
assert_eq "755 755 700" "$(stat -c %a "$WORK/shared" "$WORK/shared/sub" "$WORK/shared/bdn" | tr '\n' ' ' | sed 's/ $//')" \
  "modes of BDN_RUNTIME_DIR, a directory in it, and bdn's own"
run_fails 2 'bdn: error: BDN_RUNTIME_DIR "run": not an absolute path' \
  env BDN_RUNTIME_DIR=run "$BDN" mounts apply -f "$WORK/three.yaml"
# An existing bdn/ there is used as it is (it and what it holds were made private), and a symlink
# there is refused (one to /etc had /etc's directories made 0700).
mkdir -p "$WORK/opt/bdn/bin" && chmod 755 "$WORK/opt" "$WORK/opt/bdn" "$WORK/opt/bdn/bin"
BDN_RUNTIME_DIR="$WORK/opt" "$BDN" mounts apply -f "$WORK/three.yaml" >/dev/null
assert_eq "755 755" "$(stat -c %a "$WORK/opt/bdn" "$WORK/opt/bdn/bin" | tr '\n' ' ' | sed 's/ $//')" \
  "modes of an existing bdn/ and a directory in it"
mkdir -p "$WORK/lk" && ln -s "$WORK/shared" "$WORK/lk/bdn"
run_fails 8 "bdn: error: mounts apply lock $WORK/lk/bdn: a symlink; set BDN_RUNTIME_DIR to a directory of this user's for the lock" \
  env BDN_RUNTIME_DIR="$WORK/lk" "$BDN" mounts apply -f "$WORK/three.yaml"
# The lock itself must be a regular file (a directory there failed with exit 1); the directory
# is opened without following a symlink and the lock relative to it (from an attacking helper:
# a symlink swapped in between a check by path and the open was followed).
mkdir -p "$WORK/lf/bdn/mounts-apply.lock"
run_fails 8 "bdn: error: mounts apply lock $WORK/lf/bdn/mounts-apply.lock: not a regular file; set BDN_RUNTIME_DIR to a directory of this user's for the lock" \
  env BDN_RUNTIME_DIR="$WORK/lf" "$BDN" mounts apply -f "$WORK/three.yaml"
# Without BDN_RUNTIME_DIR the place does not depend on the environment either: root's runs take
# turns in /run/bdn with or without $XDG_RUNTIME_DIR (a login session sets it, cron does not;
# from an attacking helper: the lock was in $XDG_RUNTIME_DIR/bdn when it was set, so a deploy
# agent's and a cron job's runs took no turns).
if [ "$(id -u)" = 0 ]; then
  mkdir -p -m 700 /run/bdn "$WORK/xdg"
  python3 -c 'import fcntl,os,sys,time; f=open(sys.argv[1],"a"); fcntl.lockf(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)' \
    /run/bdn/mounts-apply.lock > "$WORK/holder2.out" & lock_holder=$!
  for _ in $(seq 1 200); do grep -q held "$WORK/holder2.out" && break; sleep 0.05; done
  env -u BDN_RUNTIME_DIR XDG_RUNTIME_DIR="$WORK/xdg" "$BDN" mounts apply -f "$WORK/three.yaml" > "$WORK/waiting2.out" 2> "$WORK/waiting2.err" & applier=$!
  for _ in $(seq 1 100); do grep -q "waiting for it" "$WORK/waiting2.err" && break; sleep 0.05; done
  assert_eq "another bdn mounts apply (pid $lock_holder) of this user is running; waiting for it" "$(cat "$WORK/waiting2.err")" "apply waiting, with XDG_RUNTIME_DIR set"
  kill "$lock_holder"; wait "$lock_holder" 2>/dev/null || true
  wait "$applier" || fail "apply after /run/bdn's lock was freed: $(cat "$WORK/waiting2.err")"
fi
# A version mounted from another home: --replace could not mount it again from here, so the run
# is refused before anything is unmounted (it was unmounted, and called lost).
"$BDN" volume umount "$WORK/mnt/t2" >/dev/null
mkdir -p "$WORK/c"; printf 'gamma\n' > "$WORK/c/f.txt"
rc2=$(BDN_HOME="$WORK/home2" "$BDN" volume push "$WORK/c" bdn:weights/c)
BDN_HOME="$WORK/home2" "$BDN" volume mount "$rc2" "$WORK/mnt/t2" >/dev/null
run_fails 8 "bdn: error: $WORK/three-b.yaml:5: mountpoint $WORK/mnt/t2: the mount there of $rc2 is not in this store (mounted from another home or origin?), so a failed run could not mount it again; unmount it first (bdn volume umount $WORK/mnt/t2); nothing was changed" \
  "$BDN" mounts apply -f "$WORK/three-b.yaml" --replace
assert_eq "alpha gamma alpha" "$(cat "$WORK/mnt/t1/f.txt" "$WORK/mnt/t2/f.txt" "$WORK/mnt/t3/f.txt" | tr '\n' ' ' | sed 's/ $//')" "mounts after the refused --replace"
BDN_HOME="$WORK/home2" "$BDN" volume umount "$WORK/mnt/t2" >/dev/null
"$BDN" mounts apply -f "$WORK/three.yaml" >/dev/null
# SIGTERM once the first old mount is gone: the run ends mounted as the config says, then the
# signal ends it (it left the mountpoint empty).
"$BDN" mounts apply -f "$WORK/three-b.yaml" --replace > "$WORK/termed.out" 2>&1 & applier=$!
for _ in $(seq 1 1000); do
  grep -q "^$ra $WORK/mnt/t1 fuse.bdn " /proc/self/mounts || break
  sleep 0.002
done
kill -TERM "$applier" || fail "the apply ended before the signal (the test could not send it in time)"
rc=0; wait "$applier" || rc=$?
assert_eq 143 "$rc" "exit status of the apply SIGTERM ended"
# What it did is printed before the signal ends it (it printed nothing).
assert_eq "$(printf '%s mounted at %s (replacing %s)\n' "$rb" "$WORK/mnt/t1" "$ra" "$rb" "$WORK/mnt/t2" "$ra" "$rb" "$WORK/mnt/t3" "$ra")" \
  "$(cat "$WORK/termed.out")" "output of the apply SIGTERM ended"
for t in t1 t2 t3; do
  assert_eq 1 "$(grep -c " $WORK/mnt/$t fuse.bdn " /proc/self/mounts)" "mounts at $t after the SIGTERM"
  assert_eq beta "$(cat "$WORK/mnt/$t/f.txt")" "$t after the SIGTERM"
done
for t in t1 t2 t3; do "$BDN" volume umount "$WORK/mnt/$t" >/dev/null; done

step "lock pins tag sources and changes nothing else"
"$BDN" mounts lock -f "$WORK/config.yaml" >/dev/null
diff "$WORK/config.orig" "$WORK/config.yaml" > "$WORK/lock.diff" || true
assert_eq "$(printf '9c9\n<     - source: bdn:weights/b\n---\n>     - source: %s' "$rb")" "$(cat "$WORK/lock.diff")" "lock diff"
assert_eq "$WORK/config.yaml: every source is already pinned" "$("$BDN" mounts lock -f "$WORK/config.yaml")" "second lock"

step "invalid configs are refused with line and reason, by apply and lock alike"
bad() {  # bad EXPECTED_MESSAGE <<YAML
  cat > "$WORK/bad.yaml"
  run_fails 2 "bdn: error: $WORK/bad.yaml:$1" "$BDN" mounts apply -f "$WORK/bad.yaml"
  run_fails 2 "bdn: error: $WORK/bad.yaml:$1" "$BDN" mounts lock -f "$WORK/bad.yaml"
}
bad '3: unknown key "sorce" in mounts[0] (allowed: source, path, allow_other)' <<YAML
bdn:
  mounts:
    - sorce: $ra
      path: /mnt/x
YAML
bad '4: mounts[0].path "mnt/x": must be absolute' <<YAML
bdn:
  mounts:
    - source: $ra
      path: mnt/x
YAML
bad '6: mounts[1].path "/mnt/x/": duplicate of mounts[0]' <<YAML
bdn:
  mounts:
    - source: $ra
      path: /mnt/x
    - source: $rb
      path: /mnt/x/
YAML
bad '3: mounts[0].source: ref "bdn:Weights/a b": volume "a b": invalid character '"' '"' (allowed: a-z 0-9 . _ -)' <<YAML
bdn:
  mounts:
    - source: bdn:Weights/a b
      path: /mnt/x
YAML
bad '2: unknown key "mount" in bdn (allowed: mounts)' <<YAML
bdn:
  mount: []
YAML
bad '4: mounts[0].path "/": cannot mount over /' <<YAML
bdn:
  mounts:
    - source: $ra
      path: /
YAML
bad '6: mounts[1].path "/mnt/x/sub": inside mounts[0].path "/mnt/x"' <<YAML
bdn:
  mounts:
    - source: $ra
      path: /mnt/x
    - source: $rb
      path: /mnt/x/sub
YAML
bad '5: duplicate key "source" in mounts[0]' <<YAML
bdn:
  mounts:
    - source: $ra
      path: /mnt/x
      source: $rb
YAML
# A mapping key that is not a string (was exit 1, "yaml-cpp: ... bad conversion", no file name).
bad '5: a key in mounts[0] must be a string' <<YAML
bdn:
  mounts:
    - source: bdn:weights/b
      path: /mnt/x
      ? [a, b]
      : c
YAML
bad '3: a key in mounts[0] must be a string' <<YAML
bdn:
  mounts:
    - {source: bdn:weights/b, path: /mnt/x, {k: v}: c}
YAML
bad '2: a key in bdn must be a string' <<YAML
bdn:
  [mounts]: []
YAML
[ ! -e /mnt/x ] || fail "a refused config mounted something"

step "a NUL in a path is refused: it stacked two mounts on one mountpoint"
printf 'bdn:\n  mounts:\n    - {source: %s, path: "%s"}\n    - {source: %s, path: "%s\\0x"}\n' \
  "$ra" "$WORK/mnt/n" "$rb" "$WORK/mnt/n" > "$WORK/nul.yaml"
run_fails 2 "bdn: error: $WORK/nul.yaml:4: mounts[1].path \"$WORK/mnt/n\\x00x\": control characters are not allowed" \
  "$BDN" mounts apply -f "$WORK/nul.yaml"
[ ! -e "$WORK/mnt/n" ] || fail "the refused config mounted something"

step "a failed mount rolls back this run's mounts, and the directories made for them, and says so"
mkdir -p "$WORK/mnt/kept"
cat > "$WORK/rollback.yaml" <<YAML
bdn:
  mounts:
    - source: $ra
      path: $WORK/mnt/r1
    - source: $ra
      path: $WORK/mnt/made/a/b
    - source: $ra
      path: $WORK/mnt/kept
    - source: $rb
      path: /proc/bdn-no-such-dir/m
YAML
MOUNTS+=("$WORK/mnt/r1" "$WORK/mnt/made/a/b" "$WORK/mnt/kept")
rc=0; "$BDN" mounts apply -f "$WORK/rollback.yaml" >"$WORK/out" 2>"$WORK/err" || rc=$?
assert_eq 3 "$rc" "exit code of the failed apply"
assert_eq "" "$(cat "$WORK/out")" "stdout of the failed apply (it said \"mounted at\")"
assert_eq "bdn: error: $WORK/rollback.yaml:9: mountpoint /proc/bdn-no-such-dir/m: No such file or directory; rolled back: unmounted $WORK/mnt/kept, $WORK/mnt/made/a/b, $WORK/mnt/r1 again" \
  "$(cat "$WORK/err")" "stderr of the failed apply"
[ "$(grep -c " $WORK/mnt/r1 \| $WORK/mnt/made/a/b \| $WORK/mnt/kept " /proc/self/mounts)" = 0 ] \
  || fail "a rolled-back mount is still there"
[ ! -e "$WORK/mnt/r1" ] && [ ! -e "$WORK/mnt/made" ] || fail "the directories made for the rolled-back mounts are still there: $(ls "$WORK/mnt")"
[ -d "$WORK/mnt/kept" ] || fail "rollback removed a mountpoint directory that was there before"

step "lock rewrites only each source value, in flow style too, through a symlink, keeping the mode"
printf 'bdn: {mounts: [{source: bdn:weights/b:latest, path: /x/f1}, {source: bdn:weights/b, path: /x/f2}, {path: /x/bdn:weights/b, source: "bdn:weights/b"}]}\n' > "$WORK/flow.yaml"
chmod 0444 "$WORK/flow.yaml"
ln -s flow.yaml "$WORK/flow-link.yaml"
"$BDN" volume tag set --volume-ref "$rb" --tag latest >/dev/null
"$BDN" mounts lock -f "$WORK/flow-link.yaml" >/dev/null
assert_eq "bdn: {mounts: [{source: $rb, path: /x/f1}, {source: $rb, path: /x/f2}, {path: /x/bdn:weights/b, source: \"$rb\"}]}" "$(cat "$WORK/flow.yaml")" "flow lock"
[ -L "$WORK/flow-link.yaml" ] || fail "lock replaced the symlink with a file"
assert_eq 444 "$(stat -c %a "$WORK/flow.yaml")" "mode after lock"
echo "PASS"
