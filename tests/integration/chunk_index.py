#!/usr/bin/env python3
"""A second, independent implementation of docs/format.md "Chunk index object" (versions 1 and 2,
and the writer's cut into pieces) and of a version-1 manifest, for the integration tests. BLAKE3
comes from b3sum.

  chunk_index.py pieces DIR ROOT_HEX
      the piece ids (hex, one a line, first-listed order, no repeats) of the version-2 chunk
      index DIR/ROOT_HEX (nothing for a version-1 one)
  chunk_index.py check DIR ROOT_HEX FILE_SIZE
      reads the chunk index DIR/ROOT_HEX and its pieces (DIR/<hex>), checks every rule of the
      document (the pieces list what the index says, the sizes add up to FILE_SIZE, and the index
      is exactly what a writer makes of the chunk list: the same cut, the same bytes), and prints
      a JSON summary: {"version", "chunks", "pieces": [{"id", "chunks", "bytes"}...],
      "root_bytes", "first", "last"} (first/last: [id hex, length] of the first and last chunk)
  chunk_index.py v1-version OUT FILE PATH CHUNK_BYTES
      writes a version of one file entry PATH holding FILE, cut into CHUNK_BYTES-byte chunks (the
      last one shorter) and indexed by ONE version-1 object whatever their number, as bdn wrote
      every file before version 2 existed: the chunks, the index and the manifest (default
      chunker parameters, mode 0644) as OUT/<hex>, and OUT/order listing them in upload order
      (the manifest last), as `bdn_craft dir:OUT` reads them
"""
import json
import os
import struct
import subprocess
import sys

MAGIC = b"BDNI"
FLAT_MAX = 1024
PIECE_MIN, PIECE_MAX, CUT_MASK = 16, 1024, 0x3F


def b3(data: bytes) -> bytes:
    out = subprocess.run(["b3sum", "--no-names", "--raw"], input=data, capture_output=True, check=True)
    return out.stdout[:32]


def encode_v1(chunks):
    return MAGIC + struct.pack("<IQ", 1, len(chunks)) + b"".join(i + struct.pack("<I", n) for i, n in chunks)


def decode(blob):
    if blob[:4] != MAGIC:
        raise ValueError("bad magic")
    version, count = struct.unpack_from("<IQ", blob, 4)
    if version == 1:
        if len(blob) != 16 + 36 * count:
            raise ValueError("version 1: length does not match count")
        out = [(blob[16 + 36 * k:48 + 36 * k], struct.unpack_from("<I", blob, 48 + 36 * k)[0]) for k in range(count)]
        if any(n == 0 for _, n in out):
            raise ValueError("empty chunk")
        return 1, out
    if version == 2:
        if count == 0 or len(blob) != 16 + 48 * count:
            raise ValueError("version 2: no pieces or length does not match count")
        out = [(blob[16 + 48 * k:48 + 48 * k],) + struct.unpack_from("<QQ", blob, 48 + 48 * k) for k in range(count)]
        if any(not 1 <= c <= PIECE_MAX for _, c, _ in out):
            raise ValueError("piece chunk count out of range")
        return 2, out
    raise ValueError(f"unsupported version {version}")


def cut(chunks):
    """The writer's pieces of a chunk list (docs/format.md, "Pieces")."""
    if len(chunks) <= FLAT_MAX:
        return [chunks]
    pieces, start = [], 0
    for k in range(len(chunks)):
        n = k - start + 1
        if k == len(chunks) - 1 or n == PIECE_MAX or (n >= PIECE_MIN and chunks[k][0][31] & CUT_MASK == 0):
            pieces.append(chunks[start:k + 1])
            start = k + 1
    return pieces


def read(d, hexid):
    with open(os.path.join(d, hexid), "rb") as f:
        return f.read()


def pieces(d, root):
    version, entries = decode(read(d, root))
    seen = []
    if version == 2:
        for pid, _, _ in entries:
            if pid.hex() not in seen:
                seen.append(pid.hex())
    print("\n".join(seen))


def check(d, root, file_size):
    blob = read(d, root)
    if b3(blob).hex() != root:
        raise ValueError("root does not hash to its id")
    version, entries = decode(blob)
    if version == 1:
        chunks, listed = entries, []
    else:
        chunks, listed = [], []
        for pid, count, nbytes in entries:
            pblob = read(d, pid.hex())
            if b3(pblob) != pid:
                raise ValueError(f"piece {pid.hex()} does not hash to its id")
            pv, run = decode(pblob)
            if pv != 1 or len(run) != count or sum(n for _, n in run) != nbytes:
                raise ValueError(f"piece {pid.hex()} lists other than the index says")
            chunks += run
            listed.append({"id": pid.hex(), "chunks": count, "bytes": nbytes})
    if sum(n for _, n in chunks) != file_size:
        raise ValueError("chunks do not add up to the file size")
    # What a writer makes of this list: the same cut, hence the same bytes and digest.
    want = cut(chunks)
    if len(want) == 1:
        expected = encode_v1(chunks)
    else:
        expected = MAGIC + struct.pack("<IQ", 2, len(want)) + b"".join(
            b3(encode_v1(p)) + struct.pack("<QQ", len(p), sum(n for _, n in p)) for p in want)
    if expected != blob:
        raise ValueError("the index is not what a writer makes of its chunk list")
    print(json.dumps({"version": version, "chunks": len(chunks), "pieces": listed,
                      "root_bytes": len(blob), "first": [chunks[0][0].hex(), chunks[0][1]],
                      "last": [chunks[-1][0].hex(), chunks[-1][1]]}))


def v1_version(out, path, name, chunk_bytes):
    os.makedirs(out, exist_ok=True)
    with open(path, "rb") as f:
        data = f.read()
    parts = [data[k:k + chunk_bytes] for k in range(0, len(data), chunk_bytes)]
    tmp = []
    for k, p in enumerate(parts):
        tmp.append(os.path.join(out, f"part{k:08d}"))
        with open(tmp[-1], "wb") as f:
            f.write(p)
    # One b3sum for all chunks (a process each would take minutes).
    sums = subprocess.run(["b3sum", "--no-names"] + tmp, capture_output=True, check=True, text=True).stdout.split()
    order, chunks = [], []
    for t, h, p in zip(tmp, sums, parts):
        os.replace(t, os.path.join(out, h))
        order.append(h)
        chunks.append((bytes.fromhex(h), len(p)))
    index = encode_v1(chunks)
    whole = subprocess.run(["b3sum", "--no-names", "--raw", path], capture_output=True, check=True).stdout[:32]
    name_b = name.encode()
    # Manifest version 1: FastCDC 2020 with the default 16/64/256 KiB, no flags, one file entry
    # (kind 2, mode 0644, path, size, layout 2 = indexed, digest, index).
    manifest = b"BDNM" + struct.pack("<IBIIIBQ", 1, 1, 16384, 65536, 262144, 0, 1)
    manifest += struct.pack("<BHI", 2, 0o644, len(name_b)) + name_b
    manifest += struct.pack("<QB", len(data), 2) + whole + b3(index)
    for blob in (index, manifest):
        h = b3(blob).hex()
        with open(os.path.join(out, h), "wb") as f:
            f.write(blob)
        order.append(h)
    with open(os.path.join(out, "order"), "w") as f:
        f.write("\n".join(order) + "\n")
    print(order[-1])


def main():
    cmd = sys.argv[1]
    if cmd == "pieces":
        pieces(sys.argv[2], sys.argv[3])
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "v1-version":
        v1_version(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        raise SystemExit(f"unknown command {cmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
