"""The sweep's rules, one class per requirement, against a scripted Loom (SWEEP-3…SWEEP-11).

The scripted Loom (``testbed/loom.py``) raises the real outcome classes of
``provisioner.runtime.gateway.errors``; the transcripts and the state are real SQLite files.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque

import pytest

from provisioner.runtime.budget import (
    GOOD_BATCHES_TO_GROW,
    MIN_BYTES,
    MIN_MESSAGES,
    QUEUED,
    QUEUED_MAX_BYTES,
    QUEUED_MAX_MESSAGES,
    WAITING,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    extraction_mode,
)
from provisioner.runtime.errors import MemoryBackendUnavailable
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CatalogError,
    CircuitOpen,
    CodedFault,
    GatewayCallTimeout,
    GatewayUnreachable,
    InternalFault,
    MayPass,
    NoAnswer,
    PolicyRefused,
    ServerNotListed,
    ToolRefused,
)
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep import sweeper as sweep_module
from provisioner.runtime.sweep.batching import ENVELOPE_BYTES, wire_size
from provisioner.runtime.sweep.outcomes import SweepReport
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from tests.support.clock import fixed_clock

from .sessions import add_session

pytestmark = pytest.mark.anyio


def make(loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore, mode=WAITING):
    return Sweeper(loom, transcripts, state, clock=fixed_clock, mode=mode)


async def sweep_times(sweeper: Sweeper, times: int) -> list[SweepReport]:
    return [await sweeper.run_once() for _ in range(times)]


class TestWaitingExtraction:
    async def test_batches_hold_at_most_100_messages_sent_without_defer(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3: waiting mode sends ``defer: false`` in batches of at most 100 messages."""
        ids = add_session(transcripts, "a", 250)
        report = await make(loom, transcripts, state).run_once()
        assert [len(call.message_ids) for call in loom.calls] == [100, 100, 50]
        assert not any(call.defer for call in loom.calls)
        assert report.messages_taken == 250
        assert state.watermark("a") == ids[-1]

    async def test_a_batch_stays_within_128_kib_of_request_body(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3: big messages make smaller batches; each body is within 128 KiB."""
        add_session(transcripts, "a", 60, size=5000)
        await make(loom, transcripts, state).run_once()
        assert len(loom.calls) > 1
        for call in loom.calls:
            body = ENVELOPE_BYTES + sum(len(c.encode()) + 80 for c in call.contents)
            assert body <= WAITING_MAX_BYTES
        assert sum(len(c.message_ids) for c in loom.calls) == 60

    async def test_the_watermark_moves_past_exactly_the_accepted_messages(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3, SWEEP-9: Loom took the first 30 of a batch; the watermark names the 30th."""
        ids = add_session(transcripts, "a", 40)
        loom.accept_limit = 30
        loom.faults = deque([None, MayPass("busy")])  # the second call finds Loom busy
        await make(loom, transcripts, state).run_once()
        assert state.watermark("a") == ids[29]

    async def test_a_batch_loom_fails_keeps_the_watermark(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3 (the seed's lost window): in waiting mode a failed batch moves nothing."""
        add_session(transcripts, "a", 10)
        loom.fail_every_batch = InternalFault("internal error")
        await make(loom, transcripts, state).run_once()
        assert state.watermark("a") == 0

    async def test_the_deadline_constant_is_130_seconds(self) -> None:
        """SWEEP-3: up to 130 s per call."""
        assert sweep_module.EXTRACT_DEADLINE_S == 130


class TestQueuedMode:
    async def test_queued_mode_sends_defer_in_batches_of_400(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-4: ``defer: true``, at most 400 messages within 768 KiB."""
        ids = add_session(transcripts, "a", 900)
        await make(loom, transcripts, state, mode=QUEUED).run_once()
        assert [len(call.message_ids) for call in loom.calls] == [400, 400, 100]
        assert all(call.defer for call in loom.calls)
        assert state.watermark("a") == ids[-1]
        assert (QUEUED.max_messages, QUEUED.max_bytes) == (QUEUED_MAX_MESSAGES, QUEUED_MAX_BYTES)
        assert (QUEUED_MAX_MESSAGES, QUEUED_MAX_BYTES) == (400, 768 * 1024)

    async def test_the_audit_log_names_each_queued_batch(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-4: one ``queued`` row per batch, with Loom's queue id."""
        ids = add_session(transcripts, "a", 500)
        await make(loom, transcripts, state, mode=QUEUED).run_once()
        rows = [row for row in state.audit() if row["kind"] == "queued"]
        assert [row["message_id"] for row in rows] == [ids[0], ids[400]]
        assert "queue_id=q-1" in rows[0]["detail"] and "queue_id=q-2" in rows[1]["detail"]

    async def test_a_queued_batch_loom_later_fails_keeps_the_watermark_in_waiting_mode(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3/4 (the seed's scenario): the same failing batch moves the watermark only when
        queued (Loom's later failure is out of sight); waiting keeps it."""
        add_session(transcripts, "a", 5, poison_at=(2,))
        loom.poison_marker = "never-matches"
        queued = await make(loom, transcripts, state, mode=QUEUED).run_once()
        assert queued.messages_taken == 5  # queued: the watermark moved at queue time
        waiting_state = StateStore(":memory:")
        failing = FakeLoom()  # waits while extracting: the poison fails the call
        await make(failing, transcripts, waiting_state).run_once()
        assert waiting_state.watermark("a") == 0

    def test_the_mode_s_docstring_names_the_follow_up_ops_and_no_todo_is_left(self) -> None:
        """SWEEP-15: the follow-up replaced the TODO that named both caller-bound ops."""
        source = inspect.getsource(extraction_mode)
        assert "TODO" not in source
        assert "memory.extraction_status_mine" in source
        assert "memory.extraction_retry_mine" in source
        assert extraction_mode(True) is QUEUED and extraction_mode(False) is WAITING


class TestBatchBudget:
    async def test_a_body_too_large_halves_messages_and_bytes_and_the_cut_stays(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-5: a 413 halves both limits, the window goes again next sweep, and the cut
        stays however many batches then go through."""
        add_session(transcripts, "a", 1000)
        loom.faults = deque([BodyTooLarge("413")])
        sweeper = make(loom, transcripts, state)
        first = await sweeper.run_once()
        assert (first.budget_messages, first.budget_bytes) == (50, 64 * 1024)
        assert first.messages_taken == 0
        second = await sweeper.run_once()
        assert second.messages_taken == 1000 and second.batches_sent == 20
        assert (second.budget_messages, second.budget_cut_reason) == (50, "too_large")
        assert [row["kind"] for row in state.audit()] == ["budget"]

    async def test_the_budget_never_halves_below_10_messages_in_16_kib(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-5: the floor."""
        add_session(transcripts, "a", 30)
        loom.fail_every_batch = BodyTooLarge("413")
        reports = await sweep_times(make(loom, transcripts, state), 8)
        assert (reports[-1].budget_messages, reports[-1].budget_bytes) == (MIN_MESSAGES, MIN_BYTES)
        assert (MIN_MESSAGES, MIN_BYTES) == (10, 16 * 1024)
        assert [len(call.message_ids) for call in loom.calls][-1] == 10

    async def test_a_gateway_call_limit_halves_and_ten_good_batches_grow_it_back(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-5 (the seed's scenario): "MCP server timed out" halves the budget; after ten
        batches in a row go through it doubles back to the default."""
        add_session(transcripts, "a", 2000)
        loom.faults = deque([GatewayCallTimeout("MCP server timed out")])
        sweeper = make(loom, transcripts, state)
        cut = await sweeper.run_once()
        assert (cut.budget_messages, cut.budget_cut_reason) == (50, "timeout")
        await sweeper.run_once()
        sizes = [len(call.message_ids) for call in loom.calls[1:]]
        assert sizes[:GOOD_BATCHES_TO_GROW] == [50] * GOOD_BATCHES_TO_GROW
        assert sizes[GOOD_BATCHES_TO_GROW] == 100
        assert sweeper.budget().cut_reason is None and sweeper.budget().at_default

    async def test_the_clients_own_timeout_halves_the_budget_too(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-5: no answer by the deadline cuts like the gateway's call limit."""
        add_session(transcripts, "a", 20)
        loom.faults = deque([NoAnswer("no answer", deadline_s=130)])
        report = await make(loom, transcripts, state).run_once()
        assert (report.budget_messages, report.budget_cut_reason) == (50, "timeout")

    async def test_a_message_bigger_than_the_byte_budget_is_sent_cut_with_an_audit_row(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-11: it goes alone, cut to fit, and the audit row says so."""
        add_session(transcripts, "a", 2)
        huge = transcripts.add_message("a", "user", "é" * 300_000, "2026-11-30T11:00:00Z")
        add_session(transcripts, "a", 2)
        report = await make(loom, transcripts, state).run_once()
        assert report.messages_taken == 5 and report.messages_cut == 1
        (cut_call,) = [call for call in loom.calls if huge in call.message_ids]
        assert cut_call.message_ids == (huge,)
        assert len(cut_call.contents[0].encode()) < WAITING_MAX_BYTES
        (row,) = [row for row in state.audit() if row["kind"] == "cut"]
        assert (row["message_id"], row["role"]) == (huge, "user")


class TestContextTurns:
    async def test_context_turns_count_against_the_byte_budget(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-6: later batches carry context turns, and batch plus context fit the budget."""
        add_session(transcripts, "a", 300, size=1500)
        await make(loom, transcripts, state).run_once()
        with_context = [call for call in loom.calls if call.context_ids]
        assert with_context, "batches after the first carry context"
        for call in loom.calls:
            assert len(call.context_ids) <= WAITING_MAX_MESSAGES // 8
            assert set(call.context_ids).isdisjoint(call.message_ids)

    async def test_a_budget_at_its_minimum_still_fits_its_context(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-6: at 10 messages / 16 KiB the context shrinks to one turn and still fits."""
        ids = add_session(transcripts, "a", 60, size=1400)
        loom.faults = deque([BodyTooLarge("413")] * 4)
        sweeper = make(loom, transcripts, state)
        await sweep_times(sweeper, 4)
        assert sweeper.budget().at_minimum
        await sweeper.run_once()
        messages = {m.id: m for m in transcripts.messages_after("a", 0, 100)}
        for call in loom.calls[4:]:
            assert len(call.context_ids) <= 1
            size = ENVELOPE_BYTES + sum(wire_size(messages[i]) for i in call.message_ids)
            size += sum(wire_size(messages[i]) for i in call.context_ids)
            assert size <= MIN_BYTES
        assert state.watermark("a") == ids[-1]


class TestNotNow:
    @pytest.mark.parametrize(
        "fault",
        [
            CodedFault("db down", code="BACKEND_UNAVAILABLE"),
            CodedFault("busy", code="GRANT_BUSY"),
            CodedFault("overloaded", code="OVERLOADED"),
            MayPass("upstream unavailable", retry_after_s=30),
            BrokenAnswer("cut stream"),
            ToolRefused("no"),
        ],
    )
    async def test_a_not_now_outcome_stops_the_window_and_counts_nothing(
        self,
        loom: FakeLoom,
        transcripts: SqliteTranscripts,
        state: StateStore,
        fault: Exception,
    ) -> None:
        """SWEEP-7: the window stops, the watermark stays, no failure is counted; the next
        session is still offered."""
        add_session(transcripts, "a", 5)
        add_session(transcripts, "b", 5)
        loom.faults = deque([fault])
        report = await make(loom, transcripts, state).run_once()
        assert state.sweep_session("a").watermark == 0
        assert state.sweep_session("a").failures == 0
        assert report.messages_taken == 5 and report.stopped == "done"

    async def test_coded_faults_on_every_batch_for_100_sweeps_skip_nothing(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-7, SWEEP-8 (the seed's scenario): a Loom whose database is down."""
        add_session(transcripts, "a", 120)
        loom.fail_every_batch = CodedFault("db down", code="BACKEND_UNAVAILABLE")
        await sweep_times(make(loom, transcripts, state), 100)
        assert state.audit() == []
        assert state.sweep_session("a").failures == 0
        assert len(loom.calls) == 100


class TestIsolation:
    async def test_a_poison_message_in_a_batch_of_100_is_found_and_skipped_after_the_next_batch(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8 (the seed's scenario): three failing sweeps, halving, then the skip is
        written only in the transaction of the next batch that went through."""
        ids = add_session(transcripts, "a", 150, poison_at=(0,))
        sweeper = make(loom, transcripts, state)
        first, second = await sweep_times(sweeper, 2)
        assert first.messages_skipped == second.messages_skipped == 0
        assert state.sweep_session("a").failures == 2
        third = await sweeper.run_once()
        outcomes = [call.outcome for call in loom.calls]
        assert outcomes[:3] == ["poison"] * 3
        assert outcomes[3:10] == ["poison"] * 7  # 50, 25, 13, 7, 4, 2, 1
        assert outcomes[10] == "taken" and ids[0] not in loom.calls[10].message_ids
        assert ids[0] not in loom.calls[10].context_ids
        assert third.messages_skipped == 1 and third.messages_taken == 149
        (row,) = state.audit()
        assert (row["kind"], row["message_id"], row["role"]) == ("skipped", ids[0], "user")
        assert row["created_at"] == "2026-11-30T10:00:00Z"

    @pytest.mark.parametrize("position", [0, 1, 37, 49, 50, 63, 98, 99])
    async def test_poison_anywhere_in_a_batch_of_100_is_found_within_3_7_1_calls(
        self,
        loom: FakeLoom,
        transcripts: SqliteTranscripts,
        state: StateStore,
        position: int,
    ) -> None:
        """SWEEP-8: 3 failing sweeps + at most 7 halvings + the next batch."""
        ids = add_session(transcripts, "a", 101, poison_at=(position,))
        await sweep_times(make(loom, transcripts, state), 3)
        skip_call = next(
            n
            for n, call in enumerate(loom.calls, 1)
            if call.outcome == "taken" and call.message_ids[-1] > ids[position]
        )
        assert skip_call <= 3 + 7 + 1
        assert [row["message_id"] for row in state.audit()] == [ids[position]]
        assert set(loom.taken) == set(ids) - {ids[position]}

    async def test_the_first_failures_skip_nothing(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8: the first and second failing sweeps only count."""
        add_session(transcripts, "a", 20, poison_at=(5,))
        await sweep_times(make(loom, transcripts, state), 2)
        assert state.audit() == [] and state.watermark("a") == 0
        assert len(loom.calls) == 2

    async def test_uncoded_failures_on_every_batch_for_100_sweeps_skip_nothing(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8 (the seed's scenario): a Loom failing every batch is an outage, not poison;
        and when it recovers every message is taken."""
        ids = add_session(transcripts, "a", 120)
        loom.fail_every_batch = InternalFault("internal error")
        sweeper = make(loom, transcripts, state)
        await sweep_times(sweeper, 100)
        assert state.audit() == [] and state.watermark("a") == 0
        loom.fail_every_batch = None
        await sweeper.run_once()
        assert state.watermark("a") == ids[-1] and state.audit() == []
        assert set(loom.taken) == set(ids)

    async def test_an_outage_that_starts_during_the_isolation_skips_nothing(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-7, SWEEP-8: coded faults mid-isolation stop it; it resumes next sweep."""
        ids = add_session(transcripts, "a", 100, poison_at=(70,))
        sweeper = make(loom, transcripts, state)
        await sweep_times(sweeper, 2)
        loom.faults = deque([InternalFault("x"), None, CodedFault("down", code="GRANT_BUSY")])
        await sweeper.run_once()
        assert state.audit() == [] and state.sweep_session("a").isolating
        await sweeper.run_once()
        assert [row["message_id"] for row in state.audit()] == [ids[70]]

    async def test_after_a_skip_the_isolation_is_over(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8: a second poison later in the window needs its own three sweeps."""
        ids = add_session(transcripts, "a", 100, poison_at=(3, 60))
        sweeper = make(loom, transcripts, state)
        await sweep_times(sweeper, 3)
        assert [row["message_id"] for row in state.audit()] == [ids[3]]
        session = state.sweep_session("a")
        assert not session.isolating and session.failures == 1
        await sweep_times(sweeper, 2)
        assert [row["message_id"] for row in state.audit()] == [ids[3], ids[60]]
        assert set(loom.taken) == set(ids) - {ids[3], ids[60]}

    async def test_two_poison_messages_side_by_side_are_both_skipped(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8: the next batch fails on the second; it is found at once, and both are
        skipped when the batch after them goes through."""
        ids = add_session(transcripts, "a", 30, poison_at=(10, 11))
        await sweep_times(make(loom, transcripts, state), 3)
        assert sorted(row["message_id"] for row in state.audit()) == [ids[10], ids[11]]
        assert set(loom.taken) == set(ids) - {ids[10], ids[11]}

    async def test_poison_last_in_its_window_is_skipped_when_a_half_went_through_this_sweep(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8: at the end of the window, proof is a batch through since the isolation
        began in this sweep."""
        ids = add_session(transcripts, "a", 9, poison_at=(8,))
        await sweep_times(make(loom, transcripts, state), 3)
        assert [row["message_id"] for row in state.audit()] == [ids[8]]
        assert state.watermark("a") == ids[8]

    async def test_a_lone_poison_message_without_proof_is_not_skipped(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-8: nothing went through, so nothing shows Loom works without it."""
        add_session(transcripts, "a", 1, poison_at=(0,))
        await sweep_times(make(loom, transcripts, state), 9)
        assert state.audit() == [] and state.watermark("a") == 0


class TestReofferedWindow:
    async def test_a_window_offered_again_sends_only_messages_loom_has_not_taken(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-9: after partial takes, lost answers and not-now faults, each message Loom
        took was sent exactly once."""
        ids = add_session(transcripts, "a", 300)
        loom.accept_limit = 37
        loom.faults = deque([None, MayPass("x"), None, CodedFault("y", code="GRANT_BUSY")])
        reports = await sweep_times(make(loom, transcripts, state), 6)
        assert sum(r.messages_taken for r in reports) == 300
        assert set(loom.taken) == set(ids) and set(loom.taken.values()) == {1}


class TestSweepEnds:
    @pytest.mark.parametrize(
        ("fault", "why"),
        [
            (CircuitOpen("open", retry_in_s=15), "breaker_open"),
            (NoAnswer("no answer", deadline_s=130), "no_answer"),
            (GatewayUnreachable("refused"), "unreachable"),
            (MemoryBackendUnavailable("no gateway URL"), "unavailable"),
            (CatalogError("no catalog", reason="unreachable"), "unavailable"),
            (ServerNotListed("no loom"), "unavailable"),
            (PolicyRefused("no credential set"), "unavailable"),
        ],
    )
    async def test_the_sweep_ends_at_once(
        self,
        loom: FakeLoom,
        transcripts: SqliteTranscripts,
        state: StateStore,
        fault: Exception,
        why: str,
    ) -> None:
        """SWEEP-10: no other session is offered in this sweep."""
        for session in "abc":
            add_session(transcripts, session, 3)
        loom.faults = deque([fault])
        report = await make(loom, transcripts, state).run_once()
        assert report.stopped == why
        assert len(loom.calls) == 1 and report.sessions_swept == 0


class TestOneSweepAtATime:
    async def test_a_second_caller_returns_at_once_saying_a_sweep_is_running(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-11: the lock is per state file, for any sweeper over it."""
        add_session(transcripts, "a", 3)
        held = FakeLoom(held=True)
        first = asyncio.create_task(make(held, transcripts, state).run_once())
        await held.entered.wait()
        other_store = StateStore(state.path)
        second = await make(FakeLoom(), transcripts, other_store).run_once()
        same = await make(FakeLoom(), transcripts, state).run_once()
        held.release.set()
        done = await first
        other_store.close()
        assert second.stopped == same.stopped == "already_running"
        assert second.batches_sent == 0 and done.stopped == "done"

    async def test_the_lock_is_free_again_after_a_sweep(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-11: ending (or failing) releases the lock."""
        add_session(transcripts, "a", 3)
        loom.faults = deque([GatewayUnreachable("down")])
        sweeper = make(loom, transcripts, state)
        assert (await sweeper.run_once()).stopped == "unreachable"
        assert (await sweeper.run_once()).stopped == "done"


class TestReport:
    async def test_the_report_is_plain_json(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """The report says sessions, batches, messages, budget and why it stopped."""
        add_session(transcripts, "a", 3)
        report = await make(loom, transcripts, state).run_once()
        data = json.loads(json.dumps(report.as_dict()))
        assert data["sessions_seen"] == 1 and data["messages_taken"] == 3
        assert data["budget_messages"] == 100 and data["stopped"] == "done"
