#!/usr/bin/env bash
# The HTTP layer of a real `bdn serve` and `bdn cache serve` under hostile requests (issue 7 item
# 3, issue 14 items 1 and 2): bodies over an endpoint's limit get 413 before they are read,
# nested or huge JSON is bounded while it is parsed, an endless request line gets 414, and the
# server's peak RSS (VmHWM) stays within 64 MB of idle across all of it (the numbers are printed).
source "$(dirname "$0")/lib.sh"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

step "origin with a pull key"
start_bdn origin serve --listen 127.0.0.1:0 --data "$WORK/srv"; ORIGIN=$STARTED_URL; ORIGIN_PID=$STARTED_PID
export BDN_REMOTE="$ORIGIN" BDN_TOKEN=$(cat "$WORK/srv/admin.token")
PULL=$("$BDN" key create --namespace '*' --scope pull)
start_bdn cache cache serve --upstream "$ORIGIN" --listen 127.0.0.1:0 --cache-dir "$WORK/cache"
CACHE=$STARTED_URL; CACHE_PID=$STARTED_PID

step "hostile bodies and request lines; peak RSS stays within 64 MB of idle"
PYTHONPATH="$(dirname "$0")" python3 - "$ORIGIN" "$ORIGIN_PID" "$PULL" "$BDN_TOKEN" "$CACHE" "$CACHE_PID" <<'EOF'
import json, sys, threading, time
from raw_http import connect, read_response

origin, origin_pid, pull, admin, cache, cache_pid = sys.argv[1:7]

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def hwm_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    fail("no VmHWM")

def stream(s, chunks, stop):
    """Sends chunks until the server stops taking them or `stop` is set."""
    try:
        for c in chunks:
            if stop.is_set():
                return
            s.sendall(c)
    except OSError:
        pass

def attack(url, head, body_chunks, want_status, want_code, what):
    s = connect(url)
    start = time.monotonic()
    s.sendall(head)
    stop = threading.Event()
    t = threading.Thread(target=stream, args=(s, body_chunks, stop))
    t.start()
    status, headers, body, eof = read_response(s)
    took = time.monotonic() - start
    stop.set()
    t.join()
    s.close()
    if status != want_status:
        fail(f"{what}: status {status}, want {want_status} ({body[:200]!r})")
    code = json.loads(body.split(b"}}")[0] + b"}}")["error"]["code"]
    if code != want_code:
        fail(f"{what}: code {code}, want {want_code}")
    if headers.get("connection") != ["close"]:
        fail(f"{what}: Connection headers {headers.get('connection')}")
    if not eof:
        fail(f"{what}: the connection stayed open after the response")
    return took

def brackets(total, piece=1 << 20):
    for _ in range(total // piece):
        yield b"[" * piece

def ids(n, piece=10000):
    yield b'{"ids": ['
    item = b'"' + b"0" * 64 + b'",'
    for _ in range(n // piece):
        yield item * piece

def chunked(gen):
    for c in gen:
        yield b"%x\r\n" % len(c) + c + b"\r\n"

def batch_head(length=None, te=False):
    h = (f"POST /v1/chunks/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {pull}\r\n"
         "Content-Type: application/json\r\n")
    h += "Transfer-Encoding: chunked\r\n" if te else f"Content-Length: {length}\r\n"
    return (h + "\r\n").encode()

for url in (origin, cache):  # warm up: a few ordinary requests
    s = connect(url)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    read_response(s)
idle = {origin_pid: hwm_kb(origin_pid), cache_pid: hwm_kb(cache_pid)}
print(f"idle peak RSS: origin {idle[origin_pid] / 1024:.1f} MB, cache node {idle[cache_pid] / 1024:.1f} MB")

n40 = 40 << 20
t = attack(origin, batch_head(n40), brackets(n40), 413, "invalid_argument",
           "40 MB of nested brackets to /v1/chunks/batch")
print(f"40 MB nested-bracket batch body: 413 after {t:.3f} s")
if t > 1:
    fail(f"the 413 took {t:.2f} s: the body was read first")
threads = [threading.Thread(target=attack, args=(origin, batch_head(n40), brackets(n40), 413,
                                                 "invalid_argument", f"parallel bracket body {i}"))
           for i in range(3)]
[th.start() for th in threads]
[th.join() for th in threads]
print("three 40 MB nested-bracket bodies in parallel: 413 each")
t = attack(origin, batch_head(30_000_000 * 67 + 11), ids(30_000_000), 413, "invalid_argument",
           "a flat array of 30 M ids")
print(f"flat array of 30 M ids (2.0 GB): 413 after {t:.3f} s")
t = attack(origin, batch_head(te=True), chunked(brackets(n40, 64 << 10)), 413, "invalid_argument",
           "40 MB of nested brackets, chunked")
print(f"40 MB nested-bracket body, chunked: 413 (cut at the limit) after {t:.3f} s")
t = attack(origin, batch_head(te=True), chunked(ids(30_000_000)), 413, "invalid_argument",
           "30 M ids, chunked")
print(f"30 M ids, chunked: 413 (cut at the limit) after {t:.3f} s")

# Under the limit, the parser itself stops at the nesting bound.
body = b"[" * (100 << 10)
s = connect(origin)
s.sendall(batch_head(len(body)).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") + body)
status, _, resp, _ = read_response(s)
if status != 400 or b"request body: nested deeper than 32 levels" not in resp:
    fail(f"100 KB of brackets under the limit: {status} {resp[:200]!r}")
print("100 KB of nested brackets (under the limit): 400 nested deeper than 32 levels")

# Issue 14 item 2: a 70 MB upload (limit 64 MiB) gets 413 before its body is sent.
head = (f"PUT /v1/chunks/{'0' * 64} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n"
        f"Content-Length: {70 << 20}\r\n\r\n").encode()
t = attack(origin, head, [], 413, "invalid_argument", "70 MB upload")
print(f"70 MB upload without its body: 413 after {t:.3f} s")

# Issue 14 item 1: "GET /" and then endless bytes without a newline, 70 connections at once,
# on the origin and on a cache node.
def endless():
    while True:
        yield b"a" * (1 << 20)

def line_attack(url, i):
    took = attack(url, b"GET /", endless(), 414, "invalid_argument", f"endless request line {i}")
    if took > 2:
        fail(f"endless request line {i}: 414 after {took:.2f} s")

for url in (origin, cache):
    threads = [threading.Thread(target=line_attack, args=(url, i)) for i in range(70)]
    [th.start() for th in threads]
    [th.join() for th in threads]
print("70 endless request lines at once, origin and cache node: 414 each")

peak = {origin_pid: hwm_kb(origin_pid), cache_pid: hwm_kb(cache_pid)}
for pid, name in ((origin_pid, "origin"), (cache_pid, "cache node")):
    grew = (peak[pid] - idle[pid]) / 1024
    print(f"{name}: peak RSS {peak[pid] / 1024:.1f} MB, {grew:.1f} MB above idle")
    if grew > 64:
        fail(f"{name}: peak RSS grew {grew:.1f} MB (limit 64 MB)")
EOF

step "the servers still answer"
assert_eq ok "$(curl -sf "$ORIGIN/healthz")" "origin /healthz"
assert_eq ok "$(curl -sf "$CACHE/healthz")" "cache node /healthz"
echo PASS
