#!/usr/bin/env bash
# bdn volume sync and bdn secret (docs/spec.md §6), embedded and through a real `bdn serve`: a
# file:// source synced embedded gives the bytes of the directory (b3sum of every file after a
# pull), and a chmod alone is mirrored by the next sync; --include/--exclude select as documented;
# secrets are set from stdin, listed by name only and removed; an hf:// source on the Hub fixture
# (tests/fixtures/hf_hub.py) synced on the server with --wait prints the pinned ref, and its files
# pull back byte for byte; a re-sync of the same commit is READY by the metadata check with zero
# object GETs at the Hub; failures end FAILED with their stable codes and exit codes; a gated repo
# is refused without a token and with a token that has no access, and synced with one that has;
# revisions (a branch with '/', a tag, refs/pr/1, a commit) pin their commits; a 429's Retry-After
# is waited (timed at the Hub) and one past the retry deadline fails at once; a file rewritten
# mid-sync fails source_changed; Ctrl-C during --wait leaves the job running; an https:// file (the
# fixture over TLS) is synced with its certificate checked, and one with neither ETag nor
# Last-Modified fetched at every sync; an embedded sync interrupted by Ctrl-C or kill -9 resumes,
# fetching only the file it had not sealed; cancel ends a held job CANCELED.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
FIXTURES="$(cd "$(dirname "$0")/../fixtures" && pwd)"

# job_json_field JSON FIELD...: a nested field of a job's JSON (fields as path steps).
jf() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v,list) else v[k]
print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$@"; }

step "embedded: sync a file:// directory"
mkdir -p "$WORK/src/sub/deeper" "$WORK/pull1"
random_file "$WORK/src/model.safetensors" 3000000 1
printf '{"a": 1}\n' > "$WORK/src/config.json"
printf '{"b": 2}\n' > "$WORK/src/sub/deeper/tok.json"
printf 'readme\n' > "$WORK/src/README.md"
: > "$WORK/src/sub/empty.txt"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/files:prod)
assert_eq "READY" "$(jf "$out" state)" "state"
ref=$(jf "$out" version_ref)
[[ "$ref" == bdn:mirror/files@b3:* ]] || fail "sync printed [$out]"
assert_eq "5" "$(jf "$out" progress objects_total)" "objects_total"
"$BDN" volume pull bdn:mirror/files:prod "$WORK/pull1" >/dev/null
for f in model.safetensors config.json sub/deeper/tok.json README.md sub/empty.txt; do
  assert_eq "$(b3sum --no-names "$WORK/src/$f")" "$(b3sum --no-names "$WORK/pull1/$f")" "b3sum of $f"
done
id=$(jf "$out" id)
desc=$("$BDN" volume sync describe "$id")
assert_contains "$desc" "state: READY"
assert_contains "$desc" "version: $ref"
list=$("$BDN" --json volume sync list --dest bdn:mirror)
assert_eq "$id" "$(jf "$list" jobs 0 id)" "listed job"

step "embedded: the same source again resolves by metadata (unchanged)"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/files)
assert_eq "READY" "$(jf "$out" state)" "state"
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "0" "$(jf "$out" progress bytes_fetched)" "bytes fetched by the re-sync"

# The etag was size-mtime-inode: after a chmod the sync was "unchanged" and kept 0644.
step "embedded: a chmod alone is a change the next sync mirrors"
chmod 600 "$WORK/src/config.json"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/files)
assert_eq "READY" "$(jf "$out" state)" "state after a chmod"
assert_eq "false" "$(jf "$out" unchanged)" "unchanged after a chmod"
[ "$(jf "$out" version_ref)" != "$ref" ] || fail "the sync after a chmod kept version $ref"
mkdir -p "$WORK/pull-chmod"
"$BDN" volume pull "$(jf "$out" version_ref)" "$WORK/pull-chmod" >/dev/null
assert_eq "600" "$(stat -c %a "$WORK/pull-chmod/config.json")" "mode of config.json after a chmod"
chmod 644 "$WORK/src/config.json"

step "embedded: --include/--exclude (* also matches /, exclude wins)"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/json \
  --include '*.json' --exclude 'sub/*')
ls_out=$("$BDN" volume ls -R "$(jf "$out" version_ref)")
assert_eq "config.json" "$(grep -o '[^ ]*\.json$' <<<"$ls_out" | tr '\n' ' ' | sed 's/ $//')" "selected files"
out=$("$BDN" --json volume sync start --source "file://$WORK/src" --dest bdn:mirror/json \
  --include '*.safetensors' --include 'README*')
assert_eq "bdn:mirror/json@$(jf "$out" version)" "$(jf "$out" version_ref)" "ref"
rc=0; "$BDN" volume sync start --source "file://$WORK/src" --dest bdn:mirror/none --include '*.gguf' \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of an include that matches nothing"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (include_matched_nothing): --include \"*.gguf\": matches nothing in file://$WORK/src (5 objects)"$ ]] ||
  fail "stderr of an include that matches nothing: $(cat "$WORK/err")"

step "embedded: a file:// tree of symlinks only (a Hugging Face cache snapshot) fails, sealing nothing"
mkdir -p "$WORK/hfc/blobs" "$WORK/hfc/snapshots/rev1"
printf '{"a": 1}\n' > "$WORK/hfc/blobs/aaa"
printf 'weights\n' > "$WORK/hfc/blobs/bbb"
ln -s ../../blobs/aaa "$WORK/hfc/snapshots/rev1/config.json"
ln -s ../../blobs/bbb "$WORK/hfc/snapshots/rev1/model.safetensors"
rc=0; "$BDN" volume sync start --source "file://$WORK/hfc/snapshots/rev1" --dest bdn:mirror/snap \
  >"$WORK/out" 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of a sync of symlinks only"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (source_not_found): file://$WORK/hfc/snapshots/rev1: nothing to sync: no regular file, and 2 symlinks or special files left out (\"config.json\"); file:// syncs regular files only: sync a copy with the links resolved (cp -rL)"$ ]] ||
  fail "stderr of a sync of symlinks only: $(cat "$WORK/err")"
run_fails 3 'bdn: error: volume bdn:mirror/snap: not found' "$BDN" volume versions bdn:mirror/snap
# A FIFO (a special file) is left out as documented, not an error; the file beside
# it is synced.
mkdir -p "$WORK/withfifo"
mkfifo "$WORK/withfifo/pipe"
printf 'kept\n' > "$WORK/withfifo/kept.txt"
out=$("$BDN" --json volume sync start --source "file://$WORK/withfifo" --dest bdn:mirror/fifo)
assert_eq READY "$(jf "$out" state)" "state of a sync beside a FIFO"
assert_eq 1 "$(jf "$out" progress objects_left_out)" "entries a sync beside a FIFO left out"
assert_eq "kept.txt" "$("$BDN" volume ls "bdn:mirror/fifo@$(jf "$out" version)" | awk '{print $NF}')" \
  "what the sync beside a FIFO sealed"
assert_eq "kept" "$("$BDN" volume cat "bdn:mirror/fifo@$(jf "$out" version)/kept.txt")" "kept.txt synced"
# A name that is not UTF-8 is a name no version can hold: invalid_object, exit 2 (was internal).
mkdir -p "$WORK/badname"
printf 'x\n' > "$WORK/badname/$(printf 'b\xff')"
rc=0; "$BDN" volume sync start --source "file://$WORK/badname" --dest bdn:mirror/badname \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "2" "$rc" "exit code of a sync of a name that is not UTF-8"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (invalid_object): file://$WORK/badname: path \"$WORK/badname/b\\xff\": name is not valid UTF-8"$ ]] ||
  fail "stderr of a sync of a name that is not UTF-8: $(cat "$WORK/err")"
# A symlink or FIFO whose name is not UTF-8 is left out like any other (it failed the whole
# job as invalid_object): the regular file beside them is synced.
mkdir -p "$WORK/badlink"
ln -s kept.txt "$WORK/badlink/$(printf 'l\xfe')"
mkfifo "$WORK/badlink/$(printf 'p\xfd')"
printf 'kept\n' > "$WORK/badlink/kept.txt"
out=$("$BDN" --json volume sync start --source "file://$WORK/badlink" --dest bdn:mirror/badlink)
assert_eq READY "$(jf "$out" state)" "state of a sync beside a symlink and a FIFO named in Latin-1"
assert_eq "kept.txt" "$("$BDN" volume ls "$(jf "$out" version_ref)" | awk '{print $NF}')" \
  "what the sync beside badly named links sealed"
# Said, not silent: the count in the job (describe, JSON) and in the READY line; an --exclude
# that matches them leaves nothing out.
assert_eq 2 "$(jf "$out" progress objects_left_out)" "entries left out beside badly named links"
"$BDN" volume sync start --source "file://$WORK/badlink" --dest bdn:mirror/badlink2 \
  >/dev/null 2>"$WORK/err"
[[ "$(tail -1 "$WORK/err")" =~ ^"sync sync_"[0-9a-f]{16}": READY: 1 object, 5 B, 5 B fetched; 2 symlinks or special files left out (a sync holds regular files only)"$ ]] ||
  fail "READY line of a sync that left entries out: $(cat "$WORK/err")"
assert_eq "progress: 1/1 objects, 5 B/5 B (5 B fetched); 2 symlinks or special files left out (a sync holds regular files only)" \
  "$("$BDN" volume sync describe "$(jf "$out" id)" | grep '^progress: ')" "describe of a sync that left entries out"
out=$("$BDN" --json volume sync start --source "file://$WORK/badlink" --dest bdn:mirror/badlink3 \
  --exclude 'l*' --exclude 'p*')
assert_eq 0 "$(jf "$out" progress objects_left_out)" "entries left out when --exclude matches them"
# A directory whose name is not UTF-8 holding only a symlink, or nothing, holds nothing a
# file:// sync keeps: no error (it failed the job with exit 2); a regular file inside one still
# does (exit 2, naming its path).
mkdir -p "$WORK/baddir/$(printf 'd\xff')" "$WORK/baddir/$(printf 'e\xfe')"
ln -s ../kept.txt "$WORK/baddir/$(printf 'd\xff')/link"
printf 'kept\n' > "$WORK/baddir/kept.txt"
out=$("$BDN" --json volume sync start --source "file://$WORK/baddir" --dest bdn:mirror/baddir)
assert_eq READY "$(jf "$out" state)" "state of a sync beside badly named directories of no regular file"
assert_eq "kept.txt" "$("$BDN" volume ls "$(jf "$out" version_ref)" | awk '{print $NF}')" \
  "what the sync beside badly named directories sealed"
printf 'x\n' > "$WORK/baddir/$(printf 'e\xfe')/file"
rc=0; "$BDN" volume sync start --source "file://$WORK/baddir" --dest bdn:mirror/baddir \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "2" "$rc" "exit code of a sync of a file in a directory whose name is not UTF-8"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (invalid_object): file://$WORK/baddir: path \"$WORK/baddir/e\\xfe/file\": name is not valid UTF-8"$ ]] ||
  fail "stderr of a sync of a file in a directory whose name is not UTF-8: $(cat "$WORK/err")"
# An empty tree, or one of directories only, is nothing to sync, as an object store's empty
# prefix: no version is sealed (it sealed an empty one).
mkdir -p "$WORK/dirsonly/a/b" "$WORK/dirsonly/c"
rc=0; "$BDN" volume sync start --source "file://$WORK/dirsonly" --dest bdn:mirror/dirsonly \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of a sync of directories only"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (source_not_found): file://$WORK/dirsonly: nothing to sync: no regular file in the tree"$ ]] ||
  fail "stderr of a sync of directories only: $(cat "$WORK/err")"
run_fails 3 'bdn: error: volume bdn:mirror/dirsonly: not found' "$BDN" volume versions bdn:mirror/dirsonly

step "embedded: secrets from stdin, listed by name only, removed"
printf 'hf_topsecretvalue\n' | "$BDN" secret set hf-token
ls_out=$("$BDN" secret ls)
assert_contains "$ls_out" "hf-token"
[[ "$ls_out" != *topsecret* ]] || fail "secret ls printed the value"
assert_absent topsecret "the secret's value is stored in plaintext under BDN_HOME" "$BDN_HOME"
assert_eq "600" "$(stat -c %a "$BDN_HOME/secrets.key")" "mode of secrets.key"
"$BDN" secret rm hf-token 2>/dev/null
run_fails 3 'bdn: error: secret "hf-token": not found' "$BDN" secret rm hf-token
run_fails 3 'bdn: error: secret "nope": not found' \
  "$BDN" volume sync start --source "file://$WORK/src" --dest bdn:mirror/x --auth-secret-name nope
run_fails 2 'bdn: error: secret "hf-token": empty value on stdin' \
  "$BDN" secret set hf-token </dev/null

step "embedded: a list cut at its 1000 jobs says so"
# 1000 older jobs of another volume, copies of the first job's row (written as the CLI would).
python3 - "$BDN_HOME/registry.db" "$id" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in db.execute("PRAGMA table_info(sync_jobs)")]
row = dict(zip(cols, db.execute("SELECT * FROM sync_jobs WHERE id=?", (sys.argv[2],)).fetchone()))
for i in range(1000):
    row.update(id="sync_%016x" % (0xa0000000 + i), ns="old", volume="copies", created_ms=1000 + i)
    db.execute("INSERT INTO sync_jobs(%s) VALUES(%s)" % (",".join(cols), ",".join("?" * len(cols))),
               [row[c] for c in cols])
db.commit()
PY
"$BDN" volume sync list >"$WORK/list.out" 2>"$WORK/list.err"
assert_eq 1001 "$(wc -l <"$WORK/list.out")" "lines of sync list (a header and 1000 jobs)"
assert_eq "bdn: the newest 1000 jobs are listed; older ones are left out (list one namespace or volume with --dest bdn:NS[/VOL])" \
  "$(cat "$WORK/list.err")" "stderr of a cut list"
# truncated_of ARGS...: "N true|false", the jobs and truncated of `bdn --json volume sync list
# ARGS` (read from a pipe: 1000 jobs are too long for an argument).
truncated_of() {
  "$BDN" --json volume sync list "$@" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(len(j["jobs"]), json.dumps(j["truncated"]))'
}
assert_eq "1000 true" "$(truncated_of)" "jobs and truncated of a cut list"
assert_eq "1000 false" "$(truncated_of --dest bdn:old)" "jobs and truncated of 1000 jobs"
"$BDN" volume sync list --dest bdn:mirror >/dev/null 2>"$WORK/list.err"
assert_eq "" "$(cat "$WORK/list.err")" "stderr of a whole list"

step "start the Hub fixture and the origin"
cat > "$WORK/hub.json" <<'EOF'
{"page_size": 2,
 "tokens": {"hf_good": ["org/private", "org/gated"], "hf_other": []},
 "repos": {
  "org/gated": {"gated": true, "refs": {"main": "3333333333333333333333333333333333333333"},
    "commits": {"3333333333333333333333333333333333333333": {"files": {
      "weights.bin": {"text": "gated weights\n"}}}}},
  "org/revs": {"refs": {"main": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                        "feature/long-ctx": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                        "v1.0": "cccccccccccccccccccccccccccccccccccccccc",
                        "refs/pr/1": "dddddddddddddddddddddddddddddddddddddddd"},
    "commits": {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": {"files": {"which.txt": {"text": "main\n"}}},
                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb": {"files": {"which.txt": {"text": "branch feature/long-ctx\n"}}},
                "cccccccccccccccccccccccccccccccccccccccc": {"files": {"which.txt": {"text": "tag v1.0\n"}}},
                "dddddddddddddddddddddddddddddddddddddddd": {"files": {"which.txt": {"text": "pull request 1\n"}}},
                "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee": {"files": {"which.txt": {"text": "an older commit\n"}}}}},
  "org/mutable": {"refs": {"main": "4444444444444444444444444444444444444444"},
    "commits": {"4444444444444444444444444444444444444444": {"files": {
      "config.json": {"text": "{\"hidden\": 64}\n"},
      "weights.bin": {"gen": {"size": 2000000, "seed": 7}, "lfs": true}}}}},
  "org/model": {"refs": {"main": "1111111111111111111111111111111111111111"},
    "commits": {"1111111111111111111111111111111111111111": {"files": {
      "config.json": {"text": "{\"hidden\": 64}\n"},
      "model-00001.safetensors": {"gen": {"size": 5000000, "seed": 1}, "lfs": true},
      "model-00002.safetensors": {"gen": {"size": 3000000, "seed": 2}, "lfs": true},
      "tokenizer/vocab.json": {"text": "{\"a\": 0}\n"},
      "README.md": {"text": "# model\n"}}}}},
  "org/private": {"private": true, "refs": {"main": "2222222222222222222222222222222222222222"},
    "commits": {"2222222222222222222222222222222222222222": {"files": {
      "weights.bin": {"text": "private weights\n"}}}}}
 }}
EOF
python3 "$FIXTURES/hf_hub.py" "$WORK/hub.json" "$WORK/hub.port" 2>"$WORK/hub.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/hub.port" ] && break; sleep 0.05; done
[ -s "$WORK/hub.port" ] || fail "the Hub fixture did not start: $(cat "$WORK/hub.log")"
HUB="http://127.0.0.1:$(cat "$WORK/hub.port")"
export HF_ENDPOINT="$HUB"
start_origin --sync-allow-private-addresses  # the Hub fixture listens on 127.0.0.1
export BDN_HOME="$WORK/home-unused"
hub_stat() { curl -sf "$HUB/_stats" | python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(json.dumps(v) if isinstance(v,dict) else v)' "$1"; }

step "remote: hf:// with --wait prints the pinned ref; the files pull back byte for byte"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
ref=$("$BDN" volume sync start --source hf://org/model --dest bdn:hf/model:prod --wait 2>"$WORK/wait.err")
[[ "$ref" == bdn:hf/model@b3:* ]] || fail "sync --wait printed [$ref] ($(cat "$WORK/wait.err"))"
assert_eq "5" "$(hub_stat object_gets)" "object GETs of the first sync (one per file)"
mkdir -p "$WORK/pull2"
"$BDN" volume pull bdn:hf/model:prod "$WORK/pull2" >/dev/null
for f in model-00001.safetensors model-00002.safetensors config.json tokenizer/vocab.json README.md; do
  want=$(curl -sfL "$HUB/org/model/resolve/main/$f" | b3sum --no-names)
  assert_eq "$want" "$(b3sum --no-names "$WORK/pull2/$f")" "b3sum of $f"
done
jobs=$("$BDN" --json volume sync list --dest bdn:hf/model)
id=$(jf "$jobs" jobs 0 id)
desc=$("$BDN" --json volume sync describe "$id")
assert_eq "READY" "$(jf "$desc" state)" "state"
assert_eq "1111111111111111111111111111111111111111" "$(jf "$desc" source_revision)" "revision"
assert_eq "$ref" "$(jf "$desc" version_ref)" "version_ref"

step "remote: a re-sync of the same commit fetches no object byte (metadata check)"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
out=$("$BDN" --json volume sync start --source hf://org/model@main --dest bdn:hf/model --wait)
assert_eq "READY" "$(jf "$out" state)" "state"
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "0" "$(hub_stat object_gets)" "object GETs of the re-sync"
assert_eq "0" "$(hub_stat object_bytes)" "object bytes of the re-sync"

step "remote: failures end FAILED with stable codes"
out=$("$BDN" --json volume sync start --source hf://org/missing --dest bdn:hf/missing --wait) && fail "missing repo: exit 0"
assert_eq "FAILED" "$(jf "$out" state)" "state"
assert_eq "source_not_found" "$(jf "$out" error code)" "code of a missing repo"
rc=0; "$BDN" volume sync start --source hf://org/model@nope --dest bdn:hf/model --wait >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "3" "$rc" "exit code of a missing revision"
assert_contains "$(cat "$WORK/err")" "FAILED (revision_not_found): hf://org/model@nope"
out=$("$BDN" --json volume sync start --source hf://org/private --dest bdn:hf/private --wait) && fail "private repo: exit 0"
assert_eq "source_not_found" "$(jf "$out" error code)" "code of a private repo without a token"

step "remote: secrets on the server; a private repo with its token"
printf 'hf_good' | "$BDN" secret set hf-good
printf 'hf_bad' | "$BDN" secret set hf-bad
assert_eq "hf-bad hf-good" "$("$BDN" --json secret ls | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["secrets"]))')" "secret names"
ref=$("$BDN" volume sync start --source hf://org/private --dest bdn:hf/private --auth-secret-name hf-good --wait 2>/dev/null)
assert_eq "private weights" "$("$BDN" volume cat "$ref/weights.bin")" "bytes of a private file"
out=$("$BDN" --json volume sync start --source hf://org/private --dest bdn:hf/private2 --auth-secret-name hf-bad --wait) && fail "bad token: exit 0"
assert_eq "bad_credentials" "$(jf "$out" error code)" "code of a bad token"
"$BDN" secret rm hf-bad 2>/dev/null
for v in hf_good hf_bad; do
  assert_absent "$v" "a secret's value is in the server's log or database" "$WORK/serve.log" "$WORK/srv/registry.db"
done
metrics=$(curl -sf "$URL/metrics") || fail "GET /metrics failed"
[[ $metrics != *hf_good* ]] || fail "a secret's value is in /metrics"

step "remote: a gated repo: refused without a token and with a token without access; synced with one"
printf 'hf_other' | "$BDN" secret set hf-other
out=$("$BDN" --json volume sync start --source hf://org/gated --dest bdn:hf/gated --wait) && fail "gated repo without a token: exit 0"
assert_eq "access_denied" "$(jf "$out" error code)" "code of a gated repo without a token"
assert_eq "hf://org/gated: a gated repository: give a token of an account that was granted access (--auth-secret-name)" \
  "$(jf "$out" error message)" "message of a gated repo without a token"
rc=0; "$BDN" volume sync start --source hf://org/gated --dest bdn:hf/gated --auth-secret-name hf-other --wait \
  >/dev/null 2>"$WORK/err" || rc=$?
assert_eq "6" "$rc" "exit code of a gated repo with a token without access"
[[ "$(tail -1 "$WORK/err")" =~ ^"bdn: error: sync job sync_"[0-9a-f]{16}": FAILED (access_denied): hf://org/gated: a gated repository: the token in secret \"hf-other\" has no access to it (request access on the Hub)"$ ]] ||
  fail "stderr of a gated repo with a token without access: $(cat "$WORK/err")"
ref=$("$BDN" volume sync start --source hf://org/gated --dest bdn:hf/gated --auth-secret-name hf-good --wait 2>/dev/null)
assert_eq "gated weights" "$("$BDN" volume cat "$ref/weights.bin")" "bytes of a gated file with a granted token"

step "remote: revisions: a branch with '/', a tag, refs/pr/1 and a commit each pin their commit"
check_rev() {  # check_rev REVISION COMMIT TEXT: hf://org/revs@REVISION is COMMIT, holding TEXT
  local out
  out=$("$BDN" --json volume sync start --source "hf://org/revs@$1" --dest bdn:hf/revs --wait)
  assert_eq "READY" "$(jf "$out" state)" "state of @$1"
  assert_eq "$2" "$(jf "$out" source_revision)" "commit of @$1"
  assert_eq "$3" "$("$BDN" volume cat "$(jf "$out" version_ref)/which.txt")" "which.txt of @$1"
}
check_rev main aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "main"
check_rev feature/long-ctx bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb "branch feature/long-ctx"
check_rev v1.0 cccccccccccccccccccccccccccccccccccccccc "tag v1.0"
check_rev refs/pr/1 dddddddddddddddddddddddddddddddddddddddd "pull request 1"
check_rev eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee "an older commit"

step "remote: a 429's Retry-After is waited, and one past the retry deadline fails at once"
# tree_calls: the number of tree listing calls since the reset, and the ms between the first two.
tree_calls() { curl -sf "$HUB/_stats" | python3 -c 'import json,sys; t=json.load(sys.stdin)["api_times"]["tree"]
print(len(t), int((t[1] - t[0]) * 1000) if len(t) > 1 else -1)'; }
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "tree", "path": "org/revs", "count": 1, "status": 429, "retry_after": 2}]' >/dev/null
out=$("$BDN" --json volume sync start --source hf://org/revs@v1.0 --dest bdn:hf/limited --wait)
assert_eq "READY" "$(jf "$out" state)" "state after a 429"
read -r calls gap_ms <<<"$(tree_calls)"
assert_eq "2" "$calls" "tree calls (the 429 and its retry)"
[ "$gap_ms" -ge 2000 ] || fail "the retry came ${gap_ms} ms after a 429 with Retry-After: 2"
# A loaded CI machine can wake the job late; 2.5 times the Retry-After is too late.
[ "$gap_ms" -lt 5000 ] || fail "the retry came ${gap_ms} ms after a 429 with Retry-After: 2 (too late)"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "tree", "path": "org/revs", "count": 1, "status": 429, "retry_after": 3600}]' >/dev/null
rc=0; out=$("$BDN" --json volume sync start --source hf://org/revs@main --dest bdn:hf/limited2 --retry-deadline 5s --wait) || rc=$?
assert_eq "7" "$rc" "exit code of a 429 whose Retry-After passes the deadline"
assert_eq "source_unavailable" "$(jf "$out" error code)" "code"
assert_contains "$(jf "$out" error message)" "hf://org/revs@main: GET /api/models/org/revs/tree/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?recursive=true&expand=false: HTTP 429"
read -r calls gap_ms <<<"$(tree_calls)"
assert_eq "1" "$calls" "tree calls (no retry that would end past the deadline)"
took=$(( $(jf "$out" finished_unix_ms) - $(jf "$out" started_unix_ms) ))
[ "$took" -lt 4000 ] || fail "the job took ${took} ms to fail on a Retry-After past its 5s deadline"
curl -sf -X POST "$HUB/_faults" -d '[]' >/dev/null

step "remote: while the origin's run retries the source, --wait's line and describe say so and why"
# From attacking helper 116: only a run in the CLI's own process said it; through an origin the
# line stayed "0 B/0 B  files 0/0" for the whole retry deadline.
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "tree", "path": "org/revs", "count": 1000, "status": 503}]' >/dev/null
rc=0
"$BDN" volume sync start --source hf://org/revs@main --dest bdn:hf/retried --retry-deadline 8s --wait \
  >"$WORK/retried.out" 2>"$WORK/retried.err" &
retried_pid=$!
id=""
for _ in $(seq 1 100); do
  id=$(jf "$("$BDN" --json volume sync list --dest bdn:hf/retried)" jobs 0 id 2>/dev/null) || id=""
  [ -n "$id" ] && [ "$(jf "$("$BDN" --json volume sync describe "$id")" progress retrying_ms)" -gt 0 ] && break
  sleep 0.1
done
[ -n "$id" ] || fail "no job for bdn:hf/retried"
out=$("$BDN" --json volume sync describe "$id")
[ "$(jf "$out" progress retrying_ms)" -gt 0 ] || fail "describe --json of a job retrying its source: $out"
tree503="hf://org/revs@main: GET /api/models/org/revs/tree/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?recursive=true&expand=false: HTTP 503"
assert_contains "$(jf "$out" progress retry_error)" "$tree503"
"$BDN" volume sync describe "$id" >"$WORK/retried.describe"
grep -q "^retrying: for [0-9]*s (gives up at 8s): $tree503" "$WORK/retried.describe" ||
  fail "describe of a job retrying its source: $(cat "$WORK/retried.describe")"
wait "$retried_pid" || rc=$?
assert_eq "7" "$rc" "exit code of a job whose source answered 503 past its deadline"
grep -q "^sync $id 0 B/0 B  0 B/s  files 0/0  retrying for [0-9]*s (gives up at 8s): $tree503" "$WORK/retried.err" ||
  fail "no retrying note in --wait's progress: $(cat "$WORK/retried.err")"
out=$("$BDN" --json volume sync describe "$id")
assert_eq "FAILED|0|" "$(jf "$out" state)|$(jf "$out" progress retrying_ms)|$(jf "$out" progress retry_error)" \
  "state and retry note of the job once it failed"
"$BDN" volume sync describe "$id" >"$WORK/retried.describe"
assert_absent "retrying:" "describe of an ended job" "$WORK/retried.describe"
curl -sf -X POST "$HUB/_faults" -d '[]' >/dev/null

step "remote: a file rewritten during the sync fails the job (source_changed), sealing nothing"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "resolve", "path": "config.json", "count": 1, "hold": true}]' >/dev/null
id=$("$BDN" volume sync start --source hf://org/mutable --dest bdn:hf/changed 2>/dev/null)
for _ in $(seq 1 200); do [ "$(hub_stat held)" -ge 1 ] && break; sleep 0.05; done
assert_eq "1" "$(hub_stat held)" "requests held at the Hub"
curl -sf -X POST "$HUB/_mutate" -d '{"repo": "org/mutable", "commit": "4444444444444444444444444444444444444444", "path": "config.json", "text": "{\"hidden\": 128}\n"}' >/dev/null
curl -sf -X POST "$HUB/_release" >/dev/null
out=$(wait_sync_job "$id" FAILED)
assert_eq "FAILED" "$(jf "$out" state)" "state of a job whose file changed"
assert_eq "source_changed" "$(jf "$out" error code)" "code"
git_oid() { python3 -c 'import hashlib,sys; b=sys.argv[1].encode(); print(hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest())' "$1"; }
assert_eq "hf://org/mutable: file \"config.json\": changed during the sync (etag $(git_oid $'{"hidden": 64}\n') listed, $(git_oid $'{"hidden": 128}\n') now)" \
  "$(jf "$out" error message)" "message"
run_fails 3 'bdn: error: volume bdn:hf/changed: not found' "$BDN" volume versions bdn:hf/changed

step "remote: Ctrl-C during --wait stops waiting, says how to follow or cancel, and the job goes on"
curl -sf -X POST "$HUB/_stats/reset" >/dev/null
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "cdn", "path": "model-00001", "count": 1, "hold": true}]' >/dev/null
# SIGINT at its default action: a background command of a non-interactive shell starts with it
# ignored, and bdn keeps an ignored SIGINT ignored.
env --default-signal=INT "$BDN" volume sync start --source hf://org/model --dest bdn:hf/waited --wait >"$WORK/waited.out" 2>"$WORK/waited.err" &
wait_pid=$!
# Held at the Hub, and the client is waiting (it says so just before it polls).
for _ in $(seq 1 200); do
  [ "$(hub_stat held)" -ge 1 ] && [[ "$(cat "$WORK/waited.err")" == *"started on the server"* ]] && break
  sleep 0.05
done
assert_eq "1" "$(hub_stat held)" "requests held at the Hub"
kill -INT "$wait_pid"
rc=0; wait "$wait_pid" || rc=$?
assert_eq "130" "$rc" "exit code of an interrupted --wait"
id=$(jf "$("$BDN" --json volume sync list --dest bdn:hf/waited)" jobs 0 id)
err=$(tail -1 "$WORK/waited.err")
follow=": follow it with \`bdn volume sync describe $id\`, stop it with \`bdn volume sync cancel $id\`"
[[ "$err" == "bdn: error: sync job $id: stopped waiting; the job goes on (SYNCING)$follow" ||
   "$err" == "bdn: error: sync job $id: stopped waiting; the job goes on (PENDING)$follow" ]] ||
  fail "stderr of an interrupted --wait: $(cat "$WORK/waited.err")"
assert_eq "" "$(cat "$WORK/waited.out")" "stdout of an interrupted --wait"
out=$("$BDN" --json volume sync describe "$id")
assert_eq "SYNCING" "$(jf "$out" state)" "state after the client stopped waiting"
assert_eq "false" "$(jf "$out" cancel_requested)" "cancel_requested after the client stopped waiting"
curl -sf -X POST "$HUB/_release" >/dev/null
out=$(wait_sync_job "$id" READY)
assert_eq "READY" "$(jf "$out" state)" "state of the job the client stopped waiting for"
mkdir -p "$WORK/pull3"
"$BDN" volume pull "$(jf "$out" version_ref)" "$WORK/pull3" >/dev/null
assert_eq "$(b3sum --no-names "$WORK/pull2/model-00001.safetensors")" "$(b3sum --no-names "$WORK/pull3/model-00001.safetensors")" "b3sum of the held file"

step "embedded: https:// single file, its certificate checked (SSL_CERT_FILE names the test's CA)"
emb() { env -u BDN_REMOTE BDN_HOME="$WORK/home" "$BDN" "$@"; }
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>"$WORK/openssl.log"
printf '{"files": {"weights.bin": {"gen": {"size": 3000000, "seed": 5}}}}' >"$WORK/files.json"
FIXTURE_TLS="$WORK/tls.crt:$WORK/tls.key" python3 "$FIXTURES/hf_hub.py" "$WORK/files.json" "$WORK/tls.port" 2>"$WORK/tls.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/tls.port" ] && break; sleep 0.05; done
[ -s "$WORK/tls.port" ] || fail "the TLS file server did not start: $(cat "$WORK/tls.log")"
WEB="https://127.0.0.1:$(cat "$WORK/tls.port")"
out=$(SSL_CERT_FILE="$WORK/tls.crt" emb --json volume sync start --source "$WEB/files/weights.bin" --dest bdn:web/weights)
assert_eq "READY" "$(jf "$out" state)" "state of an https:// sync"
assert_eq "1" "$(jf "$out" progress objects_total)" "objects of an https:// sync"
assert_eq "3000000" "$(jf "$out" progress bytes_fetched)" "bytes fetched"
want=$(curl -sf --cacert "$WORK/tls.crt" "$WEB/files/weights.bin" | b3sum --no-names)
assert_eq "$want" "$(emb volume cat "$(jf "$out" version_ref)/weights.bin" | b3sum --no-names)" "b3sum of the https:// file"
out=$(SSL_CERT_FILE="$WORK/tls.crt" emb --json volume sync start --source "$WEB/files/weights.bin" --dest bdn:web/weights)
assert_eq "true" "$(jf "$out" unchanged)" "a re-sync of the same file (same ETag)"
assert_eq "0" "$(jf "$out" progress bytes_fetched)" "bytes fetched by the re-sync"
rc=0; out=$(emb --json volume sync start --source "$WEB/files/weights.bin" --dest bdn:web/untrusted --retry-deadline 2s) || rc=$?
assert_eq "7" "$rc" "exit code of an https:// source whose certificate is not trusted"
assert_eq "source_unavailable" "$(jf "$out" error code)" "code"
assert_contains "$(jf "$out" error message)" "SSL certificate problem"
# From attacking helper 121: a presigned signature in an https:// source's query was repeated
# in `sync list`, `sync describe`, the version's record and the job's errors.
out=$(SSL_CERT_FILE="$WORK/tls.crt" emb --json volume sync start --source "$WEB/files/weights.bin?X-Amz-Signature=SEKRETSIG" --dest bdn:web/signed)
assert_eq "READY" "$(jf "$out" state)" "state of a sync of a URL with a query"
job=$(jf "$out" id)
assert_eq "source: $WEB/files/weights.bin?***" "$(emb volume sync describe "$job" | grep '^source:')" "describe's source"
listed=$(emb volume sync list)
assert_contains "$listed" "$WEB/files/weights.bin?***"
versions=$(emb --json volume versions bdn:web/signed)
assert_contains "$versions" "$WEB/files/weights.bin?***"
rc=0; err=$(emb volume sync start --source "$WEB/files/weights.bin?X-Amz-Signature=SEKRETSIG" --dest bdn:web/signed2 \
  --retry-deadline 1s 2>&1 >/dev/null) || rc=$?
assert_eq "7" "$rc" "exit code of an untrusted certificate with a signed URL"
# From attacking helper 122: the --json forms and the request line of an error still showed it.
described=$(emb --json volume sync describe "$job")
assert_eq "$WEB/files/weights.bin?***" "$(jf "$described" source)" "describe --json's source"
rc=0; out=$(SSL_CERT_FILE="$WORK/tls.crt" emb --json volume sync start --source "$WEB/nope.bin?X-Amz-Signature=SEKRETSIG" --dest bdn:web/signed404) || rc=$?
assert_eq "source_not_found" "$(jf "$out" error code)" "code of a signed URL that is not there"
assert_contains "$(jf "$out" error message)" "$WEB/nope.bin?***: HEAD /nope.bin?***: HTTP 404"
listed_json=$(emb --json volume sync list)
case "$listed$versions$err$described$out$listed_json" in *SEKRETSIG*) fail "a signature was shown: $listed $versions $err $described $out $listed_json" ;; esac
# From attacking helper 124: the query of a source of another scheme was shown whole (its
# started line, its error, `sync list`).
rc=0; emb volume sync start --source "file://$WORK/nothere?sig=SEKRETQ" --dest bdn:web/fq >"$WORK/fq.out" 2>"$WORK/fq.err" || rc=$?
assert_eq "3" "$rc" "exit code of a file:// source that is not there"
assert_contains "$(cat "$WORK/fq.err")" "file://$WORK/nothere?***: No such file or directory"
emb --json volume sync list >"$WORK/fq.list"
assert_contains "$(cat "$WORK/fq.list")" "\"file://$WORK/nothere?***\""
assert_absent "SEKRETQ" "a file:// source's query in its messages and listing" "$WORK/fq.out" "$WORK/fq.err" "$WORK/fq.list"
# From attacking helper 116: while the source was retried, the progress line said nothing of it
# ("0 B/0 B  files 0/0" for the whole retry deadline). The plain line says why at once.
rc=0; emb volume sync start --source "$WEB/files/weights.bin" --dest bdn:web/untrusted2 --retry-deadline 3s \
  >/dev/null 2>"$WORK/retrying.err" || rc=$?
assert_eq "7" "$rc" "exit code of an https:// source whose certificate is not trusted"
grep -q "^sync sync_[0-9a-f]* 0 B/0 B  0 B/s  files 0/0  retrying for [0-9]*s (gives up at 3s): .*SSL certificate problem" \
  "$WORK/retrying.err" || fail "no retrying note in the progress: $(cat "$WORK/retrying.err")"

# Its listing (path, size, no etag) stayed the same when its bytes changed: "unchanged".
step "embedded: an https:// file with neither ETag nor Last-Modified is fetched at every sync"
printf 'first\n' >"$WORK/noetag.data"
python3 - "$WORK/noetag.data" "$WORK/noetag.port" 2>"$WORK/noetag.log" <<'PY' &
import os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_HEAD(self): self.do_GET()
    def do_GET(self):
        body = open(sys.argv[1], "rb").read()
        self.send_response(200)  # no ETag, no Last-Modified
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET": self.wfile.write(body)
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2] + ".tmp", "w").write(str(srv.server_port)); os.rename(sys.argv[2] + ".tmp", sys.argv[2])
srv.serve_forever()
PY
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/noetag.port" ] && break; sleep 0.05; done
[ -s "$WORK/noetag.port" ] || fail "the no-ETag server did not start: $(cat "$WORK/noetag.log")"
NOETAG="http://127.0.0.1:$(cat "$WORK/noetag.port")/file.bin"
first=$(jf "$(emb --json volume sync start --source "$NOETAG" --dest bdn:web/noetag)" version_ref)
printf 'other\n' >"$WORK/noetag.data"  # the same size
out=$(emb --json volume sync start --source "$NOETAG" --dest bdn:web/noetag)
assert_eq "false" "$(jf "$out" unchanged)" "unchanged after the content changed"
assert_eq "6" "$(jf "$out" progress bytes_fetched)" "bytes fetched after the content changed"
[ "$(jf "$out" version_ref)" != "$first" ] || fail "the changed file kept version $first"
assert_eq "other" "$(emb volume cat "$(jf "$out" version_ref)/file.bin")" "the file after it changed"
again=$(emb --json volume sync start --source "$NOETAG" --dest bdn:web/noetag)
assert_eq "false" "$(jf "$again" unchanged)" "unchanged without a validator"
assert_eq "6" "$(jf "$again" progress bytes_fetched)" "bytes fetched without a validator"
assert_eq "$(jf "$out" version_ref)" "$(jf "$again" version_ref)" "the same bytes seal the same version"

step "embedded: a sync interrupted (Ctrl-C, a closed terminal's SIGHUP, kill -9) resumes when run again, fetching only what it had not sealed"
for how in INT HUP KILL; do
  dest="bdn:hf/embedded-${how,,}"
  curl -sf -X POST "$HUB/_stats/reset" >/dev/null
  curl -sf -X POST "$HUB/_faults" -d '[{"kind": "cdn", "path": "model-00002", "count": 1, "hold": true}]' >/dev/null
  # Not through emb: $! must be bdn itself (env execs it), not a subshell that ignores SIGINT.
  env --default-signal=INT -u BDN_REMOTE BDN_HOME="$WORK/home" "$BDN" volume sync start --source hf://org/model --dest "$dest" \
    >"$WORK/emb.out" 2>"$WORK/emb.err" &
  pid=$!
  done_now=""
  for _ in $(seq 1 400); do
    done_now=$(jf "$(emb --json volume sync list --dest "$dest" 2>/dev/null)" jobs 0 progress objects_done 2>/dev/null) || true
    [ "$done_now" = 4 ] && break
    sleep 0.05
  done
  assert_eq "4" "$done_now" "objects sealed before the $how"
  assert_eq "4" "$(hub_stat object_gets)" "object GETs before the $how (the fifth is held)"
  id=$(jf "$(emb --json volume sync list --dest "$dest")" jobs 0 id)
  # A reader of its output that went away (SIGPIPE, as under `| head`) does not end it.
  kill -PIPE "$pid"
  sleep 0.3
  kill -0 "$pid" 2>/dev/null || fail "SIGPIPE ended the embedded sync: $(cat "$WORK/emb.err")"
  kill "-$how" "$pid"
  rc=0; wait "$pid" || rc=$?
  if [ "$how" != KILL ]; then
    assert_eq "130" "$rc" "exit code of an embedded sync interrupted by SIG$how"
    [[ "$(tail -1 "$WORK/emb.err")" =~ ^"bdn: error: sync job $id: interrupted (4/5 objects, "[^\)]*"); run the same command again to resume it, or \`bdn volume sync cancel $id\`"$ ]] ||
      fail "stderr of an interrupted embedded sync: $(cat "$WORK/emb.err")"
  else
    assert_eq "137" "$rc" "exit status of a killed embedded sync"
  fi
  assert_eq "SYNCING" "$(jf "$(emb --json volume sync describe "$id")" state)" "state after the $how"
  curl -sf -X POST "$HUB/_release" >/dev/null
  curl -sf -X POST "$HUB/_stats/reset" >/dev/null
  emb volume sync start --source hf://org/model --dest "$dest" >"$WORK/emb.out" 2>"$WORK/emb.err"
  assert_contains "$(cat "$WORK/emb.err")" "sync $id: resuming (hf://org/model -> $dest)"
  out=$(emb --json volume sync describe "$id")
  assert_eq "READY" "$(jf "$out" state)" "state of the resumed job"
  # A run that ended with its process counts; one an interrupt stopped cleanly does not.
  if [ "$how" = KILL ]; then runs=2; else runs=1; fi
  assert_eq "$runs" "$(jf "$out" runs)" "runs of the resumed job"
  assert_eq "1" "$(hub_stat object_gets)" "object GETs of the resumed run (only the file not sealed before)"
  assert_eq '{"model-00002.safetensors": 1}' "$(hub_stat gets)" "files fetched by the resumed run"
  assert_eq "$(b3sum --no-names "$WORK/pull2/model-00002.safetensors")" \
    "$(emb volume cat "$(cat "$WORK/emb.out")/model-00002.safetensors" | b3sum --no-names)" "b3sum of the file fetched after the $how"
  assert_eq "$(b3sum --no-names "$WORK/pull2/model-00001.safetensors")" \
    "$(emb volume cat "$(cat "$WORK/emb.out")/model-00001.safetensors" | b3sum --no-names)" "b3sum of a file sealed before the $how"
done

step "remote: cancel a job that waits on the source"
curl -sf -X POST "$HUB/_faults" -d '[{"kind": "cdn", "path": "", "count": 1, "hold": true}]' >/dev/null
id=$("$BDN" volume sync start --source hf://org/model --dest bdn:hf/cancel 2>/dev/null)
[[ "$id" == sync_* ]] || fail "sync start printed [$id]"
out=$("$BDN" --json volume sync cancel "$id" --wait)
assert_eq "CANCELED" "$(jf "$out" state)" "state after cancel"
assert_eq "canceled" "$(jf "$out" error code)" "code after cancel"
curl -sf -X POST "$HUB/_release" >/dev/null
run_fails 8 "bdn: error: sync job $id: already CANCELED" "$BDN" volume sync cancel "$id"
run_fails 3 "bdn: error: sync job sync_0000000000000000: not found" "$BDN" volume sync describe sync_0000000000000000
echo PASS
