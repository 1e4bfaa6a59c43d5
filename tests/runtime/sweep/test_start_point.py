"""After a switch from memU, a session starts where memU's memorization stopped (MIG-2).

Real parts: a Nerve-shaped ``nerve.db`` read by ``NerveTranscripts``, the built-in SQLite
transcripts, a real state file, and the sweep against the scripted Loom.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.integrations.nerve import NerveTranscripts
from provisioner.runtime.state import AUDIT_LEFT_TO_MEMU, StateStore
from provisioner.runtime.sweep.source import (
    Memorized,
    SweepSource,
    host_of,
    start_new_sessions,
    start_where_host_stopped,
    sweep_source,
)
from provisioner.runtime.transcripts import Message, SqliteTranscripts
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb, native
from tests.support.clock import NOW, fixed_clock

from .sessions import add_session, sweep

pytestmark = pytest.mark.anyio


def left_rows(state: StateStore) -> list[dict[str, object]]:
    return state.audit(kinds=(AUDIT_LEFT_TO_MEMU,))


class Answering(SqliteTranscripts):
    """The built-in transcripts with a ``memorized_through`` that answers ``answer`` (or
    raises it): a source whose capability says anything at all."""

    def __init__(self, path: Path, answer: object) -> None:
        super().__init__(path)
        self.answer = answer
        self.asked: list[str] = []

    def memorized_through(self, session_id: str) -> object:
        self.asked.append(session_id)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class TestStartPoint:
    """The start point of a session the sweep has never seen."""

    def test_it_is_stored_with_an_audit_row_saying_how_much_was_left_to_memu(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 8)
        nerve.set_last_memorized_at("a", native(0, 4))
        started = start_where_host_stopped(reader, state, "a", now=NOW)
        assert started == Memorized(ids[4], 5)
        assert state.watermark("a") == ids[4]
        (row,) = left_rows(state)
        assert (row["session_id"], row["message_id"], row["detail"]) == ("a", ids[4], "messages=5")

    def test_a_session_with_a_row_is_never_moved_even_at_watermark_zero(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 8)
        nerve.set_last_memorized_at("a", native(0, 4))
        state.record_failure("a", failures=1, suspect_last_id=None)  # a row, watermark 0
        assert start_where_host_stopped(reader, state, "a", now=NOW) is None
        assert state.watermark("a") == 0 and left_rows(state) == []

    def test_the_capability_is_not_asked_for_sessions_the_state_knows(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        source = Answering(tmp_path / "t.sqlite3", Memorized(1, 1))
        add_session(source, "known", 2)
        add_session(source, "new", 2)
        state.record_failure("known", failures=0, suspect_last_id=None)
        assert start_new_sessions(source, state, ["known", "new"], now=NOW) == 1
        assert source.asked == ["new"]
        source.close()

    @pytest.mark.parametrize(
        "answer",
        [
            None,
            5,
            Memorized(0, 3),
            Memorized(-4, 3),
            Memorized(True, 3),  # type: ignore[arg-type]
            Memorized(3, -1),
            Memorized(2**63, 1),
            RuntimeError("the host's file is gone"),
        ],
        ids=["none", "int", "zero", "negative", "bool", "negative-count", "too-big", "raises"],
    )
    async def test_an_answer_that_cannot_be_used_starts_the_session_at_zero(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom, answer: object
    ) -> None:
        source = Answering(tmp_path / "t.sqlite3", answer)
        ids = add_session(source, "s", 4)
        report = await sweep(source, state, loom)
        assert report.messages_taken == 4 and sorted(loom.taken) == ids
        assert left_rows(state) == []
        source.close()

    async def test_imported_transcripts_have_no_such_capability_and_start_at_zero(
        self, transcripts: SqliteTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = add_session(transcripts, "s", 3)
        assert start_where_host_stopped(transcripts, state, "s", now=NOW) is None
        await sweep(transcripts, state, loom)
        assert sorted(loom.taken) == ids and left_rows(state) == []


class TestTheSweepAfterASwitch:
    """MIG-2 end to end: what memU distilled is not extracted a second time."""

    async def test_only_the_messages_after_memus_point_reach_loom(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("old")
        nerve.session("fresh")
        old = nerve.add_many("old", 10)
        fresh = nerve.add_many("fresh", 3)
        nerve.set_last_memorized_at("old", native(0, 6))  # memU took the first seven
        report = await sweep(reader, state, loom)
        assert sorted(loom.taken) == sorted(old[7:] + fresh)
        assert report.messages_taken == 6
        (row,) = left_rows(state)
        assert (row["message_id"], row["detail"]) == (old[6], "messages=7")

    async def test_after_the_sweep_kept_last_memorized_at_in_step_new_messages_still_go(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """The sweep's own ``last_memorized_at`` (NERVE-3) stands behind a watermark the state
        keeps, so it is never read as memU's point again."""
        nerve.session("a")
        first = nerve.add_many("a", 3)
        await sweep(reader, state, loom)
        assert nerve.last_memorized_at("a") == native(0, 2)
        later = nerve.add_many("a", 2, start=3)
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == first + later
        assert all(times == 1 for times in loom.taken.values()) and left_rows(state) == []

    @pytest.mark.parametrize("value", [None, "garbage", "now", "2099-01-01 00:00:00"])
    async def test_a_hostile_last_memorized_at_sends_the_whole_session(
        self,
        nerve: NerveDb,
        reader: NerveTranscripts,
        state: StateStore,
        loom: FakeLoom,
        value: str | None,
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 5)
        nerve.set_last_memorized_at("a", value)
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids and left_rows(state) == []

    async def test_a_second_sweep_neither_starts_the_session_again_nor_writes_a_row(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 6)
        nerve.set_last_memorized_at("a", native(0, 3))
        await sweep(reader, state, loom)
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids[4:] and len(left_rows(state)) == 1

    async def test_a_session_memu_had_taken_whole_sends_nothing_until_it_grows(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 4)
        nerve.set_last_memorized_at("a", native(0, 3))
        report = await sweep(reader, state, loom)
        assert (report.messages_taken, loom.calls) == (0, [])
        new = nerve.add_many("a", 1, start=4)
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == new


class TestTheSweepSource:
    """The one source the sweep reads: the host's own attributes go through unchanged."""

    def test_a_host_source_stays_one_and_wrapping_twice_changes_nothing(
        self, reader: NerveTranscripts, state: StateStore
    ) -> None:
        view = sweep_source(reader, state, fixed_clock)
        assert isinstance(view, SweepSource) and sweep_source(view, state, fixed_clock) is view
        assert host_of(view) is reader  # REL-1: asked of the host itself, not of the view

    def test_sessions_the_source_lists_as_no_text_are_listed_but_never_started(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        class Odd(Answering):
            def sessions(self) -> Sequence[str]:
                return [*super().sessions(), 7]  # type: ignore[list-item]

        source = Odd(tmp_path / "t.sqlite3", Memorized(1, 1))
        add_session(source, "s", 2)
        listed = sweep_source(source, state, fixed_clock).sessions()
        assert list(listed) == ["s", 7] and source.asked == ["s"]
        source.close()

    def test_the_view_yields_what_the_source_yields_when_nothing_is_passed_over(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "s", 5)
        view = sweep_source(transcripts, state, fixed_clock)
        page: Sequence[Message] = view.messages_after("s", 1, 3)
        assert [m.id for m in page] == [m.id for m in transcripts.messages_after("s", 1, 3)]
