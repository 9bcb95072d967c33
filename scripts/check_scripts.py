#!/usr/bin/env python3
"""Fails on shell idioms that make a test pass or fail at random (issue 8 item 4).

Every script here runs under `set -o pipefail`, so a pipeline whose reader may exit before its
writer has finished (`| grep -q`, `| head`, `| sed ...q`) fails at random when the writer dies of
SIGPIPE, and a negated one (`! a | grep -q x`) then passes when it should fail. A negated grep
(`! grep -q x f`) passes when grep itself fails, e.g. on a missing file. `pgrep -f` finds
any process whose command line matches, including another test's. Capture the output first
(`out=$(cmd)`, then `[[ $out == *x* ]]`) and track the PIDs a script starts.
Usage: scripts/check_scripts.py [REPO_ROOT]   (exit 0: clean, 1: lines to fix, named)
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
files = sorted(
    list((root / "tests" / "integration").glob("*.sh")) + list((root / "scripts").glob("*.sh")) +
    list((root / "bench").glob("*.sh")) + [root / ".ci" / "run"])
rules = [
    (re.compile(r"\|\s*grep\s+(-[A-Za-z]*q|--quiet)"), "a pipeline into grep -q"),
    (re.compile(r"\|\s*grep\s+(-[A-Za-z]*m|--max-count)"), "a pipeline into grep -m"),
    (re.compile(r"\|\s*head\b"), "a pipeline into head"),
    (re.compile(r"\|\s*sed\s+(-n\s+)?'?[0-9]*q"), "a pipeline into sed ...q"),
    (re.compile(r"\bpgrep\s+(-[A-Za-z]*\s+)*-[A-Za-z]*f"), "pgrep -f"),
    # `! grep -q x file` also passes when grep fails (a missing file, exit 2): use assert_absent.
    (re.compile(r"!\s*grep\b"), "a negated grep (passes on a missing file; use assert_absent)"),
]
problems = []
for f in files:
    if not f.exists():
        continue
    for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for rx, what in rules:
            if rx.search(code):
                problems.append(f"{f.relative_to(root)}:{n}: {what}: {line.strip()}")
for p in problems:
    print(p, file=sys.stderr)
if problems:
    print(f"check_scripts: {len(problems)} line(s) that can fail at random under pipefail",
          file=sys.stderr)
    sys.exit(1)
print(f"check_scripts: {len(files)} scripts, no early-exit readers in pipelines, no pgrep -f")
