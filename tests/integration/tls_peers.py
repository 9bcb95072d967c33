#!/usr/bin/env python3
"""A cache node reached over TLS that lists a plain-HTTP peer, for cache_peers_test.sh.

    tls_peers.py CERT KEY PORTS_FILE

Listens on two free ports of 127.0.0.1: one over TLS (CERT, KEY), one in plain HTTP. Both answer
GET /v1/peers with {"peers": ["http://127.0.0.1:<plain port>"]} and /healthz with 200, and every
other request with 404. Writes "<tls port> <plain port>" to PORTS_FILE once both listen, then one
line per request on stderr: "<tls|plain> METHOD PATH auth=<Authorization header or None>".
"""
import http.server
import json
import os
import socketserver
import ssl
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        sys.stderr.write(f"{self.server.kind} {self.command} {self.path} "
                         f"auth={self.headers.get('Authorization')}\n")
        sys.stderr.flush()
        if self.path == "/v1/peers":
            status, body = 200, json.dumps({"peers": [f"http://127.0.0.1:{PLAIN_PORT}"]}).encode()
        elif self.path == "/healthz":
            status, body = 200, b"ok"
        else:
            status, body = 404, b'{"error": {"code": "not_found", "message": "tls_peers: no"}}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    global PLAIN_PORT
    cert, key, ports_file = sys.argv[1:4]
    plain = Server(("127.0.0.1", 0), Handler)
    plain.kind = "plain"
    PLAIN_PORT = plain.server_address[1]
    tls = Server(("127.0.0.1", 0), Handler)
    tls.kind = "tls"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    with open(ports_file + ".tmp", "w") as f:
        f.write(f"{tls.server_address[1]} {PLAIN_PORT}\n")
    os.rename(ports_file + ".tmp", ports_file)
    tls.serve_forever()


if __name__ == "__main__":
    main()
