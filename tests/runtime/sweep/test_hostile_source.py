"""Whatever a transcript source yields, the sweep goes on (SWEEP-12).

The defect: a message whose content is None (Nerve keeps NULL content) went to Loom, the
gateway refused the call (-32602), and recording that error raised ``AttributeError`` out of
``Sweeper.run_once`` — so that session and every session after it were never swept again.
Now every message is checked as it is read: a bad one is skipped with an audit row (role and
time, never text), in the transaction that moves the watermark past it together with the
messages after it, and the window goes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from provisioner.config.loader import load_config
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.report import WITHHELD, ErrorRecord, LastError, quotes_any
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.sweep.window import READ_PAGE_MESSAGES
from provisioner.runtime.transcripts import Message, loom_time
from testbed.loom import FakeLoom
from tests.support.clock import fixed_clock

from .hostile_source import (
    BAD_ROWS,
    CANARY,
    GOOD_TIME,
    NOT_A_LIST,
    USABLE_ID,
    HostileSource,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=12, answers="mixed") as running:
        yield running


@pytest.fixture
async def memory(
    tmp_path: Path, gateway: RunningGateway, state: StateStore
) -> AsyncIterator[LoomMemory]:
    folder = tmp_path / "cfg"
    folder.mkdir()
    text = f"memory:\n  backend: loom\nmcp_gateway_url: {gateway.base_url}\n"
    (folder / "config.local.yaml").write_text(text, encoding="utf-8")
    config = load_config(folder, None, env={})
    async with LoomMemory.from_config(config, state=state) as backend:
        yield backend


def wire_messages(gateway: RunningGateway) -> list[dict]:
    """Every message the gateway was handed for extraction, as it came on the wire."""
    return [
        message
        for call in gateway.app.calls
        if call.tool == "loom_memory_set_from_messages"
        for message in call.arguments["messages"]
    ]


def as_wire(message: Message) -> dict[str, str]:
    return {"role": message.role, "content": message.content, "created_at": message.created_at}


def refused_rows(state: StateStore) -> list[dict[str, object]]:
    return [row for row in state.audit() if str(row["detail"]).startswith("refused: ")]


class TestHostileSourceThroughTheDevGateway:
    async def test_a_message_with_no_content_is_skipped_and_the_window_goes_on(
        self, gateway: RunningGateway, memory: LoomMemory, state: StateStore
    ) -> None:
        """SWEEP-12, the report as it came: None content between two good messages, and a
        second session after it. Before the fix ``run_once`` raised ``AttributeError``."""
        source = HostileSource()
        first = source.add_good("a", "I take my tea with lemon.")
        hole = source.add_bad("a", "no content")
        last = source.add_good("a", "I moved to Lisbon last spring.", role="assistant")
        other = source.add_good("b", "My sister is called Ines.")
        report = await Sweeper(memory, source, state, clock=fixed_clock).run_once()
        assert report.stopped == "done" and report.errors == []
        assert wire_messages(gateway) == [as_wire(first), as_wire(last), as_wire(other)]
        assert (report.messages_taken, report.messages_skipped) == (3, 1)
        assert state.watermark("a") == last.id and state.watermark("b") == other.id
        (row,) = state.audit()
        assert (row["kind"], row["message_id"], row["role"]) == ("skipped", hole, "user")
        assert row["created_at"] == "2026-11-30T10:00:00Z"
        assert row["detail"] == "refused: content is not text"
        again = await Sweeper(memory, source, state, clock=fixed_clock).run_once()
        assert again.batches_sent == 0 and len(state.audit()) == 1

    async def test_every_kind_of_bad_message_leaves_loom_only_the_good_ones(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        state: StateStore,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """SWEEP-12 on the wire: each kind of bad row between good ones; the gateway checks
        every call against Loom's schema, takes every good message, and no bad row's text
        reaches an audit row, a report, the diagnostics or a log line."""
        caplog.set_level(logging.DEBUG)
        source = HostileSource()
        good = [source.add_good("s", f"fact number {n}") for n in range(2)]
        for kind in BAD_ROWS:
            source.add_bad("s", kind)
            good.append(source.add_good("s", f"fact after {kind}"))
        report = await Sweeper(memory, source, state, clock=fixed_clock).run_once()
        assert report.errors == [] and report.stopped == "done"
        assert wire_messages(gateway) == [as_wire(message) for message in good]
        assert report.messages_skipped == len(BAD_ROWS) == len(refused_rows(state))
        assert state.watermark("s") == good[-1].id
        visible = json.dumps([state.audit(), report.as_dict(), memory.diagnostics()])
        assert CANARY not in visible + caplog.text


class TestWhereTheWatermarkGoes:
    async def test_a_bad_message_between_two_good_ones_goes_with_the_batch_after_it(
        self, state: StateStore
    ) -> None:
        """SWEEP-12: one call carries both good messages; the skip and the watermark are one
        transaction, past all three."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        first = source.add_good("a", "one")
        bad = source.add_bad("a", "unknown role")
        last = source.add_good("a", "two")
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert loom.taken_ids("a") == [first.id, last.id] and len(loom.calls) == 1
        assert state.watermark("a") == last.id
        assert [row["message_id"] for row in refused_rows(state)] == [bad]
        assert report.messages_skipped == 1

    async def test_a_batch_taken_in_part_keeps_the_bad_message_until_the_next_is_taken(
        self, state: StateStore
    ) -> None:
        """SWEEP-9, SWEEP-12: Loom takes only the first message; the watermark stops before
        the bad one, which is skipped once, with the next message, and nothing is sent twice
        to be taken."""
        source, loom = HostileSource(), FakeLoom(check_contract=True, plays=["one"])
        first = source.add_good("a", "one")
        bad = source.add_bad("a", "time not a time")
        last = source.add_good("a", "two")
        await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert loom.taken_ids("a") == [first.id, last.id] and len(loom.calls) == 2
        assert [row["message_id"] for row in refused_rows(state)] == [bad]
        assert state.watermark("a") == last.id

    async def test_a_failed_batch_leaves_the_bad_message_where_it_was(
        self, state: StateStore
    ) -> None:
        """SWEEP-7, SWEEP-12: "not now" moves nothing and skips nothing; the next sweep
        takes the good messages and skips the bad one, once."""
        source, loom = HostileSource(), FakeLoom(check_contract=True, plays=["not now"])
        source.add_good("a", "one")
        bad = source.add_bad("a", "id bool")
        last = source.add_good("a", "two")
        sweeper = Sweeper(loom, source, state, clock=fixed_clock)
        await sweeper.run_once()
        assert state.watermark("a") == 0 and state.audit() == []
        await sweeper.run_once()
        assert state.watermark("a") == last.id
        assert [(row["message_id"], row["role"]) for row in refused_rows(state)] == [(None, "user")]
        assert bad not in [t.message_id for t in loom.taken_items]

    async def test_a_bad_message_at_the_end_waits_for_a_message_after_it(
        self, state: StateStore
    ) -> None:
        """SWEEP-12: the newest message read may still be written, so a bad one last in its
        session is not passed: the report names the session, every sweep, and no audit row
        repeats. Once a message follows it, both go."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        first = source.add_good("a", "one")
        bad = source.add_bad("a", "no content")
        sweeper = Sweeper(loom, source, state, clock=fixed_clock)
        reports = [await sweeper.run_once() for _ in range(3)]
        assert [r.errors for r in reports] == [[{"session_id": "a", "kind": "ValueError"}]] * 3
        assert state.watermark("a") == first.id and state.audit() == []
        last = source.add_good("a", "two")
        report = await sweeper.run_once()
        assert report.errors == [] and state.watermark("a") == last.id
        assert [row["message_id"] for row in refused_rows(state)] == [bad]
        assert loom.taken_ids("a") == [first.id, last.id]

    async def test_a_run_of_bad_messages_longer_than_a_window_does_not_stall_the_session(
        self, state: StateStore
    ) -> None:
        """SWEEP-1, SWEEP-12: 350 bad rows fill more than three windows; they are passed on
        their own, and the good messages behind them go in the same sweep."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        bad = [source.add_bad("a", "content a number") for _ in range(350)]
        good = [source.add_good("a", f"fact {n}") for n in range(3)]
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert loom.taken_ids("a") == [message.id for message in good]
        assert [row["message_id"] for row in refused_rows(state)] == bad
        assert report.messages_skipped == 350 and state.watermark("a") == good[-1].id

    async def test_an_id_out_of_order_is_refused_and_never_moves_the_watermark_back(
        self, state: StateStore
    ) -> None:
        """SWEEP-2, SWEEP-12: a repeated id is refused (its row keeps the id it showed);
        the watermark moves only forward."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        first = source.add_good("a", "one")
        source.add_raw("a", lambda _ordinal: Message(first.id, "user", "again", GOOD_TIME))
        last = source.add_good("a", "two")
        await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert loom.taken_ids("a") == [first.id, last.id]
        (row,) = refused_rows(state)
        assert (row["message_id"], row["detail"]) == (
            first.id,
            "refused: id is not after the one before",
        )

    async def test_a_page_of_rows_without_usable_ids_stops_its_window_and_names_it(
        self, state: StateStore
    ) -> None:
        """SWEEP-1, SWEEP-12: a source is asked for rows after an id; a whole page of rows
        with none it can be asked past stops that window (named in the report, nothing
        skipped), and the other sessions are swept."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        first = source.add_good("a", "one")
        for _ in range(READ_PAGE_MESSAGES):
            source.add_bad("a", "id text")
        source.add_good("a", "behind them")
        other = source.add_good("b", "two")
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert report.errors == [{"session_id": "a", "kind": "ValueError"}]
        assert loom.taken_ids("a") == [first.id] and loom.taken_ids("b") == [other.id]
        assert state.audit() == [] and report.stopped == "done"

    @pytest.mark.parametrize("kind", sorted(BAD_ROWS))
    async def test_each_kind_of_bad_message_is_skipped_with_role_and_time_only(
        self, state: StateStore, kind: str
    ) -> None:
        """SWEEP-12: the audit row names the message by id (when it has a usable one), a role
        that is a plain name or "(unknown)", a time or nothing — never any of its text."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        first = source.add_good("a", "one")
        bad = source.add_bad("a", kind)
        last = source.add_good("a", "two")
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert loom.taken_ids("a") == [first.id, last.id] and loom.refusals == []
        (row,) = refused_rows(state)
        if kind in USABLE_ID:  # its id is its place: the row names it
            assert row["message_id"] == bad
        else:  # a broken id is shown only when it is an integer, and never taken for its place
            assert row["message_id"] != bad
        assert row["role"] in {"user", "narrator", "(unknown)"}
        assert row["created_at"] in {"2026-11-30T10:00:00Z", None}
        assert CANARY not in json.dumps([state.audit(), report.as_dict()])

    async def test_a_role_that_is_text_is_recorded_as_unknown(self, state: StateStore) -> None:
        """SWEEP-12: a role Loom does not take is kept only as a short plain name."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        source.add_bad("a", "role that is text")
        source.add_bad("a", "unknown role")
        source.add_good("a", "one")
        await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert [row["role"] for row in refused_rows(state)] == ["(unknown)", "narrator"]


class TestTimesLoomTakes:
    async def test_an_rfc_3339_time_goes_as_it_is_and_another_iso_form_as_rfc_3339(
        self, state: StateStore
    ) -> None:
        """SWEEP-12: Loom's ``created_at`` is a JSON Schema ``date-time`` (RFC 3339). An
        ISO 8601 time of another form (no seconds, no zone) goes in UTC, in RFC 3339."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        source.add_good("a", "one", created_at="2026-11-30T10:00:00.25+05:30")
        source.add_good("a", "two", created_at="2026-11-30T10:00Z")
        source.add_good("a", "three", created_at="2026-11-30 10:00:00")
        await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert [t.wire["created_at"] for t in loom.taken_items] == [
            "2026-11-30T10:00:00.25+05:30",
            "2026-11-30T10:00:00+00:00",
            "2026-11-30T10:00:00+00:00",
        ]
        assert loom.refusals == []

    @pytest.mark.parametrize(
        "value", ["", "yesterday", "2026-02-30T10:00:00Z", "2026-11-30T25:00:00Z", "9" * 100]
    )
    def test_a_value_that_is_no_time_is_none(self, value: str) -> None:
        """SWEEP-12: what is no time is refused rather than sent for Loom to refuse."""
        assert loom_time(value) is None


class TestSourceFailures:
    @pytest.mark.parametrize("failure", [OSError("disk gone"), NOT_A_LIST])
    async def test_a_source_failing_for_one_session_stops_only_that_window(
        self, state: StateStore, failure: object
    ) -> None:
        """SWEEP-12: the failing session is named in the report; the others are swept."""
        source, loom = HostileSource(), FakeLoom(check_contract=True)
        source.add_good("a", "one")
        source.add_good("b", "two")
        source.add_good("c", "three")
        source.failures["b"] = failure
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        kind = "SourceFailed(OSError)" if failure is not NOT_A_LIST else "SourceFailed(TypeError)"
        assert report.errors == [{"session_id": "b", "kind": kind}]
        assert report.stopped == "done" and report.sessions_swept == 3
        assert [t.session_id for t in loom.taken_items] == ["a", "c"]

    async def test_a_source_that_cannot_list_its_sessions_ends_the_sweep(
        self, state: StateStore
    ) -> None:
        """SWEEP-12: nothing can be swept; the sweep says why instead of raising."""

        class NoSessions(HostileSource):
            def sessions(self) -> list[str]:
                raise RuntimeError(f"{CANARY} no such table")

        report = await Sweeper(
            FakeLoom(check_contract=True), NoSessions(), state, clock=fixed_clock
        ).run_once()
        assert report.stopped == "source_failed"
        assert report.errors == [{"session_id": "", "kind": "SourceFailed(RuntimeError)"}]

    async def test_a_session_id_that_is_no_text_is_passed_over(self, state: StateStore) -> None:
        """SWEEP-12: a session id the state cannot key on is named in the report, bounded."""

        class OddSessions(HostileSource):
            def sessions(self) -> list[object]:  # type: ignore[override]
                return [None, "\ud800", "a"]

        source, loom = OddSessions(), FakeLoom(check_contract=True)
        source.add_good("a", "one")
        report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert report.errors == [
            {"session_id": "<NoneType>", "kind": "BadSessionId"},
            {"session_id": "\\ud800", "kind": "BadSessionId"},
        ]
        assert loom.taken_ids("a") == [1] and report.stopped == "done"


class TestErrorReportOnValuesThatAreNoText:
    def test_a_sent_text_that_is_none_or_no_string_quotes_nothing(self) -> None:
        """SWEEP-12: the crash of the report — ``None.strip()`` — and its kin."""
        message = "invalid params: messages/1/content: None is not of type 'string'"
        assert not quotes_any(message, [None, 42, ["x"], object()])
        assert not quotes_any(None, ["None is not"])

    def test_bytes_sent_are_still_looked_for(self) -> None:
        """LOOM-4: a text that went as bytes is withheld like any other text."""
        record = ErrorRecord(lambda: 0.0)
        secret = "my locker code is 4471 and nobody knows it"
        noted = record.note("extract", ValueError(f"bad: {secret}"), sent_texts=[secret.encode()])
        assert noted.message == WITHHELD

    def test_an_error_whose_message_cannot_be_read_is_named_by_its_class(self) -> None:
        """LOOM-4: a failure while describing the error would hide the error itself."""

        class Unprintable(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no")

        def raising() -> Iterator[str]:
            raise RuntimeError("no")
            yield ""

        noted = ErrorRecord(lambda: 0.0).note("extract", Unprintable(), sent_texts=raising())
        assert (noted.kind, noted.message) == ("Unprintable", "Unprintable")

    def test_a_time_that_is_no_number_shows_as_none(self) -> None:
        """LOOM-4: diagnostics still show an error noted under a broken clock."""
        shown = LastError(float("nan"), "extract", "InternalFault", "internal error").as_dict()
        assert shown["at"] is None and shown["kind"] == "InternalFault"
