# shellcheck shell=bash
# Shared by the bench scripts (source it).

# wait_listening LOG: prints the http:// address a `bdn serve` or `bdn cache serve` logged in LOG
# ("listening on http://…") once it has, within 10 s; else prints LOG to stderr and exits 1.
wait_listening() {
  local u=""
  for _ in $(seq 1 100); do
    u=$(sed -n '/listening on http:/{s/.*listening on \(http:\/\/[^ ]*\).*/\1/p;q}' "$1")
    [ -n "$u" ] && { echo "$u"; return 0; }
    sleep 0.1
  done
  echo "server did not start: $(cat "$1")" >&2
  exit 1
}

# claim_workdir DIR [PREPARE]: makes DIR this run's work directory, which the script empties and
# fills. DIR may be missing (it is created), empty, or one a bench script claimed before (it holds
# .bdn-bench, which this writes); anything else is refused with exit 2: a directory with other
# files in it ($HOME or ~/results given by mistake), a symbolic link, a file, another user's. Then
# holds an exclusive lock on DIR/.bdn-bench (flock) until this shell and the processes it started
# have all exited: a second run on DIR at the same time refuses (exit 1) instead of deleting the
# first one's files. Then runs the command PREPARE if given (say, stopping what a killed run left
# running there) and empties DIR but for .bdn-bench (rm --one-file-system: never into a mount a
# killed run left). Sets BENCH_LOCK_FD (the lock's descriptor: close it, `cmd {BENCH_LOCK_FD}>&-`,
# for a process meant to outlive the run) and BENCH_WORKDIR (what release_workdir deletes).
claim_workdir() {
  local dir=$1 prepare=${2:-} f
  if [ -z "$dir" ] || [[ "$dir" == *[[:cntrl:]]* ]]; then
    echo "bench: work directory $(printf '%q' "$dir"): empty or holds a control character" >&2; exit 2
  fi
  while [[ "$dir" == */ && "$dir" != / ]]; do dir=${dir%/}; done
  if [ -L "$dir" ]; then
    echo "bench: work directory $dir is a symbolic link: name the directory itself" >&2; exit 2
  elif [ -e "$dir" ]; then
    [ -d "$dir" ] || { echo "bench: work directory $dir is not a directory" >&2; exit 2; }
    [ -O "$dir" ] || { echo "bench: work directory $dir belongs to another user" >&2; exit 2; }
    if [ ! -f "$dir/.bdn-bench" ] || [ -L "$dir/.bdn-bench" ]; then
      for f in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        echo "bench: work directory $dir is not empty and no bench run made it (no .bdn-bench): name a new or empty directory" >&2
        exit 2
      done
    fi
  else
    mkdir -p "$dir"
  fi
  exec {BENCH_LOCK_FD}>>"$dir/.bdn-bench"
  if ! flock -n "$BENCH_LOCK_FD"; then
    echo "bench: work directory $dir is in use by another run (or by a process one left running: fuser -v $dir/.bdn-bench)" >&2
    exit 1
  fi
  BENCH_WORKDIR=$dir
  [ -z "$prepare" ] || "$prepare"
  find "$dir" -mindepth 1 -maxdepth 1 ! -name .bdn-bench -exec rm -rf --one-file-system {} +
}

# release_workdir: deletes the directory claim_workdir claimed (nothing if none was), unless
# BDN_BENCH_KEEP=1; for the EXIT trap, once the run's processes are stopped and mounts unmounted.
release_workdir() {
  [ -n "${BENCH_WORKDIR:-}" ] || return 0
  if [ "${BDN_BENCH_KEEP:-0}" = 1 ]; then
    echo "bench: work directory kept (BDN_BENCH_KEEP=1): $BENCH_WORKDIR" >&2
  else
    rm -rf --one-file-system "$BENCH_WORKDIR" || echo "bench: could not delete all of $BENCH_WORKDIR" >&2
  fi
  BENCH_WORKDIR=""
}
