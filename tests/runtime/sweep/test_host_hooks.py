"""The host hears how far the sweep got, on every Python the package runs on (REL-1, NERVE-3).

The sweep reads its source through a view (``sweep_source``: memU's start point, backfills).
Since Python 3.12, ``isinstance`` against a runtime-checkable protocol looks attributes up
statically, so a view that forwarded the host's hooks dynamically was no host any more: Nerve
was never told, and ``sessions.last_memorized_at`` stood still. These tests hold the hooks
through the view, with a host of plain attributes and with Nerve's real ``nerve.db``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from provisioner.runtime.nerve_db.transcripts import NerveTranscripts
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.source import BackfillView, host_of, sweep_source
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import Message, SqliteTranscripts
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb, native
from tests.support.clock import fixed_clock
from tests.support.state_sql import state_rows

from .sessions import sweep

pytestmark = pytest.mark.anyio


class HostStore:
    """A host's own store: the two ``TranscriptSource`` methods and the host's hooks."""

    kind = "host-store"

    def __init__(self, messages: Sequence[Message]) -> None:
        self.location = "host://conversations"
        self._messages = list(messages)
        self.told: list[tuple[str, int]] = []

    def sessions(self) -> list[str]:
        return ["a"]

    def messages_after(self, session_id: str, after_id: int, limit: int) -> list[Message]:
        return [m for m in self._messages if m.id > after_id][:limit]

    def swept_through(self, session_id: str, message_id: int) -> None:
        self.told.append((session_id, message_id))


def three_messages() -> list[Message]:
    return [Message(i, "user", f"text {i}", f"2026-11-30T10:0{i}:00Z") for i in (1, 2, 3)]


class TestTheHostBehindTheView:
    def test_the_host_behind_a_sweep_view_is_the_host_itself(self, state: StateStore) -> None:
        host = HostStore(three_messages())
        view = sweep_source(host, state, fixed_clock)
        assert host_of(view) is host
        assert host_of(BackfillView(view, state)) is host

    def test_a_source_without_the_hooks_has_no_host_behind_its_view(
        self, state: StateStore, transcripts: SqliteTranscripts
    ) -> None:
        assert host_of(sweep_source(transcripts, state, fixed_clock)) is None
        assert host_of(transcripts) is None


class TestTheHostIsTold:
    async def test_a_sweep_through_the_view_tells_the_host_the_watermark(
        self, state: StateStore, loom: FakeLoom
    ) -> None:
        host = HostStore(three_messages())
        report = await sweep(host, state, loom)
        assert report.messages_taken == 3
        assert host.told == [("a", 3)]

    async def test_a_sweep_through_the_view_keeps_which_host_source_it_read(
        self, state: StateStore, loom: FakeLoom
    ) -> None:
        host = HostStore(three_messages())
        await Sweeper(loom, sweep_source(host, state, fixed_clock), state).run_once()
        rows = state_rows(state, "SELECT kind, location FROM sweep_source")
        assert [tuple(row) for row in rows] == [("host-store", "host://conversations")]

    async def test_a_sweep_of_nerve_db_through_the_view_writes_last_memorized_at(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("s")
        nerve.add("s", "user", "hello", created_at=native(0))
        nerve.add("s", "assistant", "hi", created_at=native(0, 5))
        await sweep(reader, state, loom)
        assert nerve.last_memorized_at("s") == "2026-11-30 10:00:05"
