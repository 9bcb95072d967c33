#!/usr/bin/env python3
"""random_reads.py FILE [COUNT]: COUNT (default 2000) reads of 4 KiB at 4 KiB-aligned offsets
drawn with a fixed seed, one thread, pread; prints the reads per second (IOPS)."""
import os
import random
import sys
import time

path = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
fd = os.open(path, os.O_RDONLY)
blocks = os.fstat(fd).st_size // 4096
rng = random.Random(7)
offsets = [rng.randrange(blocks) * 4096 for _ in range(count)]
t0 = time.monotonic()
for off in offsets:
    if len(os.pread(fd, 4096, off)) != 4096:
        sys.exit(f"{path}: short read at {off}")
elapsed = time.monotonic() - t0
os.close(fd)
print(f"{count / elapsed:.0f}")
