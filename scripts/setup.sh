#!/usr/bin/env bash
# Installs the Debian packages bdn needs to build, test and benchmark (only what is missing).
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      libfuse3-dev fuse3 librust-blake3-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libcli11-dev
      libzstd-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
      libcpp-httplib-dev libboost1.81-dev libcurl4-openssl-dev libyaml-cpp-dev libssl-dev curl
      libpq-dev  # bdn serve --db: the PostgreSQL client
      postgresql  # the server the --db tests start themselves (initdb, as the postgres user)
      b3sum casync python3 attr
      openssl  # the TLS tests make their certificates with it
      libcap2-bin  # secure_mode_test.sh: setcap
      strace  # mounts_lock_file_test.sh: holds a lock mid-way (fault injection)
      iproute2  # pg_replicas_test.sh: ss, to see a client connected before it stops its origin
      wrk  # bench/http_load.sh
      awscli  # the sync tests populate s3rver with it; bench/sync_s3.sh compares with it
      haproxy  # scripts/cluster.sh and ha_origins_test.sh: the load balancer before the origins
      clang-16 libclang-rt-16-dev llvm-16 ccache  # scripts/fuzz.sh: libFuzzer, symbolizer
      clang-format-16)  # scripts/format.sh; scripts/test.sh checks the tree with it
missing=()
for p in "${pkgs[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The other local user that tests/integration/foreign_symlinks_test.sh attacks as (as root only:
# its symlinks in shared directories must never be followed by root's commands); without it
# that test is skipped.
if [ "$(id -u)" = 0 ] && ! id mallory >/dev/null 2>&1; then
  echo "setup: adding the user mallory (no home, no login shell) for the tests" >&2
  useradd --no-create-home --shell /usr/sbin/nologin mallory
fi

# The servers the sync tests start on 127.0.0.1 (s3rver for s3://, r2://, cw://, gs:// HMAC;
# azurite for azure://), pinned by tests/npm/package-lock.json. `npm ci` installs exactly the
# lockfile, again whenever it changes.
npm_dir="$(cd "$(dirname "$0")/../tests/npm" && pwd)"
if ! cmp -s "$npm_dir/package-lock.json" "$npm_dir/node_modules/.bdn-installed-lock" 2>/dev/null; then
  echo "setup: npm ci in tests/npm" >&2
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$npm_dir/package-lock.json" "$npm_dir/node_modules/.bdn-installed-lock"
fi
