"""Queued batches followed up until Loom has written them (SWEEP-15, SWEEP-4).

Against ``FakeLoom`` with a queue (``testbed/loom.py``) for the rules, then through the real
``LoomMemory`` and the dev gateway on loopback, and through ``nerve memory sweep`` itself with
``defer_extraction: true``. Transcripts and state are real SQLite files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.budget import QUEUED, WAITING_MAX_MESSAGES
from provisioner.runtime.gateway.errors import BrokenAnswer, CircuitOpen, CodedFault, MayPass
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import QUEUE_IDS_PER_CALL, queue_states_from
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import (
    AUDIT_FELL_BACK,
    AUDIT_FOLLOW_UP_KINDS,
    AUDIT_REPLAYED,
    AUDIT_WRITTEN,
    StateStore,
)
from provisioner.runtime.sweep.followup import DOUBT_KIND
from provisioner.runtime.sweep.outcomes import SweepReport
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import MISSING, FakeLoom, QueuedBatch
from tests.devgateway.test_loom_op import loom_op_problems
from tests.support.clock import fixed_clock
from tests.support.processes import RunNerve
from tests.support.state_sql import state_rows

from .sessions import add_session

pytestmark = pytest.mark.anyio
STATUS_OP = "memory.extraction_status_mine"


def queued(loom: object, transcripts: SqliteTranscripts, state: StateStore) -> Sweeper:
    return Sweeper(loom, transcripts, state, clock=fixed_clock, mode=QUEUED)  # type: ignore[arg-type]


def open_batches(state: StateStore) -> list[tuple[str, str, int, int]]:
    """(queue id, status, first id, last id) of every batch still followed."""
    rows = state_rows(
        state,
        "SELECT queue_id, status, first_id, last_id FROM queued_batch WHERE closed_at IS NULL"
        " ORDER BY seq",
    )
    return [tuple(row) for row in rows]


def follow_up_rows(state: StateStore) -> list[tuple[str, str]]:
    return [
        (str(row["kind"]), str(row["detail"])) for row in state.audit(kinds=AUDIT_FOLLOW_UP_KINDS)
    ]


class StepScript:
    """What pending batches become at each status call, per queue id, in order; ``then``
    after the script of an id runs out."""

    def __init__(self, script: dict[str, list[str]], then: str = "done") -> None:
        self.script = {queue_id: list(states) for queue_id, states in script.items()}
        self.then = then

    def __call__(self, queue_id: str, batch: QueuedBatch) -> str:
        states = self.script.get(queue_id)
        return states.pop(0) if states else self.then


class TestTheWatermarkWaitsForLoom:
    async def test_the_watermark_moves_only_once_the_status_says_written(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        ids = add_session(transcripts, "a", 5)
        loom = FakeLoom(queue=True, step=StepScript({"q-1": ["queued", "running"]}))
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        assert state.watermark("a") == 0 and loom.written == {}
        assert open_batches(state) == [("q-1", "queued", ids[0], ids[-1])]
        await sweeper.run_once()  # queued
        await sweeper.run_once()  # running
        assert state.watermark("a") == 0 and open_batches(state)[0][1] == "running"
        await sweeper.run_once()  # done
        assert state.watermark("a") == ids[-1] and open_batches(state) == []
        assert set(loom.written) == set(ids)
        assert [kind for kind, _ in follow_up_rows(state)] == [AUDIT_WRITTEN]
        assert len(loom.calls) == 1, "nothing was sent again while Loom worked"

    async def test_a_session_s_next_batch_waits_for_the_one_in_loom_s_queue(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """One batch in flight per session: 900 messages go as 400, 400, 100 over 3 sweeps."""
        ids = add_session(transcripts, "a", 900)
        add_session(transcripts, "b", 3)
        loom = FakeLoom(queue=True)
        sweeper = queued(loom, transcripts, state)
        first = await sweeper.run_once()
        assert [len(batch) for batch, _ in loom.sent_in("a")] == [400]
        assert first.stopped == "done" and first.windows_stopped == 0
        await sweeper.run_once()
        assert state.watermark("a") == ids[399]
        await sweeper.run_once()
        await sweeper.run_once()
        assert [len(batch) for batch, _ in loom.sent_in("a")] == [400, 400, 100]
        assert all(defer for _, defer in loom.sent_in("a"))
        assert state.watermark("a") == ids[-1]
        assert set(loom.written.values()) == {1} and len(loom.written) == 903

    async def test_the_status_is_asked_before_the_window_so_a_batch_done_by_then_goes_on(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """Written between two sweeps: the next sweep passes it and sends the next batch."""
        ids = add_session(transcripts, "a", 500)
        loom = FakeLoom(queue=True)
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        second = await sweeper.run_once()
        assert state.watermark("a") == ids[399] and open_batches(state)[0][2] == ids[400]
        assert second.messages_taken == 100
        assert loom.queue_calls == [("status", ("q-1",))]

    async def test_status_calls_ask_at_most_100_ids_each(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        for number in range(250):
            add_session(transcripts, f"s{number:03d}", 1)
        loom = FakeLoom(queue=True)
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        await sweeper.run_once()
        sizes = [len(ids) for op, ids in loom.queue_calls if op == "status"]
        assert sizes == [QUEUE_IDS_PER_CALL, QUEUE_IDS_PER_CALL, 50]
        assert QUEUE_IDS_PER_CALL == 100
        assert all(state.watermark(f"s{n:03d}") > 0 for n in range(250))

    async def test_a_restart_between_queue_and_status_loses_nothing(
        self, tmp_path: Path, transcripts: SqliteTranscripts
    ) -> None:
        """SWEEP-2: what is followed lives in the state file, not in the process."""
        ids = add_session(transcripts, "a", 5)
        loom = FakeLoom(queue=True)
        with StateStore(tmp_path / "crash.sqlite3") as state:
            await queued(loom, transcripts, state).run_once()
        with StateStore(tmp_path / "crash.sqlite3") as state:
            await queued(loom, transcripts, state).run_once()
            assert state.watermark("a") == ids[-1]
        assert len(loom.calls) == 1


class TestAFailedBatch:
    async def test_a_failed_batch_is_replayed_once_and_written_then(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        ids = add_session(transcripts, "a", 5)
        loom = FakeLoom(queue=True, step=StepScript({"q-1": ["failed"]}))
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        await sweeper.run_once()  # failed, then retried: queued again
        assert loom.queue_calls == [("status", ("q-1",)), ("retry", ("q-1",))]
        assert loom.batches["q-1"].attempts == 2 and state.watermark("a") == 0
        await sweeper.run_once()  # done
        assert state.watermark("a") == ids[-1]
        assert set(loom.written.values()) == {1} and len(loom.written) == 5
        kinds = [kind for kind, _ in follow_up_rows(state)]
        assert kinds == [AUDIT_REPLAYED, AUDIT_WRITTEN]

    async def test_failed_after_its_replay_the_window_goes_again_in_waiting_mode(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-3 batches (100 messages) from the watermark, then queued mode again."""
        ids = add_session(transcripts, "a", 450)
        loom = FakeLoom(queue=True, step=StepScript({"q-1": ["failed", "failed"]}))
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()  # q-1: 400 messages queued
        await sweeper.run_once()  # failed: replayed
        assert state.watermark("a") == 0
        report = await sweeper.run_once()  # failed again: waiting mode for those 400
        sent = loom.sent_in("a")
        assert [(len(batch), defer) for batch, defer in sent[1:]] == [
            (WAITING_MAX_MESSAGES, False)
        ] * 4 + [(50, True)]
        assert report.batches_sent == 5 and report.stopped == "done"
        assert state.watermark("a") == ids[399]
        assert any(kind == AUDIT_FELL_BACK for kind, _ in follow_up_rows(state))
        await sweeper.run_once()
        assert state.watermark("a") == ids[-1]
        assert set(loom.written.values()) == {1} and len(loom.written) == 450, "each once"

    async def test_a_replay_whose_call_fails_is_made_by_a_later_sweep(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        ids = add_session(transcripts, "a", 5)
        loom = FakeLoom(queue=True, step=StepScript({"q-1": ["failed"]}))
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        loom.faults.extend([None, MayPass("upstream unavailable")])
        await sweeper.run_once()  # the status says failed; the retry call fails
        assert loom.batches["q-1"].state == "failed" and open_batches(state)[0][1] == "failed"
        await sweeper.run_once()  # failed again (not replayed yet): retried now
        await sweeper.run_once()
        assert state.watermark("a") == ids[-1]
        assert [op for op, _ in loom.queue_calls].count("retry") == 2


class TestNeverOnDoubt:
    @pytest.mark.parametrize("step", [MISSING, "lost", "DONE", ""])
    async def test_an_unknown_state_or_no_word_never_moves_the_watermark(
        self, transcripts: SqliteTranscripts, state: StateStore, step: str
    ) -> None:
        add_session(transcripts, "a", 5)
        loom = FakeLoom(queue=True, step=lambda queue_id, batch: step)
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        report = await sweeper.run_once()
        assert state.watermark("a") == 0 and len(loom.calls) == 1
        assert report.errors == [{"session_id": "a", "kind": DOUBT_KIND}]
        assert report.went_through, "a batch still in Loom's hands is no failure"

    def test_items_that_cannot_be_taken_at_their_word_are_counted(self) -> None:
        """An id not asked, one answered twice, a state Loom does not know, a non-string."""
        answer = {
            "items": [
                {"queue_id": "q-1", "state": "done"},
                {"queue_id": "q-9", "state": "done"},
                {"queue_id": "q-2", "state": "done"},
                {"queue_id": "q-2", "state": "failed"},
                {"queue_id": "q-3", "state": "finished"},
                {"queue_id": 4, "state": "done"},
                {"queue_id": "q-5"},
            ]
        }
        asked = ["q-1", "q-2", "q-3", "q-5"]
        read = queue_states_from(answer, contract.EXTRACTION_STATUS, asked)
        assert read.states == {"q-1": "done"}
        assert read.odd == 6

    @pytest.mark.parametrize("answer", [[], {"items": {"q-1": "done"}}, {"items": ["q-1"]}])
    def test_an_answer_of_the_wrong_shape_is_a_broken_answer(self, answer: object) -> None:
        with pytest.raises(BrokenAnswer):
            queue_states_from(answer, contract.EXTRACTION_STATUS, ["q-1"])

    async def test_a_queue_id_answered_for_two_batches_sends_the_second_again_waiting(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 3)
        b = add_session(transcripts, "b", 3)
        loom = FakeLoom(queue=True, shared_queue_id="q-same", step=lambda queue_id, batch: "queued")
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        await sweeper.run_once()
        assert loom.sent_in("b") == [(tuple(b), True), (tuple(b), False)]
        assert state.watermark("b") == b[-1] and state.watermark("a") == 0


class TestFailedFollowUpCalls:
    @pytest.mark.parametrize(
        "fault", [MayPass("upstream unavailable"), CodedFault("busy", code="GRANT_BUSY")]
    )
    async def test_a_status_call_that_fails_is_not_now_for_its_windows(
        self, transcripts: SqliteTranscripts, state: StateStore, fault: Exception
    ) -> None:
        """SWEEP-7: the window stops, the watermark stays, one call for all the sessions."""
        add_session(transcripts, "a", 3)
        add_session(transcripts, "b", 3)
        loom = FakeLoom(queue=True)
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        loom.faults.append(fault)
        report = await sweeper.run_once()
        assert report.stopped == "done" and report.windows_stopped == 2
        assert not report.went_through
        kind = type(fault).__name__ + ("(GRANT_BUSY)" if isinstance(fault, CodedFault) else "")
        assert report.errors == [{"session_id": s, "kind": kind} for s in ("a", "b")]
        assert [call[0] for call in loom.queue_calls] == ["status"]
        assert state.watermark("a") == 0 and state.watermark("b") == 0
        await sweeper.run_once()
        assert state.watermark("a") > 0 and state.watermark("b") > 0

    async def test_an_open_breaker_on_the_status_call_ends_the_sweep(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-10: no window is offered; the line says why."""
        add_session(transcripts, "a", 3)
        loom = FakeLoom(queue=True)
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        add_session(transcripts, "new", 3)
        loom.faults.append(CircuitOpen("breaker open", retry_in_s=15))
        report = await sweeper.run_once()
        assert report.stopped == "breaker_open" and report.reason.startswith("breaker open")
        assert report.errors == [{"session_id": "", "kind": "CircuitOpen"}]
        assert loom.sent_in("new") == []


class TestWithoutLoomOp:
    async def test_queued_mode_moves_the_watermark_at_queue_time_as_before(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        ids = add_session(transcripts, "a", 500)
        loom = FakeLoom(queue=True, listed_now=False)
        report = await queued(loom, transcripts, state).run_once()
        assert state.watermark("a") == ids[-1] and report.messages_taken == 500
        assert loom.queue_calls == [] and open_batches(state) == []

    async def test_batches_followed_when_loom_op_went_away_are_passed_as_before(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """In Loom's queue: passed; failed: sent again in waiting mode."""
        a = add_session(transcripts, "a", 3)
        b = add_session(transcripts, "b", 3)
        loom = FakeLoom(queue=True, step=StepScript({"q-2": ["failed"]}, then="queued"))
        sweeper = queued(loom, transcripts, state)
        await sweeper.run_once()
        loom.faults.extend([None, MayPass("busy")])  # the retry of q-2 does not go through
        await sweeper.run_once()
        assert [row[1] for row in open_batches(state)] == ["queued", "failed"]
        loom.listed_now = False
        await sweeper.run_once()
        assert state.watermark("a") == a[-1] and state.watermark("b") == b[-1]
        assert loom.sent_in("b")[-1] == (tuple(b), False)


# --- through the real backend and the dev gateway --------------------------------------------


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=19, answers="mixed") as running:
        yield running
        problems = loom_op_problems(list(running.app.calls))
    assert not problems, problems


class TestThroughTheDevGateway:
    async def test_queued_batches_reach_loom_once_and_the_watermark_follows(
        self, gateway: RunningGateway, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """Queued, running, done over three status calls; each message written once."""
        ids = {session: add_session(transcripts, session, 450) for session in ("a", "b")}
        async with LoomMemory(gateway_url=gateway.base_url, state=state) as memory:
            sweeper = Sweeper(memory, transcripts, state, clock=fixed_clock, mode=QUEUED)
            reports: list[SweepReport] = [await sweeper.run_once()]
            assert state.watermark("a") == 0 and gateway.app.store.extracted_texts() == []
            while len(reports) < 12 and any(state.watermark(s) != ids[s][-1] for s in ids):
                reports.append(await sweeper.run_once())
        assert all(state.watermark(session) == ids[session][-1] for session in ids)
        texts = gateway.app.store.extracted_texts()
        assert len(texts) == 900 and len(set(texts)) == 900
        assert len(reports) == 7, "one to queue, then three status calls per batch"
        assert all(report.went_through for report in reports)

    async def test_a_batch_loom_fails_twice_is_written_once_in_waiting_mode(
        self, gateway: RunningGateway, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        ids = add_session(transcripts, "a", 20)
        store = gateway.app.store
        async with LoomMemory(gateway_url=gateway.base_url, state=state) as memory:
            sweeper = Sweeper(memory, transcripts, state, clock=fixed_clock, mode=QUEUED)
            await sweeper.run_once()
            for _ in range(2):  # Loom's own tries fail, before and after the replay
                store.answer(STATUS_OP, {"queue_ids": ["q-1"]}, forced=lambda: "failed")
                await sweeper.run_once()
        assert state.watermark("a") == ids[-1]
        assert len(store.extracted_texts()) == 20 == len(set(store.extracted_texts()))
        defers = [c.arguments["defer"] for c in gateway.app.calls if c.tool != "loom_op"]
        assert defers == [True, False]


# --- where a user meets it: `nerve memory sweep` and `nerve doctor` --------------------------


class Instance:
    """A configuration folder under Loom with ``defer_extraction: true``, its transcripts, and
    the real CLI run as a process against the dev gateway."""

    def __init__(self, tmp_path: Path, run_nerve: RunNerve, gateway: RunningGateway) -> None:
        self.run_nerve = run_nerve
        self.config_dir = tmp_path / "cfg"
        self.config_dir.mkdir()
        (self.config_dir / "config.yaml").write_text(
            "memory:\n  backend: loom\n  loom:\n    defer_extraction: true\n"
            f"mcp_gateway_url: {gateway.base_url}\n",
            encoding="utf-8",
        )
        self.transcripts = tmp_path / "transcripts.sqlite3"
        self.state = tmp_path / "state.sqlite3"
        self.places = ["--config-dir", str(self.config_dir), "--workspace", str(tmp_path / "ws")]

    def add(self, session: str, count: int) -> list[int]:
        with SqliteTranscripts(self.transcripts) as transcripts:
            return add_session(transcripts, session, count)

    def sweep(self) -> tuple[int, dict]:
        paths = ["--transcripts", str(self.transcripts), "--state", str(self.state)]
        done = self.run_nerve("memory", "sweep", "--json", *paths, *self.places)
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, json.loads(done.stdout)

    def watermark(self, session: str) -> int:
        with StateStore(self.state) as state:
            return state.watermark(session)

    def doctor(self) -> dict[str, dict]:
        done = self.run_nerve("doctor", "--json", *self.places)
        assert done.returncode in (0, 1), done.stderr
        return {check["id"]: check for check in json.loads(done.stdout)["checks"]}


@pytest.fixture
def instance(tmp_path: Path, run_nerve: RunNerve, gateway: RunningGateway) -> Instance:
    return Instance(tmp_path, run_nerve, gateway)


class TestTheCli:
    def test_nerve_memory_sweep_moves_the_watermark_once_loom_has_written_the_batch(
        self, instance: Instance, gateway: RunningGateway
    ) -> None:
        """Queued, then three status calls (queued, running, done): written once, exit 0."""
        ids = instance.add("a", 30)
        statuses = []
        for _ in range(4):
            status, report = instance.sweep()
            statuses.append(status)
            if instance.watermark("a") == 0:
                assert gateway.app.store.extracted_texts() == []
        assert statuses == [0, 0, 0, 0] and report["exit_status"] == 0
        assert instance.watermark("a") == ids[-1]
        texts = gateway.app.store.extracted_texts()
        assert len(texts) == 30 == len(set(texts))
        assert [call.tool for call in gateway.app.calls].count("loom_op") == 3

    def test_a_batch_loom_fails_twice_is_sent_again_waiting_and_written_once(
        self, instance: Instance, gateway: RunningGateway
    ) -> None:
        """The dev gateway's ``queue:failed`` rule: failed, replayed, failed, sent waiting."""
        ids = instance.add("a", 12)
        statuses = [instance.sweep()[0]]
        gateway.app.faults.switch("queue:failed@loom_op")
        statuses.append(instance.sweep()[0])  # failed: replayed
        assert instance.watermark("a") == 0
        statuses.append(instance.sweep()[0])  # failed again: sent in waiting mode
        assert statuses == [0, 0, 0] and instance.watermark("a") == ids[-1]
        texts = gateway.app.store.extracted_texts()
        assert len(texts) == 12 == len(set(texts))
        ops = [c.arguments.get("op") for c in gateway.app.calls if c.tool == "loom_op"]
        assert ops == [STATUS_OP, "memory.extraction_retry_mine", STATUS_OP]
        defers = [c.arguments["defer"] for c in gateway.app.calls if c.tool != "loom_op"]
        assert defers == [True, False]

    def test_the_report_counts_what_the_follow_up_did(
        self, instance: Instance, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-15: --json carries the follow-up's tally; the line says what was written and
        what is still in Loom's queue."""
        instance.add("a", 3)
        instance.add("b", 3)
        gateway.app.faults.switch("queue:queued@loom_op")
        _status, first = instance.sweep()
        assert first["follow_up"]["asked"] == 0 and first["follow_up"]["written"] == 0
        _status, waiting = instance.sweep()
        assert (waiting["follow_up"]["asked"], waiting["follow_up"]["held"]) == (2, 2)
        gateway.app.faults.switch("")
        gateway.app.store.queue_polls_before_done = 0
        paths = ["--transcripts", str(instance.transcripts), "--state", str(instance.state)]
        done = run_nerve("memory", "sweep", *paths, *instance.places)
        assert done.returncode == 0, done.stderr
        assert "; queued: 2 batches written, 0 still in Loom's queue" in done.stdout

    def test_without_loom_op_the_sweep_queues_as_before_and_doctor_warns(
        self, instance: Instance, gateway: RunningGateway
    ) -> None:
        gateway.app.unlist("loom_op")
        gateway.app.store.queue_polls_before_done = 0
        ids = instance.add("a", 5)
        status, report = instance.sweep()
        assert status == 0 and report["messages_taken"] == 5
        assert instance.watermark("a") == ids[-1], "the watermark moves at queue time"
        assert "loom_op" not in {call.tool for call in gateway.app.calls}
        catalog = instance.doctor()["loom.catalog"]
        assert catalog["status"] == "WARN"
        assert catalog["message"].endswith(
            "loom_op not listed: queued batches cannot be followed up, so one that fails "
            "inside Loom is lost"
        )
        assert "grant loom_op" in catalog["advice"]

    def test_with_loom_op_listed_doctor_says_queued_batches_are_followed_up(
        self, instance: Instance
    ) -> None:
        checks = instance.doctor()
        assert checks["loom.catalog"]["status"] == "OK"
        assert checks["loom.catalog"]["message"].endswith(
            "loom_op listed: queued batches are followed up until Loom has written them"
        )
        defer = checks["config.memory.loom.defer_extraction"]
        assert defer["status"] == "WARN"
        assert defer["message"].endswith(
            "unless the gateway's catalog lists loom_op (see loom.catalog), a queued window's "
            "watermark moves when Loom accepts the batch, not when it is written, so a failed "
            "background extraction loses it"
        )
