#!/usr/bin/env python3
"""A second, independent implementation of the pack format of docs/format.md ("Packs"), for the
integration tests: it reads the footers of a store's packs and writes sealed packs of its own,
which bdn must then read like its own. BLAKE3 comes from b3sum, except for record headers
(b3_small, checked against b3sum).

  packs.py list STORE          every blob of every sealed pack, one line each:
                               <pack path> <record offset> <payload offset> <stored> <raw> <codec> <id hex>
  packs.py find STORE HEX      the line of one blob (exit 1 if no sealed pack holds it)
  packs.py blobs STORE OUT HEX...
                               writes the raw bytes of each blob HEX (decoded, checked against
                               its id) to OUT/<HEX>, from the sealed packs whose footer checksum
                               holds (exit 1 naming a blob no sealed pack holds)
  packs.py write PACK FILE...  writes PACK, a sealed pack holding each FILE's bytes (codec none)
  packs.py extract STORE HEX OUT
                               moves blob HEX out of the store: its pack is rewritten without it,
                               OUT (named <16 hex>.pack) becomes a pack of that blob alone, and the
                               store's index tables are deleted (bdn rebuilds them)
  packs.py corrupt DIR         overwrites the first payload byte of every whole record in every
                               pack or region file of DIR/packs, sealed or open (walking records
                               from the pack header); prints how many records it damaged
  packs.py unpack STORE        rewrites STORE in the old one-file-per-chunk layout (before packs):
                               every blob as chunks/<2 hex>/<64 hex>, raw; packs/ and index/ removed
  packs.py unpack-cache DIR    the same for a node cache directory, left as the one-file-per-chunk
                               release made it: also its accounting file `state` ("ZBDNN001", 1024
                               ghost slots, the table from byte 8192), and none of the files that
                               release never made (the marker bdn-node-cache, evict.lock)
"""
import os
import shutil
import struct
import subprocess
import sys

PACK_MAGIC = b"BDNPACK\0"
RECORD_MAGIC = b"BDNR"
TRAILER_MAGIC = b"BDNPEND\x01"
CODECS = {0: "none", 1: "zstd"}


def b3(data: bytes) -> bytes:
    out = subprocess.run(["b3sum", "--no-names", "--raw"], input=data, capture_output=True, check=True)
    return out.stdout[:32]


_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB,
       0x5BE0CD19)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_M32 = 0xFFFFFFFF


def _compress(cv, block, length, flags):
    """The BLAKE3 compression function (the BLAKE3 paper, section 2.2), counter 0."""
    m = list(struct.unpack("<16I", block))
    v = list(cv) + list(_IV[:4]) + [0, 0, length, flags]

    def g(a, b, c, d, x, y):
        v[a] = (v[a] + v[b] + x) & _M32
        v[d] = ((v[d] ^ v[a]) >> 16 | (v[d] ^ v[a]) << 16) & _M32
        v[c] = (v[c] + v[d]) & _M32
        v[b] = ((v[b] ^ v[c]) >> 12 | (v[b] ^ v[c]) << 20) & _M32
        v[a] = (v[a] + v[b] + y) & _M32
        v[d] = ((v[d] ^ v[a]) >> 8 | (v[d] ^ v[a]) << 24) & _M32
        v[c] = (v[c] + v[d]) & _M32
        v[b] = ((v[b] ^ v[c]) >> 7 | (v[b] ^ v[c]) << 25) & _M32

    for r in range(7):
        g(0, 4, 8, 12, m[0], m[1]); g(1, 5, 9, 13, m[2], m[3])
        g(2, 6, 10, 14, m[4], m[5]); g(3, 7, 11, 15, m[6], m[7])
        g(0, 5, 10, 15, m[8], m[9]); g(1, 6, 11, 12, m[10], m[11])
        g(2, 7, 8, 13, m[12], m[13]); g(3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    return [v[i] ^ v[i + 8] for i in range(8)]


def b3_small(data: bytes) -> bytes:
    """BLAKE3 of at most one chunk (1024 bytes), in Python: a record header's checksum costs no
    process. Checked against b3sum on its first use (b3_checked)."""
    assert len(data) <= 1024
    cv = list(_IV)
    blocks = [data[i:i + 64] for i in range(0, len(data), 64)] or [b""]
    for i, block in enumerate(blocks):
        flags = (1 if i == 0 else 0) | (2 | 8 if i == len(blocks) - 1 else 0)  # START, END|ROOT
        cv = _compress(cv, block.ljust(64, b"\0"), len(block), flags)
    return struct.pack("<8I", *cv)


_b3_small_checked = False


def b3_many(items):
    """The BLAKE3 digests of byte strings: those of up to 1024 bytes (record headers) without a
    process each, longer ones by b3sum."""
    global _b3_small_checked
    if not _b3_small_checked and items:
        short = [x for x in items[:1] if len(x) <= 1024]
        for probe in [b"", bytes(range(256)) * 4] + short:
            assert b3_small(probe) == b3(probe), "packs.py's BLAKE3 disagrees with b3sum"
        _b3_small_checked = True
    return [b3_small(x) if len(x) <= 1024 else b3(x) for x in items]


def read_footer(path):
    """The footer entries of a sealed pack, each checked against its record's header. Reads the
    header, the trailer, the footer and each record header, never the payloads."""
    with open(path, "rb") as f:
        if f.read(12)[:8] != PACK_MAGIC:
            raise ValueError(f"{path}: not a version 1 pack")
        f.seek(8)
        if struct.unpack("<I", f.read(4))[0] != 1:
            raise ValueError(f"{path}: not a version 1 pack")
        size = f.seek(0, os.SEEK_END)
        f.seek(size - 64)
        trailer = f.read(64)
        if len(trailer) != 64 or trailer[24:32] != TRAILER_MAGIC:
            raise ValueError(f"{path}: no trailer")
        footer_offset, count = struct.unpack_from("<QQ", trailer, 0)
        f.seek(footer_offset)
        footer = f.read()
        if len(footer) != count * 64 + 64 or b3(footer[:-32]) != footer[-32:]:
            raise ValueError(f"{path}: footer checksum mismatch")
        entries = []
        headers = []
        for i in range(count):
            e = footer[i * 64:(i + 1) * 64]
            blob_id = e[:32]
            offset, stored, raw = struct.unpack_from("<QQQ", e, 32)
            codec = CODECS[e[56]]
            # The record header repeats the entry and checks itself (its checksum: below, at once).
            f.seek(offset)
            h = f.read(64)
            assert h[:4] == RECORD_MAGIC and h[24:56] == blob_id, path
            assert struct.unpack_from("<QQ", h, 8) == (stored, raw) and h[4] == e[56], path
            headers.append(h)
            entries.append((offset, offset + 64, stored, raw, codec, blob_id.hex()))
    for h, digest in zip(headers, b3_many([h[:56] for h in headers])):
        assert digest[:8] == h[56:64], f"{path}: record header checksum"
    return entries


def sealed_packs(store):
    d = os.path.join(store, "packs")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".pack"))


def list_store(store):
    for p in sealed_packs(store):
        for e in read_footer(p):
            yield (p,) + e


def blobs(store, out, hexes):
    want = set(hexes)
    os.makedirs(out, exist_ok=True)
    for path in sealed_packs(store):
        if not want:
            break
        with open(path, "rb") as f:
            data = f.read()
        footer_offset, count = struct.unpack_from("<QQ", data, len(data) - 64)
        footer = data[footer_offset:]
        if data[-40:-32] != TRAILER_MAGIC or len(footer) != count * 64 + 64 or \
                b3(footer[:-32]) != footer[-32:]:
            continue
        for i in range(count):
            e = footer[i * 64:(i + 1) * 64]
            if e[:32].hex() not in want:
                continue
            offset, stored, raw = struct.unpack_from("<QQQ", e, 32)
            payload = data[offset + 64:offset + 64 + stored]
            if CODECS[e[56]] == "zstd":
                payload = subprocess.run(["zstd", "-d", "-c"], input=payload, capture_output=True,
                                         check=True).stdout
            if len(payload) != raw or b3(payload) != e[:32]:
                raise ValueError(f"{path}: blob {e[:32].hex()} does not match its id")
            with open(os.path.join(out, e[:32].hex()), "wb") as f:
                f.write(payload)
            want.discard(e[:32].hex())
    if want:
        print(f"packs.py: no sealed pack holds {sorted(want)[0]}", file=sys.stderr)
        return 1
    return 0


def record_header(blob_id, stored, raw, codec):
    h = RECORD_MAGIC + bytes([codec, 0, 0, 0]) + struct.pack("<QQ", stored, raw) + blob_id
    return h + b3(h)[:8]


def read_records(path):
    """(id, codec number, raw length, stored bytes) of every record, in pack order."""
    with open(path, "rb") as f:
        data = f.read()
    codec_numbers = {v: k for k, v in CODECS.items()}
    return [(bytes.fromhex(h), codec_numbers[codec], raw, data[payload:payload + stored])
            for _, payload, stored, raw, codec, h in read_footer(path)]


def write_records(path, records):
    out = bytearray(PACK_MAGIC + struct.pack("<II", 1, 0))
    entries = []
    for blob_id, codec, raw, stored in records:
        entries.append((blob_id, len(out), len(stored), raw, codec))
        out += record_header(blob_id, len(stored), raw, codec) + stored
    footer_offset = len(out)
    footer = bytearray()
    for blob_id, offset, stored, raw, codec in entries:
        footer += blob_id + struct.pack("<QQQ", offset, stored, raw) + bytes([codec]) + bytes(7)
    footer += struct.pack("<QQ", footer_offset, len(entries)) + bytes(8) + TRAILER_MAGIC
    footer += b3(bytes(footer))
    with open(path, "wb") as f:
        f.write(out + footer)


def write_pack(path, files):
    records = []
    for name in files:
        with open(name, "rb") as f:
            blob = f.read()
        records.append((b3(blob), 0, len(blob), blob))
    write_records(path, records)


def extract(store, hexid, out):
    for pack in sealed_packs(store):
        records = read_records(pack)
        if any(r[0].hex() == hexid for r in records):
            write_records(pack + ".tmp", [r for r in records if r[0].hex() != hexid])
            os.replace(pack + ".tmp", pack)
            write_records(out, [r for r in records if r[0].hex() == hexid][:1])
            index = os.path.join(store, "index")
            for n in os.listdir(index):
                if n.endswith(".idx"):
                    os.remove(os.path.join(index, n))
            return 0
    return 1


def corrupt(store):
    d = os.path.join(store, "packs")
    damaged = 0
    for name in sorted(os.listdir(d)):
        if not (name.endswith(".pack") or name.endswith(".open")):
            continue
        path = os.path.join(d, name)
        with open(path, "r+b") as f:
            data = f.read()
            # The records as their headers frame them, then their checksums in one batch: the walk
            # ends at the first header that does not check (what follows it is not framed).
            records = []
            off = len(PACK_MAGIC) + 8
            while off + 64 <= len(data) and data[off:off + 4] == RECORD_MAGIC:
                header = data[off:off + 64]
                stored = struct.unpack_from("<Q", header, 8)[0]
                if off + 64 + stored > len(data):
                    break  # a torn tail
                records.append((off, header, stored))
                off += 64 + stored
            digests = b3_many([header[:56] for _, header, _ in records])
            for (off, header, stored), digest in zip(records, digests):
                if digest[:8] != header[56:]:
                    break
                if stored > 0:
                    f.seek(off + 64)
                    f.write(bytes([data[off + 64] ^ 0xff]))
                    damaged += 1
    print(damaged)
    return 0


def unpack(store):
    for pack in sealed_packs(store):
        blobs = []
        for blob_id, codec, raw, stored in read_records(pack):
            if codec == 1:
                stored = subprocess.run(["zstd", "-d", "-c"], input=stored, capture_output=True,
                                        check=True).stdout
            assert len(stored) == raw, pack
            blobs.append((blob_id, stored))
        for (blob_id, stored), digest in zip(blobs, b3_many([b for _, b in blobs])):
            assert digest == blob_id, pack
            d = os.path.join(store, "chunks", blob_id.hex()[:2])
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, blob_id.hex()), "wb") as f:
                f.write(stored)
    for sub in ("packs", "index"):  # a node cache directory has no index/
        if os.path.isdir(os.path.join(store, sub)):
            shutil.rmtree(os.path.join(store, sub))
    os.makedirs(os.path.join(store, "tmp"), exist_ok=True)
    return 0


def unpack_cache(cache):
    unpack(cache)
    for name in ("bdn-node-cache", "evict.lock"):
        if os.path.exists(os.path.join(cache, name)):
            os.remove(os.path.join(cache, name))
    with open(os.path.join(cache, "state"), "wb") as f:
        f.write(b"ZBDNN001" + struct.pack("<Q", 1024))
        f.truncate(8192 + 1024 * 8)
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "list":
        for row in list_store(sys.argv[2]):
            print(*row)
    elif cmd == "find":
        for row in list_store(sys.argv[2]):
            if row[-1] == sys.argv[3]:
                print(*row)
                return 0
        return 1
    elif cmd == "blobs":
        return blobs(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "write":
        write_pack(sys.argv[2], sys.argv[3:])
    elif cmd == "corrupt":
        return corrupt(sys.argv[2])
    elif cmd == "unpack":
        return unpack(sys.argv[2])
    elif cmd == "unpack-cache":
        return unpack_cache(sys.argv[2])
    elif cmd == "extract":
        return extract(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown command {cmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
