#!/usr/bin/env python3
"""Checks the module layering of ARCHITECTURE.md against the code.

ARCHITECTURE.md's table lists the modules top to bottom with the modules each "may use"; a module
may depend on those and, through them, on everything they may use (the transitive closure). This
check fails, naming file and line, when
  - a source or header under src/bdn/<module>/ includes "bdn/<other>/..." outside that closure,
  - a module's CMakeLists.txt links a bdn_<other> library outside it (its tests may also use
    what the CMakeLists.txt links to the test target by name: a declared test-only dependency),
  - apps/bdn includes anything but bdn/cli/ and bdn/base/ (main stays thin),
  - a folder of src/bdn/ is missing from the table, or the table names a module that uses one
    listed below it (dependencies point one way).
Usage: scripts/check_layers.py [REPO_ROOT]   (exit 0: clean, 1: violations, 2: unreadable table)
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
src = root / "src" / "bdn"

# Rows of the table: | `name/` | what | may use |
rows = []
for line in (root / "ARCHITECTURE.md").read_text().splitlines():
    m = re.match(r"^\| `([a-z_]+)/` \|.*\| ([^|]*) \|$", line)
    if m and m.group(1) != "bdn":
        uses = [u.strip() for u in m.group(2).split(",") if u.strip() not in ("", "—", "-")]
        rows.append((m.group(1), uses))
if not rows:
    print("check_layers: no module table found in ARCHITECTURE.md", file=sys.stderr)
    sys.exit(2)

problems = []
order = {name: i for i, (name, _) in enumerate(rows)}
direct = dict(rows)
for name, uses in rows:
    for u in uses:
        if u not in order:
            problems.append(f"ARCHITECTURE.md: {name}/ may use {u}/, which is not in the table")
        elif order[u] >= order[name]:
            problems.append(f"ARCHITECTURE.md: {name}/ may use {u}/, which is listed below it")


def closure(name, seen=None):
    seen = set() if seen is None else seen
    for u in direct.get(name, []):
        if u not in seen:
            seen.add(u)
            closure(u, seen)
    return seen


modules = sorted(p.name for p in src.iterdir() if p.is_dir())
for mod in modules:
    if mod not in direct:
        problems.append(f"src/bdn/{mod}/: a module missing from ARCHITECTURE.md's table")

include = re.compile(r'^\s*#\s*include\s*"bdn/([a-z_]+)/')


def check_includes(files, allowed, who):
    for f in files:
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = include.match(line)
            if m and m.group(1) not in allowed:
                rel = f.relative_to(root)
                problems.append(f"{rel}:{n}: {who} includes bdn/{m.group(1)}/, outside what it "
                                f"may use ({', '.join(sorted(allowed - {who})) or 'nothing'})")


for mod in modules:
    if mod not in direct:
        continue
    allowed = closure(mod) | {mod}
    files = [p for p in (src / mod).rglob("*") if p.suffix in (".h", ".cc")]
    # Tests (*_test.cc and their *_test_util.h / *_test_support.h headers) may use the test kit
    # as well as their module's closure.
    def is_test(f):
        return f.name.endswith(("_test.cc", "_test_util.h", "_test_support.h"))
    code = [f for f in files if not is_test(f)]
    tests = [f for f in files if is_test(f)]
    check_includes(code, allowed, mod)
    cmake = src / mod / "CMakeLists.txt"
    text = cmake.read_text() if cmake.exists() else ""
    # A test may also use what its CMakeLists.txt links to the test target by name (a declared
    # test-only dependency, e.g. the node cache's end-to-end test under a mount).
    test_allowed = allowed | {"testing"}
    for libs in re.findall(rf"target_link_libraries\(bdn_{mod}_(?:sanitize_)?test\s+PRIVATE([^)]*)\)",
                           text):
        for lib in re.findall(r"\bbdn_([a-z_]+)", libs):
            test_allowed |= closure(lib) | {lib}
    check_includes(tests, test_allowed, mod)
    if text:
        deps = re.search(r"DEPS([^)]*)", text)
        for lib in re.findall(r"\bbdn_([a-z_]+)", deps.group(1) if deps else ""):
            if lib not in allowed:
                problems.append(f"{cmake.relative_to(root)}: {mod} links bdn_{lib}, outside "
                                f"what it may use")

apps = [p for p in (root / "apps" / "bdn").glob("*") if p.suffix in (".h", ".cc")]
check_includes(apps, {"cli", "base"}, "apps/bdn")

for p in problems:
    print(p, file=sys.stderr)
if problems:
    print(f"check_layers: {len(problems)} violation(s) of ARCHITECTURE.md's layering",
          file=sys.stderr)
    sys.exit(1)
print(f"check_layers: {len(modules)} modules follow ARCHITECTURE.md's layering")
