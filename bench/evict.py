#!/usr/bin/env python3
"""evict.py PATH...: drops the page-cache pages of every regular file under the PATHs
(posix_fadvise POSIX_FADV_DONTNEED after fdatasync), for benchmarks on machines where
/proc/sys/vm/drop_caches cannot be written. Pages of other files stay cached."""
import os
import sys


def evict(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fdatasync(fd)
    except OSError:
        pass
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


for top in sys.argv[1:]:
    if os.path.isfile(top):
        evict(top)
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                evict(p)
