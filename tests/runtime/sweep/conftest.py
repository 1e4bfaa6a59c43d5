"""Fixtures of the sweep's tests: real SQLite files for state and transcripts, a fixed clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.runtime.nerve_db.transcripts import NerveTranscripts
from provisioner.runtime.state import StateStore
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.sqlite3") as store:
        yield store


@pytest.fixture
def transcripts(tmp_path: Path) -> Iterator[SqliteTranscripts]:
    with SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source:
        yield source


@pytest.fixture
def loom() -> FakeLoom:
    return FakeLoom()


# --- a Nerve-shaped nerve.db read as the sweep's source (MIG-2, NERVE-2) ---------------------

AFTER_ROWS = datetime(2026, 12, 1, tzinfo=UTC).timestamp()  # the reader's clock


@pytest.fixture
def nerve(tmp_path: Path) -> Iterator[NerveDb]:
    """A Nerve-shaped ``nerve.db`` for a test to fill."""
    database = NerveDb(tmp_path / "nerve" / "nerve.db")
    yield database
    database.close()


@pytest.fixture
def reader(nerve: NerveDb) -> Iterator[NerveTranscripts]:
    """``nerve`` read as the sweep reads it, on a clock past every row's time."""
    with NerveTranscripts(nerve.path, clock=lambda: AFTER_ROWS) as source:
        yield source
