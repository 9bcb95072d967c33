#!/usr/bin/env bash
# Issue 13 items 2 and 6 on the real binaries, over raw sockets: the connection limits of
# `bdn serve` and `bdn cache serve` (--max-connections, --max-connections-per-client: 503 with
# Retry-After: 1 and the exact message, then close; another address is still served; a freed
# slot is served again), the minimum body rate (--min-body-rate: a stalled upload is closed and
# stores nothing, a slow one above the rate is stored), and 1,000 slow-header connections to an
# origin and to a cache node while their /healthz and chunk reads still answer within 1 s.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

LIMITS=(--max-connections 6 --max-connections-per-client 3 --header-timeout 1s --min-body-rate 10K)

step "origin and cache node with small connection limits"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv" "${LIMITS[@]}"
ORIGIN=$STARTED_URL
ADMIN=$(cat "$WORK/srv/admin.token")
export BDN_TOKEN=$ADMIN  # the cache nodes read from the origin with it
start_bdn cache cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/cache" \
  "${LIMITS[@]}"
CACHE=$STARTED_URL

PYTHONPATH="$(dirname "$0")" python3 - "$ORIGIN" "$CACHE" "$ADMIN" <<'EOF'
import json, os, subprocess, sys, time, urllib.error, urllib.request
from raw_http import closed_within, connect, read_response
origin, cache, admin = sys.argv[1:4]

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def read(s):
    status, headers, body, _ = read_response(s, then_eof=False)
    return status, headers, body

def healthz(url, source="127.0.0.1", close=False):
    s = connect(url, source)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" +
              (b"Connection: close\r\n" if close else b"") + b"\r\n")
    return s, read(s)

def expect_refused(url, source, message, what):
    s, (status, headers, body) = healthz(url, source)
    if status != 503:
        fail(f"{what}: status {status}, want 503 ({body[:200]!r})")
    if headers.get("retry-after") != ["1"]:
        fail(f"{what}: Retry-After {headers.get('retry-after')}")
    if headers.get("connection") != ["close"]:
        fail(f"{what}: Connection headers {headers.get('connection')}, want one close")
    err = json.loads(body)["error"]
    if (err["code"], err["message"]) != ("unavailable", message):
        fail(f"{what}: error {err}, want unavailable: {message}")
    if not closed_within(s, 3):
        fail(f"{what}: the connection stayed open after the 503")
    s.close()

def connection_limits(url, name):
    held = []
    for i in range(3):
        s, (status, _, body) = healthz(url)
        if (status, body) != (200, b"ok\n"):
            fail(f"{name}: held connection {i}: {status} {body!r}")
        held.append(s)
    expect_refused(url, "127.0.0.1",
                   "server: 3 connections open from this address "
                   "(--max-connections-per-client); retry later", f"{name}: 4th from 127.0.0.1")
    # Another address still gets its own 3 (the refused one is gone first: poll until it is).
    deadline = time.monotonic() + 5
    for i in range(3):
        while True:
            s, (status, _, body) = healthz(url, "127.0.0.2")
            if status == 200 or time.monotonic() > deadline:
                break
            s.close()
            time.sleep(0.05)
        if (status, body) != (200, b"ok\n"):
            fail(f"{name}: 127.0.0.2 connection {i}: {status} {body!r}")
        held.append(s)
    expect_refused(url, "127.0.0.3",
                   "server: 6 connections open (--max-connections); retry later",
                   f"{name}: 7th connection")
    # The held connections are still served (keep-alive), then freed.
    for s in held:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        if read(s)[0] != 200:
            fail(f"{name}: a held connection was not served again")
        s.close()
    deadline = time.monotonic() + 5
    while True:
        s, (status, _, _) = healthz(url, "127.0.0.3", close=True)
        s.close()
        if status == 200:
            break
        if time.monotonic() > deadline:
            fail(f"{name}: freed connections were not served again within 5 s (last {status})")
        time.sleep(0.05)
    print(f"{name}: 3 per address, 6 in all, then 503 + Retry-After: 1 and close; freed slots served")

def b3(data):
    return subprocess.run(["b3sum", "--no-names"], input=data, capture_output=True,
                          check=True).stdout.decode().strip()

def min_body_rate():
    def stalled(url, head, what):
        """Sends HEAD (a header and the start of a body) and then nothing: at 10K/s after a 1 s
        grace the server must close it within ~1.1 s (3 s allowed under load)."""
        s = connect(url)
        start = time.monotonic()
        s.sendall(head)
        if not closed_within(s, 10):
            fail(f"{what} was not closed within 10 s")
        took = time.monotonic() - start
        s.close()
        if took > 3:
            fail(f"{what} was closed only after {took:.2f} s (grace 1 s, 10K/s)")
        print(f"{what} was closed after {took:.2f} s")

    # A stalled upload to the origin: 1,000 of 1,000,000 bytes; nothing is stored.
    data = os.urandom(1000000)
    digest = b3(data)
    stalled(origin, f"PUT /v1/chunks/{digest} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{admin}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data[:1000],
            "origin: a stalled 1 MB upload")
    req = urllib.request.Request(f"{origin}/v1/chunks/{digest}",
                                 headers={"Authorization": "Bearer " + admin})
    try:
        urllib.request.urlopen(req)
        fail("a stalled upload was stored")
    except urllib.error.HTTPError as e:
        if e.code != 404:
            fail(f"GET of a stalled upload's chunk: {e.code}, want 404")
    # The cache node: a stalled batch request body.
    stalled(cache, b"POST /v1/chunks/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: 100000\r\n\r\n{\"ids\": [", "cache node: a stalled batch body")

    # Slower than the network but above the rate: 200 KB in 8 pieces over ~0.8 s (~250 KB/s).
    data = os.urandom(200000)
    digest = b3(data)
    s = connect(origin)
    s.sendall(f"PUT /v1/chunks/{digest} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n"
              f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode())
    for i in range(8):
        time.sleep(0.1)
        s.sendall(data[i * 25000:(i + 1) * 25000])
    status, _, body = read(s)
    s.close()
    if status not in (200, 201):
        fail(f"a slow upload above the rate: {status} {body[:200]!r}")
    req = urllib.request.Request(f"{origin}/v1/chunks/{digest}",
                                 headers={"Authorization": "Bearer " + admin})
    if urllib.request.urlopen(req).read() != data:
        fail("a slow upload above the rate was not stored whole")
    print(f"origin: a 200 KB upload sent over 0.8 s was stored ({status})")

connection_limits(origin, "origin")
connection_limits(cache, "cache node")
min_body_rate()
EOF

step "1,000 slow-header connections to an origin and to a cache node: /healthz and chunk reads answer within 1 s"
random_file "$WORK/chunk" 65536 7
ID=$(b3sum --no-names "$WORK/chunk")
curl -sf -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/octet-stream' \
  --data-binary @"$WORK/chunk" "$ORIGIN/v1/chunks/$ID" >/dev/null
start_bdn origin2 serve --listen 127.0.0.1:0 --data "$WORK/srv2" \
  --max-connections-per-client 2000 --header-timeout 5s
ORIGIN2=$STARTED_URL
ADMIN2=$(cat "$WORK/srv2/admin.token")
curl -sf -X PUT -H "Authorization: Bearer $ADMIN2" -H 'Content-Type: application/octet-stream' \
  --data-binary @"$WORK/chunk" "$ORIGIN2/v1/chunks/$ID" >/dev/null
start_bdn cache2 cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/cache2" \
  --max-connections-per-client 2000 --header-timeout 5s
CACHE2=$STARTED_URL
slow_headers() {  # LABEL URL TOKEN
python3 - "$1" "$2" "$ID" "$WORK/chunk" "$3" <<'EOF'
import resource, socket, sys, time, urllib.parse, urllib.request
label, url, chunk_id, chunk_file, token = sys.argv[1:6]
want = open(chunk_file, "rb").read()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
u = urllib.parse.urlparse(url)

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def metric(name):
    for line in urllib.request.urlopen(url + "/metrics", timeout=5).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    fail(f"no {name} in /metrics")

slow = []
for i in range(1000):
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")  # and never the blank line
    slow.append(s)
deadline = time.monotonic() + 10
while metric("bdn_http_connections") < 1000:
    if time.monotonic() > deadline:
        fail(f"the {label} holds {metric('bdn_http_connections')} connections, want 1000")
    time.sleep(0.05)
worst = 0.0
for i in range(5):
    start = time.monotonic()
    h = urllib.request.urlopen(url + "/healthz", timeout=5).read()
    # A chunk read is answered only to a caller allowed to read it (the admin key reads every
    # namespace's blobs; a cache node asks its origin).
    c = urllib.request.urlopen(urllib.request.Request(
        f"{url}/v1/chunks/{chunk_id}", headers={"Authorization": "Bearer " + token}), timeout=5).read()
    took = time.monotonic() - start
    worst = max(worst, took)
    if h != b"ok\n":
        fail(f"/healthz answered {h!r}")
    if c != want:
        fail(f"chunk {chunk_id}: {len(c)} bytes that differ from what was uploaded")
    if took >= 1.0:
        fail(f"/healthz and a chunk read took {took:.2f} s with 1,000 slow connections open")
print(f"{label} with 1,000 slow-header connections: /healthz + a 64 KiB chunk in at most {worst:.3f} s")
# The header deadline (5 s) closes them all.
deadline = time.monotonic() + 15
closed = 0
for s in slow:
    s.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        if s.recv(1) == b"":
            closed += 1
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
if closed != 1000:
    fail(f"{label}: {closed} of 1,000 slow-header connections were closed by the header deadline")
print(f"{label}: the header deadline closed all 1,000")
EOF
}
slow_headers origin "$ORIGIN2" "$ADMIN2"
slow_headers "cache node" "$CACHE2" "$ADMIN"
echo PASS
