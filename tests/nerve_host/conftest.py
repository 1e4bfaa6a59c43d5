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
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.nerve_host.machine import HOST_CLI, Machine, RunHost


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
