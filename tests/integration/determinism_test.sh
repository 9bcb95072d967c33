#!/usr/bin/env bash
# The same tree gives the same digest whatever its mtimes, owners, creation time or thread count;
# an identical re-push is reported unchanged with no new version and no chunk stored.
source "$(dirname "$0")/lib.sh"

make_tree() {
  mkdir -p "$1/a/b" "$1/empty"
  head -c 5000000 /dev/zero | tr '\0' 'x' > "$1/a/big.txt"
  python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(r.randbytes(3_000_000))' > "$1/a/b/rand.bin"
  printf '{"k": 1}\n' > "$1/config.json"
  chmod 755 "$1/a/b"
  ln -s config.json "$1/cfg"
}
make_tree "$WORK/one"
sleep 1.1
make_tree "$WORK/two"
touch -d '2001-01-01' "$WORK/two/config.json" "$WORK/two/a/big.txt"
chown -R 12345:54321 "$WORK/two"

d1=$("$BDN" volume push "$WORK/one" bdn:test/det --jobs 1 --json | json_field digest)
d2=$("$BDN" volume push "$WORK/two" bdn:test/det2 --jobs 2 --json | json_field digest)
d3=$("$BDN" volume push "$WORK/two" bdn:test/det3 --jobs 7 --json | json_field digest)
assert_eq "$d1" "$d2" "digest of copy made later with other owners and mtimes"
assert_eq "$d1" "$d3" "digest with 7 threads"

step "identical re-push is unchanged"
out=$("$BDN" volume push "$WORK/two" bdn:test/det --json)
assert_eq "$d1" "$(json_field digest <<<"$out")" "digest"
assert_eq true "$(json_field unchanged <<<"$out")" "unchanged"
assert_eq 0 "$(json_field chunks_uploaded <<<"$out")" "chunks_uploaded"
assert_eq 0 "$(json_field bytes_uploaded <<<"$out")" "bytes_uploaded"
assert_eq 1 "$(json_field sequence <<<"$out")" "sequence not bumped"
assert_eq 1 "$("$BDN" volume versions bdn:test/det --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')" "versions"

step "a content change gives a new digest"
printf 'more' >> "$WORK/two/config.json"
out=$("$BDN" volume push "$WORK/two" bdn:test/det --json)
[ "$(json_field digest <<<"$out")" != "$d1" ] || fail "digest did not change"
assert_eq false "$(json_field unchanged <<<"$out")" "unchanged"
assert_eq 2 "$(json_field sequence <<<"$out")" "sequence"
# Pushing the first tree again moves head back to its version: said (it said only "unchanged").
"$BDN" volume push "$WORK/one" bdn:test/det 2>"$WORK/back.err" >/dev/null
assert_eq 1 "$(grep -c '^unchanged: .*; head moved to it$' "$WORK/back.err")" "push that moved head back: $(cat "$WORK/back.err")"
assert_eq "$d1" "$("$BDN" volume stat bdn:test/det --json | json_field head)" "head after pushing the first tree again"
# A tag the push moves is said, an older version named so (from a new user: `push DIR
# bdn:ns/vol:prod`, the ref a mount uses, moved prod back without a word).
d2=$("$BDN" volume push "$WORK/two" bdn:test/det:prod --json | json_field digest)
out=$("$BDN" volume push "$WORK/one" bdn:test/det:prod 2>&1 >/dev/null)
assert_contains "$out" "
tag prod moved from b3:${d2:3:12} (seq 2) to b3:${d1:3:12} (seq 1), an older version"
out=$("$BDN" volume push "$WORK/two" bdn:test/det --tag prod --json)
assert_eq "[{\"from\": \"$d1\", \"tag\": \"prod\"}]" "$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["tags_moved"]))' <<<"$out")" "tags_moved"
out=$("$BDN" volume push "$WORK/two" bdn:test/det --tag prod 2>&1 >/dev/null)
[[ "$out" != *"moved from"* ]] || fail "a tag that stayed was said to move: $out"

step "a push says how much of what it stored is metadata"
mkdir -p "$WORK/meta"; printf 'x' > "$WORK/meta/one"
"$BDN" volume push "$WORK/meta" bdn:test/meta 2>"$WORK/meta.err" >/dev/null
grep -Eq '^sealed: 1 file, 1 B, 1 chunk \(1 new, [0-9.]+ [KMG]?i?B stored, [0-9.]+ [KMG]?i?B of it the manifest and indexes\)$' "$WORK/meta.err" ||
  fail "push summary: $(cat "$WORK/meta.err")"

step "a mode change gives a new digest"
chmod 600 "$WORK/one/config.json"
d4=$("$BDN" volume push "$WORK/one" bdn:test/det4 --json | json_field digest)
[ "$d4" != "$d1" ] || fail "mode is not part of identity"

step "per-file digest equals b3sum"
"$BDN" volume stat "bdn:test/det@${d1#b3:}/a/b/rand.bin" --json > "$WORK/stat.json"
assert_eq "b3:$(b3sum --no-names "$WORK/one/a/b/rand.bin")" "$(json_field digest < "$WORK/stat.json")" "file digest"
echo "PASS"
