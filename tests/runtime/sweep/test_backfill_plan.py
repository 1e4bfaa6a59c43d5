"""``--backfill`` moves watermarks back over memU's share only, ``--plan`` writes nothing (MIG-2).

Real parts: a Nerve-shaped ``nerve.db`` read by ``NerveTranscripts``, the built-in SQLite
transcripts, real state files, and the sweep against the scripted Loom.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.integrations.nerve import NerveTranscripts
from provisioner.runtime.budget import CUT_TOO_LARGE, QUEUED, WAITING
from provisioner.runtime.gateway.errors import CodedFault
from provisioner.runtime.state import (
    AUDIT_BACKFILL,
    AUDIT_BACKFILL_DONE,
    AUDIT_BUDGET,
    AUDIT_WENT_BACK,
    AuditEntry,
    StateStore,
)
from provisioner.runtime.sweep.backfill import (
    IN_LOOM_QUEUE_KIND,
    BackfillBusy,
    BackfillMove,
    parse_backfill,
    run_backfill,
)
from provisioner.runtime.sweep.batching import ENVELOPE_BYTES, context_size, wire_size
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.plan import StateUnreadable, open_plan_state, plan_sweep
from provisioner.runtime.sweep.source import (
    BackfillView,
    Memorized,
    read_ledger,
    start_new_sessions,
    sweep_source,
)
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import Message, SqliteTranscripts, TranscriptSource
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb, native
from tests.support.clock import NOW, fixed_clock
from tests.support.processes import RunNerve, assert_one_line_error
from tests.support.state_sql import state_transaction

from .sessions import add_session, sweep
from .test_queued_followup import StepScript

pytestmark = pytest.mark.anyio


def backfill(source: TranscriptSource, state: StateStore, scope: str) -> list[BackfillMove]:
    moves, errors = run_backfill(source, state, parse_backfill(scope), now=NOW)
    assert errors == []
    return moves


def backfill_details(state: StateStore) -> list[tuple[object, object, object]]:
    rows = state.audit(kinds=(AUDIT_BACKFILL,))
    return [(row["session_id"], row["message_id"], row["detail"]) for row in rows]


def switched(nerve: NerveDb, count: int, memorized: int) -> list[int]:
    """Session ``a`` of ``count`` turns a second apart, memU having taken the first
    ``memorized`` of them; their ids."""
    nerve.session("a")
    ids = nerve.add_many("a", count)
    nerve.set_last_memorized_at("a", native(0, memorized - 1))
    return ids


class TestScope:
    """What ``--backfill`` takes."""

    @pytest.mark.parametrize(
        ("text", "since"),
        [
            ("all", None),
            ("since:2026-11-30", datetime(2026, 11, 30, tzinfo=UTC)),
            ("since:2026-11-30T10:00:02Z", datetime(2026, 11, 30, 10, 0, 2, tzinfo=UTC)),
            ("since:2026-11-30T12:00:02+02:00", datetime(2026, 11, 30, 10, 0, 2, tzinfo=UTC)),
        ],
    )
    def test_all_a_date_and_a_time_with_its_zone_are_scopes(
        self, text: str, since: datetime | None
    ) -> None:
        assert parse_backfill(text).since == since

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "ALL",
            "since:",
            "since:yesterday",
            "since:2026-02-30",
            "since:2026-11-30T10:00:02",  # no zone
            "since:2026-11-30 10:00:02Z",
            "since:20261130",
            "since:2026-11-30\n",
        ],
    )
    def test_anything_else_is_one_line_naming_the_option_and_what_it_takes(self, text: str) -> None:
        with pytest.raises(ValueError, match=r"^--backfill") as raised:
            parse_backfill(text)
        assert "\n" not in str(raised.value).replace(repr(text), "")
        assert "since:YYYY-MM-DD" in str(raised.value)


class TestBackfillAll:
    """``--backfill all``: memU's share goes to Loom once, what was sent never again."""

    async def test_memus_share_goes_and_what_this_package_sent_does_not_go_again(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 10, memorized=5)
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids[5:]
        new = nerve.add_many("a", 3, start=10)
        assert backfill(reader, state, "all") == [BackfillMove("a", 0, ids[4], ids[9])]
        assert state.watermark("a") == 0
        assert backfill_details(state) == [("a", 0, f"through={ids[4]} resume={ids[9]}")]
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids + new
        assert set(loom.taken.values()) == {1}
        assert state.watermark("a") == new[-1]

    async def test_once_memus_share_is_sent_the_watermark_goes_on_to_where_it_stood(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """With no message after it, the sweep stops at memU's point; the next one settles."""
        ids = switched(nerve, 6, memorized=3)
        await sweep(reader, state, loom)
        backfill(reader, state, "all")
        await sweep(reader, state, loom)
        assert state.watermark("a") == ids[2]
        report = await sweep(reader, state, loom)
        assert state.watermark("a") == ids[5] and report.messages_taken == 0
        (done,) = state.audit(kinds=(AUDIT_BACKFILL_DONE,))
        assert (done["message_id"], done["detail"]) == (ids[5], f"{ids[2]} -> {ids[5]}")
        assert sorted(loom.taken) == ids and set(loom.taken.values()) == {1}

    async def test_run_again_it_finds_nothing_and_nothing_is_sent(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        switched(nerve, 6, memorized=3)
        await sweep(reader, state, loom)
        backfill(reader, state, "all")
        await sweep(reader, state, loom)
        calls = len(loom.calls)
        assert backfill(reader, state, "all") == []
        await sweep(reader, state, loom)
        assert len(loom.calls) == calls and len(backfill_details(state)) == 1

    async def test_right_after_the_switch_it_sends_the_whole_history_once(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 6, memorized=4)
        moves = backfill(reader, state, "all")  # no sweep yet: started, then moved back
        assert moves == [BackfillMove("a", 0, ids[3], ids[3])]
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids and set(loom.taken.values()) == {1}

    async def test_a_session_swept_from_its_start_has_nothing_to_backfill(
        self, transcripts: SqliteTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        add_session(transcripts, "s", 4)
        await sweep(transcripts, state, loom)
        assert backfill(transcripts, state, "all") == []
        assert state.watermark("s") == 4

    async def test_an_interrupted_backfill_goes_on_and_still_passes_over_what_was_sent(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 10, memorized=5)
        await sweep(reader, state, loom)
        backfill(reader, state, "all")
        loom.accept_limit = 2
        loom.faults = deque([None, CodedFault("busy", code="GRANT_BUSY")])
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == [*ids[:2], *ids[5:]]
        loom.accept_limit = None
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids and set(loom.taken.values()) == {1}

    async def test_while_another_sweep_runs_nothing_is_moved(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 6, memorized=3)
        await sweep(reader, state, loom)
        with sweep_lock(state.path, None) as held:
            assert held
            with pytest.raises(BackfillBusy):
                run_backfill(reader, state, parse_backfill("all"), now=NOW)
        assert state.watermark("a") == ids[-1] and backfill_details(state) == []

    async def test_a_source_that_went_back_is_no_longer_passed_over(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """After a restore the ids past the watermark name other messages: they are read."""
        ids = switched(nerve, 10, memorized=5)
        await sweep(reader, state, loom)
        backfill(reader, state, "all")
        view = BackfillView(reader, state)
        assert [m.id for m in view.messages_after("a", ids[3], 3)] == [ids[4]]
        entry = AuditEntry(AUDIT_WENT_BACK, "a", 0, detail=f"watermark 0 -> {ids[2]}: gone")
        state.record_went_back("a", watermark=ids[2], audit=entry, now=NOW)
        assert [m.id for m in view.messages_after("a", ids[3], 3)] == ids[4:7]
        assert read_ledger(state).left == {"a": 0}


class TestBackfillSince:
    """``--backfill since:DATE``: memU's share from DATE on; earlier, only when asked."""

    async def test_since_a_time_sends_memus_messages_from_then_and_all_adds_the_rest(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 10, memorized=5)  # 10:00:00 … 10:00:09
        await sweep(reader, state, loom)
        moves = backfill(reader, state, "since:2026-11-30T10:00:02Z")
        assert moves == [BackfillMove("a", ids[1], ids[4], ids[9])]
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids[2:]
        assert backfill(reader, state, "since:2026-11-30T10:00:02Z") == []
        assert backfill(reader, state, "all") == [BackfillMove("a", 0, ids[1], ids[9])]
        await sweep(reader, state, loom)
        assert sorted(loom.taken) == ids and set(loom.taken.values()) == {1}

    async def test_a_date_after_memus_point_moves_nothing(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        switched(nerve, 6, memorized=3)
        await sweep(reader, state, loom)
        assert backfill(reader, state, "since:2026-12-01") == []

    async def test_a_day_means_from_its_start_in_utc(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = switched(nerve, 6, memorized=3)
        await sweep(reader, state, loom)
        assert backfill(reader, state, "since:2026-11-30") == [BackfillMove("a", 0, ids[2], ids[5])]

    async def test_a_message_whose_time_cannot_be_read_counts_as_after_the_date(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        source = Remembering(tmp_path / "t.sqlite3")
        first = source.add_message("s", "user", "one", "2026-11-30T10:00:00Z")
        source.add_message("s", "user", "two", "later that day")
        last = source.add_message("s", "user", "three", "2026-11-30T10:00:05Z")
        source.memorized = Memorized(last, 3)
        await sweep(source, state, loom)
        moves = backfill(source, state, "since:2026-11-30T10:00:03Z")
        assert moves == [BackfillMove("s", first, last, last)]
        await sweep(source, state, loom)
        assert sorted(loom.taken) == [last]  # 'two' is refused by the sweep, never skipped here
        source.close()


class Remembering(SqliteTranscripts):
    """The built-in transcripts, with a host memory that took the session up to
    ``memorized``."""

    memorized: Memorized | None = None

    def memorized_through(self, session_id: str) -> Memorized | None:
        return self.memorized


class TestPlan:
    """``--plan``: what a sweep would send, and nothing written."""

    async def test_it_counts_exactly_what_the_sweep_then_sends(
        self, transcripts: SqliteTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        add_session(transcripts, "long", 230, size=300)
        add_session(transcripts, "short", 3)
        add_session(transcripts, "huge", 1, size=200_000)  # cut to fit (SWEEP-11)
        plan = plan_sweep(transcripts, state, mode=WAITING)
        report = await sweep(transcripts, state, loom)
        due = plan.due
        assert (due.sessions, due.messages, due.batches, due.cut) == (3, 234, 5, 1)
        assert (report.messages_taken, report.batches_sent, report.messages_cut) == (234, 5, 1)
        assert due.bytes == sent_bytes(transcripts, loom)

    async def test_it_follows_the_budget_the_state_keeps(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "s", 120)
        budget = WAITING.default_budget().halved(CUT_TOO_LARGE)
        state.record_budget(WAITING.name, budget, audit=[AuditEntry(AUDIT_BUDGET, "s", 1)], now=NOW)
        plan = plan_sweep(transcripts, state, mode=WAITING)
        assert (plan.budget, plan.due.batches) == (budget, 3)

    async def test_it_shows_what_memu_keeps_and_what_a_backfill_would_add(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore
    ) -> None:
        switched(nerve, 10, memorized=4)
        plan = plan_sweep(reader, state, mode=WAITING, scope=parse_backfill("all"))
        assert (plan.due.messages, plan.after_memu_sessions, plan.after_memu_messages) == (6, 1, 4)
        assert plan.backfill is not None
        assert (plan.backfill.sessions, plan.backfill.messages, plan.backfill.batches) == (1, 4, 1)
        assert plan.as_dict()["backfill"] == {"scope": "all", **_figures(plan.backfill)}

    async def test_after_a_backfill_it_leaves_out_what_is_passed_over(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        switched(nerve, 10, memorized=4)
        await sweep(reader, state, loom)
        nerve.add_many("a", 2, start=10)
        backfill(reader, state, "all")
        plan = plan_sweep(reader, state, mode=WAITING)
        calls = len(loom.calls)
        report = await sweep(reader, state, loom)
        assert plan.due.messages == report.messages_taken == 6
        assert plan.due.bytes == sent_bytes(reader, loom, since_call=calls)

    async def test_it_writes_nothing_to_the_state_or_to_nerves_file(
        self, tmp_path: Path, nerve: NerveDb, reader: NerveTranscripts, loom: FakeLoom
    ) -> None:
        switched(nerve, 10, memorized=4)
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as store:
            await sweep(reader, store, loom)
        nerve.add_many("a", 2, start=10)
        before = (_digest(path), _digest(nerve.path))
        with open_plan_state(path) as state:
            plan = plan_sweep(reader, state, mode=WAITING, scope=parse_backfill("all"))
        assert plan.due.messages == 2 and plan.backfill is not None
        assert (_digest(path), _digest(nerve.path)) == before

    def test_a_missing_state_file_reads_as_empty_and_is_not_created(
        self, tmp_path: Path, transcripts: SqliteTranscripts
    ) -> None:
        add_session(transcripts, "s", 3)
        path = tmp_path / "nowhere" / "state.sqlite3"
        with open_plan_state(path) as state:
            assert plan_sweep(transcripts, state, mode=WAITING).due.messages == 3
        assert not path.parent.exists()

    @pytest.mark.parametrize("shape", ["not-sqlite", "newer"])
    def test_a_state_file_it_cannot_read_is_one_line(self, tmp_path: Path, shape: str) -> None:
        path = tmp_path / "state.sqlite3"
        if shape == "not-sqlite":
            path.write_bytes(b"no database here " * 64)
        else:
            StateStore(path).close()
            import sqlite3

            db = sqlite3.connect(path)
            db.execute("PRAGMA user_version = 999")
            db.close()
        before = _digest(path)
        with pytest.raises(StateUnreadable) as raised:
            open_plan_state(path)
        assert str(path) in str(raised.value) and "\n" not in str(raised.value)
        assert _digest(path) == before

    def test_a_session_the_source_cannot_read_is_named_and_the_rest_counted(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        class Failing(SqliteTranscripts):
            def messages_after(self, session_id: str, after_id: int, limit: int) -> list[Message]:
                if session_id == "bad":
                    raise RuntimeError("disk gone")
                return super().messages_after(session_id, after_id, limit)

        source = Failing(tmp_path / "t.sqlite3")
        add_session(source, "bad", 2)
        add_session(source, "good", 2)
        plan = plan_sweep(source, state, mode=WAITING)
        assert plan.due.messages == 2
        assert plan.errors == [{"session_id": "bad", "kind": "SourceFailed(RuntimeError)"}]
        assert "  bad: SourceFailed(RuntimeError)" in plan.lines()
        source.close()

    def test_its_line_and_its_json_say_nothing_was_sent(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "s", 3)
        plan = plan_sweep(transcripts, state, mode=WAITING)
        assert plan.lines()[0].startswith("plan (waiting, budget 100 messages / 128 KiB): 1 of")
        assert "3 messages in 1 batch" in plan.lines()[0]
        assert "nothing was sent" in plan.lines()[0]
        data = plan.as_dict()
        assert (data["sent"], data["messages"], data["batches"], data["backfill"]) == (
            False,
            3,
            1,
            None,
        )


def sent_bytes(source: TranscriptSource, loom: FakeLoom, *, since_call: int = 0) -> int:
    """The request bodies of the calls Loom took, sized as ``batching`` sizes them."""
    total = 0
    for call in loom.calls[since_call:]:
        messages = {m.id: m for m in _read_all(source, call.session_id)}
        sent = [messages[i] for i in call.message_ids]
        if len(sent) == 1 and len(call.contents[0]) < len(sent[0].content):  # cut to fit
            sent = [Message(sent[0].id, sent[0].role, call.contents[0], sent[0].created_at)]
        total += ENVELOPE_BYTES + len(call.session_id.encode())
        total += sum(map(wire_size, sent))
        total += sum(context_size(messages[i]) for i in call.context_ids)
    return total


def _read_all(source: TranscriptSource, session_id: str) -> Sequence[Message]:
    found: list[Message] = []
    while page := source.messages_after(session_id, found[-1].id if found else 0, 500):
        found.extend(page)
    return found


def _figures(figures: object) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(figures)  # type: ignore[call-overload]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5, answers="mixed") as running:
        yield running


def cli_options(tmp_path: Path, url: str | None) -> list[str]:
    """A configuration folder (Loom's when ``url`` is given, memU's otherwise) and a state."""
    config_dir = tmp_path / "cfg"
    config_dir.mkdir(parents=True, exist_ok=True)
    if url is not None:
        text = f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n"
        (config_dir / "config.local.yaml").write_text(text, encoding="utf-8")
    return [
        "--config-dir",
        str(config_dir),
        "--workspace",
        str(tmp_path / "ws"),
        "--state",
        str(tmp_path / "state.sqlite3"),
    ]


class TestCommandLine:
    """``nerve memory sweep --plan`` and ``--backfill`` as a real process (MIG-2)."""

    def test_the_plan_as_json_counts_and_changes_neither_file(
        self, tmp_path: Path, nerve: NerveDb, run_nerve: RunNerve
    ) -> None:
        switched(nerve, 10, memorized=4)
        options = cli_options(tmp_path, "http://127.0.0.1:9")  # never asked
        with StateStore(tmp_path / "state.sqlite3"):
            pass
        before = (_digest(tmp_path / "state.sqlite3"), _digest(nerve.path))
        done = run_nerve(
            "memory", "sweep", "--plan", "--backfill", "all", "--nerve-db", str(nerve.path),
            "--json", *options,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        assert (plan["sent"], plan["sessions"], plan["messages"], plan["batches"]) == (
            False,
            1,
            6,
            1,
        )
        assert plan["after_memu"] == {"sessions": 1, "messages": 4}
        assert (plan["backfill"]["scope"], plan["backfill"]["messages"]) == ("all", 4)
        assert (_digest(tmp_path / "state.sqlite3"), _digest(nerve.path)) == before

    def test_the_plan_works_before_the_switch_and_creates_no_state(
        self, tmp_path: Path, nerve: NerveDb, run_nerve: RunNerve
    ) -> None:
        switched(nerve, 5, memorized=5)
        options = cli_options(tmp_path, None)  # memory.backend is still memU
        done = run_nerve("memory", "sweep", "--plan", "--nerve-db", str(nerve.path), *options)
        assert done.returncode == 0, done.stderr
        first, second = done.stdout.splitlines()
        assert "0 of 1 session with messages to send" in first and "nothing was sent" in first
        assert "leaving 5 messages to memU" in second
        assert not (tmp_path / "state.sqlite3").exists()

    @pytest.mark.parametrize(
        ("extra", "fragments"),
        [
            (["--backfill", "since:yesterday"], ["--backfill", "since:YYYY-MM-DD"]),
            (["--backfill", "everything"], ["--backfill", "expected all"]),
            (["--plan", "--every", "5m"], ["--plan", "--every"]),
        ],
    )
    def test_bad_input_is_one_line_and_status_2(
        self,
        tmp_path: Path,
        nerve: NerveDb,
        run_nerve: RunNerve,
        extra: list[str],
        fragments: list[str],
    ) -> None:
        options = cli_options(tmp_path, "http://127.0.0.1:9")
        done = run_nerve("memory", "sweep", "--nerve-db", str(nerve.path), *extra, *options)
        assert_one_line_error(done, *fragments)

    def test_a_plan_over_a_state_that_is_no_database_is_one_line(
        self, tmp_path: Path, nerve: NerveDb, run_nerve: RunNerve
    ) -> None:
        options = cli_options(tmp_path, None)
        (tmp_path / "state.sqlite3").write_bytes(b"no database here " * 64)
        done = run_nerve("memory", "sweep", "--plan", "--nerve-db", str(nerve.path), *options)
        assert_one_line_error(done, "state.sqlite3", "cannot be read as the memory state")

    def test_the_sweep_after_a_switch_and_its_backfill_send_every_message_once(
        self, tmp_path: Path, nerve: NerveDb, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        switched(nerve, 6, memorized=4)
        options = [*cli_options(tmp_path, gateway.base_url), "--nerve-db", str(nerve.path)]
        first = run_nerve("memory", "sweep", *options, env={"NO_PROXY": "*"})
        assert first.returncode == 0, first.stderr
        assert sorted(gateway.app.store.memory_texts()) == ["turn 4 of a", "turn 5 of a"]
        again = run_nerve("memory", "sweep", "--backfill", "all", *options, env={"NO_PROXY": "*"})
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("backfill all: 1 session moved back over what memU kept")
        assert sorted(gateway.app.store.memory_texts()) == [f"turn {n} of a" for n in range(6)]

    def test_a_backfill_while_another_sweep_runs_moves_nothing_and_exits_75(
        self, tmp_path: Path, nerve: NerveDb, nerve_process: RunNerve
    ) -> None:
        """The lock is held by this process; the command runs in a process of its own."""
        switched(nerve, 6, memorized=4)
        options = [*cli_options(tmp_path, "http://127.0.0.1:9"), "--nerve-db", str(nerve.path)]
        state_path = tmp_path / "state.sqlite3"
        StateStore(state_path).close()
        before = _digest(state_path)
        with sweep_lock(str(state_path), None) as held:
            assert held
            done = nerve_process("memory", "sweep", "--backfill", "all", *options)
        assert done.returncode == 75 and "another sweep" in done.stderr
        assert _digest(state_path) == before


class TestBackfillBesideAQueuedBatch:
    """SWEEP-15 with MIG-2: a batch still in Loom's queue keeps its session out of a backfill,
    which would otherwise leave the batch behind the watermark and, once Loom wrote it, send
    its messages a second time."""

    async def test_the_session_waits_for_its_batch_and_every_message_is_written_once(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore
    ) -> None:
        ids = switched(nerve, 10, memorized=5)
        loom = FakeLoom(queue=True, step=StepScript({"q-1": ["queued"]}))
        view = sweep_source(reader, state, fixed_clock)
        sweeper = Sweeper(loom, view, state, clock=fixed_clock, mode=QUEUED)  # type: ignore[arg-type]
        await sweeper.run_once()  # ids[5:] queued as q-1, not written yet
        moves, errors = run_backfill(reader, state, parse_backfill("all"), now=NOW)
        assert moves == [] and errors == [{"session_id": "a", "kind": IN_LOOM_QUEUE_KIND}]
        assert state.watermark("a") == ids[4]
        await sweeper.run_once()  # "queued": the window waits
        await sweeper.run_once()  # "done": the watermark passes the batch
        assert state.watermark("a") == ids[9]
        assert backfill(reader, state, "all") == [BackfillMove("a", 0, ids[4], ids[9])]
        for _sweep in range(3):
            await sweeper.run_once()
        assert dict(loom.written) == {message_id: 1 for message_id in ids}
        assert state.watermark("a") == ids[9]

    def test_the_plan_names_the_session_that_waits(
        self, nerve: NerveDb, reader: NerveTranscripts, state: StateStore
    ) -> None:
        switched(nerve, 10, memorized=5)
        start_new_sessions(reader, state, ["a"], now=NOW)
        with state_transaction(state) as db:
            db.execute(
                "INSERT INTO queued_batch (queue_id, session_id, after_id, first_id, last_id,"
                " status, queued_at) VALUES ('q-1', 'a', 5, 6, 10, 'running', 0)"
            )
        plan = plan_sweep(reader, state, mode=QUEUED, scope=parse_backfill("all"))
        assert plan.errors == [{"session_id": "a", "kind": IN_LOOM_QUEUE_KIND}]
