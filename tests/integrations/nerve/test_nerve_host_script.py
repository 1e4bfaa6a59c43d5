"""``scripts/nerve_host_tests.sh``: the integration suite's runner says so when there is no
Nerve source, in one line, and does not fail the build."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "nerve_host_tests.sh"


class TestWithoutNervesSource:
    def test_it_prints_one_line_naming_the_missing_source_and_exits_0(self, tmp_path: Path) -> None:
        missing = tmp_path / "no-nerve-here"
        done = subprocess.run(
            ["bash", str(SCRIPT)],
            capture_output=True,
            text=True,
            env=clean_environment(tmp_path, {"NERVE_SOURCE": str(missing)}),
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert done.stdout.splitlines() == [
            f"nerve host tests: skipped, no Nerve source at {missing} "
            "(set NERVE_SOURCE to a checkout)"
        ]
