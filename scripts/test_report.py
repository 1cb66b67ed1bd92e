#!/usr/bin/env python3
"""The slowest tests of a test pass, from the JUnit XML files pytest wrote.

    scripts/test_report.py BUILD_DIR [N]

Reads BUILD_DIR/pytest-junit/*.xml (one per test file, written by the
py_<file> ctest tests) and prints the N (default 10) slowest test cases
with their wall times, then each file's total, so a change that costs
minutes shows in the CI log. Prints nothing and exits 0 when no XML exists
(a pass that ran no Python test).
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def cases(build):
    for xml in sorted((Path(build) / "pytest-junit").glob("*.xml")):
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as e:
            print(f"test_report: {xml}: unreadable ({e})", file=sys.stderr)
            continue
        for case in root.iter("testcase"):
            outcome = "skipped" if case.find("skipped") is not None else \
                "failed" if case.find("failure") is not None or case.find("error") is not None else "passed"
            yield xml.stem, case.get("name", "?"), float(case.get("time") or 0.0), outcome


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 10
    rows = list(cases(sys.argv[1]))
    if not rows:
        return
    print(f"slowest {min(n, len(rows))} of {len(rows)} Python tests ({sys.argv[1]}):")
    for f, name, t, outcome in sorted(rows, key=lambda r: -r[2])[:n]:
        print(f"  {t:8.1f} s  {f}::{name}" + ("" if outcome == "passed" else f"  [{outcome}]"))
    totals = {}
    for f, _, t, _ in rows:
        totals[f] = totals.get(f, 0.0) + t
    print("per file (s): " + ", ".join(f"{f} {t:.0f}" for f, t in sorted(totals.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
