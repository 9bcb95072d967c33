#!/usr/bin/env bash
# The tests labelled "sanitize" under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# the targets they need (bdn_sanitize_targets) in ./build-asan, the clang 16 ASan+UBSan build
# that the fuzz targets share (scripts/build-asan.sh), and runs `ctest -L sanitize`; any finding
# fails its test.
# Usage: scripts/test-sanitized.sh [ctest args], e.g. -R integrity to run fewer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-asan.sh bdn_sanitize_targets
# Findings stop the process with a non-zero exit (the build adds -fno-sanitize-recover=all).
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-16 || true)}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd build-asan
ctest -L sanitize --output-on-failure --timeout 900 -j2 "$@"
