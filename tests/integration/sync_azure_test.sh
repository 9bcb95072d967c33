#!/usr/bin/env bash
# azure:// against Azurite (npm, pinned in tests/npm), which checks Shared Key and SAS signatures:
# blobs uploaded by tests/fixtures/azure_blob.py (its own Shared Key signer) sync with the account
# key and with an account SAS, and pull back byte for byte (keys with spaces, +, %, #, ? and
# unicode; an empty blob; nested prefixes and a prefix that is also a blob; 5,100 blobs over two
# List Blobs pages following NextMarker); a re-sync resolves by metadata with no Get Blob at
# Azurite (its request log counted); a wrong key is bad_credentials, a SAS without list
# permission access_denied, a missing container source_not_found.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/object_stores.sh"

step "start Azurite and upload blobs"
start_azurite
SRC="$WORK/src"
mkdir -p "$SRC/llama/nested/deeper" "$SRC/llama/odd" "$SRC/many"
random_file "$SRC/llama/model.safetensors" 2500000 3
random_file "$SRC/llama/nested/deeper/shard.bin" 600000 4
printf '{"dim": 4096}\n' >"$SRC/llama/config.json"
: >"$SRC/llama/empty.bin"
ODD=("a b+c%d#e?f.bin" "日本語 ü.txt" "100%.txt" "plus+plus")
for i in "${!ODD[@]}"; do printf 'odd %s\n' "$i" >"$SRC/llama/odd/${ODD[$i]}"; done
for i in $(seq 1 5100); do printf '%s\n' "$i" >"$SRC/many/b-$(printf %05d "$i")"; done
python3 "$FIXTURES/azure_blob.py" put "$AZ" "$AZ_ACCOUNT" "$AZ_KEY" models "$SRC"
python3 "$FIXTURES/azure_blob.py" put-text "$AZ" "$AZ_ACCOUNT" "$AZ_KEY" models llama "a blob named like the prefix"

printf '%s' "$AZ_KEY" | "$BDN" secret set az-key
printf '{"account_key": "%s"}' "$(printf 'wrong key of 32 bytes, base64!!!' | base64 -w0)" | "$BDN" secret set az-wrong
printf '%s' "$(python3 "$FIXTURES/azure_blob.py" sas "$AZ_ACCOUNT" "$AZ_KEY" rl)" | "$BDN" secret set az-sas
printf '%s' "$(python3 "$FIXTURES/azure_blob.py" sas "$AZ_ACCOUNT" "$AZ_KEY" r)" | "$BDN" secret set az-sas-nolist
SYNC=sync_az
sync_az() { "$BDN" --json volume sync start --endpoint "$AZ" "$@" 2>>"$WORK/bdn-stderr.log"; }
gets() { grep -c 'BlobHandler.*download\|operation=Blob_Download\|Blob_Download' "$WORK/azurite.debug" || true; }

step "Shared Key: every blob pulls back byte for byte"
out=$(sync_az --source azure://devstoreaccount1/models/llama --dest bdn:az/llama:prod --auth-secret-name az-key)
assert_eq "READY" "$(jf "$out" state)" "state ($(jf "$out" error))"
ref=$(jf "$out" version_ref)
mkdir -p "$WORK/pull"
"$BDN" volume pull "$ref" "$WORK/pull" >/dev/null
same_files "$SRC/llama" "$WORK/pull"

step "a re-sync resolves by metadata: no Get Blob at Azurite"
before=$(gets)
[ "$before" -gt 0 ] || fail "Azurite's log shows no Get Blob for the first sync"
out=$(sync_az --source azure://devstoreaccount1/models/llama --dest bdn:az/llama --auth-secret-name az-key)
assert_eq "true" "$(jf "$out" unchanged)" "unchanged"
assert_eq "$ref" "$(jf "$out" version_ref)" "version of the re-sync"
assert_eq "$before" "$(gets)" "Get Blob requests at Azurite after the re-sync"

step "SAS: the same tree; 5,100 blobs over two pages (NextMarker); a prefix naming one blob"
out=$(sync_az --source azure://devstoreaccount1/models/llama/ --dest bdn:az/sas --auth-secret-name az-sas)
assert_eq "$ref" "bdn:az/llama@$(jf "$out" version)" "the version synced with a SAS"
out=$(sync_az --source azure://devstoreaccount1/models/many --dest bdn:az/many --auth-secret-name az-sas)
assert_eq "5100" "$(jf "$out" progress objects_total)" "objects_total"
assert_eq "5100" "$("$BDN" volume cat "$(jf "$out" version_ref)/b-05100")" "last blob"
out=$(sync_az --source "azure://devstoreaccount1/models/llama/odd/a b+c%d#e?f.bin" --dest bdn:az/one --auth-secret-name az-key)
assert_eq "odd 0" "$("$BDN" volume cat "$(jf "$out" version_ref)/a b+c%d#e?f.bin")" "the one blob"

step "failures with stable codes"
expect_failed bad_credentials 6 'the credentials in secret "az-wrong" were refused (AuthorizationFailure: Server failed to authenticate' \
  --source azure://devstoreaccount1/models/llama --dest bdn:az/f1 --auth-secret-name az-wrong
expect_failed access_denied 6 'access denied (AuthorizationPermissionMismatch' \
  --source azure://devstoreaccount1/models/llama --dest bdn:az/f2 --auth-secret-name az-sas-nolist
expect_failed source_not_found 3 'azure://devstoreaccount1/nocontainer/x: container "nocontainer" not found (ContainerNotFound' \
  --source azure://devstoreaccount1/nocontainer/x --dest bdn:az/f3 --auth-secret-name az-key
expect_failed source_not_found 3 'no objects under the prefix "none/"' \
  --source azure://devstoreaccount1/models/none --dest bdn:az/f4 --auth-secret-name az-key
sas_sig=$(python3 "$FIXTURES/azure_blob.py" sas "$AZ_ACCOUNT" "$AZ_KEY" rl | sed 's/.*sig=//')
for f in "$WORK"/bdn-stderr.log "$WORK"/*.json; do [ -f "$f" ] || continue
  assert_absent "$AZ_KEY" "the account key is in $f" "$f"
done
assert_absent "$sas_sig" "the SAS signature is stored in plaintext" "$WORK/home"
echo PASS
