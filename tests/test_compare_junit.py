"""``scripts/compare_junit.py``: the patch changes no outcome of Nerve's suite (NERVE-18)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "compare_junit.py"


def report(path: Path, cases: dict[str, str]) -> Path:
    body = {
        "passed": "",
        "failed": "<failure message='x'/>",
        "error": "<error message='x'/>",
        "skipped": "<skipped message='x'/>",
    }
    rows = "".join(
        f"<testcase classname='tests.t' name='{name}'>{body[kind]}</testcase>"
        for name, kind in cases.items()
    )
    path.write_text(f"<testsuites><testsuite>{rows}</testsuite></testsuites>", "utf-8")
    return path


def compare(tmp_path: Path, before: dict[str, str], after: dict[str, str]):
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(report(tmp_path / "a.xml", before)),
            str(report(tmp_path / "b.xml", after)),
        ],
        capture_output=True,
        text=True,
    )


def test_the_same_outcomes_agree_a_test_failing_on_both_included(tmp_path: Path) -> None:
    cases = {"one": "passed", "memu": "failed", "later": "skipped"}
    done = compare(tmp_path, cases, cases)
    assert done.returncode == 0, done.stdout
    assert "Nerve's suite patched: 3 tests: 1 failed, 1 passed, 1 skipped" in done.stdout


def test_a_test_the_patch_breaks_is_named_and_fails_the_run(tmp_path: Path) -> None:
    done = compare(tmp_path, {"one": "passed", "two": "passed"}, {"one": "passed", "two": "error"})
    assert done.returncode == 1
    assert "tests.t::two: passed unpatched, error patched" in done.stdout


def test_a_test_only_one_run_holds_is_a_difference(tmp_path: Path) -> None:
    done = compare(tmp_path, {"one": "passed", "two": "passed"}, {"one": "passed"})
    assert done.returncode == 1 and "only unpatched: tests.t::two" in done.stdout


def test_an_unreadable_report_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.xml").write_text("<not xml", "utf-8")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "bad.xml"), str(tmp_path / "bad.xml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
