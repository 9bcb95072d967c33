#!/usr/bin/env python3
"""A deterministic model of thousands of replicas pulling one 100 GB volume at once (docs/scaling.md).

Every replica mounts (or pulls) the same version at the same moment. Its reads go
mount -> cache node (`bdn cache serve`, chosen per chunk by rendezvous hashing) -> origin
(`bdn serve`, R replicas behind one address) -> object store (packs of 64 MiB) and PostgreSQL
(`--db`). The model counts, for N replicas in C clusters of K cache nodes each, the bytes and
requests each tier moves and the PostgreSQL round trips each operation costs, divides them by the
capacity of each resource, and names the resource that needs the longest: the first bottleneck.

Every input is a named constant below with where it comes from: a line of docs/benchmarks.md
(measured on the project's 2-vCPU VM), the source file whose behaviour it encodes, or
"assumption" (a hardware figure nobody here measured). The one simulation is the spread of
chunks over cache nodes: rendezvous hashing exactly as src/bdn/remote/cluster_chunk_store.cc
computes it (splitmix64(seed(node) XOR first 8 bytes of the chunk id)), over a seeded sample of
chunk ids; SHA-256 stands in for BLAKE3 (both outputs are uniform; BLAKE3 is not in Python's
standard library). The model is a steady-state one: it assumes the tiers overlap perfectly (a
cluster's fill from the origin runs alongside the replicas' reads), so each time is a lower bound.

Usage:
  python3 bench/scaling_model.py            print the tables (docs/scaling.md holds them verbatim)
  python3 bench/scaling_model.py --check    check the model's invariants and that docs/scaling.md
                                            holds exactly what the first form prints (ctest
                                            scaling_model); exit 1 naming what differs
"""
import hashlib
import math
import pathlib
import struct
import sys

GB = 10**9
GiB = 2**30
MiB = 2**20

# --- The workload -------------------------------------------------------------------------------
VOLUME_BYTES = 100 * GB  # the volume (issue 12 item 9)
REPLICAS = [100, 1000, 5000, 10000]  # N (the brief)
TARGET_MINUTES = 10  # rollout deadline the sizing table aims at (assumption: a deploy window)
# Replicas per cluster, so C = ceil(N / CLUSTER_REPLICAS) (assumption: one cache tier per ~1,000
# hosts, e.g. one Kubernetes cluster or one data-centre hall).
CLUSTER_REPLICAS = 1000
# Replicas start within this window; each resolves the ref once at start (assumption).
START_WINDOW_S = 30
BASELINE_K = 3  # cache nodes per cluster in issue 12 item 5's test (3 nodes, 8 cold mounts)
BASELINE_R = 2  # origin replicas of scripts/cluster.sh (issue 12 item 6: two origins)

# --- Measured on the project's VM (docs/benchmarks.md) ----------------------------------------
# Chunker table, 16/64/256 row: ckpt-0 is 1,073,766,384 bytes in 14,390 chunks.
MEAN_CHUNK_BYTES = 1073766384 / 14390  # 74,619 bytes (72.9 KiB)
# Same table: chunk index bytes per GiB (36 bytes per chunk); the manifest is negligible.
INDEX_BYTES_PER_GIB = 518028
# "Delivery network": cold sequential read, mount -> node cache -> origin: 194 MiB/s. The
# replica's own read rate (client CPU-bound on 2 vCPUs shared with the origin: a floor).
CLIENT_READ_BPS = 194 * MiB
# "Delivery network": 37 HTTP requests per GiB for a mount's cold read (~38 in the table of
# changes); what each replica sends the origin when there is no cache tier.
CLIENT_REQUESTS_PER_GIB = 38
# "Delivery network": the mount's prefetch tops up half its 64 MiB window as one batch.
CLIENT_BATCH_BYTES = 32 * MiB
# "HTTP server under load": new server, POST /v1/chunks/batch of 64 ids, 16 connections:
# 760 MB/s on 2 vCPUs (shared with wrk): 2 x 2^30 / 760e6 = 2.83 CPU-s per GiB served.
SERVE_CPU_S_PER_GIB = 2 * GiB / 760e6
# "Delivery network": "the origin spends ~4.5 CPU-s per GiB reading, verifying and sending".
ORIGIN_CPU_S_PER_GIB = 4.5
# "Delivery network": of the mount's ~6 CPU-s per GiB, ~23 % writing chunks into the node cache:
# a cache node's cost of storing what it fetches (one file per chunk then; regions now: an
# upper bound).
NODE_FILL_CPU_S_PER_GIB = 0.23 * 6
# "Delivery network": a remote push of ckpt-0 at 161 MiB/s (for the push's PostgreSQL rate).
PUSH_BPS = 161 * MiB

# --- From the code ------------------------------------------------------------------------------
# ARCHITECTURE.md (remote/, cache/): a cache node sends its misses up in groups of 64 chunks.
NODE_GROUP_CHUNKS = 64
# src/bdn/origin/origin.h: scope_ttl 30 s (an origin looks a version up once per 30 s) and
# src/bdn/origin/chunk_scope.h UpstreamReadAuthority (a node asks the origin once per
# (credentials, version) per 30 s).
SCOPE_TTL_S = 30
# src/bdn/origin/origin.h claim_ttl 30 s; src/bdn/remote/remote_registry.cc renews every TTL/3.
CLAIM_RENEW_S = 10
# Branch i12-s3, src/bdn/objstore/object_pack_store.h: pack_target_bytes 64 MiB,
# readahead_bytes 32 MiB (a sequential read of a pack is one ranged GET per 32 MiB),
# gets_in_flight 8 per origin.
PACK_BYTES = 64 * MiB
S3_GET_BYTES = 32 * MiB
S3_GETS_IN_FLIGHT = 8
# src/bdn/cache/node_cache.h: regions of 32 MiB; eviction down to 0.9 of --cache-size; the
# default --cache-size is 10 GiB.
REGION_BYTES = 32 * MiB
CACHE_LOW_WATERMARK = 0.9
DEFAULT_CACHE_SIZE = 10 * GiB

# --- Hardware (assumptions: nobody measured these here) ---------------------------------------
NIC_BPS = 25e9 / 8  # 25 Gbit/s per cache node and per origin, line rate
NVME_WRITE_BPS = 2e9  # per cache node
NVME_READ_BPS = 3e9
NODE_CORES = 16  # per cache node and per origin
NODE_RAM = 128 * GiB  # per cache node; 3/4 of it usable as page cache for the cached share
PAGE_CACHE_FRACTION = 0.75
S3_STREAM_BPS = 90e6  # one ranged GET stream from S3-compatible storage (assumption)
S3_GETS_PER_S_PER_PREFIX = 5500  # AWS S3's documented per-prefix GET rate
# PostgreSQL round trips per second one primary sustains for bdn's short statements (primary-key
# reads, single-row writes) on 8 vCPUs: assumption, deliberately below what pgbench -S reports.
PG_RT_PER_S = 20000

# --- PostgreSQL cost of each operation (counted in the code, PostgreSQL backend) --------------
# A round trip is one statement, BEGIN or COMMIT. Every authenticated request to an origin first
# reads the key: SqlKeyStore::Authenticate, one statement-level SELECT (no BEGIN), not cached.
# Cache nodes authenticate nothing themselves (Origin::Authenticate, role kCache).
# (operation, HTTP requests, round trips, write transactions, where in the code)
PG_OPERATIONS = [
    ("any authenticated request to an origin (key lookup)", "1", 1, 0,
     "sql_key_store.cc Authenticate"),
    ("resolve a tag or head (GET /v1/volumes/ns/vol)", "1", 1 + 5, 0,
     "sql_registry.cc GetVolume: BEGIN, volume, tags, version counts, COMMIT"),
    ("chunk read at an origin, first per version per 30 s per origin", "-", 5, 0,
     "chunk_scope.cc RegistryReadAuthority -> GetVersion: BEGIN, volume id, version, tags, COMMIT"),
    ("chunk read at a cache node, first per (key, version) per 30 s per node", "1 to origin", 1, 0,
     "chunk_scope.cc UpstreamReadAuthority: empty batch to the origin"),
    ("chunk read at a cache node otherwise", "0 to origin", 0, 0, "node answers alone"),
    ("push claim acquire", "1", 1 + 4, 1,
     "push_claims.cc PgPushClaims::Acquire: BEGIN, SELECT FOR UPDATE, INSERT, COMMIT"),
    ("push claim renew (every 10 s of a push)", "1", 1 + 3, 1,
     "push_claims.cc Renew: BEGIN, UPDATE, COMMIT"),
    ("push claim release", "1", 1 + 3, 1, "push_claims.cc Release: BEGIN, DELETE, COMMIT"),
    ("chunk upload batch (POST /v1/chunks/upload, ~1 MiB of chunks: ~1,000 per GiB)", "1", 1, 0,
     "key lookup; on --store s3:// one claim transaction and doom look per batch"),
    ("chunk upload (PUT /v1/chunks/id, one chunk; older clients)", "1", 1, 0, "key lookup only"),
    ("missing query (POST /v1/chunks/missing, 4096 ids)", "1", 1, 0,
     "key lookup; a namespace-scoped key adds <= 1 ListVolumes per s per namespace"),
    ("commit with one tag", "1", 1 + 3 + 1 + 16, 1,
     "FindCommit 3, CheckCommit 1, Commit: BEGIN, xact lock, idempotency, volume insert, "
     "FOR UPDATE, sequence, version, insert, head, head update, tag read+write, bump, "
     "idempotency delete+insert, COMMIT"),
    ("tag move (PUT /v1/volumes/ns/vol/tags/t)", "1", 1 + 11, 1,
     "SetTag: BEGIN, xact lock, idempotency, FOR UPDATE, version, tags, upsert, bump, "
     "idempotency delete+insert, COMMIT"),
]
RT_AUTH = 1
RT_RESOLVE = 6
RT_VERSION_LOOKUP = 5
RT_PUT = 1
RT_RENEW = 4

SAMPLE_CHUNKS = 20000  # chunk ids in the rendezvous simulation


def mix(z):
    """splitmix64's finalizer, as cluster_chunk_store.cc's Mix."""
    m = 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def first8(data):
    return struct.unpack("<Q", hashlib.sha256(data).digest()[:8])[0]


_spread_cache = {}


def spread(k):
    """Rendezvous over k nodes for SAMPLE_CHUNKS ids: (max/mean share with all nodes up, the
    same with node 0 down, both measured on the sample and then scaled to the volume's chunk
    count: the relative spread of a uniform assignment shrinks as 1/sqrt(chunks))."""
    if k in _spread_cache:
        return _spread_cache[k]
    seeds = [first8(f"http://cache-{i}.cluster.local:8441".encode()) for i in range(k)]
    owners = [0] * k
    after = [0] * k  # owners when node 0 is down: the next node by weight
    for c in range(SAMPLE_CHUNKS):
        key = first8(b"chunk-%d" % c)
        best = second = -1  # the two highest weights' nodes (cluster_chunk_store.cc RankBySeeds)
        bw = sw = -1
        for i, s in enumerate(seeds):
            w = mix(s ^ key)
            if w > bw:
                second, sw, best, bw = best, bw, i, w
            elif w > sw:
                second, sw = i, w
        owners[best] += 1
        after[best if best != 0 else second] += 1
    scale = math.sqrt(SAMPLE_CHUNKS / (VOLUME_BYTES / MEAN_CHUNK_BYTES))
    up = max(owners) / (SAMPLE_CHUNKS / k)
    down = max(after) / (SAMPLE_CHUNKS / (k - 1)) if k > 1 else 1.0
    res = (up, down, 1 + (up - 1) * scale, 1 + (down - 1) * scale)
    _spread_cache[k] = res
    return res


def clusters(n):
    return math.ceil(n / CLUSTER_REPLICAS)


def chunks_per_origin_request(k):
    """Chunks in one request a cache node sends the origin: its share of a client batch
    (a 32 MiB top-up spread over k nodes), at most NODE_GROUP_CHUNKS."""
    return min(NODE_GROUP_CHUNKS, CLIENT_BATCH_BYTES / MEAN_CHUNK_BYTES / k)


def metadata_bytes():
    return VOLUME_BYTES / GiB * INDEX_BYTES_PER_GIB


def scenario(n, k, r):
    """Loads and per-resource times (seconds) of N replicas, C clusters, K nodes each, R origins."""
    c = clusters(n)
    per_cluster = n / c
    v = VOLUME_BYTES + metadata_bytes()  # what each replica reads
    _, _, up, down = spread(k)
    share = v / k * up  # the busiest node's share of the volume
    node_egress = per_cluster * share
    origin_egress = c * v  # each chunk once per cluster (issue 12 item 5)
    t = {}
    t["replica read"] = v / CLIENT_READ_BPS
    t["cache-node NIC"] = node_egress / NIC_BPS
    t["cache-node CPU"] = (node_egress * SERVE_CPU_S_PER_GIB +
                           share * NODE_FILL_CPU_S_PER_GIB) / GiB / NODE_CORES
    in_ram = share <= NODE_RAM * PAGE_CACHE_FRACTION
    t["cache-node disk"] = share / NVME_WRITE_BPS + (0 if in_ram else node_egress / NVME_READ_BPS)
    t["origin NIC"] = origin_egress / (r * NIC_BPS)
    t["origin CPU"] = origin_egress * ORIGIN_CPU_S_PER_GIB / GiB / (r * NODE_CORES)
    t["origin object-store reads"] = origin_egress / (r * S3_GETS_IN_FLIGHT * S3_STREAM_BPS)
    gets = origin_egress / S3_GET_BYTES
    t["object-store GET rate"] = gets / S3_GETS_PER_S_PER_PREFIX
    pg = pg_load(n, k, r, max(t.values()))
    t["PostgreSQL"] = pg["total_rt"] / PG_RT_PER_S
    return {"c": c, "node_egress": node_egress, "share": share, "share_down": v / (k - 1) * down
            if k > 1 else v, "origin_egress": origin_egress, "times": t, "gets": gets, "pg": pg,
            "in_ram": in_ram}


def pg_load(n, k, r, duration, keys_per_cluster=1):
    """PostgreSQL round trips of the rollout. keys_per_cluster: distinct pull keys the replicas of
    one cluster use (1: one shared secret; n/c: one key per replica)."""
    c = clusters(n)
    v = VOLUME_BYTES + metadata_bytes()
    resolve = n * RT_RESOLVE
    # Each node asks the origin once per (key, version) per 30 s while the rollout lasts; the
    # origin authenticates that request and looks the version up once per 30 s per origin.
    periods = max(1.0, duration / SCOPE_TTL_S)
    checks = c * k * keys_per_cluster * periods * RT_AUTH + r * periods * RT_VERSION_LOOKUP
    # The nodes' miss requests, each authenticated with the node's own key.
    miss_requests = c * (v / MEAN_CHUNK_BYTES) / chunks_per_origin_request(k)
    misses = miss_requests * RT_AUTH
    total = resolve + checks + misses
    return {"resolve_rt_s": resolve / START_WINDOW_S, "checks_rt_s": checks / duration,
            "miss_rt_s": misses / duration, "total_rt": total,
            "avg_rt_s": total / duration}


def no_cache_pg_rt(n, duration):
    """Without a cache tier every replica's batch requests reach an origin: one key lookup each."""
    return n * ((VOLUME_BYTES + metadata_bytes()) / GiB * CLIENT_REQUESTS_PER_GIB) / duration


_sized = {}


def size_for_target(n):
    """The smallest K and R that finish the rollout within TARGET_MINUTES, resource by resource."""
    if n in _sized:
        return _sized[n]
    target = TARGET_MINUTES * 60
    c = clusters(n)
    # Start from the bound of a perfectly even spread at line rate, then add nodes.
    k = max(BASELINE_K, math.ceil(n / c * VOLUME_BYTES / (NIC_BPS * target)))
    while True:
        s = scenario(n, k, BASELINE_R)
        tt = s["times"]
        if max(tt["cache-node NIC"], tt["cache-node CPU"], tt["cache-node disk"]) <= target:
            break
        k += 1
    r = 1
    while True:
        s = scenario(n, k, r)
        tt = s["times"]
        if max(tt["origin NIC"], tt["origin CPU"], tt["origin object-store reads"]) <= target:
            break
        r += 1
    _sized[n] = (k, r, c, scenario(n, k, r))
    return _sized[n]


def fmt_bytes(b):
    if b >= 1e12:
        return f"{b / 1e12:.2f} TB"
    if b >= 1e9:
        return f"{b / 1e9:.1f} GB"
    return f"{b / 1e6:.0f} MB"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(out)


def report():
    out = []
    v = VOLUME_BYTES + metadata_bytes()
    out.append(f"Volume: {fmt_bytes(VOLUME_BYTES)} of data + {fmt_bytes(metadata_bytes())} of chunk "
               f"indexes = {v / MEAN_CHUNK_BYTES:,.0f} chunks of {MEAN_CHUNK_BYTES:,.0f} bytes "
               f"on average; {math.ceil(VOLUME_BYTES / PACK_BYTES):,} packs of 64 MiB in the "
               f"object store. Clusters C = ceil(N / {CLUSTER_REPLICAS}). Target: every replica "
               f"has read the volume within {TARGET_MINUTES} minutes.")
    out.append("")

    out.append("### 1. Spread of chunks over cache nodes (rendezvous simulation)")
    out.append("")
    rows = []
    ks = sorted({BASELINE_K} | {size_for_target(n)[0] for n in REPLICAS})
    for k in ks:
        up, down, up_v, down_v = spread(k)
        rows.append([k, f"{up:.3f}", f"{down:.3f}", f"{up_v:.4f}", f"{down_v:.4f}"])
    out.append(table(["K", f"busiest/mean, {SAMPLE_CHUNKS:,} ids", "same, one node down",
                      "busiest/mean, scaled to the volume", "same, one node down"], rows))
    out.append("")

    out.append("### 2. Origin egress")
    out.append("")
    rows = []
    for n in REPLICAS:
        c = clusters(n)
        rows.append([n, c, f"{fmt_bytes(n * v)} ({n * v / VOLUME_BYTES:,.0f}x)",
                     f"{fmt_bytes(c * v)} ({c * v / VOLUME_BYTES:.3f}x; "
                     f"{v / VOLUME_BYTES:.3f}x per cluster)",
                     f"{fmt_bytes(v)} ({v / VOLUME_BYTES:.3f}x)"])
    out.append(table(["N", "C", "no cache tier", "cache tier per cluster",
                      "plus a regional tier"], rows))
    out.append("")

    out.append(f"### 3. Baseline: K = {BASELINE_K} cache nodes per cluster, R = {BASELINE_R} "
               f"origins: minutes each resource needs")
    out.append("")
    names = list(scenario(REPLICAS[0], BASELINE_K, BASELINE_R)["times"].keys())
    rows = []
    for n in REPLICAS:
        s = scenario(n, BASELINE_K, BASELINE_R)
        t = s["times"]
        first = max(t, key=t.get)
        rows.append([n, s["c"]] + [f"{t[x] / 60:.1f}" for x in names] + [f"**{first}**"])
    out.append(table(["N", "C"] + names + ["first bottleneck"], rows))
    out.append("")

    out.append(f"### 4. Sized to finish in {TARGET_MINUTES} minutes")
    out.append("")
    rows = []
    for n in REPLICAS:
        k, r, c, s = size_for_target(n)
        t = s["times"]
        tmin = TARGET_MINUTES * 60
        node_bps = s["node_egress"] / tmin
        # Holds the node's share with one node down without evicting during the rollout, even
        # after an eviction pass (which empties down to the low watermark).
        cache_size = s["share_down"] / CACHE_LOW_WATERMARK
        rest = {x: t[x] for x in t if x not in ("cache-node NIC", "cache-node CPU",
                                                  "cache-node disk")}
        nxt = max(rest, key=rest.get)
        rows.append([
            n, c, k, f"{n / c / k:.1f}", fmt_bytes(s["node_egress"]),
            f"{node_bps * 8 / 1e9:.1f} Gbit/s ({node_bps / NIC_BPS:.0%})",
            f"{t['cache-node CPU'] / tmin * NODE_CORES:.1f}",
            f"{s['share'] / tmin / 1e6:.0f} MB/s" + ("" if s["in_ram"] else " + reads"),
            fmt_bytes(cache_size) + (" (over the 10 GiB default)" if cache_size >
                                     DEFAULT_CACHE_SIZE else ""),
            r, f"{s['origin_egress'] / tmin * 8 / 1e9:.1f} Gbit/s",
            f"{max(t.values()) / 60:.1f} ({max(t, key=t.get)})",
            f"{nxt} ({t[nxt] / tmin:.0%})"])
    out.append(table(["N", "C", "K per cluster", "replicas per node", "egress per node",
                      "node NIC at target", "node cores busy", "node disk writes",
                      "--cache-size (one node down)", "R origins", "origin egress rate",
                      "rollout minutes (limit)", "next limit (share of target)"], rows))
    out.append("")

    out.append(f"### 5. PostgreSQL during the rollout (sized configuration of table 4; "
               f"capacity assumed {PG_RT_PER_S:,} round trips/s)")
    out.append("")
    rows = []
    for n in REPLICAS:
        k, r, c, s = size_for_target(n)
        dur = max(s["times"].values())
        shared = pg_load(n, k, r, dur, 1)
        own = pg_load(n, k, r, dur, n / c)
        nc = no_cache_pg_rt(n, dur)
        rows.append([n, f"{shared['resolve_rt_s']:,.0f}", f"{shared['checks_rt_s']:,.1f}",
                     f"{own['checks_rt_s']:,.0f}", f"{shared['miss_rt_s']:,.0f}",
                     f"{shared['avg_rt_s'] + shared['resolve_rt_s']:,.0f} "
                     f"({(shared['avg_rt_s'] + shared['resolve_rt_s']) / PG_RT_PER_S:.1%})",
                     f"{own['avg_rt_s'] + own['resolve_rt_s']:,.0f} "
                     f"({(own['avg_rt_s'] + own['resolve_rt_s']) / PG_RT_PER_S:.0%})",
                     f"{nc:,.0f} ({nc / PG_RT_PER_S:.0%})"])
    out.append(table(["N", f"resolve ref, first {START_WINDOW_S} s (rt/s)",
                      "access checks, one shared key (rt/s)", "access checks, a key per replica "
                      "(rt/s)", "node miss requests (rt/s)", "peak total, shared key (rt/s)",
                      "peak total, a key per replica (rt/s)",
                      "no cache tier: chunk requests (rt/s)"], rows))
    out.append("")
    push_s = VOLUME_BYTES / PUSH_BPS
    push_rt = (v / MEAN_CHUNK_BYTES * RT_PUT + push_s / CLAIM_RENEW_S * RT_RENEW) / push_s
    out.append(f"One push of the volume at {PUSH_BPS / MiB:.0f} MiB/s ({push_s / 60:.1f} min): "
               f"{push_rt:,.0f} rt/s (one key lookup per chunk upload), then one commit "
               f"(21 rt, one write transaction holding the volume's row).")
    out.append("")

    out.append("### 6. Object store")
    out.append("")
    rows = []
    for n in REPLICAS:
        k, r, c, s = size_for_target(n)
        dur = max(s["times"].values())
        rows.append([n, c, f"{GiB / S3_GET_BYTES:.0f}", f"{s['gets']:,.0f}",
                     f"{s['gets'] / dur:,.1f}",
                     f"{s['gets'] / dur / S3_GETS_PER_S_PER_PREFIX:.2%}",
                     f"{s['origin_egress'] / dur * 8 / 1e9:.1f} Gbit/s"])
    out.append(table(["N", "C", "GETs per GiB", "GETs in the rollout", "GETs/s",
                      "of one prefix's GET rate", "bytes read"], rows))
    out.append("")

    out.append("### 7. PostgreSQL round trips per operation (counted in the code)")
    out.append("")
    out.append(table(["operation", "HTTP requests", "round trips", "write transactions",
                      "where"], [list(o) for o in PG_OPERATIONS]))
    return "\n".join(out) + "\n"


BEGIN = "<!-- scaling_model.py output: begin -->"
END = "<!-- scaling_model.py output: end -->"


def check(text):
    problems = []
    v = VOLUME_BYTES + metadata_bytes()
    prev = None
    for n in REPLICAS:
        s = scenario(n, BASELINE_K, BASELINE_R)
        per_cluster = s["origin_egress"] / s["c"] / VOLUME_BYTES
        if not 1.0 <= per_cluster <= 1.1:
            problems.append(f"N={n}: origin egress per cluster {per_cluster:.3f}x, not 1.0-1.1x")
        k, r, c, sized = size_for_target(n)
        if max(sized["times"][x] for x in ("cache-node NIC", "cache-node CPU", "cache-node disk",
                                           "origin NIC", "origin CPU",
                                           "origin object-store reads")) > TARGET_MINUTES * 60:
            problems.append(f"N={n}: sized K={k}, R={r} misses the target")
        cur = (s["node_egress"], s["origin_egress"], s["pg"]["total_rt"], s["gets"], k, r,
               max(s["times"].values()))
        if prev is not None:
            for name, a, b in zip(("cache-node egress", "origin egress", "PostgreSQL round trips",
                                   "object-store GETs", "K", "R", "rollout time"), prev, cur):
                if b < a:
                    problems.append(f"N={n}: {name} fell from {a} to {b} as N grew")
        prev = cur
        if abs(n * v / (n * VOLUME_BYTES) - v / VOLUME_BYTES) > 1e-9:
            problems.append("no-cache egress is not N x volume")
    for k in (3, 8, 32):
        up, down, _, _ = spread(k)
        if not (1.0 <= up < 1.1 and 1.0 <= down < 1.1):
            problems.append(f"rendezvous over {k} nodes is uneven: {up:.3f}, {down:.3f}")
    if BEGIN not in text or END not in text:
        problems.append(f"docs/scaling.md: markers {BEGIN} / {END} missing")
    else:
        doc = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
        now = report().strip("\n")
        if doc != now:
            a, b = doc.splitlines(), now.splitlines()
            for i in range(max(len(a), len(b))):
                x = a[i] if i < len(a) else "<none>"
                y = b[i] if i < len(b) else "<none>"
                if x != y:
                    problems.append(f"docs/scaling.md differs from the model's output at line "
                                    f"{i + 1} of the tables:\n  doc:   {x}\n  model: {y}\n"
                                    f"(run python3 bench/scaling_model.py and paste its output "
                                    f"between the markers)")
                    break
    return problems


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        root = pathlib.Path(__file__).resolve().parent.parent
        problems = check((root / "docs" / "scaling.md").read_text())
        for p in problems:
            print("scaling_model: " + p, file=sys.stderr)
        sys.exit(1 if problems else 0)
    if len(sys.argv) > 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(report())


if __name__ == "__main__":
    main()
