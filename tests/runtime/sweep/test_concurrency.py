"""Sessions swept side by side (SWEEP-14): the adaptive limit, the scheduler, the shared budget.

The scheduler runs real coroutines on a real event loop. In ``TestScheduler`` each window waits
for a gate the test opens, so what is in flight at every step is exact. ``TestBacklog`` drives
the real ``Sweeper`` over real SQLite transcripts and state, against the scripted Loom slowed
to one second per call on a virtual clock: the loop's time jumps to its next timer whenever
nothing is ready, so a backlog of minutes runs in a moment and no wall-clock time is ever
measured.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from provisioner.runtime.budget import (
    CUT_TIMEOUT,
    CUT_TOO_LARGE,
    GOOD_BATCHES_TO_GROW,
    MIN_BYTES,
    MIN_MESSAGES,
    WAITING,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
)
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    CircuitOpen,
    ClientClosed,
    CodedFault,
    GatewayCallTimeout,
    GatewayUnreachable,
    InternalFault,
    MayPass,
    NoAnswer,
    PolicyRefused,
)
from provisioner.runtime.loom.settings import SWEEP_CONCURRENCY_DEFAULT, SWEEP_CONCURRENCY_MAX
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.state import AUDIT_BUDGET, AuditEntry, StateStore
from provisioner.runtime.sweep.concurrency import (
    START_LIMIT,
    AdaptiveLimit,
    SharedBudget,
    Swept,
    TalliedExtractor,
    Verdict,
    WindowResult,
    slows_down,
    sweep_windows,
)
from provisioner.runtime.sweep.outcomes import (
    STOPPED_BREAKER,
    STOPPED_DONE,
    SweepProgress,
    SweepReport,
)
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import Message, SqliteTranscripts
from testbed.loom import FakeLoom
from testbed.virtual_time import on_virtual_time
from tests.support.clock import fixed_clock

THROUGH = WindowResult(verdict=Verdict.THROUGH)
SLOW_DOWN = WindowResult(verdict=Verdict.SLOW_DOWN)
SETTLE_STEPS = 20  # loop turns that let every ready task run until it waits again
HANG_GUARD_S = 60.0  # a sweep that never ends fails the test instead of hanging it (no timing)
CALL_S = 1.0  # the scripted Loom's time per extraction, on the virtual clock


# --- the limit ----------------------------------------------------------------------------------


class TestAdaptiveLimit:
    def test_it_starts_at_one_and_grows_by_one_per_window_through_up_to_the_cap(self):
        limit = AdaptiveLimit(3)
        seen = [limit.current]
        for _ in range(4):
            limit.observe(Verdict.THROUGH, limit.ticket)
            seen.append(limit.current)
        assert seen == [START_LIMIT, 2, 3, 3, 3]

    def test_a_slow_down_halves_it_rounding_down_never_below_one(self):
        limit = AdaptiveLimit(7)
        for _ in range(6):
            limit.observe(Verdict.THROUGH, limit.ticket)
        seen = [limit.current]
        for _ in range(4):
            limit.observe(Verdict.SLOW_DOWN, limit.ticket)
            seen.append(limit.current)
        assert seen == [7, 3, 1, 1, 1]

    def test_windows_launched_before_a_halving_neither_halve_again_nor_grow_it(self):
        """Four windows meeting one overload halve the limit once, not down to one."""
        limit = AdaptiveLimit(4)
        for _ in range(3):
            limit.observe(Verdict.THROUGH, limit.ticket)
        tickets = [limit.ticket for _ in range(4)]  # four windows under way together
        limit.observe(Verdict.SLOW_DOWN, tickets[0])
        limit.observe(Verdict.SLOW_DOWN, tickets[1])
        limit.observe(Verdict.THROUGH, tickets[2])
        limit.observe(Verdict.THROUGH, tickets[3])
        assert limit.current == 2
        limit.observe(Verdict.THROUGH, limit.ticket)  # a window launched after the halving
        assert limit.current == 3

    def test_a_neutral_window_changes_nothing(self):
        limit = AdaptiveLimit(4)
        limit.observe(Verdict.THROUGH, limit.ticket)
        ticket = limit.ticket
        limit.observe(Verdict.NEUTRAL, ticket)
        assert (limit.current, limit.ticket) == (2, ticket)

    @pytest.mark.parametrize("cap", [0, SWEEP_CONCURRENCY_MAX + 1, True, 2.0, "4"])
    def test_a_cap_outside_one_to_thirty_two_is_refused(self, cap):
        with pytest.raises(ValueError, match="cap"):
            AdaptiveLimit(cap)


class TestWhatSlowsDown:
    @pytest.mark.parametrize(
        "error",
        [
            MayPass("rate limited", retry_after_s=1.0),  # 429
            CodedFault("loom is busy", code="GRANT_BUSY"),
            GatewayCallTimeout("MCP server timed out"),  # the gateway's call limit
        ],
    )
    def test_a_429_a_not_now_and_the_call_limit_slow_the_sweep_down(self, error):
        assert slows_down(error)

    @pytest.mark.parametrize(
        "error",
        [
            BodyTooLarge("413"),
            InternalFault("internal error"),
            NoAnswer("no answer"),
            GatewayUnreachable("refused"),
            CircuitOpen("open", retry_in_s=15.0),
            ClientClosed("closed"),
            PolicyRefused("not allowed"),
            ValueError("session id too long"),
        ],
    )
    def test_failures_that_say_nothing_about_the_load_do_not(self, error):
        assert not slows_down(error)


# --- what a window's calls came to --------------------------------------------------------------


def message(message_id: int) -> Message:
    return Message(message_id, "user", f"message {message_id}", "2026-11-30T10:00:00Z")


@pytest.mark.anyio
class TestTalliedExtractor:
    async def test_a_window_whose_batches_were_taken_went_through(self, loom: FakeLoom):
        tallied = TalliedExtractor(loom)
        tally = tallied.start("s1")
        await tallied.extract([message(1), message(2)], session_id="s1")
        await tallied.extract([message(3)], session_id="s1")
        assert (tally.taken, tally.failed, tally.verdict) == (2, 0, Verdict.THROUGH)

    async def test_a_429_among_the_calls_asks_to_slow_down(self, loom: FakeLoom):
        tallied = TalliedExtractor(loom)
        tally = tallied.start("s1")
        await tallied.extract([message(1)], session_id="s1")
        loom.faults.append(MayPass("rate limited", retry_after_s=1.0))
        with pytest.raises(MayPass):
            await tallied.extract([message(2)], session_id="s1")
        assert tally.verdict is Verdict.SLOW_DOWN

    async def test_loom_s_own_fault_or_nothing_taken_is_neutral(self, loom: FakeLoom):
        tallied = TalliedExtractor(loom)
        failing, empty = tallied.start("s1"), tallied.start("s2")
        await tallied.extract([message(1)], session_id="s1")
        loom.faults.append(InternalFault("internal error"))
        with pytest.raises(InternalFault):
            await tallied.extract([message(2)], session_id="s1")
        loom.accept_limit = 0
        await tallied.extract([message(3)], session_id="s2")
        assert (failing.verdict, empty.verdict) == (Verdict.NEUTRAL, Verdict.NEUTRAL)

    async def test_the_answer_passes_unchanged_and_each_session_has_its_own_tally(
        self, loom: FakeLoom
    ):
        tallied = TalliedExtractor(loom)
        first = tallied.start("s1")
        loom.accept_limit = 1
        extracted = await tallied.extract([message(1), message(2)], session_id="s2")
        assert extracted == Extracted(accepted=1)
        assert first.taken == 0
        tallied.finish("s1")
        await tallied.extract([message(3)], session_id="s1")
        assert first.taken == 0  # a finished window's tally is no longer written


# --- the scheduler ------------------------------------------------------------------------------


class GatedWindows:
    """Windows that wait for the test to open their gate, then end as it says."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.cleaned_up: list[str] = []
        self.in_flight = 0
        self._gates: dict[str, asyncio.Event] = {}
        self._results: dict[str, WindowResult | BaseException] = {}

    def open(self, session: str, result: WindowResult | BaseException = THROUGH) -> None:
        self._results[session] = result
        self._gates[session].set()

    def waiting(self) -> list[str]:
        return [s for s in self.started if s not in self._results and s not in self.cancelled]

    async def __call__(self, session: str) -> WindowResult:
        self.started.append(session)
        self._gates[session] = asyncio.Event()
        self.in_flight += 1
        try:
            await self._gates[session].wait()
            result = self._results[session]
            if isinstance(result, BaseException):
                raise result
            return result
        except asyncio.CancelledError:
            self.cancelled.append(session)
            await asyncio.sleep(0)  # a cleanup that itself waits must still be awaited
            self.cleaned_up.append(session)
            raise
        finally:
            self.in_flight -= 1


async def settle() -> None:
    """Let every task that can run do so, until each waits again."""
    for _ in range(SETTLE_STEPS):
        await asyncio.sleep(0)


async def ended(sweep: asyncio.Task[Swept]) -> Swept:
    """The sweep's result (or what it raised); a sweep that has not ended within the guard
    fails the test instead of hanging it."""
    done, _ = await asyncio.wait({sweep}, timeout=HANG_GUARD_S)
    assert done, "the sweep did not end"
    return sweep.result()


def tasks_left(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks not yet done that were not there ``before`` the sweep began."""
    return {task for task in asyncio.all_tasks() - before if not task.done()}


def sessions(count: int) -> list[str]:
    return [f"s{index}" for index in range(count)]


@pytest.mark.anyio
class TestScheduler:
    async def test_no_more_windows_are_in_flight_than_the_limit_allows(self):
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(9), windows, AdaptiveLimit(4)))
        in_flight = []
        await settle()
        while windows.waiting():
            in_flight.append(windows.in_flight)
            windows.open(windows.waiting()[0])
            await settle()
        swept = await ended(sweep)
        assert in_flight == [1, 2, 3, 4, 4, 4, 3, 2, 1]
        assert (swept.finished, swept.peak, swept.ended) == (9, 4, None)

    async def test_sessions_start_in_the_order_listed_and_one_listed_twice_runs_once(self):
        windows = GatedWindows()
        listed = ["b", "a", "b", "c", "a"]
        sweep = asyncio.create_task(sweep_windows(listed, windows, AdaptiveLimit(1)))
        await settle()
        while windows.waiting():
            windows.open(windows.waiting()[0])
            await settle()
        assert (await ended(sweep)).finished == 3
        assert windows.started == ["b", "a", "c"]

    async def test_a_slow_down_holds_back_launches_until_half_as_many_are_in_flight(self):
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(12), windows, AdaptiveLimit(4)))
        await settle()
        for _ in range(3):
            windows.open(windows.waiting()[0])
            await settle()
        assert windows.in_flight == 4
        windows.open(windows.waiting()[0], SLOW_DOWN)  # limit 4 -> 2; three still in flight
        await settle()
        assert windows.in_flight == 3
        windows.open(windows.waiting()[0])  # launched before the halving: old news
        await settle()
        assert windows.in_flight == 2
        windows.open(windows.waiting()[0])
        await settle()
        assert windows.in_flight == 2  # one left, one launched: the limit is 2
        while windows.waiting():
            windows.open(windows.waiting()[0])
            await settle()
        assert (await ended(sweep)).finished == 12

    async def test_an_end_reason_stops_launching_and_cancels_the_windows_in_flight(self):
        """SWEEP-10: an open breaker ends the sweep at once, not after the others' calls."""
        before = asyncio.all_tasks()
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(8), windows, AdaptiveLimit(4)))
        await settle()
        for _ in range(2):
            windows.open(windows.waiting()[0])
            await settle()
        assert windows.waiting() == ["s2", "s3", "s4"]
        windows.open("s3", WindowResult(ended=STOPPED_BREAKER))
        swept = await ended(sweep)
        assert swept == Swept(
            ended=STOPPED_BREAKER, finished=3, cancelled=("s2", "s4"), not_started=3, peak=3
        )
        assert sorted(windows.cleaned_up) == ["s2", "s4"]
        assert windows.started == ["s0", "s1", "s2", "s3", "s4"]
        assert not tasks_left(before)

    async def test_cancelling_the_sweep_cancels_every_window_and_leaves_no_task(self):
        before = asyncio.all_tasks()
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(6), windows, AdaptiveLimit(4)))
        await settle()
        for _ in range(2):
            windows.open(windows.waiting()[0])
            await settle()
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ended(sweep)
        assert sorted(windows.cleaned_up) == ["s2", "s3", "s4"]
        assert not tasks_left(before)

    async def test_a_second_cancel_during_the_cleanup_still_waits_for_every_window(self):
        before = asyncio.all_tasks()
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(4), windows, AdaptiveLimit(4)))
        await settle()
        windows.open("s0")
        await settle()
        sweep.cancel()
        await asyncio.sleep(0)  # the sweep is now cancelling its windows
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ended(sweep)
        assert sorted(windows.cleaned_up) == ["s1", "s2"]
        assert not tasks_left(before)

    async def test_a_window_that_raises_cancels_the_others_and_its_error_propagates(self):
        before = asyncio.all_tasks()
        windows = GatedWindows()
        sweep = asyncio.create_task(sweep_windows(sessions(6), windows, AdaptiveLimit(4)))
        await settle()
        for _ in range(2):
            windows.open(windows.waiting()[0])
            await settle()
        windows.open("s3", RuntimeError("a bug in a window"))
        with pytest.raises(RuntimeError, match="a bug in a window"):
            await ended(sweep)
        assert sorted(windows.cleaned_up) == ["s2", "s4"]
        assert not tasks_left(before)

    async def test_each_finished_window_is_told_once_with_its_session(self):
        windows = GatedWindows()
        told: list[tuple[str, WindowResult]] = []
        sweep = asyncio.create_task(
            sweep_windows(
                sessions(3), windows, AdaptiveLimit(4), on_done=lambda s, r: told.append((s, r))
            )
        )
        await settle()
        windows.open("s0")
        await settle()
        windows.open("s2", SLOW_DOWN)
        windows.open("s1")
        await ended(sweep)
        assert told == [("s0", THROUGH), ("s1", THROUGH), ("s2", SLOW_DOWN)]

    async def test_no_sessions_is_no_window(self):
        swept = await sweep_windows([], GatedWindows(), AdaptiveLimit(4))
        assert swept == Swept(None, 0, (), 0, 0)


# --- the shared budget --------------------------------------------------------------------------

DEFAULT = BatchBudget.default(WAITING_MAX_MESSAGES, WAITING_MAX_BYTES)


def halved_once() -> BatchBudget:
    return DEFAULT.halved(CUT_TIMEOUT)


class TestSharedBudget:
    def test_two_windows_meeting_one_cut_halve_the_budget_once(self):
        """SWEEP-5 per cut: both batches were planned with the same budget."""
        shared = SharedBudget(DEFAULT)
        first = shared.cut(DEFAULT, CUT_TIMEOUT)
        second = shared.cut(DEFAULT, CUT_TIMEOUT)
        assert first is not None and first.after == halved_once()
        assert second is None
        assert shared.current == halved_once()

    def test_a_batch_planned_before_a_cut_that_goes_through_does_not_undo_it(self):
        shared = SharedBudget(DEFAULT)
        shared.cut(DEFAULT, CUT_TIMEOUT)
        assert shared.went_through(DEFAULT) == halved_once()

    def test_a_cut_met_on_the_halved_budget_halves_it_again(self):
        shared = SharedBudget(DEFAULT)
        shared.cut(DEFAULT, CUT_TIMEOUT)
        change = shared.cut(halved_once(), CUT_TIMEOUT)
        assert change is not None
        assert (change.before, change.after) == (halved_once(), halved_once().halved(CUT_TIMEOUT))

    def test_a_413_met_by_an_older_batch_makes_a_timeout_cut_stay_without_halving_again(self):
        """SWEEP-5: the default was too large a body; growing back to it would fail again."""
        shared = SharedBudget(DEFAULT)
        shared.cut(DEFAULT, CUT_TIMEOUT)
        change = shared.cut(DEFAULT, CUT_TOO_LARGE)
        assert change is not None
        assert (change.after.messages, change.after.bytes) == (
            halved_once().messages,
            halved_once().bytes,
        )
        assert change.after.cut_reason == CUT_TOO_LARGE
        assert shared.cut(DEFAULT, CUT_TOO_LARGE) is None

    def test_only_batches_of_the_current_budget_count_toward_growing_it_back(self):
        """SWEEP-5: ten in a row at the cut budget grow it back; older batches never count."""
        shared = SharedBudget(DEFAULT)
        shared.cut(DEFAULT, CUT_TIMEOUT)
        for _ in range(GOOD_BATCHES_TO_GROW - 1):
            shared.went_through(halved_once())
            shared.went_through(DEFAULT)  # planned before the cut: counts for nothing
        assert shared.current.messages == halved_once().messages
        assert shared.went_through(halved_once()) == DEFAULT

    def test_a_batch_planned_under_smaller_limits_cuts_to_half_of_those(self):
        """The budget grew while the batch was out; the cut it met is about its own limits."""
        small = halved_once()
        shared = SharedBudget(DEFAULT)
        change = shared.cut(small, CUT_TIMEOUT)
        assert change is not None and change.after.messages == small.messages // 2

    def test_at_the_minimum_a_cut_changes_nothing(self):
        floor = BatchBudget(MIN_MESSAGES, MIN_BYTES, WAITING_MAX_MESSAGES, WAITING_MAX_BYTES)
        floor = floor.halved(CUT_TOO_LARGE)
        shared = SharedBudget(floor)
        assert shared.cut(floor, CUT_TOO_LARGE) is None
        assert shared.cut(DEFAULT, CUT_TIMEOUT) is None

    def test_the_state_file_ends_with_the_shared_budget_when_windows_interleave(
        self, state: StateStore
    ):
        """Each change is stored as it is made, so the last write is the current budget."""
        shared = SharedBudget(state.batch_budget(WAITING.name, DEFAULT))
        planned = {session: shared.current for session in ("a", "b", "c")}
        for session, reason in (("a", CUT_TIMEOUT), ("b", CUT_TIMEOUT)):
            change = shared.cut(planned[session], reason)
            if change is not None:
                entry = AuditEntry(AUDIT_BUDGET, session, 1, detail="cut")
                state.record_budget(WAITING.name, change.after, audit=[entry], now=fixed_clock())
        budget = shared.went_through(planned["c"])
        state.record_taken(
            "c",
            last_taken_id=5,
            budget=(WAITING.name, budget),
            suspect_last_id=None,
            audit=[],
            now=fixed_clock(),
        )
        assert state.batch_budget(WAITING.name, DEFAULT) == shared.current == halved_once()
        assert [row["session_id"] for row in state.audit() if row["kind"] == AUDIT_BUDGET] == ["a"]


# --- a backlog through the sweep's own windows --------------------------------------------------


def slowed(loom: FakeLoom) -> FakeLoom:
    """``loom`` taking ``CALL_S`` virtual seconds per extraction; it counts the calls in
    flight, in all and per session, and keeps the session of each call in the order the calls
    went out."""
    loom.call_s = CALL_S
    return loom


class ToldHost:
    """A transcript source that is a host's own store (NERVE-3): it lists its sessions
    ``listings`` times over and keeps every ``swept_through`` it is told."""

    kind = "test-host"
    location = "memory"

    def __init__(self, source: SqliteTranscripts, listings: int = 1) -> None:
        self._source = source
        self._listings = listings
        self.told: dict[str, int] = {}

    def sessions(self) -> list[str]:
        return list(self._source.sessions()) * self._listings

    def messages_after(self, session_id: str, after_id: int, limit: int) -> list[Message]:
        return self._source.messages_after(session_id, after_id, limit)

    def swept_through(self, session_id: str, message_id: int) -> None:
        self.told[session_id] = message_id


def sweep_once(
    memory: Any,
    source: Any,
    state: StateStore,
    cap: int,
    progress: Callable[[SweepProgress], None] | None = None,
) -> tuple[SweepReport, float]:
    """One sweep of the real ``Sweeper`` at ``cap`` on a virtual clock: its report, and the
    virtual seconds it took."""
    sweeper = Sweeper(memory, source, state, clock=fixed_clock, concurrency=cap)
    report, elapsed = on_virtual_time(lambda: sweeper.run_once(progress))
    return report, elapsed


def backlog(source: SqliteTranscripts, count: int, batches: int) -> dict[str, int]:
    """``count`` sessions of ``batches`` full batches each, in one transaction; their last
    message ids."""
    size = batches * WAITING_MAX_MESSAGES
    names = [f"s{index:03d}" for index in range(count)]
    source.add_messages(
        (
            name,
            "user" if n % 2 == 0 else "assistant",
            f"message {n} of {name}",
            "2026-11-30T10:00:00Z",
        )
        for name in names
        for n in range(size)
    )
    return {name: source.messages_after(name, 0, size)[-1].id for name in names}


class TestTheSweeperTakesALimit:
    @pytest.mark.parametrize("cap", [0, SWEEP_CONCURRENCY_MAX + 1, True])
    def test_a_limit_outside_one_to_thirty_two_is_refused_when_the_sweeper_is_built(
        self, cap: Any, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """The configuration has checked it; a caller passing its own value hears at once."""
        with pytest.raises(ValueError, match="cap"):
            Sweeper(loom, transcripts, state, concurrency=cap)

    def test_the_default_is_the_configuration_s_default(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-14: at most 4 unless memory.loom.sweep_concurrency says otherwise."""
        assert Sweeper(loom, transcripts, state).concurrency == SWEEP_CONCURRENCY_DEFAULT


class TestBacklog:
    SESSIONS = 24
    BATCHES = 3

    def sweep_backlog(self, tmp_path, name: str, cap: int, loom: FakeLoom):
        with (
            SqliteTranscripts(tmp_path / f"{name}-t.sqlite3") as source,
            StateStore(tmp_path / f"{name}-s.sqlite3") as state,
        ):
            last = backlog(source, self.SESSIONS, self.BATCHES)
            slow = slowed(loom)
            told: list[SweepProgress] = []
            report, elapsed = sweep_once(slow, source, state, cap, told.append)
            watermarks = {session: state.watermark(session) for session in last}
        return report, elapsed, slow, told, watermarks == last

    def test_a_backlog_at_a_second_per_call_takes_a_quarter_of_the_time_and_the_ramp(
        self, tmp_path
    ):
        """SWEEP-14: the same calls, none lost; four windows at once once the limit has grown
        from one to four, a window through at a time."""
        one, many = FakeLoom(), FakeLoom()
        _, alone_s, alone, _, alone_done = self.sweep_backlog(tmp_path, "one", 1, one)
        report, together_s, slow, _, done = self.sweep_backlog(tmp_path, "many", 4, many)
        calls = self.SESSIONS * self.BATCHES
        assert alone_s == calls * CALL_S and alone.peak == 1
        ramp_s = (4 - START_LIMIT) * self.BATCHES * CALL_S
        assert together_s <= alone_s / 4 + ramp_s
        assert (len(one.calls), len(many.calls), report.batches_sent) == (calls, calls, calls)
        assert alone_done and done
        assert set(many.taken.values()) == {1}
        assert (report.sessions_swept, report.stopped, slow.peak) == (
            self.SESSIONS,
            STOPPED_DONE,
            4,
        )

    def test_one_session_never_has_two_windows_in_flight(self, tmp_path):
        """SWEEP-14: a session listed twice is swept once; its batches go one after another."""
        loom = FakeLoom()
        with (
            SqliteTranscripts(tmp_path / "t.sqlite3") as transcripts,
            StateStore(tmp_path / "s.sqlite3") as state,
        ):
            last = backlog(transcripts, 8, self.BATCHES)  # 1, then 2, then 4 side by side
            source, slow = ToldHost(transcripts, listings=2), slowed(loom)
            report, _ = sweep_once(slow, source, state, 4)
            assert {session: state.watermark(session) for session in last} == last
        assert (slow.session_peak, slow.peak) == (1, 4)
        assert len(loom.calls) == 8 * self.BATCHES and set(loom.taken.values()) == {1}
        assert (report.sessions_seen, report.sessions_swept) == (16, 16)

    def test_at_a_limit_of_one_the_sessions_take_their_turns_as_before(self, tmp_path):
        """``sweep_concurrency: 1``: one window at a time, in the order listed, each session's
        batches together, and the progress told as one window at a time told it."""
        report, _, slow, told, done = self.sweep_backlog(tmp_path, "one", 1, FakeLoom())
        names = [f"s{index:03d}" for index in range(self.SESSIONS)]
        assert slow.order == [name for name in names for _ in range(self.BATCHES)]
        assert (slow.peak, report.sessions_swept, done) == (1, self.SESSIONS, True)
        assert {step.in_flight for step in told if step.session_id} == {1}
        assert [step.sessions_done for step in told if step.session_id is None] == list(
            range(1, self.SESSIONS + 1)
        )

    def test_progress_names_each_window_s_batches_and_how_many_are_in_flight(self, tmp_path):
        _, _, _, told, _ = self.sweep_backlog(tmp_path, "many", 4, FakeLoom())
        out = [(step.session_id, step.batch) for step in told if step.waiting]
        back = [
            (step.session_id, step.batch) for step in told if step.session_id and not step.waiting
        ]
        assert (
            sorted(out)
            == sorted(back)
            == sorted(
                (f"s{index:03d}", batch)
                for index in range(self.SESSIONS)
                for batch in range(1, self.BATCHES + 1)
            )
        )
        assert max(step.in_flight for step in told) == 4
        assert told[-1].sessions_done == self.SESSIONS and told[-1].in_flight == 0

    def test_with_a_fifth_of_the_calls_turned_away_nothing_is_lost_or_sent_twice(self, tmp_path):
        """SWEEP-7 per session: a 429 stops that window only; later sweeps finish the rest."""
        draw = random.Random(20)
        turned_away = MayPass("rate limited", retry_after_s=1.0)
        loom = FakeLoom(fault_for_call=lambda _: turned_away if draw.random() < 0.2 else None)
        with (
            SqliteTranscripts(tmp_path / "t.sqlite3") as source,
            StateStore(tmp_path / "s.sqlite3") as state,
        ):
            last = backlog(source, self.SESSIONS, self.BATCHES)
            slow = slowed(loom)
            sweeps = 0
            while any(state.watermark(s) != last[s] for s in last) and sweeps < 20:
                sweep_once(slow, source, state, 4)
                sweeps += 1
            assert {session: state.watermark(session) for session in last} == last
        assert sum(call.outcome == "MayPass" for call in loom.calls) > 0
        assert len(loom.taken) == self.SESSIONS * self.BATCHES * WAITING_MAX_MESSAGES
        assert set(loom.taken.values()) == {1}
        assert slow.peak <= 4 and slow.session_peak == 1

    def test_an_open_breaker_ends_the_sweep_and_the_next_one_loses_nothing(self, tmp_path):
        """SWEEP-10: windows in flight are cancelled; their batches go again next sweep, and
        the host still hears where each cancelled window's watermark stands (NERVE-3)."""
        opened = CircuitOpen("breaker open", retry_in_s=15.0)
        # Call 13 is the second batch of the first window of four side by side (one window of
        # three batches, then two, then four): three windows are mid-way when it fails.
        loom = FakeLoom(fault_for_call=lambda n: opened if n == 13 else None)
        with (
            SqliteTranscripts(tmp_path / "t.sqlite3") as transcripts,
            StateStore(tmp_path / "s.sqlite3") as state,
        ):
            last = backlog(transcripts, self.SESSIONS, self.BATCHES)
            source, slow = ToldHost(transcripts), slowed(loom)
            report, _ = sweep_once(slow, source, state, 4)
            watermarks = {session: state.watermark(session) for session in last}
            midway = [s for s in last if 0 < watermarks[s] < last[s]]
            finished = [s for s in last if watermarks[s] == last[s]]
            assert report.stopped == STOPPED_BREAKER and len(midway) == 4
            assert report.sessions_swept == len(finished) == 3
            assert {s: source.told[s] for s in midway} == {s: watermarks[s] for s in midway}
            loom.fault_for_call = None
            sweep_once(slow, source, state, 4)
            assert {session: state.watermark(session) for session in last} == last
        assert set(loom.taken.values()) == {1}

    def test_two_windows_meeting_one_cut_halve_the_shared_budget_once(self, tmp_path):
        """SWEEP-5 with SWEEP-14: both batches were planned with the same budget; one cut, one
        audit row, and the limit halves back to one window."""
        call_limit = GatewayCallTimeout("MCP server timed out")
        loom = FakeLoom(fault_for_call=lambda n: call_limit if n in (1, 2) else None)
        with (
            SqliteTranscripts(tmp_path / "t.sqlite3") as transcripts,
            StateStore(tmp_path / "s.sqlite3") as state,
        ):
            backlog(transcripts, 3, 1)
            slow = slowed(loom)
            report, _ = sweep_once(slow, transcripts, state, 4)
            cuts = [row for row in state.audit() if row["kind"] == AUDIT_BUDGET]
            assert state.batch_budget(WAITING.name, DEFAULT) == halved_once()
        assert slow.peak == 2 and [call.outcome for call in loom.calls][1:] == [
            "GatewayCallTimeout",
            "GatewayCallTimeout",
        ]
        assert len(cuts) == 1 and report.budget_messages == halved_once().messages
