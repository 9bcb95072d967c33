#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks the formatting (scripts/format.sh),
# builds, runs unit and integration tests (ctest), then the tests labelled "sanitize" again
# under ASan and UBSan (scripts/test-sanitized.sh), the tests labelled "tsan" under
# ThreadSanitizer (scripts/test-tsan.sh, clang 16), then every fuzz target for BDN_FUZZ_SECONDS
# each (default 30; 0 skips). With ctest arguments (a subset, e.g. `-R volume`) only ctest runs.
# Usage: scripts/test.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/format.sh --check  # the tree is as clang-format-16 and .clang-format write it
scripts/build.sh
(cd build && ctest --output-on-failure --timeout 900 -j2 "$@")
[ $# -eq 0 ] || exit 0
scripts/test-sanitized.sh
scripts/test-tsan.sh
fuzz_seconds=${BDN_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" != 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds"
fi
