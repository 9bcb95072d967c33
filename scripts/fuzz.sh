#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ into ./build-asan (clang 16, ASan+UBSan, ccache when
# present: the build that scripts/test-sanitized.sh shares, scripts/build-asan.sh) and runs each
# for SECONDS (default 60) from its committed corpus (fuzz/corpus/<target>: seeds and every crash
# input found so far), with its dictionary if it has one (fuzz/<target>.dict). Fails naming the
# target if any finds a crash, a leak, a sanitizer report, a hang (-timeout) or a broken
# property. New inputs go to build-asan/corpus/<target>, a crash to
# build-asan/artifacts/<target>-crash-*, each log to build-asan/logs/<target>.log.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (FUZZ_JOBS=N runs N targets at once; default 2)
#        scripts/fuzz.sh --seeds                    (rewrites fuzz/corpus/*/seed-* from the encoders)
set -euo pipefail
cd "$(dirname "$0")/.."

# The longest input each target is given: a little above its largest seed.
declare -A max_len=(
  [manifest]=2048 [chunk_index]=2048 [batch_response]=2048 [range]=96 [ref]=256
  [listen_address]=96 [node_list]=256 [mounts_config]=1024 [json_bodies]=1024 [units]=48
  [listings]=2048 [pack]=4096
)

scripts/build-asan.sh bdn_fuzzers make_seeds >/dev/null

if [ "${1:-}" = --seeds ]; then
  rm -f fuzz/corpus/*/seed-*
  build-asan/fuzz/make_seeds fuzz/corpus
  echo "fuzz: seeds written to fuzz/corpus/ ($(du -sh fuzz/corpus | cut -f1))"
  exit 0
fi

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(printf '%s\n' "${!max_len[@]}" | sort))
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz: unknown target $t (known: ${!max_len[*]})" >&2; exit 2; }
done
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-16 || true)}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p build-asan/logs build-asan/artifacts

run() {
  local t=$1
  local dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  mkdir -p "build-asan/corpus/$t"
  nice build-asan/fuzz/"${t}"_fuzz -max_total_time="$seconds" -max_len="${max_len[$t]}" "${dict[@]}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-asan/artifacts/$t-" "build-asan/corpus/$t" "fuzz/corpus/$t" \
    >"build-asan/logs/$t.log" 2>&1
}

# Runs up to FUZZ_JOBS targets at once; each writes its exit status beside its log.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "${FUZZ_JOBS:-2}" ]; do wait -n || true; done
  rm -f "build-asan/logs/$t.rc"
  (rc=0; run "$t" || rc=$?; echo "$rc" >"build-asan/logs/$t.rc") &
done
wait
failed=()
for t in "${targets[@]}"; do
  log=build-asan/logs/$t.log
  rc=$(cat "build-asan/logs/$t.rc")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" = 0 ]; then
    echo "fuzz: $t: ${runs:-?} runs in ${seconds}s (corpus: $(find "build-asan/corpus/$t" -type f | wc -l) new, $(find "fuzz/corpus/$t" -type f | wc -l) committed), nothing found"
  else
    failed+=("$t")
    echo "fuzz: $t: FAILED (exit $rc) after ${runs:-?} runs; from $log:" >&2
    report=$(grep -E -A30 '^==[0-9]+==|runtime error|property violated' "$log" || tail -40 "$log")
    printf '%s\n' "$report" | sed -n 1,60p >&2
    ls build-asan/artifacts/"$t"-* 2>/dev/null | sed 's/^/fuzz:   input: /' >&2 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
