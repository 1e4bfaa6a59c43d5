"""Fixtures of the migration's tests: a memU store, the state file, a fixed clock, a scripted
Loom, the dev gateway on loopback, and the real ``nerve memory migrate`` process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.devgateway import RunningGateway, SeenCall, serve_in_thread
from provisioner.runtime.state import StateStore
from tests.conftest import REPO_ROOT, clean_environment
from tests.runner import run_cli

from .memu_db import MemuDb
from .scripted_loom import ScriptedLoom

NOW = 1_790_000_000.0  # a fixed wall time for ledger and audit rows
FIXTURE = json.loads(
    (REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json").read_text(encoding="utf-8")
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fixed_clock() -> float:
    return NOW


class RecordedSleep:
    """An async sleep that returns at once and keeps each wait it was asked for, so the
    migration's backoff is seen without any time passing (REL-8)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def no_wait(seconds: float) -> None:
    """An async sleep that returns at once."""


@pytest.fixture
def memu(tmp_path: Path) -> MemuDb:
    return MemuDb(tmp_path / "memu.sqlite")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.sqlite3") as store:
        yield store


@pytest.fixture
def loom() -> ScriptedLoom:
    return ScriptedLoom()


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    """A dev gateway answering JSON and event streams; every call it saw is held to the
    contract fixture's ``memory.set`` when the test ends (CON-2)."""
    with serve_in_thread(seed=11, answers="mixed") as running:
        yield running
        problems = write_contract_problems(running.app.calls)
    assert not problems, problems


def write_contract_problems(calls: Any) -> list[str]:
    """What each call sent that the fixture's ``operator_ops`` do not declare."""
    entry = FIXTURE["operator_ops"]["memory.set"]
    problems = []
    for call in calls:
        assert isinstance(call, SeenCall)
        if call.tool != entry["tool"]:
            problems.append(f"{call.tool}: the migration calls only {entry['tool']}")
            continue
        undeclared = set(call.arguments) - set(entry["arguments"])
        if undeclared:
            problems.append(f"{call.tool}: {sorted(undeclared)} not declared")
    return problems


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


@pytest.fixture
def nerve(tmp_path: Path) -> Nerve:
    return Nerve(tmp_path)
