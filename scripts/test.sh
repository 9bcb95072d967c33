#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs unit and integration tests (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j2 "$@"
