#!/usr/bin/env bash
# Configures and builds bdn into ./build (Release with debug info).
# Usage: scripts/build.sh [cmake args]. BDN_BUILD_TARGETS (space-separated, default: every target,
# tests included) limits what is built, e.g. BDN_BUILD_TARGETS=bdn for the binary alone.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
targets=()
for t in ${BDN_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
