#!/usr/bin/env bash
# A pull with --include never touches a file of the version outside its includes that is named
# like an included file's partial file (".bdn-partial-" and 32 hex digits of BLAKE3 of the name).
# Regression: partial names were chosen among the included entries only, so after a full pull had
# put "a.txt" and such a file in DIR, `pull --include a.txt --overwrite` of a truncated a.txt
# resumed from that file and renamed it over a.txt: the other file was gone.
source "$(dirname "$0")/lib.sh"

src="$WORK/src"
mkdir -p "$src/d"
partial=".bdn-partial-$(printf '%s' a.txt | b3sum --no-names | cut -c1-32)"
head -c 300000 /dev/urandom > "$src/a.txt"
head -c 200000 /dev/urandom > "$src/$partial"
cp "$src/a.txt" "$src/d/a.txt"; cp "$src/$partial" "$src/d/$partial"
ref=$("$BDN" volume push "$src" bdn:test/partial)
want_a=$(b3sum --no-names "$src/a.txt")
want_p=$(b3sum --no-names "$src/$partial")

# check DIR WHAT: a.txt and the file named like its partial file hold their bytes; DIR holds no
# other partial file.
check() {
  assert_eq "$want_a" "$(b3sum --no-names "$1/a.txt")" "$2: a.txt"
  assert_eq "$want_p" "$(b3sum --no-names "$1/$partial")" "$2: $partial"
  cmp "$src/$partial" "$1/$partial" || fail "$2: $partial differs"
  assert_eq "$1/$partial" "$(find "$1" -maxdepth 1 -name '.bdn-partial-*')" "$2: partial files"
}

step "full pull, then --include a.txt with nothing changed"
out="$WORK/out"
"$BDN" volume pull "$ref" "$out" >/dev/null
check "$out" "full pull"
"$BDN" volume pull "$ref" "$out" --include a.txt >/dev/null
check "$out" "--include a.txt"

step "--include a.txt --overwrite of a truncated a.txt (fetched again)"
truncate -s 1000 "$out/a.txt"
"$BDN" volume pull "$ref" "$out" --include a.txt --overwrite >/dev/null
check "$out" "--include a.txt of a truncated a.txt"

step "a file pulled alone after its directory (--strip-prefix): its siblings are kept too"
out="$WORK/stripped"
"$BDN" volume pull "$ref/d" "$out" --strip-prefix >/dev/null
check "$out" "pull of d"
truncate -s 1000 "$out/a.txt"
"$BDN" volume pull "$ref/d/a.txt" "$out" --strip-prefix --overwrite >/dev/null
check "$out" "pull of d/a.txt of a truncated a.txt"
echo "PASS"
