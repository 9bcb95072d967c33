#!/usr/bin/env python3
"""Keeps N half-open "slow header" connections to HOST:PORT open (bench/http_load.sh): each sends
a request line and one header field, then nothing; a connection the server closes is opened
again at once. Runs until killed; prints how many it holds and how many it reopened when it ends
(SIGTERM).
Usage: slow_headers.py HOST PORT N"""
import selectors
import signal
import socket
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
reopened = 0


def open_one():
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        return True
    except OSError:
        return False


def stop(*_):
    print(f"slow_headers: held {len(sel.get_map())} of {n}, reopened {reopened}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
for _ in range(n):
    open_one()
print(f"slow_headers: {len(sel.get_map())} open", flush=True)
while True:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:  # closed (or answered and closed): open another
            sel.unregister(s)
            s.close()
            reopened += 1
    while len(sel.get_map()) < n:
        if not open_one():
            break
