#!/usr/bin/env python3
"""A reader with a SIGUSR1 handler installed with SA_RESTART, as C and C++ programs with
handlers have, that makes one read or open straight through libc (ctypes), so an EINTR is seen
as the program would see it (Python's own os.read and open retry on EINTR, PEP 475).

  signal_reader.py read PATH OFFSET LENGTH OUT   one O_DIRECT pread of [OFFSET, OFFSET+LENGTH)
                                                 of PATH; the bytes go to OUT
  signal_reader.py open PATH                     one open(PATH, O_RDONLY)

Exit 0 when the call succeeded (a read must return LENGTH bytes); else exit 1 with the errno
on stderr. Prints "signals handled: N" on stderr in both cases.
"""
import ctypes
import mmap
import os
import signal
import sys

handled = 0


def on_usr1(signum, frame):
    global handled
    handled += 1


def main():
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.siginterrupt(signal.SIGUSR1, False)  # SA_RESTART
    libc = ctypes.CDLL(None, use_errno=True)
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "read":
        offset, length, out = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, length)  # page-aligned, as O_DIRECT needs
        libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        libc.pread.restype = ctypes.c_ssize_t
        n = libc.pread(fd, ctypes.addressof(ctypes.c_char.from_buffer(buf)), length, offset)
        err = ctypes.get_errno()
        if n != length:
            what = os.strerror(err) if n < 0 else f"{n} bytes"
            print(f"pread {path}: {what}; signals handled: {handled}", file=sys.stderr)
            return 1
        with open(out, "wb") as f:
            f.write(buf[:n])
    elif mode == "open":
        libc.open.argtypes = [ctypes.c_char_p, ctypes.c_int]
        fd = libc.open(os.fsencode(path), os.O_RDONLY)
        err = ctypes.get_errno()
        if fd < 0:
            print(f"open {path}: {os.strerror(err)}; signals handled: {handled}", file=sys.stderr)
            return 1
        os.close(fd)
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    print(f"signals handled: {handled}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
