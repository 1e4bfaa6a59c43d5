"""MIG-1: the migration's loop against a scripted Loom, on a real memU store and state file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from provisioner.cli.memory_migrate import exit_status
from provisioner.migration.ledger import (
    FAILURES_TO_SKIP,
    Ledger,
    final_ids_read_only,
    migration_lock,
)
from provisioner.migration.memu_store import MemuStore
from provisioner.migration.migrate import (
    BROAD_FAILURE_STREAK,
    NOT_NOW_BACKOFF_FIRST_S,
    NOT_NOW_JITTER_S,
    NOT_NOW_TRIES,
    NOT_NOW_WAIT_MAX_S,
    Migration,
    Sleep,
    dry_run,
)
from provisioner.migration.report import MigrationReport
from provisioner.runtime.gateway.errors import (
    BrokenAnswer,
    CircuitOpen,
    CodedFault,
    GatewayUnreachable,
    InternalFault,
    MayPass,
    ToolRefused,
)
from provisioner.runtime.state import AUDIT_MIGRATION_SKIPPED, StateStore
from testbed.loom import CRASH, LOST, Crash, FakeLoom
from testbed.memu_db import MemuDb
from tests.support.clock import RecordedSleep, fixed_clock, no_wait
from tests.support.state_sql import state_rows

pytestmark = pytest.mark.anyio


async def migrate(
    memu: MemuDb, state: StateStore, loom: FakeLoom, *, sleep: Sleep = no_wait
) -> MigrationReport:
    with MemuStore(memu.path, page_items=7) as store:
        return await Migration(loom, store, state, clock=fixed_clock, sleep=sleep).run()


def ledger(state: StateStore) -> Ledger:
    return Ledger(state, clock=fixed_clock)


def skipped_audit(state: StateStore) -> list[dict[str, object]]:
    """The audit log's rows of skipped memU items, read straight from the state file."""
    rows = state_rows(
        state,
        "SELECT kind, session_id, message_id, detail FROM sweep_audit WHERE kind = ?",
        (AUDIT_MIGRATION_SKIPPED,),
    )
    return [dict(row) for row in rows]


class TestOneWritePerItem:
    async def test_every_item_goes_once_with_its_key_type_tags_and_dates(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(20)
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left, report.sent) == ("done", 0, 20)
        assert loom.writes == [f"memu-{item_id}" for item_id in ids]
        summaries = memu.summaries()
        for item_id in ids:
            write = loom.stored[f"memu-{item_id}"]
            assert write.text == summaries[item_id]
            assert write.kind in ("profile", "event", "knowledge", "behavior")
            assert write.created_at is not None and write.created_at.endswith("Z")
        assert loom.stored[f"memu-{ids[2]}"].tags == ("People", "Work")
        assert loom.stored[f"memu-{ids[1]}"].happened_at == "2025-02-02T00:00:00Z"
        assert ledger(state).totals()["written"] == 20

    async def test_a_second_run_writes_nothing(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(15)
        await migrate(memu, state, loom)
        again = await migrate(memu, state, loom)
        assert len(loom.writes) == 15
        assert (again.sent, again.already_done, again.left, again.stopped) == (0, 15, 0, "done")

    async def test_items_added_to_memu_since_go_on_the_next_run(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(5)
        await migrate(memu, state, loom)
        newer = memu.add_items(3, prefix="later")
        report = await migrate(memu, state, loom)
        assert loom.writes[5:] == [f"memu-{item_id}" for item_id in newer]
        assert (report.sent, report.already_done) == (3, 5)


class TestVerdicts:
    async def test_the_report_tallies_verdicts_and_names_rejected_and_conflicting_ids(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(8)
        loom.verdicts = {
            f"memu-{ids[0]}": "merge",
            f"memu-{ids[1]}": "conflict",
            f"memu-{ids[2]}": "rejected",
            f"memu-{ids[3]}": "refines",
            f"memu-{ids[4]}": "duplicate",
        }
        loom.reasons = {f"memu-{ids[2]}": "PINNED_CONFLICT"}
        report = await migrate(memu, state, loom)
        assert report.verdicts == {
            "clear": 3,
            "merge": 1,
            "duplicate": 1,
            "conflict": 1,
            "refines": 1,
            "rejected": 1,
        }
        assert report.conflicts == [ids[1]]
        assert report.rejected == [{"id": ids[2], "reason": "PINNED_CONFLICT"}]
        totals = ledger(state).totals()
        assert (totals["written"], totals["conflict"], totals["rejected"]) == (6, 1, 1)
        assert report.left == 0
        text = "\n".join(report.lines()) + json.dumps(report.as_dict())
        assert f"{ids[2]} (PINNED_CONFLICT)" in text and ids[1] in text
        assert "tea" not in text  # the items' text is never in a report

    async def test_rejected_and_conflicting_items_are_not_sent_again(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(3)
        loom.verdicts = {f"memu-{ids[0]}": "rejected", f"memu-{ids[1]}": "conflict"}
        await migrate(memu, state, loom)
        again = await migrate(memu, state, loom)
        assert again.sent == 0 and len(loom.writes) == 3


class TestNotNow:
    async def test_a_passing_not_now_is_waited_out_and_the_item_goes_in_the_same_run(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(10)
        loom.fault_for = lambda key, n: CodedFault("busy", code="OVERLOADED") if n == 4 else None
        sleep = RecordedSleep()
        report = await migrate(memu, state, loom, sleep=sleep)
        assert (report.stopped, report.left, report.sent, report.retries) == ("done", 0, 10, 1)
        assert loom.writes.count(f"memu-{ids[4]}") == 2  # refused "not now", then taken
        (wait,) = sleep.waits
        assert NOT_NOW_BACKOFF_FIRST_S <= wait <= NOT_NOW_BACKOFF_FIRST_S + NOT_NOW_JITTER_S
        assert report.waited_s == wait
        assert "1 write sent again" in "\n".join(report.lines())

    async def test_a_retry_after_longer_than_the_backoff_is_waited_out_in_full(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(3)
        loom.faults.extend([None, MayPass("rate limited", retry_after_s=7.0)])
        sleep = RecordedSleep()
        report = await migrate(memu, state, loom, sleep=sleep)
        assert (report.stopped, report.left) == ("done", 0) and sleep.waits == [7.0]

    async def test_a_retry_after_past_the_longest_wait_stops_the_run_without_waiting(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(3)
        loom.faults.extend([None, MayPass("come back later", retry_after_s=NOT_NOW_WAIT_MAX_S + 1)])
        sleep = RecordedSleep()
        report = await migrate(memu, state, loom, sleep=sleep)
        assert (report.stopped, report.left, sleep.waits) == ("not_now", 2, [])

    async def test_an_item_still_not_now_after_its_tries_goes_again_at_the_runs_end(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-16: the item is deferred, the others go on, and it is taken at the end."""
        ids = memu.add_items(10)
        stuck = f"memu-{ids[4]}"
        loom.fault_for = lambda key, n: (
            CodedFault("busy", code="OVERLOADED")
            if key == stuck and loom.writes.count(stuck) < NOT_NOW_TRIES
            else None
        )
        sleep = RecordedSleep()
        report = await migrate(memu, state, loom, sleep=sleep)
        assert (report.stopped, report.left, report.sent) == ("done", 0, 10)
        assert (report.deferred, report.deferred_taken, report.not_now) == (1, 1, [])
        assert loom.writes[-1] == stuck  # after every other item
        assert loom.writes.count(stuck) == NOT_NOW_TRIES + 1
        assert report.retries == NOT_NOW_TRIES == len(loom.writes) - report.sent
        assert len(sleep.waits) == NOT_NOW_TRIES - 1  # the first send at the end waits none
        assert sorted(loom.stored) == sorted(f"memu-{i}" for i in ids)
        assert "1 item still not now after its tries, sent again at the run's end: 1 went" in (
            "\n".join(report.lines())
        )

    async def test_items_not_now_at_the_end_too_are_left_for_the_next_run_by_id(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-16: a round at the run's end that moves none of them ends the run."""
        ids = memu.add_items(10)
        stuck = {f"memu-{ids[4]}", f"memu-{ids[7]}"}
        loom.fault_for = lambda key, n: (
            CodedFault("busy", code="OVERLOADED") if key in stuck else None
        )
        sleep = RecordedSleep()
        first = await migrate(memu, state, loom, sleep=sleep)
        assert (first.stopped, first.error_kind) == ("not_now", "CodedFault(OVERLOADED)")
        assert (first.left, first.sent, first.deferred, first.deferred_taken) == (2, 10, 2, 0)
        assert first.not_now == [
            {"id": ids[4], "kind": "CodedFault(OVERLOADED)"},
            {"id": ids[7], "kind": "CodedFault(OVERLOADED)"},
        ]
        assert ledger(state).totals()["written"] == 8
        assert all(loom.writes.count(key) == 2 * NOT_NOW_TRIES for key in stuck)
        assert all(0 < wait <= NOT_NOW_WAIT_MAX_S for wait in sleep.waits)
        loom.fault_for = None
        second = await migrate(memu, state, loom)
        assert (second.stopped, second.sent, second.already_done) == ("done", 2, 8)
        assert sorted(loom.stored) == sorted(f"memu-{i}" for i in ids)

    async def test_a_round_at_the_end_that_moves_some_is_followed_by_another(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-16: deferred items go round after round while each round moves one."""
        ids = memu.add_items(4)
        # Each of the first three items is "not now" for one more round than the one before.
        rounds = {f"memu-{ids[i]}": i + 1 for i in range(3)}
        loom.fault_for = lambda key, n: (
            MayPass("busy") if loom.writes.count(key) < rounds.get(key, 0) * NOT_NOW_TRIES else None
        )
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left, report.sent) == ("done", 0, 4)
        assert (report.deferred, report.deferred_taken) == (3, 3)
        assert report.retries == len(loom.writes) - 4
        assert sorted(loom.stored) == sorted(f"memu-{i}" for i in ids)

    async def test_items_in_a_row_not_now_through_every_try_mean_loom_fails_broadly(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-16: the run ends after BROAD_FAILURE_STREAK such items, not at the first."""
        memu.add_items(BROAD_FAILURE_STREAK + 3)
        loom.fault_for = lambda key, n: MayPass("upstream down")
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.error_kind) == ("not_now", "MayPass")
        assert len(loom.writes) == BROAD_FAILURE_STREAK * NOT_NOW_TRIES
        assert report.left == BROAD_FAILURE_STREAK + 3
        assert len(report.not_now) == report.deferred == BROAD_FAILURE_STREAK

    async def test_an_item_taken_in_between_breaks_the_row(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-16: Loom taking one item in every few is no broad failure."""
        ids = memu.add_items(4 * BROAD_FAILURE_STREAK)
        taken = {f"memu-{item_id}" for item_id in ids[:: BROAD_FAILURE_STREAK - 1]}
        loom.fault_for = lambda key, n: (
            None if key in taken or loom.writes.count(key) >= NOT_NOW_TRIES else MayPass("busy")
        )
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left) == ("done", 0)
        assert report.deferred == len(ids) - len(taken)


class TestFaults:
    @pytest.mark.parametrize(
        ("error", "stopped"),
        [
            (GatewayUnreachable("refused"), "unreachable"),
            (CircuitOpen("open", retry_in_s=15.0), "breaker_open"),
            (BrokenAnswer("memory.set: verdict is not one of …"), "contract_broken"),
        ],
    )
    async def test_an_unreachable_gateway_or_a_broken_answer_stops_the_run(
        self,
        memu: MemuDb,
        state: StateStore,
        loom: FakeLoom,
        error: Exception,
        stopped: str,
    ) -> None:
        memu.add_items(5)
        loom.fault_for = lambda key, n: error if n == 2 else None
        report = await migrate(memu, state, loom)
        assert report.stopped == stopped and report.left == 3
        assert len(loom.writes) == 3
        assert ledger(state).last_run().stopped == stopped  # type: ignore[union-attr]

    @pytest.mark.parametrize(
        "cause",
        [
            httpx.ReadError("[Errno 104] Connection reset by peer"),
            httpx.WriteError("[Errno 32] Broken pipe"),
            httpx.RemoteProtocolError("peer closed connection without sending complete body"),
        ],
        ids=lambda cause: type(cause).__name__,
    )
    async def test_a_connection_lost_mid_request_is_not_now_and_the_item_is_sent_again(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom, cause: Exception
    ) -> None:
        """REL-16: a reset, not a broken contract; the run goes on."""
        ids = memu.add_items(4)
        lost = BrokenAnswer("the answer broke off or could not be read")
        lost.__cause__ = cause
        loom.faults.extend([None, lost])
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left, report.sent, report.retries) == ("done", 0, 4, 1)
        assert loom.writes.count(f"memu-{ids[1]}") == 2
        assert sorted(loom.stored) == sorted(f"memu-{i}" for i in ids)

    async def test_a_connection_lost_on_every_try_is_named_with_what_the_transport_met(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(2)
        stuck = f"memu-{ids[0]}"

        def reset(key: str, n: int) -> Exception | None:
            if key != stuck:
                return None
            error = BrokenAnswer("the answer broke off or could not be read")
            error.__cause__ = httpx.ReadError("[Errno 104] Connection reset by peer")
            return error

        loom.fault_for = reset
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left) == ("not_now", 1)
        assert report.not_now == [{"id": ids[0], "kind": "BrokenAnswer(ReadError)"}]
        assert "not now (1): " in "\n".join(report.lines())

    async def test_a_lost_answer_is_sent_again_and_loom_answers_duplicate(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(4)
        loom.faults.extend([None, LOST])
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left, report.retries) == ("done", 0, 1)
        assert report.verdicts["duplicate"] == 1  # the lost one, sent again in the same run
        assert all(loom.times_stored[f"memu-{i}"] == 1 for i in ids)

    async def test_a_crash_between_answer_and_ledger_resumes_with_each_item_once(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(9)
        loom.faults.extend([None, None, None, CRASH])
        with pytest.raises(Crash):
            await migrate(memu, state, loom)
        assert ledger(state).totals()["written"] == 3
        assert ledger(state).last_run().stopped == "interrupted"  # type: ignore[union-attr]
        report = await migrate(memu, state, loom)
        assert (report.stopped, report.left, report.already_done) == ("done", 0, 3)
        assert report.verdicts["duplicate"] == 1  # the item in flight when it crashed
        assert sorted(loom.times_stored) == sorted(f"memu-{i}" for i in ids)
        assert set(loom.times_stored.values()) == {1}

    async def test_an_item_loom_fails_three_runs_in_a_row_is_skipped_with_an_audit_row(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(4)
        bad = f"memu-{ids[1]}"
        loom.fault_for = lambda key, n: InternalFault("internal error") if key == bad else None
        for run in range(1, FAILURES_TO_SKIP):
            report = await migrate(memu, state, loom)
            assert report.failing == [{"id": ids[1], "failures": run}]
            assert report.left == 1 and skipped_audit(state) == []
        report = await migrate(memu, state, loom)
        reason = f"Loom's internal error {FAILURES_TO_SKIP} runs in a row"
        assert report.skipped == [{"id": ids[1], "reason": reason}]
        assert (report.failing, report.left, report.stopped) == ([], 0, "done")
        (row,) = skipped_audit(state)
        assert row["detail"] == f"memu item {ids[1]}: {reason}"
        assert (row["session_id"], row["message_id"]) == (None, None)
        assert loom.writes.count(bad) == FAILURES_TO_SKIP
        await migrate(memu, state, loom)
        assert loom.writes.count(bad) == FAILURES_TO_SKIP  # skipped for good

    async def test_a_success_in_between_breaks_the_row(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(2)
        bad = f"memu-{ids[0]}"
        failing = {"on": True}
        loom.fault_for = lambda key, n: (
            InternalFault("internal error") if key == bad and failing["on"] else None
        )
        await migrate(memu, state, loom)
        await migrate(memu, state, loom)
        failing["on"] = False
        report = await migrate(memu, state, loom)
        assert report.verdicts["clear"] == 1 and report.skipped == []
        assert bad in loom.stored

    async def test_a_loom_failing_every_item_skips_nothing_and_stops(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(BROAD_FAILURE_STREAK + 4)
        loom.fault_for = lambda key, n: InternalFault("internal error")
        for _run in range(FAILURES_TO_SKIP + 1):
            report = await migrate(memu, state, loom)
            assert report.stopped == "loom_failing"
            assert len(report.failing) == BROAD_FAILURE_STREAK
        assert report.skipped == [] and skipped_audit(state) == []
        assert ledger(state).totals()["skipped"] == 0

    async def test_an_error_about_one_item_leaves_it_for_the_next_run_and_goes_on(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(3)
        loom.fault_for = lambda key, n: ToolRefused("no") if n == 0 else None
        report = await migrate(memu, state, loom)
        assert report.waiting == [{"id": ids[0], "kind": "ToolRefused"}]
        assert (report.stopped, report.left) == ("done", 1)
        loom.fault_for = None
        assert (await migrate(memu, state, loom)).left == 0


class TestRowsThatCannotGo:
    async def test_a_row_with_an_id_is_skipped_once_and_one_without_is_counted(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        loose = MemuDb(tmp_path / "loose.sqlite", loose=True)
        good = loose.add_item("the user's name is Ada")
        empty = loose.add_item(None)
        loose.add_item("a fact under an id that is no key", item_id="no key!")
        report = await migrate(loose, state, loom)
        assert loom.writes == [f"memu-{good}"]
        assert report.skipped == [{"id": empty, "reason": "no_text"}]
        assert (report.unusable_rows, report.left, report.stopped) == (1, 0, "done")
        (row,) = skipped_audit(state)
        assert row["detail"] == f"memu item {empty}: no_text"
        again = await migrate(loose, state, loom)
        assert (again.skipped, again.already_done, again.unusable_rows) == ([], 2, 1)
        assert len(skipped_audit(state)) == 1
        assert ledger(state).last_run().rows_without_id == 1  # type: ignore[union-attr]
        assert "no key!" not in json.dumps(again.as_dict())


class TestRepeatedIds:
    async def test_rows_that_share_an_id_are_counted_named_and_not_written_and_the_run_ends(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        """REL-8: a store that lost its primary key; ``memu-<id>`` cannot name two texts."""
        loose = MemuDb(tmp_path / "loose.sqlite", loose=True)
        good = loose.add_item("the user's name is Ada")
        loose.add_item("the user likes tea", item_id="twice")
        loose.add_item("the user likes coffee", item_id="twice")
        first = await migrate(loose, state, loom)
        assert loom.writes == [f"memu-{good}"]
        assert (first.stopped, first.left, first.items_total) == ("done", 0, 3)
        assert (first.unusable_rows, first.repeated_ids) == (2, ["twice"])
        assert "  repeated id, each on more than one row (1): twice" in first.lines()
        again = await migrate(loose, state, loom)
        assert (again.stopped, again.left, again.sent, again.already_done) == ("done", 0, 0, 1)
        assert again.lines()[0].startswith("migrate done: 1 of 3 memU items done, 0 left")

    async def test_a_repeated_id_an_earlier_run_wrote_once_leaves_nothing_left(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        """A ledger that holds the id (a run before the second row came) still ends at 0."""
        loose = MemuDb(tmp_path / "loose.sqlite", loose=True)
        loose.add_item("the user likes tea", item_id="twice")
        loose.add_item("the user's name is Ada")
        assert (await migrate(loose, state, loom)).left == 0
        loose.add_item("the user likes coffee", item_id="twice")
        again = await migrate(loose, state, loom)
        assert (again.stopped, again.left, again.sent) == ("done", 0, 0)
        assert again.repeated_ids == ["twice"]

    async def test_a_dry_run_counts_the_rows_of_a_repeated_id_among_those_without_one(
        self, tmp_path: Path
    ) -> None:
        loose = MemuDb(tmp_path / "loose.sqlite", loose=True)
        loose.add_item("the user likes tea", item_id="twice")
        loose.add_item("the user likes coffee", item_id="twice")
        loose.add_item("the user's name is Ada")
        with MemuStore(loose.path) as store:
            report = dry_run(store, set())
        assert (report.would_write, report.unusable_rows, report.repeated_rows) == (1, 2, 2)
        assert "with an id another row holds too" in "\n".join(report.lines())


class FillingState(StateStore):
    """A state file whose disk fills after ``writes_left`` transactions: each later one fails
    as SQLite fails it then."""

    def __init__(self, path: Path, *, writes_left: int) -> None:
        self.writes_left = 1_000  # the schema's own writes, while the store opens
        super().__init__(path)
        self.writes_left = writes_left

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.writes_left <= 0:
            raise sqlite3.OperationalError("database or disk is full")
        self.writes_left -= 1
        with super()._transaction() as db:
            yield db


class TestAStateFileKeptLocked:
    @pytest.mark.slow
    async def test_a_state_file_locked_past_the_wait_stops_the_run_without_a_traceback(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """Another process holds the write lock for longer than the busy wait (SWEEP-12)."""
        memu.add_items(2)
        holder = sqlite3.connect(state.path)
        try:
            holder.execute("BEGIN IMMEDIATE")
            report = await migrate(memu, state, loom)
        finally:
            holder.rollback()
            holder.close()
        assert (report.stopped, report.error_kind) == ("state_failed", "busy")
        assert f"the state file {state.path} could not be written: busy" in report.lines()[1]
        assert loom.writes == []
        again = await migrate(memu, state, loom)
        assert (again.stopped, again.left) == ("done", 0)

    async def test_a_full_disk_is_reported_as_a_full_disk_with_status_75(
        self, memu: MemuDb, tmp_path: Path, loom: FakeLoom
    ) -> None:
        """REL-4, with a writer failing as SQLite does on a full disk (the real disk: the
        command-line test on a small tmpfs)."""
        memu.add_items(6)
        with FillingState(tmp_path / "state.sqlite3", writes_left=5) as state:
            report = await migrate(memu, state, loom)
        assert (report.stopped, report.error_kind) == ("state_failed", "full")
        why = report.lines()[1]
        assert "the disk is full; free some space, then try again" in why
        assert "lock" not in why
        assert exit_status(report) == 75


class TestOneAtATime:
    async def test_a_second_migration_of_the_same_state_returns_at_once(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        memu.add_items(2)
        with migration_lock(state.path) as held:
            assert held
            report = await migrate(memu, state, loom)
        assert report.stopped == "already_running" and loom.writes == []


class TestDryRun:
    def test_a_dry_run_counts_and_writes_nothing(self, memu: MemuDb, tmp_path: Path) -> None:
        memu.add_items(6)
        memu.add_item("x" * 30_000)
        state_path = tmp_path / "absent" / "state.sqlite3"
        with MemuStore(memu.path) as store:
            report = dry_run(store, final_ids_read_only(state_path))
        assert (report.items_total, report.would_write, report.already_done) == (7, 6, 0)
        assert report.unusable == {"too_long": 1}
        assert report.kinds == {"behavior": 1, "event": 2, "knowledge": 1, "profile": 2}
        assert report.bytes == sum(len(s.encode()) for s in memu.summaries().values()) - 30_000
        assert not state_path.parent.exists()

    async def test_a_dry_run_after_a_partial_run_counts_what_is_left(
        self, memu: MemuDb, state: StateStore, loom: FakeLoom
    ) -> None:
        ids = memu.add_items(5)
        stuck = f"memu-{ids[2]}"
        loom.fault_for = lambda key, n: (
            CodedFault("busy", code="GRANT_BUSY") if key == stuck else None
        )
        await migrate(memu, state, loom)
        with MemuStore(memu.path) as store:
            report = dry_run(store, final_ids_read_only(Path(state.path)))
        assert (report.would_write, report.already_done) == (1, 4)
