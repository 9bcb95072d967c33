#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for the integration tests: forwards every request to an
upstream `bdn serve` and, for requests matching a rule, misbehaves instead of answering.

    fault_proxy.py --upstream http://127.0.0.1:PORT --rule 'METHOD REGEX ACTION [COUNT]' ...

METHOD is an HTTP method or '*'; REGEX is matched (re.search) against the request path with its
query; a rule applies to its first COUNT matching requests (default 1). Actions:
  drop  forward the request, read the whole answer, then close the client's connection without
        sending any of it (the answer is lost on the way back)
  500   answer 500 with the API's JSON error body, without forwarding
  die   forward and answer, then exit: nothing listens on the port any more (the origin is gone)
  hold  wait until the file given by --gate exists, then forward and answer
  drop-until-gate  as drop while the file given by --gate does not exist; once it does, the rule
        no longer applies
A request the upstream does not answer (it is down) gets no answer either: the connection is
closed, as a dead origin's would be.

Prints "fault_proxy listening on http://127.0.0.1:PORT" on stderr once it accepts connections,
then one line per request: "METHOD PATH -> forwarded|dropped|500|died|held|upstream down".
"""
import argparse
import http.client
import http.server
import os
import re
import sys
import threading
import time
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
              "proxy-connection", "te", "trailer", "upgrade"}


class Rule:
    def __init__(self, text):
        parts = text.split()
        if len(parts) not in (3, 4) or parts[2] not in ("drop", "500", "die", "hold", "drop-until-gate"):
            raise SystemExit(f"fault_proxy: bad rule {text!r}")
        self.method, self.pattern, self.action = parts[0], re.compile(parts[1]), parts[2]
        self.left = int(parts[3]) if len(parts) == 4 else 1

    def take(self, method, path):
        if self.left <= 0 or (self.method != "*" and self.method != method):
            return False
        if not self.pattern.search(path):
            return False
        self.left -= 1
        return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per request is printed by note()
        pass

    def note(self, outcome):
        sys.stderr.write(f"{self.command} {self.path} -> {outcome}\n")
        sys.stderr.flush()

    def action(self):
        with self.server.lock:
            for rule in self.server.rules:
                if rule.action == "drop-until-gate" and os.path.exists(self.server.gate):
                    continue
                if rule.take(self.command, self.path):
                    return "drop" if rule.action == "drop-until-gate" else rule.action
        return None

    def forward(self, body):
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=300)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("POST", "PUT"):
            headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
        conn.close()
        return resp.status, out_headers, data

    def reply(self, status, headers, data):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        action = self.action()
        if action == "500":
            data = b'{"error": {"code": "internal", "message": "fault_proxy: injected 500"}}'
            self.reply(500, [("Content-Type", "application/json")], data)
            self.note("500")
            return
        if action == "hold":
            self.note("held")
            while not os.path.exists(self.server.gate):
                time.sleep(0.01)
        try:
            status, headers, data = self.forward(body)
        except OSError:
            self.close_connection = True
            self.note("upstream down")
            return
        if action == "drop":
            self.close_connection = True
            self.note("dropped")
            return
        self.reply(status, headers, data)
        if action == "die":
            self.note("died")
            os._exit(0)
        self.note("forwarded")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--rule", action="append", default=[])
    p.add_argument("--gate", default="", help="file whose existence releases held requests")
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.upstream = urllib.parse.urlsplit(args.upstream)
    server.rules = [Rule(r) for r in args.rule]
    server.lock = threading.Lock()
    server.gate = args.gate
    sys.stderr.write(f"fault_proxy listening on http://127.0.0.1:{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
