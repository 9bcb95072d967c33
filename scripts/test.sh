#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs unit and integration tests (ctest),
# then the tests labelled "sanitize" again under ASan and UBSan (scripts/test-sanitized.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure --timeout 900 -j2 "$@")
scripts/test-sanitized.sh
