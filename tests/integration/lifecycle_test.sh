#!/usr/bin/env bash
# Lifecycle (docs/spec.md §8) through the real binary, embedded and against bdn serve: rm drops
# tags and prints delete_after, --yes is needed without a terminal, restore brings a version back
# without tags (head moves back only to a newer one), a deleted version deleted again is a
# conflict (exit 4), restore past the retention is a clear error (exit 8), versions
# --include-deleted shows state and delete_after; tag set/delete with --expected-sequence are
# compare-and-swap (8 concurrent writers lose no update); bdn gc reclaims what no version needs
# (dry run first) and bdn serve's periodic GC does the same, reported in /metrics.
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/t1" "$WORK/t2"
random_file "$WORK/t1/weights.bin" 3000000 1
echo one > "$WORK/t1/config.json"
random_file "$WORK/t2/weights.bin" 3000000 2
echo two > "$WORK/t2/config.json"

# lifecycle_flow VOL: the whole rm/restore story on bdn:life/VOL (embedded or remote).
lifecycle_flow() {
  local vol=bdn:life/$1
  local d1 d2 out seq
  d1=$("$BDN" volume push "$WORK/t1" "$vol" --tag stable --json | json_field digest)
  d2=$("$BDN" volume push "$WORK/t2" "$vol" --tag prod --tag candidate --json | json_field digest)
  run_fails 2 "bdn: error: bdn volume rm: stdin is not a terminal; give --yes to delete without asking" \
    "$BDN" volume rm "$vol@$d2" </dev/null
  run_fails 2 "bdn: error: ref \"$vol:prod\": rm takes REF@digest (or --recursive REF)" \
    "$BDN" volume rm --yes "$vol:prod"
  out=$("$BDN" volume rm --yes "$vol@${d2#b3:}" </dev/null)
  assert_contains "$out" "deleted $vol@$d2 (tags dropped: candidate prod); delete_after "
  assert_contains "$out" "(restorable until then)"
  after=$("$BDN" volume versions "$vol" --include-deleted --json |
          python3 -c 'import json,sys; v=[x for x in json.load(sys.stdin)["versions"] if x["lifecycle"]=="DELETED"]; print(v[0]["digest"], v[0]["delete_after"])')
  assert_eq "$d2" "${after%% *}" "the deleted version listed with --include-deleted"
  [[ "${after#* }" =~ ^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T ]] || fail "delete_after: $after"
  assert_eq "1" "$("$BDN" volume versions "$vol" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["versions"]))')" "live versions"
  out=$("$BDN" volume versions "$vol" --include-deleted)
  [[ "$out" == *"DELETE_AFTER"* && "$out" == *" DELETED "* ]] || fail "versions --include-deleted: $out"
  assert_eq "$vol@$d1" "$("$BDN" volume stat "$vol" --json | json_field head_ref)" "head after deleting the head"
  local rc=0; err=$("$BDN" volume rm --yes "$vol@$d2" 2>&1 >/dev/null) || rc=$?
  assert_eq 4 "$rc" "exit code of rm of a deleted version"
  assert_contains "$err" "bdn: error: version $vol@$d2: already deleted (at "
  # stat of the deleted version says when it was deleted and until when it can be restored, as
  # its --json does.
  out=$("$BDN" volume stat "$vol@$d2")
  assert_contains "$out" "lifecycle: DELETED"
  assert_contains "$out" "delete_after: ${after#* } (restorable until then)"
  assert_eq "${after#* }" "$("$BDN" volume stat "$vol@$d2" --json | json_field delete_after)" "stat --json delete_after"
  local deleted; deleted=$("$BDN" volume stat "$vol@$d2" --json | json_field deleted)
  [[ "$deleted" =~ ^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T ]] || fail "stat --json deleted: $deleted"
  # A deleted version reads until gc collects it, and each read says so on stderr (from an
  # attacking helper: a cat, pull or mount of it by digest said nothing).
  local warned="warning: version $vol@$d2 was deleted $deleted; it is restorable until ${after#* } (bdn volume restore $vol@$d2), and then gc may collect its data"
  err=$("$BDN" volume cat "$vol@$d2/config.json" 2>&1 >"$WORK/cat-$1") || fail "cat of a deleted version: $err"
  assert_eq "$warned" "$err" "cat of a deleted version"
  cmp "$WORK/cat-$1" "$WORK/t2/config.json" || fail "cat of a deleted version read other bytes"
  err=$("$BDN" volume pull "$vol@$d2" "$WORK/pull-$1" 2>&1 >/dev/null) || fail "pull of a deleted version: $err"
  assert_eq "$warned" "$(head -n 1 <<<"$err")" "pull of a deleted version"
  cmp "$WORK/pull-$1/weights.bin" "$WORK/t2/weights.bin" || fail "pull of a deleted version wrote other bytes"
  # Restore: head moves back (d2 is newer), tags stay dropped.
  out=$("$BDN" volume restore "$vol@$d2" --json)
  assert_eq "true" "$(json_field head_updated <<<"$out")" "head_updated of restoring the newer version"
  assert_eq "$vol@$d2" "$("$BDN" volume stat "$vol" --json | json_field head_ref)" "head after restore"
  assert_eq '{"stable": "'"$d1"'"}' "$("$BDN" volume stat "$vol" --json | json_field tags)" "tags after restore"
  run_fails 4 "bdn: error: version $vol@$d2: is not deleted" "$BDN" volume restore "$vol@$d2"
  "$BDN" volume verify "$vol@$d2" >/dev/null || fail "restored version does not verify"
  # Restoring an older version leaves head alone.
  "$BDN" volume rm --yes "$vol@$d1" >/dev/null
  out=$("$BDN" volume restore "$vol@$d1" --json)
  assert_eq "false" "$(json_field head_updated <<<"$out")" "head_updated of restoring the older version"
  # Sequence bumps on delete and restore; a stale --expected-sequence is a conflict naming it.
  seq=$("$BDN" volume stat "$vol" --json | json_field sequence)
  run_fails 4 "bdn: error: volume $vol: sequence is $seq, expected $((seq - 1))" \
    "$BDN" volume tag set --volume-ref "$vol@$d1" --tag stable --expected-sequence $((seq - 1))
  "$BDN" volume tag set --volume-ref "$vol@$d1" --tag stable --expected-sequence "$seq" >/dev/null
  seq=$((seq + 1))
  run_fails 4 "bdn: error: volume $vol: sequence is $seq, expected $((seq - 1))" \
    "$BDN" volume rm --yes "$vol@$d1" --expected-sequence $((seq - 1))
  run_fails 4 "bdn: error: volume $vol: sequence is $seq, expected $((seq - 1))" \
    "$BDN" volume tag delete --volume-ref "$vol" --tag stable --expected-sequence $((seq - 1))
  "$BDN" volume tag delete --volume-ref "$vol" --tag stable --expected-sequence "$seq" >/dev/null
  assert_eq $((seq + 1)) "$("$BDN" volume stat "$vol" --json | json_field sequence)" "sequence after tag delete"
  # rm --recursive: every live version, head gone.
  out=$("$BDN" volume rm --recursive --yes "$vol" --json)
  assert_eq 2 "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["deleted"]))' <<<"$out")" "versions deleted by rm --recursive"
  assert_eq "" "$("$BDN" volume stat "$vol" --json | json_field head)" "head after rm --recursive"
  run_fails 3 "bdn: error: volume $vol: has no live versions" "$BDN" volume rm --recursive --yes "$vol"
  "$BDN" volume restore "$vol@$d1" >/dev/null
}

# eight_writers VOL: 8 concurrent tag writers with compare-and-swap; every success moved the
# sequence by one from the sequence it read, so successes + the start = the end.
eight_writers() {
  local vol=bdn:life/$1 start d writers=()
  d=$("$BDN" volume push "$WORK/t1" "$vol" --json | json_field digest)
  start=$("$BDN" volume stat "$vol" --json | json_field sequence)
  for w in $(seq 1 8); do
    (
      ok=0
      for i in $(seq 1 6); do
        s=$("$BDN" volume stat "$vol" --json | json_field sequence)
        if "$BDN" volume tag set --volume-ref "$vol@$d" --tag "t$w-$i" --expected-sequence "$s" >/dev/null 2>"$WORK/w$w.err"; then
          ok=$((ok + 1))
        else
          grep -q "sequence is .*, expected $s" "$WORK/w$w.err" || { cat "$WORK/w$w.err" >&2; exit 1; }
        fi
      done
      echo "$ok" > "$WORK/w$w.ok"
    ) &
    PIDS+=("$!"); writers+=("$!")
  done
  for p in "${writers[@]}"; do wait "$p" || fail "a tag writer failed: $(cat "$WORK"/w*.err)"; done
  total=0
  for w in $(seq 1 8); do total=$((total + $(cat "$WORK/w$w.ok"))); done
  end=$("$BDN" volume stat "$vol" --json | json_field sequence)
  tags=$("$BDN" volume stat "$vol" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tags"]))')
  echo "8 writers: $total tag writes succeeded, sequence $start -> $end, $tags tags"
  assert_eq $((start + total)) "$end" "sequence after the concurrent writers (a lost update?)"
  assert_eq "$total" "$tags" "tags set by the concurrent writers"
  [ "$total" -ge 1 ] || fail "no writer succeeded"
}

step "embedded: rm, restore, versions --include-deleted, compare-and-swap"
lifecycle_flow emb
eight_writers emb-cas

step "embedded: restore past the retention is refused; gc reclaims it (dry run first)"
BDN_RETENTION=0s "$BDN" volume push "$WORK/t2" bdn:life/gone >/dev/null
d=$("$BDN" volume push "$WORK/t2" bdn:life/gone --json | json_field digest)
out=$(BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:life/gone@$d")
# (it said "restorable until then" of a version retained for 0s)
assert_contains "$out" "(not restorable: retention 0s)"
err=$("$BDN" volume restore "bdn:life/gone@$d" 2>&1 >/dev/null) && fail "restore past the retention succeeded"
assert_contains "$err" "bdn: error: version bdn:life/gone@$d: deleted at "
assert_contains "$err" ", so it can no longer be restored (its data may be gone; push the same tree again to make it a new version)"
# t2's bytes are also in bdn:life/emb (restored d1 is t1; d2 of emb is deleted by rm --recursive
# with the default retention, so it stays): nothing of t2 is garbage yet. A tree of its own is.
mkdir -p "$WORK/t3"; random_file "$WORK/t3/only.bin" 4000000 3
d3=$("$BDN" volume push "$WORK/t3" bdn:life/own --json | json_field digest)
BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:life/own@$d3" >/dev/null
before=$(du -sb "$BDN_HOME/store/packs" | cut -f1)
# Out-of-range values are named as typed, the bounds as the help writes them (from a new user:
# "2.000000", and "0ms" where --help says "0s to 24h").
run_fails 2 "bdn: error: --max-repack-fraction 2: must be between 0 and 1" "$BDN" gc --max-repack-fraction 2
run_fails 2 "bdn: error: --grace: duration \"25h\": must be between 0s and 24h" "$BDN" gc --grace 25h
plan=$("$BDN" gc --dry-run --json)
would=$(json_field reclaimable_bytes <<<"$plan")
[ "$would" -gt 4000000 ] || fail "dry run would reclaim $would bytes, expected more than t3's 4000000"
assert_eq "$before" "$(du -sb "$BDN_HOME/store/packs" | cut -f1)" "pack bytes after a dry run"
plan_text=$("$BDN" gc --dry-run)
[[ "$plan_text" =~ would\ delete\ $BDN_HOME/store/packs/[0-9a-f]{16}\.pack\ \([0-9]+\ bytes,\ no\ needed\ blob\) ]] || fail "dry run: $plan_text"
# (From a new user: the summary said "6 packs deleted" of a run that deleted nothing.)
[[ "$plan_text" =~ would\ reclaim\ $would\ bytes\ \([0-9.]+\ [KM]iB\)\ by\ deleting\ [1-9][0-9]*\ packs?\ and\ repacking\ [0-9]+,\ of\ [0-9]+\ packs?\; ]] \
  || fail "dry run summary: $plan_text"
out=$("$BDN" gc --grace 0s --json)
assert_eq "$would" "$(json_field bytes_reclaimed <<<"$out")" "bytes reclaimed against the dry run"
after=$(du -sb "$BDN_HOME/store/packs" | cut -f1)
echo "gc: packs $before -> $after bytes (reclaimed $would)"
[ $((before - after)) -ge 4000000 ] || fail "gc freed only $((before - after)) bytes"
for ref in bdn:life/emb bdn:life/emb-cas; do
  "$BDN" volume verify "$ref" >/dev/null || fail "$ref does not verify after gc"
done
# A pack mostly needed is kept with its garbage; the summary says so and names the flag. (How
# many such packs there are depends on how the eight concurrent writers above filled packs: at
# least t4's one.)
mkdir -p "$WORK/t4"; random_file "$WORK/t4/big.bin" 3000000 4; random_file "$WORK/t4/small.bin" 200000 5
d4=$("$BDN" volume push "$WORK/t4" bdn:life/mix --json | json_field digest)
rm "$WORK/t4/small.bin"; "$BDN" volume push "$WORK/t4" bdn:life/mix >/dev/null
BDN_RETENTION=0s "$BDN" volume rm --yes "bdn:life/mix@$d4" >/dev/null
plan_text=$("$BDN" gc --dry-run)
[[ "$plan_text" =~ \;\ ([1-9][0-9]*)\ packs?\ kept\ with\ [0-9.]+\ KiB\ no\ version\ needs\ \(at\ least\ 0\.5\ of\ each\ is\ needed:\ --max-repack-fraction\ sets\ this\)$ ]] || fail "dry run: $plan_text"
plan=$("$BDN" gc --dry-run --json --max-repack-fraction 1)
assert_eq 0 "$(json_field packs_kept_with_garbage <<<"$plan")" "packs kept with garbage at fraction 1"
# A version deleted for good and collected is not found, saying why (from a user: it was
# "corruption", exit 5, "the version's data is lost", for a deletion made on purpose).
for cmd in "volume ls bdn:life/own@$d3" "volume stat bdn:life/own@$d3" "volume cat bdn:life/own@$d3/only.bin" \
  "volume pull bdn:life/own@$d3 $WORK/pulled-own" "volume diff bdn:life/own@$d3 bdn:life/mix" \
  "volume mount bdn:life/own@$d3 $WORK/mnt-own"; do
  rc=0; err=$("$BDN" $cmd 2>&1 >/dev/null) || rc=$?
  assert_eq 3 "$rc" "exit code of $cmd of a collected version ($err)"
  [[ "$err" =~ ^bdn:\ error:\ version\ bdn:life/own@$d3:\ deleted\ [0-9-]+T[0-9:.]+Z,\ its\ retention\ ended\ [0-9-]+T[0-9:.]+Z\ and\ gc\ collected\ its\ data:\ it\ can\ be\ neither\ read\ nor\ restored$ ]] \
    || fail "$cmd of a collected version: $err"
done
"$BDN" volume push "$WORK/t3" bdn:life/own >/dev/null  # the same tree again: a new version
"$BDN" volume verify "bdn:life/own@$d3" >/dev/null || fail "t3 pushed again does not verify"

step "bdn serve: the same through --remote, and periodic GC in /metrics"
export BDN_HOME="$WORK/client"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN
start_bdn serve serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth
SERVER_PID=$STARTED_PID; export BDN_REMOTE=$STARTED_URL
lifecycle_flow rem
eight_writers rem-cas
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
start_bdn serve2 serve --listen 127.0.0.1:0 --data "$WORK/srv" --insecure-no-auth \
  --gc-interval 1s --gc-grace 0s --retention 0s
SERVER_PID=$STARTED_PID; export BDN_REMOTE=$STARTED_URL
d=$("$BDN" volume push "$WORK/t3" bdn:life/rem-gone --json | json_field digest)
"$BDN" volume rm --yes "bdn:life/rem-gone@$d" >/dev/null
err=$("$BDN" volume restore "bdn:life/rem-gone@$d" 2>&1 >/dev/null) && fail "remote restore past the retention succeeded"
assert_contains "$err" ", so it can no longer be restored"
for _ in $(seq 1 100); do
  reclaimed=$(curl -sf "$BDN_REMOTE/metrics" | awk '$1 == "bdn_gc_bytes_reclaimed_total" {print $2}')
  [ -n "$reclaimed" ] && awk -v r="$reclaimed" 'BEGIN {exit !(r >= 4000000)}' && break
  sleep 0.2
done
metrics=$(curl -sf "$BDN_REMOTE/metrics")
printf '%s\n' "$metrics" | awk '/^bdn_gc_/'

awk -v r="$reclaimed" 'BEGIN {exit !(r >= 4000000)}' || fail "bdn serve's gc reclaimed ${reclaimed:-nothing}"
for want in 'bdn_gc_packs_deleted_total [1-9]' 'bdn_gc_last_run_timestamp_seconds [1-9]' \
            'bdn_gc_last_duration_seconds [0-9]' 'bdn_gc_runs_total [1-9]'; do
  [[ $'\n'"$metrics" =~ $'\n'$want ]] || fail "/metrics has no line matching \"$want\""
done
for ref in bdn:life/rem-cas; do "$BDN" volume verify "$ref" >/dev/null || fail "$ref after the server's gc"; done
run_fails 8 "bdn: error: --data $WORK/srv: in use by bdn serve (pid $SERVER_PID); its GC runs inside it (bdn serve --gc-interval)" \
  env -u BDN_REMOTE "$BDN" gc --data "$WORK/srv"
# From a new user: with BDN_REMOTE set, gc, fsck and store stats acted on the local store (empty)
# and exited 0, as if they had checked the server.
for cmd in gc fsck "store stats"; do
  why=""; [ "$cmd" = gc ] && why=" (a server collects its own garbage: bdn serve --gc-interval)"
  # shellcheck disable=SC2086
  run_fails 2 "bdn: error: bdn $cmd: acts on a local data directory (--data, default the embedded store), not on a server, and --remote or BDN_REMOTE names $BDN_REMOTE$why; unset BDN_REMOTE or name the directory with --data to run it here" \
    "$BDN" $cmd
done
# Named on the command line, the directory is local whatever BDN_REMOTE says: the server's own
# --data (in use, so refused for that) and a node cache to convert (mounts through a server use it).
run_fails 8 "bdn: error: --data $WORK/srv: in use by bdn serve (pid $SERVER_PID); its GC runs inside it (bdn serve --gc-interval)" \
  "$BDN" gc --data "$WORK/srv"
mkdir -m 0700 "$WORK/nc-to-migrate"
assert_eq "store $WORK/nc-to-migrate: already in the pack layout, nothing to migrate" \
  "$("$BDN" store migrate --cache-dir "$WORK/nc-to-migrate")" "migrate --cache-dir with BDN_REMOTE set"
echo PASS
