"""Sessions for the sweep's tests: messages added to a real transcripts file, and one sweep of
a source as the engine runs it."""

from __future__ import annotations

from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.outcomes import SweepReport
from provisioner.runtime.sweep.source import sweep_source
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts, TranscriptSource
from testbed.loom import FakeLoom
from tests.support.clock import fixed_clock


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


async def sweep(source: TranscriptSource, state: StateStore, loom: FakeLoom) -> SweepReport:
    """One sweep of ``source`` through the view the engine's sweep reads (MIG-2)."""
    view = sweep_source(source, state, fixed_clock)
    return await Sweeper(loom, view, state, clock=fixed_clock).run_once()
