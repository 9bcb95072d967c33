"""Raw-socket HTTP/1.1 helpers for the integration tests' python3 parts (import it with
PYTHONPATH="$(dirname "$0")"): one response read byte-exact off a socket, and whether the server
then closed the connection."""
import socket
import urllib.parse


def connect(url, source=None, timeout=20):
    """A TCP connection to URL's host and port, from the local address SOURCE if given."""
    u = urllib.parse.urlparse(url)
    return socket.create_connection((u.hostname, u.port), timeout=timeout,
                                    source_address=(source, 0) if source else None)


def read_response(s, then_eof=True):
    """Reads one response: (status, {lower-case name: [values]}, body, eof). status is None when
    the connection closed (or reset, or timed out) before a whole header came; the body is
    Content-Length bytes (or what came before the close). With then_eof, it then reads on until
    the server closes (eof True) or resets or the socket's timeout passes (eof False)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            got = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            got = b""
        if not got:
            return None, {}, data, True
        data += got
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    n = int(headers.get("content-length", ["0"])[0])
    while len(rest) < n:
        got = s.recv(65536)
        if not got:
            break
        rest += got
    # Then (then_eof) the connection must close: whatever more comes is added to the body.
    eof = False
    if then_eof:
        try:
            more = s.recv(65536)
            while more:
                rest += more
                more = s.recv(65536)
            eof = True
        except (ConnectionResetError, socket.timeout):
            pass
    return status, headers, rest, eof


def closed_within(s, seconds):
    """True when the server closes the connection (EOF or reset) within SECONDS (None: the
    socket's blocking wait); whatever it sends before is read and dropped."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
