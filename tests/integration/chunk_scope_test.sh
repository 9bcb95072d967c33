#!/usr/bin/env bash
# Chunk reads scoped to namespaces (issue 12 item 4), every server real on 127.0.0.1 with auth
# on: a `bdn serve` origin, a `bdn cache serve` node holding its own key for every namespace, and
# a FUSE mount through the node. A pull key of namespace a reads a's versions (mount, cat, pull)
# and nothing of namespace b, from the origin or through the node, by chunk or by batch; a push
# key of a is told nothing of b's chunks (they read as missing and are uploaded again).
source "$(dirname "$0")/lib.sh"
needs_fuse
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY BDN_CLUSTER_CACHE BDN_TOKEN

step "an origin with auth, keys for namespaces a and b, one version in each"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv"; ORIGIN=$STARTED_URL
export BDN_REMOTE="$ORIGIN"
ADMIN=$(cat "$WORK/srv/admin.token")
PUSH_A=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace a --scope push)
PULL_A=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace a --scope pull)
PUSH_B=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace b --scope push)
NODE=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace '*' --scope pull)
KEY_A="key bdn_$(cut -d_ -f2 <<<"$PULL_A")"
mkdir -p "$WORK/a" "$WORK/b"
random_file "$WORK/a/weights.bin" 3000000 1
printf 'config of a\n' > "$WORK/a/config.json"
random_file "$WORK/b/secret.bin" 3000000 2
printf 'config of b\n' > "$WORK/b/config.json"
REF_A=$(BDN_TOKEN="$PUSH_A" "$BDN" volume push "$WORK/a" bdn:a/m)
REF_B=$(BDN_TOKEN="$PUSH_B" "$BDN" volume push "$WORK/b" bdn:b/m)
(cd "$WORK/a" && b3sum weights.bin config.json) > "$WORK/sums_a"
# The chunk indexes of b's secret.bin and a's weights.bin (blobs of their versions).
chunk_of() {  # chunk_of TOKEN REF/PATH: the first chunk id of a file
  BDN_TOKEN="$1" "$BDN" --json volume stat "$2" | python3 -c '
import json, sys
print(json.load(sys.stdin)["chunk_index"].removeprefix("b3:"))'
}
B_INDEX=$(chunk_of "$PUSH_B" "$REF_B/secret.bin")
A_INDEX=$(chunk_of "$PULL_A" "$REF_A/weights.bin")
[[ "$B_INDEX" =~ ^[0-9a-f]{64}$ ]] || fail "chunk index of b's file: $B_INDEX"
# The first data chunk of b's file: its chunk index (docs/format.md) is BDNI, version, count, then
# (32-byte id, u32 length) records.
B_CHUNK=$(curl -sf -H "Authorization: Bearer $PUSH_B" -H "Bdn-Version: $REF_B" \
  "$ORIGIN/v1/chunks/$B_INDEX" | python3 -c 'import sys; b = sys.stdin.buffer.read(); assert b[:4] == b"BDNI"; print(b[16:48].hex())')
[[ "$B_CHUNK" =~ ^[0-9a-f]{64}$ ]] || fail "first chunk of b's file: $B_CHUNK"

code_and_message() {  # code_and_message CURL_ARGS...: "HTTP_STATUS message"
  local out status
  out=$(curl -s -w '\n%{http_code}' "$@")
  status=${out##*$'\n'}
  out=${out%$'\n'*}
  printf '%s %s' "$status" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["message"])' "$out" 2>/dev/null || echo "$out")"
}

# refused_to_a BASE_URL WHERE: what a's pull key is told of b's chunk by the server at BASE_URL:
# the same as for a chunk stored nowhere, however it asks.
refused_to_a() {
  local base=$1 where=$2 a=(-H "Authorization: Bearer $PULL_A")
  assert_eq "404 chunk b3:$B_CHUNK: not in $REF_A" \
    "$(code_and_message "${a[@]}" -H "Bdn-Version: $REF_A" "$base/v1/chunks/$B_CHUNK")" "b's chunk under a's version ($where)"
  assert_eq "403 $KEY_A: no \"pull\" scope for namespace \"b\"" \
    "$(code_and_message "${a[@]}" -H "Bdn-Version: $REF_B" "$base/v1/chunks/$B_CHUNK")" "b's chunk under b's version ($where)"
  assert_eq "403 $KEY_A: a key for namespace \"a\" reads chunks of a version: send Bdn-Version: bdn:<ns>/<vol>@b3:<hex>" \
    "$(code_and_message "${a[@]}" "$base/v1/chunks/$B_CHUNK")" "b's chunk without a version ($where)"
  # HEAD and a conditional GET say no more than a plain one.
  assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' -I "${a[@]}" -H "Bdn-Version: $REF_A" "$base/v1/chunks/$B_CHUNK")" "HEAD of b's chunk ($where)"
  assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: \"$B_CHUNK\"" "${a[@]}" -H "Bdn-Version: $REF_A" "$base/v1/chunks/$B_CHUNK")" "If-None-Match on b's chunk ($where)"
}

step "the origin: a's pull key reads a's blobs by naming a's version, nothing of b"
curl -sf -H "Authorization: Bearer $PULL_A" -H "Bdn-Version: $REF_A" "$ORIGIN/v1/chunks/$A_INDEX" >/dev/null \
  || fail "a's chunk index through the origin"
refused_to_a "$ORIGIN" origin
# A batch under a's version answers b's chunk as missing (record status 1, no bytes).
statuses=$(curl -sf -H "Authorization: Bearer $PULL_A" -H "Bdn-Version: $REF_A" -H 'Content-Type: application/json' \
  --data "{\"ids\": [\"$A_INDEX\", \"$B_CHUNK\"]}" "$ORIGIN/v1/chunks/batch" | python3 -c '
import sys
b = sys.stdin.buffer.read(); assert b[:4] == b"BDNB"; p = 4; out = []
while p < len(b):
    n = int.from_bytes(b[p+33:p+37], "little"); out.append(str(b[p+32])); p += 37 + n
print(" ".join(out))')
assert_eq "0 1" "$statuses" "batch statuses (a's index, b's chunk)"

step "the CLI with a's pull key: a's version reads; b's is refused"
BDN_TOKEN="$PULL_A" "$BDN" volume cat "$REF_A/weights.bin" | cmp - "$WORK/a/weights.bin" || fail "cat of a's file"
BDN_TOKEN="$PULL_A" "$BDN" volume pull "$REF_A" "$WORK/pulled" >/dev/null
(cd "$WORK/pulled" && b3sum --check --quiet "$WORK/sums_a") || fail "pull of a's version"
run_fails 6 "bdn: error: $KEY_A: no \"pull\" scope for namespace \"b\"" \
  env BDN_TOKEN="$PULL_A" "$BDN" volume cat "$REF_B/secret.bin"

step "a cache node whose own key the origin refuses does not start, and says what to give it"
advice="; a cache node fetches with a key with pull on every namespace: bdn key create --namespace '*' --scope pull"
# refused_node WANT TOKEN...: a node started with BDN_TOKEN=TOKEN (none without one) exits 6 with
# WANT as its last line on stderr (before it: the node's start-up log lines).
refused_node() {
  local want=$1 rc=0; shift
  env -u BDN_TOKEN ${1:+BDN_TOKEN="$1"} "$BDN" cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 \
    --cache-dir "$WORK/node-refused" 2>"$WORK/refused.err" || rc=$?
  assert_eq 6 "$rc" "exit code of a node refused by the origin"
  assert_eq "$want" "$(tail -1 "$WORK/refused.err")" "the refused node's error"
}
refused_node "bdn: error: BDN_TOKEN is not set: the upstream refuses its chunk reads (request: no credentials (send Authorization: Bearer bdn_<id>_<secret>))$advice"
refused_node "bdn: error: BDN_TOKEN: this cache node's key is for one namespace$advice" "$PULL_A"

# A token with a line break inside (a header added to every request) is refused before anything
# is sent; the token's bytes are not shown.
rc=0; env BDN_TOKEN="$NODE"$'\r\nX-Evil: 1' "$BDN" cache serve --upstream "$ORIGIN" \
  --listen 127.0.0.1:0 --cache-dir "$WORK/node-refused" 2>"$WORK/refused.err" || rc=$?
assert_eq 2 "$rc" "exit code of a node whose BDN_TOKEN holds a line break"
assert_eq "bdn: error: BDN_TOKEN: byte 54 of 64 is a line break, which a bearer token cannot hold (RFC 6750: letters, digits, - . _ ~ + / and = at the end)" \
  "$(cat "$WORK/refused.err")" "the error of a node whose BDN_TOKEN holds a line break"

step "a cache node with its own key: a FUSE mount of a's version through it"
# As a token read from a file or a Kubernetes secret often is: with a newline at the end, which
# is not part of the key.
export BDN_TOKEN="$NODE"$'\n'  # the node's own key towards the origin
start_bdn cache cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/node" --cache-size 256M
NODE_URL=$STARTED_URL
unset BDN_TOKEN
BDN_TOKEN="$PULL_A" "$BDN" volume mount "$REF_A" "$WORK/mnt" --cluster-cache "$NODE_URL" --cache-dir "$WORK/nc" >/dev/null
MOUNTS+=("$WORK/mnt")
(cd "$WORK/mnt" && b3sum --check --quiet "$WORK/sums_a") || fail "b3sum through the mount"
misses=$(curl -sf "$NODE_URL/metrics" | awk '$1 == "bdn_cache_misses_total" {print $2}')
[ "${misses:-0}" -gt 10 ] || fail "the mount read through the cache node ($misses misses there)"
"$BDN" volume umount "$WORK/mnt" >/dev/null

step "the cache node: b's chunk is not served to a's key, whatever the node holds"
# The node holds b's chunk: b's own key reads it through the node first.
curl -sf -H "Authorization: Bearer $PUSH_B" -H "Bdn-Version: $REF_B" "$NODE_URL/v1/chunks/$B_CHUNK" >/dev/null \
  || fail "b's chunk through the node with b's key"
refused_to_a "$NODE_URL" "cache node"
assert_eq "401 request: no credentials (send Authorization: Bearer bdn_<id>_<secret>)" \
  "$(code_and_message -H "Bdn-Version: $REF_B" "$NODE_URL/v1/chunks/$B_CHUNK")" \
  "b's chunk without credentials, through the node"
# The node's access log names the key the origin accepted, and "-" for a caller without one.
wait_log "$WORK/cache.log" "GET /v1/chunks/$B_CHUNK 200 "
wait_log "$WORK/cache.log" "GET /v1/chunks/$B_CHUNK 401 "
assert_contains "$(grep -F "GET /v1/chunks/$B_CHUNK 200 " "$WORK/cache.log")" " key=bdn_$(cut -d_ -f2 <<<"$PUSH_B")"
assert_contains "$(grep -F "GET /v1/chunks/$B_CHUNK 401 " "$WORK/cache.log")" " key=-"
assert_absent "key=bdn_anonymous" "a cache node's log naming no caller" "$WORK/cache.log"
# A mount of b's version with a's key fails at the registry, before any chunk is asked for.
run_fails 6 "bdn: error: $KEY_A: no \"pull\" scope for namespace \"b\"" \
  env BDN_TOKEN="$PULL_A" "$BDN" volume mount "$REF_B" "$WORK/mnt_b" --cluster-cache "$NODE_URL" --cache-dir "$WORK/nc_b"

step "a's push key learns nothing of b's chunks: they read as missing and are sent again"
missing=$(curl -sf -H "Authorization: Bearer $PUSH_A" -H 'Content-Type: application/json' \
  --data "{\"ids\": [\"$B_CHUNK\", \"$A_INDEX\"]}" "$ORIGIN/v1/chunks/missing" | json_field missing)
assert_eq "[\"$B_CHUNK\"]" "$missing" "missing-query of a's push key"
out=$(BDN_TOKEN="$PUSH_A" "$BDN" --json volume push "$WORK/b" bdn:a/copy)
assert_eq 0 "$(json_field chunks_reused <<<"$out")" "chunks of b's tree reused by a's push"
uploaded=$(json_field bytes_uploaded <<<"$out")
[ "$uploaded" -gt 3000000 ] || fail "a's push of b's tree uploaded $uploaded bytes"
# The same tree pushed by b's key reuses everything.
out=$(BDN_TOKEN="$PUSH_B" "$BDN" --json volume push "$WORK/b" bdn:b/again)
assert_eq 0 "$(json_field bytes_uploaded <<<"$out")" "bytes b's key uploaded again"

step "a cache node whose own key is revoked while it runs says so in its log; reads go on"
mkdir -p "$WORK/a2"
random_file "$WORK/a2/new.bin" 2000000 3
REF_A2=$(BDN_TOKEN="$PUSH_A" "$BDN" volume push "$WORK/a2" bdn:a/fresh)
BDN_TOKEN="$ADMIN" "$BDN" key revoke "bdn_$(cut -d_ -f2 <<<"$NODE")" >/dev/null
BDN_TOKEN="$PULL_A" "$BDN" volume mount "$REF_A2" "$WORK/mnt2" --cluster-cache "$NODE_URL" \
  --cache-dir "$WORK/nc2" >/dev/null
MOUNTS+=("$WORK/mnt2")
cmp "$WORK/mnt2/new.bin" "$WORK/a2/new.bin" || fail "new.bin through a node whose key was revoked"
refused=$(grep -c "warning node cache $WORK/node: the upstream refused chunk b3:[0-9a-f]*: key bdn_$(cut -d_ -f2 <<<"$NODE"): revoked (chunks not cached here fail until its key may read them)" "$WORK/cache.log" || true)
assert_eq 1 "$refused" "warnings of the node about its refused fetches (one a minute): $(grep -F 'refused' "$WORK/cache.log")"
step "a pull key revoked while a mount uses it: what the mount's node cache holds reads on, nothing else"
# README, "Keys": the origin refuses the key at once, a new mount with it fails, and a running
# mount reads (and verifies) only what its own --cache-dir already holds.
mkdir -p "$WORK/a3"
random_file "$WORK/a3/read.bin" 2000000 4
random_file "$WORK/a3/unread.bin" 2000000 5
REF_A3=$(BDN_TOKEN="$PUSH_A" "$BDN" volume push "$WORK/a3" bdn:a/third)
PULL_R=$(BDN_TOKEN="$ADMIN" "$BDN" key create --namespace a --scope pull)
BDN_TOKEN="$PULL_R" "$BDN" volume mount "$REF_A3" "$WORK/mnt3" --cache-dir "$WORK/nc3" >/dev/null
MOUNTS+=("$WORK/mnt3")
cmp "$WORK/mnt3/read.bin" "$WORK/a3/read.bin" || fail "read.bin before the revoke"
BDN_TOKEN="$ADMIN" "$BDN" key revoke "bdn_$(cut -d_ -f2 <<<"$PULL_R")" >/dev/null
# Out of the kernel's page cache, so that the next read asks the mount's daemon again.
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' \
  "$WORK/mnt3/read.bin"
cmp "$WORK/mnt3/read.bin" "$WORK/a3/read.bin" || fail "read.bin from the node cache after the revoke"
if cat "$WORK/mnt3/unread.bin" >/dev/null 2>"$WORK/unread.err"; then
  fail "unread.bin was read with a revoked key"
fi
assert_contains "$(cat "$WORK/unread.err")" "Input/output error"
run_fails 6 "bdn: error: origin $ORIGIN: key bdn_$(cut -d_ -f2 <<<"$PULL_R"): revoked" \
  env BDN_TOKEN="$PULL_R" "$BDN" volume mount "$REF_A3" "$WORK/mnt4" --cache-dir "$WORK/nc3b"
"$BDN" volume umount "$WORK/mnt3" >/dev/null
echo "PASS"
