"""Every benchmark runs, at a smoke size, and prints its figures (benchmarks never rot).

The benchmarks are scripts run by hand (benchmarks/README.md), so nothing else would notice
one that no longer runs against the package as it is. Each runs here as a whole process, as
the README shows it, with sizes small enough to take seconds. Nothing here looks at the
figures' values: how fast a machine is is no test. A benchmark whose exit status reports a
missed target says so in ``TARGET_MISSED``; that status still means it ran to its end.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
TESTBED = REPO_ROOT / "testbed"
RUN_TIMEOUT_S = 300  # a hung benchmark fails here instead of holding the suite

# Per benchmark: one or more argument lists at smoke size, and a fragment of what it prints
# when it has measured something.
SMOKE_RUNS: dict[str, tuple[tuple[list[str], str], ...]] = {
    "bench_audit.py": ((["--batches", "2000", "--sessions", "20", "--runs", "1"], " ms"),),
    "bench_fleet.py": ((["--size", "10", "--sample", "2"], "fleet check"),),
    "bench_fleet_switch.py": (
        (
            [
                "--size",
                "3",
                "--items",
                "3",
                "--sessions",
                "2",
                "--messages",
                "4",
                "--memorized",
                "1",
                "--extract-s",
                "0.2",
            ],
            "fleet switch",
        ),
    ),
    "bench_gateway_call.py": (
        (["--calls", "10"], "overhead"),
        (["--calls", "3", "--concurrent", "4", "--sse"], "overhead"),
    ),
    "bench_init.py": ((["--runs", "1"], "init / copier"),),
    "bench_nerve_db.py": (
        (["--messages", "500", "--others", "1", "--runs", "1"], "whole session"),
    ),
    "bench_recall.py": (
        (["--sessions", "5", "--hang-runs", "0", "--answers", "json"], "ratio:"),
        (["--sessions", "5", "--hang-runs", "0", "--answers", "sse"], "ratio:"),
        (["--sessions", "5", "--hang-runs", "0", "--state", "file"], "ratio:"),
    ),
    "bench_sweep.py": (
        (["--scales", "400:4"], "µs/msg"),
        (["--backlog", "--sessions", "4", "--batches", "2", "--limits", "1,2"], "lost 0"),
    ),
    "stress_gateway_stream.py": ((["--runs", "1", "--calls", "20"], ""),),
}
# Exit statuses that report a target the figures missed, not a run that failed.
TARGET_MISSED = {"bench_audit.py": 1, "bench_fleet_switch.py": 1}


def smoke_cases() -> list[tuple[str, list[str], str]]:
    present = sorted(path.name for path in BENCHMARKS.glob("*.py"))
    return [(name, args, shown) for name in present for args, shown in SMOKE_RUNS.get(name, ())]


class TestEveryBenchmarkRuns:
    def test_every_benchmark_has_a_smoke_run(self) -> None:
        present = {path.name for path in BENCHMARKS.glob("*.py")}
        assert present <= set(SMOKE_RUNS), f"give {sorted(present - set(SMOKE_RUNS))} a smoke size"

    @pytest.mark.slow
    @pytest.mark.parametrize(("name", "args", "shown"), smoke_cases())
    def test_the_benchmark_completes_and_prints_its_figures(
        self, name: str, args: list[str], shown: str
    ) -> None:
        paths = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        done = subprocess.run(
            [sys.executable, str(BENCHMARKS / name), *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        assert done.returncode in (0, TARGET_MISSED.get(name, 0)), done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        print(done.stdout)
        assert any(char.isdigit() for char in done.stdout), done.stdout
        assert shown in done.stdout, done.stdout


def imported_modules(path: Path) -> set[str]:
    """Every module a Python file imports, at its top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named.add(node.module)
    return named


def named_paths(path: Path) -> set[str]:
    """The string literals of a Python file that name a place in a top-level folder."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" not in node.value
    }


def reaches(path: Path, folder: str) -> list[str]:
    """What ``path`` imports from the package ``folder``, or names as a file under it."""
    imports = [n for n in imported_modules(path) if n == folder or n.startswith(f"{folder}.")]
    places = [n for n in named_paths(path) if n == folder or n.startswith(f"{folder}/")]
    return sorted(imports + places)


class TestBenchmarksStandOnTheirOwn:
    """Imports go one way: the tests and the benchmarks share what lives in testbed/, and no
    benchmark reaches into the test suite, which is the suite's to change."""

    def test_no_benchmark_imports_the_tests_or_runs_their_files(self) -> None:
        reaching = {path.name: reaches(path, "tests") for path in BENCHMARKS.glob("*.py")}
        assert {name: found for name, found in reaching.items() if found} == {}

    @pytest.mark.parametrize("folder", ["tests", "benchmarks"])
    def test_the_shared_testbed_imports_neither(self, folder: str) -> None:
        reaching = {path.name: reaches(path, folder) for path in TESTBED.glob("*.py")}
        assert {name: found for name, found in reaching.items() if found} == {}

    def test_the_reader_sees_a_reach_into_the_tests(self, tmp_path: Path) -> None:
        script = tmp_path / "bench_reaching.py"
        script.write_text(
            "from tests.fleet import provisioning\n"
            "def peer():\n    return ('tests/runtime/peer.py', 'tests')\n",
            encoding="utf-8",
        )
        assert reaches(script, "tests") == ["tests", "tests.fleet", "tests/runtime/peer.py"]
