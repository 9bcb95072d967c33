#!/usr/bin/env bash
# Builds TARGETs in ./build-asan: the one AddressSanitizer + UndefinedBehaviorSanitizer build,
# with Debian's clang 16 and libFuzzer's coverage instrumentation (-DBDN_FUZZ=ON), shared by
# scripts/test-sanitized.sh (the tests labelled "sanitize") and scripts/fuzz.sh (the fuzz
# targets), so that CI compiles the libraries under the sanitizers once, not once per script.
# Every finding stops the program (-fno-sanitize-recover=all); clang also checks the
# thread-safety annotations, with -Werror. ccache when present.
# Usage: scripts/build-asan.sh TARGET...
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 TARGET..." >&2; exit 2; }
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang-16 CXX=clang++-16 cmake -S . -B build-asan -DBDN_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$(nproc)" --target "$@"
