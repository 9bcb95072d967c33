#!/usr/bin/env bash
# The tests labelled "sanitize" under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# ./build-asan (-DBDN_SANITIZE=address,undefined) with only the targets they need
# (bdn_sanitize_targets) and runs `ctest -L sanitize`; any finding fails its test.
# Usage: scripts/test-sanitized.sh [ctest args], e.g. -R integrity to run fewer.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBDN_SANITIZE=address,undefined \
  "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$(nproc)" --target bdn_sanitize_targets
# Findings stop the process with a non-zero exit (the build adds -fno-sanitize-recover=all).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd build-asan
ctest -L sanitize --output-on-failure --timeout 900 -j2 "$@"
