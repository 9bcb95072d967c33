#!/usr/bin/env bash
# Refs on the command line (docs/spec.md §2): exact errors before any I/O, short digest prefixes,
# tags, head, versions newest first, tag set/delete with --expected-sequence,
# ls/stat/cat/diff/verify.
source "$(dirname "$0")/lib.sh"

step "malformed refs fail before any I/O with the part that is wrong"
run_fails 2 'bdn: error: ref "weights/x": must start with "bdn:"' "$BDN" volume ls weights/x
run_fails 2 'bdn: error: ref "bdn:w$/x": namespace "w$": invalid character '"'"'$'"'"' (allowed: a-z 0-9 . _ -)' "$BDN" volume stat 'bdn:w$/x'
run_fails 2 'bdn: error: ref "bdn:w/": volume is empty' "$BDN" volume stat 'bdn:w/'
run_fails 2 'bdn: error: ref "bdn:w/v:": tag is empty' "$BDN" volume stat 'bdn:w/v:'
run_fails 2 'bdn: error: ref "bdn:w/v@abc": digest "abc": too short, need at least 12 hex characters' "$BDN" volume stat 'bdn:w/v@abc'
run_fails 2 'bdn: error: ref "bdn:w/v/a//b": path "a//b": empty segment' "$BDN" volume cat 'bdn:w/v/a//b'
run_fails 2 'bdn: error: ref "bdn:w/v/../etc": path "../etc": ".." segment not allowed' "$BDN" volume cat 'bdn:w/v/../etc'
run_fails 2 'bdn: error: ref "bdn:w/v:a@b": a ref takes a tag or a digest, not both' "$BDN" volume stat 'bdn:w/v:a@b'
# Well-formed, on a home where nothing was pushed: said so, and nothing is made there.
run_fails 3 "bdn: error: embedded store $BDN_HOME: no store there (nothing was pushed to it); --home or BDN_HOME names another" \
  "$BDN" volume stat 'bdn:w/v'
run_fails 3 "bdn: error: embedded store $WORK/typo: no store there (nothing was pushed to it); --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/typo" volume versions 'bdn:w/v'
[ ! -e "$WORK/typo" ] || fail "a read with a mistyped --home made $WORK/typo"
# A home that is a file (it said "no store there (nothing was pushed to it)" to a push).
printf 'x\n' >"$WORK/afile"
mkdir -p "$WORK/tiny"; printf 'y\n' >"$WORK/tiny/y"
run_fails 2 "bdn: error: embedded store $WORK/afile: not a directory; --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/afile" volume push "$WORK/tiny" bdn:w/a
run_fails 2 "bdn: error: embedded store $WORK/afile: not a directory; --home or BDN_HOME names another" \
  env BDN_HOME="$WORK/afile" "$BDN" volume stat bdn:w/a
# BDN_TOKEN without BDN_REMOTE: a write to the embedded store says where it goes (it went there
# without a word, looking like a push to the origin); a read says nothing.
BDN_TOKEN=bdn_forgot "$BDN" --home "$WORK/tokhome" volume push "$WORK/tiny" bdn:w/tok >/dev/null 2>"$WORK/tok.err"
assert_eq "bdn: BDN_TOKEN is set but neither --remote nor BDN_REMOTE is: this writes to the embedded store $WORK/tokhome" \
  "$(head -1 "$WORK/tok.err")" "first line of a push with BDN_TOKEN and no remote"
assert_eq y "$(BDN_TOKEN=bdn_forgot "$BDN" --home "$WORK/tokhome" volume cat bdn:w/tok/y 2>"$WORK/tok.err")" "cat with BDN_TOKEN and no remote"
assert_eq "" "$(cat "$WORK/tok.err")" "stderr of a read with BDN_TOKEN and no remote"
for cmd in "gc --dry-run" "store stats" "store rebuild-index" "store migrate"; do
  # shellcheck disable=SC2086
  run_fails 3 "bdn: error: --data $WORK/typo: no store there (nothing was pushed to it)" \
    "$BDN" $cmd --data "$WORK/typo"
done
[ ! -e "$WORK/typo" ] || fail "a maintenance command with a mistyped --data made $WORK/typo"
# push and sync start make the store, but not for a command they refuse at once.
run_fails 2 'bdn: error: ref "bdn:w$/x": namespace "w$": invalid character '"'"'$'"'"' (allowed: a-z 0-9 . _ -)' \
  "$BDN" --home "$WORK/typo" volume push "$WORK" 'bdn:w$/x'
run_fails 3 "bdn: error: directory \"$WORK/nosuch\": No such file or directory" \
  "$BDN" --home "$WORK/typo" volume push "$WORK/nosuch" bdn:w/v
run_fails 2 'bdn: error: ref "bdn:w$/x": namespace "w$": invalid character '"'"'$'"'"' (allowed: a-z 0-9 . _ -)' \
  "$BDN" --home "$WORK/typo" volume sync start --source "file://$WORK" --dest 'bdn:w$/x'
# From attacking helper 102: refs and tags push itself refuses, and sources sync refuses.
run_fails 2 'bdn: error: ref "bdn:w": volume is missing (expected bdn:<namespace>/<volume>)' "$BDN" --home "$WORK/typo" volume push "$WORK" bdn:w
run_fails 2 'bdn: error: ref "bdn:w/a/sub": push takes no path' "$BDN" --home "$WORK/typo" volume push "$WORK" bdn:w/a/sub
run_fails 2 'bdn: error: ref "bdn:w/a@b3:123456789012": push takes a volume, not a digest' \
  "$BDN" --home "$WORK/typo" volume push "$WORK" bdn:w/a@b3:123456789012
run_fails 2 'bdn: error: tag "head": reserved; push always moves head' "$BDN" --home "$WORK/typo" volume push "$WORK" bdn:w/a --tag head
run_fails 2 'bdn: error: --dest "bdn:w/a/sub": takes no path' \
  "$BDN" --home "$WORK/typo" volume sync start --source "file://$WORK" --dest bdn:w/a/sub
run_fails 2 "$("$BDN" --home "$WORK/h2" volume sync start --source ftp://x/y --dest bdn:w/a 2>&1 >/dev/null)" \
  "$BDN" --home "$WORK/typo" volume sync start --source ftp://x/y --dest bdn:w/a
# From new-user helper 103: arguments in the wrong order, a local directory as a sync source.
run_fails 2 "bdn: error: push takes DIR then REF: \"bdn:w/a\" is a ref (bdn volume push $WORK bdn:w/a)" \
  "$BDN" --home "$WORK/typo" volume push bdn:w/a "$WORK"
run_fails 2 "bdn: error: pull takes REF then DIR: \"bdn:w/a\" is a ref (bdn volume pull bdn:w/a $WORK/p)" \
  "$BDN" --home "$WORK/typo" volume pull "$WORK/p" bdn:w/a
run_fails 2 "bdn: error: mount takes REF then MOUNTPOINT: \"bdn:w/a\" is a ref (bdn volume mount bdn:w/a $WORK/m)" \
  "$BDN" --home "$WORK/typo" volume mount "$WORK/m" bdn:w/a
[ ! -e "$WORK/m" ] || fail "a refused mount made $WORK/m"
run_fails 2 "bdn: error: source \"$WORK\": unknown scheme (expected hf://, s3://, gs://, azure://, r2://, cw://, file://, https:// or http://); a local directory is file://$WORK" \
  "$BDN" --home "$WORK/typo" volume sync start --source "$WORK" --dest bdn:w/a
[ ! -e "$WORK/typo" ] || fail "a refused push or sync start made $WORK/typo"
# A deployment config's own errors come before "no store there".
printf 'bdn:\n  mounts:\n    - source: bdn:w$/x\n      path: /mnt/x\n' > "$WORK/bad.yaml"
run_fails 2 "bdn: error: $WORK/bad.yaml:3: mounts[0].source: ref \"bdn:w\$/x\": namespace \"w\$\": invalid character '\$' (allowed: a-z 0-9 . _ -)" \
  "$BDN" --home "$WORK/typo" mounts apply -f "$WORK/bad.yaml"
[ ! -e "$WORK/typo" ] || fail "a refused mounts apply made $WORK/typo"
# A directory that merely holds something named "store" is no store: a read changes nothing in it.
mkdir -p "$WORK/shop/store/products" && chmod 0755 "$WORK/shop" "$WORK/shop/store"
run_fails 3 "bdn: error: embedded store $WORK/shop: no store there (nothing was pushed to it); --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/shop" volume ls
assert_eq "755 products" "$(stat -c %a "$WORK/shop/store") $(ls "$WORK/shop/store")" "the shop after a read"
# A store with no pack yet and no registry.db (a server's first start that stopped after making
# store/packs) has nothing to lose: a server starts there (it was refused for the registry.db).
mkdir -p "$WORK/fresh/store/packs"
start_bdn fresh serve --listen 127.0.0.1:0 --data "$WORK/fresh" --insecure-no-auth
kill "$STARTED_PID"; wait "$STARTED_PID" 2>/dev/null || true
[ -s "$WORK/fresh/registry.db" ] || fail "no registry.db after a server started in $WORK/fresh"
# A store of packs without its registry.db (the --data of a bdn serve --db, whose registry is in
# PostgreSQL): gc with an empty registry deleted every pack; it and fsck refuse now.
mkdir -p "$WORK/dbdata/store/packs" && printf 'pack' > "$WORK/dbdata/store/packs/0123456789abcdef.pack"
for cmd in "gc" "fsck"; do
  run_fails 8 "bdn: error: --data $WORK/dbdata: its store has no registry.db beside it (a bdn serve --db keeps its registry in PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done" \
    "$BDN" "$cmd" --data "$WORK/dbdata"
done
assert_eq "0123456789abcdef.pack" "$(ls "$WORK/dbdata/store/packs")" "packs after gc and fsck were refused"
[ ! -e "$WORK/dbdata/registry.db" ] || fail "gc or fsck made a registry.db in a --db server's data"
# From attacking helper 102: a failed (or successful) push with --home there made an empty
# registry.db beside the packs, and gc then deleted them all; push and sync start refuse it.
run_fails 8 "bdn: error: embedded store $WORK/dbdata: its store has no registry.db beside it (a bdn serve --db keeps its registry in PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done; --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/dbdata" volume push "$WORK" bdn:w/v
run_fails 8 "bdn: error: embedded store $WORK/dbdata: its store has no registry.db beside it (a bdn serve --db keeps its registry in PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done; --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/dbdata" volume sync start --source "file://$WORK/shop" --dest bdn:w/v
# From attacking helper 104: a server started there without its --db made a new registry, and its
# gc deleted every pack.
run_fails 8 "bdn: error: --data $WORK/dbdata: its store has no registry.db beside it (a bdn serve --db keeps its registry in PostgreSQL, and collects its own garbage: bdn serve --gc-interval); nothing was done" \
  timeout 20 "$BDN" serve --listen 127.0.0.1:0 --data "$WORK/dbdata" --gc-interval 1s --gc-grace 0s
[ ! -e "$WORK/dbdata/registry.db" ] || fail "push or sync start made a registry.db in a --db server's data"
# A registry.db that is no registry (empty, not SQLite, a link to nothing) is refused, not
# opened as a new one that knows no version; one that never held a volume beside packs too.
: > "$WORK/dbdata/registry.db"
run_fails 8 "bdn: error: --data $WORK/dbdata: registry.db is empty (a truncated copy?), not a registry; nothing was done" \
  "$BDN" gc --data "$WORK/dbdata" --dry-run
printf x > "$WORK/dbdata/registry.db-wal"  # not a write-ahead log (it let the empty file pass)
run_fails 8 "bdn: error: --data $WORK/dbdata: registry.db is empty (a truncated copy?), not a registry; nothing was done" \
  "$BDN" gc --data "$WORK/dbdata" --dry-run
rm "$WORK/dbdata/registry.db-wal"
assert_eq 0 "$(stat -c %s "$WORK/dbdata/registry.db")" "the empty registry.db after gc --dry-run"
printf 'not sqlite at all' > "$WORK/dbdata/registry.db"
run_fails 8 "bdn: error: --data $WORK/dbdata: registry.db is not a SQLite database, not a registry; nothing was done" \
  "$BDN" fsck --data "$WORK/dbdata"
rm "$WORK/dbdata/registry.db" && ln -s "$WORK/unmounted/registry.db" "$WORK/dbdata/registry.db"
run_fails 8 "bdn: error: --data $WORK/dbdata: registry.db is a symlink to \"$WORK/unmounted/registry.db\", which does not exist; nothing was done" \
  "$BDN" gc --data "$WORK/dbdata"
[ ! -e "$WORK/unmounted" ] || fail "gc made the registry a dangling link names"
# Another program's SQLite database is refused before it is opened as a registry (gc --dry-run
# gave it the registry's tables).
rm "$WORK/dbdata/registry.db" && (umask 077 && python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("create table recipes(x)")' "$WORK/dbdata/registry.db")
for cmd in "gc --dry-run" "fsck"; do
  run_fails 8 "bdn: error: --data $WORK/dbdata: registry.db is a SQLite database of something else (its tables: recipes), not a registry; nothing was done" \
    "$BDN" $cmd --data "$WORK/dbdata"
done
run_fails 8 "bdn: error: embedded store $WORK/dbdata: registry.db is a SQLite database of something else (its tables: recipes), not a registry; nothing was done; --home or BDN_HOME names another" \
  "$BDN" --home "$WORK/dbdata" volume push "$WORK" bdn:w/v
assert_eq "recipes" "$(python3 -c 'import sqlite3,sys; print(",".join(r[0] for r in sqlite3.connect(sys.argv[1]).execute("select name from sqlite_master where type=\"table\"")))' "$WORK/dbdata/registry.db")" \
  "the foreign database's tables after the refused runs"
# A registry that never held a volume (a new server's) beside packs.
rm "$WORK/dbdata/registry.db" && cp "$WORK/fresh/registry.db"* "$WORK/dbdata/"
run_fails 8 "bdn: error: --data $WORK/dbdata: its registry.db holds no volume, but its store holds 1 pack: refusing to delete them all (is registry.db this store's?); nothing was done; the first push into it, before it commits, leaves it so too: run this again once it has. If they are only what pushes that never committed left (none running), remove $WORK/dbdata/store instead" \
  "$BDN" gc --data "$WORK/dbdata"
run_fails 8 "bdn: error: --data $WORK/dbdata: its registry.db holds no volume, but its store holds 1 pack: nothing to check them against (is registry.db this store's?); the first push into it, before it commits, leaves it so too: run this again once it has" \
  "$BDN" fsck --data "$WORK/dbdata"
assert_eq "0123456789abcdef.pack" "$(ls "$WORK/dbdata/store/packs")" "packs after the refused runs"
# A directory named as a shell completes it is refused, saying how to name it.
run_fails 2 "bdn: error: ref \"bdn:w/v/dir/\": path \"dir/\": ends with '/' (name the entry without it: bdn:w/v/dir)" \
  "$BDN" volume ls 'bdn:w/v/dir/'

mkdir -p "$WORK/v1/dir" "$WORK/v2/dir"
printf 'one\n' > "$WORK/v1/dir/a.txt"; printf 'same\n' > "$WORK/v1/keep.txt"
printf 'two\n' > "$WORK/v2/dir/a.txt"; printf 'same\n' > "$WORK/v2/keep.txt"; printf 'new\n' > "$WORK/v2/added.txt"

step "push two versions; names fold to lower case, tags keep case"
r1=$("$BDN" volume push "$WORK/v1" bdn:Weights/Model --tag Prod)
d1=${r1#*@}
[[ "$r1" == "bdn:weights/model@b3:"* ]] || fail "pinned ref $r1"
assert_eq 67 "${#d1}" "digest length"
r2=$("$BDN" volume push "$WORK/v2" bdn:weights/model:candidate)
d2=${r2#*@}

step "stat of a file: permission bits in octal as text, as a number in JSON"
mkdir -p "$WORK/modes"; printf 'x\n' > "$WORK/modes/f.txt"; chmod 0640 "$WORK/modes/f.txt"
rk=$("$BDN" --home "$WORK/modes-home" volume push "$WORK/modes" bdn:weights/modes)
assert_contains "$("$BDN" --home "$WORK/modes-home" volume stat "$rk/f.txt")" "mode: 0640"
assert_eq 416 "$("$BDN" --home "$WORK/modes-home" volume stat "$rk/f.txt" --json | json_field mode)" "JSON mode"

step "ls text shows one line per entry: control characters and backslashes escaped"
mkdir -p "$WORK/names"; printf 'a' > "$WORK/names/new"$'\n'"line"; printf 'b' > "$WORK/names/back\\slash"
rn=$("$BDN" --home "$WORK/modes-home" volume push "$WORK/names" bdn:weights/names)
listing=$("$BDN" --home "$WORK/modes-home" volume ls "$rn" 2>/dev/null | awk '{print $3}')
assert_eq "$(printf '%s\n%s' 'back\\slash' 'new\nline')" "$listing" "escaped names"

step "ls text gives a symlink the size the mount's stat gives it: its target's length"
mkdir -p "$WORK/links"; printf 'abc' > "$WORK/links/f"; ln -s "f" "$WORK/links/l"; ln -s "../far/away" "$WORK/links/m"
rl=$("$BDN" --home "$WORK/modes-home" volume push "$WORK/links" bdn:weights/links)
listing=$("$BDN" --home "$WORK/modes-home" volume ls "$rl" 2>/dev/null | awk '{$1=$1; print}')
assert_eq "$(printf '%s\n%s\n%s' '-rw-r--r-- 3 f' 'lrwxrwxrwx 1 l -> f' 'lrwxrwxrwx 11 m -> ../far/away')" "$listing" "sizes"

step "refs resolve once and print pinned"
assert_eq "$d1" "$("$BDN" volume stat bdn:weights/model:Prod --json | json_field digest)" "tag Prod"
# a mistyped or mis-cased tag: the message names the tags there are
run_fails 3 'bdn: error: tag "prod" of bdn:weights/model: not found; its tags: Prod, candidate' "$BDN" volume stat bdn:weights/model:prod
assert_eq "$d2" "$("$BDN" volume stat bdn:weights/model --json | json_field head)" "head"
assert_eq "$d2" "$("$BDN" volume stat bdn:weights/model:head --json | json_field digest)" "head tag"
short=${d1:3:12}
assert_eq "$d1" "$("$BDN" volume stat "bdn:weights/model@$short" --json | json_field digest)" "12-char prefix"
assert_eq "$d1" "$("$BDN" volume stat "bdn:weights/model@b3:${d1:3:20}" --json | json_field digest)" "b3: prefix"
run_fails 3 "bdn: error: version bdn:weights/model@b3:000000000000: not found" "$BDN" volume stat "bdn:weights/model@000000000000"

step "versions newest first"
"$BDN" volume versions bdn:weights/model --json > "$WORK/versions.json"
assert_eq "$d2 $d1" "$(python3 -c 'import json,sys; print(" ".join(v["digest"] for v in json.load(open(sys.argv[1]))["versions"]))' "$WORK/versions.json")" "order"

step "tag set/delete and sequence"
seq=$("$BDN" volume stat bdn:weights/model --json | json_field sequence)
out=$("$BDN" volume tag set --volume-ref "bdn:weights/model@$short" --tag candidate --expected-sequence "$seq" --json)
assert_eq $((seq + 1)) "$(json_field sequence <<<"$out")" "sequence after tag set"
assert_eq "$d1" "$("$BDN" volume stat bdn:weights/model:candidate --json | json_field digest)" "moved tag"
run_fails 4 "bdn: error: volume bdn:weights/model: sequence is $((seq + 1)), expected $seq" \
  "$BDN" volume tag set --volume-ref bdn:weights/model --tag Prod --expected-sequence "$seq"
run_fails 2 'bdn: error: tag "head": reserved; head moves only with a push or sync' \
  "$BDN" volume tag set --volume-ref bdn:weights/model --tag head
# a version, tag or path in tag delete's ref would be ignored: refused, and the tag stays
run_fails 2 "bdn: error: ref \"bdn:weights/model@$short\": tag delete takes bdn:<ns>/<vol> (the tag is --tag)" \
  "$BDN" volume tag delete --volume-ref "bdn:weights/model@$short" --tag candidate
run_fails 2 'bdn: error: ref "bdn:weights/model:Prod": tag delete takes bdn:<ns>/<vol> (the tag is --tag)' \
  "$BDN" volume tag delete --volume-ref bdn:weights/model:Prod --tag candidate
run_fails 2 'bdn: error: ref "bdn:weights/model/dir/a.txt": tag delete takes bdn:<ns>/<vol> (the tag is --tag)' \
  "$BDN" volume tag delete --volume-ref bdn:weights/model/dir/a.txt --tag candidate
run_fails 2 'bdn: error: ref "bdn:weights/model:Prod/dir/a.txt": tag set takes a version, not a path in it' \
  "$BDN" volume tag set --volume-ref bdn:weights/model:Prod/dir/a.txt --tag other
assert_eq "$d1" "$("$BDN" volume stat bdn:weights/model:candidate --json | json_field digest)" "tag kept after refused deletes"
"$BDN" volume tag delete --volume-ref bdn:weights/model --tag candidate >/dev/null
run_fails 3 'bdn: error: tag "candidate" of bdn:weights/model: not found; its tags: Prod' \
  "$BDN" volume tag delete --volume-ref bdn:weights/model --tag candidate
assert_eq "$d1" "$("$BDN" volume stat "bdn:weights/model@$short" --json | json_field digest)" "version stays"

step "ls, cat, diff, verify"
assert_eq "weights" "$("$BDN" volume ls)" "namespaces"
assert_eq "bdn:weights/model" "$("$BDN" volume ls bdn:weights)" "volumes"
assert_eq "$(printf 'added.txt\ndir\nkeep.txt')" "$("$BDN" volume ls bdn:weights/model --json | python3 -c 'import json,sys; print("\n".join(e["path"] for e in json.load(sys.stdin)["entries"]))')" "entries"
assert_eq "one" "$("$BDN" volume cat bdn:weights/model:Prod/dir/a.txt)" "cat"
cmp <("$BDN" volume cat "$r2/dir/a.txt") "$WORK/v2/dir/a.txt" || fail "cat bytes"
out=$("$BDN" volume diff bdn:weights/model:Prod bdn:weights/model --json)
assert_eq '["added.txt"]' "$(json_field added <<<"$out")" "added"
assert_eq '["dir/a.txt"]' "$(json_field changed <<<"$out")" "changed"
assert_eq '[]' "$(json_field removed <<<"$out")" "removed"
assert_eq 8 "$(json_field fetch_bytes <<<"$out")" "fetch bytes (two new 4-byte files)"
assert_eq "--- $r1
+++ $r2
A added.txt
M dir/a.txt
1 added, 0 removed, 1 changed; moving A->B fetches 8 B (8 bytes in 2 chunks)" \
  "$("$BDN" volume diff bdn:weights/model:Prod bdn:weights/model)" "diff text"
# From a session's note: "1 chunks".
assert_eq "--- $r2
+++ $r1
D added.txt
M dir/a.txt
0 added, 1 removed, 1 changed; moving A->B fetches 4 B (4 bytes in 1 chunk)" \
  "$("$BDN" volume diff bdn:weights/model bdn:weights/model:Prod)" "diff text, B to A"
out=$("$BDN" volume verify bdn:weights/model --json)
assert_eq true "$(json_field ok <<<"$out")" "verify"
# From a new user: a path (or for versions a tag) was ignored, and the whole version checked,
# compared or listed. verify checks the path; diff and versions refuse it.
out=$("$BDN" volume verify bdn:weights/model:Prod/dir --json)
assert_eq "1 dir" "$(json_field files <<<"$out") $(json_field path <<<"$out")" "verify of a directory"
assert_eq "$r1 path \"dir/a.txt\": 1 file, 1 chunk, 4 B checked, 0 problems" \
  "$("$BDN" volume verify bdn:weights/model:Prod/dir/a.txt)" "verify of a file"
run_fails 3 "bdn: error: path \"nosuch\": not in version $d1" "$BDN" volume verify bdn:weights/model:Prod/nosuch
run_fails 2 "bdn: error: pull takes REF then DIR: \"bdn:weights/model\" is a ref (bdn volume pull bdn:weights/model $WORK/p)" \
  "$BDN" volume pull "$WORK/p" bdn:weights/model
run_fails 2 'bdn: error: ref "bdn:weights/model/nosuch": diff compares whole versions and takes no path' \
  "$BDN" volume diff bdn:weights/model:Prod bdn:weights/model/nosuch
for r in bdn:weights/model:Prod "bdn:weights/model@$short" bdn:weights/model/dir; do
  run_fails 2 "bdn: error: ref \"$r\": versions takes bdn:<ns>/<vol> (it lists every version of bdn:weights/model)" \
    "$BDN" volume versions "$r"
done
echo "PASS"
