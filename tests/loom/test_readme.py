"""The README's "Try Loom locally" commands, run as written in a fresh home folder.

Every command of the section's code block runs verbatim in bash, with HOME pointing at a
temporary folder, except the first: installing the ``dev`` extra would need a package index,
and tests reach nothing beyond loopback. That line is checked instead — it must be the install
of this checkout's ``dev`` extra — and the extra's packages are already installed for tests.
"""

from __future__ import annotations

import re
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import clean_environment

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
SECTION = "## Try Loom locally"
INSTALL_LINE = "python3 -m pip install '.[dev]'"
MAX_COMMANDS = 8  # the bound on the section


def section_commands() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    return [line for line in block.splitlines() if line.strip()]


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class TestTryLoomLocally:
    def test_the_section_is_at_most_eight_commands_and_starts_with_the_dev_extra(self) -> None:
        commands = section_commands()
        assert len(commands) <= MAX_COMMANDS
        assert commands[0] == INSTALL_LINE
        pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
        extra = " ".join(pyproject["project"]["optional-dependencies"]["dev"])
        for package in ("mcp", "uvicorn", "starlette", "jsonschema"):
            assert package in extra

    @pytest.mark.slow
    def test_the_commands_run_as_written_and_recall_through_the_dev_gateway(
        self, tmp_path: Path
    ) -> None:
        assert port_is_free(8787), "the README's gateway port 8787 is taken on this machine"
        home = tmp_path / "home"
        home.mkdir()
        script = "\n".join(
            ["set -euo pipefail", *section_commands()[1:], "kill %1", "wait || true"]
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=clean_environment(home),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert "mcp_gateway_url: http://127.0.0.1:8787" in done.stdout
        assert "<session-context>" in done.stdout
        assert "No memories were recalled for this session." in done.stdout
        assert "available: True" in done.stdout
        assert "lists_loom: True" in done.stdout
        assert (home / "nerve-workspace" / "AGENTS.md").is_file()
        assert (home / ".nerve" / "dev-loom").is_dir()
