"""Fixtures of the sweep's tests: real SQLite files for state and transcripts, a fixed clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.integrations.nerve.transcripts import NerveTranscripts
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.backfill import sweep_source
from provisioner.runtime.sweep.sweeper import Sweeper, SweepReport
from provisioner.runtime.transcripts import SqliteTranscripts, TranscriptSource
from tests.integrations.nerve.nerve_db import NerveDb

from .scripted_loom import ScriptedLoom

NOW = 1_790_000_000.0  # a fixed wall time for audit rows


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
def loom() -> ScriptedLoom:
    return ScriptedLoom()


def fixed_clock() -> float:
    return NOW


def add_session(
    source: SqliteTranscripts,
    session_id: str,
    count: int,
    *,
    poison_at: tuple[int, ...] = (),
    size: int = 40,
) -> list[int]:
    """Add ``count`` messages to ``session_id``; positions in ``poison_at`` carry the marker."""
    ids = []
    for index in range(count):
        body = f"message {index} of {session_id} ".ljust(size, "x")
        if index in poison_at:
            body = "POISON " + body
        role = "user" if index % 2 == 0 else "assistant"
        created_at = f"2026-11-30T10:{index % 60:02d}:00Z"
        ids.append(source.add_message(session_id, role, body, created_at))
    return ids


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


async def sweep(source: TranscriptSource, state: StateStore, loom: ScriptedLoom) -> SweepReport:
    """One sweep of ``source`` through the view the engine's sweep reads (MIG-2)."""
    view = sweep_source(source, state, fixed_clock)
    return await Sweeper(loom, view, state, clock=fixed_clock).run_once()
