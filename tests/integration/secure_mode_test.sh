#!/usr/bin/env bash
# A bdn binary given file capabilities (or made setuid) and run by another user starts in glibc's
# secure mode, where GLIBC_TUNABLES is not honoured: the commands that re-execute themselves for a
# huge-page heap (base/memory.h) must not do so there, where a marker in GLIBC_TUNABLES would never
# reach the new process and it would re-execute forever. A push and a cat by user nobody through
# such a binary finish, and their bytes match.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ]; then echo "SKIP: giving a binary file capabilities needs root"; exit 77; fi
mode=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo none)
echo "THP mode: $mode (the loop this test catches needs [madvise])"

chmod 711 "$WORK"
bin="$WORK/bin"
mkdir -m 755 "$bin"
cp "$BDN" "$bin/bdn"
setcap cap_net_bind_service+ep "$bin/bdn" || fail "setcap on a copy of bdn in $bin"
mkdir -m 755 "$WORK/src"
random_file "$WORK/src/a.bin" 3000000 7
chmod 644 "$WORK/src/a.bin"
mkdir "$WORK/nobody"
chown 65534 "$WORK/nobody"
# as_nobody ARGS...: the capable bdn as uid/gid 65534 with its own BDN_HOME, killed after 60 s.
as_nobody() {
  timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
    env BDN_HOME="$WORK/nobody/home" "$bin/bdn" "$@"
}

step "push and cat by another user through a binary with file capabilities"
rc=0; ref=$(as_nobody volume push "$WORK/src" bdn:test/secure) || rc=$?
[ "$rc" != 124 ] || fail "push in secure mode did not finish within 60 s (re-executing itself?)"
assert_eq 0 "$rc" "push exit status"
rc=0; as_nobody volume cat "$ref/a.bin" > "$WORK/out.bin" || rc=$?
[ "$rc" != 124 ] || fail "cat in secure mode did not finish within 60 s (re-executing itself?)"
assert_eq 0 "$rc" "cat exit status"
cmp "$WORK/out.bin" "$WORK/src/a.bin" || fail "bytes read back in secure mode"
echo "PASS"
