#!/usr/bin/env bash
# Bodies stream through a real `bdn serve` (issue 13 item 4): a 60 MiB upload is written to disk
# as it arrives (peak RSS barely moves), and 200 clients that stop reading 64 MiB batch responses
# hold at most --batch-readahead plus one chunk each, until the write deadline drops them and
# frees it all; 1,000 stalled uploads hold about what they were sent. The numbers are printed.
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

step "origin with a 32 MiB batch read-ahead and a 2 s write deadline"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv" --batch-readahead 32M \
  --write-timeout 2s
ORIGIN=$STARTED_URL; ORIGIN_PID=$STARTED_PID
ADMIN=$(cat "$WORK/srv/admin.token")

mkdir -p "$WORK/blobs"
python3 - "$WORK/blobs" <<'EOF'
import os, sys
d = sys.argv[1]
open(f"{d}/big", "wb").write(os.urandom(60 << 20))
for i in range(64):
    open(f"{d}/c{i:02d}", "wb").write(os.urandom(256 << 10))
EOF
(cd "$WORK/blobs" && b3sum -- *) > "$WORK/ids"

step "uploads stream to disk; stalled batch readers are bounded, then dropped"
python3 - "$ORIGIN" "$ORIGIN_PID" "$ADMIN" "$WORK/blobs" "$WORK/ids" <<'EOF'
import json, socket, sys, time, urllib.parse, urllib.request

origin, pid, admin, blobs, ids_file = sys.argv[1:6]
u = urllib.parse.urlparse(origin)

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def status_kb(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    fail("no " + field)

def metric(name):
    text = urllib.request.urlopen(origin + "/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

ids = {}
for line in open(ids_file):
    digest, name = line.split()
    ids[name] = digest

def put(name):
    data = open(f"{blobs}/{name}", "rb").read()
    req = urllib.request.Request(f"{origin}/v1/chunks/{ids[name]}", data=data, method="PUT",
                                 headers={"Authorization": "Bearer " + admin,
                                          "Content-Type": "application/octet-stream"})
    return urllib.request.urlopen(req).status

urllib.request.urlopen(origin + "/healthz").read()
idle = status_kb("VmHWM")
print(f"idle peak RSS: {idle / 1024:.1f} MB")
if put("big") != 201:
    fail("the 60 MiB upload was not stored")
grew = (status_kb("VmHWM") - idle) / 1024
print(f"after a 60 MiB upload: peak RSS {grew:.1f} MB above idle")
if grew > 16:
    fail(f"a 60 MiB upload raised the peak RSS by {grew:.1f} MB: it was held in memory")

chunks = [f"c{i:02d}" for i in range(64)]
for c in chunks:
    put(c)
base = status_kb("VmHWM")
body = json.dumps({"ids": [ids[c] for c in chunks] * 16}).encode()
head = (f"POST /v1/chunks/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
conns = []
for i in range(200):
    s = socket.create_connection((u.hostname, u.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(head + body)
    s.recv(4096)  # the response has begun; then read nothing more
    conns.append(s)
print(f"200 clients stopped reading 64 MiB batch responses")
max_readahead = 0
start = time.monotonic()
while metric("bdn_http_connections") > 1 and time.monotonic() - start < 20:
    max_readahead = max(max_readahead, metric("bdn_batch_readahead_bytes"))
    time.sleep(0.05)
dropped = time.monotonic() - start
peak = (status_kb("VmHWM") - base) / 1024
# The read-ahead limit, two chunks per stalled connection (the one on the wire and the next being
# read), and 32 MB for the allocator's arenas.
bound = 32 + 200 * 2 * 256 / 1024 + 32
print(f"peak RSS while they stalled: {peak:.1f} MB above the level before "
      f"(bound: 32 MiB read-ahead + 200 x 2 x 256 KiB + 32 MB = {bound:.0f} MB; "
      f"unbounded it would be 200 x 64 x 256 KiB = 3200 MB)")
print(f"read-ahead seen: at most {max_readahead / 1048576:.1f} MiB (limit 32 MiB)")
print(f"all stalled clients dropped {dropped:.1f} s after they stopped (write deadline 2 s)")
if peak > bound:
    fail(f"peak RSS grew {peak:.1f} MB, over the bound of {bound:.0f} MB")
# (Past the limit each response still reads its next chunk: at most one per worker thread more.)
if max_readahead > 32 * 1048576 + 64 * 256 * 1024:
    fail(f"read-ahead reached {max_readahead} bytes")
# (A read of /metrics counts its own connection, and the previous read's may not be closed on the
# server's side yet.)
if metric("bdn_http_connections") > 2:
    fail("stalled clients were not dropped within 20 s")
if metric("bdn_batch_readahead_bytes") != 0:
    fail("the dropped responses' read-ahead was not freed")
for s in conns:
    s.close()

EOF

step "the origin still serves"
assert_eq ok "$(curl -sf "$ORIGIN/healthz")" "/healthz"

# 1,000 uploads that send their header and 1 byte of their body, then nothing: each holds a body
# piece about as large as what it was sent, not a 256 KiB one (1,000 x 256 KiB = 250 MiB), whether
# its body is small, declared large, or chunked. Each kind on a fresh origin, so that no freed
# memory an earlier phase left resident hides what the pieces take.
step "1,000 stalled uploads hold about what they were sent"
for kind in small declared-large chunked; do
  start_bdn "stall-$kind" serve --listen 127.0.0.1:0 --data "$WORK/stall-$kind"
  python3 - "$STARTED_URL" "$STARTED_PID" "$(cat "$WORK/stall-$kind/admin.token")" "$kind" <<'EOF'
import resource, socket, sys, time, urllib.parse, urllib.request
url, pid, admin, kind = sys.argv[1:5]
u = urllib.parse.urlparse(url)
framing, first = {"small": ("Content-Length: 16", b"x"),
                  "declared-large": ("Content-Length: 262145", b"x"),
                  "chunked": ("Transfer-Encoding: chunked", b"1\r\nx\r\n")}[kind]

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    fail("no VmRSS")

def metric(name):
    for line in urllib.request.urlopen(url + "/metrics").read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
urllib.request.urlopen(url + "/healthz").read()
base = rss_kb()
conns = []
for i in range(1000):
    s = socket.create_connection((u.hostname, u.port))
    s.sendall((f"PUT /v1/chunks/{'ab' * 32} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n"
               f"Content-Type: application/octet-stream\r\n{framing}\r\n\r\n").encode() + first)
    conns.append(s)
start = time.monotonic()
while metric("bdn_http_connections") < 1000:
    if time.monotonic() - start > 10:
        fail(f"the origin holds {metric('bdn_http_connections')} connections, want 1000")
    time.sleep(0.05)
time.sleep(1)  # their bodies are being read
grew = (rss_kb() - base) / 1024
# A first piece of 16 KiB (zero-filled: resident) per connection is 16 MB; the rest is each
# connection's buffers and state.
print(f"1,000 stalled uploads, {kind}: RSS {grew:.1f} MB above the idle server's (bound 40 MB)")
if grew > 40:
    fail(f"1,000 stalled uploads, {kind}, took {grew:.1f} MB")
for s in conns:
    s.close()
EOF
  kill "$STARTED_PID"
done
echo PASS
