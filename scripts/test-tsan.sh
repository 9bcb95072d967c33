#!/usr/bin/env bash
# The unit tests labelled "tsan" under ThreadSanitizer (a module's TSAN in bdn_module: every module
# that runs threads, from base's thread pool to the origin, the cache nodes and sync; the registry's
# push claims): builds ./build-tsan with clang
# 16 (-DBDN_SANITIZE=thread; clang also checks the thread-safety annotations with
# -Wthread-safety -Werror) with only the targets they need (bdn_tsan_targets) and runs
# `ctest -L tsan`; any report fails its test.
# Not run here: the tests that mount FUSE (they need /dev/fuse and the fusermount3 helper, and a
# FUSE request served by a TSan-instrumented daemon in the test process itself is not what this
# checks); the FetchCore, ChunkCache and VolumeReader logic under them runs in the other tests.
# Usage: scripts/test-tsan.sh [ctest args], e.g. -R FetchCore to run fewer.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang-16 CXX=clang++-16 cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBDN_SANITIZE=thread "${launcher[@]}" >/dev/null
cmake --build build-tsan -j"$(nproc)" --target bdn_tsan_targets
# A report fails the test (exitcode 66); second_deadlock_stack names both lock orders;
# scripts/tsan.supp says what is not ours to report.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/scripts/tsan.supp}"
cd build-tsan
# The FUSE mounts (see above) and the tests that fork a mount daemon (fork of a threaded TSan
# process): MountedTreeTest, Mount.*, MountFaultTest, NodeCacheMountTest.
exclude='^(MountedTreeTest|Mount|MountFaultTest|NodeCacheMountTest)[./]'
ctest -L tsan -E "$exclude" --output-on-failure --timeout 900 -j2 "$@"
