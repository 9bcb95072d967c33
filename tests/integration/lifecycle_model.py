#!/usr/bin/env python3
"""The model of lifecycle_crash_loop_test.sh: what must exist after each kill -9.

The model (a JSON file) holds, per volume of bdn:crash, each version the test knows of with its
state: "live" (must be ALIVE and verify), "restorable" (must be DELETED, still restorable, and
verify) or "expired" (deleted past its retention: may be DELETED or gone, never ALIVE), and the
tags of the volume. Each command the test runs (and kills) is described by an op, whose effect
may or may not have happened, since the kill may land before or after its registry write:

  {"op": "push", "volume": V, "tags": [...]}          a new version may appear, ALIVE, with tags
  {"op": "rm", "volume": V, "digest": D, "expire": b}  D may become DELETED (tags dropped)
  {"op": "restore", "volume": V, "digest": D}          D may become ALIVE (without tags)
  {"op": "tag_set", "volume": V, "tag": T, "digest": D}
  {"op": "tag_delete", "volume": V, "tag": T}
  {"op": "gc"}                                         nothing visible may change
  {"op": "none"}

Usage (BDN and, for the server, BDN_REMOTE in the environment):
  lifecycle_model.py init MODEL VOLUME...
  lifecycle_model.py check MODEL OP_JSON [--no-verify]   compare bdn's registry with the model (allowing the
      op's effect or not), verify every live and restorable version, write the model as
      observed; prints "new DIGEST" for a version the op committed. Exit 1 naming what differs.
      --no-verify: the registry only (after a command that was not killed).
  lifecycle_model.py list MODEL VOLUME STATE   the digests in that state, one a line (sorted)
  lifecycle_model.py tags MODEL VOLUME         the volume's tags, one a line
  lifecycle_model.py summary MODEL
"""
import json
import os
import subprocess
import sys

BDN = os.environ.get("BDN", "bdn")
NS = "bdn:crash"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def bdn(*args):
    p = subprocess.run([BDN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def observe(volume):
    """(states {digest: ALIVE|DELETED}, tags {tag: digest}, head) of bdn:crash/VOLUME."""
    ref = f"{NS}/{volume}"
    rc, out, err = bdn("volume", "versions", ref, "--include-deleted", "--json")
    if rc == 3 and "not found" in err:
        return {}, {}, None
    if rc != 0:
        fail(f"versions {ref}: exit {rc}: {err.strip()}")
    states = {v["digest"]: v["lifecycle"] for v in json.loads(out)["versions"]}
    rc, out, err = bdn("volume", "stat", ref, "--json")
    if rc != 0:
        fail(f"stat {ref}: exit {rc}: {err.strip()}")
    st = json.loads(out)
    return states, st.get("tags", {}) or {}, st.get("head") or None


def check(model_path, op, verify):
    with open(model_path) as f:
        model = json.load(f)
    new_digests = []
    for volume, known in model["versions"].items():
        tags_before = model["tags"][volume]
        states, tags, head = observe(volume)
        mine = op.get("volume") == volume
        where = f"{NS}/{volume}"
        after = {}
        for d in sorted(set(known) | set(states)):
            want = known.get(d)
            got = states.get(d)  # None: not listed
            if want == "live":
                ok = {"ALIVE"} | ({"DELETED"} if mine and op["op"] == "rm" and op["digest"] == d else set())
            elif want == "restorable":
                ok = {"DELETED"} | ({"ALIVE"} if mine and op["op"] == "restore" and op["digest"] == d else set())
            elif want == "expired":
                ok = {"DELETED", None} | ({"ALIVE"} if mine and op["op"] == "push" else set())
            else:
                ok = {None} | ({"ALIVE"} if mine and op["op"] == "push" else set())
            if got not in ok:
                fail(f"{where}@{d}: the model says {want or 'never committed'} (op {json.dumps(op)}), "
                     f"bdn says {got or 'not listed'}")
            if got == "ALIVE":
                after[d] = "live"
                if want not in ("live", "restorable"):
                    new_digests.append(d)
            elif got == "DELETED":
                if want == "live":  # the rm of the op took effect
                    after[d] = "expired" if op.get("expire") else "restorable"
                else:
                    after[d] = want
        # Tags: as before, except what the op may have changed; each names a live version.
        expect = {t: d for t, d in tags_before.items() if after.get(d) == "live"}
        allowed_extra = {}
        if mine and op["op"] == "tag_set":
            allowed_extra[op["tag"]] = {expect.get(op["tag"]), op["digest"]}
        if mine and op["op"] == "tag_delete":
            allowed_extra[op["tag"]] = {expect.get(op["tag"]), None}
        if mine and op["op"] == "push":
            for t in op.get("tags", []):
                allowed_extra[t] = {expect.get(t), *new_digests}
        for t in sorted(set(expect) | set(tags)):
            got = tags.get(t)
            ok = allowed_extra.get(t, {expect.get(t)})
            if got not in ok:
                fail(f"{where}:{t}: the model says {sorted(x or 'absent' for x in ok)} "
                     f"(op {json.dumps(op)}), bdn says {got or 'absent'}")
            if got is not None and after.get(got) != "live":
                fail(f"{where}:{t} names {got}, which is not live")
        live = {d for d, s in after.items() if s == "live"}
        if (head is None) != (not live) or (head is not None and head not in live):
            fail(f"{where}: head is {head}, the live versions are {sorted(live)}")
        model["versions"][volume] = after
        model["tags"][volume] = {t: d for t, d in tags.items()}
    # Every live and restorable version reads back whole.
    verified = 0
    for volume, known in model["versions"].items():
        for d, s in sorted(known.items()):
            if s not in ("live", "restorable") or not verify:
                continue
            rc, _, err = bdn("volume", "verify", f"{NS}/{volume}@{d}")
            if rc != 0:
                fail(f"verify {NS}/{volume}@{d} ({s}): exit {rc}: {err.strip()}")
            verified += 1
    with open(model_path + ".tmp", "w") as f:
        json.dump(model, f, indent=1, sort_keys=True)
    os.replace(model_path + ".tmp", model_path)
    for d in new_digests:
        print(f"new {d}")
    print(f"verified {verified}")


def main():
    cmd = sys.argv[1]
    path = sys.argv[2]
    if cmd == "init":
        model = {"versions": {v: {} for v in sys.argv[3:]}, "tags": {v: {} for v in sys.argv[3:]}}
        with open(path, "w") as f:
            json.dump(model, f)
        return
    with open(path) as f:
        model = json.load(f)
    if cmd == "check":
        check(path, json.loads(sys.argv[3]), "--no-verify" not in sys.argv[4:])
    elif cmd == "list":
        for d, s in sorted(model["versions"][sys.argv[3]].items()):
            if s == sys.argv[4]:
                print(d)
    elif cmd == "tags":
        for t in sorted(model["tags"][sys.argv[3]]):
            print(t)
    elif cmd == "summary":
        parts = []
        for v, known in sorted(model["versions"].items()):
            counts = {s: sum(1 for x in known.values() if x == s) for s in ("live", "restorable", "expired")}
            parts.append(f"{v}: {counts['live']} live, {counts['restorable']} restorable, "
                         f"{counts['expired']} expired, {len(model['tags'][v])} tags")
        print("; ".join(parts))
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
