"""The extraction sweep: every session's new messages into Loom, nothing lost (SWEEP-1…SWEEP-11).

A sweep walks the sessions of a ``TranscriptSource`` and offers each one's window — the
messages after its watermark — to Loom in batches, through ``memory.extract`` (one
``loom_memory_set_from_messages`` call each). What a batch did is stored in the
``StateStore`` in one transaction: the watermark moves past exactly the messages Loom says it
took, so a crash at any point loses nothing and at most the batch in flight is sent again.

``Sweeper(memory, source, state)`` takes the Loom backend (or anything with its ``extract``
method), the transcripts and the state. ``await sweeper.run_once()`` sweeps once and returns a
``SweepReport``; a second caller while a sweep runs returns at once with ``stopped ==
"already_running"`` (SWEEP-11). How each failure is answered is in ``outcomes``; one
session's window — read from the source page by page, its batches, the isolation of a failing
batch and what it records — is in ``window``; a source that went back below a watermark in
``realign``; the source as the sweep reads it — where new sessions start, what a backfill
passes over, the host told how far the sweep got — in ``source`` (MIG-2, NERVE-3).

Sessions are swept side by side (SWEEP-14, ``concurrency``): up to ``concurrency`` windows in
flight, never two of one session, under a limit that starts at one and follows what Loom
answers. Each window keeps its own watermark and isolation; the batch budget is shared, and a
window that ends the sweep (SWEEP-10) cancels the others, which keep what Loom took.

Nothing of a message's text reaches a report, an audit row or a log line: they name sessions,
message ids, roles, times, counts and error kinds only.

Whatever the source yields, ``run_once`` does not raise for it (SWEEP-12): every message is
checked as it is read (``transcripts.check_message``) and one that cannot go is skipped with an
audit row; a source method that raises stops only the window it was reading; a source that
cannot list its sessions ends the sweep with ``stopped == "source_failed"``. Nor does it raise
for its state (REL-2): a state file busy past the wait, full, read-only, forbidden, failing
or damaged ends the sweep with ``stopped == "state_failed"`` and the fault named in the report
(``fault_kind``, ``fault_path``); every watermark stays, and the next sweep picks up there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from provisioner.runtime.budget import WAITING, BatchBudget, ExtractionMode
from provisioner.runtime.clock import Clock
from provisioner.runtime.errors import FileFault, faults_named, file_fault
from provisioner.runtime.gateway.errors import NoAnswer
from provisioner.runtime.loom.backend import EXTRACT_DEADLINE_S
from provisioner.runtime.loom.settings import SWEEP_CONCURRENCY_DEFAULT
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.batching import Batch
from provisioner.runtime.sweep.concurrency import (
    AdaptiveLimit,
    ExtractCall,
    SharedBudget,
    TalliedExtractor,
    WindowResult,
    sweep_windows,
)
from provisioner.runtime.sweep.followup import FollowUp
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.outcomes import (
    BAD_SESSION_ID_KIND,
    STOPPED_BUSY,
    STOPPED_SOURCE,
    STOPPED_STATE,
    SweepProgress,
    SweepReport,
)
from provisioner.runtime.sweep.source import SweepSource, sweep_source
from provisioner.runtime.sweep.window import SessionWindow, SweepShared
from provisioner.runtime.transcripts import (
    SourceFailed,
    TranscriptSource,
    check_session_id,
    shown_session_id,
)

EXTRACT_GUARD_S = 10  # our choice: past this beyond the deadline, the sweep stops waiting


log = logging.getLogger("provisioner.runtime.sweep.sweeper")


@runtime_checkable
class BudgetListener(Protocol):
    """A backend that shows the batch budget in its diagnostics (``LoomMemory``, LOOM-4)."""

    def note_batch_budget(self, budget: Any) -> None: ...


ProgressCallback = Callable[[SweepProgress], None]


class Sweeper:
    """Sweeps ``source`` into ``memory``, keeping watermarks and budgets in ``state``.

    ``clock`` gives the wall time (seconds since the epoch) stamped on audit rows; ``mode``
    is ``WAITING`` (default) or ``QUEUED`` — see ``batching.extraction_mode``.
    ``concurrency`` is the most sessions' windows in flight at once
    (``memory.loom.sweep_concurrency``, SWEEP-14; 1 sweeps one session at a time);
    ``ValueError`` at once for one outside 1…32.
    """

    def __init__(
        self,
        memory: ExtractCall,
        source: TranscriptSource,
        state: StateStore,
        *,
        clock: Clock | None = None,
        mode: ExtractionMode = WAITING,
        concurrency: int = SWEEP_CONCURRENCY_DEFAULT,
    ) -> None:
        AdaptiveLimit(concurrency)  # the cap's check: refused here, not at the first sweep
        self._memory = memory
        self._source = source
        self._state = state
        self._clock = clock or time.time
        self._mode = mode
        self._concurrency = concurrency

    @property
    def mode(self) -> ExtractionMode:
        return self._mode

    @property
    def concurrency(self) -> int:
        """The most sessions' windows one sweep has in flight (SWEEP-14)."""
        return self._concurrency

    def budget(self) -> BatchBudget:
        """The batch budget kept for this sweeper's mode (its default when none was kept)."""
        return self._state.batch_budget(self._mode.name, self._mode.default_budget())

    async def run_once(self, progress: ProgressCallback | None = None) -> SweepReport:
        """Sweep every session once; never raises for a gateway or Loom failure, nor for
        anything the transcript source yields or raises (SWEEP-12), nor for a state or source
        file that cannot be used (REL-2: ``state_failed`` or ``source_failed``, the fault named).

        ``progress`` is called after each session and as each batch goes out and comes back
        (``SweepProgress``). Returns at once, with ``stopped == "already_running"``, while
        another sweep over the same state runs (SWEEP-11).
        """
        report = SweepReport(self._mode.name)
        try:
            with faults_named(self._state.path):  # REL-2: what reaches here is the state's
                await self._sweep_locked(report, progress)
                budget = self.budget()
        except FileFault as fault:
            stopped = STOPPED_STATE if fault.path == self._state.path else STOPPED_SOURCE
            report.note_fault(fault, stopped)
            log.warning("sweep ended: %s", fault)
            return report
        report.note_budget(budget)
        if isinstance(self._memory, BudgetListener):
            self._memory.note_batch_budget(budget.as_dict())
        return report

    async def _sweep_locked(self, report: SweepReport, progress: ProgressCallback | None) -> None:
        """The sweep under its lock, filling ``report``; ``already_running`` without it.

        The run is put together here, in the order it is read: the source as the sweep reads
        it, the follow-up of queued batches, the batch budget the windows share, the
        extraction calls each window's verdict is kept from and the limit of windows in
        flight. A state file that cannot be used raises out of here as it was met (REL-2);
        what it cut short was rolled back, so each watermark stays on the last batch Loom took.
        """
        with sweep_lock(self._state.path, self._state) as held:
            if not held:
                report.stopped = STOPPED_BUSY
                return
            source = sweep_source(self._source, self._state, self._clock)  # MIG-2, NERVE-3
            follow_up = FollowUp.for_sweep(  # SWEEP-15: the backend itself, unwrapped
                self._memory, self._state, defer=self._mode.defer, clock=self._clock
            )
            budget = SharedBudget(  # SWEEP-5: the budget kept for the mode
                self._state.batch_budget(self._mode.name, self._mode.default_budget())
            )
            calls = TalliedExtractor(self._memory)  # each window's calls noted for its verdict
            limit = AdaptiveLimit(self._concurrency)  # SWEEP-14
            run = SweepRun(
                source,
                self._state,
                report,
                mode=self._mode,
                clock=self._clock,
                budget=budget,
                calls=calls,
                limit=limit,
                follow_up=follow_up,
                progress=progress,
            )
            await run.sweep()
            if follow_up is not None:
                report.follow_up = follow_up.tally.as_dict()


class SweepRun:
    """One sweep in progress: its sessions listed, their windows run side by side under the
    limit (SWEEP-14), the caller told where the sweep is.

    Each window is a ``SessionWindow`` of its own session, handed what the windows share
    (``SweepShared``): the state, the report, the batch budget and the extraction call, which
    this run keeps (its deadline, the progress callback, each window's tally of calls). The
    parts come ready made from ``Sweeper._sweep_locked``.
    """

    def __init__(
        self,
        source: SweepSource,
        state: StateStore,
        report: SweepReport,
        *,
        mode: ExtractionMode,
        clock: Clock,
        budget: SharedBudget,
        calls: TalliedExtractor,
        limit: AdaptiveLimit,
        follow_up: FollowUp | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self._source = source
        self._state = state
        self._report = report
        self._mode = mode
        self._clock = clock
        self._budget = budget
        self._calls = calls
        self._limit = limit
        self._follow_up = follow_up  # SWEEP-15: queued batches followed up
        self._progress = progress
        self._shared = SweepShared(
            state, report, mode, budget, source, clock, follow_up, send=self._extract
        )
        self._done = 0  # sessions done: swept, or passed over for a bad id
        self._total = 0  # sessions listed
        self._batches: dict[str, int] = {}  # the windows in flight: batches each has sent

    async def sweep(self) -> None:
        """Offer every session's window, up to the limit at once; fill the report as it goes.

        A source that cannot list its sessions ends the sweep (``source_failed``); a session
        id that is no text is passed over and named in the report (SWEEP-12), and one listed
        twice is swept once. The first window that ends the sweep (SWEEP-10) names why; the
        others still in flight are cancelled (``sweep_windows``). In queued mode the batches
        still in Loom's queue are asked about once first, before any window starts (SWEEP-15).
        """
        report = self._report
        if self._follow_up is not None:  # SWEEP-15: what Loom wrote of the queued batches
            ended = await self._follow_up.at_sweep_start(report)
            if ended is not None:
                report.stopped = ended
                return
        try:
            sessions = self._source.sessions()  # new ones started, the host noted (MIG-2)
        except SourceFailed as failure:
            log.warning("transcripts: sessions cannot be listed: %s", failure.kind)
            report.note_error("", failure.kind)
            fault = file_fault(failure.cause, self._source.location)
            if fault is not None:  # REL-2: a file that cannot be read, named with its cause
                report.note_fault(fault, STOPPED_SOURCE)
                return
            report.stopped = STOPPED_SOURCE
            report.reason = f"the transcripts cannot list their sessions ({failure.kind})"
            return
        report.sessions_seen = self._total = len(sessions)
        due: dict[str, None] = {}
        for listed in sessions:
            session_id = check_session_id(listed)
            if session_id is None:
                report.note_error(shown_session_id(listed), BAD_SESSION_ID_KIND)
                report.windows_stopped += 1
            if session_id is None or session_id in due:
                self._done += 1
            else:
                due[session_id] = None
        report.sessions_swept = self._done
        swept = await sweep_windows(due, self._window, self._limit, on_done=self._window_done)
        if swept.ended is not None:
            report.stopped = swept.ended

    async def _window(self, session_id: str) -> WindowResult:
        """One session's window, and what it tells the limit (``CallTally.verdict``).

        However it ends — cancelled too — a host source is told where the watermark stands
        (NERVE-3): a cancelled window has kept every batch Loom answered for.
        """
        tally = self._calls.start(session_id)
        self._batches[session_id] = 0
        try:
            ended = await SessionWindow(self._shared, session_id).run()
        finally:
            self._calls.finish(session_id)
            del self._batches[session_id]
            self._source.tell_host(session_id)  # NERVE-3
        return WindowResult(ended, tally.verdict)

    def _window_done(self, session_id: str, result: WindowResult) -> None:
        """A window ended: counted as swept unless it ended the sweep, and told."""
        if result.ended is None:
            self._done += 1
            self._report.sessions_swept = self._done
            self._tell()

    def _tell(self, session_id: str | None = None, *, waiting: bool = False) -> None:
        """Hand the caller's progress callback where the sweep is (``SweepProgress``)."""
        if self._progress is None:
            return
        batch = self._batches.get(session_id, 0) if session_id is not None else 0
        counts = (self._done, self._total, self._report.messages_taken, self._budget.current)
        self._progress(SweepProgress(*counts, session_id, batch, waiting, len(self._batches)))

    async def _extract(self, batch: Batch, session_id: str) -> Extracted:
        """One extraction call, a window's ``send``; no answer past the deadline and its guard
        is ``NoAnswer``.

        The progress callback hears that the batch went out (``waiting``) and that it came
        back, whatever the outcome — also when the window is cancelled meanwhile.
        """
        limit_s = EXTRACT_DEADLINE_S + EXTRACT_GUARD_S
        self._batches[session_id] = self._batches.get(session_id, 0) + 1
        self._tell(session_id, waiting=True)
        try:
            async with asyncio.timeout(limit_s):
                return await self._calls.extract(
                    batch.messages,
                    context=batch.context,
                    session_id=session_id,
                    defer=self._defers(session_id),
                )
        except TimeoutError:
            raise NoAnswer(f"no answer within {limit_s} s", deadline_s=limit_s) from None
        finally:
            self._tell(session_id)

    def _defers(self, session_id: str) -> bool:
        """Whether the session's next batch is queued: queued mode, unless its window fell
        back to waiting mode after Loom failed a batch twice (SWEEP-15)."""
        follow_up = self._follow_up
        return self._mode.defer and not (follow_up is not None and follow_up.waits(session_id))
