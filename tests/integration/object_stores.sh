# Helpers of the object-store sync tests (sourced after lib.sh): the pinned test servers of
# tests/npm (scripts/setup.sh installs them with npm ci), Debian's awscli to populate them, and
# the SigV4-checking proxy (tests/fixtures/s3_proxy.py).
FIXTURES="$(cd "$(dirname "$0")/../fixtures" && pwd)"
NPM_DIR="$(cd "$(dirname "$0")/../npm" && pwd)"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY AWS_PROFILE AWS_CONFIG_FILE
# Debian's awscli (the package scripts/setup.sh installs), never another aws on PATH.
AWS=/usr/bin/aws
[ -x "$AWS" ] || fail "$AWS is missing: run scripts/setup.sh (Debian package awscli)"
export AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true AWS_PAGER=""

# free_port: a TCP port nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT NAME LOG: waits until something accepts on 127.0.0.1:PORT.
wait_port() {
  for _ in $(seq 1 300); do
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$2 did not start: $(cat "$3")"
}

# start_s3rver: s3rver 3.7.1 on a free port with its data in $WORK/s3rver; sets S3 (its URL).
# Node 17+ needs --openssl-legacy-provider for s3rver's paginated listings (its continuation
# tokens use a cipher OpenSSL 3 moved to the legacy provider). The proxy checks signatures, so
# s3rver is told to accept any.
start_s3rver() {
  local js="$NPM_DIR/node_modules/s3rver/bin/s3rver.js" port
  [ -f "$js" ] || fail "s3rver is not installed: run scripts/setup.sh (npm ci in tests/npm)"
  port=$(free_port)
  mkdir -p "$WORK/s3rver"
  node --openssl-legacy-provider "$js" -d "$WORK/s3rver" -a 127.0.0.1 -p "$port" -s \
    --allow-mismatched-signatures --no-vhost-buckets >"$WORK/s3rver.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port" s3rver "$WORK/s3rver.log"
  S3="http://127.0.0.1:$port"
}

# aws_direct ARGS...: Debian's awscli against s3rver itself, with s3rver's own key pair.
aws_direct() {
  AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 \
    "$AWS" --endpoint-url "$S3" "$@"
}

# start_s3_proxy CONFIG_JSON: the SigV4-checking proxy in front of s3rver; sets PROXY.
start_s3_proxy() {
  printf '%s' "$1" >"$WORK/proxy.json"
  python3 "$FIXTURES/s3_proxy.py" "$WORK/proxy.json" "$WORK/proxy.port" 2>"$WORK/proxy.log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$WORK/proxy.port" ] && break; sleep 0.05; done
  [ -s "$WORK/proxy.port" ] || fail "the proxy did not start: $(cat "$WORK/proxy.log")"
  PROXY="http://127.0.0.1:$(cat "$WORK/proxy.port")"
}

# proxy_stat FIELD: a field of the proxy's /_stats.
proxy_stat() { curl -sf "$PROXY/_stats" | python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(json.dumps(v) if isinstance(v,(list,dict)) else v)' "$1"; }

# jf JSON FIELD...: a nested field of a job's JSON.
jf() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v,list) else v[k]
print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$@"; }

# Azurite's well-known development account (https://learn.microsoft.com/azure/storage/common/storage-use-azurite).
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

# start_azurite: Azurite's blob service on a free port with its data in $WORK/azurite and every
# request in $WORK/azurite.debug; sets AZ (the account's URL, path-style).
start_azurite() {
  local js="$NPM_DIR/node_modules/azurite/dist/src/blob/main.js" port
  [ -f "$js" ] || fail "azurite is not installed: run scripts/setup.sh (npm ci in tests/npm)"
  port=$(free_port)
  mkdir -p "$WORK/azurite"
  node "$js" --blobHost 127.0.0.1 --blobPort "$port" --location "$WORK/azurite" --silent \
    --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry --debug "$WORK/azurite.debug" \
    >"$WORK/azurite.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port" azurite "$WORK/azurite.log"
  AZ="http://127.0.0.1:$port/$AZ_ACCOUNT"
}

# expect_failed CODE EXIT MESSAGE_PART ARGS...: `$SYNC ARGS` (the test's function that runs
# `bdn --json volume sync start` against its server) exits EXIT, the job FAILED with CODE and a
# message containing MESSAGE_PART.
expect_failed() {
  local code=$1 want_rc=$2 part=$3 rc=0 out; shift 3
  out=$("$SYNC" "$@") || rc=$?
  assert_eq "$want_rc" "$rc" "exit code of $*"
  assert_eq "FAILED" "$(jf "$out" state)" "state of $*"
  assert_eq "$code" "$(jf "$out" error code)" "code of $* ($(jf "$out" error message))"
  assert_contains "$(jf "$out" error message)" "$part"
}

# same_files WANT_DIR GOT_DIR: the same file paths, and each file the same bytes (b3sum).
same_files() {
  (cd "$1" && find . -type f | sort) >"$WORK/want.list"
  (cd "$2" && find . -type f | sort) >"$WORK/got.list"
  cmp -s "$WORK/want.list" "$WORK/got.list" || fail "files differ: $(diff "$WORK/want.list" "$WORK/got.list")"
  while IFS= read -r f; do
    assert_eq "$(b3sum --no-names "$1/$f")" "$(b3sum --no-names "$2/$f")" "b3sum of $f"
  done <"$WORK/want.list"
}
