"""``nerve memory migrate`` in a temporary folder with its own configuration: run in this
process (``tests.runner``), or its command line for a test that needs a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.runner import run_cli
from tests.support.processes import clean_environment


class Nerve:
    """``python3 -m provisioner`` in a temporary folder, with its own config folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.config_dir = tmp_path / "cfg"
        self.config_dir.mkdir(exist_ok=True)
        self.cwd = tmp_path
        self.state_path = self.config_dir / "memory" / "state.sqlite3"

    def configure(self, *lines: str) -> None:
        (self.config_dir / "config.local.yaml").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )

    def loom(self, gateway_url: str | None, *extra: str) -> None:
        url = f"mcp_gateway_url: {gateway_url}" if gateway_url else ""
        self.configure("memory:", "  backend: loom", *extra, url)

    def command(self, *args: str) -> list[str]:
        """The process's command line: ``python -m provisioner`` and ``words(*args)``."""
        return [sys.executable, "-m", "provisioner", *self.words(*args)]

    def words(self, *args: str) -> list[str]:
        """``memory migrate *args`` with this folder's config folder and workspace."""
        return [
            "memory",
            "migrate",
            *args,
            "--config-dir",
            str(self.config_dir),
            "--workspace",
            str(self.cwd / "ws"),
        ]

    def environment(self) -> dict[str, str]:
        return clean_environment(self.home)

    def migrate(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``command(*args)`` run in this process (``tests.runner``)."""
        return run_cli(self.words(*args), env=self.environment(), cwd=self.cwd)

    def migrate_json(self, *args: str) -> tuple[int, dict[str, Any]]:
        done = self.migrate(*args, "--json")
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, json.loads(done.stdout)
