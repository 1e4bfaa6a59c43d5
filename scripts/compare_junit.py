"""Compare two JUnit XML reports of Nerve's suite: unpatched, then patched (NERVE-18).

    usage: python scripts/compare_junit.py UNPATCHED.xml PATCHED.xml

The patch must change no outcome: both runs hold the same tests, and every test that passed
unpatched passes patched (a test that fails on both, such as the ones that need memU, stays as
it is). Prints one line of counts per run, then each difference, one line each. Exit status 0
when the outcomes agree, 1 when they do not, 2 when a report cannot be read.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

PASSED = "passed"
EXIT_AGREE, EXIT_DIFFER, EXIT_UNREADABLE = 0, 1, 2


def outcomes(report: Path) -> dict[str, str]:
    """``{test id: passed | failed | error | skipped}`` for every test case in ``report``."""
    found: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), PASSED)
        found[name] = {"failure": "failed"}.get(outcome, outcome)
    return found


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line for each test whose outcome the patch changed, or that only one run holds."""
    lines = [f"only unpatched: {name}" for name in sorted(before.keys() - after.keys())]
    lines += [f"only patched: {name}" for name in sorted(after.keys() - before.keys())]
    for name in sorted(before.keys() & after.keys()):
        if before[name] != after[name]:
            lines.append(f"{name}: {before[name]} unpatched, {after[name]} patched")
    return lines


def summary(label: str, found: dict[str, str]) -> str:
    counts = Counter(found.values())
    shown = ", ".join(f"{counts[kind]} {kind}" for kind in sorted(counts))
    return f"Nerve's suite {label}: {len(found)} tests: {shown}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: compare_junit.py UNPATCHED.xml PATCHED.xml", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        before, after = (outcomes(Path(name)) for name in argv)
    except (OSError, ElementTree.ParseError) as error:
        print(f"compare_junit: cannot read a report: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(summary("unpatched", before))
    print(summary("patched", after))
    changed = differences(before, after)
    for line in changed:
        print(line)
    if not before:
        print("compare_junit: the unpatched run holds no test", file=sys.stderr)
        return EXIT_DIFFER
    return EXIT_DIFFER if changed else EXIT_AGREE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
