"""The README's "Try Loom locally" commands, run as written in a fresh home folder.

Every command of the section's code block runs verbatim in bash, with HOME pointing at a
temporary folder, except the first: installing the ``dev`` extra would need a package index,
and tests reach nothing beyond loopback. That line is checked instead — it must be the install
of this checkout's ``dev`` extra — and the extra's packages are already installed for tests.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.support.readme_blocks import port_is_free, run_commands, section_commands
from tests.support.repo import REPO_ROOT

SECTION = "## Try Loom locally"
INSTALL_LINE = "python3 -m pip install '.[dev]'"
MAX_COMMANDS = 8  # the bound on the section


class TestTryLoomLocally:
    def test_the_section_is_at_most_eight_commands_and_starts_with_the_dev_extra(self) -> None:
        commands = section_commands(SECTION)
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
        commands = section_commands(SECTION)[1:]
        assert commands[-1] == "kill %1", "the section leaves its gateway on the next one's port"
        done = run_commands(commands, cwd=tmp_path, home=home)
        assert done.returncode == 0, done.stderr
        assert "mcp_gateway_url: http://127.0.0.1:8787" in done.stdout
        assert "<session-context>" in done.stdout
        assert "No memories were recalled for this session." in done.stdout
        assert "available: True" in done.stdout
        assert "lists_loom: True" in done.stdout
        assert (home / "nerve-workspace" / "AGENTS.md").is_file()
        assert (home / ".nerve" / "dev-loom").is_dir()
