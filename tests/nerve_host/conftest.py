"""The integration suite against the real Nerve (NERVE-7…NERVE-12).

These tests run in a Python 3.13 venv holding Nerve installed from its source and this package
installed beside it (``scripts/nerve_host_tests.sh`` makes one with the ``nerve-venv`` script
found beside Nerve's source). Everything Nerve-side is Nerve's own code, imported or run at
test time: its click CLI (``nerve.cli``), its ``Database`` and migrations (``nerve.db``), its
config loader (``nerve.config``), its ``create_app`` with auth and its compaction. Nothing of
Nerve's is copied here.

Without Nerve each module skips at once, with the one reason ``NO_NERVE``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, clean_environment

NO_NERVE = (
    "Nerve is not importable here: the integration suite runs in a venv with Nerve installed "
    "(scripts/nerve_host_tests.sh)"
)
# The command Nerve installs, with the package mounted as Nerve's two lines would mount it.
HOST_CLI = Path(__file__).parent / "host_cli.py"


def nerve_source() -> Path:
    """Nerve's source: ``NERVE_SOURCE``, else ``../shared/nerve`` from the repository root."""
    named = os.environ.get("NERVE_SOURCE")
    return Path(named) if named else REPO_ROOT.parent / "shared" / "nerve"


class Machine:
    """A fresh machine for Nerve: HOME, Nerve's state folder and a configuration folder."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.state = self.home / ".nerve"  # NERVE-7: $NERVE_HOME's default
        self.config_dir = self.home / "nerve-config"
        self.workspace = self.home / "nerve-workspace"
        self.home.mkdir()
        self.config_dir.mkdir()

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command runs with: no variable of Nerve's or the package's, an
        API key so Nerve's non-interactive init has one, and ``extra`` over it."""
        env = clean_environment(self.home)
        env.pop("OPENAI_API_KEY", None)
        env["ANTHROPIC_API_KEY"] = "sk-ant-test-not-a-real-key"
        env.update(extra or {})
        return env


RunHost = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    """A fresh machine; this process also runs in it (HOME, no Nerve variables, cwd HOME)."""
    fresh = Machine(tmp_path)
    wanted = fresh.environment()
    for key in list(os.environ):
        if key not in wanted:
            monkeypatch.delenv(key)
    for key, value in wanted.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(fresh.home)
    return fresh


@pytest.fixture
def run_host(machine: Machine) -> RunHost:
    """Run Nerve's own ``nerve`` command, with the package mounted by ``extend_cli``, as a
    real process in ``machine`` (cwd its HOME unless ``cwd`` is given)."""

    def run(
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        mounted: bool = True,
    ) -> subprocess.CompletedProcess:
        command = [sys.executable, str(HOST_CLI)] if mounted else [sys.executable, "-m", "nerve"]
        return subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            env=machine.environment(env),
            cwd=cwd or machine.home,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )

    return run


@pytest.fixture
def run_package(machine: Machine) -> RunHost:
    """Run the package's standalone command (``python -m provisioner``) in ``machine``."""

    def run(
        *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "provisioner", *args],
            capture_output=True,
            text=True,
            env=machine.environment(env),
            cwd=cwd or machine.home,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )

    return run
