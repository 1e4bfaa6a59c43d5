"""Fixtures of the migration's tests: a memU store, the state file, a scripted Loom, the dev
gateway on loopback, and the real ``nerve memory migrate`` process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.state import StateStore
from testbed.loom import FakeLoom
from testbed.memu_db import MemuDb
from tests.support.contract import write_contract_problems

from .migrate_process import Nerve


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memu(tmp_path: Path) -> MemuDb:
    return MemuDb(tmp_path / "memu.sqlite")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.sqlite3") as store:
        yield store


@pytest.fixture
def loom() -> FakeLoom:
    return FakeLoom()


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    """A dev gateway answering JSON and event streams; every call it saw is held to the
    contract fixture's ``memory.set`` when the test ends (CON-2)."""
    with serve_in_thread(seed=11, answers="mixed") as running:
        yield running
        problems = write_contract_problems(running.app.calls)
    assert not problems, problems


@pytest.fixture
def nerve(tmp_path: Path) -> Nerve:
    return Nerve(tmp_path)
