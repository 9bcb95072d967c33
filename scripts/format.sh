#!/usr/bin/env bash
# Formats every tracked C++ file (*.cc, *.h) with clang-format-16 and .clang-format (Google
# style, 100 columns). Usage: scripts/format.sh           (rewrites the files that differ)
#                             scripts/format.sh --check   (lists them; exit 1 if any, else 0)
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=clang-format-16
if ! command -v "$fmt" >/dev/null; then
  echo "format: $fmt not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
case "${1:-}" in
  "") mode=fix ;;
  --check) mode=check ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac
mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0
if [ "$mode" = fix ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$fmt" -i --style=file
  exit 0
fi
# Formats copies in one clang-format run and compares them (clang-format 16's --dry-run can
# crash printing its report); a failure of clang-format itself (a bad .clang-format) fails here.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp .clang-format "$tmp/"
printf '%s\0' "${files[@]}" | xargs -0 cp --parents -t "$tmp"
(cd "$tmp" && printf '%s\0' "${files[@]}" | xargs -0 "$fmt" -i --style=file)
# One git hash-object per tree, not one cmp per file.
mapfile -t before < <(printf '%s\n' "${files[@]}" | git hash-object --no-filters --stdin-paths)
mapfile -t after < <(cd "$tmp" &&
  printf '%s\n' "${files[@]}" | git hash-object --no-filters --stdin-paths)
differ=()
for i in "${!files[@]}"; do
  [ "${before[$i]}" = "${after[$i]}" ] || differ+=("${files[$i]}")
done
if [ ${#differ[@]} -gt 0 ]; then
  printf '%s\n' "${differ[@]}"
  echo "format: ${#differ[@]} file(s) differ from clang-format; scripts/format.sh rewrites them" >&2
  exit 1
fi
