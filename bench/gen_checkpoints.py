#!/usr/bin/env python3
"""Seeded generator for a benchmark series of model checkpoints in safetensors format.

Standard library only (Python 3.11+). Used to measure how much new data `bdn volume push`
stores when a model checkpoint changes a little: per-tensor updates and a byte-shifting
insertion.

safetensors file layout
-----------------------
    [0, 8)        u64 little-endian N: length of the JSON header
    [8, 8+N)      JSON object, UTF-8, right-padded with spaces (0x20) so N is a multiple of 8:
                    {"__metadata__": {"format": "pt", ...},            (optional; str -> str)
                     "<tensor name>": {"dtype": "BF16" | "F32" | "I8",
                                       "shape": [d0, d1, ...],
                                       "data_offsets": [begin, end]},   (relative to 8+N)
                     ...}
    [8+N, EOF)    raw little-endian tensor bytes; the [begin, end) ranges tile this region
                  exactly, with no gaps or overlaps, and end-begin = prod(shape) * dtype size.
The generator writes tensors in data order and lists them in the header in the same order.

The series (all under --out DIR)
--------------------------------
    ckpt-0/model.safetensors   about --size-mib MiB in about --tensors tensors, laid out like a
                               decoder-only transformer: token embedding [V, d] (BF16), per layer
                               RMS norms [d] (F32), attention q/k/v/o and MLP gate/up/down weight
                               matrices (BF16), a final norm (F32) and an LM head [V, d] (F32).
                               d and V are chosen so the total lands close to --size-mib.
    ckpt-1/model.safetensors   ckpt-0 with ~10% of the tensors (chosen by the seed so that they
                               also hold ~10% of the bytes) given new contents of the same shape
                               and dtype. The header is byte-identical to ckpt-0's.
    ckpt-2/model.safetensors   ckpt-1 with one new I8 tensor of 4099 elements inserted after the
                               2nd tensor. The header grows by a multiple of 8 bytes, so every
                               tensor after the insertion moves by an ODD number of bytes (such
                               unaligned data is legal for safetensors readers, just unusual).
    manifest.json              every tensor of every checkpoint (name, dtype, shape, absolute
                               file offset, length), the changed/inserted tensors, and the ideal
                               "new bytes" figures a tensor-level deduplicator would store:
                                 ideal_new_bytes_ckpt1 = bytes of the tensors changed in ckpt-1
                                 ideal_new_bytes_ckpt2 = inserted_tensor_bytes + header_bytes_ckpt2
                               (header_bytes_* count the 8-byte length prefix plus the JSON).

Contents: every tensor is generated from its own seed, derived from (--seed, tensor name,
generation), so changing one tensor changes no other. Bytes come from random.Random.randbytes,
made cheaply weight-like: the byte holding the sign and top exponent bits of each BF16/F32 value
is remapped so values follow roughly N(0, 1/fan_in) (norm weights sit in [0.5, 2)); the mantissa
bytes stay uniformly random. Unchanged tensors of ckpt-1/ckpt-2 are copied from the previous
checkpoint with os.copy_file_range. Output is streamed in 8 MiB pieces, and the same arguments
always give byte-identical files.

Usage
-----
    python3 bench/gen_checkpoints.py --out DIR [--seed 42] [--size-mib 1024] [--tensors 200]
    python3 bench/gen_checkpoints.py --check DIR
--check re-parses every checkpoint, confirms the offsets tile the data exactly, matches each
file against manifest.json and verifies the series relations byte by byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
              "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
PIECE = 8 << 20                 # streaming granularity; a multiple of every element size
CHANGE_FRACTION = 0.10          # share of tensors (and of bytes) rewritten in ckpt-1
INSERT_AFTER = 2                # ckpt-2 inserts its new tensor after this many tensors
INSERT_NAME = "model.bench_inserted.q8_scales"
INSERT_DTYPE = "I8"
INSERT_ELEMS = 4099             # odd: shifts every later tensor by an odd byte count
FILE_NAME = "model.safetensors"
CKPTS = ("ckpt-0", "ckpt-1", "ckpt-2")


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: list[int]
    kind: str                    # "weight", "norm", "bias" or "raw": how contents look
    begin: int = 0               # data_offsets[0], relative to the start of the data section
    source: tuple = field(default=(), repr=False)  # ("gen", seed) or ("copy", path, abs offset)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_SIZE[self.dtype]


def derive_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed for one purpose, independent of every other purpose."""
    text = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


# ---------------------------------------------------------------------------------------------
# Model layout


def plan_model(total_bytes: int, n_tensors: int) -> tuple[list[Tensor], dict]:
    """Tensors of a transformer-like model with about n_tensors tensors and total_bytes bytes."""
    layers = max(1, (n_tensors - 3) // 9)
    extra = max(0, n_tensors - 3 - 9 * layers)  # filled with attention biases
    extra = min(extra, 3 * layers)

    def dims(d: int) -> tuple[int, int]:
        heads = d // 128
        d_kv = max(1, heads // 4) * 128                 # grouped-query attention
        d_ff = -(-(d * 8 // 3) // 128) * 128
        return d_kv, d_ff

    def fixed_bytes(d: int) -> int:                     # everything except embedding and head
        d_kv, d_ff = dims(d)
        per_layer = 2 * (2 * d * d + 2 * d_kv * d + 3 * d_ff * d) + 4 * 2 * d
        return layers * per_layer + 4 * d + extra * 4 * d

    # Pick the hidden size (multiple of 128) that hits the target with vocab ~ 8*d, then tune
    # the vocabulary size (BF16 embedding + F32 head: 6 bytes per vocab row element) to close
    # the remaining gap.
    best, d = None, 128
    while True:
        est = fixed_bytes(d) + 6 * (8 * d) * d
        if best is None or abs(est - total_bytes) < abs(best[1] - total_bytes):
            best = (d, est)
        if est > 2 * total_bytes:
            break
        d += 128
    d = best[0]
    d_kv, d_ff = dims(d)
    vocab = max(256, round((total_bytes - fixed_bytes(d)) / (6 * d)))

    ts = [Tensor("model.embed_tokens.weight", "BF16", [vocab, d], "weight")]
    bias_slots = [(i, p) for i in range(layers) for p in ("q", "k", "v")][:extra]
    for i in range(layers):
        pre = f"model.layers.{i}."
        ts.append(Tensor(pre + "input_layernorm.weight", "F32", [d], "norm"))
        for p, rows in (("q", d), ("k", d_kv), ("v", d_kv)):
            ts.append(Tensor(pre + f"self_attn.{p}_proj.weight", "BF16", [rows, d], "weight"))
            if (i, p) in bias_slots:
                ts.append(Tensor(pre + f"self_attn.{p}_proj.bias", "F32", [rows], "bias"))
        ts.append(Tensor(pre + "self_attn.o_proj.weight", "BF16", [d, d], "weight"))
        ts.append(Tensor(pre + "post_attention_layernorm.weight", "F32", [d], "norm"))
        ts.append(Tensor(pre + "mlp.gate_proj.weight", "BF16", [d_ff, d], "weight"))
        ts.append(Tensor(pre + "mlp.up_proj.weight", "BF16", [d_ff, d], "weight"))
        ts.append(Tensor(pre + "mlp.down_proj.weight", "BF16", [d, d_ff], "weight"))
    ts.append(Tensor("model.norm.weight", "F32", [d], "norm"))
    ts.append(Tensor("lm_head.weight", "F32", [vocab, d], "weight"))
    return ts, {"layers": layers, "hidden": d, "kv_dim": d_kv, "ffn": d_ff, "vocab": vocab}


def assign_offsets(ts: list[Tensor]) -> int:
    pos = 0
    for t in ts:
        t.begin = pos
        pos += t.nbytes
    return pos


def choose_changed(ts: list[Tensor], seed: int) -> list[int]:
    """~10% of the tensors whose bytes are also ~10% of the total (seeded hill climb)."""
    rng = random.Random(derive_seed(seed, "choose-changed"))
    n = len(ts)
    k = max(1, round(CHANGE_FRACTION * n))
    target = CHANGE_FRACTION * sum(t.nbytes for t in ts)
    chosen = rng.sample(range(n), k)
    taken = set(chosen)
    rest = [i for i in range(n) if i not in taken]
    cur = sum(ts[i].nbytes for i in chosen)
    for _ in range(20000 if rest else 0):
        a, b = rng.randrange(k), rng.randrange(len(rest))
        new = cur - ts[chosen[a]].nbytes + ts[rest[b]].nbytes
        if abs(new - target) < abs(cur - target):
            chosen[a], rest[b], cur = rest[b], chosen[a], new
    return sorted(chosen)


# ---------------------------------------------------------------------------------------------
# Contents


_TABLES: dict[tuple[str, float], bytes] = {}


def sign_exponent_table(kind: str, sigma: float) -> bytes:
    """Maps a uniform byte to the top byte (sign + 7 high exponent bits) of an IEEE float.

    Shared by BF16 and F32: both have an 8-bit exponent starting at bit 7 of the top byte.
    """
    key = (kind, sigma)
    if key not in _TABLES:
        if kind == "norm":                 # positive, exponent 126/127: values in [0.5, 2)
            table = bytes([0x3F]) * 256
        else:                              # |x| for x ~ N(0, sigma), by quantile
            def cdf(e7: int) -> float:     # P(|x| < 2^(2*e7 + 2 - 127))
                return math.erf(2.0 ** (2 * e7 + 2 - 127) / (sigma * math.sqrt(2)))
            quant = []
            for q in range(128):
                p = (q + 0.5) / 128
                quant.append(next((e for e in range(128) if cdf(e) >= p), 127))
            table = bytes((u & 0x80) | quant[u & 0x7F] for u in range(256))
        _TABLES[key] = table
    return _TABLES[key]


def generate(t: Tensor, seed: int):
    """Yield the tensor's bytes in pieces of at most PIECE bytes."""
    rng = random.Random(seed)
    size = DTYPE_SIZE[t.dtype]
    table = None
    if t.dtype in ("BF16", "F32") and t.kind != "raw":
        sigma = 0.02 if t.kind == "bias" else 1.0 / math.sqrt(t.shape[-1])
        table = sign_exponent_table(t.kind, sigma)
    left = t.nbytes
    while left:
        n = min(PIECE, left)
        left -= n
        if table is None:
            yield rng.randbytes(n)
        else:
            buf = bytearray(rng.randbytes(n))
            buf[size - 1::size] = rng.randbytes(n // size).translate(table)
            yield buf


# ---------------------------------------------------------------------------------------------
# Writing


def encode_header(ts: list[Tensor], metadata: dict[str, str]) -> bytes:
    header: dict = {"__metadata__": metadata}
    for t in ts:
        header[t.name] = {"dtype": t.dtype, "shape": t.shape,
                          "data_offsets": [t.begin, t.begin + t.nbytes]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def copy_range(src: int, dst: int, offset: int, count: int) -> None:
    """Append count bytes of src starting at offset to dst (at dst's file position)."""
    try:
        while count:
            n = os.copy_file_range(src, dst, min(count, 1 << 30), offset)
            if n == 0:
                raise EOFError("source file is shorter than expected")
            offset += n
            count -= n
    except OSError:                       # e.g. unsupported filesystem: plain copy
        while count:
            chunk = os.pread(src, min(PIECE, count), offset)
            if not chunk:
                raise EOFError("source file is shorter than expected")
            write_all(dst, chunk)
            offset += len(chunk)
            count -= len(chunk)


def write_checkpoint(path: str, ts: list[Tensor], metadata: dict[str, str]) -> int:
    """Write one safetensors file (atomically via a temp name); returns the header size."""
    header = encode_header(ts, metadata)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sources: dict[str, int] = {}
    try:
        write_all(fd, header)
        for t in ts:
            assert os.lseek(fd, 0, os.SEEK_CUR) == len(header) + t.begin
            if t.source[0] == "gen":
                for piece in generate(t, t.source[1]):
                    write_all(fd, piece)
            else:
                _, src_path, src_off = t.source
                if src_path not in sources:
                    sources[src_path] = os.open(src_path, os.O_RDONLY)
                copy_range(sources[src_path], fd, src_off, t.nbytes)
    finally:
        os.close(fd)
        for sfd in sources.values():
            os.close(sfd)
    os.replace(tmp, path)
    return len(header)


def describe(ts: list[Tensor], header_bytes: int, path: str) -> dict:
    return {
        "path": path,
        "header_bytes": header_bytes,
        "file_bytes": header_bytes + sum(t.nbytes for t in ts),
        "tensors": [{"name": t.name, "dtype": t.dtype, "shape": t.shape,
                     "offset": header_bytes + t.begin, "length": t.nbytes} for t in ts],
    }


def build(out: str, seed: int, size_mib: float, n_tensors: int) -> None:
    total = int(size_mib * (1 << 20))
    ts0, dims = plan_model(total, n_tensors)
    assign_offsets(ts0)
    metadata = {"format": "pt", "generator": "bdn bench/gen_checkpoints.py",
                "seed": str(seed)}
    paths = {c: os.path.join(out, c, FILE_NAME) for c in CKPTS}
    rel = {c: f"{c}/{FILE_NAME}" for c in CKPTS}
    data_bytes = sum(t.nbytes for t in ts0)
    n_bf16 = sum(t.nbytes for t in ts0 if t.dtype == "BF16")
    print(f"plan: {len(ts0)} tensors, {data_bytes} data bytes ({data_bytes / 2**20:.1f} MiB), "
          f"layers={dims['layers']} hidden={dims['hidden']} ffn={dims['ffn']} "
          f"vocab={dims['vocab']}, BF16 {100 * n_bf16 / data_bytes:.1f}% of bytes")

    def timed(label: str, fn):
        t0 = time.monotonic()
        result = fn()
        print(f"{label}: {time.monotonic() - t0:.2f} s")
        return result

    # ckpt-0: everything generated.
    for t in ts0:
        t.source = ("gen", derive_seed(seed, t.name, 0))
    hdr0 = timed("ckpt-0", lambda: write_checkpoint(paths["ckpt-0"], ts0, metadata))

    # ckpt-1: same layout; the chosen tensors regenerated, the rest copied from ckpt-0.
    changed = set(choose_changed(ts0, seed))
    ts1 = []
    for i, t in enumerate(ts0):
        src = (("gen", derive_seed(seed, t.name, 1)) if i in changed
               else ("copy", paths["ckpt-0"], hdr0 + t.begin))
        ts1.append(Tensor(t.name, t.dtype, list(t.shape), t.kind, t.begin, src))
    hdr1 = timed("ckpt-1", lambda: write_checkpoint(paths["ckpt-1"], ts1, metadata))
    assert hdr1 == hdr0

    # ckpt-2: ckpt-1 plus one odd-sized tensor after the INSERT_AFTER-th tensor.
    inserted = Tensor(INSERT_NAME, INSERT_DTYPE, [INSERT_ELEMS], "raw",
                      source=("gen", derive_seed(seed, INSERT_NAME, 2)))
    ts2 = [Tensor(t.name, t.dtype, list(t.shape), t.kind,
                  source=("copy", paths["ckpt-1"], hdr1 + t.begin)) for t in ts1]
    ts2.insert(INSERT_AFTER, inserted)
    assign_offsets(ts2)
    hdr2 = timed("ckpt-2", lambda: write_checkpoint(paths["ckpt-2"], ts2, metadata))
    for old, new in zip(ts1[INSERT_AFTER:], ts2[INSERT_AFTER + 1:]):
        assert ((hdr2 + new.begin) - (hdr1 + old.begin)) % 2 == 1

    ideal1 = sum(ts0[i].nbytes for i in changed)
    manifest = {
        "generator": "bench/gen_checkpoints.py",
        "seed": seed,
        "size_mib": size_mib,
        "tensors_requested": n_tensors,
        "model": dims,
        "checkpoints": {
            "ckpt-0": describe(ts0, hdr0, rel["ckpt-0"]),
            "ckpt-1": describe(ts1, hdr1, rel["ckpt-1"]),
            "ckpt-2": describe(ts2, hdr2, rel["ckpt-2"]),
        },
        "changed_tensors_ckpt1": [ts0[i].name for i in sorted(changed)],
        "changed_tensor_fraction": round(len(changed) / len(ts0), 4),
        "changed_byte_fraction": round(ideal1 / data_bytes, 4),
        "inserted_tensor": {"name": inserted.name, "dtype": inserted.dtype,
                            "shape": inserted.shape, "after": ts1[INSERT_AFTER - 1].name},
        "ideal_new_bytes_ckpt1": ideal1,
        "inserted_tensor_bytes": inserted.nbytes,
        "header_bytes_ckpt2": hdr2,
        "ideal_new_bytes_ckpt2": inserted.nbytes + hdr2,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    print(f"changed in ckpt-1: {len(changed)}/{len(ts0)} tensors, {ideal1} bytes "
          f"({100 * ideal1 / data_bytes:.2f}% of data)")
    for key in ("ideal_new_bytes_ckpt1", "inserted_tensor_bytes", "header_bytes_ckpt2",
                "ideal_new_bytes_ckpt2"):
        print(f"{key} = {manifest[key]}")
    if shutil.which("b3sum"):
        subprocess.run(["b3sum", *(paths[c] for c in CKPTS)], check=True)


# ---------------------------------------------------------------------------------------------
# Checking


class CheckError(Exception):
    pass


def read_header(path: str) -> tuple[int, dict]:
    """Parse a safetensors file; returns (header bytes incl. prefix, tensor entries in data
    order) after confirming the entries tile the data section exactly."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise CheckError(f"{path}: shorter than 8 bytes")
        (n,) = struct.unpack("<Q", prefix)
        if n > size - 8:
            raise CheckError(f"{path}: header length {n} exceeds file size {size}")
        raw = f.read(n)
    if n % 8:
        raise CheckError(f"{path}: header length {n} is not a multiple of 8")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckError(f"{path}: bad JSON header: {e}") from e
    if not isinstance(header, dict):
        raise CheckError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CheckError(f"{path}: __metadata__ must map strings to strings")
    entries = []
    for name, e in header.items():
        try:
            dtype, shape, (b, end) = e["dtype"], e["shape"], e["data_offsets"]
        except (KeyError, TypeError, ValueError) as err:
            raise CheckError(f"{path}: tensor {name!r}: malformed entry") from err
        if dtype not in DTYPE_SIZE or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise CheckError(f"{path}: tensor {name!r}: bad dtype or shape")
        if end - b != math.prod(shape) * DTYPE_SIZE[dtype]:
            raise CheckError(f"{path}: tensor {name!r}: offsets {b}..{end} do not match "
                             f"{dtype}{shape}")
        entries.append((b, end, name, dtype, shape))
    entries.sort()
    pos = 0
    for b, end, name, _, _ in entries:
        if b != pos:
            raise CheckError(f"{path}: tensor {name!r} starts at {b}, expected {pos} "
                             f"({'gap' if b > pos else 'overlap'})")
        pos = end
    if 8 + n + pos != size:
        raise CheckError(f"{path}: data section is {size - 8 - n} bytes, tensors cover {pos}")
    tensors = {name: {"name": name, "dtype": dtype, "shape": shape, "offset": 8 + n + b,
                      "length": end - b} for b, end, name, dtype, shape in entries}
    return 8 + n, tensors


def same_bytes(fa, off_a: int, fb, off_b: int, length: int) -> bool:
    while length:
        n = min(PIECE, length)
        if os.pread(fa, n, off_a) != os.pread(fb, n, off_b):
            return False
        off_a, off_b, length = off_a + n, off_b + n, length - n
    return True


def check(root: str) -> None:
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    parsed = {}
    for c in CKPTS:
        path = os.path.join(root, c, FILE_NAME)
        hdr, tensors = read_header(path)
        want = manifest["checkpoints"][c]
        if hdr != want["header_bytes"] or os.path.getsize(path) != want["file_bytes"]:
            raise CheckError(f"{path}: header/file size differ from manifest")
        if list(tensors.values()) != want["tensors"]:
            raise CheckError(f"{path}: tensor table differs from manifest")
        parsed[c] = (path, hdr, tensors)
        print(f"{c}: {len(tensors)} tensors, header {hdr} bytes, "
              f"{os.path.getsize(path)} bytes: offsets tile the data exactly")

    p0, p1, p2 = (parsed[c][0] for c in CKPTS)
    with open(p0, "rb") as f0, open(p1, "rb") as f1:
        if f0.read(parsed["ckpt-0"][1]) != f1.read(parsed["ckpt-1"][1]):
            raise CheckError("ckpt-0 and ckpt-1 headers differ")
    changed = set(manifest["changed_tensors_ckpt1"])
    ins = manifest["inserted_tensor"]["name"]
    t0, t1, t2 = (parsed[c][2] for c in CKPTS)
    if set(t2) - set(t1) != {ins} or set(t1) - set(t2):
        raise CheckError("ckpt-2 is not ckpt-1 plus exactly the inserted tensor")
    fds = [os.open(p, os.O_RDONLY) for p in (p0, p1, p2)]
    try:
        changed_bytes = 0
        for name, a in t0.items():
            b = t1[name]
            equal = same_bytes(fds[0], a["offset"], fds[1], b["offset"], a["length"])
            if equal == (name in changed):
                raise CheckError(f"ckpt-1 tensor {name!r}: expected "
                                 f"{'new' if name in changed else 'unchanged'} contents")
            changed_bytes += 0 if equal else a["length"]
        if changed_bytes != manifest["ideal_new_bytes_ckpt1"]:
            raise CheckError("ideal_new_bytes_ckpt1 does not match the changed tensors")
        ins_off = t2[ins]["offset"]
        for name, b in t1.items():
            c = t2[name]
            if c["offset"] > ins_off and (c["offset"] - b["offset"]) % 2 == 0:
                raise CheckError(f"ckpt-2 tensor {name!r} moved by an even byte count")
            if not same_bytes(fds[1], b["offset"], fds[2], c["offset"], b["length"]):
                raise CheckError(f"ckpt-2 tensor {name!r} differs from ckpt-1")
    finally:
        for fd in fds:
            os.close(fd)
    if manifest["ideal_new_bytes_ckpt2"] != (manifest["inserted_tensor_bytes"]
                                             + parsed["ckpt-2"][1]):
        raise CheckError("ideal_new_bytes_ckpt2 != inserted_tensor_bytes + header_bytes_ckpt2")
    print(f"series ok: {len(changed)} tensors changed in ckpt-1 ({changed_bytes} bytes); "
          f"ckpt-2 = ckpt-1 + {ins} ({t2[ins]['length']} bytes), later tensors shifted by an "
          f"odd byte count")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", metavar="DIR", help="write the checkpoint series into DIR")
    mode.add_argument("--check", metavar="DIR", help="validate a series written by --out")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--size-mib", type=float, default=1024.0,
                    help="approximate size of each checkpoint (default 1024)")
    ap.add_argument("--tensors", type=int, default=200,
                    help="approximate tensor count of ckpt-0 (default 200, minimum 12)")
    args = ap.parse_args(argv)
    if args.check:
        try:
            check(args.check)
        except (CheckError, OSError, KeyError, ValueError) as e:
            print(f"check failed: {e}", file=sys.stderr)
            return 1
        return 0
    if args.size_mib <= 0 or args.tensors < 12:
        ap.error("--size-mib must be positive and --tensors at least 12")
    build(args.out, args.seed, args.size_mib, args.tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
