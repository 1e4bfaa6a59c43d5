"""Nerve's own ``nerve.db``, made by its ``Database`` and migrations and written by its own
stores, read by the sweep (NERVE-2, NERVE-3, NERVE-9) and compacted by Nerve's retention.

The sweep runs against the scripted Loom of the sweep's tests; Nerve's ``Database`` writes the
rows and runs ``compact_messages`` for real, on a real file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.nerve_host.machine import NO_NERVE

nerve_db = pytest.importorskip("nerve.db", reason=NO_NERVE)

from provisioner.integrations.nerve import NerveTranscripts  # noqa: E402
from provisioner.runtime.state import StateStore  # noqa: E402
from provisioner.runtime.sweep.sweeper import Sweeper  # noqa: E402
from testbed.loom import FakeLoom  # noqa: E402
from tests.support.clock import fixed_clock  # noqa: E402

pytestmark = pytest.mark.anyio

OLD = "2026-01-05 10:00:00"  # older than any retention window Nerve allows (at least a day)
LATER = "2026-01-05 10:05:00"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Any]:
    """Nerve's ``Database`` on a new file: its migrations run on connect."""
    db = nerve_db.Database(tmp_path / "nerve.db")
    await db.connect()
    try:
        yield db
    finally:
        await db.close()


async def sweep_once(path: Path, state_path: Path, loom: FakeLoom) -> None:
    with NerveTranscripts(path) as source, StateStore(state_path) as state:
        await Sweeper(loom, source, state, clock=fixed_clock).run_once()


def sent(loom: FakeLoom) -> list[str]:
    return [text for call in loom.calls if call.outcome == "taken" for text in call.contents]


class TestNervesMigratedDatabase:
    """The reader opens what Nerve's migrations make, and reads what Nerve's stores write."""

    async def test_a_conversation_written_by_nerve_is_read_in_order_with_utc_times(
        self, database: Any, tmp_path: Path
    ) -> None:
        await database.create_session("chat")
        first = await database.add_message("chat", "user", "plan the trip", created_at=OLD)
        second = await database.add_message("chat", "assistant", "two days in Lyon")
        with NerveTranscripts(tmp_path / "nerve.db") as source:
            read = source.messages_after("chat", 0, 10)
        assert [(m.id, m.role, m.content) for m in read] == [
            (first, "user", "plan the trip"),
            (second, "assistant", "two days in Lyon"),
        ]
        assert read[0].created_at == "2026-01-05T10:00:00+00:00"

    async def test_the_sweep_moves_last_memorized_at_so_nerves_compaction_goes_on(
        self, database: Any, tmp_path: Path
    ) -> None:
        """Before the sweep Nerve's compaction finds nothing (no watermark); after it, the
        swept messages older than the window lose their blocks and keep their text."""
        await database.create_session("chat")
        await database.add_message(
            "chat", "user", "what is due", created_at=OLD, thinking="private reasoning"
        )
        await database.add_message(
            "chat",
            "assistant",
            "the tax return",
            created_at=LATER,
            blocks=[{"type": "text", "content": "the tax return"}],
        )
        await database.add_message("chat", "user", "thanks", created_at=LATER)
        assert (await database.compact_messages(1, dry_run=True))["messages_compacted"] == 0

        loom = FakeLoom()
        await sweep_once(tmp_path / "nerve.db", tmp_path / "state.sqlite3", loom)

        assert sent(loom) == ["what is due", "the tax return", "thanks"]
        session = await database.get_session("chat")
        assert session["last_memorized_at"] == LATER
        compacted = await database.compact_messages(1)
        assert compacted["messages_compacted"] == 1  # the first; the others are not older
        rows = await database.get_messages("chat")
        assert [(r["content"], r["thinking"], bool(r["blocks"])) for r in rows] == [
            ("what is due", None, False),  # compacted: its thinking dropped, its text kept
            ("the tax return", None, True),  # not older than the watermark: kept whole
            ("thanks", None, False),
        ]
